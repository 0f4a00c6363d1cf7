"""The JSON payload format (OData v3 "JSON light"), for service versions 2013-08-15 and later.

Entity bodies are flat objects: ``{"PartitionKey": "p", "RowKey": "r", "Views":
"5", "Views@odata.type": "Edm.Int64"}``. A value whose JSON form does not
identify its EDM type (Int64 and DateTime, Guid, Binary as strings; doubles,
which would read back as Int32 when whole) carries an ``Name@odata.type``
annotation; strings, booleans and Int32 travel bare.

Responses come in three metadata levels:

* ``minimalmetadata`` (the default): ``odata.metadata``, ``odata.etag`` and the
  annotations above; un-annotated values are typed by their JSON kind.
* ``fullmetadata``: adds ``odata.type``, ``odata.id``, ``odata.editLink`` and
  ``Timestamp@odata.type``; handled like minimalmetadata.
* ``nometadata``: plain values only. Types are then unknown and are left out of
  :attr:`EntityPayload.types` (the values stay as JSON gave them), so the entity
  layer reads them as the entity class declares; only PartitionKey and RowKey
  (always strings) are typed. Annotations, if any arrive, still apply.

``Timestamp`` is always read as an Edm.DateTime. Request bodies are UTF-8 with
non-ASCII characters written as themselves (smaller than ``\\uXXXX`` escapes,
which matters against the 4 MiB batch limit), except U+2028 and U+2029, always
written as ``\\u2028``/``\\u2029`` escapes (JavaScript line terminators, which
JavaScript-based services split batch bodies on); a lone surrogate, which UTF-8
cannot encode, raises :class:`~tablesdk._core._errors.TableValidationError`.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Sequence
from itertools import chain, compress, repeat
from operator import itemgetter, setitem
from typing import Any

from .._entities._edm import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    EdmType,
    EntityPage,
    EntityPayload,
    parse_datetime,
)
from .._entities._edm_specs import EDM_SPECS, ColumnReader
from . import PayloadFormat as PayloadFormat, decodes as decodes
from .json_write import (
    _ANNOTATION,
    MAX_RAW_UTF8_BODY as MAX_RAW_UTF8_BODY,
    _body,
    _encode,
    _encode_text,
    _page_text,
    _template_text,
)

__all__ = ["JsonFormat", "METADATA_LEVELS"]

METADATA_LEVELS = ("nometadata", "minimalmetadata", "fullmetadata")

_ANNOTATION_LEN = len(_ANNOTATION)
_STRING, _INT32, _INT64 = EdmType.STRING, EdmType.INT32, EdmType.INT64
_DATETIME, _DOUBLE = EdmType.DATETIME, EdmType.DOUBLE
# Built from the table of EDM types (tablesdk._entities._edm_specs) when this module is imported.
#: EDM type of an un-annotated JSON value, by its Python type (int is range-checked).
_PLAIN_TYPES: dict[type, EdmType] = {kind: t for t, spec in EDM_SPECS.items() for kind in spec.json_bare_kinds}
#: JSON value -> Python value for an annotated property, by wire type name (a str key: the
#: annotation's text is one): each spec's per-value reader, which reads what ``from_json_value`` does.
_BY_NAME: dict[str, tuple[EdmType, Callable[[Any], Any] | None]] = {
    t.value: (t, spec.json_reader) for t, spec in EDM_SPECS.items()
}


def _unsupported(values: dict[str, Any]) -> ValueError:
    for key, value in values.items():
        if type(value) is int and not INT64_MIN <= value <= INT64_MAX:
            return ValueError(f"property {key!r}: the number {value} is outside the Edm.Int64 range")
        if value is not None and type(value) not in _PLAIN_TYPES:
            return ValueError(f"property {key!r}: unsupported JSON value of type {type(value).__name__}")
    return ValueError("unsupported JSON property value")  # pragma: no cover


#: What one set of annotation values means for a shape: the EDM types to record and the
#: ``(property, type name, converter)`` of each present property whose value needs converting.
_Annotations = tuple[dict[str, EdmType], tuple[tuple[str, str, Callable[[Any], Any]], ...]]


#: The typing of one shape with values of given kinds and annotations: the types of its
#: non-null values (integers as Int32), the integers to range-check (and whether an
#: annotation types them), and the conversions of :data:`_Annotations`.
_Typing = tuple[dict[str, EdmType], tuple[tuple[str, bool], ...], tuple[tuple[str, str, Callable[[Any], Any]], ...]]
_NONE_TYPE = type(None)
_NO_ANNOTATIONS: _Annotations = ({}, ())


class _Plan:
    """How one shape of entity object (its keys, in order) splits into the ETag, other
    control information to drop and ``Name@odata.type`` annotations; and, per tuple of
    annotation values seen with that shape (a feed's entities usually share both), what
    those annotations do (:data:`_Annotations`)."""

    __slots__ = (
        "has_etag", "drop", "annotated", "annotation_keys", "properties", "present", "meanings", "typings",
        "annotation_values", "property_kinds", "columns",
    )

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.has_etag = False
        drop: list[str] = []
        annotated: list[tuple[str, str]] = []
        for key in keys:
            if "." not in key:  # odata.* and Name@odata.type hold a dot; property names cannot
                continue
            if key == "odata.etag":
                self.has_etag = True
            elif key.endswith(_ANNOTATION):
                annotated.append((key[:-_ANNOTATION_LEN], key))
            else:
                drop.append(key)
        self.drop = tuple(drop)
        self.annotated = tuple(annotated)
        self.annotation_keys = tuple(key for _, key in annotated)
        # Properties left once control information is removed (those without a dot).
        self.properties = tuple(key for key in keys if "." not in key)
        self.present = frozenset(self.properties)
        self.meanings: dict[tuple[Any, ...], _Annotations] = {}
        self.typings: dict[tuple[tuple[type, ...], tuple[Any, ...]], _Typing] = {}
        # For pages read column by column: the annotation values of an entity object and the
        # kinds of its properties (from the kinds of all its values), each as one tuple.
        self.annotation_values = _tuple_getter(self.annotation_keys)
        self.property_kinds = _tuple_getter(tuple(i for i, key in enumerate(keys) if "." not in key))
        self.columns: dict[tuple[tuple[type, ...], tuple[Any, ...]], _Columns | None] = {}

    def column_work(self, kinds: tuple[type, ...], type_names: tuple[Any, ...]) -> _Columns | None:
        """What reading a page of entities of this shape, kinds and annotations column by column
        takes (:data:`_Columns`), remembered; None when the general path must read them."""
        key = (kinds, type_names)
        try:
            if key in self.columns:
                return self.columns[key]
        except TypeError:  # an unhashable annotation value
            return None
        work = self._column_work(kinds, type_names)
        if len(self.columns) < _MAX_PLANS:
            self.columns[key] = work
        return work

    def _column_work(self, kinds: tuple[type, ...], type_names: tuple[Any, ...]) -> _Columns | None:
        typing = self.typing(kinds, type_names)
        if typing is None:
            return None
        base, integers, converts = typing
        kind_of = dict(zip(self.properties, kinds))
        conversions: list[tuple[str, str, Callable[[list[Any]], list[Any] | None], Callable[[Any], Any]]] = []
        for name, type_name, convert in converts:
            kind = kind_of[name]
            if kind is _NONE_TYPE or (type_name == "Edm.Double" and kind is float):
                continue  # nothing to convert (_double gives a float back as it is)
            conversions.append((name, type_name, _COLUMN_READERS[type_name], convert))
        types = dict(base)
        if "Timestamp" in kind_of and types.get("Timestamp") is not _DATETIME and kind_of["Timestamp"] is str:
            conversions.append(("Timestamp", _DATETIME.value, *_TIMESTAMP_READERS))
            types["Timestamp"] = _DATETIME  # the same place in the dict: Timestamp was typed by its kind
        return types, tuple((name, annotated) for name, annotated in integers), tuple(conversions)

    def typing(self, kinds: tuple[type, ...], type_names: tuple[Any, ...]) -> _Typing | None:
        """The typing of entities of this shape whose values have these Python types (in
        order) and whose annotations these values, remembered; None for anything the
        general path must report (a value no JSON number/string/bool/null, an unknown type)."""
        try:
            known = self.typings.get((kinds, type_names))
        except TypeError:  # an unhashable annotation value
            return None
        if known is not None:
            return known
        meaning = self.meaning(type_names) if type_names else _NO_ANNOTATIONS
        if meaning is None:
            return None
        annotated_types, converts = meaning
        base: dict[str, EdmType] = {}
        integers: list[tuple[str, bool]] = []
        for name, kind in zip(self.properties, kinds):
            if kind is _NONE_TYPE:
                continue
            if kind is int:  # Int32 or Int64 by its range: checked for each entity
                base[name] = _INT32
                integers.append((name, name in annotated_types))
            elif kind in _PLAIN_TYPES:
                base[name] = _PLAIN_TYPES[kind]
            else:
                return None
        base.update(annotated_types)
        typing = (base, tuple(integers), converts)
        if len(self.typings) < _MAX_PLANS:
            self.typings[(kinds, type_names)] = typing
        return typing

    def meaning(self, type_names: tuple[Any, ...]) -> _Annotations | None:
        """What these annotation values do, remembered; None when one of them is not a
        known type name (the general loop then reports it, in order)."""
        try:
            known = self.meanings.get(type_names)
        except TypeError:  # an unhashable annotation value: not a type name
            return None
        if known is not None:
            return known
        types: dict[str, EdmType] = {}
        converts: list[tuple[str, str, Callable[[Any], Any]]] = []
        for (name, _), type_name in zip(self.annotated, type_names):
            if name not in self.present:
                continue  # an annotation without its property carries nothing
            if type(type_name) is not str or type_name not in _BY_NAME:
                return None
            edm_type, convert = _BY_NAME[type_name]
            types[name] = edm_type
            if convert is not None:
                converts.append((name, type_name, convert))
        meaning = (types, tuple(converts))
        if len(self.meanings) < _MAX_PLANS:
            self.meanings[type_names] = meaning
        return meaning


#: Shapes (and annotation tuples per shape) remembered per codec.
_MAX_PLANS = 256


def _tuple_getter(keys: tuple[Any, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """``lambda obj: tuple(obj[k] for k in keys)`` in one C call where possible."""
    if len(keys) > 1:
        return itemgetter(*keys)
    if len(keys) == 1:
        one = itemgetter(keys[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


#: A column reader: the Python values of a column of JSON values (none of them null) of one
#: type, or None when one of them is not in the form the service writes (each value is then
#: read by the per-value converter, which reports it as the per-entity path does).
_ColumnReader = ColumnReader
#: How a page of one shape, kinds and annotations is read column by column: its types (shared
#: by its entities), the integers to range-check (and whether annotated), and the conversions:
#: (property, type name, column reader, per-value converter).
_Columns = tuple[
    dict[str, EdmType], tuple[tuple[str, bool], ...], tuple[tuple[str, str, _ColumnReader, Callable[[Any], Any]], ...]
]
#: The column reader of each annotation's type, by wire type name.
_COLUMN_READERS: dict[str, _ColumnReader] = {t.value: spec.json_column_reader for t, spec in EDM_SPECS.items()}
_TIMESTAMP_READERS = (EDM_SPECS[_DATETIME].json_column_reader, EDM_SPECS[_DATETIME].json_reader)


def _convert(values: dict[str, Any], converts: tuple[tuple[str, str, Callable[[Any], Any]], ...]) -> None:
    for name, type_name, convert in converts:
        value = values[name]
        if value is not None:
            try:
                values[name] = convert(value)
            except (ValueError, TypeError) as exc:
                raise ValueError(f"property {name!r}: not a valid {type_name} value: {value!r}") from exc


def _annotate(
    values: dict[str, Any], types: dict[str, EdmType], annotated: tuple[tuple[str, str], ...],
    type_names: tuple[Any, ...],
) -> None:
    """Apply annotations one by one: the general path (:meth:`_Plan.meaning` is its
    remembered form), taken when an annotation value is not a known type name."""
    for (name, _), type_name in zip(annotated, type_names):
        if name not in values:
            continue  # an annotation without its property carries nothing
        try:
            edm_type, convert = _BY_NAME[type_name]
        except (KeyError, TypeError):
            raise ValueError(f"property {name!r}: unknown EDM type {type_name!r}") from None
        types[name] = edm_type
        value = values[name]
        if value is not None and convert is not None:
            try:
                values[name] = convert(value)
            except (ValueError, TypeError) as exc:
                raise ValueError(f"property {name!r}: not a valid {type_name} value: {value!r}") from exc


# ---------------------------------------------------------------- pages read column by column


def _kinds_of(items: list[dict[str, Any]]) -> list[tuple[type, ...]]:
    """The Python types of each entity object's values, in order (C calls only)."""
    return list(map(tuple, map(map, repeat(type), map(dict.values, items))))


def _all_alike(items: Any, first: tuple[Any, ...], count: int) -> bool:
    """Whether the ``count`` runs of ``items`` (an iterable of runs) are each ``first``: one flat
    C comparison, no object per run (runs of distinct keys cannot shift and still match)."""
    return list(items) == list(first) * count


def _grouped(
    items: list[dict[str, Any]],
) -> list[tuple[tuple[str, ...], tuple[type, ...], list[dict[str, Any]]]]:
    """``items`` grouped by their keys and the kinds of their values, in order of first appearance."""
    count = len(items)
    shape, kind = tuple(items[0]), tuple(map(type, items[0].values()))
    if _all_alike(chain.from_iterable(items), shape, count) and _all_alike(
        map(type, chain.from_iterable(map(dict.values, items))), kind, count
    ):
        return [(shape, kind, items)]
    shapes, kinds = list(map(tuple, items)), _kinds_of(items)
    groups: dict[tuple[tuple[str, ...], tuple[type, ...]], list[dict[str, Any]]] = {}
    for item, key in zip(items, zip(shapes, kinds)):
        members = groups.get(key)
        if members is None:
            groups[key] = [item]
        else:
            members.append(item)
    return [(shape, kind, members) for (shape, kind), members in groups.items()]


def _grouped_by(
    items: list[dict[str, Any]], key_of: Callable[[dict[str, Any]], tuple[Any, ...]]
) -> list[tuple[tuple[Any, ...], list[dict[str, Any]]]]:
    """``items`` grouped by ``key_of`` each (annotation values), in order of first appearance."""
    first = key_of(items[0])
    if _all_alike(chain.from_iterable(map(key_of, items)), first, len(items)):
        return [(first, items)]
    keys = list(map(key_of, items))
    groups: dict[Any, list[dict[str, Any]]] = {}
    for item, key in zip(items, keys):
        try:
            groups.setdefault(key, []).append(item)
        except TypeError:  # an unhashable annotation value: typed on its own (and refused)
            return [(key, [item]) for item, key in zip(items, keys)]
    return list(groups.items())


#: A group's converted columns and, per un-annotated integer beyond Int32 somewhere, the
#: entity objects whose value of it is an Int64.
_Converted = tuple[list[tuple[str, list[Any]]], list[tuple[str, list[bool]]]]


def _read_group(group: list[dict[str, Any]], work: _Columns) -> _Converted | None:
    """The conversions of a group of one shape, kinds and annotations, without changing its
    objects; None when one value is not read as the service writes it (the general path then
    reports it, in the order of the entities)."""
    _, integers, conversions = work
    wider: list[tuple[str, list[bool]]] = []
    for name, annotated in integers:
        column = list(map(itemgetter(name), group))
        low, high = min(column), max(column)
        if low < INT32_MIN or high > INT32_MAX:
            if low < INT64_MIN or high > INT64_MAX:
                return None
            if not annotated:  # an annotation's type wins over the number's
                wider.append((name, [not INT32_MIN <= value <= INT32_MAX for value in column]))
    converted: list[tuple[str, list[Any]]] = []
    for name, _, read, convert in conversions:
        column = list(map(itemgetter(name), group))
        try:
            values = read(column)
            if values is None:
                values = list(map(convert, column))
        except Exception:  # noqa: BLE001 - the general path raises what it raises, in order
            return None
        converted.append((name, values))
    return converted, wider


def _commit(
    plan: _Plan, group: list[dict[str, Any]], types: dict[str, EdmType], converted: list[tuple[str, list[Any]]],
    wider: list[tuple[str, list[bool]]], group_types: list[dict[str, EdmType]],
) -> list[dict[str, EdmType]]:
    """Make the entity objects of ``group`` the values of their payloads; their types."""
    for key in plan.drop + plan.annotation_keys:
        deque(map(dict.pop, group, repeat(key)), 0)
    for name, column in converted:
        deque(map(setitem, group, repeat(name), column), 0)
    for name, flags in wider:
        for index in compress(range(len(group)), flags):
            if group_types[index] is types:
                group_types[index] = dict(types)
            group_types[index][name] = _INT64
    return group_types


def _etags(plan: _Plan, group: list[dict[str, Any]]) -> list[str | None]:
    if plan.has_etag:
        return list(map(dict.pop, group, repeat("odata.etag")))
    return [None] * len(group)




def _load(body: bytes | str) -> Any:
    if not body:
        raise ValueError("empty JSON body")
    try:
        data = json.loads(body)
    except UnicodeDecodeError as exc:
        raise ValueError(f"JSON body is not valid Unicode: {exc}") from None
    _refuse_repeated_members(body, data)
    return data


#: The bytes JSON allows between tokens.
_JSON_WHITESPACE = b" \t\r\n"


def _refuse_repeated_members(body: bytes | str, data: Any) -> None:
    """Raise ValueError if an object of ``body`` names a member twice.

    ``json.loads`` keeps the last of repeated members, and another reader may keep the
    first: such an answer (``{"PartitionKey": "a", "PartitionKey": "b"}``) does not say
    which entity it is. The service never writes one. Checked without a hook on every
    object (which would slow every page by half): each member's name ends with a quote
    and, after any whitespace, a colon, so the body without whitespace holds at least one
    ``":`` per member written (more only when a string holds an escaped quote then a
    colon). When that count equals the members of the entity objects and the top level,
    no name was repeated; otherwise the body is read again, checking each object.
    """
    if type(data) is not dict:
        return  # not an entity or a feed: refused by the caller
    members = len(data)
    items = data.get("value")
    if type(items) is list and set(map(type, items)) == {dict}:
        members += sum(map(len, items))
    raw = body.encode("utf-8") if isinstance(body, str) else body
    # Whitespace changes the count only where it stands right before a colon: without any
    # there, the body's own ``":`` are those of the body without whitespace, counted without
    # making that copy (a byte-by-byte translate costs a sixth of the page's json.loads).
    if b" :" in raw or b"\t" in raw or b"\n" in raw or b"\r" in raw:
        written = raw.translate(None, _JSON_WHITESPACE).count(b'":')
    else:
        written = raw.count(b'":')
    if written == members:
        return
    json.loads(body, object_pairs_hook=_distinct_members)


def _distinct_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise ValueError(f"a JSON object names the member {name!r} twice")
            seen.add(name)
    return obj


class JsonFormat(PayloadFormat):
    """JSON bodies (``application/json``), at one OData metadata level.

    ``metadata`` is ``"minimalmetadata"`` (default), ``"nometadata"`` or
    ``"fullmetadata"``; it sets the Accept header and how un-annotated values
    are typed when read.
    """

    name = "json"
    default_api_version = "2019-02-02"
    content_type = "application/json"

    def __init__(self, metadata: str = "minimalmetadata") -> None:
        if metadata not in METADATA_LEVELS:
            raise ValueError(f"metadata must be one of {METADATA_LEVELS}, not {metadata!r}")
        self.metadata = metadata
        self._typed = metadata != "nometadata"
        self._plans: dict[tuple[str, ...], _Plan] = {}

    def __repr__(self) -> str:
        return f"JsonFormat(metadata={self.metadata!r})"

    def request_headers(self) -> dict[str, str]:
        """Accept JSON at this metadata level; OData 3.0."""
        return {
            "Accept": f"application/json;odata={self.metadata}",
            "DataServiceVersion": "3.0;NetFx",
            "MaxDataServiceVersion": "3.0;NetFx",
        }

    # ------------------------------------------------------------ writing

    def serialize_entity(self, payload: EntityPayload) -> bytes:
        """A flat JSON object of every property except Timestamp, annotated where needed.

        Nulls are JSON ``null`` without an annotation (the service drops them).
        """
        text = _template_text(payload)
        if text is not None and text.isascii():
            return text.encode("ascii")
        return _encode(_body(payload))

    def serialize_entity_lines(self, payloads: Sequence[EntityPayload]) -> bytes:
        """Entities as JSON lines: each as :meth:`serialize_entity` writes it, then a newline.

        The same bytes as calling :meth:`serialize_entity` once per entity, for
        less: every body is written to one text, checked for non-ASCII characters
        once and encoded once (a page that has any goes entity by entity, so the
        escapes and the size rule of a single body apply unchanged). A page of one
        shape (the usual query page) is written column by column (``_page_text``).
        """
        if not payloads:
            return b""
        text = _page_text(payloads) if isinstance(payloads, list) else None
        if text is None:
            text = "\n".join([_template_text(payload) or _encode_text(_body(payload)) for payload in payloads])
        if text.isascii():
            return text.encode("ascii") + b"\n"
        return b"".join([_encode(_body(payload)) + b"\n" for payload in payloads])

    def serialize_table(self, table_name: str) -> bytes:
        """The Create Table body: ``{"TableName": "..."}``."""
        return _encode({"TableName": table_name})

    # ------------------------------------------------------------ reading

    def _payload(self, obj: Any, etag: str | None) -> EntityPayload:
        # The hot path of every query: the shape's plan splits control information
        # from properties; the kinds of the values (one C pass) and the annotation
        # tuple then name a remembered typing, so that only integers (whose type
        # depends on their range) and annotated values are looked at one by one.
        if type(obj) is not dict:
            raise ValueError(f"expected a JSON object for an entity, got {type(obj).__name__}")
        values: dict[str, Any] = obj  # json.loads made it; we own it
        plan = self._plan(tuple(values))
        if plan.has_etag:
            etag = values.pop("odata.etag")
        for key in plan.drop:
            del values[key]
        type_names = tuple(map(values.pop, plan.annotation_keys))  # C calls only
        typing = plan.typing(tuple(map(type, values.values())), type_names) if self._typed else None
        if typing is None:
            types = self._types(values, plan, type_names)
        else:
            base, integers, converts = typing
            types = base.copy()
            for name, annotated in integers:
                value = values[name]
                if not INT32_MIN <= value <= INT32_MAX:
                    if not INT64_MIN <= value <= INT64_MAX:
                        raise _unsupported(values)
                    if not annotated:  # an annotation's type wins over the number's
                        types[name] = _INT64
            for name, type_name, convert in converts:
                value = values[name]
                if value is not None:
                    try:
                        values[name] = convert(value)
                    except (ValueError, TypeError) as exc:
                        raise ValueError(f"property {name!r}: not a valid {type_name} value: {value!r}") from exc
        if "Timestamp" in values and types.get("Timestamp") is not _DATETIME:
            timestamp = values["Timestamp"]
            if type(timestamp) is str:
                try:
                    values["Timestamp"] = parse_datetime(timestamp)
                except ValueError as exc:
                    raise ValueError(f"property 'Timestamp': not a valid Edm.DateTime value: {timestamp!r}") from exc
                types["Timestamp"] = _DATETIME
        return EntityPayload(values, types, etag)

    def _types(self, values: dict[str, Any], plan: _Plan, type_names: tuple[Any, ...]) -> dict[str, EdmType]:
        """The general typing of an entity's values (every level of metadata, any values):
        what :meth:`_Plan.typing` remembers for the common case."""
        if self._typed:
            try:
                # An int beyond Int64 looks up _PLAIN_TYPES[None]: the KeyError path reports it.
                types = {
                    key: (_PLAIN_TYPES[type(value)] if type(value) is not int
                          else _INT32 if INT32_MIN <= value <= INT32_MAX
                          else _INT64 if INT64_MIN <= value <= INT64_MAX else _PLAIN_TYPES[None])  # type: ignore[index]
                    for key, value in values.items()
                    if value is not None
                }
            except KeyError:
                raise _unsupported(values) from None
        else:
            for key, value in values.items():
                if value is not None and (
                    type(value) not in _PLAIN_TYPES
                    or (type(value) is int and not INT64_MIN <= value <= INT64_MAX)
                ):
                    raise _unsupported(values)
            types = {key: _STRING for key in ("PartitionKey", "RowKey") if key in values}
        if type_names:
            meaning = plan.meaning(type_names)
            if meaning is None:
                _annotate(values, types, plan.annotated, type_names)  # raises, in order
            else:
                types.update(meaning[0])
                _convert(values, meaning[1])
        return types

    @decodes
    def parse_entity(self, body: bytes, etag: str | None = None) -> EntityPayload:
        """The entity of a single-entity body (or of a ``value`` array of exactly one).

        ``odata.etag`` in the body wins over the ``etag`` header value passed in.
        """
        data = _load(body)
        if type(data) is dict and "value" in data and type(data["value"]) is list:
            items = data["value"]
            if len(items) != 1:
                raise ValueError(f"expected one entity in the response, found {len(items)}")
            data = items[0]
        return self._payload(data, etag)

    @decodes
    def parse_entities(self, body: bytes) -> list[EntityPayload]:
        """Every entity of a query response (``value`` array), or the one entity of a single object."""
        return self.parse_entity_page(body).payloads()

    @decodes
    def parse_entity_page(self, body: bytes) -> EntityPage:
        """:meth:`parse_entities` as one :class:`~tablesdk._entities._edm.EntityPage`.

        With metadata, a page is read column by column: entities are grouped by
        their keys, the kinds of their values and their annotations (a feed's
        entities usually share all three), and each property of a group is
        checked and converted for the whole group in C calls where the service's
        forms allow, its entities sharing one ``types`` dict. Anything the
        column readers do not take (an unknown type, a malformed value, an int
        beyond Int64, nometadata) reads the page entity by entity, as
        :meth:`parse_entities` always did, with the same values and errors.
        """
        data = _load(body)
        if type(data) is not dict:
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        items = data.get("value")
        if type(items) is not list:  # a single entity (which may have a property named "value")
            return EntityPage.of([self._payload(data, None)])
        if items and self._typed:
            page = self._read_columns(items)
            if page is not None:
                return page
        payload = self._payload
        return EntityPage.of([payload(item, None) for item in items])

    def _plan(self, keys: tuple[str, ...]) -> _Plan:
        plan = self._plans.get(keys)
        if plan is None:
            plan = _Plan(keys)
            if len(self._plans) < _MAX_PLANS:
                self._plans[keys] = plan
        return plan

    def _read_columns(self, items: list[Any]) -> EntityPage | None:
        """The page of ``items`` (entity objects) read column by column; None, with ``items``
        untouched, when a group needs the entity-by-entity path."""
        if set(map(type, items)) != {dict}:
            return None
        groups = []
        for shape, kinds, members in _grouped(items):
            plan = self._plan(shape)
            property_kinds = plan.property_kinds(kinds)
            for type_names, group in _grouped_by(members, plan.annotation_values):
                work = plan.column_work(property_kinds, type_names)
                if work is None:
                    return None
                columns = _read_group(group, work)
                if columns is None:
                    return None
                groups.append((plan, group, work[0], columns))
        # Everything is read: now change the entity objects (nothing is changed before).
        values: list[dict[str, Any]] = items
        if len(groups) == 1:
            plan, group, types, (converted, wider) = groups[0]
            return EntityPage(values, _commit(plan, group, types, converted, wider, [types] * len(items)), _etags(plan, group))
        where = {id(item): index for index, item in enumerate(items)}
        all_types: list[dict[str, EdmType]] = [{}] * len(items)
        etags: list[str | None] = [None] * len(items)
        for plan, group, types, (converted, wider) in groups:
            group_types = _commit(plan, group, types, converted, wider, [types] * len(group))
            for item, item_types, etag in zip(group, group_types, _etags(plan, group)):
                index = where[id(item)]
                all_types[index] = item_types
                etags[index] = etag
        return EntityPage(values, all_types, etags)

    @decodes
    def parse_tables(self, body: bytes) -> list[str]:
        """Table names from a Query Tables ``value`` array or a Create Table object."""
        data = _load(body)
        if type(data) is not dict:
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        items = data["value"] if "value" in data else [data]
        if type(items) is not list:
            raise ValueError("the 'value' member of a Query Tables response must be an array")
        names: list[str] = []
        for item in items:
            name = item.get("TableName") if type(item) is dict else None
            if type(name) is not str:
                raise ValueError("table object without a string TableName")
            names.append(name)
        return names


