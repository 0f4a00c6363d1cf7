"""Raw filter text with parameters against every target (Azurite, the bundled emulator in JSON and
Atom): each kind of value, bound as a literal, finds exactly the entity that holds it."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

import pytest

from tablesdk import CloudTableClient, DynamicEntity, EdmType, EntityProperty
from tablesdk._entities._edm import EdmDateTime

pytestmark = pytest.mark.integration

VALUES: dict[str, Any] = {
    "int32": 30,
    "int64": 2**40,
    "explicit_int64": EntityProperty(7, EdmType.INT64),
    "double": 1.5,
    "boolean": True,
    "text": "x' or true or Name eq 'y",
    "at_sign": "@v",
    "datetime": EdmDateTime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=timezone.utc, ticks_remainder=7),
    "guid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "binary": b"\x00\xff'",
}
#: What each entity of the other rows holds instead (same EDM type, another value).
OTHERS: dict[str, Any] = {
    "int32": 31, "int64": 2**40 + 1, "explicit_int64": EntityProperty(8, EdmType.INT64), "double": 2.5,
    "boolean": False, "text": "y", "at_sign": "v",
    # A millisecond apart: Azurite compares DateTime values as JavaScript Dates (to the millisecond).
    "datetime": datetime(2024, 5, 1, 10, 0, 0, 124456, tzinfo=timezone.utc),
    "guid": uuid.UUID(int=1), "binary": b"\x00\xfe",
}


@pytest.mark.parametrize("kind", list(VALUES))
def test_a_bound_value_finds_exactly_its_entity(client: CloudTableClient, table: str, kind: str) -> None:
    client.insert_entity(table, DynamicEntity(PartitionKey="p", RowKey="match", V=VALUES[kind]))
    client.insert_entity(table, DynamicEntity(PartitionKey="p", RowKey="other", V=OTHERS[kind]))
    query = client.create_query(table).where("PartitionKey eq @pk and V eq @v", parameters={"pk": "p", "v": VALUES[kind]})
    assert [entity.RowKey for entity in query] == ["match"]
    assert client.count_entities(table, "V eq @v", parameters={"v": VALUES[kind]}) == 1
