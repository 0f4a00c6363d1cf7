""":class:`TableEncryptionPolicy`, the protocol ids and the names of the metadata properties."""

from __future__ import annotations

from typing import Any, Callable

from .._core._errors import TableValidationError
from ._keys import KeyEncryptionKey, KeyResolver

__all__ = [
    "TableEncryptionPolicy",
    "EncryptionResolver",
    "PROTOCOL_LEGACY",
    "PROTOCOL_AUTHENTICATED",
    "PROTOCOLS",
    "METADATA_PROPERTIES",
    "METADATA_KEY",
    "METADATA_NAMES",
]

#: The format of the legacy clients (.NET WindowsAzure.Storage 9.x, Java, azure-cosmosdb-table):
#: AES-256-CBC with PKCS7 padding and no integrity check.
PROTOCOL_LEGACY = "1.0"

#: tablesdk's authenticated format: AES-256-GCM per property, bound to the entity's keys and the
#: property name. The id is not a number on purpose: Microsoft's storage clients number their
#: protocols ("1.0" for tables, blobs and queues; "2.0" and "2.1" for the AES-GCM formats of blobs
#: and queues), so a future Microsoft table protocol will be a number too and cannot take this id,
#: and a legacy client meeting it refuses the entity as an unknown version instead of misreading it.
PROTOCOL_AUTHENTICATED = "tablesdk-aes-gcm-1"

#: The protocols this client reads and writes.
PROTOCOLS = (PROTOCOL_LEGACY, PROTOCOL_AUTHENTICATED)

#: ``_ClientEncryptionMetadata1`` (Edm.String, the JSON key metadata) and
#: ``_ClientEncryptionMetadata2`` (Edm.Binary, the encrypted list of encrypted names).
METADATA_KEY = "_ClientEncryptionMetadata1"
METADATA_NAMES = "_ClientEncryptionMetadata2"
METADATA_PROPERTIES = (METADATA_KEY, METADATA_NAMES)

#: Which properties to encrypt: ``(partition_key, row_key, property_name) -> bool``.
EncryptionResolver = Callable[[str, str, str], bool]


class TableEncryptionPolicy:
    """How a client encrypts the entities it writes and decrypts those it reads.

    ``key`` wraps the content key of each entity written, and unwraps when an entity's key id is
    its id; ``key_resolver`` finds the key of a key id when reading (tried first, as the legacy
    clients do). ``protocol`` is what new writes use: :data:`PROTOCOL_AUTHENTICATED` (the default)
    or :data:`PROTOCOL_LEGACY` for readers that only know the legacy format; both are always
    read, unless ``allow_legacy_reads=False`` (once a table holds no 1.0 entities: it closes the
    door to a downgrade, an entity rewritten in the unauthenticated format by whoever can write
    the table). ``encryption_resolver`` chooses the properties to encrypt; ``require_encryption``
    refuses to read an entity that is not encrypted or write one that would not be.

    Immutable; its repr shows the key ids and the protocol, never key bytes.
    """

    __slots__ = ("key", "key_resolver", "protocol", "encryption_resolver", "require_encryption", "allow_legacy_reads")

    key: KeyEncryptionKey | None
    key_resolver: KeyResolver | None
    protocol: str
    encryption_resolver: EncryptionResolver | None
    require_encryption: bool
    allow_legacy_reads: bool

    def __init__(
        self,
        key: KeyEncryptionKey | None = None,
        key_resolver: KeyResolver | None = None,
        protocol: str = PROTOCOL_AUTHENTICATED,
        encryption_resolver: EncryptionResolver | None = None,
        require_encryption: bool = False,
        *,
        allow_legacy_reads: bool = True,
    ) -> None:
        if protocol not in PROTOCOLS:
            raise TableValidationError("protocol", f"an encryption protocol is one of {PROTOCOLS}", repr(protocol))
        if protocol == PROTOCOL_LEGACY and not allow_legacy_reads:
            raise TableValidationError("allow_legacy_reads", "a policy that writes protocol 1.0 reads it too")
        if key is not None:
            missing = [name for name in ("wrap_key", "unwrap_key", "get_kid", "get_key_wrap_algorithm")
                       if not callable(getattr(key, name, None))]
            if missing:
                raise TableValidationError("key", "a key-encryption key has wrap_key, unwrap_key, get_kid and "
                                           "get_key_wrap_algorithm", f"{type(key).__name__} lacks {', '.join(missing)}")
        if key_resolver is not None and not callable(key_resolver):
            raise TableValidationError("key_resolver", "a key resolver is a callable: key id -> key or None")
        if encryption_resolver is not None and not callable(encryption_resolver):
            raise TableValidationError("encryption_resolver", "an encryption resolver is a callable: (pk, rk, name) -> bool")
        set_field = object.__setattr__
        set_field(self, "key", key)
        set_field(self, "key_resolver", key_resolver)
        set_field(self, "protocol", protocol)
        set_field(self, "encryption_resolver", encryption_resolver)
        set_field(self, "require_encryption", bool(require_encryption))
        set_field(self, "allow_legacy_reads", bool(allow_legacy_reads))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"TableEncryptionPolicy is immutable (use replace() for a changed copy): {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"TableEncryptionPolicy is immutable: {name}")

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt through the constructor (its checks included): the immutable __setattr__
        # refuses the slot state pickle would otherwise set. The engines ship a policy to
        # their workers this way.
        return (_rebuild_policy, (tuple(getattr(self, name) for name in self.__slots__),))

    def replace(self, **changes: object) -> TableEncryptionPolicy:
        """A copy with the given fields changed (``key``, ``key_resolver``, ``protocol``,
        ``encryption_resolver``, ``require_encryption``, ``allow_legacy_reads``)."""
        fields = {name: getattr(self, name) for name in self.__slots__}
        unknown = set(changes) - set(fields)
        if unknown:
            raise TypeError(f"TableEncryptionPolicy has no field {sorted(unknown)[0]!r}")
        fields.update(changes)
        return TableEncryptionPolicy(**fields)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TableEncryptionPolicy):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)

    def __hash__(self) -> int:
        return hash((self.protocol, self.require_encryption))

    def __repr__(self) -> str:
        key = None if self.key is None else _kid_of(self.key)
        parts = [f"key={key}", f"protocol={self.protocol!r}"]
        if self.key_resolver is not None:
            parts.append("key_resolver=<set>")
        if self.encryption_resolver is not None:
            parts.append("encryption_resolver=<set>")
        if self.require_encryption:
            parts.append("require_encryption=True")
        if not self.allow_legacy_reads:
            parts.append("allow_legacy_reads=False")
        return f"TableEncryptionPolicy({', '.join(parts)})"


def _rebuild_policy(fields: tuple[Any, ...]) -> TableEncryptionPolicy:
    """The policy of these field values, in ``__slots__`` order (what ``__reduce__`` pickles)."""
    return TableEncryptionPolicy(**dict(zip(TableEncryptionPolicy.__slots__, fields)))


def _kid_of(key: KeyEncryptionKey) -> str:
    """``<kid '...'>`` for a repr: the id only (a user key's own repr might show its bytes)."""
    try:
        return f"<kid {key.get_kid()!r}>"
    except Exception:  # a repr never raises
        return f"<{type(key).__name__}>"
