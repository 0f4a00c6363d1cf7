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

# What the modules above this layer (and the tests) import; a private name is imported from
# the module that owns it, except _plain_attributes, which the unit of work imports from here.
from ._entity_classes import AnyEntity, DeclaredProperty, DynamicEntity, E, EntityObject, TableEntity
from ._entity_read import (
    ResolvedType,
    _plain_attributes as _plain_attributes,
    entity_from_payload,
    entity_reader,
    page_reader,
    read_page,
    encrypted_names,
    refuse_chunked_filter,
    refuse_encrypted_filter,
    with_chunked_parts,
)
from ._entity_write import (
    allow_unfilterable_names,
    entity_to_payload,
    validate_key,
    validate_property_name,
    validate_table_name,
)

__all__ = [
    "TableEntity",
    "DynamicEntity",
    "DeclaredProperty",
    "AnyEntity",
    "EntityObject",
    "E",
    "entity_to_payload",
    "entity_from_payload",
    "entity_reader",
    "read_page",
    "page_reader",
    "ResolvedType",
    "refuse_chunked_filter",
    "refuse_encrypted_filter",
    "encrypted_names",
    "with_chunked_parts",
    "validate_key",
    "validate_property_name",
    "allow_unfilterable_names",
    "validate_table_name",
]
