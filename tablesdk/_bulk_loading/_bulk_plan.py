"""How bulk input becomes batches, with no I/O: exact sizing, per-partition groups, duplicates.

:func:`plan_inserts` reads the entities of an insert once and yields each batch to send
(a list of :class:`BulkItem` of one partition that fits both service limits) and each
entity that failed before sending (a :data:`Refused` triple);
:func:`tablesdk._bulk_loading._deleting.plan_deletes` does the same for the pages of a key-only scan.
:class:`tablesdk._bulk_loading._bulk.BulkCall` runs either (docs/batch.md, "Bulk loading").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from .._core._cosmos import check_cosmos_write
from .._formats._batch import MAX_BATCH_BYTES, MAX_BATCH_OPERATIONS, BatchOperation, BatchOperationKind, build_batch_request, entity_path
from .._entities._edm import EdmType, EntityPayload
from .._entities._entity import encrypted_names, entity_to_payload
from .._core._errors import TableValidationError
from .._formats import PayloadFormat

if TYPE_CHECKING:
    from .._clients._encryption_scope import EncryptionScope

__all__ = [
    "MAX_BUFFERED_BYTES", "MAX_BUFFERED_ENTITIES", "BatchSizer", "BulkItem", "Refused", "Step", "plan_inserts",
]

#: Entities held in partial per-partition groups before the oldest group is sent early.
MAX_BUFFERED_ENTITIES = 20_000
#: Encoded bytes held in partial per-partition groups before the oldest group is sent early.
MAX_BUFFERED_BYTES = 128 * 1024 * 1024

#: (input position, entity, error): an entity that failed before anything was sent.
Refused = tuple[int, Any, BaseException]


class BulkItem:
    """One entity on its way: input position, object, keys, and (for a write) payload and encoded body."""

    __slots__ = ("body", "entity", "index", "partition_key", "payload", "row_key")

    def __init__(self, index: int, entity: Any, payload: EntityPayload, body: bytes) -> None:
        self.index = index
        self.entity = entity
        self.payload: EntityPayload | None = payload
        self.body = body
        self.partition_key: str = payload.values["PartitionKey"]
        self.row_key: str = payload.values["RowKey"]


#: What a planner yields: a batch to send, or an entity that failed before sending.
Step = list[BulkItem] | Refused


class BatchSizer:
    """Exact size of a ``$batch`` body from the sizes of its entity bodies.

    Calibrated once per call by building one- and two-operation batches with
    empty entity bodies through :func:`~tablesdk._formats._batch.build_batch_request`
    itself: a body is ``framing`` plus, per operation, ``part`` plus the entity
    body, plus the key-dependent length of its URL and the extra digits of its
    ``Content-ID``. tests/unit/test_bulk.py checks the prediction byte for byte.
    """

    def __init__(
        self, base_url: str, table: str, kind: BatchOperationKind, fmt: PayloadFormat, api_version: str,
        max_bytes: int | None = None, cosmos: bool = False,
    ) -> None:
        self.table = table
        # The service's batch limit: the format's (4 MiB), or a smaller one (Cosmos DB's 2 MB).
        self.max_bytes = MAX_BATCH_BYTES if max_bytes is None else min(max_bytes, MAX_BATCH_BYTES)
        self.cosmos = cosmos  # each entity is checked against Cosmos DB's own limits too
        self.addressed = kind is not BatchOperationKind.INSERT  # the keys are in the inner URL
        ops = [_probe_operation(kind, table, row_key) for row_key in ("0", "1")]
        one = len(build_batch_request(base_url, ops[:1], fmt, api_version=api_version)[0])
        two = len(build_batch_request(base_url, ops, fmt, api_version=api_version)[0])
        self.part = two - one
        self.framing = one - self.part
        self.reference_path = len(entity_path(table, "", "1")) if self.addressed else 0

    def cost(self, partition_key: str, row_key: str, body_size: int, position: int) -> int:
        """Bytes the operation adds to a batch as its ``position``-th (1-based) operation."""
        size = self.part + body_size + len(str(position)) - 1
        if self.addressed:
            size += len(entity_path(self.table, partition_key, row_key)) - self.reference_path
        return size


def _probe_operation(kind: BatchOperationKind, table: str, row_key: str) -> BatchOperation:
    payload = EntityPayload(
        {"PartitionKey": "", "RowKey": row_key}, {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING}
    )
    return BatchOperation(kind, table, "", row_key, payload, None, body=b"")


class _Group:
    """A partition's entities waiting to fill a batch, and that batch's exact body size."""

    __slots__ = ("body_bytes", "items", "size")

    def __init__(self, framing: int) -> None:
        self.items: list[BulkItem] = []
        self.size = framing
        self.body_bytes = 0


def plan_inserts(
    entities: Iterable[Any], fmt: PayloadFormat, sizer: BatchSizer, pause: Callable[[], object] | None = None,
    encryption: EncryptionScope | None = None, kind: BatchOperationKind | None = None,
) -> Iterator[Step]:
    """Read ``entities`` once and yield, in turn, each batch to send (a list of items of one
    partition that fits both batch limits) and each entity that failed before sending.

    Each entity is validated and serialized here, once: the bytes size the batch exactly
    and are sent as they are. Partial per-partition groups wait for more entities of their
    partition, up to :data:`MAX_BUFFERED_ENTITIES` / :data:`MAX_BUFFERED_BYTES` in total
    (then the oldest group is yielded early). ``pause`` is called every eight entities
    (the thread driver hands the interpreter to its workers there). ``encryption`` (the call's
    client-side encryption) encrypts each payload before it is measured, for operations of
    ``kind`` (an encrypted entity cannot be merged); an entity it refuses fails before sending.
    """
    from .._clients._encryption_scope import NO_ENCRYPTION

    seen: dict[tuple[str, str], int] = {}
    groups: dict[str, _Group] = {}  # PartitionKey -> entities waiting for a batch, oldest group first
    buffered = [0, 0]  # entities, bytes

    def take(partition_key: str) -> list[BulkItem]:
        group = groups.pop(partition_key)
        buffered[0] -= len(group.items)
        buffered[1] -= group.body_bytes
        return group.items

    for index, entity in enumerate(entities):
        if pause is not None and not index & 7:
            pause()
        try:
            payload = entity_to_payload(entity)
            marked = encrypted_names(type(entity))
            if encryption is not None or marked:
                payload = (encryption or NO_ENCRYPTION).encrypt(payload, marked, kind)
            if sizer.cosmos:  # what is sent: encrypted, with its metadata
                check_cosmos_write(payload.values["PartitionKey"], payload.values["RowKey"], payload.values)
            item = BulkItem(index, entity, payload, fmt.serialize_entity(payload))
        except Exception as exc:  # noqa: BLE001 - an invalid entity is reported, not raised
            yield index, entity, exc
            continue
        partition_key, row_key = item.partition_key, item.row_key
        first = seen.setdefault((partition_key, row_key), index)
        if first != index:
            yield index, entity, _duplicate_error(partition_key, row_key, first)
            continue
        group = groups.get(partition_key)
        if group is None:
            group = groups[partition_key] = _Group(sizer.framing)
        body_size = len(item.body)
        cost = sizer.cost(partition_key, row_key, body_size, len(group.items) + 1)
        if group.size + cost > sizer.max_bytes and group.items:
            yield take(partition_key)
            group = groups[partition_key] = _Group(sizer.framing)
            cost = sizer.cost(partition_key, row_key, body_size, 1)
        if group.size + cost > sizer.max_bytes:
            del groups[partition_key]
            yield index, entity, _too_large(group.size + cost, sizer.max_bytes)
            continue
        group.items.append(item)
        group.size += cost
        group.body_bytes += body_size
        buffered[0] += 1
        buffered[1] += body_size
        if len(group.items) >= MAX_BATCH_OPERATIONS:
            yield take(partition_key)
        while groups and (buffered[0] > MAX_BUFFERED_ENTITIES or buffered[1] > MAX_BUFFERED_BYTES):
            yield take(next(iter(groups)))  # the oldest partial group
    while groups:
        yield take(next(iter(groups)))


def _duplicate_error(partition_key: str, row_key: str, first: int) -> TableValidationError:
    return TableValidationError(
        "entity",
        "each entity (PartitionKey, RowKey) may appear only once in one bulk_insert call",
        f"PartitionKey={partition_key!r}, RowKey={row_key!r} is also input entity {first}",
    )


def _too_large(size: int, limit: int) -> TableValidationError:
    shown = "4 MiB" if limit == MAX_BATCH_BYTES else "2 MB (Cosmos DB)"
    return TableValidationError(
        "entity", f"a batch body is at most {shown} ({limit} bytes)", f"this entity alone makes a {size}-byte batch"
    )
