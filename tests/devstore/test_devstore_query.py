"""Loopback tests: Query Entities ($filter, $top, $select, ordering, continuation tokens)."""

from __future__ import annotations

import uuid
from typing import Any, Iterator

import pytest

from devstore_helpers import Client
from tablesdk.devstore import DevStore

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def small() -> Iterator[Client]:
    """An emulator whose pages hold at most 7 entities."""
    with DevStore(port=0, page_size=7) as store:
        yield Client(store)


def fill(client: Client, table: str, partitions: int, rows: int, **extra: Any) -> None:
    """Insert partitions x rows entities with a Prefer: return-no-content loop."""
    for p in range(partitions):
        for r in range(rows):
            entity = {"PartitionKey": f"p{p:02d}", "RowKey": f"r{r:03d}", "N": p * rows + r, "Odd": r % 2 == 1,
                      **extra}
            resp = client.insert(table, entity, headers={"Prefer": "return-no-content"})
            assert resp.status_code == 204, resp.text


def new_table(client: Client) -> str:
    name = "q" + uuid.uuid4().hex[:12]
    assert client.create_table(name).status_code == 201
    return name


def keys(entities: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["PartitionKey"], e["RowKey"]) for e in entities]


def pages_of(client: Client, table: str, params: dict[str, str]) -> list[list[dict[str, Any]]]:
    params = dict(params)
    pages = []
    while True:
        resp = client.query(table, params)
        assert resp.status_code == 200, resp.text
        pages.append(resp.json()["value"])
        npk = resp.headers.get("x-ms-continuation-NextPartitionKey")
        if npk is None:
            assert "x-ms-continuation-NextRowKey" not in resp.headers
            return pages
        params["NextPartitionKey"] = npk
        params["NextRowKey"] = resp.headers["x-ms-continuation-NextRowKey"]


# ----------------------------------------------------------------- ordering and paging

def test_results_in_key_order(client: Client, table: str) -> None:
    for pk, rk in [("b", "2"), ("a", "z"), ("b", "1"), ("a", "a"), ("B", "0"), ("", "x")]:
        client.insert(table, {"PartitionKey": pk, "RowKey": rk})
    got = keys(client.query(table).json()["value"])
    assert got == [("", "x"), ("B", "0"), ("a", "a"), ("a", "z"), ("b", "1"), ("b", "2")]


def test_paging_with_small_page_size(small: Client) -> None:
    table = new_table(small)
    fill(small, table, 3, 10)
    pages = pages_of(small, table, {})
    assert [len(p) for p in pages] == [7, 7, 7, 7, 2]
    flat = [e for p in pages for e in p]
    assert keys(flat) == sorted(keys(flat)) and len(set(keys(flat))) == 30


def test_paging_with_filter_and_top(small: Client) -> None:
    table = new_table(small)
    fill(small, table, 3, 10)
    pages = pages_of(small, table, {"$filter": "Odd", "$top": "4"})
    assert [len(p) for p in pages] == [4, 4, 4, 3]
    assert all(e["Odd"] for p in pages for e in p)
    pages = pages_of(small, table, {"$filter": "N ge 5 and N lt 12"})
    assert [e["N"] for p in pages for e in p] == list(range(5, 12))
    assert [len(p) for p in pages] == [7]


def test_continuation_crosses_partitions(small: Client) -> None:
    table = new_table(small)
    fill(small, table, 5, 3)
    pages = pages_of(small, table, {"$top": "4"})
    assert [len(p) for p in pages] == [4, 4, 4, 3]
    assert keys(pages[1])[0] == ("p01", "r001")


def test_tokens_are_opaque(small: Client) -> None:
    table = new_table(small)
    fill(small, table, 1, 9)
    resp = small.query(table)
    npk = resp.headers["x-ms-continuation-NextPartitionKey"]
    nrk = resp.headers["x-ms-continuation-NextRowKey"]
    assert npk.startswith("1!") and "p00" not in npk and nrk.startswith("1!")


def test_bogus_token_is_refused(client: Client, table: str) -> None:
    resp = client.query(table, {"NextPartitionKey": "not-a-token", "NextRowKey": "x"})
    assert resp.status_code == 400


def test_entity_inserted_behind_the_token_is_not_returned(small: Client) -> None:
    table = new_table(small)
    fill(small, table, 1, 10)
    first = small.query(table)
    params = {"NextPartitionKey": first.headers["x-ms-continuation-NextPartitionKey"],
              "NextRowKey": first.headers["x-ms-continuation-NextRowKey"]}
    small.insert(table, {"PartitionKey": "p00", "RowKey": "r000a"})  # before the token
    small.insert(table, {"PartitionKey": "p00", "RowKey": "r999"})  # after it
    rest = keys(small.query(table, params).json()["value"])
    assert ("p00", "r000a") not in rest and ("p00", "r999") in rest


def test_top_limits_and_caps(client: Client, table: str) -> None:
    fill(client, table, 1, 5)
    resp = client.query(table, {"$top": "2"})
    assert len(resp.json()["value"]) == 2 and "x-ms-continuation-NextPartitionKey" in resp.headers
    resp = client.query(table, {"$top": "5"})
    assert len(resp.json()["value"]) == 5 and "x-ms-continuation-NextPartitionKey" not in resp.headers
    resp = client.query(table, {"$top": "5000"})  # capped at 1000, not an error
    assert resp.status_code == 200 and len(resp.json()["value"]) == 5
    resp = client.query(table, {"$top": "0"})
    assert resp.status_code == 200 and resp.json()["value"] == []
    for bad in ("-1", "x", "1.5"):
        assert client.query(table, {"$top": bad}).status_code == 400


def test_top_over_1000_is_capped_with_continuation() -> None:
    with DevStore(port=0) as store:
        client = Client(store)
        table = new_table(client)
        entities = [{"PartitionKey": "p", "RowKey": f"{i:05d}"} for i in range(1200)]
        storage = store.storage
        from tablesdk.devstore._values import parse_json_entity

        with storage.transaction():
            for e in entities:
                pk, rk, props = parse_json_entity(e)
                storage.put_entity(table, pk, rk, props, exists=False)
        resp = client.query(table, {"$top": "1500"})
        assert len(resp.json()["value"]) == 1000
        assert "x-ms-continuation-NextPartitionKey" in resp.headers
        pages = pages_of(client, table, {})
        assert [len(p) for p in pages] == [1000, 200]


def test_select(client: Client, table: str) -> None:
    client.insert(table, {"PartitionKey": "p", "RowKey": "r", "A": 1, "B": "b", "C": True})
    body = client.query(table, {"$select": "A,C,Nope"}).json()["value"][0]
    assert {k for k in body if not k.startswith("odata.")} == {"A", "C"}
    body = client.query(table, {"$select": "PartitionKey, RowKey"}).json()["value"][0]
    assert body["PartitionKey"] == "p" and body["RowKey"] == "r" and "A" not in body
    assert client.query(table, {"$select": "*"}).json()["value"][0]["B"] == "b"
    assert client.query(table, {"$select": "a b"}).status_code == 400


# ----------------------------------------------------------------- $filter over HTTP

@pytest.fixture(scope="module")
def typed_table(store: DevStore) -> tuple[Client, str]:
    client = Client(store)
    table = new_table(client)
    rows: list[dict[str, Any]] = [
        {"RowKey": "int", "Rating": 3, "Name": "alpha", "Flag": True},
        {"RowKey": "dbl", "Rating": 3.5, "Name": "beta", "Flag": False},
        {"RowKey": "big", "Rating": "3", "Rating@odata.type": "Edm.Int64", "Name": "gamma"},
        {"RowKey": "str", "Rating": "3", "Name": "o'neil"},
        {"RowKey": "when", "When": "2024-06-01T00:00:00.1234567Z", "When@odata.type": "Edm.DateTime"},
        {"RowKey": "guid", "Id": "1b4e28ba-2fa1-11d2-883f-0016d3cca427", "Id@odata.type": "Edm.Guid"},
        {"RowKey": "bin", "Data": "CgsM", "Data@odata.type": "Edm.Binary"},
    ]
    for row in rows:
        assert client.insert(table, {"PartitionKey": "p", **row}).status_code == 201
    return client, table


@pytest.mark.parametrize(
    "flt, expected",
    [
        ("Rating eq 3", ["int", "big"]),  # an Int32 literal compares with Int64 and Double by value
        ("Rating eq 3L", ["big"]),
        ("Rating eq '3'", ["str"]),
        ("Rating gt 1.2", ["dbl"]),
        ("Rating gt 1", ["int", "dbl", "big"]),
        ("Rating ne 3", ["dbl"]),
        # mismatched types are ignored, even under not; a missing property is false, so not matches it
        ("not (Rating eq 3)", ["dbl", "when", "guid", "bin"]),
        ("Flag", ["int"]),
        ("not Flag", ["dbl", "big", "str", "when", "guid", "bin"]),
        ("Flag eq false", ["dbl"]),
        ("Name eq 'o''neil'", ["str"]),
        ("Name ge 'b' and Name lt 'h'", ["big", "dbl"]),
        ("Missing eq 1", []),
        ("Missing ne 1", []),
        ("not (Missing eq 1)", ["int", "dbl", "big", "str", "when", "guid", "bin"]),
        ("When gt datetime'2024-06-01T00:00:00.1234566Z'", ["when"]),
        ("When eq datetime'2024-06-01T00:00:00.1234567Z'", ["when"]),
        ("Id eq guid'1B4E28BA-2FA1-11D2-883F-0016D3CCA427'", ["guid"]),
        ("Data eq X'0a0b0c'", ["bin"]),
        ("Data eq binary'0A0B0C'", ["bin"]),
        ("PartitionKey eq 'p' and RowKey eq 'int'", ["int"]),
        ("RowKey ge 'g' and RowKey lt 'j'", ["guid", "int"]),
        ("RowKey eq 'int' or RowKey eq 'str'", ["int", "str"]),
        ("Timestamp gt datetime'2020-01-01T00:00:00Z' and RowKey eq 'bin'", ["bin"]),
        ("PartitionKey eq 'other'", []),
    ],
)
def test_filters_over_http(typed_table: tuple[Client, str], flt: str, expected: list[str]) -> None:
    client, table = typed_table
    resp = client.query(table, {"$filter": flt})
    assert resp.status_code == 200, resp.text
    assert sorted(e["RowKey"] for e in resp.json()["value"]) == sorted(expected)


@pytest.mark.parametrize("flt", ["Rating eq", "startswith(Name,'a')", "Rating eq 3 AND Flag", "Rating add 1 eq 4",
                                 "Name eq 'x", "(Rating eq 3", "Rating eq null"])
def test_malformed_filter_over_http(typed_table: tuple[Client, str], flt: str) -> None:
    client, table = typed_table
    resp = client.query(table, {"$filter": flt})
    assert resp.status_code == 400
    body = resp.json()["odata.error"]
    assert body["code"] == "InvalidInput"
    assert body["message"]["value"].startswith("The query condition specified in the request is invalid.")


def test_filter_with_encoded_plus(typed_table: tuple[Client, str]) -> None:
    client, table = typed_table
    client.insert(table, {"PartitionKey": "p", "RowKey": "a+b"})
    resp = client.query(table, {"$filter": "RowKey eq 'a+b'"})  # requests encodes '+' as %2B
    assert [e["RowKey"] for e in resp.json()["value"]] == ["a+b"]


# ----------------------------------------------------------------- production-like short pages

def test_max_scan_gives_short_and_empty_pages() -> None:
    with DevStore(port=0, max_scan=5) as store:
        client = Client(store)
        table = new_table(client)
        fill(client, table, 2, 10)
        pages = pages_of(client, table, {"$filter": "N ge 12 and N lt 14"})
        sizes = [len(p) for p in pages]
        assert sum(sizes) == 2 and 0 in sizes and len(sizes) > 2
        assert [e["N"] for p in pages for e in p] == [12, 13]


def test_keys_order_by_utf16_code_units_in_results_tokens_and_filters(small: Client) -> None:
    # U+1F600 (surrogates D83D DE00) sorts before U+E000 in UTF-16, as on the service and Azurite
    table = new_table(small)
    order = ["a", "\ud7ff", "\U00010000", "\U0001F600", "\U0001F600x", "\ue000", "\uff21", "\uffff"]
    for pk in ("\ue000", "\U0001F600"):
        for rk in reversed(order):
            assert small.insert(table, {"PartitionKey": pk, "RowKey": rk}).status_code == 201
    pages = pages_of(small, table, {"$top": "3"})
    assert [len(p) for p in pages] == [3, 3, 3, 3, 3, 1]
    assert keys([e for p in pages for e in p]) == [(pk, rk) for pk in ("\U0001F600", "\ue000") for rk in order]
    found = small.query(table, {"$filter": "PartitionKey eq '\U0001F600' and RowKey gt '\U0001F600x'"})
    assert [e["RowKey"] for e in found.json()["value"]] == ["\ue000", "\uff21", "\uffff"]
    found = small.query(table, {"$filter": "PartitionKey lt '\ue000' and RowKey lt '\U00010000'"})
    assert [e["RowKey"] for e in found.json()["value"]] == ["a", "\ud7ff"]
