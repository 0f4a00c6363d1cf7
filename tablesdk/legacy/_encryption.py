"""Where client-side encryption joins the legacy calls.

The old package encrypted chosen String properties when the service (or a batch) had a
``key_encryption_key``, and decrypted with it or with ``key_resolver_function``. Until
tablesdk can read and write that format, a call that would need it refuses with
:class:`ClientEncryptionNotAvailableError` before sending anything, so a property meant to be
encrypted is never stored in plain text and ciphertext is never returned as if it were data.
The checks that the old package made regardless of keys (``require_encryption`` without a key,
merges with encryption settings) give its errors.

The call sites are the ones encryption will use: :func:`check_write` runs in
``TableService._entity`` and ``TableBatch._converted`` just before an entity dict is converted
(the place to encrypt the properties ``encryption_resolver_function`` or ``EntityProperty.encrypt``
choose, with at most 253 properties), and :func:`check_read` at the start of ``get_entity`` and
``query_entities`` (the place to add ``_ClientEncryptionMetadata1`` and ``2`` to a ``select`` and
to decrypt each entity read, with ``key_resolver_function`` before ``key_encryption_key``).
"""

from __future__ import annotations

from typing import Any

from ._errors import AzureException, ClientEncryptionNotAvailableError

_NOT_AVAILABLE = (
    "client-side encryption is set ({what}) but tablesdk.legacy cannot {verb} encrypted entities yet; "
    "nothing was sent. Leave key_encryption_key and key_resolver_function unset to {verb} plain entities."
)


def check_write(require_encryption: bool, key_encryption_key: Any, *, merge: bool = False) -> bool:
    """Refuse a write the legacy encryption settings forbid; True when its properties would be encrypted.

    Merges could not be encrypted by the old package: any encryption setting refuses them.
    """
    if merge:
        if require_encryption or key_encryption_key is not None:
            raise ValueError("The require_encryption flag is set, but encryption is not supported for this method.")
        return False
    if require_encryption and key_encryption_key is None:
        raise ValueError("Encryption required but no key was provided.")
    if key_encryption_key is not None:
        raise ClientEncryptionNotAvailableError(_NOT_AVAILABLE.format(what="key_encryption_key", verb="write"))
    return False


def check_read(key_encryption_key: Any, key_resolver_function: Any) -> None:
    """Refuse a read that would have to decrypt (a key or a resolver is set)."""
    if key_encryption_key is not None or key_resolver_function is not None:
        what = "key_encryption_key" if key_encryption_key is not None else "key_resolver_function"
        raise ClientEncryptionNotAvailableError(_NOT_AVAILABLE.format(what=what, verb="read"))


def check_entity_read(require_encryption: bool) -> None:
    """An entity read while ``require_encryption`` is set with no key: the old package's failure."""
    if require_encryption:
        raise AzureException("Decryption failed")
