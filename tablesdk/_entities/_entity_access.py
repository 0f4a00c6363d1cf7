"""Any entity's keys, ETag and Timestamp, and the refresh of a tracked entity.

The layers above the entity layer (operations, contexts, actions, bulk loading) take every
kind of entity: a :class:`~tablesdk._entities._entity.TableEntity`, a
:class:`~tablesdk._entities._entity.DynamicEntity`, a model object (:mod:`tablesdk._entities._models`) or a
mapping. They read and set what they need of one through these functions, never through
attributes, so a kind of entity is added here and in :mod:`tablesdk._entities._entity` only.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping, MutableMapping
from typing import Any

from ._edm import EdmType, EntityPayload, EntityProperty
from ._entity_classes import DynamicEntity, TableEntity, _attributes
from ._entity_write import _mapping_parts, _not_an_entity, owner_of_part
from ._models import ModelAdapter, adapter_for

__all__ = [
    "check_entity",
    "entity_keys",
    "entity_etag",
    "set_entity_etag",
    "entity_timestamp",
    "set_entity_timestamp",
    "declared_names",
    "loose_properties",
    "overwrite_entity",
    "take_property",
    "drop_property",
]


def check_entity(entity: object) -> None:
    """TypeError unless ``entity`` is something :func:`entity_to_payload` writes."""
    if isinstance(entity, (TableEntity, DynamicEntity, Mapping)) or adapter_for(type(entity)) is not None:
        return
    raise _not_an_entity(entity)


def entity_keys(entity: object) -> tuple[Any, Any]:
    """(PartitionKey, RowKey) of any entity (None for a key a mapping lacks)."""
    if isinstance(entity, Mapping):
        return entity.get("PartitionKey"), entity.get("RowKey")
    return getattr(entity, "PartitionKey", None), getattr(entity, "RowKey", None)


def entity_etag(entity: object) -> str | None:
    """The ETag ``entity`` carries (None when it keeps none: a model class without an etag field)."""
    if isinstance(entity, (TableEntity, DynamicEntity)):
        return entity.etag
    if isinstance(entity, Mapping):
        etag = entity.get("etag")
        return etag if isinstance(etag, str) else None
    adapter = adapter_for(type(entity))
    return adapter.etag(entity) if adapter is not None else None


def set_entity_etag(entity: object, etag: str | None) -> None:
    """Give ``entity`` its new ETag, where it keeps one (never a key added to a mapping)."""
    if isinstance(entity, (TableEntity, DynamicEntity)):
        entity.etag = etag
    elif isinstance(entity, MutableMapping):
        if "etag" in entity:
            entity["etag"] = etag
    else:
        adapter = adapter_for(type(entity))
        if adapter is not None:
            adapter.set_etag(entity, etag)


def declared_names(entity: object) -> Mapping[str, Any]:
    """The stored names of the properties ``entity``'s class declares (a type is known for each)."""
    if isinstance(entity, TableEntity):
        return {**entity.__declared__, **entity.__parts__} if entity.__parts__ else entity.__declared__
    if isinstance(entity, (DynamicEntity, Mapping)):
        return {}
    adapter = adapter_for(type(entity))
    return adapter.by_stored if adapter is not None else {}


def entity_timestamp(entity: object) -> Any:
    """The Timestamp ``entity`` carries, or None."""
    if isinstance(entity, Mapping):
        return entity.get("Timestamp")
    return getattr(entity, "Timestamp", None)


def set_entity_timestamp(entity: object, timestamp: Any) -> None:
    """Give ``entity`` the Timestamp the service answered, where it keeps one."""
    if isinstance(entity, (TableEntity, DynamicEntity)):
        entity.Timestamp = timestamp
    elif isinstance(entity, MutableMapping):
        if "Timestamp" in entity:
            entity["Timestamp"] = timestamp
    else:
        adapter = adapter_for(type(entity))
        if adapter is not None:
            adapter.set_timestamp(entity, timestamp)


# ---------------------------------------------------------------- refreshing a tracked entity
# A context refreshes the entities it tracks from what the service returns; these functions are
# the only code outside the entity classes that changes their state.


def loose_properties(entity: object) -> tuple[Mapping[str, Any], Mapping[str, EdmType]]:
    """The properties of ``entity`` that no declaration types, and the EDM types recorded for them."""
    if isinstance(entity, DynamicEntity):
        return entity._values, entity._types
    if isinstance(entity, TableEntity):
        return entity.extra_properties, entity._wire_types
    if isinstance(entity, Mapping):
        _, _, _, bag, types = _mapping_parts(entity)
        return bag, types
    return {}, {}  # a model class declares every field


def _model_adapter(entity: object) -> ModelAdapter:
    adapter = adapter_for(type(entity))
    if adapter is None:
        raise _not_an_entity(entity)
    return adapter


def overwrite_entity(target: Any, fresh: Any) -> None:
    """Give ``target`` every property, type and the Timestamp of ``fresh`` (same class, read from the service).

    The keys and the ETag of ``target`` are left to the caller.
    """
    if isinstance(target, MutableMapping) and not isinstance(target, DynamicEntity):
        keep = {name: target[name] for name in ("PartitionKey", "RowKey", "etag") if name in target}
        target.clear()
        target.update(typing.cast(Mapping[str, Any], fresh))
        target.update(keep)
        return
    if not isinstance(target, (TableEntity, DynamicEntity)):
        adapter = _model_adapter(target)
        for field in adapter.fields:
            adapter.assign(target, field.name, getattr(fresh, field.name))
        extra = adapter.extra_fields(fresh)
        if extra is not None:
            object.__setattr__(target, "__pydantic_extra__", dict(extra))
        adapter.set_timestamp(target, getattr(fresh, "Timestamp", None))
        return
    if isinstance(target, DynamicEntity):
        assert isinstance(fresh, DynamicEntity)
        target._values = fresh._values
        target._types = fresh._types
        target.Timestamp = fresh.Timestamp
        return
    for name in _attributes(type(target)):
        target.__dict__.pop(name, None)
    target.__dict__.update(fresh.__dict__)


def take_property(target: Any, fresh: Any, name: str, server: EntityPayload) -> None:
    """Give ``target`` the value and wire type of property ``name`` from ``fresh``.

    ``fresh`` is an entity of the same class read from the service and ``server`` the
    payload it converts to (``entity_to_payload(fresh)``).
    """
    if isinstance(target, MutableMapping) and not isinstance(target, DynamicEntity):
        target[name] = server.values[name]
        return
    if not isinstance(target, (TableEntity, DynamicEntity)):
        _model_adapter(target).take(target, fresh, name)
        return
    if isinstance(target, DynamicEntity):
        value = server.values[name]
        target[name] = EntityProperty(value, server.types[name]) if value is not None else None
        return
    name = owner_of_part(type(target), name)  # a part of a Chunked property or a nested object: all of it
    if name in target.__declared__:
        assert isinstance(fresh, TableEntity)
        attribute = target.__renamed__.get(name, name)
        target.__dict__[attribute] = getattr(fresh, attribute)
        target._wire_types.pop(name, None)
        if name in fresh._wire_types:
            target._wire_types[name] = fresh._wire_types[name]
    else:
        assert isinstance(fresh, TableEntity)
        target.extra_properties[name] = fresh.extra_properties[name]


def drop_property(target: Any, name: str) -> None:
    """Remove property ``name`` from ``target`` (a declared one is set to None)."""
    if isinstance(target, MutableMapping) and not isinstance(target, DynamicEntity):
        target.pop(name, None)
        return
    if not isinstance(target, (TableEntity, DynamicEntity)):
        _model_adapter(target).drop(target, name)
        return
    if isinstance(target, DynamicEntity):
        del target[name]
        return
    name = owner_of_part(type(target), name)
    if name in target.__declared__:
        target.__dict__[target.__renamed__.get(name, name)] = None
    else:
        target.extra_properties.pop(name, None)
