"""``get`` (raises for a missing entity, typed without None) and ``get_or_none`` on the sync and
async contexts and their table-bound forms; the deprecated None of ``get`` under
``ignore_resource_not_found`` warns."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, ResourceNotFoundError, TableEntity
from tablesdk.aio import AsyncCloudTableClient

pytestmark = pytest.mark.integration


class Note(TableEntity):
    Text: str


@pytest_asyncio.fixture
async def aclient(target: str, connection_string: str) -> AsyncIterator[AsyncCloudTableClient]:
    account = CloudStorageAccount.parse(connection_string)
    async with account.create_async_cloud_table_client(payload_format=target.rsplit("-", 1)[1]) as client:
        yield client


def test_get_raises_and_get_or_none_gives_none(client: CloudTableClient, table: str) -> None:
    client.insert_entity(table, Note(PartitionKey="p", RowKey="1", Text="hi"))
    ctx = client.get_table_service_context()
    assert ctx.get(table, "p", "1", Note).Text == "hi"
    assert ctx.get_or_none(table, "p", "1", Note) is ctx.get(table, "p", "1", Note)  # tracked once
    assert ctx.get_or_none(table, "p", "2", Note) is None
    assert ctx.get_or_none(table, "p", "2") is None
    with pytest.raises(ResourceNotFoundError):
        ctx.get(table, "p", "2")
    with pytest.raises(ResourceNotFoundError):  # a missing table is an error, not a missing entity
        ctx.get_or_none("nosuchtable" + table[:20], "p", "1")
    bound = client.get_table_reference(table).get_table_service_context()
    assert bound.get_or_none("p", "2", Note) is None
    assert bound.get("p", "1", Note).Text == "hi"
    with pytest.raises(ResourceNotFoundError):
        bound.get("p", "2")


def test_get_under_ignore_resource_not_found_warns_that_none_is_deprecated(client: CloudTableClient, table: str) -> None:
    ctx = client.get_table_service_context()
    ctx.ignore_resource_not_found = True
    with pytest.warns(DeprecationWarning, match="get_or_none") as caught:
        assert ctx.get(table, "p", "missing") is None
    assert caught[0].filename == __file__  # the warning points at the caller's line
    bound = client.get_table_reference(table).get_table_service_context(ignore_resource_not_found=True)
    with pytest.warns(DeprecationWarning, match="TableContext.get"):
        assert bound.get("p", "missing") is None
    assert ctx.get_or_none(table, "p", "missing") is None  # no warning: the filter makes one an error


@pytest.mark.asyncio
async def test_async_get_and_get_or_none(aclient: AsyncCloudTableClient, unique_table_name: str) -> None:
    table = unique_table_name
    await aclient.create_table(table)
    try:
        await aclient.insert_entity(table, DynamicEntity(PartitionKey="p", RowKey="1", Text="hi"))
        ctx = aclient.get_table_service_context()
        assert (await ctx.get(table, "p", "1"))["Text"] == "hi"
        assert await ctx.get_or_none(table, "p", "2", Note) is None
        with pytest.raises(ResourceNotFoundError):
            await ctx.get(table, "p", "2")
        bound = aclient.get_table_reference(table).get_table_service_context()
        assert (await bound.get("p", "1", Note)).Text == "hi"
        assert await bound.get_or_none("p", "2") is None
        with pytest.raises(ResourceNotFoundError):
            await bound.get("p", "2")
        ctx.ignore_resource_not_found = True
        with pytest.warns(DeprecationWarning, match="AsyncTableServiceContext.get"):
            assert await ctx.get(table, "p", "2") is None
    finally:
        await aclient.delete_table_if_exists(table)
