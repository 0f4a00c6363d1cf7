"""delete_entities and count_entities of the library, sync and async, client and table object,
on Azurite and the bundled emulator."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, prop
from tablesdk.aio import AsyncCloudTableClient

pytestmark = pytest.mark.integration

#: 250 in partition "a" (three batches: 100, 100, 50), 30 in "b", 5 in "c".
SIZES = {"a": 250, "b": 30, "c": 5}


def fill(client: CloudTableClient, table: str) -> None:
    entities = [
        DynamicEntity(PartitionKey=pk, RowKey=f"{n:04d}", Beat=n % 2)
        for pk, size in SIZES.items() for n in range(size)
    ]
    client.bulk_insert(table, entities).raise_on_error()


def test_count_entities_counts_what_the_filter_matches(client: CloudTableClient, table: str) -> None:
    fill(client, table)
    seen: list[int] = []
    assert client.count_entities(table, progress=lambda counted, total: seen.append(counted)) == 285
    assert seen and seen[-1] == 285
    assert client.count_entities(table, "PartitionKey eq 'b'") == 30
    assert client.get_table_reference(table).count_entities(prop("Beat") == 1) == 125 + 15 + 2


@pytest.mark.parametrize("conditional", [False, True])
def test_delete_entities_deletes_what_the_filter_matches_in_batches(
    client: CloudTableClient, table: str, conditional: bool
) -> None:
    fill(client, table)
    progress: list[tuple[int, int | None]] = []
    result = client.delete_entities(
        table, "PartitionKey eq 'a' or PartitionKey eq 'c'", conditional=conditional,
        progress=lambda done, total: progress.append((done, total)),
    )
    assert result.failed == [] and len(result.succeeded) == 255
    assert result.batches == 4  # "a" in 100, 100 and 50, "c" in one
    assert [outcome.index for outcome in result.succeeded] == list(range(255))
    assert progress[-1] == (255, None)
    assert client.count_entities(table) == 30
    assert {e.PartitionKey for e in client.create_query(table)} == {"b"}


def test_the_table_object_deletes_everything_without_a_filter(client: CloudTableClient, table: str) -> None:
    fill(client, table)
    result = client.get_table_reference(table).delete_entities(max_workers=2)
    assert len(result.succeeded) == 285 and not result.failed
    assert client.count_entities(table) == 0
    assert client.get_table_reference(table).delete_entities().total == 0  # nothing left: nothing to do


def test_a_missing_table_raises_from_the_scan(client: CloudTableClient, unique_table_name: str) -> None:
    from tablesdk import ResourceNotFoundError

    with pytest.raises(ResourceNotFoundError):
        client.delete_entities(unique_table_name)
    with pytest.raises(ResourceNotFoundError):
        client.count_entities(unique_table_name)


# ---------------------------------------------------------------- asyncio


@pytest_asyncio.fixture
async def aclient(target: str, connection_string: str) -> AsyncIterator[AsyncCloudTableClient]:
    payload_format = target.rsplit("-", 1)[1]
    account = CloudStorageAccount.parse(connection_string)
    async with account.create_async_cloud_table_client(payload_format=payload_format) as async_client:
        yield async_client


@pytest.mark.asyncio
@pytest.mark.parametrize("conditional", [False, True])
async def test_async_count_and_delete(
    client: CloudTableClient, aclient: AsyncCloudTableClient, table: str, conditional: bool
) -> None:
    fill(client, table)
    assert await aclient.count_entities(table) == 285
    assert await aclient.get_table_reference(table).count_entities("PartitionKey eq 'c'") == 5
    seen: list[int] = []
    result = await aclient.delete_entities(
        table, prop("PartitionKey") == "a", conditional=conditional, max_concurrency=2,
        progress=lambda done, total: seen.append(done),
    )
    assert len(result.succeeded) == 250 and not result.failed and result.batches == 3
    assert seen[-1] == 250
    rest = await aclient.get_table_reference(table).delete_entities()
    assert len(rest.succeeded) == 35
    assert await aclient.count_entities(table) == 0
