"""Bulk writing: many entities, any partitions, as concurrent entity group transactions.

One engine writes every bulk call: ``bulk_insert`` (of entities, of a pandas DataFrame or
of a ``pyarrow.Table``), ``write_arrow``/``write_pandas``, the Dask writer and
``delete_entities``, on threads (here) or on asyncio tasks (:mod:`tablesdk.aio._bulk`).
Each public face checks its parameters into one :class:`BulkOptions` (concurrency,
progress, retry policy, request options) and hands the engine a :class:`BulkKind`: what
operation each entity becomes (insert, merge, replace, delete) and what a refusal that
names one entity means. Every entity of the input (or of the scan) ends up exactly once
in :attr:`BulkResult.succeeded` or :attr:`BulkResult.failed`, with the reason; a bulk call
raises only for bad arguments (and a delete for an error of its scan).

How it works (see docs/batch.md, "Bulk loading"):

* **Planning** (:mod:`tablesdk._bulk_loading._bulk_plan`, no I/O). An insert's input is read once on the
  calling thread (or the loop): each entity validated and serialized once, grouped by
  PartitionKey and cut exactly against both batch limits; duplicates and invalid
  entities fail before sending; partial groups are bounded. A delete's batches come from
  the pages of a key-only scan.
* **The call** (:class:`BulkCall`, no I/O): the first batch goes out alone and the
  batches planned meanwhile wait for its answer; an answer every batch would get (a
  missing table, a refused credential) fails every batch not yet sent, unsent; at most
  a window of batches is in flight; tallies, progress calls and the result.
* **One batch** (:class:`BulkBatch`): each transaction goes through the client's
  ``execute_batch`` with the call's retry policy (ServerBusy, 5xx, timeouts and a change
  set refused with a retryable status are retried there). When the service refuses a
  change set and names the failing operation, that entity fails with the service's error
  and the rest is sent again without it (a delete of an entity already gone counts as
  done). Errors that concern the whole request (no index, authentication, a missing
  table, ...) fail every entity of the batch; so does an insert's refusal the client
  marks ambiguous (``ambiguous_retry``: an earlier attempt may have written it).

Threads and connections: batches run on a private thread pool of ``max_workers`` threads
sharing the client's transport, whose session keeps at most ``pool_size`` connections per
host; a request beyond that would get a throw-away connection (TCP churn), so
``max_workers`` is capped at ``pool_size`` (with a :class:`RuntimeWarning`). ``progress``
is always called on the calling thread (on the loop for the asyncio driver).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterable, Iterator, Sized
from dataclasses import dataclass, replace
from functools import partial
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .._formats._batch import BatchOperation, BatchOperationKind, BatchOperationResult
from ._bulk_plan import BatchSizer, BulkItem, Step, plan_inserts
from .._entities._entity import validate_table_name
from .._entities._entity_access import set_entity_etag
from .._core._errors import (
    BatchError, TableErrorCode, TableServiceError, TableValidationError, require_positive_int, warn_the_caller,
)
from .._formats import PayloadFormat
from .._pipeline._http import workers_within_pool
from .._pipeline._options import TableRequestOptions, check_options, resolve_retry_policy
from .._pipeline._retry import RetryPolicy
from .._pipeline._transport import OperationContext

if TYPE_CHECKING:
    from concurrent.futures import Future

    from .._clients._client import CloudTableClient

__all__ = [
    "BULK_MODES", "DELETE", "AwaitAnswer", "AwaitRoom", "BulkBatch", "BulkCall", "BulkCommand", "BulkInsertError",
    "BulkKind", "BulkMode", "BulkOptions", "BulkResult", "Collect", "EntityOutcome", "ProgressCallback",
    "Start", "insert_call", "insert_entities", "is_column_data", "run_on_threads",
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
    :class:`~tablesdk._core._errors.TableServiceError` subclass answered by the service
    (``ConflictError`` for an insert of an existing entity, ``ServerBusyError``
    when retries ran out, ...), a :class:`~tablesdk._core._errors.TableValidationError`
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


# ---------------------------------------------------------------- the parameters of a call


def _check_progress(progress: object) -> None:
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable, not {type(progress).__name__}")


class BulkOptions:
    """The parameters every bulk face takes, checked once: ``concurrency`` batches in flight
    (``max_workers`` threads, or ``max_concurrency`` tasks), ``progress(done, total)``,
    ``retry_policy`` (over the one of ``options``, over the client's), and ``options``, the
    request options every request of the call is sent with. Build it with :meth:`threads`
    or :meth:`tasks`, which name the concurrency as that flavour's faces do. Read-only."""

    __slots__ = ("concurrency", "options", "progress", "retry_policy")

    concurrency: int
    progress: ProgressCallback | None
    retry_policy: RetryPolicy | None
    options: TableRequestOptions | None

    def __init__(
        self, concurrency: int = 8, progress: ProgressCallback | None = None, retry_policy: RetryPolicy | None = None,
        options: TableRequestOptions | None = None,
    ) -> None:
        _check_progress(progress)
        check_options(options)
        if retry_policy is not None and not callable(getattr(retry_policy, "retry_after", None)):
            raise TypeError(f"retry_policy must have retry_after(attempt, error), not {type(retry_policy).__name__}")
        for name, value in (("concurrency", concurrency), ("progress", progress), ("retry_policy", retry_policy),
                            ("options", options)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"BulkOptions is read-only: {name} cannot be set")

    def __reduce__(self) -> tuple[type[BulkOptions], tuple[Any, ...]]:
        return BulkOptions, (self.concurrency, self.progress, self.retry_policy, self.options)

    def __repr__(self) -> str:
        return (f"BulkOptions(concurrency={self.concurrency}, progress={self.progress!r}, "
                f"retry_policy={self.retry_policy!r}, options={self.options!r})")

    @classmethod
    def threads(
        cls, max_workers: int, progress: ProgressCallback | None, retry_policy: RetryPolicy | None,
        options: TableRequestOptions | None,
    ) -> BulkOptions:
        """The parameters of a face of the thread flavour (``max_workers``)."""
        return cls(require_positive_int("max_workers", max_workers), progress, retry_policy, options)

    @classmethod
    def tasks(
        cls, max_concurrency: int, progress: ProgressCallback | None, retry_policy: RetryPolicy | None,
        options: TableRequestOptions | None, *, max_workers: int | None = None,
    ) -> BulkOptions:
        """The parameters of a face of the asyncio flavour (``max_concurrency``; ``max_workers``,
        the old spelling of some async faces, still works with a :class:`DeprecationWarning`)."""
        if max_workers is not None:
            warn_the_caller("max_workers is deprecated on the asyncio client: use max_concurrency", DeprecationWarning)
            max_concurrency = max_workers
        return cls(require_positive_int("max_concurrency", max_concurrency), progress, retry_policy, options)

    def policy(self, default: RetryPolicy) -> RetryPolicy:
        """The retry policy of every request of the call (``default``: the client's)."""
        return resolve_retry_policy(self.retry_policy, self.options, default)

    def scan_options(self) -> TableRequestOptions | None:
        """The request options of a delete's scan: ``options``, with ``retry_policy`` when one is given."""
        if self.retry_policy is None:
            return self.options
        return replace(self.options or TableRequestOptions(), retry_policy=self.retry_policy)


if TYPE_CHECKING:  # a Protocol class costs its making at import; only the type checker needs it
    from .._clients._encryption_scope import EncryptionScope

    class BulkTarget(Protocol):
        """What the engine reads of a client (sync or async) to plan a call."""

        @property
        def format(self) -> PayloadFormat: ...
        @property
        def table_endpoint(self) -> str: ...
        @property
        def api_version(self) -> str: ...
        @property
        def retry_policy(self) -> RetryPolicy: ...
        @property
        def max_batch_bytes(self) -> int: ...
        @property
        def is_cosmos(self) -> bool: ...
        def _encryption(self, options: TableRequestOptions | None, entity_type: Any = None) -> EncryptionScope | None: ...


def is_column_data(data: object) -> bool:
    """True for a pandas DataFrame or a pyarrow Table/RecordBatch (told by the class, importing neither)."""
    cls = type(data)
    return cls.__name__ in ("DataFrame", "Table", "RecordBatch") and cls.__module__.partition(".")[0] in ("pandas", "pyarrow")


# ---------------------------------------------------------------- what a batch becomes, no I/O


class BulkKind:
    """What each entity of a chunk becomes (``operation``; a delete ``conditional`` on the scanned
    ETag or ``If-Match: *``) and what a refusal naming one entity means."""

    __slots__ = ("conditional", "deletes", "operation")

    def __init__(self, operation: BatchOperationKind, conditional: bool = False) -> None:
        self.operation = operation
        self.deletes = operation is BatchOperationKind.DELETE
        self.conditional = conditional

    def operations(self, table: str, chunk: list[BulkItem]) -> list[BatchOperation]:
        """The operations of ``chunk``, writes carrying their pre-encoded bodies. A conditional delete
        carries the scanned ETag (none, JSON ``nometadata``, fails validation: never unconditional)."""
        operation = self.operation
        if self.deletes:
            conditional = self.conditional
            return [BatchOperation(operation, table, item.partition_key, item.row_key, None,
                                   item.entity.etag if conditional else "*") for item in chunk]
        return [BatchOperation(operation, table, item.partition_key, item.row_key, item.payload, None, body=item.body)
                for item in chunk]

    def blamed(self, cause: TableServiceError) -> TableServiceError | None:
        """The outcome of the entity a refusal names: a delete of one already gone (404) is done."""
        return None if self.deletes and cause.status_code == 404 else cause

    def trusts(self, refusal: BatchError) -> bool:
        """Whether a refusal may single out one entity. An insert's ambiguous refusal may not (an
        earlier attempt may have written the batch); a delete's may (gone is gone)."""
        return self.deletes or not refusal.ambiguous_retry


#: Every entity of a delete call becomes a Delete Entity operation.
DELETE = BatchOperationKind.DELETE

#: (input position, entity, new ETag, error): the final word on one entity.
_Outcome = tuple[int, Any, "str | None", "BaseException | None"]


class BulkBatch:
    """One planned batch on its way, and what each answer to it means (no I/O).

    A driver's worker (a thread, a task) repeats: take :meth:`next_operations`
    (None once every entity has an outcome), send them with the client's
    ``execute_batch``, the call's policy and request options under a new
    :class:`~tablesdk._pipeline._transport.OperationContext`, and hand the results, or the
    exception raised, to :meth:`settle`. Then the driver gives the batch to
    :meth:`BulkCall.answered`.
    """

    __slots__ = ("chunk", "kind", "outcomes", "pending", "requests", "table", "transactions")

    def __init__(self, table: str, kind: BulkKind, items: list[BulkItem]) -> None:
        self.table = table
        self.kind = kind
        self.pending = [items]  # chunks still to send, the next one last
        self.chunk: list[BulkItem] = []  # the chunk sent last
        self.outcomes: list[_Outcome] = []
        self.transactions = 0  # entity group transactions attempted
        self.requests = 0  # HTTP requests made for them, with the transport's retries

    def next_operations(self) -> list[BatchOperation] | None:
        """The operations of the next transaction to send."""
        if not self.pending:
            return None
        self.chunk = chunk = self.pending.pop()
        self.transactions += 1
        return self.kind.operations(self.table, chunk)

    def settle(self, outcome: list[BatchOperationResult] | Exception, context: OperationContext) -> None:
        """Record what sending the last operations did; entities of a chunk the service refused,
        but not for their own fault, are queued again as a new chunk."""
        chunk = self.chunk
        self.requests += len(context.attempts)
        if not isinstance(outcome, Exception):
            self.outcomes.extend((item.index, item.entity, result.etag, None) for item, result in zip(chunk, outcome))
        elif isinstance(outcome, BatchError):
            self._isolate(chunk, outcome)
        elif isinstance(outcome, TableValidationError) and len(chunk) > 1 and outcome.field == "batch":
            # The exact sizing makes this impossible; never fail good entities for it.
            half = len(chunk) // 2
            self.pending.extend((chunk[half:], chunk[:half]))
        else:
            self.fail(chunk, outcome)  # transport errors after retries, anything unexpected: reported

    def fail(self, items: Iterable[BulkItem], error: BaseException | None) -> None:
        """Give ``items`` ``error`` as their outcome (None: done)."""
        self.outcomes.extend((item.index, item.entity, None, error) for item in items)

    def _isolate(self, chunk: list[BulkItem], refusal: BatchError) -> None:
        """Settle the entity the service blamed and queue the rest of ``chunk`` again; fail the
        whole chunk when no entity is to blame (no index, a request-wide error) or the refusal
        cannot be trusted to single one out."""
        cause: TableServiceError = refusal.cause if refusal.cause is not None else refusal
        index = refusal.failed_index
        if index is None or not 0 <= index < len(chunk) or _request_wide(cause) or not self.kind.trusts(refusal):
            self.fail(chunk, cause)
            return
        self.fail((chunk[index],), self.kind.blamed(cause))
        rest = chunk[:index] + chunk[index + 1:]
        if rest:
            self.pending.append(rest)


def _ends_the_call(error: TableServiceError) -> bool:
    """An answer every batch of the call would get: the table is missing or being deleted,
    or the credential is refused."""
    return error.error_code in ("TableNotFound", "TableBeingDeleted") or error.status_code in (401, 403)


def _request_wide(error: TableServiceError) -> bool:
    return error.status_code in _REQUEST_WIDE_STATUSES or error.error_code in _REQUEST_WIDE_CODES


#: An outcome's input position (a C key for sorting them).
_INDEX = attrgetter("index")


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
    """The decisions of one bulk call, with no I/O of its own.

    A driver (the thread one here, the asyncio one in :mod:`tablesdk.aio._bulk`) hands
    each planned step (a batch, or an entity that failed before sending) to :meth:`feed`,
    then calls :meth:`finish`; both yield what to do: :class:`Start` a batch's worker
    (which sends it, see :class:`BulkBatch`), or take in the written batches
    (:class:`AwaitAnswer`, :class:`AwaitRoom`, :class:`Collect`), giving each to
    :meth:`answered`. Then :meth:`result`. The rules that live here:

    * **first answer first**: the first batch goes out alone; up to ``window``
      batches planned meanwhile wait for its answer (planning goes on);
    * **an answer that ends the call** (the table is missing or being deleted,
      the credential is refused): every batch not yet started fails with it,
      unsent;
    * **at most ``window`` batches in flight**;
    * tallies, progress calls and the :class:`BulkResult`.
    """

    def __init__(self, table: str, kind: BulkKind, bulk: BulkOptions, policy: RetryPolicy, total: int | None) -> None:
        self.table = table
        self.kind = kind
        #: The request options and retry policy of every ``execute_batch`` of the call.
        self.options = bulk.options
        self.policy = policy
        self.concurrency = bulk.concurrency
        self.started = time.perf_counter()
        self.in_flight = 0  # batches started and not yet answered
        self._tally = _Tally(total, bulk.progress)
        self._first: BulkBatch | None = None
        self._first_answered = False
        self._held: list[BulkBatch] | None = []  # planned after the first batch, None once released

    def commands(self, steps: Iterable[Step], window: int) -> Iterator[BulkCommand]:
        """:meth:`feed` every step, then :meth:`finish`; the driver hands each written batch to
        :meth:`answered` before it resumes this."""
        for step in steps:
            yield from self.feed(step, window)
        yield from self.finish(window)

    def feed(self, step: Step, window: int) -> Iterator[BulkCommand]:
        """What to do with one planned step, keeping at most ``window`` batches in flight."""
        if type(step) is tuple:
            index, entity, error = step
            self._tally.failed_before_sending(EntityOutcome(index, entity, None, error))
            return
        batch = BulkBatch(self.table, self.kind, step)  # type: ignore[arg-type]  # a list: a batch
        held = self._held
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
                yield from self._release(window)

    def finish(self, window: int) -> Iterator[BulkCommand]:
        """What to do once every step was fed: start what waits, then wait for every answer."""
        if self._held is not None:
            yield from self._release(window)
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

    def pauser(self, pause: Callable[[], object] | None) -> Callable[[], None] | None:
        """``pause``, called only while batches are in flight (for the planner)."""
        if pause is None:
            return None

        def pause_while_busy() -> None:
            if self.in_flight:
                pause()
        return pause_while_busy

    def _release(self, window: int) -> Iterator[BulkCommand]:
        held, self._held = self._held or [], None
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


def insert_call(
    client: BulkTarget, table: str, entities: Iterable[Any], mode: BulkMode, bulk: BulkOptions,
    pause: Callable[[], object] | None = None,
) -> tuple[BulkCall, Iterator[Step]]:
    """The call of an insert (checking ``mode`` and ``table``) and its planned steps."""
    operation = BULK_MODES.get(mode) if isinstance(mode, str) else None
    if operation is None:
        raise ValueError(f"mode must be one of {sorted(BULK_MODES)}, not {mode!r}")
    validate_table_name(table, cosmos=client.is_cosmos)
    total = len(entities) if isinstance(entities, Sized) else None
    call = BulkCall(table, BulkKind(operation), bulk, bulk.policy(client.retry_policy), total)
    sizer = BatchSizer(
        client.table_endpoint, table, operation, client.format, client.api_version, client.max_batch_bytes,
        client.is_cosmos,
    )
    encryption = client._encryption(bulk.options)
    return call, plan_inserts(entities, client.format, sizer, call.pauser(pause), encryption, operation)


# ---------------------------------------------------------------- the thread driver


class _Job:
    """A worker thread's part: send the transactions of one batch (the batch decides them)."""

    __slots__ = ("client", "options", "policy")

    def __init__(self, client: CloudTableClient, call: BulkCall) -> None:
        self.client = client
        self.policy = call.policy
        self.options = call.options

    def send(self, operations: list[BatchOperation], context: OperationContext) -> list[BatchOperationResult]:
        """One ``$batch`` request for ``operations``."""
        return self.client.execute_batch(operations, retry_policy=self.policy, operation_context=context, options=self.options)

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


def run_on_threads(client: CloudTableClient, call: BulkCall, steps: Iterable[Step], face: str) -> BulkResult:
    """Run ``call`` over ``steps`` (read on the calling thread) on a private pool of the call's
    concurrency in threads, capped at the client's ``pool_size`` (``face`` names the caller in
    that warning); at most twice as many batches are in flight."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait  # not at import (start-up)

    workers = workers_within_pool(face, "max_workers", call.concurrency, client.transport.pool_size, stacklevel=4)
    job = _Job(client, call)
    writing: dict[BulkBatch, Future[BulkBatch]] = {}

    def take_in(finished: Iterable[Future[BulkBatch]]) -> None:
        for future in finished:
            batch = future.result()  # _Job.run never raises
            del writing[batch]
            call.answered(batch)

    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tablesdk-bulk")
    try:
        for command in call.commands(steps, 2 * workers):
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


def insert_entities(
    client: CloudTableClient, table: str, entities: Iterable[Any], mode: BulkMode, bulk: BulkOptions
) -> BulkResult:
    """Write ``entities`` into ``table`` as concurrent entity group transactions, on threads.

    ``mode`` is ``"insert"`` (Insert Entity: an entity that exists fails with 409
    EntityAlreadyExists), ``"merge"`` (Insert Or Merge) or ``"replace"`` (Insert Or
    Replace). ``entities`` may be any iterable (a generator is read once, lazily); their
    order across partitions is not kept. ``progress(done, total)`` is called on the
    calling thread after each batch, and once more at the end if needed; an exception it
    raises (or the input raises) stops the call: no new batch is started, the ones in
    flight are waited for, and the exception propagates. Raises only for bad arguments,
    before any request.
    """
    call, steps = insert_call(client, table, entities, mode, bulk, _YIELD_TO_WORKERS)
    return run_on_threads(client, call, steps, "bulk_insert")
