"""EDM types: inference, range checks and the three text forms of every type."""

from __future__ import annotations

import math
import pickle
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from tablesdk._entities._edm import (
    EdmDateTime,
    EdmType,
    EntityProperty,
    check_value,
    format_datetime,
    from_atom_text,
    from_json_value,
    infer_edm_type,
    parse_datetime,
    to_atom_text,
    to_filter_literal,
    to_json_value,
)
from tablesdk._core._errors import TableValidationError

GUID = uuid.UUID("c9da6455-213d-42c9-9a79-3e9149a57833")


@pytest.mark.parametrize(
    "value, expected",
    [
        ("x", EdmType.STRING),
        (True, EdmType.BOOLEAN),  # bool before int: True is an int in Python
        (0, EdmType.INT32),
        (2**31 - 1, EdmType.INT32),
        (2**31, EdmType.INT64),
        (-(2**31) - 1, EdmType.INT64),
        (1.0, EdmType.DOUBLE),
        (datetime(2020, 1, 1), EdmType.DATETIME),
        (GUID, EdmType.GUID),
        (b"\x00", EdmType.BINARY),
        (EntityProperty(5, EdmType.INT64), EdmType.INT64),
    ],
)
def test_infer_edm_type(value: object, expected: EdmType) -> None:
    assert infer_edm_type(value) is expected


def test_infer_rejects_unsupported_and_oversized_values() -> None:
    with pytest.raises(TableValidationError, match="Rating"):
        infer_edm_type([1], "Rating")
    with pytest.raises(TableValidationError, match="Int64"):
        infer_edm_type(2**63, "Big")


@pytest.mark.parametrize(
    "value, edm_type, limit",
    [
        (2**31, EdmType.INT32, "Int32"),
        (-(2**31) - 1, EdmType.INT32, "Int32"),
        (2**63, EdmType.INT64, "Int64"),
        (True, EdmType.INT32, "int"),
        ("x" * 32769, EdmType.STRING, "64 KiB"),
        ("\U0001F600" * 16385, EdmType.STRING, "64 KiB"),  # astral chars take 4 UTF-16 bytes
        (b"x" * 65537, EdmType.BINARY, "64 KiB"),
        (datetime(1600, 12, 31, 23, 59, tzinfo=timezone.utc), EdmType.DATETIME, "1601"),
        (1, EdmType.BOOLEAN, "bool"),
        ("not a uuid", EdmType.GUID, "uuid"),
    ],
)
def test_check_value_limits(value: object, edm_type: EdmType, limit: str) -> None:
    with pytest.raises(TableValidationError) as info:
        check_value("Prop", value, edm_type)
    assert "Prop" in str(info.value) and limit in str(info.value)


def test_check_value_accepts_the_exact_limits() -> None:
    check_value("p", "x" * 32768, EdmType.STRING)
    check_value("p", b"x" * 65536, EdmType.BINARY)
    check_value("p", 2**63 - 1, EdmType.INT64)
    check_value("p", datetime(1601, 1, 1, tzinfo=timezone.utc), EdmType.DATETIME)
    check_value("p", datetime(9999, 12, 31, 23, 59, 59, 999999), EdmType.DATETIME)


def test_entity_property_is_checked_on_creation() -> None:
    with pytest.raises(TableValidationError):
        EntityProperty("5", EdmType.INT64)
    with pytest.raises(TypeError):
        EntityProperty(5, "Edm.Int64")  # type: ignore[arg-type]


class TestDateTime:
    def test_seven_digits_survive_a_round_trip(self) -> None:
        text = "2024-01-02T03:04:05.1234567Z"
        value = parse_datetime(text)
        assert value == datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc)
        assert value.ticks_remainder == 7
        assert format_datetime(value) == text

    def test_arithmetic_drops_the_seventh_digit(self) -> None:
        value = parse_datetime("2024-01-02T03:04:05.1234567Z") + timedelta(seconds=1)
        assert format_datetime(value) == "2024-01-02T03:04:06.1234560Z"

    @pytest.mark.parametrize(
        "text, expected",
        [
            ("2024-01-02T03:04:05Z", datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)),
            ("2024-01-02T03:04:05.5Z", datetime(2024, 1, 2, 3, 4, 5, 500000, tzinfo=timezone.utc)),
            ("2024-01-02T03:04:05.123456789Z", datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc)),
            ("2024-01-02T05:04:05+02:00", datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)),
            ("2024-01-02T03:04:05", datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)),
            ("0001-01-01T00:00:00", datetime(1, 1, 1, tzinfo=timezone.utc)),
        ],
    )
    def test_parse_forms(self, text: str, expected: datetime) -> None:
        value = parse_datetime(text)
        assert value == expected and value.tzinfo is not None and value.utcoffset() == timedelta(0)

    def test_eighth_digit_is_truncated_not_rounded(self) -> None:
        assert parse_datetime("2024-01-02T03:04:05.12345679Z").ticks_remainder == 7

    def test_garbage_is_rejected(self) -> None:
        with pytest.raises(ValueError):
            parse_datetime("not-a-date")

    def test_naive_is_utc_and_offsets_are_converted(self) -> None:
        assert format_datetime(datetime(2020, 5, 6, 7, 8, 9)) == "2020-05-06T07:08:09.0000000Z"
        plus_two = timezone(timedelta(hours=2))
        assert format_datetime(datetime(2020, 5, 6, 9, 8, 9, tzinfo=plus_two)) == "2020-05-06T07:08:09.0000000Z"

    def test_edm_datetime_pickles_with_its_digit(self) -> None:
        value = parse_datetime("2024-01-02T03:04:05.1234567Z")
        copy = pickle.loads(pickle.dumps(value))
        assert isinstance(copy, EdmDateTime) and copy == value and copy.ticks_remainder == 7


ROUND_TRIP = [
    ("", EdmType.STRING),
    ("é中😀 <&>", EdmType.STRING),
    (-(2**31), EdmType.INT32),
    (2**63 - 1, EdmType.INT64),
    (-(2**63), EdmType.INT64),
    (0.1, EdmType.DOUBLE),
    (-0.0, EdmType.DOUBLE),
    (1e308, EdmType.DOUBLE),
    (5e-324, EdmType.DOUBLE),
    (math.inf, EdmType.DOUBLE),
    (-math.inf, EdmType.DOUBLE),
    (True, EdmType.BOOLEAN),
    (False, EdmType.BOOLEAN),
    (parse_datetime("9999-12-31T23:59:59.9999999Z"), EdmType.DATETIME),
    (datetime(1601, 1, 1, tzinfo=timezone.utc), EdmType.DATETIME),
    (GUID, EdmType.GUID),
    (b"", EdmType.BINARY),
    (bytes(range(256)), EdmType.BINARY),
]


@pytest.mark.parametrize("value, edm_type", ROUND_TRIP)
def test_atom_text_round_trip(value: object, edm_type: EdmType) -> None:
    back = from_atom_text(to_atom_text(value, edm_type), edm_type)
    assert back == value and type(back) is type(value) or isinstance(back, datetime)
    if isinstance(value, float):
        assert math.copysign(1, back) == math.copysign(1, value)


@pytest.mark.parametrize("value, edm_type", ROUND_TRIP)
def test_json_value_round_trip(value: object, edm_type: EdmType) -> None:
    wire, annotated = to_json_value(value, edm_type)
    assert annotated == (edm_type not in (EdmType.STRING, EdmType.INT32, EdmType.BOOLEAN))
    back = from_json_value(wire, edm_type)
    assert back == value
    if isinstance(value, datetime):
        assert format_datetime(back) == format_datetime(value)


def test_nan_in_both_forms() -> None:
    assert to_atom_text(math.nan, EdmType.DOUBLE) == "NaN"
    assert math.isnan(from_atom_text("NaN", EdmType.DOUBLE))
    assert to_json_value(math.nan, EdmType.DOUBLE) == ("NaN", True)
    assert to_atom_text(math.inf, EdmType.DOUBLE) == "INF"
    assert to_json_value(-math.inf, EdmType.DOUBLE) == ("-Infinity", True)


def test_int64_travels_as_a_string_in_json() -> None:
    assert to_json_value(2**53 + 1, EdmType.INT64) == ("9007199254740993", True)
    assert from_json_value("9007199254740993", EdmType.INT64) == 2**53 + 1


@pytest.mark.parametrize(
    "value, edm_type, literal",
    [
        ("O'Brien", EdmType.STRING, "'O''Brien'"),
        ("100%#", EdmType.STRING, "'100%#'"),
        (5, EdmType.INT32, "5"),
        (5, EdmType.INT64, "5L"),
        (3, EdmType.DOUBLE, "3.0"),
        (2.5, EdmType.DOUBLE, "2.5"),
        (1e300, EdmType.DOUBLE, "1" + "0" * 300 + ".0"),
        (1.5e-7, EdmType.DOUBLE, "0.00000015"),
        (-2.5e16, EdmType.DOUBLE, "-25000000000000000.0"),
        (True, EdmType.BOOLEAN, "true"),
        (datetime(2009, 5, 1), EdmType.DATETIME, "datetime'2009-05-01T00:00:00.0000000Z'"),
        (GUID, EdmType.GUID, "guid'c9da6455-213d-42c9-9a79-3e9149a57833'"),
        (b"\x05\xff", EdmType.BINARY, "X'05ff'"),
    ],
)
def test_filter_literals(value: object, edm_type: EdmType, literal: str) -> None:
    assert to_filter_literal(value, edm_type) == literal


@pytest.mark.parametrize("number", [5e-324, 1.7976931348623157e308, 0.1, 1 / 3, -1e-5, 123456789.125])
def test_double_filter_literals_keep_their_value_without_exponents(number: float) -> None:
    literal = to_filter_literal(number, EdmType.DOUBLE)
    assert "e" not in literal.lower() and "." in literal
    assert float(literal) == number


def test_filter_literal_refuses_nan_and_wrong_types() -> None:
    with pytest.raises(TableValidationError, match="NaN"):
        to_filter_literal(math.nan, EdmType.DOUBLE, "Score")
    with pytest.raises(TableValidationError, match="Views"):
        to_filter_literal("5", EdmType.INT64, "Views")
