"""``CloudTableClient``: table operations, single-entity operations and queries.

The client owns one :class:`~tablesdk._pipeline._transport.Transport` (one pooled HTTP
session) and one payload format. Single-entity operations are described with
the same :class:`~tablesdk._formats._batch.BatchOperation` records that entity group
transactions use, so the context can send its pending changes either way.

Keys the URL path cannot carry are handled transparently, as the Azure Storage team's blog advises
(the '%' double-decoding bug and HTTP.sys's 260-character URI segment limit):
a point read uses the ``$filter`` form of Query Entities, and a write goes out
as an entity group transaction holding that one operation.

The operations themselves (request building, answers, fallbacks) are written
once in :mod:`tablesdk._clients._operations` and shared with the asyncio client; this
class runs them over its thread-blocking transport.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ._flows import (
    MAX_URI_SEGMENT_LENGTH,
    Call,
    Flow,
    error_from_response,
    path_can_carry_keys,
    query_string,
    run_flow,
)
from ._operations import ClientCore
from .._formats._batch import BatchOperation, BatchOperationKind, BatchOperationResult
from .._entities._edm import EdmType, EntityPayload
from .._entities._entity import DynamicEntity, E, EntityObject, validate_table_name
from .._entities._filter import FilterLike
from .._pipeline._options import LOCATION_MODES, TableRequestOptions, check_options
from .._queries._page_stream import segment_results, stream_pages
from .._queries._pager import PageRequest, Pager
from .._queries._query import ContinuationToken, FetchedPage, ResultSegment, TableQuery
from .._core._cosmos import client_credential
from .._pipeline._retry import CosmosRetry, RetryPolicy
from .._pipeline._http import DEFAULT_MAX_RESPONSE_BYTES, RequestHook, Sender, SendingRequest
from .._pipeline._settings import DEFAULT_TIMEOUT, client_settings
from .._pipeline._transport import HttpResponse, OperationContext, Timeout, Transport

from .._core._tracing import trace_public_methods
if TYPE_CHECKING:
    from .._encryption import TableEncryptionPolicy
    from concurrent.futures import Executor

    from .._core._account import CloudStorageAccount
    from .._bulk_loading._bulk import BulkMode, BulkResult, ProgressCallback
    from ._service import AccessPolicy, ServiceProperties, ServiceStats
    from .._unit_of_work._context import TableServiceContext
    from .._unit_of_work._table import CloudTable

__all__ = ["CloudTableClient", "SendingRequest", "RequestHook", "MAX_URI_SEGMENT_LENGTH", "LOCATION_MODES"]

T = TypeVar("T")

# Kept under their old names for callers that import them from here.
_query_string = query_string
_error_from_response = error_from_response
__all__ += ["path_can_carry_keys"]


class CloudTableClient(ClientCore):
    """A client for one storage account's Table service.

    ``payload_format`` is ``"json"`` (default; the only format of current
    service versions and Azurite) or ``"atom"`` (versions before 2015-12-11).
    ``api_version`` defaults to the format's own (JSON 2019-02-02, Atom
    2015-04-05). ``retry_policy`` is the default for every operation
    (``ExponentialRetry()`` unless given; settable). ``timeout`` bounds each
    attempt, ``server_timeout`` is sent as the service's ``timeout`` parameter,
    and ``operation_deadline`` caps an operation across all its retries.
    ``echo_content`` asks the service to return inserted entities (by default
    ``Prefer: return-no-content`` saves the round trip of the body).

    ``sender`` replaces the HTTP layer under the retry loop (any
    :class:`~tablesdk._pipeline._http.Sender`, e.g. a :class:`~tablesdk._pipeline._http.MockSender`
    in tests); by default a :class:`~tablesdk._pipeline._requests_sender.RequestsSender` with
    ``pool_size`` connections per host that reads at most
    ``max_response_bytes`` of any response body.

    ``location_mode`` (settable) sends reads of an RA-GRS account to its
    read-only secondary endpoint: ``"primary_only"`` (default),
    ``"primary_then_secondary"`` (first attempt on the primary, retries
    alternating between the two, as the Microsoft clients do) or
    ``"secondary_only"``. Writes always go to the primary.

    ``user_agent`` is the application's token for the ``User-Agent`` header,
    sent ahead of ``tablesdk/<version> Python/<version> (<platform>)`` as the
    Azure SDKs do (e.g. ``user_agent="orders-api/2.1"``).

    ``proxies`` (``{"http": url, "https": url}``, as requests takes them) sends every request
    through those HTTP proxies, whatever the environment says; it configures the default
    sender, so it is fixed when the client is made (a custom ``sender`` takes its own).
    Credentials in a proxy URL never appear in a repr, a log line or an error.

    ``encryption_policy`` (a :class:`~tablesdk.TableEncryptionPolicy`) encrypts the entities this
    client writes and decrypts those it reads, on every path (settable; a call's
    ``TableRequestOptions(encryption_policy=...)`` overrides it): see docs/encryption.md.

    ``token_audience`` makes an Entra ID token credential ask for ``<audience>/.default``
    instead of ``https://storage.azure.com/.default`` (``https://cosmos.azure.com`` for
    Cosmos DB's Table API, a sovereign cloud's audience); the account is not changed. A client of a
    Cosmos DB account (:attr:`CloudStorageAccount.is_cosmos`) asks for ``https://cosmos.azure.com``
    by itself, and follows Cosmos DB's documented differences (docs/cosmos.md).
    """

    #: Queries from this client may run pages on several threads at once (one pooled,
    #: thread-safe session; no tracking state): :meth:`TableQuery.iter_parallel` needs it.
    supports_parallel_queries = True

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
        pool_size: int = 16,
        json_metadata: str = "minimalmetadata",
        echo_content: bool = False,
        trust_env: bool = False,
        sender: Sender | None = None,
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
        self._transport = Transport(
            credential,
            error_parser=error_from_response,
            pool_size=pool_size,
            trust_env=trust_env,
            sender=sender,
            max_response_bytes=max_response_bytes,
            proxies=proxies,
        )
        self._executor: Executor | None = None
        self._executor_lock = threading.Lock()

    # ------------------------------------------------------------ properties

    @property
    def transport(self) -> Transport:
        """The transport that sends this client's requests."""
        return self._transport

    def __repr__(self) -> str:
        return (
            f"CloudTableClient(endpoint={self.table_endpoint!r}, payload_format={self.payload_format!r}, "
            f"api_version={self.api_version!r})"
        )

    # ------------------------------------------------------------ plumbing

    def _run(self, flow: Flow[T], options: TableRequestOptions | None = None) -> T:
        """Run ``flow``; every request it sends gets ``options`` (the call's request options)."""
        return run_flow(flow, self._send_call, check_options(options))

    def _send_call(self, call: Call) -> HttpResponse:
        settings = self._settings_for(call)
        url, headers, locations = self._http_parts(call, settings)
        return self._transport.send(
            call.method,
            url,
            settings=settings,
            headers=headers,
            body=call.body,
            operation_context=call.operation_context,
            locations=locations,
            check=call.check,
            read_only=call.read_only,
        )

    def _send(
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
        endpoint: str | None = None,
        check: Callable[[HttpResponse], None] | None = None,
        read_only: bool = False,
    ) -> HttpResponse:
        """Send one request to ``path`` under the table endpoint (``endpoint`` for another)."""
        return self._send_call(Call(
            method, path, query, dict(headers or {}), body, retry_policy, operation_context, request_hook, endpoint,
            check, read_only,
        ))

    def executor(self) -> Executor:
        """The thread pool owned by this client, for ``begin_*`` operations.

        It has as many threads as the client has pooled connections
        (``pool_size``): operations begun on several contexts run side by side,
        each a network round trip away, up to what the connections carry.
        """
        with self._executor_lock:
            if self._executor is None:
                from concurrent.futures import ThreadPoolExecutor  # with the first begin_* (start-up)

                self._executor = ThreadPoolExecutor(
                    max_workers=self._transport.pool_size, thread_name_prefix="tablesdk"
                )
            return self._executor

    def close(self) -> None:
        """Release the connection pool and the executor."""
        self._transport.close()
        if self._executor is not None:
            self._executor.shutdown(wait=False)

    def __enter__(self) -> CloudTableClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ------------------------------------------------------------ tables

    def create_table(
        self, table_name: str,
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> None:
        """Create a table; raises :class:`ConflictError` (TableAlreadyExists) if it exists."""
        self._run(self._f_create_table(table_name, operation_context), options)

    def create_table_if_not_exists(
        self, table_name: str,
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> bool:
        """Create a table unless it exists; True when this call created it.

        The create is sent directly (no existence check first), so two callers
        racing to create the same table cannot both fail. A table that is still
        being deleted raises :class:`ConflictError` (TableBeingDeleted): it
        neither exists nor can be created yet. When a retry is answered
        TableAlreadyExists after an attempt whose outcome was lost, the
        :class:`ConflictError` is raised with ``ambiguous_retry`` set, since this
        call may have created the table.
        """
        return self._run(self._f_create_table_if_not_exists(table_name, operation_context), options)

    def delete_table(
        self, table_name: str,
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> None:
        """Delete a table; raises :class:`ResourceNotFoundError` if it does not exist."""
        self._run(self._f_delete_table(table_name, operation_context), options)

    def delete_table_if_exists(
        self, table_name: str,
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> bool:
        """Delete a table if it exists; True when this call deleted it."""
        return self._run(self._f_delete_table_if_exists(table_name, operation_context), options)

    def table_exists(
        self, table_name: str,
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> bool:
        """Whether the table exists."""
        return self._run(self._f_table_exists(table_name, operation_context), options)

    def list_tables(
        self,
        prefix: str | None = None,
        *,
        filter: FilterLike | None = None,
        page_size: int | None = None,
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
    ) -> Iterator[str]:
        """Yield table names, following continuation (NextTableName) lazily.

        ``prefix`` keeps names starting with it (case-sensitive, as the
        service compares); ``filter`` is an OData filter on ``TableName``
        (``prop("TableName") >= "b"`` or raw text such as ``"TableName eq 'x'"``);
        both may be given and must both hold. ``page_size`` is the ``$top`` of
        each request.
        """
        def fetch(request: PageRequest) -> ResultSegment[str]:
            return self.list_tables_segmented(
                request.token, prefix=prefix, filter=filter, max_results=page_size,
                operation_context=operation_context, options=options
            )

        for names, _ in stream_pages(Pager(listing=True), fetch, segment_results):
            yield from names

    def list_tables_segmented(
        self,
        token: ContinuationToken | None = None,
        *,
        prefix: str | None = None,
        filter: FilterLike | None = None,
        max_results: int | None = None,
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
    ) -> ResultSegment[str]:
        """One page of Query Tables: the names and the token of the next page (None on the last).

        The token carries the service's NextTableName; it survives
        :meth:`ContinuationToken.to_string` / :meth:`ContinuationToken.from_string`,
        so a page can be resumed later (with the same ``prefix`` and ``filter``).
        ``max_results`` is 1-1000 (the service's page limit, its default).
        """
        return self._run(self._f_list_tables_segmented(token, prefix, filter, max_results, operation_context), options)

    # ------------------------------------------------------------ access policies, service level

    def get_table_acl(
        self, table_name: str,
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> dict[str, AccessPolicy]:
        """The table's stored access policies (Get Table ACL), by policy id."""
        return self._run(self._f_get_table_acl(table_name, operation_context), options)

    def set_table_acl(
        self,
        table_name: str,
        policies: dict[str, AccessPolicy],
        *,
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
    ) -> None:
        """Replace the table's stored access policies (Set Table ACL); ``{}`` removes them all.

        At most 5 policies, ids of 1-64 characters, permissions from ``"raud"``:
        checked before sending. A SAS naming a removed policy stops working.
        """
        self._run(self._f_set_table_acl(table_name, policies, operation_context), options)

    def get_service_properties(
        self, *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> ServiceProperties:
        """The Table service's analytics logging, hour and minute metrics and CORS rules."""
        return self._run(self._f_get_service_properties(operation_context), options)

    def set_service_properties(
        self, properties: ServiceProperties,
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> None:
        """Set the Table service's properties; sections left None keep their current values.

        The service's limits (5 CORS rules, 64 origins, 64 + 2 headers, 2 KiB of
        CORS settings, retention 1-365 days) are checked before sending.
        """
        self._run(self._f_set_service_properties(properties, operation_context), options)

    def get_service_stats(
        self, *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> ServiceStats:
        """Geo-replication status and last sync time, from the account's secondary endpoint.

        Only RA-GRS accounts have a readable secondary; on others the request fails.
        """
        return self._run(self._f_get_service_stats(operation_context), options)

    # ------------------------------------------------------------ queries

    @overload
    def create_query(
        self, table_name: str, *, options: TableRequestOptions | None = None
    ) -> TableQuery[DynamicEntity]: ...

    @overload
    def create_query(
        self, table_name: str, entity_type: type[E], *, options: TableRequestOptions | None = None
    ) -> TableQuery[E]: ...

    def create_query(
        self, table_name: str, entity_type: type[Any] = DynamicEntity, *, options: TableRequestOptions | None = None
    ) -> TableQuery[Any]:
        """A query over ``table_name`` materialising ``entity_type`` (no tracking).

        Typed by the entity class: ``create_query("Blogs", Blog)`` is a ``TableQuery[Blog]``;
        without a class it is a ``TableQuery[DynamicEntity]``. Its requests are sent with
        ``options`` (as :meth:`TableQuery.with_options`).
        """
        validate_table_name(table_name, cosmos=self.is_cosmos)
        return TableQuery(self, table_name, entity_type, options=options)

    def get_table_reference(self, table_name: str) -> CloudTable:
        """The table ``table_name`` as a :class:`~tablesdk.CloudTable` (no request is sent)."""
        from .._unit_of_work._table import CloudTable

        return CloudTable(self, table_name)

    def get_table_service_context(self, **options: Any) -> TableServiceContext:
        """A new :class:`~tablesdk._unit_of_work._context.TableServiceContext` bound to this client."""
        from .._unit_of_work._context import TableServiceContext

        return TableServiceContext(self, **options)

    def query_entity_payloads(
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
        return self._run(self._f_page_payloads(self._f_fetch_entity_page(
            table_name, filter, select, top, continuation_token, retry_policy, operation_context, request_hook,
            options=options,
        )), options)

    def get_entity_payload(
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
        """One entity by its keys; raises :class:`ResourceNotFoundError` if absent.

        Keys the URL path cannot carry are looked up with a ``$filter`` query.
        """
        return self._run(self._f_get_entity_payload(
            table_name, partition_key, row_key, select, retry_policy, operation_context, request_hook, options=options,
        ), options)

    def query_page_payloads(
        self,
        query: TableQuery[Any],
        continuation_token: ContinuationToken | None,
        top: int | None,
        *,
        ignore_missing_entity: bool = False,
        ignore_missing_table: bool = False,
        request_hook: RequestHook | None = None,
    ) -> tuple[list[EntityPayload], ContinuationToken | None]:
        """One page of ``query`` as payloads: a point lookup when the filter is exactly
        PartitionKey eq X and RowKey eq Y, else Query Entities with ``$filter``.

        A point lookup of a missing entity (or table) gives an empty page when
        ``ignore_missing_entity`` (``ignore_missing_table``) is set, and raises
        :class:`ResourceNotFoundError` otherwise.
        """
        return self._run(self._f_page_payloads(self._f_fetch_page(
            query, continuation_token, top, ignore_missing_entity, ignore_missing_table, request_hook
        )), query.request_options)

    def execute_query_segment(
        self, query: TableQuery[E], continuation_token: ContinuationToken | None, top: int | None
    ) -> ResultSegment[E]:
        """One page of ``query`` (the :class:`~tablesdk._queries._query.QuerySource` protocol).

        A point query for a missing entity is an empty page; a missing table raises.
        """
        return self._run(self._f_execute_query_segment(query, continuation_token, top), query.request_options)

    def fetch_query_segment(
        self, query: TableQuery[E], continuation_token: ContinuationToken | None, top: int | None
    ) -> FetchedPage:
        """The HTTP stage of :meth:`execute_query_segment`: the page's answer, not decoded, and the next
        page's token (:class:`~tablesdk._queries._query.PagedQuerySource`; safe on any thread)."""
        return self._run(self._f_fetch_page(query, continuation_token, top, True, False, None), query.request_options)

    def decode_query_segment(self, query: TableQuery[E], fetched: FetchedPage) -> ResultSegment[E]:
        """The decode stage of :meth:`execute_query_segment`: the entities of ``fetched``."""
        return self._decode_segment(query, fetched)

    # ------------------------------------------------------------ entity operations

    def execute_operation(
        self,
        operation: BatchOperation,
        *,
        retry_policy: RetryPolicy | None = None,
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
        request_hook: RequestHook | None = None,
    ) -> BatchOperationResult:
        """Send one entity operation as its own request.

        Operations on keys the URL path cannot carry go out as a one-operation
        entity group transaction instead (same semantics, different address).
        Under client-side encryption the payload is encrypted by the call's resolver (an
        operation carries no entity class, so no ``Encrypted[...]`` fields) unless it is
        encrypted already; a retrieved entity is decrypted.
        """
        return self._run(self._f_execute_operation(
            self._encrypted_operations([operation], options)[0], retry_policy, operation_context, request_hook,
        ), options)

    def execute_batch(
        self,
        operations: Sequence[BatchOperation],
        *,
        retry_policy: RetryPolicy | None = None,
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
        request_hook: RequestHook | None = None,
    ) -> list[BatchOperationResult]:
        """Send ``operations`` as one entity group transaction (all or nothing).

        Limits are checked before sending. A refused transaction raises
        :class:`~tablesdk._core._errors.BatchError` with the failing operation's index.
        """
        return self._run(self._f_execute_batch(
            self._encrypted_operations(operations, options), retry_policy, operation_context, request_hook,
        ), options)

    def bulk_insert(
        self,
        table_name: str,
        entities: Iterable[EntityObject],
        mode: BulkMode = "insert",
        max_workers: int = 8,
        progress: ProgressCallback | None = None,
        *,
        retry_policy: RetryPolicy | None = None,
        options: TableRequestOptions | None = None,
    ) -> BulkResult:
        """Write many entities, any partitions, as concurrent entity group transactions.

        ``entities`` is any iterable of entities (a generator is read once, lazily), or a
        pandas DataFrame or ``pyarrow.Table`` whose rows are written (as :meth:`write_pandas`
        and :meth:`write_arrow` write them). ``mode``: ``"insert"`` (409 if the entity
        exists), ``"merge"`` (insert or merge) or ``"replace"`` (insert or replace).
        ``max_workers`` batches run at once on threads (capped at the client's ``pool_size``,
        with a RuntimeWarning). ``progress(done, total)`` is called on the calling thread after
        each batch. Every request is sent with ``options``; ``retry_policy`` wins over theirs,
        which win over the client's. Per-entity outcomes are in the result's ``succeeded`` and
        ``failed``; it raises only for bad arguments, before any request. See docs/batch.md.
        """
        from .._bulk_loading._bulk import BulkOptions, insert_entities, is_column_data  # loads with its first call (start-up)

        bulk = BulkOptions.threads(max_workers, progress, retry_policy, options)
        if is_column_data(entities):
            from .._columns._arrow_write import column_rows

            entities = column_rows(entities)
        return insert_entities(self, table_name, entities, mode, bulk)

    def delete_entities(
        self,
        table_name: str,
        filter: FilterLike | None = None,
        *,
        parameters: Mapping[str, object] | None = None,
        conditional: bool = False,
        max_workers: int = 8,
        progress: ProgressCallback | None = None,
        retry_policy: RetryPolicy | None = None,
        options: TableRequestOptions | None = None,
    ) -> BulkResult:
        """Delete every entity of ``table_name`` matching ``filter`` (every entity when None);
        ``parameters`` bind the ``@name`` of raw filter text (:meth:`TableQuery.where`).

        The table is scanned for keys only, and the entities are deleted as entity group
        transactions per partition (up to 100 each) by the engine of :meth:`bulk_insert`,
        with its parameters and its rules. Deletes are unconditional unless
        ``conditional``: then each carries the ETag the scan read, and an entity changed
        since fails with :class:`~tablesdk.PreconditionFailedError`. One
        :class:`~tablesdk.EntityOutcome` per entity scanned (an entity already gone
        counts as deleted); ``progress(done, None)`` after each batch, on the calling
        thread. Errors of the scan (a missing table) raise.
        """
        from .._bulk_loading._bulk import BulkOptions
        from .._bulk_loading._deleting import delete_entities

        bulk = BulkOptions.threads(max_workers, progress, retry_policy, options)
        return delete_entities(self, table_name, filter, conditional, bulk, parameters)

    def count_entities(
        self,
        table_name: str,
        filter: FilterLike | None = None,
        *,
        parameters: Mapping[str, object] | None = None,
        progress: ProgressCallback | None = None,
        options: TableRequestOptions | None = None,
    ) -> int:
        """How many entities of ``table_name`` match ``filter`` (all when None), reading only
        their keys (``$select=RowKey``); ``progress(counted, None)`` after each page.
        ``parameters`` bind the ``@name`` of raw filter text (:meth:`TableQuery.where`)."""
        from .._bulk_loading._deleting import count_entities

        return count_entities(self, table_name, filter, parameters=parameters, progress=progress, options=options)

    def write_arrow(
        self,
        table_name: str,
        data: Any,
        mode: BulkMode = "insert",
        *,
        edm_types: Mapping[str, EdmType] | None = None,
        max_workers: int = 8,
        progress: ProgressCallback | None = None,
        retry_policy: RetryPolicy | None = None,
        options: TableRequestOptions | None = None,
    ) -> BulkResult:
        """Write each row of ``data`` (a ``pyarrow.Table`` or ``RecordBatch``) as an entity, with :meth:`bulk_insert`.

        PartitionKey and RowKey columns (strings, no nulls) are required; each other column's EDM
        type follows its Arrow type (int64: Int64, int32: Int32, float64: Double, bool: Boolean,
        timestamp: DateTime, string: String, binary: Binary, arrow.uuid: Guid; a field's
        ``tablesdk.edm_type`` metadata, as ``to_arrow`` writes it, or ``edm_types`` override that).
        Every value must be exactly a value of its column's EDM type (an Int32 in range, a Guid from
        canonical text, 16 bytes or arrow.uuid, a timestamp on 100 ns ticks...): else
        :class:`TableValidationError` names the column and row before anything is sent. Nulls are
        left out of the entity; Timestamp and ``odata.etag`` columns are not written. The other
        parameters and the :class:`BulkResult` are :meth:`bulk_insert`'s. See docs/data.md.
        """
        from .._columns._arrow_write import arrow_rows
        from .._bulk_loading._bulk import BulkOptions, insert_entities

        bulk = BulkOptions.threads(max_workers, progress, retry_policy, options)
        return insert_entities(self, table_name, arrow_rows(data, edm_types), mode, bulk)

    def write_pandas(
        self,
        table_name: str,
        frame: Any,
        mode: BulkMode = "insert",
        *,
        edm_types: Mapping[str, EdmType] | None = None,
        max_workers: int = 8,
        progress: ProgressCallback | None = None,
        retry_policy: RetryPolicy | None = None,
        options: TableRequestOptions | None = None,
    ) -> BulkResult:
        """:meth:`write_arrow` of a pandas DataFrame (a named index such as PartitionKey is a column)."""
        from .._columns._arrow_write import arrow_rows, pandas_to_arrow
        from .._bulk_loading._bulk import BulkOptions, insert_entities

        bulk = BulkOptions.threads(max_workers, progress, retry_policy, options)
        return insert_entities(self, table_name, arrow_rows(pandas_to_arrow(frame), edm_types), mode, bulk)

    # ------------------------------------------------------------ conveniences

    @overload
    def get_entity(
        self, table_name: str, partition_key: str, row_key: str,
        *, select: Sequence[str] | None = None,
        operation_context: OperationContext | None = None, options: TableRequestOptions | None = None,
    ) -> DynamicEntity: ...

    @overload
    def get_entity(
        self, table_name: str, partition_key: str, row_key: str, entity_type: type[E],
        *, select: Sequence[str] | None = None,
        operation_context: OperationContext | None = None, options: TableRequestOptions | None = None,
    ) -> E: ...

    def get_entity(
        self, table_name: str, partition_key: str, row_key: str, entity_type: type[Any] = DynamicEntity,
        *, select: Sequence[str] | None = None,
        operation_context: OperationContext | None = None, options: TableRequestOptions | None = None,
    ) -> Any:
        """One entity by its keys, materialised as ``entity_type`` (untracked)."""
        return self._run(
            self._f_get_entity(table_name, partition_key, row_key, entity_type, select, operation_context, options),
            options
        )

    def insert_entity(
        self, table_name: str, entity: EntityObject,
        *, operation_context: OperationContext | None = None, options: TableRequestOptions | None = None
    ) -> str | None:
        """Insert one entity; returns its new ETag (also set on ``entity.etag``)."""
        return self._run(self._f_write(BatchOperationKind.INSERT, table_name, entity, None, operation_context, options), options)

    def update_entity(
        self,
        table_name: str,
        entity: EntityObject,
        *,
        mode: str = "merge",
        etag: str | None = None,
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
    ) -> str | None:
        """Merge (default) or replace an existing entity, conditional on ``etag``.

        ``etag`` defaults to ``entity.etag``; pass ``"*"`` for an unconditional write.
        """
        return self._run(self._f_update_entity(table_name, entity, mode, etag, operation_context, options), options)

    def upsert_entity(
        self,
        table_name: str,
        entity: EntityObject,
        *,
        mode: str = "merge",
        operation_context: OperationContext | None = None,
        options: TableRequestOptions | None = None,
    ) -> str | None:
        """Insert or merge (default) / insert or replace an entity."""
        return self._run(self._f_upsert_entity(table_name, entity, mode, operation_context, options), options)

    def delete_entity(
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
        """Delete an entity, conditional on its ETag, like :meth:`update_entity`.

        ``delete_entity(table, entity)`` takes the keys from ``entity`` and sends
        ``If-Match: entity.etag`` (or ``etag``); ``etag="*"`` deletes whatever the
        stored version. By keys: ``delete_entity(table, partition_key=..., row_key=...,
        etag=...)``, where ``etag`` is required (``"*"`` for an unconditional delete).
        """
        self._run(self._f_delete_entity(table_name, entity, partition_key, row_key, etag, operation_context), options)


# One span per operation when the application configured OpenTelemetry (tablesdk._core._tracing).
trace_public_methods(CloudTableClient, skip=frozenset({"create_query", "get_table_reference", "get_table_service_context", "executor", "close", "decode_query_segment"}))
