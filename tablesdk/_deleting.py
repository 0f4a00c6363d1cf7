"""Deleting and counting what a filter matches: ``delete_entities`` and ``count_entities``.

Both scan the table with a key-only projection (``$select=RowKey``; the client adds
the other keys and Timestamp, and each entity's ETag comes with it), one page at a
time, following continuation tokens with a :class:`~tablesdk._pager.Pager`.

``delete_entities`` groups each page's entities by PartitionKey and deletes them as
entity group transactions of up to :data:`~tablesdk._batch.MAX_BATCH_OPERATIONS`,
``max_workers`` at once (the asyncio version, :mod:`tablesdk.aio._deleting`, as tasks).
The deletes are unconditional (``If-Match: *``) unless ``conditional`` is set: then
each carries the ETag the scan read, and an entity changed since fails with 412. Every
scanned entity gets an :class:`~tablesdk._bulk.EntityOutcome` in a
:class:`~tablesdk._bulk.BulkResult`. What a refused transaction means is decided here
once, with no I/O (:func:`settle_deletes`): the entity the service blames is taken out
and the rest sent again; blamed with 404 it was already gone, which is what was
wanted, so it counts as deleted (also after an ambiguous retry: gone is gone).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from ._batch import MAX_BATCH_OPERATIONS, BatchOperation, BatchOperationKind
from ._bulk import BulkResult, EntityOutcome, ProgressCallback
from ._edm import EntityPayload
from ._entity import DynamicEntity, entity_from_payload, validate_table_name
from ._errors import BatchError, TableErrorCode, TableServiceError, TableValidationError
from ._filter import FilterLike
from ._http import workers_within_pool
from ._options import TableRequestOptions
from ._query import FetchedPage, TableQuery, query_pages
from ._transport import OperationContext

if TYPE_CHECKING:
    from ._client import CloudTableClient
    from ._operations import ClientCore

__all__ = [
    "DeleteJob", "DeleteTally", "check_delete_arguments", "count_entities", "delete_batches", "delete_entities", "key_query",
    "page_payloads", "scan_pages", "settle_deletes",
]

#: Errors that concern the table or the credential: no entity of the batch is to blame.
_WHOLE_BATCH_CODES = frozenset({
    TableErrorCode.TABLE_NOT_FOUND, TableErrorCode.TABLE_BEING_DELETED,
    TableErrorCode.AUTHENTICATION_FAILED, TableErrorCode.AUTHORIZATION_FAILURE,
    TableErrorCode.AUTHORIZATION_PERMISSION_MISMATCH, TableErrorCode.AUTHORIZATION_RESOURCE_TYPE_MISMATCH,
})


def key_query(
    query: TableQuery[DynamicEntity], filter: FilterLike | None
) -> TableQuery[DynamicEntity]:
    """``query`` (a client's, over the table) narrowed by ``filter`` and reading only the keys."""
    if filter is not None:
        query = query.where(filter)
    return query.select("RowKey")


def scan_pages(client: CloudTableClient, query: TableQuery[Any]) -> Iterator[list[EntityPayload]]:
    """Every page of ``query`` as payloads, following continuation (a token seen twice is a cycle),
    read as the query's entities are (:func:`~tablesdk._query.query_pages`)."""
    for payloads, _ in query_pages(query, decode=partial(page_payloads, client)):
        yield payloads
        del payloads


def page_payloads(client: ClientCore, fetched: FetchedPage) -> list[EntityPayload]:
    """The payloads of a page ``client`` (sync or async) fetched."""
    return client._decode_page(fetched).payloads()


def count_entities(
    client: CloudTableClient,
    table: str,
    filter: FilterLike | None = None,
    *,
    progress: ProgressCallback | None = None,
    options: TableRequestOptions | None = None,
) -> int:
    """How many entities of ``table`` match ``filter`` (all when None); only their keys are read.

    ``progress(counted, None)`` is called after each page.
    """
    validate_table_name(table)
    count = 0
    for page in scan_pages(client, key_query(client.create_query(table, options=options), filter)):
        count += len(page)
        if progress is not None:
            progress(count, None)
    return count


# ---------------------------------------------------------------- one batch's outcome, no I/O


class DeleteJob:
    """What every delete batch of one call shares: the table, whether deletes are conditional,
    the request options; :meth:`operations` and :func:`settle_deletes` decide, the drivers send."""

    def __init__(self, table: str, conditional: bool, options: TableRequestOptions | None) -> None:
        self.table = table
        self.conditional = conditional
        self.options = options

    def operations(self, chunk: list[tuple[int, DynamicEntity]]) -> list[BatchOperation]:
        """The Delete Entity operations of ``chunk``: ``If-Match: *``, or the scanned ETag (a scan
        that brought none, JSON ``nometadata``, makes the batch fail validation, not go unconditional)."""
        return [
            BatchOperation(
                BatchOperationKind.DELETE, self.table, entity.PartitionKey, entity.RowKey, None,
                entity.etag if self.conditional else "*",
            )
            for _, entity in chunk
        ]


def settle_deletes(
    chunk: list[tuple[int, DynamicEntity]],
    outcome: BaseException | None,
    outcomes: list[EntityOutcome],
) -> list[tuple[int, DynamicEntity]]:
    """Record what sending ``chunk`` did (``outcome`` None: all deleted) and return what to send again.

    A refusal that names an entity: 404 means it was already gone (deleted), any other
    status (412 for a conditional delete of a changed entity) fails it; the rest is
    sent again. A refusal naming none, or concerning the table or the credential, and
    any other error, fails the whole chunk.
    """
    if outcome is None:
        outcomes.extend(EntityOutcome(index, entity) for index, entity in chunk)
        return []
    if isinstance(outcome, BatchError):
        cause: TableServiceError = outcome.cause if outcome.cause is not None else outcome
        blamed = outcome.failed_index
        if blamed is not None and 0 <= blamed < len(chunk) and cause.error_code not in _WHOLE_BATCH_CODES:
            index, entity = chunk[blamed]
            gone = cause.status_code == 404
            outcomes.append(EntityOutcome(index, entity, None, None if gone else cause))
            return chunk[:blamed] + chunk[blamed + 1:]
        outcome = cause
    outcomes.extend(EntityOutcome(index, entity, None, outcome) for index, entity in chunk)
    return []


def delete_batches(
    table: str, page: list[EntityPayload], first_index: int
) -> Iterator[list[tuple[int, DynamicEntity]]]:
    """The entities of one scanned page, numbered from ``first_index``, in batches of one partition
    of at most :data:`~tablesdk._batch.MAX_BATCH_OPERATIONS`."""
    groups: dict[str, list[tuple[int, DynamicEntity]]] = {}
    for offset, payload in enumerate(page):
        entity: DynamicEntity = entity_from_payload(DynamicEntity, payload)
        group = groups.setdefault(entity.PartitionKey, [])
        group.append((first_index + offset, entity))
        if len(group) == MAX_BATCH_OPERATIONS:
            yield groups.pop(entity.PartitionKey)
    yield from groups.values()


def check_delete_arguments(table: str, progress: Any, conditional: Any) -> None:
    """Refuse bad arguments before any request."""
    validate_table_name(table)
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable, not {type(progress).__name__}")
    if not isinstance(conditional, bool):
        raise TableValidationError("conditional", "conditional is a bool", f"got {type(conditional).__name__}")


# ---------------------------------------------------------------- the thread driver


class DeleteTally:
    """Outcomes, batches and requests so far; reports progress where the driver harvests (the
    calling thread, or the loop)."""

    def __init__(self, progress: ProgressCallback | None) -> None:
        self.outcomes: list[EntityOutcome] = []
        self.batches = 0
        self.requests = 0
        self.progress = progress

    def add(self, outcomes: list[EntityOutcome], batches: int, requests: int) -> None:
        self.outcomes.extend(outcomes)
        self.batches += batches
        self.requests += requests
        if self.progress is not None:
            self.progress(len(self.outcomes), None)

    def result(self, started: float) -> BulkResult:
        ordered = sorted(self.outcomes, key=lambda outcome: outcome.index)
        return BulkResult(
            [o for o in ordered if o.error is None], [o for o in ordered if o.error is not None],
            self.batches, self.requests, time.perf_counter() - started,
        )


def _run_batch(
    client: CloudTableClient, job: DeleteJob, chunk: list[tuple[int, DynamicEntity]]
) -> tuple[list[EntityOutcome], int, int]:
    """Delete one batch, resending what a refusal leaves (never raises): outcomes, transactions, requests."""
    outcomes: list[EntityOutcome] = []
    transactions = requests = 0
    while chunk:
        transactions += 1
        context = OperationContext()
        error: BaseException | None = None
        try:
            client.execute_batch(job.operations(chunk), operation_context=context, options=job.options)
        except Exception as exc:  # noqa: BLE001 - every failure becomes an outcome
            error = exc
        requests += len(context.attempts)
        chunk = settle_deletes(chunk, error, outcomes)
    return outcomes, transactions, requests


def delete_entities(
    client: CloudTableClient,
    table: str,
    filter: FilterLike | None = None,
    *,
    progress: ProgressCallback | None = None,
    max_workers: int = 4,
    conditional: bool = False,
    options: TableRequestOptions | None = None,
) -> BulkResult:
    """Delete every entity of ``table`` matching ``filter`` (all when None); see the module's doc.

    ``progress(done, None)`` is called on the calling thread after each batch. Errors of
    the scan (a missing table, say) raise; each entity's own outcome is in the result.
    """
    check_delete_arguments(table, progress, conditional)
    workers = workers_within_pool(
        "delete_entities", "max_workers", max_workers, client.transport.pool_size, stacklevel=3
    )
    started = time.perf_counter()
    job = DeleteJob(table, conditional, options)
    tally = DeleteTally(progress)
    in_flight: set[Future[tuple[list[EntityOutcome], int, int]]] = set()

    def harvest(done: set[Future[tuple[list[EntityOutcome], int, int]]]) -> None:
        for future in done:
            in_flight.discard(future)
            tally.add(*future.result())

    scanned = 0
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tablesdk-delete") as pool:
        try:
            for page in scan_pages(client, key_query(client.create_query(table, options=options), filter)):
                for chunk in delete_batches(table, page, scanned):
                    in_flight.add(pool.submit(_run_batch, client, job, chunk))
                    if len(in_flight) >= 2 * workers:
                        harvest(wait(in_flight, return_when=FIRST_COMPLETED)[0])
                scanned += len(page)
            while in_flight:
                harvest(wait(in_flight, return_when=FIRST_COMPLETED)[0])
        finally:
            for future in in_flight:
                future.cancel()
    return tally.result(started)

