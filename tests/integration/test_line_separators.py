"""U+2028 and U+2029 in values survive every write path, batches included.

Azurite splits a batch body on these characters (as a JavaScript line
terminator would): a batched update whose value holds one was answered 204 and
changed nothing. JSON bodies carry them as ``\\u2028``/``\\u2029`` escapes.
"""

from __future__ import annotations

import pytest

from tablesdk import CloudTableClient, DynamicEntity, SaveChangesOptions

pytestmark = pytest.mark.integration

VALUES = ["line\u2028separator", "para\u2029graph", "\u2028", "both\u2029\u2028"]


@pytest.mark.parametrize("options", [SaveChangesOptions.NONE, SaveChangesOptions.BATCH])
def test_update_with_line_separators_is_applied(client: CloudTableClient, table: str,
                                                options: SaveChangesOptions) -> None:
    ctx = client.get_table_service_context()
    entities = [DynamicEntity("p", f"r{i}", Text="before") for i in range(len(VALUES))]
    for entity in entities:
        ctx.add_object(table, entity)
    ctx.save_changes(options)
    for entity, value in zip(entities, VALUES):
        entity["Text"] = value
        entity["Name"] = value
        ctx.update_object(entity)
    ctx.save_changes(options)
    for entity, value in zip(entities, VALUES):
        got = client.get_entity(table, "p", entity.RowKey)
        assert (got["Text"], got["Name"]) == (value, value)


def test_percent_key_write_with_line_separator(client: CloudTableClient, table: str) -> None:
    # A key with '%' is written through a one-operation batch: the same path.
    entity = DynamicEntity("p%1", "r%2", Text="before")
    client.insert_entity(table, entity)
    entity["Text"] = "after\u2028"
    client.update_entity(table, entity)
    assert client.get_entity(table, "p%1", "r%2")["Text"] == "after\u2028"
