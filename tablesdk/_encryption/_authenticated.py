"""tablesdk's authenticated protocol: AES-256-GCM per property.

- The content key (random, 32 bytes, wrapped by the key-encryption key as in protocol 1.0) is not
  used directly: the GCM key is HKDF-SHA256 of it with this protocol's id, so the same wrapped key
  replayed into a 1.0 entity opens nothing of this one.
- Each encrypted property is ``nonce (12 bytes) || ciphertext || tag (16 bytes)``, with a fresh
  random nonce. Its associated data binds the protocol id, the PartitionKey, the RowKey, the
  property name and the whole ``_ClientEncryptionMetadata1`` text, each length-prefixed: a value
  moved to another entity or property, or metadata changed in any byte, fails authentication.
- The plaintext carries the EDM type and the value's wire form (one byte for the type, then the
  value: UTF-8 for a string, the bytes of a binary, the AtomPub text of any other type), so every
  type round-trips exactly (an Int64 beyond 2**53, a DateTime's seventh digit, NaN).
- ``_ClientEncryptionMetadata2`` is the JSON list of encrypted names, sealed the same way under
  its own name.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from .._entities._edm import EdmType, from_atom_text, to_atom_text
from ._crypto import primitives

__all__ = ["ENCRYPTION_ALGORITHM", "content_cipher", "associated_data", "associated_data_of", "seal", "unseal",
           "value_plaintext", "value_from_plaintext"]

ENCRYPTION_ALGORITHM = "AES_GCM_256"
_NONCE = 12
_TAG = 16
#: The overhead of one sealed value: nonce and tag.
OVERHEAD = _NONCE + _TAG

#: The type byte of each EDM type in a plaintext (fixed: never derived from the enum's order).
_TYPE_CODES: dict[EdmType, int] = {
    EdmType.STRING: 1, EdmType.INT32: 2, EdmType.INT64: 3, EdmType.DOUBLE: 4,
    EdmType.BOOLEAN: 5, EdmType.DATETIME: 6, EdmType.GUID: 7, EdmType.BINARY: 8,
}
_TYPES_BY_CODE = {code: edm_type for edm_type, code in _TYPE_CODES.items()}


def content_cipher(content_key: bytes, protocol: str) -> Any:
    """The AES-GCM cipher of an entity: keyed by HKDF-SHA256(content key, info=protocol id)."""
    crypto = primitives()
    key = crypto["HKDF"](
        algorithm=crypto["hashes"].SHA256(), length=32, salt=None, info=protocol.encode("ascii") + b" content key"
    ).derive(content_key)
    return crypto["AESGCM"](key)


def _part(text: str) -> bytes:
    data = text.encode("utf-8", "surrogatepass")
    return len(data).to_bytes(4, "big") + data


def associated_data(protocol: str, partition_key: str, row_key: str, name: str, key_metadata: str) -> bytes:
    """The associated data of one property: each part's UTF-8 length (4 bytes) then the part."""
    return associated_data_of(protocol, partition_key, row_key, key_metadata)(name)


def associated_data_of(protocol: str, partition_key: str, row_key: str, key_metadata: str) -> Callable[[str], bytes]:
    """``name -> associated data`` for the properties of one entity (the parts they share encoded once)."""
    head = _part(protocol) + _part(partition_key) + _part(row_key)
    tail = _part(key_metadata)

    def of(name: str) -> bytes:
        return head + _part(name) + tail

    return of


def seal(cipher: Any, aad: bytes, plaintext: bytes) -> bytes:
    """``nonce || ciphertext || tag`` of ``plaintext`` under a fresh nonce."""
    nonce = os.urandom(_NONCE)
    sealed: bytes = cipher.encrypt(nonce, plaintext, aad)
    return nonce + sealed


def unseal(cipher: Any, aad: bytes, data: bytes) -> bytes | None:
    """The plaintext of a sealed value; None when it is too short or fails authentication."""
    if len(data) < OVERHEAD:
        return None
    try:
        plaintext: bytes = cipher.decrypt(data[:_NONCE], data[_NONCE:], aad)
    except primitives()["InvalidTag"]:
        return None
    return plaintext


def text_or_none(data: bytes) -> str | None:
    """``data`` as UTF-8 text, or None (no UnicodeDecodeError, which quotes the bytes)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def value_plaintext(value: Any, edm_type: EdmType) -> bytes:
    """The plaintext of a value of ``edm_type`` (already checked): its type byte and wire form."""
    code = bytes((_TYPE_CODES[edm_type],))
    if edm_type is EdmType.STRING:
        text: str = value
        return code + text.encode("utf-8")  # encodable: the engine checked it
    if edm_type is EdmType.BINARY:
        data: bytes = bytes(value)
        return code + data
    return code + to_atom_text(value, edm_type).encode("ascii")


def value_from_plaintext(plaintext: bytes) -> tuple[Any, EdmType] | None:
    """The value and EDM type a plaintext holds; None when it is not one (never an exception, which
    could quote the plaintext)."""
    edm_type = _TYPES_BY_CODE.get(plaintext[0]) if plaintext else None
    if edm_type is None:
        return None
    body = plaintext[1:]
    if edm_type is EdmType.BINARY:
        return body, edm_type
    try:
        if edm_type is EdmType.STRING:
            return body.decode("utf-8"), edm_type
        return from_atom_text(body.decode("ascii"), edm_type), edm_type
    except Exception:  # whatever the type's reader raises: the plaintext is not its form
        return None
