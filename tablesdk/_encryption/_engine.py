"""Encrypting and decrypting one entity payload, in either protocol.

:func:`encrypt_payload` and :func:`decrypt_payload` are the two calls every path of the SDK makes
(writes before the codec, reads after it); both return a new payload and leave theirs untouched,
and both raise a :class:`~tablesdk._encryption._errors.TableEncryptionError` naming the entity's
keys (and the key id, and the property) for whatever fails, before any plaintext is returned.
"""

from __future__ import annotations

import base64
import binascii
import os
from typing import Any, Callable, NamedTuple, NoReturn

from .._entities._edm import (
    MAX_ENTITY_BYTES,
    MAX_PROPERTY_BYTES,
    EdmType,
    EntityPayload,
    check_value,
    infer_edm_type,
)
from .._entities._edm_base import utf16_len
from .._entities._edm_specs import EDM_SPECS
from . import _authenticated, _legacy_v1
from ._errors import (
    EncryptedDataError,
    EncryptionKeyError,
    EncryptionRequiredError,
    TableEncryptionError,
    UnknownEncryptionProtocolError,
)
from ._keys import KeyEncryptionKey
from ._metadata import KeyMetadata, MalformedMetadata, build_key_metadata, parse_key_metadata
from ._policy import (
    METADATA_KEY,
    METADATA_NAMES,
    METADATA_PROPERTIES,
    PROTOCOL_AUTHENTICATED,
    PROTOCOL_LEGACY,
    PROTOCOLS,
    TableEncryptionPolicy,
)

__all__ = [
    "encrypt_payload",
    "decrypt_payload",
    "decrypt_payload_with_details",
    "EncryptionDetails",
    "protocol_of",
    "is_encrypted",
    "MAX_USER_PROPERTIES",
]

#: The service allows 255 properties besides the keys and Timestamp; the metadata takes two.
MAX_USER_PROPERTIES = 253
_KEYS = ("PartitionKey", "RowKey")
_NOT_USER = frozenset(("PartitionKey", "RowKey", "Timestamp", *METADATA_PROPERTIES))
_ALGORITHMS = {PROTOCOL_LEGACY: _legacy_v1.ENCRYPTION_ALGORITHM, PROTOCOL_AUTHENTICATED: _authenticated.ENCRYPTION_ALGORITHM}
_CONTENT_KEY_BYTES = 32


class _Entity:
    """The keys of the entity at hand, to name it in every error."""

    __slots__ = ("partition_key", "row_key", "key_id")

    def __init__(self, values: dict[str, Any]) -> None:
        pk, rk = values.get("PartitionKey"), values.get("RowKey")
        self.partition_key: str | None = pk if isinstance(pk, str) else None
        self.row_key: str | None = rk if isinstance(rk, str) else None
        self.key_id: str | None = None

    def fail(self, error: type[TableEncryptionError], message: str, name: str | None = None) -> NoReturn:
        raise error(message, partition_key=self.partition_key, row_key=self.row_key, key_id=self.key_id,
                    property_name=name)


def is_encrypted(payload: EntityPayload) -> bool:
    """Whether ``payload`` carries client-side encryption metadata."""
    values = payload.values
    return values.get(METADATA_KEY) is not None or values.get(METADATA_NAMES) is not None


# ---------------------------------------------------------------- writing


def encrypt_payload(
    payload: EntityPayload,
    policy: TableEncryptionPolicy,
    should_encrypt: Callable[[str, str, str], bool],
    *,
    write_empty: bool = False,
) -> EntityPayload:
    """A new payload with the properties ``should_encrypt(pk, rk, name)`` chooses encrypted under
    ``policy.protocol`` (as Edm.Binary) and the two metadata properties added.

    With no property chosen the payload is returned unchanged and without metadata, unless
    ``write_empty`` (metadata with an empty list, as the legacy clients write whenever they have a
    key) or the policy requires encryption (:class:`EncryptionRequiredError`). Refused with a
    :class:`TableEncryptionError` naming the property: a key, a metadata name or a property the
    protocol cannot encrypt (1.0: anything but a non-null string) chosen, metadata already in the
    payload, more than 253 user properties, an encrypted value beyond the service's 64 KiB.
    A null value is not encrypted under the authenticated protocol (the service stores no nulls).
    """
    values, types = payload.values, payload.types
    entity = _Entity(values)
    pk, rk = entity.partition_key, entity.row_key
    if pk is None or rk is None:
        entity.fail(TableEncryptionError, "an entity to encrypt needs a str PartitionKey and RowKey")
    legacy = policy.protocol == PROTOCOL_LEGACY
    chosen: list[tuple[str, Any, EdmType]] = []
    user_properties = 0
    for name, value in values.items():
        if name in METADATA_PROPERTIES:
            entity.fail(TableEncryptionError, "the entity already holds encryption metadata (a name reserved for it)", name)
        if name == "Timestamp":
            continue
        if name not in _KEYS:
            user_properties += 1
        if not should_encrypt(pk, rk, name):
            continue
        if name in _KEYS:
            entity.fail(TableEncryptionError, "the keys cannot be encrypted (the service finds entities by them)", name)
        if isinstance(value, str) and not _encodable(value):
            entity.fail(TableEncryptionError, "the string holds a lone surrogate, which is not text UTF-8 can carry", name)
        edm_type = types.get(name)
        if legacy:
            if not isinstance(value, str) or edm_type not in (None, EdmType.STRING):
                entity.fail(TableEncryptionError, "protocol 1.0 encrypts only non-null strings "
                            f"(got {'null' if value is None else (edm_type or type(value).__name__)}); "
                            "the authenticated protocol encrypts every type", name)
            chosen.append((name, value, EdmType.STRING))
            continue
        if value is None:
            continue
        if edm_type is None:
            edm_type = infer_edm_type(value, name)
        else:
            check_value(name, value, edm_type)
        chosen.append((name, value, edm_type))
    if not chosen and not write_empty:
        if policy.require_encryption:
            entity.fail(EncryptionRequiredError, "encryption is required and no property of the entity is chosen for it")
        return payload
    if user_properties > MAX_USER_PROPERTIES:
        entity.fail(TableEncryptionError, f"an encrypted entity has at most {MAX_USER_PROPERTIES} properties besides "
                    f"the keys (the metadata takes two of the service's 255), got {user_properties}")
    key = policy.key
    if key is None:
        entity.fail(EncryptionKeyError, "the encryption policy has no key to encrypt with")
    content_key = os.urandom(_CONTENT_KEY_BYTES)
    key_id, wrapped, algorithm = _wrap(entity, key, content_key)
    new_values, new_types = dict(values), dict(types)
    if legacy:
        encrypted, names_blob, metadata = _encrypt_legacy(pk, rk, chosen, content_key, key_id, wrapped, algorithm)
    else:
        encrypted, names_blob, metadata = _encrypt_authenticated(pk, rk, chosen, content_key, key_id, wrapped, algorithm)
    for name, data in encrypted.items():
        if len(data) > MAX_PROPERTY_BYTES:
            entity.fail(TableEncryptionError, f"the encrypted value is {len(data)} bytes, beyond the service's "
                        f"{MAX_PROPERTY_BYTES} for a property", name)
        new_values[name] = data
        new_types[name] = EdmType.BINARY
    new_values[METADATA_NAMES] = names_blob
    new_types[METADATA_NAMES] = EdmType.BINARY
    new_values[METADATA_KEY] = metadata
    new_types[METADATA_KEY] = EdmType.STRING
    size = _entity_size(new_values, new_types)
    if size > MAX_ENTITY_BYTES:
        largest = max(encrypted, key=lambda name: len(encrypted[name]), default=None)
        entity.fail(TableEncryptionError, f"the encrypted entity is {size} bytes, beyond the service's {MAX_ENTITY_BYTES} "
                    "(encryption adds to each value and the metadata to the entity)", largest)
    return EntityPayload(new_values, new_types, payload.etag)


def _entity_size(values: dict[str, Any], types: dict[str, EdmType]) -> int:
    """The entity's size by the service's formula (4 bytes, the keys in UTF-16, then per property
    8 bytes, its name in UTF-16 and its value)."""
    size = 4
    for name, value in values.items():
        if name in _KEYS:
            size += utf16_len(value)
        elif value is not None and name != "Timestamp":
            spec = EDM_SPECS[types.get(name) or infer_edm_type(value, name)]
            size += 8 + utf16_len(name) + spec.size + spec.measure(value)
    return size


def _encodable(text: str) -> bool:
    """Whether ``text`` is UTF-8 encodable (tested here so that no UnicodeEncodeError, which quotes
    the text, is raised later)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _wrap(entity: _Entity, key: KeyEncryptionKey, content_key: bytes) -> tuple[str, bytes, str]:
    try:
        key_id = key.get_kid()
        algorithm = key.get_key_wrap_algorithm()
    except Exception as error:
        entity.fail(EncryptionKeyError, f"the key-encryption key failed to name itself ({type(error).__name__})")
    entity.key_id = key_id if isinstance(key_id, str) else None
    if not isinstance(key_id, str) or not key_id or not isinstance(algorithm, str):
        entity.fail(EncryptionKeyError, "the key-encryption key's get_kid and get_key_wrap_algorithm must return str")
    try:
        wrapped = key.wrap_key(content_key)
    except Exception as error:
        entity.fail(EncryptionKeyError, f"the key-encryption key failed to wrap the content key ({type(error).__name__})")
    if not isinstance(wrapped, (bytes, bytearray)) or not wrapped:
        entity.fail(EncryptionKeyError, "the key-encryption key's wrap_key must return bytes")
    return key_id, bytes(wrapped), algorithm


def _encrypt_legacy(
    pk: str, rk: str, chosen: list[tuple[str, Any, EdmType]], content_key: bytes, key_id: str, wrapped: bytes,
    algorithm: str,
) -> tuple[dict[str, bytes], bytes, str]:
    content_iv = os.urandom(16)
    encrypted = {
        name: _legacy_v1.encrypt_value(
            content_key, _legacy_v1.property_iv(content_iv, pk, rk, name, java_v1=False), value.encode("utf-8")
        )
        for name, value, _ in chosen
    }
    names_iv = _legacy_v1.property_iv(content_iv, pk, rk, METADATA_NAMES, java_v1=False)
    names_blob = _legacy_v1.encrypt_value(content_key, names_iv, _legacy_v1.names_plaintext([n for n, _, _ in chosen]))
    metadata = build_key_metadata(key_id=key_id, wrapped_key=wrapped, wrap_algorithm=algorithm,
                                  protocol=PROTOCOL_LEGACY, encryption_algorithm=_legacy_v1.ENCRYPTION_ALGORITHM,
                                  content_iv=content_iv)
    return encrypted, names_blob, metadata


def _encrypt_authenticated(
    pk: str, rk: str, chosen: list[tuple[str, Any, EdmType]], content_key: bytes, key_id: str, wrapped: bytes,
    algorithm: str,
) -> tuple[dict[str, bytes], bytes, str]:
    protocol = PROTOCOL_AUTHENTICATED
    metadata = build_key_metadata(key_id=key_id, wrapped_key=wrapped, wrap_algorithm=algorithm, protocol=protocol,
                                  encryption_algorithm=_authenticated.ENCRYPTION_ALGORITHM, content_iv=None)
    cipher = _authenticated.content_cipher(content_key, protocol)
    aad = _authenticated.associated_data_of(protocol, pk, rk, metadata)

    def sealed(name: str, plaintext: bytes) -> bytes:
        return _authenticated.seal(cipher, aad(name), plaintext)

    encrypted = {name: sealed(name, _authenticated.value_plaintext(value, edm_type)) for name, value, edm_type in chosen}
    names_blob = sealed(METADATA_NAMES, _legacy_v1.names_plaintext([n for n, _, _ in chosen]))
    return encrypted, names_blob, metadata


# ---------------------------------------------------------------- reading


class EncryptionDetails(NamedTuple):
    """How a decrypted entity was encrypted (what a re-encryption or an audit needs)."""

    #: The protocol of its metadata (:data:`PROTOCOL_LEGACY` or :data:`PROTOCOL_AUTHENTICATED`).
    protocol: str
    #: The id of the key-encryption key that wrapped its content key.
    key_id: str
    #: The encrypted properties the payload held, in its order (a projection may hold fewer than were encrypted).
    names: tuple[str, ...]


def protocol_of(payload: EntityPayload) -> str | None:
    """The protocol an encrypted payload names (None when it carries no metadata), read without a key.

    Raises :class:`EncryptedDataError` when the metadata is malformed; an unknown protocol is
    returned as it is named.
    """
    text = payload.values.get(METADATA_KEY)
    if text is None and payload.values.get(METADATA_NAMES) is None:
        return None
    try:
        return parse_key_metadata(text).protocol
    except MalformedMetadata as error:
        if error.protocol is not None:
            return error.protocol
        failed = str(error)
    _Entity(payload.values).fail(EncryptedDataError, f"the encryption metadata is malformed: {failed}", METADATA_KEY)


def decrypt_payload(
    payload: EntityPayload, policy: TableEncryptionPolicy | None, *, require_encryption: bool = False
) -> EntityPayload:
    """A new payload with the encrypted properties decrypted to their types and the metadata removed.

    A payload without metadata is returned as it is (:class:`EncryptionRequiredError` when
    ``require_encryption`` or the policy's says so). An encrypted name missing from the payload
    (a projection) is skipped. Raises :class:`EncryptionKeyError` (no policy or key for the key
    id, a key that fails to unwrap), :class:`UnknownEncryptionProtocolError` and
    :class:`EncryptedDataError` (damaged or tampered data or metadata), all before any value is
    returned.
    """
    return decrypt_payload_with_details(payload, policy, require_encryption=require_encryption)[0]


def decrypt_payload_with_details(
    payload: EntityPayload, policy: TableEncryptionPolicy | None, *, require_encryption: bool = False
) -> tuple[EntityPayload, EncryptionDetails | None]:
    """:func:`decrypt_payload`, and how the entity was encrypted (None when it was not).

    The details name the protocol, the key id and the properties decrypted: what re-encrypting
    the entity under another protocol or key chooses again.
    """
    return _decrypt(payload, policy, require_encryption)


def _decrypt(
    payload: EntityPayload, policy: TableEncryptionPolicy | None, require_encryption: bool
) -> tuple[EntityPayload, EncryptionDetails | None]:
    """A new payload with the encrypted properties decrypted to their types and the metadata removed.

    A payload without metadata is returned as it is (:class:`EncryptionRequiredError` when
    ``require_encryption`` or the policy's says so). An encrypted name missing from the payload
    (a projection) is skipped. Raises :class:`EncryptionKeyError` (no policy or key for the key
    id, a key that fails to unwrap), :class:`UnknownEncryptionProtocolError` and
    :class:`EncryptedDataError` (damaged or tampered data or metadata), all before any value is
    returned.
    """
    values = payload.values
    entity = _Entity(values)
    metadata_text, names_blob = values.get(METADATA_KEY), values.get(METADATA_NAMES)
    if metadata_text is None and names_blob is None:
        if require_encryption or (policy is not None and policy.require_encryption):
            entity.fail(EncryptionRequiredError, "encryption is required and the entity read is not encrypted")
        return payload, None
    pk, rk = entity.partition_key, entity.row_key
    if pk is None or rk is None:
        entity.fail(EncryptedDataError, "an encrypted entity read without its PartitionKey and RowKey cannot be "
                    "decrypted (a projection must keep the keys)")
    if metadata_text is None or names_blob is None:
        missing = METADATA_KEY if metadata_text is None else METADATA_NAMES
        entity.fail(EncryptedDataError, "the entity has only one of the two encryption metadata properties", missing)
    metadata = _read_metadata(entity, metadata_text)
    names_data = _binary(entity, METADATA_NAMES, names_blob, payload.types.get(METADATA_NAMES))
    if policy is None:
        entity.fail(EncryptionKeyError, "the entity is encrypted and no encryption policy (key) was given to read it")
    if metadata.protocol == PROTOCOL_LEGACY and not policy.allow_legacy_reads:
        entity.fail(UnknownEncryptionProtocolError, "the entity is in protocol 1.0, which this policy does not read "
                    "(allow_legacy_reads=False)")
    content_key = _unwrap(entity, policy, metadata)
    if metadata.protocol == PROTOCOL_LEGACY:
        decrypted = _decrypt_legacy(entity, payload, metadata, content_key, names_data)
    else:
        decrypted = _decrypt_authenticated(entity, payload, metadata_text, content_key, names_data)
    new_values = {name: value for name, value in values.items() if name not in METADATA_PROPERTIES}
    new_types = {name: edm_type for name, edm_type in payload.types.items() if name not in METADATA_PROPERTIES}
    for name, (value, edm_type) in decrypted.items():
        new_values[name] = value
        new_types[name] = edm_type
    listed = tuple(name for name in values if name in decrypted)
    return EntityPayload(new_values, new_types, payload.etag), EncryptionDetails(metadata.protocol, metadata.key_id, listed)


def _read_metadata(entity: _Entity, text: Any) -> KeyMetadata:
    try:
        metadata = parse_key_metadata(text)
    except MalformedMetadata as error:
        if error.protocol is not None and error.protocol not in PROTOCOLS:
            entity.fail(UnknownEncryptionProtocolError, f"the entity is encrypted with protocol {_shown(error.protocol)}, "
                        f"which this client does not know (it reads {', '.join(map(repr, PROTOCOLS))})")
        entity.fail(EncryptedDataError, f"the encryption metadata is malformed: {error}", METADATA_KEY)
    entity.key_id = metadata.key_id
    if metadata.protocol not in PROTOCOLS:
        entity.fail(UnknownEncryptionProtocolError, f"the entity is encrypted with protocol {_shown(metadata.protocol)}, "
                    f"which this client does not know (it reads {', '.join(map(repr, PROTOCOLS))})")
    expected = _ALGORITHMS[metadata.protocol]
    if metadata.encryption_algorithm != expected:
        entity.fail(UnknownEncryptionProtocolError, f"protocol {metadata.protocol!r} encrypts with {expected}, "
                    f"the metadata names {_shown(metadata.encryption_algorithm)}")
    if metadata.protocol == PROTOCOL_LEGACY and (metadata.content_iv is None or len(metadata.content_iv) != 16):
        entity.fail(EncryptedDataError, "the encryption metadata has no 16-byte ContentEncryptionIV", METADATA_KEY)
    return metadata


def _shown(text: str) -> str:
    """A name read from the metadata, for a message: quoted, and cut where it is too long to be one."""
    return repr(text if len(text) <= 40 else text[:40] + "...")


def _binary(entity: _Entity, name: str, value: Any, edm_type: EdmType | None) -> bytes:
    """The bytes of an encrypted property: bytes, or base64 text where the wire did not type it."""
    if isinstance(value, (bytes, bytearray, memoryview)) and edm_type in (None, EdmType.BINARY):
        return bytes(value)
    if isinstance(value, str) and edm_type is None:
        try:
            return base64.b64decode(value.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError, ValueError):
            pass
    entity.fail(EncryptedDataError, "an encrypted property is not binary data", name)


def _unwrap(entity: _Entity, policy: TableEncryptionPolicy, metadata: KeyMetadata) -> bytes:
    key_id = metadata.key_id
    key: Any = None
    if policy.key_resolver is not None:
        try:
            key = policy.key_resolver(key_id)
        except Exception as error:
            entity.fail(EncryptionKeyError, f"the key resolver failed ({type(error).__name__})")
    if key is None and policy.key is not None:
        key = policy.key
    if key is None:
        entity.fail(EncryptionKeyError, "no key for the entity's key id (neither the policy's key nor its resolver)")
    try:
        own_id = key.get_kid()
    except Exception as error:
        entity.fail(EncryptionKeyError, f"the key-encryption key failed to name itself ({type(error).__name__})")
    if own_id != key_id:
        entity.fail(EncryptionKeyError, f"the key found has id {own_id!r}, not the entity's: the entity was encrypted "
                    "with another key (give it through key_resolver)")
    try:
        content_key = key.unwrap_key(metadata.wrapped_key, metadata.wrap_algorithm)
    except Exception as error:
        entity.fail(EncryptionKeyError, f"the key failed to unwrap the content key with {_shown(metadata.wrap_algorithm)} "
                    f"({type(error).__name__}): the wrong key, or a damaged wrapped key")
    if not isinstance(content_key, (bytes, bytearray)) or len(content_key) != _CONTENT_KEY_BYTES:
        entity.fail(EncryptionKeyError, "the unwrapped content key is not 32 bytes: the wrong key, or a damaged wrapped key")
    return bytes(content_key)


def _listed_names(entity: _Entity, names: Any) -> list[str]:
    if not isinstance(names, list) or len(set(names)) != len(names):
        entity.fail(EncryptedDataError, "the list of encrypted names is malformed", METADATA_NAMES)
    for name in names:
        if not isinstance(name, str) or name in _KEYS or name in METADATA_PROPERTIES:
            entity.fail(EncryptedDataError, "the list of encrypted names names a key or a metadata property", METADATA_NAMES)
    return names


def _decrypt_legacy(
    entity: _Entity, payload: EntityPayload, metadata: KeyMetadata, content_key: bytes, names_data: bytes
) -> dict[str, tuple[Any, EdmType]]:
    assert metadata.content_iv is not None  # checked by _read_metadata
    pk, rk, content_iv = entity.partition_key or "", entity.row_key or "", metadata.content_iv
    library = metadata.library or ""
    java_v1 = not metadata.has_wrapping_metadata or "Java" in library
    names_text = _legacy_v1.decrypt_text(
        content_key, _legacy_v1.property_iv(content_iv, pk, rk, METADATA_NAMES, java_v1=java_v1), names_data
    )
    names = None if names_text is None else _legacy_v1.parse_names(names_text, java_v1=java_v1)
    if names is None:
        entity.fail(EncryptedDataError, "the list of encrypted names does not decrypt (wrong key, or damaged or "
                    "tampered data)", METADATA_NAMES)
    decrypted: dict[str, tuple[Any, EdmType]] = {}
    for name in _listed_names(entity, names):
        if payload.values.get(name) is None:  # not read (a projection), or a null the service reports for it
            continue
        data = _binary(entity, name, payload.values[name], payload.types.get(name))
        plaintext = _legacy_v1.decrypt_text(
            content_key, _legacy_v1.property_iv(content_iv, pk, rk, name, java_v1=java_v1), data
        )
        if plaintext is None:
            entity.fail(EncryptedDataError, "the property does not decrypt (bad padding or text: damaged or tampered "
                        "data)", name)
        decrypted[name] = (plaintext, EdmType.STRING)
    return decrypted


def _decrypt_authenticated(
    entity: _Entity, payload: EntityPayload, metadata_text: str, content_key: bytes, names_data: bytes
) -> dict[str, tuple[Any, EdmType]]:
    protocol = PROTOCOL_AUTHENTICATED
    pk, rk = entity.partition_key or "", entity.row_key or ""
    cipher = _authenticated.content_cipher(content_key, protocol)
    aad = _authenticated.associated_data_of(protocol, pk, rk, metadata_text)

    def opened(name: str, data: bytes) -> bytes | None:
        return _authenticated.unseal(cipher, aad(name), data)

    names_plaintext = opened(METADATA_NAMES, names_data)
    names = None
    if names_plaintext is not None:
        names_text = _authenticated.text_or_none(names_plaintext)
        names = None if names_text is None else _legacy_v1.parse_names(names_text, java_v1=False)
    if names is None:
        entity.fail(EncryptedDataError, "the list of encrypted names fails authentication (tampered or damaged data "
                    "or metadata)", METADATA_NAMES)
    decrypted: dict[str, tuple[Any, EdmType]] = {}
    for name in _listed_names(entity, names):
        if payload.values.get(name) is None:  # not read (a projection), or a null the service reports for it
            continue
        data = _binary(entity, name, payload.values[name], payload.types.get(name))
        plaintext = opened(name, data)
        value = None if plaintext is None else _authenticated.value_from_plaintext(plaintext)
        if value is None:
            entity.fail(EncryptedDataError, "the property fails authentication (tampered, damaged or moved from "
                        "another entity or property)", name)
        decrypted[name] = value
    return decrypted
