"""Typed property values as the emulator stores, checks, compares and writes them.

A property is a ``(edm_type_name, value)`` pair in a canonical form chosen so
that values of one type compare correctly with Python's operators and store
losslessly:

=============  =====================================================
Edm.String     ``str`` (ordered by UTF-16 code units, as the service and
               Azurite order them: compare ``utf16_key(a) < utf16_key(b)``,
               not ``a < b``, which orders by code point)
Edm.Int32      ``int``
Edm.Int64      ``int``
Edm.Double     ``float`` (NaN and infinities included)
Edm.Boolean    ``bool``
Edm.DateTime   ``str``: ``YYYY-MM-DDTHH:MM:SS.fffffffZ`` (fixed width, so
               string order is time order; 7 digits kept exactly)
Edm.Guid       ``str``: lower-case ``8-4-4-4-12`` (string order is the
               service's Guid order)
Edm.Binary     ``bytes``
=============  =====================================================

This module also reads entity bodies (JSON and Atom), applies every entity
limit with the service's error codes, and writes properties back in both
formats.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from datetime import datetime, timezone
from typing import Any, Callable, Iterable

from .._entities._edm import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    MAX_ENTITY_BYTES,
    MAX_KEY_BYTES,
    MAX_PROPERTY_BYTES,
    EdmType,
    parse_datetime,
)
from ._errors import BAD_BODY, ServiceError, error

__all__ = [
    "Props",
    "STRING", "INT32", "INT64", "DOUBLE", "BOOLEAN", "DATETIME", "GUID", "BINARY",
    "EDM_TYPES",
    "canonical_datetime",
    "wire_datetime",
    "utf16_key",
    "canonical_guid",
    "parse_json_body",
    "parse_json_entity",
    "parse_atom_entity",
    "parse_atom_table_name",
    "check_key",
    "check_entity",
    "props_to_storage",
    "props_from_storage",
    "props_from_json_members",
    "COMPACT_JSON",
    "json_property_items",
    "json_fragment",
    "atom_property_xml",
    "xml_text",
    "xml_attr",
]

STRING = EdmType.STRING.value
INT32 = EdmType.INT32.value
INT64 = EdmType.INT64.value
DOUBLE = EdmType.DOUBLE.value
BOOLEAN = EdmType.BOOLEAN.value
DATETIME = EdmType.DATETIME.value
GUID = EdmType.GUID.value
BINARY = EdmType.BINARY.value
EDM_TYPES = frozenset({STRING, INT32, INT64, DOUBLE, BOOLEAN, DATETIME, GUID, BINARY})

#: name -> (edm type name, canonical value); PartitionKey, RowKey and Timestamp are not in it.
Props = dict[str, tuple[str, Any]]

# The service's numbers, from the one place the SDK keeps them.
MAX_VALUE_BYTES = MAX_PROPERTY_BYTES
MAX_PROPERTIES = 255  # including PartitionKey, RowKey and Timestamp
MAX_CUSTOM_PROPERTIES = MAX_PROPERTIES - 3
MAX_NAME_LENGTH = 255
SYSTEM_NAMES = ("PartitionKey", "RowKey", "Timestamp")

_DT_MIN = "1601-01-01T00:00:00.0000000Z"
_DT_MAX = "9999-12-31T23:59:59.9999999Z"
_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_DOUBLE_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_DOUBLE_SPECIAL = {"NaN": math.nan, "INF": math.inf, "-INF": -math.inf,
                   "Infinity": math.inf, "-Infinity": -math.inf}
_GUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z")
_FORBIDDEN_KEY = re.compile("[/\\\\#?\x00-\x1f\x7f-\x9f]")

_STORE_CODES = {STRING: "S", INT32: "I", INT64: "L", DOUBLE: "D", BOOLEAN: "B",
                DATETIME: "T", GUID: "G", BINARY: "X"}
_FROM_STORE_CODE = {code: name for name, code in _STORE_CODES.items()}


def _bad_value(name: str) -> ServiceError:
    return error("InvalidInput", message=BAD_BODY)


def _finite(number: float) -> float:
    """``number`` when it is a double; a numeral beyond Double's range (``1e999``) is refused.

    Python reads such a numeral as infinity; the service refuses it as invalid input
    (400 InvalidInput, "An error occurred while processing this request.", as reported
    against Azurite in its issue 2387), so it never silently becomes a different value.
    Infinity and NaN are only written as the strings ``"Infinity"``/``"NaN"``.
    """
    if math.isinf(number) or math.isnan(number):
        raise ValueError("double out of range")
    return number


# ------------------------------------------------------------------ canonical forms

def canonical_datetime(text: str) -> str:
    """Canonical Edm.DateTime text for ``text``; ValueError when invalid or out of range."""
    if not isinstance(text, str) or not text or len(text) > 64:
        raise ValueError("not a datetime")
    value = parse_datetime(text.strip())
    canon = "%04d-%02d-%02dT%02d:%02d:%02d.%06d%dZ" % (
        value.year, value.month, value.day, value.hour, value.minute, value.second,
        value.microsecond, value.ticks_remainder,
    )
    if not _DT_MIN <= canon <= _DT_MAX:
        raise ValueError("datetime out of range")
    return canon


def wire_datetime(canon: str) -> str:
    """Canonical Edm.DateTime text as the service writes it on the wire.

    The service trims trailing zeros of the fraction (``.94687Z``, ``.1Z``) and
    writes no fraction for whole seconds. Stored and compared text keeps all
    seven digits, so that text order stays time order.
    """
    if not canon.endswith("0Z"):
        return canon
    head = canon[:-1].rstrip("0")
    return (head[:-1] if head.endswith(".") else head) + "Z"


def canonical_guid(text: str) -> str:
    """Canonical (lower-case, hyphenated) Edm.Guid text; ValueError when invalid."""
    if not isinstance(text, str):
        raise ValueError("not a guid")
    text = text.strip()
    if not _GUID_RE.match(text):
        raise ValueError("not a guid")
    return text.lower()


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("not base64") from exc


def utf16_key(text: str) -> bytes:
    """``text`` as UTF-16 big-endian bytes: their byte order is the service's string order.

    The service (and Azurite) order strings by UTF-16 code units. Python orders
    ``str`` by code point, which disagrees exactly when a character above U+FFFF
    (two surrogates, 0xD800..0xDFFF) meets one in U+E000..U+FFFF: ``'\\U0001F600'``
    sorts *before* ``'\\uE000'`` in UTF-16. Lone surrogates are kept as they are.
    """
    return text.encode("utf-16-be", "surrogatepass")


def _utf16_units(text: str) -> int:
    if text.isascii():
        return len(text)
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


# ------------------------------------------------------------------ keys and limits

def check_key(field: str, value: Any) -> str:
    """Check a PartitionKey or RowKey value; return it."""
    if not isinstance(value, str):
        raise error("InvalidInput", message=BAD_BODY)
    if _FORBIDDEN_KEY.search(value):
        raise error("OutOfRangeInput", value, field)
    if 2 * _utf16_units(value) > MAX_KEY_BYTES:
        raise error("KeyValueTooLarge", field)
    return value


def _check_name(name: str) -> None:
    if len(name) > MAX_NAME_LENGTH:
        raise error("PropertyNameTooLong")
    if not name.isidentifier():
        raise error("PropertyNameInvalid")


def _value_size(edm: str, value: Any) -> int:
    if edm == STRING:
        return 4 + 2 * _utf16_units(value)
    if edm == BINARY:
        return 4 + len(value)
    if edm == INT32:
        return 4
    if edm == BOOLEAN:
        return 1
    if edm == GUID:
        return 16
    return 8  # Int64, Double, DateTime


_FIXED_SIZES = {INT32: 4, BOOLEAN: 1, GUID: 16, INT64: 8, DOUBLE: 8, DATETIME: 8}


def check_value_size(edm: str, value: Any) -> None:
    """PropertyValueTooLarge for strings over 64 KiB in UTF-16 and binary over 64 KiB."""
    if edm == STRING:
        # UTF-16 takes 2 or 4 bytes a character: only count surrogate pairs when it can matter
        if 2 * len(value) > MAX_VALUE_BYTES or (
            4 * len(value) > MAX_VALUE_BYTES and 2 * _utf16_units(value) > MAX_VALUE_BYTES
        ):
            raise error("PropertyValueTooLarge")
    elif edm == BINARY and len(value) > MAX_VALUE_BYTES:
        raise error("PropertyValueTooLarge")


def check_entity(pk: str, rk: str, props: Props, json_bytes: int | None = None) -> None:
    """Property count and entity size with the service's formula and error codes.

    Size = 4 + 2 * (len(PartitionKey) + len(RowKey)) + for each property
    (8 + 2 * len(name) + value size), lengths in UTF-16 code units, where a
    string value is 4 + 2 * len and a binary value 4 + len bytes.

    ``json_bytes``: the length of the JSON body the properties were read from, which bounds
    the size: a key has at most 2 UTF-16 units a character; a property's name and value
    take at least as many bytes of JSON text as UTF-16 units (base64 more than the bytes
    it holds), plus 3 for the quotes and the colon, and a value of a fixed size is at
    most 16 bytes, so a property adds at most 2 * (its bytes of JSON) + 28.
    """
    if len(props) > MAX_CUSTOM_PROPERTIES:
        raise error("TooManyProperties")
    if json_bytes is not None and (4 + 4 * (len(pk) + len(rk)) + 2 * json_bytes + 28 * len(props)
                                   <= MAX_ENTITY_BYTES):
        return  # within the bound below: no need to add the sizes up
    size = 4 + 2 * (_utf16_units(pk) + _utf16_units(rk))
    fixed = _FIXED_SIZES
    for name, (edm, value) in props.items():
        size += 8 + 2 * len(name) + (fixed[edm] if edm in fixed else _value_size(edm, value))
    if size > MAX_ENTITY_BYTES:
        raise error("EntityTooLarge")


# ------------------------------------------------------------------ JSON request bodies

def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):  # a name repeated
        raise error("DuplicatePropertiesSpecified")
    return result


_COMPACT_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _compact_json() -> Callable[[Any], str]:
    """``_COMPACT_ENCODER.encode``, with the C encoder made once: ``JSONEncoder.encode`` makes
    one per call, as much as the encoding of a small object. Without cycle checks: the
    emulator encodes only what it built, lists and dicts of plain values."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # an interpreter without the json accelerator
        return _COMPACT_ENCODER.encode
    encoder = _COMPACT_ENCODER
    encode = make(None, encoder.default, json.encoder.encode_basestring, None, encoder.key_separator,
                  encoder.item_separator, False, False, True)

    def compact(obj: Any) -> str:
        if obj.__class__ is str:
            return json.encoder.encode_basestring(obj)
        return "".join(encode(obj, 0))

    return compact


#: ``json.dumps(obj, ensure_ascii=False, separators=(",", ":"))`` without building an encoder per call.
COMPACT_JSON = _compact_json()

_JSON_SPACE = " \t\n\r"

#: One decoder for every body (``json.loads`` with a hook builds a new decoder per call).
_BODY_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates)


def parse_json_body(body: bytes) -> dict[str, Any]:
    """The JSON object of a request body (InvalidInput when it is not one).

    Strings holding unpaired surrogates (``"\\ud800"``) are refused: they are not
    text and could not be written back.
    """
    try:
        text = body.decode("utf-8")
        if text.startswith("\ufeff"):  # what "utf-8-sig" drops, without its Python-level decoder
            text = text[1:]
        # JSONDecoder.decode without its two regular-expression matches: JSON's whitespace is these four
        start = len(text) - len(text.lstrip(_JSON_SPACE))
        obj, end = _BODY_DECODER.raw_decode(text, start)
        if text[end:].strip(_JSON_SPACE):
            raise ValueError("extra data")
    except ServiceError:
        raise
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deep
        raise error("InvalidInput", message=BAD_BODY) from None
    if not isinstance(obj, dict):
        raise error("InvalidInput", message=BAD_BODY)
    if "\\u" in text:  # only escapes can produce surrogates
        try:
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise error("InvalidInput", message=BAD_BODY) from None
    return obj


class _NotOfType(ValueError):
    """A JSON value its declared EDM type does not take."""


def _json_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise _NotOfType()


def _json_int32(value: Any) -> int:
    # The service also takes the numeral as a string ("12345"), as it does for Int64.
    if isinstance(value, str) and _INT_RE.match(value.strip()):
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and INT32_MIN <= value <= INT32_MAX:
        return value
    raise _NotOfType()


def _json_int64(value: Any) -> int:
    if isinstance(value, str) and _INT_RE.match(value):
        number = int(value)
        if INT64_MIN <= number <= INT64_MAX:
            return number
    raise _NotOfType()


def _json_double_value(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _finite(float(value))
    if isinstance(value, str):
        if value in _DOUBLE_SPECIAL:
            return _DOUBLE_SPECIAL[value]
        if _DOUBLE_RE.match(value):
            return _finite(float(value))
    raise _NotOfType()


def _json_boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    # as a string in any case ("True", "false"), as .NET's Boolean.Parse reads it
    lowered = value.strip().lower() if isinstance(value, str) else None
    if lowered in ("true", "false"):
        return lowered == "true"
    raise _NotOfType()


def _json_binary(value: Any) -> bytes:
    if isinstance(value, str):
        return _b64(value)
    raise _NotOfType()


#: The reader of a JSON value of each declared type: its canonical value, or ValueError,
#: TypeError or OverflowError when the type does not take it.
_JSON_READERS: dict[str, Callable[[Any], Any]] = {
    STRING: _json_string, INT32: _json_int32, INT64: _json_int64, DOUBLE: _json_double_value,
    BOOLEAN: _json_boolean, DATETIME: canonical_datetime, GUID: canonical_guid, BINARY: _json_binary,
}


def _json_typed(name: str, edm: str, value: Any) -> tuple[str, Any]:
    read = _JSON_READERS.get(edm)
    try:
        if read is not None:
            return edm, read(value)
    except (ValueError, TypeError, OverflowError):
        pass
    raise _bad_value(name)


def _json_untyped(name: str, value: Any) -> tuple[str, Any]:
    if isinstance(value, str):
        return STRING, value
    if isinstance(value, bool):
        return BOOLEAN, value
    if isinstance(value, int):
        if INT32_MIN <= value <= INT32_MAX:
            return INT32, value
        raise _bad_value(name)
    if isinstance(value, float):
        try:
            return DOUBLE, _finite(value)
        except ValueError:
            raise _bad_value(name) from None
    raise _bad_value(name)


def parse_json_entity(obj: dict[str, Any], *, keys_from_url: bool = False) -> tuple[Any, Any, Props]:
    """(PartitionKey, RowKey, properties) from a JSON entity object.

    Read by the plan of its member names (:func:`_planned_entity`) when it has one, else
    member by member (:func:`_read_json_entity`, which also gives every error).

    Keys are returned as found (None when absent) for the caller to check;
    ``odata.*`` members and Timestamp are ignored; null values are dropped, as
    the service does not store nulls. A key typed other than Edm.String is
    refused (an insert), or, with ``keys_from_url`` (update, merge and the
    upserts, whose keys are the URL's), ignored: the service answers those 204
    and keeps the keys as the URL's strings.
    """
    planned = _planned_entity(obj)
    return planned if planned is not None else _read_json_entity(obj, keys_from_url)


class _EntityPlan:
    """How to read the entities whose members have given names, in a given order: the
    members that annotate a type, and for each tuple of the types they name, the
    properties to read with their types (None: the JSON value's own)."""

    __slots__ = ("annotations", "names", "typed")

    def __init__(self, annotations: tuple[str, ...], names: tuple[str, ...]) -> None:
        self.annotations = annotations
        self.names = names
        self.typed: dict[tuple[Any, ...], tuple[tuple[str, str | None, Any], ...]] = {}


#: Plans by the members' names in order (None: read member by member); cleared when full.
_PLANS: dict[tuple[str, ...], _EntityPlan | None] = {}
_MAX_PLANS = 512
_EDM_CONSTANTS = {name: name for name in EDM_TYPES}


def _entity_plan(members: tuple[str, ...]) -> _EntityPlan | None:
    """The plan of entities with these member names, or None when a name needs the full reading
    (an invalid property name, a typed key)."""
    annotations: list[str] = []
    names: list[str] = []
    for key in members:
        if "@" in key:
            prop, _, annotation = key.partition("@")
            if annotation == "odata.type":
                if prop in ("PartitionKey", "RowKey"):
                    return None
                annotations.append(key)
            continue
        if key in _NOT_PROPERTIES or key.startswith("odata."):
            continue
        if len(key) > MAX_NAME_LENGTH or not key.isidentifier():
            return None
        names.append(key)
    return _EntityPlan(tuple(annotations), tuple(names))


def _typed_names(plan: _EntityPlan, types: tuple[Any, ...]) -> tuple[tuple[str, str | None, Any], ...] | None:
    """The properties of ``plan`` with the types its annotations name and their readers, or None
    when an annotation names no type."""
    if not all(value.__class__ is str and value in EDM_TYPES for value in types):
        return None
    declared = {key.partition("@")[0]: _EDM_CONSTANTS[value] for key, value in zip(plan.annotations, types)}
    typed: list[tuple[str, str | None, Any]] = []
    for name in plan.names:
        edm = declared.get(name)
        typed.append((name, edm, None if edm is None else _JSON_READERS[edm]))
    return tuple(typed)


def _planned_entity(obj: dict[str, Any]) -> tuple[Any, Any, Props] | None:
    """(PartitionKey, RowKey, properties) of an entity read by its plan, or None: no plan, or a
    value to refuse (the member-by-member reading finds the error the service gives)."""
    members = tuple(obj)
    plan = _PLANS.get(members)
    if plan is None:
        if members in _PLANS:
            return None
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[members] = _entity_plan(members)
        if plan is None:
            return None
    try:
        types = tuple(map(obj.__getitem__, plan.annotations))
        typed_names = plan.typed.get(types)
    except TypeError:  # an annotation that is no string
        return None
    if typed_names is None:
        typed_names = _typed_names(plan, types)
        if typed_names is None:
            return None
        if len(plan.typed) < _MAX_PLANS:
            plan.typed[types] = typed_names
    props: Props = {}
    try:
        for name, edm, read in typed_names:
            value = obj[name]
            kind = value.__class__
            if kind is str and (edm is None or edm is STRING):
                if 4 * len(value) > MAX_VALUE_BYTES:
                    check_value_size(STRING, value)
                props[name] = (STRING, value)
            elif value is None:
                continue
            elif edm is None:
                if kind is int and INT32_MIN <= value <= INT32_MAX:
                    props[name] = (INT32, value)
                elif kind is bool:
                    props[name] = (BOOLEAN, value)
                elif kind is float:
                    props[name] = _json_untyped(name, value)
                else:
                    return None
            else:
                props[name] = edm, read(value)
                if edm is BINARY:
                    check_value_size(BINARY, props[name][1])
    except (ServiceError, ValueError, TypeError, OverflowError):
        return None
    return obj.get("PartitionKey"), obj.get("RowKey"), props


def _read_json_entity(obj: dict[str, Any], keys_from_url: bool) -> tuple[Any, Any, Props]:
    """:func:`parse_json_entity` member by member: any entity, and every error."""
    pk: Any = obj.get("PartitionKey")
    rk: Any = obj.get("RowKey")
    props: Props = {}
    annotations: dict[str, Any] = {}
    for key, value in obj.items():
        if "@" in key:
            prop, _, annotation = key.partition("@")
            if annotation != "odata.type":
                continue  # other instance annotations carry no data
            if value.__class__ is not str or value not in EDM_TYPES:
                raise error("InvalidInput", message=BAD_BODY)
            annotations[prop] = value
    for key, value in obj.items():
        if key in _NOT_PROPERTIES or "@" in key or key.startswith("odata."):
            continue
        if len(key) > MAX_NAME_LENGTH or not key.isidentifier():
            _check_name(key)
        if value is None:
            continue
        kind = value.__class__
        edm = annotations.get(key)
        if edm is None and (kind is str or kind is bool) or edm == STRING and kind is str:
            typed = (STRING if kind is str else BOOLEAN), value
        elif kind is dict or kind is list:
            raise error("InvalidInput", message=BAD_BODY)
        else:
            typed = _json_untyped(key, value) if edm is None else _json_typed(key, edm, value)
        if typed[0] == STRING and 4 * len(value) > MAX_VALUE_BYTES or typed[0] == BINARY:
            check_value_size(*typed)
        props[key] = typed
    for prop, edm in annotations.items():
        if prop in ("PartitionKey", "RowKey") and edm != STRING:
            if not keys_from_url:
                raise error("InvalidInput", message=BAD_BODY)
            if prop == "PartitionKey":
                pk = None
            else:
                rk = None
    return pk, rk, props


# ------------------------------------------------------------------ Atom request bodies

_NOT_PROPERTIES = frozenset(SYSTEM_NAMES)

ATOM_NS = "http://www.w3.org/2005/Atom"
D_NS = "http://schemas.microsoft.com/ado/2007/08/dataservices"
M_NS = "http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"
_M_TYPE = "{%s}type" % M_NS
_M_NULL = "{%s}null" % M_NS


def _parse_xml(body: bytes) -> Any:
    from lxml import etree

    parser = etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, dtd_validation=False,
        huge_tree=True, remove_blank_text=False,
    )
    try:
        root = etree.fromstring(body, parser)
    except (etree.XMLSyntaxError, ValueError):
        raise error("InvalidInput", message=BAD_BODY) from None
    if root is None:
        raise error("InvalidInput", message=BAD_BODY)
    return root


def _atom_properties(body: bytes) -> Any:
    root = _parse_xml(body)
    if root.tag == "{%s}entry" % ATOM_NS:
        content = root.find("{%s}content" % ATOM_NS)
        props = None
        if content is not None:
            props = content.find("{%s}properties" % M_NS)
        if props is None:  # media-link style: properties beside content
            props = root.find("{%s}properties" % M_NS)
    elif root.tag == "{%s}properties" % M_NS:
        props = root
    else:
        props = None
    if props is None:
        raise error("InvalidInput", message=BAD_BODY)
    return props


def _atom_typed(name: str, edm: str, text: str) -> tuple[str, Any]:
    try:
        if edm == STRING:
            return edm, text
        if edm in (INT32, INT64):
            stripped = text.strip()
            if _INT_RE.match(stripped):
                number = int(stripped)
                lo, hi = (INT32_MIN, INT32_MAX) if edm == INT32 else (INT64_MIN, INT64_MAX)
                if lo <= number <= hi:
                    return edm, number
        elif edm == DOUBLE:
            stripped = text.strip()
            if stripped in _DOUBLE_SPECIAL:
                return edm, _DOUBLE_SPECIAL[stripped]
            if _DOUBLE_RE.match(stripped):
                return edm, _finite(float(stripped))
        elif edm == BOOLEAN:
            lowered = text.strip().lower()
            if lowered in ("true", "1"):
                return edm, True
            if lowered in ("false", "0"):
                return edm, False
        elif edm == DATETIME:
            return edm, canonical_datetime(text)
        elif edm == GUID:
            return edm, canonical_guid(text)
        elif edm == BINARY:
            return edm, _b64(text.strip())
    except (ValueError, OverflowError):
        pass
    raise _bad_value(name)


def parse_atom_entity(body: bytes, *, keys_from_url: bool = False) -> tuple[Any, Any, Props]:
    """(PartitionKey, RowKey, properties) from an Atom ``<entry>`` body.

    ``keys_from_url``: as for :func:`parse_json_entity`, typed keys are ignored
    instead of refused.
    """
    props_el = _atom_properties(body)
    pk: Any = None
    rk: Any = None
    props: Props = {}
    for child in props_el:
        tag = child.tag
        if not isinstance(tag, str):
            continue  # comments, processing instructions
        if not tag.startswith("{%s}" % D_NS):
            raise error("InvalidInput", message=BAD_BODY)
        name = tag[len(D_NS) + 2:]
        if len(child):
            raise error("InvalidInput", message=BAD_BODY)  # complex values are not table properties
        is_null = child.get(_M_NULL, "false").strip().lower() == "true"
        edm = child.get(_M_TYPE) or STRING
        if edm not in EDM_TYPES:
            raise error("InvalidInput", message=BAD_BODY)
        text = child.text or ""
        if name == "Timestamp":
            continue
        if name in ("PartitionKey", "RowKey"):
            if edm != STRING:
                if keys_from_url:
                    continue  # the URL's keys are used
                raise error("InvalidInput", message=BAD_BODY)
            if name == "PartitionKey":
                pk = None if is_null else text
            else:
                rk = None if is_null else text
            continue
        _check_name(name)
        if name in props:
            raise error("DuplicatePropertiesSpecified")
        if is_null:
            continue
        typed = _atom_typed(name, edm, text)
        check_value_size(*typed)
        props[name] = typed
    return pk, rk, props


def parse_atom_table_name(body: bytes) -> Any:
    """The TableName of an Atom Create Table body (None when absent)."""
    props_el = _atom_properties(body)
    for child in props_el:
        if child.tag == "{%s}TableName" % D_NS:
            return child.text or ""
    return None


# ------------------------------------------------------------------ storage

def props_to_storage(props: Props) -> str:
    """Lossless JSON text for the properties (binary as base64)."""
    out: dict[str, list[Any]] = {}
    for name, (edm, value) in props.items():
        if edm == BINARY:
            value = base64.b64encode(value).decode("ascii")
        out[name] = [_STORE_CODES[edm], value]
    return COMPACT_JSON(out)


def props_from_storage(text: str) -> Props:
    """The inverse of :func:`props_to_storage`."""
    raw = json.loads(text)
    props: Props = {}
    for name, (code, value) in raw.items():
        edm = _FROM_STORE_CODE[code]
        if edm == BINARY:
            value = base64.b64decode(value)
        elif edm == DOUBLE:
            value = float(value)
        props[name] = (edm, value)
    return props


def props_from_json_members(members: str) -> Props:
    """The properties of :func:`json_fragment`'s text: the inverse of it.

    The minimal-metadata members are lossless: Int64, DateTime, Guid, Binary and
    non-finite doubles carry their type, and a finite double is always written
    with a point or an exponent, so it never reads back as an Int32.
    """
    if not members:
        return {}
    raw = json.loads("{" + members + "}")
    props: Props = {}
    for name, value in raw.items():
        if "@" in name:
            continue
        edm = raw.get(name + "@odata.type")
        if edm is None:
            kind = value.__class__
            props[name] = (STRING if kind is str else BOOLEAN if kind is bool else INT32 if kind is int
                           else DOUBLE, value)
        elif edm == INT64:
            props[name] = (INT64, int(value))
        elif edm == DATETIME:
            props[name] = (DATETIME, _canonical_from_wire(value))
        elif edm == BINARY:
            props[name] = (BINARY, base64.b64decode(value))
        elif edm == DOUBLE:
            props[name] = (DOUBLE, _DOUBLE_SPECIAL[value])
        else:
            props[name] = (edm, value)
    return props


def _canonical_from_wire(text: str) -> str:
    """The canonical (seven-digit) form of :func:`wire_datetime`'s text."""
    head, dot, fraction = text[:-1].partition(".")
    return head + "." + fraction.ljust(7, "0") + "Z"


# ------------------------------------------------------------------ JSON responses

_ANNOTATED_JSON = frozenset({INT64, DATETIME, GUID, BINARY})


def _json_double(value: float) -> tuple[Any, bool]:
    if math.isnan(value):
        return "NaN", True
    if math.isinf(value):
        return ("Infinity" if value > 0 else "-Infinity"), True
    return value, False


def json_property_items(props: Props, annotate: bool, select: Iterable[str] | None = None) -> list[tuple[str, Any]]:
    """``(member, value)`` pairs of the properties in the service's JSON form.

    With ``annotate`` (minimal and full metadata), Int64, DateTime, Guid,
    Binary and non-finite doubles carry ``<name>@odata.type``.
    """
    items: list[tuple[str, Any]] = []
    names: Iterable[str] = props.keys() if select is None else [n for n in select if n in props]
    for name in names:
        edm, value = props[name]
        if edm == STRING or edm == INT32 or edm == BOOLEAN:
            items.append((name, value))
            continue
        if edm == DOUBLE:
            value, needs = _json_double(value)
        elif edm == INT64:
            value, needs = str(value), True
        elif edm == BINARY:
            value, needs = base64.b64encode(value).decode("ascii"), True
        elif edm == DATETIME:
            value, needs = wire_datetime(value), True
        else:  # Guid: a canonical string already
            needs = True
        if annotate and needs:
            items.append((name + "@odata.type", edm))
        items.append((name, value))
    return items


def _b64_text(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


#: How json_fragment writes a value of each type that carries its annotation (Double: non-finite only).
_ANNOTATED_WRITERS: dict[str, Any] = {INT64: str, DATETIME: wire_datetime, GUID: str, BINARY: _b64_text}


def json_fragment(props: Props) -> str:
    """The minimal-metadata JSON members of the properties, without braces (stored for fast scans):
    :func:`json_property_items` with annotations, written straight into one object."""
    if not props:
        return ""
    members: dict[str, Any] = {}
    for name, (edm, value) in props.items():
        if edm is STRING or edm is INT32 or edm is BOOLEAN:
            members[name] = value
        elif edm is DOUBLE:
            value, needs = _json_double(value)
            if needs:
                members[name + "@odata.type"] = edm
            members[name] = value
        elif edm in _ANNOTATED_WRITERS:
            members[name + "@odata.type"] = edm
            members[name] = _ANNOTATED_WRITERS[edm](value)
        else:  # a type name that is not the module's constant (equal text): the general writer
            members.update(json_property_items({name: (edm, value)}, True))
    return COMPACT_JSON(members)[1:-1]


# ------------------------------------------------------------------ Atom responses

_XML_TEXT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})
_XML_ATTR_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;",
                                   "\r": "&#13;", "\n": "&#10;", "\t": "&#9;"})


def xml_text(text: str) -> str:
    """Escape character data (carriage returns kept as references so they survive parsing)."""
    return text.translate(_XML_TEXT_ESCAPES)


def xml_attr(text: str) -> str:
    """Escape an attribute value for use inside double quotes."""
    return text.translate(_XML_ATTR_ESCAPES)


def _atom_double(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "INF" if value > 0 else "-INF"
    return repr(value)


def atom_property_xml(name: str, edm: str, value: Any) -> str:
    """One ``<d:Name m:type="...">value</d:Name>`` element."""
    if edm == STRING:
        space = ' xml:space="preserve"' if value and (value[0].isspace() or value[-1].isspace()) else ""
        return f"<d:{name}{space}>{xml_text(value)}</d:{name}>"
    if edm == BOOLEAN:
        text = "true" if value else "false"
    elif edm == DOUBLE:
        text = _atom_double(value)
    elif edm == BINARY:
        text = base64.b64encode(value).decode("ascii")
    elif edm == DATETIME:
        text = wire_datetime(value)
    else:
        text = str(value)
    return f'<d:{name} m:type="{edm}">{text}</d:{name}>'


def utc_now_text() -> str:
    """The current time as canonical Edm.DateTime text."""
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.%f") + "0Z"
