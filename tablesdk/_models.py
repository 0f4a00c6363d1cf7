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
import enum
import functools
import json
import sys
import typing
from collections.abc import Callable
from typing import Annotated, Any, Generic, TypeVar

from ._edm import EdmType, Int64
from ._edm_specs import EDM_SPECS
from ._errors import TableValidationError

__all__ = [
    "Converter",
    "StoredAs",
    "ByValue",
    "ModelField",
    "ModelAdapter",
    "Flatten",
    "Json",
    "AsJson",
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


class AsJson:
    """Marker: ``Annotated[list[int], AsJson]`` (or ``Json[list[int]]``) stores the field as JSON
    text (Edm.String) and rebuilds it on read as its annotation says (lists, tuples, sets,
    frozensets, dicts, and what they hold)."""


#: ``Json[list[str]]``: a field stored as JSON text; to a type checker it is a ``list[str]``.
Json = Annotated[T, AsJson]


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _rebuild(hint: Any, data: Any) -> Any:
    """``data`` decoded from JSON, made again into what ``hint`` names (sets, tuples, int keys ...)."""
    hint = _strip_optional(hint)
    if data is None:
        return None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (list, set, frozenset) or (origin is not None and origin.__name__ in ("Sequence", "MutableSequence")):
        items = [_rebuild(args[0], item) for item in data] if args else list(data)
        return origin(items) if origin in (set, frozenset) else items
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_rebuild(args[0], item) for item in data)
        return tuple(_rebuild(a, item) for a, item in zip(args, data)) if args else tuple(data)
    if origin is dict or (origin is not None and origin.__name__ in ("Mapping", "MutableMapping")):
        key_type, value_type = args if args else (Any, Any)
        return {
            (key_type(k) if key_type in (int, float) else k): _rebuild(value_type, v) for k, v in data.items()
        }
    return data


def _json_converter(owner: str, name: str, hint: Any) -> Converter[Any]:
    def to_wire(value: Any) -> str:
        try:
            return json.dumps(value, default=_json_default, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise TableValidationError(name, f"{owner}.{name} is stored as JSON text", str(exc)) from None

    def from_wire(stored: Any) -> Any:
        try:
            return _rebuild(hint, json.loads(stored))
        except (TypeError, ValueError) as exc:
            raise TableValidationError(name, f"{owner}.{name} is stored as JSON text", f"cannot read it: {exc}") from None

    return Converter(to_wire, from_wire, EdmType.STRING)


def _date_to_wire(day: _dt.date) -> _dt.datetime:
    return _dt.datetime(day.year, day.month, day.day, tzinfo=_dt.timezone.utc)


def _date_from_wire(stored: Any) -> _dt.date:
    return stored.date() if isinstance(stored, _dt.datetime) else _dt.date.fromisoformat(str(stored)[:10])


@functools.cache
def _decimal_converter(decimal_class: type) -> Converter[Any]:
    """Decimals as their text: ``str`` to write, the class to read back."""
    return Converter(str, decimal_class, EdmType.STRING)


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
            elif extra is AsJson:
                converter = _json_converter(owner, name, typing.get_args(hint)[0])
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
        # decimal is not imported by ``import tablesdk`` (start-up): a class annotated Decimal has imported it.
        decimal = sys.modules.get("decimal")
        if decimal is not None and issubclass(hint, decimal.Decimal):
            converter = _decimal_converter(decimal.Decimal)
            return converter.edm_type, stored, converter
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
        "Int64, float, bool, datetime, uuid.UUID, bytes, date, Decimal, an Enum, a dataclass, pydantic model, "
        "attrs class or TypedDict (flattened), Json[...] for lists, dicts and sets, or Annotated[..., EdmType.X]"
    )


class ModelField:
    """One stored property of a model class (a leaf), or one nested object flattened into several.

    ``name`` is the attribute, ``stored`` the property name (for a nested object, the prefix of
    its leaves), ``path`` the dotted attribute path named in messages (``Shipping.Address.Street``),
    ``steps`` the attributes (or, for a TypedDict, keys) from the entity down to the value, and
    ``node`` the nested object's own fields (None for a leaf).
    """

    __slots__ = ("name", "stored", "edm_type", "converter", "path", "steps", "node")

    def __init__(
        self, name: str, stored: str, edm_type: EdmType, converter: Converter[Any] | None,
        path: str = "", steps: tuple[tuple[str, bool], ...] = (), node: _Node | None = None,
    ) -> None:
        self.name = name
        self.stored = stored
        self.edm_type = edm_type
        self.converter = converter
        self.path = path or name
        self.steps = steps or ((name, False),)
        self.node = node

    def __repr__(self) -> str:
        return f"ModelField({self.path!r}, stored={self.stored!r}, {self.edm_type})"


_MISSING: Any = object()


class _Node:
    """How to make one object of a (possibly nested) class from its fields' values."""

    __slots__ = ("cls", "kind", "fields", "make", "required")

    def __init__(self, cls: type, kind: str, fields: tuple[ModelField, ...]) -> None:
        self.cls = cls
        self.kind = kind
        self.fields = fields
        self.make: Callable[..., Any] = cls.model_construct if kind == "pydantic" else (  # type: ignore[attr-defined]
            dict if kind == "typeddict" else cls
        )
        #: Fields the constructor needs (no default): given None when the service has no value.
        self.required = _required_fields(cls, kind)

    def kwargs(self, values: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """The constructor's keywords from the stored ``values``, and whether any leaf was there."""
        kwargs: dict[str, Any] = {}
        found = False
        for f in self.fields:
            if f.node is not None:
                sub = f.node.build(values)
                if sub is not None:
                    kwargs[f.name] = sub
                    found = True
                elif f.name in self.required:
                    kwargs[f.name] = None
                continue
            value = values.get(f.stored, _MISSING)
            if value is _MISSING:
                if f.name in self.required:
                    kwargs[f.name] = None
                continue
            if value is None:  # a null (the service stores none): not evidence the object was there
                kwargs[f.name] = None
                continue
            found = True
            if f.converter is not None:
                value = f.converter.from_wire(value)
            kwargs[f.name] = value
        return kwargs, found

    def build(self, values: dict[str, Any]) -> Any:
        """A nested object, or None when the service holds none of its leaves (it was None)."""
        kwargs, found = self.kwargs(values)
        return self.make(**kwargs) if found else None


class Flatten:
    """``Annotated[Address, Flatten("__")]``: the delimiter between the names of a nested
    object's field and its own fields (default ``_``: ``Shipping_Street``)."""

    __slots__ = ("delimiter",)

    def __init__(self, delimiter: str = "_") -> None:
        self.delimiter = delimiter


def _nested_kind(hint: Any) -> str | None:
    """The kind of class ``hint`` is when a field of it is flattened (None: a plain value)."""
    if not isinstance(hint, type):
        return None
    if typing.is_typeddict(hint):
        return "typeddict"
    if dataclasses.is_dataclass(hint):
        return "dataclass"
    if _is_pydantic(hint):
        return "pydantic"
    if hasattr(hint, "__attrs_attrs__"):
        return "attrs"
    return None


def _class_fields(cls: type, kind: str) -> list[str]:
    if kind == "dataclass":
        return [f.name for f in dataclasses.fields(cls)]
    if kind == "pydantic":
        return list(cls.__pydantic_fields__)  # type: ignore[attr-defined]
    if kind == "attrs":
        return [a.name for a in cls.__attrs_attrs__]  # type: ignore[attr-defined]
    return list(typing.get_type_hints(cls))


def _hints(cls: type) -> dict[str, Any]:
    module = sys.modules.get(cls.__module__)
    namespace = {"Int64": Int64, **(vars(module) if module else {})}
    try:
        # The module's names first: a field named as its type (Status: Status = Status.OPEN) must
        # not see its own default; a name only the class defines falls back to the class's namespace.
        try:
            return typing.get_type_hints(cls, globalns=namespace, localns=namespace, include_extras=True)
        except NameError:
            return typing.get_type_hints(cls, globalns=namespace, include_extras=True)
    except Exception as exc:
        raise TypeError(
            f"{cls.__name__}: cannot resolve its annotations ({exc}); define the class at module level "
            "or import the types there"
        ) from exc


def _plan_fields(
    owner: str, cls: type, kind: str, prefix: str, path: str, steps: tuple[tuple[str, bool], ...],
    delimiter: str, stack: tuple[type, ...], skip: tuple[str, ...],
) -> tuple[list[ModelField], list[ModelField]]:
    """(fields of ``cls``, every leaf below them): nested classes flattened, cycles refused."""
    hints = _hints(cls)
    fields: list[ModelField] = []
    leaves: list[ModelField] = []
    mapping = kind == "typeddict"
    for name in _class_fields(cls, kind):
        if name in skip:
            continue
        hint = hints.get(name, Any)
        here = f"{path}.{name}" if path else name
        where = (*steps, (name, mapping))
        inner = _strip_optional(hint)
        sub_delimiter = delimiter
        stored_as = None
        if typing.get_origin(inner) is typing.Annotated:
            for extra in inner.__metadata__:
                if isinstance(extra, Flatten):
                    sub_delimiter = extra.delimiter
                elif isinstance(extra, StoredAs):
                    stored_as = extra.name
            inner = _strip_optional(typing.get_args(inner)[0])
        nested = _nested_kind(inner)
        if nested is not None:
            if inner in stack:
                chain = " -> ".join(c.__name__ for c in (*stack, inner))
                raise TypeError(
                    f"{owner}.{here}: {inner.__name__} contains itself ({chain}); a reference cycle cannot be "
                    "flattened into properties (store it as Json[...] instead)"
                )
            stored = prefix + (stored_as or name)
            sub_fields, sub_leaves = _plan_fields(
                owner, inner, nested, stored + sub_delimiter, here, where, sub_delimiter, (*stack, inner), (),
            )
            fields.append(ModelField(name, stored, EdmType.STRING, None, here, where, _Node(inner, nested, tuple(sub_fields))))
            leaves.extend(sub_leaves)
            continue
        edm_type, stored, converter = field_plan(f"{owner}.{path}" if path else owner, name, hint)
        leaf = ModelField(name, prefix + stored, edm_type, converter, here, where)
        fields.append(leaf)
        leaves.append(leaf)
    return fields, leaves


class ModelAdapter:
    """What tablesdk knows of one model class: made once per class by :func:`adapter_for`.

    ``kind`` is ``"dataclass"``, ``"pydantic"`` or ``"attrs"``; ``fields`` the custom
    fields in declaration order (a nested one holds its own); ``leaves`` every stored
    property, nested objects flattened (``by_stored`` finds them by stored name);
    ``etag_field`` / ``timestamp_field`` the attributes that hold the ETag and Timestamp
    (None: the class has none, a context keeps the ETag).
    """

    __slots__ = (
        "cls", "kind", "fields", "leaves", "by_stored", "paths", "etag_field", "timestamp_field", "_node", "_flat",
    )

    def __init__(self, cls: type, kind: str, hints: dict[str, Any], names: list[str]) -> None:
        self.cls = cls
        self.kind = kind
        owner = cls.__name__
        for key in ("PartitionKey", "RowKey"):
            if key not in names:
                raise TypeError(f"{owner} is used as an entity but declares no {key} field (a str)")
        self.etag_field: str | None = "etag" if "etag" in names else None
        self.timestamp_field: str | None = "Timestamp" if "Timestamp" in names else None
        system = ("PartitionKey", "RowKey", "Timestamp", "etag")
        for name in system:
            if name in names:
                field_plan(owner, name, hints.get(name, Any))  # refuses a renamed system field
        fields, leaves = _plan_fields(owner, cls, kind, "", "", (), "_", (cls,), system)
        stored_names = [f.stored for f in leaves]
        twice = {s for s in stored_names if stored_names.count(s) > 1}
        if twice:
            raise TypeError(f"{owner}: two fields are stored as {sorted(twice)}")
        self.fields = tuple(fields)
        self.leaves = tuple(leaves)
        self.by_stored = {f.stored: f for f in leaves}
        #: The dotted path of each flattened leaf, by stored name (what messages name).
        self.paths = {f.stored: f.path for f in leaves if f.path != f.stored}
        self._node = _Node(cls, kind, self.fields)
        self._flat = all(f.node is None for f in fields)

    def __repr__(self) -> str:
        return f"ModelAdapter({self.cls.__name__}, {self.kind}, {list(self.leaves)})"

    # ------------------------------------------------------------ reading an instance

    def properties(self, obj: Any) -> list[tuple[str, Any, EdmType]]:
        """(stored name, value as sent, declared EDM type) of every leaf of ``obj``."""
        out = []
        if self._flat:
            for f in self.fields:
                value = getattr(obj, f.name)
                if f.converter is not None and value is not None:
                    value = f.converter.to_wire(value)
                out.append((f.stored, value, f.edm_type))
            return out
        for f in self.leaves:
            value = obj
            for step, is_key in f.steps:
                value = value.get(step) if is_key else getattr(value, step)
                if value is None:
                    break
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
        kwargs, _ = self._node.kwargs(values)
        kwargs["PartitionKey"] = values.get("PartitionKey")
        kwargs["RowKey"] = values.get("RowKey")
        if self.timestamp_field:
            kwargs["Timestamp"] = timestamp
        if self.etag_field:
            kwargs["etag"] = etag
        return self._node.make(**kwargs)

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
    if kind == "typeddict":
        return frozenset()  # a key the service has no value for is left out
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
    kind = _nested_kind(cls)
    if kind is None or kind == "typeddict":
        return None
    return ModelAdapter(cls, kind, _hints(cls), _class_fields(cls, kind))
