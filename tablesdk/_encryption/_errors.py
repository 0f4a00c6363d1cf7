"""The errors of client-side encryption.

Every failure to encrypt or decrypt an entity is a :class:`TableEncryptionError` that names the
entity's keys and the key id involved; none carries plaintext, a content key or key bytes, and
none chains the exception of the cryptography library that detected it (a decode error would
quote the bytes it could not decode).
"""

from __future__ import annotations

from typing import Any

from .._core._errors import TableServiceError

__all__ = [
    "TableEncryptionError",
    "EncryptionKeyError",
    "EncryptedDataError",
    "UnknownEncryptionProtocolError",
    "EncryptionRequiredError",
]


class TableEncryptionError(TableServiceError):
    """Client-side encryption or decryption of an entity failed (no request was sent for it).

    ``partition_key`` and ``row_key`` name the entity (None where the payload lacked them),
    ``key_id`` the key-encryption key involved (None when none was), ``property_name`` the
    property at fault when one was. The message says the same, and never holds plaintext or keys.
    """

    def __init__(
        self,
        message: str,
        *,
        partition_key: str | None = None,
        row_key: str | None = None,
        key_id: str | None = None,
        property_name: str | None = None,
    ) -> None:
        where = f"entity (PartitionKey={partition_key!r}, RowKey={row_key!r})"
        if property_name is not None:
            where += f", property {property_name!r}"
        if key_id is not None:
            where += f", key id {key_id!r}"
        super().__init__(f"{message} [{where}]")
        self._reason = message
        self.partition_key = partition_key
        self.row_key = row_key
        self.key_id = key_id
        self.property_name = property_name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # rebuilt from its fields (a worker process hands it back to the caller)
        fields = {"partition_key": self.partition_key, "row_key": self.row_key, "key_id": self.key_id,
                  "property_name": self.property_name}
        return (_rebuild, (type(self), self._reason, fields))


def _rebuild(cls: type[TableEncryptionError], message: str, fields: dict[str, Any]) -> TableEncryptionError:
    return cls(message, **fields)


class EncryptionKeyError(TableEncryptionError):
    """No key for the entity's key id, a key whose id differs, or a wrapped content key that the key
    could not unwrap (the wrong key, or a tampered wrapped key)."""


class EncryptedDataError(TableEncryptionError, ValueError):
    """The encrypted data or its metadata is damaged or was tampered with: a failed authentication tag,
    bad padding, a list of names that does not decrypt or parse, malformed metadata."""


class UnknownEncryptionProtocolError(TableEncryptionError):
    """The entity's metadata names an encryption protocol or algorithm this client does not know."""


class EncryptionRequiredError(TableEncryptionError):
    """Encryption is required, and the entity read is not encrypted (or would be written unencrypted)."""
