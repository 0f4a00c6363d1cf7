"""The table object and the seeds' actions on every target, sync and async."""

from __future__ import annotations

import asyncio

import pytest

from tablesdk import (
    BatchError,
    CloudStorageAccount,
    CloudTableClient,
    DynamicEntity,
    PreconditionFailedError,
    ResourceNotFoundError,
    TableBatchOperation,
    TableEntity,
    TableOperation,
)

pytestmark = pytest.mark.integration


class Heartbeat(TableEntity):
    Beats: int
    Host: str


def test_actions_round_trip(client: CloudTableClient, unique_table_name: str) -> None:
    table = client.get_table_reference(unique_table_name)
    assert table.create_if_not_exists() and table.exists()
    try:
        beat = Heartbeat(PartitionKey="hosts", RowKey="web-1", Beats=0, Host="web-1")
        inserted = table.execute(TableOperation.insert(beat))
        assert inserted.status in (201, 204) and inserted.etag and beat.etag == inserted.etag

        merge = TableOperation.merge(beat)  # the seeds' heartbeat: one merge, executed again
        etags = set()
        for n in range(1, 4):
            beat.Beats = n
            result = table.execute(merge)
            assert result.status == 204 and result.entity is beat
            etags.add(result.etag)
        assert len(etags) == 3

        found = table.execute(TableOperation.retrieve("hosts", "web-1", Heartbeat))
        assert found.status == 200 and found.entity is not None and found.entity.Beats == 3
        assert found.etag == beat.etag

        missing = table.execute(TableOperation.retrieve("hosts", "nobody"))
        assert (missing.status, missing.etag, missing.entity) == (404, None, None)

        stale = Heartbeat(PartitionKey="hosts", RowKey="web-1", Beats=99, Host="web-1")
        stale.etag = inserted.etag
        with pytest.raises(PreconditionFailedError):
            table.execute(TableOperation.replace(stale))

        deleted = table.execute(TableOperation.delete(beat))
        assert deleted.status == 204 and deleted.etag is None
        assert table.execute(TableOperation.retrieve("hosts", "web-1")).status == 404
    finally:
        table.delete()
    assert not table.exists()


def test_retrieve_from_a_missing_table_raises(client: CloudTableClient, unique_table_name: str) -> None:
    table = client.get_table_reference(unique_table_name)
    with pytest.raises(ResourceNotFoundError):
        table.execute(TableOperation.retrieve("p", "r"))


def test_batch_results_in_order_and_the_failing_index(client: CloudTableClient, table: str) -> None:
    orders = client.get_table_reference(table)
    existing = DynamicEntity(PartitionKey="p", RowKey="b", N=0)
    orders.insert_entity(existing)

    batch: TableBatchOperation[DynamicEntity] = TableBatchOperation()
    batch.insert(DynamicEntity(PartitionKey="p", RowKey="a", N=1))
    batch.merge(existing)
    batch.insert_or_replace(DynamicEntity(PartitionKey="p", RowKey="c", N=3))
    results = orders.execute_batch(batch)
    assert results[0].status in (201, 204) and [r.status for r in results[1:]] == [204, 204]
    assert all(r.etag for r in results) and results[1].entity is existing and existing.etag == results[1].etag

    failing: TableBatchOperation[DynamicEntity] = TableBatchOperation()
    failing.insert(DynamicEntity(PartitionKey="p", RowKey="d", N=4))
    failing.insert(DynamicEntity(PartitionKey="p", RowKey="a", N=5))  # exists: 409
    with pytest.raises(BatchError) as refused:
        orders.execute_batch(failing)
    assert refused.value.failed_index == 1
    assert orders.execute(TableOperation.retrieve("p", "d")).status == 404  # all or nothing

    alone: TableBatchOperation[DynamicEntity] = TableBatchOperation([TableOperation.retrieve("p", "c")])
    [read] = orders.execute_batch(alone)
    assert read.status == 200 and read.entity is not None and read.entity["N"] == 3


def test_table_object_entity_operations_and_bound_context(client: CloudTableClient, table: str) -> None:
    blogs = client.get_table_reference(table)
    blogs.insert_entity(Heartbeat(PartitionKey="h", RowKey="1", Beats=1, Host="a"))
    assert blogs.get_entity("h", "1", Heartbeat).Beats == 1
    ctx = blogs.get_table_service_context()
    beat = ctx.get("h", "1", Heartbeat)
    assert beat is not None
    beat.Beats = 2
    ctx.update_object(beat)
    ctx.add_object(Heartbeat(PartitionKey="h", RowKey="2", Beats=7, Host="b"))
    ctx.save_changes()
    assert sorted(h.Beats for h in blogs.create_query(Heartbeat)) == [2, 7]
    assert blogs.bulk_insert([DynamicEntity(PartitionKey="h", RowKey=str(n)) for n in range(3, 8)]).total == 5


def test_async_table_object_and_actions(target: str, connection_string: str, unique_table_name: str) -> None:
    pytest.importorskip("aiohttp")
    from tablesdk.aio import AsyncCloudTableClient

    async def run() -> None:
        account = CloudStorageAccount.parse(connection_string)
        async with AsyncCloudTableClient(account, payload_format=target.rsplit("-", 1)[1]) as client:
            table = client.get_table_reference(unique_table_name)
            await table.create()
            try:
                beat = Heartbeat(PartitionKey="hosts", RowKey="a", Beats=0, Host="a")
                await table.execute(TableOperation.insert(beat))
                merge = TableOperation.merge(beat)
                for n in range(1, 3):
                    beat.Beats = n
                    assert (await table.execute(merge)).status == 204
                found = await table.execute(TableOperation.retrieve("hosts", "a", Heartbeat))
                assert found.entity is not None and found.entity.Beats == 2
                assert (await table.execute(TableOperation.retrieve("hosts", "zz"))).status == 404
                batch: TableBatchOperation[Heartbeat] = TableBatchOperation()
                batch.insert(Heartbeat(PartitionKey="hosts", RowKey="b", Beats=1, Host="b"))
                batch.insert(Heartbeat(PartitionKey="hosts", RowKey="a", Beats=1, Host="a"))
                with pytest.raises(BatchError) as refused:
                    await table.execute_batch(batch)
                assert refused.value.failed_index == 1
                ctx = table.get_table_service_context()
                got = await ctx.get("hosts", "a", Heartbeat)
                assert got is not None and got.Beats == 2
            finally:
                await table.delete()

    asyncio.run(run())
