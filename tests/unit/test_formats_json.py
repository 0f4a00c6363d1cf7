"""JsonFormat: bodies, annotations, the three metadata levels, round trips at the EDM limits."""

from __future__ import annotations

import base64
import json
import math
import pickle
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tablesdk._entities._edm import (
    EdmDateTime,
    EdmType,
    EntityPayload,
    from_json_value,
    parse_datetime,
)
from tablesdk._core._errors import TableValidationError
from tablesdk._formats import PayloadFormat, get_format
from tablesdk._formats.json import JsonFormat
from tablesdk._entities._edm import _parse_datetime_slow

from support import EDM_LIMITS, assert_same_value, payload

UTC = timezone.utc
T = EdmType


@pytest.fixture
def js() -> JsonFormat:
    return JsonFormat()


def limits_payload() -> EntityPayload:
    return payload(
        **EDM_LIMITS, IntAsDouble=(7, T.DOUBLE),
        Empty=("", T.STRING), Unicode=("é中😀\U0010ffff\u00a0\u2028", T.STRING),
        Spaces=("  lead and trail  ", T.STRING), Controls=("\x00\x01\x1f\x7f\ufffe", T.STRING),
        Newlines=("a\r\nb\rc\nd\te", T.STRING), Quotes=("\"\\/'", T.STRING),
    )


# ------------------------------------------------------------------ the interface


@pytest.mark.parametrize("level", ["nometadata", "minimalmetadata", "fullmetadata"])
def test_identity_and_headers(level: str) -> None:
    fmt = JsonFormat(metadata=level)
    assert isinstance(fmt, PayloadFormat)
    assert fmt.name == "json" and fmt.metadata == level
    assert fmt.default_api_version == "2019-02-02"
    assert fmt.content_type == "application/json"
    assert fmt.request_headers() == {
        "Accept": f"application/json;odata={level}",
        "DataServiceVersion": "3.0;NetFx",
        "MaxDataServiceVersion": "3.0;NetFx",
    }


def test_default_level_and_bad_level() -> None:
    assert JsonFormat().metadata == "minimalmetadata"
    with pytest.raises(ValueError, match="metadata"):
        JsonFormat(metadata="verbose")


def test_get_format_passes_options() -> None:
    fmt = get_format("json", metadata="nometadata")
    assert isinstance(fmt, JsonFormat) and fmt.metadata == "nometadata"


# ------------------------------------------------------------------ writing


def test_body_shape_and_annotations(js: JsonFormat) -> None:
    p = payload(
        S=("x", T.STRING), B=(True, T.BOOLEAN), I=(3, T.INT32), L=(3, T.INT64), D=(2.0, T.DOUBLE),
        W=(EdmDateTime(2024, 1, 2, 3, 4, 5, 123456, UTC, ticks_remainder=7), T.DATETIME),
        G=(uuid.UUID(int=1), T.GUID), X=(b"\x01\x02", T.BINARY),
    )
    body = js.serialize_entity(p)
    assert body == (
        b'{"PartitionKey":"pk","RowKey":"rk","S":"x","B":true,"I":3,'
        b'"L":"3","L@odata.type":"Edm.Int64","D":2.0,"D@odata.type":"Edm.Double",'
        b'"W":"2024-01-02T03:04:05.1234567Z","W@odata.type":"Edm.DateTime",'
        b'"G":"00000000-0000-0000-0000-000000000001","G@odata.type":"Edm.Guid",'
        b'"X":"AQI=","X@odata.type":"Edm.Binary"}'
    )


def test_non_finite_doubles_travel_as_strings(js: JsonFormat) -> None:
    body = json.loads(js.serialize_entity(payload(A=(math.nan, T.DOUBLE), B=(math.inf, T.DOUBLE), C=(-math.inf, T.DOUBLE))))
    assert (body["A"], body["B"], body["C"]) == ("NaN", "Infinity", "-Infinity")
    assert body["A@odata.type"] == "Edm.Double"


def test_nulls_are_json_null_without_annotation(js: JsonFormat) -> None:
    body = json.loads(js.serialize_entity(payload(N=(None, T.INT64), S=(None, T.STRING))))
    assert body == {"PartitionKey": "pk", "RowKey": "rk", "N": None, "S": None}


def test_timestamp_is_never_sent(js: JsonFormat) -> None:
    body = json.loads(js.serialize_entity(payload(Timestamp=(datetime(2020, 1, 1, tzinfo=UTC), T.DATETIME))))
    assert "Timestamp" not in body and "Timestamp@odata.type" not in body


def test_non_ascii_is_utf8_not_escaped(js: JsonFormat) -> None:
    body = js.serialize_entity(payload(U=("é中😀", T.STRING)))
    assert "é中😀".encode() in body and b"\\u" not in body


def test_control_characters_are_escaped(js: JsonFormat) -> None:
    body = js.serialize_entity(payload(C=("\x00\x01\n", T.STRING)))
    assert b'"C":"\\u0000\\u0001\\n"' in body


def test_lone_surrogate_is_refused_naming_the_property(js: JsonFormat) -> None:
    with pytest.raises(TableValidationError) as info:
        js.serialize_entity(payload(Comment=("ab\ud800", T.STRING)))
    assert info.value.field == "Comment" and "index 2" in str(info.value)


def test_types_inferred_when_missing(js: JsonFormat) -> None:
    p = EntityPayload({"PartitionKey": "p", "RowKey": "r", "Big": 2**40, "F": 1.0}, {})
    body = json.loads(js.serialize_entity(p))
    assert body["Big"] == str(2**40) and body["Big@odata.type"] == "Edm.Int64"
    assert body["F@odata.type"] == "Edm.Double"


def test_string_property_must_be_str(js: JsonFormat) -> None:
    with pytest.raises(TableValidationError, match="Edm.String needs a str"):
        js.serialize_entity(payload(S=(5, T.STRING)))


def test_serialize_table(js: JsonFormat) -> None:
    assert js.serialize_table("mytable") == b'{"TableName":"mytable"}'


# ------------------------------------------------------------------ round trips


@pytest.mark.parametrize("level", ["minimalmetadata", "fullmetadata"])
def test_round_trip_every_type_at_its_limits(level: str) -> None:
    fmt = JsonFormat(level)
    sent = limits_payload()
    got = fmt.parse_entity(fmt.serialize_entity(sent))
    assert list(got.values) == list(sent.values)
    assert got.types == sent.types
    for name, want in sent.values.items():
        assert_same_value(name, got.values[name], want, sent.types[name])


def test_round_trip_keeps_bytes_exact(js: JsonFormat) -> None:
    sent = limits_payload()
    body = js.serialize_entity(sent)
    assert js.serialize_entity(js.parse_entity(body)) == body


def test_nometadata_round_trip_keeps_raw_values_and_key_types() -> None:
    fmt = JsonFormat("nometadata")
    body = b'{"PartitionKey":"p","RowKey":"r","I":5,"F":1.5,"S":"2024-01-02T03:04:05Z","B":true,"N":null}'
    got = fmt.parse_entity(body)
    assert got.values == {"PartitionKey": "p", "RowKey": "r", "I": 5, "F": 1.5, "S": "2024-01-02T03:04:05Z", "B": True, "N": None}
    assert got.types == {"PartitionKey": T.STRING, "RowKey": T.STRING}


def test_nometadata_still_honours_annotations() -> None:
    got = JsonFormat("nometadata").parse_entity(b'{"L":"5","L@odata.type":"Edm.Int64"}')
    assert got.values == {"L": 5} and got.types == {"L": T.INT64}


# ------------------------------------------------------------------ reading


def test_unannotated_values_typed_by_json_kind(js: JsonFormat) -> None:
    got = js.parse_entity(b'{"S":"5","B":false,"I":-2147483648,"Big":2147483648,"F":1.0,"N":null}')
    assert got.types == {"S": T.STRING, "B": T.BOOLEAN, "I": T.INT32, "Big": T.INT64, "F": T.DOUBLE}
    assert got.values["N"] is None and "N" not in got.types


def test_annotation_before_or_after_the_value(js: JsonFormat) -> None:
    a = js.parse_entity(b'{"L@odata.type":"Edm.Int64","L":"9007199254740993"}')
    b = js.parse_entity(b'{"L":"9007199254740993","L@odata.type":"Edm.Int64"}')
    assert a.values == b.values == {"L": 9007199254740993}
    assert a.types == b.types == {"L": T.INT64}


def test_annotated_null_keeps_its_type(js: JsonFormat) -> None:
    got = js.parse_entity(b'{"L@odata.type":"Edm.Int64","L":null}')
    assert got.values == {"L": None} and got.types == {"L": T.INT64}


def test_annotation_without_property_and_other_annotations_are_ignored(js: JsonFormat) -> None:
    got = js.parse_entity(b'{"odata.type":"acct.t","odata.id":"x","Ghost@odata.type":"Edm.Int64","A@odata.editLink":"e","A":1}')
    assert got.values == {"A": 1} and got.types == {"A": T.INT32}


def test_timestamp_is_a_datetime_without_annotation_at_every_level() -> None:
    for level in ("nometadata", "minimalmetadata", "fullmetadata"):
        got = JsonFormat(level).parse_entity(b'{"Timestamp":"2019-06-01T10:20:29.1234567Z"}')
        assert got.types == {"Timestamp": T.DATETIME}
        assert isinstance(got.values["Timestamp"], EdmDateTime)
        assert got.values["Timestamp"].ticks_remainder == 7


def test_etag_from_body_wins_over_header(js: JsonFormat) -> None:
    assert js.parse_entity(b'{"odata.etag":"W/\\"b\\"","A":1}', etag='W/"h"').etag == 'W/"b"'
    assert js.parse_entity(b'{"A":1}', etag='W/"h"').etag == 'W/"h"'
    assert js.parse_entities(b'{"value":[{"A":1}]}')[0].etag is None


def test_parse_entity_accepts_value_array_of_one(js: JsonFormat) -> None:
    assert js.parse_entity(b'{"value":[{"A":1}]}').values == {"A": 1}
    with pytest.raises(ValueError, match="found 2"):
        js.parse_entity(b'{"value":[{"A":1},{"A":2}]}')
    with pytest.raises(ValueError, match="found 0"):
        js.parse_entity(b'{"value":[]}')


def test_parse_entities_of_a_single_object(js: JsonFormat) -> None:
    assert [p.values for p in js.parse_entities(b'{"A":1}')] == [{"A": 1}]
    assert [p.values for p in js.parse_entities(b'{"value":5,"A":1}')] == [{"value": 5, "A": 1}]
    assert js.parse_entity(b'{"value":"x"}').values == {"value": "x"}
    assert js.parse_entities(b'{"odata.metadata":"m","value":[]}') == []


@pytest.mark.parametrize(
    "body, message",
    [
        (b'{"I@odata.type":"Edm.Int32","I":"x"}', "property 'I': not a valid Edm.Int32"),
        (b'{"G@odata.type":"Edm.Guid","G":"nope"}', "property 'G'"),
        (b'{"W@odata.type":"Edm.DateTime","W":"not-a-date"}', "property 'W'"),
        (b'{"X@odata.type":"Edm.Binary","X":"@@@"}', "property 'X'"),
        (b'{"X@odata.type":"Edm.Binary","X":5}', "property 'X'"),
        (b'{"D@odata.type":"Edm.Double","D":"abc"}', "property 'D'"),
        (b'{"U@odata.type":"Edm.Byte","U":1}', "property 'U': unknown EDM type 'Edm.Byte'"),
        (b'{"U@odata.type":["x"],"U":1}', "property 'U': unknown EDM type"),
        (b'{"O":{"a":1}}', "property 'O': unsupported JSON value of type dict"),
        (b'{"O":[1]}', "property 'O': unsupported JSON value of type list"),
        (b'{"Timestamp":"yesterday"}', "property 'Timestamp'"),
    ],
)
def test_bad_values_raise_value_error_naming_the_property(js: JsonFormat, body: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        js.parse_entity(body)


def test_nometadata_rejects_nested_values_too() -> None:
    with pytest.raises(ValueError, match="property 'O'"):
        JsonFormat("nometadata").parse_entity(b'{"O":{"a":1}}')


@pytest.mark.parametrize("body", [b"", b"   ", b"not json", b"[1,2]", b"42", b'{"value":{}}', b'{"value":[1]}', b"\xff\xfe\xfa"])
def test_malformed_bodies_raise_value_error(js: JsonFormat, body: bytes) -> None:
    with pytest.raises(ValueError):
        js.parse_entities(body)


@pytest.mark.parametrize("body", [b"", b"[]", b'{"value":[{"Name":"x"}]}', b'{"value":[{"TableName":5}]}', b'{"value":{}}'])
def test_parse_tables_errors(js: JsonFormat, body: bytes) -> None:
    with pytest.raises(ValueError):
        js.parse_tables(body)


def test_utf16_and_utf8_bom_bodies_decode(js: JsonFormat) -> None:
    text = '{"A":"é"}'
    assert js.parse_entity(text.encode("utf-16")).values == {"A": "é"}
    assert js.parse_entity(text.encode("utf-8-sig")).values == {"A": "é"}


# ------------------------------------------------------------------ fast paths agree with edm


@pytest.mark.parametrize(
    "text",
    [
        "2024-01-02T03:04:05.1234567Z", "0001-01-01T00:00:00.0000000Z", "9999-12-31T23:59:59.9999999Z",
        "1601-01-01T00:00:00.0000000Z", "2024-02-29T23:59:59.0000009Z", "2024-01-02T03:04:05Z",
        "2024-01-02T03:04:05.12Z", "2024-01-02T03:04:05.123456789Z", "2024-01-02T05:04:05.1234567+02:00",
        "2024-01-02T03:04:05", "2024-01-02 03:04:05.1234567Z", "2024-01-02X03:04:05.1234567Z",
        "2024-W01-2T03:04:05.1234567Z", "2024-01-02T24:00:00.0000000Z",
    ],
)
def test_fast_datetime_path_equals_the_general_parser(text: str) -> None:
    got, want = parse_datetime(text), _parse_datetime_slow(text)
    assert type(got) is EdmDateTime and type(want) is EdmDateTime
    assert got == want and got.ticks_remainder == want.ticks_remainder
    assert got.tzinfo is want.tzinfo and got.utcoffset() == timedelta(0)
    assert got.isoformat() == want.isoformat()
    assert repr(got) == repr(want)
    again = pickle.loads(pickle.dumps(got))
    assert again == got and again.ticks_remainder == got.ticks_remainder


@pytest.mark.parametrize(
    "text",
    ["2024-13-02T03:04:05.1234567Z", "2024-01-02T03:04:05.123456xZ", "2024-01-02T25:04:05.1234567Z", "garbage", ""],
)
def test_fast_datetime_path_rejects_like_the_general_parser(text: str) -> None:
    with pytest.raises(ValueError):
        parse_datetime(text)
    with pytest.raises(ValueError):
        _parse_datetime_slow(text)


@pytest.mark.parametrize(
    "edm_type, wire",
    [
        (T.INT64, "-9223372036854775808"), (T.INT32, 7), (T.DOUBLE, 1.5), (T.DOUBLE, 2), (T.DOUBLE, "NaN"),
        (T.DOUBLE, "-Infinity"), (T.GUID, "C9DA6455-213D-42C9-9A79-3E9149A57833"),
        (T.BINARY, base64.b64encode(bytes(range(256))).decode()), (T.BINARY, ""), (T.BOOLEAN, True),
    ],
)
def test_annotated_conversions_equal_edm_from_json_value(js: JsonFormat, edm_type: EdmType, wire: Any) -> None:
    got = js.parse_entity(json.dumps({"V": wire, "V@odata.type": edm_type.value}).encode()).values["V"]
    want = from_json_value(wire, edm_type)
    assert type(got) is type(want)
    assert got == want or (isinstance(want, float) and math.isnan(want) and math.isnan(got))


@pytest.mark.parametrize("wire", ["AA=A", "A", "AAA=====", " AAAA", "AA\nAA"])
def test_binary_validation_matches_edm(js: JsonFormat, wire: str) -> None:
    with pytest.raises(ValueError):
        from_json_value(wire, T.BINARY)
    with pytest.raises(ValueError):
        js.parse_entity(json.dumps({"V": wire, "V@odata.type": "Edm.Binary"}).encode())
