"""Model classes (dataclasses, pydantic v2, attrs) and plain mappings as entities (issue 24.2, 24.3, 24.5,
24.6), at the payload level: what is written, what is read back, what is refused and how it is named."""

from __future__ import annotations

import dataclasses
import decimal
import enum
import subprocess
import sys
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Annotated, Any

import attrs
import pydantic
import pytest

from tablesdk import ByValue, Converter, DynamicEntity, EdmType, EntityProperty, Int64, StoredAs
from tablesdk._entities._edm import EntityPayload
from tablesdk._entities._entity import entity_from_payload, entity_to_payload
from tablesdk._entities._entity_access import entity_etag, set_entity_etag
from tablesdk._core._errors import TableValidationError
from tablesdk._entities._models import adapter_for

ROOT = Path(__file__).resolve().parents[2]


class Color(enum.Enum):
    RED = 1
    BLUE = 2


class Money:
    def __init__(self, cents: int) -> None:
        self.cents = cents

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and other.cents == self.cents


MONEY = Converter(lambda m: f"{m.cents}c", lambda s: Money(int(s[:-1])), EdmType.STRING)


@dataclasses.dataclass
class Order:
    PartitionKey: str
    RowKey: str
    Total: Annotated[int, StoredAs("cpor")]
    Views: Int64 = 0
    Note: str | None = None
    Shade: Color = Color.RED
    Code: Annotated[Color, ByValue] = Color.RED
    Price: decimal.Decimal = decimal.Decimal("0")
    Day: date | None = None
    Cost: Annotated[Money, MONEY] | None = None
    etag: str | None = None
    Timestamp: datetime | None = None


class POrder(pydantic.BaseModel):
    PartitionKey: str
    RowKey: str
    Total: int
    Note: str | None = None


@attrs.define
class AOrder:
    PartitionKey: str
    RowKey: str
    Total: int
    Note: str | None = None


@dataclasses.dataclass(frozen=True)
class Frozen:
    PartitionKey: str
    RowKey: str
    N: int = 0
    etag: str | None = None


def _order() -> Order:
    return Order(
        "p", "r", 5, Views=2**40, Note="hi", Shade=Color.BLUE, Code=Color.BLUE, Price=decimal.Decimal("1.10"),
        Day=date(2024, 1, 2), Cost=Money(250), etag='W/"1"',
    )


def test_a_dataclass_is_written_with_its_declared_types_stored_names_and_conversions() -> None:
    payload = entity_to_payload(_order())
    assert payload.values == {
        "PartitionKey": "p", "RowKey": "r", "cpor": 5, "Views": 2**40, "Note": "hi", "Shade": "BLUE", "Code": 2,
        "Price": "1.10", "Day": datetime(2024, 1, 2, tzinfo=timezone.utc), "Cost": "250c",
    }
    assert payload.types["cpor"] is EdmType.INT32 and payload.types["Views"] is EdmType.INT64
    assert payload.types["Code"] is EdmType.INT32 and payload.types["Day"] is EdmType.DATETIME
    assert payload.etag == 'W/"1"'


def test_a_dataclass_is_read_back_exactly() -> None:
    order = _order()
    payload = entity_to_payload(order)
    stamp = datetime(2025, 1, 1, tzinfo=timezone.utc)
    read = entity_from_payload(Order, EntityPayload({**payload.values, "Timestamp": stamp}, payload.types, 'W/"2"'))
    assert read == dataclasses.replace(order, etag='W/"2"', Timestamp=stamp)


@pytest.mark.parametrize("cls", [POrder, AOrder])
def test_pydantic_and_attrs_classes_round_trip(cls: Any) -> None:
    obj = cls(PartitionKey="p", RowKey="r", Total=3, Note=None)
    payload = entity_to_payload(obj)
    assert payload.values == {"PartitionKey": "p", "RowKey": "r", "Total": 3, "Note": None}
    assert payload.types["Total"] is EdmType.INT32
    assert entity_from_payload(cls, payload) == obj
    missing = entity_from_payload(cls, EntityPayload({"PartitionKey": "p", "RowKey": "r"}, {}, None))
    assert missing.Total is None and missing.Note is None


@pytest.mark.parametrize("cls", [Order, POrder, AOrder])
def test_a_wrong_value_type_names_the_class_property_declared_and_given_type(cls: Any) -> None:
    fields = {"PartitionKey": "p", "RowKey": "r", "Total": "5"}
    obj = cls(**fields) if cls is not POrder else cls.model_construct(**fields)
    with pytest.raises(TableValidationError) as caught:
        entity_to_payload(obj)
    text = str(caught.value)
    assert cls.__name__ in text and "int" in text and "Edm.Int32" in text and "str" in text


def test_values_read_without_types_are_read_as_declared() -> None:
    payload = EntityPayload(
        {"PartitionKey": "p", "RowKey": "r", "cpor": "7", "Views": "12", "Day": "2024-01-02T00:00:00Z", "Code": 1},
        {}, None,
    )
    read = entity_from_payload(Order, payload)
    assert read.Total == 7 and read.Views == 12 and read.Day == date(2024, 1, 2) and read.Code is Color.RED


def test_an_unknown_enum_name_or_value_is_a_named_error() -> None:
    for name, stored in (("Shade", "GREEN"), ("Code", 9)):
        payload = EntityPayload({"PartitionKey": "p", "RowKey": "r", "cpor": 1, name: stored}, {}, None)
        with pytest.raises(TableValidationError, match=f"{stored!r} is not a .* of Color"):
            entity_from_payload(Order, payload)


def test_properties_the_class_lacks_are_left_out_or_refused() -> None:
    payload = EntityPayload({"PartitionKey": "p", "RowKey": "r", "Total": 1, "Other": 2}, {}, None)
    assert entity_from_payload(AOrder, payload).Total == 1
    with pytest.raises(TableValidationError, match="Other.*not a field of AOrder"):
        entity_from_payload(AOrder, payload, ignore_missing_properties=False)


def test_classes_that_cannot_be_entities_are_refused_by_name() -> None:
    @dataclasses.dataclass
    class NoKeys:
        Total: int

    @dataclasses.dataclass
    class Renamed:
        PartitionKey: Annotated[str, StoredAs("pk")]
        RowKey: str

    @dataclasses.dataclass
    class Twice:
        PartitionKey: str
        RowKey: str
        A: Annotated[int, StoredAs("X")]
        B: Annotated[int, StoredAs("X")]

    @dataclasses.dataclass
    class Unmappable:
        PartitionKey: str
        RowKey: str
        Tags: list[str]

    with pytest.raises(TypeError, match="NoKeys .* no PartitionKey"):
        entity_to_payload(NoKeys(1))
    with pytest.raises(TypeError, match="Renamed.PartitionKey: .* cannot be stored under another name"):
        adapter_for(Renamed)
    with pytest.raises(TypeError, match="Twice: two fields are stored as \\['X'\\]"):
        adapter_for(Twice)
    with pytest.raises(TypeError, match="Unmappable.Tags: cannot map annotation"):
        adapter_for(Unmappable)
    with pytest.raises(TypeError, match="expected an entity"):
        entity_to_payload(["p", "r"])


def test_the_etag_goes_into_the_etag_field_even_of_a_frozen_class() -> None:
    frozen = Frozen("p", "r")
    set_entity_etag(frozen, 'W/"3"')
    assert frozen.etag == entity_etag(frozen) == 'W/"3"'
    plain = AOrder("p", "r", 1)
    set_entity_etag(plain, 'W/"3"')  # no etag field: nothing kept on the object
    assert entity_etag(plain) is None


def test_a_mapping_is_written_as_the_dynamic_entity_of_its_items() -> None:
    row = {"PartitionKey": "p", "RowKey": "r", "A": "1", "N": 2**40, "T": EntityProperty(3, EdmType.INT64)}
    payload = entity_to_payload(row)
    assert payload == entity_to_payload(DynamicEntity(**row))
    assert payload.types["N"] is EdmType.INT64 and payload.types["T"] is EdmType.INT64
    with_etag = entity_to_payload({"PartitionKey": "p", "RowKey": "r", "etag": 'W/"1"', "Timestamp": 0})
    assert with_etag.etag == 'W/"1"' and set(with_etag.values) == {"PartitionKey", "RowKey"}
    with pytest.raises(TableValidationError, match="PartitionKey"):
        entity_to_payload({"RowKey": "r"})
    with pytest.raises(TableValidationError, match="1abc"):
        entity_to_payload({"PartitionKey": "p", "RowKey": "r", "1abc": 1})


def test_dict_is_a_result_type() -> None:
    payload = EntityPayload({"PartitionKey": "p", "RowKey": "r", "A": 1}, {"A": EdmType.INT32}, 'W/"1"')
    assert entity_from_payload(dict, payload) == {"PartitionKey": "p", "RowKey": "r", "A": 1, "etag": 'W/"1"'}


def test_the_adapter_is_made_once_per_class() -> None:
    assert adapter_for(Order) is adapter_for(Order)
    assert adapter_for(int) is None


def test_importing_tablesdk_imports_neither_pydantic_nor_attrs() -> None:
    code = "import sys, tablesdk, tablesdk.aio; print('pydantic' in sys.modules, 'attr' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "False"], done.stderr


def test_a_declared_entity_stores_renamed_and_converted_properties() -> None:
    from tablesdk import TableEntity

    class Sale(TableEntity):
        Total: Annotated[int, StoredAs("cpor")]
        Shade: Color = Color.RED
        Price: decimal.Decimal | None = None

    sale = Sale(PartitionKey="p", RowKey="r", Total=5, Shade=Color.BLUE, Price=decimal.Decimal("2.50"))
    assert str(Sale.Total > 5) == "cpor gt 5"
    payload = entity_to_payload(sale)
    assert payload.values == {"PartitionKey": "p", "RowKey": "r", "cpor": 5, "Shade": "BLUE", "Price": "2.50"}
    read = entity_from_payload(Sale, payload)
    assert (read.Total, read.Shade, read.Price) == (5, Color.BLUE, decimal.Decimal("2.50"))
    assert read == sale and "Total=5" in repr(read)
    with pytest.raises(TypeError, match="no declared properties \\['cpor'\\]"):
        Sale(PartitionKey="p", RowKey="r", cpor=5)  # type: ignore[call-arg]


def test_renaming_a_system_property_or_reusing_a_stored_name_is_refused_when_the_class_is_defined() -> None:
    from tablesdk import TableEntity

    with pytest.raises(TypeError, match="cannot be stored under another name"):
        class Bad(TableEntity):
            RowKey: Annotated[str, StoredAs("rk")]  # type: ignore[misc]

    with pytest.raises(TypeError, match="B is stored as 'B' already"):
        class Clash(TableEntity):
            B: int
            A: Annotated[int, StoredAs("B")]


@dataclasses.dataclass
class Shadowed:
    PartitionKey: str
    RowKey: str
    Color: Color = Color.RED  # the field's default shadows its type's name in the class body


def test_a_field_named_as_its_type_maps_the_type_not_its_default() -> None:
    assert entity_to_payload(Shadowed("p", "r", Color.BLUE)).values["Color"] == "BLUE"
