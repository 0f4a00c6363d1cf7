"""The client-side encryption in force for one call, and what it does to the payloads of the call.

Every path that writes or reads entities asks its client for the :class:`EncryptionScope` of the
call (:func:`scope_of`: the client's ``encryption_policy=`` merged with the call's
:class:`~tablesdk.TableRequestOptions` by :meth:`RequestSettings.merged
<tablesdk._pipeline._settings.RequestSettings.merged>`), and calls it where the payload is built
(:meth:`EncryptionScope.encrypt`, after ``entity_to_payload``) and where it is decoded
(:meth:`EncryptionScope.decrypt` / :meth:`~EncryptionScope.decrypt_page`, before the entity is
made). The engine (:mod:`tablesdk._encryption`) does the cryptography; this module decides which
properties are chosen (the call's ``encryption_resolver``, else the policy's, OR the entity class's
``Encrypted[...]`` fields), what a merge may do, and what ``require_encryption`` refuses.

A merge of an encrypted entity is refused, as the legacy clients refuse it: the service would keep
the properties the merge does not send, and the metadata of the entity would then describe only
some of its encrypted properties (the others undecryptable). Replace the entity instead.

With no policy, no ``require_encryption`` and no ``Encrypted[...]`` field, :func:`scope_of` is
None and a call does nothing more than it did without encryption.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._encryption import (
    METADATA_PROPERTIES,
    EncryptionKeyError,
    EncryptionRequiredError,
    TableEncryptionError,
    TableEncryptionPolicy,
    decrypt_payload,
    encrypt_payload,
    is_encrypted,
)
from .._entities._edm import EntityPage, EntityPayload
from .._entities._entity import encrypted_names
from .._formats._batch import BatchOperation, BatchOperationKind
from .._pipeline._settings import RequestSettings

__all__ = [
    "MERGE_KINDS",
    "NO_ENCRYPTION",
    "EncryptionScope",
    "marked_names",
    "refuse_merge",
    "scope_of",
    "with_metadata_columns",
]

#: The writes that keep the properties they do not send: an encrypted entity cannot be merged.
MERGE_KINDS = frozenset({BatchOperationKind.MERGE, BatchOperationKind.INSERT_OR_MERGE})

_NEVER: frozenset[str] = frozenset()
_ABSENT = object()


def with_metadata_columns(select: Sequence[str]) -> tuple[str, ...]:
    """A projection with the two metadata properties added, so its encrypted properties can be decrypted."""
    return tuple(dict.fromkeys((*select, *METADATA_PROPERTIES)))


def refuse_merge(partition_key: str, row_key: str) -> TableEncryptionError:
    """The error of a merge (or insert-or-merge) that would write encrypted properties."""
    return TableEncryptionError(
        "an encrypted entity cannot be merged: the properties a merge does not send would keep their old "
        "encryption metadata; replace it instead (update_entity(mode='replace'), upsert_entity(mode='replace'), "
        "SaveChangesOptions.REPLACE_ON_UPDATE)",
        partition_key=partition_key, row_key=row_key,
    )


class EncryptionScope:
    """The encryption of one call: its ``policy`` (or None), the ``resolver`` that chooses the
    properties of any entity (or None), whether encryption is ``required``, and whether the call
    reads a class with ``Encrypted[...]`` fields (``marked``: its projections bring the metadata,
    so that an encrypted entity read without a policy is refused rather than read as ciphertext)."""

    __slots__ = ("marked", "policy", "required", "resolver")

    def __init__(
        self, policy: TableEncryptionPolicy | None, resolver: Callable[[str, str, str], bool] | None, required: bool,
        marked: bool = False,
    ) -> None:
        self.policy = policy
        self.resolver = resolver
        self.required = required
        self.marked = marked

    def __repr__(self) -> str:
        return f"EncryptionScope({self.policy!r}, resolver={'<set>' if self.resolver else None}, required={self.required})"

    # ------------------------------------------------------------ writing

    def encrypt(self, payload: EntityPayload, marked: frozenset[str] = _NEVER,
                kind: BatchOperationKind | None = None) -> EntityPayload:
        """``payload`` with its chosen properties encrypted (a new payload; ``payload`` is not changed).

        ``marked`` are the entity class's ``Encrypted[...]`` properties, ``kind`` the write it is for
        (a merge of an encrypted entity is refused). Raises a :class:`TableEncryptionError` naming
        the entity: a marked property with no policy, nothing encrypted under ``require_encryption``."""
        values = payload.values
        pk, rk = values.get("PartitionKey"), values.get("RowKey")
        if is_encrypted(payload):  # encrypted already (a copy keeping ciphertext, an operation built so)
            if kind in MERGE_KINDS:
                raise refuse_merge(str(pk), str(rk))
            return payload
        policy = self.policy
        if policy is None:
            given = [name for name in marked if values.get(name) is not None]  # a null has nothing to hide
            if given:
                name = min(given)
                raise EncryptionKeyError(
                    f"the property {name!r} is Encrypted, but the call has no encryption_policy to encrypt it with",
                    partition_key=pk, row_key=rk, property_name=name,
                )
            if self.required:
                raise EncryptionRequiredError(
                    "encryption is required, and the call has no encryption_policy", partition_key=pk, row_key=rk
                )
            if self.resolver is not None:
                raise EncryptionKeyError(
                    "the call chooses properties to encrypt (encryption_resolver) but has no encryption_policy "
                    "to encrypt them with", partition_key=pk, row_key=rk,
                )
            return payload
        resolver = self.resolver
        if marked:
            if resolver is None:
                def choose(pk: str, rk: str, name: str) -> bool:
                    return name in marked
            else:
                def choose(pk: str, rk: str, name: str) -> bool:
                    return name in marked or bool(resolver(pk, rk, name))
        elif resolver is not None:
            def choose(pk: str, rk: str, name: str) -> bool:
                return bool(resolver(pk, rk, name))
        else:
            if self.required:
                raise EncryptionRequiredError(
                    "encryption is required, and no property of the entity is chosen to be encrypted "
                    "(no encryption_resolver and no Encrypted[...] field)", partition_key=pk, row_key=rk,
                )
            return payload
        encrypted = encrypt_payload(payload, policy, choose)
        if encrypted is payload or not is_encrypted(encrypted):
            if self.required:
                raise EncryptionRequiredError(
                    "encryption is required, and no property of the entity was chosen to be encrypted",
                    partition_key=pk, row_key=rk,
                )
            return payload
        if kind in MERGE_KINDS:
            raise refuse_merge(str(pk), str(rk))
        return encrypted

    def encrypt_operation(self, operation: BatchOperation, marked: frozenset[str] = _NEVER) -> BatchOperation:
        """``operation`` with its payload encrypted (the same operation when nothing changes)."""
        payload = operation.payload
        if payload is None:
            return operation
        encrypted = self.encrypt(payload, marked, operation.kind)
        if encrypted is payload:
            return operation
        return BatchOperation(
            operation.kind, operation.table, operation.partition_key, operation.row_key, encrypted,
            operation.etag, operation.echo_content,
        )

    # ------------------------------------------------------------ reading

    def decrypt(self, payload: EntityPayload) -> EntityPayload:
        """``payload`` with its encrypted properties decrypted and the metadata removed (a payload
        that is not encrypted as it is, unless encryption is required). With no policy (a class
        with ``Encrypted[...]`` fields read without one) an encrypted entity is refused."""
        values = payload.values
        if values.get(METADATA_PROPERTIES[0], _ABSENT) is None:  # a projection asked for it; the entity has none
            payload = EntityPayload(
                {name: value for name, value in values.items() if name not in METADATA_PROPERTIES},
                {name: edm for name, edm in payload.types.items() if name not in METADATA_PROPERTIES}, payload.etag,
            )
        if not self.required and not is_encrypted(payload):
            return payload
        return decrypt_payload(payload, self.policy, require_encryption=self.required)

    def decrypt_page(self, page: EntityPage) -> EntityPage:
        """``page`` with every encrypted entity decrypted (the same page when none is)."""
        payloads = page.payloads()
        decrypted = [self.decrypt(payload) for payload in payloads]
        if all(new is old for new, old in zip(decrypted, payloads)):
            return page
        return EntityPage.of(decrypted)

    @staticmethod
    def with_metadata_columns(select: Sequence[str]) -> tuple[str, ...]:
        """:func:`with_metadata_columns` (for callers that import nothing of the engine)."""
        return with_metadata_columns(select)

    @property
    def reads_metadata(self) -> bool:
        """Whether a projection of this call must bring the metadata properties too."""
        return self.policy is not None or self.required or self.marked


#: The scope of a call with no encryption, which refuses what an ``Encrypted[...]`` field asks of it.
NO_ENCRYPTION = EncryptionScope(None, None, False)


def scope_of(settings: RequestSettings, entity_type: Any = None) -> EncryptionScope | None:
    """The encryption of a call sent with ``settings`` (a client's, merged with the call's options)
    for entities of ``entity_type``; None when the call has none (no policy, not required, and no
    ``Encrypted[...]`` field to refuse)."""
    policy: Any = settings.encryption_policy
    required = settings.require_encryption
    if required is None:
        required = bool(policy.require_encryption) if policy is not None else False
    marked = entity_type is not None and bool(encrypted_names(entity_type))
    if policy is None and not required and not marked and settings.encryption_resolver is None:
        return None
    resolver = settings.encryption_resolver
    if resolver is None and policy is not None:
        resolver = policy.encryption_resolver
    return EncryptionScope(policy, resolver, required, marked)


def marked_names(entity: object) -> frozenset[str]:
    """The ``Encrypted[...]`` properties of ``entity``'s class (none for a DynamicEntity or a mapping)."""
    return encrypted_names(type(entity))
