"""What the data engines share (:mod:`tablesdk.dask`, :mod:`tablesdk.ray`, :mod:`tablesdk.polars`):
a table cut into PartitionKey ranges, one range read as Arrow, a block of rows written.

A read is planned once, where the engine's job starts (:func:`plan_ranges`): the query's
filter and columns, the boundaries (:func:`~tablesdk.find_partition_boundaries` or given)
and one schema for every range (given, or from a sample page). The plan is a list of
:class:`RangeSpec`, each a small picklable description of one range that a worker turns
into Arrow batches (:func:`iter_range_batches`) with nothing but the connection string.
Every condition a read adds (a range's keys today) goes into :meth:`RangeSpec.query`, so a
new one is one more field there.

A write hands each block of rows to the bulk engine (:func:`write_block`), which never
raises: it reports what it wrote and the keys of each entity it did not, and the engine's
driver raises :class:`TableWriteError` naming them all.

The connection string travels wrapped in :class:`ConnectionSecret`, whose ``repr`` leaves
the account key out. A task never carries a client: it asks its process for one
(:meth:`ConnectionSecret.shared_client`), which every range and block the process reads or
writes for the same account and settings shares (:mod:`~tablesdk._columns._worker_clients`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any

from .._core._account import CloudStorageAccount
from .._core._cosmos import cosmos_since_refused
from ._arrow import ETAG_COLUMN, SYSTEM_COLUMNS, edm_type_of_field, iter_query_batches
from ._worker_clients import WORKER_CLIENTS
from .._bulk_loading._bulk import BulkMode, BulkOptions, insert_entities
from .._clients._client import CloudTableClient
from .._entities._edm import EdmType
from .._entities._entity import DynamicEntity
from .._core._errors import TableServiceError, require_positive_seconds
from .._entities._filter import Filter, prop
from .._queries._parallel import find_partition_boundaries
from .._queries._query import TableQuery
from .._queries._watermark import ChangeWindow, Watermark
from ._engine_encryption import EngineEncryption, read_schema, refuse_encrypted, refuse_encrypted_schema, without_metadata

__all__ = [
    "ConnectionSecret", "RangePlan", "RangeSpec", "TableWriteError", "iter_range_batches", "plan_ranges",
    "read_range", "write_block", "KEY_CEILING", "DEFAULT_PARTITIONS",
]

#: Above every PartitionKey but one that starts with U+10FFFF (a noncharacter), which the last
#: range refuses to hold: the upper end of the last range (and the last division of a Dask frame).
KEY_CEILING = "\U0010ffff"
#: Ranges of a read when neither a count nor boundaries are given.
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

    def shared_client(
        self, payload_format: str = "json", operation_deadline: float | None = None
    ) -> AbstractContextManager[CloudTableClient]:
        """This process's client for the account and settings, shared by the tasks it runs (made by the
        first, kept open for the next, closed at exit; a forked child makes its own). Not to be closed."""
        return WORKER_CLIENTS.lease(self._text, payload_format, operation_deadline)

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
class RangeSpec:
    """What a read task needs: the table, the query's filter and columns, its PartitionKey range
    (``low`` included, ``high`` excluded; None: open), the schema every range is read with
    (``strict``: a property the schema lacks raises, as when it came from a sample) and the
    deadline of each request (the client's ``operation_deadline``); with ``since``, only the rows
    changed after that watermark or inside that window (and each row's ETag, which telling
    versions apart needs)."""

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
    since: Watermark | ChangeWindow | None = None
    #: The client-side encryption the range is decrypted with (None: an encrypted row is refused).
    encryption: EngineEncryption | None = None

    def query(self, client: CloudTableClient) -> TableQuery[DynamicEntity]:
        """The range's query on ``client``: the read's filter and columns, the change window's
        Timestamps, then the range's keys."""
        query = base_query(client, self.table, self.filter, self.select, self.encryption)
        if isinstance(self.since, ChangeWindow):
            query = query.where(self.since.filter())
        if self.low is not None:
            query = query.where(prop("PartitionKey") >= self.low)
        if self.high is not None:
            query = query.where(prop("PartitionKey") < self.high)
        return query

    def narrowed(self, columns: Sequence[str] | None, extra_filter: str | None = None) -> RangeSpec:
        """This range reading only ``columns`` and PartitionKey (None: all) and, with ``extra_filter``,
        only the rows that also match it (an engine's pushed predicate)."""
        spec = self
        if columns is not None:
            from ._arrow_since import CHANGE_COLUMNS

            wanted = {"PartitionKey", *columns, *(() if self.since is None else CHANGE_COLUMNS)}
            import pyarrow as pa

            schema = pa.schema([field for field in self.schema if field.name in wanted])
            spec = replace(spec, schema=schema, strict=False)
        if extra_filter:
            combined = extra_filter if not self.filter else f"({self.filter}) and ({extra_filter})"
            spec = replace(spec, filter=combined)
        return spec


@dataclass(frozen=True)
class RangePlan:
    """A planned read: one :class:`RangeSpec` per range, the boundaries between them and the schema."""

    specs: tuple[RangeSpec, ...]
    boundaries: tuple[str, ...]
    schema: Any


def as_filter_text(filter: str | Filter | None) -> str | None:
    """A ``$filter`` string or expression as text (None stays None)."""
    if filter is None or isinstance(filter, str):
        return filter
    return filter.render()


def base_query(
    client: CloudTableClient, table: str, filter: str | None, select: Sequence[str] | None,
    encryption: EngineEncryption | None = None,
) -> TableQuery[DynamicEntity]:
    """The query of a read before its ranges: ``filter`` and ``select`` on ``table``, decrypted with
    ``encryption`` (without it, a projection asks for the metadata too, so an encrypted row is seen)."""
    query = client.create_query(table)
    if encryption is not None:
        query = query.with_options(encryption.options())
    if filter:
        query = query.where(filter)
    if select:
        query = query.select(*select) if encryption is not None else query.select(*read_schema_names(select))
    return query


def read_schema_names(select: Sequence[str]) -> tuple[str, ...]:
    """``select`` and the encryption metadata properties."""
    from .._encryption import METADATA_PROPERTIES

    return tuple(dict.fromkeys((*select, *METADATA_PROPERTIES)))


def plan_ranges(
    connection_string: str,
    table: str,
    *,
    filter: str | Filter | None = None,
    columns: Sequence[str] | None = None,
    partitions: int | None = None,
    boundaries: Sequence[str] | None = None,
    schema: Any = None,
    sample_size: int = 1000,
    payload_format: str = "json",
    operation_deadline: float | None = None,
    since: Watermark | ChangeWindow | None = None,
    encryption: EngineEncryption | None = None,
) -> RangePlan:
    """Cut ``table`` into PartitionKey ranges at ``boundaries`` or into about ``partitions``
    (default :data:`DEFAULT_PARTITIONS`) found by :func:`~tablesdk.find_partition_boundaries`;
    the schema is ``schema`` or a sample page's (``sample_size`` entities at most), with the keys
    first; every request of the plan and of the ranges has ``operation_deadline`` (seconds, None:
    none); with ``since``, every range reads only the rows changed after that watermark (or inside
    that :class:`~tablesdk.ChangeWindow`), with their ETags; ``encryption`` decrypts the sample and
    every range (without it, an encrypted entity is refused). Reads only the probes and the sample."""
    if operation_deadline is not None:
        require_positive_seconds("operation_deadline", operation_deadline)
    if since is not None and not isinstance(since, (Watermark, ChangeWindow)):
        raise TypeError(f"since= takes a Watermark (Watermark.at, Watermark.from_string) or a ChangeWindow, "
                        f"not {type(since).__name__}")
    connection = ConnectionSecret(connection_string)
    filter_text = as_filter_text(filter)
    select = tuple(columns) if columns else None
    with connection.client(payload_format, operation_deadline) as client:
        if since is not None and client.is_cosmos:
            raise cosmos_since_refused()
        query = base_query(client, table, filter_text, select, encryption)
        if boundaries is None:
            boundaries = find_partition_boundaries(query, partitions or DEFAULT_PARTITIONS)
        points = list(boundaries)
        query.partition_ranges(points)  # checks them: sorted, distinct, non-empty strings
        if points and points[-1] >= KEY_CEILING:
            raise ValueError("a boundary is above every possible PartitionKey")
        strict = schema is None
        if schema is None:
            schema = sample_schema(query.page_size(sample_size))
            if encryption is None:
                refuse_encrypted_schema(schema, table)
    schema = with_keys(schema)
    if since is not None:
        import pyarrow as pa

        schema = schema.append(pa.field(ETAG_COLUMN, pa.string()))
    bounds: list[str | None] = [None, *points, None]
    specs = tuple(
        RangeSpec(connection, payload_format, table, filter_text, select, low, high, schema, strict, operation_deadline,
                  since, encryption)
        for low, high in zip(bounds[:-1], bounds[1:])
    )
    return RangePlan(specs, tuple(points), schema)


def change_window(since: object) -> ChangeWindow | None:
    """``since`` of an engine whose reads may run again (Ray, Polars), checked: a
    :class:`~tablesdk.ChangeWindow` or None. A bare :class:`~tablesdk.Watermark` is refused: the
    read's upper end must be fixed before it starts for its next watermark to be known."""
    if since is None or isinstance(since, ChangeWindow):
        return since
    if isinstance(since, Watermark):
        raise TypeError(
            "since= takes a ChangeWindow here: window = tablesdk.ChangeWindow(watermark), then read with "
            "since=window; window.next_watermark is the watermark after the read"
        )
    raise TypeError(f"since= takes a ChangeWindow, not {type(since).__name__}")


def sample_schema(query: TableQuery[DynamicEntity]) -> Any:
    """The schema of the first page with rows (of the first :data:`SAMPLE_PAGES`), else keys and Timestamp."""
    from ._arrow import BatchBuilder

    for count, batch in enumerate(query.iter_arrow_batches()):
        if batch.num_rows:
            return batch.schema
        if count + 1 >= SAMPLE_PAGES:
            break
    return BatchBuilder().empty_schema()


def with_keys(schema: Any) -> Any:
    """``schema`` with PartitionKey and RowKey first; an explicit schema may leave the keys out."""
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


def iter_range_batches(spec: RangeSpec) -> Iterator[Any]:
    """The range's rows, one ``pyarrow.RecordBatch`` of the spec's schema per page (with a
    :class:`~tablesdk.ChangeWindow`, the rows inside it and their ETags)."""
    import pyarrow.compute as pc

    from ._arrow_since import in_window

    window = spec.since if isinstance(spec.since, ChangeWindow) else None
    schema = spec.schema if spec.encryption is not None else read_schema(spec.schema)
    with spec.connection.shared_client(spec.payload_format, spec.operation_deadline) as client:
        query = spec.query(client)
        for batch in iter_query_batches(query, schema=schema, strict=spec.strict, with_etag=window is not None):
            if spec.encryption is None:
                refuse_encrypted(batch, spec.table)
                batch = without_metadata(batch)
            if window is not None:
                batch = in_window(batch, window, True)
            if spec.high is None and batch.num_rows and pc.max(batch.column("PartitionKey")).as_py() >= KEY_CEILING:
                raise ValueError("a PartitionKey starts with U+10FFFF: above the last range (KEY_CEILING)")
            yield batch


def read_range(spec: RangeSpec) -> Any:
    """The range's rows as one ``pyarrow.Table`` of the spec's schema (with a :class:`~tablesdk.Watermark`
    as ``since``: the rows changed after it, the range's next watermark in the table's metadata; with a
    :class:`~tablesdk.ChangeWindow`: the rows inside it)."""
    import pyarrow as pa

    if not isinstance(spec.since, Watermark):
        return pa.Table.from_batches(list(iter_range_batches(spec)), schema=spec.schema)
    import pyarrow.compute as pc

    from ._arrow_since import changes_to_arrow

    schema = spec.schema if spec.encryption is not None else read_schema(spec.schema)
    with spec.connection.shared_client(spec.payload_format, spec.operation_deadline) as client:
        table = changes_to_arrow(spec.query(client), spec.since, schema=schema, strict=spec.strict, with_etag=True)
    if spec.encryption is None:
        refuse_encrypted(table, spec.table)
        table = without_metadata(table)
    if spec.high is None and table.num_rows and pc.max(table.column("PartitionKey")).as_py() >= KEY_CEILING:
        raise ValueError("a PartitionKey starts with U+10FFFF: above the last range (KEY_CEILING)")
    return table


# ---------------------------------------------------------------- writing

#: What a block of rows did not write: (PartitionKey, RowKey, reason) of each entity, the keys None
#: when the whole block failed before its rows were read.
Failures = list[tuple[str | None, str | None, str]]


class TableWriteError(TableServiceError):
    """Some entities of a distributed write (``tablesdk.dask.write_table``, ``tablesdk.ray.write_table``)
    were not written.

    ``failures`` maps each partition (or write task) index to its ``(PartitionKey, RowKey, reason)``
    triples (keys None when a whole partition failed before its rows were read), and ``written``
    is the count of entities each partition wrote.
    """

    def __init__(self, failures: dict[int, Failures], written: list[int]) -> None:
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
class WriteSpec:
    """What a write task needs: the table, the mode, the bulk options and the EDM types to force
    (checked where the job starts: :func:`~tablesdk._columns._arrow_fit.edm_type_overrides`)."""

    connection: ConnectionSecret
    payload_format: str
    table: str
    mode: BulkMode
    bulk: BulkOptions
    edm_types: tuple[tuple[str, EdmType], ...] = ()
    #: The client-side encryption of the written entities (None: written as they are).
    encryption: EngineEncryption | None = None


def write_block(data: Any, spec: WriteSpec) -> tuple[int, Failures]:
    """Write the rows of ``data`` (a ``pyarrow.Table`` or a pandas DataFrame) through the bulk engine;
    returns how many entities were written and each failure (never raises)."""
    from ._arrow_write import column_rows

    try:
        with spec.connection.shared_client(spec.payload_format) as client:
            rows = column_rows(data, dict(spec.edm_types))
            bulk = spec.bulk
            if spec.encryption is not None:
                bulk = BulkOptions(bulk.concurrency, bulk.progress, bulk.retry_policy, spec.encryption.options(bulk.options))
            result = insert_entities(client, spec.table, rows, spec.mode, bulk)
    except Exception as exc:  # noqa: BLE001 - reported with the block, not lost in a worker
        return 0, [(None, None, f"{type(exc).__name__}: {exc}")] if len(data) else []
    failures: Failures = [
        (outcome.entity.PartitionKey, outcome.entity.RowKey, f"{type(outcome.error).__name__}: {outcome.error}")
        for outcome in result.failed
    ]
    return len(result.succeeded), failures
