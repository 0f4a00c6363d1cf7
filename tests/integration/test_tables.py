"""Table operations and single-entity round trips against a real service."""

from __future__ import annotations

import math
import uuid
from datetime import datetime, timezone

import pytest

from tablesdk import (
    CloudTableClient,
    ConflictError,
    DynamicEntity,
    EdmType,
    EntityProperty,
    PreconditionFailedError,
    ResourceNotFoundError,
    TableValidationError,
)
from tablesdk._entities._edm import parse_datetime

pytestmark = pytest.mark.integration


def test_table_lifecycle(client: CloudTableClient, unique_table_name: str) -> None:
    name = unique_table_name
    assert client.table_exists(name) is False
    assert client.create_table_if_not_exists(name) is True
    assert client.create_table_if_not_exists(name) is False
    with pytest.raises(ConflictError) as info:
        client.create_table(name)
    assert info.value.error_code == "TableAlreadyExists" and info.value.request_id
    assert client.table_exists(name) is True
    assert name in list(client.list_tables(prefix=name[:6]))
    assert client.delete_table_if_exists(name) is True
    assert client.delete_table_if_exists(name) is False
    with pytest.raises(ResourceNotFoundError):
        client.delete_table(name)


def test_list_tables_follows_continuation(client: CloudTableClient, unique_table_name: str) -> None:
    names = [f"{unique_table_name[:40]}x{i}" for i in range(7)]
    for name in names:
        client.create_table(name)
    try:
        listed = list(client.list_tables(prefix=unique_table_name[:40], page_size=3))
        assert sorted(listed) == sorted(names)
    finally:
        for name in names:
            client.delete_table_if_exists(name)


def test_invalid_table_name_is_refused_before_sending(client: CloudTableClient) -> None:
    with pytest.raises(TableValidationError, match="table"):
        client.create_table("a_b")


def test_every_edm_type_round_trips(client: CloudTableClient, table: str) -> None:
    guid = uuid.uuid4()
    when = parse_datetime("2024-01-02T03:04:05.1234567Z")
    entity = DynamicEntity(
        PartitionKey="p", RowKey="types",
        Text="é中😀 'quoted' <xml>", Int=-(2**31), Big=EntityProperty(2**62 + 1, EdmType.INT64),
        Small64=EntityProperty(5, EdmType.INT64), Whole=2.0, Neg0=-0.0, NaN=math.nan, Inf=math.inf,
        Flag=True, When=when, Early=datetime(1601, 1, 1, tzinfo=timezone.utc), Id=guid,
        Blob=bytes(range(256)), Empty="", NoBytes=b"",
    )
    etag = client.insert_entity(table, entity)
    assert etag and entity.etag == etag
    back = client.get_entity(table, "p", "types")
    assert back.etag == etag
    assert back["Text"] == "é中😀 'quoted' <xml>" and back["Int"] == -(2**31)
    assert back["Big"] == 2**62 + 1 and back.edm_type("Big") is EdmType.INT64
    assert back["Small64"] == 5 and back.edm_type("Small64") is EdmType.INT64
    assert back["Whole"] == 2.0 and back.edm_type("Whole") is EdmType.DOUBLE
    assert math.isnan(back["NaN"]) and back["Inf"] == math.inf
    assert back["Flag"] is True and back["Id"] == guid and back["Blob"] == bytes(range(256))
    assert back["When"] == when and back["When"].ticks_remainder == 7
    assert back["Early"] == datetime(1601, 1, 1, tzinfo=timezone.utc)
    assert back.Timestamp is not None and back.Timestamp.tzinfo is not None


def test_conditional_writes(client: CloudTableClient, table: str) -> None:
    entity = DynamicEntity(PartitionKey="p", RowKey="r", N=1)
    first = client.insert_entity(table, entity)
    with pytest.raises(ConflictError) as info:
        client.insert_entity(table, DynamicEntity(PartitionKey="p", RowKey="r"))
    assert info.value.error_code == "EntityAlreadyExists"
    entity["N"] = 2
    second = client.update_entity(table, entity)
    assert second != first
    entity.etag = first
    with pytest.raises(PreconditionFailedError):
        client.update_entity(table, entity, mode="replace")
    client.update_entity(table, entity, etag="*", mode="replace")
    client.upsert_entity(table, DynamicEntity(PartitionKey="p", RowKey="r", M=3))
    assert dict(client.get_entity(table, "p", "r")) == {"N": 2, "M": 3}
    client.delete_entity(table, partition_key="p", row_key="r", etag="*")
    with pytest.raises(ResourceNotFoundError):
        client.get_entity(table, "p", "r")


@pytest.mark.parametrize("key", ["o'neil", "a''b", "100%", "a%20b", "a b", "a+b", "a&b", "é中😀", "*", ""])
def test_special_keys_work_for_every_operation(client: CloudTableClient, table: str, key: str) -> None:
    entity = DynamicEntity(PartitionKey=key, RowKey=key, V=1)
    client.insert_entity(table, entity)
    assert client.get_entity(table, key, key)["V"] == 1
    entity["V"] = 2
    client.update_entity(table, entity)
    client.upsert_entity(table, DynamicEntity(PartitionKey=key, RowKey=key, W=3), mode="replace")
    assert dict(client.get_entity(table, key, key)) == {"W": 3}
    client.delete_entity(table, partition_key=key, row_key=key, etag="*")
    with pytest.raises(ResourceNotFoundError):
        client.get_entity(table, key, key)


@pytest.mark.parametrize("key", ["plain", "100%", "k" * 300])
def test_missing_entity_errors_do_not_depend_on_how_keys_are_addressed(client: CloudTableClient, table: str, key: str) -> None:
    with pytest.raises(ResourceNotFoundError):
        client.delete_entity(table, partition_key="p", row_key=key, etag="*")
    with pytest.raises(ResourceNotFoundError):
        client.update_entity(table, DynamicEntity(PartitionKey="p", RowKey=key, A=1), etag="*")
    client.insert_entity(table, DynamicEntity(PartitionKey="p", RowKey=key, A=1))
    stale = DynamicEntity(PartitionKey="p", RowKey=key, A=2)
    stale.etag = 'W/"datetime\'2000-01-01T00%3A00%3A00.0000000Z\'"'
    with pytest.raises(PreconditionFailedError):
        client.update_entity(table, stale)
