"""AsyncCloudTable: :class:`tablesdk.CloudTable`, awaitable (``client.get_table_reference(name)``).

The actions and their results are the sync module's (:mod:`tablesdk._unit_of_work._actions`); only
the sending is awaited.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, overload

from .._unit_of_work._actions import R, TableBatchOperation, TableOperation, TableResult, require_batch, require_operation
from .._formats._batch import BatchOperationKind
from .._entities._entity import AnyEntity, DynamicEntity, E, EntityObject, validate_table_name
from .._core._errors import ResourceNotFoundError
from .._pipeline._options import TableRequestOptions
from .._pipeline._retry import RetryPolicy
from .._unit_of_work._table import FACE_DOCS, is_missing_entity, on_this_table_async
from .._pipeline._transport import OperationContext
from ._client import AsyncCloudTableClient
from ._query import AsyncTableQuery

from .._core._tracing import trace_public_methods
if TYPE_CHECKING:
    from .._clients._service import AccessPolicy
    from .._unit_of_work._save_outcome import DataServiceResponse
    from .._unit_of_work._save_plan import SaveChangesOptions
    from ._context import AsyncTableServiceContext

__all__ = ["AsyncCloudTable", "AsyncTableContext"]

_MAX_WORKERS_NOTE = " (``max_workers``: the deprecated spelling of ``max_concurrency``)."


class AsyncCloudTable:
    """One table of an :class:`~tablesdk.aio.AsyncCloudTableClient`: every method of
    :class:`tablesdk.CloudTable`, awaitable."""

    def __init__(self, client: AsyncCloudTableClient, name: str) -> None:
        validate_table_name(name, cosmos=client.is_cosmos)
        self.client = client
        self.name = name

    def __repr__(self) -> str:
        return f"AsyncCloudTable({self.name!r})"

    # ------------------------------------------------------------ the table itself

    async def create(
        self, *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> None:
        """Create the table; raises :class:`~tablesdk.ConflictError` if it exists."""
        await self.client.create_table(self.name, operation_context=operation_context, options=options)

    async def create_if_not_exists(
        self, *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> bool:
        """Create the table unless it exists; True when this call created it."""
        return await self.client.create_table_if_not_exists(self.name,
        operation_context=operation_context, options=options)

    async def delete(
        self, *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> None:
        """Delete the table; raises :class:`~tablesdk.ResourceNotFoundError` if it does not exist."""
        await self.client.delete_table(self.name, operation_context=operation_context, options=options)

    async def delete_if_exists(
        self, *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> bool:
        """Delete the table if it exists; True when this call deleted it."""
        return await self.client.delete_table_if_exists(self.name, operation_context=operation_context, options=options)

    async def exists(
        self, *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> bool:
        """Whether the table exists."""
        return await self.client.table_exists(self.name, operation_context=operation_context, options=options)

    async def get_acl(
        self, *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> dict[str, AccessPolicy]:
        """The table's stored access policies, by policy id."""
        return await self.client.get_table_acl(self.name, operation_context=operation_context, options=options)

    async def set_acl(
        self, policies: dict[str, AccessPolicy],
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> None:
        """Replace the table's stored access policies; ``{}`` removes them all."""
        await self.client.set_table_acl(self.name, policies, operation_context=operation_context, options=options)

    # ------------------------------------------------------------ actions

    async def execute(
        self, operation: TableOperation[R],
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> TableResult[R]:
        """Execute one action; a retrieve of a missing entity gives a 404 result rather than an error.

        Anything but a :class:`~tablesdk.TableOperation` is refused with a TypeError, before sending."""
        operation = require_operation(operation, "AsyncCloudTable.execute")
        if operation.kind is BatchOperationKind.RETRIEVE:
            try:
                payload = await self.client.get_entity_payload(
                    self.name, operation.partition_key, operation.row_key,
                    select=operation.select, operation_context=operation_context, options=options,
                )
            except ResourceNotFoundError as error:
                if not is_missing_entity(error):
                    raise
                return operation.retrieved(None)
            return operation.retrieved(payload)
        answer = await self.client.execute_operation(
            operation.to_batch_operation(self.name, self.client._encryption(options)),
            operation_context=operation_context, options=options,
        )
        return operation.result(answer)

    async def execute_batch(
        self,
        batch: TableBatchOperation[R],
        *,
        retry_policy: RetryPolicy | None = None,
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
    ) -> list[TableResult[R]]:
        """Execute ``batch`` as one entity group transaction; one result per operation, in order.

        Anything but a :class:`~tablesdk.TableBatchOperation` is refused with a TypeError, before sending."""
        batch = require_batch(batch, "AsyncCloudTable.execute_batch")
        answers = await self.client.execute_batch(
            batch.to_batch_operations(self.name, self.client._encryption(options)), retry_policy=retry_policy,
            operation_context=operation_context, options=options
        )
        return batch.results(answers)

    # ------------------------------------------------------------ entity operations (as the client's)

    @overload
    def create_query(self, *, options: TableRequestOptions | None = None) -> AsyncTableQuery[DynamicEntity]: ...

    @overload
    def create_query(
        self, entity_type: type[E], *, options: TableRequestOptions | None = None
    ) -> AsyncTableQuery[E]: ...

    def create_query(
        self, entity_type: type[Any] = DynamicEntity, *, options: TableRequestOptions | None = None
    ) -> AsyncTableQuery[Any]:
        """An async query over this table materialising ``entity_type`` (no tracking), sent with ``options``."""
        return self.client.create_query(self.name, entity_type, options=options)

    def get_table_service_context(self, **options: Any) -> AsyncTableContext:
        """A new async context bound to this table (its methods take no table argument)."""
        return AsyncTableContext(self.client.get_table_service_context(**options), self.name)

    query_entity_payloads = on_this_table_async(AsyncCloudTableClient.query_entity_payloads, "AsyncCloudTable")
    get_entity_payload = on_this_table_async(AsyncCloudTableClient.get_entity_payload, "AsyncCloudTable")
    bulk_insert = on_this_table_async(AsyncCloudTableClient.bulk_insert, "AsyncCloudTable")
    delete_entities = on_this_table_async(AsyncCloudTableClient.delete_entities, "AsyncCloudTable")
    count_entities = on_this_table_async(AsyncCloudTableClient.count_entities, "AsyncCloudTable")
    write_arrow = on_this_table_async(
        AsyncCloudTableClient.write_arrow, "AsyncCloudTable", FACE_DOCS["write_arrow"][:-1] + _MAX_WORKERS_NOTE
    )
    write_pandas = on_this_table_async(
        AsyncCloudTableClient.write_pandas, "AsyncCloudTable", FACE_DOCS["write_pandas"][:-1] + _MAX_WORKERS_NOTE
    )

    @overload
    async def get_entity(
        self, partition_key: str, row_key: str,
        *, select: Sequence[str] | None = None,
        operation_context: OperationContext | None = None, options: TableRequestOptions | None = None,
    ) -> DynamicEntity: ...

    @overload
    async def get_entity(
        self, partition_key: str, row_key: str, entity_type: type[E],
        *, select: Sequence[str] | None = None,
        operation_context: OperationContext | None = None, options: TableRequestOptions | None = None,
    ) -> E: ...

    async def get_entity(
        self, partition_key: str, row_key: str, entity_type: type[Any] = DynamicEntity,
        *, select: Sequence[str] | None = None,
        operation_context: OperationContext | None = None, options: TableRequestOptions | None = None,
    ) -> Any:
        """One entity by its keys, materialised as ``entity_type`` (untracked)."""
        entity: AnyEntity = await self.client.get_entity(
            self.name, partition_key, row_key, entity_type, select=select,
            operation_context=operation_context, options=options
        )
        return entity

    async def insert_entity(
        self, entity: EntityObject,
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> str | None:
        """Insert one entity; returns its new ETag (also set on ``entity.etag``)."""
        return await self.client.insert_entity(self.name, entity, operation_context=operation_context, options=options)

    async def update_entity(
        self,
        entity: EntityObject,
        *,
        mode: str = "merge",
        etag: str | None = None,
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
    ) -> str | None:
        """Merge (default) or replace an existing entity, conditional on ``etag`` (default ``entity.etag``)."""
        return await self.client.update_entity(
            self.name, entity, mode=mode, etag=etag, operation_context=operation_context, options=options
        )

    async def upsert_entity(
        self,
        entity: EntityObject,
        *,
        mode: str = "merge",
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
    ) -> str | None:
        """Insert or merge (default) / insert or replace an entity."""
        return await self.client.upsert_entity(self.name, entity, mode=mode,
        operation_context=operation_context, options=options)

    async def delete_entity(
        self,
        entity: EntityObject | None = None,
        *,
        partition_key: str | None = None,
        row_key: str | None = None,
        etag: str | None = None,
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
    ) -> None:
        """Delete an entity, conditional on its ETag (``etag="*"``: whatever the stored version)."""
        await self.client.delete_entity(
            self.name, entity, partition_key=partition_key, row_key=row_key, etag=etag,
            operation_context=operation_context, options=options,
        )


class AsyncTableContext:
    """An :class:`~tablesdk.aio.AsyncTableServiceContext` bound to one table (``context`` is the context)."""

    def __init__(self, context: AsyncTableServiceContext, table: str) -> None:
        self.context = context
        self.table = table

    def add_object(self, entity: AnyEntity) -> None:
        """Track ``entity`` for insertion at the next save."""
        self.context.add_object(self.table, entity)

    def attach_to(self, entity: AnyEntity, etag: str | None = None) -> None:
        """Track an entity read elsewhere, as unchanged, with ``etag`` (default ``entity.etag``)."""
        self.context.attach_to(self.table, entity, etag)

    def upsert_object(self, entity: AnyEntity, replace: bool = False) -> None:
        """Track ``entity`` for an insert-or-merge (``replace``: insert-or-replace) at the next save."""
        self.context.upsert_object(self.table, entity, replace)

    def update_object(self, entity: AnyEntity) -> None:
        """Mark a tracked entity changed."""
        self.context.update_object(entity)

    def delete_object(self, entity: AnyEntity) -> None:
        """Mark a tracked entity for deletion."""
        self.context.delete_object(entity)

    def detach(self, entity: AnyEntity) -> bool:
        """Stop tracking ``entity``; True when it was tracked."""
        return self.context.detach(entity)

    @overload
    def create_query(self) -> AsyncTableQuery[DynamicEntity]: ...

    @overload
    def create_query(self, entity_type: type[E]) -> AsyncTableQuery[E]: ...

    def create_query(self, entity_type: type[Any] = DynamicEntity) -> AsyncTableQuery[Any]:
        """A tracked async query over the table."""
        return self.context.create_query(self.table, entity_type)

    @overload
    async def get(
        self, partition_key: str, row_key: str, *, request_options: TableRequestOptions | None = None
    ) -> DynamicEntity: ...

    @overload
    async def get(
        self, partition_key: str, row_key: str, entity_type: type[E],
        *, request_options: TableRequestOptions | None = None,
    ) -> E: ...

    async def get(
        self, partition_key: str, row_key: str, entity_type: type[Any] = DynamicEntity,
        *, request_options: TableRequestOptions | None = None,
    ) -> Any:
        """Point lookup of one entity, tracked per the context's ``merge_option``; raises
        :class:`~tablesdk.ResourceNotFoundError` when it does not exist (see :meth:`get_or_none`)."""
        found = await self.context._get(self.table, partition_key, row_key, entity_type, request_options, False)
        if found is None:
            from .._unit_of_work._tracking_context import warn_get_gave_none

            warn_get_gave_none("AsyncTableContext")
        return found

    @overload
    async def get_or_none(
        self, partition_key: str, row_key: str, *, request_options: TableRequestOptions | None = None
    ) -> DynamicEntity | None: ...

    @overload
    async def get_or_none(
        self, partition_key: str, row_key: str, entity_type: type[E],
        *, request_options: TableRequestOptions | None = None,
    ) -> E | None: ...

    async def get_or_none(
        self, partition_key: str, row_key: str, entity_type: type[Any] = DynamicEntity,
        *, request_options: TableRequestOptions | None = None,
    ) -> Any:
        """Point lookup of one entity, tracked per the context's ``merge_option``; None when it does not exist."""
        return await self.context._get(self.table, partition_key, row_key, entity_type, request_options, True)

    async def save_changes(
        self, options: SaveChangesOptions | None = None, *, request_options: TableRequestOptions | None = None
    ) -> DataServiceResponse:
        """Save the pending changes (see :meth:`tablesdk.aio.AsyncTableServiceContext.save_changes`)."""
        if options is None:
            return await self.context.save_changes(request_options=request_options)
        return await self.context.save_changes(options, request_options=request_options)

    def __repr__(self) -> str:
        return f"AsyncTableContext({self.table!r})"


# One span per operation when the application configured OpenTelemetry.
trace_public_methods(AsyncCloudTable, skip=frozenset({"create_query", "get_table_service_context"}))
