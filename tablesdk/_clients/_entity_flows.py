"""The entity flows: one operation sent on its own (or by another address when its keys cannot
be in the path), and the client's writes, reads and deletes of an entity."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._formats._batch import (
    BatchOperation,
    BatchOperationKind,
    BatchOperationResult,
    operation_request,
    prefer_value,
)
from .._entities._edm import EntityPayload
from .._entities._entity import (
    AnyEntity,
    EntityObject,
    entity_from_payload,
    entity_to_payload,
    encrypted_names,
    validate_key,
    validate_table_name,
)
from .._entities._entity_access import check_entity, entity_etag, entity_keys, set_entity_etag
from .._core._errors import BatchError
from .._formats import decoded
from .._pipeline._http import RequestHook
from .._pipeline._options import TableRequestOptions
from .._pipeline._retry import RetryPolicy
from .._pipeline._transport import OperationContext


from ._batch_flows import BatchFlows
from ._client_base import _scope_of
from ._flows import Call, Flow, path_can_carry_keys
from ._query_flows import QueryFlows, _one_entity


class EntityFlows(QueryFlows, BatchFlows):
    """The flows of single entity operations (see :mod:`tablesdk._clients._flows`)."""

    def _f_execute_operation(
        self,
        operation: BatchOperation,
        retry_policy: RetryPolicy | None,
        operation_context: OperationContext | None,
        request_hook: RequestHook | None,
    ) -> Flow[BatchOperationResult]:
        kind = operation.kind
        self._check_writes((operation,))
        if kind is not BatchOperationKind.INSERT and not path_can_carry_keys(
            operation.table, operation.partition_key, operation.row_key
        ):
            return (yield from self._f_by_other_address(operation, retry_policy, operation_context, request_hook))
        method, path, headers, body = self._operation_request(operation)
        call = Call(
            method, path, headers=headers, body=body,
            retry_policy=retry_policy, operation_context=operation_context, request_hook=request_hook,
        )
        response = yield call
        payload_out: EntityPayload | None = None
        if response.body and response.status in (200, 201):
            payload_out = decoded(response, lambda body: _one_entity(self._format, body, response.etag))
            echoed = _scope_of(self._settings_for(call))
            if echoed is not None:  # the entity as sent: its encrypted properties come back encrypted
                payload_out = echoed.decrypt(payload_out)
        etag = response.etag or (payload_out.etag if payload_out else None)
        return BatchOperationResult(0, response.status, etag, payload_out, dict(response.headers))

    def _f_by_other_address(
        self,
        operation: BatchOperation,
        retry_policy: RetryPolicy | None,
        operation_context: OperationContext | None,
        request_hook: RequestHook | None,
    ) -> Flow[BatchOperationResult]:
        """Operations on keys the URL path cannot carry: a ``$filter`` read, or a one-operation batch."""
        if operation.kind is BatchOperationKind.RETRIEVE:
            payload = yield from self._f_get_entity_payload(
                operation.table, operation.partition_key, operation.row_key, None,
                retry_policy, operation_context, request_hook,
            )
            return BatchOperationResult(0, 200, payload.etag, payload, {})
        try:
            results = yield from self._f_execute_batch([operation], retry_policy, operation_context, request_hook)
        except BatchError as exc:
            # One operation: fail exactly as the direct request would (404, 409, 412 ...).
            raise (exc.cause or exc) from exc
        return results[0]

    def _operation_request(self, operation: BatchOperation) -> tuple[str, str, dict[str, str], bytes | None]:
        """Method, path, headers and body of one entity operation sent on its own (the same
        request :func:`~tablesdk._formats._batch.build_batch_request` writes as a batch part)."""
        echo = operation.echo_content or self.echo_content
        request = operation_request(operation, self._format, prefer=prefer_value(self.api_version, echo))
        return request.method, request.path, request.headers, request.body

    def _f_get_entity(
        self,
        table_name: str,
        partition_key: str,
        row_key: str,
        entity_type: type[Any],
        select: Sequence[str] | None,
        operation_context: OperationContext | None,
        options: TableRequestOptions | None = None,
    ) -> Flow[AnyEntity]:
        payload = yield from self._f_get_entity_payload(
            table_name, partition_key, row_key, select, None, operation_context, None,
            options=options, entity_type=entity_type,
        )
        entity: AnyEntity = entity_from_payload(entity_type, payload)
        return entity

    def _f_write(
        self,
        kind: BatchOperationKind,
        table_name: str,
        entity: EntityObject,
        etag: str | None,
        operation_context: OperationContext | None,
        options: TableRequestOptions | None = None,
    ) -> Flow[str | None]:
        validate_table_name(table_name, cosmos=self.is_cosmos)
        payload = entity_to_payload(entity)
        encryption, marked = self._encryption(options), encrypted_names(type(entity))
        if encryption is not None or marked:
            from ._encryption_scope import NO_ENCRYPTION

            payload = (encryption or NO_ENCRYPTION).encrypt(payload, marked, kind)
        operation = BatchOperation(
            kind, table_name, payload.values["PartitionKey"], payload.values["RowKey"], payload, etag
        )
        result = yield from self._f_execute_operation(operation, None, operation_context, None)
        if result.etag:
            set_entity_etag(entity, result.etag)
        return result.etag

    def _f_update_entity(
        self,
        table_name: str,
        entity: EntityObject,
        mode: str,
        etag: str | None,
        operation_context: OperationContext | None,
        options: TableRequestOptions | None = None,
    ) -> Flow[str | None]:
        kind = {"merge": BatchOperationKind.MERGE, "replace": BatchOperationKind.UPDATE}.get(mode)
        if kind is None:
            raise ValueError(f"mode must be 'merge' or 'replace', not {mode!r}")
        return (yield from self._f_write(
            kind, table_name, entity, etag or entity_etag(entity), operation_context, options
        ))

    def _f_upsert_entity(
        self, table_name: str, entity: EntityObject, mode: str, operation_context: OperationContext | None,
        options: TableRequestOptions | None = None,
    ) -> Flow[str | None]:
        kind = {"merge": BatchOperationKind.INSERT_OR_MERGE, "replace": BatchOperationKind.INSERT_OR_REPLACE}.get(mode)
        if kind is None:
            raise ValueError(f"mode must be 'merge' or 'replace', not {mode!r}")
        return (yield from self._f_write(kind, table_name, entity, None, operation_context, options))

    def _f_delete_entity(
        self,
        table_name: str,
        entity: EntityObject | None,
        partition_key: str | None,
        row_key: str | None,
        etag: str | None,
        operation_context: OperationContext | None,
    ) -> Flow[None]:
        pk, rk, condition = _delete_target(entity, partition_key, row_key, etag)
        operation = BatchOperation(BatchOperationKind.DELETE, table_name, pk, rk, None, condition)
        yield from self._f_execute_operation(operation, None, operation_context, None)


def _delete_target(
    entity: EntityObject | None, partition_key: str | None, row_key: str | None, etag: str | None
) -> tuple[str, str, str]:
    """(PartitionKey, RowKey, If-Match) of a delete_entity call, or why the call is wrong."""
    if entity is not None:
        try:
            check_entity(entity)
        except TypeError:
            raise TypeError(
                f"delete_entity(table, entity) takes an entity, not {type(entity).__name__}; to delete by "
                "keys write delete_entity(table, partition_key=..., row_key=..., etag='*')"
            ) from None
        if partition_key is not None or row_key is not None:
            raise TypeError("delete_entity takes an entity or partition_key=/row_key=, not both")
        (pk, rk), condition = entity_keys(entity), etag or entity_etag(entity)
        if not condition:
            raise ValueError(
                f"the entity (PartitionKey={pk!r}, RowKey={rk!r}) has no ETag, so the delete cannot be "
                "conditional on its version: read it first, or pass etag='*' to delete it whatever its version"
            )
    else:
        if partition_key is None or row_key is None:
            raise TypeError("delete_entity needs an entity, or both partition_key= and row_key=")
        if not etag:
            raise ValueError("deleting by keys needs etag=: the entity's ETag, or '*' to delete it whatever its version")
        pk, rk, condition = partition_key, row_key, etag
    validate_key("PartitionKey", pk)
    validate_key("RowKey", rk)
    return pk, rk, condition
