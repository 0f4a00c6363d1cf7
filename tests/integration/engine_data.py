"""A table of every EDM type for the engine tests (Ray, Polars, DuckDB), and how to compare reads.

Each EDM type is present with the values a lossy path gets wrong: a Guid (which Arrow holds as
text), Int64 beyond 2**53 (a double's exact range), a DateTime with its seventh fractional digit,
bytes that are not UTF-8, a Boolean with nulls (a sparse column), Int32 and Double beside them.
The keys spread over 24 PartitionKeys, so a read cut into ranges has range edges on keys that exist.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

from tablesdk import CloudTableClient, DynamicEntity, EdmDateTime, EdmType, EntityProperty

ROWS = 240
PARTITIONS = 24
#: The EDM type of each property column of :func:`fill`.
PROPERTY_TYPES = {
    "N": EdmType.INT32, "Name": EdmType.STRING, "Id": EdmType.GUID, "Big": EdmType.INT64, "Ratio": EdmType.DOUBLE,
    "At": EdmType.DATETIME, "Blob": EdmType.BINARY, "Ok": EdmType.BOOLEAN,
}


def entity(n: int) -> DynamicEntity:
    """Row ``n`` of the table: every type, the sparse ones missing on some rows."""
    row = DynamicEntity(f"k{n % PARTITIONS:02d}", f"{n:04d}", N=n, Name=f"n{n}", Ratio=n / 8)
    row["Id"] = uuid.UUID(int=n * 2**64 + 7)
    row["Big"] = EntityProperty(2**53 + 2 * n + 1, EdmType.INT64)  # odd: no double holds it
    row["At"] = EdmDateTime(2024, 5, 6, 7, 8, n % 60, 123456, timezone.utc, ticks_remainder=n % 10)
    if n % 5:
        row["Blob"] = bytes([n % 256, 0xFF, 0xFE, 0])  # not UTF-8
    if n % 3:
        row["Ok"] = n % 2 == 0  # nulls on every third row
    return row


def fill(client: CloudTableClient, table: str) -> None:
    client.bulk_insert(table, [entity(n) for n in range(ROWS)]).raise_on_error()


def sorted_rows(table: Any) -> Any:
    """A ``pyarrow.Table`` sorted by its keys (engines give rows in no particular order)."""
    return table.sort_by([("PartitionKey", "ascending"), ("RowKey", "ascending")])


def stored(client: CloudTableClient, table: str) -> list[tuple[str, str, dict[str, tuple[Any, EdmType]]]]:
    """Every entity as it is stored: keys, and each property's value and EDM type (the seventh digit of a DateTime kept)."""
    rows = []
    for found in client.create_query(table):
        properties = {}
        for name in found:
            value, edm = found[name], found.edm_type(name)
            if isinstance(value, datetime):
                value = (value, getattr(value, "ticks_remainder", 0))
            properties[name] = (value, edm)
        rows.append((found.PartitionKey, found.RowKey, properties))
    return sorted(rows, key=lambda row: (row[0], row[1]))
