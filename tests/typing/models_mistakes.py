"""Deliberate mistakes: ``mypy --strict`` must report exactly the ``# E:`` errors, at these lines."""

from __future__ import annotations

from datetime import datetime

from tablesdk import CloudStorageAccount, TableEntity


class Entry(TableEntity):
    Title: str
    Stars: int = 0
    Posted: datetime | None = None


Entry(PartitionKey="b", RowKey="1", Title="x", Stars="5")  # E: arg-type
Entry(PartitionKey="b", RowKey="1", Title="x", Strs=5)  # E: call-arg
Entry(PartitionKey="b", Title="x")  # E: call-arg
Entry(PartitionKey="b", RowKey="1")  # E: call-arg
Entry(PartitionKey="b", RowKey=1, Title="x")  # E: arg-type
Entry(PartitionKey="b", RowKey="1", Title="x", Posted="today")  # E: arg-type

# A context's get_or_none is `Entry | None` (a missing entity is None), so reading a field must
# check for None first; get raises instead and is `Entry`.
context = CloudStorageAccount.development_storage_account().create_cloud_table_client().get_table_service_context()
context.get_or_none("Entries", "b", "1", Entry).Title  # E: union-attr


async def read_title() -> str:
    client = CloudStorageAccount.development_storage_account().create_async_cloud_table_client()
    return (await client.get_table_service_context().get_or_none("Entries", "b", "1", Entry)).Title  # E: union-attr
