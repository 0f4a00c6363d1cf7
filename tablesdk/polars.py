"""Tables as Polars frames: :func:`scan_table`, :func:`read_table` and :func:`write_table` (the ``polars``
extra: ``pip install '.[polars]'`` from a checkout).

:func:`scan_table` is a ``polars.LazyFrame`` over a Polars IO source: the table is cut into
PartitionKey ranges as :func:`tablesdk.dask.read_table` cuts it, and the ranges are read on
threads when the frame is collected. Polars hands the source the columns the query needs and
its filter: the columns become ``$select``, and each part of the filter the service can
express (a column compared with a literal, ``is_between``, ``str.starts_with``, combined with
``&``, ``|`` and ``~``; see :func:`service_filter`) becomes ``$filter``. Polars applies the
whole filter to what arrives, so a part the service cannot express is still applied, only
not on the service.

Polars keeps no Arrow field metadata, so a frame does not carry the EDM types the columns
were read with: a Guid column is text. :func:`write_table` takes ``edm_types`` for what the
column types alone do not say (``{"Id": EdmType.GUID}``).
"""

from __future__ import annotations

import inspect
import json
import math
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from ._bulk_loading._bulk import BulkMode, BulkResult, ProgressCallback
from ._entities._edm import EdmDateTime, EdmType, EntityProperty
from ._columns._engines import RangePlan, RangeSpec, change_window, plan_ranges, read_range
from ._core._extras import require_extra
from ._columns._engine_encryption import engine_encryption
from ._encryption import TableEncryptionPolicy
from ._entities._filter import MAX_FILTER_COMPARISONS, Filter, count_comparisons, prop
from ._pipeline._options import TableRequestOptions
from ._pipeline._retry import RetryPolicy
from ._queries._watermark import ChangeWindow

if TYPE_CHECKING:
    import polars

__all__ = ["read_table", "scan_table", "service_filter", "write_table"]

_COMPARISONS = {"Eq": "eq", "NotEq": "ne", "Lt": "lt", "LtEq": "le", "Gt": "gt", "GtEq": "ge"}
_FLIPPED = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}
#: Comparisons whose answer agrees between Polars and the service for every Double: Polars orders
#: NaN above every number (NaN > 1 is true there, false on the service), so only these are sent.
_DOUBLE_SAFE = frozenset({"eq", "lt", "le"})
#: Comparisons whose answer agrees for a Guid or Boolean column (no order the two sides share).
_EQUALITY = frozenset({"eq", "ne"})
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
#: Comparisons a range adds to its query (PartitionKey at or above its start, below its end).
_RANGE_COMPARISONS = 2
_UNIT_NANOS = {"Nanoseconds": 1, "Microseconds": 1_000, "Milliseconds": 1_000_000}


# ---------------------------------------------------------------- Polars filters as $filter


def service_filter(
    predicate: Any, edm_types: Mapping[str, EdmType], max_comparisons: int = MAX_FILTER_COMPARISONS
) -> Filter | None:
    """The part of a Polars ``predicate`` the service can apply, as a filter expression (None: no part).

    The predicate is split at its top-level ``&``; each part is sent when every comparison in
    it is a column of ``edm_types`` against a literal whose answer is the same on the service
    as in Polars (a String literal below U+D800, where both sides order alike; Double columns
    with ``==``, ``<`` and ``<=`` only, since Polars orders NaN above every number; Guid and
    Boolean columns with ``==`` and ``!=``; Binary never), in their order while they hold at
    most ``max_comparisons`` comparisons together (the service refuses a ``$filter`` of more
    than 15). A row whose column is null is dropped by Polars and may be kept by the service,
    so what the service returns holds every row the predicate keeps; the caller applies the
    predicate to it.
    """
    try:
        tree = json.loads(predicate.meta.serialize(format="json"))
    except Exception:  # noqa: BLE001 - an expression Polars cannot write as JSON is applied by Polars alone
        return None
    kept: list[Filter] = []
    budget = max_comparisons
    for part in _conjuncts(tree):
        found = _exact(part, edm_types)
        if found is not None and count_comparisons(found) <= budget:
            kept.append(found)
            budget -= count_comparisons(found)
    if not kept:
        return None
    combined = kept[0]
    for part in kept[1:]:
        combined = combined & part
    return combined


def _conjuncts(node: Any) -> list[Any]:
    binary = node.get("BinaryExpr") if isinstance(node, dict) else None
    if binary is not None and binary.get("op") in ("And", "LogicalAnd"):
        return _conjuncts(binary["left"]) + _conjuncts(binary["right"])
    return [node]


def _exact(node: Any, edm_types: Mapping[str, EdmType]) -> Filter | None:
    """``node`` as a filter that keeps a row exactly when Polars keeps it (the columns not null), or None."""
    if not isinstance(node, dict) or len(node) != 1:
        return None
    name = _column_name(node)
    if name is not None:  # a Boolean column used as the condition itself
        return prop(name) == True if edm_types.get(name) is EdmType.BOOLEAN else None
    kind, body = next(iter(node.items()))
    try:
        if kind == "BinaryExpr":
            return _binary(body, edm_types)
        if kind == "Function":
            return _function(body, edm_types)
    except (KeyError, TypeError, ValueError, IndexError, OverflowError, AttributeError):
        return None  # a shape this version of Polars writes differently: applied by Polars alone
    return None


def _binary(body: Mapping[str, Any], edm_types: Mapping[str, EdmType]) -> Filter | None:
    op = body["op"]
    if op in ("And", "LogicalAnd", "Or", "LogicalOr"):
        left, right = _exact(body["left"], edm_types), _exact(body["right"], edm_types)
        if left is None or right is None:
            return None
        return left & right if op in ("And", "LogicalAnd") else left | right
    comparison = _COMPARISONS.get(op)
    if comparison is None:
        return None
    left_column, right_column = _column_name(body["left"]), _column_name(body["right"])
    if left_column is not None and right_column is None:
        return _comparison(left_column, comparison, body["right"], edm_types)
    if right_column is not None and left_column is None:
        return _comparison(right_column, _FLIPPED[comparison], body["left"], edm_types)
    return None


def _function(body: Mapping[str, Any], edm_types: Mapping[str, EdmType]) -> Filter | None:
    function, inputs = body["function"], body["input"]
    if function == {"Boolean": "Not"} and len(inputs) == 1:
        inner = _exact(inputs[0], edm_types)
        return None if inner is None else ~inner
    if isinstance(function, dict) and isinstance(function.get("Boolean"), dict) and "IsBetween" in function["Boolean"]:
        name = _column_name(inputs[0])
        closed = function["Boolean"]["IsBetween"]["closed"]
        if name is None or len(inputs) != 3:
            return None
        low = _comparison(name, "ge" if closed in ("Both", "Left") else "gt", inputs[1], edm_types)
        high = _comparison(name, "le" if closed in ("Both", "Right") else "lt", inputs[2], edm_types)
        return None if low is None or high is None else low & high
    if isinstance(function, dict) and isinstance(function.get("Boolean"), dict) and "IsIn" in function["Boolean"]:
        return _is_in(inputs, edm_types)
    if function == {"StringExpr": "StartsWith"} and len(inputs) == 2:
        column, prefix = _column_name(inputs[0]), _literal(inputs[1])
        if column is None or edm_types.get(column) is not EdmType.STRING or not isinstance(prefix, str) or not prefix:
            return None
        if not _orders_alike(prefix) or ord(prefix[-1]) + 1 >= 0xD800:
            return None
        above = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        return (prop(column) >= prefix) & (prop(column) < above)
    return None


def _is_in(inputs: list[Any], edm_types: Mapping[str, EdmType]) -> Filter | None:
    """``is_in`` of a short list as ``eq`` comparisons joined by ``or`` (a null in the list: not sent)."""
    column = _column_name(inputs[0]) if len(inputs) == 2 else None
    edm = edm_types.get(column) if column is not None else None
    values = _list_literal(inputs[1]) if edm is not None else None
    if column is None or edm is None or not values or len(values) > MAX_FILTER_COMPARISONS:
        return None
    typed = [None if value is None else _typed_value(value, edm, "eq") for value in values]
    if any(value is None for value in typed):
        return None
    found: Filter = prop(column) == typed[0]
    for value in typed[1:]:
        found = found | (prop(column) == value)
    return found


def _list_literal(node: Any) -> list[Any] | None:
    """The values of a list literal (Polars writes it as an Arrow IPC stream of one column), or None."""
    literal = node.get("Literal", {}).get("Scalar", {}) if isinstance(node, dict) else {}
    data = literal.get("List") if isinstance(literal, dict) else None
    if not isinstance(data, list):
        return None
    import pyarrow as pa

    try:
        table = pa.ipc.open_stream(bytes(data)).read_all()
    except (pa.ArrowInvalid, ValueError):
        return None
    values: list[Any] | None = table.column(0).to_pylist() if table.num_columns == 1 else None
    return values


def _column_name(node: Any) -> str | None:
    if isinstance(node, dict) and isinstance(node.get("Column"), str):
        return str(node["Column"])
    return None


_NO_LITERAL = object()


def _literal(node: Any) -> Any:
    """The Python value of a literal node, or :data:`_NO_LITERAL`."""
    if not isinstance(node, dict) or "Literal" not in node:
        return _NO_LITERAL
    literal = node["Literal"]
    (kind, payload), = literal.items()
    if kind == "Dyn":
        (_, value), = payload.items()
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else _NO_LITERAL
    if kind != "Scalar":
        return _NO_LITERAL
    (scalar, value), = payload.items()
    if scalar in ("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64", "Float32", "Float64"):
        return value
    if scalar == "String" or scalar == "Boolean":
        return value
    if scalar == "Datetime":
        count, unit, zone = value
        if unit not in _UNIT_NANOS or not isinstance(zone, dict) or zone.get("inner") not in ("UTC", "Etc/UTC"):
            return _NO_LITERAL  # a naive literal means what Polars makes of it, not a UTC instant
        nanos = int(count) * _UNIT_NANOS[unit]
        if nanos % 100:
            return _NO_LITERAL
        micros, rest = divmod(nanos, 1000)
        moment = _EPOCH + timedelta(microseconds=micros)
        return EdmDateTime(
            moment.year, moment.month, moment.day, moment.hour, moment.minute, moment.second, moment.microsecond,
            timezone.utc, ticks_remainder=rest // 100,
        )
    return _NO_LITERAL


def _orders_alike(text: str) -> bool:
    """Whether Polars (UTF-8 bytes) and the service (UTF-16 units) order every string against ``text`` alike."""
    return all(ord(char) < 0xD800 for char in text)


def _comparison(name: str, op: str, literal_node: Any, edm_types: Mapping[str, EdmType]) -> Filter | None:
    edm = edm_types.get(name)
    value = _literal(literal_node)
    if edm is None or value is _NO_LITERAL or value is None:
        return None
    typed = _typed_value(value, edm, op)
    if typed is None:
        return None
    return _compare(prop(name), op, typed)


def _typed_value(value: Any, edm: EdmType, op: str) -> Any:
    """``value`` as the service compares it with a column of ``edm`` under ``op``, or None."""
    if edm is EdmType.STRING:
        return value if isinstance(value, str) and (op in _EQUALITY or _orders_alike(value)) else None
    if edm is EdmType.GUID:
        if op not in _EQUALITY or not isinstance(value, str):
            return None
        try:
            parsed = uuid.UUID(value)
        except ValueError:
            return None
        return parsed if str(parsed) == value else None  # Polars compares the canonical text
    if edm is EdmType.BOOLEAN:
        return value if isinstance(value, bool) and op in _EQUALITY else None
    if edm in (EdmType.INT32, EdmType.INT64):
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        limit = 2**31 if edm is EdmType.INT32 else 2**63
        return EntityProperty(value, edm) if -limit <= value < limit else None
    if edm is EdmType.DOUBLE:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or op not in _DOUBLE_SAFE:
            return None
        number = float(value)
        return EntityProperty(number, EdmType.DOUBLE) if math.isfinite(number) and number == value else None
    if edm is EdmType.DATETIME:
        return value if isinstance(value, datetime) else None
    return None


def _compare(column: Any, op: str, value: Any) -> Filter:
    if op == "eq":
        return column == value  # type: ignore[no-any-return]
    if op == "ne":
        return column != value  # type: ignore[no-any-return]
    if op == "lt":
        return column < value  # type: ignore[no-any-return]
    if op == "le":
        return column <= value  # type: ignore[no-any-return]
    if op == "gt":
        return column > value  # type: ignore[no-any-return]
    return column >= value  # type: ignore[no-any-return]


# ---------------------------------------------------------------- reading


def _polars_schema(arrow_schema: Any) -> Any:
    import polars as pl

    return pl.from_arrow(arrow_schema.empty_table()).schema  # type: ignore[union-attr]


def _frames(
    plan: RangePlan,
    with_columns: list[str] | None,
    predicate: Any,
    n_rows: int | None,
    max_workers: int,
) -> Iterator[Any]:
    """The frames of every range, read ``max_workers`` at a time, with ``predicate`` applied and the
    columns Polars asked for; the service filters by the part of the predicate it can express."""
    from concurrent.futures import Future, ThreadPoolExecutor

    import polars as pl

    from ._columns._arrow import edm_type_of_field

    wanted = None
    if with_columns is not None:
        wanted = list(with_columns)
        if predicate is not None:
            wanted += [name for name in predicate.meta.root_names() if name not in wanted]
    pushed = None
    if predicate is not None:
        types = {field.name: edm for field in plan.schema if (edm := edm_type_of_field(field)) is not None}
        base, window = plan.specs[0].filter, plan.specs[0].since
        budget = MAX_FILTER_COMPARISONS - _RANGE_COMPARISONS - (count_comparisons(base) if base else 0)
        if isinstance(window, ChangeWindow):
            budget -= count_comparisons(window.filter())
        found = service_filter(predicate, types, budget)
        pushed = None if found is None else found.render()
    specs: list[RangeSpec] = [spec.narrowed(wanted, pushed) for spec in plan.specs]
    remaining = n_rows
    width = max(1, max_workers)
    pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="tablesdk-polars")
    queue = iter(specs)
    pending: list[Future[Any]] = [pool.submit(read_range, spec) for _, spec in zip(range(width), queue)]
    try:
        while pending:
            table = pending.pop(0).result()
            following = next(queue, None)
            if following is not None:
                pending.append(pool.submit(read_range, following))
            frame = pl.from_arrow(table)
            assert isinstance(frame, pl.DataFrame)
            if predicate is not None:
                frame = frame.filter(predicate)
            if with_columns is not None:
                frame = frame.select(with_columns)
            if remaining is not None:
                frame = frame.head(remaining)
                remaining -= frame.height
            yield frame
            if remaining == 0:
                return
    finally:  # enough rows, or an error: the ranges not started are not read, none is waited for
        pool.shutdown(wait=False, cancel_futures=True)


def scan_table(
    connection_string: str,
    table: str,
    *,
    filter: str | Filter | None = None,
    columns: Sequence[str] | None = None,
    partitions: int | None = None,
    boundaries: Sequence[str] | None = None,
    schema: Any = None,
    sample_size: int = 1000,
    max_workers: int = 4,
    payload_format: str = "json",
    operation_deadline: float | None = None,
    since: ChangeWindow | None = None,
    encryption_policy: TableEncryptionPolicy | None = None,
) -> polars.LazyFrame:
    """The entities of ``table`` as a ``polars.LazyFrame``; nothing but the probes and a sample is read
    until it is collected.

    ``filter`` (a ``$filter`` string or expression) and ``columns`` (properties to read; the keys
    and Timestamp always come) narrow the query, as for :func:`tablesdk.dask.read_table`; the
    table is cut at ``boundaries`` or into about ``partitions`` (default 8) PartitionKey ranges,
    read ``max_workers`` at a time. The columns and their types are those of
    :meth:`~tablesdk.TableQuery.to_arrow` (Guid as text: Polars keeps no EDM type), from
    ``schema`` (a ``pyarrow.Schema``) or a sample page. The columns a query selects become
    ``$select``, and what :func:`service_filter` can express of its filter becomes ``$filter``;
    Polars applies the whole filter to the rows that arrive. ``operation_deadline`` (seconds,
    default none) bounds each request, retries included, as the client's ``operation_deadline``.
    ``since`` (a :class:`~tablesdk.ChangeWindow`) reads only the rows changed inside it, with their
    ``odata.etag`` column: the same rows each time the frame is collected, and the window's
    ``next_watermark`` is the watermark after them (docs/data.md, "Incremental reads").
    ``encryption_policy`` decrypts client-side encrypted entities (docs/encryption.md, "Data engines");
    without it, meeting an encrypted entity raises :class:`~tablesdk.EncryptionKeyError` rather than
    return its ciphertext.
    """
    from polars.io.plugins import register_io_source

    plan = plan_ranges(
        connection_string, table, filter=filter, columns=columns, partitions=partitions, boundaries=boundaries,
        schema=schema, sample_size=sample_size, payload_format=payload_format, operation_deadline=operation_deadline,
        since=change_window(since), encryption=engine_encryption(encryption_policy),
    )

    def source(with_columns: list[str] | None, predicate: Any, n_rows: int | None, batch_size: int | None) -> Iterator[Any]:
        return _frames(plan, with_columns, predicate, n_rows, max_workers)

    named: dict[str, Any] = {"explain_name": "azure-table"} if "explain_name" in inspect.signature(register_io_source).parameters else {}
    return register_io_source(source, schema=_polars_schema(plan.schema), **named)


def read_table(
    connection_string: str,
    table: str,
    *,
    filter: str | Filter | None = None,
    columns: Sequence[str] | None = None,
    partitions: int | None = None,
    boundaries: Sequence[str] | None = None,
    schema: Any = None,
    sample_size: int = 1000,
    max_workers: int = 4,
    payload_format: str = "json",
    operation_deadline: float | None = None,
    since: ChangeWindow | None = None,
    encryption_policy: TableEncryptionPolicy | None = None,
) -> polars.DataFrame:
    """:func:`scan_table` with the same parameters, collected: the table as a ``polars.DataFrame``."""
    return scan_table(
        connection_string, table, filter=filter, columns=columns, partitions=partitions, boundaries=boundaries,
        schema=schema, sample_size=sample_size, max_workers=max_workers, payload_format=payload_format,
        operation_deadline=operation_deadline, since=since, encryption_policy=encryption_policy,
    ).collect()


# ---------------------------------------------------------------- writing


def write_table(
    frame: polars.DataFrame | polars.LazyFrame,
    connection_string: str,
    table: str,
    mode: BulkMode = "insert",
    *,
    edm_types: Mapping[str, EdmType] | None = None,
    max_workers: int = 8,
    progress: ProgressCallback | None = None,
    retry_policy: RetryPolicy | None = None,
    options: TableRequestOptions | None = None,
    payload_format: str = "json",
    encryption_policy: TableEncryptionPolicy | None = None,
    encrypt_columns: Sequence[str] | None = None,
    encryption_resolver: Callable[[str, str, str], bool] | None = None,
) -> BulkResult:
    """Write each row of ``frame`` (a ``polars.DataFrame``, or a ``LazyFrame``, collected) as an entity
    of ``table`` with :meth:`~tablesdk.CloudTableClient.write_arrow`, and return its
    :class:`~tablesdk.BulkResult` (``raise_on_error()`` raises naming each key not written).

    A column's EDM type follows its Polars type (Int64: Int64, Int32: Int32, Float64: Double,
    Boolean, Datetime: DateTime, String, Binary); ``edm_types`` sets the others, as a Guid column
    (Polars has no type that says Guid: ``{"Id": EdmType.GUID}``).
    ``encryption_policy`` encrypts the columns ``encrypt_columns`` names and those
    ``encryption_resolver(pk, rk, name)`` (or the policy's) chooses, as the client does
    (docs/encryption.md, "Data engines").
    """
    import polars as pl

    from ._columns._engines import ConnectionSecret

    encryption = engine_encryption(encryption_policy, encryption_resolver, encrypt_columns, writing=True)
    if encryption is not None:
        options = encryption.options(options)
    if isinstance(frame, pl.LazyFrame):
        frame = frame.collect()
    arrow = frame.to_arrow(compat_level=pl.CompatLevel.oldest())  # large_string, not string_view
    with ConnectionSecret(connection_string).client(payload_format) as client:
        return client.write_arrow(
            table, arrow, mode, edm_types=edm_types, max_workers=max_workers, progress=progress,
            retry_policy=retry_policy, options=options,
        )


# Without Polars, say which extra to install when the module is imported (not a bare ModuleNotFoundError
# from the first call).
require_extra("polars", ("polars", "pyarrow"), "tablesdk.polars")
