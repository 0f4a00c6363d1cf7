"""Orders kept as a dataclass and a pydantic model, stored as they are (no TableEntity).

An ``Order`` is a standard dataclass with a nested ``Address`` (flattened into
``ShipTo_Street``, ``ShipTo_City``), an enum stored by name, a ``Decimal`` stored as exact
text, a list stored as JSON text and a field stored under a short name. A ``Customer`` is a
pydantic model. Both go through the client, a context (which keeps the ETag of an object
that has no field for it) and ``bulk_insert``, and come back as themselves. A resolver
reads a summary without making the objects.

The file passes ``mypy --strict`` with no ignores and runs against the account in
``AZURE_STORAGE_CONNECTION_STRING``, or else the bundled emulator started in-process:

    python samples/orders.py [--format json|atom]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import os
import sys
from collections.abc import Iterator
from datetime import date, datetime
from decimal import Decimal
from typing import Annotated, Any

import pydantic

from tablesdk import CloudStorageAccount, CloudTableClient, Json, StoredAs

TABLE = "Orders"


class Status(enum.Enum):
    OPEN = "open"
    SHIPPED = "shipped"


@dataclasses.dataclass
class Address:
    Street: str
    City: str


@dataclasses.dataclass
class Order:
    """PartitionKey: the customer's id; RowKey: the order number."""

    PartitionKey: str
    RowKey: str
    Total: Decimal
    ShipTo: Address
    Status: Annotated[Status, StoredAs("St")] = Status.OPEN
    Lines: Json[list[str]] = dataclasses.field(default_factory=list)
    Due: date | None = None


class Customer(pydantic.BaseModel):
    """One customer: PartitionKey 'customers', RowKey the id."""

    PartitionKey: str = "customers"
    RowKey: str
    Name: str
    Vip: bool = False
    etag: str | None = None


def run(client: CloudTableClient) -> None:
    client.create_table_if_not_exists(TABLE)
    ada = Customer(RowKey="c1", Name="Ada")
    client.insert_entity(TABLE, ada)
    assert ada.etag, "the ETag lands in the model's etag field"

    first = Order("c1", "0001", Decimal("19.90"), Address("1 Main St", "Springfield"),
                  Lines=["tea", "cups"], Due=date(2025, 3, 1))
    ctx = client.get_table_service_context()
    ctx.add_object(TABLE, first)
    ctx.save_changes()
    descriptor = ctx.get_entity_descriptor(first)
    assert descriptor is not None and descriptor.etag  # Order has no etag field: the context keeps it
    first.Status = Status.SHIPPED
    ctx.update_object(first)
    ctx.save_changes()

    more = [{"PartitionKey": "c1", "RowKey": f"{n:04}", "Total": "5.00", "ShipTo_Street": "1 Main St",
             "ShipTo_City": "Springfield", "St": "OPEN"} for n in range(2, 6)]
    print("bulk:", client.bulk_insert(TABLE, more))

    orders = list(client.create_query(TABLE, Order).where("PartitionKey eq 'c1'"))
    print("orders:", [(o.RowKey, o.Total, o.Status.name) for o in orders])
    assert orders[0] == first, orders[0]
    assert sum(o.Total for o in orders) == Decimal("39.90")

    def summary(pk: str, rk: str, timestamp: datetime | None, props: dict[str, Any], etag: str | None) -> str:
        return f"{rk}:{props.get('St')}"

    print("summary:", list(client.create_query(TABLE).where("PartitionKey eq 'c1'").resolve(summary)))
    back = client.get_entity(TABLE, "customers", "c1", Customer)
    assert back.Name == "Ada" and back.etag == ada.etag
    client.delete_table(TABLE)


@contextlib.contextmanager
def open_account() -> Iterator[CloudStorageAccount]:
    conn = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    if conn:
        yield CloudStorageAccount.parse(conn)
        return
    from tablesdk.devstore import DevStore

    with DevStore() as store:
        yield CloudStorageAccount.parse(store.connection_string)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Orders as a dataclass and a pydantic model.")
    parser.add_argument("--format", choices=("json", "atom"), default="json", help="wire format")
    args = parser.parse_args(argv)
    with open_account() as account, account.create_cloud_table_client(payload_format=args.format) as client:
        run(client)
    print("orders sample: all steps passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
