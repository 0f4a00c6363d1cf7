"""Server-side writers: entity, feed and table bodies in JSON and Atom; error bodies.

The client codecs in :mod:`tablesdk._formats` go the other way (they write
requests and read responses), so the emulator has its own writers here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterable
from urllib.parse import quote

from ._values import COMPACT_JSON, Props, atom_property_xml, json_property_items, wire_datetime, xml_attr, xml_text

__all__ = [
    "Format",
    "JSON_MINIMAL",
    "key_path",
    "json_entity",
    "json_entities",
    "json_entities_minimal",
    "json_table",
    "json_tables",
    "atom_entry",
    "atom_feed",
    "atom_table_entry",
    "atom_tables_feed",
    "odata_error_json",
    "odata_error_xml",
    "storage_error_xml",
]

_ATOM_NS = (
    'xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices" '
    'xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" '
    'xmlns="http://www.w3.org/2005/Atom"'
)
_XML_DECL = '<?xml version="1.0" encoding="utf-8" standalone="yes"?>'
_SCHEME = "http://schemas.microsoft.com/ado/2007/08/dataservices/scheme"


@dataclass(frozen=True)
class Format:
    """A response payload format: ``kind`` json or atom, and the JSON metadata level."""

    kind: str
    metadata: str = "minimalmetadata"

    @property
    def is_json(self) -> bool:
        return self.kind == "json"

    @property
    def content_type(self) -> str:
        if self.kind == "json":
            return f"application/json;odata={self.metadata};streaming=true;charset=utf-8"
        return "application/atom+xml;type=entry;charset=utf-8"

    @property
    def feed_content_type(self) -> str:
        if self.kind == "json":
            return self.content_type
        return "application/atom+xml;type=feed;charset=utf-8"

    @property
    def error_content_type(self) -> str:
        if self.kind == "json":
            return self.content_type
        return "application/xml"


JSON_MINIMAL = Format("json", "minimalmetadata")
ATOM = Format("atom")


#: Characters ``quote`` leaves as they are (with ``safe=""``): a key of only these needs no work.
_UNRESERVED = re.compile(r"[A-Za-z0-9_.~-]*\Z")


def _quote_key(value: str) -> str:
    if _UNRESERVED.match(value):
        return value
    return quote(value.replace("'", "''"), safe="")


def key_path(table: str, pk: str, rk: str) -> str:
    """``table(PartitionKey='..',RowKey='..')`` with the keys escaped for a URL."""
    return f"{table}(PartitionKey='{_quote_key(pk)}',RowKey='{_quote_key(rk)}')"


def _js_safe(text: str) -> str:
    """JSON text with U+2028/U+2029 written as escapes, as the client writes them.

    They are valid raw in JSON but end a line in JavaScript, and some readers
    split on them; in JSON they can only stand inside strings, so the escape is
    always the same text.
    """
    if "\u2028" in text or "\u2029" in text:
        return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return text


def _dumps(obj: Any) -> bytes:
    return _js_safe(COMPACT_JSON(obj)).encode("utf-8")


# ------------------------------------------------------------------ JSON

def _json_entity_dict(
    fmt: Format, base: str, table: str, pk: str, rk: str, timestamp: str, etag: str,
    props: Props, select: list[str] | None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    metadata = fmt.metadata
    if metadata == "fullmetadata":
        path = key_path(table, pk, rk)
        out["odata.type"] = f"{base.rstrip('/').rsplit('/', 1)[-1]}.{table}"
        out["odata.id"] = base + path
        out["odata.etag"] = etag
        out["odata.editLink"] = path
    elif metadata == "minimalmetadata":
        out["odata.etag"] = etag
    if select is None or "PartitionKey" in select:
        out["PartitionKey"] = pk
    if select is None or "RowKey" in select:
        out["RowKey"] = rk
    if select is None or "Timestamp" in select:
        if metadata == "fullmetadata":
            out["Timestamp@odata.type"] = "Edm.DateTime"
        out["Timestamp"] = wire_datetime(timestamp)
    out.update(json_property_items(props, metadata != "nometadata", select))
    return out


def json_entity(
    fmt: Format, base: str, table: str, pk: str, rk: str, timestamp: str, etag: str,
    props: Props, select: list[str] | None = None,
) -> bytes:
    """A single-entity JSON body (insert response, point query)."""
    body: dict[str, Any] = {}
    if fmt.metadata != "nometadata":
        body["odata.metadata"] = f"{base}$metadata#{table}/@Element"
    body.update(_json_entity_dict(fmt, base, table, pk, rk, timestamp, etag, props, select))
    return _dumps(body)


def json_entities(
    fmt: Format, base: str, table: str,
    rows: Iterable[tuple[str, str, str, str, Props]], select: list[str] | None = None,
) -> bytes:
    """A query response: ``{"odata.metadata": ..., "value": [...]}``."""
    body: dict[str, Any] = {}
    if fmt.metadata != "nometadata":
        body["odata.metadata"] = f"{base}$metadata#{table}"
    body["value"] = [
        _json_entity_dict(fmt, base, table, pk, rk, ts, etag, props, select)
        for pk, rk, ts, etag, props in rows
    ]
    return _dumps(body)


_encode_str = json.encoder.encode_basestring


def json_entities_minimal(base: str, table: str, rows: Iterable[tuple[str, str, str, str, str]]) -> bytes:
    """The minimal-metadata query response from pre-rendered property members.

    ``rows`` are ``(pk, rk, timestamp, etag, members)``; the output is the
    same as :func:`json_entities` with ``odata=minimalmetadata`` and no ``$select``.
    """
    parts = ['{"odata.metadata":', _encode_str(f"{base}$metadata#{table}"), ',"value":[']
    first = True
    for pk, rk, ts, etag, members in rows:
        if not first:
            parts.append(",")
        first = False
        parts.append('{"odata.etag":')
        parts.append(_encode_str(etag))
        parts.append(',"PartitionKey":')
        parts.append(_encode_str(pk))
        parts.append(',"RowKey":')
        parts.append(_encode_str(rk))
        parts.append(',"Timestamp":"')
        parts.append(wire_datetime(ts))
        parts.append('"')
        if members:
            parts.append(",")
            parts.append(members)
        parts.append("}")
    parts.append("]}")
    return _js_safe("".join(parts)).encode("utf-8")


def _json_table_dict(fmt: Format, base: str, name: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if fmt.metadata == "fullmetadata":
        account = base.rstrip("/").rsplit("/", 1)[-1]
        out["odata.type"] = f"{account}.Tables"
        out["odata.id"] = f"{base}Tables('{_quote_key(name)}')"
        out["odata.editLink"] = f"Tables('{_quote_key(name)}')"
    out["TableName"] = name
    return out


def json_table(fmt: Format, base: str, name: str) -> bytes:
    body: dict[str, Any] = {}
    if fmt.metadata != "nometadata":
        body["odata.metadata"] = f"{base}$metadata#Tables/@Element"
    body.update(_json_table_dict(fmt, base, name))
    return _dumps(body)


def json_tables(fmt: Format, base: str, names: Iterable[str]) -> bytes:
    body: dict[str, Any] = {}
    if fmt.metadata != "nometadata":
        body["odata.metadata"] = f"{base}$metadata#Tables"
    body["value"] = [_json_table_dict(fmt, base, name) for name in names]
    return _dumps(body)


# ------------------------------------------------------------------ Atom

def _atom_entry_xml(
    base: str, account: str, table: str, pk: str, rk: str, timestamp: str, etag: str,
    props: Props, select: list[str] | None, root: bool,
) -> str:
    path = key_path(table, pk, rk)
    parts: list[str] = []
    if select is None or "PartitionKey" in select:
        parts.append(f"<d:PartitionKey>{xml_text(pk)}</d:PartitionKey>")
    if select is None or "RowKey" in select:
        parts.append(f"<d:RowKey>{xml_text(rk)}</d:RowKey>")
    if select is None or "Timestamp" in select:
        parts.append(f'<d:Timestamp m:type="Edm.DateTime">{wire_datetime(timestamp)}</d:Timestamp>')
    names = props.keys() if select is None else [n for n in select if n in props]
    for name in names:
        edm, value = props[name]
        parts.append(atom_property_xml(name, edm, value))
    ns = f' xml:base="{xml_attr(base)}" {_ATOM_NS}' if root else ""
    return (
        f'<entry{ns} m:etag="{xml_attr(etag)}">'
        f"<id>{xml_text(base + path)}</id>"
        '<title type="text" />'
        f"<updated>{wire_datetime(timestamp)}</updated>"
        "<author><name /></author>"
        f'<link rel="edit" title="{xml_attr(table)}" href="{xml_attr(path)}" />'
        f'<category term="{xml_attr(account)}.{xml_attr(table)}" scheme="{_SCHEME}" />'
        '<content type="application/xml"><m:properties>'
        + "".join(parts)
        + "</m:properties></content></entry>"
    )


def atom_entry(
    base: str, account: str, table: str, pk: str, rk: str, timestamp: str, etag: str,
    props: Props, select: list[str] | None = None,
) -> bytes:
    """A single ``<entry>`` document for one entity."""
    return (_XML_DECL + _atom_entry_xml(base, account, table, pk, rk, timestamp, etag, props, select, True)).encode(
        "utf-8"
    )


def atom_feed(
    base: str, account: str, table: str, updated: str,
    rows: Iterable[tuple[str, str, str, str, Props]], select: list[str] | None = None,
) -> bytes:
    """A ``<feed>`` of entities (query response)."""
    head = (
        f'{_XML_DECL}<feed xml:base="{xml_attr(base)}" {_ATOM_NS}>'
        f'<title type="text">{xml_text(table)}</title>'
        f"<id>{xml_text(base + table)}</id>"
        f"<updated>{updated}</updated>"
        f'<link rel="self" title="{xml_attr(table)}" href="{xml_attr(table)}" />'
    )
    entries = [
        _atom_entry_xml(base, account, table, pk, rk, ts, etag, props, select, False)
        for pk, rk, ts, etag, props in rows
    ]
    return (head + "".join(entries) + "</feed>").encode("utf-8")


def _atom_table_xml(base: str, account: str, name: str, updated: str, root: bool) -> str:
    path = f"Tables('{_quote_key(name)}')"
    ns = f' xml:base="{xml_attr(base)}" {_ATOM_NS}' if root else ""
    return (
        f"<entry{ns}>"
        f"<id>{xml_text(base + path)}</id>"
        '<title type="text" />'
        f"<updated>{updated}</updated>"
        "<author><name /></author>"
        f'<link rel="edit" title="Tables" href="{xml_attr(path)}" />'
        f'<category term="{xml_attr(account)}.Tables" scheme="{_SCHEME}" />'
        '<content type="application/xml"><m:properties>'
        f"<d:TableName>{xml_text(name)}</d:TableName>"
        "</m:properties></content></entry>"
    )


def atom_table_entry(base: str, account: str, name: str, updated: str) -> bytes:
    return (_XML_DECL + _atom_table_xml(base, account, name, updated, True)).encode("utf-8")


def atom_tables_feed(base: str, account: str, names: Iterable[str], updated: str) -> bytes:
    head = (
        f'{_XML_DECL}<feed xml:base="{xml_attr(base)}" {_ATOM_NS}>'
        '<title type="text">Tables</title>'
        f"<id>{xml_text(base)}Tables</id>"
        f"<updated>{updated}</updated>"
        '<link rel="self" title="Tables" href="Tables" />'
    )
    return (head + "".join(_atom_table_xml(base, account, n, updated, False) for n in names) + "</feed>").encode(
        "utf-8"
    )


# ------------------------------------------------------------------ errors

def odata_error_json(code: str, message: str) -> bytes:
    return _dumps({"odata.error": {"code": code, "message": {"lang": "en-US", "value": message}}})


def odata_error_xml(code: str, message: str) -> bytes:
    return (
        f"{_XML_DECL}"
        '<error xmlns="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata">'
        f"<code>{xml_text(code)}</code>"
        f'<message xml:lang="en-US">{xml_text(message)}</message>'
        "</error>"
    ).encode("utf-8")


def storage_error_xml(code: str, message: str, details: Iterable[tuple[str, str]] = ()) -> bytes:
    extra = "".join(f"<{name}>{xml_text(value)}</{name}>" for name, value in details)
    return (
        '<?xml version="1.0" encoding="utf-8"?>'
        f"<Error><Code>{xml_text(code)}</Code><Message>{xml_text(message)}</Message>{extra}</Error>"
    ).encode("utf-8")
