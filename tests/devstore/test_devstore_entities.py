"""Loopback tests: tables and entities over JSON (CRUD, ETags, upserts, types, limits, errors)."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest

from devstore_helpers import FULL, MINIMAL, NOMETA, Client, key_path

pytestmark = pytest.mark.integration

ETAG_RE = re.compile(r"W/\"datetime'\d{4}-\d\d-\d\dT\d\d%3A\d\d%3A\d\d(\.\d{0,6}[1-9])?Z'\"\Z")


def error_code(resp: Any) -> str:
    body = resp.json()
    return str(body["odata.error"]["code"])


def error_message(resp: Any) -> str:
    return str(resp.json()["odata.error"]["message"]["value"])


# ----------------------------------------------------------------- tables

def test_create_list_delete_table(client: Client) -> None:
    name = "tbl" + uuid.uuid4().hex[:10]
    resp = client.create_table(name)
    assert resp.status_code == 201
    assert resp.json() == {"odata.metadata": f"{client.store.url}/$metadata#Tables/@Element", "TableName": name}
    assert resp.headers["x-ms-version"] == "2019-02-02"
    assert resp.headers["x-ms-request-id"]
    assert resp.headers["Date"].endswith("GMT")

    again = client.create_table(name.upper())  # names are case-insensitive
    assert again.status_code == 409
    assert error_code(again) == "TableAlreadyExists"
    assert again.headers["x-ms-error-code"] == "TableAlreadyExists"

    listed = client.request("GET", "Tables", params={"$filter": f"TableName eq '{name}'"})
    assert listed.status_code == 200
    assert [t["TableName"] for t in listed.json()["value"]] == [name]

    assert client.request("DELETE", f"Tables('{name}')").status_code == 204
    missing = client.request("DELETE", f"Tables('{name}')")
    assert missing.status_code == 404 and error_code(missing) == "ResourceNotFound"


def test_create_table_no_content(client: Client) -> None:
    name = "nc" + uuid.uuid4().hex[:10]
    resp = client.create_table(name, headers={"Prefer": "return-no-content"})
    assert resp.status_code == 204 and resp.content == b""
    assert resp.headers["Preference-Applied"] == "return-no-content"


@pytest.mark.parametrize("name", ["ab", "1abc", "a-bc", "tables", "a" * 64])
def test_create_table_bad_names(client: Client, name: str) -> None:
    resp = client.create_table(name)
    assert resp.status_code == 400
    assert error_code(resp) in ("InvalidResourceName", "OutOfRangeInput")
    assert resp.headers["x-ms-error-code"] == error_code(resp)


def test_table_names_case_insensitive_for_entities(client: Client) -> None:
    name = "Mixed" + uuid.uuid4().hex[:8]
    assert client.create_table(name).status_code == 201
    assert client.insert(name.lower(), {"PartitionKey": "p", "RowKey": "r"}).status_code == 201
    assert client.get(name.upper(), "p", "r").status_code == 200
    listed = client.request("GET", "Tables", params={"$filter": f"TableName eq '{name}'"}).json()["value"]
    assert listed == [{"TableName": name}]  # the name keeps the case it was created with


def test_query_tables_paging(client: Client) -> None:
    prefix = "pg" + uuid.uuid4().hex[:6]
    names = sorted(f"{prefix}{i}" for i in range(7))
    for n in names:
        assert client.create_table(n).status_code == 201
    flt = f"TableName ge '{prefix}' and TableName lt '{prefix}~'"
    seen: list[str] = []
    params = {"$filter": flt, "$top": "3"}
    pages = []
    while True:
        resp = client.request("GET", "Tables", params=params)
        page = [t["TableName"] for t in resp.json()["value"]]
        pages.append(len(page))
        seen += page
        token = resp.headers.get("x-ms-continuation-NextTableName")
        if token is None:
            break
        params["NextTableName"] = token
    assert seen == names and pages == [3, 3, 1]


def test_query_tables_metadata_levels(client: Client, table: str) -> None:
    flt = {"$filter": f"TableName eq '{table}'"}
    full = client.request("GET", "Tables", params=flt, accept=FULL).json()["value"][0]
    assert full["odata.type"] == "devstoreaccount1.Tables"
    assert full["odata.id"].endswith(f"Tables('{table}')")
    assert full["odata.editLink"] == f"Tables('{table}')"
    assert client.request("GET", "Tables", params=flt, accept=NOMETA).json() == {"value": [{"TableName": table}]}


def test_entity_ops_on_missing_table(client: Client) -> None:
    for resp in (
        client.insert("nosuchtable", {"PartitionKey": "p", "RowKey": "r"}),
        client.get("nosuchtable", "p", "r"),
        client.query("nosuchtable"),
        client.request("DELETE", key_path("nosuchtable", "p", "r"), headers={"If-Match": "*"}),
    ):
        assert resp.status_code == 404 and error_code(resp) == "TableNotFound"


# ----------------------------------------------------------------- insert / get

ALL_TYPES: dict[str, Any] = {
    "S": "héllo 中 😀", "Empty": "", "I": -2147483648, "IMax": 2147483647,
    "L": "-9223372036854775808", "L@odata.type": "Edm.Int64",
    "D": 0.1, "Whole": 1.0, "Whole@odata.type": "Edm.Double",
    "Nan": "NaN", "Nan@odata.type": "Edm.Double", "Inf": "-Infinity", "Inf@odata.type": "Edm.Double",
    "B": True, "T": "2024-01-02T03:04:05.1234567Z", "T@odata.type": "Edm.DateTime",
    "TMin": "1601-01-01T00:00:00Z", "TMin@odata.type": "Edm.DateTime",
    "G": "1b4e28ba-2fa1-11d2-883f-0016d3cca427", "G@odata.type": "Edm.Guid",
    "X": "AAEC/w==", "X@odata.type": "Edm.Binary",
}


def test_insert_and_get_every_type(client: Client, table: str) -> None:
    resp = client.insert(table, {"PartitionKey": "p", "RowKey": "r", **ALL_TYPES})
    assert resp.status_code == 201
    assert "Preference-Applied" not in resp.headers  # no Prefer was sent
    etag = resp.headers["ETag"]
    assert ETAG_RE.match(etag)
    body = resp.json()
    assert body["odata.etag"] == etag
    assert body["odata.metadata"] == f"{client.store.url}/$metadata#{table}/@Element"
    assert resp.headers["Location"] == f"{client.store.url}/{key_path(table, 'p', 'r')}"

    got = client.get(table, "p", "r")
    assert got.status_code == 200 and got.headers["ETag"] == etag
    entity = got.json()
    for name, value in ALL_TYPES.items():
        if name == "Whole@odata.type":
            continue
        if name in ("D", "Whole"):
            assert entity[name] == value and isinstance(entity[name], float)
        else:
            assert entity[name] == value, name
    assert "Whole@odata.type" not in entity  # finite doubles keep their decimal point instead
    # as the service writes it: at most 7 fraction digits, trailing zeros trimmed
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{0,6}[1-9])?Z", entity["Timestamp"])
    assert '"Whole":1.0' in got.text


def test_metadata_levels_on_get(client: Client, table: str) -> None:
    client.insert(table, {"PartitionKey": "p", "RowKey": "r", **ALL_TYPES})
    none = client.get(table, "p", "r", accept=NOMETA).json()
    assert not any(k.startswith("odata.") or "@" in k for k in none)
    assert none["L"] == "-9223372036854775808"
    full = client.get(table, "p", "r", accept=FULL).json()
    assert full["odata.type"] == f"devstoreaccount1.{table}"
    assert full["odata.editLink"] == key_path(table, "p", "r")
    assert full["Timestamp@odata.type"] == "Edm.DateTime"
    assert full["L@odata.type"] == "Edm.Int64" and full["X@odata.type"] == "Edm.Binary"
    minimal = client.get(table, "p", "r", accept=MINIMAL).json()
    assert "Timestamp@odata.type" not in minimal and minimal["G@odata.type"] == "Edm.Guid"
    assert "S@odata.type" not in minimal and "I@odata.type" not in minimal and "B@odata.type" not in minimal
    fmt_param = client.get(table, "p", "r", accept=MINIMAL, params={"$format": NOMETA}).json()
    assert "odata.metadata" not in fmt_param


def test_insert_prefer_no_content(client: Client, table: str) -> None:
    resp = client.insert(table, {"PartitionKey": "p", "RowKey": "r"}, headers={"Prefer": "return-no-content"})
    assert resp.status_code == 204 and resp.content == b""
    assert resp.headers["Preference-Applied"] == "return-no-content"
    assert ETAG_RE.match(resp.headers["ETag"])
    assert resp.headers["DataServiceId"].endswith(key_path(table, "p", "r"))
    explicit = client.insert(table, {"PartitionKey": "p", "RowKey": "r2"}, headers={"Prefer": "return-content"})
    assert explicit.status_code == 201 and explicit.headers["Preference-Applied"] == "return-content"


def test_insert_duplicate(client: Client, table: str) -> None:
    assert client.insert(table, {"PartitionKey": "p", "RowKey": "r"}).status_code == 201
    dup = client.insert(table, {"PartitionKey": "p", "RowKey": "r", "X": 1})
    assert dup.status_code == 409 and error_code(dup) == "EntityAlreadyExists"
    message = error_message(dup)
    assert message.startswith("The specified entity already exists.\nRequestId:")
    assert "\nTime:" in message


def test_get_missing_entity(client: Client, table: str) -> None:
    resp = client.get(table, "p", "nope")
    assert resp.status_code == 404 and error_code(resp) == "ResourceNotFound"


def test_nulls_are_not_stored(client: Client, table: str) -> None:
    client.insert(table, {"PartitionKey": "p", "RowKey": "r", "N": None, "A": 1})
    entity = client.get(table, "p", "r").json()
    assert "N" not in entity and entity["A"] == 1


def test_client_timestamp_ignored(client: Client, table: str) -> None:
    client.insert(table, {"PartitionKey": "p", "RowKey": "r", "Timestamp": "2000-01-01T00:00:00Z"})
    assert client.get(table, "p", "r").json()["Timestamp"] > "2020"


def test_select_on_get(client: Client, table: str) -> None:
    client.insert(table, {"PartitionKey": "p", "RowKey": "r", "A": 1, "B": 2})
    resp = client.get(table, "p", "r", params={"$select": "A,Missing"})
    body = resp.json()
    assert body["A"] == 1 and "B" not in body and "Missing" not in body and "PartitionKey" not in body
    assert "odata.etag" in body


@pytest.mark.parametrize(
    "pk, rk",
    [("o'neil", "a''b"), ("100%", "a%20b"), ("a b", "a+b"), ("a&b", "a(b)"), ("a,b", "a=b"), ("a:b", "*"),
     ("..", " a"), ("é中😀", ""), ("", "empty pk"), ("'", "''")],
)
def test_special_keys_round_trip(client: Client, table: str, pk: str, rk: str) -> None:
    assert client.insert(table, {"PartitionKey": pk, "RowKey": rk, "V": 1}).status_code == 201
    got = client.get(table, pk, rk)
    assert got.status_code == 200, got.text
    assert (got.json()["PartitionKey"], got.json()["RowKey"]) == (pk, rk)
    lit = pk.replace("'", "''")
    found = client.query(table, {"$filter": f"PartitionKey eq '{lit}'"}).json()["value"]
    assert [(e["PartitionKey"], e["RowKey"]) for e in found] == [(pk, rk)]
    merged = client.request("MERGE", key_path(table, pk, rk), json_body={"W": 2}, headers={"If-Match": "*"})
    assert merged.status_code == 204
    assert client.request("DELETE", key_path(table, pk, rk), headers={"If-Match": "*"}).status_code == 204


@pytest.mark.parametrize("bad", ["a/b", "a\\b", "a#b", "a?b", "a\tb"])
def test_forbidden_key_characters(client: Client, table: str, bad: str) -> None:
    resp = client.insert(table, {"PartitionKey": "p", "RowKey": bad})
    assert resp.status_code == 400 and error_code(resp) == "OutOfRangeInput"


def test_key_limits(client: Client, table: str) -> None:
    assert client.insert(table, {"PartitionKey": "p", "RowKey": "k" * 512}).status_code == 201
    for n in (513, 1024, 1025):
        resp = client.insert(table, {"PartitionKey": "p", "RowKey": "k" * n})
        assert resp.status_code == 400 and error_code(resp) == "KeyValueTooLarge"


def test_missing_keys(client: Client, table: str) -> None:
    resp = client.insert(table, {"PartitionKey": "p"})
    assert resp.status_code == 400 and error_code(resp) == "PropertiesNeedValue"
    numeric = client.insert(table, {"PartitionKey": "p", "RowKey": 5})
    assert numeric.status_code == 400 and error_code(numeric) == "InvalidInput"


# ----------------------------------------------------------------- limits over the wire

def test_property_and_entity_limits(client: Client, table: str) -> None:
    big = client.insert(table, {"PartitionKey": "p", "RowKey": "s", "S": "x" * 32769})
    assert big.status_code == 400 and error_code(big) == "PropertyValueTooLarge"
    ok = client.insert(table, {"PartitionKey": "p", "RowKey": "ok", "S": "x" * 32768})
    assert ok.status_code == 201
    many = {f"P{i}": i for i in range(253)}
    resp = client.insert(table, {"PartitionKey": "p", "RowKey": "many", **many})
    assert resp.status_code == 400 and error_code(resp) == "TooManyProperties"
    del many["P252"]
    assert client.insert(table, {"PartitionKey": "p", "RowKey": "max", **many}).status_code == 201
    huge = {f"S{i}": "y" * 30000 for i in range(20)}  # 1.2 MB as UTF-16
    resp = client.insert(table, {"PartitionKey": "p", "RowKey": "huge", **huge})
    assert resp.status_code == 400 and error_code(resp) == "EntityTooLarge"
    assert "1MB" in error_message(resp)


def test_merge_that_grows_past_1mb(client: Client, table: str) -> None:
    half = {f"A{i}": "y" * 30000 for i in range(10)}
    assert client.insert(table, {"PartitionKey": "p", "RowKey": "r", **half}).status_code == 201
    more = {f"B{i}": "y" * 30000 for i in range(10)}
    resp = client.request("MERGE", key_path(table, "p", "r"), json_body=more, headers={"If-Match": "*"})
    assert resp.status_code == 400 and error_code(resp) == "EntityTooLarge"


def test_request_body_too_large(client: Client, table: str) -> None:
    body = json.dumps({"PartitionKey": "p", "RowKey": "r", "S": "x" * (4 * 1024 * 1024)})
    resp = client.request("POST", table, data=body, headers={"Content-Type": "application/json"})
    assert resp.status_code == 413 and error_code(resp) == "RequestBodyTooLarge"
    assert client.get(table, "p", "r").status_code == 404  # and the connection still works


@pytest.mark.parametrize(
    "body, code",
    [
        ('{"PartitionKey":"p","RowKey":"r","A":1,"A":2}', "DuplicatePropertiesSpecified"),
        ('{"PartitionKey":"p","RowKey":"r","1bad":1}', "PropertyNameInvalid"),
        ('{"PartitionKey":"p","RowKey":"r","L":5,"L@odata.type":"Edm.Int64"}', "InvalidInput"),
        ('{"PartitionKey":"p","RowKey":"r","G":"xyz","G@odata.type":"Edm.Guid"}', "InvalidInput"),
        ('{"PartitionKey":"p","RowKey":"r","T":"1600-01-01T00:00:00Z","T@odata.type":"Edm.DateTime"}',
         "InvalidInput"),
        ('{"PartitionKey":"p","RowKey":"r","F":1,"F@odata.type":"Edm.Foo"}', "InvalidInput"),
        ('{"PartitionKey":"p","RowKey":"r","I":4294967296}', "InvalidInput"),
        ('{"PartitionKey":"p","RowKey":"r","O":{"x":1}}', "InvalidInput"),
        ("not json", "InvalidInput"),
    ],
)
def test_invalid_bodies(client: Client, table: str, body: str, code: str) -> None:
    resp = client.request("POST", table, data=body, headers={"Content-Type": "application/json"})
    assert resp.status_code == 400, resp.text
    assert error_code(resp) == code


def test_missing_content_type(client: Client, table: str) -> None:
    resp = client.request("POST", table, data=b'{"PartitionKey":"p","RowKey":"r"}')
    assert resp.status_code == 400 and error_code(resp) == "MissingRequiredHeader"


# ----------------------------------------------------------------- update, merge, delete and ETags

def test_update_with_etag(client: Client, table: str) -> None:
    etag1 = client.insert(table, {"PartitionKey": "p", "RowKey": "r", "A": 1, "B": 1}).headers["ETag"]
    resp = client.request("PUT", key_path(table, "p", "r"), json_body={"A": 2}, headers={"If-Match": etag1})
    assert resp.status_code == 204 and resp.content == b""
    etag2 = resp.headers["ETag"]
    assert ETAG_RE.match(etag2) and etag2 != etag1
    entity = client.get(table, "p", "r").json()
    assert entity["A"] == 2 and "B" not in entity  # replace drops missing properties
    stale = client.request("PUT", key_path(table, "p", "r"), json_body={"A": 3}, headers={"If-Match": etag1})
    assert stale.status_code == 412 and error_code(stale) == "UpdateConditionNotSatisfied"
    star = client.request("PUT", key_path(table, "p", "r"), json_body={"A": 4}, headers={"If-Match": "*"})
    assert star.status_code == 204


def test_every_write_gets_a_new_etag(client: Client, table: str) -> None:
    etags = {client.insert(table, {"PartitionKey": "p", "RowKey": "r"}).headers["ETag"]}
    for i in range(20):
        resp = client.request("MERGE", key_path(table, "p", "r"), json_body={"N": i}, headers={"If-Match": "*"})
        etags.add(resp.headers["ETag"])
    assert len(etags) == 21


@pytest.mark.parametrize("how", ["MERGE", "PATCH", "POST+X-HTTP-Method"])
def test_merge_verbs(client: Client, table: str, how: str) -> None:
    etag = client.insert(table, {"PartitionKey": "p", "RowKey": "r", "A": 1, "B": 1}).headers["ETag"]
    headers = {"If-Match": etag}
    method = how
    if how.startswith("POST"):
        method = "POST"
        headers["X-HTTP-Method"] = "MERGE"
    resp = client.request(method, key_path(table, "p", "r"), json_body={"B": 2, "C": "new"}, headers=headers)
    assert resp.status_code == 204, resp.text
    entity = client.get(table, "p", "r").json()
    assert (entity["A"], entity["B"], entity["C"]) == (1, 2, "new")
    stale = client.request(method, key_path(table, "p", "r"), json_body={"B": 3}, headers=headers)
    assert stale.status_code == 412


def test_merge_can_change_a_property_type(client: Client, table: str) -> None:
    client.insert(table, {"PartitionKey": "p", "RowKey": "r", "A": 1})
    client.request("MERGE", key_path(table, "p", "r"), json_body={"A": "one"}, headers={"If-Match": "*"})
    assert client.get(table, "p", "r").json()["A"] == "one"


def test_x_http_method_rules(client: Client, table: str) -> None:
    path = key_path(table, "p", "r")
    resp = client.request("PUT", path, json_body={}, headers={"X-HTTP-Method": "MERGE"})
    assert resp.status_code == 400 and error_code(resp) == "XMethodNotUsingPost"
    resp = client.request("POST", path, json_body={}, headers={"X-HTTP-Method": "FROB"})
    assert resp.status_code == 400 and error_code(resp) == "XMethodIncorrectValue"


def test_conditional_ops_on_missing_entity(client: Client, table: str) -> None:
    path = key_path(table, "p", "missing")
    for method in ("PUT", "MERGE"):
        resp = client.request(method, path, json_body={"A": 1}, headers={"If-Match": "*"})
        assert resp.status_code == 404 and error_code(resp) == "ResourceNotFound"
    resp = client.request("DELETE", path, headers={"If-Match": "*"})
    assert resp.status_code == 404 and error_code(resp) == "ResourceNotFound"


def test_delete_with_etag(client: Client, table: str) -> None:
    etag = client.insert(table, {"PartitionKey": "p", "RowKey": "r"}).headers["ETag"]
    client.request("MERGE", key_path(table, "p", "r"), json_body={"A": 1}, headers={"If-Match": "*"})
    stale = client.request("DELETE", key_path(table, "p", "r"), headers={"If-Match": etag})
    assert stale.status_code == 412
    current = client.get(table, "p", "r").headers["ETag"]
    assert client.request("DELETE", key_path(table, "p", "r"), headers={"If-Match": current}).status_code == 204
    assert client.get(table, "p", "r").status_code == 404


def test_delete_requires_if_match(client: Client, table: str) -> None:
    client.insert(table, {"PartitionKey": "p", "RowKey": "r"})
    resp = client.request("DELETE", key_path(table, "p", "r"))
    assert resp.status_code == 400 and error_code(resp) == "MissingRequiredHeader"


def test_malformed_if_match(client: Client, table: str) -> None:
    client.insert(table, {"PartitionKey": "p", "RowKey": "r"})
    resp = client.request("PUT", key_path(table, "p", "r"), json_body={}, headers={"If-Match": "garbage"})
    assert resp.status_code == 400 and error_code(resp) == "InvalidInput"
    assert "garbage" in error_message(resp)


def test_etag_with_decoded_colons_is_accepted(client: Client, table: str) -> None:
    etag = client.insert(table, {"PartitionKey": "p", "RowKey": "r"}).headers["ETag"]
    decoded = etag.replace("%3A", ":")
    resp = client.request("PUT", key_path(table, "p", "r"), json_body={}, headers={"If-Match": decoded})
    assert resp.status_code == 204


def test_upserts(client: Client, table: str) -> None:
    path = key_path(table, "p", "r")
    assert client.request("PUT", path, json_body={"A": 1, "B": 1}).status_code == 204  # insert-or-replace: new
    assert client.get(table, "p", "r").json()["A"] == 1
    assert client.request("PUT", path, json_body={"A": 2}).status_code == 204  # replace existing
    assert "B" not in client.get(table, "p", "r").json()
    assert client.request("MERGE", path, json_body={"C": 3}).status_code == 204  # insert-or-merge: merge
    entity = client.get(table, "p", "r").json()
    assert (entity["A"], entity["C"]) == (2, 3)
    path2 = key_path(table, "p", "r2")
    assert client.request("MERGE", path2, json_body={"Z": 1}).status_code == 204  # insert-or-merge: new
    assert client.get(table, "p", "r2").json()["Z"] == 1


def test_body_keys_must_match_url(client: Client, table: str) -> None:
    resp = client.request("PUT", key_path(table, "p", "r"), json_body={"PartitionKey": "other", "RowKey": "r"})
    assert resp.status_code == 400 and error_code(resp) == "InvalidInput"
    same = client.request("PUT", key_path(table, "p", "r"), json_body={"PartitionKey": "p", "RowKey": "r"})
    assert same.status_code == 204


def test_method_not_allowed(client: Client, table: str) -> None:
    assert client.request("PUT", table, json_body={}).status_code == 405
    assert client.request("POST", key_path(table, "p", "r"), json_body={}).status_code == 405
    assert client.request("PUT", "Tables", json_body={}).status_code == 405


def test_unknown_resources(client: Client) -> None:
    resp = client.request("GET", "a/b/c")  # an operation on table "a", whose name is too short
    assert resp.status_code == 400 and error_code(resp) == "OutOfRangeInput"
    resp = client.request("GET", "", params={"comp": "list"})
    assert resp.status_code == 400 and error_code(resp) == "InvalidUri"
    acl = client.request("GET", "sometable", params={"comp": "acl"})
    assert acl.status_code == 404 and error_code(acl) == "TableNotFound"
    other = client.request("GET", "sometable", params={"comp": "metadata"})
    assert other.status_code == 400 and error_code(other) == "InvalidQueryParameterValue"


def test_service_properties(client: Client) -> None:
    resp = client.request("GET", "", params={"restype": "service", "comp": "properties"}, accept=None)
    assert resp.status_code == 200 and b"<StorageServiceProperties>" in resp.content


def test_headers_echoed(client: Client, table: str) -> None:
    resp = client.get(table, "p", "r", headers={"x-ms-client-request-id": "my-id-1"})
    assert resp.headers["x-ms-client-request-id"] == "my-id-1"
    assert len(resp.headers["x-ms-request-id"]) == 36
    assert resp.headers["x-ms-error-code"] == "ResourceNotFound"


# ----------------------------------------------------------------- production URL-path behaviours

def test_url_segment_over_260_characters(client: Client, table: str) -> None:
    from devstore_helpers import build_batch, parse_batch_response

    pk, rk = "p" * 200, "r" * 100  # fine as keys, too long for one URL path segment
    assert client.insert(table, {"PartitionKey": pk, "RowKey": rk, "V": 1}).status_code == 201
    resp = client.get(table, pk, rk)
    assert resp.status_code == 400
    assert resp.headers["Content-Type"].startswith("text/html")
    assert b"The request URL is invalid." in resp.content
    # the seed's workarounds: a $filter query, or the URL inside a batch body
    found = client.query(table, {"$filter": f"PartitionKey eq '{pk}' and RowKey eq '{rk}'"}).json()["value"]
    assert [e["V"] for e in found] == [1]
    ctype, body = build_batch(client.store.url, [("GET", key_path(table, pk, rk), None, {})], changeset=False)
    parts = parse_batch_response(client.request("POST", "$batch", data=body, headers={"Content-Type": ctype}))
    assert parts[0][0] == 200
    ctype, body = build_batch(client.store.url, [("DELETE", key_path(table, pk, rk), None, {"If-Match": "*"})])
    parts = parse_batch_response(client.request("POST", "$batch", data=body, headers={"Content-Type": ctype}))
    assert parts[0][0] == 204


def test_url_segment_limit_can_be_disabled() -> None:
    from tablesdk.devstore import DevStore

    with DevStore(port=0, max_url_segment=None) as store:
        c = Client(store)
        c.create_table("longkeys")
        pk = "p" * 400
        c.insert("longkeys", {"PartitionKey": pk, "RowKey": "r"})
        assert c.get("longkeys", pk, "r").status_code == 200


def test_double_decoding_quirk() -> None:
    from devstore_helpers import build_batch, parse_batch_response
    from tablesdk.devstore import DevStore

    with DevStore(port=0, double_decode_keys=True) as store:
        c = Client(store)
        c.create_table("Metrics")
        assert c.insert("Metrics", {"PartitionKey": "Metric%25", "RowKey": "Count", "V": 1}).status_code == 201
        # the seed's example: the URL carries Metric%2525, the service reads "Metric%"
        assert c.get("Metrics", "Metric%25", "Count").status_code == 404
        upsert = c.request("PUT", key_path("Metrics", "Metric%25", "Count"), json_body={"V": 2})
        assert upsert.status_code == 204  # ... and an upsert lands on the wrong key
        keys = sorted(e["PartitionKey"] for e in c.query("Metrics").json()["value"])
        assert keys == ["Metric%", "Metric%25"]
        # workarounds are unaffected: $filter and batch
        flt = c.query("Metrics", {"$filter": "PartitionKey eq 'Metric%25' and RowKey eq 'Count'"})
        assert [e["V"] for e in flt.json()["value"]] == [1]
        ctype, body = build_batch(store.url, [("GET", key_path("Metrics", "Metric%25", "Count"), None, {})],
                                  changeset=False)
        parts = parse_batch_response(c.request("POST", "$batch", data=body, headers={"Content-Type": ctype}))
        assert parts[0][0] == 200 and json.loads(parts[0][2])["V"] == 1
    with DevStore(port=0) as store:  # off by default: single decoding, as it should be
        c = Client(store)
        c.create_table("Metrics")
        c.insert("Metrics", {"PartitionKey": "Metric%25", "RowKey": "Count"})
        assert c.get("Metrics", "Metric%25", "Count").status_code == 200


def test_if_none_match_refused_on_writes(client: Client, table: str) -> None:
    client.insert(table, {"PartitionKey": "p", "RowKey": "r"})
    path = key_path(table, "p", "r")
    for method, headers in (("PUT", {"If-None-Match": "*"}), ("DELETE", {"If-None-Match": "*"}),
                            ("MERGE", {"If-None-Match": "*", "If-Match": "*"})):
        resp = client.request(method, path, json_body={} if method != "DELETE" else None, headers=headers)
        assert resp.status_code == 400 and error_code(resp) == "InvalidInput"
        assert "If-None-Match" in error_message(resp)
