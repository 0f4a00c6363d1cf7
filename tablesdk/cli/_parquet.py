"""Parquet files for ``tablesdk export`` and ``tablesdk import`` (pyarrow: the ``arrow`` extra).

An export reads the query's pages as Arrow record batches (``scan_batches``, what
``TableQuery.iter_arrow_batches`` does) and writes them as they arrive, a row group every
:data:`PAGES_PER_ROW_GROUP` pages (:class:`ParquetSink`): at most that many batches are held,
whatever the table's size. The file's columns keep each EDM type in their field metadata,
so an import gives back every value exactly (Int64 and Guid included; DateTime to the
100 ns tick). A DateTime column with a value beyond ``timestamp[ns]`` (before 1677 or after
2262) is kept as the values' wire text, still marked Edm.DateTime.

A Parquet file has one schema, written in its footer, and every row group has every column.
The first row group is written once the first pages are in, so the columns of those pages
cost nothing. When a later page widens the schema (a property first seen there, or a
DateTime column that becomes text) the groups so far stay in a part file, the next ones
go to a new part with the wider schema, and at the end the parts are copied into the
file with the final schema, a row group at a time (earlier rows get nulls for the new
column, or the column's text). The file is only complete when the export is: until then
the rows are in ``FILE.XXXXXXXX.tablesdk-partN`` files next to it, removed when it ends
either way, and the complete file is renamed onto ``FILE`` (the rules of
:mod:`tablesdk.cli._output`: an existing file only with ``--overwrite``, a failed export
leaves ``FILE`` as it was).
A property with two EDM types fails the export with :class:`~tablesdk.SchemaConflictError`
(the property, both types and the keys of a row of each), as ``to_arrow`` does.

``--parallel N`` writes a directory ``FILE`` of ``part-NNNNN.parquet`` files, one per
PartitionKey range, read by N readers at once (into a new directory beside ``FILE``,
renamed onto it when the export succeeds and removed when it fails; ``FILE`` must not
exist, or be an empty directory); the files are given one schema at the end
(the union of theirs), so a directory reader that takes the schema of one file (pyarrow
datasets, pandas, DuckDB) loses no column. An import reads a file or such a directory,
a row group at a time.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .._columns._arrow import SYSTEM_COLUMNS, BatchBuilder, edm_type_of_field, scan_batches
from .._columns._arrow_write import arrow_rows
from .._clients._client import CloudTableClient
from .._entities._edm import EdmType
from .._core._errors import SchemaConflictError
from .._core._extras import require_extra
from .._entities._filter import prop
from ._export import ExportError, ExportSpec, _key_ranges
from ._files import PARQUET, EntityLine
from ._output import OutputPath, new_directory_beside, output_path
from ._progress import Progress
from ._transfer import build_query

__all__ = [
    "PAGES_PER_ROW_GROUP", "PARQUET", "PART_SUFFIX", "ParquetSink", "export_parquet", "parquet_lines", "parquet_rows",
]

#: Pages (1,000 entities each from the service) written as one row group: the batches an export holds at most.
PAGES_PER_ROW_GROUP = 10
#: The files of an unfinished export: ``FILE.tablesdk-part0``, ``-part1``... (one per schema).
PART_SUFFIX = ".tablesdk-part"
#: The name of range ``n``'s file in the directory of a ``--parallel`` export.
RANGE_FILE = "part-{:05d}.parquet"


class ParquetSink:
    """The record batches of one scan (from ``builder``) written to the Parquet file ``target`` as they arrive.

    :meth:`add` each batch, then :meth:`finish` (or :meth:`abort`). ``most_held`` is the
    largest number of batches waiting for their row group at any time.
    """

    def __init__(self, target: str, builder: BatchBuilder, pages_per_row_group: int = PAGES_PER_ROW_GROUP,
                 *, install: Callable[[str], None] | None = None) -> None:
        self.target = target
        #: Puts the complete file in place (default: renamed onto ``target``, a path of the export's own).
        self.install: Callable[[str], None] = install or (lambda path: os.replace(path, target))
        self.builder = builder
        self.pages_per_row_group = pages_per_row_group
        self.count = 0
        self.most_held = 0
        self.parts: list[str] = []
        self._pending: list[Any] = []
        self._writer: Any = None
        self._schema: Any = None

    def add(self, batch: Any) -> None:
        """Take one page's batch; a row group is written once enough pages wait."""
        if not batch.num_rows:
            return
        self._pending.append(batch)
        self.count += batch.num_rows
        self.most_held = max(self.most_held, len(self._pending))
        if len(self._pending) >= self.pages_per_row_group:
            self._write_group()

    def _write_group(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self._pending:
            return
        schema = self.builder.output_schema()
        if self._writer is None or not schema.equals(self._schema, check_metadata=True):
            if self._writer is not None:  # the schema widened: later groups go to a part of their own
                self._writer.close()
            path = self._new_part(str(len(self.parts)))
            self.parts.append(path)
            self._writer, self._schema = pq.ParquetWriter(path, schema), schema
        data = pa.Table.from_batches([self.builder.conform(batch, schema) for batch in self._pending], schema=schema)
        self._writer.write_table(data, row_group_size=max(1, data.num_rows))
        self._pending.clear()

    def finish(self) -> int:
        """Write what waits and complete ``target`` with the scan's final schema; returns the rows written."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._write_group()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        final = self.builder.output_schema() if self.count else self.builder.empty_schema()
        if len(self.parts) == 1 and self._schema.equals(final, check_metadata=True):
            self.install(self.parts[0])  # the usual case: one schema from the first group on
            self.parts.pop()
            return self.count
        assembling = self._new_part("-final")
        self.parts.append(assembling)
        with pq.ParquetWriter(assembling, final) as out:
            if not self.parts[:-1]:
                out.write_table(pa.Table.from_batches([], schema=final))
            for part in self.parts[:-1]:
                _copy_groups(part, out, final, self.builder)
        self.install(assembling)
        self.parts.remove(assembling)
        self._remove_parts()
        return self.count

    def _new_part(self, name: str) -> str:
        """A new file of the export's own beside ``target`` (created exclusively: never an existing file)."""
        handle, path = OutputPath(self.target, self.target, stream=False, overwrite=False).beside(PART_SUFFIX + name)
        handle.close()
        return path

    def abort(self) -> None:
        """Drop the unfinished export's files."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._remove_parts()

    def _remove_parts(self) -> None:
        for part in self.parts:
            if os.path.exists(part):
                os.remove(part)
        self.parts.clear()


def _copy_groups(path: str, out: Any, schema: Any, builder: BatchBuilder) -> None:
    """The row groups of the Parquet file ``path`` written to ``out`` in ``schema``, one group at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = pq.ParquetFile(path)
    for group in range(source.num_row_groups):
        data = source.read_row_group(group)
        batches = [builder.conform(batch, schema) for batch in data.to_batches()]
        out.write_table(pa.Table.from_batches(batches, schema=schema), row_group_size=max(1, data.num_rows))


def export_parquet(
    client: CloudTableClient, spec: ExportSpec, target: str, *, resume: bool, parallel: int, progress: Progress,
    overwrite: bool = False,
) -> int:
    """Write every entity of the export's query to the Parquet file ``target`` (with ``parallel`` > 1: a
    directory of one file per PartitionKey range); returns how many."""
    if target == "-" or resume:
        raise ExportError("a Parquet export goes to a file, in one run: without '-' or --resume")
    output = output_path(target, overwrite=overwrite, directory=parallel > 1)
    if output.stream:
        raise ExportError(f"a Parquet export goes to a regular file: {target} is a device or a FIFO")
    query = build_query(client, spec.table, spec.filter, spec.select)
    if parallel > 1:
        return _export_ranges(query, output, parallel, progress)
    sink = ParquetSink(output.path, BatchBuilder(wide_datetimes_as_text=True),  # exact for every DateTime, 1601 to 9999
                       install=output.install)
    try:
        for batch in scan_batches(query, sink.builder):
            sink.add(batch)
            progress.update(sink.count)
        return sink.finish()
    except BaseException:
        sink.abort()
        raise


def _export_ranges(query: Any, output: OutputPath, parallel: int, progress: Progress) -> int:
    """``--parallel``: each PartitionKey range to its own file of the directory ``output``, ``parallel`` at once.

    The files are written into a new directory beside ``output``, renamed onto it when
    every range is done; a failed export removes that directory and its files only.
    """
    ranges = _key_ranges(query, parallel)
    working = new_directory_beside(output, ".tablesdk-parts")
    sinks = [ParquetSink(os.path.join(working, RANGE_FILE.format(n)), BatchBuilder(wide_datetimes_as_text=True))
             for n in range(len(ranges))]
    lock = threading.Lock()
    stop = threading.Event()

    def read(n: int) -> None:
        part = query
        if ranges[n].low is not None:
            part = part.where(prop("PartitionKey") >= ranges[n].low)
        if ranges[n].high is not None:
            part = part.where(prop("PartitionKey") < ranges[n].high)
        for batch in scan_batches(part, sinks[n].builder):
            if stop.is_set():
                return
            sinks[n].add(batch)
            with lock:
                progress.update(sum(sink.count for sink in sinks))
        sinks[n].finish()

    try:
        with ThreadPoolExecutor(parallel, thread_name_prefix="tablesdk-parquet") as pool:
            futures = [pool.submit(read, n) for n in range(len(ranges))]
            try:
                for future in futures:
                    future.result()
            except BaseException:
                stop.set()
                raise
        _unify_files([sink.target for sink in sinks], sinks)
        try:
            os.rename(working, output.path)  # replaces an empty directory; fails if files appeared in it
        except OSError as exc:
            raise ExportError(f"{output.given} changed while the export ran ({exc.strerror}); "
                              "it was left as it is: export again to a new name") from None
    except BaseException:
        import shutil

        for sink in sinks:
            sink.abort()
        shutil.rmtree(working)  # the export's own new directory: only its files are in it
        raise
    return sum(sink.count for sink in sinks)


def _unify_files(paths: list[str], sinks: list[ParquetSink]) -> None:
    """Give every file the union of their schemas (rewriting, a row group at a time, those that lack a column)."""
    import pyarrow.parquet as pq

    schemas = [pq.read_schema(path) for path in paths]
    union = _union_schema(schemas, sinks)
    for path, schema, sink in zip(paths, schemas, sinks):
        if schema.equals(union, check_metadata=True):
            continue
        handle, rewritten = OutputPath(path, path, stream=False, overwrite=True).beside(PART_SUFFIX + "-final")
        handle.close()
        with pq.ParquetWriter(rewritten, union) as out:
            _copy_groups(path, out, union, sink.builder)
        os.replace(rewritten, path)


def _union_schema(schemas: list[Any], sinks: list[ParquetSink]) -> Any:
    """Every column of ``schemas`` (system columns first); a property of two EDM types raises, naming both."""
    import pyarrow as pa

    fields: dict[str, tuple[Any, int]] = {}
    for index, schema in enumerate(schemas):
        for field in schema:
            known = fields.get(field.name)
            if known is None:
                fields[field.name] = (field, index)
            elif not field.equals(known[0], check_metadata=True):
                fields[field.name] = (_wider(known, (field, index), sinks), known[1])
    names = [name for name in SYSTEM_COLUMNS if name in fields]
    names += [name for name in fields if name not in SYSTEM_COLUMNS]
    return pa.schema([fields[name][0] for name in names])


def _wider(first: tuple[Any, int], second: tuple[Any, int], sinks: list[ParquetSink]) -> Any:
    """One field for a column two ranges read differently: a DateTime as text where one range needed it."""
    import pyarrow as pa

    (a, a_range), (b, b_range) = first, second
    a_edm, b_edm = edm_type_of_field(a), edm_type_of_field(b)
    if a_edm is b_edm is EdmType.DATETIME:
        return a if pa.types.is_string(a.type) else b
    keys = [getattr(sinks[n].builder.columns.get(a.name), "keys", None) for n in (a_range, b_range)]
    types = (a_edm.value if a_edm else str(a.type), b_edm.value if b_edm else str(b.type))
    raise SchemaConflictError(
        f"property {a.name!r} has two EDM types: {types[0]} at {_keys(keys[0])} and {types[1]} at {_keys(keys[1])}",
        property_name=a.name, types=(a_edm, b_edm), keys=keys[1],
    )


def _keys(keys: tuple[str, str] | None) -> str:
    return "?" if keys is None else f"PartitionKey={keys[0]!r}, RowKey={keys[1]!r}"


def _files(path: str) -> list[str]:
    """The Parquet files of ``path``: itself, or a parallel export's directory's files in order."""
    if os.path.isdir(path):
        return [os.path.join(path, name) for name in sorted(os.listdir(path)) if name.endswith(".parquet")]
    return [path]


def parquet_rows(path: str) -> int | None:
    """The rows of a Parquet file (or directory), from the footers (for the progress display)."""
    import pyarrow.parquet as pq

    try:
        return sum(int(pq.ParquetFile(one).metadata.num_rows) for one in _files(path))
    except (OSError, ValueError):
        return None


def parquet_lines(path: str) -> Iterator[EntityLine]:
    """Each row of a Parquet file (or a parallel export's directory) as an import line: (row number from 1,
    entity, ''), a row group at a time.

    A file whose columns cannot be entities (no PartitionKey, a type no EDM type holds) raises
    :class:`~tablesdk.TableValidationError` before its first row is written.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if path == "-":
        raise ExportError("a Parquet import reads a file, not '-'")
    number = 0
    for one in _files(path):
        parquet = pq.ParquetFile(one)
        for group in range(parquet.num_row_groups):
            table: Any = parquet.read_row_group(group)
            if group == 0 and not table.num_rows:
                table = pa.Table.from_batches([], schema=parquet.schema_arrow)
            for entity in arrow_rows(table):
                number += 1
                yield number, entity, ""


require_extra("arrow", ("pyarrow",), "Parquet files")  # say which extra, not a bare ModuleNotFoundError
