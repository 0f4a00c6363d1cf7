"""The Table service operations, written once for the thread-blocking and the asyncio client.

Each operation is a generator (a *flow*) that yields the :class:`Call` it needs
sent and receives the answer (an :class:`~tablesdk._pipeline._http.HttpResponse`) at the
``yield``, or the error that sending raised, thrown in there. A flow checks its
arguments, builds each request, parses each answer and decides what a failure
means (a point read that falls back to ``$filter``, a write that goes out as a
one-operation batch, "if not exists" conflicts); it does no I/O and never
waits. :class:`~tablesdk._clients._client.CloudTableClient` runs flows with
:func:`run_flow` over its :class:`~tablesdk._pipeline._transport.Transport`, and
:class:`~tablesdk.aio.AsyncCloudTableClient` with :func:`arun_flow` over its
asyncio transport: the same code, only sending and waiting differ.

:class:`ClientCore` holds what both clients share besides: the account, the
payload format, the API version, the request headers, the location mode and
the flows themselves.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import quote

from .._core._auth import check_token_credential, require_credential
from .._core._cosmos import (
    COSMOS_MAX_BATCH_BYTES, CosmosTimestampFilterWarning, check_cosmos_batch_size, check_cosmos_write, cosmos_unsupported,
    filter_names_timestamp, timestamp_filter_message,
)
from .._formats._batch import (
    MAX_BATCH_BYTES,
    BatchOperation,
    BatchOperationKind,
    BatchOperationResult,
    build_batch_request,
    entity_path,
    operation_request,
    prefer_value,
    supports_prefer,
)
from .._entities._edm import EntityPage, EntityPayload
from .._entities._entity import (
    AnyEntity,
    E,
    EntityObject,
    entity_from_payload,
    entity_to_payload,
    encrypted_names,
    validate_key,
    validate_table_name,
)
from .._entities._entity_access import check_entity, entity_etag, entity_keys, set_entity_etag
from .._core._errors import (
    BatchError,
    ConflictError,
    ResourceNotFoundError,
    ResponseDecodeError,
    TableErrorCode,
    TableServiceError,
    TableValidationError,
    error_for_status,
    require_positive_seconds,
    warn_the_caller,
)
from .._entities._filter import FilterLike, as_filter, prop, render_filter
from .._formats import (
    PayloadFormat, decoded, decoding, get_format, parse_error_body, require_entity, require_keys, require_page_keys,
)
from .._formats.errors import body_excerpt
from .._pipeline._http import HttpResponse, RequestHook, SendingRequest
from .._pipeline._options import LOCATION_MODES, TableRequestOptions
from .._queries._query import ContinuationToken, FetchedPage, ResultSegment, TableQuery, with_keys
from .._pipeline._retry import RetryPolicy
from .._pipeline._settings import RequestSettings, check_retry_policy
from .._core._tracing import annotate
from .._pipeline._transport import OperationContext

if TYPE_CHECKING:
    from .._core._account import CloudStorageAccount
    from .._encryption import TableEncryptionPolicy
    from ._encryption_scope import EncryptionScope
    from ._service import AccessPolicy, ServiceProperties, ServiceStats

__all__ = [
    "Call",
    "Flow",
    "ClientCore",
    "run_flow",
    "arun_flow",
    "LOCATION_MODES",
    "MAX_URI_SEGMENT_LENGTH",
]

T = TypeVar("T")

#: HTTP.sys refuses URI path segments longer than this (white paper section 2).
MAX_URI_SEGMENT_LENGTH = 260

_READ_METHODS = frozenset({"GET", "HEAD"})


#: The SDK's own errors: the flow runners raise them afresh from the caller's call (a bug keeps every frame).
RAISED_FROM_THE_CALL = (TableServiceError, TableValidationError)


class Call:
    """One request a flow needs sent: what the client's transport gets, before hooks and signing."""

    # A plain class, not a dataclass: each dataclass costs ``import tablesdk`` about 0.5 ms (start-up).

    __slots__ = (
        "method", "path", "query", "headers", "body", "retry_policy", "operation_context", "request_hook",
        "endpoint", "check", "read_only", "pinned", "options",
    )

    def __init__(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]] = (),
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        retry_policy: RetryPolicy | None = None,
        operation_context: OperationContext | None = None,
        request_hook: RequestHook | None = None,
        endpoint: str | None = None,
        check: Callable[[HttpResponse], None] | None = None,
        read_only: bool = False,
        pinned: str | None = None,
        options: TableRequestOptions | None = None,
    ) -> None:
        self.method = method
        self.path = path
        self.query = query
        self.headers: dict[str, str] = {} if headers is None else headers
        self.body = body
        self.retry_policy = retry_policy
        self.operation_context = operation_context
        self.request_hook = request_hook
        self.endpoint = endpoint  # another endpoint than the table endpoint (the secondary, for stats)
        self.check = check  # may refuse a 2xx (a batch's change set)
        self.read_only = read_only  # a POST that changes nothing (a point query in a $batch)
        self.pinned = pinned  # "primary"/"secondary": where the continuation token being followed came from
        self.options = options  # the call's overrides of the client's defaults (set by run_flow)

    def __repr__(self) -> str:
        return f"Call({self.method} {self.path!r})"


#: An operation: yields the calls it needs, receives their answers, returns its result.
Flow = Generator[Call, HttpResponse, T]


def _with_options(call: Call, options: TableRequestOptions | None) -> Call:
    """``call`` carrying the operation's request options (a call that has its own keeps them).

    The flow keeps the call it yielded, so after the ``yield`` it can see which options
    were in force (the location mode decides whether a continuation token is pinned)."""
    if call.options is None:
        call.options = options
    return call


def run_flow(
    flow: Flow[T], send: Callable[[Call], HttpResponse], options: TableRequestOptions | None = None
) -> T:
    """Run ``flow`` to its result, sending each call with ``send`` (errors are thrown into the flow).

    ``options`` go on every call of the flow: one operation, one set of request options."""
    try:
        call = next(flow)
        while True:
            try:
                response = send(_with_options(call, options))
            except Exception as exc:  # noqa: BLE001 - the flow decides; it re-raises what it does not handle
                call = flow.throw(exc)
            else:
                call = flow.send(response)
    except StopIteration as done:
        result: T = done.value
        return result
    except RAISED_FROM_THE_CALL as error:
        raise error.with_traceback(None)  # the transport's and the generators' frames are plumbing


async def arun_flow(
    flow: Flow[T], send: Callable[[Call], Awaitable[HttpResponse]], options: TableRequestOptions | None = None
) -> T:
    """:func:`run_flow` for an awaitable ``send``. Cancellation is not thrown into the flow:
    it leaves the operation where it was."""
    try:
        call = next(flow)
        while True:
            try:
                response = await send(_with_options(call, options))
            except Exception as exc:  # noqa: BLE001 - the flow decides; it re-raises what it does not handle
                call = flow.throw(exc)
            else:
                call = flow.send(response)
    except StopIteration as done:
        result: T = done.value
        return result
    except RAISED_FROM_THE_CALL as error:
        raise error.with_traceback(None)  # the transport's and the generators' frames are plumbing
    finally:
        flow.close()


def query_string(params: Sequence[tuple[str, str]]) -> str:
    """``name=value&...`` with every value percent-encoded."""
    return "&".join(f"{name}={quote(value, safe='')}" for name, value in params)


def path_can_carry_keys(table_name: str, partition_key: str, row_key: str) -> bool:
    """Whether the entity's keys can be addressed in the URL path.

    False for keys containing '%' (the service decodes the path twice) and for
    paths whose entity segment exceeds :data:`MAX_URI_SEGMENT_LENGTH`.
    """
    if "%" in partition_key or "%" in row_key:
        return False
    return len(entity_path(table_name, partition_key, row_key)) <= MAX_URI_SEGMENT_LENGTH


def _not_found() -> ResourceNotFoundError:
    return ResourceNotFoundError("The specified resource does not exist.", status_code=404, error_code=TableErrorCode.RESOURCE_NOT_FOUND.value)


class ClientCore:
    """What the sync and async clients share: options, request building and the operation flows.

    See :class:`~tablesdk._clients._client.CloudTableClient` for the options. The client's request
    settings are one frozen :class:`~tablesdk._pipeline._settings.RequestSettings`, held here and
    handed, merged with each call's options (:meth:`_settings_for`), to the transport of
    either flavour with every request; the settable ``retry_policy``,
    ``operation_deadline`` and ``location_mode`` replace it with a changed copy.
    """

    def __init__(
        self,
        account: CloudStorageAccount,
        *,
        payload_format: str,
        api_version: str | None,
        settings: RequestSettings,
        json_metadata: str,
        echo_content: bool,
    ) -> None:
        options: dict[str, Any] = {"metadata": json_metadata} if payload_format == "json" else {}
        self._format: PayloadFormat = get_format(payload_format, **options)
        #: Whether this client talks to Cosmos DB's Table API (the account decides; see docs/cosmos.md).
        self.is_cosmos = account.is_cosmos
        if self.is_cosmos and self._format.name != "json":
            raise TableValidationError(
                "payload_format", "Cosmos DB's Table API speaks JSON only (it refuses Atom)",
                f"got {payload_format!r}: leave payload_format at 'json', the default",
            )
        require_credential(account.credential, account.account_name)
        self.account = account
        self.table_endpoint = account.table_endpoint.rstrip("/")
        self.api_version = api_version or self._format.default_api_version
        check_token_credential(account.credential, self._format.name, self.api_version)
        self.echo_content = echo_content
        self._base_headers = {"x-ms-version": self.api_version, **self._format.request_headers()}
        self._prefer_supported = supports_prefer(self.api_version)
        self._check_secondary(settings.location_mode)
        self._settings = settings

    # ------------------------------------------------------------ properties

    @property
    def retry_policy(self) -> RetryPolicy:
        """The default retry policy of every operation of this client (settable)."""
        return self._settings.retry_policy

    @retry_policy.setter
    def retry_policy(self, policy: RetryPolicy) -> None:
        self._settings = self._settings.replace(retry_policy=check_retry_policy(policy))

    @property
    def operation_deadline(self) -> float | None:
        """Seconds each request may take across all its retries, or None (settable)."""
        return self._settings.deadline

    @operation_deadline.setter
    def operation_deadline(self, seconds: float | None) -> None:
        if seconds is not None:
            require_positive_seconds("operation_deadline", seconds)
        self._settings = self._settings.replace(deadline=seconds)

    @property
    def location_mode(self) -> str:
        """Where reads go: one of :data:`LOCATION_MODES` (settable)."""
        return self._settings.location_mode

    @location_mode.setter
    def location_mode(self, mode: str) -> None:
        settings = self._settings.replace(location_mode=mode)
        self._check_secondary(mode)
        self._settings = settings

    def _check_secondary(self, mode: str) -> None:
        if mode != "primary_only":
            if self.is_cosmos:
                raise TableValidationError(
                    "location_mode", "Cosmos DB's Table API has no read-only secondary endpoint: leave it at "
                    "'primary_only' (Cosmos DB replicates to the account's regions and routes reads itself)",
                    repr(mode),
                )
            self.account.secondary_table_endpoint  # noqa: B018 - raises when the endpoint has no secondary

    @property
    def encryption_policy(self) -> TableEncryptionPolicy | None:
        """The client-side encryption of every operation of this client (a
        :class:`~tablesdk.TableEncryptionPolicy`), or None (settable; a call's
        ``TableRequestOptions(encryption_policy=...)`` overrides it)."""
        policy: Any = self._settings.encryption_policy
        return cast("TableEncryptionPolicy | None", policy)

    @encryption_policy.setter
    def encryption_policy(self, policy: TableEncryptionPolicy | None) -> None:
        self._settings = self._settings.replace(encryption_policy=policy)

    def _encryption(self, options: TableRequestOptions | None, entity_type: Any = None) -> EncryptionScope | None:
        """The client-side encryption of a call made with ``options`` (None: none), for entities of
        ``entity_type`` (a class with ``Encrypted[...]`` fields always has one, which refuses to read
        them without a policy)."""
        return _scope_of(self._settings.merged(options), entity_type)

    @property
    def payload_format(self) -> str:
        """``"json"`` or ``"atom"``."""
        return self._format.name

    @property
    def format(self) -> PayloadFormat:
        """The codec of :attr:`payload_format`."""
        return self._format

    @property
    def max_batch_bytes(self) -> int:
        """The largest ``$batch`` body the service takes: 4 MiB, or 2 MB for Cosmos DB."""
        return COSMOS_MAX_BATCH_BYTES if self.is_cosmos else MAX_BATCH_BYTES

    def _check_writes(self, operations: Iterable[BatchOperation]) -> None:
        """Refuse, before anything is sent, a write the service would refuse by limits of its own
        (Cosmos DB's; nothing more for Azure Storage, whose rules every payload already met)."""
        if self.is_cosmos:
            for op in operations:
                if op.kind is not BatchOperationKind.RETRIEVE:
                    names = op.payload.values if op.payload is not None else ()
                    check_cosmos_write(op.partition_key, op.row_key, names)

    def _refuse_on_cosmos(self, operation: str) -> None:
        if self.is_cosmos:
            raise cosmos_unsupported(operation)

    # ------------------------------------------------------------ requests

    def _settings_for(self, call: Call) -> RequestSettings:
        """The request settings of ``call``: the client's, merged with the call's options and its
        explicit ``retry_policy=`` (:meth:`RequestSettings.merged`, the one place they meet)."""
        return self._settings.merged(call.options, call.retry_policy)

    def _http_parts(self, call: Call, settings: RequestSettings) -> tuple[str, dict[str, str], tuple[str, ...]]:
        """The URL, headers and read locations of ``call`` (sent with ``settings``), after the request hook ran."""
        url = f"{call.endpoint or self.table_endpoint}/{call.path}"
        if call.query:
            url += "?" + query_string(call.query)
        headers = dict(self._base_headers)
        if call.body is not None:
            headers["Content-Type"] = self._format.content_type
        headers.update(call.headers)
        if call.request_hook is not None:
            request = SendingRequest(call.method, url, headers)
            call.request_hook(request)
            url, headers = request.url, request.headers
        locations = (
            self._read_locations(call.method, url, call.pinned, settings.location_mode) if call.endpoint is None else ()
        )
        return url, headers, locations

    def _read_locations(
        self, method: str, url: str, pinned: str | None = None, mode: str | None = None
    ) -> tuple[str, ...]:
        """The endpoints a read's attempts cycle through under the location mode (none: primary only).

        ``pinned`` is the location a continuation token came from: the next page is read there.
        ``mode`` is the call's location mode (default: the client's).
        """
        mode = {"primary": "primary_only", "secondary": "secondary_only"}.get(pinned or "", mode or self.location_mode)
        if mode == "primary_only" or method.upper() not in _READ_METHODS:
            return ()
        self._check_secondary(mode)  # a call's options may ask for a secondary Cosmos DB does not have
        if not url.startswith(self.table_endpoint + "/"):
            return ()  # a hook sent it elsewhere
        secondary = self.account.secondary_table_endpoint + url[len(self.table_endpoint):]
        if mode == "secondary_only":
            return (secondary,)
        return (url, secondary)

    def _answered_from(self, response: HttpResponse, call: Call) -> str | None:
        """Which endpoint answered ``call``, a read, for its continuation token (None: no location mode in use)."""
        if self._settings_for(call).location_mode == "primary_only":
            return None
        return "secondary" if response.url.startswith(self.account.secondary_table_endpoint + "/") else "primary"

    def _prefer_headers(self, echo_content: bool | None) -> dict[str, str]:
        echo = self.echo_content if echo_content is None else echo_content
        if not self._prefer_supported:
            return {}
        return {"Prefer": "return-content" if echo else "return-no-content"}

    # ------------------------------------------------------------ tables

    def _f_create_table(self, table_name: str, operation_context: OperationContext | None) -> Flow[None]:
        validate_table_name(table_name, cosmos=self.is_cosmos)
        yield Call(
            "POST", "Tables", body=self._format.serialize_table(table_name),
            headers=self._prefer_headers(False), operation_context=operation_context,
        )

    def _f_create_table_if_not_exists(self, table_name: str, operation_context: OperationContext | None) -> Flow[bool]:
        try:
            yield from self._f_create_table(table_name, operation_context)
        except ConflictError as exc:
            if exc.ambiguous_retry:  # our own lost first attempt may have created it: don't guess
                raise
            if exc.error_code == TableErrorCode.TABLE_BEING_DELETED:
                exc.message = (
                    f"table {table_name!r} is being deleted; it cannot be created until the "
                    f"service finishes (retry after some seconds): {exc.message}"
                )
                raise
            return False
        return True

    def _f_delete_table(self, table_name: str, operation_context: OperationContext | None) -> Flow[None]:
        validate_table_name(table_name, cosmos=self.is_cosmos)
        yield Call("DELETE", f"Tables('{table_name}')", operation_context=operation_context)

    def _f_delete_table_if_exists(self, table_name: str, operation_context: OperationContext | None) -> Flow[bool]:
        try:
            yield from self._f_delete_table(table_name, operation_context)
        except ResourceNotFoundError as exc:
            if exc.ambiguous_retry:  # our own lost first attempt may have deleted it: don't guess
                raise
            return False
        return True

    def _f_table_exists(self, table_name: str, operation_context: OperationContext | None) -> Flow[bool]:
        validate_table_name(table_name, cosmos=self.is_cosmos)
        try:
            yield Call("GET", f"Tables('{table_name}')", operation_context=operation_context)
        except ResourceNotFoundError:
            return False
        return True

    def _f_list_tables_segmented(
        self,
        token: ContinuationToken | None,
        prefix: str | None,
        filter: FilterLike | None,
        max_results: int | None,
        operation_context: OperationContext | None,
    ) -> Flow[ResultSegment[str]]:
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
        call = Call("GET", "Tables", query=params, operation_context=operation_context,
                    pinned=token.target_location if token is not None else None)
        response = yield call
        names = decoded(response, self._format.parse_tables)
        next_name = response.headers.get("x-ms-continuation-NextTableName")
        if not next_name:
            return ResultSegment(names, None)
        return ResultSegment(names, ContinuationToken(next_table_name=next_name,
                                                      target_location=self._answered_from(response, call)))

    # ------------------------------------------------------------ access policies, service level

    def _f_get_table_acl(
        self, table_name: str, operation_context: OperationContext | None
    ) -> Flow[dict[str, AccessPolicy]]:
        from ._service import parse_acl  # the service-level XML loads with its first call (start-up)

        validate_table_name(table_name, cosmos=self.is_cosmos)
        self._refuse_on_cosmos("get_table_acl")
        response = yield Call("GET", table_name, query=[("comp", "acl")], operation_context=operation_context)
        return decoded(response, decoding(parse_acl))

    def _f_set_table_acl(
        self, table_name: str, policies: dict[str, AccessPolicy], operation_context: OperationContext | None
    ) -> Flow[None]:
        from ._service import serialize_acl

        validate_table_name(table_name, cosmos=self.is_cosmos)
        self._refuse_on_cosmos("set_table_acl")
        body = serialize_acl(policies)
        yield Call(
            "PUT", table_name, query=[("comp", "acl")], body=body,
            headers={"Content-Type": "application/xml"}, operation_context=operation_context,
        )

    def _f_get_service_properties(self, operation_context: OperationContext | None) -> Flow[ServiceProperties]:
        from ._service import parse_service_properties

        self._refuse_on_cosmos("get_service_properties")
        response = yield Call(
            "GET", "", query=[("restype", "service"), ("comp", "properties")], operation_context=operation_context
        )
        return decoded(response, decoding(parse_service_properties))

    def _f_set_service_properties(
        self, properties: ServiceProperties, operation_context: OperationContext | None
    ) -> Flow[None]:
        from ._service import serialize_service_properties

        self._refuse_on_cosmos("set_service_properties")
        body = serialize_service_properties(properties)
        yield Call(
            "PUT", "", query=[("restype", "service"), ("comp", "properties")], body=body,
            headers={"Content-Type": "application/xml"}, operation_context=operation_context,
        )

    def _f_get_service_stats(self, operation_context: OperationContext | None) -> Flow[ServiceStats]:
        from ._service import parse_service_stats

        self._refuse_on_cosmos("get_service_stats")
        response = yield Call(
            "GET", "", query=[("restype", "service"), ("comp", "stats")],
            operation_context=operation_context, endpoint=self.account.secondary_table_endpoint,
        )
        return decoded(response, decoding(parse_service_stats))

    # ------------------------------------------------------------ queries

    def _f_page_payloads(
        self, fetching: Flow[FetchedPage]
    ) -> Flow[tuple[list[EntityPayload], ContinuationToken | None]]:
        """A page as payloads with the next page's token: the HTTP stage ``fetching``
        (:meth:`_f_fetch_entity_page` or :meth:`_f_fetch_page`), then its decode."""
        fetched = yield from fetching
        return self._decode_page(fetched).payloads(), fetched.continuation_token

    def _f_fetch_entity_page(
        self,
        table_name: str,
        filter: str | None,
        select: Sequence[str] | None,
        top: int | None,
        continuation_token: ContinuationToken | None,
        retry_policy: RetryPolicy | None,
        operation_context: OperationContext | None,
        request_hook: RequestHook | None,
        *,
        select_text: str | None = None,
        options: TableRequestOptions | None = None,
        entity_type: Any = None,
    ) -> Flow[FetchedPage]:
        """The HTTP stage of one Query Entities page: the answer, its body not decoded, and the
        next page's token (from the headers, so the next request can start before decoding).
        ``select_text``: the ``$select`` of ``select`` made already (a compiled query's).
        ``options``: the call's request options (their encryption adds the metadata properties to a
        projection), ``entity_type`` the class the entities are read into."""
        params: list[tuple[str, str]] = []
        if filter:
            params.append(("$filter", filter))
            if self.is_cosmos and filter_names_timestamp(filter):
                warn_the_caller(timestamp_filter_message(filter), CosmosTimestampFilterWarning)
        if top is not None:
            params.append(("$top", str(top)))
        if select:
            projection = None if _keys_only(select) else self._encryption(options, entity_type)
            if projection is not None and projection.reads_metadata:
                select_text = ",".join(projection.with_metadata_columns(_with_keys(select)))
            params.append(("$select", select_text or ",".join(_with_keys(select))))
        if continuation_token is not None:
            if continuation_token.next_partition_key is not None:
                params.append(("NextPartitionKey", continuation_token.next_partition_key))
            if continuation_token.next_row_key is not None:
                params.append(("NextRowKey", continuation_token.next_row_key))
        call = Call(
            "GET", f"{table_name}()", query=params,
            retry_policy=retry_policy, operation_context=operation_context, request_hook=request_hook,
            pinned=continuation_token.target_location if continuation_token is not None else None,
        )
        response = yield call
        npk = response.headers.get("x-ms-continuation-NextPartitionKey")
        nrk = response.headers.get("x-ms-continuation-NextRowKey")
        token = None
        if npk or nrk:
            token = ContinuationToken(next_partition_key=npk, next_row_key=nrk,
                                      target_location=self._answered_from(response, call))
        return FetchedPage(
            token, response, selected=tuple(select) if select else None,
            encryption=None if select and _keys_only(select) else _scope_of(self._settings_for(call), entity_type),
        )

    def _decode_page(self, fetched: FetchedPage) -> EntityPage:
        """The decode stage of a page: its entities read from the body (no I/O; the caller's thread)."""
        response = fetched.response
        if response is None:
            assert fetched.page is not None, "a FetchedPage holds a response or a page"
            return fetched.page
        page = decoded(
            response, lambda body: require_page_keys(self._format.parse_entity_page(body), body, fetched.selected)
        )
        encryption: EncryptionScope | None = fetched.encryption
        return page if encryption is None else encryption.decrypt_page(page)

    def _f_get_entity_payload(
        self,
        table_name: str,
        partition_key: str,
        row_key: str,
        select: Sequence[str] | None,
        retry_policy: RetryPolicy | None,
        operation_context: OperationContext | None,
        request_hook: RequestHook | None,
        *,
        options: TableRequestOptions | None = None,
        entity_type: Any = None,
    ) -> Flow[EntityPayload]:
        """The entity of these keys as a payload, decrypted by the call's encryption (``options``,
        the client's default; ``entity_type`` the class it is read into)."""
        validate_key("PartitionKey", partition_key)
        validate_key("RowKey", row_key)
        if not path_can_carry_keys(table_name, partition_key, row_key):
            expr = (prop("PartitionKey") == partition_key) & (prop("RowKey") == row_key)
            fetched = yield from self._f_fetch_entity_page(
                table_name, expr.render(), select, None, None, retry_policy, operation_context, request_hook,
                options=options, entity_type=entity_type,
            )

            def the_entity(body: bytes) -> EntityPayload | None:
                payloads = self._decode_page(fetched).payloads()
                if len(payloads) > 1:
                    raise ResponseDecodeError(
                        f"{len(payloads)} entities answered a query for one pair of keys", excerpt=body_excerpt(body)
                    )
                return require_entity(payloads[0], partition_key, row_key, body) if payloads else None

            assert fetched.response is not None
            found = decoded(fetched.response, the_entity)
            if found is None:
                raise _not_found()
            return found
        projection = _with_keys(select) if select else ()
        if projection and not _keys_only(projection):
            reading = self._encryption(options, entity_type)
            if reading is not None and reading.reads_metadata:
                projection = reading.with_metadata_columns(projection)
        params = [("$select", ",".join(projection))] if projection else []
        call = Call(
            "GET", entity_path(table_name, partition_key, row_key), query=params,
            retry_policy=retry_policy, operation_context=operation_context, request_hook=request_hook,
        )
        response = yield call
        payload = decoded(response, lambda body: require_entity(
            _one_entity(self._format, body, response.etag, select), partition_key, row_key, body
        ))
        encryption = None if projection and _keys_only(projection) else _scope_of(self._settings_for(call), entity_type)
        return payload if encryption is None else encryption.decrypt(payload)

    def _f_fetch_page(
        self,
        query: TableQuery[Any],
        continuation_token: ContinuationToken | None,
        top: int | None,
        ignore_missing_entity: bool,
        ignore_missing_table: bool,
        request_hook: RequestHook | None,
    ) -> Flow[FetchedPage]:
        """The HTTP stage of one page of ``query`` (see :meth:`_f_fetch_entity_page`).

        A point query is one request with no continuation: its entity is read
        here and the page comes back already decoded.
        """
        compiled = query.compiled()
        keys = compiled.point_keys
        if keys is not None and continuation_token is None:
            try:
                payload = yield from self._f_get_entity_payload(
                    query.table, keys[0], keys[1], query.select_columns, None, None, request_hook,
                    options=query.request_options, entity_type=query.entity_type,
                )
            except ResourceNotFoundError as exc:
                missing_table = exc.error_code == TableErrorCode.TABLE_NOT_FOUND
                if ignore_missing_table if missing_table else ignore_missing_entity:
                    return FetchedPage(None, page=EntityPage.of([]))
                raise
            return FetchedPage(None, page=EntityPage.of([payload]))
        return (yield from self._f_fetch_entity_page(
            query.table, compiled.filter_text, query.select_columns, top, continuation_token, None, None,
            request_hook, select_text=compiled.select_text, options=query.request_options,
            entity_type=query.entity_type,
        ))

    def _f_execute_query_segment(
        self, query: TableQuery[E], continuation_token: ContinuationToken | None, top: int | None
    ) -> Flow[ResultSegment[E]]:
        fetched = yield from self._f_fetch_page(query, continuation_token, top, True, False, None)
        return self._decode_segment(query, fetched)

    def _decode_segment(self, query: TableQuery[E], fetched: FetchedPage) -> ResultSegment[E]:
        """The decode stage of a client query's page: untracked entities of the query's class."""
        return ResultSegment(query.compiled().read(self._decode_page(fetched)), fetched.continuation_token)

    # ------------------------------------------------------------ entity operations

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

    def _f_execute_batch(
        self,
        operations: Sequence[BatchOperation],
        retry_policy: RetryPolicy | None,
        operation_context: OperationContext | None,
        request_hook: RequestHook | None,
    ) -> Flow[list[BatchOperationResult]]:
        self._check_writes(operations)
        body, content_type = build_batch_request(  # validates the batch first
            self.table_endpoint, operations, self._format, api_version=self.api_version
        )
        if self.is_cosmos:
            check_cosmos_batch_size(len(body))
        # The answer is parsed by the transport's check, so that a change set refused inside
        # the 202 is retried and flagged ambiguous by the retry loop like any error answer.
        from .._formats._batch_answer import BatchAnswer  # with the first batch, not by ``import tablesdk`` (start-up)

        answer = BatchAnswer(operations, self._format)
        annotate({"tablesdk.batch.operation_count": len(operations)})
        call = Call(
            "POST", "$batch", headers={"Content-Type": content_type}, body=body,
            retry_policy=retry_policy, operation_context=operation_context, request_hook=request_hook,
            check=answer, read_only=answer.read_only,
        )
        try:
            yield call
        except BatchError as error:
            annotate({"tablesdk.batch.failed_index": error.failed_index})
            raise
        results = answer.results
        encryption = _scope_of(self._settings_for(call))
        if encryption is not None:  # a point query's entity, an insert's echo
            for result in results:
                if result.payload is not None:
                    result.payload = encryption.decrypt(result.payload)
        return results

    def _encrypted_operations(
        self, operations: Sequence[BatchOperation], options: TableRequestOptions | None
    ) -> Sequence[BatchOperation]:
        """``operations`` (built by the caller) encrypted by the client-side encryption of a call
        with ``options``; an operation whose payload is encrypted already is sent as it is."""
        encryption = self._encryption(options)
        if encryption is None:
            return operations
        return [encryption.encrypt_operation(operation) for operation in operations]

    # ------------------------------------------------------------ conveniences

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


def _one_entity(
    fmt: PayloadFormat, body: bytes, etag: str | None, selected: Sequence[str] | None = None
) -> EntityPayload:
    return require_keys([fmt.parse_entity(body, etag)], body, selected)[0]


def _with_keys(select: Iterable[str]) -> tuple[str, ...]:
    """A projection always brings back the keys and Timestamp, so results stay addressable."""
    return with_keys(tuple(select))


def _scope_of(settings: RequestSettings, entity_type: Any = None) -> EncryptionScope | None:
    """The client-side encryption of a call sent with ``settings`` (``_encryption_scope.scope_of``),
    told without loading the engine when the call has none."""
    if settings.encryption_policy is None and not settings.require_encryption and (
        settings.encryption_resolver is None and (entity_type is None or not encrypted_names(entity_type))
    ):
        return None
    from ._encryption_scope import scope_of

    return scope_of(settings, entity_type)


def _keys_only(select: Iterable[str]) -> bool:
    """Whether a projection reads only the keys and Timestamp: nothing encrypted can be in it (a
    key scan of a delete or count needs neither the metadata nor a key)."""
    return all(name in _SYSTEM_NAMES for name in select)


_SYSTEM_NAMES = frozenset({"PartitionKey", "RowKey", "Timestamp"})


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


def error_from_response(response: HttpResponse) -> TableServiceError:
    """The per-status error of an answer with status >= 300 (the transport's ``error_parser``)."""
    code, message = parse_error_body(response.body, response.headers.get("Content-Type"), response.attempt_secrets)
    header_code = response.headers.get("x-ms-error-code")
    return error_for_status(
        response.status,
        header_code or code,
        message or f"HTTP {response.status} with no error body",
        request_id=response.request_id,
    )
