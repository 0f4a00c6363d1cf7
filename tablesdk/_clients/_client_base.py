"""What the flows of a client stand on: its options and how its requests are built.

:class:`ClientBase` holds the account, the payload format, the API version, the request
headers, the request settings and the location mode; the flows (``_table_flows.py``,
``_query_flows.py``, ``_batch_flows.py``, ``_entity_flows.py``) are written on it and
:class:`~tablesdk._clients._operations.ClientCore` joins them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

from .._core._auth import check_token_credential, require_credential
from .._core._cosmos import COSMOS_MAX_BATCH_BYTES, check_cosmos_write, cosmos_unsupported
from .._formats._batch import MAX_BATCH_BYTES, BatchOperation, BatchOperationKind, supports_prefer
from .._entities._entity import encrypted_names
from .._core._errors import TableValidationError, require_positive_seconds
from .._formats import PayloadFormat, get_format
from .._pipeline._http import HttpResponse, SendingRequest
from .._pipeline._options import TableRequestOptions
from .._pipeline._retry import RetryPolicy
from .._pipeline._settings import RequestSettings, check_retry_policy

from ._flows import Call, query_string

if TYPE_CHECKING:
    from .._core._account import CloudStorageAccount
    from .._encryption import TableEncryptionPolicy
    from ._encryption_scope import EncryptionScope


_READ_METHODS = frozenset({"GET", "HEAD"})


class ClientBase:
    """What the sync and async clients share besides the flows: options and request building.

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


def _scope_of(settings: RequestSettings, entity_type: Any = None) -> EncryptionScope | None:
    """The client-side encryption of a call sent with ``settings`` (``_encryption_scope.scope_of``),
    told without loading the engine when the call has none."""
    if settings.encryption_policy is None and not settings.require_encryption and (
        settings.encryption_resolver is None and (entity_type is None or not encrypted_names(entity_type))
    ):
        return None
    from ._encryption_scope import scope_of

    return scope_of(settings, entity_type)
