"""The entity classes: TableEntity (declared, typed properties), DynamicEntity (a property bag)
and their state (a declared property's descriptor, the types a read page's dynamic entities share).

Their rules are the write's and the read's: the names a class may declare, the EDM type a
property is written as and what two entities compare by come from
:mod:`~tablesdk._entities._entity_write` (which knows the classes only by the rules each names
as ``__payload__``); :mod:`~tablesdk._entities._entity_read` makes them from payloads. Part of
the entities layer; :mod:`tablesdk._entities._entity` is its front (see its docstring for the limits).
"""

from __future__ import annotations

import inspect
import sys
import typing
from collections.abc import Callable, Iterator, MutableMapping
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from ._edm import (
    EdmType,
    EntityProperty,
    Int64,
)
from .._core._errors import TableValidationError
from ._filter import PropertyRef
from ._model_values import dynamic_to_wire
from ._model_annotations import chunk_plan, encrypted_field, field_plan, nested_kind
from ._models import ChunkPlan, Converter, NestedPlan

from ._entity_write import (
    SYSTEM_PROPERTIES,
    _choose_type,
    comparison_key,
    declared_payload,
    dynamic_payload,
    validate_property_name,
)


_ENTITY_ATTRIBUTES = frozenset({"PartitionKey", "RowKey", "Timestamp", "etag", "extra_properties"})


def _check_timestamp(value: Any) -> None:
    """Refuse a Timestamp that is no datetime: the service sets Timestamp and the client never
    sends it, so a text or a number set there would be neither checked nor stored."""
    if value is not None and not isinstance(value, datetime):
        raise TableValidationError(
            "Timestamp",
            "Timestamp is set by the service and never sent; it holds the datetime the service gave",
            f"got {type(value).__name__}",
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


class ChunkedProperty(DeclaredProperty):
    """A ``Chunked`` declared property: its value is stored across several properties, so a
    ``$filter`` cannot compare it (each comparison raises :class:`TableValidationError` naming it)."""

    __slots__ = ()

    def _compare(self, op: str, other: Any) -> Any:
        raise TableValidationError(
            self.attribute, "a Chunked property is stored in parts, so no $filter can compare it",
            f"parts {self.name!r}, {self.name + '_1'!r}, ...; filter on another property",
        )


class NestedProperty(DeclaredProperty):
    """A declared property holding a nested object: it is stored as one property per leaf, so a
    ``$filter`` compares a leaf (``prop("Address_City")``), never the object."""

    __slots__ = ()

    def _compare(self, op: str, other: Any) -> Any:
        raise TableValidationError(
            self.attribute, "a nested object is stored as one property per field, so no $filter can compare it",
            f"compare one of them, e.g. prop({self.name + '_...'!r})",
        )


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
    #: The split of each ``Chunked`` declared property, by stored name.
    __chunked__: ClassVar[dict[str, ChunkPlan]] = {}
    #: The flattening of each declared property holding a nested object, by stored name.
    __nested__: ClassVar[dict[str, NestedPlan]] = {}
    #: The declared property (stored name) each further stored property belongs to: a Chunked one's
    #: parts, a nested object's leaves and presence markers.
    __parts__: ClassVar[dict[str, str]] = {}
    #: The stored names of the ``Encrypted[...]`` declared properties (encrypted on the client).
    __encrypted__: ClassVar[frozenset[str]] = frozenset()
    #: How an instance is written: :func:`~tablesdk._entities._entity_write.entity_to_payload` calls
    #: the rules a class names here (the write module knows the classes by this alone).
    __payload__ = staticmethod(declared_payload)

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
        chunked = dict(getattr(cls, "__chunked__", {}))
        nested = dict(getattr(cls, "__nested__", {}))
        encrypted = set(getattr(cls, "__encrypted__", ()))
        for name, hint in hints.items():
            if name in ("PartitionKey", "RowKey", "Timestamp", "etag", "extra_properties"):
                if typing.get_origin(hint) is typing.Annotated:
                    field_plan(cls.__name__, name, hint)  # refuses StoredAs on a system property
                continue
            if typing.get_origin(hint) is ClassVar or name.startswith("_"):
                continue
            flattened = NestedPlan(cls, name, hint) if nested_kind(hint) is not None else None
            if flattened is not None:  # stored as its leaves; the name itself holds its presence marker
                edm_type, stored, converter = EdmType.BOOLEAN, flattened.stored, None
            else:
                edm_type, stored, converter = field_plan(cls.__name__, name, hint)
            chunk = chunk_plan(cls.__name__, name, stored, hint, edm_type) if flattened is None else None
            if encrypted_field(cls.__name__, name, hint, chunk):
                if flattened is not None:
                    raise TypeError(
                        f"{cls.__name__}.{name}: a nested object is stored as several properties; "
                        "it cannot be Encrypted"
                    )
                encrypted.add(stored)
            else:
                encrypted.discard(stored)
            for part in chunk.names if chunk else (stored,):
                validate_property_name(part)
            current = cls.__dict__.get(name)
            default = current.default if isinstance(current, DeclaredProperty) else current
            inherited = inspect.getattr_static(cls, name, None)
            if isinstance(inherited, DeclaredProperty) and inherited.name != stored:
                declared.pop(inherited.name, None)  # redeclared under another stored name
                renamed.pop(inherited.name, None)
                converters.pop(inherited.name, None)
                encrypted.discard(inherited.name)
            chunked.pop(stored, None)
            nested.pop(stored, None)
            if chunk is not None:
                chunked[stored] = chunk
                setattr(cls, name, ChunkedProperty(stored, edm_type, default, name))
            elif flattened is not None:
                nested[stored] = flattened
                setattr(cls, name, NestedProperty(stored, edm_type, default, name))
            elif name in cls.__dict__ or stored not in declared or stored != name or isinstance(
                inherited, (ChunkedProperty, NestedProperty)
            ):
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
        parts = {part: stored for stored, plan in chunked.items() for part in plan.names[1:]}
        for stored, flattened in nested.items():
            for part in flattened.names:
                if part in parts:
                    raise TypeError(f"{cls.__name__}: two properties are stored as {part!r}")
                parts[part] = stored
        taken = sorted(set(parts) & set(declared))
        if taken:
            owner = parts[taken[0]]
            raise TypeError(
                f"{cls.__name__}.{renamed.get(owner, owner)} is stored in part as {taken[0]!r}, "
                f"which {renamed.get(taken[0], taken[0])} is stored as"
            )
        cls.__declared__ = declared
        cls.__renamed__ = renamed
        cls.__converters__ = converters
        cls.__chunked__ = chunked
        cls.__nested__ = nested
        cls.__parts__ = parts
        cls.__encrypted__ = frozenset(encrypted)

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
        return comparison_key(self) == comparison_key(other)

    __hash__ = object.__hash__


def _attributes(cls: type[TableEntity]) -> list[str]:
    """The attribute of each declared property of ``cls``, in declaration order."""
    renamed = cls.__renamed__
    return [renamed.get(stored, stored) for stored in cls.__declared__]


setattr(TableEntity, "PartitionKey", DeclaredProperty("PartitionKey", EdmType.STRING))
setattr(TableEntity, "RowKey", DeclaredProperty("RowKey", EdmType.STRING))
setattr(TableEntity, "Timestamp", DeclaredProperty("Timestamp", EdmType.DATETIME))


class PageTypes(dict[str, EdmType]):
    """The EDM types of the custom properties of a page of read :class:`DynamicEntity` objects, one
    dict shared by all of them (a page's entities usually have one shape and one typing): an
    entity copies it into a plain dict of its own before it changes a type. Copies and pickles
    of it are plain dicts."""

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))


def _own_types(entity: DynamicEntity) -> dict[str, EdmType]:
    """``entity._types``, made its own first when it is a page's shared dict."""
    types = entity._types
    if type(types) is not dict:
        types = entity._types = dict(types)
    return types


class DynamicEntity(MutableMapping[str, Any]):
    """An entity as a property bag: ``e["Rating"] = 3``, ``del e["Old"]``.

    ``PartitionKey``, ``RowKey``, ``Timestamp`` and ``etag`` are attributes (the
    keys are also readable and settable as ``e["PartitionKey"]``, but only custom
    properties are iterated). A value is a plain Python value or an
    :class:`~tablesdk._entities._edm.EntityProperty`; reading gives the plain value, and
    :meth:`edm_type` tells the EDM type it will be written as.
    """

    __slots__ = ("PartitionKey", "RowKey", "Timestamp", "etag", "_values", "_types")

    PartitionKey: str
    RowKey: str
    Timestamp: datetime | None
    etag: str | None
    #: How an instance is written (see ``TableEntity.__payload__``): through the write plan of its shape.
    __payload__ = staticmethod(dynamic_payload)

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
            _own_types(self)[name] = value.edm_type
        else:
            self._values[name] = value

    def __delitem__(self, name: str) -> None:
        del self._values[name]
        if name in self._types:
            del _own_types(self)[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def edm_type(self, name: str) -> EdmType:
        """The EDM type property ``name`` is written as."""
        return _choose_type(name, dynamic_to_wire(name, self._values[name]), self._types.get(name), None)

    def get_property(self, name: str) -> EntityProperty:
        """Property ``name`` as an explicitly typed :class:`EntityProperty`, its value as written
        (an Enum, Decimal, date or timedelta in its stored form)."""
        return EntityProperty(dynamic_to_wire(name, self._values[name]), self.edm_type(name))

    def __repr__(self) -> str:
        props = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        head = f"PartitionKey={self.PartitionKey!r}, RowKey={self.RowKey!r}"
        return f"DynamicEntity({head}{', ' if props else ''}{props})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DynamicEntity):
            return NotImplemented
        return comparison_key(self) == comparison_key(other)

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
