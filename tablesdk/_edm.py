"""EDM property types and the conversions between Python values and wire text.

Every conversion between a Python value and its wire form lives here, for the
AtomPub text form, the JSON form and the ``$filter`` literal form, so that the
codecs and the query builder agree on each type.

Python types by EDM type::

    Edm.String    str                 Edm.Boolean   bool
    Edm.Int32     int                 Edm.DateTime  datetime (aware, UTC)
    Edm.Int64     int                 Edm.Guid      uuid.UUID
    Edm.Double    float               Edm.Binary    bytes

Naive datetimes are taken to be UTC, everywhere (entities and filters): the
service stores UTC only, and guessing the machine's local zone would make the
same code store different instants on different machines. Values read back are
always aware ``datetime``s in UTC.

Edm.DateTime carries 100-nanosecond ticks (7 fractional digits) while Python
keeps microseconds. Values read from the service are :class:`EdmDateTime`
instances that remember the seventh digit, so writing back an unchanged value
sends exactly what was read (no drift on round trip).
"""

from __future__ import annotations

import base64
from decimal import Decimal
import binascii
import functools
import math
import re
import sys
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Annotated, Any, Callable, TypeVar

from ._errors import TableValidationError

__all__ = [
    "EdmType",
    "EntityPayload",
    "EntityPage",
    "EntityProperty",
    "EdmDateTime",
    "Int64",
    "INT32_MIN",
    "INT32_MAX",
    "INT64_MIN",
    "INT64_MAX",
    "MAX_PROPERTY_BYTES",
    "MAX_ENTITY_BYTES",
    "MAX_KEY_BYTES",
    "infer_edm_type",
    "check_value",
    "check_text",
    "format_datetime",
    "parse_datetime",
    "to_atom_text",
    "from_atom_text",
    "to_json_value",
    "from_json_value",
    "to_filter_literal",
]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: Strings are measured in UTF-16 bytes, binary in bytes (the service's 64 KiB rule).
MAX_PROPERTY_BYTES = 64 * 1024
#: An entity's size limit (1 MiB) and a key's (1 KiB, UTF-16): service limits the bundled emulator
#: enforces too, kept here because it may import nothing of the client but this module.
MAX_ENTITY_BYTES = 1024 * 1024
MAX_KEY_BYTES = 1024
DATETIME_MIN = datetime(1601, 1, 1, tzinfo=timezone.utc)
DATETIME_MAX = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc)


#: What a write plan or JSON template is chosen by: the property names in order, their values'
#: classes and their remembered EDM types (None where none is remembered).
ValueShape = tuple[tuple[str, ...], tuple[type, ...], tuple["EdmType | None", ...]]


def value_shape(values: dict[str, Any], types: dict[str, EdmType]) -> ValueShape:
    """The :data:`ValueShape` of ``values`` with the remembered ``types`` (three C passes)."""
    return (tuple(values), tuple(map(type, values.values())), tuple(map(types.get, values)))


_K = TypeVar("_K")
_V = TypeVar("_V")


class ShapeMemo(dict[_K, _V]):
    """``memo[key]`` is ``make(key)``, remembered while the memo holds fewer than ``limit``.

    A hit is a plain dict lookup; ``make`` runs only on a miss. The bound keeps a
    table of ever-new shapes from growing the memo without end (those are made afresh).
    """

    __slots__ = ("_make", "_limit")

    def __init__(self, make: Callable[[_K], _V], limit: int) -> None:
        super().__init__()
        self._make = make
        self._limit = limit

    def __missing__(self, key: _K) -> _V:
        value = self._make(key)
        if len(self) < self._limit:
            self[key] = value
        return value


class EdmType(str, Enum):
    """The property types the Table service stores."""

    STRING = "Edm.String"
    INT32 = "Edm.Int32"
    INT64 = "Edm.Int64"
    DOUBLE = "Edm.Double"
    BOOLEAN = "Edm.Boolean"
    DATETIME = "Edm.DateTime"
    GUID = "Edm.Guid"
    BINARY = "Edm.Binary"

    def __str__(self) -> str:
        return self.value


#: Annotation for a declared Int64 property: ``Views: Int64`` (values are ints).
Int64 = Annotated[int, EdmType.INT64]


_NEW_DATETIME = datetime.__new__


class EdmDateTime(datetime):
    """An aware UTC ``datetime`` that also remembers the 100 ns digit of Edm.DateTime.

    ``ticks_remainder`` (0..9) is the seventh fractional digit, which a Python
    ``datetime`` cannot hold. Arithmetic on an EdmDateTime returns a plain
    ``datetime`` and so drops the digit, as any change of value should.
    """

    #: The class default: a value whose seventh digit is 0 (every value a Python
    #: client wrote, and most read back) carries no instance attribute at all.
    ticks_remainder: int = 0

    def __new__(cls, *args: Any, ticks_remainder: int = 0, **kwargs: Any) -> EdmDateTime:
        # datetime.__new__ directly (no super() lookup) and the attribute only when non-zero:
        # every value of every query page is built here.
        self: EdmDateTime = _NEW_DATETIME(cls, *args, **kwargs)
        if ticks_remainder:
            self.ticks_remainder = ticks_remainder
        return self

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (_rebuild_edm_datetime, (self.isoformat(), self.ticks_remainder))

    def __repr__(self) -> str:
        base = datetime.__repr__(self).replace("EdmDateTime", "datetime.datetime", 1)
        if self.ticks_remainder:
            return f"EdmDateTime({base}, ticks_remainder={self.ticks_remainder})"
        return base


def _rebuild_edm_datetime(iso: str, remainder: int) -> EdmDateTime:
    value = datetime.fromisoformat(iso)
    return EdmDateTime(
        value.year, value.month, value.day, value.hour, value.minute, value.second,
        value.microsecond, value.tzinfo, ticks_remainder=remainder,
    )


@dataclass(frozen=True)
class EntityProperty:
    """A value with an explicit EDM type, e.g. ``EntityProperty(5, EdmType.INT64)``.

    The value is checked against the type when the property is created.
    """

    value: Any
    edm_type: EdmType

    def __post_init__(self) -> None:
        if not isinstance(self.edm_type, EdmType):
            raise TypeError(f"EntityProperty type must be an EdmType, not {self.edm_type!r}")
        if self.value is not None:
            check_value("value", self.value, self.edm_type)


@dataclass
class EntityPayload:
    """An entity as the codecs see it: no classes, only values and their EDM types.

    ``values`` holds every property including ``PartitionKey``, ``RowKey`` and,
    when read, ``Timestamp``; a None value is a null. ``types`` holds the EDM
    type of each property whose type is known: all of them when writing; when
    reading, those the wire stated or implied (JSON ``nometadata`` states none).
    """

    values: dict[str, Any]
    types: dict[str, EdmType]
    etag: str | None = None


class EntityPage:
    """The entities of one query response, decoded together.

    Entity ``i`` is what ``EntityPayload(values[i], types[i], etags[i])`` holds.
    A codec that decodes a page column by column shares one ``types`` dict
    between the entities that have the same types: read those dicts, never
    change them (:meth:`payloads` gives each payload its own copy).
    """

    __slots__ = ("values", "types", "etags", "_payloads")

    def __init__(
        self, values: list[dict[str, Any]], types: list[dict[str, EdmType]], etags: list[str | None]
    ) -> None:
        self.values = values
        self.types = types
        self.etags = etags
        self._payloads: list[EntityPayload] | None = None

    @classmethod
    def of(cls, payloads: list[EntityPayload]) -> EntityPage:
        """The page of these payloads (which :meth:`payloads` gives back as they are)."""
        page = cls([p.values for p in payloads], [p.types for p in payloads], [p.etag for p in payloads])
        page._payloads = payloads
        return page

    def __len__(self) -> int:
        return len(self.values)

    def payloads(self) -> list[EntityPayload]:
        """The page as payloads, each with its own ``types`` dict."""
        if self._payloads is None:
            self._payloads = list(map(EntityPayload, self.values, map(dict.copy, self.types), self.etags))
        return self._payloads


def infer_edm_type(value: Any, name: str = "value") -> EdmType:
    """The EDM type a plain Python value is sent as.

    ``int`` is Int32 when it fits and Int64 otherwise; use ``EntityProperty`` or
    the ``Int64`` annotation to send a small number as Int64.
    """
    if isinstance(value, EntityProperty):
        return value.edm_type
    if isinstance(value, str):
        return EdmType.STRING
    if isinstance(value, bool):
        return EdmType.BOOLEAN
    if isinstance(value, int):
        if INT32_MIN <= value <= INT32_MAX:
            return EdmType.INT32
        if INT64_MIN <= value <= INT64_MAX:
            return EdmType.INT64
        raise TableValidationError(name, f"integers must fit in Edm.Int64 [{INT64_MIN}, {INT64_MAX}]", f"got {value}")
    if isinstance(value, float):
        return EdmType.DOUBLE
    if isinstance(value, datetime):
        return EdmType.DATETIME
    if isinstance(value, uuid.UUID):
        return EdmType.GUID
    if isinstance(value, (bytes, bytearray, memoryview)):
        return EdmType.BINARY
    raise TableValidationError(
        name,
        "property values must be str, int, float, bool, datetime, uuid.UUID, bytes or EntityProperty",
        f"got {type(value).__name__}",
    )


#: A Python str can hold surrogate code points that no Unicode encoding can send.
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_text(name: str, text: str) -> None:
    """Raise :class:`TableValidationError` when ``text`` holds a lone surrogate.

    UTF-8 and UTF-16 cannot encode one, so such a string could only be sent
    altered; ``str.isascii`` answers in constant time for the common case.
    """
    if not text.isascii():
        bad = _SURROGATE.search(text)
        if bad is not None:
            raise TableValidationError(
                name, "strings must be valid Unicode (a lone surrogate cannot be sent)",
                f"found {bad.group()!r} at index {bad.start()}",
            )


def _utf16_size(text: str) -> int:
    # Characters outside the BMP take two UTF-16 units; everything else one.
    return 2 * (len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF))


def check_value(name: str, value: Any, edm_type: EdmType) -> None:
    """Raise :class:`TableValidationError` when ``value`` cannot be sent as ``edm_type``."""
    if edm_type is EdmType.STRING:
        if not isinstance(value, str):
            raise TableValidationError(name, "Edm.String needs a str", f"got {type(value).__name__}")
        check_text(name, value)
        # UTF-16 takes 2 or 4 bytes a character: count exactly only when it could matter.
        if len(value) * 4 > MAX_PROPERTY_BYTES and _utf16_size(value) > MAX_PROPERTY_BYTES:
            raise TableValidationError(
                name, "strings are at most 64 KiB in UTF-16 (32,768 characters)",
                f"got {_utf16_size(value)} bytes",
            )
    elif edm_type is EdmType.INT32 or edm_type is EdmType.INT64:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TableValidationError(name, f"{edm_type.value} needs an int", f"got {type(value).__name__}")
        lo, hi = (INT32_MIN, INT32_MAX) if edm_type is EdmType.INT32 else (INT64_MIN, INT64_MAX)
        if not lo <= value <= hi:
            raise TableValidationError(name, f"{edm_type.value} range is [{lo}, {hi}]", f"got {value}")
    elif edm_type is EdmType.DOUBLE:
        if isinstance(value, bool) or not isinstance(value, (float, int)):
            raise TableValidationError(name, "Edm.Double needs a float", f"got {type(value).__name__}")
        if type(value) is not float and isinstance(value, int) and not _exact_double(value):
            raise TableValidationError(
                name, "an int sent as Edm.Double must convert to a double exactly",
                f"{value} would be stored as {_nearest_double(value)}",
            )
    elif edm_type is EdmType.BOOLEAN:
        if not isinstance(value, bool):
            raise TableValidationError(name, "Edm.Boolean needs a bool", f"got {type(value).__name__}")
    elif edm_type is EdmType.DATETIME:
        if not isinstance(value, datetime):
            raise TableValidationError(name, "Edm.DateTime needs a datetime", f"got {type(value).__name__}")
        try:
            utc = _as_utc(value)
        except OverflowError:  # an aware value whose UTC instant is past year 1 or 9999
            raise TableValidationError(
                name, "Edm.DateTime range is 1601-01-01 to 9999-12-31 UTC", f"got {value.isoformat()}"
            ) from None
        if not DATETIME_MIN <= utc <= DATETIME_MAX:
            raise TableValidationError(
                name, "Edm.DateTime range is 1601-01-01 to 9999-12-31 UTC", f"got {utc.isoformat()}"
            )
    elif edm_type is EdmType.GUID:
        if not isinstance(value, uuid.UUID):
            raise TableValidationError(name, "Edm.Guid needs a uuid.UUID", f"got {type(value).__name__}")
    elif edm_type is EdmType.BINARY:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TableValidationError(name, "Edm.Binary needs bytes", f"got {type(value).__name__}")
        if len(value) > MAX_PROPERTY_BYTES:
            raise TableValidationError(name, "binary values are at most 64 KiB", f"got {len(value)} bytes")


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


def _as_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    if value.utcoffset() == timedelta(0):
        return value
    return value.astimezone(timezone.utc)


def format_datetime(value: datetime) -> str:
    """Edm.DateTime wire text: ``YYYY-MM-DDTHH:MM:SS.fffffffZ`` (7 digits, UTC)."""
    utc = value if value.tzinfo is _UTC else _as_utc(value)  # every DateTime a query reads is UTC
    remainder = value.ticks_remainder if isinstance(value, EdmDateTime) else 0
    return "%04d-%02d-%02dT%02d:%02d:%02d.%06d%dZ" % (
        utc.year, utc.month, utc.day, utc.hour, utc.minute, utc.second, utc.microsecond, remainder,
    )


_FROM_ISO = datetime.fromisoformat
_UTC = timezone.utc


def parse_datetime(text: str) -> EdmDateTime:
    """Parse Edm.DateTime wire text into an aware UTC :class:`EdmDateTime`.

    Accepts 0 to 7 (or more, truncated past the 7th) fractional digits, a ``Z``
    or numeric offset, or no zone (taken as UTC, as the service does).
    """
    # Fast path for every form the service writes: YYYY-MM-DDTHH:MM:SS, then either Z or
    # a fraction of 1 to 7 digits with trailing zeros trimmed (.1234567Z, .94687Z, .1Z) and Z.
    # It runs for every DateTime of every query page; anything else takes the general parser.
    n = len(text)
    if 20 <= n <= 28 and text[n - 1] == "Z" and (n == 20 or text[19] == "."):
        try:
            base = _read_service_form(text)
        except ValueError:
            return _parse_datetime_slow(text)
        # datetime.__new__ on the subclass is C only (EdmDateTime(...) would run its Python
        # __new__): a third of the cost.
        value: EdmDateTime = _NEW_DATETIME(
            EdmDateTime, base.year, base.month, base.day, base.hour, base.minute, base.second,
            base.microsecond, _UTC,
        )
        if n == 28:  # the seventh digit, which a datetime cannot hold
            digit = text[26]
            if digit != "0":
                if not "1" <= digit <= "9":
                    return _parse_datetime_slow(text)
                value.ticks_remainder = ord(digit) - 48
        return value
    return _parse_datetime_slow(text)


def _read_service_form_py310(text: str) -> datetime:
    """``_read_service_form`` where fromisoformat reads only 0, 3 or 6 digits and no ``Z``."""
    base = _FROM_ISO(text[:19])
    n = len(text)
    if n == 20:
        return base
    fraction = text[20 : n - 1]
    if not (fraction.isascii() and fraction.isdigit()):
        raise ValueError(f"not an Edm.DateTime value: {text!r}")
    return base.replace(microsecond=int((fraction + "00000")[:6]))


if sys.version_info >= (3, 11):
    # fromisoformat reads the Z and any number of digits, truncating past six (the seventh
    # is read separately), all in C.
    _read_service_form: Callable[[str], datetime] = _FROM_ISO

else:  # pragma: no cover - the tests call _read_service_form_py310 directly
    _read_service_form = _read_service_form_py310


def _parse_datetime_slow(text: str) -> EdmDateTime:
    from dateutil import parser as date_parser  # only for unusual forms

    frac_digits = ""
    dot = text.find(".", 19)
    if dot != -1:
        end = dot + 1
        while end < len(text) and text[end].isdigit():
            end += 1
        frac_digits = text[dot + 1 : end]
        text = text[:dot] + text[end:]
    try:
        value = date_parser.isoparse(text)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"not an Edm.DateTime value: {text!r}") from exc
    try:
        utc = _as_utc(value)
    except OverflowError:  # an offset that moves the instant past year 1 or 9999
        raise ValueError(f"not an Edm.DateTime value: {text!r}") from None
    digits = (frac_digits + "0000000")[:7]
    return EdmDateTime(
        utc.year, utc.month, utc.day, utc.hour, utc.minute, utc.second, int(digits[:6]),
        timezone.utc, ticks_remainder=int(digits[6]),
    )


# ---------------------------------------------------------------- AtomPub text

def to_atom_text(value: Any, edm_type: EdmType) -> str:
    """The text content of a ``<d:Name m:type=...>`` element for ``value``."""
    if edm_type is EdmType.STRING:
        return str(value)
    if edm_type is EdmType.BOOLEAN:
        return "true" if value else "false"
    if edm_type is EdmType.INT32 or edm_type is EdmType.INT64:
        return str(int(value))
    if edm_type is EdmType.DOUBLE:
        number = float(value)
        if math.isnan(number):
            return "NaN"
        if math.isinf(number):
            return "INF" if number > 0 else "-INF"
        return repr(number)  # the shortest text that reads back as the same double
    if edm_type is EdmType.DATETIME:
        return format_datetime(value)
    if edm_type is EdmType.GUID:
        return str(value)
    if edm_type is EdmType.BINARY:
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"unknown EDM type {edm_type!r}")


_ATOM_DOUBLE_SPECIALS = {"NaN": math.nan, "INF": math.inf, "-INF": -math.inf,
                         "Infinity": math.inf, "-Infinity": -math.inf}


def int32_from_wire(value: Any) -> int:
    """An Edm.Int32 read from a response (JSON number or Atom text), range-checked.

    Raises ValueError for anything else, so a malformed answer is never read as
    a number the service cannot hold (or a double silently truncated).
    """
    # One call per value: this runs for every annotated integer of every page.
    if type(value) is int:
        number = value
    elif type(value) is str and len(value) <= 24:  # int() of a 100,000-digit text is slow
        number = int(value)
    else:
        raise ValueError(f"not an integer: {str(value)[:40]!r}")
    if INT32_MIN <= number <= INT32_MAX:
        return number
    raise ValueError(f"{number} is outside the Edm.Int32 range")


def int64_from_wire(value: Any) -> int:
    """An Edm.Int64 read from a response (a JSON string or number, Atom text), range-checked."""
    if type(value) is str and len(value) <= 24:  # the JSON form: a string
        number = int(value)
    elif type(value) is int:
        number = value
    else:
        raise ValueError(f"not an integer: {str(value)[:40]!r}")
    if INT64_MIN <= number <= INT64_MAX:
        return number
    raise ValueError(f"{number} is outside the Edm.Int64 range")


_NEW_OBJECT = object.__new__
_SET_SLOT = object.__setattr__
_UUID, _UUID_UNKNOWN = uuid.UUID, uuid.SafeUUID.unknown


def guid_from_wire(value: Any) -> uuid.UUID:
    """``uuid.UUID(value)``, for the service's 36-character form without the Python ``__init__``.

    ``UUID.__init__`` drops ``urn:``, ``uuid:``, braces and hyphens, needs 32 characters
    left and reads them with ``int(_, 16)``: for a text with none of the first three
    (any of them makes that ``int`` fail) this is the same reading, and the same object.
    """
    if type(value) is str and len(value) == 36:
        digits = value.replace("-", "")
        if len(digits) == 32:
            try:
                number = int(digits, 16)
            except ValueError:
                pass
            else:
                guid = _NEW_OBJECT(_UUID)
                _SET_SLOT(guid, "int", number)
                _SET_SLOT(guid, "is_safe", _UUID_UNKNOWN)
                return guid
    return _UUID(value)


if sys.version_info >= (3, 11):
    #: ``base64.b64decode(value, validate=True)``: on 3.11 and later exactly this call, all in C.
    b64decode_strict: Callable[[Any], bytes] = functools.partial(binascii.a2b_base64, strict_mode=True)
else:  # pragma: no cover - CI runs 3.11

    def b64decode_strict(value: Any) -> bytes:
        return base64.b64decode(value, validate=True)


def from_atom_text(text: str, edm_type: EdmType) -> Any:
    """Parse the text of an Atom property element of type ``edm_type``."""
    if edm_type is EdmType.STRING:
        return text
    if edm_type is EdmType.INT32:
        return int32_from_wire(text)
    if edm_type is EdmType.INT64:
        return int64_from_wire(text)
    if edm_type is EdmType.BOOLEAN:
        lowered = text.strip().lower()
        if lowered in ("true", "1"):
            return True
        if lowered in ("false", "0"):
            return False
        raise ValueError(f"not an Edm.Boolean value: {text!r}")
    if edm_type is EdmType.DOUBLE:
        special = _ATOM_DOUBLE_SPECIALS.get(text.strip())
        return special if special is not None else float(text)
    if edm_type is EdmType.DATETIME:
        return parse_datetime(text.strip())
    if edm_type is EdmType.GUID:
        return uuid.UUID(text.strip())
    if edm_type is EdmType.BINARY:
        return _b64decode(text)
    raise TypeError(f"unknown EDM type {edm_type!r}")


def _b64decode(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("not an Edm.Binary (base64) value") from exc


# ---------------------------------------------------------------- JSON

#: Types whose JSON value needs an ``@odata.type`` annotation to be read back as sent.
_JSON_ANNOTATED = frozenset({EdmType.INT64, EdmType.DATETIME, EdmType.GUID, EdmType.BINARY, EdmType.DOUBLE})


def _json_int64(value: Any) -> str:
    return str(int(value))


def _json_double(value: Any) -> Any:
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    return number


def _json_binary(value: Any) -> str:
    # What base64.b64encode does, without its Python frame: every Binary value written goes here.
    return _B2A_BASE64(bytes(value), newline=False).decode("ascii")


_B2A_BASE64 = binascii.b2a_base64


#: The JSON value of each type that travels with an ``@odata.type`` annotation
#: (the codec looks its writer up once per property instead of testing type by type).
JSON_ANNOTATED_WRITERS: dict[EdmType, Callable[[Any], Any]] = {
    EdmType.INT64: _json_int64,
    EdmType.DOUBLE: _json_double,
    EdmType.DATETIME: format_datetime,
    EdmType.GUID: str,
    EdmType.BINARY: _json_binary,
}


def to_json_value(value: Any, edm_type: EdmType) -> tuple[Any, bool]:
    """The JSON value for ``value`` and whether it needs an ``@odata.type`` annotation.

    Int64 travels as a string; doubles always carry the annotation, because a
    whole double such as ``1.0`` would otherwise come back as Int32, and
    non-finite doubles travel as ``"NaN"``, ``"Infinity"``, ``"-Infinity"``.
    """
    if edm_type is EdmType.STRING or edm_type is EdmType.BOOLEAN or edm_type is EdmType.INT32:
        return value, False
    writer = JSON_ANNOTATED_WRITERS.get(edm_type) if isinstance(edm_type, EdmType) else None
    if writer is None:
        raise TypeError(f"unknown EDM type {edm_type!r}")
    return writer(value), True


_JSON_DOUBLE_SPECIALS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf,
                         "INF": math.inf, "-INF": -math.inf}


def from_json_value(value: Any, edm_type: EdmType) -> Any:
    """Convert a JSON value known to be of ``edm_type`` into its Python value."""
    if edm_type is EdmType.STRING:
        if type(value) is not str:
            raise ValueError(f"Edm.String value is a JSON {type(value).__name__}")
        return value
    if edm_type is EdmType.BOOLEAN:
        if type(value) is not bool:
            raise ValueError(f"Edm.Boolean value is a JSON {type(value).__name__}")
        return value
    if edm_type is EdmType.INT32:
        return int32_from_wire(value)
    if edm_type is EdmType.INT64:
        return int64_from_wire(value)
    if edm_type is EdmType.DOUBLE:
        if isinstance(value, str):
            special = _JSON_DOUBLE_SPECIALS.get(value)
            return special if special is not None else float(value)
        return float(value)
    if edm_type is EdmType.DATETIME:
        return parse_datetime(value)
    if edm_type is EdmType.GUID:
        return uuid.UUID(value)
    if edm_type is EdmType.BINARY:
        return _b64decode(value)
    raise TypeError(f"unknown EDM type {edm_type!r}")


# ---------------------------------------------------------------- $filter

def to_filter_literal(value: Any, edm_type: EdmType, name: str = "value") -> str:
    """The OData ``$filter`` literal for ``value`` as ``edm_type``.

    Strings double their single quotes; Int64 carries the ``L`` suffix; doubles
    are written in positional notation (never an exponent) with a decimal point,
    so the service reads them as Edm.Double; non-finite doubles cannot be
    expressed and raise.
    """
    check_value(name, value, edm_type)
    if edm_type is EdmType.STRING:
        return "'" + str(value).replace("'", "''") + "'"
    if edm_type is EdmType.INT32:
        return str(int(value))
    if edm_type is EdmType.INT64:
        return f"{int(value)}L"
    if edm_type is EdmType.DOUBLE:
        number = float(value)
        if not math.isfinite(number):
            raise TableValidationError(name, "$filter cannot express NaN or infinite doubles", repr(number))
        # Positional notation only: Azurite reads an exponent literal such as 1e+300 as
        # matching nothing, without an error. The shortest repr's digits keep the value exact.
        text = format(Decimal(repr(number)), "f")
        if "." not in text:
            text += ".0"
        return text
    if edm_type is EdmType.BOOLEAN:
        return "true" if value else "false"
    if edm_type is EdmType.DATETIME:
        return f"datetime'{format_datetime(value)}'"
    if edm_type is EdmType.GUID:
        return f"guid'{value}'"
    if edm_type is EdmType.BINARY:
        return f"X'{bytes(value).hex()}'"
    raise TypeError(f"unknown EDM type {edm_type!r}")
