"""Correct user code: must pass ``mypy --strict`` with no ignores (tests/unit/test_model_typing.py)."""

from __future__ import annotations

import csv
import dataclasses
import io
import decimal
import enum
from datetime import date, datetime, timedelta
from typing import Annotated

from typing_extensions import assert_type

from tablesdk import Chunked, CloudStorageAccount, DynamicEntity, Int64, Json, StoredAs, TableEntity, prop
from tablesdk._queries._query import TableQuery


class Entry(TableEntity):
    Title: str
    Stars: int = 0
    Views: Int64 = 0
    Posted: datetime | None = None


@dataclasses.dataclass
class Order:
    PartitionKey: str
    RowKey: str
    Total: Annotated[int, StoredAs("cpor")]
    Note: str | None = None
    Tags: Json[list[str]] = dataclasses.field(default_factory=list)
    etag: str | None = None


entry = Entry(PartitionKey="blog", RowKey="1", Title="Hello")
entry = Entry(PartitionKey="blog", RowKey="1", Title="Hello", Stars=5, Posted=None)
assert_type(entry.Stars, int)

row: dict[str, str] = next(csv.DictReader(io.StringIO("A,B\n1,2\n")))
loose: dict[str, object] = {"N": 1}
DynamicEntity(PartitionKey="p", RowKey="r", **row)
DynamicEntity(PartitionKey="p", RowKey="r", **loose)

client = CloudStorageAccount.development_storage_account().create_cloud_table_client()
ctx = client.get_table_service_context()
assert_type(client.create_query("Orders", Order), TableQuery[Order])
assert_type(ctx.create_query("Orders", Order), TableQuery[Order])
assert_type(client.get_entity("Orders", "p", "1", Order), Order)
assert_type(ctx.get("Orders", "p", "1", Order), Order)
assert_type(ctx.get("Orders", "p", "1"), DynamicEntity)
assert_type(ctx.get("Orders", "p", "1", Order).Total, int)  # get raises for a missing entity
assert_type(ctx.get_or_none("Orders", "p", "1", Order), Order | None)
assert_type(ctx.get_or_none("Orders", "p", "1"), DynamicEntity | None)
tracked = ctx.get_or_none("Orders", "p", "1", Order)
if tracked is not None:
    assert_type(tracked.Total, int)
bound = client.get_table_reference("Orders").get_table_service_context()
assert_type(bound.get("p", "1", Order), Order)
assert_type(bound.get_or_none("p", "1", Order), Order | None)


async def read_total() -> int:
    async with CloudStorageAccount.development_storage_account().create_async_cloud_table_client() as aclient:
        actx = aclient.get_table_service_context()
        assert_type(await actx.get("Orders", "p", "1", Order), Order)
        found = await actx.get_or_none("Orders", "p", "1", Order)
        assert_type(found, Order | None)
        abound = aclient.get_table_reference("Orders").get_table_service_context()
        assert_type(await abound.get_or_none("p", "1"), DynamicEntity | None)
        return found.Total if found is not None else (await abound.get("p", "1", Order)).Total


def store(order: Order, plain: dict[str, object]) -> None:
    client.insert_entity("Orders", order)
    client.insert_entity("Orders", plain)
    client.upsert_entity("Orders", {"PartitionKey": "p", "RowKey": "2", "Total": 3})
    client.bulk_insert("Orders", [order, plain])
    ctx.add_object("Orders", order)
    ctx.add_object("Orders", plain)
    for found in client.create_query("Orders", Order):
        assert_type(found, Order)
        assert_type(found.Total, int)
        assert_type(found.Tags, list[str])


def keys(pk: str, rk: str, timestamp: datetime | None, properties: dict[str, object], etag: str | None) -> str:
    return f"{pk}/{rk}"


assert_type(client.create_query("Orders", Order).resolve(keys), TableQuery[str])
assert_type(client.create_query("Orders").where("RowKey gt '1'").resolve(keys).first(), str)


# Values past 64 KiB, nested objects on a declared entity, durations, dynamic values beyond the EDM types.
@dataclasses.dataclass
class Address:
    Street: str
    City: str | None = None


class Page(TableEntity):
    Body: Annotated[str, Chunked]
    Scan: Annotated[bytes | None, Chunked(parts=4)] = None
    Home: Address | None = None
    Took: timedelta = timedelta(0)


@dataclasses.dataclass
class Note:
    PartitionKey: str
    RowKey: str
    Text: Annotated[str, Chunked]


class Shade(enum.Enum):
    RED = "r"


page = Page(PartitionKey="p", RowKey="1", Body="x" * 100_000, Home=Address("1 Main"), Took=timedelta(seconds=3))
assert_type(page.Body, str)
assert_type(page.Scan, bytes | None)
assert_type(page.Home, Address | None)
client.insert_entity("Pages", page)
client.insert_entity("Pages", Note("p", "2", "y" * 70_000))
for note in client.create_query("Pages", Note).where(prop("RowKey") == "2").select("Text"):
    assert_type(note.Text, str)
assert_type(ctx.get("Pages", "p", "1", Page).Home, Address | None)
DynamicEntity(PartitionKey="p", RowKey="3", Price=decimal.Decimal("1.10"), Shade=Shade.RED, Due=date(2024, 1, 1),
              Took=timedelta(minutes=5))
