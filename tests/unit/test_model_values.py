"""What the model paths do with values beyond the EDM types, at the payload level: Flags by name,
undeclared fields (pydantic ``extra="allow"``, a TypedDict's other keys), empty nested objects,
dates, Decimals, JSON fields, and every value a conversion cannot store or read (a named
TableValidationError, never a raw exception)."""

from __future__ import annotations

import dataclasses
import decimal
import enum
from datetime import date, datetime, timedelta, timezone
from typing import Annotated, Any, TypedDict

import pydantic
import pytest

from tablesdk import ByValue, Converter, EdmType, Flatten, Json, StoredAs, TableEntity
from tablesdk._entities._edm import EntityPayload
from tablesdk._entities._entity import entity_from_payload, entity_to_payload
from tablesdk._core._errors import TableValidationError


def _stored(entity: object) -> dict[str, Any]:
    return {k: v for k, v in entity_to_payload(entity).values.items() if k not in ("PartitionKey", "RowKey")}


def _round_trip(entity: Any, cls: type | None = None) -> Any:
    """``entity`` written and read back as the service would (nulls are not stored)."""
    payload = entity_to_payload(entity)
    values = {k: v for k, v in payload.values.items() if v is not None}
    types = {k: t for k, t in payload.types.items() if k in values}
    return entity_from_payload(cls or type(entity), EntityPayload(values, types, None))


def _read(cls: type, **stored: Any) -> Any:
    values = {"PartitionKey": "p", "RowKey": "r", **stored}
    return entity_from_payload(cls, EntityPayload(values, {k: EdmType.STRING for k in values}, None))


# ---------------------------------------------------------------- Flags


class Perm(enum.Flag):
    R = 1
    W = 2
    X = 4
    RW = 3  # a named combination (an alias of R|W)


@dataclasses.dataclass
class Access:
    PartitionKey: str
    RowKey: str
    Mode: Perm
    Code: Annotated[Perm, ByValue] = Perm.R


@pytest.mark.parametrize("mode", [Perm(0), Perm.R, Perm.R | Perm.W, Perm.R | Perm.W | Perm.X, Perm.W | Perm.X])
def test_every_flag_combination_round_trips_by_name_and_by_value(mode: Perm) -> None:
    access = Access("p", "r", mode, mode)
    assert _round_trip(access) == access


def test_a_flag_is_stored_as_the_names_of_its_members_joined_with_a_bar() -> None:
    assert _stored(Access("p", "r", Perm.R | Perm.X))["Mode"] == "R|X"
    assert _stored(Access("p", "r", Perm(0)))["Mode"] == ""  # no member: stored, not a null


def test_flag_names_written_before_are_still_read() -> None:
    assert _read(Access, Mode="W").Mode is Perm.W
    assert _read(Access, Mode="RW").Mode == Perm.R | Perm.W  # the name of a named combination
    with pytest.raises(TableValidationError, match="'Q' is not a member of Perm") as caught:
        _read(Access, Mode="R|Q")
    assert caught.value.field == "Mode" and "PartitionKey='p', RowKey='r'" in str(caught.value)


class Rights(enum.IntFlag):
    READ = 1
    WRITE = 2


@dataclasses.dataclass
class Grant:
    PartitionKey: str
    RowKey: str
    Rights: Rights


def test_a_flag_with_bits_no_member_names_is_refused_by_name() -> None:
    with pytest.raises(TableValidationError, match="has bits no member of Rights names") as caught:
        entity_to_payload(Grant("p", "r", Rights(8)))
    assert caught.value.field == "Rights"


# ---------------------------------------------------------------- wrong types on write


class Color(enum.Enum):
    RED = 1
    BLUE = 2


@dataclasses.dataclass
class Typed:
    PartitionKey: str
    RowKey: str
    Shade: Color = Color.RED
    Code: Annotated[Color, ByValue] = Color.RED
    Mode: Perm = Perm.R
    Day: date = date(2024, 1, 1)
    Price: decimal.Decimal = decimal.Decimal("0")
    Lines: Json[list[str]] = dataclasses.field(default_factory=list)
    Seen: Json[set[int]] = dataclasses.field(default_factory=set)
    Names: Json[dict[int, str]] = dataclasses.field(default_factory=dict)
    Pair: Json[tuple[int, str]] = (0, "")


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("Shade", 1, "Typed.Shade is declared as Color"),
        ("Shade", "RED", "Typed.Shade is declared as Color"),
        ("Code", 2, "Typed.Code is declared as Color"),
        ("Mode", 3, "Typed.Mode is declared as Perm"),
        ("Day", "2024-01-01", "Typed.Day is declared as date"),
        ("Day", datetime(2024, 1, 1, 23, tzinfo=timezone(timedelta(hours=-5))), "a date field stores a day"),
        ("Day", datetime(2024, 1, 1), "a date field stores a day"),
        ("Price", "12.5", "Typed.Price is declared as Decimal"),
        ("Price", 12.5, "Typed.Price is declared as Decimal"),
        ("Lines", "abc", "the value is a str, not a list"),
        ("Seen", "abc", "the value is a str, not a set"),
        ("Seen", [1, 2], "the value is a list, not a set"),
        ("Names", "abc", "the value is a str, not a dict"),
        ("Names", {"1": "a"}, "has a key of type str, not int"),
        ("Pair", (1, 2, 3), "has 3 items, not 2"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_by_name_before_sending(field: str, value: Any, says: str) -> None:
    typed = Typed("p", "r")
    setattr(typed, field, value)
    with pytest.raises(TableValidationError, match=says) as caught:
        entity_to_payload(typed)
    assert caught.value.field == field


class Ledger(TableEntity):
    Shade: Color = Color.RED
    Price: decimal.Decimal = decimal.Decimal("0")
    Day: date | None = None


def test_a_declared_entity_refuses_the_same_values_by_name() -> None:
    for field, value in (("Shade", 2), ("Price", "1.5"), ("Day", datetime(2024, 1, 1, tzinfo=timezone.utc))):
        entry = Ledger(PartitionKey="p", RowKey="r")
        setattr(entry, field, value)
        with pytest.raises(TableValidationError) as caught:
            entity_to_payload(entry)
        assert caught.value.field == field


class Money:
    def __init__(self, cents: int) -> None:
        self.cents = cents


MONEY = Converter(lambda m: f"{m.cents}c", lambda s: Money(int(s[:-1])), EdmType.STRING)


@dataclasses.dataclass
class Bill:
    PartitionKey: str
    RowKey: str
    Cost: Annotated[Money, MONEY] | None = None


def test_what_a_converter_raises_becomes_a_named_error_with_its_cause() -> None:
    with pytest.raises(TableValidationError, match="its converter cannot store the value") as caught:
        entity_to_payload(Bill("p", "r", 5))  # type: ignore[arg-type]
    assert caught.value.field == "Cost" and isinstance(caught.value.__cause__, AttributeError)
    with pytest.raises(TableValidationError, match="cannot read the stored value") as read:
        _read(Bill, Cost="c")  # int('') raises ValueError
    assert read.value.field == "Cost"


# ---------------------------------------------------------------- stored values that cannot be read


def test_a_stored_value_that_cannot_be_read_names_the_field_and_the_keys() -> None:
    cases = {"Price": "abc", "Names": '"abc"', "Seen": '{"a": 1}', "Lines": "not json", "Day": "no day"}
    for field, stored in cases.items():
        with pytest.raises(TableValidationError) as caught:
            _read(Typed, **{field: stored})
        assert caught.value.field == field
        assert "PartitionKey='p', RowKey='r'" in str(caught.value)
    with pytest.raises(TableValidationError) as declared:
        _read(Ledger, Price="1.2.3")
    assert declared.value.field == "Price" and "RowKey='r'" in str(declared.value)


def test_a_date_reads_the_utc_day_of_a_stored_datetime() -> None:
    moment = datetime(2024, 1, 2, 1, tzinfo=timezone(timedelta(hours=5)))  # 2024-01-01 in UTC
    values = {"PartitionKey": "p", "RowKey": "r", "Day": moment}
    read = entity_from_payload(Typed, EntityPayload(values, {"Day": EdmType.DATETIME}, None))
    assert read.Day == date(2024, 1, 1)


# ---------------------------------------------------------------- pydantic


class Strict(pydantic.BaseModel):
    PartitionKey: str
    RowKey: str
    Count: int
    Note: str | None = None


def test_a_model_made_by_model_construct_without_a_required_field_is_refused_by_name() -> None:
    with pytest.raises(TableValidationError, match="Strict.Count has no value") as caught:
        entity_to_payload(Strict.model_construct(PartitionKey="p", RowKey="r"))
    assert caught.value.field == "Count"
    with pytest.raises(TableValidationError, match="PartitionKey: required") as keys:
        entity_to_payload(Strict.model_construct(RowKey="r", Count=1))
    assert keys.value.field == "PartitionKey"


class Open(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    PartitionKey: str
    RowKey: str
    Count: int = 0


def test_pydantic_extra_fields_are_stored_as_dynamic_properties_and_read_back() -> None:
    when = datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc)
    model = Open(PartitionKey="p", RowKey="r", Count=1, Label="x", Big=2**40, When=when, Ok=True)
    payload = entity_to_payload(model)
    assert payload.types["Big"] is EdmType.INT64 and payload.types["When"] is EdmType.DATETIME
    back = _round_trip(model)
    assert back == model and back.__pydantic_extra__ == {"Label": "x", "Big": 2**40, "When": when, "Ok": True}


def test_an_extra_field_is_not_refused_as_unknown_on_a_strict_read() -> None:
    values = {"PartitionKey": "p", "RowKey": "r", "Count": 1, "Other": "y"}
    read = entity_from_payload(Open, EntityPayload(values, {}, None), ignore_missing_properties=False)
    assert read.__pydantic_extra__ == {"Other": "y"}


class Dims(TypedDict):
    W: int
    H: int


@dataclasses.dataclass
class Crate:
    PartitionKey: str
    RowKey: str
    Size: Dims


def test_undeclared_typeddict_keys_are_stored_and_read_back() -> None:
    crate = Crate("p", "r", {"W": 1, "H": 2, "Depth": 3, "Label": "big"})  # type: ignore[typeddict-unknown-key]
    assert _stored(crate) == {"Size_W": 1, "Size_H": 2, "Size_Depth": 3, "Size_Label": "big"}
    assert _round_trip(crate) == crate


def test_an_undeclared_key_that_is_no_property_name_is_refused_by_its_path() -> None:
    with pytest.raises(TableValidationError) as caught:
        entity_to_payload(Crate("p", "r", {"W": 1, "H": 2, "no way": 3}))  # type: ignore[typeddict-unknown-key]
    assert caught.value.field == "Size.no way"
    with pytest.raises(TableValidationError, match="keys are str") as typed:
        entity_to_payload(Crate("p", "r", {"W": 1, "H": 2, 7: 3}))  # type: ignore[misc]
    assert typed.value.field == "Size.7"


class OpenSize(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    W: int = 0


class OpenCrate(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    PartitionKey: str
    RowKey: str
    Size: OpenSize | None = None


def test_extra_fields_of_a_nested_model_are_read_back_into_it() -> None:
    crate = OpenCrate(PartitionKey="p", RowKey="r", Size=OpenSize(W=1, Depth=2), Note="n")
    assert _stored(crate) == {"Size_W": 1, "Size_Depth": 2, "Note": "n"}
    back = _round_trip(crate)
    assert back == crate and back.Size is not None and back.Size.__pydantic_extra__ == {"Depth": 2}


def test_an_extra_field_read_back_into_another_object_is_refused_by_name() -> None:
    crate = OpenCrate(PartitionKey="p", RowKey="r", Size=OpenSize(W=1), Size_Depth=3)
    with pytest.raises(TableValidationError, match="stored as a property named 'Size_Depth'") as caught:
        entity_to_payload(crate)
    assert caught.value.field == "Size_Depth"


# ---------------------------------------------------------------- nested objects


@dataclasses.dataclass
class Point:
    X: int | None = None
    Y: int | None = None


@dataclasses.dataclass
class Route:
    PartitionKey: str
    RowKey: str
    Start: Point
    Stop: Point | None = None
    Via: Annotated[Point | None, Flatten("__")] = None


def test_an_empty_nested_object_reads_back_as_the_empty_object() -> None:
    assert _round_trip(Route("p", "r", Point())).Start == Point()  # non-Optional: made again
    route = Route("p", "r", Point(1), Stop=Point(), Via=Point())
    assert _stored(route)["Stop"] is True and _stored(route)["Via"] is True  # present: a marker
    assert _round_trip(route) == route
    assert _round_trip(Route("p", "r", Point(), None, None)) == Route("p", "r", Point(), None, None)
    assert "Stop" not in _stored(Route("p", "r", Point(), Point(1, 2)))  # something stored: no marker


def test_none_in_a_non_optional_nested_field_is_refused_by_name() -> None:
    with pytest.raises(TableValidationError, match="Route.Start is declared as Point, not Optional") as caught:
        entity_to_payload(Route("p", "r", None))  # type: ignore[arg-type]
    assert caught.value.field == "Start"


def test_a_nested_field_of_the_wrong_class_is_refused_by_name() -> None:
    with pytest.raises(TableValidationError, match="Route.Stop is declared as Point") as caught:
        entity_to_payload(Route("p", "r", Point(), {"X": 1}))  # type: ignore[arg-type]
    assert caught.value.field == "Stop"


# ---------------------------------------------------------------- Optional around the markers


class Stage(enum.Enum):
    OPEN = "o"
    DONE = "d"


@dataclasses.dataclass
class Marked:
    PartitionKey: str
    RowKey: str
    Tags: Annotated[Json[list[int]] | None, StoredAs("tg")] = None
    Step: Annotated[Annotated[Stage, ByValue] | None, StoredAs("st")] = None
    At: Annotated[Annotated[Point, Flatten("__")] | None, StoredAs("at")] = None


def test_optional_between_annotated_markers_keeps_every_marker() -> None:
    marked = Marked("p", "r", [1, 2], Stage.DONE, Point(3))
    assert _stored(marked) == {"tg": "[1,2]", "st": "d", "at__X": 3, "at__Y": None}
    assert _round_trip(marked) == marked
    assert _round_trip(Marked("p", "r")) == Marked("p", "r")


def test_comparing_and_diffing_do_not_fail_on_a_value_only_a_write_refuses() -> None:
    first, second = Ledger(PartitionKey="p", RowKey="r"), Ledger(PartitionKey="p", RowKey="r")
    first.Price = "1.5"  # type: ignore[assignment]
    assert first != second  # compared, not refused
    loose = entity_to_payload(Typed("p", "r", Shade=2, Day="x"), validate=False)  # type: ignore[arg-type]
    assert loose.values["Shade"] == 2 and loose.values["Day"] == "x"
    assert entity_to_payload(Route("p", "r", None), validate=False).values["Start_X"] is None  # type: ignore[arg-type]


class NestedPoint(TableEntity):
    At: Annotated[Point | None, Flatten("__")] = None


def test_a_nested_object_on_a_declared_entity_is_flattened_as_model_classes_do() -> None:
    stored = entity_to_payload(NestedPoint(PartitionKey="p", RowKey="r", At=Point(1, 2))).values
    assert {k: v for k, v in stored.items() if k.startswith("At")} == {"At__X": 1, "At__Y": 2}


class Mode(enum.Flag):
    NONE = 0
    READ = 1
    R = 1  # an alias
    WRITE = 2


@dataclasses.dataclass
class Opened:
    PartitionKey: str
    RowKey: str
    Mode: Mode


def test_a_flag_with_an_alias_and_a_named_zero_is_stored_once_by_each_member_name() -> None:
    assert _stored(Opened("p", "r", Mode.R | Mode.WRITE))["Mode"] == "READ|WRITE"
    assert _stored(Opened("p", "r", Mode.NONE))["Mode"] == ""
    assert _read(Opened, Mode="NONE").Mode is Mode.NONE and _read(Opened, Mode="").Mode is Mode.NONE
    assert _read(Opened, Mode="R|WRITE").Mode == Mode.READ | Mode.WRITE
