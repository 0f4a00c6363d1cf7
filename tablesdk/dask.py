"""Tables as Dask DataFrames: :func:`read_table` and :func:`write_table` (the ``dask`` extra: ``pip install '.[dask]'`` from a checkout).

:func:`read_table` cuts the table into PartitionKey ranges (the planner of
:meth:`~tablesdk.TableQuery.iter_parallel`: :func:`~tablesdk.find_partition_boundaries`
or boundaries you give) and makes one Dask partition of each, read on a worker
with :meth:`~tablesdk.TableQuery.to_arrow`. The frame is indexed by
PartitionKey with known divisions (the range boundaries), so ``loc`` on a key
and joins on it touch only the partitions concerned.

:func:`write_table` writes each partition with ``bulk_insert`` on a worker and
raises :class:`TableWriteError`, naming every partition and key not written,
when any entity failed.

Each task carries a small picklable description of its range and the
connection string wrapped in :class:`ConnectionSecret`, whose ``repr`` and
Dask token leave the account key out, so it never shows in task names,
logs, reprs or the dashboard.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._columns._arrow import guids_as_uuid, is_uuid_type, pandas_types_mapper
from ._columns._arrow_fit import edm_type_overrides
from ._queries._watermark import ChangeWindow, Watermark
from ._columns._engine_encryption import engine_encryption
from ._encryption import TableEncryptionPolicy
from ._columns._engines import (
    DEFAULT_PARTITIONS,
    KEY_CEILING,
    SAMPLE_PAGES,
    ConnectionSecret,
    Failures,
    RangeSpec,
    TableWriteError,
    WriteSpec,
    plan_ranges,
    read_range,
    write_block,
)
from ._core._extras import require_extra
from ._bulk_loading._bulk import BulkMode, BulkOptions
from ._entities._edm import EdmType
from ._entities._filter import Filter
from ._pipeline._options import TableRequestOptions
from ._pipeline._retry import RetryPolicy

__all__ = ["ConnectionSecret", "TableWriteError", "read_table", "write_table", "KEY_CEILING"]

#: Defined with the other engines' (:mod:`tablesdk._columns._engines`) and kept here, where they were first read.
_KEPT = (DEFAULT_PARTITIONS, SAMPLE_PAGES)


def _read_range(spec: RangeSpec, columns: Sequence[str] | None = None) -> Any:
    """One partition: the entities of the spec's range as a pandas DataFrame indexed by PartitionKey."""
    if columns is not None:  # Dask pushed a column projection down: read only those
        spec = spec.narrowed(columns)
    table = read_range(spec)
    return guids_as_uuid(table).to_pandas(types_mapper=_frame_types_mapper()).set_index("PartitionKey")


def read_table(
    connection_string: str,
    table: str,
    *,
    filter: str | Filter | None = None,
    columns: Sequence[str] | None = None,
    npartitions: int | None = None,
    boundaries: Sequence[str] | None = None,
    schema: Any = None,
    sample_size: int = 1000,
    payload_format: str = "json",
    operation_deadline: float | None = None,
    since: Watermark | ChangeWindow | None = None,
    encryption_policy: TableEncryptionPolicy | None = None,
) -> Any:
    """The entities of ``table`` as a ``dask.dataframe.DataFrame`` indexed by PartitionKey.

    ``filter`` (a ``$filter`` string or expression) and ``columns`` (properties to read; the keys
    always come) narrow the query. The table is cut at ``boundaries`` (sorted PartitionKeys) or
    into about ``npartitions`` (default 8) ranges found by
    :func:`~tablesdk.find_partition_boundaries`; the divisions are ``""``, the boundaries and
    :data:`KEY_CEILING`. Column types are those of :meth:`~tablesdk.TableQuery.to_pandas`,
    from ``schema`` (a ``pyarrow.Schema``) or else from a sample page (``sample_size`` entities at most): a property a partition
    finds that the sample did not have (or a value of another type) raises
    :class:`~tablesdk.SchemaConflictError` when that partition is computed (pass ``schema`` or
    ``columns`` then). Nothing is read but the sample until the frame is computed.
    ``operation_deadline`` (seconds, default none) bounds each request, the sample's, the
    boundaries' and every page of every partition, retries included, as the client's
    ``operation_deadline``: past it the read raises :class:`~tablesdk.RequestTimeoutError`.
    ``since`` (a :class:`~tablesdk.Watermark`) reads only the rows changed after it, each with its
    ``odata.etag`` column; :func:`~tablesdk.next_watermark` makes the next watermark from the rows
    (docs/data.md, "Incremental reads"). A :class:`~tablesdk.ChangeWindow` as ``since`` reads the rows
    inside it, every time the frame is computed, and its ``next_watermark`` is the next watermark.
    ``encryption_policy`` decrypts client-side encrypted entities (its key travels pickled to the
    workers; docs/encryption.md, "Data engines"); without it, a partition that meets an encrypted
    entity raises :class:`~tablesdk.EncryptionKeyError` rather than return its ciphertext.
    """
    import dask.dataframe as dd
    import pyarrow as pa

    plan = plan_ranges(
        connection_string, table, filter=filter, columns=columns, partitions=npartitions, boundaries=boundaries,
        schema=schema, sample_size=sample_size, payload_format=payload_format, operation_deadline=operation_deadline,
        since=since, encryption=engine_encryption(encryption_policy),
    )
    schema, specs, points = plan.schema, list(plan.specs), plan.boundaries
    meta = guids_as_uuid(pa.Table.from_batches([], schema=schema)).to_pandas(types_mapper=_frame_types_mapper())
    meta = meta.set_index("PartitionKey")
    divisions = ("", *points, KEY_CEILING)
    return dd.from_map(  # type: ignore[no-untyped-call]
        _read_range, specs, meta=meta, divisions=divisions, label="tablesdk-read", enforce_metadata=False)


# ---------------------------------------------------------------- writing


def _write_partition(frame: Any, spec: WriteSpec) -> tuple[int, Failures]:
    """Write one partition; returns how many entities were written and each failure (never raises)."""
    return write_block(frame, spec)


def write_table(
    ddf: Any,
    connection_string: str,
    table: str,
    *,
    mode: BulkMode = "insert",
    max_workers: int = 8,
    retry_policy: RetryPolicy | None = None,
    options: TableRequestOptions | None = None,
    payload_format: str = "json",
    edm_types: Mapping[str, EdmType] | None = None,
    encryption_policy: TableEncryptionPolicy | None = None,
    encrypt_columns: Sequence[str] | None = None,
    encryption_resolver: Callable[[str, str, str], bool] | None = None,
) -> list[int]:
    """Write every row of ``ddf`` (PartitionKey and RowKey as columns or as the named index) as
    an entity of ``table``, each partition with ``bulk_insert`` on a worker; returns the count
    written per partition.

    ``mode`` is ``"insert"`` (an existing entity fails), ``"replace"`` or ``"merge"``. Column
    types as :meth:`~tablesdk.CloudTableClient.write_arrow`: a frame read by :func:`read_table`
    keeps its Guid columns (``arrow.uuid``) and DateTime's 100 ns digit; ``edm_types`` (column
    name to :class:`~tablesdk.EdmType`, e.g. ``{"Id": EdmType.GUID}`` for a column of Guid text)
    says what a frame's dtype cannot, and every value must fit it. Each partition's columns are
    checked as a whole before it sends anything: a partition refused writes nothing and is
    reported, with the column and row, in the :class:`TableWriteError`. ``max_workers``,
    ``retry_policy`` and ``options`` as :meth:`~tablesdk.CloudTableClient.write_arrow`'s (on each
    worker; there is no ``progress``: the partitions are written in other threads or processes).
    ``encryption_policy`` encrypts the columns ``encrypt_columns`` names and those
    ``encryption_resolver(pk, rk, name)`` (or the policy's) chooses, as the client does
    (docs/encryption.md); a merge of an encrypted entity is refused, entity by entity.
    Raises :class:`TableWriteError` naming each partition and key not written when any entity failed.
    """
    from dask.base import compute, tokenize
    from dask.delayed import delayed

    names = [*map(str, ddf.columns), *([str(ddf.index.name)] if ddf.index.name is not None else [])]
    overrides = tuple(edm_type_overrides(edm_types, names).items())  # a wrong name or type: refused here
    encryption = engine_encryption(encryption_policy, encryption_resolver, encrypt_columns, writing=True)
    bulk = BulkOptions.threads(max_workers, None, retry_policy, options)
    spec = WriteSpec(ConnectionSecret(connection_string), payload_format, table, mode, bulk, overrides, encryption)
    token = tokenize(spec.connection, table, mode, bulk, ddf._name, overrides, encryption)
    parts = ddf.to_delayed()
    tasks = [
        delayed(_write_partition, pure=True)(part, spec, dask_key_name=f"tablesdk-write-{token}-{index}")
        for index, part in enumerate(parts)
    ]
    results = compute(*tasks)  # type: ignore[no-untyped-call]
    written = [count for count, _ in results]
    failures = {index: items for index, (_, items) in enumerate(results) if items}
    if failures:
        raise TableWriteError(failures, written)
    return written


def _frame_types_mapper() -> Callable[[Any], Any]:
    """:func:`~tablesdk._columns._arrow.pandas_types_mapper`, with Binary columns kept as Arrow binary.

    Dask converts object columns to strings by default (``dataframe.convert-string``), which
    fails on bytes; an Arrow binary dtype is left alone, and its values are the same bytes.
    Every binary kind a schema may give (``binary``, ``large_binary``, ``binary(n)``) keeps its
    own Arrow type: ``to_pandas`` would make an object column of any of them. A Guid column
    (``arrow.uuid``) is kept so too: as an object column of ``uuid.UUID`` it would become text,
    and :func:`write_table` would write it as String.
    """
    import pandas as pd
    import pyarrow as pa

    base = pandas_types_mapper()

    def mapper(arrow_type: Any) -> Any:
        if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type) \
                or pa.types.is_fixed_size_binary(arrow_type) or is_uuid_type(arrow_type):
            return pd.ArrowDtype(arrow_type)
        return base(arrow_type)

    return mapper


# Without Dask, say which extra to install when the module is imported (not a bare ModuleNotFoundError
# from the first call).
require_extra("dask", ("dask", "distributed", "pyarrow", "pandas"), "tablesdk.dask")
