"""Loopback tests: AtomPub payloads and the x-ms-version rules for payload formats."""

from __future__ import annotations

import json
from typing import Any

import pytest
from lxml import etree

from devstore_helpers import ATOM, MINIMAL, Client, build_batch, key_path, parse_batch_response

pytestmark = pytest.mark.integration

NS = {
    "a": "http://www.w3.org/2005/Atom",
    "d": "http://schemas.microsoft.com/ado/2007/08/dataservices",
    "m": "http://schemas.microsoft.com/ado/2007/08/dataservices/metadata",
}
M_TYPE = "{%s}type" % NS["m"]

#: The Atom insert body of the "Movie" entity, verbatim from the seed document
#: (the Azure Storage team blog's "Movie" example). Note its Timestamp, 0001-01-01, which
#: the service ignores (it sets Timestamp itself).
MOVIE_ENTRY = '<?xml version="1.0" encoding="utf-8" standalone="yes"?><entry xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices" xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" xmlns="http://www.w3.org/2005/Atom"><title /><author><name /></author><updated>2010-10-16T15:48:53.0011614Z</updated><id /><content type="application/xml"><m:properties><d:Favorite m:type="Edm.Boolean">false</d:Favorite><d:Language>English</d:Language><d:PartitionKey>Action</d:PartitionKey><d:Rating m:type="Edm.Double">4.5</d:Rating><d:ReleaseYear m:type="Edm.Int32">2010</d:ReleaseYear><d:Revenue m:type="Edm.Double">0</d:Revenue><d:RowKey>Cop Out</d:RowKey><d:Timestamp m:type="Edm.DateTime">0001-01-01T00:00:00</d:Timestamp></m:properties></content></entry>'

V_ATOM = "2011-08-18"
V_ATOM_LAST = "2015-07-08"


def parse(body: bytes) -> Any:
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    return etree.fromstring(body, parser)


def atom_props(entry: Any) -> dict[str, tuple[str, str]]:
    """name -> (m:type or Edm.String, text) from an Atom <entry>."""
    props = entry.find("a:content/m:properties", NS)
    return {
        etree.QName(el).localname: (el.get(M_TYPE, "Edm.String"), el.text or "")
        for el in props
    }


def atom_post(client: Client, path: str, body: bytes | str, version: str = V_ATOM, **kw: Any) -> Any:
    headers = {"Content-Type": "application/atom+xml", **kw.pop("headers", {})}
    return client.request("POST", path, data=body, headers=headers, version=version, accept=ATOM, **kw)


def table_entry(name: str) -> str:
    return (
        '<?xml version="1.0" encoding="utf-8" standalone="yes"?>'
        '<entry xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices" '
        'xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" '
        'xmlns="http://www.w3.org/2005/Atom"><title /><updated>2024-01-01T00:00:00Z</updated>'
        '<author><name /></author><id /><content type="application/xml"><m:properties>'
        f"<d:TableName>{name}</d:TableName></m:properties></content></entry>"
    )


# ----------------------------------------------------------------- the seed's Movie entity

def test_seed_movie_entry_round_trip(client: Client) -> None:
    created = atom_post(client, "Tables", table_entry("Movies"))
    assert created.status_code in (201, 409), created.text
    resp = atom_post(client, "Movies", MOVIE_ENTRY)
    assert resp.status_code == 201, resp.text
    assert resp.headers["Content-Type"].startswith("application/atom+xml")
    assert resp.headers["x-ms-version"] == V_ATOM
    entry = parse(resp.content)
    assert entry.tag == "{%s}entry" % NS["a"]
    assert entry.get("{%s}etag" % NS["m"]) == resp.headers["ETag"]
    props = atom_props(entry)
    assert props["PartitionKey"] == ("Edm.String", "Action")
    assert props["RowKey"] == ("Edm.String", "Cop Out")
    assert props["Favorite"] == ("Edm.Boolean", "false")
    assert props["Language"] == ("Edm.String", "English")
    assert props["Rating"] == ("Edm.Double", "4.5")
    assert props["ReleaseYear"] == ("Edm.Int32", "2010")
    assert props["Revenue"] == ("Edm.Double", "0.0")
    assert props["Timestamp"][0] == "Edm.DateTime" and props["Timestamp"][1] > "2020"

    # read back as Atom (point query) ...
    got = client.get("Movies", "Action", "Cop Out", version=V_ATOM, accept=ATOM)
    assert got.status_code == 200
    assert atom_props(parse(got.content)) == props
    # ... as an Atom feed ...
    feed = parse(client.query("Movies", {"$filter": "Rating gt 4.0"}, version=V_ATOM, accept=ATOM).content)
    entries = feed.findall("a:entry", NS)
    assert [atom_props(e)["RowKey"][1] for e in entries] == ["Cop Out"]
    # ... and as JSON with a JSON-capable version
    as_json = client.get("Movies", "Action", "Cop Out", version="2019-02-02", accept=MINIMAL).json()
    assert as_json["ReleaseYear"] == 2010 and as_json["Rating"] == 4.5 and as_json["Favorite"] is False
    assert as_json["Revenue"] == 0.0 and isinstance(as_json["Revenue"], float)
    assert as_json["Language"] == "English" and as_json["Timestamp"] == props["Timestamp"][1]


def test_atom_responses_parse_with_the_client_codec(client: Client, table: str) -> None:
    from tablesdk._formats import get_format

    codec = get_format("atom")
    entity = {"PartitionKey": "p", "RowKey": "r", "I": 1, "L": "5", "L@odata.type": "Edm.Int64",
              "T": "2024-01-02T03:04:05.1234567Z", "T@odata.type": "Edm.DateTime", "S": " padded ",
              "X": "AQI=", "X@odata.type": "Edm.Binary"}
    assert client.insert(table, entity).status_code == 201
    payload = codec.parse_entity(client.get(table, "p", "r", version=V_ATOM_LAST, accept=ATOM).content)
    assert payload.values["L"] == 5 and payload.types["L"].value == "Edm.Int64"
    assert payload.values["S"] == " padded " and payload.values["X"] == b"\x01\x02"
    assert payload.values["T"].ticks_remainder == 7
    feed = client.query(table, version=V_ATOM_LAST, accept=ATOM).content
    assert [p.values["RowKey"] for p in codec.parse_entities(feed)] == ["r"]
    tables = client.request("GET", "Tables", version=V_ATOM_LAST, accept=ATOM,
                            params={"$filter": f"TableName eq '{table}'"})
    assert codec.parse_tables(tables.content) == [table]


def test_atom_insert_update_merge_delete(client: Client, table: str) -> None:
    def entry(props: str) -> str:
        return (
            '<entry xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices" '
            'xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" '
            'xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><m:properties>'
            + props + "</m:properties></content></entry>"
        )

    resp = atom_post(client, table, entry(
        '<d:PartitionKey>p</d:PartitionKey><d:RowKey>r</d:RowKey><d:A m:type="Edm.Int64">7</d:A>'
        '<d:N m:null="true" /><d:S>x</d:S>'))
    assert resp.status_code == 201
    assert "N" not in atom_props(parse(resp.content))
    path = key_path(table, "p", "r")
    etag = resp.headers["ETag"]
    put = client.request("PUT", path, data=entry('<d:B m:type="Edm.Boolean">true</d:B>'), version=V_ATOM,
                         headers={"Content-Type": "application/atom+xml", "If-Match": etag}, accept=ATOM)
    assert put.status_code == 204
    merge = client.request("MERGE", path, data=entry("<d:C>c</d:C>"), version=V_ATOM,
                           headers={"Content-Type": "application/atom+xml", "If-Match": put.headers["ETag"]},
                           accept=ATOM)
    assert merge.status_code == 204
    props = atom_props(parse(client.get(table, "p", "r", version=V_ATOM, accept=ATOM).content))
    assert props["B"] == ("Edm.Boolean", "true") and props["C"] == ("Edm.String", "c") and "A" not in props
    stale = client.request("DELETE", path, version=V_ATOM, accept=ATOM, headers={"If-Match": etag})
    assert stale.status_code == 412
    err = parse(stale.content)
    assert err.tag == "{%s}error" % NS["m"]
    assert err.find("m:code", NS).text == "UpdateConditionNotSatisfied"
    message = err.find("m:message", NS)
    assert message.get("{http://www.w3.org/XML/1998/namespace}lang") == "en-US"
    assert message.text.startswith("The update condition specified in the request was not satisfied.")
    assert stale.headers["Content-Type"].startswith("application/xml")


def test_atom_tables(client: Client) -> None:
    name = "atomtbl" + str(abs(hash(client)) % 100000)
    resp = atom_post(client, "Tables", table_entry(name))
    assert resp.status_code == 201
    assert atom_props(parse(resp.content))["TableName"] == ("Edm.String", name)
    dup = atom_post(client, "Tables", table_entry(name))
    assert dup.status_code == 409
    assert parse(dup.content).find("m:code", NS).text == "TableAlreadyExists"
    feed = parse(client.request("GET", "Tables", version=V_ATOM, accept=ATOM,
                                params={"$filter": f"TableName eq '{name}'"}).content)
    assert feed.find("a:title", NS).text == "Tables"
    assert [atom_props(e)["TableName"][1] for e in feed.findall("a:entry", NS)] == [name]
    assert client.request("DELETE", f"Tables('{name}')", version=V_ATOM, accept=ATOM).status_code == 204


def test_atom_paging_and_select(client: Client, table: str) -> None:
    for i in range(5):
        client.insert(table, {"PartitionKey": "p", "RowKey": f"r{i}", "A": i, "B": "b"})
    resp = client.query(table, {"$top": "2", "$select": "A"}, version=V_ATOM, accept=ATOM)
    feed = parse(resp.content)
    entries = feed.findall("a:entry", NS)
    assert [atom_props(e) for e in entries] == [{"A": ("Edm.Int32", "0")}, {"A": ("Edm.Int32", "1")}]
    assert "x-ms-continuation-NextPartitionKey" in resp.headers


def test_atom_batch(client: Client, table: str) -> None:
    entry = ('<entry xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices" '
             'xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" '
             'xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><m:properties>'
             "<d:PartitionKey>p</d:PartitionKey><d:RowKey>{rk}</d:RowKey></m:properties></content></entry>")
    headers = {"Content-Type": "application/atom+xml", "Accept": "application/atom+xml"}
    ops = [("POST", table, entry.format(rk="a"), headers), ("POST", table, entry.format(rk="a"), headers)]
    ctype, body = build_batch(client.store.url, ops)
    resp = client.request("POST", "$batch", data=body, headers={"Content-Type": ctype}, version=V_ATOM, accept=ATOM)
    (status, part_headers, part_body), = parse_batch_response(resp)
    assert status == 400 and part_headers["content-type"] == "application/xml"
    err = parse(part_body)
    assert err.find("m:code", NS).text == "InvalidDuplicateRow"
    assert err.find("m:message", NS).text.startswith("1:")
    ctype, body = build_batch(client.store.url, ops[:1])
    resp = client.request("POST", "$batch", data=body, headers={"Content-Type": ctype}, version=V_ATOM, accept=ATOM)
    (status, _, part_body), = parse_batch_response(resp)
    assert status == 201 and atom_props(parse(part_body))["RowKey"] == ("Edm.String", "a")


# ----------------------------------------------------------------- version rules

def storage_error(resp: Any) -> tuple[str, str]:
    root = parse(resp.content)
    assert root.tag == "Error"
    return root.findtext("Code"), root.findtext("Message")


@pytest.mark.parametrize("version", ["2015-12-11", "2019-02-02", "2026-06-06"])
def test_atom_refused_from_2015_12_11(client: Client, table: str, version: str) -> None:
    for resp in (
        client.query(table, version=version, accept=ATOM),
        client.query(table, version=version, accept=None),  # no Accept: Atom is the default
        client.query(table, version=version, accept="*/*"),
        atom_post(client, table, MOVIE_ENTRY, version=version),
        client.request("POST", "Tables", data=table_entry("abcdef"), version=version, accept=MINIMAL,
                       headers={"Content-Type": "application/atom+xml"}),
    ):
        assert resp.status_code == 415, resp.text
        assert resp.headers["x-ms-error-code"] == "AtomFormatNotSupported"
        assert resp.headers["Content-Type"] == "application/xml"
        code, message = storage_error(resp)
        assert code == "AtomFormatNotSupported"
        assert message.startswith("Atom format is not supported.\nRequestId:")


def test_atom_allowed_before_2015_12_11(client: Client, table: str) -> None:
    assert client.query(table, version=V_ATOM_LAST, accept=ATOM).status_code == 200
    assert client.query(table, version="2009-09-19", accept=None).status_code == 200


@pytest.mark.parametrize("version", ["2009-09-19", "2011-08-18", "2012-02-12"])
def test_json_needs_2013_08_15(client: Client, table: str, version: str) -> None:
    resp = client.query(table, version=version, accept=MINIMAL)
    assert resp.status_code == 415
    assert storage_error(resp)[0] == "JsonFormatNotSupported"
    resp = client.insert(table, {"PartitionKey": "p", "RowKey": "r"}, version=version, accept=ATOM)
    assert resp.status_code == 415
    assert client.query(table, version="2013-08-15", accept=MINIMAL).status_code == 200


def test_missing_version_is_processed_as_a_pre_json_version(client: Client, table: str) -> None:
    resp = client.query(table, version=None, accept=MINIMAL)
    assert resp.status_code == 415 and storage_error(resp)[0] == "JsonFormatNotSupported"
    ok = client.query(table, version=None, accept=ATOM)
    assert ok.status_code == 200 and ok.headers["x-ms-version"] == "2009-09-19"


@pytest.mark.parametrize("version", ["2027-01-01", "2014-01-01", "garbage"])
def test_unknown_version(client: Client, table: str, version: str) -> None:
    resp = client.query(table, version=version)
    assert resp.status_code == 400
    code, _ = storage_error(resp)
    assert code == "InvalidHeaderValue" and resp.headers["x-ms-error-code"] == "InvalidHeaderValue"
    assert parse(resp.content).findtext("HeaderName") == "x-ms-version"


def test_prefer_ignored_before_2013_08_15(client: Client, table: str) -> None:
    entry = MOVIE_ENTRY.replace("Cop Out", "Prefer Test")
    resp = atom_post(client, table, entry, headers={"Prefer": "return-no-content"})
    assert resp.status_code == 201 and "Preference-Applied" not in resp.headers


def test_upsert_needs_2011_08_18(client: Client, table: str) -> None:
    entry = MOVIE_ENTRY
    resp = client.request("PUT", key_path(table, "Action", "Cop Out"), data=entry, version="2009-09-19",
                          accept=ATOM, headers={"Content-Type": "application/atom+xml"})
    assert resp.status_code == 400
    resp = client.request("PUT", key_path(table, "Action", "Cop Out"), data=entry, version=V_ATOM,
                          accept=ATOM, headers={"Content-Type": "application/atom+xml"})
    assert resp.status_code == 204


def test_json_body_with_atom_accept_on_old_version(client: Client, table: str) -> None:
    resp = client.request("GET", key_path(table, "p", "r"), version="2015-04-05", accept=MINIMAL)
    assert resp.status_code == 404
    assert json.loads(resp.content)["odata.error"]["code"] == "ResourceNotFound"
