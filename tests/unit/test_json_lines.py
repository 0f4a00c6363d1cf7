"""JsonFormat.serialize_entity_lines: exactly serialize_entity's bytes, one entity a line, for every EDM type."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tablesdk._entities._edm import EdmDateTime, EdmType, EntityPayload
from tablesdk._core._errors import TableValidationError
from tablesdk._formats import get_format
from tablesdk._formats import json as json_module
from tablesdk._formats.json import JsonFormat

from support import EDM_LIMITS

T = EdmType
UTC = timezone.utc
CODEC = get_format("json")
assert isinstance(CODEC, JsonFormat)


def one_by_one(payloads: list[EntityPayload]) -> bytes:
    """What the export wrote before: serialize_entity per entity, a newline after each."""
    return b"".join(CODEC.serialize_entity(p) + b"\n" for p in payloads)


def entity(values: dict[str, Any], types: dict[str, EdmType] | None = None) -> EntityPayload:
    base: dict[str, Any] = {"PartitionKey": "p", "RowKey": "r"}
    base.update(values)
    all_types = {"PartitionKey": T.STRING, "RowKey": T.STRING}
    all_types.update(types if types is not None else {})
    return EntityPayload(base, all_types)


def assert_same(payloads: list[EntityPayload]) -> bytes:
    lines = CODEC.serialize_entity_lines(payloads)
    assert lines == one_by_one(payloads)
    return lines


@pytest.mark.parametrize("name", sorted(EDM_LIMITS))
def test_every_edm_limit_alone(name: str) -> None:
    value, edm_type = EDM_LIMITS[name]
    assert_same([entity({name: value}, {name: edm_type})])


def test_every_edm_limit_in_one_entity_and_one_page() -> None:
    every = entity({n: v for n, (v, _) in EDM_LIMITS.items()}, {n: t for n, (_, t) in EDM_LIMITS.items()})
    single = [entity({n: v}, {n: t}) for n, (v, t) in EDM_LIMITS.items()]
    assert_same([every, *single, every])


def test_a_parsed_query_page_takes_the_direct_path_with_the_same_bytes() -> None:
    body = (
        b'{"odata.metadata":"m","value":[{"odata.etag":"W/\\"x\\"","PartitionKey":"p","RowKey":"1",'
        b'"Timestamp":"2024-05-01T10:00:00.1234567Z","Name":"Ann","Count":7,"Active":true,"Nothing":null,'
        b'"Big":"1099511627776","Big@odata.type":"Edm.Int64","Neg":"-9223372036854775808","Neg@odata.type":"Edm.Int64",'
        b'"When":"2024-02-29T23:59:59.1234567Z","When@odata.type":"Edm.DateTime",'
        b'"Whole":"2024-02-29T23:59:59Z","Whole@odata.type":"Edm.DateTime",'
        b'"Ratio":0.1,"Ratio@odata.type":"Edm.Double","One":1.0,"One@odata.type":"Edm.Double",'
        b'"Nan":"NaN","Nan@odata.type":"Edm.Double","Inf":"-Infinity","Inf@odata.type":"Edm.Double",'
        b'"Id":"c9da6455-213d-42c9-9a79-3e9149a57833","Id@odata.type":"Edm.Guid",'
        b'"Blob":"AAEC/w==","Blob@odata.type":"Edm.Binary","Quote":"a\\"b\\\\c\\n\\u0001"}]}'
    )
    payloads = CODEC.parse_entities(body)
    lines = assert_same(payloads)
    assert lines == (
        b'{"PartitionKey":"p","RowKey":"1","Name":"Ann","Count":7,"Active":true,"Nothing":null,'
        b'"Big":"1099511627776","Big@odata.type":"Edm.Int64","Neg":"-9223372036854775808","Neg@odata.type":"Edm.Int64",'
        b'"When":"2024-02-29T23:59:59.1234567Z","When@odata.type":"Edm.DateTime",'
        b'"Whole":"2024-02-29T23:59:59.0000000Z","Whole@odata.type":"Edm.DateTime",'
        b'"Ratio":0.1,"Ratio@odata.type":"Edm.Double","One":1.0,"One@odata.type":"Edm.Double",'
        b'"Nan":"NaN","Nan@odata.type":"Edm.Double","Inf":"-Infinity","Inf@odata.type":"Edm.Double",'
        b'"Id":"c9da6455-213d-42c9-9a79-3e9149a57833","Id@odata.type":"Edm.Guid",'
        b'"Blob":"AAEC/w==","Blob@odata.type":"Edm.Binary","Quote":"a\\"b\\\\c\\n\\u0001"}\n'
    )
    # Finite values of the query's own types are written directly, not through the general encoder.
    finite = CODEC.parse_entities(body.replace(b'"NaN"', b"2.5").replace(b'"-Infinity"', b"3.5"))
    assert json_module._template_text(finite[0]) is not None
    assert_same(finite)


@pytest.mark.parametrize(
    "values, types",
    [
        ({"Plain": "no types: inferred"}, {}),
        ({"Int": 5, "Float": 2.5, "Flag": False, "Dt": datetime(2024, 1, 1, tzinfo=UTC)}, {}),
        ({"Flag": True}, {"Flag": T.INT32}),  # a bool under Int32: the encoder writes true
        ({"N": 3}, {"N": T.DOUBLE}),  # an int under Double: written as 3.0
        ({"G": "c9da6455-213d-42c9-9a79-3e9149a57833"}, {"G": T.GUID}),  # a str Guid
        ({"B": bytearray(b"\x00\xff")}, {"B": T.BINARY}),
        ({"B": memoryview(b"\x00\xff")}, {"B": T.BINARY}),
        ({"S": type("Sub", (str,), {})("sub")}, {"S": T.STRING}),
        ({"x@odata.type": "Edm.Int64", "x": 5}, {"x@odata.type": T.STRING, "x": T.INT32}),
        ({"Timestamp": "not a date"}, {"Timestamp": T.STRING}),
        ({"Timestamp": datetime(2024, 1, 1, tzinfo=UTC)}, {"Timestamp": T.DATETIME}),
        ({"Dt": datetime(2024, 1, 1, 12, tzinfo=timezone(timedelta(hours=-5)))}, {"Dt": T.DATETIME}),
        ({"Dt": EdmDateTime(2024, 1, 1, tzinfo=UTC, ticks_remainder=3)}, {"Dt": T.DATETIME}),
        ({"Z": -0.0, "Big": 2**63 - 1, "Small": -(2**63)}, {"Z": T.DOUBLE, "Big": T.INT64, "Small": T.INT64}),
        ({"Name": "café ☕ \U0001f600"}, {"Name": T.STRING}),
        ({"Name": "line\u2028sep\u2029end"}, {"Name": T.STRING}),
        ({"Caf\u00e9": 1}, {"Caf\u00e9": T.INT32}),
        ({"Null": None, "NullI64": None}, {"NullI64": T.INT64}),
    ],
)
def test_values_off_the_common_path_give_the_same_bytes(values: dict[str, Any], types: dict[str, EdmType]) -> None:
    plain = entity({"Other": "ascii"}, {"Other": T.STRING})
    assert_same([entity(values, types)])
    assert_same([plain, entity(values, types), plain])  # one odd entity in a page of plain ones


def test_a_large_non_ascii_body_is_escaped_as_serialize_entity_does() -> None:
    big = entity({"Text": "\u00e9" * (json_module.MAX_RAW_UTF8_BODY // 2 + 10)}, {"Text": T.STRING})
    lines = assert_same([entity({}), big])
    assert lines.isascii() and b"\\u00e9" in lines


def test_errors_are_serialize_entity_s() -> None:
    lone = entity({"Bad": "x\ud800"}, {"Bad": T.STRING})
    with pytest.raises(TableValidationError, match="Bad"):
        CODEC.serialize_entity_lines([entity({}), lone])
    with pytest.raises(TableValidationError, match="Edm.String"):
        CODEC.serialize_entity_lines([entity({"S": 5}, {"S": T.STRING})])
    with pytest.raises(TypeError):
        CODEC.serialize_entity_lines([entity({"S": object()}, {"S": "Edm.Unknown"})])  # type: ignore[dict-item]


def test_an_empty_page_is_empty() -> None:
    assert CODEC.serialize_entity_lines([]) == b""


def test_nan_and_infinity_doubles_stay_annotated_strings() -> None:
    values = {"A": math.nan, "B": math.inf, "C": -math.inf, "D": 1e300 * 10}
    lines = assert_same([entity(values, dict.fromkeys(values, T.DOUBLE))])
    assert b'"A":"NaN","A@odata.type":"Edm.Double","B":"Infinity"' in lines


def page_of(count: int, **changes: Any) -> list[EntityPayload]:
    """``count`` entities of one shape (every query type), as one parsed query page; ``changes``
    replace the raw JSON text of the last entity's values (e.g. a NaN)."""
    def one(n: int) -> str:
        fields = {
            "Name": f'"e{n}"', "Count": str(n), "Big": '"1099511627776"', "Ratio": f"{n / 7!r}",
            "When": '"2024-02-29T23:59:59.1234567Z"', "Whole": '"2024-02-29T23:59:59Z"',
            "Id": '"c9da6455-213d-42c9-9a79-3e9149a57833"', "Blob": '"AAEC/w=="', "Active": "true",
        }
        if n == count - 1:
            fields.update(changes)
        annotations = {"Big": "Int64", "Ratio": "Double", "When": "DateTime", "Whole": "DateTime", "Id": "Guid",
                       "Blob": "Binary"}
        members = [f'"PartitionKey":"p","RowKey":"{n:04d}","Timestamp":"2024-05-01T10:00:00.1234567Z"']
        for name, text in fields.items():
            members.append(f'"{name}":{text}')
            if name in annotations:
                members.append(f'"{name}@odata.type":"Edm.{annotations[name]}"')
        return "{" + ",".join(members) + "}"

    body = '{"odata.metadata":"m","value":[' + ",".join(one(n) for n in range(count)) + "]}"
    return CODEC.parse_entities(body.encode())


def test_a_page_of_one_shape_is_written_column_by_column(monkeypatch: pytest.MonkeyPatch) -> None:
    payloads = page_of(50)
    expected = one_by_one(payloads)

    def not_per_entity(payload: EntityPayload) -> str:
        raise AssertionError("a page of one shape is written without a template per entity")

    monkeypatch.setattr(json_module, "_template_text", not_per_entity)
    assert CODEC.serialize_entity_lines(payloads) == expected


@pytest.mark.parametrize(
    "changes", [{"Ratio": '"NaN"'}, {"Ratio": '"-Infinity"'}, {"Count": "3000000000"}, {"Name": "null"}]
)
def test_a_page_with_one_entity_of_another_shape_or_a_non_finite_double_gives_the_same_bytes(
    changes: dict[str, str],
) -> None:
    assert_same(page_of(20, **changes))


def test_a_page_whose_entities_differ_only_in_their_types_gives_the_same_bytes() -> None:
    same_values = [entity({"N": 5}, {"N": edm_type}) for edm_type in (T.INT32, T.INT64, T.DOUBLE)]
    lines = assert_same(same_values)
    assert lines.splitlines()[1] == b'{"PartitionKey":"p","RowKey":"r","N":"5","N@odata.type":"Edm.Int64"}'
