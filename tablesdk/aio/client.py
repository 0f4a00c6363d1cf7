"""``AsyncCloudTableClient``: the table, entity, batch and bulk operations, awaitable.

Every operation of :class:`tablesdk.CloudTableClient` exists here with the same
name, arguments and errors, as a coroutine (``list_tables`` is an async
iterator). The payload codecs, the ``$batch`` writer and reader, the filter
language, the entity classes, key validation and the retry policies are the
sync client's own; only sending and waiting differ (see
:mod:`tablesdk.aio._transport`).

Keys the URL path cannot carry are handled as in the sync client: a point read
uses the ``$filter`` form of Query Entities and a write goes out as an entity
group transaction holding that one operation.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, overload

from .._version import __version__
from ..batch import (
    BatchAnswer,
    BatchOperation,
    BatchOperationKind,
    BatchOperationResult,
    build_batch_request,
    entity_path,
    supports_prefer,
)
from ..bulk import BulkMode, BulkResult, ProgressCallback
from ..client import (
    RequestHook,
    SendingRequest,
    _error_from_response,
    _query_string,
    _with_keys,
    path_can_carry_keys,
)
from ..edm import EntityPayload
from ..entity import (
    AnyEntity,
    DynamicEntity,
    E,
    TableEntity,
    entity_from_payload,
    entity_to_payload,
    validate_key,
    validate_table_name,
)
from ..errors import BatchError, ConflictError, ResourceNotFoundError
from ..filter import prop
from ..formats import PayloadFormat, get_format
from ..query import ContinuationToken, ResultSegment, TableQuery
from ..retry import ExponentialRetry, RetryPolicy
from ..http import DEFAULT_MAX_RESPONSE_BYTES
from ..transport import DEFAULT_TIMEOUT, HttpResponse, OperationContext, Timeout
from ._sender import AiohttpSender
from ._transport import AsyncTransport
from .query import AsyncTableQuery

if TYPE_CHECKING:
    from ..account import CloudStorageAccount
    from .context import AsyncTableServiceContext

__all__ = ["AsyncCloudTableClient"]



def _not_found() -> ResourceNotFoundError:
    return ResourceNotFoundError("The specified resource does not exist.", status_code=404, error_code="ResourceNotFound")


class AsyncCloudTableClient:
    """An asyncio client for one storage account's Table service.

    Takes the options of :class:`tablesdk.CloudTableClient` (``payload_format``,
    ``api_version``, ``retry_policy``, ``timeout``, ``server_timeout``,
    ``operation_deadline``, ``json_metadata``, ``echo_content``, ``trust_env``);
    ``pool_size`` (default 100) bounds the open connections, and requests
    beyond it wait for a free one; ``sender`` replaces the HTTP layer (an
    :class:`~tablesdk.aio.AiohttpSender` reading at most ``max_response_bytes``
    of a body by default). Use it as ``async with`` (or ``await
    client.close()``); it belongs to the event loop it first sends on.
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
        sender: AiohttpSender | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        options: dict[str, Any] = {"metadata": json_metadata} if payload_format == "json" else {}
        self._format: PayloadFormat = get_format(payload_format, **options)
        self.account = account
        self.table_endpoint = account.table_endpoint.rstrip("/")
        self.api_version = api_version or self._format.default_api_version
        self.echo_content = echo_content
        self.operation_deadline = operation_deadline
        self._transport = AsyncTransport(
            account.credential,
            retry_policy=retry_policy if retry_policy is not None else ExponentialRetry(),
            error_parser=_error_from_response,
            pool_size=pool_size,
            timeout=timeout,
            server_timeout=server_timeout,
            user_agent=f"tablesdk/{__version__}",
            trust_env=trust_env,
            sender=sender,
            max_response_bytes=max_response_bytes,
        )
        self._base_headers = {"x-ms-version": self.api_version, **self._format.request_headers()}
        self._prefer_supported = supports_prefer(self.api_version)

    # ------------------------------------------------------------ properties and lifetime

    @property
    def payload_format(self) -> str:
        """``"json"`` or ``"atom"``."""
        return self._format.name

    @property
    def format(self) -> PayloadFormat:
        """The codec of :attr:`payload_format`."""
        return self._format

    @property
    def retry_policy(self) -> RetryPolicy:
        """The default retry policy of every operation of this client."""
        return self._transport.retry_policy

    @retry_policy.setter
    def retry_policy(self, policy: RetryPolicy) -> None:
        self._transport.retry_policy = policy

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

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        retry_policy: RetryPolicy | None = None,
        operation_context: OperationContext | None = None,
        request_hook: RequestHook | None = None,
        check: Callable[[HttpResponse], None] | None = None,
        read_only: bool = False,
    ) -> HttpResponse:
        url = f"{self.table_endpoint}/{path}"
        if query:
            url += "?" + _query_string(query)
        all_headers = dict(self._base_headers)
        if body is not None:
            all_headers["Content-Type"] = self._format.content_type
        if headers:
            all_headers.update(headers)
        if request_hook is not None:
            request = SendingRequest(method, url, all_headers)
            request_hook(request)
            url, all_headers = request.url, request.headers
        return await self._transport.send(
            method, url, headers=all_headers, body=body, retry_policy=retry_policy,
            deadline=self.operation_deadline, operation_context=operation_context,
            check=check, read_only=read_only,
        )

    def _prefer_headers(self, echo_content: bool | None) -> dict[str, str]:
        echo = self.echo_content if echo_content is None else echo_content
        if not self._prefer_supported:
            return {}
        return {"Prefer": "return-content" if echo else "return-no-content"}

    # ------------------------------------------------------------ tables

    async def create_table(self, table_name: str, *, operation_context: OperationContext | None = None) -> None:
        """Create a table; raises :class:`~tablesdk.errors.ConflictError` (TableAlreadyExists) if it exists."""
        validate_table_name(table_name)
        await self._send(
            "POST", "Tables", body=self._format.serialize_table(table_name),
            headers=self._prefer_headers(False), operation_context=operation_context,
        )

    async def create_table_if_not_exists(
        self, table_name: str, *, operation_context: OperationContext | None = None
    ) -> bool:
        """Create a table unless it exists; True when this call created it (the sync client's rules)."""
        try:
            await self.create_table(table_name, operation_context=operation_context)
        except ConflictError as exc:
            if exc.ambiguous_retry:  # our own lost first attempt may have created it: don't guess
                raise
            if exc.error_code == "TableBeingDeleted":
                exc.message = (
                    f"table {table_name!r} is being deleted; it cannot be created until the "
                    f"service finishes (retry after some seconds): {exc.message}"
                )
                raise
            return False
        return True

    async def delete_table(self, table_name: str, *, operation_context: OperationContext | None = None) -> None:
        """Delete a table; raises :class:`~tablesdk.errors.ResourceNotFoundError` if it does not exist."""
        validate_table_name(table_name)
        await self._send("DELETE", f"Tables('{table_name}')", operation_context=operation_context)

    async def delete_table_if_exists(
        self, table_name: str, *, operation_context: OperationContext | None = None
    ) -> bool:
        """Delete a table if it exists; True when this call deleted it."""
        try:
            await self.delete_table(table_name, operation_context=operation_context)
        except ResourceNotFoundError as exc:
            if exc.ambiguous_retry:  # our own lost first attempt may have deleted it: don't guess
                raise
            return False
        return True

    async def table_exists(self, table_name: str, *, operation_context: OperationContext | None = None) -> bool:
        """Whether the table exists."""
        validate_table_name(table_name)
        try:
            await self._send("GET", f"Tables('{table_name}')", operation_context=operation_context)
        except ResourceNotFoundError:
            return False
        return True

    async def list_tables(
        self,
        prefix: str | None = None,
        *,
        page_size: int | None = None,
        operation_context: OperationContext | None = None,
    ) -> AsyncIterator[str]:
        """Yield table names (optionally those starting with ``prefix``), following continuation."""
        params: list[tuple[str, str]] = []
        if prefix:
            params.append(("$filter", prop("TableName").startswith(prefix).render()))
        if page_size is not None:
            params.append(("$top", str(page_size)))
        next_name: str | None = None
        while True:
            query = params + ([("NextTableName", next_name)] if next_name else [])
            response = await self._send("GET", "Tables", query=query, operation_context=operation_context)
            for name in self._format.parse_tables(response.body):
                yield name
            next_name = response.headers.get("x-ms-continuation-NextTableName")
            if not next_name:
                return

    # ------------------------------------------------------------ queries

    @overload
    def create_query(self, table_name: str) -> AsyncTableQuery[DynamicEntity]: ...

    @overload
    def create_query(self, table_name: str, entity_type: type[E]) -> AsyncTableQuery[E]: ...

    def create_query(self, table_name: str, entity_type: type[Any] = DynamicEntity) -> AsyncTableQuery[Any]:
        """An async query over ``table_name`` materialising ``entity_type`` (no tracking)."""
        return AsyncTableQuery(self, table_name, entity_type)

    def get_table_service_context(self, **options: Any) -> AsyncTableServiceContext:
        """A new :class:`~tablesdk.aio.AsyncTableServiceContext` bound to this client."""
        from .context import AsyncTableServiceContext

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
        request_hook: RequestHook | None = None,
    ) -> tuple[list[EntityPayload], ContinuationToken | None]:
        """One page of Query Entities as payloads, with the token of the next page."""
        params: list[tuple[str, str]] = []
        if filter:
            params.append(("$filter", filter))
        if top is not None:
            params.append(("$top", str(top)))
        if select:
            params.append(("$select", ",".join(_with_keys(select))))
        if continuation_token is not None:
            if continuation_token.next_partition_key is not None:
                params.append(("NextPartitionKey", continuation_token.next_partition_key))
            if continuation_token.next_row_key is not None:
                params.append(("NextRowKey", continuation_token.next_row_key))
        response = await self._send(
            "GET", f"{table_name}()", query=params,
            retry_policy=retry_policy, operation_context=operation_context, request_hook=request_hook,
        )
        payloads = self._format.parse_entities(response.body)
        npk = response.headers.get("x-ms-continuation-NextPartitionKey")
        nrk = response.headers.get("x-ms-continuation-NextRowKey")
        token = ContinuationToken(next_partition_key=npk, next_row_key=nrk) if (npk or nrk) else None
        return payloads, token

    async def get_entity_payload(
        self,
        table_name: str,
        partition_key: str,
        row_key: str,
        *,
        select: Sequence[str] | None = None,
        retry_policy: RetryPolicy | None = None,
        operation_context: OperationContext | None = None,
        request_hook: RequestHook | None = None,
    ) -> EntityPayload:
        """One entity by its keys; raises :class:`~tablesdk.errors.ResourceNotFoundError` if absent."""
        validate_key("PartitionKey", partition_key)
        validate_key("RowKey", row_key)
        if not path_can_carry_keys(table_name, partition_key, row_key):
            expr = (prop("PartitionKey") == partition_key) & (prop("RowKey") == row_key)
            payloads, _ = await self.query_entity_payloads(
                table_name, filter=expr.render(), select=select,
                retry_policy=retry_policy, operation_context=operation_context, request_hook=request_hook,
            )
            if not payloads:
                raise _not_found()
            return payloads[0]
        params = [("$select", ",".join(_with_keys(select)))] if select else []
        response = await self._send(
            "GET", entity_path(table_name, partition_key, row_key), query=params,
            retry_policy=retry_policy, operation_context=operation_context, request_hook=request_hook,
        )
        return self._format.parse_entity(response.body, response.etag)

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
        """One page of ``query`` as payloads: a point lookup for an exact PartitionKey/RowKey filter,
        else Query Entities (the sync client's ``query_page_payloads``)."""
        keys = query.point_keys()
        if keys is not None and continuation_token is None:
            try:
                payload = await self.get_entity_payload(
                    query.table, keys[0], keys[1], select=query.select_columns, request_hook=request_hook
                )
            except ResourceNotFoundError as exc:
                missing_table = exc.error_code == "TableNotFound"
                if ignore_missing_table if missing_table else ignore_missing_entity:
                    return [], None
                raise
            return [payload], None
        return await self.query_entity_payloads(
            query.table, filter=query.filter_string(), select=query.select_columns,
            top=top, continuation_token=continuation_token, request_hook=request_hook,
        )

    async def execute_query_segment(
        self, query: TableQuery[E], continuation_token: ContinuationToken | None, top: int | None
    ) -> ResultSegment[E]:
        """One page of ``query``; a point query for a missing entity is an empty page."""
        payloads, token = await self.query_page_payloads(
            query, continuation_token, top, ignore_missing_entity=True
        )
        entity_type = query.entity_type
        return ResultSegment([entity_from_payload(entity_type, p) for p in payloads], token)

    # ------------------------------------------------------------ entity operations

    async def execute_operation(
        self,
        operation: BatchOperation,
        *,
        retry_policy: RetryPolicy | None = None,
        operation_context: OperationContext | None = None,
        request_hook: RequestHook | None = None,
    ) -> BatchOperationResult:
        """Send one entity operation as its own request (a one-operation batch for keys the path
        cannot carry)."""
        kind = operation.kind
        if kind is not BatchOperationKind.INSERT and not path_can_carry_keys(
            operation.table, operation.partition_key, operation.row_key
        ):
            return await self._execute_by_other_address(operation, retry_policy, operation_context, request_hook)
        method, path, headers, body = self._operation_request(operation)
        response = await self._send(
            method, path, headers=headers, body=body,
            retry_policy=retry_policy, operation_context=operation_context, request_hook=request_hook,
        )
        payload_out: EntityPayload | None = None
        if response.body and response.status in (200, 201):
            payload_out = self._format.parse_entity(response.body, response.etag)
        etag = response.etag or (payload_out.etag if payload_out else None)
        return BatchOperationResult(0, response.status, etag, payload_out, dict(response.headers))

    async def _execute_by_other_address(
        self,
        operation: BatchOperation,
        retry_policy: RetryPolicy | None,
        operation_context: OperationContext | None,
        request_hook: RequestHook | None,
    ) -> BatchOperationResult:
        if operation.kind is BatchOperationKind.RETRIEVE:
            payload = await self.get_entity_payload(
                operation.table, operation.partition_key, operation.row_key,
                retry_policy=retry_policy, operation_context=operation_context, request_hook=request_hook,
            )
            return BatchOperationResult(0, 200, payload.etag, payload, {})
        try:
            results = await self.execute_batch(
                [operation], retry_policy=retry_policy, operation_context=operation_context,
                request_hook=request_hook,
            )
        except BatchError as exc:
            # One operation: fail exactly as the direct request would (404, 409, 412 ...).
            raise (exc.cause or exc) from exc
        return results[0]

    def _operation_request(self, operation: BatchOperation) -> tuple[str, str, dict[str, str], bytes | None]:
        kind = operation.kind
        headers: dict[str, str] = {}
        body: bytes | None = None
        if operation.payload is not None and kind is not BatchOperationKind.DELETE:
            body = self._format.serialize_entity(operation.payload)
        if kind is BatchOperationKind.INSERT:
            path = operation.table
            headers.update(self._prefer_headers(operation.echo_content or None))
        else:
            path = entity_path(operation.table, operation.partition_key, operation.row_key)
        if kind in (BatchOperationKind.UPDATE, BatchOperationKind.MERGE, BatchOperationKind.DELETE):
            if not operation.etag:
                raise ValueError(
                    f"{kind.name} of ({operation.partition_key!r}, {operation.row_key!r}) needs an ETag: "
                    "read the entity first, or attach it with etag='*' for an unconditional write"
                )
            headers["If-Match"] = operation.etag
        return kind.method, path, headers, body

    async def execute_batch(
        self,
        operations: Sequence[BatchOperation],
        *,
        retry_policy: RetryPolicy | None = None,
        operation_context: OperationContext | None = None,
        request_hook: RequestHook | None = None,
    ) -> list[BatchOperationResult]:
        """Send ``operations`` as one entity group transaction (all or nothing).

        Limits are checked before sending. A refused transaction raises
        :class:`~tablesdk.errors.BatchError` with the failing operation's index;
        retries and ambiguity are decided as in
        :meth:`tablesdk.client.CloudTableClient.execute_batch`.
        """
        body, content_type = build_batch_request(  # validates the batch first
            self.table_endpoint, operations, self._format, api_version=self.api_version
        )
        answer = BatchAnswer(operations, self._format)
        await self._send(
            "POST", "$batch", headers={"Content-Type": content_type}, body=body,
            retry_policy=retry_policy, operation_context=operation_context, request_hook=request_hook,
            check=answer, read_only=answer.read_only,
        )
        return answer.results

    async def bulk_insert(
        self,
        table_name: str,
        entities: Iterable[TableEntity | DynamicEntity],
        mode: BulkMode = "insert",
        max_concurrency: int = 8,
        progress: ProgressCallback | None = None,
        *,
        retry_policy: RetryPolicy | None = None,
    ) -> BulkResult:
        """Write many entities, any partitions, as concurrent entity group transactions.

        The rules of :meth:`tablesdk.CloudTableClient.bulk_insert`, with at most
        ``max_concurrency`` transactions in flight as tasks instead of threads;
        see :func:`tablesdk.aio.bulk.bulk_insert`.
        """
        from .bulk import bulk_insert

        return await bulk_insert(
            self, table_name, entities, mode, max_concurrency, progress, retry_policy=retry_policy
        )

    # ------------------------------------------------------------ conveniences

    @overload
    async def get_entity(
        self, table_name: str, partition_key: str, row_key: str,
        *, select: Sequence[str] | None = None, operation_context: OperationContext | None = None,
    ) -> DynamicEntity: ...

    @overload
    async def get_entity(
        self, table_name: str, partition_key: str, row_key: str, entity_type: type[E],
        *, select: Sequence[str] | None = None, operation_context: OperationContext | None = None,
    ) -> E: ...

    async def get_entity(
        self, table_name: str, partition_key: str, row_key: str, entity_type: type[Any] = DynamicEntity,
        *, select: Sequence[str] | None = None, operation_context: OperationContext | None = None,
    ) -> AnyEntity:
        """One entity by its keys, materialised as ``entity_type`` (untracked)."""
        payload = await self.get_entity_payload(
            table_name, partition_key, row_key, select=select, operation_context=operation_context
        )
        entity: AnyEntity = entity_from_payload(entity_type, payload)
        return entity

    async def insert_entity(
        self, table_name: str, entity: TableEntity | DynamicEntity, *, operation_context: OperationContext | None = None
    ) -> str | None:
        """Insert one entity; returns its new ETag (also set on ``entity.etag``)."""
        return await self._write(BatchOperationKind.INSERT, table_name, entity, None, operation_context)

    async def update_entity(
        self,
        table_name: str,
        entity: TableEntity | DynamicEntity,
        *,
        mode: str = "merge",
        etag: str | None = None,
        operation_context: OperationContext | None = None,
    ) -> str | None:
        """Merge (default) or replace an existing entity, conditional on ``etag`` (default ``entity.etag``)."""
        kind = {"merge": BatchOperationKind.MERGE, "replace": BatchOperationKind.UPDATE}.get(mode)
        if kind is None:
            raise ValueError(f"mode must be 'merge' or 'replace', not {mode!r}")
        return await self._write(kind, table_name, entity, etag or entity.etag, operation_context)

    async def upsert_entity(
        self,
        table_name: str,
        entity: TableEntity | DynamicEntity,
        *,
        mode: str = "merge",
        operation_context: OperationContext | None = None,
    ) -> str | None:
        """Insert or merge (default) / insert or replace an entity."""
        kind = {"merge": BatchOperationKind.INSERT_OR_MERGE, "replace": BatchOperationKind.INSERT_OR_REPLACE}.get(mode)
        if kind is None:
            raise ValueError(f"mode must be 'merge' or 'replace', not {mode!r}")
        return await self._write(kind, table_name, entity, None, operation_context)

    async def delete_entity(
        self,
        table_name: str,
        partition_key: str,
        row_key: str,
        *,
        etag: str = "*",
        operation_context: OperationContext | None = None,
    ) -> None:
        """Delete an entity, conditional on ``etag`` (unconditional by default)."""
        validate_key("PartitionKey", partition_key)
        validate_key("RowKey", row_key)
        await self.execute_operation(
            BatchOperation(BatchOperationKind.DELETE, table_name, partition_key, row_key, None, etag),
            operation_context=operation_context,
        )

    async def _write(
        self,
        kind: BatchOperationKind,
        table_name: str,
        entity: TableEntity | DynamicEntity,
        etag: str | None,
        operation_context: OperationContext | None,
    ) -> str | None:
        validate_table_name(table_name)
        payload = entity_to_payload(entity)
        result = await self.execute_operation(
            BatchOperation(kind, table_name, payload.values["PartitionKey"], payload.values["RowKey"], payload, etag),
            operation_context=operation_context,
        )
        if result.etag:
            entity.etag = result.etag
        return result.etag
