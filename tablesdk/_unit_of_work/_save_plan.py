"""One ``save_changes``, with no I/O: the request each pending change becomes, the order
they go in, what each outcome does to its descriptor, and the outcome of the whole save.

:class:`SavePlan` is driven the same way by the sync and async contexts (see its
docstring); what a save returns and raises (:class:`DataServiceResponse`,
:class:`OperationResponse`, :class:`DataServiceRequestError`) is in ``_save_outcome``.
Builds on ``_tracking`` only among the context modules, and never imports a client.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from enum import Flag
from typing import TYPE_CHECKING

from .._formats._batch import BatchOperation, BatchOperationKind, BatchOperationResult
from .._entities._edm import EntityProperty
from .._entities._entity import encrypted_names, entity_to_payload
from .._entities._entity_access import entity_keys, loose_properties
from .._core._errors import BatchError, ResponseDecodeError, TableServiceError
from ._save_outcome import DataServiceRequestError, DataServiceResponse, OperationResponse
from ._tracking import Entity, EntityDescriptor, EntityStates, IdentityMap, WritingEntity

if TYPE_CHECKING:
    from .._clients._encryption_scope import EncryptionScope

__all__ = ["SaveChangesOptions", "SavePlan"]


class SaveChangesOptions(Flag):
    """How ``save_changes`` sends pending changes.

    * ``NONE``: one request per change, in order; stop at the first failure.
    * ``BATCH``: all changes in one entity group transaction (all or nothing).
    * ``CONTINUE_ON_ERROR``: one request per change; send all, report every failure.
    * ``REPLACE_ON_UPDATE``: updates replace the entity (PUT) instead of merging.

    ``BATCH | CONTINUE_ON_ERROR`` is invalid.
    """

    NONE = 0
    BATCH = 1
    CONTINUE_ON_ERROR = 2
    REPLACE_ON_UPDATE = 4


class SavePlan:
    """One ``save_changes`` in progress, with no I/O: which change to send next, and what each
    outcome does to its descriptor.

    :meth:`start` checks the options and builds (so validates) the request of every pending
    change before anything is sent. The sync and async contexts then send :attr:`sent`
    (:attr:`operations` as they go on the wire: encrypted by the save's client-side encryption,
    while :attr:`operations` keep the plaintext each descriptor's snapshot takes) as one batch (then :meth:`batch_succeeded` or :meth:`batch_failed`) or one by one from
    :meth:`to_send` (then :meth:`succeeded` or :meth:`failed` for each), and finally
    :meth:`finish`. A change is applied to its descriptor only when its success is
    reported, so a save interrupted mid-way (an exception, a cancelled task) leaves every
    change whose outcome is unknown pending.
    """

    def __init__(
        self,
        identities: IdentityMap,
        pending: list[EntityDescriptor],
        operations: list[BatchOperation],
        options: SaveChangesOptions,
        sent: list[BatchOperation] | None = None,
    ) -> None:
        self.identities = identities
        self.pending = pending
        self.operations = operations
        #: The operations as sent (encrypted where the save encrypts); ``operations`` when nothing is.
        self.sent = operations if sent is None else sent
        self.is_batch = SaveChangesOptions.BATCH in options
        self.continue_on_error = SaveChangesOptions.CONTINUE_ON_ERROR in options
        self.responses = [OperationResponse(d.entity, d.table, op.kind.name) for d, op in zip(pending, operations)]
        self._stopped = False
        self._outcome: DataServiceResponse | None = None

    @classmethod
    def start(
        cls,
        identities: IdentityMap,
        options: SaveChangesOptions,
        *,
        echo_content: bool,
        writing_entity: Sequence[WritingEntity],
        encryption: EncryptionScope | None = None,
    ) -> SavePlan:
        """The plan for the pending changes of ``identities``: ValueError, before anything is
        sent, for invalid ``options`` or a change that cannot be written; a
        :class:`~tablesdk.TableEncryptionError` for a change ``encryption`` (the save's client-side
        encryption) refuses, such as a merge of an encrypted entity."""
        if SaveChangesOptions.BATCH in options and SaveChangesOptions.CONTINUE_ON_ERROR in options:
            raise ValueError("SaveChangesOptions.BATCH cannot be combined with CONTINUE_ON_ERROR")
        replace = SaveChangesOptions.REPLACE_ON_UPDATE in options
        pending = identities.pending()
        operations = [_operation_for(d, replace, echo_content, writing_entity) for d in pending]
        sent = _encrypted(pending, operations, encryption)
        return cls(identities, pending, operations, options, sent)

    def to_send(self) -> Iterator[tuple[int, BatchOperation]]:
        """The changes to send one by one, in order; stops after a failure unless continuing on errors."""
        for index, operation in enumerate(self.operations):
            if self._stopped:
                return
            self.responses[index].sent = True
            yield index, self.sent[index]

    def succeeded(self, index: int, result: BatchOperationResult) -> None:
        """Change ``index`` was applied by the service."""
        response = self.responses[index]
        response.sent = True
        response.status_code = result.status
        response.etag = result.etag
        self._applied(index, result)

    def failed(self, index: int, error: TableServiceError) -> None:
        """Change ``index`` was refused (it stays pending), or applied with an unreadable answer.

        A 2xx answer whose body cannot be decoded still means the service applied the
        change: it is not left pending (sending it again would meet its own result, a
        409 or 412), its response carries the decode error, and the save goes on.
        """
        response = self.responses[index]
        response.sent = True
        response.error = error
        response.status_code = error.status_code
        if isinstance(error, ResponseDecodeError) and _applied_unreadable(error):
            etag = error.etag
            response.etag = etag
            self._applied(index, BatchOperationResult(index, error.status_code or 200, etag, None))
            return
        if not self.continue_on_error:
            self._stopped = True

    def batch_succeeded(self, results: Sequence[BatchOperationResult]) -> None:
        """The entity group transaction was applied: every change succeeded."""
        for index, result in enumerate(results):
            self.succeeded(index, result)
        self._outcome = DataServiceResponse(self.responses, is_batch=True, batch_status_code=202)

    def batch_failed(self, error: TableServiceError) -> None:
        """The transaction was refused (nothing applied); the blamed change, if any, carries the error.

        An ambiguous refusal may mean the whole transaction was applied by an earlier
        attempt, so every change carries it, not only the blamed one.
        """
        blamed = error.failed_index if isinstance(error, BatchError) else None
        cause = (error.cause or error) if isinstance(error, BatchError) else error
        everyone = blamed is None or error.ambiguous_retry
        applied = _applied_unreadable(error)  # a 202 that committed but could not be read
        for index, response in enumerate(self.responses):
            response.sent = True
            if everyone or index == blamed:
                response.error = cause
                response.status_code = error.status_code
            if applied:
                self._applied(index, BatchOperationResult(index, error.status_code or 202, None, None))
        self._outcome = DataServiceResponse(
            self.responses, is_batch=True, batch_status_code=error.status_code, failed_index=blamed
        )
        raise _batch_save_error(self._outcome, error) from _shown_as_cause(error)

    def finish(self) -> DataServiceResponse:
        """The outcome of the save; raises :class:`DataServiceRequestError` when a change failed."""
        if self.is_batch:
            return self._outcome or DataServiceResponse(self.responses, is_batch=True)
        outcome = DataServiceResponse(self.responses)
        _raise_if_failed(outcome)
        return outcome

    def _applied(self, index: int, result: BatchOperationResult) -> None:
        """Change ``index`` is on the service: a deleted entity is no longer tracked, any other is saved."""
        descriptor, operation = self.pending[index], self.operations[index]
        if descriptor.state is EntityStates.DELETED:
            self.identities.forget(descriptor)
            return
        echoed = result.payload.values.get("Timestamp") if result.payload is not None else None
        descriptor.mark_saved(
            operation.payload.values if operation.payload is not None else None,
            merged=operation.kind in _MERGING_KINDS, etag=result.etag, timestamp=echoed,
        )


_MERGING_KINDS = frozenset({BatchOperationKind.MERGE, BatchOperationKind.INSERT_OR_MERGE})


def _encrypted(
    pending: list[EntityDescriptor], operations: list[BatchOperation], encryption: EncryptionScope | None
) -> list[BatchOperation] | None:
    """The operations as sent under ``encryption`` (None: as they are). A class's ``Encrypted[...]``
    fields are refused without a policy, so they are looked at even with no encryption."""
    marked = [encrypted_names(type(descriptor.entity)) for descriptor in pending]
    if encryption is None and not any(marked):
        return None
    from .._clients._encryption_scope import NO_ENCRYPTION

    scope = encryption or NO_ENCRYPTION
    sent = [scope.encrypt_operation(operation, names) for operation, names in zip(operations, marked)]
    return None if all(new is old for new, old in zip(sent, operations)) else sent

_NO_ETAG = (
    "cannot {action} (PartitionKey={pk!r}, RowKey={rk!r}) without an ETag: the entity was never read "
    "(or was read with json_metadata='nometadata', which carries no ETags in query results). "
    "Query it first, or attach_to(table, entity, etag='*') for an unconditional {action}"
)

_PARTIAL = (
    "cannot replace (PartitionKey={pk!r}, RowKey={rk!r}): it was read through a projection (select), so "
    "replacing it would delete every property that was not selected. Save without REPLACE_ON_UPDATE "
    "(a merge), or read it in full first"
)


def _operation_for(
    descriptor: EntityDescriptor, replace_on_update: bool, echo_content: bool, writing_entity: Sequence[WritingEntity]
) -> BatchOperation:
    """The request that applies ``descriptor``'s pending change; ValueError when it cannot be written."""
    entity = descriptor.entity
    state = descriptor.state
    (pk, rk), table = entity_keys(entity), descriptor.table
    if (table, pk, rk) != descriptor._identity:
        raise ValueError(
            f"the keys of a tracked entity changed from {descriptor._identity[1:]!r} to {(pk, rk)!r}; "
            "keys identify an entity: detach it and add a new one instead"
        )
    if state is EntityStates.DELETED:
        if not descriptor.etag:
            raise ValueError(_NO_ETAG.format(action="delete", pk=pk, rk=rk))
        return BatchOperation(BatchOperationKind.DELETE, table, pk, rk, None, descriptor.etag)
    payload = entity_to_payload(entity)
    unknown = _still_untyped(descriptor, entity)
    if unknown:
        raise ValueError(
            f"cannot write (PartitionKey={pk!r}, RowKey={rk!r}): properties {sorted(unknown)} were read "
            "with json_metadata='nometadata', which does not carry types, so they would be stored as "
            "Edm.String. Read with minimalmetadata, declare them on a TableEntity, or set them as "
            "EntityProperty values"
        )
    for hook in writing_entity:
        hook(entity, payload)
    if state is EntityStates.ADDED:
        kind = BatchOperationKind.INSERT
        etag = None
    elif descriptor.upsert is not None:
        replace = descriptor.upsert == "replace" or replace_on_update
        if replace and descriptor.partial:
            raise ValueError(_PARTIAL.format(pk=pk, rk=rk))
        kind = BatchOperationKind.INSERT_OR_REPLACE if replace else BatchOperationKind.INSERT_OR_MERGE
        etag = None
    else:
        if not descriptor.etag:
            raise ValueError(_NO_ETAG.format(action="update", pk=pk, rk=rk))
        if replace_on_update and descriptor.partial:
            raise ValueError(_PARTIAL.format(pk=pk, rk=rk))
        kind = BatchOperationKind.UPDATE if replace_on_update else BatchOperationKind.MERGE
        etag = descriptor.etag
    return BatchOperation(kind, table, pk, rk, payload, etag, echo_content=echo_content)


_MISSING = object()


def _still_untyped(descriptor: EntityDescriptor, entity: Entity) -> set[str]:
    """Properties read without a type that still hold the value read, with no type given since."""
    if not descriptor.untyped:
        return set()
    read = descriptor.snapshot or {}
    current, typed = loose_properties(entity)
    return {
        name for name in descriptor.untyped
        if name in current and name not in typed and not isinstance(current[name], EntityProperty)
        and current[name] == read.get(name, _MISSING)
    }


def _applied_unreadable(error: TableServiceError) -> bool:
    """Whether ``error`` is a success answer whose body could not be read: the change was applied."""
    status = error.status_code
    return isinstance(error, ResponseDecodeError) and status is not None and 200 <= status < 300


def _save_error(outcome: DataServiceResponse, message: str) -> DataServiceRequestError:
    """The error of a failed save: ``message``, with the status, code and request id of the first failure."""
    first = outcome.errors[0].error
    assert first is not None
    return DataServiceRequestError(
        message,
        response=outcome,
        status_code=first.status_code,
        error_code=first.error_code,
        request_id=first.request_id,
    )


def _batch_save_error(outcome: DataServiceResponse, cause: TableServiceError) -> DataServiceRequestError:
    where = f" (operation {outcome.failed_index})" if outcome.failed_index is not None else ""
    return _save_error(outcome, f"entity group transaction failed{where}: {cause.message}")


def _raise_if_failed(outcome: DataServiceResponse) -> None:
    errors = outcome.errors
    if not errors:
        return
    not_sent = sum(1 for r in outcome if not r.sent)
    summary = f"{len(errors)} of {len(outcome)} changes failed"
    if not_sent:
        summary += f", {not_sent} not sent"
    first = errors[0].error
    assert first is not None
    raise _save_error(outcome, f"{summary}; first: {first.describe(request_id=False)}") from _shown_as_cause(first)


def _shown_as_cause(error: TableServiceError) -> TableServiceError:
    """``error``, the cause of a failed save, without its traceback.

    Its frames are the transport's and the save's generators': printed, they made a long
    second traceback under the save error's. The one failure that explains the save
    (the first, or the refused transaction's) is its only cause; the errors the save
    handled on the way (a later change's, in CONTINUE_ON_ERROR) are not chained."""
    return error.with_traceback(None)
