"""Request signing for the Table service: Shared Key, Shared Key Lite and SAS.

Every credential implements :meth:`TableCredential.apply`, which signs one
request in place and returns the URL to send. The Table service uses its own
string-to-sign, not the Blob/Queue one:

* Shared Key: ``VERB\\nContent-MD5\\nContent-Type\\nDate\\nCanonicalizedResource``
* Shared Key Lite: ``Date\\nCanonicalizedResource``

The client sends ``x-ms-date`` (RFC 1123, GMT) and no ``Date`` header; when
``x-ms-date`` is present the service takes its value as the request date, so
that value fills the ``Date`` slot. ``CanonicalizedResource`` is ``"/" +
account`` followed by the URL's percent-encoded path exactly as sent, plus
``?comp=<value>`` when the query has ``comp``. For a path-style (emulator) URL
the account therefore appears twice: ``/devstoreaccount1/devstoreaccount1/Tables``.

:func:`generate_table_sas` builds a table service SAS token (version
2015-04-05 and later layout, default ``2019-02-02``).

Secrets (the account key, SAS signatures, Authorization values) never appear
in a ``repr``, in an exception message or in a log record.
"""

from __future__ import annotations

import base64
import binascii
import functools
import ipaddress
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, Protocol, runtime_checkable
from urllib.parse import parse_qsl, quote, urlsplit

from ._errors import TableValidationError
from ._patterns import pattern_on_first_use

__all__ = [
    "check_token_credential",
    "require_credential",
    "TableCredential",
    "SharedKeyCredential",
    "SharedKeyLiteCredential",
    "SasCredential",
    "TokenCredential",
    "AccessTokenInfo",
    "BearerTokenCredential",
    "STORAGE_SCOPE",
    "STORAGE_AUDIENCE",
    "MIN_TOKEN_VERSION",
    "token_scope",
    "with_token_audience",
    "generate_table_sas",
    "generate_account_sas",
    "TABLE_SAS_PERMISSIONS",
    "ACCOUNT_SAS_PERMISSIONS",
    "DEFAULT_SAS_VERSION",
]

#: Table SAS permission letters in their canonical order: query, add, update, delete.
TABLE_SAS_PERMISSIONS = "raud"

#: Account SAS permission letters that mean something to the Table service, in canonical
#: order: read, write, delete, list, add, create, update, process.
ACCOUNT_SAS_PERMISSIONS = "rwdlacup"

_ACCOUNT_SAS_SERVICES = "bfqt"  # blob, file, queue, table: canonical order
_ACCOUNT_SAS_RESOURCE_TYPES = "sco"  # service, container (table), object (entity)

#: The ``sv`` written by :func:`generate_table_sas` unless told otherwise.
DEFAULT_SAS_VERSION = "2019-02-02"

# The oldest service version whose table SAS string-to-sign has the signedIP and
# signedProtocol fields; older layouts are not produced.
_MIN_SAS_VERSION = "2015-04-05"


_table_name_re = pattern_on_first_use(r"[A-Za-z][A-Za-z0-9]{2,62}")
_version_re = pattern_on_first_use(r"\d{4}-\d{2}-\d{2}")


_REDACTED = "<redacted>"


def _header(headers: dict[str, str], name: str) -> str:
    """Return the value of header ``name`` (case-insensitive), or ``""``."""
    lower = name.lower()
    for key, value in headers.items():
        if key.lower() == lower:
            return value
    return ""


def _by_lower_name(headers: dict[str, str]) -> dict[str, str]:
    """Every header by its lower-cased name, the first of two spellings winning (as :func:`_header`),
    in one pass instead of one per header read."""
    return {key.lower(): value for key, value in reversed(headers.items())}


_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(timestamp: float | None = None) -> str:
    """``timestamp`` (default now) as an RFC 1123 date in GMT, the text of ``email.utils.formatdate(usegmt=True)``.

    Written here because it runs once per attempt and email.utils is slow to import
    (socket, random, calendar, locale) and to call (a datetime and three formats).
    """
    t = time.gmtime(timestamp)
    return (
        f"{_WEEKDAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year:04d} "
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT"
    )


def _ensure_date(headers: dict[str, str]) -> str:
    """Set ``x-ms-date`` to now (RFC 1123 GMT) unless present; return its value."""
    existing = _header(headers, "x-ms-date")
    if existing:
        return existing
    for key in [k for k in headers if k.lower() == "x-ms-date"]:
        del headers[key]  # an empty value is replaced, not duplicated
    value = http_date()
    headers["x-ms-date"] = value
    return value


def _decode_key(account_key: str, field: str) -> bytes:
    """Decode a base64 account key; the error never quotes the key."""
    if not isinstance(account_key, str) or not account_key.strip():
        raise ValueError(f"{field}: must be a non-empty base64 string")
    try:
        key = base64.b64decode(account_key.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{field}: is not valid base64") from None
    if not key:
        raise ValueError(f"{field}: must be a non-empty base64 string")
    return key


def _check_account_name(account_name: str, field: str = "account_name") -> None:
    # Storage account names are ASCII letters and digits (the service: 3-24 lower-case; emulators
    # use longer ones such as devstoreaccount1). Anything else cannot even be sent in a header.
    if not isinstance(account_name, str) or not account_name:
        raise ValueError(f"{field}: must be a non-empty string")
    if not (account_name.isascii() and account_name.isalnum() and len(account_name) <= 64):
        raise ValueError(f"{field}: must be 1 to 64 ASCII letters and digits")


def _first_hmac_sha256(key: bytes, message: bytes) -> bytes:
    # hashlib and hmac (OpenSSL) load with the first signature, not with ``import tablesdk``
    # (start-up); then _hmac_sha256 is the one-shot OpenSSL digest itself.
    global _hmac_sha256
    import hmac

    _hmac_sha256 = functools.partial(hmac.digest, digest="sha256")
    return _hmac_sha256(key, message)


_hmac_sha256: Callable[[bytes, bytes], bytes] = _first_hmac_sha256


def _sign(key: bytes, string_to_sign: str) -> str:
    digest = _hmac_sha256(key, string_to_sign.encode("utf-8"))
    return base64.b64encode(digest).decode("ascii")


def _equal_secrets(a: bytes, b: bytes) -> bool:
    """Compare in constant time (hmac.compare_digest, imported when first compared)."""
    import hmac

    return hmac.compare_digest(a, b)


def _canonicalized_resource(account_name: str, url: str) -> str:
    """The Table service CanonicalizedResource for ``url``.

    ``"/" + account_name`` + the URL's encoded path as sent (``/`` when empty),
    plus ``?comp=<value>`` when the query string has a ``comp`` parameter; no
    other query parameter is kept.
    """
    parts = urlsplit(url)
    resource = "/" + account_name + (parts.path or "/")
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name == "comp":
            resource += "?comp=" + value
            break
    return resource


class TableCredential(ABC):
    """Something that can authorize a request to the Table service."""

    @abstractmethod
    def apply(self, method: str, url: str, headers: dict[str, str]) -> str:
        """Sign one request and return the URL to send.

        ``headers`` is changed in place: ``x-ms-date`` is set when absent and,
        for key credentials, ``Authorization`` is set (replacing any previous
        value). ``url`` is the full, already percent-encoded URL including its
        query string; a SAS credential returns it with the token appended.
        """


class _KeyCredential(TableCredential):
    """Common part of the two account-key schemes."""

    _scheme = ""

    def __init__(self, account_name: str, account_key: str) -> None:
        _check_account_name(account_name)
        self._account_name = account_name
        self._key = _decode_key(account_key, "account_key")

    @property
    def account_name(self) -> str:
        """The storage account name used in the signature."""
        return self._account_name

    @property
    def account_key(self) -> str:
        """The account key, base64-encoded. Secret: never log it."""
        return base64.b64encode(self._key).decode("ascii")

    @abstractmethod
    def string_to_sign(self, method: str, url: str, headers: dict[str, str]) -> str:
        """The string this scheme signs for the request (no secret in it)."""

    def apply(self, method: str, url: str, headers: dict[str, str]) -> str:
        """Set ``x-ms-date`` if absent and ``Authorization``; return ``url`` unchanged."""
        _ensure_date(headers)
        signature = _sign(self._key, self.string_to_sign(method, url, headers))
        for key in [k for k in headers if k.lower() == "authorization"]:
            del headers[key]
        headers["Authorization"] = f"{self._scheme} {self._account_name}:{signature}"
        return url

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, _KeyCredential)
        return self._account_name == other._account_name and _equal_secrets(self._key, other._key)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._account_name))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(account_name={self._account_name!r}, account_key={_REDACTED})"

    __str__ = __repr__


class SharedKeyCredential(_KeyCredential):
    """Shared Key authorization for the Table service.

    ``account_key`` is the base64 key from the portal (or the emulator's
    well-known key). Signs ``VERB\\nContent-MD5\\nContent-Type\\nDate\\nCanonicalizedResource``.
    """

    _scheme = "SharedKey"

    def string_to_sign(self, method: str, url: str, headers: dict[str, str]) -> str:
        """``VERB\\nContent-MD5\\nContent-Type\\nx-ms-date\\nCanonicalizedResource``."""
        by_name = _by_lower_name(headers)
        return "\n".join(
            [
                method.upper(),
                by_name.get("content-md5", ""),
                by_name.get("content-type", ""),
                by_name.get("x-ms-date", ""),
                _canonicalized_resource(self._account_name, url),
            ]
        )


class SharedKeyLiteCredential(_KeyCredential):
    """Shared Key Lite authorization for the Table service.

    Signs ``Date\\nCanonicalizedResource`` (the ``x-ms-date`` value as Date).
    """

    _scheme = "SharedKeyLite"

    def string_to_sign(self, method: str, url: str, headers: dict[str, str]) -> str:
        """``x-ms-date\\nCanonicalizedResource``."""
        return _header(headers, "x-ms-date") + "\n" + _canonicalized_resource(self._account_name, url)


class SasCredential(TableCredential):
    """A shared access signature token, appended to every request URL.

    ``sas_token`` is the query string (``sv=...&sig=...``) with or without a
    leading ``?``; it must contain a ``sig`` field.
    """

    def __init__(self, sas_token: str) -> None:
        if not isinstance(sas_token, str):
            raise ValueError("sas_token: must be a string")
        token = sas_token.strip()
        if token.startswith("?"):
            token = token[1:]
        if not token:
            raise ValueError("sas_token: must not be empty")
        fields = parse_qsl(token, keep_blank_values=True)
        names = [name for name, _ in fields]
        if "sig" not in names:
            raise ValueError("sas_token: has no 'sig' field")
        self._token = token
        self._public = {name: value for name, value in fields if name != "sig"}

    @property
    def sas_token(self) -> str:
        """The token without a leading ``?``. Secret: never log it."""
        return self._token

    @property
    def fields(self) -> dict[str, str]:
        """The token's decoded fields other than ``sig`` (safe to show)."""
        return dict(self._public)

    def apply(self, method: str, url: str, headers: dict[str, str]) -> str:
        """Set ``x-ms-date`` if absent and return ``url`` with the token appended."""
        _ensure_date(headers)
        if "?" not in url:
            return url + "?" + self._token
        if url.endswith("?") or url.endswith("&"):
            return url + self._token
        return url + "&" + self._token

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SasCredential):
            return NotImplemented
        return _equal_secrets(self._token.encode("utf-8"), other._token.encode("utf-8"))

    def __hash__(self) -> int:
        return hash(("SasCredential", tuple(sorted(self._public.items()))))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in self._public.items())
        return f"SasCredential({shown}{', ' if shown else ''}sig={_REDACTED})"

    __str__ = __repr__


# --------------------------------------------------------------------------- Entra ID tokens

#: The OAuth scope of Azure Storage data-plane requests.
STORAGE_SCOPE = "https://storage.azure.com/.default"

#: The audience of Azure Storage data-plane tokens (its scope is ``<audience>/.default``).
STORAGE_AUDIENCE = "https://storage.azure.com"


def token_scope(audience: str | None = None, *, scope: str | None = None) -> str:
    """The OAuth scope a token is asked for: ``scope`` as given, else ``<audience>/.default``
    (an audience that already ends in ``/.default`` is taken as the scope), else Azure
    Storage's ``https://storage.azure.com/.default``.

    Other clouds and services have their own audience: Cosmos DB's Table API
    ``https://cosmos.azure.com``, a sovereign cloud's storage audience, an application ID URI.
    """
    if audience is not None and scope is not None:
        raise ValueError("give audience= or scope=, not both (the scope is <audience>/.default)")
    for name, value in (("audience", audience), ("scope", scope)):
        if value is not None and (not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value)):
            raise TableValidationError(
                name, "a non-empty string without spaces, e.g. 'https://cosmos.azure.com'", repr(value)
            )
    if scope is not None:
        return scope
    if audience is None:
        return STORAGE_SCOPE
    if audience.endswith("/.default"):
        return audience
    return audience.rstrip("/") + "/.default"


#: The oldest Table service version that accepts an OAuth bearer token.
MIN_TOKEN_VERSION = "2019-02-02"

# Refresh a token this many seconds before it expires (what azure-core's bearer token policy does),
# so that a request never leaves with a token that lapses in flight.
_REFRESH_MARGIN = 300.0


class AccessTokenInfo(Protocol):
    """What ``get_token`` returns: ``.token`` (the bearer string) and ``.expires_on`` (epoch seconds)."""

    @property
    def token(self) -> str: ...

    @property
    def expires_on(self) -> int: ...


@runtime_checkable
class TokenCredential(Protocol):
    """Anything with ``get_token(*scopes)``: azure-identity's credentials have this shape.

    tablesdk does not depend on azure-core or azure-identity; any object with
    this method (a ``DefaultAzureCredential``, a managed identity credential, a
    test double) can be the credential of a :class:`~tablesdk.CloudStorageAccount`.
    """

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessTokenInfo: ...


class BearerTokenCredential(TableCredential):
    """Authorizes requests with an Entra ID (OAuth 2.0) token: ``Authorization: Bearer <token>``.

    Wraps a :class:`TokenCredential`; asks it for :attr:`scope` on first use and again
    when the cached token is within five minutes of ``expires_on``. The scope is
    ``https://storage.azure.com/.default`` unless ``audience=`` (the scope is then
    ``<audience>/.default``: ``https://cosmos.azure.com`` for Cosmos DB's Table API, a
    sovereign cloud's audience) or ``scope=`` says otherwise (:func:`token_scope`). Thread-safe: one
    refresh at a time. The token never appears in a repr, a log or an error.
    The service accepts tokens from version 2019-02-02 on (JSON payloads
    only); :class:`~tablesdk.CloudTableClient` checks that.
    """

    def __init__(
        self,
        credential: TokenCredential,
        *,
        audience: str | None = None,
        scope: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not callable(getattr(credential, "get_token", None)):
            raise ValueError("credential: needs a get_token(*scopes) method")
        self._scope = token_scope(audience, scope=scope)
        self._credential = credential
        self._clock = clock
        self._lock = threading.Lock()
        self._token: str | None = None
        self._expires_on = 0.0

    @property
    def token_credential(self) -> TokenCredential:
        """The wrapped credential."""
        return self._credential

    @property
    def scope(self) -> str:
        """The OAuth scope tokens are asked for (``<audience>/.default``)."""
        return self._scope

    def with_audience(self, audience: str) -> BearerTokenCredential:
        """A credential over the same token credential that asks for ``<audience>/.default``
        (or ``audience`` itself when it is a ``/.default`` scope); its token cache is its own."""
        return BearerTokenCredential(self._credential, audience=audience, clock=self._clock)

    def _current_token(self) -> str:
        with self._lock:
            if self._token is None or self._expires_on - self._clock() <= _REFRESH_MARGIN:
                access = self._credential.get_token(self._scope)
                token = getattr(access, "token", None)
                if not isinstance(token, str) or not token:
                    raise ValueError("credential: get_token returned no token")
                self._token = token
                self._expires_on = float(getattr(access, "expires_on", 0) or 0)
            return self._token

    def apply(self, method: str, url: str, headers: dict[str, str]) -> str:
        """Set ``x-ms-date`` if absent and ``Authorization: Bearer``; return ``url`` unchanged."""
        _ensure_date(headers)
        token = self._current_token()
        for key in [k for k in headers if k.lower() == "authorization"]:
            del headers[key]
        headers["Authorization"] = f"Bearer {token}"
        return url

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BearerTokenCredential):
            return NotImplemented
        return self._credential is other._credential and self._scope == other._scope

    def __hash__(self) -> int:
        return hash(("BearerTokenCredential", id(self._credential), self._scope))

    def __repr__(self) -> str:
        return f"BearerTokenCredential(credential={type(self._credential).__name__}, scope={self._scope!r})"

    __str__ = __repr__


def with_token_audience(credential: TableCredential | None, audience: str | None) -> TableCredential | None:
    """``credential``, asking for tokens of ``audience`` when given (see :func:`token_scope`).

    ``audience`` applies to Entra ID token credentials only: with a key, a SAS or no
    credential it is refused with a ValueError that says so.
    """
    if audience is None:
        return credential
    if not isinstance(credential, BearerTokenCredential):
        kind = type(credential).__name__ if credential is not None else "no credential"
        raise ValueError(
            f"token_audience applies to Entra ID token credentials (an object with get_token), not {kind}"
        )
    return credential.with_audience(audience)


# --------------------------------------------------------------------------- SAS


def _format_sas_time(value: datetime, field: str) -> str:
    if not isinstance(value, datetime):
        raise TableValidationError(field, "must be a datetime", type(value).__name__)
    if value.tzinfo is None or value.utcoffset() is None:
        value = value.replace(tzinfo=timezone.utc)  # naive means UTC
    value = value.astimezone(timezone.utc)
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def _normalise_letters(value: str, allowed: str, field: str, what: str) -> str:
    """``value``'s letters in the canonical order of ``allowed``; anything else is refused."""
    if not isinstance(value, str):
        raise TableValidationError(field, f"must be a string of letters from '{allowed}'")
    bad = sorted({letter for letter in value if letter not in allowed})
    if bad:
        raise TableValidationError(
            field,
            f"only the letters '{allowed}' are allowed for {what}",
            "not allowed: " + ", ".join(repr(letter) for letter in bad),
        )
    return "".join(letter for letter in allowed if letter in value)


def _normalise_permission(permission: str) -> str:
    return _normalise_letters(permission, TABLE_SAS_PERMISSIONS, "permission", "a table SAS")


def _check_version(version: str) -> None:
    if not isinstance(version, str) or not _version_re().fullmatch(version) or version < _MIN_SAS_VERSION:
        raise TableValidationError("version", f"a service version 'YYYY-MM-DD', {_MIN_SAS_VERSION} or later", repr(version))


def _check_protocol(protocol: str | None) -> None:
    if protocol is not None and protocol not in ("https", "https,http"):
        raise TableValidationError("protocol", "'https' or 'https,http'", repr(protocol))


def _check_ip(ip: str) -> None:
    parts = ip.split("-")
    if len(parts) > 2 or not ip:
        raise TableValidationError("ip", "an IP address or a range 'a-b'", repr(ip))
    try:
        for part in parts:
            ipaddress.ip_address(part)
    except ValueError:
        raise TableValidationError("ip", "an IP address or a range 'a-b'", repr(ip)) from None


def _check_table_name(table_name: str) -> None:
    if not isinstance(table_name, str) or not _table_name_re().fullmatch(table_name):
        raise TableValidationError(
            "table_name",
            "3-63 alphanumeric characters, starting with a letter",
            repr(table_name),
        )


def _table_sas_grant(
    permission: str, expiry: datetime | None, start: datetime | None, policy_id: str | None
) -> tuple[str, str, str]:
    """The signed permission, start and expiry (``""`` when left out).

    A stored access policy may supply the permission and expiry, so they are
    only required when no ``policy_id`` is given.
    """
    sp = _normalise_permission(permission)
    if not sp and policy_id is None:
        raise TableValidationError("permission", "required unless policy_id names a stored access policy")
    if expiry is None and policy_id is None:
        raise TableValidationError("expiry", "required unless policy_id names a stored access policy")
    se = _format_sas_time(expiry, "expiry") if expiry is not None else ""
    st = _format_sas_time(start, "start") if start is not None else ""
    return sp, st, se


def _check_policy_id(policy_id: str | None) -> None:
    # The service caps signed identifiers of stored access policies at 64 characters.
    if policy_id is not None and not (isinstance(policy_id, str) and 0 < len(policy_id) <= 64):
        raise TableValidationError("policy_id", "1-64 characters")


def _check_key_range(
    start_partition_key: str | None,
    start_row_key: str | None,
    end_partition_key: str | None,
    end_row_key: str | None,
) -> None:
    # A row key bound only means something within a partition key bound.
    if start_row_key is not None and start_partition_key is None:
        raise TableValidationError("start_row_key", "requires start_partition_key")
    if end_row_key is not None and end_partition_key is None:
        raise TableValidationError("end_row_key", "requires end_partition_key")


# The order in which the service rebuilds a table SAS's signed string, one
# field per line, an absent field leaving an empty line; "resource" is
# /table/<account>/<table name lower-cased>.
_TABLE_SAS_SIGNED_FIELDS = ("sp", "st", "se", "resource", "si", "sip", "spr", "sv", "spk", "srk", "epk", "erk")


def _table_sas_string_to_sign(fields: dict[str, str | None], resource: str) -> str:
    values = {**fields, "resource": resource}
    return "\n".join(values.get(name) or "" for name in _TABLE_SAS_SIGNED_FIELDS)


def _sas_query_string(query: list[tuple[str, str | None]]) -> str:
    """``name=value`` pairs joined by ``&``, values percent-encoded, absent fields left out."""
    return "&".join(f"{name}={quote(value, safe='')}" for name, value in query if value is not None)


def generate_table_sas(
    account_name: str,
    account_key: str,
    table_name: str,
    permission: str = "r",
    *,
    expiry: datetime | None = None,
    start: datetime | None = None,
    start_partition_key: str | None = None,
    start_row_key: str | None = None,
    end_partition_key: str | None = None,
    end_row_key: str | None = None,
    policy_id: str | None = None,
    protocol: str | None = None,
    ip: str | None = None,
    version: str = DEFAULT_SAS_VERSION,
) -> str:
    """Build a service SAS token for one table; returns it without a leading ``?``.

    ``permission`` is any subset of ``"raud"`` (query, add, update, delete),
    written in that canonical order. With ``policy_id`` (a stored access policy
    set with ``client.set_table_acl``) the service takes the permission, start
    and expiry the SAS leaves out from the policy, so ``permission=""`` and no
    ``expiry`` are allowed then; a field may not be given by both. Without a
    policy, ``permission`` and ``expiry`` are required.
    Datetimes may be aware (converted to UTC) or naive (taken as UTC) and are
    written as ``YYYY-MM-DDTHH:MM:SSZ``. The key ranges are inclusive; a row
    key bound needs its partition key bound. ``protocol`` is ``"https"`` or
    ``"https,http"``; ``ip`` one address or a range ``"a-b"``.

    The signed string is, one field per line: permissions, start, expiry,
    ``/table/<account>/<table name lower-cased>``, policy id, ip, protocol,
    version, start PK, start RK, end PK, end RK.
    """
    _check_account_name(account_name)
    key = _decode_key(account_key, "account_key")
    _check_table_name(table_name)
    sp, st, se = _table_sas_grant(permission, expiry, start, policy_id)
    _check_version(version)
    _check_protocol(protocol)
    if ip is not None:
        _check_ip(ip)
    _check_policy_id(policy_id)
    _check_key_range(start_partition_key, start_row_key, end_partition_key, end_row_key)

    fields: dict[str, str | None] = {
        "sv": version,
        "tn": table_name,
        "sp": sp or None,
        "st": st or None,
        "se": se or None,
        "spk": start_partition_key,
        "srk": start_row_key,
        "epk": end_partition_key,
        "erk": end_row_key,
        "si": policy_id,
        "sip": ip,
        "spr": protocol,
    }
    resource = f"/table/{account_name}/{table_name.lower()}"
    fields["sig"] = _sign(key, _table_sas_string_to_sign(fields, resource))
    return _sas_query_string(list(fields.items()))


def generate_account_sas(
    account_name: str,
    account_key: str,
    *,
    resource_types: str,
    permission: str,
    expiry: datetime,
    start: datetime | None = None,
    services: str = "t",
    ip: str | None = None,
    protocol: str | None = None,
    version: str = DEFAULT_SAS_VERSION,
) -> str:
    """Build an account SAS token; returns it without a leading ``?``.

    An account SAS can reach what a table SAS cannot: table listing, creation
    and deletion, and the service-level operations (properties, stats).
    ``resource_types`` is any of ``"s"`` (service), ``"c"`` (container: a
    table) and ``"o"`` (object: an entity); ``permission`` any of
    ``"rwdlacup"``; ``services`` any of ``"bfqt"`` (``"t"``, the Table
    service, by default). Letters are written in those canonical orders.
    ``start``/``expiry``, ``ip`` and ``protocol`` are as for
    :func:`generate_table_sas`.

    The signed string is the account name, permissions, services, resource
    types, start, expiry, ip, protocol and version, one per line, each line
    ended by a newline; from version 2020-12-06 on, an (empty) encryption
    scope line follows the version.
    """
    _check_account_name(account_name)
    key = _decode_key(account_key, "account_key")
    sp = _normalise_letters(permission, ACCOUNT_SAS_PERMISSIONS, "permission", "an account SAS")
    ss = _normalise_letters(services, _ACCOUNT_SAS_SERVICES, "services", "an account SAS")
    srt = _normalise_letters(resource_types, _ACCOUNT_SAS_RESOURCE_TYPES, "resource_types", "an account SAS")
    for name, value in (("permission", sp), ("services", ss), ("resource_types", srt)):
        if not value:
            raise TableValidationError(name, "at least one letter is required")
    se = _format_sas_time(expiry, "expiry")
    st = _format_sas_time(start, "start") if start is not None else ""
    _check_version(version)
    _check_protocol(protocol)
    if ip is not None:
        _check_ip(ip)
    fields = [account_name, sp, ss, srt, st, se, ip or "", protocol or "", version]
    if version >= "2020-12-06":
        fields.append("")  # signed encryption scope: not used by the Table service
    signature = _sign(key, "\n".join(fields) + "\n")
    query: list[tuple[str, str | None]] = [
        ("sv", version),
        ("ss", ss),
        ("srt", srt),
        ("sp", sp),
        ("st", st or None),
        ("se", se),
        ("sip", ip),
        ("spr", protocol),
        ("sig", signature),
    ]
    return _sas_query_string(query)


# ---------------------------------------------------------------- what a client accepts


def require_credential(credential: object | None, account_name: str) -> None:
    """Refuse an account without a credential: the Table service has no anonymous access,
    so every request would be answered 403."""
    if credential is not None:
        return
    raise ValueError(
        f"account {account_name!r} has no credential, and the Table service has no anonymous "
        "access: add AccountKey=<base64 key> or SharedAccessSignature=<SAS token> to the connection "
        "string (or give CloudStorageAccount a credential)"
    )


def check_token_credential(credential: object | None, payload_format: str, api_version: str) -> None:
    """An Entra ID token is accepted from 2019-02-02 on, which is JSON-only: refuse what cannot work."""
    if not isinstance(credential, BearerTokenCredential):
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
