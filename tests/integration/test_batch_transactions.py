"""Entity group transactions and bulk loading against a real service.

``client.execute_batch`` with hand-made ``BatchOperation`` records (every kind,
atomic rollback, the failing operation's index, limits checked before sending)
and ``client.bulk_insert`` at scale (20,000 entities over 200 partitions, each
landing exactly once; merge and replace over existing entities; one bad entity
not sinking its batch).
"""

from __future__ import annotations

import random
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tablesdk import (
    BatchError,
    BatchOperation,
    BatchOperationKind,
    CloudTableClient,
    ConflictError,
    DynamicEntity,
    EdmType,
    EntityProperty,
    OperationContext,
    ResourceNotFoundError,
    TableValidationError,
)
from tablesdk._entities._edm import EntityPayload
from tablesdk._entities._entity import entity_to_payload

pytestmark = pytest.mark.integration

K = BatchOperationKind
PK = "Batch"


def payload(row_key: str, partition_key: str = PK, **props: Any) -> EntityPayload:
    return entity_to_payload(DynamicEntity(PartitionKey=partition_key, RowKey=row_key, **props))


def operation(kind: BatchOperationKind, table: str, row_key: str, etag: str | None = None,
              partition_key: str = PK, **props: Any) -> BatchOperation:
    body = None if kind is K.DELETE else payload(row_key, partition_key, **props)
    return BatchOperation(kind, table, partition_key, row_key, body, etag)


def everything(client: CloudTableClient, table: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Every entity of the table (following continuation), as {(pk, rk): custom properties}."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    count = 0
    for entity in client.create_query(table):
        rows[(entity.PartitionKey, entity.RowKey)] = dict(entity)
        count += 1
    assert count == len(rows), "an entity came back twice"
    return rows


# --------------------------------------------------------------------------- execute_batch


def test_hundred_mixed_operations_in_one_batch(client: CloudTableClient, table: str) -> None:
    etags: dict[str, str | None] = {}
    for group in ("upd", "mrg", "del", "ups", "upm"):
        for i in range(10):
            entity = DynamicEntity(PartitionKey=PK, RowKey=f"{group}{i}", Old="old", N=i)
            etags[entity.RowKey] = client.insert_entity(table, entity)

    ops: list[BatchOperation] = []
    ops += [operation(K.INSERT, table, f"new{i:02d}", N=i, Kind="insert") for i in range(40)]
    # Conditional writes: the real ETag for even rows, '*' for odd ones.
    ops += [operation(K.UPDATE, table, f"upd{i}", etags[f"upd{i}"] if i % 2 == 0 else "*", Kind="replace")
            for i in range(10)]
    ops += [operation(K.MERGE, table, f"mrg{i}", etags[f"mrg{i}"] if i % 2 == 0 else "*", Kind="merge")
            for i in range(10)]
    ops += [operation(K.DELETE, table, f"del{i}", etags[f"del{i}"] if i % 2 == 0 else "*") for i in range(10)]
    ops += [operation(K.INSERT_OR_REPLACE, table, f"ups{i}", Kind="upsert-replace") for i in range(10)]
    ops += [operation(K.INSERT_OR_REPLACE, table, f"upn{i}", Kind="upsert-new") for i in range(10)]
    ops += [operation(K.INSERT_OR_MERGE, table, f"upm{i}", Kind="upsert-merge") for i in range(10)]
    random.Random(1).shuffle(ops)
    assert len(ops) == 100

    results = client.execute_batch(ops)

    assert [r.index for r in results] == list(range(100))
    for op, result in zip(ops, results):
        assert 200 <= result.status < 300
        if op.kind is not K.DELETE:
            assert result.etag, op
    rows = everything(client, table)
    assert len(rows) == 90
    for i in range(10):
        assert rows[(PK, f"upd{i}")] == {"Kind": "replace"}  # replace drops Old and N
        assert rows[(PK, f"mrg{i}")] == {"Old": "old", "N": i, "Kind": "merge"}  # merge keeps them
        assert (PK, f"del{i}") not in rows
        assert rows[(PK, f"ups{i}")] == {"Kind": "upsert-replace"}
        assert rows[(PK, f"upn{i}")] == {"Kind": "upsert-new"}
        assert rows[(PK, f"upm{i}")] == {"Old": "old", "N": i, "Kind": "upsert-merge"}
    for i in range(40):
        assert rows[(PK, f"new{i:02d}")] == {"N": i, "Kind": "insert"}
    etag_of = {op.row_key: r.etag for op, r in zip(ops, results)}
    assert client.get_entity(table, PK, "mrg3").etag == etag_of["mrg3"]


@pytest.mark.parametrize(
    ("failing", "status", "code", "cause"),
    [
        ("insert-existing", 409, "EntityAlreadyExists", ConflictError),
        ("merge-missing", 404, "ResourceNotFound", ResourceNotFoundError),
        ("delete-missing", 404, "ResourceNotFound", ResourceNotFoundError),
    ],
)
def test_one_failing_operation_applies_nothing(
    client: CloudTableClient, table: str, failing: str, status: int, code: str, cause: type[Exception]
) -> None:
    client.insert_entity(table, DynamicEntity(PartitionKey=PK, RowKey="existing", V="before"))
    client.insert_entity(table, DynamicEntity(PartitionKey=PK, RowKey="keep", V="before"))
    bad = {
        "insert-existing": operation(K.INSERT, table, "existing", V="after"),
        "merge-missing": operation(K.MERGE, table, "missing", "*", V="after"),
        "delete-missing": operation(K.DELETE, table, "missing", "*"),
    }[failing]
    ops = [operation(K.INSERT, table, f"a{i}", V="after") for i in range(5)]
    ops.append(operation(K.MERGE, table, "keep", "*", V="after"))
    ops.insert(3, bad)

    with pytest.raises(BatchError) as info:
        client.execute_batch(ops)

    error = info.value
    assert error.failed_index == 3
    assert error.status_code == status and error.error_code == code
    assert isinstance(error.cause, cause) and error.cause.error_code == code
    assert not error.message.startswith("3:")
    assert everything(client, table) == {(PK, "existing"): {"V": "before"}, (PK, "keep"): {"V": "before"}}


def test_limits_are_refused_before_sending(client: CloudTableClient, table: str) -> None:
    too_many = [operation(K.INSERT, table, f"r{i:03d}") for i in range(101)]
    two_partitions = [operation(K.INSERT, table, "r1"), operation(K.INSERT, table, "r2", partition_key="Other")]
    same_twice = [operation(K.INSERT, table, "r1"), operation(K.INSERT_OR_MERGE, table, "r1")]
    too_big = [operation(K.INSERT, table, f"r{i:03d}", A="a" * 30_000, B="b" * 30_000) for i in range(100)]
    for ops, words in ((too_many, "at most 100"), (two_partitions, "one PartitionKey"),
                       (same_twice, "only once"), (too_big, "4 MiB")):
        context = OperationContext()
        with pytest.raises(TableValidationError, match=words):
            client.execute_batch(ops, operation_context=context)
        assert context.attempts == []  # no request was made
    assert everything(client, table) == {}


# --------------------------------------------------------------------------- bulk_insert


def mixed(i: int, partitions: int) -> DynamicEntity:
    """An entity with ten properties: str, Int32, Int64, Double, bool, DateTime, Guid, 16-byte Binary, a 51-character str and Int32."""
    return DynamicEntity(
        PartitionKey=f"p{i % partitions:03d}", RowKey=f"{i:06d}", Name=f"name-{i}", Count=i,
        Big=EntityProperty(2**40 + i, EdmType.INT64), Score=i * 1.5, Active=i % 2 == 0,
        When=datetime(2024, 1, 2, tzinfo=timezone.utc) + timedelta(seconds=i), Id=uuid.UUID(int=i),
        Blob=bytes(range(16)), Text="x" * 40 + f"{i:011d}", Small=i % 7,
    )


def test_bulk_insert_20000_entities_over_200_partitions(client: CloudTableClient, table: str) -> None:
    data = [mixed(i, 200) for i in range(20_000)]
    random.Random(2).shuffle(data)
    calls: list[int] = []

    result = client.bulk_insert(table, data, progress=lambda done, total: calls.append(done))

    assert len(result.succeeded) == 20_000 and not result.failed, result.failed[:1]
    # one request per batch; a pooled connection the server closed meanwhile costs one retry
    # (a busy machine can leave one idle past Azurite's keep-alive), never a lost or doubled batch
    assert result.batches == 200 and 200 <= result.requests <= 210
    assert calls[-1] == 20_000
    keys: list[tuple[str, str]] = []
    sample: dict[str, Any] = {}
    for entity in client.create_query(table):
        keys.append((entity.PartitionKey, entity.RowKey))
        if entity.RowKey == "012345":
            sample = dict(entity)
    assert len(keys) == len(set(keys)) == 20_000
    assert set(keys) == {(e.PartitionKey, e.RowKey) for e in data}
    assert sample == dict(mixed(12345, 200))
    assert all(o.entity.etag == o.etag and o.etag for o in result.succeeded)


def test_bulk_merge_and_replace_over_existing_entities(client: CloudTableClient, table: str) -> None:
    first = [DynamicEntity(PartitionKey=f"p{i % 3}", RowKey=f"{i:03d}", A="a", B=0) for i in range(300)]
    client.bulk_insert(table, first).raise_on_error()

    merged = [DynamicEntity(PartitionKey=f"p{i % 3}", RowKey=f"{i:03d}", B=1, C="c") for i in range(100, 400)]
    result = client.bulk_insert(table, merged, mode="merge")
    assert len(result.succeeded) == 300 and not result.failed

    replaced = [DynamicEntity(PartitionKey=f"p{i % 3}", RowKey=f"{i:03d}", D=True) for i in range(250, 300)]
    client.bulk_insert(table, replaced, mode="replace").raise_on_error()

    rows = everything(client, table)
    assert len(rows) == 400
    for i in range(400):
        row = rows[(f"p{i % 3}", f"{i:03d}")]
        if i < 100:
            assert row == {"A": "a", "B": 0}  # untouched
        elif i < 250:
            assert row == {"A": "a", "B": 1, "C": "c"}  # merged into the existing entity
        elif i < 300:
            assert row == {"D": True}  # replaced
        else:
            assert row == {"B": 1, "C": "c"}  # inserted by the merge


def test_bulk_insert_isolates_entities_that_already_exist(client: CloudTableClient, table: str) -> None:
    for row_key in ("010", "050", "099"):
        client.insert_entity(table, DynamicEntity(PartitionKey="p", RowKey=row_key, V="before"))
    data = [DynamicEntity(PartitionKey="p", RowKey=f"{i:03d}", V="after") for i in range(100)]

    result = client.bulk_insert(table, data)

    assert len(result.succeeded) == 97
    assert [o.entity.RowKey for o in result.failed] == ["010", "050", "099"]
    for outcome in result.failed:
        assert isinstance(outcome.error, ConflictError) and outcome.error.error_code == "EntityAlreadyExists"
    assert result.batches == result.requests == 4
    rows = everything(client, table)
    assert len(rows) == 100
    assert {rk for (_, rk), row in rows.items() if row == {"V": "before"}} == {"010", "050", "099"}
