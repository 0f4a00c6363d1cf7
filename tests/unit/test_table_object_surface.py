"""CloudTable mirrors the client's entity operations; the seeds' actions check their rules as built."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from tablesdk import (
    CloudTable,
    CloudTableClient,
    DynamicEntity,
    TableBatchOperation,
    TableOperation,
    TableValidationError,
)
from tablesdk._formats._batch import BatchOperationKind, BatchOperationResult
from tablesdk.aio import AsyncCloudTable, AsyncCloudTableClient

#: The client's table operations and the table object's names for them.
TABLE_LEVEL = {
    "create_table": "create",
    "create_table_if_not_exists": "create_if_not_exists",
    "delete_table": "delete",
    "delete_table_if_exists": "delete_if_exists",
    "table_exists": "exists",
    "get_table_acl": "get_acl",
    "set_table_acl": "set_acl",
}


def _table_first_methods(cls: type) -> dict[str, inspect.Signature]:
    methods = {}
    for name, member in inspect.getmembers(cls, callable):
        if name.startswith("_"):
            continue
        params = list(inspect.signature(member).parameters.values())
        if len(params) > 1 and params[1].name == "table_name" and name != "get_table_reference":
            methods[name] = inspect.signature(member)
    return methods


def _without_table(signature: inspect.Signature) -> list[tuple[str, Any, Any, Any]]:
    return [(p.name, p.kind, p.default, p.annotation) for p in list(signature.parameters.values())[2:]]


@pytest.mark.parametrize(("client_type", "table_type"), [
    (CloudTableClient, CloudTable), (AsyncCloudTableClient, AsyncCloudTable),
])
def test_the_table_object_has_every_table_operation_of_the_client(client_type: type, table_type: type) -> None:
    operations = _table_first_methods(client_type)
    assert {"insert_entity", "get_entity", "create_query", "bulk_insert", "delete_entity"} <= set(operations)
    for name, signature in operations.items():
        table_name = TABLE_LEVEL.get(name, name)
        method = getattr(table_type, table_name, None)
        assert method is not None, f"{table_type.__name__} lacks {table_name} (the client's {name})"
        mine = inspect.signature(method)
        assert _without_table(signature) == [
            (p.name, p.kind, p.default, p.annotation) for p in list(mine.parameters.values())[1:]
        ], f"{table_type.__name__}.{table_name} differs from {client_type.__name__}.{name}"
        assert mine.return_annotation == signature.return_annotation or name in {"create_query"}, name
        assert inspect.iscoroutinefunction(method) == inspect.iscoroutinefunction(getattr(client_type, name)), name


def _entity(pk: str = "p", rk: str = "r", etag: str | None = None) -> DynamicEntity:
    entity = DynamicEntity(PartitionKey=pk, RowKey=rk, Beat=1)
    entity.etag = etag
    return entity


def test_batch_rules_are_checked_as_operations_are_added() -> None:
    batch: TableBatchOperation[DynamicEntity] = TableBatchOperation()
    batch.insert(_entity(rk="a"))
    with pytest.raises(TableValidationError, match="batch operation 1.*same PartitionKey"):
        batch.insert(_entity(pk="other", rk="b"))
    with pytest.raises(TableValidationError, match="batch operation 1.*once"):
        batch.merge(_entity(rk="a", etag="*"))
    with pytest.raises(TableValidationError, match="retrieve must be the only"):
        batch.retrieve("p", "z")
    assert len(batch) == 1  # a refused operation leaves the batch as it was
    for n in range(1, 100):
        batch.insert(_entity(rk=f"k{n:03d}"))
    with pytest.raises(TableValidationError, match="batch operation 100.*at most 100"):
        batch.insert(_entity(rk="overflow"))


def test_a_retrieve_batch_takes_nothing_else() -> None:
    batch: TableBatchOperation[DynamicEntity] = TableBatchOperation([TableOperation.retrieve("p", "r")])
    with pytest.raises(TableValidationError, match="batch operation 1.*retrieve"):
        batch.insert(_entity(rk="x"))


def test_an_empty_batch_is_refused_before_sending() -> None:
    with pytest.raises(TableValidationError, match="at least one"):
        TableBatchOperation[DynamicEntity]().to_batch_operations("T")


def test_conditional_actions_read_the_entitys_etag_when_executed() -> None:
    entity = _entity()
    merge = TableOperation.merge(entity)
    with pytest.raises(TableValidationError, match="conditional on the entity's ETag"):
        merge.to_batch_operation("T")
    entity.etag = 'W/"1"'
    entity["Beat"] = 2
    first = merge.to_batch_operation("T")
    assert (first.kind, first.etag, first.payload and first.payload.values["Beat"]) == (
        BatchOperationKind.MERGE, 'W/"1"', 2)
    result = merge.result(BatchOperationResult(0, 204, 'W/"2"', None))
    assert result.status == 204 and result.entity is entity and entity.etag == 'W/"2"'
    entity["Beat"] = 3
    again = merge.to_batch_operation("T")  # executed again: the new values and the new ETag
    assert again.etag == 'W/"2"' and again.payload is not None and again.payload.values["Beat"] == 3


def test_upserts_and_inserts_are_unconditional() -> None:
    entity = _entity(etag='W/"7"')
    for operation in (TableOperation.insert(entity), TableOperation.insert_or_merge(entity),
                      TableOperation.insert_or_replace(entity)):
        assert operation.to_batch_operation("T").etag is None


def test_actions_refuse_entities_without_string_keys() -> None:
    with pytest.raises(TableValidationError, match="RowKey"):
        TableOperation.insert(DynamicEntity(PartitionKey="p", RowKey=5))  # type: ignore[arg-type]
