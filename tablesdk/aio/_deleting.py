"""``delete_entities`` and ``count_entities`` from asyncio: the rules of :mod:`tablesdk._deleting`
(the key-only scan, the batches per partition, :func:`~tablesdk._deleting.settle_deletes`
deciding each refusal), with at most ``max_concurrency`` batches in flight as tasks.

Cancelling the call cancels the batches in flight and propagates: entities of finished
batches are deleted, the others are in an unknown state.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable
from functools import partial
from typing import TYPE_CHECKING, Any

from .._bulk import BulkResult, EntityOutcome, ProgressCallback
from .._deleting import (
    DeleteJob, DeleteTally, check_delete_arguments, delete_batches, key_query, page_payloads, settle_deletes,
)
from .._edm import EntityPayload
from .._entity import DynamicEntity, validate_table_name
from .._errors import require_positive_int
from .._filter import FilterLike
from .._options import TableRequestOptions
from .._page_stream import stream_pages_async
from .._pager import PageRequest, Pager
from .._query import FetchedPage, TableQuery
from .._transport import OperationContext

if TYPE_CHECKING:
    from ._client import AsyncCloudTableClient

__all__ = ["count_entities", "delete_entities"]


async def _scan_pages(client: AsyncCloudTableClient, query: TableQuery[Any]) -> AsyncIterator[list[EntityPayload]]:
    """Every page of ``query`` as payloads (:func:`tablesdk._deleting.scan_pages`, awaited)."""
    def fetch(request: PageRequest) -> Awaitable[FetchedPage]:
        return client.fetch_query_segment(query, request.token, request.top)

    pager = Pager(query.take_count, query.request_top)
    async for payloads, _ in stream_pages_async(pager, fetch, partial(page_payloads, client), query.reads_ahead, client):
        yield payloads
        del payloads


def _key_query(
    client: AsyncCloudTableClient, table: str, filter: FilterLike | None, options: TableRequestOptions | None
) -> TableQuery[DynamicEntity]:
    return key_query(client.create_query(table, options=options).description, filter)


async def count_entities(
    client: AsyncCloudTableClient,
    table: str,
    filter: FilterLike | None = None,
    *,
    progress: ProgressCallback | None = None,
    options: TableRequestOptions | None = None,
) -> int:
    """How many entities of ``table`` match ``filter`` (:func:`tablesdk._deleting.count_entities`)."""
    validate_table_name(table)
    count = 0
    async for page in _scan_pages(client, _key_query(client, table, filter, options)):
        count += len(page)
        if progress is not None:
            progress(count, None)
    return count


async def _run_batch(
    client: AsyncCloudTableClient, job: DeleteJob, chunk: list[tuple[int, DynamicEntity]]
) -> tuple[list[EntityOutcome], int, int]:
    outcomes: list[EntityOutcome] = []
    transactions = requests = 0
    while chunk:
        transactions += 1
        context = OperationContext()
        error: BaseException | None = None
        try:
            await client.execute_batch(job.operations(chunk), operation_context=context, options=job.options)
        except Exception as exc:  # noqa: BLE001 - every failure becomes an outcome
            error = exc
        requests += len(context.attempts)
        chunk = settle_deletes(chunk, error, outcomes)
    return outcomes, transactions, requests


async def delete_entities(
    client: AsyncCloudTableClient,
    table: str,
    filter: FilterLike | None = None,
    *,
    progress: ProgressCallback | None = None,
    max_concurrency: int = 4,
    conditional: bool = False,
    options: TableRequestOptions | None = None,
) -> BulkResult:
    """Delete every entity of ``table`` matching ``filter`` (:func:`tablesdk._deleting.delete_entities`);
    ``progress`` is called on the loop after each batch."""
    check_delete_arguments(table, progress, conditional)
    limit = require_positive_int("max_concurrency", max_concurrency)
    started = time.perf_counter()
    job = DeleteJob(table, conditional, options)
    tally = DeleteTally(progress)
    in_flight: set[asyncio.Task[tuple[list[EntityOutcome], int, int]]] = set()

    async def harvest(until: int) -> None:
        while len(in_flight) > until:
            finished, _ = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                in_flight.discard(task)
                tally.add(*task.result())

    scanned = 0
    try:
        async for page in _scan_pages(client, _key_query(client, table, filter, options)):
            for chunk in delete_batches(table, page, scanned):
                in_flight.add(asyncio.ensure_future(_run_batch(client, job, chunk)))
                await harvest(limit - 1)
            scanned += len(page)
        await harvest(0)
    finally:
        for task in in_flight:
            task.cancel()
        if in_flight:
            await asyncio.gather(*in_flight, return_exceptions=True)
    return tally.result(started)
