"""The Table service itself, independent of HTTP: one :class:`Request` in, one :class:`Response` out.

:class:`TableService` authenticates the request, picks the API version, routes it
to a table, entity, batch or service-level operation and finishes the answer (or
the error) the way the service does. The operations live in their own modules,
each taking the :class:`Call` and the storage it needs:

- ``_request.py``: Request, Response, Call, the versions and limits;
- ``_url_parts.py``, ``_query_options.py``, ``_negotiation.py``: reading the URL, the
  query options and the payload formats;
- ``_table_operations.py``, ``_entity_reads.py``, ``_entity_writes.py``: the operations;
- ``_batch_requests.py``: ``$batch`` (its change sets run through the same entity writes
  inside a single transaction);
- ``_admin_requests.py``: service properties, stats, table ACLs and CORS;
- ``_error_answers.py``: the error answers.
"""

from __future__ import annotations

import base64
import logging
import uuid
from datetime import datetime, timezone
from email.utils import formatdate
from typing import Callable
from urllib.parse import unquote

from . import _admin as admin
from ._admin_requests import cors_headers, preflight, service_level, stored_policy, table_acl
from ._auth import AuthResult, authenticate
from ._batch_requests import serve_batch
from ._entity_reads import get_entity, query_entities
from ._entity_writes import single_write
from ._error_answers import error_response, invalid_url_response, pipeline_error_response
from ._errors import KEY_COUNT, PipelineError, ServiceError, error, pipeline_error
from ._negotiation import soft_format
from ._request import (
    HTTP_METHODS, KNOWN_VERSIONS, LEGACY_VERSION, MAX_BODY, MAX_PAGE, Call, Request, Response, effective_method,
)
from ._storage import Storage
from ._table_operations import create_table, delete_table, get_table, query_tables
from ._url_parts import check_table_name, entity_keys, parse_literal_list, query_dict, resource_segment, split_account
from ._wire import JSON_MINIMAL

__all__ = ["Request", "Response", "TableService", "KNOWN_VERSIONS", "HTTP_METHODS", "DEVSTORE_ACCOUNT",
           "DEVSTORE_KEY"]

log = logging.getLogger("tablesdk.devstore")
# The client's loggers put a NullHandler on "tablesdk" when first made (``import tablesdk`` does not
# import logging); the emulator may log before any of them exists, so its logger has its own:
# nothing reaches stderr unless the application configures logging.
log.addHandler(logging.NullHandler())

DEVSTORE_ACCOUNT = "devstoreaccount1"
DEVSTORE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


class TableService:
    """The emulated Table service for one account over one :class:`Storage`."""

    def __init__(
        self,
        storage: Storage,
        *,
        account: str = DEVSTORE_ACCOUNT,
        account_key: str = DEVSTORE_KEY,
        page_size: int = MAX_PAGE,
        max_scan: int | None = None,
        allow_anonymous: bool = False,
        clock: Callable[[], datetime] | None = None,
        max_url_segment: int | None = 260,
        double_decode_keys: bool = False,
        bearer_tokens: frozenset[str] = frozenset(),
        geo_replication_status: str = "live",
    ) -> None:
        if not 1 <= page_size <= MAX_PAGE:
            raise ValueError(f"page_size must be 1..{MAX_PAGE}, got {page_size}")
        if max_scan is not None and max_scan < 1:
            raise ValueError("max_scan must be positive")
        self.storage = storage
        self.account = account
        self.key = base64.b64decode(account_key)
        self.page_size = page_size
        self.max_scan = max_scan
        self.allow_anonymous = allow_anonymous
        self.clock = clock or (lambda: datetime.now(timezone.utc))
        self.server_name = "tablesdk-devstore"
        self.max_url_segment = max_url_segment
        self.double_decode_keys = double_decode_keys
        self.bearer_tokens = frozenset(bearer_tokens)
        if geo_replication_status not in ("live", "bootstrap", "unavailable"):
            raise ValueError("geo_replication_status must be 'live', 'bootstrap' or 'unavailable'")
        self.geo_replication_status = geo_replication_status

    # -------------------------------------------------------------- entry point

    def handle(self, req: Request) -> Response:
        """Serve one request; never raises."""
        if self.max_url_segment is not None:
            for segment in req.raw_path.split("/"):
                if len(segment) > self.max_url_segment and len(unquote(segment)) > self.max_url_segment:
                    return invalid_url_response()
        request_id = str(uuid.uuid4())
        query: dict[str, str] = {}
        version: str | None = None
        try:
            query = query_dict(req.raw_query)
            if req.method not in HTTP_METHODS:  # case-sensitive, as HTTP methods are
                raise error("UnsupportedHttpVerb")
            rest, secondary = split_account(req.raw_path, self.account)
            if req.method.upper() == "OPTIONS" and "origin" in req.headers:
                # A CORS preflight: answered from the stored rules before (and without) authentication.
                response = preflight(req, self.storage)
                response.headers.append(("x-ms-request-id", request_id))
                return response
            auth = authenticate(
                method=req.method, raw_path=req.raw_path, query=query, headers=req.headers,
                account=self.account, key=self.key, secure=req.secure, client_ip=req.client_ip,
                now=self.clock(), allow_anonymous=self.allow_anonymous,
                policy_lookup=self._stored_policy, bearer_tokens=self.bearer_tokens,
            )
            version, explicit = self._version(auth, req.headers)
            account_path = self.account + ("-secondary" if secondary else "")
            call = Call(req, query, version, explicit, auth, f"http://{req.host}/{account_path}/", secondary=secondary)
            if req.body_too_large or len(req.body) > MAX_BODY:
                raise error("RequestBodyTooLarge")
            if secondary and req.method.upper() not in ("GET", "HEAD"):
                # the secondary is read-only; the service says so in the request's format
                raise error("InsufficientAccountPermissions", message="Write operations are not allowed.")
            response = self._route(call, rest)
        except PipelineError as exc:
            response = pipeline_error_response(exc, request_id)
        except ServiceError as exc:
            fmt = soft_format(req.headers, query, version or req.headers.get("x-ms-version") or LEGACY_VERSION)
            response = error_response(exc, fmt, request_id)
        except Exception:  # pragma: no cover - a bug; answered like the service's 500
            log.exception("devstore: internal error serving %s %s", req.method, req.raw_path)
            response = error_response(error("InternalError"), JSON_MINIMAL, request_id)
        sent_version = req.headers.get("x-ms-version", "").strip()
        echoed = version or (sent_version if sent_version in KNOWN_VERSIONS else None)
        response.headers.append(("x-ms-request-id", request_id))
        if echoed is not None:
            response.headers.append(("x-ms-version", echoed))
        response.headers.extend([("Date", formatdate(usegmt=True)), ("Server", self.server_name)])
        if response.header("Cache-Control") is None:
            response.headers.append(("Cache-Control", "no-cache"))
        client_id = req.headers.get("x-ms-client-request-id")
        if client_id is not None:
            response.headers.append(("x-ms-client-request-id", client_id))
        origin = req.headers.get("origin")
        if origin:  # an actual cross-origin request: the stored CORS rules decide what the browser may see
            response.headers.extend(cors_headers(self.storage, origin, req.method.upper()))
        return response

    def _stored_policy(self, table: str, policy_id: str) -> admin.StoredPolicy | None:
        return stored_policy(self.storage, table, policy_id)

    @staticmethod
    def _version(auth: AuthResult, headers: dict[str, str]) -> tuple[str, bool]:
        if auth.version_override:
            return auth.version_override, True
        value = headers.get("x-ms-version")
        if value is None or not value.strip():
            return LEGACY_VERSION, False
        value = value.strip()
        if value not in KNOWN_VERSIONS:
            raise pipeline_error(
                "InvalidHeaderValue", details=[("HeaderName", "x-ms-version"), ("HeaderValue", value)]
            )
        return value, True

    # -------------------------------------------------------------- routing

    def _route(self, call: Call, rest: str) -> Response:
        method = effective_method(call)
        segment = resource_segment(rest)
        if segment == "":
            return service_level(call, method, self.storage, geo_replication_status=self.geo_replication_status,
                                 clock=self.clock)
        if segment == "$batch":
            if method != "POST":
                raise error("MethodNotAllowed")
            return serve_batch(call, self.storage, self.account, self._route)
        _check_trailing_keys(rest)
        head, paren, tail = segment.partition("(")
        name = unquote(head)
        keys_text = unquote(paren + tail) if paren else ""
        if self.double_decode_keys and not call.in_batch:
            keys_text = unquote(keys_text)  # the production bug the Azure Storage team's blog documents (opt-in)
        if keys_text and not keys_text.endswith(")"):
            raise error("InvalidUri")
        inner = keys_text[1:-1] if keys_text else ""
        if name.lower() == "tables":
            if not inner.strip():
                if method == "GET":
                    return query_tables(call, self.storage, self.account, self.page_size)
                if method == "POST":
                    return create_table(call, self.storage, self.account)
                raise error("MethodNotAllowed")
            items = parse_literal_list(inner)
            if len(items) != 1 or items[0][0] not in (None, "TableName"):
                raise error("InvalidInput", message="Bad Request - Error in query syntax.")
            table = items[0][1]
            if method == "DELETE":
                return delete_table(call, self.storage, table)
            if method == "GET":
                return get_table(call, self.storage, self.account, table)
            raise error("MethodNotAllowed")
        check_table_name(name)  # an entity or ACL operation on a name no table can have: 400, not 404
        if "comp" in call.query:
            if call.query["comp"] != "acl" or inner.strip():
                raise error("InvalidQueryParameterValue")
            return table_acl(call, method, self.storage, name)
        if not inner.strip():
            if method == "GET":
                return query_entities(call, self.storage, self.account, name, page_size=self.page_size,
                                      max_scan=self.max_scan)
            if method == "POST":
                return single_write(call, self.storage, self.account, "POST", name, None)
            raise error("MethodNotAllowed")
        pk, rk = entity_keys(inner)
        if method == "GET":
            return get_entity(call, self.storage, self.account, name, pk, rk)
        if method in ("PUT", "MERGE", "DELETE"):
            return single_write(call, self.storage, self.account, method, name, (pk, rk))
        raise error("MethodNotAllowed")

    # -------------------------------------------------------------- admin

    def reset(self) -> None:
        """Delete all tables and entities."""
        self.storage.reset()

    def table_names(self) -> list[str]:
        with self.storage.reading():
            return list(self.storage.iter_tables())


def _check_trailing_keys(rest: str) -> None:
    """``/<table>/<more>`` is an operation on ``<table>``, whose entities have two keys: a key
    predicate in ``<more>`` with another number of keys (``/t/Tables('t')``, as a client builds
    from an account URL that already ends in a table name) is refused as the service refuses it."""
    trailing = rest.split("?", 1)[0].strip("/").split("/")[1:]
    if not trailing:
        return
    _, paren, keys = trailing[-1].partition("(")
    if paren and keys.endswith(")") and keys[:-1].strip():
        if len(parse_literal_list(unquote(keys[:-1]))) != 2:
            raise error("InvalidInput", message=KEY_COUNT)
