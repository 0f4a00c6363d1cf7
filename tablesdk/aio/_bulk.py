"""Bulk loading from asyncio: :func:`bulk_insert` with a bounded number of tasks.

Only the driver is here. Every rule is :class:`tablesdk._bulk.BulkCall`'s and
:class:`tablesdk._bulk.BulkBatch`'s, shared with the thread driver: the input is
read once and cut into batches by the same planner (per-partition groups sized
exactly against both batch limits, duplicates and invalid entities failed before
sending, bounded buffering); the first batch goes out alone and the batches
planned meanwhile wait for its answer; an answer every batch would get (a
missing table, a refused credential) fails the batches not yet sent; each
batch's answer is read by the same rules (isolate the entity the service blames
and send the rest again, fail a request-wide or ambiguous refusal whole). This
driver runs the commands: at most ``max_concurrency`` batches are in flight as
tasks on the running loop, sharing the client's connection pool.

Cancelling the call cancels the batches in flight and propagates: entities of
finished batches have their new ETags, the others are in an unknown state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .._batch import BatchOperationResult
from .._bulk import (
    AwaitAnswer,
    AwaitRoom,
    BulkBatch,
    BulkCall,
    BulkMode,
    BulkResult,
    ProgressCallback,
    Start,
)
from .._entity import EntityObject
from .._errors import require_positive_int
from .._options import TableRequestOptions, resolve_retry_policy
from .._retry import RetryPolicy
from .._transport import OperationContext

if TYPE_CHECKING:
    from ._client import AsyncCloudTableClient

__all__ = ["bulk_insert"]


async def _write(
    client: AsyncCloudTableClient, policy: RetryPolicy, options: TableRequestOptions | None, batch: BulkBatch
) -> BulkBatch:
    """Write one batch (a task); never raises but for cancellation: every entity gets an outcome."""
    while (operations := batch.next_operations()) is not None:
        context = OperationContext()
        outcome: list[BatchOperationResult] | Exception
        try:
            outcome = await client.execute_batch(
                operations, retry_policy=policy, operation_context=context, options=options
            )
        except Exception as exc:  # noqa: BLE001 - every failure becomes an outcome
            outcome = exc
        batch.settle(outcome, context)
    return batch


async def bulk_insert(
    client: AsyncCloudTableClient,
    table: str,
    entities: Iterable[EntityObject],
    mode: BulkMode = "insert",
    max_concurrency: int = 8,
    progress: ProgressCallback | None = None,
    *,
    retry_policy: RetryPolicy | None = None,
    options: TableRequestOptions | None = None,
) -> BulkResult:
    """Write ``entities`` into ``table`` as concurrent entity group transactions.

    ``mode``, ``progress``, ``retry_policy``, ``options`` and the result are those of
    :func:`tablesdk._bulk.bulk_insert`; ``max_concurrency`` transactions run at
    once as tasks (requests beyond the client's ``pool_size`` wait for a
    connection). ``progress`` is called on the loop, between batches. Raises
    only for bad arguments, before any request.
    """
    policy = resolve_retry_policy(retry_policy, options, client.retry_policy)
    call = BulkCall(table, entities, mode, progress, policy, client.format, client.table_endpoint, client.api_version)
    limit = require_positive_int("max_concurrency", max_concurrency)
    writing: dict[BulkBatch, asyncio.Task[BulkBatch]] = {}

    def take_in(finished: Iterable[asyncio.Task[BulkBatch]]) -> None:
        for task in finished:
            batch = task.result()  # _write never raises
            del writing[batch]
            call.answered(batch)

    try:
        for command in call.commands(limit):
            if isinstance(command, Start):
                writing[command.batch] = asyncio.ensure_future(_write(client, call.policy, options, command.batch))
                await asyncio.sleep(0)  # let the new task start its request while the input is read
            elif isinstance(command, AwaitRoom):
                while len(writing) > command.in_flight:
                    finished, _ = await asyncio.wait(writing.values(), return_when=asyncio.FIRST_COMPLETED)
                    take_in(finished)
            elif isinstance(command, AwaitAnswer):
                task = writing[command.batch]
                await asyncio.wait((task,))
                take_in((task,))
            else:
                await asyncio.sleep(0)  # answers that are ready come in
                take_in([task for task in writing.values() if task.done()])
    finally:
        for task in writing.values():
            task.cancel()
        if writing:
            await asyncio.gather(*writing.values(), return_exceptions=True)
    return call.result()
