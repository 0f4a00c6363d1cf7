"""Server-side request authentication: Shared Key, Shared Key Lite and SAS.

The string-to-sign is computed here independently of :mod:`tablesdk._core._auth`
(the client's signer) so that each checks the other; the test suite
cross-checks the two.

* Shared Key: ``VERB\\nContent-MD5\\nContent-Type\\nDate\\nCanonicalizedResource``
* Shared Key Lite: ``Date\\nCanonicalizedResource``

``Date`` is the ``x-ms-date`` value when present, else the ``Date`` header (a
signature made with either value is accepted when both headers are sent).
``CanonicalizedResource`` is ``"/" + account`` + the URL path exactly as sent
(percent-encoded; for the emulator's path-style URLs the account appears
twice) + ``?comp=<value>`` when the query has ``comp``. The request date must
be within 15 minutes of the server clock.

SAS: table service SAS (``tn``) and account SAS (``ss``/``srt``) with signed
version 2015-04-05 or later; signature, start, expiry, protocol, IP, table
name, permissions and PartitionKey/RowKey ranges are enforced. A table SAS
naming a stored access policy (``si``) takes the permission, start and expiry
it leaves out from that policy (a field given by both is refused); a SAS whose
policy is gone is refused, which is how a policy revokes its SAS.

Bearer (Entra ID) tokens are accepted when the emulator was given a set of
token strings to accept, from version 2019-02-02 on; anything else is 403.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from typing import Callable, Mapping, Protocol

from ._errors import PipelineError, pipeline_error
from ._values import utf16_key as _utf16

__all__ = ["AuthResult", "SasGrant", "authenticate", "sign", "shared_key_string_to_sign",
           "shared_key_lite_string_to_sign", "table_sas_string_to_sign", "account_sas_string_to_sign"]

MAX_CLOCK_SKEW = timedelta(minutes=15)
_MIN_SAS_VERSION = "2015-04-05"
_MIN_BEARER_VERSION = "2019-02-02"


class PolicyLike(Protocol):
    """A stored access policy as the auth check needs it."""

    start: str
    expiry: str
    permission: str


#: (table name, policy id) -> the stored policy, or None when the table has no such policy.
PolicyLookup = Callable[[str, str], "PolicyLike | None"]


def sign(key: bytes, string_to_sign: str) -> str:
    """Base64 HMAC-SHA256 of ``string_to_sign``."""
    return base64.b64encode(hmac.new(key, string_to_sign.encode("utf-8"), hashlib.sha256).digest()).decode("ascii")


def canonicalized_resource(account: str, raw_path: str, query: Mapping[str, str]) -> str:
    resource = "/" + account + (raw_path or "/")
    if "comp" in query:
        resource += "?comp=" + query["comp"]
    return resource


def shared_key_string_to_sign(
    method: str, content_md5: str, content_type: str, date: str, resource: str
) -> str:
    return "\n".join([method.upper(), content_md5, content_type, date, resource])


def shared_key_lite_string_to_sign(date: str, resource: str) -> str:
    return date + "\n" + resource


def table_sas_string_to_sign(account: str, q: Mapping[str, str]) -> str:
    """The table service SAS string-to-sign (layout of 2015-04-05 and later)."""
    return "\n".join([
        q.get("sp", ""), q.get("st", ""), q.get("se", ""),
        f"/table/{account}/{q.get('tn', '').lower()}",
        q.get("si", ""), q.get("sip", ""), q.get("spr", ""), q.get("sv", ""),
        q.get("spk", ""), q.get("srk", ""), q.get("epk", ""), q.get("erk", ""),
    ])


def account_sas_string_to_sign(account: str, q: Mapping[str, str]) -> str:
    """The account SAS string-to-sign (2015-04-05 and later; ``ses`` line from 2020-12-06)."""
    parts = [account, q.get("sp", ""), q.get("ss", ""), q.get("srt", ""), q.get("st", ""), q.get("se", ""),
             q.get("sip", ""), q.get("spr", ""), q.get("sv", "")]
    if q.get("sv", "") >= "2020-12-06":
        parts.append(q.get("ses", ""))
    return "\n".join(parts) + "\n"


def parse_sas_time(text: str) -> datetime | None:
    """A SAS or access-policy time in one of the service's ISO 8601 forms (UTC), or None."""
    text = text.strip()
    for fmt in ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%MZ", "%Y-%m-%d", "%Y-%m-%dT%H:%M:%S.%fZ"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def _auth_failed(detail: str) -> PipelineError:
    return pipeline_error("AuthenticationFailed", detail=detail)


def _same_signature(expected: str, given: str) -> bool:
    """Constant-time comparison of a computed base64 signature with the one sent.

    ``hmac.compare_digest`` refuses ``str`` with non-ASCII characters (TypeError),
    and a signature sent as ``é`` or as ``sig=%FF%FE`` (decoded to U+FFFD) is just
    a wrong signature: compare the UTF-8 bytes.
    """
    return hmac.compare_digest(expected.encode("utf-8"), given.encode("utf-8", "surrogatepass"))


# ------------------------------------------------------------------ grants

#: operation -> (table SAS letters needed (all of), account SAS alternatives (any of each group), srt)
_OPERATIONS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "query_tables": ("", ("l",), "c"),
    "create_table": ("", ("cw",), "c"),
    "delete_table": ("", ("d",), "c"),
    "service": ("", ("r",), "s"),
    "service_write": ("", ("w",), "s"),
    "query_entities": ("r", ("r",), "o"),
    "get_entity": ("r", ("r",), "o"),
    "insert": ("a", ("aw",), "o"),
    "update": ("u", ("uw",), "o"),
    "merge": ("u", ("uw",), "o"),
    "insert_or_replace": ("au", ("aw", "uw"), "o"),
    "insert_or_merge": ("au", ("aw", "uw"), "o"),
    "delete": ("d", ("d",), "o"),
    "batch": ("", (), "o"),
}
_TABLE_LEVEL = frozenset({"query_tables", "create_table", "delete_table", "service", "service_write"})


@dataclass
class SasGrant:
    """What a verified SAS allows."""

    version: str
    permissions: str
    table: str | None = None  # table SAS: the lower-cased table name
    services: str = ""
    resource_types: str = ""
    start_key: tuple[str, str | None] | None = None  # (spk, srk)
    end_key: tuple[str, str | None] | None = None  # (epk, erk)

    @property
    def is_account_sas(self) -> bool:
        return self.table is None

    def check(self, operation: str, table: str | None) -> None:
        """PipelineError unless this SAS permits ``operation`` on ``table``."""
        letters, account_groups, srt = _OPERATIONS[operation]
        if self.is_account_sas:
            if srt not in self.resource_types:
                raise pipeline_error("AuthorizationResourceTypeMismatch")
            for group in account_groups:
                if not any(letter in self.permissions for letter in group):
                    raise pipeline_error("AuthorizationPermissionMismatch")
            return
        if operation in _TABLE_LEVEL:
            raise pipeline_error("AuthorizationResourceTypeMismatch")
        if table is None or table.lower() != self.table:
            raise pipeline_error("AuthorizationFailure")
        if any(letter not in self.permissions for letter in letters):
            raise pipeline_error("AuthorizationPermissionMismatch")

    def key_allowed(self, pk: str, rk: str) -> bool:
        """True when (pk, rk) is inside the SAS key range (always, without one)."""
        # keys order by UTF-16 code units, as everywhere in the service
        if self.start_key is not None:
            spk, srk = self.start_key
            if _utf16(pk) < _utf16(spk) or (pk == spk and srk is not None and _utf16(rk) < _utf16(srk)):
                return False
        if self.end_key is not None:
            epk, erk = self.end_key
            if _utf16(pk) > _utf16(epk) or (pk == epk and erk is not None and _utf16(rk) > _utf16(erk)):
                return False
        return True

    def check_key(self, pk: str, rk: str) -> None:
        if not self.key_allowed(pk, rk):
            raise pipeline_error("AuthorizationFailure")

    @property
    def has_key_range(self) -> bool:
        return self.start_key is not None or self.end_key is not None


@dataclass
class AuthResult:
    """How a request was authenticated: ``scheme`` and, for SAS, the grant."""

    scheme: str  # "SharedKey", "SharedKeyLite", "SAS", "Anonymous"
    sas: SasGrant | None = None
    version_override: str | None = None  # a SAS's signed version decides the API version
    extra: dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------ entry point

def authenticate(
    *,
    method: str,
    raw_path: str,
    query: Mapping[str, str],
    headers: Mapping[str, str],
    account: str,
    key: bytes,
    secure: bool = False,
    client_ip: str = "127.0.0.1",
    now: datetime | None = None,
    allow_anonymous: bool = False,
    policy_lookup: PolicyLookup | None = None,
    bearer_tokens: frozenset[str] = frozenset(),
) -> AuthResult:
    """Verify the request's credentials; PipelineError (403) when they do not hold.

    ``headers`` must be case-insensitive (keys looked up lower-case).
    ``policy_lookup`` finds the stored access policy a SAS names;
    ``bearer_tokens`` are the Entra ID tokens accepted (none: Bearer is refused).
    """
    now = now or datetime.now(timezone.utc)
    authorization = headers.get("authorization", "")
    if "sig" in query and not authorization:
        return _verify_sas(query, account, key, secure, client_ip, now, policy_lookup)
    if not authorization:
        if allow_anonymous:
            return AuthResult("Anonymous")
        raise _auth_failed("No authentication information was provided (no Authorization header and no SAS).")
    scheme, _, credentials = authorization.strip().partition(" ")
    if scheme == "Bearer":
        return _verify_bearer(credentials.strip(), headers, bearer_tokens, now)
    if scheme not in ("SharedKey", "SharedKeyLite"):
        raise _auth_failed(
            f"The authorization scheme '{scheme}' is not supported; use SharedKey, SharedKeyLite or a SAS."
        )
    name, _, signature = credentials.strip().partition(":")
    if name != account or not signature:
        raise _auth_failed("The account name in the Authorization header does not match the request URI.")
    x_ms_date = headers.get("x-ms-date", "")
    date_header = headers.get("date", "")
    _check_request_date(x_ms_date or date_header, now)
    resource = canonicalized_resource(account, raw_path, query)
    dates = [d for d in dict.fromkeys([x_ms_date, date_header]) if d]
    for date in dates:
        if scheme == "SharedKey":
            to_sign = shared_key_string_to_sign(
                method, headers.get("content-md5", ""), headers.get("content-type", ""), date, resource
            )
        else:
            to_sign = shared_key_lite_string_to_sign(date, resource)
        if _same_signature(sign(key, to_sign), signature):
            return AuthResult(scheme)
    shown = (
        shared_key_string_to_sign(method, headers.get("content-md5", ""), headers.get("content-type", ""),
                                  dates[0], resource)
        if scheme == "SharedKey" else shared_key_lite_string_to_sign(dates[0], resource)
    )
    raise _auth_failed(
        "The MAC signature found in the HTTP request is not the same as any computed signature. "
        "Server used following string to sign: '" + shown.replace("\n", "\\n") + "'."
    )


def _check_request_date(date_value: str, now: datetime) -> None:
    """The request's date must be a valid RFC 1123 date within 15 minutes of the server clock."""
    if not date_value:
        raise _auth_failed("The request has no x-ms-date or Date header.")
    try:
        sent = parsedate_to_datetime(date_value)
    except (TypeError, ValueError):
        raise _auth_failed(f"The date '{date_value}' is not a valid RFC 1123 date.") from None
    if sent.tzinfo is None:
        sent = sent.replace(tzinfo=timezone.utc)
    if abs(now - sent) > MAX_CLOCK_SKEW:
        raise _auth_failed(
            f"Request date header too old or too far in the future: '{date_value}' "
            f"(server time {now.strftime('%a, %d %b %Y %H:%M:%S GMT')}; allowed skew 15 minutes)."
        )


def _verify_bearer(token: str, headers: Mapping[str, str], accepted: frozenset[str], now: datetime) -> AuthResult:
    if not accepted:
        raise _auth_failed("Bearer tokens are not accepted: the emulator was started without accepted tokens.")
    _check_request_date(headers.get("x-ms-date", "") or headers.get("date", ""), now)
    version = headers.get("x-ms-version", "").strip()
    if version < _MIN_BEARER_VERSION:
        raise _auth_failed("Authentication scheme Bearer is not supported in this version.")
    if not any(hmac.compare_digest(token.encode("utf-8"), ok.encode("utf-8")) for ok in accepted):
        raise _auth_failed("The token is not valid (not one the emulator accepts).")
    return AuthResult("Bearer")


def _apply_policy(q: Mapping[str, str], lookup: PolicyLookup | None) -> dict[str, str]:
    """The SAS fields in force: the token's, completed from the stored policy it names."""
    merged = dict(q)
    policy_id = q.get("si", "")
    if not policy_id:
        return merged
    if "ss" in q or "srt" in q or not q.get("tn"):
        raise _auth_failed("Only a table service SAS can name a stored access policy (si).")
    policy = lookup(q["tn"], policy_id) if lookup is not None else None
    if policy is None:
        raise _auth_failed(f"The stored access policy '{policy_id}' does not exist on table '{q['tn']}'.")
    for name, stored in (("sp", policy.permission), ("st", policy.start), ("se", policy.expiry)):
        if stored and q.get(name):
            raise _auth_failed(f"The SAS field '{name}' is given both by the SAS and by its stored access policy.")
        if stored:
            merged[name] = stored
    return merged


def _verify_sas(
    q: Mapping[str, str], account: str, key: bytes, secure: bool, client_ip: str, now: datetime,
    policy_lookup: PolicyLookup | None = None,
) -> AuthResult:
    version = q.get("sv", "")
    if len(version) != 10 or version < _MIN_SAS_VERSION:
        raise _auth_failed(f"The signed version '{version}' is not supported by the emulator (2015-04-05 or later).")
    is_account = "ss" in q or "srt" in q
    if is_account:
        to_sign = account_sas_string_to_sign(account, q)
    else:
        if not q.get("tn"):
            raise _auth_failed("A table service SAS must name its table (tn).")
        to_sign = table_sas_string_to_sign(account, q)
    if not _same_signature(sign(key, to_sign), q.get("sig", "")):
        raise _auth_failed(
            "Signature did not match. String to sign used was " + to_sign.replace("\n", "\\n")
        )
    q = _apply_policy(q, policy_lookup)
    expiry = parse_sas_time(q.get("se", ""))
    if expiry is None:
        raise _auth_failed("The signed expiry (se) is missing or malformed.")
    start = parse_sas_time(q["st"]) if q.get("st") else None
    if q.get("st") and start is None:
        raise _auth_failed("The signed start (st) is malformed.")
    if now > expiry or (start is not None and now < start):
        raise _auth_failed("Signature not valid in the specified time frame: "
                           f"Start [{q.get('st', '')}] - Expiry [{q.get('se', '')}] - Current [{now:%Y-%m-%dT%H:%M:%SZ}]")
    protocol = q.get("spr", "")
    if protocol and protocol not in ("https", "https,http", "http,https"):
        raise _auth_failed(f"The signed protocol '{protocol}' is not valid.")
    if protocol == "https" and not secure:
        raise pipeline_error("AuthorizationProtocolMismatch")
    ip_range = q.get("sip", "")
    if ip_range:
        bounds = _ipv4_range(ip_range)
        if bounds is None:  # the service takes IPv4 addresses only (one, or low-high)
            raise _auth_failed(f"The signed IP range '{ip_range}' is not an IPv4 address or range.")
        if not _ip_in(bounds, client_ip):
            raise pipeline_error("AuthorizationSourceIPMismatch", client_ip)
    permissions = q.get("sp", "")
    if is_account:
        services = q.get("ss", "")
        if "t" not in services:
            raise pipeline_error("AuthorizationServiceMismatch")
        grant = SasGrant(version, permissions, None, services, q.get("srt", ""))
    else:
        grant = SasGrant(version, permissions, q["tn"].lower())
        if q.get("spk") is not None or q.get("srk"):
            grant.start_key = (q.get("spk", ""), q.get("srk"))
        if q.get("epk") is not None or q.get("erk"):
            grant.end_key = (q.get("epk", ""), q.get("erk"))
    return AuthResult("SAS", sas=grant, version_override=version)


def _ipv4_range(ip_range: str) -> tuple[ipaddress.IPv4Address, ipaddress.IPv4Address] | None:
    """(low, high) of a SAS ``sip`` (``a.b.c.d`` or ``low-high``); None when it is not IPv4."""
    low_text, _, high_text = ip_range.partition("-")
    try:
        low = ipaddress.IPv4Address(low_text.strip())
        high = ipaddress.IPv4Address(high_text.strip()) if high_text else low
    except ValueError:
        return None
    return low, high


def _ip_in(bounds: tuple[ipaddress.IPv4Address, ipaddress.IPv4Address], client_ip: str) -> bool:
    """Whether the client is inside the range; an IPv6 client never is (IPv4 and IPv6
    addresses do not compare: that was a TypeError, a 500)."""
    try:
        client = ipaddress.ip_address(client_ip)
    except ValueError:
        return False
    if not isinstance(client, ipaddress.IPv4Address):
        mapped = client.ipv4_mapped
        if mapped is None:
            return False
        client = mapped
    return bounds[0] <= client <= bounds[1]
