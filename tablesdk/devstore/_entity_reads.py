"""The entity reads: the point read of one entity and the query of a table's entities,
a page at a time with continuation keys (``$filter``, ``$select``, ``$top``, a SAS key range)."""

from __future__ import annotations

from typing import Iterator

from ._errors import error
from ._negotiation import negotiate
from ._query_options import (
    decode_token, encode_token, filterable_entity, key_range_conditions, parse_filter, parse_select, parse_top,
)
from ._request import MAX_PAGE, Call, Response
from ._storage import EntityRow, Storage
from ._values import SYSTEM_NAMES, Props, utc_now_text
from ._wire import Format, atom_entry, atom_feed, json_entities, json_entities_minimal, json_entity

__all__ = ["get_entity", "query_entities"]


def _render_entity(
    call: Call, account: str, fmt: Format, table: str, row: EntityRow, select: list[str] | None,
) -> bytes:
    if fmt.is_json:
        return json_entity(fmt, call.base, table, row.pk, row.rk, row.timestamp, row.etag, row.props, select)
    return atom_entry(call.base, account, table, row.pk, row.rk, row.timestamp, row.etag, row.props, select)


def get_entity(call: Call, storage: Storage, account: str, table: str, pk: str, rk: str) -> Response:
    if call.sas is not None:
        call.sas.check("get_entity", table)
        call.sas.check_key(pk, rk)
    fmt = negotiate(call.req.headers, call.query, call.version)
    select = parse_select(call.query)
    with storage.reading():
        stored = storage.get_table(table)
        if stored is None:
            raise error("TableNotFound")
        row = storage.get_entity(table, pk, rk)
    if row is None:
        raise error("ResourceNotFound")
    body = _render_entity(call, account, fmt, stored, row, select)
    headers = [("Content-Type", fmt.content_type), ("ETag", row.etag),
               ("DataServiceVersion", "3.0;" if fmt.is_json else "1.0;")]
    return Response(200, headers, body)


def query_entities(
    call: Call, storage: Storage, account: str, table: str, *, page_size: int, max_scan: int | None,
) -> Response:
    """A page of ``table``'s entities: ``page_size`` at the most, fewer once ``max_scan`` rows were examined."""
    grant = call.sas
    if grant is not None:
        grant.check("query_entities", table)
    fmt = negotiate(call.req.headers, call.query, call.version)
    flt = parse_filter(call.query)
    top = parse_top(call.query)
    select = parse_select(call.query)
    next_pk = call.query.get("NextPartitionKey")
    next_rk = call.query.get("NextRowKey")
    start: tuple[str, str] | None = None
    if next_pk:
        start = (decode_token(next_pk), decode_token(next_rk) if next_rk else "")
    limit = min(top if top is not None else MAX_PAGE, page_size, MAX_PAGE)
    rows: list[EntityRow] = []
    next_key: tuple[str, str] | None = None
    with storage.reading():
        stored = storage.get_table(table)
        if stored is None:
            raise error("TableNotFound")
        if top != 0:
            examined = 0
            ranged = grant is not None and grant.has_key_range
            conditions = key_range_conditions(flt, grant)
            if flt is not None and flt.decided_by(("PartitionKey", "RowKey")):
                flt = None  # the scan's key bounds alone decide it (its order is the filter's)
            scan = storage.scan(table, start=start, conditions=conditions,
                                chunk=min(limit + 1, 512) if flt is None else 512)
            for row in scan:
                if max_scan is not None and examined >= max_scan:
                    next_key = (row.pk, row.rk)
                    break
                examined += 1
                if ranged and grant is not None and not grant.key_allowed(row.pk, row.rk):
                    continue
                if flt is not None and not flt.matches(filterable_entity(row)):
                    continue
                if len(rows) == limit:
                    next_key = (row.pk, row.rk)
                    break
                rows.append(row)
    headers = [("Content-Type", fmt.feed_content_type), ("DataServiceVersion", "3.0;" if fmt.is_json else "1.0;")]
    if next_key is not None:
        headers.append(("x-ms-continuation-NextPartitionKey", encode_token(next_key[0])))
        headers.append(("x-ms-continuation-NextRowKey", encode_token(next_key[1])))
    tuples: Iterator[tuple[str, str, str, str, Props]]
    if select is not None and all(name in SYSTEM_NAMES for name in select):
        # only keys and Timestamp asked for (as when counting): the properties are never decoded
        tuples = ((r.pk, r.rk, r.timestamp, r.etag, {}) for r in rows)
    else:
        tuples = ((r.pk, r.rk, r.timestamp, r.etag, r.props) for r in rows)
    if fmt.is_json and fmt.metadata == "minimalmetadata" and select is None:
        body = json_entities_minimal(
            call.base, stored, ((r.pk, r.rk, r.timestamp, r.etag, r.json_members) for r in rows)
        )
    elif fmt.is_json:
        body = json_entities(fmt, call.base, stored, tuples, select)
    else:
        body = atom_feed(call.base, account, stored, utc_now_text(), tuples, select)
    return Response(200, headers, body)
