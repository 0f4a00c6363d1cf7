"""Arrow tables as entities, for ``write_arrow``, ``write_pandas`` and ``bulk_insert`` of columns (the ``arrow`` extra).

The columns are checked as a whole before anything is sent (PartitionKey and RowKey
present, strings without nulls; every column of a type some EDM type holds; nanosecond
timestamps on 100 ns ticks), then each row becomes a
:class:`~tablesdk._entities._entity.DynamicEntity` (nulls left out) for
:func:`~tablesdk._bulk_loading._bulk.insert_entities`, which checks each entity's limits and sends them in
batches: an entity it refuses fails alone, in the :class:`~tablesdk._bulk_loading._bulk.BulkResult`.
A column's EDM type is ``edm_types``' for it, else its field metadata's (as
:func:`~tablesdk._columns._arrow.query_to_arrow` writes it), else its Arrow type's; every value is then
exactly a value of that type, or the write is refused before anything is sent, naming the column
and the first row that does not fit (:mod:`tablesdk._columns._arrow_fit`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ._arrow import ETAG_COLUMN, _pyarrow, edm_type_of_field
from ._arrow_fit import check_column, column_values, edm_type_overrides, frame_to_arrow
from .._entities._edm import EdmType
from .._entities._entity import DynamicEntity
from .._core._errors import TableValidationError


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
    return column_values(array, edm)


def _write_plan(table: Any, edm_types: Mapping[str, EdmType] | None) -> list[tuple[str, EdmType]]:
    """(column, EDM type) of every property column; raises before anything is sent when the
    table cannot be written (keys missing, null or not strings, a column of no EDM type)."""
    pa = _pyarrow()
    import pyarrow.compute as pc

    names = table.schema.names
    overrides = edm_type_overrides(edm_types, names)
    for key in ("PartitionKey", "RowKey"):
        if key not in names:
            raise TableValidationError(key, "required: a column of strings")
        field = table.schema.field(key)
        kind = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)) or overrides.get(key, EdmType.STRING) \
                is not EdmType.STRING:
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
        check_column(table, field.name, edm)
        plan.append((field.name, edm))
    return plan


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
    return frame_to_arrow(frame)


def column_rows(data: Any, edm_types: Mapping[str, EdmType] | None = None) -> _Rows:
    """The rows of a pandas DataFrame or a ``pyarrow.Table``/``RecordBatch`` as entities."""
    if type(data).__name__ == "DataFrame":
        data = pandas_to_arrow(data)
    return arrow_rows(data, edm_types)
