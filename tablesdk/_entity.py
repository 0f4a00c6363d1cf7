"""Entities: declared (:class:`TableEntity`) and dynamic (:class:`DynamicEntity`).

Both kinds carry ``PartitionKey``, ``RowKey``, ``Timestamp`` and ``etag``. The
functions :func:`entity_to_payload` and :func:`entity_from_payload` convert
between entity objects and the codecs' :class:`~tablesdk._edm.EntityPayload`,
and every limit the service enforces on an entity is checked there, before
any request, with the service's numbers:

* property names are identifiers (letters, digits, underscore; not starting
  with a digit) of at most 255 characters, and not a system property name;
* at most 255 properties including PartitionKey, RowKey and Timestamp, so 252
  of your own;
* PartitionKey and RowKey are strings of at most 1 KiB (UTF-16) without
  ``/``, ``\\``, ``#``, ``?`` or control characters;
* strings and binary values at most 64 KiB; the whole entity at most 1 MiB,
  measured with the service's formula.

A property keeps the EDM type it was read with (or was given through
:class:`~tablesdk._edm.EntityProperty`) for as long as the values assigned to it
fit that type, so an Int64 column read as a small ``int`` is written back as
Int64, not silently narrowed to Int32.
"""

from __future__ import annotations

import functools
import inspect
import sys
import typing
from collections import deque
from contextlib import contextmanager
from contextvars import ContextVar
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from datetime import datetime
from itertools import compress, repeat
from operator import itemgetter
from typing import Any, ClassVar, TypeVar

from ._edm import (
    DATETIME_MIN,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    MAX_ENTITY_BYTES,
    MAX_KEY_BYTES,
    MAX_PROPERTY_BYTES,
    EdmType,
    EntityPage,
    EntityPayload,
    EntityProperty,
    Int64,
    ShapeMemo,
    ValueShape,
    check_text,
    check_value,
    from_json_value,
    infer_edm_type,
    value_shape,
)
from ._edm_base import utf16_len as _utf16_len
from ._edm_specs import EDM_SPECS
from ._errors import TableValidationError
from ._filter import PropertyRef
from ._filter_text import filter_name_problem
from ._models import Converter, ModelAdapter, adapter_for, field_plan

__all__ = [
    "TableEntity",
    "DynamicEntity",
    "DeclaredProperty",
    "AnyEntity",
    "SYSTEM_PROPERTIES",
    "MAX_CUSTOM_PROPERTIES",
    "MAX_ENTITY_BYTES",
    "MAX_KEY_BYTES",
    "EntityObject",
    "entity_to_payload",
    "entity_from_payload",
    "read_page",
    "ResolvedType",
    "EntityResolver",
    "PropertyResolver",
    "validate_key",
    "validate_property_name",
    "allow_unfilterable_names",
    "validate_table_name",
]

SYSTEM_PROPERTIES = ("PartitionKey", "RowKey", "Timestamp")
MAX_PROPERTIES = 255
MAX_CUSTOM_PROPERTIES = MAX_PROPERTIES - len(SYSTEM_PROPERTIES)
MAX_PROPERTY_NAME_LENGTH = 255

_FORBIDDEN_KEY_CHARS = frozenset("/\\#?") | frozenset(chr(c) for c in range(0x20)) | frozenset(
    chr(c) for c in range(0x7F, 0xA0)
)

_ENTITY_ATTRIBUTES = frozenset({"PartitionKey", "RowKey", "Timestamp", "etag", "extra_properties"})

# Built from the table of EDM types (tablesdk._edm_specs) when this module is imported.
#: Bytes a value of each type counts in the entity-size formula, before its measured length
#: (strings and binary add theirs: :func:`_value_size`).
_SIZES: dict[EdmType, int] = {t: spec.size for t, spec in EDM_SPECS.items()}
#: The measure of the length of each type's values (0 for every fixed-size type).
_MEASURES: dict[EdmType, Callable[[Any], int]] = {t: spec.measure for t, spec in EDM_SPECS.items()}
#: The Python class name of each type, in messages.
_PYTHON_NAMES: dict[EdmType, str] = {t: spec.python_name for t, spec in EDM_SPECS.items()}
#: The EDM type of a value of exactly each class (what infer_edm_type says); an int's depends on its value.
_EXACT_TYPES: dict[type, EdmType] = {
    cls: t for t, spec in EDM_SPECS.items() for cls in spec.sent_from if cls is not int
}


def validate_key(field: str, value: Any) -> None:
    """Check a PartitionKey or RowKey against the service's rules."""
    if value is None:
        raise TableValidationError(field, "required: a str (it may be empty)")
    if not isinstance(value, str):
        raise TableValidationError(field, "keys must be str", f"got {type(value).__name__}")
    check_text(field, value)
    bad = _FORBIDDEN_KEY_CHARS.intersection(value)
    if bad:
        shown = ", ".join(repr(ch) for ch in sorted(bad))
        raise TableValidationError(
            field, "keys may not contain '/', '\\', '#', '?' or control characters", f"found {shown}"
        )
    size = _utf16_len(value)
    if size > MAX_KEY_BYTES:
        raise TableValidationError(field, "keys are at most 1 KiB (512 UTF-16 characters)", f"got {size} bytes")


#: Names that passed :func:`validate_property_name` (entities of one kind repeat theirs),
#: with their size in UTF-16 bytes for the entity-size formula.
_VALID_NAMES: dict[str, int] = {}
_MAX_VALID_NAMES = 4096


#: Whether names no $filter can hold may be written (see :func:`allow_unfilterable_names`).
_UNFILTERABLE_ALLOWED: ContextVar[bool] = ContextVar("tablesdk_unfilterable_names_allowed", default=False)


@contextmanager
def allow_unfilterable_names() -> Iterator[None]:
    """Inside this block, entities may be written with property names no ``$filter`` can name.

    The service stores a property called ``and``, ``true`` or ``K`` followed by a
    combining accent, but no query can filter on it (the filter is refused with a
    400, or, on Azurite, ``true eq 1`` silently matches nothing), so writes refuse
    such names with a :class:`~tablesdk._errors.TableValidationError`. Use this to
    write (copy, restore) existing data that has them::

        with tablesdk.allow_unfilterable_names():
            client.insert_entity("Legacy", entity)

    It applies to the entities converted in this thread or task while the block
    runs (``insert_entity``, ``save_changes``, ``bulk_insert`` called inside it).
    Reading such entities never needs it, and filters still refuse the names.
    """
    token = _UNFILTERABLE_ALLOWED.set(True)
    try:
        yield
    finally:
        _UNFILTERABLE_ALLOWED.reset(token)


def validate_property_name(name: Any, *, allow_unfilterable: bool | None = None) -> None:
    """Check a custom property name against the service's rules, and that a ``$filter`` can
    name it (unless ``allow_unfilterable``, by default whether :func:`allow_unfilterable_names`
    is in effect)."""
    if type(name) is str and name in _VALID_NAMES:
        return
    _check_property_name(name)
    problem = filter_name_problem(name)
    if problem is not None:
        allowed = _UNFILTERABLE_ALLOWED.get() if allow_unfilterable is None else allow_unfilterable
        if not allowed:
            raise TableValidationError(
                name,
                "no $filter can name this property, so it is not written (the service would store it)",
                f"{problem}; to write existing data with such names, use tablesdk.allow_unfilterable_names()",
            )
        return  # valid only while allowed: not remembered
    if len(_VALID_NAMES) < _MAX_VALID_NAMES:
        _VALID_NAMES[name] = _utf16_len(name)


def _check_property_name(name: Any) -> None:
    if not isinstance(name, str):
        raise TableValidationError(repr(name), "property names must be str")
    if not name.isidentifier():
        raise TableValidationError(
            name or "''",
            "property names are identifiers: letters, digits and '_', not starting with a digit",
        )
    if len(name) > MAX_PROPERTY_NAME_LENGTH:
        raise TableValidationError(name[:40] + "...", "property names are at most 255 characters", f"got {len(name)}")
    if name in SYSTEM_PROPERTIES:
        raise TableValidationError(name, "is a system property; set it as an attribute, not as a custom property")


def _check_timestamp(value: Any) -> None:
    """Refuse a Timestamp that is no datetime: the service sets Timestamp and the client never
    sends it, so a text or a number set there would be neither checked nor stored."""
    if value is not None and not isinstance(value, datetime):
        raise TableValidationError(
            "Timestamp",
            "Timestamp is set by the service and never sent; it holds the datetime the service gave",
            f"got {type(value).__name__}",
        )


def validate_table_name(name: Any) -> None:
    """Check a table name: 3-63 alphanumerics starting with a letter, not 'tables'."""
    if not isinstance(name, str):
        raise TableValidationError("table", "table names must be str", f"got {type(name).__name__}")
    if not (3 <= len(name) <= 63):
        raise TableValidationError("table", "table names are 3 to 63 characters", f"{name!r} has {len(name)}")
    if not (name.isascii() and name.isalnum() and name[0].isalpha()):
        if not (name.startswith("$Metrics") and name[1:].isascii() and name[1:].isalnum()):
            raise TableValidationError(
                "table", "table names are letters and digits and start with a letter", repr(name)
            )
    if name.lower() == "tables":
        raise TableValidationError("table", "'tables' is a reserved table name")


def _value_size(value: Any, edm_type: EdmType) -> int:
    if value is None:
        return 0
    return _SIZES[edm_type] + _MEASURES[edm_type](value)


def _fits(value: Any, edm_type: EdmType) -> bool:
    try:
        check_value("", value, edm_type)
    except TableValidationError:
        return False
    return True


_INTEGERS = (EdmType.INT32, EdmType.INT64)


def _choose_type(
    name: str, value: Any, remembered: EdmType | None, declared: EdmType | None, owner: str = ""
) -> EdmType:
    """The EDM type ``value`` is written as, checked against every limit of that type.

    The type the property was read with (``remembered``) wins while the value
    fits it; then the declared type, which the value must fit: a declared
    property never silently changes type. A dynamic property takes the type of
    its value.
    """
    if remembered is None and declared is not None:
        # The common case of a declared property: one check against the declared type.
        try:
            check_value(name, value, declared)
        except TableValidationError as exc:
            raise _declared_mismatch(name, value, declared, owner, exc) from None
        return declared
    inferred = infer_edm_type(value, name)
    if remembered is not None:
        if remembered is inferred:
            check_value(name, value, inferred)
            return inferred
        if _fits(value, remembered):
            return remembered
    if declared is None:
        check_value(name, value, inferred)
        return inferred
    try:
        check_value(name, value, declared)
    except TableValidationError as exc:
        raise _declared_mismatch(name, value, declared, owner, exc) from None
    return declared


def _declared_mismatch(
    name: str, value: Any, declared: EdmType, owner: str, exc: TableValidationError
) -> TableValidationError:
    """The error for a declared property's value: its own limit when it has the right kind,
    else the class, property, declared and given types."""
    try:
        inferred: EdmType | None = infer_edm_type(value, name)
    except TableValidationError:
        inferred = None
    if inferred is declared or (inferred in _INTEGERS and (declared is EdmType.DOUBLE or declared in _INTEGERS)):
        return exc  # the right kind of value, out of range or too large: report that limit
    given = f"{type(value).__name__} ({inferred.value})" if inferred else type(value).__name__
    return TableValidationError(
        name,
        f"{owner}.{name} is declared as {_PYTHON_NAMES[declared]} ({declared.value})",
        f"got {given}: {exc.limit}",
    )


class DeclaredProperty(PropertyRef):
    """A property declared by annotation on a :class:`TableEntity` subclass.

    On the class it is a property reference for filters (``Blog.Rating > 3``);
    on an instance it is the property's value.
    """

    __slots__ = ("default", "attribute")

    def __init__(self, name: str, edm_type: EdmType, default: Any = None, attribute: str | None = None) -> None:
        super().__init__(name, edm_type)
        self.default = default
        #: The attribute that holds the value (``name`` is the stored name, what filters render).
        self.attribute = attribute or name

    @typing.overload
    def __get__(self, instance: None, owner: type) -> DeclaredProperty: ...

    @typing.overload
    def __get__(self, instance: object, owner: type) -> Any: ...

    def __get__(self, instance: object | None, owner: type) -> Any:
        if instance is None:
            return self
        try:
            return instance.__dict__[self.attribute]
        except KeyError:
            return self.default

    def __set__(self, instance: object, value: Any) -> None:
        instance.__dict__[self.attribute] = value

    def __repr__(self) -> str:
        return f"DeclaredProperty({self.name!r}, {self.edm_type})"


if sys.version_info >= (3, 11):
    from typing import dataclass_transform
elif typing.TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:  # Python 3.10 without typing_extensions: the marker only matters to type checkers

    def dataclass_transform(**_: Any) -> Callable[[type], type]:
        return lambda cls: cls


@dataclass_transform(kw_only_default=True)
class _TypedConstructor:
    """Tells type checkers (PEP 681) that every subclass of TableEntity has a constructor taking
    its annotated properties as keywords: a wrong value type, an unknown keyword or a missing
    property without a default is an error where the entity is made. (On TableEntity itself,
    its own ``__init__`` applies.)"""

    __slots__ = ()


class TableEntity(_TypedConstructor):
    """Base class for entities with declared, typed properties.

    ::

        class Blog(TableEntity):
            Text: str
            Rating: int              # Edm.Int32
            Views: Int64             # Edm.Int64
            Posted: datetime | None = None

        blog = Blog(PartitionKey="Channel9", RowKey="Oct-29", Text="Hello", Rating=3)

    Declared properties are class attributes usable in filters
    (``Blog.Rating > 2``). Properties read from the service that the class does
    not declare are kept in ``extra_properties`` and written back on update.
    """

    # For type checkers these are the instance values and the first fields of every subclass's
    # constructor (_TypedConstructor); at run time the keys and Timestamp are DeclaredProperty
    # descriptors (set below), so ``Blog.PartitionKey == "x"`` is a filter.
    PartitionKey: str
    RowKey: str
    Timestamp: datetime | None = None
    etag: str | None = None
    #: The EDM type of each declared property, by stored name.
    __declared__: ClassVar[dict[str, EdmType]] = {}
    #: The attribute of each declared property stored under another name (``StoredAs``), by stored name.
    __renamed__: ClassVar[dict[str, str]] = {}
    #: The conversion of each declared property of a type beyond the EDM types, by stored name.
    __converters__: ClassVar[dict[str, Converter[Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__annotations__", {})
        module = sys.modules.get(cls.__module__)
        namespace = {**vars(typing), "datetime": datetime, "Int64": Int64, **(vars(module) if module else {})}
        hints: dict[str, Any] = {}
        for name, hint in own.items():
            if isinstance(hint, str):
                try:
                    # The module's names first: a property named as its type (Stage: Stage = Stage.OPEN)
                    # must not see its own default; a name only the class defines comes from the class.
                    try:
                        hint = eval(hint, namespace)  # noqa: S307 - the class's own annotation
                    except NameError:
                        hint = eval(hint, namespace, dict(vars(cls)))  # noqa: S307
                except Exception as exc:
                    raise TypeError(
                        f"{cls.__name__}.{name}: cannot resolve annotation {hint!r} ({exc}); "
                        "define the entity class at module level or import the type there"
                    ) from exc
            hints[name] = hint
        declared = dict(getattr(cls, "__declared__", {}))
        renamed = dict(getattr(cls, "__renamed__", {}))
        converters = dict(getattr(cls, "__converters__", {}))
        for name, hint in hints.items():
            if name in ("PartitionKey", "RowKey", "Timestamp", "etag", "extra_properties"):
                if typing.get_origin(hint) is typing.Annotated:
                    field_plan(cls.__name__, name, hint)  # refuses StoredAs on a system property
                continue
            if typing.get_origin(hint) is ClassVar or name.startswith("_"):
                continue
            edm_type, stored, converter = field_plan(cls.__name__, name, hint)
            validate_property_name(stored)
            current = cls.__dict__.get(name)
            default = current.default if isinstance(current, DeclaredProperty) else current
            inherited = inspect.getattr_static(cls, name, None)
            if isinstance(inherited, DeclaredProperty) and inherited.name != stored:
                declared.pop(inherited.name, None)  # redeclared under another stored name
                renamed.pop(inherited.name, None)
                converters.pop(inherited.name, None)
            if name in cls.__dict__ or stored not in declared or stored != name:
                setattr(cls, name, DeclaredProperty(stored, edm_type, default, name))
            taken = renamed.get(stored, stored)
            if stored in declared and taken != name:
                raise TypeError(f"{cls.__name__}.{name}: {taken} is stored as {stored!r} already")
            declared[stored] = edm_type
            if stored != name:
                renamed[stored] = name
            if converter is not None:
                converters[stored] = converter
            else:
                converters.pop(stored, None)
        cls.__declared__ = declared
        cls.__renamed__ = renamed
        cls.__converters__ = converters

    def __init__(
        self,
        PartitionKey: str | None = None,
        RowKey: str | None = None,
        Timestamp: datetime | None = None,
        etag: str | None = None,
        **properties: Any,
    ) -> None:
        unknown = set(properties) - set(_attributes(type(self)))
        if unknown:
            raise TypeError(
                f"{type(self).__name__} has no declared properties {sorted(unknown)}; "
                f"declared: {sorted(_attributes(type(self)))} (use DynamicEntity for a property bag)"
            )
        # None keys are allowed until the entity is sent: validation names the missing key then.
        self.PartitionKey = PartitionKey  # type: ignore[assignment]
        self.RowKey = RowKey  # type: ignore[assignment]
        self.Timestamp = Timestamp
        self.etag = etag
        #: Properties read from the service that the class does not declare (written back on update).
        self.extra_properties: dict[str, Any] = {}
        #: The EDM type a property was read with, where it differs from the declared one.
        self._wire_types: dict[str, EdmType] = {}
        for name, value in properties.items():
            setattr(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        # An undeclared public attribute would be silently left out of every write (a typo such
        # as blog.Ratng = 4): refuse it. Private names and the class's own attributes are free.
        if name.startswith("_") or name in _ENTITY_ATTRIBUTES or hasattr(type(self), name):
            object.__setattr__(self, name, value)
            return
        raise AttributeError(
            f"{type(self).__name__} has no declared property {name!r}: declare it on the class "
            f"({name}: <type>) or store it in extra_properties; declared: {sorted(_attributes(type(self)))}"
        )

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{name}={getattr(self, name)!r}" for name in ("PartitionKey", "RowKey", *_attributes(type(self)))
        )
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, TableEntity)
        return _comparable(self) == _comparable(other)

    __hash__ = object.__hash__


def _attributes(cls: type[TableEntity]) -> list[str]:
    """The attribute of each declared property of ``cls``, in declaration order."""
    renamed = cls.__renamed__
    return [renamed.get(stored, stored) for stored in cls.__declared__]


setattr(TableEntity, "PartitionKey", DeclaredProperty("PartitionKey", EdmType.STRING))
setattr(TableEntity, "RowKey", DeclaredProperty("RowKey", EdmType.STRING))
setattr(TableEntity, "Timestamp", DeclaredProperty("Timestamp", EdmType.DATETIME))


class DynamicEntity(MutableMapping[str, Any]):
    """An entity as a property bag: ``e["Rating"] = 3``, ``del e["Old"]``.

    ``PartitionKey``, ``RowKey``, ``Timestamp`` and ``etag`` are attributes (the
    keys are also readable and settable as ``e["PartitionKey"]``, but only custom
    properties are iterated). A value is a plain Python value or an
    :class:`~tablesdk._edm.EntityProperty`; reading gives the plain value, and
    :meth:`edm_type` tells the EDM type it will be written as.
    """

    __slots__ = ("PartitionKey", "RowKey", "Timestamp", "etag", "_values", "_types")

    PartitionKey: str
    RowKey: str
    Timestamp: datetime | None
    etag: str | None

    def __init__(self, PartitionKey: str | None = None, RowKey: str | None = None, **properties: Any) -> None:
        # Timestamp= and etag= arrive with the properties: named parameters of their own would make
        # DynamicEntity(PartitionKey=..., RowKey=..., **row) a type error for a row of str or object.
        # None keys are allowed until the entity is sent: validation names the missing key then.
        self.PartitionKey = PartitionKey  # type: ignore[assignment]
        self.RowKey = RowKey  # type: ignore[assignment]
        self.Timestamp = properties.pop("Timestamp", None)
        self.etag = properties.pop("etag", None)
        self._values: dict[str, Any] = {}
        self._types: dict[str, EdmType] = {}
        for name, value in properties.items():
            self[name] = value

    def __getitem__(self, name: str) -> Any:
        if name in SYSTEM_PROPERTIES:
            return getattr(self, name)
        return self._values[name]

    def __setitem__(self, name: str, value: Any) -> None:
        if name in SYSTEM_PROPERTIES:
            if name == "Timestamp":
                _check_timestamp(value)
            setattr(self, name, value)
            return
        if isinstance(value, EntityProperty):
            self._values[name] = value.value
            self._types[name] = value.edm_type
        else:
            self._values[name] = value

    def __delitem__(self, name: str) -> None:
        del self._values[name]
        self._types.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def edm_type(self, name: str) -> EdmType:
        """The EDM type property ``name`` is written as."""
        return _choose_type(name, self._values[name], self._types.get(name), None)

    def get_property(self, name: str) -> EntityProperty:
        """Property ``name`` as an explicitly typed :class:`EntityProperty`."""
        return EntityProperty(self._values[name], self.edm_type(name))

    def __repr__(self) -> str:
        props = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        head = f"PartitionKey={self.PartitionKey!r}, RowKey={self.RowKey!r}"
        return f"DynamicEntity({head}{', ' if props else ''}{props})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DynamicEntity):
            return NotImplemented
        return _comparable(self) == _comparable(other)

    __hash__ = object.__hash__


AnyEntity = typing.Union[TableEntity, DynamicEntity]
#: The entity class of a query or a read: a TableEntity or DynamicEntity subclass, a model class
#: (dataclass, pydantic, attrs) or dict. Not bound, so that a user's class stays itself:
#: ``create_query("Notes", Note)`` is a ``TableQuery[Note]``; :func:`entity_from_payload` refuses
#: a class it cannot make.
E = TypeVar("E")
#: What the operations accept as an entity: a TableEntity, a DynamicEntity, a model object
#: (dataclass, pydantic model, attrs class) or a ``Mapping[str, object]``; checked at run time
#: (:func:`check_entity`).
EntityObject: typing.TypeAlias = object


def _comparable(entity: AnyEntity) -> tuple[Any, ...]:
    payload = entity_to_payload(entity, validate=False)
    return (payload.values, payload.types)


def _custom_properties(entity: AnyEntity) -> Iterator[tuple[str, Any, EdmType | None, EdmType | None]]:
    """(name, value, remembered type, declared type) for every custom property."""
    if isinstance(entity, DynamicEntity):
        types = entity._types
        for name, value in entity._values.items():
            yield name, value, types.get(name), None
        return
    wire_types = entity._wire_types
    renamed, converters = entity.__renamed__, entity.__converters__
    for name, declared in entity.__declared__.items():
        value = getattr(entity, renamed.get(name, name))
        if value is not None and name in converters:
            value = converters[name].to_wire(value)
        yield name, value, wire_types.get(name), declared
    for name, value in entity.extra_properties.items():
        if isinstance(value, EntityProperty):
            yield name, value.value, value.edm_type, None
        else:
            yield name, value, wire_types.get(name), None


# ---------------------------------------------------------------- writing entities of a known shape
# Entities written together (a bulk load, a batch) mostly share a shape: the same property
# names, value classes and remembered types. For such a shape everything the rules decide
# per property is decided once; per entity only the limits that depend on values are checked,
# each kind of value at once (C passes over the values). A value those checks cannot clear
# (non-ASCII text, a long string, an int outside Int32, a naive or non-UTC datetime, ...)
# sends the entity through the general rules, which decide and report it as always.

_DATETIME_UTC = DATETIME_MIN.tzinfo
#: Size in the entity-size formula of a value of each plannable type (strings and binary add their length).
_PLANNED_SIZES = _SIZES
_INT32_TYPES = (None, EdmType.INT32)


class _WritePlan:
    """What the rules decide for every entity of one shape, and which values still need a look.

    ``types`` is the payload's type map (PartitionKey and RowKey included), ``size`` the
    entity size without the keys' and the strings' and binaries' lengths; each getter takes
    the values of one kind out of the tuple of an entity's values (None: the shape has none).
    """

    __slots__ = ("binaries", "datetimes", "int32s", "int64s", "size", "strings", "types")

    def __init__(self, types: dict[str, EdmType], size: int, masks: dict[EdmType | str, list[bool]]) -> None:
        self.types = types
        self.size = size
        self.strings = _getter(masks[EdmType.STRING])
        self.binaries = _getter(masks[EdmType.BINARY])
        self.int32s = _getter(masks[EdmType.INT32])
        self.int64s = _getter(masks[EdmType.INT64])
        self.datetimes = _getter(masks[EdmType.DATETIME])


def _getter(mask: list[bool]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]] | None:
    """A C callable giving the tuple of the values ``mask`` marks, or None if it marks none."""
    at = [*compress(range(len(mask)), mask)]
    if not at:
        return None
    # itemgetter of one index gives the value itself; of a one-item slice, a 1-tuple.
    return itemgetter(*at) if len(at) > 1 else itemgetter(slice(at[0], at[0] + 1))


def _planned_type(kind: type, remembered: EdmType | None) -> EdmType | None:
    """The type the rules give every value of class ``kind`` remembered as ``remembered``
    (once the value passes its plan's checks), or None when that depends on more."""
    if kind is type(None):
        return remembered or EdmType.STRING
    if kind is int:
        if remembered in _INT32_TYPES:
            return EdmType.INT32  # while the value fits Int32: checked per entity
        return EdmType.INT64 if remembered is EdmType.INT64 else None
    edm_type = _EXACT_TYPES.get(kind)
    if edm_type is None or remembered not in (None, edm_type):
        return None
    return edm_type


def _make_plan(shape: ValueShape) -> _WritePlan | None:
    names, kinds, remembered_types = shape
    if len(names) > MAX_CUSTOM_PROPERTIES:
        return None
    types = {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING}
    size = 4
    masks: dict[EdmType | str, list[bool]] = {
        kind: [] for kind in (EdmType.STRING, EdmType.BINARY, EdmType.INT32, EdmType.INT64, EdmType.DATETIME)
    }
    for name, kind, remembered in zip(names, kinds, remembered_types):
        edm_type = _planned_type(kind, remembered)
        if edm_type is None:
            return None
        try:
            validate_property_name(name, allow_unfilterable=False)  # a plan outlives an allowing block
        except TableValidationError:
            return None
        types[name] = edm_type
        size += 8 + _utf16_len(name) + (0 if kind is type(None) else _PLANNED_SIZES[edm_type])
        for checked, mask in masks.items():
            mask.append(checked is edm_type and kind is not type(None))
    return _WritePlan(types, size, masks)


#: The write plan of each shape met (None: the general rules apply).
_PLANS: ShapeMemo[ValueShape, _WritePlan | None] = ShapeMemo(_make_plan, 1024)


def _plain_keys(pk: Any, rk: Any) -> bool:
    """Whether both keys are ASCII str that :func:`validate_key` accepts."""
    if type(pk) is not str or type(rk) is not str:
        return False
    both = pk + rk
    return both.isascii() and len(pk) <= MAX_KEY_BYTES // 2 and len(rk) <= MAX_KEY_BYTES // 2 and (
        _FORBIDDEN_KEY_CHARS.isdisjoint(both)
    )


def _planned_payload(entity: DynamicEntity) -> EntityPayload | None:
    """The validated payload of ``entity`` through its shape's plan, or None to apply the general rules."""
    return _planned_bag_payload(entity.PartitionKey, entity.RowKey, entity._values, entity._types, entity.etag)


def _planned_bag_payload(
    pk: Any, rk: Any, bag: dict[str, Any], bag_types: dict[str, EdmType], etag: str | None
) -> EntityPayload | None:
    """The validated payload of a property bag through its shape's plan, or None to apply the general rules."""
    if not _plain_keys(pk, rk):
        return None
    plan = _PLANS[value_shape(bag, bag_types)]
    if plan is None:
        return None
    size = _planned_size(plan, bag.values())
    if size is None or size + 2 * len(pk) + 2 * len(rk) > MAX_ENTITY_BYTES:
        return None
    values = {"PartitionKey": pk, "RowKey": rk}
    values.update(bag)
    return EntityPayload(values, plan.types.copy(), etag)


def _planned_size(plan: _WritePlan, values: Iterable[Any]) -> int | None:
    """The entity size without its keys, once the values pass the checks of their kinds; None if one does not."""
    size = plan.size
    row = tuple(values)
    if plan.strings is not None:
        texts = plan.strings(row)
        joined = "".join(texts)
        # ASCII text has no lone surrogate and takes 2 UTF-16 bytes a character.
        if not joined.isascii() or 2 * max(map(len, texts)) > MAX_PROPERTY_BYTES:
            return None
        size += 2 * len(joined)
    if plan.binaries is not None:
        lengths = [*map(len, plan.binaries(row))]
        if max(lengths) > MAX_PROPERTY_BYTES:
            return None
        size += sum(lengths)
    if plan.int32s is not None:
        numbers = plan.int32s(row)
        if min(numbers) < INT32_MIN or max(numbers) > INT32_MAX:
            return None
    if plan.int64s is not None:
        numbers = plan.int64s(row)
        if min(numbers) < INT64_MIN or max(numbers) > INT64_MAX:
            return None
    if plan.datetimes is not None:
        for moment in plan.datetimes(row):
            # A UTC value is at most 9999-12-31T23:59:59.999999Z, the end of the range.
            if moment.tzinfo is not _DATETIME_UTC or moment < DATETIME_MIN:
                return None
    return size


def entity_to_payload(entity: object, *, validate: bool = True) -> EntityPayload:
    """Convert an entity into the payload a codec serializes, checking every limit.

    ``entity`` is a :class:`TableEntity`, a :class:`DynamicEntity`, a model object (a
    dataclass, pydantic model or attrs class: :mod:`tablesdk._models`) or a mapping of
    property names to values (read as ``DynamicEntity(**mapping)`` would be).
    ``None`` values are kept as nulls (the codecs send them in their null form;
    the service does not store nulls, so the property is absent when read back).
    Timestamp is never sent: the service sets it.
    """
    if isinstance(entity, DynamicEntity):
        if validate:
            payload = _planned_payload(entity)
            if payload is not None:
                return payload
        return _payload_by_property(entity, validate)
    if isinstance(entity, TableEntity):
        return _payload_by_property(entity, validate)
    if type(entity) is dict or isinstance(entity, Mapping):  # dict first: an ABC check costs more
        return _mapping_payload(entity, validate)
    adapter = adapter_for(type(entity))
    if adapter is None:
        raise _not_an_entity(entity)
    properties = ((name, value, None, declared) for name, value, declared in adapter.properties(entity))
    try:
        return _payload_of_properties(
            type(entity).__name__, getattr(entity, "PartitionKey"), getattr(entity, "RowKey"), adapter.etag(entity),
            properties, validate,
        )
    except TableValidationError as exc:
        path = adapter.paths.get(exc.field)
        if path is None:
            raise
        # A flattened property: name the field's path (Shipping.Address.Street), not its stored name.
        detail = str(exc)[len(f"{exc.field}: {exc.limit}"):].strip().removeprefix("(").removesuffix(")")
        stored = f"stored as {exc.field}"
        raise TableValidationError(path, exc.limit, f"{detail}; {stored}" if detail else stored) from None


def _payload_by_property(entity: AnyEntity, validate: bool) -> EntityPayload:
    """The general rules' payload of a TableEntity or DynamicEntity (no write plan)."""
    properties: Iterable[tuple[str, Any, EdmType | None, EdmType | None]]
    if isinstance(entity, DynamicEntity):  # C iterators over the bag: no generator step per property
        bag, bag_types = entity._values, entity._types
        properties = zip(bag, bag.values(), map(bag_types.get, bag), repeat(None))
    else:
        properties = _custom_properties(entity)
    return _payload_of_properties(
        type(entity).__name__, entity.PartitionKey, entity.RowKey, entity.etag, properties, validate
    )


def _not_an_entity(entity: object) -> TypeError:
    return TypeError(
        f"expected an entity (TableEntity, DynamicEntity, a dataclass, pydantic model or attrs class "
        f"with PartitionKey and RowKey fields, or a mapping), not {type(entity).__name__}"
    )


_NO_TYPES: dict[str, EdmType] = {}
#: The keys of a mapping entity that are no custom properties (as DynamicEntity's constructor takes them).
_MAPPING_SYSTEM = ("PartitionKey", "RowKey", "Timestamp", "etag")


def _mapping_parts(entity: Mapping[Any, Any]) -> tuple[Any, Any, Any, dict[Any, Any], dict[str, EdmType]]:
    """(PartitionKey, RowKey, etag, custom values, remembered types) of a mapping entity."""
    bag = dict(entity)
    pk = bag.pop("PartitionKey", None)
    rk = bag.pop("RowKey", None)
    bag.pop("Timestamp", None)
    etag = bag.pop("etag", None)
    types: dict[str, EdmType] = {}
    if EntityProperty in set(map(type, bag.values())):  # rare: found by one C pass in the common case
        types = {n: v.edm_type for n, v in bag.items() if isinstance(v, EntityProperty)}
        bag = {n: v.value if isinstance(v, EntityProperty) else v for n, v in bag.items()}
    return pk, rk, etag, bag, types


def _mapping_payload(entity: Mapping[Any, Any], validate: bool) -> EntityPayload:
    if validate:
        # The write plan refuses a shape with EntityProperty values (the general rules take
        # them apart), so the bag needs no look for them here.
        bag = dict(entity)
        pk, rk = bag.pop("PartitionKey", None), bag.pop("RowKey", None)
        bag.pop("Timestamp", None)
        etag = bag.pop("etag", None)
        payload = _planned_bag_payload(pk, rk, bag, _NO_TYPES, etag)
        if payload is not None:
            return payload
    pk, rk, etag, bag, types = _mapping_parts(entity)
    return _payload_of_properties(
        type(entity).__name__, pk, rk, etag, zip(bag, bag.values(), map(types.get, bag), repeat(None)), validate
    )


def _payload_of_properties(
    owner: str, pk: Any, rk: Any, etag: str | None,
    properties: Iterable[tuple[str, Any, EdmType | None, EdmType | None]], validate: bool,
) -> EntityPayload:
    """:func:`entity_to_payload` property by property: the general rules, and every error they raise.

    ``properties`` gives (name, value, remembered type, declared type) of each custom property."""
    values: dict[str, Any] = {"PartitionKey": pk, "RowKey": rk}
    types: dict[str, EdmType] = {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING}
    if validate:
        validate_key("PartitionKey", pk)
        validate_key("RowKey", rk)
        # The service's formula: 4 + 2 * len(PartitionKey + RowKey) + per property
        # (8 + 2 * len(name) + size of the value); _utf16_len already counts bytes.
        size = 4 + _utf16_len(pk) + _utf16_len(rk)
    count = 0
    for name, value, remembered, declared in properties:
        if validate:
            validate_property_name(name)
        if isinstance(value, EntityProperty):
            remembered, value = value.edm_type, value.value
        if value is None:
            edm_type = remembered or declared or EdmType.STRING
        else:
            try:
                if remembered is None and declared is None:
                    # A dynamic property takes its value's type: what _choose_type decides,
                    # found by the value's exact class first (the common case, once per property).
                    edm_type = _EXACT_TYPES.get(type(value)) or infer_edm_type(value, name)
                    check_value(name, value, edm_type)
                else:
                    edm_type = _choose_type(name, value, remembered, declared, owner)
            except TableValidationError:
                if validate:
                    raise
                # Comparing or diffing entities must not fail on a value only a write refuses.
                edm_type = remembered or declared or EdmType.STRING
        values[name] = value
        types[name] = edm_type
        count += 1
        if validate:
            size += 8 + (_VALID_NAMES.get(name) or _utf16_len(name)) + _value_size(value, edm_type)
    if validate:
        if count > MAX_CUSTOM_PROPERTIES:
            raise TableValidationError(
                "properties",
                f"an entity has at most {MAX_PROPERTIES} properties including PartitionKey, "
                f"RowKey and Timestamp ({MAX_CUSTOM_PROPERTIES} of your own)",
                f"got {count}",
            )
        if size > MAX_ENTITY_BYTES:
            raise TableValidationError("entity", "an entity is at most 1 MiB", f"about {size} bytes")
    return EntityPayload(values, types, etag)


#: ``fn(partition_key, row_key, timestamp, properties, etag)``: what a resolved query returns for a row.
EntityResolver = Callable[[str, str, "datetime | None", dict[str, Any], "str | None"], Any]
#: ``fn(partition_key, row_key, name, value)``: the EDM type of a value that arrived without one, or None.
PropertyResolver = Callable[[str, str, str, Any], "EdmType | None"]


class ResolvedType:
    """What a query with a resolver materialises, standing where its entity class stands.

    ``resolver`` (None: none) makes each result from the row's parts; ``property_resolver``
    (None: none) types the values that arrived untyped (JSON ``nometadata``) first; without a
    ``resolver`` the rows are then read as ``base``.
    """

    __slots__ = ("base", "resolver", "property_resolver")

    def __init__(
        self, base: Any, resolver: EntityResolver | None, property_resolver: PropertyResolver | None
    ) -> None:
        self.base: Any = base.base if isinstance(base, ResolvedType) else base
        self.resolver = resolver
        self.property_resolver = property_resolver

    @property
    def __name__(self) -> str:  # in reprs, where an entity class's name stands
        return f"resolved {getattr(self.base, '__name__', self.base)}"

    def read(self, page: EntityPage, ignore_missing_properties: bool, keep_values: bool) -> list[Any]:
        """The results of one page (in order), after the property resolver typed its untyped values."""
        if self.property_resolver is not None:
            _type_untyped_values(page, self.property_resolver)
        resolver = self.resolver
        if resolver is None:
            return read_page(
                self.base, page, ignore_missing_properties=ignore_missing_properties, keep_values=keep_values
            )
        results = []
        for values, etag in zip(page.values, page.etags):
            custom = dict(values)
            pk, rk = custom.pop("PartitionKey", None), custom.pop("RowKey", None)
            timestamp = custom.pop("Timestamp", None)
            if isinstance(timestamp, str):
                timestamp = from_json_value(timestamp, EdmType.DATETIME)
            results.append(resolver(pk, rk, timestamp, custom, etag))
        return results


def _type_untyped_values(page: EntityPage, resolver: PropertyResolver) -> None:
    """Give the values of ``page`` that came without a type the type ``resolver`` names (in place;
    a row's type dict is replaced, not changed: rows of a page may share one)."""
    for index, (values, types) in enumerate(zip(page.values, page.types)):
        if len(types) >= len(values):
            continue
        pk, rk = values.get("PartitionKey"), values.get("RowKey")
        added: dict[str, EdmType] = {}
        for name, value in values.items():
            if name in types or name in SYSTEM_PROPERTIES or value is None:
                continue
            edm_type = resolver(pk, rk, name, value)  # type: ignore[arg-type]
            if edm_type is not None:
                try:
                    values[name] = from_json_value(value, edm_type)
                except (ValueError, TypeError) as exc:
                    raise TableValidationError(
                        name, f"the property resolver typed it {edm_type.value}", f"cannot read {value!r}: {exc}"
                    ) from None
                added[name] = edm_type
        if added:
            page.types[index] = {**types, **added}


def entity_from_payload(
    entity_type: type[E], payload: EntityPayload, *, ignore_missing_properties: bool = True
) -> E:
    """Materialise an entity of ``entity_type`` from a parsed payload.

    A property whose wire type differs from the declared one is kept as read
    (and written back with its wire type); a declared property absent from the
    payload is left at its default. Properties the class does not declare go to
    ``extra_properties``, unless ``ignore_missing_properties`` is False, in which
    case they raise :class:`TableValidationError`.
    """
    if isinstance(entity_type, ResolvedType):
        page = EntityPage([payload.values], [payload.types], [payload.etag])
        return typing.cast(E, entity_type.read(page, ignore_missing_properties, True)[0])
    if issubclass(entity_type, DynamicEntity):
        return _read_dynamic(entity_type, payload)
    if issubclass(entity_type, TableEntity):
        return _read_declared(entity_type, ignore_missing_properties, False, payload)
    return _foreign_reader(entity_type, ignore_missing_properties)(payload.values, payload.types, payload.etag)


def entity_reader(
    entity_type: type[E], *, ignore_missing_properties: bool = True
) -> Callable[[EntityPayload], E]:
    """``entity_from_payload`` for one class, with what depends only on the class
    decided once (for a page of entities rather than for each)."""
    if isinstance(entity_type, ResolvedType):
        return functools.partial(entity_from_payload, entity_type, ignore_missing_properties=ignore_missing_properties)
    if issubclass(entity_type, DynamicEntity):
        return functools.partial(_read_dynamic, entity_type)
    if not issubclass(entity_type, TableEntity):
        read = _foreign_reader(entity_type, ignore_missing_properties)
        return lambda payload: read(payload.values, payload.types, payload.etag)
    if _plain_attributes(entity_type):
        return functools.partial(_read_declared, entity_type, ignore_missing_properties, True)
    return functools.partial(_read_declared, entity_type, ignore_missing_properties, False)


def read_page(
    entity_type: type[E], page: EntityPage, *, ignore_missing_properties: bool = True, keep_values: bool = False
) -> list[E]:
    """``entity_from_payload`` of every entity of ``page``, in order.

    A :class:`DynamicEntity` page is made a column at a time (C calls, no Python
    call per entity): each entity takes its value dict over from the page (the
    keys and Timestamp popped from it), unless ``keep_values``, which leaves the
    page's values as they were (each entity then gets a copy).
    """
    if isinstance(entity_type, ResolvedType):
        return entity_type.read(page, ignore_missing_properties, keep_values)
    if issubclass(entity_type, DynamicEntity):
        return _read_dynamic_page(entity_type, page, keep_values)
    if not issubclass(entity_type, TableEntity):
        return list(map(_foreign_reader(entity_type, ignore_missing_properties), page.values, page.types, page.etags))
    read = functools.partial(
        _read_declared_parts, entity_type, ignore_missing_properties, _plain_attributes(entity_type)
    )
    return list(map(read, page.values, page.types, page.etags))


def _foreign_reader(
    entity_type: type[E], ignore_missing_properties: bool
) -> Callable[[dict[str, Any], dict[str, EdmType], str | None], E]:
    """The reader of (values, types, etag) into a model class or a mapping class."""
    if issubclass(entity_type, Mapping):
        return functools.partial(_read_mapping, entity_type)
    adapter = adapter_for(entity_type)
    if adapter is None:
        raise TypeError(
            f"cannot read entities as {entity_type.__name__}: use a TableEntity or DynamicEntity subclass, "
            "a dataclass, pydantic model or attrs class with PartitionKey and RowKey fields, or dict"
        )
    return functools.partial(_read_model, adapter, ignore_missing_properties)


def _read_mapping(
    entity_type: type[E], values: dict[str, Any], types: dict[str, EdmType], etag: str | None
) -> E:
    """A mapping entity: every property by name (the keys and Timestamp too), and ``etag`` when known."""
    read = dict(values)
    timestamp = read.get("Timestamp")
    if isinstance(timestamp, str):
        read["Timestamp"] = from_json_value(timestamp, EdmType.DATETIME)
    if etag is not None:
        read["etag"] = etag
    return read if entity_type is dict else entity_type(read)  # type: ignore[return-value,call-arg]


def _read_model(
    adapter: ModelAdapter, ignore_missing_properties: bool,
    values: dict[str, Any], types: dict[str, EdmType], etag: str | None,
) -> Any:
    """A model instance from one entity's values, through its class's adapter."""
    timestamp = values.get("Timestamp")
    if isinstance(timestamp, str):
        timestamp = from_json_value(timestamp, EdmType.DATETIME)
    by_stored = adapter.by_stored
    if len(values) > len(by_stored) + 3 or not ignore_missing_properties:
        unknown = [n for n in values if n not in by_stored and n not in SYSTEM_PROPERTIES]
        if unknown and not ignore_missing_properties:
            raise TableValidationError(
                unknown[0], f"is not a field of {adapter.cls.__name__}",
                "set ignore_missing_properties=True to leave it out",
            )
    if len(types) < len(values):  # some values came without a type (JSON nometadata): read them as declared
        values = dict(values)
        for name, field in by_stored.items():
            value = values.get(name)
            if value is not None and name not in types and field.edm_type is not EdmType.STRING:
                as_type = EdmType.INT64 if field.edm_type is EdmType.INT32 else field.edm_type
                try:
                    values[name] = from_json_value(value, as_type)
                except (ValueError, TypeError):
                    pass
    return adapter.build(values, etag, timestamp)


#: The attributes of a :class:`DynamicEntity` read from the service, in the order set.
_DYNAMIC_ATTRIBUTES = ("PartitionKey", "RowKey", "Timestamp", "etag", "_values", "_types")


def _read_dynamic_page(entity_type: type[E], page: EntityPage, keep_values: bool) -> list[E]:
    bags = list(map(dict.copy, page.values)) if keep_values else page.values
    count = len(bags)
    keys = [list(map(dict.pop, bags, repeat(name), repeat(None))) for name in SYSTEM_PROPERTIES]
    types = page.types
    if count and types.count(types[0]) == count:  # one dict shared by the page (or all equal)
        bag_types = list(map(dict.copy, repeat(_custom_types(types[0]), count)))
    else:
        bag_types = list(map(_custom_types, types))
    entities = list(map(entity_type.__new__, repeat(entity_type, count)))
    for name, column in zip(_DYNAMIC_ATTRIBUTES, (*keys, page.etags, bags, bag_types)):
        deque(map(setattr, entities, repeat(name), column), 0)
    return entities


def _custom_types(types: dict[str, EdmType]) -> dict[str, EdmType]:
    """A copy of ``types`` without the system properties (a C copy and three pops: cheaper than filtering)."""
    custom = dict(types)
    custom.pop("PartitionKey", None)
    custom.pop("RowKey", None)
    custom.pop("Timestamp", None)
    return custom


def _read_dynamic(entity_type: type[E], payload: EntityPayload) -> E:
    values = payload.values
    dyn: Any = entity_type.__new__(entity_type)
    custom = dict(values)
    dyn.PartitionKey = custom.pop("PartitionKey", None)
    dyn.RowKey = custom.pop("RowKey", None)
    dyn.Timestamp = custom.pop("Timestamp", None)
    dyn.etag = payload.etag
    dyn._values = custom
    dyn._types = _custom_types(payload.types)
    return typing.cast(E, dyn)


def _plain_attributes(entity_type: type) -> bool:
    """Whether setting the six attributes a read entity starts with on an instance of
    ``entity_type`` only stores them in its ``__dict__`` (in that order): TableEntity's own
    ``__setattr__`` and key/Timestamp descriptors, no data descriptor for the others."""
    if typing.cast(Any, entity_type).__setattr__ is not TableEntity.__setattr__:
        return False
    for name in SYSTEM_PROPERTIES:
        attribute = inspect.getattr_static(entity_type, name, None)
        if type(attribute) is not DeclaredProperty or attribute.name != name:
            return False
    for name in ("etag", "extra_properties", "_wire_types"):
        attribute = inspect.getattr_static(entity_type, name, None)
        if attribute is not None and hasattr(type(attribute), "__set__"):
            return False
    return True


def _read_declared(entity_type: type[E], ignore_missing_properties: bool, plain: bool, payload: EntityPayload) -> E:
    return _read_declared_parts(entity_type, ignore_missing_properties, plain, payload.values, payload.types, payload.etag)


def _read_declared_parts(
    entity_type: type[E], ignore_missing_properties: bool, plain: bool,
    values: dict[str, Any], types: dict[str, EdmType], etag: str | None,
) -> E:
    obj: Any = entity_type.__new__(entity_type)
    declared: dict[str, EdmType] = typing.cast(Any, entity_type).__declared__
    renamed: dict[str, str] = typing.cast(Any, entity_type).__renamed__
    converters: dict[str, Converter[Any]] = typing.cast(Any, entity_type).__converters__
    timestamp = values.get("Timestamp")
    if isinstance(timestamp, str):
        timestamp = from_json_value(timestamp, EdmType.DATETIME)
    extra: dict[str, Any] = {}
    wire_types: dict[str, EdmType] = {}
    state = obj.__dict__
    if plain:  # what the six assignments below do, without a Python call for each
        state["PartitionKey"] = values.get("PartitionKey")
        state["RowKey"] = values.get("RowKey")
        state["Timestamp"] = timestamp
        state["etag"] = etag
        state["extra_properties"] = extra
        state["_wire_types"] = wire_types
    else:
        obj.PartitionKey = values.get("PartitionKey")
        obj.RowKey = values.get("RowKey")
        obj.Timestamp = timestamp
        obj.etag = etag
        obj.extra_properties = extra
        obj._wire_types = wire_types
        extra, wire_types = obj.extra_properties, obj._wire_types  # as a property of the class gives them
    for name, value in values.items():
        if name in SYSTEM_PROPERTIES:
            continue
        wire_type = types.get(name)
        declared_type = declared.get(name)
        if declared_type is None:
            if not ignore_missing_properties:
                raise TableValidationError(
                    name, f"is not a declared property of {entity_type.__name__}",
                    "set ignore_missing_properties=True to keep it in extra_properties",
                )
            extra[name] = value
            if wire_type is not None:
                wire_types[name] = wire_type
            continue
        if wire_type is None and value is not None and declared_type is not EdmType.STRING:
            # Untyped wire (JSON nometadata): read the value as the declared type; an int
            # property may hold an Int64 written by another client, which the wire cannot tell.
            as_type = EdmType.INT64 if declared_type is EdmType.INT32 else declared_type
            try:
                value = from_json_value(value, as_type)
            except (ValueError, TypeError):
                pass
        elif wire_type is not None and wire_type is not declared_type:
            wire_types[name] = wire_type
        if converters and value is not None and name in converters:
            value = converters[name].from_wire(value)
        state[renamed.get(name, name) if renamed else name] = value
    return typing.cast(E, obj)
