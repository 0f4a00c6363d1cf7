"""CloudTable: one table of a client, as .NET's CloudTable and the Java client's table reference.

``client.get_table_reference("Orders")`` is cheap (no request). The table object has
the table's own operations (create, delete, exists, ACLs), every entity operation of
the client without the table argument (a test compares the two so they cannot drift
apart), the seeds' actions (``execute`` / ``execute_batch`` of
:class:`~tablesdk.TableOperation` / :class:`~tablesdk.TableBatchOperation`) and a
context whose table arguments are filled in.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, overload

from ._actions import R, TableBatchOperation, TableOperation, TableResult, require_batch, require_operation
from .._formats._batch import BatchOperationKind
from .._entities._entity import AnyEntity, DynamicEntity, E, EntityObject
from .._core._errors import ResourceNotFoundError, TableErrorCode
from .._clients._client import CloudTableClient
from .._pipeline._options import TableRequestOptions
from .._queries._query import TableQuery
from .._pipeline._retry import RetryPolicy
from .._pipeline._transport import OperationContext

from .._core._tracing import trace_public_methods
if TYPE_CHECKING:
    from .._clients._service import AccessPolicy
    from ._context import TableServiceContext
    from ._save_outcome import DataServiceResponse
    from ._save_plan import SaveChangesOptions

__all__ = ["CloudTable", "TableContext", "is_missing_entity", "on_this_table", "on_this_table_async"]

P = ParamSpec("P")
T = TypeVar("T")
Table = TypeVar("Table")


#: The docstrings of the table objects' faces made from the client's methods (both flavours).
FACE_DOCS = {
    "query_entity_payloads": "One page of Query Entities as payloads, with the token of the next page.",
    "get_entity_payload": "One entity by its keys, as a payload; raises :class:`~tablesdk.ResourceNotFoundError` if absent.",
    "bulk_insert": "Write many entities (or the rows of a DataFrame or Arrow table) as concurrent entity\n"
    "        group transactions (see the client's ``bulk_insert``).",
    "delete_entities": "Delete every entity of this table matching ``filter`` (see the client's ``delete_entities``).",
    "count_entities": "How many entities of this table match ``filter``, reading only their keys.",
    "write_arrow": "Write each row of a ``pyarrow.Table`` as an entity (see the client's ``write_arrow``).",
    "write_pandas": "Write each row of a pandas DataFrame as an entity (see the client's ``write_pandas``).",
}


def _face_of(operation: Callable[..., Any], face: Callable[..., Any], owner: str, doc: str | None) -> None:
    """Give ``face`` the name of ``operation`` and its signature without the table's name
    (``self`` kept), for ``help()``, ``inspect`` and the tests that compare the two."""
    signature = inspect.signature(operation)
    parameters = list(signature.parameters.values())
    face.__signature__ = signature.replace(parameters=[parameters[0], *parameters[2:]])  # type: ignore[attr-defined]
    face.__name__ = operation.__name__
    face.__qualname__ = f"{owner}.{operation.__name__}"
    face.__doc__ = FACE_DOCS[operation.__name__] if doc is None else doc


def on_this_table(
    operation: Callable[Concatenate[Any, str, P], T], owner: str, doc: str | None = None
) -> Callable[Concatenate[Table, P], T]:
    """The table object's face of the client's ``operation`` (which takes the table's name
    first): the same parameters but that one, passed on to the table's client, so the
    client's signature is written once. ``doc`` is the face's own docstring (by default
    its entry in :data:`FACE_DOCS`)."""
    name = operation.__name__

    def face(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
        result: T = getattr(self.client, name)(self.name, *args, **kwargs)
        return result

    _face_of(operation, face, owner, doc)
    return face


def on_this_table_async(
    operation: Callable[Concatenate[Any, str, P], Awaitable[T]], owner: str, doc: str | None = None
) -> Callable[Concatenate[Table, P], Awaitable[T]]:
    """:func:`on_this_table` for a client whose operations are awaited."""
    name = operation.__name__

    async def face(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
        result: T = await getattr(self.client, name)(self.name, *args, **kwargs)
        return result

    _face_of(operation, face, owner, doc)
    return face


def is_missing_entity(error: ResourceNotFoundError) -> bool:
    """True when a 404 says the entity is missing (a retrieve's 404 result), not the table."""
    return error.error_code != TableErrorCode.TABLE_NOT_FOUND


class CloudTable:
    """One table of a :class:`~tablesdk.CloudTableClient`; get it with ``client.get_table_reference(name)``."""

    def __init__(self, client: CloudTableClient, name: str) -> None:
        from .._entities._entity import validate_table_name

        validate_table_name(name, cosmos=client.is_cosmos)
        self.client = client
        self.name = name

    def __repr__(self) -> str:
        return f"CloudTable({self.name!r})"

    # ------------------------------------------------------------ the table itself

    def create(
        self, *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> None:
        """Create the table; raises :class:`~tablesdk.ConflictError` if it exists."""
        self.client.create_table(self.name, operation_context=operation_context, options=options)

    def create_if_not_exists(
        self, *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> bool:
        """Create the table unless it exists; True when this call created it."""
        return self.client.create_table_if_not_exists(self.name, operation_context=operation_context, options=options)

    def delete(
        self, *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> None:
        """Delete the table; raises :class:`~tablesdk.ResourceNotFoundError` if it does not exist."""
        self.client.delete_table(self.name, operation_context=operation_context, options=options)

    def delete_if_exists(
        self, *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> bool:
        """Delete the table if it exists; True when this call deleted it."""
        return self.client.delete_table_if_exists(self.name, operation_context=operation_context, options=options)

    def exists(
        self, *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> bool:
        """Whether the table exists."""
        return self.client.table_exists(self.name, operation_context=operation_context, options=options)

    def get_acl(
        self, *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> dict[str, AccessPolicy]:
        """The table's stored access policies, by policy id."""
        return self.client.get_table_acl(self.name, operation_context=operation_context, options=options)

    def set_acl(
        self, policies: dict[str, AccessPolicy],
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> None:
        """Replace the table's stored access policies; ``{}`` removes them all."""
        self.client.set_table_acl(self.name, policies, operation_context=operation_context, options=options)

    # ------------------------------------------------------------ actions

    def execute(
        self, operation: TableOperation[R],
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> TableResult[R]:
        """Execute one action; a retrieve of a missing entity gives a 404 result rather than an error.

        Anything but a :class:`~tablesdk.TableOperation` is refused with a TypeError, before sending."""
        operation = require_operation(operation, "CloudTable.execute")
        if operation.kind is BatchOperationKind.RETRIEVE:
            try:
                payload = self.client.get_entity_payload(
                    self.name, operation.partition_key, operation.row_key,
                    select=operation.select, operation_context=operation_context, options=options,
                )
            except ResourceNotFoundError as error:
                if not is_missing_entity(error):
                    raise
                return operation.retrieved(None)
            return operation.retrieved(payload)
        answer = self.client.execute_operation(
            operation.to_batch_operation(self.name, self.client._encryption(options)),
            operation_context=operation_context, options=options,
        )
        return operation.result(answer)

    def execute_batch(
        self,
        batch: TableBatchOperation[R],
        *,
        retry_policy: RetryPolicy | None = None,
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
    ) -> list[TableResult[R]]:
        """Execute ``batch`` as one entity group transaction; one result per operation, in order.

        A refused transaction raises :class:`~tablesdk.BatchError` with the failing
        operation's ``failed_index``; nothing was written. Anything but a
        :class:`~tablesdk.TableBatchOperation` is refused with a TypeError, before sending.
        """
        batch = require_batch(batch, "CloudTable.execute_batch")
        answers = self.client.execute_batch(
            batch.to_batch_operations(self.name, self.client._encryption(options)), retry_policy=retry_policy,
            operation_context=operation_context, options=options
        )
        return batch.results(answers)

    # ------------------------------------------------------------ entity operations (as the client's)

    @overload
    def create_query(self, *, options: TableRequestOptions | None = None) -> TableQuery[DynamicEntity]: ...

    @overload
    def create_query(self, entity_type: type[E], *, options: TableRequestOptions | None = None) -> TableQuery[E]: ...

    def create_query(
        self, entity_type: type[Any] = DynamicEntity, *, options: TableRequestOptions | None = None
    ) -> TableQuery[Any]:
        """A query over this table materialising ``entity_type`` (no tracking), sent with ``options``."""
        return self.client.create_query(self.name, entity_type, options=options)

    def get_table_service_context(self, **options: Any) -> TableContext:
        """A new context bound to this table (its methods take no table argument)."""
        return TableContext(self.client.get_table_service_context(**options), self.name)

    query_entity_payloads = on_this_table(CloudTableClient.query_entity_payloads, "CloudTable")
    get_entity_payload = on_this_table(CloudTableClient.get_entity_payload, "CloudTable")
    bulk_insert = on_this_table(CloudTableClient.bulk_insert, "CloudTable")
    delete_entities = on_this_table(CloudTableClient.delete_entities, "CloudTable")
    count_entities = on_this_table(CloudTableClient.count_entities, "CloudTable")
    write_arrow = on_this_table(CloudTableClient.write_arrow, "CloudTable")
    write_pandas = on_this_table(CloudTableClient.write_pandas, "CloudTable")

    @overload
    def get_entity(
        self, partition_key: str, row_key: str,
        *, select: Sequence[str] | None = None,
        operation_context: OperationContext | None = None, options: TableRequestOptions | None = None,
    ) -> DynamicEntity: ...

    @overload
    def get_entity(
        self, partition_key: str, row_key: str, entity_type: type[E],
        *, select: Sequence[str] | None = None,
        operation_context: OperationContext | None = None, options: TableRequestOptions | None = None,
    ) -> E: ...

    def get_entity(
        self, partition_key: str, row_key: str, entity_type: type[Any] = DynamicEntity,
        *, select: Sequence[str] | None = None,
        operation_context: OperationContext | None = None, options: TableRequestOptions | None = None,
    ) -> Any:
        """One entity by its keys, materialised as ``entity_type`` (untracked)."""
        entity: AnyEntity = self.client.get_entity(
            self.name, partition_key, row_key, entity_type, select=select,
            operation_context=operation_context, options=options
        )
        return entity

    def insert_entity(
        self, entity: EntityObject,
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> str | None:
        """Insert one entity; returns its new ETag (also set on ``entity.etag``)."""
        return self.client.insert_entity(self.name, entity, operation_context=operation_context, options=options)

    def update_entity(
        self,
        entity: EntityObject,
        *,
        mode: str = "merge",
        etag: str | None = None,
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
    ) -> str | None:
        """Merge (default) or replace an existing entity, conditional on ``etag`` (default ``entity.etag``)."""
        return self.client.update_entity(self.name, entity, mode=mode, etag=etag,
        operation_context=operation_context, options=options)

    def upsert_entity(
        self,
        entity: EntityObject,
        *,
        mode: str = "merge",
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
    ) -> str | None:
        """Insert or merge (default) / insert or replace an entity."""
        return self.client.upsert_entity(self.name, entity, mode=mode,
        operation_context=operation_context, options=options)

    def delete_entity(
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
        self.client.delete_entity(
            self.name, entity, partition_key=partition_key, row_key=row_key, etag=etag,
            operation_context=operation_context, options=options,
        )


class TableContext:
    """A :class:`~tablesdk.TableServiceContext` bound to one table: the table arguments are filled in.

    ``context`` is the underlying context (its tracking, events and options);
    every call here goes to it.
    """

    def __init__(self, context: TableServiceContext, table: str) -> None:
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
    def create_query(self) -> TableQuery[DynamicEntity]: ...

    @overload
    def create_query(self, entity_type: type[E]) -> TableQuery[E]: ...

    def create_query(self, entity_type: type[Any] = DynamicEntity) -> TableQuery[Any]:
        """A tracked query over the table."""
        return self.context.create_query(self.table, entity_type)

    @overload
    def get(
        self, partition_key: str, row_key: str, *, request_options: TableRequestOptions | None = None
    ) -> DynamicEntity: ...

    @overload
    def get(
        self, partition_key: str, row_key: str, entity_type: type[E],
        *, request_options: TableRequestOptions | None = None,
    ) -> E: ...

    def get(
        self, partition_key: str, row_key: str, entity_type: type[Any] = DynamicEntity,
        *, request_options: TableRequestOptions | None = None,
    ) -> Any:
        """Point lookup of one entity, tracked per the context's ``merge_option``; raises
        :class:`~tablesdk.ResourceNotFoundError` when it does not exist (see :meth:`get_or_none`)."""
        found = self.context._get(self.table, partition_key, row_key, entity_type, request_options, False)
        if found is None:
            from ._tracking_context import warn_get_gave_none

            warn_get_gave_none("TableContext")
        return found

    @overload
    def get_or_none(
        self, partition_key: str, row_key: str, *, request_options: TableRequestOptions | None = None
    ) -> DynamicEntity | None: ...

    @overload
    def get_or_none(
        self, partition_key: str, row_key: str, entity_type: type[E],
        *, request_options: TableRequestOptions | None = None,
    ) -> E | None: ...

    def get_or_none(
        self, partition_key: str, row_key: str, entity_type: type[Any] = DynamicEntity,
        *, request_options: TableRequestOptions | None = None,
    ) -> Any:
        """Point lookup of one entity, tracked per the context's ``merge_option``; None when it does not exist."""
        return self.context._get(self.table, partition_key, row_key, entity_type, request_options, True)

    def save_changes(
        self, options: SaveChangesOptions | None = None, *, request_options: TableRequestOptions | None = None
    ) -> DataServiceResponse:
        """Save the pending changes (see :meth:`tablesdk.TableServiceContext.save_changes`)."""
        if options is None:
            return self.context.save_changes(request_options=request_options)
        return self.context.save_changes(options, request_options=request_options)

    def __repr__(self) -> str:
        return f"TableContext({self.table!r})"


# One span per operation when the application configured OpenTelemetry.
trace_public_methods(CloudTable, skip=frozenset({"create_query", "get_table_service_context"}))
