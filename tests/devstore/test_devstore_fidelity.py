"""The emulator answers as the service does where it used to differ (weak ETags, repeated query
parameters, CORS's Vary, cross-type numeric comparisons, batch operations addressed without the
account, and URLs with a table name in front of another resource).

Each expected answer is the service's, as documented or recorded (the recording named beside
each test), not Azurite's. Requests are built by hand with devstore_helpers' independent signer.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Iterator

import pytest
import requests
from lxml import etree

from devstore_helpers import JSON_VERSION, Client, build_batch, key_path, parse_batch_response
from tablesdk._core._auth import generate_table_sas
from tablesdk.devstore import DevStore
from tablesdk.devstore._service import DEVSTORE_ACCOUNT, DEVSTORE_KEY

pytestmark = pytest.mark.integration


def code_of(resp: requests.Response) -> str:
    return str(resp.headers.get("x-ms-error-code"))


def insert(client: Client, table: str, pk: str, rk: str, **props: object) -> str:
    resp = client.insert(table, {"PartitionKey": pk, "RowKey": rk, **props})
    assert resp.status_code == 201, resp.text
    return resp.headers["ETag"]


# ----------------------------------------------------------------- If-Match with a weak ETag

@pytest.mark.parametrize("etag", ['W/"wrong"', 'w/"wrong"', 'W/""', "w/\"datetime'2020-01-01T00%3A00%3A00Z'\""])
@pytest.mark.parametrize("method", ["PUT", "MERGE", "DELETE"])
def test_a_weak_etag_that_does_not_match_is_a_failed_precondition(
    client: Client, table: str, method: str, etag: str,
) -> None:
    """A weak ETag the service never gave is well-formed and does not match: 412 (Azurite #1229
    records the service's and the old storage emulator's answer)."""
    insert(client, table, "p", "r", A=1)
    body = None if method == "DELETE" else {"A": 2}
    resp = client.request(method, key_path(table, "p", "r"), json_body=body, headers={"If-Match": etag})
    assert resp.status_code == 412 and code_of(resp) == "UpdateConditionNotSatisfied", resp.text
    assert client.get(table, "p", "r").json()["A"] == 1


def test_the_lower_case_form_of_a_real_etag_does_not_match(client: Client, table: str) -> None:
    etag = insert(client, table, "p", "r", A=1)
    assert etag.startswith('W/"')
    resp = client.request("MERGE", key_path(table, "p", "r"), json_body={"A": 2},
                          headers={"If-Match": "w/" + etag[2:]})
    assert resp.status_code == 412
    resp = client.request("MERGE", key_path(table, "p", "r"), json_body={"A": 2}, headers={"If-Match": etag})
    assert resp.status_code == 204


@pytest.mark.parametrize("etag", ["wrong", '"wrong"', "W/wrong"])
def test_a_value_that_is_no_etag_is_still_refused(client: Client, table: str, etag: str) -> None:
    insert(client, table, "p", "r")
    resp = client.request("DELETE", key_path(table, "p", "r"), headers={"If-Match": etag})
    assert resp.status_code == 400 and code_of(resp) == "InvalidInput"


def test_a_weak_etag_in_a_batch_fails_its_operation_with_412(store: DevStore, client: Client, table: str) -> None:
    insert(client, table, "p", "r", A=1)
    ctype, body = build_batch(store.url, [("MERGE", key_path(table, "p", "r"), {"A": 2}, {"If-Match": 'W/"x"'})])
    resp = client.request("POST", "$batch", data=body, headers={"Content-Type": ctype})
    (status, _, text), = parse_batch_response(resp)
    assert status == 412 and b"UpdateConditionNotSatisfied" in text


# ----------------------------------------------------------------- repeated query parameters

def table_sas(table: str) -> str:
    return generate_table_sas(DEVSTORE_ACCOUNT, DEVSTORE_KEY, table, "raud",
                              expiry=datetime.now(timezone.utc) + timedelta(hours=1))


def test_a_repeated_sas_signature_does_not_verify(client: Client, table: str) -> None:
    """The service reads ``sig=<valid>&sig=junk`` as one parameter of two values, so the
    signature is ``<valid>,junk`` and authentication fails; it never keeps the first value."""
    token = table_sas(table)
    assert client.request("GET", f"{table}()", scheme=None, query=token).status_code == 200
    for extra in ("sig=junk", "sig="):
        resp = client.request("GET", f"{table}()", scheme=None, query=token + "&" + extra)
        assert resp.status_code == 403 and code_of(resp) == "AuthenticationFailed", (extra, resp.text)


def test_a_repeated_signed_field_is_signed_as_one_value(client: Client, table: str) -> None:
    token = table_sas(table)
    spr = token + "&sp=r"  # permissions "raud,r": not what was signed
    resp = client.request("GET", f"{table}()", scheme=None, query=spr)
    assert resp.status_code == 403


# ----------------------------------------------------------------- CORS

CORS_PROPS = (
    '<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties><Cors><CorsRule>'
    "<AllowedOrigins>https://app.example</AllowedOrigins><AllowedMethods>GET</AllowedMethods>"
    "<MaxAgeInSeconds>60</MaxAgeInSeconds><ExposedHeaders></ExposedHeaders><AllowedHeaders></AllowedHeaders>"
    "</CorsRule></Cors></StorageServiceProperties>"
).encode()
SERVICE = "?restype=service&comp=properties"


@pytest.fixture
def cors_rules(store: DevStore, client: Client) -> Iterator[None]:
    resp = client.request("PUT", SERVICE, data=CORS_PROPS, headers={"Content-Type": "application/xml"}, accept=None)
    assert resp.status_code == 202
    yield
    store.reset()


def test_vary_origin_when_no_rule_matches_the_origin(client: Client, cors_rules: None) -> None:
    """CORS support for Azure Storage: with rules set, an answer to a request whose Origin no
    rule allows carries ``Vary: Origin`` and no Access-Control header."""
    resp = client.request("GET", "Tables", headers={"Origin": "https://evil.example"})
    assert resp.status_code == 200
    assert resp.headers.get("Vary") == "Origin"
    assert not any(name.lower().startswith("access-control") for name in resp.headers)
    allowed = client.request("GET", "Tables", headers={"Origin": "https://app.example"})
    assert allowed.headers["Access-Control-Allow-Origin"] == "https://app.example"
    assert allowed.headers.get("Vary") == "Origin"


def test_no_vary_without_rules(store: DevStore, client: Client) -> None:
    store.reset()
    resp = client.request("GET", "Tables", headers={"Origin": "https://evil.example"})
    assert resp.status_code == 200 and "Vary" not in resp.headers


def test_a_preflight_without_its_method_header_in_the_service_s_words(store: DevStore, cors_rules: None) -> None:
    resp = requests.options(f"{store.url}/Tables", headers={"Origin": "https://app.example"}, timeout=30)
    assert resp.status_code == 400 and code_of(resp) == "InvalidHeaderValue"
    root = etree.fromstring(resp.content)
    assert root.findtext("Message", "").startswith(
        "The value for one of the HTTP headers is not in the correct format.")
    assert root.findtext("HeaderName") == "Access-Control-Request-Method"


# ----------------------------------------------------------------- numbers of different EDM types

NUMBERS = {"I32": (7, None), "I64": ("7", "Edm.Int64"), "D": (7.5, "Edm.Double")}


@pytest.fixture
def numbers(client: Client, table: str) -> str:
    entity: dict[str, object] = {"PartitionKey": "p", "RowKey": "r"}
    for name, (value, edm) in NUMBERS.items():
        entity[name] = value
        if edm:
            entity[name + "@odata.type"] = edm
    assert client.insert(table, entity).status_code == 201
    return table


def matches(client: Client, table: str, flt: str) -> int:
    resp = client.query(table, {"$filter": flt})
    assert resp.status_code == 200, resp.text
    return len(resp.json()["value"])


@pytest.mark.parametrize("flt, expected", [
    # an Int32 literal compares by value with Int64 and Double properties (AzureStorageExplorer
    # #5346: an Int64 property found by an Int32 literal; #6866: a Double property likewise)
    ("I64 ge 5", 1), ("I64 eq 7", 1), ("I64 lt 5", 0), ("5 le I64", 1),
    ("D gt 7", 1), ("D lt 7", 0), ("D ne 7", 1),
    ("I32 eq 7", 1),
    # an Int64 literal matches only Int64 (#5346: "doesn't reproduce" with an Int64 literal on an
    # Int32 property), and a Double literal only Double (#6866: not with an Int64 literal either)
    ("I32 eq 7L", 0), ("I64 eq 7L", 1), ("D gt 7L", 0), ("I32 eq 7.0", 0), ("I64 eq 7.0", 0),
    ("not (I64 lt 5)", 1),
])
def test_an_int32_literal_compares_with_every_number(client: Client, numbers: str, flt: str, expected: int) -> None:
    assert matches(client, numbers, flt) == expected


# ----------------------------------------------------------------- batch operations without the account

@pytest.mark.parametrize("absolute", [True, False])
def test_batch_operations_addressed_from_the_account_root(
    store: DevStore, client: Client, table: str, absolute: bool,
) -> None:
    """``POST /mytable HTTP/1.1`` inside a change set (what azure-cosmosdb-table writes for a
    path-style endpoint) is resolved against the batch's account, as the service resolves it."""
    ctype, body = build_batch("", [  # "POST /<table> HTTP/1.1": no scheme, host or account
        ("POST", table, {"PartitionKey": "p", "RowKey": "a"}, {}),
        ("PUT", key_path(table, "p", "b"), {"A": 1}, {}),
    ])
    if not absolute:  # "POST <table> HTTP/1.1"
        body = body.replace(b"POST /", b"POST ").replace(b"PUT /", b"PUT ")
    resp = client.request("POST", "$batch", data=body, headers={"Content-Type": ctype})
    assert resp.status_code == 202, resp.text
    assert [status for status, _, _ in parse_batch_response(resp)] == [201, 204]
    assert client.get(table, "p", "a").status_code == 200 and client.get(table, "p", "b").status_code == 200


# ----------------------------------------------------------------- a table name in front of another resource

def test_create_table_under_a_table_url(client: Client, table: str) -> None:
    """``POST /<account>/<t>/Tables`` is an insert into ``<t>``: 404 TableNotFound when it does not
    exist, 400 PropertiesNeedValue when it does (azure-sdk-for-js #18128 records the latter)."""
    missing = client.request("POST", "nosuchtable1/Tables", json_body={"TableName": "x" + table})
    assert missing.status_code == 404 and code_of(missing) == "TableNotFound"
    existing = client.request("POST", f"{table}/Tables", json_body={"TableName": "x" + table})
    assert existing.status_code == 400 and code_of(existing) == "PropertiesNeedValue"


def test_delete_table_under_a_table_url(client: Client, table: str) -> None:
    resp = client.request("DELETE", f"{table}/Tables('{table}')")
    assert resp.status_code == 400 and code_of(resp) == "InvalidInput"
    assert resp.json()["odata.error"]["message"]["value"].startswith(
        "The number of keys specified in the URI does not match number of key properties for the resource.")
    assert client.request("GET", f"Tables('{table}')").status_code == 200  # still there


def test_batch_under_a_table_url(store: DevStore, client: Client, table: str) -> None:
    ctype, body = build_batch(store.url, [("POST", table, {"PartitionKey": "p", "RowKey": "r"}, {})])
    resp = client.request("POST", f"{table}/$batch", data=body, headers={"Content-Type": ctype})
    assert resp.status_code == 415 and code_of(resp) == "MediaTypeNotSupported"
    assert resp.json()["odata.error"]["message"]["value"].startswith("None of the provided media types are supported")


def test_service_properties_under_a_table_url(client: Client, table: str) -> None:
    resp = client.request("GET", f"{table}/{SERVICE}", accept=None, version=JSON_VERSION)
    assert resp.status_code == 400 and code_of(resp) == "InvalidQueryParameterValue"


# ----------------------------------------------------------------- the deprecated client, for real

def test_the_deprecated_python_client_runs_a_batch_and_an_int64_filter(store: DevStore) -> None:
    """azure-cosmosdb-table 1.0.6 writes every Python int as Edm.Int64 and addresses the operations
    of a batch from the account root: both work against the emulator as against the service."""
    legacy = pytest.importorskip("azure.cosmosdb.table.tableservice")
    batches = pytest.importorskip("azure.cosmosdb.table.tablebatch")
    service = legacy.TableService(connection_string=store.connection_string)
    table = "legacy" + datetime.now(timezone.utc).strftime("%H%M%S%f")
    service.create_table(table)
    service.insert_entity(table, {"PartitionKey": "p", "RowKey": "r0", "N": 7})
    batch = batches.TableBatch()
    for i in range(1, 4):
        batch.insert_entity({"PartitionKey": "p", "RowKey": f"r{i}", "N": i * 3})
    etags = service.commit_batch(table, batch)
    assert len(etags) == 3 and all(etag.startswith('W/"') for etag in etags)
    found = sorted((e.RowKey, e.N) for e in service.query_entities(table, filter="N ge 5"))
    assert found == [("r0", 7), ("r2", 6), ("r3", 9)]
    assert service.get_entity(table, "p", "r1")["N"] == 3
