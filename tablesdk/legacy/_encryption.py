"""Client-side encryption of the legacy calls, on tablesdk's engine (:mod:`tablesdk._encryption`).

The old package's rules, call by call:

* Writes that replace a whole entity (insert, update, insert-or-replace, and those of a batch) with
  a ``key_encryption_key`` encrypt the String properties that ``encryption_resolver_function(pk, rk,
  name)`` or ``EntityProperty.encrypt`` choose, and always add the two metadata properties (an
  empty list of names when nothing is chosen). A chosen property that is not a non-null string is
  refused with the old ValueError, an entity has at most 253 properties, and the key must have
  ``wrap_key``, ``get_kid`` and ``get_key_wrap_algorithm`` (the old AttributeError otherwise).
  ``require_encryption`` without a key refuses the write; merges are refused with any setting.
* Reads with a ``key_encryption_key`` or ``key_resolver_function`` decrypt each entity that carries
  the metadata (the resolver, when set, finds the key by its id; else the key is used) and return
  the others as they are, unless ``require_encryption``. Every failure is the old
  ``AzureException("Decryption failed")``, chained to the engine's error, which names the entity
  and the key id. ``require_encryption`` with neither key nor resolver fails each entity read.

New writes use protocol 1.0 by default, which the old package and the other legacy clients read;
``TableService.encryption_protocol`` (and the batch's) chooses the authenticated protocol instead.
Both are read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .. import DynamicEntity
from .. import EntityProperty as SdkEntityProperty
from .._encryption import (
    METADATA_PROPERTIES,
    PROTOCOL_LEGACY,
    EncryptionKeyError,
    EncryptionRequiredError,
    TableEncryptionError,
    TableEncryptionPolicy,
    decrypt_payload,
    encrypt_payload,
    is_encrypted,
)
from .._entities._edm import EdmType as SdkEdmType
from .._entities._edm import EntityPayload
from .._entities._entity_write import entity_to_payload
from ._errors import AzureException, AzureValidationError
from ._models import EdmType, EntityProperty

DEFAULT_ENCRYPTION_PROTOCOL = PROTOCOL_LEGACY
DECRYPTION_FAILED = "Decryption failed"
_UNSUPPORTED_TYPE = "Encryption is only supported for not None strings."
_UNSUPPORTED_METHOD = "The require_encryption flag is set, but encryption is not supported for this method."
_INCOMPLETE = "key encryption key does not define a complete interface. Value of {} is either missing or invalid."
_NOT_SENT = frozenset({"PartitionKey", "RowKey", "Timestamp", "etag"})

EncryptionResolver = Callable[[str, str, str], bool]


def check_write(require_encryption: bool, key_encryption_key: Any, *, merge: bool = False) -> bool:
    """Refuse a write the encryption settings forbid; True when the entity is to be encrypted.

    Merges could not be encrypted by the old package: any encryption setting refuses them.
    """
    if merge:
        if require_encryption or key_encryption_key is not None:
            raise ValueError(_UNSUPPORTED_METHOD)
        return False
    if require_encryption and key_encryption_key is None:
        raise ValueError("Encryption required but no key was provided.")
    return key_encryption_key is not None


def chosen_properties(
    entity: Mapping[str, Any], key_encryption_key: Any, encryption_resolver: EncryptionResolver | None,
) -> list[str]:
    """The names to encrypt, checked as the old package checked them, in the entity's order
    (before the entity is converted, so its errors come first as they did there)."""
    for method in ("wrap_key", "get_kid", "get_key_wrap_algorithm"):
        if not callable(getattr(key_encryption_key, method, None)):
            raise AttributeError(_INCOMPLETE.format(method))
    partition_key, row_key = entity["PartitionKey"], entity["RowKey"]
    chosen = []
    for name, value in entity.items():
        marked = isinstance(value, EntityProperty) and value.encrypt
        if not marked and not (encryption_resolver is not None and encryption_resolver(partition_key, row_key, name)):
            continue
        if isinstance(value, EntityProperty):
            if value.type != EdmType.STRING:
                raise ValueError(_UNSUPPORTED_TYPE)
            value = value.value
        if not isinstance(value, str):
            raise ValueError(_UNSUPPORTED_TYPE)
        if name not in _NOT_SENT or name in ("PartitionKey", "RowKey"):
            chosen.append(name)
    return chosen


def encrypt_entity(converted: DynamicEntity, chosen: list[str], key_encryption_key: Any, protocol: str) -> DynamicEntity:
    """``converted`` (the entity as it would be sent) with ``chosen`` encrypted and the metadata added.

    Metadata properties of an entity that was read without a key are replaced, as the old package
    replaced them.
    """
    for name in METADATA_PROPERTIES:
        if name in converted:
            del converted[name]
    names = frozenset(chosen)
    policy = TableEncryptionPolicy(key=_LegacyKey(key_encryption_key), protocol=protocol)
    try:
        payload = encrypt_payload(
            entity_to_payload(converted), policy, lambda pk, rk, name: name in names, write_empty=True,
        )
    except EncryptionKeyError as error:
        raise AzureException(str(error)) from error
    except TableEncryptionError as error:
        raise AzureValidationError(str(error)) from error
    encrypted = DynamicEntity(converted.PartitionKey, converted.RowKey, etag=converted.etag)
    for name, value in payload.values.items():
        if name not in ("PartitionKey", "RowKey"):
            encrypted[name] = SdkEntityProperty(value, payload.types[name])
    return encrypted


def read_columns(columns: list[str] | None, key_encryption_key: Any, key_resolver: Any) -> list[str] | None:
    """A ``select`` with both metadata columns added when the entities may have to be decrypted."""
    if columns is None or (key_encryption_key is None and key_resolver is None):
        return columns
    return columns + [name for name in METADATA_PROPERTIES if name not in columns]


class EntityReader:
    """Decrypts the entities of one read with the service's settings at the time of the call."""

    def __init__(self, require_encryption: bool, key_encryption_key: Any, key_resolver: Any) -> None:
        self.require_encryption = bool(require_encryption)
        self._policy: TableEncryptionPolicy | None = None
        if key_resolver is not None:  # the old package looked the key up by its id when it had a resolver
            self._policy = TableEncryptionPolicy(key_resolver=key_resolver)
        elif key_encryption_key is not None:
            self._policy = TableEncryptionPolicy(key=_LegacyKey(key_encryption_key))

    def read(self, payload: EntityPayload) -> tuple[EntityPayload, dict[str, tuple[Any, SdkEdmType | None]]]:
        """The payload decrypted, and the value and type each decrypted property had as it was read
        (what the old package gave a ``property_resolver`` for it)."""
        if self._policy is None:
            if self.require_encryption:
                raise AzureException(DECRYPTION_FAILED) from _no_key(payload)
            return payload, {}
        if not self.require_encryption and not is_encrypted(payload):
            return payload, {}
        try:
            decrypted = decrypt_payload(payload, self._policy, require_encryption=self.require_encryption)
        except Exception as error:  # the old package answered every failure to decrypt the same way
            raise AzureException(DECRYPTION_FAILED) from error
        before = payload.values
        return decrypted, {
            name: (before[name], payload.types.get(name))
            for name, value in decrypted.values.items() if name in before and value is not before[name]
        }


def _no_key(payload: EntityPayload) -> TableEncryptionError:
    """Why a read with ``require_encryption`` and neither key nor resolver fails (the cause of the
    old error): the entity is not encrypted, or there is nothing to decrypt it with."""
    pk, rk = payload.values.get("PartitionKey"), payload.values.get("RowKey")
    where: dict[str, Any] = {"partition_key": pk if isinstance(pk, str) else None,
                             "row_key": rk if isinstance(rk, str) else None}
    if not is_encrypted(payload):
        return EncryptionRequiredError("encryption is required and the entity read is not encrypted", **where)
    return EncryptionKeyError("require_encryption is set, and neither key_encryption_key nor key_resolver_function "
                              "is there to decrypt the entity with", **where)


class _LegacyKey:
    """A user's key-encryption key as the engine's policy takes it: the old package asked only for
    the methods a call used (``wrap_key`` to write, ``unwrap_key`` to read), so a key with one of
    them missing fails only where that method is needed."""

    __slots__ = ("_key",)

    def __init__(self, key: Any) -> None:
        self._key = key

    def wrap_key(self, key: bytes) -> bytes:
        return self._key.wrap_key(key)  # type: ignore[no-any-return]

    def unwrap_key(self, key: bytes, algorithm: str) -> bytes:
        return self._key.unwrap_key(key, algorithm)  # type: ignore[no-any-return]

    def get_kid(self) -> str:
        return self._key.get_kid()  # type: ignore[no-any-return]

    def get_key_wrap_algorithm(self) -> str:
        return self._key.get_key_wrap_algorithm()  # type: ignore[no-any-return]
