"""Client-side refusal of values the service would store altered (or not at all).

Declared property types are enforced, ints sent as doubles must convert exactly,
and every bad value raises TableValidationError naming the field, never a bare
OverflowError or UnicodeEncodeError.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tablesdk import DynamicEntity, EdmType, EntityProperty, TableEntity, prop
from tablesdk._entities._edm import Int64
from tablesdk._entities._entity import entity_to_payload, validate_key
from tablesdk._core._errors import TableValidationError
from tablesdk._formats import get_format


class Note(TableEntity):
    Text: str
    Rating: int
    Score: float
    Views: Int64
    Flag: bool
    When: datetime


def note(**values: object) -> Note:
    return Note(PartitionKey="p", RowKey="r", **values)


@pytest.mark.parametrize(
    ("name", "value", "declared", "given"),
    [
        ("Rating", "five", "int (Edm.Int32)", "str"),
        ("Rating", 5.5, "int (Edm.Int32)", "float"),
        ("Rating", True, "int (Edm.Int32)", "bool"),
        ("Text", 123, "str (Edm.String)", "int"),
        ("Score", "1.5", "float (Edm.Double)", "str"),
        ("Views", 1.0, "int (Edm.Int64)", "float"),
        ("Flag", 1, "bool (Edm.Boolean)", "int"),
        ("When", "2020-01-01", "datetime (Edm.DateTime)", "str"),
    ],
)
def test_declared_type_is_enforced(name: str, value: object, declared: str, given: str) -> None:
    with pytest.raises(TableValidationError) as info:
        entity_to_payload(note(**{name: value}))
    assert info.value.field == name
    text = str(info.value)
    assert f"Note.{name} is declared as {declared}" in text
    assert f"got {given}" in text


def test_int_for_a_float_property_is_fine_when_exact() -> None:
    payload = entity_to_payload(note(Score=3))
    assert payload.types["Score"] is EdmType.DOUBLE and payload.values["Score"] == 3
    with pytest.raises(TableValidationError, match="convert to a double exactly"):
        entity_to_payload(note(Score=2**53 + 1))


def test_declared_int_out_of_range_reports_the_range() -> None:
    with pytest.raises(TableValidationError, match=r"Edm.Int32 range"):
        entity_to_payload(note(Rating=2**40))


def test_a_declared_property_keeps_the_type_it_was_read_with() -> None:
    entity = note(Rating=1)
    entity._wire_types["Rating"] = EdmType.STRING  # stored as a string by another writer
    entity.Rating = "legacy"
    assert entity_to_payload(entity).types["Rating"] is EdmType.STRING


def test_declared_properties_get_the_datetime_range_check() -> None:
    with pytest.raises(TableValidationError, match="1601-01-01") as info:
        entity_to_payload(note(When=datetime(1500, 1, 1, tzinfo=timezone.utc)))
    assert info.value.field == "When"


def test_declared_properties_get_the_string_size_check() -> None:
    with pytest.raises(TableValidationError, match="64 KiB"):
        entity_to_payload(note(Text="x" * 40_000))


def test_comparing_entities_does_not_validate() -> None:
    assert note(Rating="five") == note(Rating="five")


@pytest.mark.parametrize("value", [2**53 + 1, -(2**53) - 1, 2**63 - 1, 10**400])
def test_int_as_double_must_convert_exactly(value: int) -> None:
    with pytest.raises(TableValidationError, match="exactly") as info:
        EntityProperty(value, EdmType.DOUBLE)
    assert info.value.field == "value"
    with pytest.raises(TableValidationError, match="exactly"):
        DynamicEntity("p", "r", D=EntityProperty(value, EdmType.DOUBLE))


def test_inexact_int_for_a_double_read_column_is_written_exactly_as_int64() -> None:
    entity = DynamicEntity("p", "r", D=EntityProperty(1.5, EdmType.DOUBLE))
    entity["D"] = 2**53 + 1  # the column was a double; the new value is not one: keep it exact
    payload = entity_to_payload(entity)
    assert (payload.types["D"], payload.values["D"]) == (EdmType.INT64, 2**53 + 1)


def test_exact_ints_as_double_are_fine() -> None:
    assert EntityProperty(2**53, EdmType.DOUBLE).value == 2**53
    assert EntityProperty(-(2**60), EdmType.DOUBLE).value == -(2**60)


@pytest.mark.parametrize(
    "value",
    [
        datetime(9999, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-5))),
        datetime(1, 1, 1, 0, 30, tzinfo=timezone(timedelta(hours=1))),
    ],
)
def test_aware_datetime_at_the_range_edge_is_a_validation_error(value: datetime) -> None:
    with pytest.raises(TableValidationError, match="Edm.DateTime range") as info:
        entity_to_payload(DynamicEntity("p", "r", When=value))
    assert info.value.field == "When"
    with pytest.raises(TableValidationError):
        entity_to_payload(note(When=value))
    with pytest.raises(TableValidationError):
        (prop("When") == value).render()


@pytest.mark.parametrize("fmt", ["json", "atom"])
def test_lone_surrogate_in_a_value_names_the_field(fmt: str) -> None:
    codec = get_format(fmt)
    for entity in (DynamicEntity("p", "r", Text="a\ud800b"), note(Text="\udfff")):
        with pytest.raises(TableValidationError, match="surrogate") as info:
            codec.serialize_entity(entity_to_payload(entity))
        assert info.value.field == "Text"


@pytest.mark.parametrize("field", ["PartitionKey", "RowKey"])
def test_lone_surrogate_in_a_key_names_the_key(field: str) -> None:
    with pytest.raises(TableValidationError, match="surrogate") as info:
        validate_key(field, "k\ud83d")
    assert info.value.field == field
    keys = {"PartitionKey": "p", "RowKey": "r", field: "\ud83dx"}
    with pytest.raises(TableValidationError) as info:
        entity_to_payload(DynamicEntity(**keys))
    assert info.value.field == field


def test_lone_surrogate_in_a_filter_literal() -> None:
    with pytest.raises(TableValidationError, match="surrogate"):
        (prop("Text") == "\ud800").render()


def test_json_bodies_escape_line_and_paragraph_separators() -> None:
    codec = get_format("json")
    body = codec.serialize_entity(entity_to_payload(DynamicEntity("p\u2028", "r", T="a\u2028b\u2029c\u00e9")))
    assert b"\\u2028" in body and b"\\u2029" in body
    assert "\u2028".encode() not in body and "\u2029".encode() not in body
    assert "\u00e9".encode() in body  # other non-ASCII characters travel as themselves
    assert codec.parse_entity(body).values["T"] == "a\u2028b\u2029c\u00e9"
    assert b"\\u2028" in codec.serialize_table("x\u2028")


def test_large_json_bodies_are_sent_ascii_only() -> None:
    # A JavaScript service decoding 64 KiB chunks would split a multi-byte character.
    codec = get_format("json")
    big = codec.serialize_entity(entity_to_payload(DynamicEntity("p", "r", S="\U0001f600" * 16383)))
    assert big.isascii() and b"\\ud83d\\ude00" in big
    assert codec.parse_entity(big).values["S"] == "\U0001f600" * 16383
    small = codec.serialize_entity(entity_to_payload(DynamicEntity("p", "r", S="\U0001f600" * 100)))
    assert not small.isascii()  # small bodies keep characters as themselves
