"""``AsyncCloudTableClient``: every operation of :class:`tablesdk.CloudTableClient`, awaitable.

The operations are the sync client's own code (the flows of
:mod:`tablesdk._clients._operations`: request building, answers, fallbacks for keys
the URL path cannot carry, "if not exists" rules), and so are the payload
codecs, the ``$batch`` writer and reader, the filter language, the entity
classes and the retry policies; this class runs the flows over the asyncio
transport. Each method has the sync method's name, arguments, result and
errors; ``list_tables`` is an async iterator.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, overload

from .._clients._flows import Call, Flow, arun_flow, error_from_response
from .._clients._operations import ClientCore
from .._formats._batch import BatchOperation, BatchOperationKind, BatchOperationResult
from .._bulk_loading._bulk import BulkMode, BulkResult, ProgressCallback
from .._entities._edm import EdmType, EntityPayload
from .._entities._entity import DynamicEntity, E, EntityObject
from .._entities._filter import FilterLike
from .._pipeline._http import DEFAULT_MAX_RESPONSE_BYTES, HttpResponse, RequestHook
from .._pipeline._options import TableRequestOptions, check_options
from .._queries._page_stream import segment_results, stream_pages_async
from .._queries._pager import PageRequest, Pager
from .._queries._query import ContinuationToken, FetchedPage, ResultSegment, TableQuery
from .._core._cosmos import client_credential
from .._pipeline._retry import CosmosRetry, RetryPolicy
from .._pipeline._settings import DEFAULT_TIMEOUT, client_settings
from .._pipeline._transport import OperationContext, Timeout
from ._transport import AsyncTransport
from ._query import AsyncTableQuery

from .._core._tracing import trace_public_methods
if TYPE_CHECKING:
    from .._encryption import TableEncryptionPolicy
    from .._core._account import CloudStorageAccount
    from .._clients._service import AccessPolicy, ServiceProperties, ServiceStats
    from ._sender import AsyncSender
    from ._context import AsyncTableServiceContext
    from ._table import AsyncCloudTable

__all__ = ["AsyncCloudTableClient"]

T = TypeVar("T")


class AsyncCloudTableClient(ClientCore):
    """An asyncio client for one storage account's Table service.

    Takes the options of :class:`tablesdk.CloudTableClient` (``payload_format``,
    ``api_version``, ``retry_policy``, ``timeout``, ``server_timeout``,
    ``operation_deadline``, ``json_metadata``, ``echo_content``, ``trust_env``,
    ``max_response_bytes``, ``location_mode``, ``user_agent``, ``proxies``, ``token_audience``,
    ``encryption_policy``).
    ``pool_size`` (default 100)
    bounds the open connections, and requests beyond it wait for a free one;
    ``sender`` replaces the HTTP layer (an :class:`~tablesdk.aio.AiohttpSender`
    by default). Use it as ``async with`` (or ``await client.close()``); it
    belongs to the event loop it first sends on.
    """

    def __init__(
        self,
        account: CloudStorageAccount,
        *,
        payload_format: str = "json",
        api_version: str | None = None,
        retry_policy: RetryPolicy | None = None,
        timeout: Timeout = DEFAULT_TIMEOUT,
        server_timeout: int | None = None,
        operation_deadline: float | None = None,
        pool_size: int = 100,
        json_metadata: str = "minimalmetadata",
        echo_content: bool = False,
        trust_env: bool = False,
        sender: AsyncSender | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        location_mode: str = "primary_only",
        user_agent: str | None = None,
        proxies: Mapping[str, str] | None = None,
        token_audience: str | None = None,
        encryption_policy: TableEncryptionPolicy | None = None,
    ) -> None:
        credential = client_credential(account.credential, token_audience, account.is_cosmos)
        super().__init__(
            account, payload_format=payload_format, api_version=api_version, json_metadata=json_metadata,
            echo_content=echo_content, settings=client_settings(
                retry_policy=retry_policy or (CosmosRetry() if account.is_cosmos else None), timeout=timeout, server_timeout=server_timeout,
                operation_deadline=operation_deadline, location_mode=location_mode, user_agent=user_agent,
                encryption_policy=encryption_policy,
            ),
        )
        self._transport = AsyncTransport(
            credential,
            error_parser=error_from_response,
            pool_size=pool_size,
            trust_env=trust_env,
            sender=sender,
            max_response_bytes=max_response_bytes,
            proxies=proxies,
        )

    # ------------------------------------------------------------ properties and lifetime

    @property
    def transport(self) -> AsyncTransport:
        """The transport that sends this client's requests."""
        return self._transport

    async def close(self) -> None:
        """Release the connection pool."""
        await self._transport.close()

    async def __aenter__(self) -> AsyncCloudTableClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return (
            f"AsyncCloudTableClient(endpoint={self.table_endpoint!r}, payload_format={self.payload_format!r}, "
            f"api_version={self.api_version!r})"
        )

    # ------------------------------------------------------------ plumbing

    async def _run(self, flow: Flow[T], options: TableRequestOptions | None = None) -> T:
        """Run ``flow``; every request it sends gets ``options`` (the call's request options)."""
        return await arun_flow(flow, self._send_call, check_options(options))

    async def _send_call(self, call: Call) -> HttpResponse:
        settings = self._settings_for(call)
        url, headers, locations = self._http_parts(call, settings)
        return await self._transport.send(
            call.method, url, settings=settings, headers=headers, body=call.body,
            operation_context=call.operation_context, locations=locations, check=call.check, read_only=call.read_only,
        )

    # ------------------------------------------------------------ tables

    async def create_table(
        self, table_name: str,
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> None:
        """Create a table (:meth:`tablesdk.CloudTableClient.create_table`)."""
        await self._run(self._f_create_table(table_name, operation_context), options)

    async def create_table_if_not_exists(
        self, table_name: str,
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> bool:
        """Create a table unless it exists; True when this call created it (the sync rules)."""
        return await self._run(self._f_create_table_if_not_exists(table_name, operation_context), options)

    async def delete_table(
        self, table_name: str,
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> None:
        """Delete a table; :class:`~tablesdk._core._errors.ResourceNotFoundError` if it does not exist."""
        await self._run(self._f_delete_table(table_name, operation_context), options)

    async def delete_table_if_exists(
        self, table_name: str,
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> bool:
        """Delete a table if it exists; True when this call deleted it."""
        return await self._run(self._f_delete_table_if_exists(table_name, operation_context), options)

    async def table_exists(
        self, table_name: str,
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> bool:
        """Whether the table exists."""
        return await self._run(self._f_table_exists(table_name, operation_context), options)

    async def list_tables(
        self,
        prefix: str | None = None,
        *,
        filter: FilterLike | None = None,
        page_size: int | None = None,
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
    ) -> AsyncIterator[str]:
        """Yield table names (``prefix`` and/or ``filter`` on TableName), following continuation lazily."""
        def fetch(request: PageRequest) -> Awaitable[ResultSegment[str]]:
            return self.list_tables_segmented(
                request.token, prefix=prefix, filter=filter, max_results=page_size,
                operation_context=operation_context, options=options
            )

        async for names, _ in stream_pages_async(Pager(listing=True), fetch, segment_results):
            for name in names:
                yield name

    async def list_tables_segmented(
        self,
        token: ContinuationToken | None = None,
        *,
        prefix: str | None = None,
        filter: FilterLike | None = None,
        max_results: int | None = None,
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
    ) -> ResultSegment[str]:
        """One page of Query Tables (:meth:`tablesdk.CloudTableClient.list_tables_segmented`)."""
        return await self._run(
            self._f_list_tables_segmented(token, prefix, filter, max_results, operation_context), options
        )

    # ------------------------------------------------------------ access policies, service level

    async def get_table_acl(
        self, table_name: str,
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> dict[str, AccessPolicy]:
        """The table's stored access policies, by policy id."""
        return await self._run(self._f_get_table_acl(table_name, operation_context), options)

    async def set_table_acl(
        self, table_name: str, policies: dict[str, AccessPolicy],
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> None:
        """Replace the table's stored access policies (:meth:`tablesdk.CloudTableClient.set_table_acl`)."""
        await self._run(self._f_set_table_acl(table_name, policies, operation_context), options)

    async def get_service_properties(
        self, *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> ServiceProperties:
        """The Table service's logging, metrics and CORS rules."""
        return await self._run(self._f_get_service_properties(operation_context), options)

    async def set_service_properties(
        self, properties: ServiceProperties,
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> None:
        """Set the Table service's properties; sections left None keep their current values."""
        await self._run(self._f_set_service_properties(properties, operation_context), options)

    async def get_service_stats(
        self, *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> ServiceStats:
        """Geo-replication status, from the account's secondary endpoint (RA-GRS accounts)."""
        return await self._run(self._f_get_service_stats(operation_context), options)

    # ------------------------------------------------------------ queries

    @overload
    def create_query(
        self, table_name: str, *, options: TableRequestOptions | None = None
    ) -> AsyncTableQuery[DynamicEntity]: ...

    @overload
    def create_query(
        self, table_name: str, entity_type: type[E], *, options: TableRequestOptions | None = None
    ) -> AsyncTableQuery[E]: ...

    def create_query(
        self, table_name: str, entity_type: type[Any] = DynamicEntity, *, options: TableRequestOptions | None = None
    ) -> AsyncTableQuery[Any]:
        """An async query over ``table_name`` materialising ``entity_type`` (no tracking), sent with ``options``."""
        return AsyncTableQuery(self, table_name, entity_type, options=options)

    def get_table_reference(self, table_name: str) -> AsyncCloudTable:
        """The table ``table_name`` as an :class:`~tablesdk.aio.AsyncCloudTable` (no request is sent)."""
        from ._table import AsyncCloudTable

        return AsyncCloudTable(self, table_name)

    def get_table_service_context(self, **options: Any) -> AsyncTableServiceContext:
        """A new :class:`~tablesdk.aio.AsyncTableServiceContext` bound to this client."""
        from ._context import AsyncTableServiceContext

        return AsyncTableServiceContext(self, **options)

    async def query_entity_payloads(
        self,
        table_name: str,
        *,
        filter: str | None = None,
        select: Sequence[str] | None = None,
        top: int | None = None,
        continuation_token: ContinuationToken | None = None,
        retry_policy: RetryPolicy | None = None,
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
        request_hook: RequestHook | None = None,
    ) -> tuple[list[EntityPayload], ContinuationToken | None]:
        """One page of Query Entities as payloads, with the token of the next page."""
        return await self._run(self._f_page_payloads(self._f_fetch_entity_page(
            table_name, filter, select, top, continuation_token, retry_policy, operation_context, request_hook,
            options=options,
        )), options)

    async def get_entity_payload(
        self,
        table_name: str,
        partition_key: str,
        row_key: str,
        *,
        select: Sequence[str] | None = None,
        retry_policy: RetryPolicy | None = None,
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
        request_hook: RequestHook | None = None,
    ) -> EntityPayload:
        """One entity by its keys; :class:`~tablesdk._core._errors.ResourceNotFoundError` if absent."""
        return await self._run(self._f_get_entity_payload(
            table_name, partition_key, row_key, select, retry_policy, operation_context, request_hook, options=options,
        ), options)

    async def query_page_payloads(
        self,
        query: TableQuery[Any],
        continuation_token: ContinuationToken | None,
        top: int | None,
        *,
        ignore_missing_entity: bool = False,
        ignore_missing_table: bool = False,
        request_hook: RequestHook | None = None,
    ) -> tuple[list[EntityPayload], ContinuationToken | None]:
        """One page of ``query`` as payloads (:meth:`tablesdk.CloudTableClient.query_page_payloads`)."""
        return await self._run(self._f_page_payloads(self._f_fetch_page(
            query, continuation_token, top, ignore_missing_entity, ignore_missing_table, request_hook
        )), query.request_options)

    async def execute_query_segment(
        self, query: TableQuery[E], continuation_token: ContinuationToken | None, top: int | None
    ) -> ResultSegment[E]:
        """One page of ``query``; a point query for a missing entity is an empty page."""
        return await self._run(
            self._f_execute_query_segment(query, continuation_token, top), query.request_options
        )

    async def fetch_query_segment(
        self, query: TableQuery[E], continuation_token: ContinuationToken | None, top: int | None
    ) -> FetchedPage:
        """The HTTP stage of :meth:`execute_query_segment`: the page's answer, not decoded, and the
        next page's token (a task may fetch the next page while this one is decoded)."""
        return await self._run(self._f_fetch_page(query, continuation_token, top, True, False, None), query.request_options)

    def decode_query_segment(self, query: TableQuery[E], fetched: FetchedPage) -> ResultSegment[E]:
        """The decode stage of :meth:`execute_query_segment`: the entities of ``fetched``."""
        return self._decode_segment(query, fetched)

    # ------------------------------------------------------------ entity operations

    async def execute_operation(
        self,
        operation: BatchOperation,
        *,
        retry_policy: RetryPolicy | None = None,
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
        request_hook: RequestHook | None = None,
    ) -> BatchOperationResult:
        """Send one entity operation as its own request (:meth:`tablesdk.CloudTableClient.execute_operation`)."""
        return await self._run(
            self._f_execute_operation(
                self._encrypted_operations([operation], options)[0], retry_policy, operation_context, request_hook,
            ), options,
        )

    async def execute_batch(
        self,
        operations: Sequence[BatchOperation],
        *,
        retry_policy: RetryPolicy | None = None,
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
        request_hook: RequestHook | None = None,
    ) -> list[BatchOperationResult]:
        """Send ``operations`` as one entity group transaction (all or nothing); a refusal raises
        :class:`~tablesdk._core._errors.BatchError` with the failing operation's index."""
        return await self._run(
            self._f_execute_batch(
                self._encrypted_operations(operations, options), retry_policy, operation_context, request_hook,
            ), options,
        )

    async def bulk_insert(
        self,
        table_name: str,
        entities: Iterable[EntityObject],
        mode: BulkMode = "insert",
        max_concurrency: int = 8,
        progress: ProgressCallback | None = None,
        *,
        retry_policy: RetryPolicy | None = None,
        options: TableRequestOptions | None = None,
    ) -> BulkResult:
        """Write many entities, any partitions, as concurrent entity group transactions
        (:meth:`tablesdk.CloudTableClient.bulk_insert`: entities, or a pandas DataFrame or
        ``pyarrow.Table``), at most ``max_concurrency`` at once as tasks (requests beyond the
        client's ``pool_size`` wait for a connection); ``progress`` is called on the loop."""
        from .._bulk_loading._bulk import BulkOptions, is_column_data
        from ._bulk import insert_entities

        bulk = BulkOptions.tasks(max_concurrency, progress, retry_policy, options)
        if is_column_data(entities):
            from .._columns._arrow_write import column_rows

            entities = column_rows(entities)
        return await insert_entities(self, table_name, entities, mode, bulk)

    async def delete_entities(
        self,
        table_name: str,
        filter: FilterLike | None = None,
        *,
        parameters: Mapping[str, object] | None = None,
        conditional: bool = False,
        max_concurrency: int = 8,
        progress: ProgressCallback | None = None,
        retry_policy: RetryPolicy | None = None,
        options: TableRequestOptions | None = None,
    ) -> BulkResult:
        """Delete every entity of ``table_name`` matching ``filter``
        (:meth:`tablesdk.CloudTableClient.delete_entities`), ``max_concurrency`` batches at once."""
        from .._bulk_loading._bulk import BulkOptions
        from ._deleting import delete_entities

        bulk = BulkOptions.tasks(max_concurrency, progress, retry_policy, options)
        return await delete_entities(self, table_name, filter, conditional, bulk, parameters)

    async def count_entities(
        self,
        table_name: str,
        filter: FilterLike | None = None,
        *,
        parameters: Mapping[str, object] | None = None,
        progress: ProgressCallback | None = None,
        options: TableRequestOptions | None = None,
    ) -> int:
        """How many entities of ``table_name`` match ``filter``, reading only their keys."""
        from ._deleting import count_entities

        return await count_entities(
            self, table_name, filter, parameters=parameters, progress=progress, options=options
        )

    async def write_arrow(
        self,
        table_name: str,
        data: Any,
        mode: BulkMode = "insert",
        *,
        edm_types: Mapping[str, EdmType] | None = None,
        max_concurrency: int = 8,
        progress: ProgressCallback | None = None,
        retry_policy: RetryPolicy | None = None,
        options: TableRequestOptions | None = None,
        max_workers: int | None = None,
    ) -> BulkResult:
        """Write each row of ``data`` (a ``pyarrow.Table`` or ``RecordBatch``) as an entity with
        :meth:`bulk_insert`'s parameters; the columns as :meth:`tablesdk.CloudTableClient.write_arrow`
        takes them, checked before anything is sent. ``max_workers`` is the deprecated spelling of
        ``max_concurrency`` (a DeprecationWarning)."""
        from .._columns._arrow_write import arrow_rows
        from .._bulk_loading._bulk import BulkOptions
        from ._bulk import insert_entities

        bulk = BulkOptions.tasks(max_concurrency, progress, retry_policy, options, max_workers=max_workers)
        return await insert_entities(self, table_name, arrow_rows(data, edm_types), mode, bulk)

    async def write_pandas(
        self,
        table_name: str,
        frame: Any,
        mode: BulkMode = "insert",
        *,
        edm_types: Mapping[str, EdmType] | None = None,
        max_concurrency: int = 8,
        progress: ProgressCallback | None = None,
        retry_policy: RetryPolicy | None = None,
        options: TableRequestOptions | None = None,
        max_workers: int | None = None,
    ) -> BulkResult:
        """:meth:`write_arrow` of a pandas DataFrame (a named index such as PartitionKey is a column)."""
        from .._columns._arrow_write import arrow_rows, pandas_to_arrow
        from .._bulk_loading._bulk import BulkOptions
        from ._bulk import insert_entities

        bulk = BulkOptions.tasks(max_concurrency, progress, retry_policy, options, max_workers=max_workers)
        return await insert_entities(self, table_name, arrow_rows(pandas_to_arrow(frame), edm_types), mode, bulk)

    # ------------------------------------------------------------ conveniences

    @overload
    async def get_entity(
        self, table_name: str, partition_key: str, row_key: str,
        *, select: Sequence[str] | None = None,
        operation_context: OperationContext | None = None, options: TableRequestOptions | None = None,
    ) -> DynamicEntity: ...

    @overload
    async def get_entity(
        self, table_name: str, partition_key: str, row_key: str, entity_type: type[E],
        *, select: Sequence[str] | None = None,
        operation_context: OperationContext | None = None, options: TableRequestOptions | None = None,
    ) -> E: ...

    async def get_entity(
        self, table_name: str, partition_key: str, row_key: str, entity_type: type[Any] = DynamicEntity,
        *, select: Sequence[str] | None = None,
        operation_context: OperationContext | None = None, options: TableRequestOptions | None = None,
    ) -> Any:
        """One entity by its keys, materialised as ``entity_type`` (untracked)."""
        return await self._run(
            self._f_get_entity(table_name, partition_key, row_key, entity_type, select, operation_context, options),
            options
        )

    async def insert_entity(
        self, table_name: str, entity: EntityObject,
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> str | None:
        """Insert one entity; returns its new ETag (also set on ``entity.etag``)."""
        return await self._run(
            self._f_write(BatchOperationKind.INSERT, table_name, entity, None, operation_context, options), options
        )

    async def update_entity(
        self,
        table_name: str,
        entity: EntityObject,
        *,
        mode: str = "merge",
        etag: str | None = None,
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
    ) -> str | None:
        """Merge (default) or replace an existing entity, conditional on ``etag`` (default ``entity.etag``)."""
        return await self._run(self._f_update_entity(table_name, entity, mode, etag, operation_context, options), options)

    async def upsert_entity(
        self,
        table_name: str,
        entity: EntityObject,
        *,
        mode: str = "merge",
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
    ) -> str | None:
        """Insert or merge (default) / insert or replace an entity."""
        return await self._run(self._f_upsert_entity(table_name, entity, mode, operation_context, options), options)

    async def delete_entity(
        self,
        table_name: str,
        entity: EntityObject | None = None,
        *,
        partition_key: str | None = None,
        row_key: str | None = None,
        etag: str | None = None,
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
    ) -> None:
        """Delete an entity, conditional on its ETag (see :meth:`tablesdk.CloudTableClient.delete_entity`)."""
        await self._run(
            self._f_delete_entity(table_name, entity, partition_key, row_key, etag, operation_context), options
        )


# One span per operation when the application configured OpenTelemetry (tablesdk._core._tracing).
trace_public_methods(AsyncCloudTableClient, skip=frozenset({"create_query", "get_table_reference", "get_table_service_context", "executor", "close", "decode_query_segment"}))
