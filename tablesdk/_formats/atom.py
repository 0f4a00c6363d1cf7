"""The AtomPub payload format (OData v1/v2 over Atom), used by service versions before 2015-12-11.

Request bodies are built as text (the shape is fixed and small; string
building measured 3x faster than building the same entry with lxml); response bodies
are parsed with lxml through one parser whose DTD loading, entity expansion and
network access are off, and any document that carries a DOCTYPE is refused.

Wire shape of an entity (the "Movie" insert of the Azure Storage team's blog)::

    <entry xmlns:d="...dataservices" xmlns:m="...dataservices/metadata" xmlns="http://www.w3.org/2005/Atom">
      <title /><author><name /></author><updated>...</updated><id />
      <content type="application/xml"><m:properties>
        <d:Rating m:type="Edm.Double">4.5</d:Rating><d:Language>English</d:Language> ...
      </m:properties></content>
    </entry>

A property without ``m:type`` is an Edm.String; ``m:null="true"`` is a null.
XML 1.0 cannot carry most control characters (U+0000-U+001F except tab, line
feed and carriage return), lone surrogates, U+FFFE or U+FFFF, so a string
holding one raises :class:`~tablesdk._core._errors.TableValidationError` naming the
property (JSON carries them).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from datetime import datetime, timezone
from itertools import repeat
from operator import attrgetter, setitem
from typing import Any

from lxml import etree

from .._entities._edm import (
    INT32_MAX, INT32_MIN, EdmType, EntityPage, EntityPayload, format_datetime, infer_edm_type, to_atom_text,
)
from .._entities._edm_specs import EDM_SPECS, ColumnReader, text_as_is
from .._core._errors import TableValidationError
from . import PayloadFormat as PayloadFormat, decodes as decodes

__all__ = [
    "AtomFormat",
    "ATOM_NS",
    "DATASERVICES_NS",
    "METADATA_NS",
    "SAFE_XML_PARSER",
    "parse_xml",
]

ATOM_NS = "http://www.w3.org/2005/Atom"
DATASERVICES_NS = "http://schemas.microsoft.com/ado/2007/08/dataservices"
METADATA_NS = "http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"

#: The parser every XML body goes through: no DTD loading, no entity
#: substitution, no network, libxml2's size limits kept (huge_tree off).
SAFE_XML_PARSER = etree.XMLParser(
    resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False, remove_comments=True,
    remove_pis=True,
)

_ENTRY = f"{{{ATOM_NS}}}entry"
_FEED = f"{{{ATOM_NS}}}feed"
_PROPERTIES = f"{{{METADATA_NS}}}properties"
_M_TYPE = f"{{{METADATA_NS}}}type"
_M_NULL = f"{{{METADATA_NS}}}null"
_M_ETAG = f"{{{METADATA_NS}}}etag"
_D_PREFIX = f"{{{DATASERVICES_NS}}}"
_D_PREFIX_LEN = len(_D_PREFIX)

_XML_DECL = '<?xml version="1.0" encoding="utf-8" standalone="yes"?>'
_ENTRY_OPEN = (
    f'{_XML_DECL}<entry xmlns:d="{DATASERVICES_NS}" xmlns:m="{METADATA_NS}" xmlns="{ATOM_NS}">'
    "<title /><author><name /></author><updated>"
)
_ENTRY_PROPERTIES = '</updated><id /><content type="application/xml"><m:properties>'
_ENTRY_CLOSE = "</m:properties></content></entry>"

# Characters a string value may hold as-is: valid XML 1.0 characters other than
# '&', '<', '>' (escaped) and '\r' (a parser would normalise it to '\n').
_NEEDS_WORK = re.compile("[^\t\n\x20-\x25\x27-\x3b\x3d\x3f-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# Characters XML 1.0 cannot carry at all, escaped or not.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


#: Property text -> Python value, by ``m:type`` (a str key: the attribute's text is one),
#: built from the table of EDM types: each spec's reader, which reads what ``from_atom_text``
#: does for its type; None means the text is the value (no call).
_BY_NAME: dict[str, tuple[EdmType, Callable[[str], Any] | None]] = {
    t.value: (t, None if spec.atom_reader is text_as_is else spec.atom_reader) for t, spec in EDM_SPECS.items()
}


#: Property element tag ("{dataservices}Name") -> property name: feeds repeat their names.
_NAMES: dict[str, str] = {}
_MAX_NAMES = 4096


def parse_xml(body: bytes) -> etree._Element:
    """Parse ``body`` with :data:`SAFE_XML_PARSER`; a DOCTYPE or malformed XML raises ValueError.

    The Table service never sends a DTD, so a document with one (external
    entities, entity-expansion bombs) is refused outright rather than parsed
    with its entities left unexpanded.
    """
    try:
        root = etree.fromstring(body, SAFE_XML_PARSER)
    except etree.XMLSyntaxError as exc:
        raise ValueError(f"malformed XML body: {exc}") from None
    if root is None:  # pragma: no cover - recover=False never returns None
        raise ValueError("empty XML body")
    doctype: str = getattr(root.getroottree().docinfo, "doctype", "")  # not in lxml-stubs
    if doctype:
        raise ValueError("XML bodies with a DOCTYPE (DTD or entity declarations) are refused")
    return root


def _refuse_repeated_properties(container: etree._Element, prefix: str) -> None:
    """Raise ValueError if ``container`` (an ``m:properties``) holds a property twice: which
    value is the entity's would be a guess, and the service never writes one."""
    seen: set[str] = set()
    for element in container:
        tag = element.tag
        if type(tag) is str and tag.startswith(prefix):
            if tag in seen:
                raise ValueError(f"the entry holds the property {tag[len(prefix):]!r} twice")
            seen.add(tag)


# ---------------------------------------------------------------- reading a page column by column
#
# A feed's entries usually have one shape: the same property elements, in the same order,
# with the same m:type and m:null attributes. A page is read as the shapes of its entries
# (each one's names, types and conversions decided once) and the texts of their elements,
# fetched with C loops over each m:properties; each column of a shape is then converted in
# one call. Whatever this reading does not expect (a property outside the d: namespace, a
# repeat, an unknown type, a text no conversion reads, entries nested oddly) makes the page
# be read again by AtomFormat._read, the entry-by-entry reading that decides every value
# and error: the two give the same values, and errors are always _read's.

_TAG = attrgetter("tag")
_TEXT = attrgetter("text")
_ITEMS = etree._Element.items


class _Irregular(Exception):
    """The page holds something only the entry-by-entry reading handles."""


def _guid_column(texts: list[Any]) -> list[Any] | None:
    # The Atom reader strips the text, the JSON column reader does not (int(_, 16) would read
    # " 0000000-..." as a Guid): only columns with nothing to strip are read in one call.
    if list(map(str.strip, texts)) != texts:
        return None
    return EDM_SPECS[EdmType.GUID].json_column_reader(texts)


_SERVICE_BOOLEANS = {"true": True, "false": False}


def _boolean_column(texts: list[Any]) -> list[Any] | None:
    values = list(map(_SERVICE_BOOLEANS.get, texts))
    return None if None in values else values


def _int32_column(texts: list[Any]) -> list[Any] | None:
    # int32_from_wire of each text (at most 24 characters, then int(), then the range).
    if max(map(len, texts)) > 24:
        return None
    numbers = list(map(int, texts))
    return numbers if INT32_MIN <= min(numbers) and max(numbers) <= INT32_MAX else None


def _as_is_column(texts: list[Any]) -> list[Any] | None:
    return None  # the per-value reader is a C function (float): the fastest reading


#: Column of texts -> values, or None when one text is not in a form it reads (each is then
#: read by the type's Atom reader). The JSON column readers of Int64, DateTime and Binary read
#: a text as the Atom reader does whenever they accept the column (a DateTime they accept ends
#: in "Z" and starts with a digit: nothing to strip).
_COLUMN_READERS: dict[EdmType, ColumnReader] = {
    EdmType.INT32: _int32_column,
    EdmType.INT64: EDM_SPECS[EdmType.INT64].json_column_reader,
    EdmType.DATETIME: EDM_SPECS[EdmType.DATETIME].json_column_reader,
    EdmType.GUID: _guid_column,
    EdmType.BINARY: EDM_SPECS[EdmType.BINARY].json_column_reader,
    EdmType.BOOLEAN: _boolean_column,
}


class _Shape:
    """How the entries with one shape of m:properties are read: their property names (and a
    dict of them to copy, every value None) and types (one dict, shared by their entities),
    the columns that hold strings (an empty element is ""), and the conversions (column,
    column reader, reader); a null column is left as the copy holds it."""

    __slots__ = ("names", "template", "types", "strings", "conversions")

    def __init__(self, tags: tuple[Any, ...], attributes: tuple[tuple[Any, ...], ...]) -> None:
        names: list[str] = []
        self.types: dict[str, EdmType] = {}
        self.strings: list[int] = []
        self.conversions: list[tuple[int, ColumnReader, Callable[[str], Any]]] = []
        for index, (tag, pairs) in enumerate(zip(tags, attributes)):
            if type(tag) is not str or tag[:_D_PREFIX_LEN] != _D_PREFIX:
                raise _Irregular
            name = tag[_D_PREFIX_LEN:]
            if name in self.types:
                raise _Irregular
            type_name: Any = None
            null = False
            for key, value in pairs:  # other attributes (xml:space) say nothing of the value
                if key == _M_TYPE:
                    type_name = value
                elif key == _M_NULL:
                    null = value == "true"
            edm_type, convert = _BY_NAME[type_name] if type_name is not None else (EdmType.STRING, None)
            names.append(name)
            self.types[name] = edm_type
            if null:
                continue  # the value the entity's copy of the template holds
            if convert is None:
                self.strings.append(index)
            else:
                self.conversions.append((index, _COLUMN_READERS.get(edm_type, _as_is_column), convert))
        self.names = tuple(names)
        self.template: dict[str, Any] = dict.fromkeys(names)

    def read(self, rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
        """The values of entries of this shape, from the texts of their elements.

        Each entity starts as a copy of the shape's dict of names (nulls included, in
        document order) and gets a column's values in one C loop: building each dict
        from (name, value) pairs costs a third more (resizes, a tuple a pair)."""
        entities = list(map(dict.copy, repeat(self.template, len(rows))))
        if not self.names:
            return entities
        names = self.names
        columns = list(map(list, zip(*rows)))
        for index in self.strings:
            column = columns[index]
            if None in column:
                column = [text or "" for text in column]
            deque(map(setitem, entities, repeat(names[index]), column), 0)
        for index, read_column, convert in self.conversions:
            column = columns[index]
            values = read_column(column)
            deque(map(setitem, entities, repeat(names[index]), map(convert, column) if values is None else values), 0)
        return entities


_MAX_SHAPES = 256


def _read_page(root: etree._Element, shapes: dict[tuple[Any, ...], _Shape]) -> EntityPage:
    """The entities under ``root`` (a feed or an entry) read column by column; raises
    :class:`_Irregular` (or what a conversion raises) for anything it does not expect."""
    etags: list[Any] = []
    entry_shapes: list[_Shape] = []
    rows_of: dict[_Shape, list[tuple[Any, ...]]] = {}
    awaiting = False  # an entry whose m:properties has not come yet
    # The last shape seen and its key: compared (one memcmp a string) before a lookup, which
    # would hash every tag and attribute name anew (lxml makes new strings each time).
    shape, last_tags, last_attributes = _NO_PROPERTIES, None, None
    for container in root.iter(_ENTRY, _PROPERTIES):
        if container.tag == _ENTRY:
            if awaiting:
                entry_shapes.append(_NO_PROPERTIES)
                rows_of.setdefault(_NO_PROPERTIES, []).append(())
            etags.append(container.get(_M_ETAG))
            awaiting = True
            continue
        if not awaiting:  # m:properties outside an entry, or a second one in it
            raise _Irregular
        awaiting = False
        children = list(container)
        tags = list(map(_TAG, children))
        attributes = list(map(_ITEMS, children))
        if tags != last_tags or attributes != last_attributes:
            key = (tuple(tags), tuple(map(tuple, attributes)))
            found = shapes.get(key)
            if found is None:
                found = _Shape(*key)
                if len(shapes) < _MAX_SHAPES:
                    shapes[key] = found
            shape = found
            last_tags, last_attributes = tags, attributes
        entry_shapes.append(shape)
        rows = rows_of.get(shape)
        if rows is None:
            rows = rows_of[shape] = []
        rows.append(tuple(map(_TEXT, children)))
    if awaiting:
        entry_shapes.append(_NO_PROPERTIES)
        rows_of.setdefault(_NO_PROPERTIES, []).append(())
    if len(rows_of) == 1:
        (shape, rows), = rows_of.items()
        return EntityPage(shape.read(rows), [shape.types] * len(rows), etags)
    read = {shape: iter(shape.read(rows)) for shape, rows in rows_of.items()}
    values = [next(read[shape]) for shape in entry_shapes]
    return EntityPage(values, [shape.types for shape in entry_shapes], etags)


_NO_PROPERTIES = _Shape((), ())
#: What the column-by-column reading raises on a page it leaves to AtomFormat._read.
_IRREGULAR = (_Irregular, ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError)


def _escape_string(name: str, value: str) -> str:
    """XML text for a string property, or TableValidationError if XML cannot carry it."""
    if _NEEDS_WORK.search(value) is None:
        return value
    bad = _NOT_XML.search(value)
    if bad is not None:
        raise TableValidationError(
            name,
            "the Atom format (XML 1.0) cannot carry control characters other than tab, "
            "line feed and carriage return, lone surrogates, U+FFFE or U+FFFF; use the JSON format",
            f"found {bad.group()!r} at index {bad.start()}",
        )
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


class AtomFormat(PayloadFormat):
    """AtomPub bodies (``application/atom+xml``), for service versions up to 2015-04-05.

    ``clock`` supplies the entry's ``<updated>`` time (defaults to now, UTC);
    pass a fixed one for reproducible bodies.
    """

    name = "atom"
    default_api_version = "2015-04-05"
    content_type = "application/atom+xml"

    def __init__(self, *, clock: Callable[[], datetime] | None = None) -> None:
        self._clock = clock or _utc_now
        #: The m:properties shapes seen (tags, m:type and m:null of its elements), for pages.
        self._shapes: dict[tuple[Any, ...], _Shape] = {}

    def __repr__(self) -> str:
        return "AtomFormat()"

    def request_headers(self) -> dict[str, str]:
        """Accept Atom (or plain XML error bodies); OData 2.0, which ``$select`` needs."""
        return {
            "Accept": "application/atom+xml,application/xml",
            "DataServiceVersion": "2.0;NetFx",
            "MaxDataServiceVersion": "2.0;NetFx",
        }

    # ------------------------------------------------------------ writing

    def _entry(self, properties: str) -> bytes:
        updated = format_datetime(self._clock())
        return f"{_ENTRY_OPEN}{updated}{_ENTRY_PROPERTIES}{properties}{_ENTRY_CLOSE}".encode("utf-8")

    def serialize_entity(self, payload: EntityPayload) -> bytes:
        """An ``<entry>`` with every property except Timestamp (the service sets it).

        Strings carry no ``m:type``; nulls are ``m:null="true"`` and keep their
        ``m:type`` when it is known.
        """
        types = payload.types
        parts: list[str] = []
        append = parts.append
        string = EdmType.STRING
        for name, value in payload.values.items():
            if name == "Timestamp":
                continue
            if name not in _XML_NAMES_SEEN:
                _check_xml_name(name)
            edm_type = types.get(name)
            if value is None:
                if edm_type is None or edm_type is string:
                    append(f'<d:{name} m:null="true" />')
                else:
                    append(f'<d:{name} m:type="{edm_type.value}" m:null="true" />')
                continue
            if edm_type is None:
                edm_type = infer_edm_type(value, name)
            if edm_type is string:
                if not isinstance(value, str):
                    raise TableValidationError(name, "Edm.String needs a str", f"got {type(value).__name__}")
                text = _escape_string(name, value)
                if value and (value[0] in " \t\n\r" or value[-1] in " \t\n\r"):
                    append(f'<d:{name} xml:space="preserve">{text}</d:{name}>')
                else:
                    append(f"<d:{name}>{text}</d:{name}>")
            else:
                # EdmType is a str: concatenation uses its text without a Python-level call
                text = to_atom_text(value, edm_type)
                append("<d:" + name + ' m:type="' + edm_type + '">' + text + "</d:" + name + ">")
        return self._entry("".join(parts))

    def serialize_table(self, table_name: str) -> bytes:
        """The Create Table entry: one ``d:TableName`` property."""
        return self._entry(f"<d:TableName>{_escape_string('TableName', table_name)}</d:TableName>")

    # ------------------------------------------------------------ reading

    @staticmethod
    def _check_root(root: etree._Element) -> None:
        if root.tag != _ENTRY and root.tag != _FEED:
            raise ValueError(f"expected an Atom feed or entry, got <{etree.QName(root).localname}>")

    def _read(self, root: etree._Element) -> list[EntityPayload]:
        """Every entity under ``root`` (a feed or an entry), in one walk of the tree.

        ``iter(entry, m:properties)`` yields each entry and then its properties
        element in document order, so no per-entry ``find`` is needed.
        """
        self._check_root(root)
        payloads: list[EntityPayload] = []
        values: dict[str, Any] | None = None
        types: dict[str, EdmType] = {}
        string = EdmType.STRING
        prefix, cut = _D_PREFIX, _D_PREFIX_LEN
        by_name = _BY_NAME
        names = _NAMES
        for container in root.iter(_ENTRY, _PROPERTIES):
            if container.tag == _ENTRY:
                values, types = {}, {}
                payloads.append(EntityPayload(values, types, container.get(_M_ETAG)))
                continue
            if values is None:
                continue
            before = len(values)
            for element in container:
                tag = element.tag
                name = names.get(tag)
                if name is None:
                    if tag[:cut] != prefix:  # a property lives in the d: namespace
                        continue
                    name = tag[cut:]
                    if len(names) < _MAX_NAMES:
                        names[tag] = name
                attributes = element.items()
                if not attributes:  # the common string property
                    types[name] = string
                    values[name] = element.text or ""
                    continue
                type_name: Any = None  # lxml-stubs say str | bytes; it is str
                null = False
                if len(attributes) == 1 and attributes[0][0] == _M_TYPE:  # the common typed property
                    type_name = attributes[0][1]
                else:
                    for key, value in attributes:
                        if key == _M_TYPE:
                            type_name = value
                        elif key == _M_NULL:
                            null = value == "true"
                if type_name is None:
                    edm_type, convert = string, None
                else:
                    try:
                        edm_type, convert = by_name[type_name]
                    except KeyError:
                        raise ValueError(f"property {name!r}: unknown EDM type {type_name!r}") from None
                types[name] = edm_type
                if null:
                    values[name] = None
                    continue
                text = element.text or ""
                if convert is None:
                    values[name] = text
                    continue
                try:
                    values[name] = convert(text)
                except (ValueError, TypeError) as exc:
                    raise ValueError(f"property {name!r}: not a valid {type_name} value: {text!r}") from exc
            if len(values) - before < len(container):  # fewer names than elements: another namespace, or a repeat
                _refuse_repeated_properties(container, prefix)
        return payloads

    @decodes
    def parse_entity(self, body: bytes, etag: str | None = None) -> EntityPayload:
        """The entity of an ``<entry>`` body (or of a feed holding exactly one entry).

        The entry's ``m:etag`` wins over the ``etag`` header value passed in.
        """
        payloads = self.parse_entity_page(body).payloads()
        if len(payloads) != 1:
            raise ValueError(f"expected one entity in the response, found {len(payloads)}")
        payload = payloads[0]
        if payload.etag is None:
            payload.etag = etag
        return payload

    def parse_entities(self, body: bytes) -> list[EntityPayload]:
        """Every entity of a query feed (or a single entry), in document order."""
        return self.parse_entity_page(body).payloads()

    @decodes
    def parse_entity_page(self, body: bytes) -> EntityPage:
        """:meth:`parse_entities` as one :class:`~tablesdk._entities._edm.EntityPage`, read column by
        column: the entities of one shape share one ``types`` dict."""
        root = parse_xml(body)
        self._check_root(root)
        try:
            return _read_page(root, self._shapes)
        except _IRREGULAR:
            return EntityPage.of(self._read(root))  # the reading that decides values and errors

    @decodes
    def parse_tables(self, body: bytes) -> list[str]:
        """The ``d:TableName`` of each entry of a Query Tables feed or a Create Table entry."""
        names: list[str] = []
        for payload in self._read(parse_xml(body)):
            name = payload.values.get("TableName")
            if not isinstance(name, str):
                raise ValueError("table entry without d:TableName")
            names.append(name)
        return names


#: XML 1.0 (fifth edition) NameStartChar and NameChar, without ':' (an NCName): what an element can be
#: called. Some letters are identifiers but no XML names (U+00B5 MICRO SIGN, U+00AA): JSON carries
#: them, AtomPub cannot.
_XML_NAME = re.compile(
    "[A-Z_a-z\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u02FF\u0370-\u037D\u037F-\u1FFF\u200C-\u200D"
    "\u2070-\u218F\u2C00-\u2FEF\u3001-\uD7FF\uF900-\uFDCF\uFDF0-\uFFFD\U00010000-\U000EFFFF]"
    "[-.0-9\u00B7\u0300-\u036F\u203F-\u2040A-Z_a-z\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u02FF"
    "\u0370-\u037D\u037F-\u1FFF\u200C-\u200D\u2070-\u218F\u2C00-\u2FEF\u3001-\uD7FF"
    "\uF900-\uFDCF\uFDF0-\uFFFD\U00010000-\U000EFFFF]*"
)
_XML_NAMES_SEEN: set[str] = set()


def _check_xml_name(name: str) -> None:
    if not name.isidentifier():
        raise TableValidationError(repr(name), "property names are identifiers: letters, digits and '_'")
    if _XML_NAME.fullmatch(name) is None:
        bad = next((c for c in name if _XML_NAME.fullmatch("a" + c) is None), name[0])
        raise TableValidationError(
            repr(name), "an AtomPub property name must be an XML name",
            f"{bad!r} (U+{ord(bad):04X}) cannot be in an element's name; the JSON format carries it",
        )
    if len(_XML_NAMES_SEEN) < 4096:
        _XML_NAMES_SEEN.add(name)
