"""Storage accounts: connection strings, table endpoints and development storage.

:class:`CloudStorageAccount` reads the usual connection-string forms::

    DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=<base64>[;EndpointSuffix=core.windows.net]
    AccountName=acct;AccountKey=<base64>;TableEndpoint=https://custom.example/acct
    AccountName=acct;SharedAccessSignature=sv=...&sig=...
    TableEndpoint=https://acct.table.core.windows.net;SharedAccessSignature=sv=...&sig=...
    UseDevelopmentStorage=true[;DevelopmentStorageProxyUri=http://proxy]

Keys are matched without regard to case; unknown keys, duplicate keys, empty
values and contradictory combinations raise :class:`ValueError` naming the key
(never quoting a secret). ``BlobEndpoint``, ``QueueEndpoint`` and
``FileEndpoint`` are accepted and ignored, so that complete storage
connection strings (Azurite prints one) can be used as they are.

``CloudStorageAccount.parse(str(account)) == account`` holds for every form.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ._auth import (
    BearerTokenCredential,
    SasCredential,
    SharedKeyCredential,
    TableCredential,
    TokenCredential,
    _check_account_name,
    _KeyCredential,
    with_token_audience,
)
from ._cosmos import is_cosmos_endpoint

if TYPE_CHECKING:
    # client.py is written in parallel; "unused-ignore" keeps this line clean once it lands.
    from .._clients._client import CloudTableClient  # type: ignore[import-not-found, unused-ignore]
    from ..aio import AsyncCloudTableClient

__all__ = [
    "CloudStorageAccount",
    "DEVSTORE_ACCOUNT_NAME",
    "DEVSTORE_ACCOUNT_KEY",
    "DEVSTORE_TABLE_PORT",
    "DEFAULT_ENDPOINT_SUFFIX",
]

#: The emulator's single, fixed account name.
DEVSTORE_ACCOUNT_NAME = "devstoreaccount1"
#: The emulator's well-known account key (public; not a secret).
DEVSTORE_ACCOUNT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
#: The port of the emulator's table service.
DEVSTORE_TABLE_PORT = 10002
#: The host suffix of the public Azure cloud.
DEFAULT_ENDPOINT_SUFFIX = "core.windows.net"

_DEVSTORE_HOST = "127.0.0.1"

# Canonical spelling of every key understood, by lower-cased name.
_KEYS = {
    name.lower(): name
    for name in (
        "DefaultEndpointsProtocol",
        "AccountName",
        "AccountKey",
        "TableEndpoint",
        "EndpointSuffix",
        "SharedAccessSignature",
        "UseDevelopmentStorage",
        "DevelopmentStorageProxyUri",
        "BlobEndpoint",
        "QueueEndpoint",
        "FileEndpoint",
    )
}
_IGNORED_KEYS = {"BlobEndpoint", "QueueEndpoint", "FileEndpoint"}
_DEVSTORE_KEYS = {"UseDevelopmentStorage", "DevelopmentStorageProxyUri"}


def _endpoint_url(value: str, field: str) -> str:
    """Validate an http(s) URL with a host and no query; drop the trailing slash."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        raise ValueError(f"{field}: is not a valid URL") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{field}: must be an http or https URL with a host")
    if parts.query or parts.fragment:
        raise ValueError(f"{field}: must not have a query string or fragment")
    return value.rstrip("/")


def _name_from_endpoint(endpoint: str) -> str | None:
    """The account name a table endpoint implies, or None when it implies none.

    A path-style URL (``http://127.0.0.1:10002/devstoreaccount1``) names the
    account in its first path segment; otherwise the host's first label does
    (``acct.table.core.windows.net``), unless the host is an IP address or a
    single label such as ``localhost``.
    """
    parts = urlsplit(endpoint)
    segment = parts.path.strip("/").split("/", 1)[0]
    if segment:
        return segment
    host = parts.hostname or ""
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    if "." not in host:
        return None
    return host.split(".", 1)[0]


def _split(connection_string: str) -> dict[str, str]:
    """Split ``k=v;k=v`` into canonical key -> value, checking each key."""
    if not isinstance(connection_string, str):
        raise ValueError("connection string: must be a str")
    settings: dict[str, str] = {}
    for index, segment in enumerate(connection_string.split(";"), start=1):
        if not segment.strip():
            continue  # trailing ';' and blank segments are tolerated
        raw_key, sep, raw_value = segment.partition("=")
        key = raw_key.strip()
        if not sep:
            # Name the segment only when it looks like a key, never a stray secret.
            label = repr(key) if key.lower() in _KEYS else f"segment {index}"
            raise ValueError(f"connection string: {label} is not of the form Key=Value")
        canonical = _KEYS.get(key.lower())
        if canonical is None:
            shown = repr(key) if len(key) <= 64 and key.isidentifier() else f"in segment {index}"
            raise ValueError(f"connection string: unknown key {shown}")
        if canonical in settings:
            raise ValueError(f"connection string: duplicate key {canonical!r}")
        value = raw_value.strip()
        if not value:
            raise ValueError(f"connection string: {canonical} has an empty value")
        settings[canonical] = value
    if not settings:
        raise ValueError("connection string: is empty")
    return settings


def _wants_development_storage(settings: dict[str, str]) -> bool:
    """Whether the settings ask for the emulator; its keys admit no others."""
    if "UseDevelopmentStorage" in settings:
        if settings["UseDevelopmentStorage"].lower() != "true":
            raise ValueError("connection string: UseDevelopmentStorage must be 'true'")
        others = sorted(set(settings) - _DEVSTORE_KEYS)
        if others:
            raise ValueError(
                "connection string: UseDevelopmentStorage cannot be combined with "
                + ", ".join(others)
            )
        return True
    if "DevelopmentStorageProxyUri" in settings:
        raise ValueError(
            "connection string: DevelopmentStorageProxyUri requires UseDevelopmentStorage=true"
        )
    return False


def _protocol_and_suffix(settings: dict[str, str]) -> tuple[str | None, str | None]:
    """``DefaultEndpointsProtocol`` (lower-cased) and ``EndpointSuffix``, checked."""
    protocol = settings.get("DefaultEndpointsProtocol")
    if protocol is not None:
        protocol = protocol.lower()
        if protocol not in ("http", "https"):
            raise ValueError("connection string: DefaultEndpointsProtocol must be 'http' or 'https'")
    suffix = settings.get("EndpointSuffix")
    # The suffix is joined to "<account>.table." to form a host, so it cannot carry a scheme or path.
    if suffix is not None and ("/" in suffix or ":" in suffix or suffix.startswith(".")):
        raise ValueError("connection string: EndpointSuffix must be a host suffix such as core.windows.net")
    return protocol, suffix


def _account_name(name: str | None, endpoint: str | None, key: str | None) -> str:
    """The account name given, else the one the table endpoint implies.

    Shared Key signs with the account name, so with an ``AccountKey`` the name
    must be given rather than guessed from the endpoint.
    """
    if name is None and endpoint is not None and key is None:
        name = _name_from_endpoint(endpoint)
    if name is None:
        raise ValueError(
            "connection string: AccountName is required"
            + (" with AccountKey" if key is not None else "")
        )
    return name


def _credential(name: str, key: str | None, sas: str | None) -> TableCredential | None:
    """The Shared Key or SAS credential the settings carry, or None for anonymous access."""
    if key is not None:
        try:
            if not base64.b64decode(key, validate=True):
                raise ValueError
        except (binascii.Error, ValueError):
            raise ValueError("connection string: AccountKey is not valid base64") from None
        return SharedKeyCredential(name, key)
    if sas is not None:
        try:
            return SasCredential(sas)
        except ValueError:
            raise ValueError(
                "connection string: SharedAccessSignature is not a SAS token (no 'sig' field)"
            ) from None
    return None


class CloudStorageAccount:
    """A storage account's table endpoint and credential.

    ``account_name`` names the account (it is part of every signature),
    ``table_endpoint`` is the table service URL without a trailing slash
    (host-style ``https://acct.table.core.windows.net`` or path-style
    ``http://127.0.0.1:10002/devstoreaccount1``), and ``credential`` signs
    requests (None for anonymous access). Besides a
    :class:`~tablesdk._core._auth.TableCredential`, ``credential`` may be any object
    with ``get_token(*scopes)`` (an azure-identity credential, say): it is
    wrapped in a :class:`~tablesdk._core._auth.BearerTokenCredential` and requests
    carry an Entra ID token, of scope ``https://storage.azure.com/.default`` unless
    ``token_audience`` names another audience (the scope is then ``<audience>/.default``:
    ``https://cosmos.azure.com`` for Cosmos DB's Table API, a sovereign cloud's storage
    audience); ``token_audience`` with any other credential is refused.

    ``cosmos`` says whether the endpoint is Azure Cosmos DB's Table API: ``None`` (default)
    recognises it from the endpoint (``*.table.cosmos.azure.com``,
    ``*.table.cosmosdb.azure.com``, the Cosmos DB emulator on ``localhost:8081`` or its
    well-known key); ``True`` or ``False`` decide for an endpoint that cannot tell (a custom
    domain). Clients of a Cosmos DB account follow its documented differences (docs/cosmos.md).
    A connection string cannot say ``cosmos=``: pass it to :meth:`parse` again (it is not part of
    the equality of two accounts, which compares what a connection string holds).

    The keyword-only fields record how a connection string described the
    account, so that :meth:`to_connection_string` gives back an equivalent one.
    """

    __slots__ = (
        "_account_name",
        "_table_endpoint",
        "_credential",
        "_protocol",
        "_endpoint_suffix",
        "_use_development_storage",
        "_proxy_uri",
        "_cosmos",
    )

    def __init__(
        self,
        account_name: str,
        table_endpoint: str,
        credential: TableCredential | TokenCredential | None,
        *,
        default_endpoints_protocol: str | None = None,
        endpoint_suffix: str | None = None,
        use_development_storage: bool = False,
        development_storage_proxy_uri: str | None = None,
        token_audience: str | None = None,
        cosmos: bool | None = None,
    ) -> None:
        _check_account_name(account_name)
        if cosmos is not None and not isinstance(cosmos, bool):
            raise ValueError(f"cosmos: must be True, False or None (recognise it from the endpoint), got {cosmos!r}")
        if not isinstance(table_endpoint, str) or not table_endpoint:
            raise ValueError("table_endpoint: must be a non-empty URL")
        if credential is not None and not isinstance(credential, TableCredential):
            if not callable(getattr(credential, "get_token", None)):
                raise ValueError("credential: must be a TableCredential, an object with get_token(*scopes), or None")
            credential = BearerTokenCredential(credential)
        credential = with_token_audience(credential, token_audience)
        if default_endpoints_protocol is not None:
            default_endpoints_protocol = default_endpoints_protocol.lower()
            if default_endpoints_protocol not in ("http", "https"):
                raise ValueError("default_endpoints_protocol: must be 'http' or 'https'")
        self._account_name = account_name
        self._table_endpoint = _endpoint_url(table_endpoint, "table_endpoint")
        self._credential = credential
        self._protocol = default_endpoints_protocol
        self._endpoint_suffix = endpoint_suffix
        self._use_development_storage = bool(use_development_storage)
        self._proxy_uri = development_storage_proxy_uri
        if cosmos is None:
            key = credential.account_key if isinstance(credential, _KeyCredential) else None
            cosmos = is_cosmos_endpoint(self._table_endpoint, key)
        self._cosmos = cosmos

    # ------------------------------------------------------------ properties

    @property
    def account_name(self) -> str:
        """The storage account name."""
        return self._account_name

    @property
    def table_endpoint(self) -> str:
        """The table service URL, without a trailing slash."""
        return self._table_endpoint

    @property
    def secondary_table_endpoint(self) -> str:
        """The read-only secondary endpoint of an RA-GRS account.

        Host-style endpoints get ``-secondary`` after the account label
        (``acct-secondary.table.core.windows.net``); path-style ones (emulators)
        after the account path segment (``.../devstoreaccount1-secondary``).
        """
        parts = urlsplit(self._table_endpoint)
        segment = parts.path.strip("/").split("/", 1)[0]
        if segment:
            path = "/" + segment + "-secondary" + parts.path.strip("/")[len(segment):]
            return f"{parts.scheme}://{parts.netloc}{path}"
        label, dot, rest = parts.netloc.partition(".")
        if not dot or _name_from_endpoint(self._table_endpoint) is None:
            raise ValueError(f"table_endpoint {self._table_endpoint!r} has no account label to derive a secondary from")
        return f"{parts.scheme}://{label}-secondary.{rest}{parts.path}"

    @property
    def credential(self) -> TableCredential | None:
        """The credential that signs requests, or None for anonymous access."""
        return self._credential

    @property
    def default_endpoints_protocol(self) -> str | None:
        """``DefaultEndpointsProtocol`` as given (lower-cased), or None."""
        return self._protocol

    @property
    def endpoint_suffix(self) -> str | None:
        """``EndpointSuffix`` as given, or None (meaning ``core.windows.net``)."""
        return self._endpoint_suffix

    @property
    def development_storage_proxy_uri(self) -> str | None:
        """``DevelopmentStorageProxyUri`` of a development storage account, or None."""
        return self._proxy_uri

    @property
    def is_cosmos(self) -> bool:
        """True when the endpoint is Azure Cosmos DB's Table API (recognised, or ``cosmos=True``)."""
        return self._cosmos

    @property
    def is_development_storage(self) -> bool:
        """True for an account made by ``UseDevelopmentStorage=true`` / :meth:`development_storage_account`."""
        return self._use_development_storage

    # ------------------------------------------------------------ constructors

    @classmethod
    def development_storage_account(cls, proxy_uri: str | None = None) -> CloudStorageAccount:
        """The emulator account (``devstoreaccount1`` with its well-known key).

        The endpoint is ``http://127.0.0.1:10002/devstoreaccount1`` (path-style);
        with ``proxy_uri`` it is that URI's scheme and host on port 10002.
        """
        if proxy_uri is None:
            endpoint = f"http://{_DEVSTORE_HOST}:{DEVSTORE_TABLE_PORT}/{DEVSTORE_ACCOUNT_NAME}"
        else:
            parts = urlsplit(_endpoint_url(proxy_uri, "DevelopmentStorageProxyUri"))
            host = parts.hostname or ""
            if ":" in host:
                host = f"[{host}]"  # IPv6 literal
            endpoint = f"{parts.scheme.lower()}://{host}:{DEVSTORE_TABLE_PORT}/{DEVSTORE_ACCOUNT_NAME}"
        return cls(
            DEVSTORE_ACCOUNT_NAME,
            endpoint,
            SharedKeyCredential(DEVSTORE_ACCOUNT_NAME, DEVSTORE_ACCOUNT_KEY),
            use_development_storage=True,
            development_storage_proxy_uri=proxy_uri,
        )

    @classmethod
    def parse(cls, connection_string: str, *, cosmos: bool | None = None) -> CloudStorageAccount:
        """Read a connection string; raise ValueError naming the offending key.

        ``cosmos``: as for the constructor (None recognises Cosmos DB from the TableEndpoint)."""
        settings = _split(connection_string)
        for ignored in _IGNORED_KEYS:
            settings.pop(ignored, None)
        if _wants_development_storage(settings):
            return cls.development_storage_account(settings.get("DevelopmentStorageProxyUri"))

        protocol, suffix = _protocol_and_suffix(settings)
        key = settings.get("AccountKey")
        sas = settings.get("SharedAccessSignature")
        if key is not None and sas is not None:
            raise ValueError(
                "connection string: AccountKey and SharedAccessSignature cannot both be given"
            )
        endpoint = settings.get("TableEndpoint")
        if endpoint is not None:
            endpoint = _endpoint_url(endpoint, "connection string: TableEndpoint")
        name = _account_name(settings.get("AccountName"), endpoint, key)
        if endpoint is None:
            endpoint = f"{protocol or 'https'}://{name}.table.{suffix or DEFAULT_ENDPOINT_SUFFIX}"
        return cls(
            name,
            endpoint,
            _credential(name, key, sas),
            default_endpoints_protocol=protocol,
            endpoint_suffix=suffix,
            cosmos=cosmos,
        )

    # ------------------------------------------------------------ output

    def _derived_endpoint(self) -> str:
        return (
            f"{self._protocol or 'https'}://{self._account_name}"
            f".table.{self._endpoint_suffix or DEFAULT_ENDPOINT_SUFFIX}"
        )

    def to_connection_string(self, include_secrets: bool = True) -> str:
        """A connection string that :meth:`parse` reads back into an equal account.

        With ``include_secrets=False`` the AccountKey or SharedAccessSignature
        is left out (the result then describes an anonymous account).
        """
        if self._use_development_storage:
            text = "UseDevelopmentStorage=true"
            if self._proxy_uri is not None:
                text += f";DevelopmentStorageProxyUri={self._proxy_uri}"
            return text
        parts: list[str] = []
        if self._protocol is not None:
            parts.append(f"DefaultEndpointsProtocol={self._protocol}")
        parts.append(f"AccountName={self._account_name}")
        credential = self._credential
        if include_secrets and isinstance(credential, SharedKeyCredential):
            parts.append(f"AccountKey={credential.account_key}")
        elif include_secrets and isinstance(credential, SasCredential):
            parts.append(f"SharedAccessSignature={credential.sas_token}")
        if self._table_endpoint != self._derived_endpoint():
            parts.append(f"TableEndpoint={self._table_endpoint}")
        if self._endpoint_suffix is not None:
            parts.append(f"EndpointSuffix={self._endpoint_suffix}")
        return ";".join(parts)

    def __str__(self) -> str:
        """The connection string WITH secrets (``to_connection_string(True)``).

        Do not log it; ``repr()`` is the safe form.
        """
        return self.to_connection_string(True)

    def __repr__(self) -> str:
        return (
            f"CloudStorageAccount(account_name={self._account_name!r}, "
            f"table_endpoint={self._table_endpoint!r}, credential={self._credential!r})"
        )

    def _identity(self) -> tuple[object, ...]:
        return (
            self._account_name,
            self._table_endpoint,
            self._credential,
            self._protocol,
            self._endpoint_suffix,
            self._use_development_storage,
            self._proxy_uri,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CloudStorageAccount):
            return NotImplemented
        return self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash((self._account_name, self._table_endpoint))

    # ------------------------------------------------------------ clients

    def create_cloud_table_client(self, payload_format: str = "json", **kwargs: Any) -> CloudTableClient:
        """A :class:`~tablesdk._clients._client.CloudTableClient` for this account.

        ``payload_format`` is ``"json"`` or ``"atom"``; other keyword arguments
        go to the client unchanged.
        """
        from .._clients._client import CloudTableClient  # type: ignore[import-not-found, unused-ignore]

        return CloudTableClient(self, payload_format=payload_format, **kwargs)

    def create_async_cloud_table_client(self, payload_format: str = "json", **kwargs: Any) -> AsyncCloudTableClient:
        """A :class:`~tablesdk.aio.AsyncCloudTableClient` for this account (needs the ``aio`` extra).

        Takes the options of :meth:`create_cloud_table_client`; use the client
        as ``async with``.
        """
        from ..aio import AsyncCloudTableClient

        return AsyncCloudTableClient(self, payload_format=payload_format, **kwargs)
