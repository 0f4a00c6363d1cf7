"""DateTime text as the service writes it: trailing zeros of the fraction trimmed, no fraction for whole seconds.

In property values, Timestamp and ETags, in both formats; values still compare
and round-trip as the same instants.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

import pytest

from devstore_helpers import ATOM, ATOM_VERSION, Client
from tablesdk.devstore._values import wire_datetime

#: Service form: no fraction, or one without trailing zeros.
SERVICE_FORM = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{0,6}[1-9])?Z")
VALUES = {
    "Tenth": ("2024-01-02T03:04:05.1000000Z", "2024-01-02T03:04:05.1Z"),
    "Whole": ("2024-01-02T03:04:05.0000000Z", "2024-01-02T03:04:05Z"),
    "Some": ("2024-01-02T03:04:05.9468700Z", "2024-01-02T03:04:05.94687Z"),
    "Full": ("2024-01-02T03:04:05.1234567Z", "2024-01-02T03:04:05.1234567Z"),
    "Given": ("2024-01-02T03:04:05Z", "2024-01-02T03:04:05Z"),
}


@pytest.mark.parametrize(("canon", "wire"), [v for v in VALUES.values()] + [
    ("1601-01-01T00:00:00.0000000Z", "1601-01-01T00:00:00Z"),
    ("2024-01-02T03:04:10.0000001Z", "2024-01-02T03:04:10.0000001Z"),
])
def test_wire_datetime(canon: str, wire: str) -> None:
    if "." in canon:  # canonical text always has seven digits
        assert wire_datetime(canon) == wire


def _insert(client: Client, table: str) -> None:
    body = {"PartitionKey": "p", "RowKey": "r"}
    for name, (text, _) in VALUES.items():
        body[name] = text
        body[name + "@odata.type"] = "Edm.DateTime"
    resp = client.insert(table, body)
    assert resp.status_code == 201, resp.text
    etag = unquote(resp.headers["ETag"])
    stamp = etag[len("W/\"datetime'"):-2]
    assert SERVICE_FORM.fullmatch(stamp), etag


def test_json_values_timestamp_and_etag(client: Client, table: str) -> None:
    _insert(client, table)
    got = client.get(table, "p", "r")
    assert got.status_code == 200
    entity = got.json()
    for name, (_, wire) in VALUES.items():
        assert entity[name] == wire
    assert SERVICE_FORM.fullmatch(entity["Timestamp"]), entity["Timestamp"]
    assert entity["odata.etag"] == got.headers["ETag"]
    assert unquote(got.headers["ETag"]) == f"W/\"datetime'{entity['Timestamp']}'\""
    rows = client.query(table).json()["value"]
    assert rows[0]["Whole"] == "2024-01-02T03:04:05Z" and SERVICE_FORM.fullmatch(rows[0]["Timestamp"])


def test_atom_values_timestamp_and_etag(client: Client, table: str) -> None:
    _insert(client, table)
    got = client.get(table, "p", "r", version=ATOM_VERSION, accept=ATOM)
    text = got.text
    for name, (_, wire) in VALUES.items():
        assert f'<d:{name} m:type="Edm.DateTime">{wire}</d:{name}>' in text
    stamp = re.search(r'<d:Timestamp m:type="Edm.DateTime">([^<]*)<', text)
    assert stamp and SERVICE_FORM.fullmatch(stamp.group(1)), text[:500]


def test_trimmed_values_still_compare_as_instants(client: Client, table: str) -> None:
    _insert(client, table)
    for flt, hits in [
        ("Whole eq datetime'2024-01-02T03:04:05.0000000Z'", 1),
        ("Tenth gt datetime'2024-01-02T03:04:05Z'", 1),
        ("Tenth lt datetime'2024-01-02T03:04:05.1000001Z'", 1),
        ("Whole lt datetime'2024-01-02T03:04:05Z'", 0),
    ]:
        assert len(client.query(table, {"$filter": flt}).json()["value"]) == hits, flt


def test_if_match_with_the_trimmed_etag(client: Client, table: str) -> None:
    _insert(client, table)
    etag = client.get(table, "p", "r").headers["ETag"]
    path = f"{table}(PartitionKey='p',RowKey='r')"
    resp = client.request("PUT", path, json_body={"X": 1}, headers={"If-Match": etag})
    assert resp.status_code == 204, resp.text
