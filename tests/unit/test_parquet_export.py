"""The Parquet export's writer without a service: pages streamed to row groups, a schema that widens, bounded memory."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tablesdk import EdmDateTime, EdmType, SchemaConflictError
from tablesdk._columns._arrow import EDM_TYPE_KEY, BatchBuilder
from tablesdk._entities._edm import EntityPage
from tablesdk.cli._parquet import PART_SUFFIX, ParquetSink, _union_schema


def entity_page(number: int, size: int = 3, **extra: tuple[object, EdmType]) -> EntityPage:
    """Page ``number``: ``size`` entities with an Int32 ``N``, and the ``extra`` properties on each."""
    values, types = [], []
    for row in range(size):
        values.append({"PartitionKey": f"p{number:03d}", "RowKey": f"{row:03d}", "N": number * size + row,
                       **{name: value for name, (value, _) in extra.items()}})
        types.append({"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING, "N": EdmType.INT32,
                      **{name: edm for name, (_, edm) in extra.items()}})
    return EntityPage(values, types, [None] * size)


def write(path: Path, pages: list[EntityPage], per_group: int) -> ParquetSink:
    sink = ParquetSink(str(path), BatchBuilder(wide_datetimes_as_text=True), per_group)
    for one in pages:
        sink.add(sink.builder.batch(one))
    sink.finish()
    return sink


def test_pages_become_row_groups_as_they_arrive_holding_at_most_one_group(tmp_path: Path) -> None:
    path = tmp_path / "out.parquet"
    sink = write(path, [entity_page(n) for n in range(50)], per_group=3)
    assert sink.most_held == 3  # never more batches than one row group's: memory does not grow with the table
    parquet = pq.ParquetFile(path)
    assert parquet.num_row_groups == 17 and parquet.metadata.num_rows == 150
    assert pq.read_table(path).column("N").to_pylist() == list(range(150))
    assert os.listdir(tmp_path) == ["out.parquet"]  # no part file left


def test_a_property_first_seen_after_the_first_row_group_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "out.parquet"
    pages = [entity_page(n) for n in range(6)] + [entity_page(6, Late=("x", EdmType.STRING))] + [entity_page(7)]
    sink = write(path, pages, per_group=2)
    data = pq.read_table(path)
    assert data.column("Late").to_pylist() == [None] * 18 + ["x"] * 3 + [None] * 3
    assert data.schema.field("Late").metadata == {EDM_TYPE_KEY: b"Edm.String"}
    assert data.schema.names == ["PartitionKey", "RowKey", "N", "Late"] and sink.most_held == 2
    assert pq.ParquetFile(path).num_row_groups == 4 and os.listdir(tmp_path) == ["out.parquet"]


def test_a_datetime_column_that_becomes_text_rewrites_the_earlier_groups_as_text(tmp_path: Path) -> None:
    path = tmp_path / "out.parquet"
    early = EdmDateTime(2020, 1, 1, 0, 0, 0, 5, timezone.utc, ticks_remainder=7)
    pages = [entity_page(0, At=(early, EdmType.DATETIME)), entity_page(1, At=(early, EdmType.DATETIME)),
             entity_page(2, At=(datetime(9999, 12, 31, tzinfo=timezone.utc), EdmType.DATETIME))]
    write(path, pages, per_group=1)
    column = pq.read_table(path).column("At")
    assert column.type == pa.string()
    assert column.to_pylist() == ["2020-01-01T00:00:00.0000057Z"] * 6 + ["9999-12-31T00:00:00.0000000Z"] * 3


def test_a_type_conflict_fails_naming_the_property_and_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "out.parquet"
    sink = ParquetSink(str(path), BatchBuilder(wide_datetimes_as_text=True), 1)
    sink.add(sink.builder.batch(entity_page(0, X=(1, EdmType.INT32))))
    assert len(sink.parts) == 1 and sink.parts[0].endswith(PART_SUFFIX + "0") and os.path.exists(sink.parts[0])
    with pytest.raises(SchemaConflictError) as caught:
        sink.add(sink.builder.batch(entity_page(1, X=("a", EdmType.STRING))))
    sink.abort()
    assert caught.value.property_name == "X" and caught.value.types == (EdmType.INT32, EdmType.STRING)
    assert os.listdir(tmp_path) == []


def test_an_empty_export_has_the_keys_and_timestamp(tmp_path: Path) -> None:
    path = tmp_path / "out.parquet"
    write(path, [], per_group=2)
    assert pq.read_schema(path).names == ["PartitionKey", "RowKey", "Timestamp"]


def test_the_files_of_ranges_get_the_union_of_their_columns() -> None:
    def field(name: str, kind: pa.DataType, edm: EdmType) -> pa.Field:
        return pa.field(name, kind, metadata={EDM_TYPE_KEY: edm.value.encode()})

    keys = [field("PartitionKey", pa.string(), EdmType.STRING), field("RowKey", pa.string(), EdmType.STRING)]
    first = pa.schema([*keys, field("A", pa.int32(), EdmType.INT32), field("At", pa.timestamp("ns", tz="UTC"), EdmType.DATETIME)])
    second = pa.schema([*keys, field("B", pa.string(), EdmType.STRING), field("At", pa.string(), EdmType.DATETIME)])
    sinks = [ParquetSink("a", BatchBuilder()), ParquetSink("b", BatchBuilder())]
    union = _union_schema([first, second], sinks)
    assert union.names == ["PartitionKey", "RowKey", "A", "At", "B"] and union.field("At").type == pa.string()
    clash = pa.schema([*keys, field("A", pa.string(), EdmType.STRING)])
    with pytest.raises(SchemaConflictError, match="'A' has two EDM types: Edm.Int32 at .* and Edm.String"):
        _union_schema([first, clash], sinks)
