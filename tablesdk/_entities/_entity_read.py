"""Payloads into entity objects: declared, dynamic, mapping and model classes, a page at a time.

Part of the entities layer; :mod:`tablesdk._entities._entity` is its front.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections import deque
from collections.abc import Callable, Mapping
from datetime import datetime
from itertools import repeat
from typing import Any, cast

from ._edm import (
    EdmType,
    EntityPage,
    EntityPayload,
    from_json_value,
)
from .._core._errors import TableValidationError
from ._filter import Filter, filter_property_names
from ._model_values import value_from_wire
from ._models import Converter, ModelAdapter, adapter_for

from ._entity_classes import (
    DeclaredProperty,
    DynamicEntity,
    E,
    PageTypes,
    TableEntity,
)
from ._entity_write import SYSTEM_PROPERTIES


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
    return page_reader(entity_type, ignore_missing_properties=ignore_missing_properties, keep_values=keep_values)(page)


def page_reader(
    entity_type: type[E], *, ignore_missing_properties: bool = True, keep_values: bool = False
) -> Callable[[EntityPage], list[E]]:
    """:func:`read_page` with its choices made once: the reader of every page of ``entity_type``
    (a query makes it when it is compiled and reads each page with it)."""
    if isinstance(entity_type, ResolvedType):
        return functools.partial(_read_resolved, entity_type, ignore_missing_properties, keep_values)
    if issubclass(entity_type, DynamicEntity):
        return cast("Callable[[EntityPage], list[E]]", functools.partial(
            _read_dynamic_page, entity_type, keep_values=keep_values
        ))
    read: Callable[[dict[str, Any], dict[str, EdmType], str | None], E]
    if not issubclass(entity_type, TableEntity):
        read = _foreign_reader(entity_type, ignore_missing_properties)
    else:
        read = functools.partial(
            _read_declared_parts, entity_type, ignore_missing_properties, _plain_attributes(entity_type)
        )
    return functools.partial(_read_rows, read)


def _read_resolved(entity_type: ResolvedType, ignore_missing_properties: bool, keep_values: bool, page: EntityPage) -> Any:
    return entity_type.read(page, ignore_missing_properties, keep_values)


def _read_rows(read: Callable[[dict[str, Any], dict[str, EdmType], str | None], E], page: EntityPage) -> list[E]:
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
        unknown = [n for n in values if not adapter.is_known(n) and n not in SYSTEM_PROPERTIES]
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
    bag_types: list[dict[str, EdmType]]
    if count and types.count(types[0]) == count:  # one dict shared by the page (or all equal)
        # One dict for the page, which an entity copies before it changes a type (PageTypes).
        bag_types = [PageTypes(_custom_types(types[0]))] * count
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


def joined_parts(
    entity_type: type[TableEntity], values: dict[str, Any], types: dict[str, EdmType]
) -> tuple[dict[str, Any], dict[str, EdmType]]:
    """``values`` and ``types`` read with each Chunked property's parts joined under its first
    part's name, and each nested object made from its properties under its own (copies: a page's
    dicts stay as read)."""
    values, types = dict(values), dict(types)
    for stored, flattened in entity_type.__nested__.items():
        values[stored] = flattened.read(values)
        types[stored] = EdmType.BOOLEAN
        for name in [n for n in values if n != stored and flattened.owns(n)]:
            del values[name]
            types.pop(name, None)
    for stored, plan in entity_type.__chunked__.items():
        if stored not in values:
            continue
        values[stored] = plan.join(values)
        types[stored] = plan.edm_type
        for part in plan.names[1:]:
            values.pop(part, None)
            types.pop(part, None)
    return values, types


def _read_declared(entity_type: type[E], ignore_missing_properties: bool, plain: bool, payload: EntityPayload) -> E:
    return _read_declared_parts(entity_type, ignore_missing_properties, plain, payload.values, payload.types, payload.etag)


def _read_declared_parts(
    entity_type: type[E], ignore_missing_properties: bool, plain: bool,
    values: dict[str, Any], types: dict[str, EdmType], etag: str | None,
) -> E:
    obj: Any = entity_type.__new__(entity_type)
    if typing.cast(Any, entity_type).__parts__ or typing.cast(Any, entity_type).__nested__:  # stored as several
        values, types = joined_parts(typing.cast(Any, entity_type), values, types)
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
            value = value_from_wire(converters[name], renamed.get(name, name), value, values)
        state[renamed.get(name, name) if renamed else name] = value
    return typing.cast(E, obj)


# ---------------------------------------------------------------- what a query of a class asks for


def _chunked_fields(entity_type: Any) -> dict[str, tuple[str, tuple[str, ...]]]:
    """(the field's path, the stored names of its parts) of each Chunked property of ``entity_type``
    (a TableEntity subclass or model class; anything else has none), by its first part's name."""
    entity_type = getattr(entity_type, "base", entity_type)  # a resolved query's class
    if not isinstance(entity_type, type):
        return {}
    if issubclass(entity_type, TableEntity):
        renamed = entity_type.__renamed__
        return {s: (renamed.get(s, s), plan.names) for s, plan in entity_type.__chunked__.items()}
    adapter = adapter_for(entity_type)
    if adapter is None or not adapter.chunked:
        return {}
    return {s: (adapter.by_stored[s].path, names) for s, names in adapter.chunked.items()}


def with_chunked_parts(entity_type: Any, names: tuple[str, ...]) -> tuple[str, ...]:
    """The projection ``names`` with every part of each Chunked property of ``entity_type`` named in
    it, and every property of each nested object of a TableEntity named in it."""
    chunked = _chunked_fields(entity_type)
    base = getattr(entity_type, "base", entity_type)
    if isinstance(base, type) and issubclass(base, TableEntity):
        for stored, flattened in base.__nested__.items():
            chunked[stored] = (stored, (stored, *flattened.names))
    if not chunked:
        return names
    return tuple(dict.fromkeys(
        part for name in names for part in (chunked[name][1] if isinstance(name, str) and name in chunked else (name,))
    ))


def refuse_chunked_filter(entity_type: Any, node: Filter) -> None:
    """Raise :class:`TableValidationError` naming the field when filter ``node`` compares a part
    of a Chunked property of ``entity_type``: no filter can compare a value the service holds in
    pieces."""
    chunked = _chunked_fields(entity_type)
    names = filter_property_names(node) if chunked else set()
    for field, parts in chunked.values():
        hit = next((part for part in parts if part in names), None)
        if hit is not None:
            raise TableValidationError(
                field, "a Chunked property is stored in parts, so no $filter can compare it",
                f"the filter names {hit!r}; filter on another property",
            )


def encrypted_names(entity_type: Any) -> frozenset[str]:
    """The stored names of the ``Encrypted[...]`` properties of ``entity_type`` (a TableEntity
    subclass or model class, or a resolved query's class; anything else has none). Every write
    asks: a class's answer is kept (a class's fields are fixed when it is made)."""
    if isinstance(entity_type, type):
        found = _ENCRYPTED_BY_CLASS.get(entity_type)
        if found is not None:
            return found
    base = getattr(entity_type, "base", entity_type)
    if not isinstance(base, type):
        return _NONE_ENCRYPTED
    if issubclass(base, TableEntity):
        found = base.__encrypted__
    else:
        adapter = adapter_for(base)
        found = adapter.encrypted if adapter is not None else _NONE_ENCRYPTED
    if isinstance(entity_type, type):
        _ENCRYPTED_BY_CLASS[entity_type] = found
    return found


_NONE_ENCRYPTED: frozenset[str] = frozenset()
#: :func:`encrypted_names` of each class met.
_ENCRYPTED_BY_CLASS: dict[Any, frozenset[str]] = {}


def refuse_encrypted_filter(entity_type: Any, node: Filter) -> None:
    """Raise :class:`TableValidationError` naming the property when filter ``node`` compares an
    ``Encrypted[...]`` property of ``entity_type``: the service holds only its ciphertext."""
    encrypted = encrypted_names(entity_type)
    if not encrypted:
        return
    hit = sorted(encrypted & filter_property_names(node))
    if hit:
        raise TableValidationError(
            hit[0], "an Encrypted property is stored as ciphertext, so no $filter can compare it",
            "filter on another property, or on the decrypted values after reading",
        )
