"""Atom golden bodies: the Movie insert entry of the Azure Storage team's blog, a hand-written query feed, table feeds, XML attacks."""

from __future__ import annotations

import math
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from tablesdk._entities._edm import EdmDateTime, EdmType, EntityPayload, from_atom_text
from tablesdk._formats.atom import ATOM_NS, DATASERVICES_NS, METADATA_NS, AtomFormat

DATA = Path(__file__).resolve().parent / "data"
UTC = timezone.utc
T = EdmType
A, D, M = f"{{{ATOM_NS}}}", f"{{{DATASERVICES_NS}}}", f"{{{METADATA_NS}}}"
SEED_UPDATED = datetime(2010, 10, 16, 15, 48, 53, 1161, tzinfo=UTC)

#: The seed's Movie, in the seed's property order, without Timestamp (which is never sent).
MOVIE = EntityPayload(
    {"Favorite": False, "Language": "English", "PartitionKey": "Action", "Rating": 4.5, "ReleaseYear": 2010,
     "Revenue": 0.0, "RowKey": "Cop Out"},
    {"Favorite": T.BOOLEAN, "Language": T.STRING, "PartitionKey": T.STRING, "Rating": T.DOUBLE,
     "ReleaseYear": T.INT32, "Revenue": T.DOUBLE, "RowKey": T.STRING},
)


def read(name: str) -> bytes:
    return (DATA / name).read_bytes()


def shape(element: etree._Element) -> Any:
    """Tag, attributes and children of an element; property text as its typed value."""
    if element.tag.startswith(D):
        type_name = element.get(f"{M}type")
        value = from_atom_text(element.text or "", T(type_name) if type_name else T.STRING)
        return (element.tag, dict(element.attrib), value)
    text = (element.text or "").strip() or None
    if element.tag == f"{A}updated":
        text = "<any time>"
    return (element.tag, dict(element.attrib), text, [shape(child) for child in element])


# ------------------------------------------------------------------ the seed's Movie insert


def test_movie_insert_has_the_documented_structure() -> None:
    ours = etree.fromstring(AtomFormat().serialize_entity(MOVIE))
    seed = etree.fromstring(read("seed_movie_insert_entry.xml"))
    seed_props = seed.find(f"{A}content/{M}properties")
    assert seed_props is not None
    timestamp = seed_props.find(f"{D}Timestamp")
    assert timestamp is not None
    seed_props.remove(timestamp)  # the seed's client sent a default Timestamp; we never send one
    assert ours.nsmap == seed.nsmap == {"d": DATASERVICES_NS, "m": METADATA_NS, None: ATOM_NS}
    assert shape(ours) == shape(seed)


def test_movie_insert_declaration_and_namespaces_byte_for_byte() -> None:
    ours = AtomFormat(clock=lambda: SEED_UPDATED).serialize_entity(MOVIE)
    seed = read("seed_movie_insert_entry.xml")
    head = seed[: seed.index(b"<title />")]
    assert ours.startswith(head)
    assert b"<updated>2010-10-16T15:48:53.0011610Z</updated>" in ours


def test_movie_insert_golden_bytes() -> None:
    ours = AtomFormat(clock=lambda: SEED_UPDATED).serialize_entity(MOVIE)
    assert ours == read("atom_movie_insert_expected.xml").rstrip(b"\n")


def test_seed_entry_parses_to_typed_values() -> None:
    got = AtomFormat().parse_entity(read("seed_movie_insert_entry.xml"))
    want = {"Favorite": False, "Language": "English", "PartitionKey": "Action", "Rating": 4.5,
            "ReleaseYear": 2010, "Revenue": 0.0, "RowKey": "Cop Out",
            "Timestamp": datetime(1, 1, 1, tzinfo=UTC)}
    assert got.values == want
    assert [type(v) for v in got.values.values()] == [bool, str, str, float, int, float, str, EdmDateTime]
    assert got.types == {**MOVIE.types, "Timestamp": T.DATETIME}
    assert got.etag is None


def test_movie_via_entity_layer() -> None:
    from tablesdk._entities._entity import DynamicEntity, entity_from_payload, entity_to_payload

    movie = DynamicEntity(PartitionKey="Action", RowKey="Cop Out", Favorite=False, Language="English",
                          Rating=4.5, ReleaseYear=2010, Revenue=0.0)
    fmt = AtomFormat()
    ours = etree.fromstring(fmt.serialize_entity(entity_to_payload(movie)))
    seed = etree.fromstring(read("seed_movie_insert_entry.xml"))

    def props(root: etree._Element) -> dict[str, Any]:
        found = root.find(f"{A}content/{M}properties")
        assert found is not None
        return {el.tag: shape(el) for el in found if el.tag != f"{D}Timestamp"}

    assert props(ours) == props(seed)
    back = entity_from_payload(DynamicEntity, fmt.parse_entity(read("seed_movie_insert_entry.xml")))
    assert back == movie


# ------------------------------------------------------------------ a query feed


def test_query_feed_parses_to_exact_typed_values() -> None:
    entities = AtomFormat().parse_entities(read("atom_query_feed.xml"))
    assert len(entities) == 3
    first, second, third = entities

    assert first.etag == "W/\"datetime'2015-06-01T10%3A20%3A29.1234567Z'\""
    assert first.values == {
        "PartitionKey": "Customer01", "RowKey": "Alpha",
        "Timestamp": EdmDateTime(2015, 6, 1, 10, 20, 29, 123456, UTC, ticks_remainder=7),
        "Address": "123 Lakeview Blvd, Redmond WA 98052", "Age": -2147483648, "AmountDue": 200.23,
        "CustomerCode": uuid.UUID("c9da6455-213d-42c9-9a79-3e9149a57833"),
        "CustomerSince": EdmDateTime(2008, 7, 10, 0, 0, 0, 0, UTC, ticks_remainder=1),
        "IsActive": True, "NumberOfOrders": 9007199254740993, "BinaryData": b"\x00\x01\x02\xff",
    }
    assert first.values["Timestamp"].ticks_remainder == 7
    assert first.values["CustomerSince"].ticks_remainder == 1
    assert first.types == {
        "PartitionKey": T.STRING, "RowKey": T.STRING, "Timestamp": T.DATETIME, "Address": T.STRING,
        "Age": T.INT32, "AmountDue": T.DOUBLE, "CustomerCode": T.GUID, "CustomerSince": T.DATETIME,
        "IsActive": T.BOOLEAN, "NumberOfOrders": T.INT64, "BinaryData": T.BINARY,
    }

    assert second.etag == "W/\"datetime'2015-06-01T10%3A20%3A29.7654321Z'\""
    v = second.values
    assert math.isnan(v["NotANumber"]) and v["PlusInf"] == math.inf and v["MinusInf"] == -math.inf
    assert v["WholeDouble"] == 3.0 and type(v["WholeDouble"]) is float
    assert v["MinInt64"] == -(2**63) and v["MaxInt64"] == 2**63 - 1
    assert v["Latest"] == EdmDateTime(9999, 12, 31, 23, 59, 59, 999999, UTC) and v["Latest"].ticks_remainder == 9
    assert v["Earliest"] == datetime(1601, 1, 1, tzinfo=UTC) and v["Earliest"].ticks_remainder == 0
    assert v["Nickname"] is None and second.types["Nickname"] is T.STRING
    assert v["Score"] is None and second.types["Score"] is T.INT32
    assert second.types["NotANumber"] is T.DOUBLE and second.types["MaxInt64"] is T.INT64

    assert third.etag == "W/\"datetime'2015-06-01T10%3A20%3A30.0000000Z'\""
    assert third.values == {
        "PartitionKey": "Customer02", "RowKey": "O'Neil",
        "Timestamp": datetime(2015, 6, 1, 10, 20, 30, tzinfo=UTC),
        "Markup": "a <b> & \"c\" 'd'", "Lines": " line1\r\nline2 ", "Unicode": "é中😀", "Empty": "",
        "EmptyBinary": b"", "Flag": False, "Count": 2147483647,
    }
    assert third.types["Empty"] is T.STRING and third.types["EmptyBinary"] is T.BINARY


def test_point_entry_etag_beats_header() -> None:
    got = AtomFormat().parse_entity(read("atom_point_entry.xml"), etag='W/"from-header"')
    assert got.etag == "W/\"datetime'2015-06-01T10%3A20%3A29.1234567Z'\""
    assert got.values["Age"] == 23


def test_feed_round_trips_through_our_writer() -> None:
    fmt = AtomFormat()
    for entity in fmt.parse_entities(read("atom_query_feed.xml")):
        back = fmt.parse_entity(fmt.serialize_entity(entity))
        entity.values.pop("Timestamp")
        entity.types.pop("Timestamp")
        assert back.types == entity.types
        for name, value in entity.values.items():
            if isinstance(value, float) and math.isnan(value):
                assert math.isnan(back.values[name])
            else:
                assert back.values[name] == value and type(back.values[name]) is type(value)


# ------------------------------------------------------------------ tables


def test_query_tables_feed() -> None:
    assert AtomFormat().parse_tables(read("atom_query_tables_feed.xml")) == ["Customers", "Movies"]


def test_create_table_response_entry() -> None:
    assert AtomFormat().parse_tables(read("atom_create_table_entry.xml")) == ["mytable"]


def test_create_table_request_shape() -> None:
    ours = etree.fromstring(AtomFormat().serialize_table("mytable"))
    sample = etree.fromstring(read("atom_create_table_entry.xml"))
    assert ours.find(f"{A}content/{M}properties/{D}TableName").text == "mytable"  # type: ignore[union-attr]
    assert ours.find(f"{A}content").get("type") == sample.find(f"{A}content").get("type")  # type: ignore[union-attr]


# ------------------------------------------------------------------ XML attacks


@pytest.mark.parametrize("name", ["xxe_external_entity.xml", "billion_laughs.xml"])
def test_dtd_documents_are_refused_without_expansion(name: str) -> None:
    # libxml2 may stop the bomb itself (entity amplification limit) before our
    # DOCTYPE check runs; either way it is a ValueError and nothing is expanded.
    body = read(name)
    fmt = AtomFormat()
    started = time.perf_counter()
    for parse in (fmt.parse_entities, fmt.parse_entity, fmt.parse_tables):
        with pytest.raises(ValueError, match="DOCTYPE|amplification") as info:
            parse(body)
        assert "root:" not in str(info.value) and "lollol" not in str(info.value)
    assert time.perf_counter() - started < 1.0
