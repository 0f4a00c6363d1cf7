"""Tables as columns: query pages read into pyarrow record batches, and Arrow tables written as entities.

pyarrow (and pandas, for :func:`query_to_pandas`) are optional dependencies
(the ``arrow`` extra: ``pip install '.[arrow]'`` from a checkout): they are imported inside the functions here,
so ``import tablesdk`` never loads them.

Reading (:func:`iter_query_batches`, :func:`query_to_arrow`): each page of the
query becomes one ``pyarrow.RecordBatch``: a JSON page straight from its body
(:mod:`tablesdk._columns._arrow_json`: Arrow's JSON reader, no Python object per value), any other page decoded by the client into an
:class:`~tablesdk._entities._edm.EntityPage` (values and their EDM types, no entity
objects) and turned column by column; only the current page (and the next page's
undecoded answer, when the query reads ahead) is held. Each column's Arrow type
comes from the EDM type of its values (see :data:`ARROW_TYPES`); DateTime is
``timestamp[ns, UTC]``, which keeps the service's 100 ns ticks (the seventh
digit :class:`~tablesdk._entities._edm.EdmDateTime` remembers). Every field carries its EDM
type in its metadata (:data:`EDM_TYPE_KEY`), so a table written back
(:func:`write_arrow`, a Parquet file) keeps Guid and Int64 apart from String
and Int32. A property that arrives with two EDM types raises
:class:`~tablesdk._core._errors.SchemaConflictError`, or becomes a column of the
values' wire text with ``on_type_conflict="string"``.

Writing columns as entities is :mod:`tablesdk._columns._arrow_write`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta, timezone
from functools import partial
from itertools import chain, repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Literal

from .._entities._edm import EdmDateTime, EdmType, EntityPage, format_datetime, from_json_value, to_atom_text
from .._core._errors import SchemaConflictError
from .._core._extras import install_hint

if TYPE_CHECKING:
    from ._arrow_json import JsonColumnsReader
    from .._queries._query import FetchedPage, TableQuery

__all__ = [
    "EDM_TYPE_KEY",
    "ETAG_COLUMN",
    "BatchBuilder",
    "TypeConflict",
    "arrow_schema_edm_types",
    "edm_type_of_field",
    "batch_decoder",
    "columns_query",
    "guids_as_uuid",
    "is_uuid_type",
    "iter_query_batches",
    "query_to_arrow",
    "query_to_pandas",
    "table_to_pandas",
    "pandas_types_mapper",
    "scan_batches",
    "table_of_batches",
]

#: Field metadata key holding a column's EDM type (``b"Edm.Guid"``...): kept by Parquet files.
EDM_TYPE_KEY = b"tablesdk.edm_type"
#: The name of the ETag column (``with_etag=True``): the wire's own name, which no property can have.
ETAG_COLUMN = "odata.etag"
#: Columns that come first, in this order, when the page has them.
SYSTEM_COLUMNS = ("PartitionKey", "RowKey", "Timestamp")
#: What a property that arrives with two EDM types does: raise, or become a column of wire text.
TypeConflict = Literal["raise", "string"]

_UTC = timezone.utc
_EPOCH = datetime(1970, 1, 1, tzinfo=_UTC)
_KEYS = itemgetter("PartitionKey", "RowKey")


def _pyarrow() -> Any:
    try:
        import pyarrow
    except ImportError as exc:  # pragma: no cover - the test environment has it
        raise ImportError(f"Arrow columns need pyarrow and pandas: {install_hint('arrow')}") from exc
    return pyarrow


def arrow_type_for(edm: EdmType) -> Any:
    """The Arrow type a column of ``edm`` values is read as."""
    pa = _pyarrow()
    return {
        EdmType.STRING: pa.string(),
        EdmType.INT32: pa.int32(),
        EdmType.INT64: pa.int64(),
        EdmType.DOUBLE: pa.float64(),
        EdmType.BOOLEAN: pa.bool_(),
        EdmType.DATETIME: pa.timestamp("ns", tz="UTC"),
        EdmType.GUID: pa.string(),
        EdmType.BINARY: pa.binary(),
    }[edm]


def _field(name: str, edm: EdmType | None, arrow_type: Any = None) -> Any:
    pa = _pyarrow()
    if arrow_type is None:
        arrow_type = arrow_type_for(edm) if edm is not None else pa.string()
    metadata = {EDM_TYPE_KEY: (edm or EdmType.STRING).value.encode()} if name != ETAG_COLUMN else None
    return pa.field(name, arrow_type, metadata=metadata)


def edm_type_of_field(field: Any) -> EdmType | None:
    """The EDM type a column stands for: its metadata's, else the one its Arrow type maps to (None: unsupported)."""
    pa = _pyarrow()
    stated = (field.metadata or {}).get(EDM_TYPE_KEY)
    if stated is not None:
        try:
            return EdmType(stated.decode())
        except ValueError:
            pass
    kind = field.type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if getattr(kind, "extension_name", None) == "arrow.uuid":  # pyarrow 18's canonical UUID type
        return EdmType.GUID
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return EdmType.STRING
    if pa.types.is_boolean(kind):
        return EdmType.BOOLEAN
    if pa.types.is_int64(kind) or pa.types.is_uint32(kind) or pa.types.is_uint64(kind):
        return EdmType.INT64
    if pa.types.is_integer(kind):
        return EdmType.INT32
    if pa.types.is_floating(kind):
        return EdmType.DOUBLE
    if pa.types.is_timestamp(kind):
        return EdmType.DATETIME
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
        return EdmType.BINARY
    return None


def arrow_schema_edm_types(schema: Any) -> dict[str, EdmType | None]:
    """Each column of ``schema`` and the EDM type it is written as (None: no EDM type holds it)."""
    return {field.name: edm_type_of_field(field) for field in schema}


# ---------------------------------------------------------------- which EDM types fit which column

def _accepted(field: Any) -> frozenset[EdmType]:
    """The EDM types whose values an explicit schema's field takes."""
    edm = edm_type_of_field(field)
    if edm is EdmType.STRING:
        return frozenset({EdmType.STRING, EdmType.GUID})
    if edm is EdmType.INT32 or edm is EdmType.INT64:
        return frozenset({EdmType.INT32, EdmType.INT64})  # checked against the column's range
    if edm is EdmType.DOUBLE:
        return frozenset({EdmType.DOUBLE, EdmType.INT32})  # every Int32 is an exact double
    return frozenset() if edm is None else frozenset({edm})


# ---------------------------------------------------------------- values -> arrays

def _timestamps(values: list[Any], arrow_type: Any) -> Any:
    """DateTime values as ``arrow_type``; ``ns`` keeps the 100 ns digit (ticks_remainder)."""
    pa = _pyarrow()
    import pyarrow.compute as pc

    micro = pa.array(values, type=pa.timestamp("us", tz="UTC"))
    if arrow_type.unit != "ns":
        return micro.cast(pa.timestamp(arrow_type.unit, tz=arrow_type.tz), safe=False)  # the unit asked for
    tenths = pa.array(list(map(getattr, values, repeat("ticks_remainder"), repeat(0))), type=pa.int64())
    try:
        nanos = pc.add_checked(pc.multiply_checked(micro.cast(pa.int64()), 1000), pc.multiply(tenths, 100))
    except pa.ArrowInvalid:  # the microseconds of 1677-09-21 00:12:43.145224 overflow, though the sum fits
        nanos = pa.array([None if us is None else us * 1000 + tenth * 100
                          for us, tenth in zip(micro.cast(pa.int64()).to_pylist(), tenths.to_pylist())], pa.int64())
    return nanos.cast(pa.timestamp("ns", tz=arrow_type.tz))


def _array(values: list[Any], edm: EdmType, arrow_type: Any) -> Any:
    pa = _pyarrow()
    if edm is EdmType.DATETIME:
        return _timestamps(values, arrow_type)
    if edm is EdmType.GUID:
        return _guid_texts(values, arrow_type)
    return pa.array(values, type=arrow_type)


def _guid_texts(values: list[Any], arrow_type: Any) -> Any:
    """UUIDs as their canonical text: ``UUID.hex`` (a third of ``str``'s cost), hyphens put in by Arrow."""
    pa = _pyarrow()
    import pyarrow.compute as pc

    if is_uuid_type(arrow_type):  # a schema asking for arrow.uuid
        storage = pa.array([None if value is None else value.bytes for value in values], type=pa.binary(16))
        return pa.ExtensionArray.from_storage(arrow_type, storage)
    hexes = pa.array([None if value is None else value.hex for value in values], type=pa.string())
    parts = [pc.utf8_slice_codeunits(hexes, start, stop) for start, stop in ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32))]
    return pc.binary_join_element_wise(*parts, "-").cast(arrow_type)


def _wire_text(values: list[Any], edms: list[EdmType | None]) -> list[str | None]:
    """Each value as the text the service writes it in (a column of mixed EDM types)."""
    return [
        None if value is None else value if edm is EdmType.STRING or edm is None else to_atom_text(value, edm)
        for value, edm in zip(values, edms)
    ]


def _text_of_array(array: Any, edm: EdmType | None) -> Any:
    """An array read earlier as ``edm`` rewritten as wire text (a later page made its column text)."""
    pa = _pyarrow()
    if edm is None or edm is EdmType.STRING or edm is EdmType.GUID:
        return array.cast(pa.string())
    if edm is EdmType.DATETIME:
        texts = [None if ns is None else format_datetime(_datetime_from_ns(ns)) for ns in array.cast(pa.int64()).to_pylist()]
    else:
        texts = [None if value is None else to_atom_text(value, edm) for value in array.to_pylist()]
    return pa.array(texts, type=pa.string())


def _datetime_from_ns(nanos: int) -> datetime:
    micros, rest = divmod(nanos, 1000)
    value = _EPOCH + timedelta(microseconds=micros)
    if rest // 100:
        return EdmDateTime(
            value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond, _UTC,
            ticks_remainder=rest // 100,
        )
    return value


# ---------------------------------------------------------------- pages -> record batches

class _Column:
    """One column of a scan: its EDM type (None: wire text of mixed types) and Arrow field."""

    __slots__ = ("edm", "field", "keys")

    def __init__(self, edm: EdmType | None, field: Any, keys: tuple[str, str] | None) -> None:
        self.edm = edm
        self.field = field
        self.keys = keys  # a row whose value had this EDM type, for the conflict message


class BatchBuilder:
    """Turns pages of a query into record batches, keeping the scan's schema from page to page.

    Without ``schema`` the columns are the properties seen so far (the system
    columns first, then the others as they first appear); a batch has every
    column seen so far, nulls where its page had none. With ``schema`` the
    columns are exactly its fields; values must fit them (properties it does
    not name are left out, unless ``strict``, where they raise).
    """

    def __init__(
        self,
        *,
        schema: Any = None,
        with_etag: bool = False,
        on_type_conflict: TypeConflict = "raise",
        strict: bool = False,
        wide_datetimes_as_text: bool = False,
    ) -> None:
        if on_type_conflict not in ("raise", "string"):
            raise ValueError(f"on_type_conflict is 'raise' or 'string', not {on_type_conflict!r}")
        self.schema = schema
        self.with_etag = with_etag
        self.on_type_conflict = on_type_conflict
        self.strict = strict
        #: A DateTime column holding a value beyond timestamp[ns] (before 1677, after 2262) becomes a column of
        #: its wire text, still marked Edm.DateTime, instead of raising: exact, for files (Parquet export).
        self.wide_datetimes_as_text = wide_datetimes_as_text
        self.columns: dict[str, _Column] = {}
        self._json_reader: JsonColumnsReader | None = None
        if schema is not None:
            for field in schema:
                if field.name != ETAG_COLUMN and edm_type_of_field(field) is None:
                    raise TypeError(f"schema field {field.name!r}: no EDM type is read as {field.type}")
                self.columns[field.name] = _Column(edm_type_of_field(field), field, None)
            self.with_etag = with_etag or ETAG_COLUMN in self.columns

    def output_schema(self) -> Any:
        """The schema of the batches so far (of every batch, with an explicit schema)."""
        pa = _pyarrow()
        if self.schema is not None:
            if self.with_etag and ETAG_COLUMN not in self.columns:
                return self.schema.append(pa.field(ETAG_COLUMN, pa.string()))
            return self.schema
        names = [name for name in SYSTEM_COLUMNS if name in self.columns]
        if self.with_etag:
            names.append(ETAG_COLUMN)
        names += [name for name in self.columns if name not in SYSTEM_COLUMNS]
        fields = [pa.field(ETAG_COLUMN, pa.string()) if name == ETAG_COLUMN else self.columns[name].field
                  for name in names]
        return pa.schema(fields)

    def empty_schema(self) -> Any:
        """The schema of a scan that found nothing: the keys and Timestamp (or the explicit schema)."""
        if self.schema is None:
            for name, edm in zip(SYSTEM_COLUMNS, (EdmType.STRING, EdmType.STRING, EdmType.DATETIME)):
                self.columns.setdefault(name, _Column(edm, _field(name, edm), None))
        return self.output_schema()

    def batch(self, page: EntityPage) -> Any:
        """The record batch of one page."""
        values, types = page.values, page.types
        arrays: dict[str, Any] = {}
        wanted: Iterable[str]
        if self.schema is not None:
            if self.strict:
                extra = set(chain.from_iterable(values)).difference(self.columns)
                if extra:
                    self._unknown(sorted(extra)[0], values)
            wanted = self.columns
        else:
            names = dict.fromkeys(chain.from_iterable(values))
            wanted = [*(n for n in SYSTEM_COLUMNS if n in names), *(n for n in names if n not in SYSTEM_COLUMNS)]
        shared = types[0] if types and types.count(types[0]) == len(types) else None
        for name in wanted:
            if name == ETAG_COLUMN:
                continue
            array = self._column(name, values, types, shared)
            if array is not None:
                arrays[name] = array
        return self._assemble(arrays, page.etags, len(values))

    def _assemble(self, arrays: dict[str, Any], etags: Any, count: int) -> Any:
        """The batch of ``arrays`` with the scan's schema; ``etags`` a list, or an Arrow array (a JSON page's)."""
        pa = _pyarrow()
        if self.with_etag:
            arrays[ETAG_COLUMN] = etags if isinstance(etags, pa.Array) else pa.array(etags, type=pa.string())
        schema = self.output_schema()
        columns = [arrays[field.name] if field.name in arrays else pa.nulls(count, type=field.type) for field in schema]
        return pa.RecordBatch.from_arrays(columns, schema=schema)

    def page_batch(self, fetched: FetchedPage, decode: Callable[[FetchedPage], EntityPage]) -> Any:
        """The record batch of a fetched page: a JSON page's columns straight from its body when
        they agree with the scan so far (:mod:`tablesdk._columns._arrow_json`), else :meth:`batch` of the
        page the client decodes. A page read under client-side encryption is always decoded by the
        client, which decrypts it (its columns are the decrypted values)."""
        if fetched.response is not None and fetched.encryption is None:
            if self._json_reader is None:
                from ._arrow_json import JsonColumnsReader

                self._json_reader = JsonColumnsReader()
            found = self._json_reader.read(fetched.response)
            if found is not None:
                batch = self._from_columns(*found) if self.schema is None else self._fit_columns(*found)
                if batch is not None:
                    return batch
        return self.batch(decode(fetched))

    def _fit_columns(self, columns: dict[str, tuple[EdmType, Any]], etags: Any, count: int) -> Any:
        """:meth:`_from_columns` for an explicit schema: None unless every column fits its field as it is
        or by a cast Arrow checks (the general path then raises, naming the value that does not fit)."""
        if self.strict and not set(columns) <= set(self.columns):
            return None
        arrays = {}
        for name, column in self.columns.items():
            found = columns.get(name)
            if found is None or name == ETAG_COLUMN:
                continue
            edm, array = found
            if edm not in _accepted(column.field):
                return None
            if not array.type.equals(column.field.type):
                if edm is EdmType.DATETIME:
                    return None  # another unit: the general path converts it
                try:
                    array = array.cast(column.field.type)
                except (ValueError, TypeError, OverflowError):  # ArrowInvalid is a ValueError
                    return None
            arrays[name] = array
        return self._assemble(arrays, etags, count)

    def _from_columns(self, columns: dict[str, tuple[EdmType, Any]], etags: Any, count: int) -> Any:
        """The batch of columns read from a JSON body; None when one disagrees with the scan's column."""
        for name, (edm, array) in columns.items():
            known = self.columns.get(name)
            if known is not None and (known.edm is not edm or not known.field.type.equals(array.type)):
                return None  # a conflict, or a column kept as text: the general path decides
        keys = None
        for name, (edm, array) in columns.items():
            if name not in self.columns:
                if keys is None:
                    import pyarrow.compute as pc

                    keys = (columns["PartitionKey"][1], columns["RowKey"][1])
                row = pc.index(pc.is_valid(array), True).as_py()
                where = (keys[0][row].as_py(), keys[1][row].as_py())
                self.columns[name] = _Column(edm, _field(name, edm, array.type), where)
        return self._assemble({name: array for name, (_, array) in columns.items()}, etags, count)

    def _column(
        self, name: str, values: list[dict[str, Any]], types: list[dict[str, EdmType]], shared: dict[str, EdmType] | None
    ) -> Any:
        column_values = list(map(dict.get, values, repeat(name)))
        if shared is not None and self.schema is None:
            # One types dict for the whole page (the JSON codec's column reader): one lookup, not one a row.
            known = self.columns.get(name)
            edm = shared.get(name)
            if edm is not None and known is not None and known.edm is edm:
                if edm is EdmType.DATETIME:
                    return self._datetimes(name, known, values, column_values)
                return self._convert(name, edm, known.field.type, values, column_values)
        column_types: list[EdmType | None] = list(map(dict.get, types, repeat(name)))
        kinds: set[EdmType] = set(filter(None, column_types))
        known = self.columns.get(name)
        if None in column_types:
            untyped = [i for i, (v, t) in enumerate(zip(column_values, column_types)) if v is not None and t is None]
            if untyped:
                if known is None or self.schema is None:
                    raise SchemaConflictError(
                        f"property {name!r} came without its EDM type (a JSON nometadata answer?) at "
                        f"{_keys_text(values[untyped[0]])}: pass schema= to say how to read it",
                        property_name=name, types=(), keys=_KEYS(values[untyped[0]]),
                    )
                column_values, column_types = self._typed_by_schema(name, known, values, column_values, column_types)
                kinds = set(filter(None, column_types))
        if not kinds:
            return None  # only nulls: the service stores none, so the property is as good as absent
        if self.schema is not None:
            assert known is not None
            return self._fit(name, known, kinds, values, column_values, column_types)
        if known is None and len(kinds) == 1:
            (edm,) = kinds
            row = next(i for i, v in enumerate(column_values) if v is not None)
            self.columns[name] = known = _Column(edm, _field(name, edm), _KEYS(values[row]))
        if known is not None and known.edm is None:  # wire text since an earlier conflict
            return _pyarrow().array(_wire_text(column_values, column_types), type=known.field.type)
        if known is not None and kinds == {known.edm}:
            assert known.edm is not None
            if known.edm is EdmType.DATETIME:
                return self._datetimes(name, known, values, column_values)
            return self._convert(name, known.edm, known.field.type, values, column_values)
        return self._conflict(name, known, kinds, values, column_values, column_types)

    def _datetimes(self, name: str, known: _Column, values: list[dict[str, Any]], column_values: list[Any]) -> Any:
        pa = _pyarrow()
        if pa.types.is_string(known.field.type):  # text since a value beyond timestamp[ns]
            return pa.array([None if v is None else format_datetime(v) for v in column_values], type=pa.string())
        try:
            return self._convert(name, EdmType.DATETIME, known.field.type, values, column_values)
        except SchemaConflictError:
            if not self.wide_datetimes_as_text:
                raise
        known.field = _field(name, EdmType.DATETIME, pa.string())
        return self._datetimes(name, known, values, column_values)

    def _conflict(
        self, name: str, known: _Column | None, kinds: set[EdmType], values: list[dict[str, Any]],
        column_values: list[Any], column_types: list[EdmType | None],
    ) -> Any:
        """A property with two EDM types: raise, or make its column wire text from now on."""
        if self.on_type_conflict == "raise":
            typed = [(t, _KEYS(row)) for t, row in zip(column_types, values) if t is not None]
            if known is not None and known.edm is not None:
                first_type, first_keys = known.edm, known.keys or ("?", "?")
            else:
                first_type, first_keys = typed[0]
            second_type, second_keys = next(item for item in typed if item[0] is not first_type)
            raise SchemaConflictError(
                f"property {name!r} has two EDM types: {first_type.value} at {_keys_text(first_keys)} and "
                f"{second_type.value} at {_keys_text(second_keys)} (pass on_type_conflict='string' for a column "
                "of their wire text, or schema= to choose)",
                property_name=name, types=(first_type, second_type), keys=second_keys,
            )
        self.columns[name] = _Column(None, _field(name, None), None)
        return _pyarrow().array(_wire_text(column_values, column_types), type=_pyarrow().string())

    def _fit(
        self, name: str, column: _Column, kinds: set[EdmType], values: list[dict[str, Any]],
        column_values: list[Any], column_types: list[EdmType | None],
    ) -> Any:
        """The values of an explicit schema's column, each checked to fit it."""
        accepted = _accepted(column.field)
        wrong = kinds - accepted
        if wrong:
            index = next(i for i, t in enumerate(column_types) if t in wrong)
            found = column_types[index]
            assert found is not None
            raise SchemaConflictError(
                f"property {name!r} at {_keys_text(values[index])} is {found.value} "
                f"({_short(column_values[index])}), which does not fit the schema's {column.field.type}",
                property_name=name, types=(found,), keys=_KEYS(values[index]),
            )
        edm = column.edm or EdmType.STRING
        if edm is EdmType.STRING and EdmType.GUID in kinds:
            column_values = [None if v is None else str(v) for v in column_values]
        return self._convert(name, edm, column.field.type, values, column_values)

    def _typed_by_schema(
        self, name: str, column: _Column, values: list[dict[str, Any]],
        column_values: list[Any], column_types: list[EdmType | None],
    ) -> tuple[list[Any], list[EdmType | None]]:
        """Untyped (nometadata) values read as the schema's column says."""
        edm = column.edm or EdmType.STRING
        out_values, out_types = [], []
        for value, stated, row in zip(column_values, column_types, values):
            if value is not None and stated is None:
                try:
                    value = from_json_value(value, edm)
                except (TypeError, ValueError) as exc:
                    raise SchemaConflictError(
                        f"property {name!r} at {_keys_text(row)} ({_short(value)}) cannot be read as "
                        f"{edm.value} for the schema's {column.field.type}: {exc}",
                        property_name=name, types=(edm,), keys=_KEYS(row),
                    ) from None
                stated = edm
            out_values.append(value)
            out_types.append(stated)
        return out_values, out_types

    def _convert(self, name: str, edm: EdmType, arrow_type: Any, values: list[dict[str, Any]], column_values: list[Any]) -> Any:
        pa = _pyarrow()
        try:
            return _array(column_values, edm, arrow_type)
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            pass
        # Find the value that does not fit (the rare path: one value at a time).
        for row, value in zip(values, column_values):
            try:
                _array([value], edm, arrow_type)
            except (pa.ArrowException, OverflowError, TypeError, ValueError) as exc:
                hint = ""
                if edm is EdmType.DATETIME and getattr(arrow_type, "unit", "") == "ns":
                    hint = " (timestamp[ns] holds 1677-09-21 to 2262-04-11: pass a schema with " \
                           "pa.timestamp('us', tz='UTC') for this column)"
                raise SchemaConflictError(
                    f"property {name!r} at {_keys_text(row)} ({_short(value)}) does not fit {arrow_type}{hint}: {exc}",
                    property_name=name, types=(edm,), keys=_KEYS(row),
                ) from None
        raise AssertionError("a column that failed to convert converted value by value")  # pragma: no cover

    def _unknown(self, name: str, values: list[dict[str, Any]]) -> None:
        row = next(v for v in values if name in v)
        raise SchemaConflictError(
            f"property {name!r} at {_keys_text(row)} is not in the schema (sampled from the first rows of the "
            "table): pass schema= with every column, or columns= to read only some",
            property_name=name, types=(), keys=_KEYS(row),
        )

    def conform(self, batch: Any, schema: Any) -> Any:
        """``batch`` (read earlier in the scan) with the scan's final ``schema``: new columns as
        nulls, a column that became wire text rewritten as text."""
        pa = _pyarrow()
        columns = []
        for field in schema:
            index = batch.schema.get_field_index(field.name)
            if index < 0:
                columns.append(pa.nulls(batch.num_rows, type=field.type))
                continue
            array = batch.column(index)
            if not array.type.equals(field.type) or batch.schema.field(index).metadata != field.metadata:
                array = _text_of_array(array, edm_type_of_field(batch.schema.field(index)))
            columns.append(array)
        return pa.RecordBatch.from_arrays(columns, schema=schema)


def _keys_text(row: Mapping[str, Any] | tuple[str, str]) -> str:
    pk, rk = row if isinstance(row, tuple) else _KEYS(row)
    return f"PartitionKey={pk!r}, RowKey={rk!r}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ---------------------------------------------------------------- the scan

def _page_decoder(source: Any) -> Callable[[FetchedPage], EntityPage]:
    """The decode stage of ``source``'s pages (a client's, sync or async): TypeError for a source
    that makes entities, not pages."""
    decode: Callable[[FetchedPage], EntityPage] | None = getattr(source, "_decode_page", None)
    if decode is None or getattr(source, "fetch_query_segment", None) is None:
        raise TypeError(
            "Arrow columns need a query from CloudTableClient.create_query "
            f"({type(source).__name__} makes entities, not pages)"
        )
    return decode


def batch_decoder(builder: BatchBuilder, source: Any) -> Callable[[FetchedPage], Any]:
    """The decode of a page ``source`` (a client, sync or async) fetched into ``builder``'s next batch."""
    return partial(builder.page_batch, decode=_page_decoder(source))


def scan_batches(query: TableQuery[Any], builder: BatchBuilder) -> Iterator[Any]:
    """The record batches of ``query``'s pages, read as its entity pages are
    (:func:`tablesdk._queries._query.query_pages`, read-ahead included)."""
    from .._queries._query import query_pages

    for batch, _ in query_pages(query, decode=batch_decoder(builder, query.source)):
        yield batch
        del batch


def columns_query(query: TableQuery[Any], schema: Any, strict: bool) -> TableQuery[Any]:
    """The query a scan into columns sends: ``query`` asking only for the schema's properties
    (unless ``strict``, or it selects some itself)."""
    return query if strict else _narrowed(query, schema)


def _narrowed(query: TableQuery[Any], schema: Any) -> TableQuery[Any]:
    """``query`` asking only for the schema's properties (when it selects none itself)."""
    if schema is None or query.select_columns is not None:
        return query
    names = [field.name for field in schema if field.name not in (*SYSTEM_COLUMNS, ETAG_COLUMN)]
    return query.select(*names, "Timestamp") if names else query.select("Timestamp")


def iter_query_batches(
    query: TableQuery[Any],
    *,
    schema: Any = None,
    with_etag: bool = False,
    on_type_conflict: TypeConflict = "raise",
    strict: bool = False,
) -> Iterator[Any]:
    """One ``pyarrow.RecordBatch`` per page of ``query`` (see :meth:`TableQuery.iter_arrow_batches`)."""
    builder = BatchBuilder(schema=schema, with_etag=with_etag, on_type_conflict=on_type_conflict, strict=strict)
    return scan_batches(columns_query(query, schema, strict), builder)


def query_to_arrow(
    query: TableQuery[Any],
    *,
    schema: Any = None,
    with_etag: bool = False,
    on_type_conflict: TypeConflict = "raise",
    strict: bool = False,
) -> Any:
    """Every page of ``query`` as one ``pyarrow.Table`` (see :meth:`TableQuery.to_arrow`)."""
    builder = BatchBuilder(schema=schema, with_etag=with_etag, on_type_conflict=on_type_conflict, strict=strict)
    return table_of_batches(builder, list(scan_batches(columns_query(query, schema, strict), builder)), schema)


def table_of_batches(builder: BatchBuilder, batches: list[Any], schema: Any) -> Any:
    """One ``pyarrow.Table`` of a scan's ``batches`` (made by ``builder``, given ``schema`` or None)."""
    pa = _pyarrow()
    if not batches or not any(batch.num_rows for batch in batches):
        final = builder.empty_schema() if not builder.columns or schema is not None else builder.output_schema()
        return pa.Table.from_batches([], schema=final)
    final = builder.output_schema()
    return pa.Table.from_batches([builder.conform(batch, final) for batch in batches], schema=final)


def pandas_types_mapper() -> Callable[[Any], Any]:
    """The ``types_mapper`` for ``pyarrow.Table.to_pandas``: nullable Int32, Int64, boolean and string
    dtypes, so a missing value is ``pd.NA`` and never turns an integer column into floats."""
    import pandas as pd

    pa = _pyarrow()
    mapping = {
        pa.int32(): pd.Int32Dtype(),
        pa.int64(): pd.Int64Dtype(),
        pa.bool_(): pd.BooleanDtype(),
        pa.string(): pd.StringDtype(),
    }
    return mapping.get


# ---------------------------------------------------------------- Guids for pandas

def uuid_type() -> Any:
    """Arrow's canonical UUID extension type (``arrow.uuid``), or None before pyarrow 18."""
    make = getattr(_pyarrow(), "uuid", None)
    return None if make is None else make()


def is_uuid_type(kind: Any) -> bool:
    """Whether ``kind`` is ``arrow.uuid``."""
    return getattr(kind, "extension_name", None) == "arrow.uuid"


def guids_as_uuid(table: Any) -> Any:
    """``table`` with its Guid columns (strings marked Edm.Guid, as read) as ``arrow.uuid`` (the field's
    metadata kept), for pandas: an object column of ``uuid.UUID`` there. Unchanged before pyarrow 18."""
    pa = _pyarrow()
    kind = uuid_type()
    if kind is None:
        return table
    for index, field in enumerate(table.schema):
        if (field.metadata or {}).get(EDM_TYPE_KEY) == b"Edm.Guid" and pa.types.is_string(field.type):
            array = _uuid_array(table.column(index).combine_chunks(), kind)
            table = table.set_column(index, pa.field(field.name, kind, metadata=field.metadata), array)
    return table


def _uuid_array(texts: Any, kind: Any) -> Any:
    """Canonical Guid texts as ``arrow.uuid``: the hex digits decoded in one call, not a UUID per value."""
    pa = _pyarrow()
    import pyarrow.compute as pc

    hexes = pc.replace_substring(pc.fill_null(texts, "0" * 32), "-", "")
    try:
        if len(hexes) and pc.min_max(pc.utf8_length(hexes)).as_py() != {"min": 32, "max": 32}:
            raise ValueError("not canonical")
        # Every value is 32 digits long: the digits are one run of the data buffer from the first value's offset.
        start = pa.Array.from_buffers(pa.int32(), 1, [None, hexes.buffers()[1]], offset=hexes.offset)[0].as_py()
        raw = bytes.fromhex(hexes.buffers()[2].to_pybytes()[start : start + 32 * len(hexes)].decode("ascii"))
    except ValueError:  # pragma: no cover - read Guids are canonical; any other text the slow way
        raw = b"".join(b"\0" * 16 if text is None else uuid.UUID(text).bytes for text in texts.to_pylist())
    storage = pa.FixedSizeBinaryArray.from_buffers(pa.binary(16), len(texts), [None, pa.py_buffer(raw)])
    if texts.null_count:
        storage = pc.if_else(pc.is_valid(texts), storage, pa.scalar(None, pa.binary(16)))
    return pa.ExtensionArray.from_storage(kind, storage)


def query_to_pandas(query: TableQuery[Any], **options: Any) -> Any:
    """``query_to_arrow(query, **options)`` as a pandas DataFrame (see :meth:`TableQuery.to_pandas`); a Guid
    column is an object column of ``uuid.UUID``, which ``write_pandas`` writes as Guid again."""
    return table_to_pandas(query_to_arrow(query, **options))


def table_to_pandas(table: Any) -> Any:
    """A table read from the service (as ``query_to_arrow`` makes it) as a pandas DataFrame, with the
    dtypes of :meth:`TableQuery.to_pandas`: the one conversion of both flavours' ``to_pandas``."""
    frame = table.to_pandas(types_mapper=pandas_types_mapper())
    for field in table.schema:
        if (field.metadata or {}).get(EDM_TYPE_KEY) == b"Edm.Guid" and _pyarrow().types.is_string(field.type):
            frame[field.name] = _guid_objects(table.column(field.name), frame.index)
    return frame


def _guid_objects(texts: Any, index: Any) -> Any:
    """A Guid column (canonical texts) as a pandas object Series of ``uuid.UUID``, made as the JSON
    codec's column reader makes them (cheaper than ``arrow.uuid``'s ``to_pandas``, a UUID at a time)."""
    import pandas as pd

    from .._entities._edm_specs import EDM_SPECS

    values = texts.to_pylist()
    present = [text for text in values if text is not None]
    guids = EDM_SPECS[EdmType.GUID].json_column_reader(present) if present else []
    if guids is None:  # pragma: no cover - read Guids are canonical
        guids = [uuid.UUID(text) for text in present]
    if len(present) != len(values):
        found = iter(guids)
        guids = [None if text is None else next(found) for text in values]
    return pd.Series(guids, index=index, dtype=object)
