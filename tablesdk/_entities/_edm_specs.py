"""The one table of EDM types: everything the client does differently for each type.

:data:`EDM_SPECS` holds one :class:`EdmTypeSpec` per :class:`EdmType`: its Python
classes, its limits, its AtomPub and JSON forms (both directions, with the fast
readers the decoders use) and its ``$filter`` literal. The conversion functions
of :mod:`tablesdk._entities._edm` look a type up here, and every per-type lookup table of
the codecs, the entity layer and the filter builder is built from this table when
its module is imported, so a type added here reaches every path
(``tests/unit/test_edm_specs.py`` checks that each derived table agrees).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import math
import sys
import uuid
from collections import deque
from collections.abc import Callable
from datetime import datetime, timezone
from itertools import compress, repeat, starmap
from operator import attrgetter, getitem, itemgetter
from typing import Any

from ._edm_base import (
    DATETIME_MAX,
    DATETIME_MIN,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    MAX_PROPERTY_BYTES,
    EdmDateTime,
    EdmType,
    as_utc,
    b64decode_strict,
    check_text,
    format_datetime,
    guid_from_wire,
    int32_from_wire,
    int64_from_wire,
    parse_datetime,
    utf16_len,
)
from .._core._errors import TableValidationError

__all__ = ["EdmTypeSpec", "EDM_SPECS", "text_as_is"]

#: Reads a column of JSON values (none of them null) of one type: the Python values, or None
#: when one of them is not in the form the service writes (each value is then read by the
#: per-value reader, which reports it as the per-entity path does).
ColumnReader = Callable[[list[Any]], "list[Any] | None"]
#: The body-template text of a JSON value (``"%s"`` or ``'"%s"'``) and the writer of what
#: goes in its ``%s``, for a value of one exact class; None: the general encoder writes it.
TemplateWriter = Callable[[type], "tuple[str, Callable[[Any], str]] | None"]


class EdmTypeSpec:
    """How the client handles one EDM type; its wire name is ``edm_type.value``.

    Every field is filled for every type: a reader that has nothing to do is the
    identity (:func:`text_as_is`) and a derived table that wants None there says so.
    """

    # A plain class, not a dataclass: each dataclass costs ``import tablesdk`` about 0.5 ms (start-up).
    # One instance per EDM type, never changed after it is built.

    __slots__ = (
        "edm_type", "python_class", "python_name", "declared_by", "sent_from", "check", "size", "measure",
        "to_atom", "from_atom", "atom_reader", "to_json", "json_annotated", "json_bare_kinds", "from_json",
        "json_reader", "json_column_reader", "json_template", "filter_literal", "order_key",
    )

    def __init__(
        self,
        edm_type: EdmType,
        python_class: type,
        python_name: str,
        declared_by: tuple[Any, ...],
        sent_from: tuple[type, ...],
        check: Callable[[str, Any], None],
        size: int,
        measure: Callable[[Any], int],
        to_atom: Callable[[Any], str],
        from_atom: Callable[[str], Any],
        atom_reader: Callable[[str], Any],
        to_json: Callable[[Any], Any],
        json_annotated: bool,
        json_bare_kinds: tuple[type, ...],
        from_json: Callable[[Any], Any],
        json_reader: Callable[[Any], Any],
        json_column_reader: ColumnReader,
        json_template: TemplateWriter,
        filter_literal: Callable[[Any, str], str],
        order_key: Callable[[Any], Any],
    ) -> None:
        self.edm_type = edm_type
        # The Python class of a value read back, and its name in messages ("uuid.UUID").
        self.python_class = python_class
        self.python_name = python_name
        # Class annotations that declare a property of this type (``Rating: int``).
        self.declared_by = declared_by
        # Classes whose values (or subclasses') are sent as this type when nothing else types
        # them; an int is Int32 only while it fits (:func:`~tablesdk._entities._edm.infer_edm_type`).
        self.sent_from = sent_from
        # Raise :class:`TableValidationError` when ``value`` cannot be sent as this type.
        self.check = check
        # Bytes a value counts in the service's entity-size formula: ``size + measure(value)``.
        self.size = size
        self.measure = measure
        # AtomPub: the element text of a value, and the value of a text (the general reading,
        # and the one the decoder calls for every value, which reads the same texts alike).
        self.to_atom = to_atom
        self.from_atom = from_atom
        self.atom_reader = atom_reader
        # JSON: the value to write and whether it carries ``Name@odata.type``; the JSON kinds
        # an un-annotated value of this type arrives as (an int by its range).
        self.to_json = to_json
        self.json_annotated = json_annotated
        self.json_bare_kinds = json_bare_kinds
        # JSON reading: the general conversion, the one the page decoder calls per value, and
        # the one it calls per column; and the body-template writer of the encoder.
        self.from_json = from_json
        self.json_reader = json_reader
        self.json_column_reader = json_column_reader
        self.json_template = json_template
        # The ``$filter`` literal of a checked value (the name is for errors), and a key that
        # sorts values as the service compares them (None where the order is not known).
        self.filter_literal = filter_literal
        self.order_key = order_key


# ---------------------------------------------------------------- shared helpers


def text_as_is(text: Any) -> Any:
    """The value is its wire text (strings): a reader with nothing to do."""
    return text


def _no_length(value: Any) -> int:
    return 0


def _no_order(value: Any) -> Any:
    return None


def _as_is(value: Any) -> Any:
    return value


def _each(convert: Callable[[Any], Any]) -> ColumnReader:
    """A column reader calling ``convert`` on each value."""

    def read(column: list[Any]) -> list[Any] | None:
        return list(map(convert, column))

    return read


def _for_classes(value_text: str, write: Callable[[Any], str], *classes: type) -> TemplateWriter:
    """A template writer for values of exactly these classes."""
    found = (value_text, write)
    return lambda kind: found if kind in classes else None


def _wrong_class(name: str, edm_type: EdmType, needs: str, value: Any) -> TableValidationError:
    return TableValidationError(name, f"{edm_type.value} needs {needs}", f"got {type(value).__name__}")


def _integer_text(value: Any) -> str:
    return str(int(value))


def _true_false(value: Any) -> str:
    return "true" if value else "false"


def _b64decode(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("not an Edm.Binary (base64) value") from exc


# ---------------------------------------------------------------- Edm.String


def _check_string(name: str, value: Any) -> None:
    if not isinstance(value, str):
        raise _wrong_class(name, EdmType.STRING, "a str", value)
    check_text(name, value)
    # UTF-16 takes 2 or 4 bytes a character: count exactly only when it could matter.
    if len(value) * 4 > MAX_PROPERTY_BYTES and utf16_len(value) > MAX_PROPERTY_BYTES:
        raise TableValidationError(
            name, "strings are at most 64 KiB in UTF-16 (32,768 characters)", f"got {utf16_len(value)} bytes"
        )


def _string_from_json(value: Any) -> Any:
    if type(value) is not str:
        raise ValueError(f"Edm.String value is a JSON {type(value).__name__}")
    return value


def _string_literal(value: Any, name: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _string_order(value: Any) -> Any:
    return value.encode("utf-16-be")  # the service compares UTF-16 code units


# ---------------------------------------------------------------- Edm.Int32 and Edm.Int64


def _integer_check(edm_type: EdmType, low: int, high: int) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _wrong_class(name, edm_type, "an int", value)
        if not low <= value <= high:
            raise TableValidationError(name, f"{edm_type.value} range is [{low}, {high}]", f"got {value}")

    return check


def _json_int64(value: Any) -> str:
    return str(int(value))


def _int64_literal(value: Any, name: str) -> str:
    return f"{int(value)}L"


def _int32_literal(value: Any, name: str) -> str:
    return str(int(value))


def _int64_column(values: list[Any]) -> list[Any] | None:
    """``int64_from_wire`` of each value, for a column of texts (the JSON form) of at most 24 characters."""
    if type(values[0]) is not str or max(map(len, values)) > 24:  # the kinds of a column are all one
        return None
    numbers = list(map(int, values))
    if min(numbers) < INT64_MIN or max(numbers) > INT64_MAX:
        return None
    return numbers


# ---------------------------------------------------------------- Edm.Double


def _check_double(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (float, int)):
        raise _wrong_class(name, EdmType.DOUBLE, "a float", value)
    if type(value) is not float and isinstance(value, int) and not _exact_double(value):
        raise TableValidationError(
            name, "an int sent as Edm.Double must convert to a double exactly",
            f"{value} would be stored as {_nearest_double(value)}",
        )


def _exact_double(value: int) -> bool:
    try:
        return int(float(value)) == value
    except OverflowError:
        return False


def _nearest_double(value: int) -> str:
    try:
        return repr(float(value))
    except OverflowError:
        return "nothing (beyond the largest double)"


def _atom_double(value: Any) -> str:
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "INF" if number > 0 else "-INF"
    return repr(number)  # the shortest text that reads back as the same double


_DOUBLE_SPECIALS = {"NaN": math.nan, "INF": math.inf, "-INF": -math.inf, "Infinity": math.inf, "-Infinity": -math.inf}


def _double_from_atom(text: str) -> float:
    special = _DOUBLE_SPECIALS.get(text.strip())
    return special if special is not None else float(text)


def _json_double(value: Any) -> Any:
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    return number


def _double_from_json(value: Any) -> float:
    if isinstance(value, str):
        special = _DOUBLE_SPECIALS.get(value)
        return special if special is not None else float(value)
    return float(value)


def _json_double_reader(value: Any) -> Any:
    return value if type(value) is float else _double_from_json(value)


def _double_literal(value: Any, name: str) -> str:
    number = float(value)
    if not math.isfinite(number):
        raise TableValidationError(name, "$filter cannot express NaN or infinite doubles", repr(number))
    # Positional notation only: Azurite reads an exponent literal such as 1e+300 as
    # matching nothing, without an error. The shortest repr's digits keep the value exact.
    from decimal import Decimal  # doubles in filters are rare: not loaded by ``import tablesdk`` (start-up)

    text = format(Decimal(repr(number)), "f")
    if "." not in text:
        text += ".0"
    return text


# ---------------------------------------------------------------- Edm.Boolean


def _check_boolean(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise _wrong_class(name, EdmType.BOOLEAN, "a bool", value)


def _boolean_from_atom(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise ValueError(f"not an Edm.Boolean value: {text!r}")


_BOOLEANS = {"true": True, "false": False}  # the service's forms; _boolean_from_atom reads the others


def _atom_boolean_reader(text: str) -> bool:
    value = _BOOLEANS.get(text)
    return _boolean_from_atom(text) if value is None else value


def _boolean_from_json(value: Any) -> Any:
    if type(value) is not bool:
        raise ValueError(f"Edm.Boolean value is a JSON {type(value).__name__}")
    return value


def _boolean_literal(value: Any, name: str) -> str:
    return "true" if value else "false"


# ---------------------------------------------------------------- Edm.DateTime


def _check_datetime(name: str, value: Any) -> None:
    if not isinstance(value, datetime):
        raise _wrong_class(name, EdmType.DATETIME, "a datetime", value)
    try:
        utc = as_utc(value)
    except OverflowError:  # an aware value whose UTC instant is past year 1 or 9999
        raise TableValidationError(
            name, "Edm.DateTime range is 1601-01-01 to 9999-12-31 UTC", f"got {value.isoformat()}"
        ) from None
    if not DATETIME_MIN <= utc <= DATETIME_MAX:
        raise TableValidationError(name, "Edm.DateTime range is 1601-01-01 to 9999-12-31 UTC", f"got {utc.isoformat()}")
    if type(value) is not datetime:
        _check_ticks(name, value)


def _check_ticks(name: str, value: Any) -> None:
    """A pandas.Timestamp holds nanoseconds; the service keeps 100 ns ticks: its 8th and 9th
    fractional digits are refused, never cut (the 7th is written)."""
    if type(value) is not datetime and not isinstance(value, EdmDateTime) and getattr(value, "nanosecond", 0) % 100:
        raise TableValidationError(
            name, "Edm.DateTime holds 100 ns ticks (7 fractional digits)",
            f"got {value} ({value.nanosecond} ns past the microsecond): round it first, e.g. .floor('100ns')",
        )


def _datetime_from_atom(text: str) -> EdmDateTime:
    return parse_datetime(text.strip())  # the strip, then the fast path


def _datetime_template(kind: type) -> tuple[str, Callable[[Any], str]] | None:
    return ('"%s"', format_datetime) if issubclass(kind, datetime) else None


def _datetime_literal(value: Any, name: str) -> str:
    _check_ticks(name, value)
    return f"datetime'{format_datetime(value)}'"


def _datetime_order(value: Any) -> Any:
    utc = value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
    remainder = value.ticks_remainder if isinstance(value, EdmDateTime) else 0
    return (utc, remainder)


_DATETIME_STATE = datetime.__reduce__
_SECOND = itemgetter(1)
_TZINFO = attrgetter("tzinfo")
_FROM_ISO = datetime.fromisoformat
_UTC_ZONE = parse_datetime("2000-01-01T00:00:00Z").tzinfo
#: ``datetime.__new__(EdmDateTime, state, zone)``: a datetime's pickled state read without argument parsing.
_NEW_EDM_DATETIME = functools.partial(datetime.__new__, EdmDateTime)


def _datetime_column(texts: list[Any]) -> list[Any] | None:
    """``parse_datetime`` of each text, when every one is in a form its fast path reads.

    The fast path's test (20 to 28 characters, ``Z`` last, ``.`` at 19 unless 20 long) is
    made on the whole column; ``fromisoformat`` reads each text in C and the EdmDateTime is
    made from the datetime's pickled state (no argument parsing); only seventh digits are
    looked at one by one.
    """
    lengths = list(map(len, texts))
    # The last characters as a list counted in C: cheaper than str.endswith per text.
    if min(lengths) < 20 or max(lengths) > 28 or list(map(getitem, texts, repeat(-1))).count("Z") != len(texts):
        return None
    marks = list(map(getitem, texts, repeat(19)))
    if marks.count(".") + marks.count("Z") != len(texts) or marks.count("Z") != lengths.count(20):
        return None
    try:
        parsed = list(map(_FROM_ISO, texts))
    except ValueError:
        return None
    if set(map(_TZINFO, parsed)) != {_UTC_ZONE}:
        return None
    values = list(starmap(_NEW_EDM_DATETIME, map(_SECOND, map(_DATETIME_STATE, parsed))))
    deque(map(_SET_TICKS, values, repeat(0)), 0)
    if 28 in lengths:  # seventh digits: read and set a column at a time (no Python step per value)
        seventh = list(map(int.__eq__, lengths, repeat(28)))
        digits = list(map(getitem, compress(texts, seventh), repeat(26)))
        if not _DIGITS.keys() >= set(digits):
            return None
        deque(map(_SET_TICKS, compress(values, seventh), map(_DIGITS.__getitem__, digits)), 0)
    return values


#: The value of each decimal digit character.
_DIGITS = {str(digit): digit for digit in range(10)}
#: The slot of the seventh digit, set in C.
_SET_TICKS: Callable[[Any, int], None] = EdmDateTime.__dict__["ticks_remainder"].__set__


# ---------------------------------------------------------------- Edm.Guid


def _check_guid(name: str, value: Any) -> None:
    if not isinstance(value, uuid.UUID):
        raise _wrong_class(name, EdmType.GUID, "a uuid.UUID", value)


def _guid_from_text(text: str) -> uuid.UUID:
    return uuid.UUID(text.strip())


def _atom_guid_reader(text: str) -> uuid.UUID:
    return guid_from_wire(text.strip())  # uuid.UUID(text.strip()), through the fast reader


def _guid_literal(value: Any, name: str) -> str:
    return f"guid'{value}'"


_NEW_OBJECT = object.__new__
_UUID_UNKNOWN = uuid.SafeUUID.unknown
# The slot descriptors of uuid.UUID (whose __setattr__ refuses every change): set in C.
_SET_GUID_INT: Callable[[Any, Any], None] = uuid.UUID.__dict__["int"].__set__
_SET_GUID_SAFE: Callable[[Any, Any], None] = uuid.UUID.__dict__["is_safe"].__set__


def _guid_column(texts: list[Any]) -> list[Any] | None:
    """``guid_from_wire`` of each text, when every one has 36 characters, 32 once hyphens are dropped."""
    if set(map(len, texts)) != {36}:
        return None
    digits = list(map(str.replace, texts, repeat("-"), repeat("")))
    if set(map(len, digits)) != {32}:
        return None
    try:
        numbers = list(map(int, digits, repeat(16)))
    except ValueError:
        return None
    guids = list(map(_NEW_OBJECT, repeat(uuid.UUID, len(texts))))
    deque(map(_SET_GUID_INT, guids, numbers), 0)
    deque(map(_SET_GUID_SAFE, guids, repeat(_UUID_UNKNOWN)), 0)
    return guids


# ---------------------------------------------------------------- Edm.Binary


def _check_binary(name: str, value: Any) -> None:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise _wrong_class(name, EdmType.BINARY, "bytes", value)
    if len(value) > MAX_PROPERTY_BYTES:
        raise TableValidationError(name, "binary values are at most 64 KiB", f"got {len(value)} bytes")


def _atom_binary(value: Any) -> str:
    return base64.b64encode(bytes(value)).decode("ascii")


_B2A_BASE64 = binascii.b2a_base64


def _json_binary(value: Any) -> str:
    # What base64.b64encode does, without its Python frame: every Binary value written goes here.
    return _B2A_BASE64(bytes(value), newline=False).decode("ascii")


def _binary_literal(value: Any, name: str) -> str:
    return f"X'{bytes(value).hex()}'"


if sys.version_info >= (3, 11):
    _A2B = binascii.a2b_base64

    def _binary_column(texts: list[Any]) -> list[Any] | None:
        return [_A2B(text, strict_mode=True) for text in texts]

else:  # pragma: no cover

    def _binary_column(texts: list[Any]) -> list[Any] | None:
        return list(map(b64decode_strict, texts))


# ---------------------------------------------------------------- the table

_QUOTE = json.encoder.encode_basestring  # the C encoder's own string writer
_T = EdmType

_SPECS = (
    EdmTypeSpec(
        _T.STRING, str, "str", declared_by=(str,), sent_from=(str,), check=_check_string,
        size=4, measure=utf16_len,
        to_atom=str, from_atom=text_as_is, atom_reader=text_as_is,
        to_json=_as_is, json_annotated=False, json_bare_kinds=(str,),
        # Annotated strings are rare: their reader checks the JSON kind.
        from_json=_string_from_json, json_reader=_string_from_json, json_column_reader=_each(_string_from_json),
        json_template=_for_classes("%s", _QUOTE, str),
        filter_literal=_string_literal, order_key=_string_order,
    ),
    EdmTypeSpec(
        _T.INT32, int, "int", declared_by=(int,), sent_from=(int,),
        check=_integer_check(_T.INT32, INT32_MIN, INT32_MAX), size=4, measure=_no_length,
        to_atom=_integer_text, from_atom=int32_from_wire, atom_reader=int32_from_wire,
        to_json=_as_is, json_annotated=False, json_bare_kinds=(int,),
        from_json=int32_from_wire, json_reader=int32_from_wire, json_column_reader=_each(int32_from_wire),
        json_template=_for_classes("%s", int.__repr__, int),
        filter_literal=_int32_literal, order_key=_as_is,
    ),
    EdmTypeSpec(
        # Declared with the Int64 annotation (Annotated[int, EdmType.INT64]); sent for ints beyond Int32.
        _T.INT64, int, "int", declared_by=(), sent_from=(),
        check=_integer_check(_T.INT64, INT64_MIN, INT64_MAX), size=8, measure=_no_length,
        to_atom=_integer_text, from_atom=int64_from_wire, atom_reader=int64_from_wire,
        to_json=_json_int64, json_annotated=True, json_bare_kinds=(),  # a string in JSON
        from_json=int64_from_wire, json_reader=int64_from_wire, json_column_reader=_int64_column,
        json_template=_for_classes('"%s"', int.__repr__, int),
        filter_literal=_int64_literal, order_key=_as_is,
    ),
    EdmTypeSpec(
        # Annotated even when whole: 1.0 would otherwise read back as Int32. NaN and the
        # infinities are strings in JSON (the templates write finite doubles only).
        _T.DOUBLE, float, "float", declared_by=(float,), sent_from=(float,), check=_check_double,
        size=8, measure=_no_length,
        to_atom=_atom_double, from_atom=_double_from_atom, atom_reader=float,  # float reads every such text alike
        to_json=_json_double, json_annotated=True, json_bare_kinds=(float,),
        from_json=_double_from_json, json_reader=_json_double_reader, json_column_reader=_each(_json_double_reader),
        json_template=_for_classes("%s", float.__repr__, float),
        filter_literal=_double_literal, order_key=_as_is,
    ),
    EdmTypeSpec(
        _T.BOOLEAN, bool, "bool", declared_by=(bool,), sent_from=(bool,), check=_check_boolean,
        size=1, measure=_no_length,
        to_atom=_true_false, from_atom=_boolean_from_atom, atom_reader=_atom_boolean_reader,
        to_json=_as_is, json_annotated=False, json_bare_kinds=(bool,),
        from_json=_boolean_from_json, json_reader=_boolean_from_json, json_column_reader=_each(_boolean_from_json),
        json_template=_for_classes("%s", {True: "true", False: "false"}.__getitem__, bool),
        filter_literal=_boolean_literal, order_key=_no_order,
    ),
    EdmTypeSpec(
        _T.DATETIME, datetime, "datetime", declared_by=(datetime,), sent_from=(datetime, EdmDateTime),
        check=_check_datetime, size=8, measure=_no_length,
        to_atom=format_datetime, from_atom=_datetime_from_atom, atom_reader=_datetime_from_atom,
        to_json=format_datetime, json_annotated=True, json_bare_kinds=(),
        from_json=parse_datetime, json_reader=parse_datetime, json_column_reader=_datetime_column,
        json_template=_datetime_template,
        filter_literal=_datetime_literal, order_key=_datetime_order,
    ),
    EdmTypeSpec(
        _T.GUID, uuid.UUID, "uuid.UUID", declared_by=(uuid.UUID,), sent_from=(uuid.UUID,), check=_check_guid,
        size=16, measure=_no_length,
        to_atom=str, from_atom=_guid_from_text, atom_reader=_atom_guid_reader,
        to_json=str, json_annotated=True, json_bare_kinds=(),
        from_json=uuid.UUID, json_reader=guid_from_wire, json_column_reader=_guid_column,
        json_template=_for_classes('"%s"', uuid.UUID.__str__, uuid.UUID),
        filter_literal=_guid_literal, order_key=_no_order,
    ),
    EdmTypeSpec(
        _T.BINARY, bytes, "bytes", declared_by=(bytes,), sent_from=(bytes, bytearray, memoryview),
        check=_check_binary, size=4, measure=len,
        to_atom=_atom_binary, from_atom=_b64decode, atom_reader=b64decode_strict,
        to_json=_json_binary, json_annotated=True, json_bare_kinds=(),
        # b64decode_strict is exactly from_json's base64.b64decode(validate=True), without its frames.
        from_json=_b64decode, json_reader=b64decode_strict, json_column_reader=_binary_column,
        json_template=_for_classes('"%s"', _json_binary, bytes, bytearray),
        filter_literal=_binary_literal, order_key=_no_order,
    ),
)

#: The spec of each EDM type, in :class:`EdmType` order.
EDM_SPECS: dict[EdmType, EdmTypeSpec] = {spec.edm_type: spec for spec in _SPECS}
