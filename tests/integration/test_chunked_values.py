"""Chunked properties on every target: values past 64 KiB written and read back through the client,
a context (merges of a shorter value included), a batch and bulk_insert; projections and the
context's refresh of a tracked entity."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import pytest

from tablesdk import (
    Chunked,
    CloudStorageAccount,
    CloudTableClient,
    DynamicEntity,
    MergeOption,
    SaveChangesOptions,
    TableBatchOperation,
    TableEntity,
    TableValidationError,
    prop,
)

pytestmark = pytest.mark.integration

LONG = "x" * 32_767 + "\U0001F600" + "x" * 167_233 + "\u00e9"  # seven parts; a pair at the first boundary


class Page(TableEntity):
    Title: str = ""
    Body: Annotated[str, Chunked] = ""
    Image: Annotated[bytes | None, Chunked(parts=4)] = None


@dataclasses.dataclass
class Note:
    PartitionKey: str
    RowKey: str
    Text: Annotated[str | None, Chunked] = None


def test_client_and_projection(client: CloudTableClient, table: str) -> None:
    page = Page(PartitionKey="p", RowKey="1", Title="t", Body=LONG, Image=bytes(range(256)) * 1000)
    client.insert_entity(table, page)
    back = client.get_entity(table, "p", "1", Page)
    assert (back.Body, back.Image, back.Title) == (LONG, page.Image, "t")
    raw = client.get_entity(table, "p", "1")  # a DynamicEntity sees the parts as they are stored
    assert "".join(raw[name] for name in ["Body", *(f"Body_{n}" for n in range(1, 16))]) == LONG
    assert raw["Body_7"] == "" and len(raw["Body"]) == 32_767  # the pair that would straddle goes whole
    [selected] = client.create_query(table, Page).select("Body")
    assert selected.Body == LONG and selected.Title == "" and selected.Image is None
    with pytest.raises(TableValidationError, match="Chunked"):
        client.create_query(table, Note).where(prop("Text") == "x")


def test_a_merge_of_a_shorter_value_leaves_no_part_of_the_longer(client: CloudTableClient, table: str) -> None:
    ctx = client.get_table_service_context()
    note = Note("p", "1", LONG)
    ctx.add_object(table, note)
    ctx.save_changes()
    note.Text = "short"
    ctx.update_object(note)
    ctx.save_changes()  # a merge (the context's default update)
    assert client.get_entity(table, "p", "1", Note).Text == "short"
    stored = client.get_entity(table, "p", "1")
    assert all(stored[f"Text_{n}"] == "" for n in range(1, 16))
    client.upsert_entity(table, Note("p", "1", LONG[:70_000]), mode="merge")  # insert-or-merge
    assert client.get_entity(table, "p", "1", Note).Text == LONG[:70_000]


def test_batches_bulk_and_a_refresh_of_a_tracked_entity(client: CloudTableClient, table: str) -> None:
    batch: TableBatchOperation[Page] = TableBatchOperation()
    for n in range(3):
        batch.insert(Page(PartitionKey="b", RowKey=str(n), Body=LONG[n:]))
    client.get_table_reference(table).execute_batch(batch)
    loaded = client.bulk_insert(table, [Note("k", str(n), LONG[: 40_000 * (n + 1)]) for n in range(6)])
    assert not loaded.failed
    assert [p.Body for p in client.create_query(table, Page).where(Page.PartitionKey == "b")] == [LONG, LONG[1:], LONG[2:]]
    assert [n.Text for n in client.create_query(table, Note).where("PartitionKey eq 'k'")] == [
        LONG[: 40_000 * (n + 1)] for n in range(6)
    ]
    ctx = client.get_table_service_context()
    ctx.merge_option = MergeOption.OVERWRITE_CHANGES
    tracked = ctx.get(table, "b", "0", Page)
    client.update_entity(table, Page(PartitionKey="b", RowKey="0", Body="changed elsewhere"), etag="*")
    assert ctx.get(table, "b", "0", Page) is tracked and tracked.Body == "changed elsewhere"
    ctx.merge_option = MergeOption.PRESERVE_CHANGES
    tracked.Body = LONG[:99_999]
    ctx.update_object(tracked)
    ctx.save_changes(SaveChangesOptions.BATCH)
    assert client.get_entity(table, "b", "0", Page).Body == LONG[:99_999]


def test_dynamic_entities_keep_their_limit(client: CloudTableClient, table: str) -> None:
    with pytest.raises(TableValidationError) as info:
        client.insert_entity(table, DynamicEntity(PartitionKey="p", RowKey="1", Body=LONG))
    assert info.value.field == "Body" and "64 KiB" in str(info.value)


@pytest.mark.asyncio
async def test_the_async_client_and_context(target: str, connection_string: str, unique_table_name: str) -> None:
    account = CloudStorageAccount.parse(connection_string)
    async with account.create_async_cloud_table_client(payload_format=target.rsplit("-", 1)[1]) as aclient:
        await aclient.create_table(unique_table_name)
        try:
            await aclient.insert_entity(unique_table_name, Note("p", "1", LONG))
            ctx = aclient.get_table_service_context()
            note = await ctx.get(unique_table_name, "p", "1", Note)
            assert note.Text == LONG
            note.Text = LONG[:40_000]
            ctx.update_object(note)
            await ctx.save_changes()
            assert (await aclient.get_entity(unique_table_name, "p", "1", Note)).Text == LONG[:40_000]
        finally:
            await aclient.delete_table_if_exists(unique_table_name)
