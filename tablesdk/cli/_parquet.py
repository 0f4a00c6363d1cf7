"""Parquet files for ``tablesdk export`` and ``tablesdk import`` (pyarrow: the ``arrow`` extra).

An export reads the query's pages as Arrow record batches (``TableQuery.iter_arrow_batches``)
and writes one Parquet file whose columns keep each EDM type in their field metadata, so an
import gives back every value exactly (Int64 and Guid included; DateTime to the 100 ns tick).
A DateTime column with a value beyond ``timestamp[ns]`` (before 1677 or after 2262) is kept
as the values' wire text, still marked Edm.DateTime. The file's schema is only known when the query is done (a later page may bring a new
property), so the pages are held until then and written at the end; ``--resume`` and
``--parallel`` are for the streaming formats. An import reads the file a row group at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .._arrow import BatchBuilder, _scan
from .._arrow_write import arrow_rows
from .._client import CloudTableClient
from ._export import ExportError, ExportSpec
from ._files import PARQUET, EntityLine
from ._progress import Progress
from ._transfer import build_query

__all__ = ["PARQUET", "export_parquet", "parquet_lines", "parquet_rows"]



def export_parquet(
    client: CloudTableClient, spec: ExportSpec, target: str, *, resume: bool, parallel: int, progress: Progress
) -> int:
    """Write every entity of the export's query to the Parquet file ``target``; returns how many."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if target == "-" or resume or parallel > 1:
        raise ExportError("a Parquet export goes to a file, in one piece: without '-', --resume or --parallel")
    query = build_query(client, spec.table, spec.filter, spec.select)
    builder = BatchBuilder(wide_datetimes_as_text=True)  # exact for every DateTime, 1601 to 9999
    batches = []
    count = 0
    for batch in _scan(query, builder):
        if batch.num_rows:
            batches.append(batch)
            count += batch.num_rows
            progress.update(count)
    schema = builder.output_schema() if batches else builder.empty_schema()
    data = pa.Table.from_batches([builder.conform(batch, schema) for batch in batches], schema=schema)
    pq.write_table(data, target)
    return count


def parquet_rows(path: str) -> int | None:
    """The rows of a Parquet file, from its footer (for the progress display)."""
    import pyarrow.parquet as pq

    try:
        return int(pq.ParquetFile(path).metadata.num_rows)
    except (OSError, ValueError):
        return None


def parquet_lines(path: str) -> Iterator[EntityLine]:
    """Each row of a Parquet file as an import line: (row number from 1, entity, ''), a row group at a time.

    A file whose columns cannot be entities (no PartitionKey, a type no EDM type holds) raises
    :class:`~tablesdk.TableValidationError` before its first row is written.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if path == "-":
        raise ExportError("a Parquet import reads a file, not '-'")
    parquet = pq.ParquetFile(path)
    number = 0
    for group in range(parquet.num_row_groups):
        table: Any = parquet.read_row_group(group)
        if group == 0 and not table.num_rows:
            table = pa.Table.from_batches([], schema=parquet.schema_arrow)
        for entity in arrow_rows(table):
            number += 1
            yield number, entity, ""
