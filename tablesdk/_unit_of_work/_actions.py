"""Table-scoped actions, as in the storage team's Java client: TableOperation, TableBatchOperation, TableResult.

An action says what to do to one entity, not where: the table that executes it
supplies the table name (``table.execute(op)``, ``table.execute_batch(batch)``).
An operation keeps a reference to its entity and reads it when executed, so the
same operation can be executed again after the entity changed (the seeds'
heartbeat: a merge re-executed as its entity's counters grow); each success puts
the new ETag on the entity, so the next conditional write matches.

This module decides nothing about the wire: executing turns each action into a
:class:`~tablesdk._formats._batch.BatchOperation`, and the client's flows send it.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from .._formats._batch import BatchOperation, BatchOperationKind, BatchOperationResult
from .._entities._edm import EntityPayload
from .._entities._entity import DynamicEntity, encrypted_names, entity_from_payload, entity_to_payload
from .._entities._entity_access import check_entity, entity_etag, entity_keys, set_entity_etag
from .._core._errors import TableValidationError

if TYPE_CHECKING:
    from .._clients._encryption_scope import EncryptionScope

__all__ = [
    "TableBatchOperation", "TableOperation", "TableResult", "MAX_BATCH_OPERATIONS", "require_batch", "require_operation",
]

#: The most operations one entity group transaction may hold (the service's limit).
MAX_BATCH_OPERATIONS = 100

R = TypeVar("R")

_CONDITIONAL = frozenset({BatchOperationKind.UPDATE, BatchOperationKind.MERGE, BatchOperationKind.DELETE})


@dataclass
class TableResult(Generic[R]):
    """What one executed action returned: the HTTP status, the entity's new ETag and the entity.

    ``status`` is the service's status for the operation (201 or 204 for an
    insert, 204 for other writes, 200 for a retrieve, 404 for a retrieve of a
    missing entity). ``etag`` is None after a delete and for a missing entity.
    ``entity`` is the operation's own entity (its ``etag`` updated) for writes,
    the entity read for a retrieve, and None when there was none.
    """

    status: int
    etag: str | None
    entity: R | None


class TableOperation(Generic[R]):
    """One action on one entity, built with a factory method: ``TableOperation.insert(entity)``.

    ``merge``, ``replace`` and ``delete`` are conditional on the entity's
    ``etag`` when executed (set it to ``"*"`` for an unconditional write); the
    ``insert_or_*`` upserts are unconditional. ``retrieve`` reads one entity by
    its keys as ``entity_type``.
    """

    __slots__ = ("kind", "entity", "partition_key", "row_key", "entity_type", "select", "echo_content")

    def __init__(
        self,
        kind: BatchOperationKind,
        entity: R | None,
        partition_key: str,
        row_key: str,
        entity_type: type[R] | None = None,
        select: Sequence[str] | None = None,
        echo_content: bool = False,
    ) -> None:
        self.kind = kind
        self.entity = entity
        self.partition_key = partition_key
        self.row_key = row_key
        self.entity_type = entity_type
        self.select = tuple(select) if select is not None else None
        self.echo_content = echo_content

    # ------------------------------------------------------------ factories

    @classmethod
    def insert(cls, entity: R, *, echo_content: bool = False) -> TableOperation[R]:
        """Insert ``entity``; the service refuses it (409) if the keys exist."""
        return cls._for(BatchOperationKind.INSERT, entity, echo_content=echo_content)

    @classmethod
    def replace(cls, entity: R) -> TableOperation[R]:
        """Replace the stored entity with ``entity``, if its ETag still matches (412 if not)."""
        return cls._for(BatchOperationKind.UPDATE, entity)

    @classmethod
    def merge(cls, entity: R) -> TableOperation[R]:
        """Merge ``entity``'s properties into the stored entity, if its ETag still matches."""
        return cls._for(BatchOperationKind.MERGE, entity)

    @classmethod
    def delete(cls, entity: R) -> TableOperation[R]:
        """Delete the stored entity, if ``entity``'s ETag still matches."""
        return cls._for(BatchOperationKind.DELETE, entity)

    @classmethod
    def insert_or_replace(cls, entity: R) -> TableOperation[R]:
        """Insert ``entity``, or replace the stored one whatever its ETag."""
        return cls._for(BatchOperationKind.INSERT_OR_REPLACE, entity)

    @classmethod
    def insert_or_merge(cls, entity: R) -> TableOperation[R]:
        """Insert ``entity``, or merge it into the stored one whatever its ETag."""
        return cls._for(BatchOperationKind.INSERT_OR_MERGE, entity)

    @overload
    @classmethod
    def retrieve(
        cls, partition_key: str, row_key: str, *, select: Sequence[str] | None = None
    ) -> TableOperation[DynamicEntity]: ...

    @overload
    @classmethod
    def retrieve(
        cls, partition_key: str, row_key: str, entity_type: type[R], *, select: Sequence[str] | None = None
    ) -> TableOperation[R]: ...

    @classmethod
    def retrieve(
        cls,
        partition_key: str,
        row_key: str,
        entity_type: type[Any] = DynamicEntity,
        *,
        select: Sequence[str] | None = None,
    ) -> TableOperation[Any]:
        """Read the entity with these keys as ``entity_type`` (a missing entity is a 404 result, not an error).

        ``entity_type`` is checked here, before anything is sent: a TypeError names a
        value that is not an entity class."""
        _check_key("PartitionKey", partition_key)
        _check_key("RowKey", row_key)
        _check_entity_type(entity_type)
        return TableOperation(BatchOperationKind.RETRIEVE, None, partition_key, row_key, entity_type, select)

    @classmethod
    def _for(cls, kind: BatchOperationKind, entity: R, *, echo_content: bool = False) -> TableOperation[R]:
        try:
            check_entity(entity)
        except TypeError as error:
            raise TypeError(f"TableOperation.{_FACTORY[kind]}: {error}") from None
        partition_key, row_key = entity_keys(entity)
        _check_key("PartitionKey", partition_key)
        _check_key("RowKey", row_key)
        assert isinstance(partition_key, str) and isinstance(row_key, str)
        return cls(kind, entity, partition_key, row_key, echo_content=echo_content)

    # ------------------------------------------------------------ execution support

    def to_batch_operation(self, table: str, encryption: EncryptionScope | None = None) -> BatchOperation:
        """This action on ``table`` as the client's operation, from the entity's values now, encrypted
        by ``encryption`` (the call's client-side encryption; the entity class's ``Encrypted[...]``
        fields are refused without one)."""
        if self.kind is BatchOperationKind.RETRIEVE:
            return BatchOperation(self.kind, table, self.partition_key, self.row_key, None, None)
        entity = self.entity
        assert entity is not None
        # The keys are read again: an entity whose keys changed since the operation was made
        # is addressed by its current keys, like every later write of it.
        payload = entity_to_payload(entity) if self.kind is not BatchOperationKind.DELETE else None
        if payload is not None:
            partition_key, row_key = payload.values["PartitionKey"], payload.values["RowKey"]
        else:
            partition_key, row_key = entity_keys(entity)
        etag = entity_etag(entity) if self.kind in _CONDITIONAL else None
        if self.kind in _CONDITIONAL and not etag:
            raise TableValidationError(
                "etag",
                f"TableOperation.{_FACTORY[self.kind]} is conditional on the entity's ETag",
                "execute an insert or retrieve first, or set entity.etag = '*' to write unconditionally",
            )
        operation = BatchOperation(self.kind, table, partition_key, row_key, payload, etag, self.echo_content)
        if payload is None:
            return operation
        marked = encrypted_names(type(entity))
        if encryption is None and not marked:
            return operation
        from .._clients._encryption_scope import NO_ENCRYPTION

        return (encryption or NO_ENCRYPTION).encrypt_operation(operation, marked)

    def result(self, answer: BatchOperationResult) -> TableResult[R]:
        """The :class:`TableResult` of this action for the service's ``answer``; updates the entity's ETag."""
        if self.kind is BatchOperationKind.RETRIEVE:
            return self.retrieved(answer.payload, answer.status)
        entity = self.entity
        assert entity is not None
        if answer.etag:
            set_entity_etag(entity, answer.etag)
        return TableResult(answer.status, answer.etag, entity)

    def retrieved(self, payload: EntityPayload | None, status: int = 200) -> TableResult[R]:
        """The :class:`TableResult` of a retrieve: the entity read from ``payload``, or a 404 without one."""
        if payload is None:
            return TableResult(404, None, None)
        entity_type: type[Any] = self.entity_type or DynamicEntity
        if "_ClientEncryptionMetadata1" in payload.values and encrypted_names(entity_type):
            from .._encryption import EncryptionKeyError  # still encrypted: the call had no policy

            raise EncryptionKeyError(
                f"the entity is encrypted and {entity_type.__name__} has Encrypted fields, but the call has no "
                "encryption_policy to decrypt it", partition_key=self.partition_key, row_key=self.row_key,
            )
        entity: R = entity_from_payload(entity_type, payload)
        return TableResult(status, payload.etag, entity)

    def __repr__(self) -> str:
        name = _FACTORY[self.kind]
        return f"TableOperation.{name}(PartitionKey={self.partition_key!r}, RowKey={self.row_key!r})"


_FACTORY = {
    BatchOperationKind.INSERT: "insert",
    BatchOperationKind.UPDATE: "replace",
    BatchOperationKind.MERGE: "merge",
    BatchOperationKind.DELETE: "delete",
    BatchOperationKind.INSERT_OR_REPLACE: "insert_or_replace",
    BatchOperationKind.INSERT_OR_MERGE: "insert_or_merge",
    BatchOperationKind.RETRIEVE: "retrieve",
}


def _check_key(name: str, value: object) -> None:
    if not isinstance(value, str):
        raise TableValidationError(name, "a key must be a str", f"got {type(value).__name__}")


_ENTITY_CLASSES = (
    "an entity class (a TableEntity or DynamicEntity subclass, a dataclass, pydantic model or attrs class "
    "with PartitionKey and RowKey fields, or dict)"
)


def _check_entity_type(entity_type: object) -> None:
    """TypeError unless entities can be read as ``entity_type``: refused when the retrieve is
    built, not after its request was answered."""
    from .._entities._entity_read import ResolvedType, entity_reader

    if not isinstance(entity_type, (type, ResolvedType)):
        raise TypeError(f"TableOperation.retrieve: entity_type must be {_ENTITY_CLASSES}, got {_given(entity_type)}")
    try:
        entity_reader(typing.cast("type[Any]", entity_type))  # refuses a class it cannot make
    except TypeError as error:
        raise TypeError(f"TableOperation.retrieve: {error}") from None


def _given(value: object) -> str:
    """``value`` as a message names it: its type, and a short repr."""
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{type(value).__name__} {shown}" if value is not None else "None"


def _is_sequence_of(value: object, kind: type) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(item, kind) for item in value)


def require_operation(operation: object, where: str) -> TableOperation[Any]:
    """``operation`` when it is a :class:`TableOperation`; otherwise a TypeError from ``where``
    (``"CloudTable.execute"``) saying what was given and what to pass instead."""
    if isinstance(operation, TableOperation):
        return operation
    if isinstance(operation, TableBatchOperation) or _is_sequence_of(operation, TableOperation):
        hint = "; operations run together as a batch: execute_batch(TableBatchOperation(operations))"
    elif isinstance(operation, BatchOperation):
        hint = "; the client's BatchOperation runs with client.execute_operation"
    elif operation is not None and not isinstance(operation, (str, bytes, list, tuple)):
        hint = "; wrap an entity in an action: TableOperation.insert(entity), TableOperation.merge(entity), ..."
    else:
        hint = ""
    raise TypeError(
        f"{where} takes a TableOperation (TableOperation.insert(entity), TableOperation.retrieve(pk, rk), ...), "
        f"got {_given(operation)}{hint}"
    )


def require_batch(batch: object, where: str) -> TableBatchOperation[Any]:
    """``batch`` when it is a :class:`TableBatchOperation`; otherwise a TypeError from ``where``
    (``"CloudTable.execute_batch"``) saying what was given and what to pass instead."""
    if isinstance(batch, TableBatchOperation):
        return batch
    if _is_sequence_of(batch, TableOperation):
        hint = "; wrap the operations: TableBatchOperation(operations)"
    elif _is_sequence_of(batch, BatchOperation):
        hint = "; the client's BatchOperations run with client.execute_batch(operations)"
    elif isinstance(batch, TableOperation):
        hint = f"; execute one action with {where.rpartition('_')[0]}(operation), or TableBatchOperation([operation])"
    else:
        hint = ""
    raise TypeError(f"{where} takes a TableBatchOperation, got {_given(batch)}{hint}")


class TableBatchOperation(Generic[R]):
    """The actions of one entity group transaction, checked as they are added.

    All operations address one partition, at most 100 of them, each entity
    (RowKey) at most once, and a retrieve only when it is the batch's only
    operation: adding one that breaks a rule raises
    :class:`~tablesdk.TableValidationError` naming the operation's index, and
    the batch is left as it was. Execute it with ``table.execute_batch(batch)``.
    """

    def __init__(self, operations: Iterable[TableOperation[R]] = ()) -> None:
        self._operations: list[TableOperation[R]] = []
        self._row_keys: set[str] = set()
        self.extend(operations)

    def add(self, operation: TableOperation[R]) -> None:
        """Append ``operation`` after checking the batch's rules."""
        index = len(self._operations)
        where = f"batch operation {index}"
        if not isinstance(operation, TableOperation):
            raise TypeError(f"{where}: a TableBatchOperation holds TableOperations, not {type(operation).__name__}")
        if index >= MAX_BATCH_OPERATIONS:
            raise TableValidationError(where, f"a batch holds at most {MAX_BATCH_OPERATIONS} operations")
        if self._operations:
            first = self._operations[0]
            if first.kind is BatchOperationKind.RETRIEVE or operation.kind is BatchOperationKind.RETRIEVE:
                raise TableValidationError(where, "a retrieve must be the only operation of its batch")
            if operation.partition_key != first.partition_key:
                raise TableValidationError(
                    where,
                    "every operation of a batch must address the same PartitionKey",
                    f"{operation.partition_key!r}, the batch's is {first.partition_key!r}",
                )
        if operation.row_key in self._row_keys:
            raise TableValidationError(
                where, "a batch may address each entity once", f"RowKey {operation.row_key!r} is already in it"
            )
        self._operations.append(operation)
        self._row_keys.add(operation.row_key)

    def extend(self, operations: Iterable[TableOperation[R]]) -> None:
        """Add ``operations`` in order, all or none: when one breaks a rule, the error names it
        and the batch is left as it was."""
        if isinstance(operations, TableOperation):
            raise TypeError(
                "a TableBatchOperation is extended with an iterable of TableOperations; add one with add(operation)"
            )
        trial: TableBatchOperation[R] = TableBatchOperation.__new__(TableBatchOperation)
        trial._operations, trial._row_keys = list(self._operations), set(self._row_keys)
        for operation in operations:
            trial.add(operation)
        self._operations, self._row_keys = trial._operations, trial._row_keys

    def insert(self, entity: R, *, echo_content: bool = False) -> None:
        """Add ``TableOperation.insert(entity)``."""
        self.add(TableOperation.insert(entity, echo_content=echo_content))

    def replace(self, entity: R) -> None:
        """Add ``TableOperation.replace(entity)``."""
        self.add(TableOperation.replace(entity))

    def merge(self, entity: R) -> None:
        """Add ``TableOperation.merge(entity)``."""
        self.add(TableOperation.merge(entity))

    def delete(self, entity: R) -> None:
        """Add ``TableOperation.delete(entity)``."""
        self.add(TableOperation.delete(entity))

    def insert_or_replace(self, entity: R) -> None:
        """Add ``TableOperation.insert_or_replace(entity)``."""
        self.add(TableOperation.insert_or_replace(entity))

    def insert_or_merge(self, entity: R) -> None:
        """Add ``TableOperation.insert_or_merge(entity)``."""
        self.add(TableOperation.insert_or_merge(entity))

    def retrieve(
        self, partition_key: str, row_key: str, entity_type: type[R] = DynamicEntity,  # type: ignore[assignment]
        *, select: Sequence[str] | None = None,
    ) -> None:
        """Add ``TableOperation.retrieve(...)`` (only into an empty batch)."""
        self.add(TableOperation.retrieve(partition_key, row_key, entity_type, select=select))

    def to_batch_operations(self, table: str, encryption: EncryptionScope | None = None) -> list[BatchOperation]:
        """The client's operations for executing this batch on ``table`` (an empty batch is refused),
        encrypted by ``encryption``."""
        if not self._operations:
            raise TableValidationError("batch", "a batch needs at least one operation")
        return [operation.to_batch_operation(table, encryption) for operation in self._operations]

    def results(self, answers: Sequence[BatchOperationResult]) -> list[TableResult[R]]:
        """One :class:`TableResult` per operation, in order, from the service's answers."""
        return [operation.result(answer) for operation, answer in zip(self._operations, answers, strict=True)]

    def __len__(self) -> int:
        return len(self._operations)

    def __iter__(self) -> Iterator[TableOperation[R]]:
        return iter(self._operations)

    def __getitem__(self, index: int) -> TableOperation[R]:
        return self._operations[index]

    def __repr__(self) -> str:
        return f"TableBatchOperation({self._operations!r})"
