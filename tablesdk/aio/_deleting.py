"""``delete_entities`` and ``count_entities`` from asyncio: the rules of :mod:`tablesdk._bulk_loading._deleting`
(the key-only scan, one bulk call whose batches delete each page's entities per partition),
with the batches in flight as tasks (:func:`tablesdk.aio._bulk.run_on_tasks`).

Cancelling the call cancels the batches in flight and propagates: entities of finished
batches are deleted, the others are in an unknown state.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from .._bulk_loading._bulk import BulkOptions, BulkResult, ProgressCallback
from .._bulk_loading._bulk_plan import Step
from .._bulk_loading._deleting import delete_call, key_query, page_deletes, page_payloads
from .._entities._edm import EntityPayload
from .._entities._entity import DynamicEntity, validate_table_name
from .._entities._filter import FilterLike
from .._pipeline._options import TableRequestOptions
from .._queries._page_stream import stream_pages_async
from .._queries._pager import PageRequest, Pager
from .._queries._query import FetchedPage, TableQuery
from ._bulk import run_on_tasks

if TYPE_CHECKING:
    from ._client import AsyncCloudTableClient

__all__ = ["count_entities", "delete_entities"]


async def _scan_pages(client: AsyncCloudTableClient, query: TableQuery[Any]) -> AsyncIterator[list[EntityPayload]]:
    """Every page of ``query`` as payloads (:func:`tablesdk._bulk_loading._deleting.scan_pages`, awaited)."""
    def fetch(request: PageRequest) -> Awaitable[FetchedPage]:
        return client.fetch_query_segment(query, request.token, request.top)

    pager = Pager(query.take_count, query.request_top)
    async for payloads, _ in stream_pages_async(pager, fetch, partial(page_payloads, client), query.reads_ahead, client):
        yield payloads
        del payloads


def _key_query(
    client: AsyncCloudTableClient, table: str, filter: FilterLike | None, parameters: Mapping[str, object] | None,
    options: TableRequestOptions | None,
) -> TableQuery[DynamicEntity]:
    return key_query(client.create_query(table, options=options).description, filter, parameters)


async def count_entities(
    client: AsyncCloudTableClient,
    table: str,
    filter: FilterLike | None = None,
    *,
    parameters: Mapping[str, object] | None = None,
    progress: ProgressCallback | None = None,
    options: TableRequestOptions | None = None,
) -> int:
    """How many entities of ``table`` match ``filter`` (:func:`tablesdk._bulk_loading._deleting.count_entities`)."""
    validate_table_name(table, cosmos=client.is_cosmos)
    count = 0
    async for page in _scan_pages(client, _key_query(client, table, filter, parameters, options)):
        count += len(page)
        if progress is not None:
            progress(count, None)
    return count


async def _delete_steps(pages: AsyncIterator[list[EntityPayload]]) -> AsyncIterator[Step]:
    index = 0
    async for page in pages:
        for batch in page_deletes(page, index):
            yield batch
        index += len(page)


async def delete_entities(
    client: AsyncCloudTableClient, table: str, filter: FilterLike | None, conditional: bool, bulk: BulkOptions,
    parameters: Mapping[str, object] | None = None,
) -> BulkResult:
    """Delete every entity of ``table`` matching ``filter`` (:func:`tablesdk._bulk_loading._deleting.delete_entities`);
    ``progress`` is called on the loop after each batch."""
    call = delete_call(client, table, conditional, bulk)
    pages = _scan_pages(client, _key_query(client, table, filter, parameters, bulk.scan_options()))
    return await run_on_tasks(client, call, _delete_steps(pages))
