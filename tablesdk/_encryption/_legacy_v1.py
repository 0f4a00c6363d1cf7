"""Protocol 1.0, the legacy clients' format: AES-256-CBC with PKCS7 padding, no integrity.

Per entity a random 32-byte content key and a random 16-byte ``ContentEncryptionIV``. Each
property's IV is the first 16 bytes of SHA-256(ContentEncryptionIV + UTF-8(RowKey + PartitionKey +
name)) as the .NET and Python clients write it, or of PartitionKey + RowKey + name as Java's V1
writers did. The list of encrypted names is encrypted the same way under the name
``_ClientEncryptionMetadata2``: a JSON list (``["a", "b"]``), or Java's ``[a, b]``.

Nothing authenticates the data: a change to a ciphertext is found only when it breaks the padding
or the UTF-8 of the plaintext (or, for the list, its syntax); a block changed with care decrypts
to other text silently. This is the padding-oracle weakness of CVE-2022-30187, which is why new
writes use the authenticated protocol.
"""

from __future__ import annotations

import json
from typing import Any

from ._crypto import primitives

__all__ = ["ENCRYPTION_ALGORITHM", "property_iv", "encrypt_value", "decrypt_text", "names_plaintext", "parse_names"]

ENCRYPTION_ALGORITHM = "AES_CBC_256"
_BLOCK = 16


def property_iv(content_iv: bytes, partition_key: str, row_key: str, name: str, *, java_v1: bool) -> bytes:
    """The IV of property ``name``: SHA-256 of the entity's IV and the keys and name, cut to 16 bytes."""
    import hashlib

    text = partition_key + row_key + name if java_v1 else row_key + partition_key + name
    return hashlib.sha256(content_iv + text.encode("utf-8")).digest()[:_BLOCK]


def _cipher(key: bytes, iv: bytes) -> Any:
    crypto = primitives()
    return crypto["Cipher"](crypto["algorithms"].AES(key), crypto["modes"].CBC(iv))


def encrypt_value(key: bytes, iv: bytes, plaintext: bytes) -> bytes:
    """``plaintext`` padded (PKCS7) and encrypted with AES-256-CBC."""
    pad = _BLOCK - len(plaintext) % _BLOCK  # PKCS7: 1 to 16 bytes, each the count
    padded = plaintext + bytes((pad,)) * pad
    encryptor = _cipher(key, iv).encryptor()
    encrypted: bytes = encryptor.update(padded) + encryptor.finalize()
    return encrypted


def decrypt_text(key: bytes, iv: bytes, ciphertext: bytes) -> str | None:
    """The text ``ciphertext`` holds; None when its length, its padding or its UTF-8 is wrong.

    Failures are None rather than exceptions so that no exception holding the plaintext (a
    UnicodeDecodeError quotes its bytes) is ever raised or chained.
    """
    if not ciphertext or len(ciphertext) % _BLOCK:
        return None
    decryptor = _cipher(key, iv).decryptor()
    padded: bytes = decryptor.update(ciphertext) + decryptor.finalize()
    pad = padded[-1]
    if not 1 <= pad <= _BLOCK or padded[-pad:] != bytes((pad,)) * pad:
        return None
    try:
        return padded[:-pad].decode("utf-8")
    except UnicodeDecodeError:
        return None


def names_plaintext(names: list[str]) -> bytes:
    """The list of encrypted names as the .NET and Python clients write it (JSON, ``", "`` between items)."""
    return json.dumps(names).encode("utf-8")


def parse_names(text: str, *, java_v1: bool) -> list[str] | None:
    """The list of encrypted names: JSON, or Java V1's ``[a, b]``; None when it is neither.

    A Java V1 entity's list is read as Java wrote it; JSON is tried first for every writer (a
    Java list of names never parses as a JSON list of strings, since a name is not quoted).
    """
    try:
        names = json.loads(text)
    except ValueError:
        names = None
    if isinstance(names, list) and all(isinstance(name, str) for name in names):
        return names
    if java_v1 and text.startswith("[") and text.endswith("]"):
        inner = text[1:-1]
        return inner.split(", ") if inner else []
    return None
