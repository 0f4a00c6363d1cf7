"""Nested objects flattened into properties and JSON-text fields (issue 24.4), at the payload level:
names, round trips (hypothesis), None sub-objects, limits named by their full path, cycles refused."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Optional, TypedDict

import pydantic
import pytest
from hypothesis import given, settings, strategies as st

from tablesdk import Flatten, Json
from tablesdk._entities._edm import EntityPayload
from tablesdk._entities._entity import entity_from_payload, entity_to_payload
from tablesdk._core._errors import TableValidationError


@dataclasses.dataclass
class Address:
    Street: str
    City: str | None = None


class Size(TypedDict):
    W: int
    H: int


class Shipping(pydantic.BaseModel):
    Address: Address
    Note: Optional[str] = None


@dataclasses.dataclass
class Order:
    PartitionKey: str
    RowKey: str
    Shipping: Shipping | None
    Size: Size
    Billing: Annotated[Address, Flatten("__")] | None = None
    Tags: Json[list[str]] = dataclasses.field(default_factory=list)
    Seen: Json[set[int]] = dataclasses.field(default_factory=set)
    Map: Json[dict[int, tuple[int, str]]] = dataclasses.field(default_factory=dict)


def _as_read(payload: EntityPayload) -> EntityPayload:
    """The payload as the service gives it back: nulls are not stored."""
    return EntityPayload({k: v for k, v in payload.values.items() if v is not None}, payload.types, None)


def test_nested_objects_are_flattened_with_the_delimiter_and_json_fields_are_text() -> None:
    order = Order("p", "r", Shipping(Address=Address("Main", "X")), {"W": 1, "H": 2}, Address("B"),
                  ["a"], {3, 1}, {1: (2, "x")})
    values = entity_to_payload(order).values
    assert values == {
        "PartitionKey": "p", "RowKey": "r", "Shipping_Address_Street": "Main", "Shipping_Address_City": "X",
        "Shipping_Note": None, "Size_W": 1, "Size_H": 2, "Billing__Street": "B", "Billing__City": None,
        "Tags": '["a"]', "Seen": "[1,3]", "Map": '{"1":[2,"x"]}',
    }
    assert entity_from_payload(Order, _as_read(entity_to_payload(order))) == order


def test_none_sub_objects_round_trip() -> None:
    order = Order("p", "r", None, {"W": 0, "H": 0})
    assert entity_from_payload(Order, _as_read(entity_to_payload(order))) == order


def test_limits_are_checked_on_the_flattened_form_and_name_the_full_path() -> None:
    long = Order("p", "r", Shipping(Address=Address("x" * 40_000)), {"W": 1, "H": 2})
    with pytest.raises(TableValidationError) as caught:
        entity_to_payload(long)
    assert caught.value.field == "Shipping.Address.Street" and "Shipping_Address_Street" in str(caught.value)
    wrong = Order("p", "r", None, {"W": "1", "H": 2})  # type: ignore[typeddict-item]
    with pytest.raises(TableValidationError) as typed:
        entity_to_payload(wrong)
    assert typed.value.field == "Size.W"


def test_too_many_flattened_properties_are_refused() -> None:
    fields = [(f"F{i}", int, dataclasses.field(default=i)) for i in range(130)]
    Wide = dataclasses.make_dataclass("Wide", fields)
    Entity = dataclasses.make_dataclass(
        "Entity", [("PartitionKey", str), ("RowKey", str), ("A", Wide), ("B", Wide)]
    )
    with pytest.raises(TableValidationError, match="at most 255 properties"):
        entity_to_payload(Entity("p", "r", Wide(), Wide()))


@dataclasses.dataclass
class Loop:
    PartitionKey: str
    RowKey: str
    Next: Link | None = None


@dataclasses.dataclass
class Link:
    Back: Link | None = None


def test_a_reference_cycle_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="Loop.Next.Back: Link contains itself \\(Loop -> Link -> Link\\)"):
        entity_to_payload(Loop("p", "r"))


def test_unreadable_json_text_is_a_named_error() -> None:
    payload = EntityPayload({"PartitionKey": "p", "RowKey": "r", "Size_W": 1, "Size_H": 1, "Tags": "[oops"}, {}, None)
    with pytest.raises(TableValidationError, match="Tags.*JSON"):
        entity_from_payload(Order, payload)


texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)


@settings(max_examples=60, deadline=None)
@given(
    street=texts, city=st.none() | texts, note=st.none() | texts, has_shipping=st.booleans(),
    w=st.integers(-(2**31), 2**31 - 1), h=st.integers(-(2**31), 2**31 - 1),
    tags=st.lists(texts, max_size=5), seen=st.sets(st.integers(), max_size=5),
    mapping=st.dictionaries(st.integers(), st.tuples(st.integers(), texts), max_size=4),
)
def test_nested_and_json_fields_round_trip(
    street: str, city: str | None, note: str | None, has_shipping: bool, w: int, h: int,
    tags: list[str], seen: set[int], mapping: dict[int, tuple[int, str]],
) -> None:
    shipping = Shipping(Address=Address(street, city), Note=note) if has_shipping else None
    order = Order("p", "r", shipping, {"W": w, "H": h}, None, tags, seen, mapping)
    assert entity_from_payload(Order, entity_to_payload(order)) == order
