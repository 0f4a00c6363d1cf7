"""Field values beyond the EDM types: :class:`Converter` and the conversions tablesdk makes itself.

``enum.Enum`` and ``enum.Flag`` (by name or :class:`ByValue`), ``decimal.Decimal``,
``datetime.date``, ``datetime.timedelta`` and JSON text (:data:`Json`, :class:`AsJson`). Each conversion checks
the value it is given, so a value of the wrong type is refused by name before anything is
sent; :func:`value_to_wire` and :func:`value_from_wire` are how the entity layer calls a
converter (a user's included): whatever goes wrong becomes a :class:`TableValidationError`
naming the field, and on read the entity's keys.
"""

from __future__ import annotations

import datetime as _dt
import enum
import functools
import json
import operator
import sys
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Generic, TypeVar

from ._edm import EdmType
from .._core._errors import TableValidationError
from .._core._patterns import pattern_on_first_use

__all__ = [
    "AsJson",
    "ByValue",
    "Chunked",
    "ChunkPlan",
    "Converter",
    "Encrypted",
    "EncryptedMarker",
    "Json",
    "date_converter",
    "decimal_converter",
    "dynamic_to_wire",
    "enum_converter",
    "json_converter",
    "strip_optional",
    "timedelta_converter",
    "timedelta_text",
    "value_from_wire",
    "value_to_wire",
]

T = TypeVar("T")


class Converter(Generic[T]):
    """How a field's Python type is stored: ``Annotated[Money, Converter(to_wire, from_wire, EdmType.STRING)]``.

    ``to_wire`` turns a field value into a value of ``edm_type`` (default: the EDM type the
    value has, e.g. a ``str`` is Edm.String); ``from_wire`` turns the stored value back.
    ``None`` is never passed to either: a null stays ``None``. An exception either raises
    reaches the caller as a :class:`~tablesdk.TableValidationError` naming the field (on
    read, and the entity's keys), the original as its ``__cause__``.
    """

    __slots__ = ("to_wire", "from_wire", "edm_type")

    def __init__(
        self, to_wire: Callable[[T], Any], from_wire: Callable[[Any], T], edm_type: EdmType = EdmType.STRING
    ) -> None:
        self.to_wire = to_wire
        self.from_wire = from_wire
        self.edm_type = edm_type

    def __repr__(self) -> str:
        return f"Converter({self.to_wire!r}, {self.from_wire!r}, {self.edm_type})"


class ByValue:
    """Marker: ``Annotated[Color, ByValue]`` stores an ``enum.Enum`` field by its member's
    value (an int or str) instead of its name (the default)."""


class AsJson:
    """Marker: ``Annotated[list[int], AsJson]`` (or ``Json[list[int]]``) stores the field as JSON
    text (Edm.String) and rebuilds it on read as its annotation says (lists, tuples, sets,
    frozensets, dicts, and what they hold)."""


class Chunked:
    """Marker: ``Annotated[str, Chunked]`` or ``Annotated[bytes, Chunked]`` stores a value past the
    service's 64 KiB property limit across several properties, up to the 1 MiB entity limit.

    The property ``Name`` holds the first part and ``Name_1`` ... ``Name_15`` the rest, each at most
    64 KiB (32,768 UTF-16 code units of text, never cutting a surrogate pair; 65,536 bytes).
    Every write stores all of them, the parts the value does not need empty, so that a merge of
    a shorter value leaves no part of a longer one behind. ``Chunked(parts=4)`` keeps four
    properties (values up to 256 KiB) instead of sixteen. A read joins the parts; a query cannot
    filter on them (refused when it is built), and selecting the property selects every part.
    """

    __slots__ = ("parts",)

    #: Parts of 64 KiB the 1 MiB entity limit allows.
    MAX_PARTS = 16

    def __init__(self, parts: int = MAX_PARTS) -> None:
        if isinstance(parts, bool) or not isinstance(parts, int) or not 1 <= parts <= Chunked.MAX_PARTS:
            raise ValueError(f"Chunked(parts=...) is 1 to {Chunked.MAX_PARTS} (the 1 MiB entity), got {parts!r}")
        self.parts = parts

    def __repr__(self) -> str:
        return f"Chunked(parts={self.parts})"


#: Bytes of one part: the service's property limit (a string's UTF-16 bytes, a binary's bytes).
_PART_BYTES = 64 * 1024


class ChunkPlan:
    """How one ``Chunked`` field is split into properties and joined again.

    ``names`` are the stored names of its parts (``Name``, ``Name_1`` ...), ``edm_type`` Edm.String
    or Edm.Binary, ``field`` the field's path (what errors name).
    """

    __slots__ = ("names", "edm_type", "field", "owner")

    def __init__(self, owner: str, field: str, stored: str, edm_type: EdmType, parts: int) -> None:
        if edm_type not in (EdmType.STRING, EdmType.BINARY):
            raise TypeError(f"{owner}.{field}: Chunked stores str or bytes, not {edm_type.value}")
        self.owner = owner
        self.field = field
        self.edm_type = edm_type
        self.names = (stored, *(f"{stored}_{n}" for n in range(1, parts)))

    def __repr__(self) -> str:
        return f"ChunkPlan({self.field!r}, {len(self.names)} parts, {self.edm_type})"

    def split(self, value: Any) -> list[Any]:
        """The value of each part (the unused ones empty); None gives None for each.

        A value of the wrong type, or too long for the parts, raises TableValidationError naming the field."""
        count = len(self.names)
        if value is None:
            return [None] * count
        if self.edm_type is EdmType.STRING:
            if not isinstance(value, str):
                raise _wrong_type(self.owner, self.field, "str (Chunked)", value)
            parts: list[Any] = _split_text(value)
            empty: Any = ""
        else:
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise _wrong_type(self.owner, self.field, "bytes (Chunked)", value)
            data = bytes(value)
            parts = [data[at:at + _PART_BYTES] for at in range(0, len(data), _PART_BYTES)] or [b""]
            empty = b""
        if len(parts) > count:
            size = 2 * sum(map(len, parts)) if self.edm_type is EdmType.STRING else len(bytes(value))
            raise TableValidationError(
                self.field,
                f"{self.owner}.{self.field} is Chunked into at most {count} parts of 64 KiB ({count * _PART_BYTES} bytes)",
                f"got {len(parts)} parts, {size} bytes" + ("" if count == Chunked.MAX_PARTS else
                                                            f"; Chunked(parts=...) allows up to {Chunked.MAX_PARTS}"),
            )
        return parts + [empty] * (count - len(parts))

    def join(self, values: Mapping[str, Any]) -> Any:
        """The value the stored parts in ``values`` make (None when the first part is absent or null);
        a part that arrived untyped (JSON nometadata) is read as the field's type."""
        first = values.get(self.names[0])
        if first is None:
            return None
        parts = [values.get(name) for name in self.names]
        present = [part for part in parts if part is not None]
        if self.edm_type is EdmType.STRING:
            return "".join(present)
        return b"".join(_as_bytes(part) for part in present)


def _as_bytes(part: Any) -> bytes:
    if isinstance(part, str):  # an untyped Edm.Binary (JSON nometadata): its base64 text
        from ._edm import from_json_value

        return bytes(from_json_value(part, EdmType.BINARY))
    return bytes(part)


def _split_text(text: str) -> list[str]:
    """``text`` in parts of at most 32,768 UTF-16 code units, never cutting a surrogate pair."""
    units = _PART_BYTES // 2
    if text.isascii():
        return [text[at:at + units] for at in range(0, len(text), units)] or [""]
    data = text.encode("utf-16-le", "surrogatepass")
    parts = []
    start = 0
    while start < len(data):
        end = min(start + _PART_BYTES, len(data))
        if end < len(data) and 0xD8 <= data[end - 1] <= 0xDB:  # the high half of a pair ends this part
            end -= 2
        parts.append(data[start:end].decode("utf-16-le", "surrogatepass"))
        start = end
    return parts or [""]


#: ``Json[list[str]]``: a field stored as JSON text; to a type checker it is a ``list[str]``.
Json = Annotated[T, AsJson]


class EncryptedMarker:
    """Marker: ``Annotated[str, EncryptedMarker]`` (written ``Encrypted[str]``) encrypts the field on
    the client whenever the call has an encryption policy, and refuses to write it without one.

    Protocol 1.0 (the legacy clients') encrypts only strings; the authenticated protocol any
    type. The property is stored as Edm.Binary, so no ``$filter`` can compare it (refused when
    the query is built) and it cannot be ``Chunked``. See docs/encryption.md.
    """


#: ``Encrypted[str]``: a field encrypted on the client; to a type checker it is a ``str``.
Encrypted = Annotated[T, EncryptedMarker]


def strip_optional(hint: Any) -> Any:
    """``X`` of ``X | None`` (``Optional[X]``); any other hint as it is."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or type(hint).__name__ == "UnionType":
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


# ---------------------------------------------------------------- calling a converter


def _detail(exc: TableValidationError) -> str:
    """What ``exc`` says after its field and limit (the text in parentheses, if any)."""
    return str(exc)[len(f"{exc.field}: {exc.limit}"):].strip().removeprefix("(").removesuffix(")")


def value_to_wire(converter: Converter[Any], field: str, value: Any) -> Any:
    """``converter.to_wire(value)``; anything it raises becomes a TableValidationError naming ``field``."""
    try:
        return converter.to_wire(value)
    except TableValidationError as exc:
        if exc.field == field:
            raise
        raise TableValidationError(field, exc.limit, _detail(exc)) from None
    except Exception as exc:
        raise TableValidationError(
            field, "its converter cannot store the value", f"{type(exc).__name__}: {exc}"
        ) from exc


def value_from_wire(converter: Converter[Any], field: str, stored: Any, entity: Mapping[str, Any]) -> Any:
    """``converter.from_wire(stored)``; anything it raises becomes a TableValidationError naming
    ``field`` and the keys of ``entity`` (the stored values it comes from)."""
    try:
        return converter.from_wire(stored)
    except TableValidationError as exc:
        detail, limit, cause = _detail(exc), exc.limit, None
    except Exception as exc:
        detail, limit, cause = f"{type(exc).__name__}: {exc}", "its converter cannot read the stored value", exc
    keys = f"in the entity PartitionKey={entity.get('PartitionKey')!r}, RowKey={entity.get('RowKey')!r}"
    raise TableValidationError(field, limit, f"{detail}; {keys}" if detail else keys) from cause


def _wrong_type(owner: str, name: str, declared: str, value: Any, hint: str = "") -> TableValidationError:
    given = f"got {type(value).__name__}"
    return TableValidationError(name, f"{owner}.{name} is declared as {declared}", f"{given}{hint}")


# ---------------------------------------------------------------- enums and flags


def _flag_bits(cls: type[enum.Flag]) -> list[enum.Flag]:
    """The members of ``cls`` of one bit each, in definition order (what a stored name list is made of)."""
    members = dict.fromkeys(cls.__members__.values())  # an alias names a member already there
    return [m for m in members if isinstance(m.value, int) and m.value > 0 and not m.value & (m.value - 1)]


def _flag_by_name(owner: str, name: str, cls: type[enum.Flag]) -> Converter[Any]:
    """A Flag by name: the names of its one-bit members joined with '|' (``R|W``); no member is ''."""
    bits = _flag_bits(cls)

    def to_wire(value: Any) -> str:
        if not isinstance(value, cls):
            raise _wrong_type(owner, name, cls.__name__, value)
        names = [m.name for m in bits if m.value & value.value == m.value]
        covered = functools.reduce(operator.or_, (m.value for m in bits if m.name in names), 0)
        if covered != value.value:
            raise TableValidationError(
                name, f"{owner}.{name} is stored by the names of its members",
                f"{value!r} has bits no member of {cls.__name__} names; use Annotated[{cls.__name__}, ByValue]",
            )
        return "|".join(typing.cast(list[str], names))

    def from_wire(stored: Any) -> Any:
        if not isinstance(stored, str):
            raise TableValidationError(name, f"{owner}.{name} is stored as the names of {cls.__name__} members",
                                       f"the stored value is {type(stored).__name__}")
        value = cls(0)
        for part in stored.split("|") if stored else ():
            try:
                value |= cls[part]
            except KeyError:
                raise TableValidationError(
                    name, f"{part!r} is not a member of {cls.__name__}",
                    f"stored {stored!r}; members: {list(cls.__members__)}",
                ) from None
        return value

    return Converter(to_wire, from_wire, EdmType.STRING)


def enum_converter(owner: str, name: str, cls: type[enum.Enum], by_value: bool) -> Converter[Any]:
    """How field ``owner.name`` of enum class ``cls`` is stored: by its member's name, or value."""
    if by_value:
        values = [member.value for member in cls]
        kinds = {type(v) for v in values}
        if len(kinds) != 1 or next(iter(kinds)) not in (str, int):
            raise TypeError(f"{owner}.{name}: ByValue needs the members of {cls.__name__} to have str or int values")
        edm_type = EdmType.STRING if kinds == {str} else EdmType.INT32
        if edm_type is EdmType.INT32 and any(not (-(2**31) <= v < 2**31) for v in values):
            edm_type = EdmType.INT64

        def to_value(member: Any) -> Any:
            if not isinstance(member, cls):
                raise _wrong_type(owner, name, cls.__name__, member)
            return member.value

        def from_value(stored: Any) -> Any:
            try:
                return cls(stored)
            except (ValueError, TypeError):
                raise TableValidationError(
                    name, f"{stored!r} is not a value of {cls.__name__}", f"values: {values!r}"
                ) from None

        return Converter(to_value, from_value, edm_type)
    if issubclass(cls, enum.Flag):
        return _flag_by_name(owner, name, cls)

    def to_name(member: Any) -> str:
        if not isinstance(member, cls):
            raise _wrong_type(owner, name, cls.__name__, member)
        return member.name

    def from_name(stored: Any) -> Any:
        try:
            return cls[stored]
        except (KeyError, TypeError):
            raise TableValidationError(
                name, f"{stored!r} is not a member of {cls.__name__}", f"members: {list(cls.__members__)}"
            ) from None

    return Converter(to_name, from_name, EdmType.STRING)


# ---------------------------------------------------------------- decimals and dates


def decimal_converter(owner: str, name: str, decimal_class: type) -> Converter[Any]:
    """Decimals as their exact text: a Decimal to write (nothing else), the class to read back."""

    def to_wire(value: Any) -> str:
        if not isinstance(value, decimal_class):
            raise _wrong_type(owner, name, "Decimal", value, ": pass a decimal.Decimal (it is stored as its exact text)")
        return str(value)

    def from_wire(stored: Any) -> Any:
        if isinstance(stored, float):
            stored = repr(stored)  # a Double another client wrote: its shortest text, not its binary expansion
        if isinstance(stored, bool) or not isinstance(stored, (str, int)):
            raise TableValidationError(name, f"{owner}.{name} is stored as the text of a Decimal",
                                       f"the stored value is {type(stored).__name__}")
        try:
            return decimal_class(stored)
        except ArithmeticError:  # decimal.InvalidOperation
            raise TableValidationError(
                name, f"{owner}.{name} is stored as the text of a Decimal", f"{stored!r} is no number"
            ) from None

    return Converter(to_wire, from_wire, EdmType.STRING)


def date_converter(owner: str, name: str) -> Converter[Any]:
    """A day as midnight UTC of that day (Edm.DateTime); a datetime is refused (it has a time and a zone)."""

    def to_wire(day: Any) -> _dt.datetime:
        if isinstance(day, _dt.datetime):
            raise _wrong_type(
                owner, name, "date", day,
                ": a date field stores a day; pass value.date(), or value.astimezone(timezone.utc).date() for its UTC day",
            )
        if not isinstance(day, _dt.date):
            raise _wrong_type(owner, name, "date", day)
        return _dt.datetime(day.year, day.month, day.day, tzinfo=_dt.timezone.utc)

    def from_wire(stored: Any) -> _dt.date:
        if isinstance(stored, _dt.datetime):
            moment: _dt.datetime = stored
            return (moment.astimezone(_dt.timezone.utc) if moment.tzinfo is not None else moment).date()
        try:
            return _dt.date.fromisoformat(str(stored)[:10])
        except ValueError:
            raise TableValidationError(
                name, f"{owner}.{name} is stored as a DateTime (midnight UTC of the day)",
                f"cannot read a day from {type(stored).__name__}",
            ) from None

    return Converter(to_wire, from_wire, EdmType.DATETIME)


#: .NET's TimeSpan text ("c" format): [-][d.]hh:mm:ss[.fffffff].
_TIMESPAN = pattern_on_first_use(r"(-)?(?:(\d+)\.)?(\d{1,2}):(\d{2}):(\d{2})(?:\.(\d{1,7}))?")
_MICROSECOND = _dt.timedelta(microseconds=1)


def timedelta_text(value: _dt.timedelta) -> str:
    """``value`` as .NET writes a TimeSpan (``-1.02:03:04.5000000``): exact, as a timedelta has microseconds."""
    total = value // _MICROSECOND
    sign = "-" if total < 0 else ""
    seconds, micro = divmod(abs(total), 1_000_000)
    minutes, second = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    days, hour = divmod(hours, 24)
    text = f"{sign}{days}." if days else sign
    text += f"{hour:02d}:{minute:02d}:{second:02d}"
    return f"{text}.{micro * 10:07d}" if micro else text


def _timedelta_from_text(text: str) -> _dt.timedelta:
    match = _TIMESPAN().fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is no TimeSpan text ([-][d.]hh:mm:ss[.fffffff])")
    sign, days, hours, minutes, seconds, fraction = match.groups()
    ticks = int((fraction or "").ljust(7, "0"))
    if ticks % 10:
        raise ValueError(f"{text!r} has a fraction of 100 ns that a timedelta (microseconds) cannot hold")
    value = _dt.timedelta(
        days=int(days or 0), hours=int(hours), minutes=int(minutes), seconds=int(seconds), microseconds=ticks // 10
    )
    return -value if sign else value


def timedelta_converter(owner: str, name: str) -> Converter[Any]:
    """A duration as .NET's TimeSpan text (Edm.String): ``1.02:03:04.5000000`` (days, time, 100 ns ticks)."""

    def to_wire(value: Any) -> str:
        if not isinstance(value, _dt.timedelta):
            raise _wrong_type(owner, name, "timedelta", value)
        return timedelta_text(value)

    def from_wire(stored: Any) -> _dt.timedelta:
        if not isinstance(stored, str):
            raise TableValidationError(name, f"{owner}.{name} is stored as TimeSpan text",
                                       f"the stored value is {type(stored).__name__}")
        try:
            return _timedelta_from_text(stored)
        except (ValueError, OverflowError) as exc:
            raise TableValidationError(name, f"{owner}.{name} is stored as TimeSpan text", str(exc)) from None

    return Converter(to_wire, from_wire, EdmType.STRING)


# ---------------------------------------------------------------- values without an annotation


def dynamic_to_wire(name: str, value: Any) -> Any:
    """What a value with no annotation (a :class:`~tablesdk.DynamicEntity`'s, a dict's, an undeclared
    field's) of a type beyond the EDM types is stored as; any other value as it is.

    As a declared field of its type stores it: an ``Enum`` member by name (an ``enum.Flag`` by the
    names of its members joined with ``|``), a ``Decimal`` as its exact text, a ``date`` as midnight
    UTC of the day, a ``timedelta`` as .NET's TimeSpan text. Nothing on read knows the type, so
    they come back in that stored form (str, datetime). An enum that is also a ``str`` or an
    ``int`` (``StrEnum``, ``IntEnum``, ``IntFlag``) is that str or int: its value.
    """
    if isinstance(value, enum.Enum):
        if isinstance(value, (str, int)):
            return value
        return enum_converter(type(value).__name__, name, type(value), False).to_wire(value)
    if isinstance(value, _dt.date):
        if isinstance(value, _dt.datetime):
            return value
        return _dt.datetime(value.year, value.month, value.day, tzinfo=_dt.timezone.utc)
    if isinstance(value, _dt.timedelta):
        return timedelta_text(value)
    # decimal is not imported by ``import tablesdk`` (start-up): a Decimal value has imported it.
    decimal = sys.modules.get("decimal")
    if decimal is not None and isinstance(value, decimal.Decimal):
        return str(value)
    return value


# ---------------------------------------------------------------- JSON text


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _container_kind(hint: Any) -> str | None:
    """'sequence', 'tuple', 'set' or 'mapping' for a container annotation (None: anything else)."""
    origin = typing.get_origin(hint) or hint
    if origin in (list,) or getattr(origin, "__name__", "") in ("Sequence", "MutableSequence"):
        return "sequence"
    if origin is tuple:
        return "tuple"
    if origin in (set, frozenset) or getattr(origin, "__name__", "") in ("Set", "MutableSet", "AbstractSet"):
        return "set"
    if origin is dict or getattr(origin, "__name__", "") in ("Mapping", "MutableMapping"):
        return "mapping"
    return None


#: What a value annotated with each abstract container may be (a concrete one, ``list[int]``, takes its own class).
_ABSTRACT_CLASSES: dict[str, tuple[type, ...]] = {
    "sequence": (list, tuple), "tuple": (tuple,), "set": (set, frozenset), "mapping": (Mapping,),
}
#: The key classes of a JSON object that read back as keys of each annotated key type.
_KEY_CLASSES: dict[Any, tuple[type, ...]] = {int: (int,), float: (float,)}


def _json_shape_problem(hint: Any, given: object, where: str) -> str | None:
    """Why ``given`` would not be read back as ``hint`` from its JSON text (None: it would)."""
    value: Any = given
    if value is None:
        return None
    hint = strip_optional(hint)
    kind = _container_kind(hint)
    if kind is None:
        return None
    origin = typing.get_origin(hint) or hint
    classes: tuple[type, ...] = (origin,) if origin in (list, tuple, set, frozenset, dict) else _ABSTRACT_CLASSES[kind]
    if isinstance(value, (str, bytes)) or not any(isinstance(value, c) for c in classes):
        return f"{where} is a {type(value).__name__}, not a {getattr(origin, '__name__', origin)}"
    args = typing.get_args(hint)
    if kind == "mapping":
        key_type, value_type = args if len(args) == 2 else (Any, Any)
        keys = _KEY_CLASSES.get(key_type, (str,))
        for key, item in value.items():
            if isinstance(key, bool) or not isinstance(key, keys):
                return f"{where} has a key of type {type(key).__name__}, not {keys[0].__name__}"
            problem = _json_shape_problem(value_type, item, f"{where}[{key!r}]")
            if problem:
                return problem
        return None
    if kind == "tuple" and args and not (len(args) == 2 and args[1] is Ellipsis):
        if len(args) != len(value):
            return f"{where} has {len(value)} items, not {len(args)}"
        pairs = zip(args, value)
    else:
        pairs = zip([args[0]] * len(value) if args else [], value)
    for index, (item_hint, item) in enumerate(pairs):
        problem = _json_shape_problem(item_hint, item, f"{where}[{index}]")
        if problem:
            return problem
    return None


def _rebuild(hint: Any, data: Any) -> Any:
    """``data`` decoded from JSON, made again into what ``hint`` names (sets, tuples, int keys ...)."""
    hint = strip_optional(hint)
    if data is None:
        return None
    kind = _container_kind(hint)
    args = typing.get_args(hint)
    if kind is not None and not isinstance(data, dict if kind == "mapping" else list):
        raise TypeError(f"the JSON text holds a {type(data).__name__} where a {kind} is annotated")
    if kind in ("sequence", "set"):
        items = [_rebuild(args[0], item) for item in data] if args else list(data)
        origin = typing.get_origin(hint) or hint
        return origin(items) if origin in (set, frozenset) else set(items) if kind == "set" else items
    if kind == "tuple":
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_rebuild(args[0], item) for item in data)
        return tuple(_rebuild(a, item) for a, item in zip(args, data)) if args else tuple(data)
    if kind == "mapping":
        key_type, value_type = args if len(args) == 2 else (Any, Any)
        return {(key_type(k) if key_type in (int, float) else k): _rebuild(value_type, v) for k, v in data.items()}
    return data


def json_converter(owner: str, name: str, hint: Any) -> Converter[Any]:
    """Field ``owner.name`` annotated ``Json[hint]``: JSON text, checked to read back as ``hint``."""

    def to_wire(value: Any) -> str:
        problem = _json_shape_problem(hint, value, "the value")
        if problem:
            raise TableValidationError(name, f"{owner}.{name} is stored as JSON text of {hint!r}", problem)
        try:
            return json.dumps(value, default=_json_default, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise TableValidationError(name, f"{owner}.{name} is stored as JSON text", str(exc)) from None

    def from_wire(stored: Any) -> Any:
        try:
            return _rebuild(hint, json.loads(stored))
        except (TypeError, ValueError, AttributeError) as exc:
            raise TableValidationError(name, f"{owner}.{name} is stored as JSON text", f"cannot read it: {exc}") from None

    return Converter(to_wire, from_wire, EdmType.STRING)
