"""Correct user code with filter parameters: must pass ``mypy --strict`` with no ignores
(tests/unit/test_filter_parameters.py)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime, timezone

from typing_extensions import assert_type

from tablesdk import CloudStorageAccount, DynamicEntity, EdmType, EntityProperty, TableEntity, TableQuery
from tablesdk.aio import AsyncCloudTableClient, AsyncTableQuery


class Person(TableEntity):
    Age: int
    Name: str


def typed(conn_str: str) -> int:
    client = CloudStorageAccount.parse(conn_str).create_cloud_table_client()
    people = client.create_query("People", Person).where(
        "Age gt @age and Name eq @name", parameters={"age": 30, "name": "O'Neil"}
    )
    assert_type(people, TableQuery[Person])
    ages: dict[str, int] = {"age": 30}
    values: Mapping[str, object] = {
        "when": datetime(2024, 1, 1, tzinfo=timezone.utc), "id": uuid.uuid4(), "big": EntityProperty(5, EdmType.INT64),
    }
    dynamic = client.create_query("People").where("Age gt @age", parameters=ages)
    assert_type(dynamic, TableQuery[DynamicEntity])
    client.create_query("People").where("Timestamp ge @when and Id eq @id and Big eq @big", parameters=values)
    table = client.get_table_reference("People")
    deleted = table.delete_entities("Age lt @age", parameters=ages).total
    ctx = client.get_table_service_context()
    first: Person | None = ctx.create_query("People", Person).where("Name eq @n", parameters={"n": "x"}).first_or_default()
    return client.count_entities("People", "Age ge @age", parameters=ages) + table.count_entities(
        "Age ge @age", parameters={"age": 1}
    ) + deleted + (first.Age if first else 0)


async def asynchronous(client: AsyncCloudTableClient) -> int:
    query = client.create_query("People", Person).where("Age gt @age", parameters={"age": 30})
    assert_type(query, AsyncTableQuery[Person])
    counted = await client.count_entities("People", "Age gt @age", parameters={"age": 30})
    result = await client.get_table_reference("People").delete_entities("Age gt @age", parameters={"age": 99})
    return counted + result.total
