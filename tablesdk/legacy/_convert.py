"""Entities between the old package's dicts and tablesdk's entities, with the old rules.

Writing follows ``azure-cosmosdb-table`` 1.0.6: a Python ``int`` is sent as Edm.Int64, a
``datetime`` as Edm.DateTime truncated to whole seconds (naive ones taken as UTC), ``bool``,
``float``, ``str`` and ``None`` as themselves, and anything else (``uuid.UUID``, ``bytes``)
needs an :class:`EntityProperty` with an explicit type. ``Timestamp`` and ``etag`` keys of an
entity that was read are not sent (the old package sent ``etag`` as a String property).

Reading gives what the old package gave: Int64 as ``int``, Int32 as
``EntityProperty(EdmType.INT32, n)``, Guid as ``EntityProperty(EdmType.GUID, text)``, Binary as
``EntityProperty(EdmType.BINARY, bytes)``, DateTime as an aware UTC ``datetime``, and a
``property_resolver(pk, rk, name, value, edm_type)`` deciding the type of each property from
its JSON value.
"""

from __future__ import annotations

import base64
import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from .. import DynamicEntity, EdmType as SdkEdmType, EntityProperty as SdkEntityProperty
from .._entities._edm_base import format_datetime, parse_datetime
from ._errors import AzureException
from ._models import EdmType, Entity, EntityProperty

PropertyResolver = Callable[[str, str, str, Any, "str | None"], "str | None"]

_INT32_RANGE = range(-2**31, 2**31)
_INT64_RANGE = range(-2**63, 2**63)
_MAX_PROPERTIES = 255
_NOT_SENT = frozenset({"PartitionKey", "RowKey", "Timestamp", "etag"})
_EDM_NAMES = frozenset(
    {EdmType.BINARY, EdmType.INT64, EdmType.GUID, EdmType.DATETIME, EdmType.STRING, EdmType.INT32,
     EdmType.DOUBLE, EdmType.BOOLEAN}
)


# ---------------------------------------------------------------- writing

def check_entity(entity: object, *, encrypted: bool = False) -> Mapping[str, Any]:
    """The old package's checks of an entity to write: a dict with keys, at most 255 properties."""
    if entity is None:
        raise ValueError("entity should not be None.")
    if not isinstance(entity, dict):
        raise TypeError("The entity must be either in dict format or an entity object.")
    for key in ("PartitionKey", "RowKey"):
        if entity.get(key) is None:
            raise ValueError(f"{key} should not be None or empty.")
    limit = _MAX_PROPERTIES - 2 if encrypted else _MAX_PROPERTIES
    if len(entity) > limit or (len(entity) == limit and "Timestamp" not in entity):
        raise ValueError("The entity contains more properties than allowed.")
    for name in entity:
        if len(name) > 255:
            raise ValueError("The property name exceeds the maximum allowed length.")
    return entity


def to_sdk_entity(entity: Mapping[str, Any]) -> DynamicEntity:
    """The tablesdk entity the old package would have sent for ``entity`` (checked by :func:`check_entity`)."""
    result = DynamicEntity(entity["PartitionKey"], entity["RowKey"])
    for name, value in entity.items():
        if name in _NOT_SENT:
            continue
        result[name] = _sent_value(value)
    return result


def utc_seconds(value: datetime) -> datetime:
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc)
    return value.replace(microsecond=0, tzinfo=timezone.utc)


def _untyped(value: Any) -> Any:
    """A value sent without a type: the service takes a JSON string, boolean or number as it is."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        return SdkEntityProperty(value, SdkEdmType.INT32 if value in _INT32_RANGE else SdkEdmType.INT64)
    if isinstance(value, float):
        return SdkEntityProperty(value, SdkEdmType.DOUBLE)
    raise TypeError(f"Cannot serialize the specified value ({type(value).__name__}) to an entity.")


def _sent_value(value: Any) -> Any:
    if isinstance(value, EntityProperty):
        return _typed_value(value)
    kind = type(value)
    if kind is int:
        return _typed_value(EntityProperty(EdmType.INT64, value))
    if kind is datetime:
        return SdkEntityProperty(utc_seconds(value), SdkEdmType.DATETIME)
    if kind is float:
        return _typed_value(EntityProperty(EdmType.DOUBLE, value))
    if kind in (bool, str) or value is None:
        return value
    raise TypeError(
        f"Cannot serialize the specified value ({kind.__name__}) to an entity.  Please use an EntityProperty "
        "(which can specify custom types), int, str, bool, or datetime."
    )


def _typed_value(prop: EntityProperty) -> Any:
    edm = str(prop.type) if prop.type is not None else None
    value = prop.value
    if edm == EdmType.INT64:
        number = int(value)
        if number not in _INT64_RANGE:
            raise TypeError(f"{value} is too large to be cast to type {EdmType.INT64}.")
        return SdkEntityProperty(number, SdkEdmType.INT64)
    if edm == EdmType.INT32:
        number = int(value)
        if number not in _INT32_RANGE:
            raise TypeError(f"{value} is too large to be cast to type {EdmType.INT32}.")
        return SdkEntityProperty(number, SdkEdmType.INT32)
    if edm == EdmType.DOUBLE:
        if isinstance(value, float) and not math.isfinite(value):
            return SdkEntityProperty(value, SdkEdmType.DOUBLE)
        if math.isnan(value):  # a number-like value the old package checked the same way
            return SdkEntityProperty(float(value), SdkEdmType.DOUBLE)
        return _untyped(value)
    if edm == EdmType.DATETIME:
        return SdkEntityProperty(utc_seconds(value), SdkEdmType.DATETIME)
    if edm == EdmType.GUID:
        return SdkEntityProperty(uuid.UUID(str(value)), SdkEdmType.GUID)
    if edm == EdmType.BINARY:
        data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        return SdkEntityProperty(data, SdkEdmType.BINARY)
    if edm in (EdmType.STRING, EdmType.BOOLEAN):
        return _untyped(value)
    raise TypeError(f"Type not supported when sending data to the service: {prop.type}.")


# ---------------------------------------------------------------- reading

def _wire_form(value: Any, edm: SdkEdmType | None) -> tuple[Any, str | None]:
    """The JSON value and stated type a property arrived with, in minimal metadata."""
    if edm is None or value is None:
        return value, None
    if edm is SdkEdmType.INT64:
        return str(value), edm.value
    if edm is SdkEdmType.DATETIME:
        return _service_text(value), edm.value
    if edm is SdkEdmType.GUID:
        return str(value), edm.value
    if edm is SdkEdmType.BINARY:
        return base64.b64encode(value).decode("ascii"), edm.value
    if edm is SdkEdmType.DOUBLE and not math.isfinite(value):
        return ("NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"), edm.value
    return value, None


def _service_text(value: datetime) -> str:
    """DateTime text as the service writes it: the fraction without its trailing zeros."""
    whole, _, fraction = format_datetime(value).rstrip("Z").partition(".")
    fraction = fraction.rstrip("0")
    return f"{whole}.{fraction}Z" if fraction else f"{whole}Z"


def _from_datetime_text(text: str) -> datetime:
    moment = parse_datetime(text)
    return datetime(
        moment.year, moment.month, moment.day, moment.hour, moment.minute, moment.second, moment.microsecond,
        tzinfo=timezone.utc,
    )


def _binary(value: Any) -> EntityProperty:
    return EntityProperty(EdmType.BINARY, base64.b64decode(value))


_CONVERSIONS: dict[str, Callable[[Any], Any]] = {
    EdmType.BINARY: _binary,
    EdmType.INT32: lambda value: EntityProperty(EdmType.INT32, int(value)),
    EdmType.INT64: int,
    EdmType.DOUBLE: float,
    EdmType.DATETIME: _from_datetime_text,
}


def _read_value(
    name: str, raw: Any, stated: str | None, partition_key: Any, row_key: Any, resolver: PropertyResolver | None,
) -> Any:
    edm = stated
    if resolver is not None and name not in _METADATA:  # the old package kept its resolvers off the metadata
        edm = resolver(partition_key, row_key, name, raw, edm)
        if edm and edm not in _EDM_NAMES:
            raise AzureException(f"Type not supported when sending data to the service: {edm}.")
    if type(raw) is int:
        edm = EdmType.INT32
    if not edm:
        return raw
    convert = _CONVERSIONS.get(edm)
    if convert is None:
        return EntityProperty(edm, raw)
    try:
        return convert(raw)
    except Exception as error:
        if resolver is None:
            raise
        raise AzureException(
            f"The specified property resolver returned an invalid type. Name: {name}, Value: {raw}, EdmType: {edm}"
        ) from error


_SYSTEM = ("PartitionKey", "RowKey", "Timestamp")
_METADATA = frozenset({"_ClientEncryptionMetadata1", "_ClientEncryptionMetadata2"})


def _decrypted_value(
    name: str, value: str, stored: tuple[Any, SdkEdmType | None], partition_key: Any, row_key: Any,
    resolver: PropertyResolver | None,
) -> str:
    """A decrypted property: its text, whatever a ``property_resolver`` says of the ciphertext it is
    still asked about (the old package asked, refused a type that is not an EDM type, and kept the text)."""
    if resolver is not None:
        raw, stated = _wire_form(*stored)
        edm = resolver(partition_key, row_key, name, raw, stated)
        if edm and edm not in _EDM_NAMES:
            raise AzureException(f"Type not supported when sending data to the service: {edm}.")
    return value


def to_legacy_entity(
    values: Mapping[str, Any], types: Mapping[str, SdkEdmType], etag: str | None,
    resolver: PropertyResolver | None = None, select: Sequence[str] | None = None,
    decrypted: Mapping[str, tuple[Any, SdkEdmType | None]] | None = None,
) -> Entity:
    """The old package's :class:`Entity` for an entity tablesdk read (its values, types and ETag).

    With ``select``, the keys and Timestamp are there only when selected (tablesdk asks for
    them always; the old package gave what the service sent). A read without metadata has no
    ETag of its own: it is the one the Timestamp stands for, as the old package built it.
    """
    entity = Entity()
    hidden = () if select is None else tuple(name for name in _SYSTEM if name not in select)
    partition_key = values.get("PartitionKey")
    row_key = values.get("RowKey")
    if partition_key and "PartitionKey" not in hidden:
        entity["PartitionKey"] = partition_key
    if row_key and "RowKey" not in hidden:
        entity["RowKey"] = row_key
    timestamp = values.get("Timestamp")
    if timestamp and "Timestamp" not in hidden:
        text = timestamp if isinstance(timestamp, str) else _service_text(timestamp)
        entity["Timestamp"] = _from_datetime_text(text)
        if etag is None:  # no metadata: the ETag the Timestamp stands for, as the old package made it
            etag = "W/\"datetime'" + quote(text) + "'\""
    for name, value in values.items():
        if name in _SYSTEM:
            continue
        if decrypted and name in decrypted:
            entity[name] = _decrypted_value(name, value, decrypted[name], partition_key, row_key, resolver)
            continue
        raw, stated = _wire_form(value, types.get(name))
        entity[name] = _read_value(name, raw, stated, partition_key, row_key, resolver)
    entity["etag"] = etag
    return entity
