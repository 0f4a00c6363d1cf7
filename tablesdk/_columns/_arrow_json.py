"""JSON query pages read straight into Arrow columns, without ``json.loads`` or the codec's Python values.

The JSON codec turns every value into its Python object (an ``EdmDateTime`` from the
DateTime text, a ``uuid.UUID``, an ``int`` from the Int64 text), and even ``json.loads``
alone makes a Python object of every value: most of the client's time on a page. For
columns neither is needed. Arrow's JSON reader (C++) parses the body into one typed array
per property (``value`` is a list of structs), and the wire texts are converted a whole
column at a time in C (DateTime text to ``timestamp[ns]`` with all seven digits, Int64 text
to ``int64``, Guid text checked and lower-cased). :class:`JsonColumnsReader` does that for
a page whose every column is unambiguous: one EDM type (the ``@odata.type`` annotation, or
else the JSON kind: string, boolean, integer for Int32, number with a fraction or exponent
for Double) on every entity that has it, and wire forms the service writes. Anything else
(a property with two types, an out-of-range DateTime, NaN written as text, a Guid in
another form, a malformed body, ``nometadata``) gives None, and the page is decoded by
the codec as usual, which gives the same values or raises its own error: this path only
ever takes pages both would read alike.

Arrow's reader infers ``timestamp[s]`` for strings that look like dates ("2024-01-01",
"2024-01-01T00:00:00Z"), which would lose the text a String property holds and the form
a DateTime was written in: such fields are read again as strings, and the reader remembers
the scan's string fields so that later pages are read as strings at once.
"""

from __future__ import annotations

import io
import re
from typing import Any

from .._entities._edm import EdmType, b64decode_strict
from .._pipeline._http import HttpResponse

__all__ = ["JsonColumnsReader", "PageColumns"]

#: (each property's EDM type and Arrow array, by name in order of first appearance; the ETags as an
#: Arrow string array; the row count).
PageColumns = tuple[dict[str, tuple[EdmType, Any]], Any, int]

#: The Guid form the service writes (after lower-casing, as ``str(uuid.UUID(...))`` gives).
_SERVICE_GUID = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
#: The service's DateTime forms only: whole seconds or 1 to 7 fraction digits, and Z.
_SERVICE_DATETIME = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,7})?Z$"
_ANNOTATION = "@odata.type"


class _NotHere(Exception):
    """This page is for the codec."""


class JsonColumnsReader:
    """Reads the JSON pages of one scan as columns; remembers which fields were strings for the next page."""

    def __init__(self) -> None:
        #: The fields read as strings so far (Arrow must not guess them as timestamps on a later page).
        self.string_fields: dict[str, None] = {}

    def read(self, response: HttpResponse) -> PageColumns | None:
        """The columns of a JSON (minimal or full metadata) query page, or None when the codec must read it."""
        content_type = response.headers.get("content-type", "")
        if "application/json" not in content_type or "nometadata" in content_type:
            return None
        try:
            entities = self._entities(response.body)
            if entities is None:
                return None
            return _columns(entities, response.body)
        except (_NotHere, ValueError, TypeError, OverflowError, RecursionError, ArithmeticError):
            return None
        except Exception as exc:  # pyarrow's own errors (ArrowInvalid is a ValueError; others are not)
            if type(exc).__module__.startswith("pyarrow"):
                return None
            raise

    def _entities(self, body: bytes) -> Any:
        """The page's entities as one StructArray (a field per key), or None."""
        import pyarrow as pa

        try:
            entities = _parse(body, self.string_fields)
        except pa.ArrowInvalid:
            if not self.string_fields:
                raise
            entities = _parse(body, {})  # a field that was a string is something else now: infer afresh
        if entities is None:
            return None
        guessed = [field.name for field in entities.type if pa.types.is_timestamp(field.type)]
        if guessed:
            entities = _parse(body, {**self.string_fields, **dict.fromkeys(guessed)})
            if entities is None:
                return None
        self.string_fields = {field.name: None for field in entities.type if pa.types.is_string(field.type)}
        return entities


def _parse(body: bytes, strings: dict[str, None]) -> Any:
    """``body``'s ``value`` list as a StructArray, the ``strings`` fields read as strings; None if not a list of objects."""
    import pyarrow as pa
    import pyarrow.json as pj

    schema = None
    if strings:
        schema = pa.schema([("value", pa.list_(pa.struct([(name, pa.string()) for name in strings])))])
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer",
                              newlines_in_values=b"\n" in body)
    table = pj.read_json(io.BytesIO(body), read_options=pj.ReadOptions(use_threads=False, block_size=len(body) + 1),
                         parse_options=options)
    if table.num_rows != 1 or "value" not in table.column_names:
        return None  # json.loads reads exactly one document
    lists = table.column("value")
    if lists.null_count or not pa.types.is_list(lists.type) or not pa.types.is_struct(lists.type.value_type):
        return None
    entities = lists.chunk(0).flatten() if lists.num_chunks == 1 else lists.combine_chunks().flatten()
    if not len(entities) or entities.null_count:
        return None  # an empty page, or a null among the entities: the codec decides
    return entities


def _columns(entities: Any, body: bytes) -> PageColumns:
    import pyarrow as pa

    fields = {field.name: index for index, field in enumerate(entities.type)}
    arrays = entities.flatten()
    columns: dict[str, tuple[EdmType, Any]] = {}
    for name, index in fields.items():
        if "@" in name or name.startswith("odata."):
            continue
        annotation = fields.get(name + _ANNOTATION)
        column = _column(name, arrays[index], None if annotation is None else arrays[annotation], body)
        if column is not None:
            columns[name] = column
    for key in ("PartitionKey", "RowKey"):  # every entity has its keys, as strings
        found = columns.get(key)
        if found is None or found[0] is not EdmType.STRING or found[1].null_count:
            raise _NotHere
    etag = fields.get("odata.etag")
    if etag is None:
        etags = pa.nulls(len(entities), type=pa.string())
    elif pa.types.is_string(arrays[etag].type):
        etags = arrays[etag]
    else:
        raise _NotHere
    return columns, etags, len(entities)


def _column(name: str, values: Any, notes: Any, body: bytes) -> tuple[EdmType, Any] | None:
    """One property's EDM type and array (None: no entity has a value); raises _NotHere when ambiguous."""
    import pyarrow as pa
    import pyarrow.compute as pc

    present = len(values) - values.null_count
    if not present:
        return None
    annotated: list[str] = []
    if notes is not None and notes.null_count < len(notes):
        if not pa.types.is_string(notes.type):
            raise _NotHere
        annotated = pc.unique(notes.drop_null()).to_pylist()
    kind = values.type
    if name == "Timestamp":
        if set(annotated) - {"Edm.DateTime"}:
            raise _NotHere
        edm = EdmType.DATETIME
    elif not annotated:
        if pa.types.is_string(kind):
            edm = EdmType.STRING
        elif pa.types.is_boolean(kind):
            edm = EdmType.BOOLEAN
        elif pa.types.is_int64(kind):
            edm = EdmType.INT32
        elif pa.types.is_float64(kind) and _written_as_fractions(name, values, present, body):
            edm = EdmType.DOUBLE
        else:
            raise _NotHere  # e.g. Int32 and Double, or an integer beyond int64: the codec decides
    else:
        if len(annotated) != 1 or len(notes) - notes.null_count != present:
            raise _NotHere  # two types, or some values annotated and others not
        edm = EdmType(annotated[0])
        if notes.null_count and not pc.all(pc.equal(pc.is_valid(notes), pc.is_valid(values))).as_py():
            raise _NotHere  # an annotation on one entity, the value on another
    return edm, _array(values, edm)


def _written_as_fractions(name: str, values: Any, present: int, body: bytes) -> bool:
    """Whether every value of an un-annotated number column was written with a fraction or exponent (Double
    to the codec); Arrow reads ``1`` and ``1.0`` alike, so a whole value is looked up in the body's text."""
    import pyarrow.compute as pc

    if not pc.any(pc.equal(values, pc.floor(values))).as_py():
        return True  # no whole value: every one had a fraction
    key = re.escape(b'"' + name.encode("utf-8") + b'"') + rb"\s*:\s*"
    # A '"' inside a JSON string is escaped, so '"Name":' is a key wherever it occurs; every key must be found
    # (an escaped name, e.g. non-ASCII written as \u00e9, is not: then the codec decides).
    if len(re.findall(key, body)) != present:
        return False
    return re.search(key + rb"-?[0-9]+\s*[,}]", body) is None


def _array(values: Any, edm: EdmType) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = values.type
    if edm is EdmType.STRING or edm is EdmType.BOOLEAN:
        if not (pa.types.is_string(kind) if edm is EdmType.STRING else pa.types.is_boolean(kind)):
            raise _NotHere
        return values
    if edm is EdmType.INT32:
        if not pa.types.is_int64(kind):
            raise _NotHere
        return values.cast(pa.int32())  # checked: a value beyond Int32 goes to the codec
    if edm is EdmType.DOUBLE:
        if not (pa.types.is_float64(kind) or pa.types.is_int64(kind)):
            raise _NotHere  # "NaN", "Infinity": the codec reads those
        return values.cast(pa.float64())  # checked: an integer no double holds exactly goes to the codec
    if edm is EdmType.INT64:
        if pa.types.is_int64(kind):
            return values
        if not pa.types.is_string(kind):
            raise _NotHere
        if pc.max(pc.utf8_length(values)).as_py() > 20 or not pc.all(pc.match_substring_regex(values, r"^-?[0-9]+$")).as_py():
            raise _NotHere  # only the service's form; int() reads more (spaces, '+', '_'), the codec decides
        return values.cast(pa.int64())
    if not pa.types.is_string(kind):
        raise _NotHere
    if edm is EdmType.DATETIME:
        # Beyond 2262 or before 1677 the cast fails and the codec (and the column's rules) take the page.
        if not pc.all(pc.match_substring_regex(values, _SERVICE_DATETIME)).as_py():
            raise _NotHere
        return values.cast(pa.timestamp("ns", tz="UTC"))
    if edm is EdmType.GUID:
        lowered = pc.utf8_lower(values)
        if not pc.all(pc.match_substring_regex(lowered, _SERVICE_GUID)).as_py():
            raise _NotHere
        return lowered
    if edm is EdmType.BINARY:
        return pa.array([None if value is None else b64decode_strict(value) for value in values.to_pylist()],
                        type=pa.binary())
    raise _NotHere
