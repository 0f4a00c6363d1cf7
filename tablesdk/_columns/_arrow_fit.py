"""Columns fitted to the EDM type they are written as, and Guid columns for pandas (the ``arrow`` extra).

A column written by :func:`~tablesdk._columns._arrow_write.write_arrow` gets one EDM type (asked for with
``edm_types``, else its field's metadata, else its Arrow type's). :func:`check_column` makes sure
that every value of the column is exactly a value of that type before anything is sent, or raises
:class:`~tablesdk._core._errors.TableValidationError` naming the column, the rule and the first row (its
keys and position) that breaks it; nothing is ever written as another type than the one meant, nor
changed on the way (:func:`column_values` then makes the Python values). Which columns hold which
EDM type:

- String: strings (``string``, ``large_string``), Guids (``arrow.uuid``: their canonical text);
- Int32, Int64: integers, each value within the type's range;
- Double: floats; integers that a double holds exactly;
- Boolean: booleans;
- DateTime: timestamps of any unit (naive ones are UTC) within 1601-9999, nanoseconds on 100 ns
  ticks; strings of Edm.DateTime text;
- Guid: ``arrow.uuid``; strings in the form ``xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`` (any case);
  binaries of 16 bytes (``uuid.UUID(bytes=...)``);
- Binary: binaries only. A string column is never decoded (base64) or encoded (UTF-8) as a guess.

pandas has no Guid dtype: ``to_pandas`` makes a Guid column (strings marked Edm.Guid in Arrow) an
object column of ``uuid.UUID``, and ``tablesdk.dask`` an ``arrow.uuid`` one
(:func:`~tablesdk._columns._arrow.guids_as_uuid`, pyarrow 18 and later); ``pyarrow.Table.from_pandas``
makes either ``arrow.uuid`` again, so a frame written back keeps its Guids. :func:`frame_to_arrow`
is that ``from_pandas``, with an object column that mixes kinds of values refused by name instead
of pyarrow's raw error (and a column of ``uuid.UUID`` made a Guid column where pyarrow has no
``arrow.uuid``).
"""

from __future__ import annotations

import numbers
import uuid
from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from ._arrow import EDM_TYPE_KEY, _keys_text, _pyarrow, _short, is_uuid_type
from .._entities._edm import DATETIME_MAX, DATETIME_MIN, EdmType, parse_datetime
from .._entities._edm_base import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from .._core._errors import TableValidationError

__all__ = ["check_column", "column_values", "edm_type_overrides", "frame_to_arrow"]

_GUID_TEXT = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
#: Integers beyond this magnitude are checked one by one: a double holds only some of them exactly.
_EXACT_DOUBLE_INTEGERS = 2**53
_INTEGER_RANGES = {EdmType.INT32: (INT32_MIN, INT32_MAX), EdmType.INT64: (INT64_MIN, INT64_MAX)}


def edm_type_overrides(edm_types: Mapping[str, Any] | None, names: list[str]) -> dict[str, EdmType]:
    """``edm_types`` checked: each key a column of the table, each value an :class:`EdmType` (or its name)."""
    overrides: dict[str, EdmType] = {}
    for name, edm in (edm_types or {}).items():
        if name not in names:
            raise TableValidationError(name, "edm_types names a column the table does not have")
        if not isinstance(edm, EdmType):
            try:
                edm = EdmType(edm)
            except ValueError:
                raise TableValidationError(
                    name, "edm_types maps a column to an EdmType (EdmType.GUID, or 'Edm.Guid')", f"got {edm!r}"
                ) from None
        overrides[name] = edm
    return overrides


def _value_type(kind: Any) -> Any:
    pa = _pyarrow()
    return kind.value_type if pa.types.is_dictionary(kind) else kind


def _plain(column: Any) -> Any:
    """A table's column (a ChunkedArray) with its dictionary, if any, decoded."""
    pa = _pyarrow()
    if pa.types.is_dictionary(column.type):
        return column.cast(column.type.value_type)
    return column


class _Refusal:
    """Raises the named error for a column's first value that breaks a rule."""

    def __init__(self, table: Any, name: str, edm: EdmType) -> None:
        self.table, self.name, self.edm = table, name, edm

    def column(self, needs: str) -> TableValidationError:
        kind = self.table.schema.field(self.name).type
        return TableValidationError(self.name, f"{self.edm.value} is written from {needs}", f"the column is {kind}")

    def at(self, row: int, limit: str) -> TableValidationError:
        keys = (self.table.column("PartitionKey")[row].as_py(), self.table.column("RowKey")[row].as_py())
        scalar = self.table.column(self.name)[row]
        try:
            shown = _short(scalar.as_py())
        except (OverflowError, ValueError):  # a timestamp beyond Python's datetime
            shown = f"{scalar.value} {scalar.type.unit} from 1970-01-01"
        return TableValidationError(self.name, limit, f"{shown} at {_keys_text(keys)}, row {row}")

    def where(self, mask: Any, limit: str) -> None:
        """Raise for the first row where ``mask`` is true (nulls are not values: never refused)."""
        import pyarrow.compute as pc

        mask = pc.fill_null(mask, False)
        if pc.any(mask).as_py():
            raise self.at(pc.index(mask, True).as_py(), limit)


def check_column(table: Any, name: str, edm: EdmType) -> None:
    """Raise :class:`TableValidationError` unless every value of ``table[name]`` is exactly a value of ``edm``."""
    pa = _pyarrow()
    import pyarrow.compute as pc

    kind = _value_type(table.schema.field(name).type)
    column = _plain(table.column(name))
    refuse = _Refusal(table, name, edm)
    text = pa.types.is_string(kind) or pa.types.is_large_string(kind)
    binary = pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind)
    if edm is EdmType.STRING:
        if not (text or is_uuid_type(kind)):
            raise refuse.column("a column of strings")
    elif edm is EdmType.INT32 or edm is EdmType.INT64:
        if not pa.types.is_integer(kind):
            raise refuse.column("a column of integers")
        low, high = _INTEGER_RANGES[edm]
        width = 32 if edm is EdmType.INT32 else 64
        if kind.bit_width < width or (kind.bit_width == width and pa.types.is_signed_integer(kind)):
            return  # every value of the Arrow type fits
        _check_integers(column, refuse, low, high, f"{edm.value} holds {low} to {high}")
    elif edm is EdmType.DOUBLE:
        if pa.types.is_integer(kind):
            _check_integers(column, refuse, -(2**64), 2**64, "", exact_double=True)
        elif not pa.types.is_floating(kind):
            raise refuse.column("a column of floats (or of integers a double holds exactly)")
    elif edm is EdmType.BOOLEAN:
        if not pa.types.is_boolean(kind):
            raise refuse.column("a column of booleans")
    elif edm is EdmType.DATETIME:
        if pa.types.is_timestamp(kind):
            _check_timestamps(column, kind, refuse)
        elif text:
            _check_datetime_texts(column, refuse)
        else:
            raise refuse.column("a column of timestamps (or of Edm.DateTime text)")
    elif edm is EdmType.GUID:
        if text:
            refuse.where(pc.invert(pc.match_substring_regex(column, _GUID_TEXT)),
                         "Edm.Guid is written from text in the form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx")
        elif pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
            refuse.where(pc.not_equal(pc.binary_length(column), 16), "Edm.Guid is written from binaries of 16 bytes")
        elif not (is_uuid_type(kind) or (pa.types.is_fixed_size_binary(kind) and kind.byte_width == 16)):
            raise refuse.column("arrow.uuid, 16-byte binaries or text in the form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx")
    elif edm is EdmType.BINARY:
        if not binary:
            hint = " (a string column is neither base64-decoded nor UTF-8 encoded: convert it first)" if text else ""
            raise refuse.column("a column of binaries (bytes)" + hint)


def _check_integers(column: Any, refuse: _Refusal, low: int, high: int, limit: str, exact_double: bool = False) -> None:
    import pyarrow.compute as pc

    bounds = pc.min_max(column).as_py()
    smallest, largest = bounds["min"], bounds["max"]
    if smallest is None:
        return  # only nulls
    if exact_double:
        if -_EXACT_DOUBLE_INTEGERS <= smallest and largest <= _EXACT_DOUBLE_INTEGERS:
            return
        for row, value in enumerate(column.to_pylist()):  # the rare path: big integers, one at a time
            if value is not None and int(float(value)) != value:
                raise refuse.at(row, f"Edm.Double holds this integer only rounded (exact up to 2**53: {2**53})")
        return
    if smallest < low or largest > high:
        row = next(row for row, value in enumerate(column.to_pylist()) if value is not None and not low <= value <= high)
        raise refuse.at(row, limit)


def _check_timestamps(column: Any, kind: Any, refuse: _Refusal) -> None:
    """Within 1601-01-01 to 9999-12-31 (the service's range), and on 100 ns ticks for nanoseconds."""
    pa = _pyarrow()
    import pyarrow.compute as pc

    numbers = column.cast(pa.int64())
    if kind.unit == "ns":  # timestamp[ns] holds 1677 to 2262 only: inside the range
        finer = pc.not_equal(pc.subtract(numbers, pc.multiply(pc.divide(numbers, 100), 100)), 0)
        refuse.where(finer, "Edm.DateTime holds 100 ns ticks: round the value first (e.g. .dt.floor('100ns'))")
        return
    per_second = {"s": 1, "ms": 1_000, "us": 1_000_000}[kind.unit]
    epoch = datetime(1970, 1, 1, tzinfo=DATETIME_MIN.tzinfo)
    low = int((DATETIME_MIN - epoch).total_seconds()) * per_second
    high = (int((DATETIME_MAX - epoch).total_seconds()) + 1) * per_second - 1
    refuse.where(pc.or_(pc.less(numbers, low), pc.greater(numbers, high)),
                 "Edm.DateTime range is 1601-01-01 to 9999-12-31 UTC")


def _check_datetime_texts(column: Any, refuse: _Refusal) -> None:
    for row, text in enumerate(column.to_pylist()):
        if text is None:
            continue
        try:
            value = parse_datetime(text)
        except (ValueError, OverflowError):
            raise refuse.at(row, "Edm.DateTime is written from Edm.DateTime text (2024-01-31T12:00:00.1234567Z)") from None
        if not DATETIME_MIN <= value <= DATETIME_MAX:
            raise refuse.at(row, "Edm.DateTime range is 1601-01-01 to 9999-12-31 UTC")


def column_values(array: Any, edm: EdmType) -> list[Any]:
    """The values of ``array`` (checked by :func:`check_column`) as the Python values of ``edm``; None for nulls."""
    from ._arrow import _datetime_from_ns

    pa = _pyarrow()
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    kind = array.type
    if edm is EdmType.DATETIME:
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):  # wire text (beyond timestamp[ns])
            return [None if text is None else parse_datetime(text) for text in array.to_pylist()]
        if kind.unit == "ns":
            return [None if ns is None else _datetime_from_ns(ns) for ns in array.cast(pa.int64()).to_pylist()]
        values: list[Any] = array.cast(pa.timestamp("us", tz="UTC")).to_pylist()
        return values
    if edm is EdmType.GUID:
        if is_uuid_type(kind):
            return array.to_pylist()  # type: ignore[no-any-return]
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            return [None if text is None else uuid.UUID(text) for text in array.to_pylist()]
        return [None if raw is None else uuid.UUID(bytes=raw) for raw in array.to_pylist()]
    if edm is EdmType.STRING and is_uuid_type(kind):
        return [None if value is None else str(value) for value in array.to_pylist()]
    if edm is EdmType.DOUBLE:  # integers beyond 2**53 were checked to be exact doubles: Arrow's safe cast refuses them
        return array.cast(pa.float64(), safe=not pa.types.is_integer(kind)).to_pylist()  # type: ignore[no-any-return]
    return array.to_pylist()  # type: ignore[no-any-return]


# ---------------------------------------------------------------- pandas


def _kind_of(value: Any) -> str:
    """The kind of value ``value`` is in an object column (one kind per column)."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":  # numpy's bool is no bool
        return "bool"
    if isinstance(value, numbers.Integral):  # int, numpy's integers
        return "int"
    if isinstance(value, numbers.Real) and not isinstance(value, Decimal):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "bytes"
    if isinstance(value, datetime):
        return "datetime"
    if isinstance(value, date):
        return "date"
    if isinstance(value, uuid.UUID):
        return "uuid.UUID"
    if isinstance(value, Decimal):
        return "Decimal"
    return type(value).__name__


def frame_to_arrow(frame: Any) -> Any:
    """A pandas DataFrame as a ``pyarrow.Table`` (a named index becomes a column); an object column
    whose values are of more than one kind (int and str, int and float...) raises
    :class:`TableValidationError` naming the column and both kinds, with a row of each."""
    import pandas as pd

    pa = _pyarrow()
    columns = [(name, frame[name]) for name in frame.columns if frame[name].dtype == object]
    if frame.index.dtype == object and frame.index.name is not None:
        columns.append((frame.index.name, pd.Series(frame.index)))
    for name, series in columns:
        _check_one_kind(frame, str(name), series)
    try:
        table = pa.Table.from_pandas(frame, preserve_index=None)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        table = _from_pandas_by_column(frame, exc)
    return table.replace_schema_metadata(None)


def _check_one_kind(frame: Any, name: str, series: Any) -> None:
    import pandas as pd

    values = series.tolist()
    classes = set(map(type, values))
    classes.discard(type(None))
    if len(classes) <= 1:
        return  # the common case, told in C
    first: dict[str, int] = {}
    for row, value in enumerate(values):
        if value is None or (not isinstance(value, (str, bytes)) and _is_missing(pd, value)):
            continue
        kind = _kind_of(value)
        if kind not in first:
            first[kind] = row
            if len(first) > 1:
                (one, one_row), (other, other_row) = first.items()
                raise TableValidationError(
                    name, "a column holds one kind of value (write values of several types as entities)",
                    f"{one} at {_frame_row(frame, one_row)} and {other} at {_frame_row(frame, other_row)}",
                )


def _is_missing(pd: Any, value: Any) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _frame_row(frame: Any, row: int) -> str:
    keys = []
    for key in ("PartitionKey", "RowKey"):
        if key in frame.columns:
            keys.append(f"{key}={frame[key].iloc[row]!r}")
        elif frame.index.name == key:
            keys.append(f"{key}={frame.index[row]!r}")
    return ", ".join([*keys, f"row {row}"])


def _from_pandas_by_column(frame: Any, error: Exception) -> Any:
    """The columns of ``frame`` one by one, to name the one pyarrow refused (or to make a column of
    ``uuid.UUID`` a Guid column where pyarrow has no ``arrow.uuid``)."""
    import pandas as pd

    pa = _pyarrow()
    flat = frame.reset_index() if frame.index.name is not None or isinstance(frame.index, pd.MultiIndex) else frame
    arrays, fields = [], []
    for name in flat.columns:
        series = flat[name]
        try:
            array = pa.array(series, from_pandas=True)
            field = pa.field(str(name), array.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            values = series.tolist()
            present = [value for value in values if not (value is None or _is_missing(pd, value))]
            if present and all(isinstance(value, uuid.UUID) for value in present):
                array = pa.array([str(value) if isinstance(value, uuid.UUID) else None for value in values], pa.string())
                field = pa.field(str(name), pa.string(), metadata={EDM_TYPE_KEY: EdmType.GUID.value.encode()})
            else:
                raise TableValidationError(str(name), "no EDM type holds this column's values", str(exc)) from None
        arrays.append(array)
        fields.append(field)
    if not arrays:  # pragma: no cover - a frame without columns converts
        raise error
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
