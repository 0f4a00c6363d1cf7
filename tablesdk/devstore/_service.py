"""The Table service itself, independent of HTTP: one :class:`Request` in, one :class:`Response` out.

:class:`TableService` authenticates the request, picks the API version and the
payload format, routes it to a table, entity or batch operation, runs that in
one storage transaction, and writes the response (or the error) the way the
service does. ``$batch`` change sets run their operations through the same
code inside a single transaction.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import formatdate
from typing import Any, Callable
from urllib.parse import parse_qsl, unquote, urlsplit

from . import _admin as admin
from ._auth import AuthResult, SasGrant, authenticate
from ._errors import (
    INVALID_ETAG, INVALID_QUERY, NAME_LENGTH, TOO_MANY_CHANGES, PipelineError, ServiceError, error,
    pipeline_error,
)
from ._filter import Filter, FilterError, compile_filter
from ._multipart import MultipartError, SubResponse, boundary_of, parse_http_request, split_parts, \
    write_batch_response
from ._storage import EntityRow, Storage, etag_for
from ._values import (
    DATETIME, STRING, Props, check_entity, check_key, parse_atom_entity, parse_atom_table_name,
    parse_json_body, parse_json_entity, utc_now_text,
)
from ._wire import (
    ATOM, JSON_MINIMAL, Format, atom_entry, atom_feed, atom_table_entry, atom_tables_feed, json_entities,
    json_entities_minimal, json_entity, json_table, json_tables, key_path, odata_error_json, odata_error_xml, storage_error_xml,
)

__all__ = ["Request", "Response", "TableService", "KNOWN_VERSIONS", "HTTP_METHODS", "DEVSTORE_ACCOUNT",
           "DEVSTORE_KEY"]

log = logging.getLogger("tablesdk.devstore")
# The client's loggers put a NullHandler on "tablesdk" when first made (``import tablesdk`` does not
# import logging); the emulator may log before any of them exists, so its logger has its own:
# nothing reaches stderr unless the application configures logging.
log.addHandler(logging.NullHandler())

DEVSTORE_ACCOUNT = "devstoreaccount1"
DEVSTORE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

#: Service versions the emulator accepts in ``x-ms-version`` (others: 400 InvalidHeaderValue).
KNOWN_VERSIONS = frozenset("""
2009-04-14 2009-07-17 2009-09-19 2011-08-18 2012-02-12 2013-08-15 2014-02-14 2015-02-21 2015-04-05
2015-07-08 2015-12-11 2016-05-31 2017-04-17 2017-07-29 2017-11-09 2018-03-28 2018-11-09 2019-02-02
2019-07-07 2019-10-10 2019-12-12 2020-02-10 2020-04-08 2020-06-12 2020-08-04 2020-10-02 2020-12-06
2021-02-12 2021-04-10 2021-06-08 2021-08-06 2021-10-04 2021-12-02 2022-11-02 2023-01-03 2023-05-03
2023-08-03 2023-11-03 2024-02-04 2024-05-04 2024-08-04 2024-11-04 2025-01-05 2025-05-05 2025-07-05
2025-11-05 2026-02-06 2026-04-06 2026-06-06
""".split())
#: The HTTP methods the service serves; any other (BREW, TRACE, CONNECT, lower-case get) is 405.
HTTP_METHODS = frozenset({"GET", "HEAD", "PUT", "POST", "DELETE", "MERGE", "PATCH", "OPTIONS"})
V_UPSERT = "2011-08-18"  # Insert Or Replace / Insert Or Merge (PUT/MERGE without If-Match)
V_JSON = "2013-08-15"  # JSON payloads and the Prefer header
V_NO_ATOM = "2015-12-11"  # Atom refused from here on
LEGACY_VERSION = "2009-09-19"  # what a request without x-ms-version is processed as

MAX_BODY = 4 * 1024 * 1024
MAX_BATCH_OPERATIONS = 100
MAX_PAGE = 1000

_TABLE_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*\Z")
_ETAG_RE = re.compile(r"W/\"datetime'[^'\"]+'\"\Z")
_IDENT_RE = re.compile(r"[^\W\d]\w*\Z")
_TOKEN_RE = re.compile(r"[A-Za-z0-9_-]*\Z")


# ------------------------------------------------------------------ request / response

@dataclass
class Request:
    """One HTTP request as the service sees it. ``headers`` keys are lower case."""

    method: str
    raw_path: str
    raw_query: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    host: str = "127.0.0.1"
    secure: bool = False
    client_ip: str = "127.0.0.1"
    x_http_methods: list[str] = field(default_factory=list)
    body_too_large: bool = False


@dataclass
class Response:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    def header(self, name: str) -> str | None:
        lower = name.lower()
        for key, value in self.headers:
            if key.lower() == lower:
                return value
        return None


@dataclass
class Call:
    """A request being served: its parsed query, version, credentials and base URL."""

    req: Request
    query: dict[str, str]
    version: str
    explicit_version: bool
    auth: AuthResult
    base: str
    index: int | None = None  # operation index inside a batch change set
    in_batch: bool = False  # an operation inside a $batch body (its URL is not an HTTP request line)
    secondary: bool = False  # addressed to the read-only secondary view (<account>-secondary)

    @property
    def sas(self) -> SasGrant | None:
        return self.auth.sas

    def header(self, name: str, default: str = "") -> str:
        return self.req.headers.get(name, default)


@dataclass
class WriteOp:
    """A prepared entity write (single request or one change set operation)."""

    kind: str  # insert, update, merge, insert_or_replace, insert_or_merge, delete
    table: str
    pk: str
    rk: str
    props: Props
    if_match: str | None
    prefer: str | None
    fmt: Format | None


# ------------------------------------------------------------------ helpers

def _query_dict(raw_query: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for name, value in parse_qsl(raw_query, keep_blank_values=True):
        result.setdefault(name, value)
    return result


def _media_format(text: str) -> Format | None:
    main, _, params = text.strip().partition(";")
    main = main.strip().lower()
    if main in ("application/json", "json"):
        level = "minimalmetadata"
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.strip().lower() == "odata":
                level = value.strip().lower()
        if level not in ("nometadata", "minimalmetadata", "fullmetadata"):
            raise pipeline_error("JsonFormatNotSupported")
        return Format("json", level)
    if main in ("application/atom+xml", "atom", "application/xml", "xml", "*/*", "application/*"):
        return ATOM
    return None


def _accept_format(accept: str) -> Format:
    if not accept.strip():
        return ATOM  # the documented default response type
    ranges: list[tuple[float, int, str]] = []
    for position, item in enumerate(accept.split(",")):
        media, *params = item.split(";")
        q = 1.0
        kept = []
        for param in params:
            key, _, value = param.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
            else:
                kept.append(param)
        if q > 0:
            ranges.append((-q, position, ";".join([media] + kept)))
    for _, _, media in sorted(ranges):
        found = _media_format(media)
        if found is not None:
            return found
    return ATOM


def negotiate(headers: dict[str, str], query: dict[str, str], version: str) -> Format:
    """The response format for the request (PipelineError 415 when the version refuses it)."""
    if "$format" in query:
        fmt = _media_format(query["$format"])
        if fmt is None:
            raise error("InvalidQueryParameterValue")
    else:
        fmt = _accept_format(headers.get("accept", ""))
    if fmt.is_json and version < V_JSON:
        raise pipeline_error("JsonFormatNotSupported")
    if not fmt.is_json and version >= V_NO_ATOM:
        raise pipeline_error("AtomFormatNotSupported")
    return fmt


def soft_format(headers: dict[str, str], query: dict[str, str], version: str) -> Format:
    """The format to write an error in: the negotiated one, else what the version allows."""
    try:
        return negotiate(headers, query, version)
    except ServiceError:
        return JSON_MINIMAL if version >= V_JSON else ATOM


def body_format(headers: dict[str, str], version: str) -> str:
    """``"json"`` or ``"atom"`` from the request's Content-Type."""
    ctype = headers.get("content-type", "").split(";")[0].strip().lower()
    if not ctype:
        raise error("MissingRequiredHeader")
    if ctype == "application/json":
        if version < V_JSON:
            raise pipeline_error("JsonFormatNotSupported")
        return "json"
    if ctype in ("application/atom+xml", "application/xml"):
        if version >= V_NO_ATOM:
            raise pipeline_error("AtomFormatNotSupported")
        return "atom"
    raise error("UnsupportedMediaType")


def encode_token(value: str) -> str:
    """An opaque continuation token for a key (production-like ``1!<n>!<base64url>``)."""
    data = base64.urlsafe_b64encode(value.encode("utf-8")).decode("ascii").rstrip("=")
    return f"1!{len(data)}!{data}"


def decode_token(token: str) -> str:
    parts = token.split("!")
    # isdigit() alone takes '²' and '١', which int() then refuses or reads: ASCII digits only.
    if (len(parts) != 3 or parts[0] != "1" or not (parts[1].isascii() and parts[1].isdigit())
            or len(parts[1]) > 9 or int(parts[1]) != len(parts[2])):
        raise error("InvalidInput")
    data = parts[2]
    if not _TOKEN_RE.match(data):
        raise error("InvalidInput")
    try:
        return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)).decode("utf-8")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise error("InvalidInput") from None


def _parse_literal_list(text: str) -> list[tuple[str | None, str]]:
    """``(name, value)`` pairs from ``PartitionKey='a',RowKey='b'`` or ``'name'`` (decoded text)."""
    items: list[tuple[str | None, str]] = []
    i, n = 0, len(text)
    while i < n:
        m = re.compile(r"\s*(?:([A-Za-z_][A-Za-z0-9_]*)\s*=\s*)?'").match(text, i)
        if not m:
            raise error("InvalidInput", message="Bad Request - Error in query syntax.")
        name = m.group(1)
        j = m.end()
        chunks: list[str] = []
        while True:
            end = text.find("'", j)
            if end == -1:
                raise error("InvalidInput", message="Bad Request - Error in query syntax.")
            chunks.append(text[j:end])
            if end + 1 < n and text[end + 1] == "'":
                chunks.append("'")
                j = end + 2
                continue
            i = end + 1
            break
        items.append((name, "".join(chunks)))
        rest = text[i:].lstrip()
        if not rest:
            break
        if not rest.startswith(","):
            raise error("InvalidInput", message="Bad Request - Error in query syntax.")
        i = n - len(rest) + 1
    return items


def _entity_keys(segment: str) -> tuple[str, str]:
    """(PartitionKey, RowKey) from the decoded ``(PartitionKey='..',RowKey='..')`` segment."""
    items = _parse_literal_list(segment)
    named = {name: value for name, value in items if name is not None}
    if len(items) != 2 or len(named) != 2 or "PartitionKey" not in named or "RowKey" not in named:
        raise error("InvalidInput", message="Bad Request - Error in query syntax.")
    return named["PartitionKey"], named["RowKey"]


def _resource_segment(rest: str) -> str:
    """The resource part of a path after the account: ``Table(...)`` from ``/Table(...)/more``.

    The service treats ``/<table>/<more>`` as an operation on that table, so only the
    first segment names the resource.
    """
    path = rest.split("?", 1)[0]
    return (path[1:] if path.startswith("/") else path).split("/", 1)[0]


def check_table_name(name: Any) -> str:
    if not isinstance(name, str):
        raise error("InvalidInput")
    if not 3 <= len(name) <= 63:
        raise error("OutOfRangeInput", message=NAME_LENGTH)
    if not (name.isascii() and _TABLE_NAME_RE.match(name)) or name.lower() == "tables":
        raise error("InvalidResourceName")
    return name


def _check_etag(value: str) -> str:
    value = value.strip()
    if value == "*" or _ETAG_RE.match(value):
        return value
    raise error("InvalidInput", message=INVALID_ETAG.format(value))


def _etag_matches(if_match: str, row: EntityRow) -> bool:
    if if_match == "*":
        return True
    return if_match.replace("%3A", ":").replace("%3a", ":") == row.etag.replace("%3A", ":")


def _select(query: dict[str, str]) -> list[str] | None:
    text = query.get("$select")
    if text is None:
        return None
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names or "*" in names:
        return None
    for name in names:
        if not _IDENT_RE.match(name):
            raise error("InvalidInput", message=INVALID_QUERY)
    return names


def _top(query: dict[str, str]) -> int | None:
    text = query.get("$top")
    if text is None:
        return None
    text = text.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 9:  # '²'.isdigit() is True
        raise error("InvalidQueryParameterValue")
    return int(text)


def _filter(query: dict[str, str]) -> Filter | None:
    text = query.get("$filter")
    if text is None or not text.strip():
        return None
    try:
        return compile_filter(text)
    except FilterError:
        raise error("InvalidInput", message=INVALID_QUERY) from None


def _filter_entity(row: EntityRow) -> dict[str, tuple[str, Any]]:
    entity = dict(row.props)
    entity["PartitionKey"] = (STRING, row.pk)
    entity["RowKey"] = (STRING, row.rk)
    entity["Timestamp"] = (DATETIME, row.timestamp)
    return entity


def _range_conditions(flt: Filter | None, grant: SasGrant | None) -> list[tuple[str, str, str]]:
    conditions: list[tuple[str, str, str]] = []
    if flt is not None:
        for prop, column in (("PartitionKey", "pk"), ("RowKey", "rk")):
            rng = flt.ranges.get(prop)
            if rng is None:
                continue
            if rng.eq is not None:
                conditions.append((column, "=", rng.eq))
            if rng.lower is not None:
                conditions.append((column, ">=" if rng.lower[1] else ">", rng.lower[0]))
            if rng.upper is not None:
                conditions.append((column, "<=" if rng.upper[1] else "<", rng.upper[0]))
    if grant is not None:
        if grant.start_key is not None:
            conditions.append(("pk", ">=", grant.start_key[0]))
        if grant.end_key is not None:
            conditions.append(("pk", "<=", grant.end_key[0]))
    return conditions


def _invalid_url_response() -> Response:
    """What HTTP.sys answers, before the service sees it, for a path segment over 260 characters."""
    body = (
        '<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01//EN""http://www.w3.org/TR/html4/strict.dtd">\r\n'
        '<HTML><HEAD><TITLE>Bad Request</TITLE>\r\n'
        '<META HTTP-EQUIV="Content-Type" Content="text/html; charset=us-ascii"></HEAD>\r\n'
        "<BODY><h2>Bad Request - Invalid URL</h2>\r\n<hr><p>HTTP Error 400. The request URL is invalid.</p>\r\n"
        "</BODY></HTML>\r\n"
    ).encode("ascii")
    return Response(400, [("Content-Type", "text/html; charset=us-ascii"), ("Server", "Microsoft-HTTPAPI/2.0")],
                    body)


# ------------------------------------------------------------------ the service

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
                    return _invalid_url_response()
        request_id = str(uuid.uuid4())
        query: dict[str, str] = {}
        version: str | None = None
        try:
            query = _query_dict(req.raw_query)
            if req.method not in HTTP_METHODS:  # case-sensitive, as HTTP methods are
                raise error("UnsupportedHttpVerb")
            rest, secondary = self._split_account(req.raw_path)
            if req.method.upper() == "OPTIONS" and "origin" in req.headers:
                # A CORS preflight: answered from the stored rules before (and without) authentication.
                response = self._preflight(req)
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
            response = self._pipeline_error(exc, request_id)
        except ServiceError as exc:
            fmt = soft_format(req.headers, query, version or req.headers.get("x-ms-version") or LEGACY_VERSION)
            response = self._error_response(exc, fmt, request_id)
        except Exception:  # pragma: no cover - a bug; answered like the service's 500
            log.exception("devstore: internal error serving %s %s", req.method, req.raw_path)
            response = self._error_response(error("InternalError"), JSON_MINIMAL, request_id)
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
            with self.storage.reading():
                stored = self.storage.get_meta("service_properties")
            response.headers.extend(admin.cors_response_headers(stored, origin, req.method.upper()))
        return response

    def _split_account(self, raw_path: str) -> tuple[str, bool]:
        """(path after the account, whether the read-only ``<account>-secondary`` view was addressed)."""
        secondary = "/" + self.account + "-secondary"
        if raw_path == secondary or raw_path.startswith(secondary + "/"):
            return raw_path[len(secondary):], True
        return self._strip_account(raw_path), False

    def _stored_policy(self, table: str, policy_id: str) -> admin.StoredPolicy | None:
        with self.storage.reading():
            policies = admin.acl_from_json(self.storage.get_meta("acl:" + table.lower()))
        return next((p for p in policies if p.id == policy_id), None)

    def _preflight(self, req: Request) -> Response:
        """Answer a CORS preflight (OPTIONS) from the stored rules, as the service does."""
        origin = req.headers.get("origin", "")
        method = req.headers.get("access-control-request-method", "")
        if not origin or not method:
            raise pipeline_error("InvalidHeaderValue", message="A CORS preflight request needs the Origin and "
                                                               "Access-Control-Request-Method headers.")
        requested = [h.strip() for h in req.headers.get("access-control-request-headers", "").split(",") if h.strip()]
        with self.storage.reading():
            stored = self.storage.get_meta("service_properties")
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

    def _strip_account(self, raw_path: str) -> str:
        prefix = "/" + self.account
        if raw_path == prefix or raw_path.startswith(prefix + "/") or raw_path.startswith(prefix + "?"):
            return raw_path[len(prefix):]
        raise pipeline_error("ResourceNotFound")

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

    # -------------------------------------------------------------- errors

    def _trailer(self, request_id: str) -> str:
        return f"\nRequestId:{request_id}\nTime:{utc_now_text()}"

    def _pipeline_error(self, exc: PipelineError, request_id: str) -> Response:
        body = storage_error_xml(exc.code, exc.message + self._trailer(request_id), exc.details)
        headers = [("Content-Type", "application/xml"), ("x-ms-error-code", exc.code)]
        return Response(exc.status, headers, body)

    def _error_response(self, exc: ServiceError, fmt: Format, request_id: str, prefix: str = "") -> Response:
        message = prefix + exc.message + self._trailer(request_id)
        if fmt.is_json:
            body = odata_error_json(exc.code, message)
        else:
            body = odata_error_xml(exc.code, message)
        headers = [
            ("Content-Type", fmt.error_content_type),
            ("x-ms-error-code", exc.code),
            ("X-Content-Type-Options", "nosniff"),
            ("DataServiceVersion", "3.0;" if fmt.is_json else "1.0;"),
        ]
        headers.extend(exc.extra_headers.items())
        return Response(exc.status, headers, body)

    # -------------------------------------------------------------- routing

    def _method(self, call: Call) -> str:
        req = call.req
        method = req.method.upper()
        if req.x_http_methods:
            if len(req.x_http_methods) > 1:
                raise error("XMethodIncorrectCount")
            if method != "POST":
                raise error("XMethodNotUsingPost")
            tunneled = req.x_http_methods[0].strip().upper()
            if tunneled not in ("MERGE", "PUT", "DELETE", "PATCH"):
                raise error("XMethodIncorrectValue")
            method = tunneled
        return "MERGE" if method == "PATCH" else method

    def _route(self, call: Call, rest: str) -> Response:
        method = self._method(call)
        segment = _resource_segment(rest)
        if segment == "":
            return self._service_level(call, method)
        if segment == "$batch":
            if method != "POST":
                raise error("MethodNotAllowed")
            return self._batch(call)
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
                    return self._query_tables(call)
                if method == "POST":
                    return self._create_table(call)
                raise error("MethodNotAllowed")
            items = _parse_literal_list(inner)
            if len(items) != 1 or items[0][0] not in (None, "TableName"):
                raise error("InvalidInput", message="Bad Request - Error in query syntax.")
            table = items[0][1]
            if method == "DELETE":
                return self._delete_table(call, table)
            if method == "GET":
                return self._get_table(call, table)
            raise error("MethodNotAllowed")
        check_table_name(name)  # an entity or ACL operation on a name no table can have: 400, not 404
        if "comp" in call.query:
            if call.query["comp"] != "acl" or inner.strip():
                raise error("InvalidQueryParameterValue")
            return self._table_acl(call, method, name)
        if not inner.strip():
            if method == "GET":
                return self._query_entities(call, name)
            if method == "POST":
                return self._single_write(call, "POST", name, None)
            raise error("MethodNotAllowed")
        pk, rk = _entity_keys(inner)
        if method == "GET":
            return self._get_entity(call, name, pk, rk)
        if method in ("PUT", "MERGE", "DELETE"):
            return self._single_write(call, method, name, (pk, rk))
        raise error("MethodNotAllowed")

    def _service_level(self, call: Call, method: str) -> Response:
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
            if self.geo_replication_status == "live":
                last_sync = formatdate(self.clock().timestamp() - 1, usegmt=True)
            body = admin.render_stats(self.geo_replication_status, last_sync)
            return Response(200, [("Content-Type", "application/xml")], body)
        if method == "GET":
            with self.storage.reading():
                body = admin.render_properties(self.storage.get_meta("service_properties"))
            return Response(200, [("Content-Type", "application/xml")], body)
        if method == "PUT":
            update = admin.parse_properties_body(call.req.body)
            with self.storage.transaction():
                merged = admin.merge_properties(self.storage.get_meta("service_properties"), update)
                self.storage.set_meta("service_properties", merged)
            return Response(202)
        raise error("MethodNotAllowed")

    def _table_acl(self, call: Call, method: str, table: str) -> Response:
        """Get/Set Table ACL: the account owner only (no SAS may read or change policies)."""
        if call.sas is not None:
            raise pipeline_error("AuthorizationFailure")
        if method not in ("GET", "HEAD", "PUT"):
            raise error("MethodNotAllowed")
        policies = admin.parse_acl_body(call.req.body) if method == "PUT" else []
        with self.storage.transaction():
            stored = self.storage.get_table(table)
            if stored is None:
                raise error("TableNotFound")
            if method == "PUT":
                self.storage.set_meta("acl:" + table.lower(), admin.acl_to_json(policies) if policies else None)
                return Response(204)
            body = admin.render_acl(admin.acl_from_json(self.storage.get_meta("acl:" + table.lower())))
        return Response(200, [("Content-Type", "application/xml")], body)

    # -------------------------------------------------------------- tables

    def _query_tables(self, call: Call) -> Response:
        if call.sas is not None:
            call.sas.check("query_tables", None)
        fmt = negotiate(call.req.headers, call.query, call.version)
        flt = _filter(call.query)
        top = _top(call.query)
        start = decode_token(call.query["NextTableName"]).lower() if call.query.get("NextTableName") else None
        limit = min(top if top is not None else MAX_PAGE, self.page_size, MAX_PAGE)
        names: list[str] = []
        next_name: str | None = None
        if top != 0:
            with self.storage.reading():
                for name in self.storage.iter_tables(start):
                    if flt is not None and not flt.matches({"TableName": (STRING, name)}):
                        continue
                    if len(names) == limit:
                        next_name = name
                        break
                    names.append(name)
        headers = [("Content-Type", fmt.feed_content_type), ("DataServiceVersion", "3.0;" if fmt.is_json else "1.0;")]
        if next_name is not None:
            headers.append(("x-ms-continuation-NextTableName", encode_token(next_name.lower())))
        if fmt.is_json:
            body = json_tables(fmt, call.base, names)
        else:
            body = atom_tables_feed(call.base, self.account, names, utc_now_text())
        return Response(200, headers, body)

    def _create_table(self, call: Call) -> Response:
        if call.sas is not None:
            call.sas.check("create_table", None)
        prefer = self._prefer(call)
        fmt = negotiate(call.req.headers, call.query, call.version) if prefer != "return-no-content" else None
        kind = body_format(call.req.headers, call.version)
        if kind == "json":
            obj = parse_json_body(call.req.body)
            name = obj.get("TableName")
        else:
            name = parse_atom_table_name(call.req.body)
        if name is None:
            raise error("PropertiesNeedValue")
        check_table_name(name)
        with self.storage.transaction():
            if not self.storage.create_table(name):
                raise error("TableAlreadyExists")
        headers: list[tuple[str, str]] = []
        if prefer is not None:
            headers.append(("Preference-Applied", prefer))
        location = f"{call.base}Tables('{name}')"
        if fmt is None:
            headers += [("Location", location), ("DataServiceId", location)]
            return Response(204, headers)
        headers += [("Content-Type", fmt.content_type), ("Location", location),
                    ("DataServiceVersion", "3.0;" if fmt.is_json else "1.0;")]
        body = json_table(fmt, call.base, name) if fmt.is_json else atom_table_entry(
            call.base, self.account, name, utc_now_text()
        )
        return Response(201, headers, body)

    def _delete_table(self, call: Call, name: str) -> Response:
        if call.sas is not None:
            call.sas.check("delete_table", None)
        with self.storage.transaction():
            if not self.storage.delete_table(name):
                raise error("ResourceNotFound")
        return Response(204)

    def _get_table(self, call: Call, name: str) -> Response:
        if call.sas is not None:
            call.sas.check("query_tables", None)
        fmt = negotiate(call.req.headers, call.query, call.version)
        with self.storage.reading():
            stored = self.storage.get_table(name)
        if stored is None:
            raise error("ResourceNotFound")
        body = json_table(fmt, call.base, stored) if fmt.is_json else atom_table_entry(
            call.base, self.account, stored, utc_now_text()
        )
        return Response(200, [("Content-Type", fmt.content_type)], body)

    # -------------------------------------------------------------- entity reads

    def _render_entity(self, call: Call, fmt: Format, table: str, row: EntityRow, select: list[str] | None) -> bytes:
        if fmt.is_json:
            return json_entity(fmt, call.base, table, row.pk, row.rk, row.timestamp, row.etag, row.props, select)
        return atom_entry(call.base, self.account, table, row.pk, row.rk, row.timestamp, row.etag, row.props, select)

    def _get_entity(self, call: Call, table: str, pk: str, rk: str) -> Response:
        if call.sas is not None:
            call.sas.check("get_entity", table)
            call.sas.check_key(pk, rk)
        fmt = negotiate(call.req.headers, call.query, call.version)
        select = _select(call.query)
        with self.storage.reading():
            stored = self.storage.get_table(table)
            if stored is None:
                raise error("TableNotFound")
            row = self.storage.get_entity(table, pk, rk)
        if row is None:
            raise error("ResourceNotFound")
        body = self._render_entity(call, fmt, stored, row, select)
        headers = [("Content-Type", fmt.content_type), ("ETag", row.etag),
                   ("DataServiceVersion", "3.0;" if fmt.is_json else "1.0;")]
        return Response(200, headers, body)

    def _query_entities(self, call: Call, table: str) -> Response:
        grant = call.sas
        if grant is not None:
            grant.check("query_entities", table)
        fmt = negotiate(call.req.headers, call.query, call.version)
        flt = _filter(call.query)
        top = _top(call.query)
        select = _select(call.query)
        next_pk = call.query.get("NextPartitionKey")
        next_rk = call.query.get("NextRowKey")
        start: tuple[str, str] | None = None
        if next_pk:
            start = (decode_token(next_pk), decode_token(next_rk) if next_rk else "")
        limit = min(top if top is not None else MAX_PAGE, self.page_size, MAX_PAGE)
        rows: list[EntityRow] = []
        next_key: tuple[str, str] | None = None
        with self.storage.reading():
            stored = self.storage.get_table(table)
            if stored is None:
                raise error("TableNotFound")
            if top != 0:
                examined = 0
                ranged = grant is not None and grant.has_key_range
                scan = self.storage.scan(table, start=start, conditions=_range_conditions(flt, grant),
                                         chunk=min(limit + 1, 512) if flt is None else 512)
                for row in scan:
                    if self.max_scan is not None and examined >= self.max_scan:
                        next_key = (row.pk, row.rk)
                        break
                    examined += 1
                    if ranged and grant is not None and not grant.key_allowed(row.pk, row.rk):
                        continue
                    if flt is not None and not flt.matches(_filter_entity(row)):
                        continue
                    if len(rows) == limit:
                        next_key = (row.pk, row.rk)
                        break
                    rows.append(row)
        headers = [("Content-Type", fmt.feed_content_type), ("DataServiceVersion", "3.0;" if fmt.is_json else "1.0;")]
        if next_key is not None:
            headers.append(("x-ms-continuation-NextPartitionKey", encode_token(next_key[0])))
            headers.append(("x-ms-continuation-NextRowKey", encode_token(next_key[1])))
        tuples = ((r.pk, r.rk, r.timestamp, r.etag, r.props) for r in rows)
        if fmt.is_json and fmt.metadata == "minimalmetadata" and select is None:
            body = json_entities_minimal(
                call.base, stored, ((r.pk, r.rk, r.timestamp, r.etag, r.json_members) for r in rows)
            )
        elif fmt.is_json:
            body = json_entities(fmt, call.base, stored, tuples, select)
        else:
            body = atom_feed(call.base, self.account, stored, utc_now_text(), tuples, select)
        return Response(200, headers, body)

    # -------------------------------------------------------------- entity writes

    def _prefer(self, call: Call) -> str | None:
        if call.version < V_JSON:
            return None
        value = call.header("prefer").strip().lower()
        return value if value in ("return-no-content", "return-content") else None

    def _prepare_write(self, call: Call, method: str, table: str, keys: tuple[str, str] | None) -> WriteOp:
        """Parse and check one entity write; nothing is read from storage yet."""
        headers = call.req.headers
        if "if-none-match" in headers and method in ("PUT", "MERGE", "DELETE"):
            if "if-match" in headers:
                raise error("InvalidInput", message="Both If-Match and If-None-Match HTTP headers cannot be "
                                                    "specified at the same time.")
            raise error("InvalidInput", message=f"If-None-Match HTTP header cannot be specified for "
                                                f"{'DELETE' if method == 'DELETE' else 'PUT'} operations.")
        if_match_raw = headers.get("if-match")
        if_match = _check_etag(if_match_raw) if if_match_raw is not None else None
        if method == "DELETE":
            assert keys is not None
            if if_match is None:
                raise error("MissingRequiredHeader")
            check_key("PartitionKey", keys[0])
            check_key("RowKey", keys[1])
            return WriteOp("delete", table, keys[0], keys[1], {}, if_match, None, None)
        if method == "POST":
            if keys is not None:
                raise error("MethodNotAllowed")
            kind = "insert"
        elif method == "PUT":
            kind = "update" if if_match is not None else "insert_or_replace"
        elif method == "MERGE":
            kind = "merge" if if_match is not None else "insert_or_merge"
        else:
            raise error("MethodNotAllowed")
        if kind.startswith("insert_or") and call.version < V_UPSERT:
            raise error("MissingRequiredHeader")  # If-Match is required before upserts existed
        if kind == "insert":
            prefer = self._prefer(call)
            fmt = negotiate(headers, call.query, call.version) if prefer != "return-no-content" else None
        else:
            prefer, fmt = None, None
        keys_from_url = kind != "insert"  # typed body keys are ignored there, refused on insert
        if body_format(headers, call.version) == "json":
            pk, rk, props = parse_json_entity(parse_json_body(call.req.body), keys_from_url=keys_from_url)
        else:
            pk, rk, props = parse_atom_entity(call.req.body, keys_from_url=keys_from_url)
        if keys is not None:
            if (pk is not None and pk != keys[0]) or (rk is not None and rk != keys[1]):
                raise error("InvalidInput")  # the body's keys must be those of the URL
            pk, rk = keys
        if pk is None or rk is None:
            raise error("PropertiesNeedValue")
        check_key("PartitionKey", pk)
        check_key("RowKey", rk)
        check_entity(pk, rk, props)
        return WriteOp(kind, table, pk, rk, props, if_match, prefer, fmt)

    def _execute_write(self, call: Call, op: WriteOp) -> Response:
        """Apply a prepared write; the caller holds a storage transaction."""
        storage = self.storage
        stored = storage.get_table(op.table)
        if stored is None:
            raise error("TableNotFound")
        existing = storage.get_entity(op.table, op.pk, op.rk)
        if op.kind == "insert":
            if existing is not None:
                raise error("EntityAlreadyExists")
            ts = storage.put_entity(op.table, op.pk, op.rk, op.props, exists=False)
            return self._insert_response(call, op, stored, ts)
        if op.kind in ("update", "merge", "delete"):
            if existing is None:
                raise error("ResourceNotFound")
            assert op.if_match is not None
            if not _etag_matches(op.if_match, existing):
                raise error("UpdateConditionNotSatisfied")
        if op.kind == "delete":
            assert existing is not None
            storage.delete_entity(op.table, op.pk, op.rk)
            return Response(204, [("DataServiceVersion", "1.0;")])
        props = op.props
        if op.kind in ("merge", "insert_or_merge") and existing is not None:
            props = dict(existing.props)
            props.update(op.props)
            check_entity(op.pk, op.rk, props)
        ts = storage.put_entity(op.table, op.pk, op.rk, props, exists=existing is not None)
        return Response(204, [("ETag", etag_for(ts)), ("DataServiceVersion", "1.0;")])

    def _insert_response(self, call: Call, op: WriteOp, table: str, ts: str) -> Response:
        etag = etag_for(ts)
        location = call.base + key_path(table, op.pk, op.rk)
        headers: list[tuple[str, str]] = [("ETag", etag)]
        if op.prefer is not None:
            headers.append(("Preference-Applied", op.prefer))
        if op.fmt is None:
            headers += [("Location", location), ("DataServiceId", location), ("DataServiceVersion", "3.0;")]
            return Response(204, headers)
        fmt = op.fmt
        if fmt.is_json:
            body = json_entity(fmt, call.base, table, op.pk, op.rk, ts, etag, op.props)
        else:
            body = atom_entry(call.base, self.account, table, op.pk, op.rk, ts, etag, op.props)
        headers += [("Content-Type", fmt.content_type), ("Location", location),
                    ("DataServiceVersion", "3.0;" if fmt.is_json else "1.0;")]
        return Response(201, headers, body)

    def _sas_write_check(self, call: Call, op: WriteOp) -> None:
        if call.sas is not None:
            call.sas.check(op.kind, op.table)
            call.sas.check_key(op.pk, op.rk)

    def _single_write(self, call: Call, method: str, table: str, keys: tuple[str, str] | None) -> Response:
        if call.sas is not None:  # permission before the body is even parsed
            kind = {"POST": "insert", "DELETE": "delete"}.get(method)
            if kind is None:
                has_if_match = "if-match" in call.req.headers
                kind = ("update" if method == "PUT" else "merge") if has_if_match else (
                    "insert_or_replace" if method == "PUT" else "insert_or_merge")
            call.sas.check(kind, table)
        op = self._prepare_write(call, method, table, keys)
        self._sas_write_check(call, op)
        with self.storage.transaction():
            return self._execute_write(call, op)

    # -------------------------------------------------------------- batch

    def _sub_call(self, call: Call, method: str, url: str, headers: dict[str, str], body: bytes,
                  index: int | None) -> tuple[Call, str]:
        parts = urlsplit(url)
        path = parts.path
        if not parts.scheme and not path.startswith("/"):
            path = f"/{self.account}/{path}"
        try:
            rest = self._strip_account(path)
        except PipelineError:
            raise error("InvalidUri") from None
        x_methods = [headers["x-http-method"]] if "x-http-method" in headers else []
        sub_req = Request(method, path, parts.query, headers, body, call.req.host, call.req.secure,
                          call.req.client_ip, x_methods)
        sub = Call(sub_req, _query_dict(parts.query), call.version, call.explicit_version, call.auth,
                   call.base, index, in_batch=True)
        return sub, rest

    def _batch(self, call: Call) -> Response:
        if not call.explicit_version:
            raise error("MissingRequiredHeader", message="The x-ms-version header is required for a batch request.")
        boundary = boundary_of(call.header("content-type"))
        if boundary is None:
            raise error("InvalidInput")
        try:
            parts = split_parts(call.req.body, boundary)
        except MultipartError:
            raise error("InvalidInput") from None
        if len(parts) != 1:
            raise error("InvalidInput", message="A batch must hold exactly one change set or one query.")
        part = parts[0]
        ctype = part.headers.get("content-type", "")
        cs_boundary = boundary_of(ctype)
        if cs_boundary is not None:
            return self._changeset(call, part.body, cs_boundary)
        if ctype.split(";")[0].strip().lower() == "application/http":
            return self._batch_query(call, part.body)
        raise error("InvalidInput")

    def _batch_query(self, call: Call, data: bytes) -> Response:
        try:
            method, url, headers, body = parse_http_request(data)
        except MultipartError:
            raise error("InvalidInput") from None
        if method != "GET":
            raise error("InvalidInput", message="A batch operation outside a change set must be a query.")
        sub, rest = self._sub_call(call, method, url, headers, body, None)
        segment = _resource_segment(rest)
        point = "(" in segment and segment.rstrip().endswith(")") and not segment.rstrip().endswith("()")
        if not point:
            flt = _filter(sub.query)
            ranges = flt.ranges if flt is not None else {}
            if not (ranges.get("PartitionKey") and ranges["PartitionKey"].eq is not None
                    and ranges.get("RowKey") and ranges["RowKey"].eq is not None):
                raise error("InvalidInput", message="A query in a batch must select one entity by "
                                                    "PartitionKey and RowKey.")
        request_id = str(uuid.uuid4())
        try:
            result = self._route(sub, rest)
        except PipelineError as exc:
            result = self._pipeline_error(exc, request_id)
        except ServiceError as exc:
            result = self._error_response(exc, soft_format(headers, sub.query, call.version), request_id)
        content_type, payload = write_batch_response([SubResponse(result.status, result.headers, result.body)],
                                                     changeset=False)
        return Response(202, [("Content-Type", content_type)], payload)

    def _changeset(self, call: Call, data: bytes, boundary: str) -> Response:
        try:
            parts = split_parts(data, boundary)
        except MultipartError:
            raise error("InvalidInput") from None
        if not parts:
            raise error("InvalidInput")
        request_id = str(uuid.uuid4())
        responses: list[SubResponse] = []
        failure: SubResponse | None = None
        with self.storage.transaction():
            group: tuple[str, str] | None = None
            seen: set[tuple[str, str]] = set()
            for index, part in enumerate(parts):
                sub_headers: dict[str, str] = {}
                content_id = str(index + 1)
                try:
                    try:
                        method, url, sub_headers, body = parse_http_request(part.body)
                    except MultipartError:
                        raise error("InvalidInput") from None
                    content_id = sub_headers.get("content-id", content_id)
                    if len(parts) > MAX_BATCH_OPERATIONS:  # refused before anything runs
                        if index < MAX_BATCH_OPERATIONS:
                            continue
                        raise error("InvalidInput", message=TOO_MANY_CHANGES)
                    sub, rest = self._sub_call(call, method, url, sub_headers, body, index)
                    op = self._batch_prepare(sub, rest)
                    entity_group = (op.table.lower(), op.pk)
                    if group is None:
                        group = entity_group
                    elif entity_group != group:
                        raise error("CommandsInBatchActOnDifferentPartitions")
                    if (op.pk, op.rk) in seen:
                        raise error("InvalidDuplicateRow", op.rk)
                    seen.add((op.pk, op.rk))
                    self._sas_write_check(sub, op)
                    result = self._execute_write(sub, op)
                    responses.append(SubResponse(result.status, [("Content-ID", content_id)] + result.headers,
                                                 result.body))
                except PipelineError as exc:  # not tied to one operation: no index prefix
                    failure = self._failure_part(exc, sub_headers, call, request_id, content_id, "")
                    break
                except ServiceError as exc:
                    failure = self._failure_part(exc, sub_headers, call, request_id, content_id, f"{index}:")
                    break
            if failure is not None:
                self.storage.rollback()
        content_type, payload = write_batch_response([failure] if failure is not None else responses,
                                                     changeset=True)
        return Response(202, [("Content-Type", content_type)], payload)

    def _failure_part(self, exc: ServiceError, sub_headers: dict[str, str], call: Call, request_id: str,
                      content_id: str, prefix: str) -> SubResponse:
        if isinstance(exc, PipelineError):
            result = self._pipeline_error(exc, request_id)
        else:
            fmt = soft_format(sub_headers, {}, call.version)
            result = self._error_response(exc, fmt, request_id, prefix)
        headers = [(k, v) for k, v in result.headers if k.lower() != "x-ms-error-code"]
        return SubResponse(result.status, [("Content-ID", content_id)] + headers, result.body)

    def _batch_prepare(self, sub: Call, rest: str) -> WriteOp:
        method = self._method(sub)
        segment = _resource_segment(rest)
        if method not in ("POST", "PUT", "MERGE", "DELETE") or segment in ("", "$batch"):
            raise error("InvalidInput", message="A change set may only hold insert, update, merge and "
                                                "delete operations on entities.")
        head, paren, tail = segment.partition("(")
        table = unquote(head)
        if table.lower() == "tables":
            raise error("InvalidInput", message="A change set may only hold entity operations.")
        check_table_name(table)
        inner = unquote(paren + tail)[1:-1] if paren else ""
        keys = _entity_keys(inner) if inner.strip() else None
        if sub.sas is not None:
            kind = {"POST": "insert", "DELETE": "delete"}.get(method)
            if kind is None:
                has_if_match = "if-match" in sub.req.headers
                kind = ("update" if method == "PUT" else "merge") if has_if_match else (
                    "insert_or_replace" if method == "PUT" else "insert_or_merge")
            sub.sas.check(kind, table)
        if keys is None and method != "POST":
            raise error("MethodNotAllowed")
        return self._prepare_write(sub, method, table, keys)

    # -------------------------------------------------------------- admin

    def reset(self) -> None:
        """Delete all tables and entities."""
        self.storage.reset()

    def table_names(self) -> list[str]:
        with self.storage.reading():
            return list(self.storage.iter_tables())

