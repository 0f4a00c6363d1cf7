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
from dataclasses import dataclass
from typing import Any

from ._account import CloudStorageAccount
from ._extras import require_extra
from ._arrow import (
    ETAG_COLUMN, SYSTEM_COLUMNS, edm_type_of_field, guids_as_uuid, is_uuid_type, pandas_types_mapper, query_to_arrow,
)
from ._arrow_fit import edm_type_overrides
from ._arrow_write import arrow_rows, pandas_to_arrow
from ._bulk import BulkMode, BulkOptions, insert_entities
from ._client import CloudTableClient
from ._edm import EdmType
from ._entity import DynamicEntity
from ._errors import TableServiceError, require_positive_seconds
from ._filter import Filter, prop
from ._options import TableRequestOptions
from ._parallel import find_partition_boundaries
from ._query import TableQuery
from ._retry import RetryPolicy

__all__ = ["ConnectionSecret", "TableWriteError", "read_table", "write_table", "KEY_CEILING"]

#: The last division of a frame read by :func:`read_table`: above every PartitionKey but one
#: that starts with U+10FFFF (a noncharacter), which the last partition refuses to hold.
KEY_CEILING = "\U0010ffff"
#: Partitions of :func:`read_table` when neither ``npartitions`` nor ``boundaries`` is given.
DEFAULT_PARTITIONS = 8
#: Pages of the query read for a sample when no schema is given (the first with rows is used).
SAMPLE_PAGES = 3


class ConnectionSecret:
    """A connection string that hides its account key: ``repr`` names the account only, and Dask
    tokenizes it by account and endpoint (task names stay free of the key). Picklable."""

    __slots__ = ("_text", "_account", "_endpoint")

    def __init__(self, connection_string: str) -> None:
        account = CloudStorageAccount.parse(connection_string)
        self._text = connection_string
        self._account = str(account.account_name)
        self._endpoint = account.table_endpoint

    def client(self, payload_format: str = "json", operation_deadline: float | None = None) -> CloudTableClient:
        """A new client for the account (``operation_deadline`` as the client's)."""
        return CloudStorageAccount.parse(self._text).create_cloud_table_client(
            payload_format=payload_format, operation_deadline=operation_deadline
        )

    def __repr__(self) -> str:
        return f"ConnectionSecret(account={self._account!r}, endpoint={self._endpoint!r}, key hidden)"

    __str__ = __repr__

    def __dask_tokenize__(self) -> tuple[str, str, str]:
        return ("tablesdk.ConnectionSecret", self._account, self._endpoint)

    def __getstate__(self) -> tuple[str, str, str]:
        return (self._text, self._account, self._endpoint)

    def __setstate__(self, state: tuple[str, str, str]) -> None:
        self._text, self._account, self._endpoint = state


@dataclass(frozen=True)
class _RangeSpec:
    """What a read task needs: the table, the query's filter and columns, and its PartitionKey range."""

    connection: ConnectionSecret
    payload_format: str
    table: str
    filter: str | None
    select: tuple[str, ...] | None
    low: str | None
    high: str | None
    schema: Any
    strict: bool
    operation_deadline: float | None = None


def _as_filter_text(filter: str | Filter | None) -> str | None:
    if filter is None or isinstance(filter, str):
        return filter
    return filter.render()


def _query(client: CloudTableClient, table: str, filter: str | None, select: Sequence[str] | None) -> TableQuery[DynamicEntity]:
    query = client.create_query(table)
    if filter:
        query = query.where(filter)
    if select:
        query = query.select(*select)
    return query


def _read_range(spec: _RangeSpec, columns: Sequence[str] | None = None) -> Any:
    """One partition: the entities of the spec's range as a pandas DataFrame indexed by PartitionKey."""
    import pyarrow as pa
    import pyarrow.compute as pc

    schema, strict = spec.schema, spec.strict
    if columns is not None:  # Dask pushed a column projection down: read only those
        wanted = {"PartitionKey", *columns}
        schema, strict = pa.schema([field for field in schema if field.name in wanted]), False
    with spec.connection.client(spec.payload_format, spec.operation_deadline) as client:
        query = _query(client, spec.table, spec.filter, spec.select)
        if spec.low is not None:
            query = query.where(prop("PartitionKey") >= spec.low)
        if spec.high is not None:
            query = query.where(prop("PartitionKey") < spec.high)
        table = query_to_arrow(query, schema=schema, strict=strict)
    if spec.high is None and table.num_rows and pc.max(table.column("PartitionKey")).as_py() >= KEY_CEILING:
        raise ValueError("a PartitionKey starts with U+10FFFF: above the frame's last division (KEY_CEILING)")
    return guids_as_uuid(table).to_pandas(types_mapper=_frame_types_mapper()).set_index("PartitionKey")


def _sample_schema(query: TableQuery[DynamicEntity]) -> Any:
    """The schema of the first page with rows (of the first :data:`SAMPLE_PAGES`), else keys and Timestamp."""
    from ._arrow import BatchBuilder

    for count, batch in enumerate(query.iter_arrow_batches()):
        if batch.num_rows:
            return batch.schema
        if count + 1 >= SAMPLE_PAGES:
            break
    return BatchBuilder().empty_schema()


def _with_keys(schema: Any) -> Any:
    """``schema`` with PartitionKey (the index) first; an explicit schema may leave the keys out."""
    import pyarrow as pa

    from ._arrow import _field

    fields = [field for field in schema if field.name != ETAG_COLUMN]
    names = [field.name for field in fields]
    for key in reversed(("PartitionKey", "RowKey")):
        if key not in names:
            fields.insert(0, _field(key, EdmType.STRING))
    fields.sort(key=lambda field: SYSTEM_COLUMNS.index(field.name) if field.name in SYSTEM_COLUMNS else 3)
    for field in fields:
        if edm_type_of_field(field) is None:
            raise TypeError(f"schema field {field.name!r}: no EDM type is read as {field.type}")
    return pa.schema(fields)


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
    """
    import dask.dataframe as dd
    import pyarrow as pa

    if operation_deadline is not None:
        require_positive_seconds("operation_deadline", operation_deadline)
    connection = ConnectionSecret(connection_string)
    filter_text = _as_filter_text(filter)
    select = tuple(columns) if columns else None
    with connection.client(payload_format, operation_deadline) as client:
        query = _query(client, table, filter_text, select)
        if boundaries is None:
            boundaries = find_partition_boundaries(query, npartitions or DEFAULT_PARTITIONS)
        points = list(boundaries)
        query.partition_ranges(points)  # checks them: sorted, distinct, non-empty strings
        if points and points[-1] >= KEY_CEILING:
            raise ValueError("a boundary is above every possible PartitionKey")
        strict = schema is None
        if schema is None:
            schema = _sample_schema(query.page_size(sample_size))
    schema = _with_keys(schema)
    bounds: list[str | None] = [None, *points, None]
    specs = [
        _RangeSpec(connection, payload_format, table, filter_text, select, low, high, schema, strict, operation_deadline)
        for low, high in zip(bounds[:-1], bounds[1:])
    ]
    meta = guids_as_uuid(pa.Table.from_batches([], schema=schema)).to_pandas(types_mapper=_frame_types_mapper())
    meta = meta.set_index("PartitionKey")
    divisions = ("", *points, KEY_CEILING)
    return dd.from_map(  # type: ignore[no-untyped-call]
        _read_range, specs, meta=meta, divisions=divisions, label="tablesdk-read", enforce_metadata=False)


# ---------------------------------------------------------------- writing


class TableWriteError(TableServiceError):
    """Some entities of :func:`write_table` were not written.

    ``failures`` maps each partition index to its ``(PartitionKey, RowKey, reason)`` triples
    (keys None when a whole partition failed before its rows were read), and ``written`` is
    the count of entities each partition wrote.
    """

    def __init__(self, failures: dict[int, list[tuple[str | None, str | None, str]]], written: list[int]) -> None:
        total = sum(len(items) for items in failures.values())
        shown = []
        for index, items in sorted(failures.items()):
            for pk, rk, reason in items[:3]:
                shown.append(f"partition {index}: PartitionKey={pk!r}, RowKey={rk!r}: {reason}")
            if len(items) > 3:
                shown.append(f"partition {index}: ... {len(items) - 3} more")
        message = (
            f"{total} entities were not written, in partitions {sorted(failures)} "
            f"({sum(written)} were): " + "; ".join(shown)
        )
        super().__init__(message)
        self.failures = failures
        self.written = written


@dataclass(frozen=True)
class _WriteSpec:
    connection: ConnectionSecret
    payload_format: str
    table: str
    mode: str
    bulk: BulkOptions
    edm_types: tuple[tuple[str, EdmType], ...] = ()


def _write_partition(frame: Any, spec: _WriteSpec) -> tuple[int, list[tuple[str | None, str | None, str]]]:
    """Write one partition; returns how many entities were written and each failure (never raises)."""
    try:
        with spec.connection.client(spec.payload_format) as client:
            rows = arrow_rows(pandas_to_arrow(frame), dict(spec.edm_types))
            result = insert_entities(client, spec.table, rows, spec.mode, spec.bulk)  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001 - reported with the partition, not lost in a worker
        return 0, [(None, None, f"{type(exc).__name__}: {exc}")] if len(frame) else []
    failures = [
        (outcome.entity.PartitionKey, outcome.entity.RowKey, f"{type(outcome.error).__name__}: {outcome.error}")
        for outcome in result.failed
    ]
    return len(result.succeeded), failures


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
    Raises :class:`TableWriteError` naming each partition and key not written when any entity failed.
    """
    from dask.base import compute, tokenize
    from dask.delayed import delayed

    names = [*map(str, ddf.columns), *([str(ddf.index.name)] if ddf.index.name is not None else [])]
    overrides = tuple(edm_type_overrides(edm_types, names).items())  # a wrong name or type: refused here
    bulk = BulkOptions.threads(max_workers, None, retry_policy, options)
    spec = _WriteSpec(ConnectionSecret(connection_string), payload_format, table, mode, bulk, overrides)
    token = tokenize(spec.connection, table, mode, bulk, ddf._name, overrides)
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
    """:func:`~tablesdk._arrow.pandas_types_mapper`, with Binary columns kept as Arrow binary.

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
