"""The requests served from :mod:`._admin`'s bodies and rules: Get/Set Table Service
Properties, Get Table Service Stats (the secondary's), Get/Set Table ACL, CORS preflights
and the CORS headers of an actual cross-origin answer, and the stored access policy a SAS
names."""

from __future__ import annotations

from datetime import datetime
from email.utils import formatdate
from typing import Callable

from . import _admin as admin
from ._errors import error, pipeline_error
from ._request import Call, Request, Response
from ._storage import Storage

__all__ = ["service_level", "table_acl", "preflight", "cors_headers", "stored_policy"]


def service_level(
    call: Call, method: str, storage: Storage, *, geo_replication_status: str, clock: Callable[[], datetime],
) -> Response:
    """A request to the account itself: ``?restype=service&comp=properties`` or ``comp=stats``."""
    comp = call.query.get("comp")
    if call.query.get("restype") != "service" or comp not in ("properties", "stats"):
        raise error("InvalidUri")
    if call.sas is not None:
        call.sas.check("service" if method in ("GET", "HEAD") else "service_write", None)
    if comp == "stats":
        if method != "GET":
            raise error("MethodNotAllowed")
        if not call.secondary:  # stats are served by the secondary endpoint only
            raise pipeline_error("InvalidQueryParameterValue")
        last_sync = None
        if geo_replication_status == "live":
            last_sync = formatdate(clock().timestamp() - 1, usegmt=True)
        body = admin.render_stats(geo_replication_status, last_sync)
        return Response(200, [("Content-Type", "application/xml")], body)
    if method == "GET":
        with storage.reading():
            body = admin.render_properties(storage.get_meta("service_properties"))
        return Response(200, [("Content-Type", "application/xml")], body)
    if method == "PUT":
        update = admin.parse_properties_body(call.req.body)
        with storage.transaction():
            merged = admin.merge_properties(storage.get_meta("service_properties"), update)
            storage.set_meta("service_properties", merged)
        return Response(202)
    raise error("MethodNotAllowed")


def table_acl(call: Call, method: str, storage: Storage, table: str) -> Response:
    """Get/Set Table ACL: the account owner only (no SAS may read or change policies)."""
    if call.sas is not None:
        raise pipeline_error("AuthorizationFailure")
    if method not in ("GET", "HEAD", "PUT"):
        raise error("MethodNotAllowed")
    policies = admin.parse_acl_body(call.req.body) if method == "PUT" else []
    with storage.transaction():
        stored = storage.get_table(table)
        if stored is None:
            raise error("TableNotFound")
        if method == "PUT":
            storage.set_meta("acl:" + table.lower(), admin.acl_to_json(policies) if policies else None)
            return Response(204)
        body = admin.render_acl(admin.acl_from_json(storage.get_meta("acl:" + table.lower())))
    return Response(200, [("Content-Type", "application/xml")], body)


def preflight(req: Request, storage: Storage) -> Response:
    """Answer a CORS preflight (OPTIONS) from the stored rules, as the service does."""
    origin = req.headers.get("origin", "")
    method = req.headers.get("access-control-request-method", "")
    if not origin or not method:
        missing = "Origin" if not origin else "Access-Control-Request-Method"
        raise pipeline_error("InvalidHeaderValue", details=[("HeaderName", missing)])
    requested = [h.strip() for h in req.headers.get("access-control-request-headers", "").split(",") if h.strip()]
    with storage.reading():
        stored = storage.get_meta("service_properties")
    rule = admin.match_preflight(stored, origin, method, requested)
    if rule is None:
        raise pipeline_error("CorsPreflightFailure")
    headers = [
        ("Access-Control-Allow-Origin", "*" if "*" in rule["origins"] else origin),
        ("Access-Control-Allow-Methods", method),
        ("Access-Control-Max-Age", str(rule["max_age"])),
        ("Access-Control-Allow-Credentials", "true"),
    ]
    if requested:
        headers.append(("Access-Control-Allow-Headers", ",".join(requested)))
    return Response(200, headers)


def cors_headers(storage: Storage, origin: str, method: str) -> list[tuple[str, str]]:
    """The CORS headers the stored rules give an actual request from ``origin``."""
    with storage.reading():
        stored = storage.get_meta("service_properties")
    return admin.cors_response_headers(stored, origin, method)


def stored_policy(storage: Storage, table: str, policy_id: str) -> admin.StoredPolicy | None:
    """The access policy ``policy_id`` stored on ``table``, for a SAS that names it."""
    with storage.reading():
        policies = admin.acl_from_json(storage.get_meta("acl:" + table.lower()))
    return next((p for p in policies if p.id == policy_id), None)
