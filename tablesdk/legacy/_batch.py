"""``TableBatch``: the operations of one entity group transaction, checked as they are added."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import DynamicEntity, TableBatchOperation, TableOperation
from ._convert import check_entity, to_sdk_entity
from ._encryption import DEFAULT_ENCRYPTION_PROTOCOL, check_write, chosen_properties, encrypt_entity
from ._errors import AzureBatchValidationError, legacy_errors

_MAX_OPERATIONS = 100


def _require(name: str, value: object) -> None:
    if value is None:
        raise ValueError(f"{name} should not be None.")


class TableBatch:
    """Up to 100 operations on one partition, sent together by :meth:`TableService.commit_batch`
    (or at the end of ``with service.batch(table) as batch:``); all succeed or none do.

    Each call checks its entity and converts it at once, as the old package did: a bad value,
    a second partition, a repeated RowKey or a 101st operation raises here, not at commit.
    With a ``key_encryption_key`` the entities of inserts and replaces are encrypted as
    :class:`TableService` encrypts them (in :attr:`encryption_protocol`, "1.0" by default); merges are
    refused.
    """

    def __init__(
        self, require_encryption: bool = False, key_encryption_key: Any = None,
        encryption_resolver: Callable[[str, str, str], bool] | None = None,
    ) -> None:
        self._operations: list[TableOperation[DynamicEntity]] = []
        self._partition_key: str | None = None
        self._row_keys: list[str] = []
        self._require_encryption = require_encryption
        self._key_encryption_key = key_encryption_key
        self._encryption_resolver = encryption_resolver
        #: The protocol of the entities this batch encrypts (a tablesdk addition; set before adding them).
        self.encryption_protocol = DEFAULT_ENCRYPTION_PROTOCOL

    def insert_entity(self, entity: dict[str, Any]) -> None:
        """Add an insert of ``entity``."""
        self._add(TableOperation.insert(self._converted(entity, merge=False)), entity)

    def update_entity(self, entity: dict[str, Any], if_match: str | None = "*") -> None:
        """Add a replace of ``entity``, conditional on ``if_match`` (``"*"``: whatever the stored version)."""
        _require("if_match", if_match)
        self._add(TableOperation.replace(self._converted(entity, merge=False, etag=if_match)), entity)

    def merge_entity(self, entity: dict[str, Any], if_match: str | None = "*") -> None:
        """Add a merge of ``entity``, conditional on ``if_match``."""
        _require("if_match", if_match)
        self._add(TableOperation.merge(self._converted(entity, merge=True, etag=if_match)), entity)

    def delete_entity(self, partition_key: str, row_key: str, if_match: str | None = "*") -> None:
        """Add a delete of the entity with these keys, conditional on ``if_match``."""
        _require("if_match", if_match)
        _require("partition_key", partition_key)
        _require("row_key", row_key)
        target = DynamicEntity(partition_key, row_key, etag=if_match)
        self._add_keys(partition_key, row_key, TableOperation.delete(target))

    def insert_or_replace_entity(self, entity: dict[str, Any]) -> None:
        """Add an insert-or-replace of ``entity``."""
        self._add(TableOperation.insert_or_replace(self._converted(entity, merge=False)), entity)

    def insert_or_merge_entity(self, entity: dict[str, Any]) -> None:
        """Add an insert-or-merge of ``entity``."""
        self._add(TableOperation.insert_or_merge(self._converted(entity, merge=True)), entity)

    def _converted(self, entity: Any, *, merge: bool, etag: str | None = None) -> DynamicEntity:
        key = self._key_encryption_key
        check_entity(entity, encrypted=key is not None and not merge)
        chosen = None
        if check_write(self._require_encryption, key, merge=merge):
            chosen = chosen_properties(entity, key, self._encryption_resolver)
        with legacy_errors():
            converted = to_sdk_entity(entity)
        if chosen is not None:
            converted = encrypt_entity(converted, chosen, key, self.encryption_protocol)
        converted.etag = etag
        return converted

    def _add(self, operation: TableOperation[DynamicEntity], entity: dict[str, Any]) -> None:
        self._add_keys(entity["PartitionKey"], entity["RowKey"], operation)

    def _add_keys(self, partition_key: str, row_key: str, operation: TableOperation[DynamicEntity]) -> None:
        if self._partition_key:
            if self._partition_key != partition_key:
                raise AzureBatchValidationError("Partition Key should be the same in a batch operations")
        else:
            self._partition_key = partition_key
        if row_key in self._row_keys:
            raise AzureBatchValidationError("Row Keys should not be the same in a batch operations")
        self._row_keys.append(row_key)
        if len(self._operations) >= _MAX_OPERATIONS:
            raise AzureBatchValidationError("Batches may only contain 100 operations")
        self._operations.append(operation)

    def to_batch_operation(self) -> TableBatchOperation[DynamicEntity]:
        """The batch as tablesdk's :class:`~tablesdk.TableBatchOperation` (what :meth:`commit_batch` sends)."""
        return TableBatchOperation(self._operations)

    def __len__(self) -> int:
        return len(self._operations)
