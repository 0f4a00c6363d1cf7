"""The table operations: Query Tables (with ``NextTableName``), Create Table, Delete Table
and the read of one table. Each runs in its own storage transaction or read."""

from __future__ import annotations

from ._errors import error
from ._negotiation import body_format, negotiate, preference
from ._query_options import decode_token, encode_token, parse_filter, parse_top
from ._request import MAX_PAGE, Call, Response
from ._storage import Storage
from ._url_parts import check_table_name
from ._values import STRING, parse_atom_table_name, parse_json_body, utc_now_text
from ._wire import atom_table_entry, atom_tables_feed, json_table, json_tables

__all__ = ["query_tables", "create_table", "delete_table", "get_table"]


def query_tables(call: Call, storage: Storage, account: str, page_size: int) -> Response:
    """A page of table names, ``page_size`` at the most."""
    if call.sas is not None:
        call.sas.check("query_tables", None)
    fmt = negotiate(call.req.headers, call.query, call.version)
    flt = parse_filter(call.query)
    top = parse_top(call.query)
    start = decode_token(call.query["NextTableName"]).lower() if call.query.get("NextTableName") else None
    limit = min(top if top is not None else MAX_PAGE, page_size, MAX_PAGE)
    names: list[str] = []
    next_name: str | None = None
    if top != 0:
        with storage.reading():
            for name in storage.iter_tables(start):
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
        body = atom_tables_feed(call.base, account, names, utc_now_text())
    return Response(200, headers, body)


def create_table(call: Call, storage: Storage, account: str) -> Response:
    if call.sas is not None:
        call.sas.check("create_table", None)
    prefer = preference(call)
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
    with storage.transaction():
        if not storage.create_table(name):
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
        call.base, account, name, utc_now_text()
    )
    return Response(201, headers, body)


def delete_table(call: Call, storage: Storage, name: str) -> Response:
    if call.sas is not None:
        call.sas.check("delete_table", None)
    with storage.transaction():
        if not storage.delete_table(name):
            raise error("ResourceNotFound")
    return Response(204)


def get_table(call: Call, storage: Storage, account: str, name: str) -> Response:
    """One table's entry, its name as stored."""
    if call.sas is not None:
        call.sas.check("query_tables", None)
    fmt = negotiate(call.req.headers, call.query, call.version)
    with storage.reading():
        stored = storage.get_table(name)
    if stored is None:
        raise error("ResourceNotFound")
    body = json_table(fmt, call.base, stored) if fmt.is_json else atom_table_entry(
        call.base, account, stored, utc_now_text()
    )
    return Response(200, [("Content-Type", fmt.content_type)], body)
