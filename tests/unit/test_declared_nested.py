"""A TableEntity property holding a dataclass, pydantic model, attrs class or TypedDict is flattened
as model classes flatten theirs, and rebuilt on read."""

from __future__ import annotations

import dataclasses
from typing import Annotated, TypedDict

import attrs
import pydantic
import pytest

from tablesdk import CloudStorageAccount, Flatten, StoredAs, TableEntity, TableValidationError, prop
from tablesdk._entities._entity import entity_from_payload, entity_to_payload


@dataclasses.dataclass
class Address:
    Street: str | None
    City: str | None = None


class Box(TypedDict):
    W: int
    H: int


class Geo(pydantic.BaseModel):
    Lat: float
    Lon: float


@attrs.define
class Tag:
    Label: str


class Customer(TableEntity):
    Name: str = ""
    Home: Address | None = None
    Size: Box | None = None
    At: Annotated[Geo | None, Flatten("__"), StoredAs("loc")] = None
    Badge: Tag


def round_trip(entity: Customer) -> Customer:
    return entity_from_payload(Customer, entity_to_payload(entity))


def test_each_leaf_is_a_property_named_as_model_classes_name_it() -> None:
    customer = Customer(PartitionKey="p", RowKey="r", Name="Ada", Home=Address("1 Main", "Springfield"),
                        Size={"W": 2, "H": 3}, At=Geo(Lat=1.5, Lon=-2.0), Badge=Tag("gold"))
    values = entity_to_payload(customer).values
    assert {k: values[k] for k in ("Home_Street", "Home_City", "Size_W", "Size_H", "loc__Lat", "loc__Lon", "Badge_Label")} == {
        "Home_Street": "1 Main", "Home_City": "Springfield", "Size_W": 2, "Size_H": 3,
        "loc__Lat": 1.5, "loc__Lon": -2.0, "Badge_Label": "gold",
    }
    assert "Home" not in values  # no marker: something is stored below it
    assert round_trip(customer) == customer


def test_an_optional_object_none_and_present_but_empty_differ() -> None:
    empty = Customer(PartitionKey="p", RowKey="r", Home=Address(None), Badge=Tag("x"))
    values = entity_to_payload(empty).values
    assert values["Home"] is True  # the presence marker
    assert round_trip(empty).Home == Address(None)
    assert round_trip(Customer(PartitionKey="p", RowKey="r", Badge=Tag("x"))).Home is None


def test_undeclared_keys_of_a_nested_typeddict_come_back() -> None:
    sized = Customer(PartitionKey="p", RowKey="r", Size={"W": 1, "H": 1, "Depth": 9}, Badge=Tag("x"))  # type: ignore[arg-type]
    back = round_trip(sized)
    assert back.Size == {"W": 1, "H": 1, "Depth": 9} and back.extra_properties == {}


def test_errors_name_the_path() -> None:
    with pytest.raises(TableValidationError) as info:
        entity_to_payload(Customer(PartitionKey="p", RowKey="r", Home=Address("x" * 40_000), Badge=Tag("x")))
    assert info.value.field == "Home.Street" and "Home_Street" in str(info.value)
    with pytest.raises(TableValidationError) as info:
        entity_to_payload(Customer(PartitionKey="p", RowKey="r", Home="1 Main", Badge=Tag("x")))  # type: ignore[arg-type]
    assert info.value.field == "Home" and "declared as Address" in str(info.value)


def test_filters_compare_leaves_not_the_object_and_select_takes_every_leaf() -> None:
    with pytest.raises(TableValidationError) as info:
        Customer.Home == Address("x")
    assert info.value.field == "Home"
    query = CloudStorageAccount.development_storage_account().create_cloud_table_client().create_query("Customers", Customer)
    assert query.where(prop("Home_City") == "Springfield").filter_string() == "Home_City eq 'Springfield'"
    assert query.select("Name", "Home").select_columns == ("Name", "Home", "Home_Street", "Home_City")


def test_a_leaf_name_taken_by_a_declared_property_is_refused_when_the_class_is_defined() -> None:
    with pytest.raises(TypeError, match="Home_City"):
        class Clash(TableEntity):  # noqa: F841
            Home: Address
            Home_City: str
