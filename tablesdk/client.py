"""``CloudTableClient``: table operations, single-entity operations and queries.

The client owns one :class:`~tablesdk.transport.Transport` (one pooled HTTP
session) and one payload format. Single-entity operations are described with
the same :class:`~tablesdk.batch.BatchOperation` records that entity group
transactions use, so the context can send its pending changes either way.

Keys the URL path cannot carry are handled transparently, as the Azure Storage team's blog advises
(the '%' double-decoding bug and HTTP.sys's 260-character URI segment limit):
a point read uses the ``$filter`` form of Query Entities, and a write goes out
as an entity group transaction holding that one operation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, overload
from urllib.parse import quote

from ._version import __version__
from .batch import (
    BatchAnswer,
    BatchOperation,
    BatchOperationKind,
    BatchOperationResult,
    build_batch_request,
    entity_path,
    supports_prefer,
)
from .auth import MIN_TOKEN_VERSION, BearerTokenCredential
from .bulk import BulkMode, BulkResult, ProgressCallback, bulk_insert
from .edm import EntityPayload
from .entity import AnyEntity, DynamicEntity, E, TableEntity, entity_from_payload, entity_to_payload, validate_key, validate_table_name
from .errors import BatchError, ConflictError, ContinuationCycleError, ResourceNotFoundError, TableServiceError, error_for_status
from .filter import FilterLike, as_filter, prop, render_filter
from .formats import PayloadFormat, decoded as _decoded, get_format, parse_error_body, require_keys
from .query import ContinuationToken, ResultSegment, TableQuery
from .retry import ExponentialRetry, RetryPolicy
from .http import DEFAULT_MAX_RESPONSE_BYTES, Sender
from .service import (
    AccessPolicy,
    ServiceProperties,
    ServiceStats,
    parse_acl,
    parse_service_properties,
    parse_service_stats,
    serialize_acl,
    serialize_service_properties,
)
from .transport import DEFAULT_TIMEOUT, HttpResponse, OperationContext, Timeout, Transport

if TYPE_CHECKING:
    from .account import CloudStorageAccount
    from .context import TableServiceContext

__all__ = ["CloudTableClient", "SendingRequest", "RequestHook", "MAX_URI_SEGMENT_LENGTH", "LOCATION_MODES"]

#: Where reads go: the primary only (default), the primary with retries alternating to the
#: read-only secondary of an RA-GRS account, or the secondary only. Writes always go to the primary.
LOCATION_MODES = ("primary_only", "primary_then_secondary", "secondary_only")

_READ_METHODS = frozenset({"GET", "HEAD"})


#: HTTP.sys refuses URI path segments longer than this (white paper section 2).
MAX_URI_SEGMENT_LENGTH = 260



@dataclass
class SendingRequest:
    """A request about to be signed and sent, as a ``sending_request`` hook sees it.

    Hooks may add or change ``headers`` (the Storage Client Library adds ``x-ms-version`` this way);
    the request is signed after the hooks run.
    """

    method: str
    url: str
    headers: dict[str, str]


RequestHook = Callable[[SendingRequest], None]


def _query_string(params: Sequence[tuple[str, str]]) -> str:
    return "&".join(f"{name}={quote(value, safe='')}" for name, value in params)


def path_can_carry_keys(table_name: str, partition_key: str, row_key: str) -> bool:
    """Whether the entity's keys can be addressed in the URL path.

    False for keys containing '%' (the service decodes the path twice) and for
    paths whose entity segment exceeds :data:`MAX_URI_SEGMENT_LENGTH`.
    """
    if "%" in partition_key or "%" in row_key:
        return False
    return len(entity_path(table_name, partition_key, row_key)) <= MAX_URI_SEGMENT_LENGTH


class CloudTableClient:
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
    :class:`~tablesdk.http.Sender`, e.g. a :class:`~tablesdk.http.MockSender`
    in tests); by default a :class:`~tablesdk.http.RequestsSender` with
    ``pool_size`` connections per host that reads at most
    ``max_response_bytes`` of any response body.

    ``location_mode`` (settable) sends reads of an RA-GRS account to its
    read-only secondary endpoint: ``"primary_only"`` (default),
    ``"primary_then_secondary"`` (first attempt on the primary, retries
    alternating between the two, as the Microsoft clients do) or
    ``"secondary_only"``. Writes always go to the primary.
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
    ) -> None:
        options: dict[str, Any] = {"metadata": json_metadata} if payload_format == "json" else {}
        self._format: PayloadFormat = get_format(payload_format, **options)
        self.account = account
        self.table_endpoint = account.table_endpoint.rstrip("/")
        self.api_version = api_version or self._format.default_api_version
        _check_token_credential(account, self._format.name, self.api_version)
        self.echo_content = echo_content
        self.operation_deadline = operation_deadline
        self._transport = Transport(
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
        self._executor: Executor | None = None
        self._executor_lock = threading.Lock()
        self._location_mode = "primary_only"
        self.location_mode = location_mode

    # ------------------------------------------------------------ properties

    @property
    def location_mode(self) -> str:
        """Where reads go: one of :data:`LOCATION_MODES`."""
        return self._location_mode

    @location_mode.setter
    def location_mode(self, mode: str) -> None:
        if mode not in LOCATION_MODES:
            raise ValueError(f"location_mode must be one of {', '.join(LOCATION_MODES)}; got {mode!r}")
        if mode != "primary_only":
            self.account.secondary_table_endpoint  # noqa: B018 - raises when the endpoint has no secondary
        self._location_mode = mode

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
    def transport(self) -> Transport:
        """The transport that sends this client's requests."""
        return self._transport

    def __repr__(self) -> str:
        return (
            f"CloudTableClient(endpoint={self.table_endpoint!r}, payload_format={self.payload_format!r}, "
            f"api_version={self.api_version!r})"
        )

    # ------------------------------------------------------------ plumbing

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
        url = f"{endpoint or self.table_endpoint}/{path}"
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
        locations = self._read_locations(method, url) if endpoint is None else ()
        return self._transport.send(
            method,
            url,
            headers=all_headers,
            body=body,
            retry_policy=retry_policy,
            deadline=self.operation_deadline,
            operation_context=operation_context,
            locations=locations,
            check=check,
            read_only=read_only,
        )

    def _read_locations(self, method: str, url: str) -> tuple[str, ...]:
        """The endpoints a read's attempts cycle through under the location mode (none: primary only)."""
        if self._location_mode == "primary_only" or method.upper() not in _READ_METHODS:
            return ()
        if not url.startswith(self.table_endpoint + "/"):
            return ()  # a hook sent it elsewhere
        secondary = self.account.secondary_table_endpoint + url[len(self.table_endpoint):]
        if self._location_mode == "secondary_only":
            return (secondary,)
        return (url, secondary)

    def _prefer_headers(self, echo_content: bool | None) -> dict[str, str]:
        echo = self.echo_content if echo_content is None else echo_content
        if not self._prefer_supported:
            return {}
        return {"Prefer": "return-content" if echo else "return-no-content"}

    def executor(self) -> Executor:
        """A small thread pool owned by this client (for ``begin_*`` operations)."""
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="tablesdk")
            return self._executor

    def close(self) -> None:
        """Release the connection pool and the executor."""
        self._transport.close()
        if self._executor is not None:
            self._executor.shutdown(wait=False)

    def __enter__(self) -> CloudTableClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ tables

    def create_table(self, table_name: str, *, operation_context: OperationContext | None = None) -> None:
        """Create a table; raises :class:`ConflictError` (TableAlreadyExists) if it exists."""
        validate_table_name(table_name)
        self._send(
            "POST", "Tables", body=self._format.serialize_table(table_name),
            headers=self._prefer_headers(False), operation_context=operation_context,
        )

    def create_table_if_not_exists(
        self, table_name: str, *, operation_context: OperationContext | None = None
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
        try:
            self.create_table(table_name, operation_context=operation_context)
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

    def delete_table(self, table_name: str, *, operation_context: OperationContext | None = None) -> None:
        """Delete a table; raises :class:`ResourceNotFoundError` if it does not exist."""
        validate_table_name(table_name)
        self._send("DELETE", f"Tables('{table_name}')", operation_context=operation_context)

    def delete_table_if_exists(
        self, table_name: str, *, operation_context: OperationContext | None = None
    ) -> bool:
        """Delete a table if it exists; True when this call deleted it."""
        try:
            self.delete_table(table_name, operation_context=operation_context)
        except ResourceNotFoundError as exc:
            if exc.ambiguous_retry:  # our own lost first attempt may have deleted it: don't guess
                raise
            return False
        return True

    def table_exists(self, table_name: str, *, operation_context: OperationContext | None = None) -> bool:
        """Whether the table exists."""
        validate_table_name(table_name)
        try:
            self._send("GET", f"Tables('{table_name}')", operation_context=operation_context)
        except ResourceNotFoundError:
            return False
        return True

    def list_tables(
        self,
        prefix: str | None = None,
        *,
        filter: FilterLike | None = None,
        page_size: int | None = None,
        operation_context: OperationContext | None = None,
    ) -> Iterator[str]:
        """Yield table names, following continuation (NextTableName) lazily.

        ``prefix`` keeps names starting with it (case-sensitive, as the
        service compares); ``filter`` is an OData filter on ``TableName``
        (``prop("TableName") >= "b"`` or raw text such as ``"TableName eq 'x'"``);
        both may be given and must both hold. ``page_size`` is the ``$top`` of
        each request.
        """
        token: ContinuationToken | None = None
        seen: set[str] = set()
        while True:
            segment = self.list_tables_segmented(
                token, prefix=prefix, filter=filter, max_results=page_size, operation_context=operation_context
            )
            yield from segment.results
            token = segment.continuation_token
            if token is None:
                return
            next_name = token.next_table_name or ""
            if next_name in seen:  # listing only moves forward: a repeat is a cycle
                raise ContinuationCycleError(
                    f"the service sent NextTableName {next_name!r} twice in one listing; "
                    "stopping instead of listing the same tables forever",
                    token=next_name,
                )
            seen.add(next_name)

    def list_tables_segmented(
        self,
        token: ContinuationToken | None = None,
        *,
        prefix: str | None = None,
        filter: FilterLike | None = None,
        max_results: int | None = None,
        operation_context: OperationContext | None = None,
    ) -> ResultSegment[str]:
        """One page of Query Tables: the names and the token of the next page (None on the last).

        The token carries the service's NextTableName; it survives
        :meth:`ContinuationToken.to_string` / :meth:`ContinuationToken.from_string`,
        so a page can be resumed later (with the same ``prefix`` and ``filter``).
        ``max_results`` is 1-1000 (the service's page limit, its default).
        """
        if max_results is not None and (
            isinstance(max_results, bool) or not isinstance(max_results, int) or not 1 <= max_results <= 1000
        ):
            raise ValueError(f"max_results must be an int from 1 to 1000, got {max_results!r}")
        if token is not None and token.next_table_name is None:
            raise ValueError("this continuation token belongs to an entity query, not to table listing")
        params: list[tuple[str, str]] = []
        text = _table_filter(prefix, filter)
        if text:
            params.append(("$filter", text))
        if max_results is not None:
            params.append(("$top", str(max_results)))
        if token is not None and token.next_table_name:
            params.append(("NextTableName", token.next_table_name))
        response = self._send("GET", "Tables", query=params, operation_context=operation_context)
        names = _decoded(response, self._format.parse_tables)
        next_name = response.headers.get("x-ms-continuation-NextTableName")
        return ResultSegment(names, ContinuationToken(next_table_name=next_name) if next_name else None)

    # ------------------------------------------------------------ access policies, service level

    def get_table_acl(
        self, table_name: str, *, operation_context: OperationContext | None = None
    ) -> dict[str, AccessPolicy]:
        """The table's stored access policies (Get Table ACL), by policy id."""
        validate_table_name(table_name)
        response = self._send(
            "GET", table_name, query=[("comp", "acl")], operation_context=operation_context
        )
        return parse_acl(response.body)

    def set_table_acl(
        self,
        table_name: str,
        policies: dict[str, AccessPolicy],
        *,
        operation_context: OperationContext | None = None,
    ) -> None:
        """Replace the table's stored access policies (Set Table ACL); ``{}`` removes them all.

        At most 5 policies, ids of 1-64 characters, permissions from ``"raud"``:
        checked before sending. A SAS naming a removed policy stops working.
        """
        validate_table_name(table_name)
        body = serialize_acl(policies)
        self._send(
            "PUT", table_name, query=[("comp", "acl")], body=body,
            headers={"Content-Type": "application/xml"}, operation_context=operation_context,
        )

    def get_service_properties(self, *, operation_context: OperationContext | None = None) -> ServiceProperties:
        """The Table service's analytics logging, hour and minute metrics and CORS rules."""
        response = self._send(
            "GET", "", query=[("restype", "service"), ("comp", "properties")], operation_context=operation_context
        )
        return parse_service_properties(response.body)

    def set_service_properties(
        self, properties: ServiceProperties, *, operation_context: OperationContext | None = None
    ) -> None:
        """Set the Table service's properties; sections left None keep their current values.

        The service's limits (5 CORS rules, 64 origins, 64 + 2 headers, 2 KiB of
        CORS settings, retention 1-365 days) are checked before sending.
        """
        body = serialize_service_properties(properties)
        self._send(
            "PUT", "", query=[("restype", "service"), ("comp", "properties")], body=body,
            headers={"Content-Type": "application/xml"}, operation_context=operation_context,
        )

    def get_service_stats(self, *, operation_context: OperationContext | None = None) -> ServiceStats:
        """Geo-replication status and last sync time, from the account's secondary endpoint.

        Only RA-GRS accounts have a readable secondary; on others the request fails.
        """
        response = self._send(
            "GET", "", query=[("restype", "service"), ("comp", "stats")],
            operation_context=operation_context, endpoint=self.account.secondary_table_endpoint,
        )
        return parse_service_stats(response.body)

    # ------------------------------------------------------------ queries

    @overload
    def create_query(self, table_name: str) -> TableQuery[DynamicEntity]: ...

    @overload
    def create_query(self, table_name: str, entity_type: type[E]) -> TableQuery[E]: ...

    def create_query(self, table_name: str, entity_type: type[Any] = DynamicEntity) -> TableQuery[Any]:
        """A query over ``table_name`` materialising ``entity_type`` (no tracking).

        Typed by the entity class: ``create_query("Blogs", Blog)`` is a ``TableQuery[Blog]``;
        without a class it is a ``TableQuery[DynamicEntity]``.
        """
        validate_table_name(table_name)
        return TableQuery(self, table_name, entity_type)

    def get_table_service_context(self, **options: Any) -> TableServiceContext:
        """A new :class:`~tablesdk.context.TableServiceContext` bound to this client."""
        from .context import TableServiceContext

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
        response = self._send(
            "GET", f"{table_name}()", query=params,
            retry_policy=retry_policy, operation_context=operation_context, request_hook=request_hook,
        )
        payloads = _decoded(response, lambda body: require_keys(self._format.parse_entities(body), body))
        npk = response.headers.get("x-ms-continuation-NextPartitionKey")
        nrk = response.headers.get("x-ms-continuation-NextRowKey")
        token = ContinuationToken(next_partition_key=npk, next_row_key=nrk) if (npk or nrk) else None
        return payloads, token

    def get_entity_payload(
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
        """One entity by its keys; raises :class:`ResourceNotFoundError` if absent.

        Keys the URL path cannot carry are looked up with a ``$filter`` query.
        """
        validate_key("PartitionKey", partition_key)
        validate_key("RowKey", row_key)
        if not path_can_carry_keys(table_name, partition_key, row_key):
            from .filter import prop

            expr = (prop("PartitionKey") == partition_key) & (prop("RowKey") == row_key)
            payloads, _ = self.query_entity_payloads(
                table_name, filter=expr.render(), select=select,
                retry_policy=retry_policy, operation_context=operation_context, request_hook=request_hook,
            )
            if not payloads:
                raise ResourceNotFoundError(
                    "The specified resource does not exist.", status_code=404, error_code="ResourceNotFound"
                )
            return payloads[0]
        params = [("$select", ",".join(_with_keys(select)))] if select else []
        response = self._send(
            "GET", entity_path(table_name, partition_key, row_key), query=params,
            retry_policy=retry_policy, operation_context=operation_context, request_hook=request_hook,
        )
        return _decoded(response, lambda body: _one_entity(self._format, body, response.etag))

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
        keys = query.point_keys()
        if keys is not None and continuation_token is None:
            try:
                payload = self.get_entity_payload(
                    query.table, keys[0], keys[1], select=query.select_columns, request_hook=request_hook
                )
            except ResourceNotFoundError as exc:
                missing_table = exc.error_code == "TableNotFound"
                if ignore_missing_table if missing_table else ignore_missing_entity:
                    return [], None
                raise
            return [payload], None
        return self.query_entity_payloads(
            query.table, filter=query.filter_string(), select=query.select_columns,
            top=top, continuation_token=continuation_token, request_hook=request_hook,
        )

    def execute_query_segment(
        self, query: TableQuery[E], continuation_token: ContinuationToken | None, top: int | None
    ) -> ResultSegment[E]:
        """One page of ``query`` (the :class:`~tablesdk.query.QuerySource` protocol).

        A point query for a missing entity is an empty page; a missing table raises.
        """
        payloads, token = self.query_page_payloads(query, continuation_token, top, ignore_missing_entity=True)
        entity_type = query.entity_type
        return ResultSegment([entity_from_payload(entity_type, p) for p in payloads], token)

    # ------------------------------------------------------------ entity operations

    def execute_operation(
        self,
        operation: BatchOperation,
        *,
        retry_policy: RetryPolicy | None = None,
        operation_context: OperationContext | None = None,
        request_hook: RequestHook | None = None,
    ) -> BatchOperationResult:
        """Send one entity operation as its own request.

        Operations on keys the URL path cannot carry go out as a one-operation
        entity group transaction instead (same semantics, different address).
        """
        kind = operation.kind
        if kind is not BatchOperationKind.INSERT and not path_can_carry_keys(
            operation.table, operation.partition_key, operation.row_key
        ):
            if kind is BatchOperationKind.RETRIEVE:
                payload = self.get_entity_payload(
                    operation.table, operation.partition_key, operation.row_key,
                    retry_policy=retry_policy, operation_context=operation_context, request_hook=request_hook,
                )
                return BatchOperationResult(0, 200, payload.etag, payload, {})
            try:
                return self.execute_batch(
                    [operation], retry_policy=retry_policy, operation_context=operation_context,
                    request_hook=request_hook,
                )[0]
            except BatchError as exc:
                # One operation: fail exactly as the direct request would (404, 409, 412 ...).
                raise (exc.cause or exc) from exc
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
        response = self._send(
            kind.method, path, headers=headers, body=body,
            retry_policy=retry_policy, operation_context=operation_context, request_hook=request_hook,
        )
        payload_out: EntityPayload | None = None
        if response.body and response.status in (200, 201):
            payload_out = _decoded(response, lambda body: _one_entity(self._format, body, response.etag))
        etag = response.etag or (payload_out.etag if payload_out else None)
        return BatchOperationResult(0, response.status, etag, payload_out, dict(response.headers))

    def execute_batch(
        self,
        operations: Sequence[BatchOperation],
        *,
        retry_policy: RetryPolicy | None = None,
        operation_context: OperationContext | None = None,
        request_hook: RequestHook | None = None,
    ) -> list[BatchOperationResult]:
        """Send ``operations`` as one entity group transaction (all or nothing).

        Limits are checked before sending. A refused transaction raises
        :class:`~tablesdk.errors.BatchError` with the failing operation's index.

        This is the one place that decides whether a refused change set is sent
        again: a refusal inside the ``202`` is classified by the retry policy like
        any other answer (a change set refused 503 ServerBusy or 500 is retried,
        a 409 is not), so ``save_changes_with_retries`` and ``bulk_insert`` behave
        alike. A refusal with 404, 409 or 412 after an attempt whose outcome was
        unknown, and an answer whose parts do not match the operations, have
        ``ambiguous_retry`` set: the whole transaction may have been applied.
        """
        body, content_type = build_batch_request(  # validates the batch first
            self.table_endpoint, operations, self._format, api_version=self.api_version
        )
        answer = BatchAnswer(operations, self._format)
        self._send(
            "POST", "$batch", headers={"Content-Type": content_type}, body=body,
            retry_policy=retry_policy, operation_context=operation_context, request_hook=request_hook,
            check=answer, read_only=answer.read_only,
        )
        return answer.results

    def bulk_insert(
        self,
        table_name: str,
        entities: Iterable[TableEntity | DynamicEntity],
        mode: BulkMode = "insert",
        max_workers: int = 8,
        progress: ProgressCallback | None = None,
        *,
        retry_policy: RetryPolicy | None = None,
    ) -> BulkResult:
        """Write many entities, any partitions, as concurrent entity group transactions.

        ``mode``: ``"insert"`` (409 if the entity exists), ``"merge"`` (insert or
        merge) or ``"replace"`` (insert or replace). Per-entity outcomes are in
        the result's ``succeeded`` and ``failed``; see :func:`tablesdk.bulk.bulk_insert`.
        """
        return bulk_insert(
            self, table_name, entities, mode, max_workers, progress, retry_policy=retry_policy
        )

    # ------------------------------------------------------------ conveniences

    @overload
    def get_entity(
        self, table_name: str, partition_key: str, row_key: str,
        *, select: Sequence[str] | None = None, operation_context: OperationContext | None = None,
    ) -> DynamicEntity: ...

    @overload
    def get_entity(
        self, table_name: str, partition_key: str, row_key: str, entity_type: type[E],
        *, select: Sequence[str] | None = None, operation_context: OperationContext | None = None,
    ) -> E: ...

    def get_entity(
        self, table_name: str, partition_key: str, row_key: str, entity_type: type[Any] = DynamicEntity,
        *, select: Sequence[str] | None = None, operation_context: OperationContext | None = None,
    ) -> AnyEntity:
        """One entity by its keys, materialised as ``entity_type`` (untracked)."""
        payload = self.get_entity_payload(
            table_name, partition_key, row_key, select=select, operation_context=operation_context
        )
        entity: AnyEntity = entity_from_payload(entity_type, payload)
        return entity

    def insert_entity(
        self, table_name: str, entity: TableEntity | DynamicEntity, *, operation_context: OperationContext | None = None
    ) -> str | None:
        """Insert one entity; returns its new ETag (also set on ``entity.etag``)."""
        return self._write(BatchOperationKind.INSERT, table_name, entity, None, operation_context)

    def update_entity(
        self,
        table_name: str,
        entity: TableEntity | DynamicEntity,
        *,
        mode: str = "merge",
        etag: str | None = None,
        operation_context: OperationContext | None = None,
    ) -> str | None:
        """Merge (default) or replace an existing entity, conditional on ``etag``.

        ``etag`` defaults to ``entity.etag``; pass ``"*"`` for an unconditional write.
        """
        kind = {"merge": BatchOperationKind.MERGE, "replace": BatchOperationKind.UPDATE}.get(mode)
        if kind is None:
            raise ValueError(f"mode must be 'merge' or 'replace', not {mode!r}")
        return self._write(kind, table_name, entity, etag or entity.etag, operation_context)

    def upsert_entity(
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
        return self._write(kind, table_name, entity, None, operation_context)

    def delete_entity(
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
        self.execute_operation(
            BatchOperation(BatchOperationKind.DELETE, table_name, partition_key, row_key, None, etag),
            operation_context=operation_context,
        )

    def _write(
        self,
        kind: BatchOperationKind,
        table_name: str,
        entity: TableEntity | DynamicEntity,
        etag: str | None,
        operation_context: OperationContext | None,
    ) -> str | None:
        validate_table_name(table_name)
        payload = entity_to_payload(entity)
        result = self.execute_operation(
            BatchOperation(kind, table_name, payload.values["PartitionKey"], payload.values["RowKey"], payload, etag),
            operation_context=operation_context,
        )
        if result.etag:
            entity.etag = result.etag
        return result.etag


def _one_entity(fmt: PayloadFormat, body: bytes, etag: str | None) -> EntityPayload:
    return require_keys([fmt.parse_entity(body, etag)], body)[0]


def _with_keys(select: Iterable[str]) -> list[str]:
    """A projection always brings back the keys and Timestamp, so results stay addressable."""
    names = list(select)
    for system in ("PartitionKey", "RowKey", "Timestamp"):
        if system not in names:
            names.append(system)
    return names


def _table_filter(prefix: str | None, filter: FilterLike | None) -> str | None:
    """The Query Tables ``$filter`` for a name prefix and/or a filter on TableName."""
    parts = []
    if prefix:
        parts.append(prop("TableName").startswith(prefix))
    if filter is not None:
        parts.append(as_filter(filter))
    if not parts:
        return None
    return render_filter(parts[0] if len(parts) == 1 else parts[0] & parts[1])


def _check_token_credential(account: CloudStorageAccount, payload_format: str, api_version: str) -> None:
    """An Entra ID token is accepted from 2019-02-02 on, which is JSON-only: refuse what cannot work."""
    if not isinstance(account.credential, BearerTokenCredential):
        return
    if payload_format != "json":
        raise ValueError(
            "payload_format='atom' cannot be used with a token credential: the service accepts "
            f"Entra ID tokens from version {MIN_TOKEN_VERSION} on, and those versions speak JSON only"
        )
    if api_version < MIN_TOKEN_VERSION:
        raise ValueError(
            f"api_version {api_version} cannot be used with a token credential: the service accepts "
            f"Entra ID tokens from version {MIN_TOKEN_VERSION} on"
        )


def _error_from_response(response: HttpResponse) -> TableServiceError:
    code, message = parse_error_body(response.body, response.headers.get("Content-Type"))
    header_code = response.headers.get("x-ms-error-code")
    return error_for_status(
        response.status,
        header_code or code,
        message or f"HTTP {response.status} with no error body",
        request_id=response.request_id,
    )
