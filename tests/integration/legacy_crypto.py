"""Keys and hand-built entities for the tests of client-side encryption against the legacy clients.

:class:`KeyWrapper` is a key-encryption key as users of ``azure-cosmosdb-table`` wrote them (the
four methods of its protocol, AES key wrap A256KW from ``cryptography``): the same object is given
to the old package, to ``tablesdk.legacy`` and (through the engine's policy) to tablesdk's client.

:func:`legacy_vector` builds an entity in protocol 1.0 as a given writer stored it, from the format
alone (this module encrypts with ``cryptography`` directly, not with tablesdk's engine):

* ``"python"`` and ``"dotnet"``: the IV of a property is SHA-256(ContentEncryptionIV + UTF-8 of
  RowKey + PartitionKey + name)[:16], the list of encrypted names is JSON (``["A","B"]``) and
  ``KeyWrappingMetadata`` names the library (``Python 1.4.2``, ``.NET 9.3.3``);
* ``"java"``: PartitionKey + RowKey + name, the list as Java's ``List.toString`` writes it
  (``[A, B]``), ``EncryptionLibrary`` ``Java 8.6.6``;
* ``"java-unlabelled"``: as ``"java"`` without ``KeyWrappingMetadata`` (Java's first writers),
  which readers take as Java's ordering.

``swap_order=True`` builds the same entity with the other writer's IV ordering but the writer's own
metadata: a reader that honours the metadata must fail to decrypt it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.keywrap import aes_key_unwrap, aes_key_wrap

from tablesdk import DynamicEntity, EdmType, EntityProperty

METADATA_KEY = "_ClientEncryptionMetadata1"
METADATA_NAMES = "_ClientEncryptionMetadata2"
WRITERS = ("python", "dotnet", "java", "java-unlabelled")
_LIBRARY = {"python": "Python 1.4.2", "dotnet": ".NET 9.3.3", "java": "Java 8.6.6"}


class KeyWrapper:
    """A local key-encryption key: A256KW with a 32-byte key, ``kid`` its id."""

    def __init__(self, kid: str = "local:kek-1", key: bytes | None = None) -> None:
        self.kid = kid
        self.key = key if key is not None else hashlib.sha256(kid.encode("utf-8")).digest()

    def wrap_key(self, key: bytes) -> bytes:
        return aes_key_wrap(self.key, key)

    def unwrap_key(self, key: bytes, algorithm: str) -> bytes:
        if algorithm != "A256KW":
            raise ValueError(f"unknown key wrap algorithm {algorithm!r}")
        return aes_key_unwrap(self.key, key)

    def get_kid(self) -> str:
        return self.kid

    def get_key_wrap_algorithm(self) -> str:
        return "A256KW"


class RsaKey:
    """A key-encryption key on an RSA key pair: RSA-OAEP (SHA-1), as the legacy clients wrapped
    with Key Vault's RSA keys."""

    def __init__(self, kid: str = "local:rsa-1") -> None:
        from cryptography.hazmat.primitives.asymmetric import rsa

        self.kid = kid
        self.private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    @staticmethod
    def _oaep() -> Any:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding as asymmetric

        return asymmetric.OAEP(mgf=asymmetric.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(), label=None)

    def wrap_key(self, key: bytes) -> bytes:
        return self.private_key.public_key().encrypt(key, self._oaep())  # type: ignore[no-any-return]

    def unwrap_key(self, key: bytes, algorithm: str) -> bytes:
        if algorithm != "RSA-OAEP":
            raise ValueError(f"unknown key wrap algorithm {algorithm!r}")
        return self.private_key.decrypt(key, self._oaep())  # type: ignore[no-any-return]

    def get_kid(self) -> str:
        return self.kid

    def get_key_wrap_algorithm(self) -> str:
        return "RSA-OAEP"


def resolver_of(*keys: Any) -> Any:
    """A ``key_resolver_function``: the key of an id, None for an unknown one."""
    by_kid = {key.get_kid(): key for key in keys}
    return by_kid.get


def _java_order(writer: str) -> bool:
    return writer.startswith("java")


def property_iv(content_iv: bytes, pk: str, rk: str, name: str, *, java_order: bool) -> bytes:
    text = pk + rk + name if java_order else rk + pk + name
    return hashlib.sha256(content_iv + text.encode("utf-8")).digest()[:16]


def _cbc(key: bytes, iv: bytes, plaintext: bytes) -> bytes:
    padder = padding.PKCS7(128).padder()
    padded = padder.update(plaintext) + padder.finalize()
    encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    return encryptor.update(padded) + encryptor.finalize()


def names_text(names: Iterable[str], writer: str) -> str:
    names = list(names)
    if _java_order(writer):
        return "[" + ", ".join(names) + "]"
    return json.dumps(names, separators=(",", ":"))


def legacy_vector(
    writer: str, pk: str, rk: str, secrets: Mapping[str, str], plain: Mapping[str, Any] | None = None, *,
    kek: Any, content_key: bytes = bytes(range(32)), content_iv: bytes = bytes(range(100, 116)),
    swap_order: bool = False,
) -> DynamicEntity:
    """The entity ``writer`` stored for ``secrets`` (encrypted) and ``plain`` (as they are)."""
    if writer not in WRITERS:
        raise ValueError(f"writer is one of {WRITERS}")
    java_order = _java_order(writer) != swap_order
    entity = DynamicEntity(pk, rk)
    for name, value in (plain or {}).items():
        entity[name] = value
    for name, value in secrets.items():
        iv = property_iv(content_iv, pk, rk, name, java_order=java_order)
        entity[name] = EntityProperty(_cbc(content_key, iv, value.encode("utf-8")), EdmType.BINARY)
    names_iv = property_iv(content_iv, pk, rk, METADATA_NAMES, java_order=java_order)
    entity[METADATA_NAMES] = EntityProperty(
        _cbc(content_key, names_iv, names_text(secrets, writer).encode("utf-8")), EdmType.BINARY
    )
    metadata: dict[str, Any] = {
        "WrappedContentKey": {
            "KeyId": kek.get_kid(), "EncryptedKey": base64.b64encode(kek.wrap_key(content_key)).decode("ascii"),
            "Algorithm": kek.get_key_wrap_algorithm(),
        },
        "EncryptionAgent": {"Protocol": "1.0", "EncryptionAlgorithm": "AES_CBC_256"},
        "ContentEncryptionIV": base64.b64encode(content_iv).decode("ascii"),
    }
    if writer in _LIBRARY:
        metadata["KeyWrappingMetadata"] = {"EncryptionLibrary": _LIBRARY[writer]}
    entity[METADATA_KEY] = json.dumps(metadata)
    return entity
