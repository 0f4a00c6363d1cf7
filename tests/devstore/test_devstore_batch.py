"""Loopback tests: entity group transactions ($batch)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from devstore_helpers import Client, build_batch, key_path, parse_batch_response

pytestmark = pytest.mark.integration


def send(client: Client, ops: list[tuple[str, str, Any, dict[str, str]]], **kw: Any) -> Any:
    ctype, body = build_batch(client.store.url, ops, **{k: v for k, v in kw.items() if k in ("newline", "changeset")})
    headers = {"Content-Type": ctype}
    version = kw.get("version", "2019-02-02")
    return client.request("POST", "$batch", data=body, headers=headers, version=version)


def single_error(resp: Any) -> tuple[int, dict[str, str], dict[str, Any]]:
    assert resp.status_code == 202, resp.text
    parts = parse_batch_response(resp)
    assert len(parts) == 1, parts
    status, headers, body = parts[0]
    return status, headers, json.loads(body)["odata.error"]


def count(client: Client, table: str) -> int:
    return len(client.query(table).json()["value"])


def test_inserts_succeed_with_one_part_each(client: Client, table: str) -> None:
    ops = [("POST", table, {"PartitionKey": "p", "RowKey": f"r{i}", "N": i}, {}) for i in range(5)]
    resp = send(client, ops)
    assert resp.status_code == 202
    assert resp.headers["Content-Type"].startswith("multipart/mixed; boundary=batchresponse_")
    parts = parse_batch_response(resp)
    assert [p[0] for p in parts] == [201] * 5
    assert [p[1]["content-id"] for p in parts] == ["1", "2", "3", "4", "5"]
    assert all(p[1]["etag"].startswith('W/"datetime') for p in parts)
    assert json.loads(parts[2][2])["N"] == 2
    assert count(client, table) == 5


def test_hundred_mixed_operations(client: Client, table: str) -> None:
    for i in range(40):
        client.insert(table, {"PartitionKey": "p", "RowKey": f"old{i:02d}", "A": 1},
                      headers={"Prefer": "return-no-content"})
    ops: list[tuple[str, str, Any, dict[str, str]]] = []
    ops += [("POST", table, {"PartitionKey": "p", "RowKey": f"new{i:02d}"}, {"Prefer": "return-no-content"})
            for i in range(40)]
    ops += [("PUT", key_path(table, "p", f"old{i:02d}"), {"B": 2}, {"If-Match": "*"}) for i in range(10)]
    ops += [("MERGE", key_path(table, "p", f"old{i:02d}"), {"C": 3}, {"If-Match": "*"}) for i in range(10, 20)]
    ops += [("DELETE", key_path(table, "p", f"old{i:02d}"), None, {"If-Match": "*"}) for i in range(20, 30)]
    ops += [("PUT", key_path(table, "p", f"ups{i:02d}"), {"D": 4}, {}) for i in range(20)]
    ops += [("MERGE", key_path(table, "p", f"old{i:02d}"), {"E": 5}, {}) for i in range(30, 40)]
    assert len(ops) == 100
    resp = send(client, ops)
    parts = parse_batch_response(resp)
    assert len(parts) == 100
    assert [p[0] for p in parts] == [204] * 100
    assert [p[1]["content-id"] for p in parts] == [str(i) for i in range(1, 101)]
    assert count(client, table) == 90
    assert client.get(table, "p", "old00").json().get("A") is None  # replaced
    assert client.get(table, "p", "old15").json()["C"] == 3
    assert client.get(table, "p", "old35").json()["E"] == 5


def test_one_failure_rolls_back_everything(client: Client, table: str) -> None:
    client.insert(table, {"PartitionKey": "p", "RowKey": "exists"})
    ops = [
        ("POST", table, {"PartitionKey": "p", "RowKey": "f1"}, {}),
        ("POST", table, {"PartitionKey": "p", "RowKey": "exists"}, {}),
        ("POST", table, {"PartitionKey": "p", "RowKey": "f2"}, {}),
    ]
    status, headers, err = single_error(send(client, ops))
    assert status == 409 and headers["content-id"] == "2"
    assert err["code"] == "EntityAlreadyExists"
    assert err["message"]["value"].startswith("1:The specified entity already exists.")
    assert count(client, table) == 1


def test_the_first_failing_operation_is_reported(client: Client, table: str) -> None:
    # An insert that conflicts (found only when written) comes before an operation whose body is
    # refused when read: the service reports the first in order, and writes nothing.
    client.insert(table, {"PartitionKey": "p", "RowKey": "exists"})
    ops = [
        ("POST", table, {"PartitionKey": "p", "RowKey": "g1"}, {}),
        ("POST", table, {"PartitionKey": "p", "RowKey": "exists"}, {}),
        ("POST", table, {"PartitionKey": "p", "RowKey": "g2", "Bad": {"nested": 1}}, {}),
    ]
    status, headers, err = single_error(send(client, ops))
    assert status == 409 and headers["content-id"] == "2" and err["message"]["value"].startswith("1:")
    ops[1] = ("POST", table, {"PartitionKey": "p", "RowKey": "fresh"}, {})
    status, headers, err = single_error(send(client, ops))
    assert status == 400 and headers["content-id"] == "3" and err["message"]["value"].startswith("2:")
    assert count(client, table) == 1


def test_rollback_restores_updated_and_deleted_entities(client: Client, table: str) -> None:
    etag = client.insert(table, {"PartitionKey": "p", "RowKey": "a", "V": 1}).headers["ETag"]
    client.insert(table, {"PartitionKey": "p", "RowKey": "b", "V": 1})
    ops = [
        ("PUT", key_path(table, "p", "a"), {"V": 2}, {"If-Match": etag}),
        ("DELETE", key_path(table, "p", "b"), None, {"If-Match": "*"}),
        ("MERGE", key_path(table, "p", "a2"), {"V": 3}, {"If-Match": "*"}),  # missing: 404
    ]
    status, headers, err = single_error(send(client, ops))
    assert status == 404 and err["code"] == "ResourceNotFound" and err["message"]["value"].startswith("2:")
    a = client.get(table, "p", "a")
    assert a.json()["V"] == 1 and a.headers["ETag"] == etag
    assert client.get(table, "p", "b").status_code == 200


def test_stale_etag_in_batch(client: Client, table: str) -> None:
    etag = client.insert(table, {"PartitionKey": "p", "RowKey": "a"}).headers["ETag"]
    client.request("MERGE", key_path(table, "p", "a"), json_body={"X": 1}, headers={"If-Match": "*"})
    ops = [("POST", table, {"PartitionKey": "p", "RowKey": "n"}, {}),
           ("DELETE", key_path(table, "p", "a"), None, {"If-Match": etag})]
    status, _, err = single_error(send(client, ops))
    assert status == 412 and err["code"] == "UpdateConditionNotSatisfied"
    assert err["message"]["value"].startswith("1:")
    assert count(client, table) == 1


def test_cross_partition_refused(client: Client, table: str) -> None:
    ops = [("POST", table, {"PartitionKey": "a", "RowKey": "1"}, {}),
           ("POST", table, {"PartitionKey": "a", "RowKey": "2"}, {}),
           ("POST", table, {"PartitionKey": "b", "RowKey": "3"}, {})]
    status, headers, err = single_error(send(client, ops))
    assert status == 400 and err["code"] == "CommandsInBatchActOnDifferentPartitions"
    assert err["message"]["value"].startswith("2:") and headers["content-id"] == "3"
    assert count(client, table) == 0


def test_cross_table_refused(client: Client, table: str) -> None:
    other = table + "x"
    assert client.create_table(other).status_code == 201
    ops = [("POST", table, {"PartitionKey": "a", "RowKey": "1"}, {}),
           ("POST", other, {"PartitionKey": "a", "RowKey": "2"}, {})]
    status, _, err = single_error(send(client, ops))
    assert status == 400 and err["code"] == "CommandsInBatchActOnDifferentPartitions"
    assert count(client, table) == 0 and count(client, other) == 0


def test_duplicate_entity_refused(client: Client, table: str) -> None:
    ops = [("POST", table, {"PartitionKey": "p", "RowKey": "g"}, {}),
           ("PUT", key_path(table, "p", "g"), {"A": 1}, {})]
    status, _, err = single_error(send(client, ops))
    assert status == 400 and err["code"] == "InvalidDuplicateRow"
    assert err["message"]["value"].startswith(
        "1:A command with RowKey 'g' is already present in the batch. An entity can appear only once in a batch."
    )
    assert count(client, table) == 0


def test_101_operations_give_a_well_formed_refusal(client: Client, table: str) -> None:
    ops = [("POST", table, {"PartitionKey": "p", "RowKey": f"r{i:03d}"}, {}) for i in range(101)]
    resp = send(client, ops)
    status, headers, err = single_error(resp)  # parse_batch_response uses http.client: no BadStatusLine
    assert status == 400 and err["code"] == "InvalidInput"
    assert err["message"]["value"].startswith(
        "100:The batch request operation exceeds the maximum 100 changes per change set."
    )
    assert headers["content-id"] == "101"
    assert count(client, table) == 0


def test_entity_too_large_in_batch(client: Client, table: str) -> None:
    huge = {f"S{i}": "y" * 30000 for i in range(20)}
    ops = [("POST", table, {"PartitionKey": "p", "RowKey": "a", **huge}, {})]
    status, _, err = single_error(send(client, ops))
    assert status == 400 and err["code"] == "EntityTooLarge" and err["message"]["value"].startswith("0:")


def test_batch_over_4mib(client: Client, table: str) -> None:
    ops = [("POST", table, {"PartitionKey": "p", "RowKey": f"r{i}", "S": "x" * 25000, "T": "x" * 25000}, {})
           for i in range(100)]
    resp = send(client, ops)
    assert resp.status_code == 413
    assert resp.json()["odata.error"]["code"] == "RequestBodyTooLarge"
    assert count(client, table) == 0


def test_missing_table_in_batch(client: Client) -> None:
    ops = [("POST", "nosuchtable", {"PartitionKey": "p", "RowKey": "a"}, {})]
    status, _, err = single_error(send(client, ops))
    assert status == 404 and err["code"] == "TableNotFound" and err["message"]["value"].startswith("0:")


def test_lf_line_endings(client: Client, table: str) -> None:
    ops = [("POST", table, {"PartitionKey": "p", "RowKey": "lf"}, {})]
    resp = send(client, ops, newline="\n")
    assert [p[0] for p in parse_batch_response(resp)] == [201]


def test_content_id_echoed(client: Client, table: str) -> None:
    ops = [("POST", table, {"PartitionKey": "p", "RowKey": "a"}, {"Content-ID": "42"}),
           ("POST", table, {"PartitionKey": "p", "RowKey": "b"}, {"Content-ID": "43"})]
    parts = parse_batch_response(send(client, ops))
    assert [p[1]["content-id"] for p in parts] == ["42", "43"]


def test_relative_and_post_tunneled_operations(client: Client, table: str) -> None:
    client.insert(table, {"PartitionKey": "p", "RowKey": "a", "V": 1})
    ctype, body = build_batch(client.store.url, [
        ("POST", key_path(table, "p", "a"), {"V": 2}, {"X-HTTP-Method": "MERGE", "If-Match": "*"}),
    ])
    body = body.replace(f"{client.store.url}/".encode(), b"")  # relative URL
    resp = client.request("POST", "$batch", data=body, headers={"Content-Type": ctype})
    assert [p[0] for p in parse_batch_response(resp)] == [204]
    assert client.get(table, "p", "a").json()["V"] == 2


def test_query_in_batch(client: Client, table: str) -> None:
    client.insert(table, {"PartitionKey": "p", "RowKey": "a", "V": 7})
    resp = send(client, [("GET", key_path(table, "p", "a"), None, {})], changeset=False)
    (status, headers, body), = parse_batch_response(resp)
    assert status == 200 and json.loads(body)["V"] == 7 and headers["etag"].startswith("W/")
    flt = f"{table}()?$filter=PartitionKey%20eq%20'p'%20and%20RowKey%20eq%20'a'"
    resp = send(client, [("GET", flt, None, {})], changeset=False)
    (status, _, body), = parse_batch_response(resp)
    assert status == 200 and json.loads(body)["value"][0]["V"] == 7
    missing = send(client, [("GET", key_path(table, "p", "zz"), None, {})], changeset=False)
    assert parse_batch_response(missing)[0][0] == 404
    scan = send(client, [("GET", f"{table}()", None, {})], changeset=False)
    assert scan.status_code == 400


def test_malformed_batches(client: Client, table: str) -> None:
    ctype, body = build_batch(client.store.url, [("POST", table, {"PartitionKey": "p", "RowKey": "a"}, {})])
    assert client.request("POST", "$batch", data=body, headers={"Content-Type": "application/json"}).status_code == 400
    assert client.request("POST", "$batch", data=b"--x--", headers={"Content-Type": ctype}).status_code == 400
    empty_cs = (b"--b\r\nContent-Type: multipart/mixed; boundary=c\r\n\r\n--c--\r\n--b--\r\n")
    resp = client.request("POST", "$batch", data=empty_cs, headers={"Content-Type": "multipart/mixed; boundary=b"})
    assert resp.status_code == 400
    query_part = (b"--b\r\nContent-Type: application/http\r\n\r\nGET " + client.store.url.encode()
                  + b"/" + table.encode() + b"(PartitionKey='p',RowKey='a') HTTP/1.1\r\n\r\n\r\n")
    two_parts = query_part + query_part + b"--b--\r\n"
    resp = client.request("POST", "$batch", data=two_parts, headers={"Content-Type": "multipart/mixed; boundary=b"})
    assert resp.status_code == 400  # one change set or one query per batch
    assert client.request("GET", "$batch").status_code == 405


def test_batch_needs_a_version(client: Client, table: str) -> None:
    ctype, body = build_batch(client.store.url, [("POST", table, {"PartitionKey": "p", "RowKey": "a"}, {})])
    resp = client.request("POST", "$batch", data=body, headers={"Content-Type": ctype}, version=None,
                          accept=None)
    assert resp.status_code == 400


def test_get_inside_changeset_refused(client: Client, table: str) -> None:
    client.insert(table, {"PartitionKey": "p", "RowKey": "a"})
    status, _, err = single_error(send(client, [("GET", key_path(table, "p", "a"), None, {})]))
    assert status == 400 and err["code"] == "InvalidInput" and err["message"]["value"].startswith("0:")
