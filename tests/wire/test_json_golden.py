"""JSON golden bodies: query responses at the three metadata levels, point reads, tables, the Movie insert."""

from __future__ import annotations

import json
import math
import uuid
from datetime import datetime, timezone
from pathlib import Path

from tablesdk._entities._edm import EdmDateTime, EdmType, EntityPayload
from tablesdk._formats.json import JsonFormat

DATA = Path(__file__).resolve().parent / "data"
UTC = timezone.utc
T = EdmType

MOVIE = EntityPayload(
    {"PartitionKey": "Action", "RowKey": "Cop Out", "Favorite": False, "Language": "English", "Rating": 4.5,
     "ReleaseYear": 2010, "Revenue": 0.0},
    {"PartitionKey": T.STRING, "RowKey": T.STRING, "Favorite": T.BOOLEAN, "Language": T.STRING,
     "Rating": T.DOUBLE, "ReleaseYear": T.INT32, "Revenue": T.DOUBLE},
)

CUSTOMER_ALPHA = {
    "PartitionKey": "Customer01", "RowKey": "Alpha",
    "Timestamp": EdmDateTime(2019, 6, 1, 10, 20, 29, 123456, UTC, ticks_remainder=7),
    "Address": "123 Lakeview Blvd, Redmond WA 98052", "Age": -2147483648, "AmountDue": 200.23,
    "CustomerCode": uuid.UUID("c9da6455-213d-42c9-9a79-3e9149a57833"),
    "CustomerSince": EdmDateTime(2008, 7, 10, 0, 0, 0, 0, UTC, ticks_remainder=1),
    "IsActive": True, "NumberOfOrders": 9007199254740993, "BinaryData": b"\x00\x01\x02\xff",
}
CUSTOMER_ALPHA_TYPES = {
    "PartitionKey": T.STRING, "RowKey": T.STRING, "Timestamp": T.DATETIME, "Address": T.STRING,
    "Age": T.INT32, "AmountDue": T.DOUBLE, "CustomerCode": T.GUID, "CustomerSince": T.DATETIME,
    "IsActive": T.BOOLEAN, "NumberOfOrders": T.INT64, "BinaryData": T.BINARY,
}


def read(name: str) -> bytes:
    return (DATA / name).read_bytes()


# ------------------------------------------------------------------ the Movie insert


def test_movie_insert_golden_bytes() -> None:
    assert JsonFormat().serialize_entity(MOVIE) == read("json_movie_insert_expected.json").rstrip(b"\n")


def test_movie_insert_reads_back_typed() -> None:
    fmt = JsonFormat()
    got = fmt.parse_entity(fmt.serialize_entity(MOVIE))
    assert got.values == MOVIE.values and got.types == MOVIE.types
    assert type(got.values["Revenue"]) is float


def test_movie_via_entity_layer() -> None:
    from tablesdk._entities._entity import DynamicEntity, entity_from_payload, entity_to_payload

    movie = DynamicEntity(PartitionKey="Action", RowKey="Cop Out", Favorite=False, Language="English",
                          Rating=4.5, ReleaseYear=2010, Revenue=0.0)
    fmt = JsonFormat()
    body = fmt.serialize_entity(entity_to_payload(movie))
    assert json.loads(body) == json.loads(read("json_movie_insert_expected.json"))
    assert entity_from_payload(DynamicEntity, fmt.parse_entity(body)) == movie


# ------------------------------------------------------------------ query responses


def test_minimalmetadata_query_parses_to_exact_typed_values() -> None:
    first, second, third = JsonFormat().parse_entities(read("json_query_minimalmetadata.json"))

    assert first.etag == "W/\"datetime'2019-06-01T10%3A20%3A29.1234567Z'\""
    assert first.values == CUSTOMER_ALPHA
    assert first.types == CUSTOMER_ALPHA_TYPES
    assert first.values["Timestamp"].ticks_remainder == 7
    assert first.values["CustomerSince"].ticks_remainder == 1

    v = second.values
    assert second.etag == "W/\"datetime'2019-06-01T10%3A20%3A29.7654321Z'\""
    assert math.isnan(v["NotANumber"]) and v["PlusInf"] == math.inf and v["MinusInf"] == -math.inf
    assert v["WholeDouble"] == 3.0 and type(v["WholeDouble"]) is float and second.types["WholeDouble"] is T.DOUBLE
    assert v["MinInt64"] == -(2**63) and v["MaxInt64"] == 2**63 - 1 and second.types["MaxInt64"] is T.INT64
    assert v["Latest"] == EdmDateTime(9999, 12, 31, 23, 59, 59, 999999, UTC) and v["Latest"].ticks_remainder == 9
    assert v["Earliest"] == datetime(1601, 1, 1, tzinfo=UTC)
    assert v["Nickname"] is None and "Nickname" not in second.types
    assert v["BigUnannotated"] == 2147483648 and second.types["BigUnannotated"] is T.INT64
    assert not any("@" in key or key.startswith("odata.") for key in v)

    assert third.values == {
        "PartitionKey": "Customer02", "RowKey": "O'Neil", "Timestamp": datetime(2019, 6, 1, 10, 20, 30, tzinfo=UTC),
        "Markup": "a <b> & \"c\" 'd'", "Lines": " line1\r\nline2 ", "Unicode": "é中😀", "Raw": "é中😀",
        "Control": "\x01\x00", "Empty": "", "EmptyBinary": b"", "Flag": False, "Count": 2147483647,
    }
    assert third.types["Flag"] is T.BOOLEAN and third.types["EmptyBinary"] is T.BINARY


def test_fullmetadata_query() -> None:
    (only,) = JsonFormat("fullmetadata").parse_entities(read("json_query_fullmetadata.json"))
    assert only.etag == "W/\"datetime'2019-06-01T10%3A20%3A29.1234567Z'\""
    assert only.values == {k: v for k, v in CUSTOMER_ALPHA.items()} | {"Age": 23}
    assert only.types == CUSTOMER_ALPHA_TYPES


def test_nometadata_query_leaves_types_unknown() -> None:
    (only,) = JsonFormat("nometadata").parse_entities(read("json_query_nometadata.json"))
    assert only.etag is None
    assert only.values == {
        "PartitionKey": "Customer01", "RowKey": "Alpha",
        "Timestamp": EdmDateTime(2019, 6, 1, 10, 20, 29, 123456, UTC, ticks_remainder=7),
        "Address": "123 Lakeview Blvd, Redmond WA 98052", "Age": 23, "AmountDue": 200.23,
        "CustomerCode": "c9da6455-213d-42c9-9a79-3e9149a57833", "CustomerSince": "2008-07-10T00:00:00.0000001Z",
        "IsActive": True, "NumberOfOrders": "9007199254740993", "BinaryData": "AAEC/w==", "WholeDouble": 3,
        "NotANumber": "NaN",
    }
    assert only.types == {"PartitionKey": T.STRING, "RowKey": T.STRING, "Timestamp": T.DATETIME}


def test_nometadata_values_are_coerced_by_declared_entity_types() -> None:
    from tablesdk._entities._entity import TableEntity, entity_from_payload

    class Customer(TableEntity):
        CustomerCode: uuid.UUID
        CustomerSince: datetime
        NumberOfOrders: int
        BinaryData: bytes
        WholeDouble: float

    (only,) = JsonFormat("nometadata").parse_entities(read("json_query_nometadata.json"))
    customer = entity_from_payload(Customer, only)
    assert customer.CustomerCode == uuid.UUID("c9da6455-213d-42c9-9a79-3e9149a57833")
    assert customer.CustomerSince == EdmDateTime(2008, 7, 10, tzinfo=UTC)
    assert customer.NumberOfOrders == 9007199254740993
    assert customer.BinaryData == b"\x00\x01\x02\xff"
    assert customer.WholeDouble == 3.0 and type(customer.WholeDouble) is float
    assert customer.Timestamp.ticks_remainder == 7


def test_minimal_and_full_metadata_agree() -> None:
    minimal = JsonFormat().parse_entities(read("json_query_minimalmetadata.json"))[0]
    full = JsonFormat("fullmetadata").parse_entities(read("json_query_fullmetadata.json"))[0]
    minimal.values["Age"] = full.values["Age"]
    assert minimal == full


def test_point_entity_etag() -> None:
    fmt = JsonFormat()
    got = fmt.parse_entity(read("json_point_entity.json"), etag='W/"from-header"')
    assert got.etag == "W/\"datetime'2019-06-01T10%3A20%3A29.1234567Z'\""
    assert got.values == {"PartitionKey": "Customer01", "RowKey": "Alpha",
                          "Timestamp": CUSTOMER_ALPHA["Timestamp"], "Age": 23}


def test_query_round_trips_through_our_writer() -> None:
    fmt = JsonFormat()
    for entity in fmt.parse_entities(read("json_query_minimalmetadata.json")):
        back = fmt.parse_entity(fmt.serialize_entity(entity))
        assert "Timestamp" not in back.values
        for name, value in entity.values.items():
            if name == "Timestamp":
                continue
            if isinstance(value, float) and math.isnan(value):
                assert math.isnan(back.values[name])
            else:
                assert back.values[name] == value and type(back.values[name]) is type(value), name
            if value is not None:
                assert back.types[name] is entity.types[name], name


# ------------------------------------------------------------------ tables


def test_query_tables() -> None:
    assert JsonFormat().parse_tables(read("json_query_tables_minimalmetadata.json")) == ["Customers", "Movies"]
    assert JsonFormat("fullmetadata").parse_tables(read("json_query_tables_fullmetadata.json")) == [
        "Customers", "Movies",
    ]


def test_create_table_response() -> None:
    assert JsonFormat().parse_tables(read("json_create_table_response.json")) == ["mytable"]


def test_create_table_request() -> None:
    assert json.loads(JsonFormat().serialize_table("mytable")) == {"TableName": "mytable"}
