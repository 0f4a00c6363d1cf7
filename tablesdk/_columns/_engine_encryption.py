"""Client-side encryption in the data engines (:mod:`tablesdk.dask`, :mod:`tablesdk.ray`,
:mod:`tablesdk.polars`, :mod:`tablesdk.spark`).

With a policy, an engine's reads and writes go through the client's own encryption
(:mod:`tablesdk._clients._encryption_scope`): each range's query and each block's bulk write
carry the policy in their :class:`~tablesdk.TableRequestOptions`, built on the worker from an
:class:`EngineEncryption`, which pickles with its policy (the key must pickle:
:class:`~tablesdk.LocalKeyWrapper` and :class:`~tablesdk.RsaKeyWrapper` do; a Key Vault key is
rebuilt on the worker by a ``key_resolver``) and whose ``repr`` names the key id only.

Without a policy, a read still asks for the two metadata properties, and a row that has them is
refused (:func:`refuse_encrypted`) rather than handed out as ciphertext; the metadata columns
never reach the engine's frame.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from .._core._errors import TableValidationError
from .._encryption import METADATA_KEY, METADATA_PROPERTIES, EncryptionKeyError, TableEncryptionPolicy
from .._entities._edm import EdmType
from .._pipeline._options import TableRequestOptions

__all__ = ["EngineEncryption", "engine_encryption", "read_schema", "refuse_encrypted", "refuse_encrypted_schema",
           "without_metadata"]

_KEYS = ("PartitionKey", "RowKey", "Timestamp")


class EngineEncryption:
    """The encryption of an engine's read or write: the ``policy`` and the ``resolver`` choosing
    the properties written encrypted (None: the policy's). Picklable (the policy's key and
    resolvers must be); ``repr`` and Dask's token name the key id, never key bytes."""

    __slots__ = ("policy", "resolver", "_token")

    def __init__(self, policy: TableEncryptionPolicy, resolver: Callable[[str, str, str], bool] | None = None,
                 token: str | None = None) -> None:
        self.policy = policy
        self.resolver = resolver
        self._token = token or uuid.uuid4().hex

    def options(self, base: TableRequestOptions | None = None) -> TableRequestOptions:
        """``base`` (or none) with this encryption."""
        if base is None:
            return TableRequestOptions(encryption_policy=self.policy, encryption_resolver=self.resolver)
        return replace(base, encryption_policy=self.policy, encryption_resolver=self.resolver or base.encryption_resolver)

    def __reduce__(self) -> tuple[Any, ...]:
        return (EngineEncryption, (self.policy, self.resolver, self._token))  # the policy pickles its fields

    def __repr__(self) -> str:
        return f"EngineEncryption({self.policy!r}, resolver={'<set>' if self.resolver else None})"

    __str__ = __repr__

    def __dask_tokenize__(self) -> tuple[str, str]:
        return ("tablesdk.EngineEncryption", self._token)


def engine_encryption(
    policy: TableEncryptionPolicy | None,
    encryption_resolver: Callable[[str, str, str], bool] | None = None,
    encrypt_columns: Sequence[str] | None = None,
    *,
    writing: bool = False,
) -> EngineEncryption | None:
    """The encryption of an engine's call, checked where the job starts (None: no policy).

    A write chooses the columns it encrypts with ``encrypt_columns`` (names), ``encryption_resolver``
    (``(pk, rk, name) -> bool``; both: either), or the policy's ``encryption_resolver``; a write
    with a policy that chooses none is refused, as is a choice without a policy."""
    if policy is None:
        if encryption_resolver is not None or encrypt_columns:
            name = "encrypt_columns" if encrypt_columns else "encryption_resolver"
            raise TableValidationError(name, "choosing columns to encrypt needs an encryption_policy (the key)")
        return None
    if not isinstance(policy, TableEncryptionPolicy):
        raise TypeError(f"encryption_policy must be a TableEncryptionPolicy, not {type(policy).__name__}")
    if encryption_resolver is not None and not callable(encryption_resolver):
        raise TableValidationError("encryption_resolver", "a callable (partition_key, row_key, name) -> bool")
    names = frozenset(encrypt_columns or ())
    keys = sorted(names.intersection(_KEYS))
    if keys:
        raise TableValidationError("encrypt_columns", "the keys and Timestamp are never encrypted", keys[0])
    resolver = encryption_resolver
    if names:
        resolver = _ColumnsResolver(names, encryption_resolver)
    if writing and resolver is None and policy.encryption_resolver is None:
        raise TableValidationError(
            "encrypt_columns", "a write with an encryption_policy says which columns to encrypt: encrypt_columns=[...] "
            "or encryption_resolver= (or the policy's encryption_resolver)",
        )
    return EngineEncryption(policy, resolver)


class _ColumnsResolver:
    """Encrypts the named columns (and what ``also`` chooses). Picklable when ``also`` is."""

    __slots__ = ("names", "also")

    def __init__(self, names: frozenset[str], also: Callable[[str, str, str], bool] | None) -> None:
        self.names = names
        self.also = also

    def __call__(self, pk: str, rk: str, name: str) -> bool:
        return name in self.names or (self.also is not None and bool(self.also(pk, rk, name)))


def read_schema(schema: Any) -> Any:
    """``schema`` with the two metadata properties (String, Binary) added, so that a read without a
    policy sees which rows are encrypted."""
    import pyarrow as pa

    from ._arrow import _field

    present = set(schema.names)
    fields = [_field(name, edm) for name, edm in zip(METADATA_PROPERTIES, (EdmType.STRING, EdmType.BINARY))
              if name not in present]
    return pa.schema([*schema, *fields]) if fields else schema


def refuse_encrypted(data: Any, table: str) -> None:
    """Raise :class:`~tablesdk.EncryptionKeyError` naming ``table`` and the first encrypted row's
    keys when a row of ``data`` (a record batch or table read without a policy) is encrypted."""
    if METADATA_KEY not in data.schema.names:
        return
    import pyarrow.compute as pc

    present = pc.is_valid(data.column(METADATA_KEY))
    if not pc.any(present).as_py():
        return
    row = pc.index(present, True).as_py()
    names = data.schema.names

    def key(name: str) -> Any:
        return data.column(name)[row].as_py() if name in names else None

    raise EncryptionKeyError(
        f"table {table!r} holds client-side encrypted entities and the read has no encryption_policy: pass "
        "encryption_policy= (a TableEncryptionPolicy with the key) to decrypt them; their ciphertext is never "
        "read as data",
        partition_key=key("PartitionKey"), row_key=key("RowKey"),
    )


def refuse_encrypted_schema(schema: Any, table: str) -> None:
    """:func:`refuse_encrypted` for a sample's schema (a sampled row had the metadata)."""
    if METADATA_KEY in schema.names:
        raise EncryptionKeyError(
            f"table {table!r} holds client-side encrypted entities (the sample read has {METADATA_KEY}) and the read "
            "has no encryption_policy: pass encryption_policy= (a TableEncryptionPolicy with the key) to decrypt them",
        )


def without_metadata(data: Any) -> Any:
    """``data`` (a record batch or table) without the metadata columns."""
    names = [name for name in data.schema.names if name not in METADATA_PROPERTIES]
    return data if len(names) == len(data.schema.names) else data.select(names)
