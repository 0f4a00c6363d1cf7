"""Bulk writing from asyncio: the task driver of :class:`tablesdk._bulk_loading._bulk.BulkCall`, and :func:`bulk_insert`.

Only the driver is here. Every rule is :class:`~tablesdk._bulk_loading._bulk.BulkCall`'s and
:class:`~tablesdk._bulk_loading._bulk.BulkBatch`'s, shared with the thread driver (planning, the
first answer first, the answers that end the call, what each refusal means). This
driver runs the commands: at most ``max_concurrency`` batches are in flight as tasks on
the running loop, sharing the client's connection pool; ``progress`` is called on the loop.

Cancelling the call cancels the batches in flight and propagates: entities of
finished batches are written (or deleted), the others are in an unknown state.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any

from .._formats._batch import BatchOperationResult
from .._bulk_loading._bulk import (
    AwaitAnswer,
    AwaitRoom,
    BulkBatch,
    BulkCall,
    BulkCommand,
    BulkMode,
    BulkOptions,
    BulkResult,
    ProgressCallback,
    Start,
    insert_call,
)
from .._bulk_loading._bulk_plan import Step
from .._entities._entity import EntityObject
from .._pipeline._options import TableRequestOptions
from .._pipeline._retry import RetryPolicy
from .._pipeline._transport import OperationContext

if TYPE_CHECKING:
    from ._client import AsyncCloudTableClient

__all__ = ["bulk_insert", "insert_entities", "run_on_tasks"]


async def _write(client: AsyncCloudTableClient, call: BulkCall, batch: BulkBatch) -> BulkBatch:
    """Write one batch (a task); never raises but for cancellation: every entity gets an outcome."""
    while (operations := batch.next_operations()) is not None:
        context = OperationContext()
        outcome: list[BatchOperationResult] | Exception
        try:
            outcome = await client.execute_batch(
                operations, retry_policy=call.policy, operation_context=context, options=call.options
            )
        except Exception as exc:  # noqa: BLE001 - every failure becomes an outcome
            outcome = exc
        batch.settle(outcome, context)
    return batch


async def _each(steps: Iterable[Step] | AsyncIterable[Step]) -> AsyncIterator[Step]:
    if isinstance(steps, AsyncIterable):
        async for step in steps:
            yield step
    else:
        for step in steps:
            yield step


async def run_on_tasks(
    client: AsyncCloudTableClient, call: BulkCall, steps: Iterable[Step] | AsyncIterable[Step]
) -> BulkResult:
    """Run ``call`` over ``steps`` with at most the call's concurrency of batches in flight as tasks."""
    limit = call.concurrency
    writing: dict[BulkBatch, asyncio.Task[BulkBatch]] = {}

    def take_in(finished: Iterable[asyncio.Task[BulkBatch]]) -> None:
        for task in finished:
            batch = task.result()  # _write never raises
            del writing[batch]
            call.answered(batch)

    async def run(commands: Iterable[BulkCommand]) -> None:
        for command in commands:
            if isinstance(command, Start):
                writing[command.batch] = asyncio.ensure_future(_write(client, call, command.batch))
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

    try:
        async for step in _each(steps):
            await run(call.feed(step, limit))
        await run(call.finish(limit))
    finally:
        for task in writing.values():
            task.cancel()
        if writing:
            await asyncio.gather(*writing.values(), return_exceptions=True)
    return call.result()


async def insert_entities(
    client: AsyncCloudTableClient, table: str, entities: Iterable[Any], mode: BulkMode, bulk: BulkOptions
) -> BulkResult:
    """Write ``entities`` into ``table`` on tasks (:func:`tablesdk._bulk_loading._bulk.insert_entities`'s rules)."""
    call, steps = insert_call(client, table, entities, mode, bulk)
    return await run_on_tasks(client, call, steps)


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
    """Write ``entities`` into ``table`` as concurrent entity group transactions
    (:meth:`tablesdk.aio.AsyncCloudTableClient.bulk_insert`, with the client as first argument)."""
    return await client.bulk_insert(
        table, entities, mode, max_concurrency, progress, retry_policy=retry_policy, options=options
    )
