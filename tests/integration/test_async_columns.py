"""What the async query reads through the one page stream, against every target (Azurite JSON, the
bundled emulator in JSON and Atom): ``to_arrow`` / ``to_pandas`` / ``iter_arrow_batches`` equal the
sync query's results on the same table, ``iter_parallel`` reads every entity once, and reading
ahead changes nothing but timing."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import pytest_asyncio

from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, prop
from tablesdk.aio import AsyncCloudTableClient

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

BASE = datetime(2020, 1, 1, tzinfo=timezone.utc)
COUNT = 40


@pytest_asyncio.fixture
async def aclient(target: str, connection_string: str) -> AsyncIterator[AsyncCloudTableClient]:
    payload_format = target.rsplit("-", 1)[1]
    async with CloudStorageAccount.parse(connection_string).create_async_cloud_table_client(
        payload_format=payload_format
    ) as client:
        yield client


@pytest.fixture
def readings(client: CloudTableClient, table: str) -> str:
    entities = [
        DynamicEntity(
            PartitionKey=f"p{n % 4}", RowKey=f"{n:04d}", Seq=3_000_000_000 + n * 10_000_000_000, Value=n / 3,
            At=BASE + timedelta(microseconds=n * 1_000_001), Sensor=uuid.UUID(int=n), Raw=bytes([n, 255 - n]),
            Small=n, Label=f"label {n}",
        )
        for n in range(COUNT)
    ]
    result = client.bulk_insert(table, entities)
    assert not result.failed
    return table


async def test_async_to_arrow_and_to_pandas_equal_the_sync_results(
    client: CloudTableClient, aclient: AsyncCloudTableClient, readings: str
) -> None:
    sync = client.create_query(readings).page_size(7)
    asynchronous = aclient.create_query(readings).page_size(7)
    for with_etag in (False, True):
        expected = sync.to_arrow(with_etag=with_etag)
        got = await asynchronous.to_arrow(with_etag=with_etag)
        assert expected.num_rows == COUNT
        assert got.equals(expected), (got.schema, expected.schema)
    frame = await asynchronous.to_pandas()
    assert frame.equals(sync.to_pandas())
    assert list(frame.dtypes.astype(str)) == list(sync.to_pandas().dtypes.astype(str))


async def test_async_arrow_batches_are_the_sync_batches(
    client: CloudTableClient, aclient: AsyncCloudTableClient, readings: str
) -> None:
    sync = list(client.create_query(readings).where(prop("Small") >= 5).page_size(9).iter_arrow_batches())
    query = aclient.create_query(readings).where(prop("Small") >= 5).page_size(9)
    got = [batch async for batch in query.iter_arrow_batches()]
    assert len(got) == len(sync) >= 4
    assert all(a.equals(b) for a, b in zip(got, sync))
    capped = await query.take(10).to_arrow()
    assert capped.equals(client.create_query(readings).where(prop("Small") >= 5).page_size(9).take(10).to_arrow())
    assert capped.num_rows == 10


async def test_async_read_ahead_reads_the_same_entities(aclient: AsyncCloudTableClient, readings: str) -> None:
    query = aclient.create_query(readings).page_size(6)
    serial = [dict(r.items()) for r in await query.read_ahead(False).to_list()]
    ahead = [dict(r.items()) async for r in query.read_ahead(True)]
    assert ahead == serial and len(serial) == COUNT
    assert query.reads_ahead == "auto" and query.read_ahead(True).reads_ahead is True


@pytest.mark.parametrize("boundaries", [None, ["p1", "p3"]])
async def test_async_iter_parallel_reads_every_entity_once(
    aclient: AsyncCloudTableClient, readings: str, boundaries: list[str] | None
) -> None:
    query = aclient.create_query(readings).page_size(4)
    found = [r.RowKey async for r in query.iter_parallel(3, boundaries=boundaries)]
    assert sorted(found) == [f"{n:04d}" for n in range(COUNT)]
    capped = [r.RowKey async for r in query.take(5).iter_parallel(2, boundaries=boundaries)]
    assert len(capped) == 5 and len(set(capped)) == 5


async def test_leaving_an_async_parallel_scan_early_stops_its_tasks(
    aclient: AsyncCloudTableClient, readings: str
) -> None:
    import asyncio

    scan: Any = aclient.create_query(readings).page_size(2).iter_parallel(4, boundaries=["p1", "p2", "p3"])
    first = [entity async for entity in _first(scan, 3)]
    await scan.aclose()
    assert len(first) == 3
    others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    # nothing is left waiting on the scan's queue (a task blocked there would never end)
    await asyncio.wait_for(asyncio.gather(*others, return_exceptions=True), 60)


async def _first(stream: Any, n: int) -> Any:
    for _ in range(n):
        yield await stream.__anext__()


async def test_async_incremental_reads_are_the_sync_ones(
    client: CloudTableClient, aclient: AsyncCloudTableClient, readings: str
) -> None:
    from tablesdk import Watermark

    sync = client.create_query(readings).page_size(7)
    asynchronous = aclient.create_query(readings).page_size(7)
    start = Watermark.start()
    expected = sync.to_arrow(since=start)
    got = await asynchronous.to_arrow(since=start)
    assert got.num_rows == COUNT and got.select(got.schema.names).equals(expected.select(expected.schema.names))
    mark = Watermark.of(got)
    assert mark.seen == Watermark.of(expected).seen and len(mark.seen) == COUNT
    client.upsert_entity(readings, DynamicEntity(PartitionKey="p1", RowKey="0001", Small=-1), mode="merge")
    frame = await asynchronous.to_pandas(since=mark)
    assert list(frame["RowKey"]) == ["0001"] and list(frame["Small"]) == [-1]
    assert (await asynchronous.to_arrow(since=Watermark.of(frame))).num_rows == 0
    batches = asynchronous.iter_arrow_batches(since=mark)
    rows = [row async for batch in batches for row in batch.column("RowKey").to_pylist()]
    assert rows == ["0001"] and batches.watermark == Watermark.of(frame)


async def test_async_changes_are_the_sync_ones(
    client: CloudTableClient, aclient: AsyncCloudTableClient, readings: str
) -> None:
    from tablesdk import Watermark

    sync = client.create_query(readings).page_size(7)
    asynchronous = aclient.create_query(readings).page_size(7)
    start = Watermark.start()
    expected = sync.changes(start)
    expected_keys = [(e.PartitionKey, e.RowKey, e.etag) for e in expected]
    changes = asynchronous.changes(start)
    got = [(e.PartitionKey, e.RowKey, e.etag) async for e in changes]
    assert got == expected_keys and len(got) == COUNT
    mark = changes.watermark
    assert mark.seen == expected.watermark.seen and len(mark.seen) == COUNT
    # An update after the watermark is delivered once; its earlier version, seen, is not.
    client.upsert_entity(readings, DynamicEntity(PartitionKey="p2", RowKey="0002", Small=-2), mode="merge")
    again = asynchronous.changes(mark)
    rows = [(e.RowKey, e["Small"]) async for e in again]
    assert rows == [("0002", -2)]
    assert [e async for e in asynchronous.changes(again.watermark)] == []
