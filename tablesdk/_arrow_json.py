"""JSON query pages read straight into Arrow columns, without the codec's Python values.

The JSON codec turns every value into its Python object (an ``EdmDateTime`` from the
DateTime text, a ``uuid.UUID``, an ``int`` from the Int64 text): most of the client's
time on a page. For columns that work is not needed: Arrow converts the wire texts in C
(DateTime text to ``timestamp[ns]`` with all seven digits, Int64 text to ``int64``, Guid
text checked and kept). :func:`json_page_columns` does that for a page whose every column
is unambiguous: one EDM type (the ``@odata.type`` annotation, or else the JSON kind: string,
boolean, integer for Int32, number for Double) on every entity that has it, and wire forms
the service writes. Anything else (a property with two types, an out-of-range DateTime,
NaN written as text, a Guid in another form, a malformed body, ``nometadata``) gives None,
and the page is decoded by the codec as usual, which gives the same values or raises its
own error: this path only ever takes pages both would read alike.
"""

from __future__ import annotations

import json
from itertools import chain, repeat
from typing import Any

from ._edm import EdmType, b64decode_strict
from ._http import HttpResponse

__all__ = ["PageColumns", "json_page_columns"]

#: (each property's EDM type and Arrow array, by name in order of first appearance; the ETags; the row count).
PageColumns = tuple[dict[str, tuple[EdmType, Any]], list[Any], int]

#: The Guid form the service writes (after lower-casing, as ``str(uuid.UUID(...))`` gives).
_SERVICE_GUID = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
#: An un-annotated value's EDM type, by its JSON kind.
_IMPLIED = {str: EdmType.STRING, bool: EdmType.BOOLEAN, int: EdmType.INT32, float: EdmType.DOUBLE}
_NONE = type(None)


class _NotHere(Exception):
    """This page is for the codec."""


def json_page_columns(response: HttpResponse) -> PageColumns | None:
    """The columns of a JSON (minimal or full metadata) query page, or None when the codec must read it."""
    content_type = response.headers.get("content-type", "")
    if "application/json" not in content_type or "nometadata" in content_type:
        return None
    try:
        data = json.loads(response.body)
        if type(data) is not dict:
            return None
        items = data.get("value")
        if type(items) is not list or not items or set(map(type, items)) != {dict}:
            return None
        columns: dict[str, tuple[EdmType, Any]] = {}
        names = dict.fromkeys(chain.from_iterable(items))
        for name in names:
            if "@" in name or name.startswith("odata."):
                continue
            column = _column(items, name, name + "@odata.type" in names)
            if column is not None:
                columns[name] = column
        for key in ("PartitionKey", "RowKey"):  # every entity has its keys, as strings
            found = columns.get(key)
            if found is None or found[0] is not EdmType.STRING or found[1].null_count:
                return None
        return columns, list(map(dict.get, items, repeat("odata.etag"))), len(items)
    except (_NotHere, ValueError, TypeError, OverflowError, RecursionError, ArithmeticError):
        return None
    except Exception as exc:  # pyarrow's own errors (ArrowInvalid is a ValueError; others are not)
        if type(exc).__module__.startswith("pyarrow"):
            return None
        raise


def _column(items: list[dict[str, Any]], name: str, annotated_somewhere: bool) -> tuple[EdmType, Any] | None:
    """One property's EDM type and array (None: no entity has a value); raises _NotHere when ambiguous."""
    import pyarrow as pa

    values = list(map(dict.get, items, repeat(name)))
    present = len(values) - values.count(None)
    if not present:
        return None
    kinds = set(map(type, values))
    kinds.discard(_NONE)
    notes: list[Any] = list(map(dict.get, items, repeat(name + "@odata.type"))) if annotated_somewhere else []
    annotated = set(notes)
    annotated.discard(None)
    if name == "Timestamp":
        if annotated - {"Edm.DateTime"}:
            raise _NotHere
        edm = EdmType.DATETIME
    elif not annotated:
        kind = next(iter(kinds)) if len(kinds) == 1 else None
        if kind not in _IMPLIED:
            raise _NotHere  # e.g. Int32 and Double, or a string and a number: the codec decides
        edm = _IMPLIED[kind]
    else:
        if len(annotated) != 1 or len(notes) - notes.count(None) != present:
            raise _NotHere  # two types, or some values annotated and others not
        edm = EdmType(annotated.pop())
    return edm, _array(values, kinds, edm, pa)


def _array(values: list[Any], kinds: set[type], edm: EdmType, pa: Any) -> Any:
    import pyarrow.compute as pc

    if edm is EdmType.STRING or edm is EdmType.BOOLEAN or edm is EdmType.INT32:
        if kinds != {str if edm is EdmType.STRING else bool if edm is EdmType.BOOLEAN else int}:
            raise _NotHere
        return pa.array(values, type={EdmType.STRING: pa.string(), EdmType.BOOLEAN: pa.bool_(),
                                      EdmType.INT32: pa.int32()}[edm])
    if edm is EdmType.DOUBLE:
        if not kinds <= {float, int}:
            raise _NotHere  # "NaN", "Infinity": the codec reads those
        return pa.array(values, type=pa.float64())
    if edm is EdmType.INT64:
        if kinds == {int}:
            return pa.array(values, type=pa.int64())
        if kinds != {str}:
            raise _NotHere
        texts = pa.array(values, type=pa.string())
        if pc.max(pc.utf8_length(texts)).as_py() > 20 or not pc.all(pc.match_substring_regex(texts, r"^-?[0-9]+$")).as_py():
            raise _NotHere  # only the service's form; int() reads more (spaces, '+', '_'), the codec decides
        return texts.cast(pa.int64())
    if kinds != {str}:
        raise _NotHere
    texts = pa.array(values, type=pa.string())
    if edm is EdmType.DATETIME:
        # The service's forms only: whole seconds or 1 to 7 fraction digits, and Z. Beyond 2262 or
        # before 1677 the cast fails and the codec (and the column's rules) take the page.
        pattern = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,7})?Z$"
        if not pc.all(pc.match_substring_regex(texts, pattern)).as_py():
            raise _NotHere
        return texts.cast(pa.timestamp("ns", tz="UTC"))
    if edm is EdmType.GUID:
        lowered = pc.utf8_lower(texts)
        if not pc.all(pc.match_substring_regex(lowered, _SERVICE_GUID)).as_py():
            raise _NotHere
        return lowered
    if edm is EdmType.BINARY:
        return pa.array([None if value is None else b64decode_strict(value) for value in values], type=pa.binary())
    raise _NotHere
