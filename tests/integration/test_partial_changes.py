"""An incremental read stopped early, or cut short by take(): its watermark must not pass the rows it
did not reach. Pages come in key order, not Timestamp order, so a row not yet read can be older
than every row handed out. The emulator's clock is set by the test."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta

import pytest

from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, TableValidationError, Watermark
from tablesdk.devstore import DevStore

pytestmark = pytest.mark.integration

TICK = 17_672_435_051_234_567  # 2026-01-01T04:58:25.1234567Z in 100 ns ticks
START = Watermark.start(overlap=timedelta(0))


@pytest.fixture
def store() -> Iterator[tuple[DevStore, CloudTableClient]]:
    ticks = [TICK]
    with DevStore(port=0, clock_ns=lambda: ticks[0] * 100) as devstore:
        with CloudStorageAccount.parse(devstore.connection_string).create_cloud_table_client() as client:
            client.create_table("partial")
            client.insert_entity("partial", DynamicEntity("p", "b", V=1))   # older
            ticks[0] += 10_000_000
            client.insert_entity("partial", DynamicEntity("p", "a", V=2))   # newer, first in key order
            yield devstore, client


def test_a_read_stopped_early_leaves_a_watermark_that_still_reads_the_rest(
    store: tuple[DevStore, CloudTableClient],
) -> None:
    _, client = store
    query = client.create_query("partial")
    changes = query.changes(START)
    assert next(changes).RowKey == "a"          # stopped here: "b" (older) not reached
    rest = [entity.RowKey for entity in query.changes(changes.watermark)]
    assert rest == ["b"]                         # not lost, and "a" not delivered twice


def test_a_read_stopped_early_async(store: tuple[DevStore, CloudTableClient]) -> None:
    devstore, _ = store

    async def main() -> list[str]:
        async with CloudStorageAccount.parse(devstore.connection_string).create_async_cloud_table_client() as client:
            changes = client.create_query("partial").changes(START)
            assert (await changes.__anext__()).RowKey == "a"
            return [entity.RowKey async for entity in client.create_query("partial").changes(changes.watermark)]

    assert asyncio.run(main()) == ["b"]


def test_take_is_refused_with_since(store: tuple[DevStore, CloudTableClient]) -> None:
    _, client = store
    query = client.create_query("partial").take(1)
    for read in (lambda: query.changes(START), lambda: query.to_arrow(since=START)):
        with pytest.raises(TableValidationError) as exc:
            read()
        assert exc.value.field == "take"
