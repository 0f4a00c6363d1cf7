"""Model adapters: standard dataclasses, pydantic v2 models and attrs classes as entities.

One :class:`ModelAdapter` per model class, made the first time the class is met and kept
(:func:`adapter_for`): its fields, the name each is stored under, the EDM type each is
written as, the conversions of values beyond the EDM types (``enum.Enum``,
``decimal.Decimal``, ``datetime.date``, user :class:`Converter`\\ s), and how an instance
is made and read. :mod:`tablesdk._entity` checks and converts through it, so a model
class gets every rule a :class:`~tablesdk.TableEntity` gets.

Nothing here imports pydantic or attrs: a class is recognised by what those libraries put
on it (``model_fields``, ``__attrs_attrs__``), so only an application that defines such a
class needs the library.

This module also maps an annotation to an EDM type (:func:`edm_type_of_annotation`), for
declared entities and models alike.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import decimal
import enum
import sys
import typing
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from ._edm import EdmType, Int64
from ._edm_specs import EDM_SPECS
from ._errors import TableValidationError

__all__ = [
    "Converter",
    "StoredAs",
    "ByValue",
    "ModelField",
    "ModelAdapter",
    "adapter_for",
    "edm_type_of_annotation",
    "field_plan",
]

SYSTEM_FIELDS = ("PartitionKey", "RowKey", "Timestamp")

#: The EDM type each plain class annotation declares (``Rating: int``).
_ANNOTATION_TYPES: dict[Any, EdmType] = {hint: t for t, spec in EDM_SPECS.items() for hint in spec.declared_by}

T = TypeVar("T")


class Converter(Generic[T]):
    """How a field's Python type is stored: ``Annotated[Money, Converter(to_wire, from_wire, EdmType.STRING)]``.

    ``to_wire`` turns a field value into a value of ``edm_type`` (default: the EDM type the
    value has, e.g. a ``str`` is Edm.String); ``from_wire`` turns the stored value back.
    ``None`` is never passed to either: a null stays ``None``.
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


class StoredAs:
    """Store a field under another property name: ``Annotated[int, StoredAs("cpor")]``.

    PartitionKey, RowKey and Timestamp cannot be renamed, nor can a field be stored
    under those names.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"StoredAs({self.name!r})"


class ByValue:
    """Marker: ``Annotated[Color, ByValue]`` stores an ``enum.Enum`` field by its member's
    value (an int or str) instead of its name (the default)."""


def _enum_converter(owner: str, name: str, cls: type[enum.Enum], by_value: bool) -> Converter[Any]:
    if by_value:
        values = [member.value for member in cls]
        kinds = {type(v) for v in values}
        if len(kinds) != 1 or next(iter(kinds)) not in (str, int):
            raise TypeError(f"{owner}.{name}: ByValue needs the members of {cls.__name__} to have str or int values")
        edm_type = EdmType.STRING if kinds == {str} else EdmType.INT32
        if edm_type is EdmType.INT32 and any(not (-(2**31) <= v < 2**31) for v in values):
            edm_type = EdmType.INT64

        def from_value(stored: Any) -> Any:
            try:
                return cls(stored)
            except ValueError:
                raise TableValidationError(
                    name, f"{stored!r} is not a value of {cls.__name__}", f"values: {values!r}"
                ) from None

        return Converter(lambda member: member.value, from_value, edm_type)

    def from_name(stored: Any) -> Any:
        try:
            return cls[stored]
        except KeyError:
            raise TableValidationError(
                name, f"{stored!r} is not a member of {cls.__name__}", f"members: {list(cls.__members__)}"
            ) from None

    return Converter(lambda member: member.name, from_name, EdmType.STRING)


def _decimal_from_wire(stored: Any) -> decimal.Decimal:
    return decimal.Decimal(stored)


def _date_to_wire(day: _dt.date) -> _dt.datetime:
    return _dt.datetime(day.year, day.month, day.day, tzinfo=_dt.timezone.utc)


def _date_from_wire(stored: Any) -> _dt.date:
    return stored.date() if isinstance(stored, _dt.datetime) else _dt.date.fromisoformat(str(stored)[:10])


_DECIMAL = Converter(str, _decimal_from_wire, EdmType.STRING)
_DATE = Converter(_date_to_wire, _date_from_wire, EdmType.DATETIME)


def field_plan(owner: str, name: str, hint: Any) -> tuple[EdmType, str, Converter[Any] | None]:
    """(EDM type, stored name, converter or None) of a field annotated ``hint``; TypeError if unmappable."""
    stored = name
    converter: Converter[Any] | None = None
    explicit: EdmType | None = None
    by_value = False
    hint = _strip_optional(hint)  # Annotated[X, ...] | None
    if typing.get_origin(hint) is typing.Annotated:
        for extra in hint.__metadata__:
            if isinstance(extra, EdmType):
                explicit = extra
            elif isinstance(extra, StoredAs):
                stored = extra.name
            elif isinstance(extra, Converter):
                converter = extra
            elif extra is ByValue:
                by_value = True
        hint = typing.get_args(hint)[0]
    hint = _strip_optional(hint)
    if stored != name and (name in SYSTEM_FIELDS or stored in SYSTEM_FIELDS or name == "etag"):
        raise TypeError(f"{owner}.{name}: PartitionKey, RowKey, Timestamp and etag cannot be stored under another name")
    if converter is not None:
        return converter.edm_type, stored, converter
    if explicit is not None:
        return explicit, stored, None
    if isinstance(hint, type):
        if issubclass(hint, enum.Enum):
            converter = _enum_converter(owner, name, hint, by_value)
            return converter.edm_type, stored, converter
        if issubclass(hint, decimal.Decimal):
            return _DECIMAL.edm_type, stored, _DECIMAL
        if hint is _dt.date:
            return _DATE.edm_type, stored, _DATE
    return edm_type_of_annotation(owner, name, hint), stored, None


def _strip_optional(hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin is typing.Union or type(hint).__name__ == "UnionType":
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def edm_type_of_annotation(owner: str, name: str, hint: Any) -> EdmType:
    """The EDM type a property annotated ``hint`` declares (``Annotated[..., EdmType.X]`` wins)."""
    hint = _strip_optional(hint)
    if typing.get_origin(hint) is typing.Annotated:
        for extra in hint.__metadata__:
            if isinstance(extra, EdmType):
                return extra
        hint = typing.get_args(hint)[0]
    hint = _strip_optional(hint)
    if hint in _ANNOTATION_TYPES:
        return _ANNOTATION_TYPES[hint]
    raise TypeError(
        f"{owner}.{name}: cannot map annotation {hint!r} to an EDM type; use str, int, "
        "Int64, float, bool, datetime, uuid.UUID, bytes, date, Decimal, an Enum or Annotated[..., EdmType.X]"
    )


class ModelField:
    """One custom field of a model class: its attribute, stored name, EDM type and conversion."""

    __slots__ = ("name", "stored", "edm_type", "converter")

    def __init__(self, name: str, stored: str, edm_type: EdmType, converter: Converter[Any] | None) -> None:
        self.name = name
        self.stored = stored
        self.edm_type = edm_type
        self.converter = converter

    def __repr__(self) -> str:
        return f"ModelField({self.name!r}, stored={self.stored!r}, {self.edm_type})"


_MISSING: Any = object()


class ModelAdapter:
    """What tablesdk knows of one model class: made once per class by :func:`adapter_for`.

    ``kind`` is ``"dataclass"``, ``"pydantic"`` or ``"attrs"``; ``fields`` the custom
    fields in declaration order; ``etag_field`` / ``timestamp_field`` the attributes that
    hold the ETag and Timestamp (None: the class has none, a context keeps the ETag).
    """

    __slots__ = ("cls", "kind", "fields", "by_stored", "etag_field", "timestamp_field", "_make", "_required")

    def __init__(self, cls: type, kind: str, hints: dict[str, Any], names: list[str]) -> None:
        self.cls = cls
        self.kind = kind
        owner = cls.__name__
        for key in ("PartitionKey", "RowKey"):
            if key not in names:
                raise TypeError(f"{owner} is used as an entity but declares no {key} field (a str)")
        fields: list[ModelField] = []
        self.etag_field: str | None = "etag" if "etag" in names else None
        self.timestamp_field: str | None = "Timestamp" if "Timestamp" in names else None
        for name in names:
            hint = hints.get(name, Any)
            if name in ("PartitionKey", "RowKey", "Timestamp", "etag"):
                field_plan(owner, name, hint)  # refuses a renamed system field
                continue
            edm_type, stored, converter = field_plan(owner, name, hint)
            fields.append(ModelField(name, stored, edm_type, converter))
        stored_names = [f.stored for f in fields]
        twice = {s for s in stored_names if stored_names.count(s) > 1}
        if twice:
            raise TypeError(f"{owner}: two fields are stored as {sorted(twice)}")
        self.fields = tuple(fields)
        self.by_stored = {f.stored: f for f in fields}
        self._make: Callable[..., Any] = cls.model_construct if kind == "pydantic" else cls  # type: ignore[attr-defined]
        #: Fields the constructor needs (no default): given None when the service has no value.
        self._required = _required_fields(cls, kind)

    def __repr__(self) -> str:
        return f"ModelAdapter({self.cls.__name__}, {self.kind}, {list(self.fields)})"

    # ------------------------------------------------------------ reading an instance

    def properties(self, obj: Any) -> list[tuple[str, Any, EdmType]]:
        """(stored name, value as sent, declared EDM type) of every custom field of ``obj``."""
        out = []
        for f in self.fields:
            value = getattr(obj, f.name)
            if f.converter is not None and value is not None:
                value = f.converter.to_wire(value)
            out.append((f.stored, value, f.edm_type))
        return out

    def etag(self, obj: Any) -> str | None:
        """The ETag ``obj`` carries (None: the class keeps none)."""
        return getattr(obj, self.etag_field) if self.etag_field else None

    # ------------------------------------------------------------ making and changing an instance

    def build(self, values: dict[str, Any], etag: str | None, timestamp: Any) -> Any:
        """An instance from the stored ``values`` (stored names, wire values already decoded)."""
        kwargs: dict[str, Any] = {"PartitionKey": values.get("PartitionKey"), "RowKey": values.get("RowKey")}
        if self.timestamp_field:
            kwargs["Timestamp"] = timestamp
        if self.etag_field:
            kwargs["etag"] = etag
        for f in self.fields:
            value = values.get(f.stored, _MISSING)
            if value is _MISSING:
                if f.name in self._required:
                    kwargs[f.name] = None
                continue
            if f.converter is not None and value is not None:
                value = f.converter.from_wire(value)
            kwargs[f.name] = value
        return self._make(**kwargs)

    def assign(self, obj: Any, name: str, value: Any) -> None:
        """Set attribute ``name`` of ``obj``, frozen classes included (a context refreshes them)."""
        try:
            setattr(obj, name, value)
        except (AttributeError, TypeError, ValueError, dataclasses.FrozenInstanceError):
            object.__setattr__(obj, name, value)
        except Exception:  # pydantic's frozen-instance ValidationError
            object.__setattr__(obj, name, value)

    def set_etag(self, obj: Any, etag: str | None) -> None:
        """Store ``etag`` on ``obj`` if the class declares a field for it."""
        if self.etag_field:
            self.assign(obj, self.etag_field, etag)

    def set_timestamp(self, obj: Any, timestamp: Any) -> None:
        """Store ``timestamp`` on ``obj`` if the class declares a field for it."""
        if self.timestamp_field:
            self.assign(obj, self.timestamp_field, timestamp)


def _required_fields(cls: type, kind: str) -> frozenset[str]:
    if kind == "dataclass":
        return frozenset(
            f.name for f in dataclasses.fields(cls)
            if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        )
    if kind == "attrs":
        nothing = _attrs_nothing(cls)
        return frozenset(a.name for a in cls.__attrs_attrs__ if a.default is nothing)  # type: ignore[attr-defined]
    # pydantic: model_construct fills what is not given with the defaults, and leaves a required field unset
    return frozenset(name for name, info in cls.__pydantic_fields__.items() if info.is_required())  # type: ignore[attr-defined]


def _attrs_nothing(cls: type) -> Any:
    attrs = sys.modules.get("attr") or sys.modules.get("attrs")
    return getattr(attrs, "NOTHING", None)


def _is_pydantic(cls: type) -> bool:
    return isinstance(getattr(cls, "__pydantic_fields__", None), dict) and hasattr(cls, "model_construct")


#: The adapter of every class met (None: not a model class).
_ADAPTERS: dict[type, ModelAdapter | None] = {}


def adapter_for(cls: type) -> ModelAdapter | None:
    """The adapter of model class ``cls``, made once; None when ``cls`` is no model class."""
    try:
        return _ADAPTERS[cls]
    except KeyError:
        pass
    except TypeError:
        return None
    adapter = _make_adapter(cls)
    _ADAPTERS[cls] = adapter
    return adapter


def _make_adapter(cls: type) -> ModelAdapter | None:
    if dataclasses.is_dataclass(cls):
        kind, names = "dataclass", [f.name for f in dataclasses.fields(cls)]
    elif _is_pydantic(cls):
        kind, names = "pydantic", list(cls.__pydantic_fields__)  # type: ignore[attr-defined]
    elif hasattr(cls, "__attrs_attrs__"):
        kind, names = "attrs", [a.name for a in cls.__attrs_attrs__]
    else:
        return None
    module = sys.modules.get(cls.__module__)
    namespace = {"Int64": Int64, **(vars(module) if module else {})}
    try:
        hints = typing.get_type_hints(cls, globalns=namespace, include_extras=True)
    except Exception as exc:
        raise TypeError(
            f"{cls.__name__}: cannot resolve its annotations ({exc}); define the class at module level "
            "or import the types there"
        ) from exc
    return ModelAdapter(cls, kind, hints, names)
