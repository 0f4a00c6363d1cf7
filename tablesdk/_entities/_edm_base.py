"""What the table of EDM types (:mod:`tablesdk._entities._edm_specs`) is built from.

The type names (:class:`EdmType`), the numeric and size limits, :class:`EdmDateTime`
and the Edm.DateTime wire text, and the readers of wire values shared by more than
one type or format (range-checked integers, GUIDs, strict base64). Nothing here
dispatches on a type: that is the table's job. Import these names from
:mod:`tablesdk._entities._edm`, which re-exports them.
"""

from __future__ import annotations

import base64
import binascii
import functools
import sys
import uuid
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Annotated, Any, Callable

from .._core._errors import TableValidationError
from .._core._patterns import pattern_on_first_use

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: Strings are measured in UTF-16 bytes, binary in bytes (the service's 64 KiB rule).
MAX_PROPERTY_BYTES = 64 * 1024
#: An entity's size limit (1 MiB) and a key's (1 KiB, UTF-16): service limits the bundled emulator
#: enforces too, kept in the EDM modules because it may import nothing of the client but these.
MAX_ENTITY_BYTES = 1024 * 1024
MAX_KEY_BYTES = 1024
DATETIME_MIN = datetime(1601, 1, 1, tzinfo=timezone.utc)
DATETIME_MAX = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc)


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

    # The seventh digit lives in a slot, set by every maker of a value here (the readers set it
    # a column at a time): no instance __dict__ is made for it (about 500 instructions and 330
    # bytes for each read Timestamp, whose seventh digit is seldom 0: 105 bytes a value, not 432).
    # __dict__ and __weakref__ stay, as every datetime subclass without __slots__ has them.
    __slots__ = ("ticks_remainder", "__dict__", "__weakref__")

    ticks_remainder: int

    def __new__(cls, *args: Any, ticks_remainder: int = 0, **kwargs: Any) -> EdmDateTime:
        # datetime.__new__ directly (no super() lookup).
        self: EdmDateTime = _NEW_DATETIME(cls, *args, **kwargs)
        self.ticks_remainder = ticks_remainder
        return self

    def __getattr__(self, name: str) -> Any:
        # Only for attributes not found: a value made by datetime's own C methods (replace())
        # has no seventh digit set, which reads as 0, the digit of every such value.
        if name == "ticks_remainder":
            return 0
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}", name=name, obj=self)

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


#: A Python str can hold surrogate code points that no Unicode encoding can send.


_surrogate = pattern_on_first_use("[\ud800-\udfff]")


def check_text(name: str, text: str) -> None:
    """Raise :class:`TableValidationError` when ``text`` holds a lone surrogate.

    UTF-8 and UTF-16 cannot encode one, so such a string could only be sent
    altered; ``str.isascii`` answers in constant time for the common case.
    """
    if not text.isascii():
        bad = _surrogate().search(text)
        if bad is not None:
            raise TableValidationError(
                name, "strings must be valid Unicode (a lone surrogate cannot be sent)",
                f"found {bad.group()!r} at index {bad.start()}",
            )


def utf16_len(text: str) -> int:
    """Size of ``text`` in UTF-16 bytes (the unit of the service's string and key limits)."""
    if text.isascii():
        return 2 * len(text)
    return len(text.encode("utf-16-le"))


def as_utc(value: datetime) -> datetime:
    """``value`` as an aware UTC datetime (a naive one is taken to be UTC)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    if value.utcoffset() == timedelta(0):
        return value
    return value.astimezone(timezone.utc)


def format_datetime(value: datetime) -> str:
    """Edm.DateTime wire text: ``YYYY-MM-DDTHH:MM:SS.fffffffZ`` (7 digits, UTC)."""
    utc = value if value.tzinfo is _UTC else as_utc(value)  # every DateTime a query reads is UTC
    remainder = value.ticks_remainder if isinstance(value, EdmDateTime) else 0 if type(value) is datetime \
        else getattr(value, "nanosecond", 0) // 100  # a pandas.Timestamp's 100 ns digit
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
            if not "0" <= digit <= "9":
                return _parse_datetime_slow(text)
            value.ticks_remainder = ord(digit) - 48
        else:
            value.ticks_remainder = 0
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
        utc = as_utc(value)
    except OverflowError:  # an offset that moves the instant past year 1 or 9999
        raise ValueError(f"not an Edm.DateTime value: {text!r}") from None
    digits = (frac_digits + "0000000")[:7]
    return EdmDateTime(
        utc.year, utc.month, utc.day, utc.hour, utc.minute, utc.second, int(digits[:6]),
        timezone.utc, ticks_remainder=int(digits[6]),
    )


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


