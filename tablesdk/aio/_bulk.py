"""Bulk loading from asyncio: :func:`bulk_insert` with a bounded number of tasks.

The rules are those of :func:`tablesdk._bulk.bulk_insert` and so is the code
that applies them: the input is read once and cut into batches by the same
planner (per-partition groups sized exactly against both batch limits,
duplicates and invalid entities failed before sending, bounded buffering), and
each batch's outcome is decided by the same rules (retry a change set refused
with a retryable status, isolate the entity the service blames and send the
rest again, flag an ambiguous insert conflict). Only the driver differs: at
most ``max_concurrency`` batches are in flight as tasks on the running loop,
sharing the client's connection pool; waits use :func:`asyncio.sleep`.

Cancelling the call cancels the batches in flight and propagates: entities of
finished batches have their new ETags, the others are in an unknown state.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sized
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._batch import BatchOperationResult
from .._bulk import (
    BULK_MODES,
    BulkMode,
    BulkResult,
    EntityOutcome,
    ProgressCallback,
    _BatchSizer,
    _Item,
    _JobRules,
    _plan,
    _Report,
    _Tally,
)
from .._entity import EntityObject, validate_table_name
from .._errors import require_positive_int
from .._retry import RetryPolicy
from .._transport import OperationContext

if TYPE_CHECKING:
    from ._client import AsyncCloudTableClient

__all__ = ["bulk_insert"]


@dataclass
class _AsyncJob(_JobRules):
    """A task's job: the shared rules plus the async client that sends."""

    client: AsyncCloudTableClient

    async def run(self, items: list[_Item]) -> _Report:
        """Write one batch; isolate failing entities and resend the rest. Never raises
        (but for cancellation): every entity gets an outcome."""
        report = _Report([])
        pending = [items]
        while pending:
            chunk = pending.pop()
            report.transactions += 1
            context = OperationContext()
            outcome: list[BatchOperationResult] | Exception
            try:
                outcome = await self.client.execute_batch(
                    self.operations(chunk), retry_policy=self.policy, operation_context=context
                )
            except Exception as exc:  # noqa: BLE001 - every failure becomes an outcome
                outcome = exc
            self.settle(chunk, outcome, context, report, pending)
        return report


def _check_concurrency(max_concurrency: int) -> int:
    return require_positive_int("max_concurrency", max_concurrency)


async def bulk_insert(
    client: AsyncCloudTableClient,
    table: str,
    entities: Iterable[EntityObject],
    mode: BulkMode = "insert",
    max_concurrency: int = 8,
    progress: ProgressCallback | None = None,
    *,
    retry_policy: RetryPolicy | None = None,
) -> BulkResult:
    """Write ``entities`` into ``table`` as concurrent entity group transactions.

    ``mode``, ``progress``, ``retry_policy`` and the result are those of
    :func:`tablesdk._bulk.bulk_insert`; ``max_concurrency`` transactions run at
    once as tasks (requests beyond the client's ``pool_size`` wait for a
    connection). ``progress`` is called on the loop, between batches. Raises
    only for bad arguments, before any request.
    """
    kind = BULK_MODES.get(mode) if isinstance(mode, str) else None
    if kind is None:
        raise ValueError(f"mode must be one of {sorted(BULK_MODES)}, not {mode!r}")
    validate_table_name(table)
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable, not {type(progress).__name__}")
    limit = _check_concurrency(max_concurrency)

    started = time.perf_counter()
    job = _AsyncJob(table, kind, retry_policy if retry_policy is not None else client.retry_policy, client)
    sizer = _BatchSizer(client.table_endpoint, table, kind, client.format, client.api_version)
    tally = _Tally(len(entities) if isinstance(entities, Sized) else None, progress)
    in_flight: set[asyncio.Task[_Report]] = set()

    async def harvest(until: int) -> None:
        if len(in_flight) <= until:
            await asyncio.sleep(0)  # let the new task start its request while the input is read
        while len(in_flight) > until:
            finished, _ = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                in_flight.discard(task)
                tally.add(task.result())

    try:
        for step in _plan(entities, client.format, sizer):
            if isinstance(step, EntityOutcome):
                tally.failed_before_sending(step)
                continue
            in_flight.add(asyncio.ensure_future(job.run(step)))
            await harvest(limit - 1)  # also lets the new task start its request
        await harvest(0)
    finally:
        for task in in_flight:
            task.cancel()
        if in_flight:
            await asyncio.gather(*in_flight, return_exceptions=True)
    return tally.result(time.perf_counter() - started)
