"""No client input makes the emulator answer 500: each hostile input gets 400 with the service's code.

The client retries every 500 (a minute or more for one call), so an input the
service refuses must be refused with the same 400 here. ``$filter`` keeps the
service's limit of 15 comparisons.
"""

from __future__ import annotations

import pytest

from devstore_helpers import Client, build_batch

PK = "p"


def deep(depth: int) -> str:
    return "(" * depth + "PartitionKey eq 'a'" + ")" * depth


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"$filter": deep(1000)}, "InvalidInput"),
        ({"$filter": "not " * 2000 + "(PartitionKey eq 'a')"}, "InvalidInput"),
        ({"$filter": " and ".join(["a eq 1"] * 3000)}, "InvalidInput"),
        ({"$filter": " and ".join(["PartitionKey eq 'a'"] * 16)}, "InvalidInput"),
        ({"$filter": "X eq " + "9" * 5000}, "InvalidInput"),
        ({"$filter": "X eq " + "9" * 5000 + "L"}, "InvalidInput"),
        ({"$filter": "X eq " + "9" * 5000 + ".5"}, "InvalidInput"),
        ({"$filter": "X eq datetime'0001-01-01T00:00:00+05:00'"}, "InvalidInput"),
        ({"$filter": "X eq datetime'9999-12-31T23:00:00-05:00'"}, "InvalidInput"),
        ({"$top": "\u00b2"}, "InvalidQueryParameterValue"),
        ({"$top": "\u0661"}, "InvalidQueryParameterValue"),
        ({"NextPartitionKey": "1!\u00b2!a"}, "InvalidInput"),
        ({"NextPartitionKey": "1!99999999999999999999!a"}, "InvalidInput"),
        ({"NextRowKey": "1!\u00b2!a", "NextPartitionKey": "1!4!YQ--"}, "InvalidInput"),
    ],
    ids=["nested-1000", "not-2000", "and-3000", "16-comparisons", "5000-digits", "5000-digits-L",
         "5000-digit-double", "datetime-offset-below-year-1", "datetime-offset-past-9999", "top-superscript", "top-arabic-digit", "token-superscript", "token-huge-length",
         "rowkey-token-superscript"],
)
def test_hostile_query_inputs_get_400(client: Client, table: str, params: dict[str, str], code: str) -> None:
    resp = client.query(table, params)
    assert resp.status_code == 400, (resp.status_code, resp.text[:300])
    assert code in resp.text


def test_fifteen_comparisons_are_fine(client: Client, table: str) -> None:
    resp = client.query(table, {"$filter": " and ".join(["PartitionKey eq 'a'"] * 15)})
    assert resp.status_code == 200, resp.text


def test_deeply_nested_json_body_gets_400(client: Client, table: str) -> None:
    body = '{"PartitionKey":"p","RowKey":"r","X":' + "[" * 100_000 + "]" * 100_000 + "}"
    resp = client.request("POST", table, data=body, headers={"Content-Type": "application/json"})
    assert resp.status_code == 400, (resp.status_code, resp.text[:300])


def test_deeply_nested_json_in_a_batch_is_refused(client: Client, table: str) -> None:
    nested = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    ctype, data = build_batch(client.store.url, [("POST", table, {"PartitionKey": "p", "RowKey": "r", "X": "DEEP"}, {})])
    assert b'"DEEP"' in data
    resp = client.request("POST", "$batch", data=data.replace(b'"DEEP"', nested), headers={"Content-Type": ctype})
    assert resp.status_code in (202, 400), resp.status_code
    assert b"InvalidInput" in resp.content and b"InternalError" not in resp.content


def test_json_body_with_huge_number_gets_400(client: Client, table: str) -> None:
    body = '{"PartitionKey":"p","RowKey":"r","X":' + "9" * 5000 + "}"
    resp = client.request("POST", table, data=body, headers={"Content-Type": "application/json"})
    assert resp.status_code == 400, (resp.status_code, resp.text[:300])
