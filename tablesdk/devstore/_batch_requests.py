"""``$batch``: one change set (up to 100 entity writes to one partition, all or nothing in
one storage transaction) or one point query, each operation read from its multipart part
as a request of its own and checked as a single request is.

A query in a batch is served by the service's own routing, handed in as ``route``: the
router dispatches ``$batch`` here, so this module cannot import it.
"""

from __future__ import annotations

import uuid
from typing import Callable
from urllib.parse import unquote, urlsplit

from ._entity_writes import WriteContext, WriteOp, execute_write, insert_response, prepare_body, sas_write_check, \
    sas_write_kind, write_context
from ._error_answers import error_response, pipeline_error_response
from ._errors import TOO_MANY_CHANGES, PipelineError, ServiceError, error
from ._multipart import MultipartError, Part, SubResponse, body_within, boundary_of, operation_shape, \
    parse_http_request, split_parts, write_batch_response
from ._negotiation import soft_format
from ._query_options import parse_filter
from ._request import MAX_BATCH_OPERATIONS, Call, Request, Response, effective_method
from ._storage import Storage
from ._url_parts import check_table_name, entity_keys, query_dict, resource_segment, strip_account

__all__ = ["Route", "serve_batch"]

#: The service's router: a call and the path after the account in, the answer out.
Route = Callable[[Call, str], Response]


def serve_batch(call: Call, storage: Storage, account: str, route: Route) -> Response:
    """A ``$batch`` request: its one change set or its one query."""
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
        return _changeset(call, storage, account, part.body, cs_boundary)
    if ctype.split(";")[0].strip().lower() == "application/http":
        return _batch_query(call, account, route, part.body)
    raise error("InvalidInput")


def _batch_query(call: Call, account: str, route: Route, data: bytes) -> Response:
    try:
        method, url, headers, body = parse_http_request(data)
    except MultipartError:
        raise error("InvalidInput") from None
    if method != "GET":
        raise error("InvalidInput", message="A batch operation outside a change set must be a query.")
    sub, rest = _sub_call(call, account, method, url, headers, body, None)
    segment = resource_segment(rest)
    point = "(" in segment and segment.rstrip().endswith(")") and not segment.rstrip().endswith("()")
    if not point:
        flt = parse_filter(sub.query)
        ranges = flt.ranges if flt is not None else {}
        if not (ranges.get("PartitionKey") and ranges["PartitionKey"].eq is not None
                and ranges.get("RowKey") and ranges["RowKey"].eq is not None):
            raise error("InvalidInput", message="A query in a batch must select one entity by "
                                                "PartitionKey and RowKey.")
    request_id = str(uuid.uuid4())
    try:
        result = route(sub, rest)
    except PipelineError as exc:
        result = pipeline_error_response(exc, request_id)
    except ServiceError as exc:
        result = error_response(exc, soft_format(headers, sub.query, call.version), request_id)
    content_type, payload = write_batch_response([SubResponse(result.status, result.headers, result.body)],
                                                 changeset=False)
    return Response(202, [("Content-Type", content_type)], payload)


def _changeset(call: Call, storage: Storage, account: str, data: bytes, boundary: str) -> Response:
    try:
        parts = split_parts(data, boundary)
    except MultipartError:
        raise error("InvalidInput") from None
    if not parts:
        raise error("InvalidInput")
    request_id = str(uuid.uuid4())
    responses: list[SubResponse] = []
    failure: SubResponse | None = None
    with storage.transaction():
        applied = _changeset_at_once(call, storage, account, parts)
        if applied is not None:
            content_type, payload = write_batch_response(applied, changeset=True)
            return Response(202, [("Content-Type", content_type)], payload)
        storage.rollback()  # an operation fails: the step-by-step pass below finds which, as the service does
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
                sub, rest = _sub_call(call, account, method, url, sub_headers, body, index)
                op = _batch_prepare(sub, rest)
                entity_group = (op.table.lower(), op.pk)
                if group is None:
                    group = entity_group
                elif entity_group != group:
                    raise error("CommandsInBatchActOnDifferentPartitions")
                if (op.pk, op.rk) in seen:
                    raise error("InvalidDuplicateRow", op.rk)
                seen.add((op.pk, op.rk))
                sas_write_check(sub, op)
                result = execute_write(sub, storage, account, op)
                responses.append(SubResponse(result.status, [("Content-ID", content_id)] + result.headers,
                                             result.body))
            except PipelineError as exc:  # not tied to one operation: no index prefix
                failure = _failure_part(exc, sub_headers, call, request_id, content_id, "")
                break
            except ServiceError as exc:
                failure = _failure_part(exc, sub_headers, call, request_id, content_id, f"{index}:")
                break
        if failure is not None:
            storage.rollback()
    content_type, payload = write_batch_response([failure] if failure is not None else responses,
                                                 changeset=True)
    return Response(202, [("Content-Type", content_type)], payload)


def _changeset_at_once(call: Call, storage: Storage, account: str, parts: list[Part]) -> list[SubResponse] | None:
    """The answers of a change set whose operations all succeed, or None when one fails.

    Every operation is read and checked first (as the step-by-step pass checks it), then the
    inserts go to storage in one statement. The operations of a change set touch distinct
    entities of one table, so their order cannot change the outcome; only which one fails
    first depends on it, and that is left to the step-by-step pass (after a rollback).
    """
    if len(parts) > MAX_BATCH_OPERATIONS:
        return None
    prepared: list[tuple[Call, WriteOp, str]] = []
    group: tuple[str, str] | None = None
    seen: set[tuple[str, str]] = set()
    # Operations of one shape (the same request line and headers but for Content-ID and
    # Content-Length) are read and checked as the first of them was, up to their bodies.
    shapes: dict[bytes, tuple[Call, WriteContext]] = {}
    try:
        for index, part in enumerate(parts):
            shape = operation_shape(part.body)
            known = shapes.get(shape[0]) if shape is not None else None
            if known is not None:
                assert shape is not None
                sub, context = known
                content_id = shape[1] if shape[1] is not None else str(index + 1)
                body = body_within(shape[3], shape[2])
            else:
                method, url, sub_headers, body = parse_http_request(part.body)
                sub, rest = _sub_call(call, account, method, url, sub_headers, body, index)
                context = _batch_context(sub, rest)
                content_id = sub_headers.get("content-id", str(index + 1))
                if shape is not None and (shape[1], shape[2]) == (sub_headers.get("content-id"),
                                                                  sub_headers.get("content-length")):
                    shapes[shape[0]] = sub, context
            op = prepare_body(context, body)
            if group is None:
                group = (op.table.lower(), op.pk)
            elif (op.table.lower(), op.pk) != group or (op.pk, op.rk) in seen:
                return None
            seen.add((op.pk, op.rk))
            sas_write_check(sub, op)
            prepared.append((sub, op, content_id))
        if not prepared:
            return None
        stored = storage.get_table(prepared[0][1].table)
        if stored is None:
            return None
        inserts = [op for _, op, _ in prepared if op.kind == "insert"]
        written = storage.insert_entities(stored, [(op.pk, op.rk, op.props) for op in inserts]) if inserts else []
        if written is None:  # an entity exists already
            return None
        stamps = iter(written)
        responses: list[SubResponse] = []
        for sub, op, content_id in prepared:
            if op.kind == "insert":
                result = insert_response(sub, account, op, stored, next(stamps))
            else:
                result = execute_write(sub, storage, account, op)
            responses.append(SubResponse(result.status, [("Content-ID", content_id)] + result.headers, result.body))
        return responses
    except (ServiceError, MultipartError):
        return None


def _failure_part(exc: ServiceError, sub_headers: dict[str, str], call: Call, request_id: str,
                  content_id: str, prefix: str) -> SubResponse:
    if isinstance(exc, PipelineError):
        result = pipeline_error_response(exc, request_id)
    else:
        fmt = soft_format(sub_headers, {}, call.version)
        result = error_response(exc, fmt, request_id, prefix)
    headers = [(k, v) for k, v in result.headers if k.lower() != "x-ms-error-code"]
    return SubResponse(result.status, [("Content-ID", content_id)] + headers, result.body)


def _batch_prepare(sub: Call, rest: str) -> WriteOp:
    return prepare_body(_batch_context(sub, rest), sub.req.body)


def _batch_context(sub: Call, rest: str) -> WriteContext:
    """What one change set operation takes from its request line and headers, checked."""
    method = effective_method(sub)
    segment = resource_segment(rest)
    if method not in ("POST", "PUT", "MERGE", "DELETE") or segment in ("", "$batch"):
        raise error("InvalidInput", message="A change set may only hold insert, update, merge and "
                                            "delete operations on entities.")
    head, paren, tail = segment.partition("(")
    table = unquote(head)
    if table.lower() == "tables":
        raise error("InvalidInput", message="A change set may only hold entity operations.")
    check_table_name(table)
    inner = unquote(paren + tail)[1:-1] if paren else ""
    keys = entity_keys(inner) if inner.strip() else None
    if sub.sas is not None:
        sub.sas.check(sas_write_kind(method, sub.req.headers), table)
    if keys is None and method != "POST":
        raise error("MethodNotAllowed")
    return write_context(sub, method, table, keys)


def _sub_call(call: Call, account: str, method: str, url: str, headers: dict[str, str], body: bytes,
              index: int | None) -> tuple[Call, str]:
    """The call of one operation in a batch body, and its path after the account."""
    parts = urlsplit(url)
    path = parts.path
    if not parts.scheme and not _names_account(path, account):
        # ``POST mytable HTTP/1.1`` and ``POST /mytable HTTP/1.1`` (a client whose endpoint is
        # path-style writes the latter): the service resolves both against the batch's account.
        path = f"/{account}/{path.lstrip('/')}"
    try:
        rest = strip_account(path, account)
    except PipelineError:
        raise error("InvalidUri") from None
    x_methods = [headers["x-http-method"]] if "x-http-method" in headers else []
    sub_req = Request(method, path, parts.query, headers, body, call.req.host, call.req.secure,
                      call.req.client_ip, x_methods)
    sub = Call(sub_req, query_dict(parts.query), call.version, call.explicit_version, call.auth,
               call.base, index, in_batch=True)
    return sub, rest


def _names_account(path: str, account: str) -> bool:
    return path.startswith("/") and path[1:].split("/", 1)[0] == account
