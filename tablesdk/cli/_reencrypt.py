"""``tablesdk reencrypt``: a table's protocol 1.0 entities (the legacy clients' AES-CBC, no integrity)
encrypted again under the authenticated protocol, in place.

Each entity is read as stored, decrypted with the key of the options (its own key id, so a key
resolver's keys work as well), and its encrypted properties (those the 1.0 metadata lists: the
strings stored as Edm.Binary) encrypted again under the authenticated protocol, with the policy's
key; the replace is conditional on the ETag read (``If-Match``), so a write made meanwhile is never
lost: a 412 reads the entity again and starts over with what is there now (an entity another
writer re-encrypted or stored unencrypted is left as it is; one deleted is counted as gone).

The scan goes page by page; after each page the state file holds the continuation token of the
next one and the counts so far, so ``--resume`` continues where a stopped run left off (an entity
of the page that was under way is met again, and skipped: it is no longer in protocol 1.0).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .._clients._client import CloudTableClient
from .._core._errors import PreconditionFailedError, ResourceNotFoundError
from .._encryption import (
    PROTOCOL_AUTHENTICATED,
    PROTOCOL_LEGACY,
    TableEncryptionPolicy,
    decrypt_payload_with_details,
    encrypt_payload,
    is_encrypted,
    protocol_of,
)
from .._entities._edm import EntityPayload
from .._formats._batch import BatchOperation, BatchOperationKind
from .._queries._continuation import ContinuationToken

__all__ = ["STATE_SUFFIX", "ReencryptState", "protocol_of", "reencrypt_table"]

#: The state file of a run, beside nothing in particular: ``--state-file`` names it.
STATE_SUFFIX = ".tablesdk-reencrypt"

#: Times one entity is read again after a 412 before the run gives up on it (a hot entity).
MAX_ATTEMPTS = 20


@dataclass
class ReencryptState:
    """Where a run is (the token of the next page, None when done) and what it did so far."""

    table: str
    filter: str | None = None
    next_page: str | None = None
    done: bool = False
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("scanned", "reencrypted", "already_authenticated", "unencrypted", "gone", "retried"), 0
    ))

    @classmethod
    def load(cls, path: str, table: str, filter: str | None) -> ReencryptState:
        """The state in ``path``; ValueError when it belongs to another table or filter."""
        with open(path, encoding="utf-8") as file:
            document = json.load(file)
        state = cls(**document)
        if (state.table, state.filter) != (table, filter):
            raise ValueError(
                f"the state file {path!r} belongs to table {state.table!r} with filter {state.filter!r}, "
                f"not to {table!r} with {filter!r}"
            )
        return state

    def save(self, path: str) -> None:
        """Write the state beside ``path`` and rename it into place (a crash leaves the last one whole)."""
        temporary = f"{path}.{os.getpid()}.tmp"
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump(asdict(self), file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)


def _stored(payload: EntityPayload) -> EntityPayload:
    """A read payload as a write takes it: without Timestamp."""
    values = {name: value for name, value in payload.values.items() if name != "Timestamp"}
    types = {name: edm for name, edm in payload.types.items() if name != "Timestamp"}
    return EntityPayload(values, types, payload.etag)


def reencrypt_table(
    client: CloudTableClient,
    table: str,
    policy: TableEncryptionPolicy,
    *,
    filter: str | None = None,
    state: ReencryptState | None = None,
    state_path: str | None = None,
    progress: Callable[[ReencryptState], None] | None = None,
    before_replace: Callable[[str, str], None] | None = None,
    page_size: int | None = None,
) -> ReencryptState:
    """Re-encrypt the 1.0 entities of ``table`` (matching ``filter``) under the authenticated protocol.

    ``client`` must read entities as stored (no encryption policy of its own); ``policy`` decrypts
    them and encrypts them again (its protocol is not used: new writes here are authenticated).
    ``state`` continues a run (see :class:`ReencryptState`), saved to ``state_path`` after every
    page; ``progress(state)`` is called after every entity. ``before_replace(pk, rk)`` is called
    before each conditional replace (a test's seam for a concurrent writer). ``page_size``: at most
    so many entities a page (None: the service's pages, up to 1,000).
    """
    if client.encryption_policy is not None:
        raise ValueError("reencrypt_table needs a client that reads entities as stored (no encryption_policy)")
    state = state or ReencryptState(table, filter)
    writer = policy if policy.protocol == PROTOCOL_AUTHENTICATED else policy.replace(protocol=PROTOCOL_AUTHENTICATED)
    reader = policy if policy.allow_legacy_reads else policy.replace(allow_legacy_reads=True)  # what it is for
    while not state.done:
        token = ContinuationToken.from_string(state.next_page) if state.next_page else None
        payloads, next_token = client.query_entity_payloads(
            table, filter=filter, continuation_token=token, top=page_size
        )
        for payload in payloads:
            state.counts["scanned"] += 1
            state.counts[_reencrypt_one(client, table, payload, reader, writer, state, before_replace)] += 1
            if progress is not None:
                progress(state)
        state.next_page = next_token.to_string() if next_token is not None else None
        state.done = next_token is None
        if state_path is not None:
            state.save(state_path)
    return state


def _choosing(names: frozenset[str]) -> Callable[[str, str, str], bool]:
    """The encryption resolver that chooses ``names``."""
    def chosen(partition_key: str, row_key: str, name: str) -> bool:
        return name in names

    return chosen


def _reencrypt_one(
    client: CloudTableClient, table: str, payload: EntityPayload, reader: TableEncryptionPolicy,
    writer: TableEncryptionPolicy, state: ReencryptState, before_replace: Callable[[str, str], None] | None,
) -> str:
    """What became of one entity (a key of ``state.counts``), after as many ETag-guarded attempts as
    concurrent writers make it take (at most :data:`MAX_ATTEMPTS`)."""
    pk, rk = payload.values["PartitionKey"], payload.values["RowKey"]
    for _ in range(MAX_ATTEMPTS):
        if not is_encrypted(payload):
            return "unencrypted"
        if protocol_of(payload) != PROTOCOL_LEGACY:
            return "already_authenticated"
        plain, details = decrypt_payload_with_details(_stored(payload), reader)
        assert details is not None, "an encrypted entity has its details"
        new = encrypt_payload(plain, writer, _choosing(frozenset(details.names)))
        if before_replace is not None:
            before_replace(pk, rk)
        assert payload.etag, "a read entity has its ETag"
        try:
            client.execute_operation(BatchOperation(BatchOperationKind.UPDATE, table, pk, rk, new, payload.etag))
            return "reencrypted"
        except PreconditionFailedError:
            state.counts["retried"] += 1
        try:
            payload = client.get_entity_payload(table, pk, rk)
        except ResourceNotFoundError:
            return "gone"
    raise PreconditionFailedError(
        f"the entity (PartitionKey={pk!r}, RowKey={rk!r}) changed {MAX_ATTEMPTS} times while it was re-encrypted; "
        "run the command again to continue",
        status_code=412,
    )


def summary(state: ReencryptState) -> str:
    """The line a run ends with."""
    counts: dict[str, Any] = state.counts
    return (
        f"re-encrypted {counts['reencrypted']} of {counts['scanned']} entities "
        f"({counts['already_authenticated']} authenticated already, {counts['unencrypted']} unencrypted, "
        f"{counts['gone']} deleted meanwhile, {counts['retried']} retried after a concurrent write)"
    )
