"""Incremental reads into columns: a query's record batches of the rows changed after a
:class:`~tablesdk._queries._watermark.Watermark`, and the next watermark with them.

The filter and the rules are :mod:`tablesdk._queries._watermark`'s; here each page's batch is read
with its ETags, the rows an earlier read delivered are dropped, and the watermark goes into the
result (an Arrow schema's metadata, a pandas frame's ``attrs``, or the batch iterator's ``watermark``).
"""

from __future__ import annotations

from functools import partial
from datetime import datetime
from typing import Any

from .._core._errors import TableValidationError
from .._queries._query import TableQuery, refuse_cosmos_since
from .._queries._watermark import (
    WATERMARK_METADATA_KEY, Changes, ChangeTracker, ChangeWindow, Watermark, refuse_partial_read, since_filter,
    ticks_of,
)
from ._arrow import ETAG_COLUMN, BatchBuilder, TypeConflict, _pyarrow, columns_query, scan_batches, table_of_batches

__all__ = ["iter_change_batches", "changes_to_arrow", "with_watermark", "next_watermark",
           "CHANGE_COLUMNS", "in_window"]

_NEEDED = ("PartitionKey", "RowKey", "Timestamp")
#: The columns an incremental read's rows need beside the PartitionKey: to tell versions apart.
CHANGE_COLUMNS = ("RowKey", "Timestamp", ETAG_COLUMN)


def changes_query(query: TableQuery[Any], since: Watermark) -> TableQuery[Any]:
    """``query`` narrowed to the rows above ``since``'s floor (refused on Cosmos DB, before sending)."""
    refuse_cosmos_since(query.source)
    refuse_partial_read(query.take_count)
    condition = since_filter(since)
    return query if condition is None else query.where(condition)


def _check_schema(schema: Any) -> None:
    if schema is None:
        return
    names = set(schema.names)
    missing = [name for name in _NEEDED if name not in names]
    if missing:
        raise TableValidationError(
            "schema", "an incremental read (since=) needs the PartitionKey, RowKey and Timestamp columns",
            f"missing {missing}",
        )


def deduplicated(batch: Any, tracker: ChangeTracker, with_etag: bool) -> Any:
    """``batch`` (read with its ETags) without the rows ``tracker`` says were delivered before, every
    row recorded for the next watermark; the ETag column dropped unless ``with_etag``."""
    pa = _pyarrow()
    if not batch.num_rows:  # an empty page: nothing to record, and it may have no columns yet
        return batch.drop_columns([ETAG_COLUMN]) if not with_etag and ETAG_COLUMN in batch.schema.names else batch
    stamps = batch.column("Timestamp").cast(pa.timestamp("ns", "UTC")).cast(pa.int64()).to_pylist()
    keep = tracker.keep
    mask = [
        keep(pk, rk, etag, nanos // 100)
        for pk, rk, etag, nanos in zip(
            batch.column("PartitionKey").to_pylist(), batch.column("RowKey").to_pylist(),
            batch.column(ETAG_COLUMN).to_pylist(), stamps,
        )
    ]
    if not all(mask):
        batch = batch.filter(pa.array(mask, type=pa.bool_()))
    if not with_etag:
        batch = batch.drop_columns([ETAG_COLUMN])
    return batch


def in_window(batch: Any, window: ChangeWindow, with_etag: bool) -> Any:
    """``batch`` (read with ``window.filter()`` and its ETags) without the rows outside the window or
    seen before (:meth:`ChangeWindow.keep`); the ETag column dropped unless ``with_etag``."""
    pa = _pyarrow()
    import pyarrow.compute as pc

    if batch.num_rows:
        nanos = batch.column("Timestamp").cast(pa.timestamp("ns", "UTC")).cast(pa.int64())
        if window.since.seen:
            keep = window.keep
            mask = pa.array([
                keep(pk, rk, etag, ns // 100) for pk, rk, etag, ns in zip(
                    batch.column("PartitionKey").to_pylist(), batch.column("RowKey").to_pylist(),
                    batch.column(ETAG_COLUMN).to_pylist(), nanos.to_pylist(),
                )
            ], type=pa.bool_())
        else:  # bounds only: one comparison per row in Arrow (100 ns ticks times 100 are nanoseconds)
            mask = pc.less_equal(nanos, window.until_ticks * 100)
            floor = window.since.floor_ticks
            if floor is not None:
                mask = pc.and_(mask, pc.greater(nanos, floor * 100))
        if not pc.all(mask).as_py():
            batch = batch.filter(mask)
    if not with_etag and ETAG_COLUMN in batch.schema.names:
        batch = batch.drop_columns([ETAG_COLUMN])
    return batch


def iter_change_batches(
    query: TableQuery[Any], since: Watermark, *, schema: Any = None, with_etag: bool = False,
    on_type_conflict: TypeConflict = "raise", strict: bool = False,
) -> Changes[Any]:
    """The batches of ``query``'s rows changed after ``since`` (see :meth:`TableQuery.iter_arrow_batches`)."""
    _check_schema(schema)
    tracker = ChangeTracker(since)
    builder = BatchBuilder(schema=schema, with_etag=True, on_type_conflict=on_type_conflict, strict=strict)
    batches = scan_batches(columns_query(changes_query(query, since), schema, strict), builder)
    return Changes(batches, tracker, partial(deduplicated, tracker=tracker, with_etag=with_etag))


def changes_to_arrow(
    query: TableQuery[Any], since: Watermark, *, schema: Any = None, with_etag: bool = False,
    on_type_conflict: TypeConflict = "raise", strict: bool = False,
) -> Any:
    """``query``'s rows changed after ``since`` as one ``pyarrow.Table``, the next watermark in its
    schema's metadata (:meth:`Watermark.of`)."""
    reader = ChangeReader(query, since, schema=schema, on_type_conflict=on_type_conflict, strict=strict)
    return reader.table(list(scan_batches(reader.query, reader.builder)), with_etag)


class ChangeReader:
    """One incremental read into a table, for a driver of either flavour: :attr:`query` is what to
    send (its pages into :attr:`builder`), :meth:`table` the result of its batches."""

    def __init__(
        self, query: TableQuery[Any], since: Watermark, *, schema: Any = None,
        on_type_conflict: TypeConflict = "raise", strict: bool = False,
    ) -> None:
        _check_schema(schema)
        self.schema = schema
        self.tracker = ChangeTracker(since)
        self.builder = BatchBuilder(schema=schema, with_etag=True, on_type_conflict=on_type_conflict, strict=strict)
        self.query = columns_query(changes_query(query, since), schema, strict)

    def table(self, batches: list[Any], with_etag: bool) -> Any:
        """The batches read (with their ETags) without the rows seen before, the next watermark in
        the schema's metadata."""
        kept = [deduplicated(batch, self.tracker, True) for batch in batches]
        table = table_of_batches(self.builder, kept, self.schema)
        if not with_etag and ETAG_COLUMN in table.schema.names:
            table = table.drop_columns([ETAG_COLUMN])
        return with_watermark(table, self.tracker.watermark())


def with_watermark(table: Any, watermark: Watermark) -> Any:
    """``table`` with ``watermark`` in its schema's metadata (:data:`WATERMARK_METADATA_KEY`)."""
    metadata = dict(table.schema.metadata or {})
    metadata[WATERMARK_METADATA_KEY.encode()] = watermark.to_string().encode()
    return table.replace_schema_metadata(metadata)


def next_watermark(since: Watermark, rows: Any, *, started: datetime) -> Watermark:
    """The watermark after an incremental read whose rows were read elsewhere (``tablesdk.dask.read_table``
    with ``since``, or any engine): ``rows`` is a ``pyarrow.Table`` or pandas DataFrame with the
    PartitionKey (a column or the index), RowKey, Timestamp and ``odata.etag`` columns of every row
    the read delivered; ``started`` is when the read began, by this machine's clock (an aware
    datetime taken before the read, such as before ``compute()``)."""
    if not isinstance(started, datetime):
        raise TypeError(f"started is a datetime, not {type(started).__name__}")
    if started.tzinfo is None or started.utcoffset() is None:
        raise TableValidationError(
            "started", "an aware datetime, such as datetime.now(timezone.utc) taken before the read",
            "a naive one would be read as UTC, and datetime.now() is local time",
        )
    pa = _pyarrow()
    if not isinstance(rows, (pa.Table, pa.RecordBatch)):
        frame = rows.reset_index() if "PartitionKey" not in rows.columns else rows
        missing = [name for name in (*_NEEDED, ETAG_COLUMN) if name not in frame.columns]
        if missing:
            raise TableValidationError("rows", "the rows of an incremental read, with their ETags", f"missing {missing}")
        rows = pa.table({
            "PartitionKey": pa.array(frame["PartitionKey"].astype(object).tolist(), pa.string()),
            "RowKey": pa.array(frame["RowKey"].astype(object).tolist(), pa.string()),
            "Timestamp": pa.array(frame["Timestamp"], pa.timestamp("ns", "UTC")),
            ETAG_COLUMN: pa.array(frame[ETAG_COLUMN].astype(object).tolist(), pa.string()),
        })
    else:
        _check_schema(rows.schema)
        if ETAG_COLUMN not in rows.schema.names:
            raise TableValidationError("rows", "the rows of an incremental read, with their ETags", f"no {ETAG_COLUMN}")
    tracker = ChangeTracker(since, started_ticks=ticks_of(started))
    for batch in (rows.to_batches() if isinstance(rows, pa.Table) else [rows]):
        deduplicated(batch, tracker, True)
    return tracker.watermark()
