"""Service-level bodies of the emulator: table ACLs, service properties, stats and CORS.

Written independently of the client's codec (:mod:`tablesdk._clients._service`) so that
each checks the other. Stored state is JSON text in the storage's ``meta``
table: ``acl:<table>`` holds a list of policies, ``service_properties`` the
properties. Bodies the service refuses get ``400 InvalidXmlDocument`` (not
XML, too many policies or CORS rules, an id too long, a bad permission) or
``400 InvalidXmlNodeValue`` (a value out of the service's range).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from ._auth import parse_sas_time
from ._errors import ServiceError

__all__ = [
    "StoredPolicy",
    "parse_acl_body",
    "acl_to_json",
    "acl_from_json",
    "render_acl",
    "parse_properties_body",
    "merge_properties",
    "render_properties",
    "render_stats",
    "DEFAULT_PROPERTIES",
    "match_preflight",
    "cors_response_headers",
]

_MAX_POLICIES = 5
_MAX_ID = 64
_PERMISSIONS = "raud"
_MAX_RULES = 5
_CORS_METHODS = {"DELETE", "GET", "HEAD", "MERGE", "POST", "OPTIONS", "PUT", "PATCH"}
_DECL = '<?xml version="1.0" encoding="utf-8"?>'


def _bad_xml(message: str = "XML specified is not syntactically valid.") -> ServiceError:
    return ServiceError(400, "InvalidXmlDocument", message)


def _bad_value(message: str = "The value for one of the XML nodes is not in the correct format.") -> ServiceError:
    return ServiceError(400, "InvalidXmlNodeValue", message)


def _parse(body: bytes, tag: str) -> Any:
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    try:
        root = etree.fromstring(body, parser)
    except (etree.XMLSyntaxError, ValueError):
        raise _bad_xml() from None
    if root is None or root.tag != tag:
        raise _bad_xml()
    return root


def _text(element: Any, tag: str) -> str | None:
    child = element.find(tag)
    return None if child is None else (child.text or "").strip()


# ------------------------------------------------------------------ ACL


@dataclass
class StoredPolicy:
    """One stored access policy as the service keeps it (times as given, ISO 8601 UTC)."""

    id: str
    start: str
    expiry: str
    permission: str


def _check_time(text: str) -> str:
    if text and parse_sas_time(text) is None:
        raise _bad_value()
    return text


def parse_acl_body(body: bytes) -> list[StoredPolicy]:
    """The policies of a Set Table ACL body (an empty body removes them all)."""
    if not body.strip():
        return []
    root = _parse(body, "SignedIdentifiers")
    identifiers = root.findall("SignedIdentifier")
    if len(identifiers) > _MAX_POLICIES:
        raise _bad_xml()
    policies: list[StoredPolicy] = []
    for identifier in identifiers:
        policy_id = _text(identifier, "Id") or ""
        if not 0 < len(policy_id) <= _MAX_ID:
            raise _bad_xml()
        access = identifier.find("AccessPolicy")
        start = expiry = permission = ""
        if access is not None:
            start = _check_time(_text(access, "Start") or "")
            expiry = _check_time(_text(access, "Expiry") or "")
            permission = _text(access, "Permission") or ""
        if any(letter not in _PERMISSIONS for letter in permission):
            raise _bad_xml()
        policies.append(StoredPolicy(policy_id, start, expiry, permission))
    return policies


def acl_to_json(policies: list[StoredPolicy]) -> str:
    return json.dumps([[p.id, p.start, p.expiry, p.permission] for p in policies])


def acl_from_json(text: str | None) -> list[StoredPolicy]:
    return [StoredPolicy(*item) for item in json.loads(text)] if text else []


def render_acl(policies: list[StoredPolicy]) -> bytes:
    parts = [_DECL, "<SignedIdentifiers>"]
    for policy in policies:
        parts.append(f"<SignedIdentifier><Id>{escape(policy.id)}</Id>")
        # An identifier without start, expiry or permission has no access policy: the service
        # leaves the element out rather than writing an empty one.
        if policy.start or policy.expiry or policy.permission:
            parts.append("<AccessPolicy>")
            if policy.start:
                parts.append(f"<Start>{escape(policy.start)}</Start>")
            if policy.expiry:
                parts.append(f"<Expiry>{escape(policy.expiry)}</Expiry>")
            if policy.permission:
                parts.append(f"<Permission>{escape(policy.permission)}</Permission>")
            parts.append("</AccessPolicy>")
        parts.append("</SignedIdentifier>")
    parts.append("</SignedIdentifiers>")
    return "".join(parts).encode("utf-8")


# ------------------------------------------------------------------ service properties

_OFF_RETENTION: dict[str, Any] = {"enabled": False, "days": None}
DEFAULT_PROPERTIES: dict[str, Any] = {
    "logging": {"version": "1.0", "delete": False, "read": False, "write": False, "retention": _OFF_RETENTION},
    "hour_metrics": {"version": "1.0", "enabled": False, "include_apis": None, "retention": _OFF_RETENTION},
    "minute_metrics": {"version": "1.0", "enabled": False, "include_apis": None, "retention": _OFF_RETENTION},
    "cors": [],
}


def _flag(element: Any, tag: str, required: bool = True) -> bool | None:
    value = _text(element, tag)
    if value is None:
        if required:
            raise _bad_xml()
        return None
    if value.lower() not in ("true", "false"):
        raise _bad_value()
    return value.lower() == "true"


def _retention(element: Any) -> dict[str, Any]:
    policy = element.find("RetentionPolicy")
    if policy is None:
        raise _bad_xml()
    enabled = _flag(policy, "Enabled")
    days_text = _text(policy, "Days")
    if not enabled:
        return {"enabled": False, "days": None}
    if days_text is None or not days_text.isdigit() or not 1 <= int(days_text) <= 365:
        raise _bad_value()
    return {"enabled": True, "days": int(days_text)}


def _metrics(element: Any) -> dict[str, Any]:
    enabled = _flag(element, "Enabled")
    include = _flag(element, "IncludeAPIs", required=bool(enabled))
    return {"version": _text(element, "Version") or "1.0", "enabled": enabled,
            "include_apis": include if enabled else None, "retention": _retention(element)}


def _headers_ok(text: str) -> bool:
    items = [h for h in text.split(",") if h.strip()]
    prefixed = [h for h in items if h.strip().endswith("*")]
    return len(prefixed) <= 2 and len(items) - len(prefixed) <= 64 and all(len(h.strip()) <= 256 for h in items)


def _cors(element: Any) -> list[dict[str, Any]]:
    rules = element.findall("CorsRule")
    if len(rules) > _MAX_RULES:
        raise _bad_xml()
    parsed: list[dict[str, Any]] = []
    size = 0
    for rule in rules:
        values = {name: _text(rule, tag) for name, tag in (
            ("origins", "AllowedOrigins"), ("methods", "AllowedMethods"), ("max_age", "MaxAgeInSeconds"),
            ("exposed", "ExposedHeaders"), ("allowed", "AllowedHeaders"))}
        if values["origins"] is None or values["methods"] is None or values["max_age"] is None:
            raise _bad_xml()
        origins = [o.strip() for o in (values["origins"] or "").split(",") if o.strip()]
        methods = [m.strip() for m in (values["methods"] or "").split(",") if m.strip()]
        if not origins or len(origins) > 64 or any(len(o) > 256 for o in origins):
            raise _bad_value()
        if not methods or any(m not in _CORS_METHODS for m in methods):
            raise _bad_value()
        if not (values["max_age"] or "").isdigit():
            raise _bad_value()
        if not _headers_ok(values["exposed"] or "") or not _headers_ok(values["allowed"] or ""):
            raise _bad_value()
        size += sum(len((v or "").encode("utf-8")) for v in values.values())
        parsed.append({"origins": origins, "methods": methods, "max_age": int(values["max_age"] or "0"),
                       "exposed": [h.strip() for h in (values["exposed"] or "").split(",") if h.strip()],
                       "allowed": [h.strip() for h in (values["allowed"] or "").split(",") if h.strip()]})
    if size > 2048:
        raise _bad_xml()
    return parsed


def parse_properties_body(body: bytes) -> dict[str, Any]:
    """The sections a Set Table Service Properties body gives (absent sections: not in the dict)."""
    root = _parse(body, "StorageServiceProperties")
    result: dict[str, Any] = {}
    logging = root.find("Logging")
    if logging is not None:
        result["logging"] = {"version": _text(logging, "Version") or "1.0", "delete": _flag(logging, "Delete"),
                             "read": _flag(logging, "Read"), "write": _flag(logging, "Write"),
                             "retention": _retention(logging)}
    for key, tag in (("hour_metrics", "HourMetrics"), ("minute_metrics", "MinuteMetrics")):
        element = root.find(tag)
        if element is not None:
            result[key] = _metrics(element)
    cors = root.find("Cors")
    if cors is not None:
        result["cors"] = _cors(cors)
    return result


def merge_properties(stored: str | None, update: dict[str, Any]) -> str:
    """The stored properties (JSON) after a Set: given sections replace, absent ones stay."""
    current = json.loads(stored) if stored else json.loads(json.dumps(DEFAULT_PROPERTIES))
    current.update(update)
    return json.dumps(current)


def _b(value: Any) -> str:
    return "true" if value else "false"


def _retention_xml(retention: dict[str, Any]) -> str:
    if not retention["enabled"]:
        return "<RetentionPolicy><Enabled>false</Enabled></RetentionPolicy>"
    return f"<RetentionPolicy><Enabled>true</Enabled><Days>{retention['days']}</Days></RetentionPolicy>"


def _metrics_xml(tag: str, m: dict[str, Any]) -> str:
    include = f"<IncludeAPIs>{_b(m['include_apis'])}</IncludeAPIs>" if m["enabled"] else ""
    return (f"<{tag}><Version>{escape(m['version'])}</Version><Enabled>{_b(m['enabled'])}</Enabled>{include}"
            f"{_retention_xml(m['retention'])}</{tag}>")


def render_properties(stored: str | None) -> bytes:
    props = json.loads(stored) if stored else DEFAULT_PROPERTIES
    log = props["logging"]
    parts = [
        _DECL, "<StorageServiceProperties>",
        f"<Logging><Version>{escape(log['version'])}</Version><Delete>{_b(log['delete'])}</Delete>"
        f"<Read>{_b(log['read'])}</Read><Write>{_b(log['write'])}</Write>{_retention_xml(log['retention'])}</Logging>",
        _metrics_xml("HourMetrics", props["hour_metrics"]),
        _metrics_xml("MinuteMetrics", props["minute_metrics"]),
        "<Cors>",
    ]
    for rule in props["cors"]:
        parts.append(
            f"<CorsRule><AllowedOrigins>{escape(','.join(rule['origins']))}</AllowedOrigins>"
            f"<AllowedMethods>{','.join(rule['methods'])}</AllowedMethods>"
            f"<MaxAgeInSeconds>{rule['max_age']}</MaxAgeInSeconds>"
            f"<ExposedHeaders>{escape(','.join(rule['exposed']))}</ExposedHeaders>"
            f"<AllowedHeaders>{escape(','.join(rule['allowed']))}</AllowedHeaders></CorsRule>"
        )
    parts.append("</Cors></StorageServiceProperties>")
    return "".join(parts).encode("utf-8")


def render_stats(status: str, last_sync: str | None) -> bytes:
    """Get Table Service Stats body; ``last_sync`` is an RFC 1123 date or None."""
    sync = f"<LastSyncTime>{last_sync}</LastSyncTime>" if last_sync else "<LastSyncTime />"
    return (f"{_DECL}<StorageServiceStats><GeoReplication><Status>{status}</Status>{sync}"
            "</GeoReplication></StorageServiceStats>").encode("utf-8")


# ------------------------------------------------------------------ CORS


def _header_allowed(name: str, patterns: list[str]) -> bool:
    lower = name.lower()
    for pattern in patterns:
        p = pattern.lower()
        if p == "*" or p == lower or (p.endswith("*") and lower.startswith(p[:-1])):
            return True
    return False


def _origin_allowed(origin: str, rule: dict[str, Any]) -> bool:
    return "*" in rule["origins"] or origin.lower() in (o.lower() for o in rule["origins"])


def match_preflight(stored: str | None, origin: str, method: str, headers: list[str]) -> dict[str, Any] | None:
    """The first rule allowing this preflight request, or None."""
    props = json.loads(stored) if stored else DEFAULT_PROPERTIES
    for rule in props["cors"]:
        if not _origin_allowed(origin, rule) or method not in rule["methods"]:
            continue
        if all(_header_allowed(h, rule["allowed"]) for h in headers):
            return dict(rule)
    return None


def cors_response_headers(stored: str | None, origin: str, method: str) -> list[tuple[str, str]]:
    """The CORS headers of an actual (not preflight) request from ``origin``.

    With rules set and none matching, only ``Vary: Origin``; with no rules, none.
    """
    props = json.loads(stored) if stored else DEFAULT_PROPERTIES
    for rule in props["cors"]:
        if _origin_allowed(origin, rule) and method in rule["methods"]:
            allow = "*" if "*" in rule["origins"] else origin
            headers = [("Access-Control-Allow-Origin", allow)]
            if rule["exposed"]:
                headers.append(("Access-Control-Expose-Headers", ",".join(rule["exposed"])))
            if allow != "*":
                headers.append(("Vary", "Origin"))
            return headers
    # No rule lets this origin in: the answer still varies with Origin whenever rules exist.
    return [("Vary", "Origin")] if props["cors"] else []
