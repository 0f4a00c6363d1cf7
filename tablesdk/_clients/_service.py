"""Service-level resources: stored access policies, service properties and stats.

These travel as plain XML whatever payload format the client speaks (JSON or
Atom): ``<SignedIdentifiers>`` for Get/Set Table ACL (``comp=acl``),
``<StorageServiceProperties>`` for Get/Set Table Service Properties
(``restype=service&comp=properties``) and ``<StorageServiceStats>`` for Get
Table Service Stats (``restype=service&comp=stats``, secondary endpoint only).

Every limit the service enforces on these bodies is checked here before a
request is built, with the service's numbers: at most 5 stored access policies
per table, policy ids of 1-64 characters, table permissions ``raud``; at most 5
CORS rules, 64 origins and 64 literal plus 2 prefixed headers per rule, 256
characters per origin or header, the methods the service knows, 2 KiB of CORS
settings in all; retention of 1-365 days. Bodies are parsed with the same safe
parser as Atom payloads (no DTD, no entities, no network).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .._core._errors import TableValidationError

__all__ = [
    "AccessPolicy",
    "AnalyticsLogging",
    "Metrics",
    "CorsRule",
    "ServiceProperties",
    "ServiceStats",
    "MAX_STORED_POLICIES",
    "MAX_POLICY_ID_LENGTH",
    "MAX_CORS_RULES",
    "CORS_METHODS",
    "serialize_acl",
    "parse_acl",
    "serialize_service_properties",
    "parse_service_properties",
    "parse_service_stats",
]

#: The service keeps at most this many stored access policies per table.
MAX_STORED_POLICIES = 5
#: A stored access policy id is 1 to this many characters.
MAX_POLICY_ID_LENGTH = 64
#: CORS rules per service.
MAX_CORS_RULES = 5
#: Methods a CORS rule may allow.
CORS_METHODS = frozenset({"DELETE", "GET", "HEAD", "MERGE", "POST", "OPTIONS", "PUT", "PATCH"})
_MAX_CORS_ORIGINS = 64
_MAX_CORS_LITERAL_HEADERS = 64
_MAX_CORS_PREFIXED_HEADERS = 2
_MAX_CORS_ITEM = 256
_MAX_CORS_SETTINGS = 2048  # bytes of all rules' values, XML tags excluded
_MAX_RETENTION_DAYS = 365
_TABLE_PERMISSIONS = "raud"
_XML_DECL = '<?xml version="1.0" encoding="utf-8"?>'
_FRACTION = re.compile(r"\.(\d+)")


# --------------------------------------------------------------------------- models


@dataclass
class AccessPolicy:
    """A stored access policy: what a SAS naming it (``si``) may do, and when.

    ``permission`` is a subset of ``"raud"`` (query, add, update, delete).
    Any field may be left empty; the SAS then has to carry it itself.
    Datetimes are UTC (naive ones are taken as UTC).
    """

    permission: str = ""
    start: datetime | None = None
    expiry: datetime | None = None


@dataclass
class AnalyticsLogging:
    """Storage Analytics logging of the Table service: which requests are logged, kept how long.

    ``retention_days`` (1-365) deletes older logs; None keeps them.
    """

    version: str = "1.0"
    delete: bool = False
    read: bool = False
    write: bool = False
    retention_days: int | None = None


@dataclass
class Metrics:
    """Hour or minute metrics of the Table service.

    ``include_apis`` adds per-API statistics (only meaningful when ``enabled``;
    None sends False then). ``retention_days`` (1-365) or None (keep).
    """

    version: str = "1.0"
    enabled: bool = False
    include_apis: bool | None = None
    retention_days: int | None = None


@dataclass
class CorsRule:
    """One cross-origin resource sharing rule of the Table service.

    ``allowed_origins`` (``["*"]`` for any), ``allowed_methods`` (from
    DELETE, GET, HEAD, MERGE, POST, OPTIONS, PUT, PATCH), ``allowed_headers``
    and ``exposed_headers`` (literal names or prefixes ending in ``*``), and how
    long a browser may cache the preflight answer.
    """

    allowed_origins: list[str]
    allowed_methods: list[str]
    allowed_headers: list[str] = field(default_factory=list)
    exposed_headers: list[str] = field(default_factory=list)
    max_age_in_seconds: int = 0


@dataclass
class ServiceProperties:
    """Table service properties: analytics logging, hour and minute metrics, CORS rules.

    From :meth:`~tablesdk.CloudTableClient.get_service_properties` every field
    is set. For :meth:`~tablesdk.CloudTableClient.set_service_properties` a
    field left None is not sent, and the service keeps its current value;
    ``cors=[]`` removes every CORS rule.
    """

    logging: AnalyticsLogging | None = None
    hour_metrics: Metrics | None = None
    minute_metrics: Metrics | None = None
    cors: list[CorsRule] | None = None


@dataclass
class ServiceStats:
    """Geo-replication state of an RA-GRS account, read from its secondary endpoint.

    ``geo_replication_status`` is ``"live"``, ``"bootstrap"`` or
    ``"unavailable"``; ``last_sync_time`` is when the secondary last had every
    write before it (None while bootstrapping or unavailable).
    """

    geo_replication_status: str
    last_sync_time: datetime | None


# --------------------------------------------------------------------------- helpers


def _utc_text(value: datetime, field_name: str) -> str:
    if not isinstance(value, datetime):
        raise TableValidationError(field_name, "must be a datetime", type(value).__name__)
    if value.tzinfo is None or value.utcoffset() is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_utc(text: str) -> datetime:
    """An ISO 8601 UTC time as the service writes it (any number of fraction digits)."""
    value = text.strip().replace("Z", "+00:00")
    value = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], value)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"not an ISO 8601 time: {text!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)


def escape(text: str) -> str:
    """``text`` with ``&``, ``<`` and ``>`` escaped for XML character data (as
    ``xml.sax.saxutils.escape``, whose import brings urllib.request, http.client and ssl)."""
    return text.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


def _root(body: bytes, tag: str) -> Any:
    # lxml and the Atom codec load with the first service-properties answer, not with tablesdk
    from lxml import etree

    from .._formats.atom import SAFE_XML_PARSER

    try:
        root = etree.fromstring(body, SAFE_XML_PARSER)
    except (etree.XMLSyntaxError, ValueError):
        raise ValueError(f"the service's answer is not a valid <{tag}> XML document") from None
    if root is None or root.tag != tag:
        raise ValueError(f"the service's answer is not a <{tag}> XML document")
    return root


def _child_text(element: Any, tag: str) -> str | None:
    child = element.find(tag)
    if child is None:
        return None
    return str(child.text or "")


def _bool(element: Any, tag: str) -> bool:
    return (_child_text(element, tag) or "").strip().lower() == "true"


def _text_bool(value: bool) -> str:
    return "true" if value else "false"


def _split_list(text: str | None) -> list[str]:
    return [item.strip() for item in (text or "").split(",") if item.strip()]


# --------------------------------------------------------------------------- ACL


def _check_policy(policy_id: str, policy: AccessPolicy) -> None:
    if not isinstance(policy_id, str) or not 0 < len(policy_id) <= MAX_POLICY_ID_LENGTH:
        raise TableValidationError(
            "policy id", f"1 to {MAX_POLICY_ID_LENGTH} characters", repr(policy_id)[:80]
        )
    if not isinstance(policy, AccessPolicy):
        raise TableValidationError(f"policy {policy_id!r}", "must be an AccessPolicy", type(policy).__name__)
    bad = sorted({letter for letter in policy.permission if letter not in _TABLE_PERMISSIONS})
    if bad:
        raise TableValidationError(
            f"policy {policy_id!r} permission", f"letters from '{_TABLE_PERMISSIONS}'",
            "not allowed: " + ", ".join(repr(letter) for letter in bad),
        )
    if policy.start is not None and policy.expiry is not None:
        if _utc_text(policy.start, "start") >= _utc_text(policy.expiry, "expiry"):
            raise TableValidationError(f"policy {policy_id!r}", "start must be before expiry")


def serialize_acl(policies: dict[str, AccessPolicy]) -> bytes:
    """The Set Table ACL body for ``policies`` (id -> policy), after checking the service's limits."""
    if not isinstance(policies, dict):
        raise TableValidationError("policies", "a dict of policy id to AccessPolicy", type(policies).__name__)
    if len(policies) > MAX_STORED_POLICIES:
        raise TableValidationError(
            "policies", f"at most {MAX_STORED_POLICIES} stored access policies per table", str(len(policies))
        )
    parts = [_XML_DECL, "<SignedIdentifiers>"]
    for policy_id, policy in policies.items():
        _check_policy(policy_id, policy)
        parts.append(f"<SignedIdentifier><Id>{escape(policy_id)}</Id><AccessPolicy>")
        if policy.start is not None:
            parts.append(f"<Start>{_utc_text(policy.start, 'start')}</Start>")
        if policy.expiry is not None:
            parts.append(f"<Expiry>{_utc_text(policy.expiry, 'expiry')}</Expiry>")
        if policy.permission:
            ordered = "".join(letter for letter in _TABLE_PERMISSIONS if letter in policy.permission)
            parts.append(f"<Permission>{ordered}</Permission>")
        parts.append("</AccessPolicy></SignedIdentifier>")
    parts.append("</SignedIdentifiers>")
    return "".join(parts).encode("utf-8")


def parse_acl(body: bytes) -> dict[str, AccessPolicy]:
    """The policies of a Get Table ACL answer, in the service's order (an empty body: none)."""
    if not body.strip():
        return {}
    root = _root(body, "SignedIdentifiers")
    result: dict[str, AccessPolicy] = {}
    for identifier in root.findall("SignedIdentifier"):
        policy_id = _child_text(identifier, "Id") or ""
        policy = AccessPolicy()
        access = identifier.find("AccessPolicy")
        if access is not None:
            start = _child_text(access, "Start")
            expiry = _child_text(access, "Expiry")
            policy.permission = (_child_text(access, "Permission") or "").strip()
            policy.start = _parse_utc(start) if start and start.strip() else None
            policy.expiry = _parse_utc(expiry) if expiry and expiry.strip() else None
        result[policy_id] = policy
    return result


# --------------------------------------------------------------------------- service properties


def _check_retention(days: int | None, field_name: str) -> None:
    if days is None:
        return
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= _MAX_RETENTION_DAYS:
        raise TableValidationError(field_name, f"1 to {_MAX_RETENTION_DAYS} days, or None", repr(days))


def _retention_xml(days: int | None) -> str:
    if days is None:
        return "<RetentionPolicy><Enabled>false</Enabled></RetentionPolicy>"
    return f"<RetentionPolicy><Enabled>true</Enabled><Days>{days}</Days></RetentionPolicy>"


def _logging_xml(value: AnalyticsLogging) -> str:
    _check_retention(value.retention_days, "logging.retention_days")
    return (
        f"<Logging><Version>{escape(value.version)}</Version><Delete>{_text_bool(value.delete)}</Delete>"
        f"<Read>{_text_bool(value.read)}</Read><Write>{_text_bool(value.write)}</Write>"
        f"{_retention_xml(value.retention_days)}</Logging>"
    )


def _metrics_xml(tag: str, value: Metrics) -> str:
    _check_retention(value.retention_days, f"{tag}.retention_days")
    include = ""
    if value.enabled:  # the service wants IncludeAPIs exactly when metrics are on
        include = f"<IncludeAPIs>{_text_bool(bool(value.include_apis))}</IncludeAPIs>"
    return (
        f"<{tag}><Version>{escape(value.version)}</Version><Enabled>{_text_bool(value.enabled)}</Enabled>"
        f"{include}{_retention_xml(value.retention_days)}</{tag}>"
    )


def _check_items(items: list[str], field_name: str) -> None:
    if not isinstance(items, list) or not all(isinstance(item, str) and item for item in items):
        raise TableValidationError(field_name, "a list of non-empty strings")
    for item in items:
        if len(item) > _MAX_CORS_ITEM or "," in item:
            raise TableValidationError(field_name, f"items of at most {_MAX_CORS_ITEM} characters, without ','",
                                       repr(item[:40]))


def _check_headers(headers: list[str], field_name: str) -> None:
    _check_items(headers, field_name)
    prefixed = [h for h in headers if h.endswith("*")]
    if len(prefixed) > _MAX_CORS_PREFIXED_HEADERS or len(headers) - len(prefixed) > _MAX_CORS_LITERAL_HEADERS:
        raise TableValidationError(
            field_name,
            f"at most {_MAX_CORS_LITERAL_HEADERS} literal and {_MAX_CORS_PREFIXED_HEADERS} prefixed headers",
            f"{len(headers) - len(prefixed)} literal, {len(prefixed)} prefixed",
        )


def _check_cors_rule(index: int, rule: CorsRule) -> int:
    """Check one rule; return the size of its settings (values without tags)."""
    where = f"cors[{index}]"
    if not isinstance(rule, CorsRule):
        raise TableValidationError(where, "must be a CorsRule", type(rule).__name__)
    _check_items(rule.allowed_origins, f"{where}.allowed_origins")
    if not rule.allowed_origins or len(rule.allowed_origins) > _MAX_CORS_ORIGINS:
        raise TableValidationError(f"{where}.allowed_origins", f"1 to {_MAX_CORS_ORIGINS} origins",
                                   str(len(rule.allowed_origins)))
    _check_items(rule.allowed_methods, f"{where}.allowed_methods")
    unknown = sorted({m for m in rule.allowed_methods if m.upper() not in CORS_METHODS})
    if not rule.allowed_methods or unknown:
        raise TableValidationError(f"{where}.allowed_methods", "one or more of " + ", ".join(sorted(CORS_METHODS)),
                                   ", ".join(unknown) or "empty")
    _check_headers(rule.allowed_headers, f"{where}.allowed_headers")
    _check_headers(rule.exposed_headers, f"{where}.exposed_headers")
    age = rule.max_age_in_seconds
    if isinstance(age, bool) or not isinstance(age, int) or age < 0:
        raise TableValidationError(f"{where}.max_age_in_seconds", "an int >= 0", repr(age))
    values = [",".join(rule.allowed_origins), ",".join(rule.allowed_methods), ",".join(rule.allowed_headers),
              ",".join(rule.exposed_headers), str(age)]
    return sum(len(v.encode("utf-8")) for v in values)


def _cors_xml(rules: list[CorsRule]) -> str:
    if not isinstance(rules, list):
        raise TableValidationError("cors", "a list of CorsRule", type(rules).__name__)
    if len(rules) > MAX_CORS_RULES:
        raise TableValidationError("cors", f"at most {MAX_CORS_RULES} rules", str(len(rules)))
    size = sum(_check_cors_rule(i, rule) for i, rule in enumerate(rules))
    if size > _MAX_CORS_SETTINGS:
        raise TableValidationError("cors", f"at most {_MAX_CORS_SETTINGS} bytes of settings in all rules", str(size))
    parts = ["<Cors>"]
    for rule in rules:
        parts.append(
            f"<CorsRule><AllowedOrigins>{escape(','.join(rule.allowed_origins))}</AllowedOrigins>"
            f"<AllowedMethods>{escape(','.join(m.upper() for m in rule.allowed_methods))}</AllowedMethods>"
            f"<MaxAgeInSeconds>{rule.max_age_in_seconds}</MaxAgeInSeconds>"
            f"<ExposedHeaders>{escape(','.join(rule.exposed_headers))}</ExposedHeaders>"
            f"<AllowedHeaders>{escape(','.join(rule.allowed_headers))}</AllowedHeaders></CorsRule>"
        )
    parts.append("</Cors>")
    return "".join(parts)


def serialize_service_properties(props: ServiceProperties) -> bytes:
    """The Set Table Service Properties body, after checking the service's limits."""
    if not isinstance(props, ServiceProperties):
        raise TableValidationError("properties", "must be a ServiceProperties", type(props).__name__)
    parts = [_XML_DECL, "<StorageServiceProperties>"]
    if props.logging is not None:
        parts.append(_logging_xml(props.logging))
    if props.hour_metrics is not None:
        parts.append(_metrics_xml("HourMetrics", props.hour_metrics))
    if props.minute_metrics is not None:
        parts.append(_metrics_xml("MinuteMetrics", props.minute_metrics))
    if props.cors is not None:
        parts.append(_cors_xml(props.cors))
    parts.append("</StorageServiceProperties>")
    return "".join(parts).encode("utf-8")


def _retention_days(element: Any) -> int | None:
    policy = element.find("RetentionPolicy")
    if policy is None or not _bool(policy, "Enabled"):
        return None
    days = (_child_text(policy, "Days") or "").strip()
    return int(days) if days.isdigit() else None


def _parse_metrics(element: Any | None) -> Metrics:
    if element is None:
        return Metrics()
    enabled = _bool(element, "Enabled")
    include = _child_text(element, "IncludeAPIs")
    return Metrics(
        version=(_child_text(element, "Version") or "1.0").strip(),
        enabled=enabled,
        include_apis=(include.strip().lower() == "true") if include is not None else None,
        retention_days=_retention_days(element),
    )


def _parse_cors(element: Any | None) -> list[CorsRule]:
    rules: list[CorsRule] = []
    for rule in element.findall("CorsRule") if element is not None else []:
        age = (_child_text(rule, "MaxAgeInSeconds") or "0").strip()
        rules.append(CorsRule(
            allowed_origins=_split_list(_child_text(rule, "AllowedOrigins")),
            allowed_methods=_split_list(_child_text(rule, "AllowedMethods")),
            allowed_headers=_split_list(_child_text(rule, "AllowedHeaders")),
            exposed_headers=_split_list(_child_text(rule, "ExposedHeaders")),
            max_age_in_seconds=int(age) if age.isdigit() else 0,
        ))
    return rules


def parse_service_properties(body: bytes) -> ServiceProperties:
    """A Get Table Service Properties answer; absent sections get their defaults (off)."""
    root = _root(body, "StorageServiceProperties")
    logging_element = root.find("Logging")
    logging = AnalyticsLogging()
    if logging_element is not None:
        logging = AnalyticsLogging(
            version=(_child_text(logging_element, "Version") or "1.0").strip(),
            delete=_bool(logging_element, "Delete"),
            read=_bool(logging_element, "Read"),
            write=_bool(logging_element, "Write"),
            retention_days=_retention_days(logging_element),
        )
    return ServiceProperties(
        logging=logging,
        hour_metrics=_parse_metrics(root.find("HourMetrics")),
        minute_metrics=_parse_metrics(root.find("MinuteMetrics")),
        cors=_parse_cors(root.find("Cors")),
    )


# --------------------------------------------------------------------------- stats


def parse_service_stats(body: bytes) -> ServiceStats:
    """A Get Table Service Stats answer (``LastSyncTime`` is an RFC 1123 date)."""
    root = _root(body, "StorageServiceStats")
    geo = root.find("GeoReplication")
    if geo is None:
        raise ValueError("the service's stats have no <GeoReplication> element")
    status = (_child_text(geo, "Status") or "").strip().lower()
    text = (_child_text(geo, "LastSyncTime") or "").strip()
    last_sync: datetime | None = None
    if text:
        from email.utils import parsedate_to_datetime  # slow to import, and rarely needed

        try:
            last_sync = parsedate_to_datetime(text).astimezone(timezone.utc)
        except (TypeError, ValueError):
            last_sync = _parse_utc(text)
    return ServiceStats(status, last_sync)
