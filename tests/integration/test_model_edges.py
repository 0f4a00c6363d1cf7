"""On every target: a TableEntity with nested objects (client, context refresh, batch, projection),
and Enum, Decimal, date and timedelta values of dynamic entities and dicts in their stored form."""

from __future__ import annotations

import dataclasses
import decimal
import enum
from datetime import date, datetime, timedelta, timezone

import pydantic
import pytest

from tablesdk import (
    CloudTableClient,
    DynamicEntity,
    EdmType,
    MergeOption,
    SaveChangesOptions,
    TableEntity,
    prop,
)

pytestmark = pytest.mark.integration


@dataclasses.dataclass
class Address:
    Street: str | None
    City: str | None = None


class Geo(pydantic.BaseModel):
    Lat: float
    Lon: float


class Customer(TableEntity):
    Name: str = ""
    Home: Address | None = None
    At: Geo
    Wait: timedelta | None = None


class Shade(enum.Enum):
    RED = "r"
    BLUE = "b"


def test_nested_objects_of_a_declared_entity(client: CloudTableClient, table: str) -> None:
    ada = Customer(PartitionKey="p", RowKey="1", Name="Ada", Home=Address("1 Main", "Springfield"),
                   At=Geo(Lat=51.5, Lon=-0.1), Wait=timedelta(days=1, microseconds=1))
    client.insert_entity(table, ada)
    assert client.get_entity(table, "p", "1", Customer) == ada
    stored = client.get_entity(table, "p", "1")
    assert (stored["Home_City"], stored["At_Lat"], stored["Wait"]) == ("Springfield", 51.5, "1.00:00:00.0000010")
    [found] = client.create_query(table, Customer).where(prop("Home_City") == "Springfield").select("Home")
    assert found.Home == ada.Home and found.Name == ""
    ctx = client.get_table_service_context()
    ctx.merge_option = MergeOption.OVERWRITE_CHANGES
    tracked = ctx.get(table, "p", "1", Customer)
    client.update_entity(table, Customer(PartitionKey="p", RowKey="1", Home=Address(None), At=Geo(Lat=0, Lon=0)), etag="*", mode="replace")
    assert ctx.get(table, "p", "1", Customer) is tracked
    assert tracked.Home == Address(None) and tracked.At == Geo(Lat=0, Lon=0) and tracked.Name == ""
    tracked.Home = None
    tracked.Name = "moved"
    ctx.update_object(tracked)
    ctx.save_changes(SaveChangesOptions.BATCH | SaveChangesOptions.REPLACE_ON_UPDATE)
    assert client.get_entity(table, "p", "1", Customer).Home is None


def test_values_beyond_the_edm_types_without_an_annotation(client: CloudTableClient, table: str) -> None:
    row = {"PartitionKey": "d", "RowKey": "1", "Price": decimal.Decimal("19.990"), "Shade": Shade.BLUE,
           "Due": date(2024, 2, 29), "Took": timedelta(minutes=-90)}
    client.insert_entity(table, row)
    client.insert_entity(table, DynamicEntity(PartitionKey="d", RowKey="2", **{k: v for k, v in row.items() if "Key" not in k}))
    for rk in ("1", "2"):
        back = client.get_entity(table, "d", rk)
        assert (back["Price"], back["Shade"], back["Due"], back["Took"]) == (
            "19.990", "BLUE", datetime(2024, 2, 29, tzinfo=timezone.utc), "-01:30:00"
        )
        assert back.edm_type("Due") is EdmType.DATETIME
    matches = client.create_query(table).where((prop("Price") == decimal.Decimal("19.990")) & (prop("Due") == date(2024, 2, 29)))
    assert sorted(e.RowKey for e in matches) == ["1", "2"]
