"""Entity objects into payloads: the service's rules of keys, names, types and sizes, the general
rules of a write and the per-shape write plans.

Part of the entities layer; :mod:`tablesdk._entities._entity` is its front.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import compress, repeat
from operator import itemgetter
from typing import Any

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
    EntityPayload,
    EntityProperty,
    ShapeMemo,
    ValueShape,
    check_text,
    check_value,
    infer_edm_type,
    value_shape,
)
from ._edm_base import utf16_len as _utf16_len
from ._edm_specs import EDM_SPECS
from .._core._errors import TableValidationError
from ._filter_text import filter_name_problem
from ._model_values import dynamic_to_wire, value_to_wire
from ._models import ModelAdapter, NestedPlan, adapter_for


# ---------------------------------------------------------------- the service's rules

SYSTEM_PROPERTIES = ("PartitionKey", "RowKey", "Timestamp")
MAX_PROPERTIES = 255
MAX_CUSTOM_PROPERTIES = MAX_PROPERTIES - len(SYSTEM_PROPERTIES)
MAX_PROPERTY_NAME_LENGTH = 255

_FORBIDDEN_KEY_CHARS = frozenset("/\\#?") | frozenset(chr(c) for c in range(0x20)) | frozenset(
    chr(c) for c in range(0x7F, 0xA0)
)

# Built from the table of EDM types (tablesdk._entities._edm_specs) when this module is imported.
#: Bytes a value of each type counts in the entity-size formula, before its measured length
#: (strings and binary add theirs: :func:`_value_size`).
_SIZES: dict[EdmType, int] = {t: spec.size for t, spec in EDM_SPECS.items()}
#: The measure of the length of each type's values (0 for every fixed-size type).
_MEASURES: dict[EdmType, Callable[[Any], int]] = {t: spec.measure for t, spec in EDM_SPECS.items()}
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
    such names with a :class:`~tablesdk._core._errors.TableValidationError`. Use this to
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


#: What a Cosmos DB table name may hold here: Cosmos DB takes 1-255 characters without '/', '\\',
#: '#', '?' or a trailing space; tablesdk takes the URL-safe ones among them (letters, digits,
#: '-', '_', '.', '~'), which the request paths and OData key literals carry unescaped.
_COSMOS_TABLE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~")
MAX_COSMOS_TABLE_NAME_LENGTH = 255


def validate_table_name(name: Any, *, cosmos: bool = False) -> None:
    """Check a table name: 3-63 alphanumerics starting with a letter, not 'tables' (Azure Storage);
    with ``cosmos``, Cosmos DB's wider rule: 1-255 letters, digits, '-', '_', '.' or '~'."""
    if not isinstance(name, str):
        raise TableValidationError("table", "table names must be str", f"got {type(name).__name__}")
    if cosmos:
        if not 1 <= len(name) <= MAX_COSMOS_TABLE_NAME_LENGTH:
            raise TableValidationError("table", "Cosmos DB table names are 1 to 255 characters", f"{name!r} has {len(name)}")
        if not _COSMOS_TABLE_CHARS.issuperset(name):
            raise TableValidationError(
                "table", "Cosmos DB table names here are letters, digits, '-', '_', '.' and '~' "
                "(Cosmos DB refuses '/', '\\', '#', '?' and a trailing space; tablesdk does not address others)",
                repr(name),
            )
        return
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


#: The Python class name of each type, in messages.
_PYTHON_NAMES: dict[EdmType, str] = {t: spec.python_name for t, spec in EDM_SPECS.items()}


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
    dataclass, pydantic model or attrs class: :mod:`tablesdk._entities._models`) or a mapping of
    property names to values (read as ``DynamicEntity(**mapping)`` would be).
    ``None`` values are kept as nulls (the codecs send them in their null form;
    the service does not store nulls, so the property is absent when read back).
    Timestamp is never sent: the service sets it.
    """
    try:
        write = _WRITERS[type(entity)]
    except (KeyError, TypeError):  # a class met for the first time (or one that cannot be a key)
        write = _writer_for(type(entity))
    return write(entity, validate)


#: The rules each class of entity met is written by (see :func:`_writer_for`), decided once per
#: class as its model adapter is (:func:`~tablesdk._entities._models.adapter_for`).
_WRITERS: dict[type, Callable[[Any, bool], EntityPayload]] = {}


def _writer_for(kind: type) -> Callable[[Any, bool], EntityPayload]:
    """The rules an entity of class ``kind`` is written by: those a TableEntity or DynamicEntity
    class names as ``__payload__`` (:func:`declared_payload`, :func:`dynamic_payload`; this module
    knows the entity classes by that alone, as they import it), a mapping's, a model class's
    through its adapter, or a refusal."""
    write: Callable[[Any, bool], EntityPayload] | None = getattr(kind, "__payload__", None)
    if write is None:
        if issubclass(kind, Mapping):
            write = _mapping_payload
        else:
            adapter = adapter_for(kind)
            write = _refuse_entity if adapter is None else functools.partial(_model_payload, adapter)
    try:
        _WRITERS[kind] = write
    except TypeError:  # a class that cannot be a dict key is decided at every write
        pass
    return write


def _model_payload(adapter: ModelAdapter, entity: Any, validate: bool) -> EntityPayload:
    """The payload of a model object (dataclass, pydantic model, attrs class) through its class's adapter."""
    properties = ((name, value, None, declared) for name, value, declared in adapter.properties(entity, validate))
    try:
        return _payload_of_properties(
            type(entity).__name__, getattr(entity, "PartitionKey", None), getattr(entity, "RowKey", None),
            adapter.etag(entity), properties, validate, adapter.parts,
        )
    except TableValidationError as exc:
        raise _named_by_path(exc, adapter.path_of(exc.field)) from None


def _refuse_entity(entity: Any, validate: bool) -> EntityPayload:
    raise _not_an_entity(entity)


def _named_by_path(exc: TableValidationError, path: str | None) -> TableValidationError:
    """``exc`` naming the field's ``path`` (Shipping.Address.Street) rather than the flattened
    property's stored name (``exc`` itself when there is no other path)."""
    if path is None:
        return exc
    detail = str(exc)[len(f"{exc.field}: {exc.limit}"):].strip().removeprefix("(").removesuffix(")")
    stored = f"stored as {exc.field}"
    return TableValidationError(path, exc.limit, f"{detail}; {stored}" if detail else stored)


def owner_of_part(entity_type: Any, name: str) -> str:
    """The declared property (stored name) of TableEntity class ``entity_type`` a property named
    ``name`` belongs to (is written from and read into): a Chunked property for its parts, a
    nested object for its leaves, markers and undeclared fields; ``name`` itself for any other."""
    parts: dict[str, str] = entity_type.__parts__
    owner = parts.get(name)
    if owner is not None:
        return owner
    nested: dict[str, NestedPlan] = entity_type.__nested__
    for stored, flattened in nested.items():
        if flattened.owns(name):
            return stored
    return name


def _custom_properties(
    entity: Any, strict: bool = True
) -> Iterator[tuple[str, Any, EdmType | None, EdmType | None]]:
    """(name, value, remembered type, declared type) for every custom property of TableEntity
    ``entity``; a value its converter cannot store raises TableValidationError (not ``strict``:
    it is taken as it is)."""
    wire_types = entity._wire_types
    renamed, converters, chunked = entity.__renamed__, entity.__converters__, entity.__chunked__
    nested = entity.__nested__
    for name, declared in entity.__declared__.items():
        value = getattr(entity, renamed.get(name, name))
        if value is not None and name in converters:
            try:
                value = value_to_wire(converters[name], renamed.get(name, name), value)
            except TableValidationError:
                if strict:
                    raise
        if nested and name in nested:
            for part_name, part, part_type in nested[name].write(value, strict):
                yield part_name, part, None, part_type
            continue
        if chunked and name in chunked:
            plan = chunked[name]
            try:
                parts = plan.split(value)
            except TableValidationError:
                if strict:
                    raise
                parts = [value] + [None] * (len(plan.names) - 1)
            for part_name, part in zip(plan.names, parts):
                yield part_name, part, None, declared
            continue
        yield name, value, wire_types.get(name), declared
    for name, value in entity.extra_properties.items():
        if isinstance(value, EntityProperty):
            yield name, value.value, value.edm_type, None
        else:
            yield name, value, wire_types.get(name), None


def declared_payload(entity: Any, validate: bool) -> EntityPayload:
    """The payload of TableEntity ``entity``: its declared properties (converted, Chunked ones
    split, nested objects flattened) and its extra properties, by the general rules."""
    try:
        return _payload_of_properties(
            type(entity).__name__, entity.PartitionKey, entity.RowKey, entity.etag,
            _custom_properties(entity, validate), validate, entity.__parts__,
        )
    except TableValidationError as exc:
        owner = entity.__nested__.get(owner_of_part(type(entity), exc.field)) if entity.__nested__ else None
        if owner is None:
            raise
        raise _named_by_path(exc, owner.adapter.path_of(exc.field)) from None


def dynamic_payload(entity: Any, validate: bool) -> EntityPayload:
    """The payload of DynamicEntity ``entity``: through the write plan of its shape when there is
    one, else by the general rules."""
    if validate:
        payload = _planned_bag_payload(entity.PartitionKey, entity.RowKey, entity._values, entity._types, entity.etag)
        if payload is not None:
            return payload
    return _payload_by_property(entity, validate)


def _payload_by_property(entity: Any, validate: bool) -> EntityPayload:
    """The general rules' payload of DynamicEntity ``entity`` (no write plan)."""
    bag, bag_types = entity._values, entity._types  # C iterators over the bag: no generator step per property
    return _payload_of_properties(
        type(entity).__name__, entity.PartitionKey, entity.RowKey, entity.etag,
        zip(bag, bag.values(), map(bag_types.get, bag), repeat(None)), validate,
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
    parts: Mapping[str, str] | None = None,
) -> EntityPayload:
    """:func:`entity_to_payload` property by property: the general rules, and every error they raise.

    ``properties`` gives (name, value, remembered type, declared type) of each custom property;
    ``parts`` names the Chunked property each further part belongs to (the one an entity too
    large is blamed on)."""
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
        elif declared is None and type(value) not in _EXACT_TYPES and type(value) is not int:
            value = dynamic_to_wire(name, value)  # an Enum, Decimal, date or timedelta: its stored form
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
            raise _too_large(values, types, size, parts or {})
    return EntityPayload(values, types, etag)


def _too_large(
    values: dict[str, Any], types: dict[str, EdmType], size: int, parts: Mapping[str, str]
) -> TableValidationError:
    """The error of an entity over 1 MiB, naming the property that takes the most of it (a Chunked
    property's parts count as one, and such a property is the error's field)."""
    taken: dict[str, int] = {}
    for name, value in values.items():
        if name not in ("PartitionKey", "RowKey"):
            owner = parts.get(name, name)
            taken[owner] = taken.get(owner, 0) + 8 + _utf16_len(name) + _value_size(value, types[name])
    largest = max(taken, key=taken.__getitem__)
    chunked = set(parts.values())
    field = largest if largest in chunked else "entity"
    return TableValidationError(
        field, "an entity is at most 1 MiB (1048576 bytes, the service's formula)",
        f"about {size} bytes; the largest property is {largest} with {taken[largest]}",
    )


def comparison_key(entity: Any) -> tuple[Any, ...]:
    """What entities of one class are equal by: the values and types of their payloads (made
    without the checks, so comparing never fails on a value only a write refuses)."""
    payload = entity_to_payload(entity, validate=False)
    return (payload.values, payload.types)
