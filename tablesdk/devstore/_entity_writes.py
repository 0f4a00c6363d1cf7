"""The entity writes: insert, update, merge, both upserts and delete, as a single request
or as one operation of a change set. A write is first prepared (parsed and checked, nothing
read) and then executed inside the caller's storage transaction, so a change set checks
every operation the same way a single request does."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._errors import INVALID_ETAG, error
from ._negotiation import body_format, negotiate, preference
from ._request import V_UPSERT, Call, Response
from ._storage import EntityRow, Storage, etag_for
from ._values import Props, check_entity, check_key, parse_atom_entity, parse_json_body, parse_json_entity
from ._wire import Format, atom_entry, json_entity, key_path

__all__ = ["WriteOp", "WriteContext", "write_context", "prepare_body", "check_etag", "sas_write_kind",
           "prepare_write", "execute_write", "sas_write_check", "single_write", "insert_response"]

# Any weak ETag is a well-formed If-Match value to the service: one it never issued simply does
# not match (412), where a value that is no ETag at all is refused (400).
_WEAK_ETAG_RE = re.compile(r"[Ww]/\"[^\"]*\"\Z")


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


def check_etag(value: str) -> str:
    """An If-Match value as sent, when it is ``*`` or a weak ETag (the form the service gives)."""
    value = value.strip()
    if value == "*" or _WEAK_ETAG_RE.match(value):
        return value
    raise error("InvalidInput", message=INVALID_ETAG.format(value))


def _etag_matches(if_match: str, row: EntityRow) -> bool:
    if if_match == "*":
        return True
    return if_match.replace("%3A", ":").replace("%3a", ":") == row.etag.replace("%3A", ":")


def sas_write_kind(method: str, headers: dict[str, str]) -> str:
    """The SAS permission kind of a write, known from its method and If-Match before the body is read."""
    kind = {"POST": "insert", "DELETE": "delete"}.get(method)
    if kind is None:
        has_if_match = "if-match" in headers
        kind = ("update" if method == "PUT" else "merge") if has_if_match else (
            "insert_or_replace" if method == "PUT" else "insert_or_merge")
    return kind


@dataclass
class WriteContext:
    """What a write takes from its method, URL and headers: all of its checks but the body's."""

    kind: str
    table: str
    keys: tuple[str, str] | None
    if_match: str | None
    prefer: str | None
    fmt: Format | None
    json_body: bool


def write_context(call: Call, method: str, table: str, keys: tuple[str, str] | None) -> WriteContext:
    """Check the headers of one entity write; its body is read by :func:`prepare_body`."""
    headers = call.req.headers
    if "if-none-match" in headers and method in ("PUT", "MERGE", "DELETE"):
        if "if-match" in headers:
            raise error("InvalidInput", message="Both If-Match and If-None-Match HTTP headers cannot be "
                                                "specified at the same time.")
        raise error("InvalidInput", message=f"If-None-Match HTTP header cannot be specified for "
                                            f"{'DELETE' if method == 'DELETE' else 'PUT'} operations.")
    if_match_raw = headers.get("if-match")
    if_match = check_etag(if_match_raw) if if_match_raw is not None else None
    if method == "DELETE":
        assert keys is not None
        if if_match is None:
            raise error("MissingRequiredHeader")
        return WriteContext("delete", table, keys, if_match, None, None, False)
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
        prefer = preference(call)
        fmt = negotiate(headers, call.query, call.version) if prefer != "return-no-content" else None
    else:
        prefer, fmt = None, None
    return WriteContext(kind, table, keys, if_match, prefer, fmt, body_format(headers, call.version) == "json")


def prepare_body(ctx: WriteContext, body: bytes) -> WriteOp:
    """The write of ``ctx`` with its body read and checked; nothing is read from storage yet."""
    keys = ctx.keys
    if ctx.kind == "delete":
        assert keys is not None
        check_key("PartitionKey", keys[0])
        check_key("RowKey", keys[1])
        return WriteOp("delete", ctx.table, keys[0], keys[1], {}, ctx.if_match, None, None)
    keys_from_url = ctx.kind != "insert"  # typed body keys are ignored there, refused on insert
    if ctx.json_body:
        pk, rk, props = parse_json_entity(parse_json_body(body), keys_from_url=keys_from_url)
    else:
        pk, rk, props = parse_atom_entity(body, keys_from_url=keys_from_url)
    if keys is not None:
        if (pk is not None and pk != keys[0]) or (rk is not None and rk != keys[1]):
            raise error("InvalidInput")  # the body's keys must be those of the URL
        pk, rk = keys
    if pk is None or rk is None:
        raise error("PropertiesNeedValue")
    check_key("PartitionKey", pk)
    check_key("RowKey", rk)
    check_entity(pk, rk, props, len(body) if ctx.json_body else None)
    return WriteOp(ctx.kind, ctx.table, pk, rk, props, ctx.if_match, ctx.prefer, ctx.fmt)


def prepare_write(call: Call, method: str, table: str, keys: tuple[str, str] | None) -> WriteOp:
    """Parse and check one entity write; nothing is read from storage yet."""
    return prepare_body(write_context(call, method, table, keys), call.req.body)


def execute_write(call: Call, storage: Storage, account: str, op: WriteOp) -> Response:
    """Apply a prepared write; the caller holds a storage transaction."""
    stored = storage.get_table(op.table)
    if stored is None:
        raise error("TableNotFound")
    existing = storage.get_entity(op.table, op.pk, op.rk)
    if op.kind == "insert":
        if existing is not None:
            raise error("EntityAlreadyExists")
        ts = storage.put_entity(op.table, op.pk, op.rk, op.props, exists=False)
        return insert_response(call, account, op, stored, ts)
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


def insert_response(call: Call, account: str, op: WriteOp, table: str, ts: str) -> Response:
    """The answer to an insert that wrote its entity at ``ts``."""
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
        body = atom_entry(call.base, account, table, op.pk, op.rk, ts, etag, op.props)
    headers += [("Content-Type", fmt.content_type), ("Location", location),
                ("DataServiceVersion", "3.0;" if fmt.is_json else "1.0;")]
    return Response(201, headers, body)


def sas_write_check(call: Call, op: WriteOp) -> None:
    """A SAS may make this write: its permission and its key range."""
    if call.sas is not None:
        call.sas.check(op.kind, op.table)
        call.sas.check_key(op.pk, op.rk)


def single_write(call: Call, storage: Storage, account: str, method: str, table: str,
                 keys: tuple[str, str] | None) -> Response:
    """An entity write sent as its own request, in its own transaction."""
    if call.sas is not None:  # permission before the body is even parsed
        call.sas.check(sas_write_kind(method, call.req.headers), table)
    with storage.reading():  # the service finds the table before it reads the entity
        if storage.get_table(table) is None:
            raise error("TableNotFound")
    op = prepare_write(call, method, table, keys)
    sas_write_check(call, op)
    with storage.transaction():
        return execute_write(call, storage, account, op)
