"""Tables as Ray Datasets: :func:`read_table` and :func:`write_table` (the ``ray`` extra: ``pip install '.[ray]'`` from a checkout).

:func:`read_table` cuts the table into PartitionKey ranges, as :func:`tablesdk.dask.read_table`
does (:func:`~tablesdk.find_partition_boundaries` or boundaries you give), and reads each in a
Ray task through a ``ray.data.Datasource``: Arrow blocks of the table's pages, every range with
one schema (given, or from a sample page). A column projection Ray pushes down
(``select_columns``) becomes ``$select``.

:func:`write_table` writes each block of a Dataset through the client's bulk engine in a
Ray task (a ``ray.data.Datasink``) and raises :class:`TableWriteError` naming each key not
written when any entity failed.

The tasks carry the connection string wrapped in :class:`~tablesdk.dask.ConnectionSecret`,
whose ``repr`` leaves the account key out.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._columns._arrow_fit import edm_type_overrides
from ._bulk_loading._bulk import BulkMode, BulkOptions
from ._entities._edm import EdmType
from ._columns._engines import (
    ConnectionSecret,
    Failures,
    change_window,
    RangePlan,
    RangeSpec,
    TableWriteError,
    WriteSpec,
    iter_range_batches,
    plan_ranges,
    write_block,
)
from ._core._extras import require_extra
from ._columns._engine_encryption import engine_encryption
from ._encryption import TableEncryptionPolicy
from ._entities._filter import Filter
from ._queries._watermark import ChangeWindow
from ._pipeline._options import TableRequestOptions
from ._pipeline._retry import RetryPolicy

if TYPE_CHECKING:
    import ray.data

__all__ = ["TableWriteError", "read_table", "write_table", "BLOCK_ROWS"]

#: Rows a read task gathers (whole pages) into one Ray block: fewer, larger objects in Ray's store.
BLOCK_ROWS = 10_000


def _read_blocks(spec: RangeSpec, columns: Sequence[str] | None) -> Iterator[Any]:
    """The blocks of one range: ``pyarrow.Table``s of whole pages, about :data:`BLOCK_ROWS` rows each."""
    import pyarrow as pa

    read = spec.narrowed(columns) if columns is not None else spec
    pending: list[Any] = []
    rows = 0

    def block() -> Any:
        table = pa.Table.from_batches(pending, schema=read.schema)
        # No column at all (Ray counting rows) keeps PartitionKey: a block of no columns loses its row count.
        return table.select(list(columns) or ["PartitionKey"]) if columns is not None else table

    for batch in iter_range_batches(read):
        pending.append(batch)
        rows += batch.num_rows
        if rows >= BLOCK_ROWS:
            yield block()
            pending, rows = [], 0
    if pending or spec.high is None:  # the last range yields a block even when empty: the Dataset has a schema
        yield block()


def _datasource(plan: RangePlan) -> Any:
    """The ``ray.data.Datasource`` of a planned read (its class made here: ray loads only when used)."""
    from ray.data.block import BlockMetadata
    from ray.data.datasource import Datasource, ReadTask

    base: Any = Datasource  # its signatures vary from one Ray release to the next

    class TableDatasource(base):  # type: ignore[misc]
        """The ranges of a table; each is one read task."""

        def __init__(self) -> None:
            super().__init__()
            self._projection_map: dict[str, str] | None = None

        def get_name(self) -> str:
            return "AzureTable"

        def estimate_inmemory_data_size(self) -> int | None:
            return None

        def supports_projection_pushdown(self) -> bool:
            return True

        def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None, **_: Any) -> list[Any]:
            columns = self._get_data_columns()
            schema = plan.schema if columns is None else _select_schema(plan.schema, columns)
            accepted = inspect.signature(ReadTask).parameters  # older Ray releases take fewer
            extra = {"schema": schema, "per_task_row_limit": per_task_row_limit}
            named = {name: value for name, value in extra.items() if name in accepted}
            metadata = BlockMetadata(num_rows=None, size_bytes=None, exec_stats=None, input_files=None)
            return [ReadTask(functools.partial(_read_blocks, spec, columns), metadata, **named) for spec in plan.specs]

    return TableDatasource()


def _select_schema(schema: Any, columns: Sequence[str]) -> Any:
    import pyarrow as pa

    return pa.schema([schema.field(name) for name in columns])


def read_table(
    connection_string: str,
    table: str,
    *,
    filter: str | Filter | None = None,
    columns: Sequence[str] | None = None,
    parallelism: int | None = None,
    boundaries: Sequence[str] | None = None,
    schema: Any = None,
    sample_size: int = 1000,
    payload_format: str = "json",
    operation_deadline: float | None = None,
    since: ChangeWindow | None = None,
    encryption_policy: TableEncryptionPolicy | None = None,
) -> ray.data.Dataset:
    """The entities of ``table`` as a ``ray.data.Dataset`` of Arrow blocks, one read task per PartitionKey range.

    ``filter`` (a ``$filter`` string or expression) and ``columns`` (properties to read; the keys
    and Timestamp always come) narrow the query. The table is cut at ``boundaries`` (sorted
    PartitionKeys) or into about ``parallelism`` (default 8) ranges found by
    :func:`~tablesdk.find_partition_boundaries`. The columns are those of
    :meth:`~tablesdk.TableQuery.to_arrow` (each field's metadata holds its EDM type), from
    ``schema`` (a ``pyarrow.Schema``) or else from a sample page (``sample_size`` entities at
    most): a property a range finds that the sample did not have raises
    :class:`~tablesdk.SchemaConflictError` when that range is read (pass ``schema`` or ``columns``
    then). Nothing is read but the probes and the sample until the Dataset is consumed; the
    Dataset's rows come in no particular order. ``operation_deadline`` (seconds, default none)
    bounds each request, retries included, as the client's ``operation_deadline``.

    ``since`` (a :class:`~tablesdk.ChangeWindow`) reads only the rows changed inside it, each with
    its ``odata.etag`` column: the same rows each time the Dataset is consumed, and the window's
    ``next_watermark`` is the watermark after them (docs/data.md, "Incremental reads").
    ``encryption_policy`` decrypts client-side encrypted entities (docs/encryption.md, "Data engines");
    without it, meeting an encrypted entity raises :class:`~tablesdk.EncryptionKeyError` rather than
    return its ciphertext.
    """
    import ray.data

    plan = plan_ranges(
        connection_string, table, filter=filter, columns=columns, partitions=parallelism, boundaries=boundaries,
        schema=schema, sample_size=sample_size, payload_format=payload_format, operation_deadline=operation_deadline,
        since=change_window(since), encryption=engine_encryption(encryption_policy),
    )
    # One block count per range: Ray would otherwise split each range's blocks into its default count.
    dataset: ray.data.Dataset = ray.data.read_datasource(
        _datasource(plan), override_num_blocks=len(plan.specs), **_read_task_resources(len(plan.specs)))
    return dataset


def _read_task_resources(ranges: int) -> dict[str, Any]:
    """How the read tasks run: up to one per CPU of the cluster at once, none counted against Ray
    Data's CPU budget.

    Ray Data (2.5x and later) gives a new read only the CPUs its cluster autoscaler has reserved
    for it, which start at none and grow from the rates it measures, at most one request every
    10 s: a read of a few seconds ran one task at a time whatever the cluster's CPUs. A range
    read mostly waits for the service (a fraction of a core per stream), so the tasks ask for no
    CPU and the concurrency is capped at the cluster's CPUs instead.
    """
    import os

    import ray

    # Before Ray is started, read_datasource starts a local one with this machine's CPUs.
    resources: dict[str, float] = ray.cluster_resources() if ray.is_initialized() else {}  # type: ignore[no-untyped-call]
    cpus = int(resources.get("CPU", os.cpu_count() or 1))
    return {"num_cpus": 0, "concurrency": max(1, min(cpus, ranges))}


# ---------------------------------------------------------------- writing


def _datasink(spec: WriteSpec, outcomes: list[tuple[int, int, Failures]]) -> Any:
    """The ``ray.data.Datasink`` of a write; each task's (index, written, failures) lands in ``outcomes``."""
    from ray.data.block import BlockAccessor
    from ray.data.datasource import Datasink

    base: Any = Datasink

    class TableDatasink(base):  # type: ignore[misc]
        """Writes each task's blocks through the bulk engine; never raises in a task."""

        def get_name(self) -> str:
            return "AzureTable"

        @property
        def min_rows_per_write(self) -> int:
            return BLOCK_ROWS  # Ray bundles small blocks up to this: a few large bulk calls, not one per block

        def write(self, blocks: Any, ctx: Any) -> tuple[int, int, Failures]:
            written, failures = 0, []
            for table in _one_table(BlockAccessor.for_block(block).to_arrow() for block in blocks):
                count, failed = write_block(table, spec)
                written += count
                failures += failed
            return ctx.task_idx, written, failures

        def on_write_complete(self, write_result: Any) -> None:
            outcomes.extend(write_result.write_returns)

    return TableDatasink()


def _one_table(tables: Iterator[Any]) -> list[Any]:
    """A write task's blocks as one table (one bulk call, whose batches fill across blocks), or
    as they came when their columns cannot be unified."""
    import pyarrow as pa

    found = list(tables)
    if len(found) < 2:
        return found
    try:
        return [pa.concat_tables(found, promote_options="default")]
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return found


def write_table(
    dataset: ray.data.Dataset,
    connection_string: str,
    table: str,
    *,
    mode: BulkMode = "insert",
    edm_types: Mapping[str, EdmType] | None = None,
    max_workers: int = 8,
    retry_policy: RetryPolicy | None = None,
    options: TableRequestOptions | None = None,
    payload_format: str = "json",
    encryption_policy: TableEncryptionPolicy | None = None,
    encrypt_columns: Sequence[str] | None = None,
    encryption_resolver: Callable[[str, str, str], bool] | None = None,
) -> list[int]:
    """Write every row of ``dataset`` (a ``ray.data.Dataset`` with PartitionKey and RowKey columns) as
    an entity of ``table``, each block through the bulk engine in a Ray task; returns the count
    written by each write task.

    ``mode`` is ``"insert"`` (an existing entity fails), ``"replace"`` or ``"merge"``. Column types
    as :meth:`~tablesdk.CloudTableClient.write_arrow`: a field's EDM type metadata (as
    :func:`read_table` writes it, and Ray keeps), else its Arrow type, overridden by ``edm_types``
    (``{"Id": EdmType.GUID}``: a Guid column made by a ``map_batches`` that dropped the metadata).
    ``max_workers``, ``retry_policy`` and ``options`` as ``write_arrow``'s, in each task. Raises
    :class:`TableWriteError` naming each write task and key not written when any entity failed.
    ``encryption_policy`` encrypts the columns ``encrypt_columns`` names and those
    ``encryption_resolver(pk, rk, name)`` (or the policy's) chooses, as the client does
    (docs/encryption.md, "Data engines").
    """
    bulk = BulkOptions.threads(max_workers, None, retry_policy, options)
    overrides = tuple(edm_type_overrides(edm_types, list(dataset.columns() or ())).items()) if edm_types else ()
    encryption = engine_encryption(encryption_policy, encryption_resolver, encrypt_columns, writing=True)
    spec = WriteSpec(ConnectionSecret(connection_string), payload_format, table, mode, bulk, overrides, encryption)
    outcomes: list[tuple[int, int, Failures]] = []
    dataset.write_datasink(_datasink(spec, outcomes))
    outcomes.sort(key=lambda outcome: outcome[0])
    written = [count for _, count, _ in outcomes]
    failures = {index: items for index, (_, _, items) in enumerate(outcomes) if items}
    if failures:
        raise TableWriteError(failures, written)
    return written


# Without Ray, say which extra to install when the module is imported (not a bare ModuleNotFoundError
# from the first call).
require_extra("ray", ("ray", "pyarrow"), "tablesdk.ray")
