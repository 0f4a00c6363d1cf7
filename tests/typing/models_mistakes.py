"""Deliberate mistakes: ``mypy --strict`` must report exactly the ``# E:`` errors, at these lines."""

from __future__ import annotations

from datetime import datetime

from tablesdk import TableEntity


class Entry(TableEntity):
    Title: str
    Stars: int = 0
    Posted: datetime | None = None


Entry(PartitionKey="b", RowKey="1", Title="x", Stars="5")  # E: arg-type
Entry(PartitionKey="b", RowKey="1", Title="x", Strs=5)  # E: call-arg
Entry(PartitionKey="b", Title="x")  # E: call-arg
Entry(PartitionKey="b", RowKey="1")  # E: call-arg
Entry(PartitionKey="b", RowKey=1, Title="x")  # E: arg-type
Entry(PartitionKey="b", RowKey="1", Title="x", Posted="today")  # E: arg-type
