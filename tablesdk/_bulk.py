"""Bulk loading: many entities, any partitions, as concurrent entity group transactions.

:func:`bulk_insert` (also ``CloudTableClient.bulk_insert``) takes any iterable of
entities, groups them by PartitionKey, cuts each group into batches that respect
both service limits (:data:`~tablesdk._batch.MAX_BATCH_OPERATIONS` operations and
:data:`~tablesdk._batch.MAX_BATCH_BYTES` of encoded request body), and sends the
batches on a thread pool. It never raises for a problem with one entity: every
input entity ends up exactly once in :attr:`BulkResult.succeeded` or
:attr:`BulkResult.failed`, with the reason.

How it works (see docs/batch.md, "Bulk loading"):

* **Modes.** ``"insert"`` is Insert Entity (an existing entity fails with 409
  EntityAlreadyExists), ``"merge"`` is Insert Or Merge and ``"replace"`` is
  Insert Or Replace. The upserts are unconditional (no ETag).
* **Streaming.** The input is read once, on the calling thread. Each entity is
  validated (:func:`~tablesdk._entity.entity_to_payload`) and serialized with the
  client's payload format exactly once; the encoded bytes are what the batch
  body is built from, so each batch's size is known exactly before it is cut.
  Partial per-partition groups wait for more entities of their partition, up to
  :data:`MAX_BUFFERED_ENTITIES` / :data:`MAX_BUFFERED_BYTES` in total (then the
  oldest group is sent early), and at most ``2 * max_workers`` batches are in
  flight, so memory stays bounded whatever the input size.
* **Duplicates.** An entity whose (PartitionKey, RowKey) already occurred
  earlier in the same call is not sent: it fails with a
  :class:`~tablesdk._errors.TableValidationError` (field ``"entity"``) naming the
  earlier input position. The service refuses an entity twice in one batch, and
  sending the copies in different concurrent batches would make the final
  content depend on timing.
* **Invalid entities** (bad keys, too large, wrong types, not an entity at all)
  fail individually before anything is sent; the call carries on.
* **Retries.** Each batch goes through the client's
  :meth:`~tablesdk._client.CloudTableClient.execute_batch` with the client's
  retry policy (or ``retry_policy``): ServerBusy, other 5xx and timeouts of
  the whole request, and a change set refused with a retryable status inside
  its ``202``, are retried there with back-off, exactly as
  ``save_changes_with_retries`` retries them.
* **One bad entity does not sink the batch.** When the service refuses a
  change set and names the failing operation (``BatchError.failed_index``),
  that entity fails with the service's error (``BatchError.cause``, e.g. a
  :class:`~tablesdk._errors.ConflictError`) and the rest of the batch, which did
  not fail on its own, is sent again as a new transaction without it: one extra
  round trip per failing entity. Errors that concern the whole request (no
  index, authentication, a missing table, ...) fail every entity of the batch.
  A refusal the client marks ambiguous (a 404, 409 or 412 answered to a retry
  whose earlier attempt's outcome is unknown, or an answer that does not match
  the operations) fails the whole batch with ``ambiguous_retry=True`` on the
  error: the earlier attempt may have written all of it.

Threads and connections: batches run on a private
:class:`~concurrent.futures.ThreadPoolExecutor` of ``max_workers`` threads
sharing the client's transport (one ``requests.Session``, which is safe to
share). That session keeps at most ``pool_size`` connections per host, and
urllib3 does not make a request wait for one of them: a request beyond
``pool_size`` in flight at once gets a new connection that is closed afterwards
("Connection pool is full, discarding connection"), i.e. TCP connection churn.
So ``max_workers`` is capped at the client's ``pool_size`` (with a
:class:`RuntimeWarning`). ``progress`` is always called on the calling thread.

Code: every rule above is written once, without I/O, in :class:`BulkCall`
(planning, the first-answer gate, stopping on an answer every batch would get,
the batches in flight, tallies, progress, the result) and :class:`BulkBatch`
(one batch's transactions and what each answer means). :func:`bulk_insert` here
runs them on threads and :func:`tablesdk.aio.bulk_insert` on tasks; neither
driver decides anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sized
import contextvars
from dataclasses import dataclass
from functools import partial
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal

from ._batch import (
    MAX_BATCH_BYTES,
    MAX_BATCH_OPERATIONS,
    BatchOperation,
    BatchOperationKind,
    BatchOperationResult,
    build_batch_request,
    entity_path,
)
from ._edm import EdmType, EntityPayload
from ._entity import EntityObject, entity_to_payload, validate_table_name
from ._entity_access import set_entity_etag
from ._errors import BatchError, TableErrorCode, TableServiceError, TableValidationError
from ._formats import PayloadFormat
from ._http import workers_within_pool
from ._options import TableRequestOptions, resolve_retry_policy
from ._retry import RetryPolicy
from ._transport import OperationContext

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ._client import CloudTableClient

__all__ = [
    "BULK_MODES",
    "MAX_BUFFERED_BYTES",
    "MAX_BUFFERED_ENTITIES",
    "AwaitAnswer",
    "AwaitRoom",
    "BulkBatch",
    "BulkCall",
    "BulkCommand",
    "BulkInsertError",
    "BulkMode",
    "BulkResult",
    "Collect",
    "EntityOutcome",
    "ProgressCallback",
    "Start",
    "bulk_insert",
]

#: ``"insert"`` (Insert Entity), ``"merge"`` (Insert Or Merge), ``"replace"`` (Insert Or Replace).
BulkMode = Literal["insert", "merge", "replace"]

#: The operation each mode sends for every entity.
BULK_MODES: dict[str, BatchOperationKind] = {
    "insert": BatchOperationKind.INSERT,
    "merge": BatchOperationKind.INSERT_OR_MERGE,
    "replace": BatchOperationKind.INSERT_OR_REPLACE,
}

#: ``progress(done, total)``: entities with a final outcome so far, and the input's
#: length (None when the input has no ``len``).
ProgressCallback = Callable[[int, int | None], None]

#: Entities held in partial per-partition groups before the oldest group is sent early.
MAX_BUFFERED_ENTITIES = 20_000
#: Encoded bytes held in partial per-partition groups before the oldest group is sent early.
MAX_BUFFERED_BYTES = 128 * 1024 * 1024

#: Errors about the request as a whole: no entity is to blame, so none is singled out.
_REQUEST_WIDE_STATUSES = frozenset({401, 403, 405, 411, 413, 415})
_REQUEST_WIDE_CODES = frozenset({
    TableErrorCode.TABLE_NOT_FOUND,
    TableErrorCode.TABLE_BEING_DELETED,
    TableErrorCode.AUTHENTICATION_FAILED,
    TableErrorCode.AUTHORIZATION_FAILURE,
    TableErrorCode.AUTHORIZATION_PERMISSION_MISMATCH,
    TableErrorCode.AUTHORIZATION_RESOURCE_TYPE_MISMATCH,
    TableErrorCode.REQUEST_BODY_TOO_LARGE,
    TableErrorCode.INVALID_HEADER_VALUE,
    TableErrorCode.UNSUPPORTED_HEADER,
    "InvalidAPIVersion",
})


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class EntityOutcome:
    """What happened to one input entity.

    ``index`` is its zero-based position in the input, ``entity`` the object
    given, ``etag`` its new ETag when it was written (also set on
    ``entity.etag``), and ``error`` why it was not: a
    :class:`~tablesdk._errors.TableServiceError` subclass answered by the service
    (``ConflictError`` for an insert of an existing entity, ``ServerBusyError``
    when retries ran out, ...), a :class:`~tablesdk._errors.TableValidationError`
    found before sending (invalid entity, duplicate keys), or another exception
    raised while preparing it (``TypeError`` for an object that is no entity).
    """

    index: int
    entity: Any
    etag: str | None = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        """True when the entity was written."""
        return self.error is None


@dataclass
class BulkResult:
    """The outcome of :func:`bulk_insert`.

    ``succeeded`` and ``failed`` hold one :class:`EntityOutcome` per input
    entity, each list in input order; together they cover the input exactly
    once. ``batches`` counts the entity group transactions attempted (a batch
    sent again without a failing entity counts again), ``requests`` the HTTP
    requests made for them including the transport's retries, and ``elapsed``
    the wall-clock seconds of the call.
    """

    succeeded: list[EntityOutcome]
    failed: list[EntityOutcome]
    batches: int = 0
    requests: int = 0
    elapsed: float = 0.0

    @property
    def total(self) -> int:
        """Number of input entities (``len(succeeded) + len(failed)``)."""
        return len(self.succeeded) + len(self.failed)

    def raise_on_error(self) -> BulkResult:
        """Raise :class:`BulkInsertError` if any entity failed; otherwise return this result."""
        if self.failed:
            raise BulkInsertError(self)
        return self

    def __repr__(self) -> str:
        return (
            f"BulkResult(succeeded={len(self.succeeded)}, failed={len(self.failed)}, "
            f"batches={self.batches}, requests={self.requests}, elapsed={self.elapsed:.3f})"
        )


class BulkInsertError(TableServiceError):
    """Raised by :meth:`BulkResult.raise_on_error` when some entities were not written.

    ``result`` is the :class:`BulkResult`; ``status_code``, ``error_code`` and
    ``request_id`` are those of the first failure (in input order) when it came
    from the service.
    """

    def __init__(self, result: BulkResult) -> None:
        first = result.failed[0]
        error = first.error
        where = (
            f"entity {first.index} (PartitionKey={getattr(first.entity, 'PartitionKey', None)!r}, "
            f"RowKey={getattr(first.entity, 'RowKey', None)!r})"
        )
        why = error.describe(request_id=False) if isinstance(error, TableServiceError) else str(error)
        message = f"{len(result.failed)} of {result.total} entities failed; first: {where}: {why}"
        if isinstance(error, TableServiceError):
            super().__init__(
                message, status_code=error.status_code, error_code=error.error_code, request_id=error.request_id
            )
        else:
            super().__init__(message)
        self.result = result


# ---------------------------------------------------------------- sizing


class _BatchSizer:
    """Exact size of a ``$batch`` body from the sizes of its entity bodies.

    Calibrated once per call by building one- and two-operation batches with
    empty entity bodies through :func:`~tablesdk._batch.build_batch_request`
    itself: a body is ``framing`` plus, per operation, ``part`` plus the entity
    body, plus the key-dependent length of its URL and the extra digits of its
    ``Content-ID``. tests/unit/test_bulk.py checks the prediction byte for byte.
    """

    def __init__(self, base_url: str, table: str, kind: BatchOperationKind, fmt: PayloadFormat, api_version: str) -> None:
        self.table = table
        self.addressed = kind is not BatchOperationKind.INSERT  # the keys are in the inner URL
        ops = [_probe_operation(kind, table, row_key) for row_key in ("0", "1")]
        one = len(build_batch_request(base_url, ops[:1], fmt, api_version=api_version)[0])
        two = len(build_batch_request(base_url, ops, fmt, api_version=api_version)[0])
        self.part = two - one
        self.framing = one - self.part
        self.reference_path = len(entity_path(table, "", "1")) if self.addressed else 0

    def cost(self, partition_key: str, row_key: str, body_size: int, position: int) -> int:
        """Bytes the operation adds to a batch as its ``position``-th (1-based) operation."""
        size = self.part + body_size + len(str(position)) - 1
        if self.addressed:
            size += len(entity_path(self.table, partition_key, row_key)) - self.reference_path
        return size


def _probe_operation(kind: BatchOperationKind, table: str, row_key: str) -> BatchOperation:
    payload = EntityPayload(
        {"PartitionKey": "", "RowKey": row_key}, {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING}
    )
    return BatchOperation(kind, table, "", row_key, payload, None, body=b"")


# ---------------------------------------------------------------- work items


class _Item:
    """One valid entity on its way: input position, object, payload and encoded body."""

    __slots__ = ("body", "entity", "index", "partition_key", "payload", "row_key")

    def __init__(self, index: int, entity: Any, payload: EntityPayload, body: bytes) -> None:
        self.index = index
        self.entity = entity
        self.payload = payload
        self.body = body
        self.partition_key: str = payload.values["PartitionKey"]
        self.row_key: str = payload.values["RowKey"]


class _Group:
    """A partition's entities waiting to fill a batch, and that batch's exact body size."""

    __slots__ = ("body_bytes", "items", "size")

    def __init__(self, framing: int) -> None:
        self.items: list[_Item] = []
        self.size = framing
        self.body_bytes = 0


#: (input position, entity, new ETag, error): the final word on one entity.
_Outcome = tuple[int, Any, "str | None", "BaseException | None"]


class BulkBatch:
    """One planned batch on its way, and what each answer to it means (no I/O).

    A driver's worker (a thread, a task) repeats: take :meth:`next_operations`
    (None once every entity has an outcome), send them with the client's
    ``execute_batch`` and the call's :attr:`BulkCall.policy` under a new
    :class:`~tablesdk._transport.OperationContext`, and hand the results, or the
    exception raised, to :meth:`settle`. Retries are not decided here: ``execute_batch``
    retries a request, and a change set refused inside its ``202``, with the policy
    before it answers. Then the driver gives the batch to :meth:`BulkCall.answered`.
    """

    __slots__ = ("chunk", "kind", "outcomes", "pending", "requests", "table", "transactions")

    def __init__(self, table: str, kind: BatchOperationKind, items: list[_Item]) -> None:
        self.table = table
        self.kind = kind
        self.pending = [items]  # chunks still to send, the next one last
        self.chunk: list[_Item] = []  # the chunk sent last
        self.outcomes: list[_Outcome] = []
        self.transactions = 0  # entity group transactions attempted
        self.requests = 0  # HTTP requests made for them, with the transport's retries

    def next_operations(self) -> list[BatchOperation] | None:
        """The operations of the next transaction to send, carrying their pre-encoded bodies."""
        if not self.pending:
            return None
        self.chunk = chunk = self.pending.pop()
        self.transactions += 1
        kind, table = self.kind, self.table
        return [BatchOperation(kind, table, item.partition_key, item.row_key, item.payload, None, body=item.body)
                for item in chunk]

    def settle(self, outcome: list[BatchOperationResult] | Exception, context: OperationContext) -> None:
        """Record what sending the last operations did.

        Entities of a chunk the service refused, but not for their own fault, are
        queued again as a new chunk.
        """
        chunk = self.chunk
        self.requests += len(context.attempts)
        if not isinstance(outcome, Exception):
            self.outcomes.extend((item.index, item.entity, result.etag, None) for item, result in zip(chunk, outcome))
        elif isinstance(outcome, BatchError):
            self.pending.extend(_isolate(chunk, outcome, self))
        elif isinstance(outcome, TableValidationError) and len(chunk) > 1 and outcome.field == "batch":
            # The exact sizing makes this impossible; never fail good entities for it.
            half = len(chunk) // 2
            self.pending.extend((chunk[half:], chunk[:half]))
        else:
            self.fail(chunk, outcome)  # transport errors after retries, anything unexpected: reported

    def fail(self, items: Iterable[_Item], error: BaseException) -> None:
        """Give ``items`` ``error`` as their outcome."""
        self.outcomes.extend((item.index, item.entity, None, error) for item in items)


def _isolate(chunk: list[_Item], exc: BatchError, batch: BulkBatch) -> list[list[_Item]]:
    """Fail the entity the service blamed and return the rest of ``chunk`` to send again.

    The whole chunk fails when no entity is to blame (no index, a request-wide
    error) or when the client marked the answer ambiguous: the transaction may have
    been applied by an earlier attempt.
    """
    cause: TableServiceError = exc.cause if exc.cause is not None else exc
    index = exc.failed_index
    if index is None or exc.ambiguous_retry or _request_wide(cause):
        batch.fail(chunk, cause)
        return []
    batch.fail((chunk[index],), cause)
    rest = chunk[:index] + chunk[index + 1:]
    return [rest] if rest else []


def _ends_the_call(error: TableServiceError) -> bool:
    """An answer every batch of the call would get: the table is missing or being deleted,
    or the credential is refused."""
    return error.error_code in ("TableNotFound", "TableBeingDeleted") or error.status_code in (401, 403)


def _request_wide(error: TableServiceError) -> bool:
    return error.status_code in _REQUEST_WIDE_STATUSES or error.error_code in _REQUEST_WIDE_CODES


def _duplicate_error(partition_key: str, row_key: str, first: int) -> TableValidationError:
    return TableValidationError(
        "entity",
        "each entity (PartitionKey, RowKey) may appear only once in one bulk_insert call",
        f"PartitionKey={partition_key!r}, RowKey={row_key!r} is also input entity {first}",
    )


# ---------------------------------------------------------------- planning (no I/O)


def _plan(
    entities: Iterable[Any], fmt: PayloadFormat, sizer: _BatchSizer, pause: Callable[[], object] | None = None
) -> Iterator[list[_Item] | EntityOutcome]:
    """Read ``entities`` once and yield, in turn, each batch to send (a list of items of one
    partition that fits both batch limits) and each entity that failed before sending.

    Each entity is validated and serialized here, once: the bytes size the batch exactly
    and are sent as they are. Partial per-partition groups wait for more entities of their
    partition, up to :data:`MAX_BUFFERED_ENTITIES` / :data:`MAX_BUFFERED_BYTES` in total
    (then the oldest group is yielded early). ``pause`` is called every eight entities
    (the thread driver hands the interpreter to its workers there).
    """
    seen: dict[tuple[str, str], int] = {}
    groups: dict[str, _Group] = {}  # PartitionKey -> entities waiting for a batch, oldest group first
    buffered = [0, 0]  # entities, bytes

    def take(partition_key: str) -> list[_Item]:
        group = groups.pop(partition_key)
        buffered[0] -= len(group.items)
        buffered[1] -= group.body_bytes
        return group.items

    for index, entity in enumerate(entities):
        if pause is not None and not index & 7:
            pause()
        try:
            payload = entity_to_payload(entity)
            item = _Item(index, entity, payload, fmt.serialize_entity(payload))
        except Exception as exc:  # noqa: BLE001 - an invalid entity is reported, not raised
            yield EntityOutcome(index, entity, None, exc)
            continue
        partition_key, row_key = item.partition_key, item.row_key
        first = seen.setdefault((partition_key, row_key), index)
        if first != index:
            yield EntityOutcome(index, entity, None, _duplicate_error(partition_key, row_key, first))
            continue
        group = groups.get(partition_key)
        if group is None:
            group = groups[partition_key] = _Group(sizer.framing)
        body_size = len(item.body)
        cost = sizer.cost(partition_key, row_key, body_size, len(group.items) + 1)
        if group.size + cost > MAX_BATCH_BYTES and group.items:
            yield take(partition_key)
            group = groups[partition_key] = _Group(sizer.framing)
            cost = sizer.cost(partition_key, row_key, body_size, 1)
        if group.size + cost > MAX_BATCH_BYTES:
            del groups[partition_key]
            yield EntityOutcome(index, entity, None, _too_large(group.size + cost))
            continue
        group.items.append(item)
        group.size += cost
        group.body_bytes += body_size
        buffered[0] += 1
        buffered[1] += body_size
        if len(group.items) >= MAX_BATCH_OPERATIONS:
            yield take(partition_key)
        while groups and (buffered[0] > MAX_BUFFERED_ENTITIES or buffered[1] > MAX_BUFFERED_BYTES):
            yield take(next(iter(groups)))  # the oldest partial group
    while groups:
        yield take(next(iter(groups)))


#: An outcome's input position (a C key for sorting them).
_INDEX = attrgetter("index")


def _too_large(size: int) -> TableValidationError:
    return TableValidationError(
        "entity", f"a batch body is at most 4 MiB ({MAX_BATCH_BYTES} bytes)", f"this entity alone makes a {size}-byte batch"
    )


class _Tally:
    """The outcomes gathered so far, the counters of a :class:`BulkResult` and the progress calls."""

    def __init__(self, total: int | None, progress: ProgressCallback | None) -> None:
        self.total = total
        self.progress = progress
        self.outcomes: list[EntityOutcome] = []
        self.done = 0
        self.reported = -1
        self.transactions = 0
        self.requests = 0
        #: An answer that every later batch would get too (the table is missing, the
        #: credential is refused): the call stops sending once it has one.
        self.fatal: TableServiceError | None = None

    def failed_before_sending(self, outcome: EntityOutcome) -> None:
        """An entity that failed validation (no progress call: none is made per entity)."""
        self.outcomes.append(outcome)
        self.done += 1

    def add(self, batch: BulkBatch) -> None:
        """Take in what was done with one batch, and report progress."""
        self.transactions += batch.transactions
        self.requests += batch.requests
        for index, entity, etag, error in batch.outcomes:
            if etag is not None:
                set_entity_etag(entity, etag)
            if self.fatal is None and isinstance(error, TableServiceError) and _ends_the_call(error):
                self.fatal = error
            self.outcomes.append(EntityOutcome(index, entity, etag, error))
        self.done += len(batch.outcomes)
        if self.progress is not None:
            self.reported = self.done
            self.progress(self.done, self.total)

    def result(self, elapsed: float) -> BulkResult:
        """The final :class:`BulkResult` (with a last progress call if one is due)."""
        if self.progress is not None and self.reported != self.done:
            self.progress(self.done, self.total)
        outcomes = sorted(self.outcomes, key=_INDEX)
        succeeded = [outcome for outcome in outcomes if outcome.error is None]
        failed = [outcome for outcome in outcomes if outcome.error is not None]
        return BulkResult(succeeded, failed, self.transactions, self.requests, elapsed)


# ---------------------------------------------------------------- the call (no I/O)


class Start:
    """Command: start writing ``batch`` (on a worker), without waiting for it."""

    __slots__ = ("batch",)

    def __init__(self, batch: BulkBatch) -> None:
        self.batch = batch


class AwaitAnswer:
    """Command: wait until ``batch`` is written, and hand it to :meth:`BulkCall.answered`."""

    __slots__ = ("batch",)

    def __init__(self, batch: BulkBatch) -> None:
        self.batch = batch


class AwaitRoom:
    """Command: hand every batch written to :meth:`BulkCall.answered`, waiting until at
    most ``in_flight`` batches are still being written."""

    __slots__ = ("in_flight",)

    def __init__(self, in_flight: int) -> None:
        self.in_flight = in_flight


class Collect:
    """Command: hand the batches already written to :meth:`BulkCall.answered`, without waiting
    (an async driver lets the loop run once first)."""

    __slots__ = ()


#: What :meth:`BulkCall.commands` asks its driver to do.
BulkCommand = Start | AwaitAnswer | AwaitRoom | Collect
_COLLECT = Collect()


class BulkCall:
    """The decisions of one ``bulk_insert`` call, with no I/O of its own.

    The constructor checks the arguments (raising for a bad mode, table name or
    ``progress``). A driver (the thread one here, the asyncio one in
    :mod:`tablesdk.aio._bulk`) runs :meth:`commands`, which reads and plans the
    input on the driver's thread and yields what to do: :class:`Start` a batch's
    worker (which sends it, see :class:`BulkBatch`), or take in the written
    batches (:class:`AwaitAnswer`, :class:`AwaitRoom`, :class:`Collect`), giving
    each to :meth:`answered`. Then :meth:`result`. The rules that live here:

    * **first answer first**: the first batch goes out alone; up to ``window``
      batches planned meanwhile wait for its answer (planning goes on);
    * **an answer that ends the call** (the table is missing or being deleted,
      the credential is refused): every batch not yet started fails with it,
      unsent;
    * **at most ``window`` batches in flight**;
    * tallies, progress calls and the :class:`BulkResult`.
    """

    def __init__(
        self,
        table: str,
        entities: Iterable[Any],
        mode: BulkMode,
        progress: ProgressCallback | None,
        policy: RetryPolicy,
        fmt: PayloadFormat,
        table_endpoint: str,
        api_version: str,
    ) -> None:
        kind = BULK_MODES.get(mode) if isinstance(mode, str) else None
        if kind is None:
            raise ValueError(f"mode must be one of {sorted(BULK_MODES)}, not {mode!r}")
        validate_table_name(table)
        if progress is not None and not callable(progress):
            raise TypeError(f"progress must be callable, not {type(progress).__name__}")
        self.table = table
        self.kind = kind
        #: The retry policy of every ``execute_batch`` of the call.
        self.policy = policy
        self.started = time.perf_counter()
        self.in_flight = 0  # batches started and not yet answered
        self._entities = entities
        self._format = fmt
        self._request_base = (table_endpoint, api_version)
        self._tally = _Tally(len(entities) if isinstance(entities, Sized) else None, progress)
        self._first: BulkBatch | None = None
        self._first_answered = False

    def commands(self, window: int, pause: Callable[[], object] | None = None) -> Iterator[BulkCommand]:
        """Plan the input and yield what the driver does next, keeping at most ``window``
        batches in flight; the driver hands each written batch to :meth:`answered` before
        it resumes this.

        ``pause`` is called every eight entities while batches are in flight (the
        thread driver hands the interpreter to its workers there).
        """
        endpoint, api_version = self._request_base
        sizer = _BatchSizer(endpoint, self.table, self.kind, self._format, api_version)
        pause_while_busy = None if pause is None else self._pauser(pause)
        held: list[BulkBatch] | None = []  # planned after the first batch, None once released
        for step in _plan(self._entities, self._format, sizer, pause_while_busy):
            if isinstance(step, EntityOutcome):
                self._tally.failed_before_sending(step)
                continue
            batch = BulkBatch(self.table, self.kind, step)
            if self._first is None:
                self._first = batch
                self.in_flight += 1
                yield Start(batch)
            elif held is None:
                yield from self._start(batch, window)
            else:
                held.append(batch)
                if not self._first_answered:
                    yield _COLLECT
                if self._first_answered or len(held) >= window:
                    yield from self._release(held, window)
                    held = None
        if held is not None:
            yield from self._release(held, window)
        if self.in_flight:
            yield AwaitRoom(0)

    def answered(self, batch: BulkBatch) -> None:
        """Take in a written batch (calls ``progress``, whose exception propagates)."""
        self.in_flight -= 1
        if batch is self._first:
            self._first_answered = True
        self._tally.add(batch)

    def result(self) -> BulkResult:
        """The :class:`BulkResult` of the call, once every batch was answered."""
        return self._tally.result(time.perf_counter() - self.started)

    def _pauser(self, pause: Callable[[], object]) -> Callable[[], None]:
        def pause_while_busy() -> None:
            if self.in_flight:
                pause()
        return pause_while_busy

    def _release(self, held: list[BulkBatch], window: int) -> Iterator[BulkCommand]:
        if self._first is not None and not self._first_answered:
            yield AwaitAnswer(self._first)
        for batch in held:
            yield from self._start(batch, window)

    def _start(self, batch: BulkBatch, window: int) -> Iterator[BulkCommand]:
        fatal = self._tally.fatal
        if fatal is not None:  # every batch would get the same answer: fail the rest unsent
            batch.fail(batch.pending.pop(), fatal)
            self._tally.add(batch)
            return
        self.in_flight += 1
        yield Start(batch)
        if self.in_flight >= window:
            yield AwaitRoom(window - 1)


# ---------------------------------------------------------------- the thread driver


@dataclass
class _Job:
    """A worker thread's part: send the transactions of one batch (the batch decides them)."""

    client: CloudTableClient
    policy: RetryPolicy
    options: TableRequestOptions | None = None  # the call's request options, on every batch

    def send(self, operations: list[BatchOperation], context: OperationContext) -> list[BatchOperationResult]:
        """One ``$batch`` request for ``operations``."""
        return self.client.execute_batch(
            operations, retry_policy=self.policy, operation_context=context, options=self.options
        )

    def run(self, batch: BulkBatch) -> BulkBatch:
        """Write one batch; never raises: every entity gets an outcome."""
        while (operations := batch.next_operations()) is not None:
            context = OperationContext()
            outcome: list[BatchOperationResult] | Exception
            try:
                outcome = self.send(operations, context)
            except Exception as exc:  # noqa: BLE001 - every failure becomes an outcome
                outcome = exc
            batch.settle(outcome, context)
        return batch


#: Hands the interpreter to a worker whose I/O just finished (it would otherwise wait for the
#: interpreter's 5 ms switch interval): +30% with one worker, neutral with more.
_YIELD_TO_WORKERS = partial(time.sleep, 0)


def bulk_insert(
    client: CloudTableClient,
    table: str,
    entities: Iterable[EntityObject],
    mode: BulkMode = "insert",
    max_workers: int = 8,
    progress: ProgressCallback | None = None,
    *,
    retry_policy: RetryPolicy | None = None,
    options: TableRequestOptions | None = None,
) -> BulkResult:
    """Write ``entities`` into ``table`` as concurrent entity group transactions.

    ``mode`` is ``"insert"`` (Insert Entity: an entity that exists fails with
    409 EntityAlreadyExists), ``"merge"`` (Insert Or Merge) or ``"replace"``
    (Insert Or Replace). ``entities`` may be any iterable (a generator is read
    once, lazily); their order across partitions is not kept. ``max_workers``
    batches run at once (capped at the client's ``pool_size``, with a
    :class:`RuntimeWarning`). ``retry_policy`` defaults to the one of ``options``
    (request options every batch is sent with), then to the client's.

    ``progress(done, total)`` is called on the calling thread after each batch
    finishes, and once more at the end if needed, with the number of entities
    that have a final outcome (written or failed) and ``len(entities)`` (None
    for an input without a length); the last call has ``done`` equal to the
    number of input entities. An exception raised by ``progress`` (or by the
    input iterator) stops the call: no new batch is started, the ones in flight
    are waited for, and the exception propagates.

    Returns a :class:`BulkResult`; it raises only for bad arguments (an
    invalid table name or mode, ``max_workers`` < 1), before any request.
    Per-entity problems, including ones found before sending (invalid entity,
    duplicate keys), are reported in :attr:`BulkResult.failed`; call
    :meth:`BulkResult.raise_on_error` to turn them into an exception.
    """
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait  # not at import (start-up)

    policy = resolve_retry_policy(retry_policy, options, client.retry_policy)
    call = BulkCall(table, entities, mode, progress, policy, client.format, client.table_endpoint, client.api_version)
    workers = workers_within_pool("bulk_insert", "max_workers", max_workers, client.transport.pool_size, stacklevel=2)
    job = _Job(client, call.policy, options)
    writing: dict[BulkBatch, Future[BulkBatch]] = {}

    def take_in(finished: Iterable[Future[BulkBatch]]) -> None:
        for future in finished:
            batch = future.result()  # _Job.run never raises
            del writing[batch]
            call.answered(batch)

    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tablesdk-bulk")
    try:
        for command in call.commands(2 * workers, _YIELD_TO_WORKERS):
            if isinstance(command, Start):
                # each batch runs in a copy of the caller's context (its tracing span, contextvars)
                writing[command.batch] = pool.submit(contextvars.copy_context().run, job.run, command.batch)
            elif isinstance(command, AwaitRoom):
                while len(writing) > command.in_flight:
                    take_in(wait(writing.values(), return_when=FIRST_COMPLETED)[0])
            elif isinstance(command, AwaitAnswer):
                take_in(wait((writing[command.batch],))[0])
            else:
                take_in([future for future in writing.values() if future.done()])
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return call.result()
