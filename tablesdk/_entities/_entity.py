"""Entities: declared (:class:`TableEntity`) and dynamic (:class:`DynamicEntity`).

Both kinds carry ``PartitionKey``, ``RowKey``, ``Timestamp`` and ``etag``. The
functions :func:`entity_to_payload` and :func:`entity_from_payload` convert
between entity objects and the codecs' :class:`~tablesdk._entities._edm.EntityPayload`,
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
:class:`~tablesdk._entities._edm.EntityProperty`) for as long as the values assigned to it
fit that type, so an Int64 column read as a small ``int`` is written back as
Int64, not silently narrowed to Int32.
"""

from __future__ import annotations

from ._edm import MAX_ENTITY_BYTES as MAX_ENTITY_BYTES, MAX_KEY_BYTES as MAX_KEY_BYTES
from ._entity_classes import (  # noqa: F401 - the front of the entities layer
    AnyEntity as AnyEntity,
    DeclaredProperty as DeclaredProperty,
    DynamicEntity as DynamicEntity,
    E as E,
    EntityObject as EntityObject,
    TableEntity as TableEntity,
    _ENTITY_ATTRIBUTES as _ENTITY_ATTRIBUTES,
    _TypedConstructor as _TypedConstructor,
    _attributes as _attributes,
    _check_timestamp as _check_timestamp,
)
from ._entity_write import (  # noqa: F401 - the front of the entities layer
    MAX_PROPERTY_NAME_LENGTH as MAX_PROPERTY_NAME_LENGTH,
    SYSTEM_PROPERTIES as SYSTEM_PROPERTIES,
    _INTEGERS as _INTEGERS,
    _MAX_VALID_NAMES as _MAX_VALID_NAMES,
    _PYTHON_NAMES as _PYTHON_NAMES,
    _UNFILTERABLE_ALLOWED as _UNFILTERABLE_ALLOWED,
    _VALID_NAMES as _VALID_NAMES,
    _check_property_name as _check_property_name,
    _choose_type as _choose_type,
    _declared_mismatch as _declared_mismatch,
    _fits as _fits,
    allow_unfilterable_names as allow_unfilterable_names,
    validate_property_name as validate_property_name,
    MAX_CUSTOM_PROPERTIES as MAX_CUSTOM_PROPERTIES,
    MAX_PROPERTIES as MAX_PROPERTIES,
    _EXACT_TYPES as _EXACT_TYPES,
    _FORBIDDEN_KEY_CHARS as _FORBIDDEN_KEY_CHARS,
    _MEASURES as _MEASURES,
    _SIZES as _SIZES,
    _custom_properties as _custom_properties,
    _value_size as _value_size,
    validate_key as validate_key,
    validate_table_name as validate_table_name,
    owner_of_part as owner_of_part,
    _DATETIME_UTC as _DATETIME_UTC,
    _INT32_TYPES as _INT32_TYPES,
    _MAPPING_SYSTEM as _MAPPING_SYSTEM,
    _NO_TYPES as _NO_TYPES,
    _PLANNED_SIZES as _PLANNED_SIZES,
    _PLANS as _PLANS,
    _WritePlan as _WritePlan,
    _getter as _getter,
    _make_plan as _make_plan,
    _mapping_parts as _mapping_parts,
    _mapping_payload as _mapping_payload,
    _not_an_entity as _not_an_entity,
    _payload_by_property as _payload_by_property,
    _payload_of_properties as _payload_of_properties,
    _plain_keys as _plain_keys,
    _planned_bag_payload as _planned_bag_payload,
    _planned_size as _planned_size,
    _planned_type as _planned_type,
    entity_to_payload as entity_to_payload,
)
from ._entity_read import (  # noqa: F401 - the front of the entities layer
    EntityResolver as EntityResolver,
    PropertyResolver as PropertyResolver,
    ResolvedType as ResolvedType,
    _DYNAMIC_ATTRIBUTES as _DYNAMIC_ATTRIBUTES,
    _custom_types as _custom_types,
    _foreign_reader as _foreign_reader,
    _plain_attributes as _plain_attributes,
    _read_declared as _read_declared,
    _read_declared_parts as _read_declared_parts,
    _read_dynamic as _read_dynamic,
    _read_dynamic_page as _read_dynamic_page,
    _read_mapping as _read_mapping,
    _read_model as _read_model,
    _type_untyped_values as _type_untyped_values,
    entity_from_payload as entity_from_payload,
    entity_reader as entity_reader,
    page_reader as page_reader,
    read_page as read_page,
    refuse_chunked_filter as refuse_chunked_filter,
    with_chunked_parts as with_chunked_parts,
)

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
    "page_reader",
    "ResolvedType",
    "EntityResolver",
    "PropertyResolver",
    "validate_key",
    "validate_property_name",
    "allow_unfilterable_names",
    "validate_table_name",
]
