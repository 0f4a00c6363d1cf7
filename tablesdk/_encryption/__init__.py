"""Client-side encryption of entity properties: the engine every path of the SDK calls.

Two protocols, both always read:

- :data:`PROTOCOL_LEGACY` (``"1.0"``): the format of the legacy .NET, Java and Python clients,
  AES-256-CBC without integrity, strings only; written only when a policy asks for it.
- :data:`PROTOCOL_AUTHENTICATED`: AES-256-GCM per property, bound to the entity's keys, the
  property name and the key metadata; every EDM type; the default for new writes.

Importing this package loads no cryptography: the ``cryptography`` package (the ``encryption``
extra) is imported when a key is used or an entity encrypted or decrypted. See docs/encryption.md.
"""

from ._engine import (
    MAX_USER_PROPERTIES,
    EncryptionDetails,
    decrypt_payload,
    decrypt_payload_with_details,
    encrypt_payload,
    is_encrypted,
    protocol_of,
)
from ._errors import (
    EncryptedDataError,
    EncryptionKeyError,
    EncryptionRequiredError,
    TableEncryptionError,
    UnknownEncryptionProtocolError,
)
from ._keys import (
    KeyEncryptionKey,
    KeyResolver,
    KeyVaultKeyWrapper,
    LocalKeyWrapper,
    RsaKeyWrapper,
    dict_key_resolver,
)
from ._policy import (
    METADATA_KEY,
    METADATA_NAMES,
    METADATA_PROPERTIES,
    PROTOCOL_AUTHENTICATED,
    PROTOCOL_LEGACY,
    PROTOCOLS,
    EncryptionResolver,
    TableEncryptionPolicy,
)

__all__ = [
    "TableEncryptionPolicy",
    "EncryptionResolver",
    "KeyEncryptionKey",
    "KeyResolver",
    "LocalKeyWrapper",
    "RsaKeyWrapper",
    "KeyVaultKeyWrapper",
    "dict_key_resolver",
    "PROTOCOL_LEGACY",
    "PROTOCOL_AUTHENTICATED",
    "PROTOCOLS",
    "METADATA_PROPERTIES",
    "METADATA_KEY",
    "METADATA_NAMES",
    "MAX_USER_PROPERTIES",
    "encrypt_payload",
    "decrypt_payload",
    "decrypt_payload_with_details",
    "EncryptionDetails",
    "protocol_of",
    "is_encrypted",
    "TableEncryptionError",
    "EncryptionKeyError",
    "EncryptedDataError",
    "UnknownEncryptionProtocolError",
    "EncryptionRequiredError",
]
