"""Arrow tables as entities, for ``write_arrow``, ``write_pandas`` and ``bulk_insert`` of columns (the ``arrow`` extra).

The columns are checked as a whole before anything is sent (PartitionKey and RowKey
present, strings without nulls; every column of a type some EDM type holds; nanosecond
timestamps on 100 ns ticks), then each row becomes a
:class:`~tablesdk._entity.DynamicEntity` (nulls left out) for
:func:`~tablesdk._bulk.insert_entities`, which checks each entity's limits and sends them in
batches: an entity it refuses fails alone, in the :class:`~tablesdk._bulk.BulkResult`.
A column's EDM type is ``edm_types``' for it, else its field metadata's (as
:func:`~tablesdk._arrow.query_to_arrow` writes it), else its Arrow type's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from ._arrow import ETAG_COLUMN, _datetime_from_ns, _keys_text, _pyarrow, edm_type_of_field
from ._edm import EdmType, parse_datetime
from ._entity import DynamicEntity
from ._errors import TableValidationError


__all__ = ["arrow_rows", "column_rows", "pandas_to_arrow"]


#: Columns a table read with :func:`query_to_arrow` has that are not written: the service sets both.
_NOT_WRITTEN = frozenset({"Timestamp", ETAG_COLUMN})


class _Rows:
    """The rows of an Arrow table as entities, made one record batch at a time (bulk_insert reads
    them once, and its progress gets the length)."""

    def __init__(self, table: Any, plan: list[tuple[str, EdmType]], chunk: int) -> None:
        self.table = table
        self.plan = plan
        self.chunk = chunk

    def __len__(self) -> int:
        return int(self.table.num_rows)

    def __iter__(self) -> Iterator[DynamicEntity]:
        new = DynamicEntity.__new__
        for batch in self.table.to_batches(max_chunksize=self.chunk):
            partition_keys = _python_values(batch.column("PartitionKey"), EdmType.STRING)
            row_keys = _python_values(batch.column("RowKey"), EdmType.STRING)
            columns = [(name, edm, _python_values(batch.column(name), edm)) for name, edm in self.plan]
            for row, (pk, rk) in enumerate(zip(partition_keys, row_keys)):
                entity: DynamicEntity = new(DynamicEntity)
                entity.PartitionKey, entity.RowKey, entity.Timestamp, entity.etag = pk, rk, None, None
                bag: dict[str, Any] = {}
                bag_types: dict[str, EdmType] = {}
                for name, edm, column in columns:
                    value = column[row]
                    if value is not None:
                        bag[name] = value
                        bag_types[name] = edm
                entity._values, entity._types = bag, bag_types
                yield entity


def _python_values(array: Any, edm: EdmType) -> list[Any]:
    """A column's values as the Python values of ``edm`` (None for nulls)."""
    pa = _pyarrow()
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if edm is EdmType.DATETIME:
        if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):  # wire text (beyond timestamp[ns])
            return [None if text is None else parse_datetime(text) for text in array.to_pylist()]
        if array.type.unit == "ns":
            return [None if ns is None else _datetime_from_ns(ns) for ns in array.cast(pa.int64()).to_pylist()]
        values: list[Any] = array.cast(pa.timestamp("us", tz="UTC")).to_pylist()
        return values
    if edm is EdmType.GUID:
        return [None if text is None else _guid(text) for text in array.to_pylist()]
    if edm is EdmType.DOUBLE:
        return array.cast(pa.float64()).to_pylist()  # type: ignore[no-any-return]
    return array.to_pylist()  # type: ignore[no-any-return]


def _guid(text: Any) -> Any:
    try:
        return uuid.UUID(text)
    except (TypeError, ValueError, AttributeError):
        return text  # bulk_insert's check fails this entity alone ("Edm.Guid needs a uuid.UUID")


def _write_plan(table: Any, edm_types: Mapping[str, EdmType] | None) -> list[tuple[str, EdmType]]:
    """(column, EDM type) of every property column; raises before anything is sent when the
    table cannot be written (keys missing, null or not strings, a column of no EDM type)."""
    pa = _pyarrow()
    import pyarrow.compute as pc

    names = table.schema.names
    overrides = dict(edm_types or {})
    for name in overrides:
        if name not in names:
            raise TableValidationError(name, "edm_types names a column the table does not have")
    for key in ("PartitionKey", "RowKey"):
        if key not in names:
            raise TableValidationError(key, "required: a column of strings")
        field = table.schema.field(key)
        if edm_type_of_field(field) not in (EdmType.STRING, EdmType.GUID):
            raise TableValidationError(key, "keys are strings", f"the column is {field.type}")
        nulls = table.column(key).null_count
        if nulls:
            row = pc.index(pc.is_null(table.column(key)), True).as_py()
            raise TableValidationError(key, "required: a str (it may be empty)", f"{nulls} nulls, the first in row {row}")
    plan: list[tuple[str, EdmType]] = []
    for field in table.schema:
        if field.name in ("PartitionKey", "RowKey") or field.name in _NOT_WRITTEN:
            continue
        edm = overrides.get(field.name) or edm_type_of_field(field)
        if edm is None:
            raise TableValidationError(field.name, "no EDM type holds this column's Arrow type", str(field.type))
        kind = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
        if edm is EdmType.DATETIME and pa.types.is_timestamp(kind) and kind.unit == "ns":
            _check_ticks(table, field.name)
        plan.append((field.name, edm))
    return plan


def _check_ticks(table: Any, name: str) -> None:
    """Edm.DateTime holds 100 ns ticks: a nanosecond value finer than that would be cut."""
    pa = _pyarrow()
    import pyarrow.compute as pc

    nanos = table.column(name).cast(pa.int64())
    finer = pc.not_equal(pc.subtract(nanos, pc.multiply(pc.divide(nanos, 100), 100)), 0)
    if pc.any(finer).as_py():
        row = pc.index(finer, True).as_py()
        keys = (table.column("PartitionKey")[row].as_py(), table.column("RowKey")[row].as_py())
        raise TableValidationError(
            name, "Edm.DateTime holds 100 ns ticks", f"a finer value at {_keys_text(keys)}; round it first",
        )


def arrow_rows(table: Any, edm_types: Mapping[str, EdmType] | None = None, chunk: int = 10_000) -> _Rows:
    """The rows of ``table`` (a ``pyarrow.Table`` or ``RecordBatch``) as entities, checked as a whole first."""
    pa = _pyarrow()
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if not isinstance(table, pa.Table):
        raise TypeError(f"expected a pyarrow.Table or RecordBatch, not {type(table).__name__}")
    return _Rows(table, _write_plan(table, edm_types), chunk)


def pandas_to_arrow(frame: Any) -> Any:
    """A pandas DataFrame as a ``pyarrow.Table``: a named index (e.g. ``PartitionKey``) becomes a column."""
    pa = _pyarrow()
    return pa.Table.from_pandas(frame, preserve_index=None).replace_schema_metadata(None)


def column_rows(data: Any, edm_types: Mapping[str, EdmType] | None = None) -> _Rows:
    """The rows of a pandas DataFrame or a ``pyarrow.Table``/``RecordBatch`` as entities."""
    if type(data).__name__ == "DataFrame":
        data = pandas_to_arrow(data)
    return arrow_rows(data, edm_types)
