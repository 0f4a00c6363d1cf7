"""Values beyond the EDM types without an annotation (a DynamicEntity's, a dict's, an undeclared
property's): Enum, Decimal, date and timedelta are stored as a declared field of their type stores
them, and come back in that stored form; declared timedelta fields."""

from __future__ import annotations

import dataclasses
import decimal
import enum
from datetime import date, datetime, timedelta, timezone
from typing import Any

import pytest

from tablesdk import DynamicEntity, EdmType, TableEntity, TableValidationError, prop
from tablesdk._entities._entity import entity_from_payload, entity_to_payload
from tablesdk._entities._model_values import timedelta_text


class Color(enum.Enum):
    RED = (255, 0, 0)
    GREEN = (0, 255, 0)


class Perm(enum.Flag):
    R = 1
    W = 2


class Level(enum.IntEnum):
    LOW = 1


class Holder(TableEntity):
    Wait: timedelta
    Pause: timedelta | None = None


def stored(value: object) -> tuple[object, EdmType]:
    payload = entity_to_payload(DynamicEntity(PartitionKey="p", RowKey="r", V=value))
    return payload.values["V"], payload.types["V"]


def test_an_enum_member_is_stored_by_name_as_a_declared_field_stores_it() -> None:
    assert stored(Color.RED) == ("RED", EdmType.STRING)
    assert stored(Perm.R | Perm.W) == ("R|W", EdmType.STRING)
    assert stored(Perm(0)) == ("", EdmType.STRING)


def test_an_enum_that_is_an_int_or_str_keeps_its_value() -> None:
    assert stored(Level.LOW) == (Level.LOW, EdmType.INT32)


@pytest.mark.skipif(not hasattr(enum, "KEEP"), reason="Flag boundaries are Python 3.11+")
def test_a_flag_with_bits_no_member_names_is_refused_by_property_name() -> None:
    loose: Any = getattr(enum, "Flag")("Loose", {"A": 1}, boundary=getattr(enum, "KEEP"))
    with pytest.raises(TableValidationError) as info:
        stored(loose(3))
    assert info.value.field == "V" and "no member" in str(info.value)


def test_a_decimal_is_its_exact_text() -> None:
    assert stored(decimal.Decimal("1.10")) == ("1.10", EdmType.STRING)
    # a Double cannot hold it: text keeps every digit
    assert stored(decimal.Decimal("0.1000000000000000055511151231257827")) == (
        "0.1000000000000000055511151231257827", EdmType.STRING,
    )


def test_a_date_is_midnight_utc_and_a_datetime_stays_a_datetime() -> None:
    assert stored(date(2024, 2, 29)) == (datetime(2024, 2, 29, tzinfo=timezone.utc), EdmType.DATETIME)
    moment = datetime(2024, 2, 29, 13, tzinfo=timezone.utc)
    assert stored(moment) == (moment, EdmType.DATETIME)


@pytest.mark.parametrize("delta, text", [
    (timedelta(0), "00:00:00"),
    (timedelta(hours=1, minutes=2, seconds=3), "01:02:03"),
    (timedelta(days=3, microseconds=5), "3.00:00:00.0000050"),
    (-timedelta(days=1, hours=2), "-1.02:00:00"),
    (timedelta(microseconds=-1), "-00:00:00.0000010"),
])
def test_a_timedelta_is_dotnet_timespan_text(delta: timedelta, text: str) -> None:
    assert timedelta_text(delta) == text
    assert stored(delta) == (text, EdmType.STRING)


def test_mappings_and_extra_properties_convert_the_same_way() -> None:
    payload = entity_to_payload({"PartitionKey": "p", "RowKey": "r", "D": decimal.Decimal("2.50"), "C": Color.GREEN})
    assert (payload.values["D"], payload.values["C"]) == ("2.50", "GREEN")
    holder = Holder(PartitionKey="p", RowKey="r", Wait=timedelta(seconds=1))
    holder.extra_properties["Day"] = date(2020, 1, 1)
    assert entity_to_payload(holder).values["Day"] == datetime(2020, 1, 1, tzinfo=timezone.utc)


def test_edm_type_and_get_property_tell_the_stored_form() -> None:
    entity = DynamicEntity(PartitionKey="p", RowKey="r", D=decimal.Decimal("1"), T=timedelta(seconds=90))
    assert entity.edm_type("D") is EdmType.STRING
    assert entity.get_property("T").value == "00:01:30"
    assert entity["D"] == decimal.Decimal("1")  # the entity keeps what it was given


def test_filters_compare_with_the_stored_form() -> None:
    assert str(prop("Price") == decimal.Decimal("1.10")) == "Price eq '1.10'"
    assert str(prop("Shade") == Color.RED) == "Shade eq 'RED'"
    assert str(prop("Day") == date(2024, 1, 2)) == "Day eq datetime'2024-01-02T00:00:00.0000000Z'"
    assert str(prop("Wait") == timedelta(minutes=1)) == "Wait eq '00:01:00'"


def test_other_values_are_still_refused_by_name() -> None:
    with pytest.raises(TableValidationError) as info:
        stored([1, 2])
    assert info.value.field == "V"


def test_a_declared_timedelta_field_round_trips_and_checks_its_type() -> None:
    holder = Holder(PartitionKey="p", RowKey="r", Wait=timedelta(days=-2, microseconds=3))
    payload = entity_to_payload(holder)
    assert payload.types["Wait"] is EdmType.STRING
    back = entity_from_payload(Holder, payload)
    assert back.Wait == holder.Wait and back.Pause is None
    with pytest.raises(TableValidationError) as info:
        entity_to_payload(Holder(PartitionKey="p", RowKey="r", Wait=5))  # type: ignore[arg-type]
    assert info.value.field == "Wait" and "timedelta" in str(info.value)


@dataclasses.dataclass
class Timed:
    PartitionKey: str
    RowKey: str
    Took: timedelta


@pytest.mark.parametrize("text, problem", [
    ("soon", "no TimeSpan text"),
    ("00:00:00.0000001", "100 ns"),
])
def test_stored_text_a_timedelta_cannot_hold_is_refused_by_field_and_keys(text: str, problem: str) -> None:
    payload = entity_to_payload({"PartitionKey": "p", "RowKey": "r", "Took": text})
    with pytest.raises(TableValidationError) as info:
        entity_from_payload(Timed, payload)
    assert info.value.field == "Took" and problem in str(info.value) and "RowKey='r'" in str(info.value)
