"""Tables as a Spark data source (the ``spark`` extra, pyspark >= 4.0): :func:`register`, then ``format("azuretables")``.

::

    tablesdk.spark.register(spark)
    frame = spark.read.format("azuretables").option("connectionString", cs).option("table", "Orders").load()
    frame.write.format("azuretables").option("connectionString", cs).option("table", "Copy").mode("append").save()

Reading: the table is cut into PartitionKey ranges (:func:`~tablesdk.find_partition_boundaries`,
as :mod:`tablesdk._columns._engines` plans them for Dask, Ray and Polars), one Spark partition each; a partition's pages arrive as
``pyarrow.RecordBatch``es from :meth:`~tablesdk.TableQuery.iter_arrow_batches`. The schema is a
sample page's, or the one given with ``.schema("...")`` (then only those properties are asked
for, with ``$select``). With the ``pushFilters`` option, filters Spark pushes become ``$filter``
where the service answers them exactly as Spark would; every other one stays with Spark (see
:func:`service_filter`). It is off by default: Spark (4.1 to 4.3) keeps one read plan per loaded
DataFrame, the last one whose filters were pushed, and reuses it for every later scan of that
frame, filtered or not.

Incremental reads: the ``since`` option takes a :class:`~tablesdk.ChangeWindow`'s text, whose upper
end is fixed before the read, so that every action on the frame reads the same rows and the
driver knows the next watermark (``window.next_watermark``) without them.

Writing: each Spark partition's Arrow batches go through the bulk engine
(:meth:`~tablesdk.CloudTableClient.write_arrow`); the commit messages carry each partition's
counts and the keys of every entity not written, and the job fails with
:class:`TableWriteError` naming them. Spark keeps no field metadata, so a Guid (or an Int32, or a
DateTime kept as its 7-digit text) is written as that type when the ``edmTypes`` option says so.

The connection string is an option Spark keeps in its plans: :func:`register` adds its name to
``spark.sql.redaction.options.regex`` and the account key's forms to
``spark.sql.redaction.string.regex``, so neither ``explain()`` nor the UI's plans show the key.

Client-side encryption: ``register(spark, encryption_policy=...)`` registers a data source class
that holds the policy, so the key reaches the Python workers pickled inside the data source's
reader and writer, and never as an option (which plans and logs show). Without a policy, a read
that meets an encrypted entity fails naming it; a write encrypts the columns of the
``encryptColumns`` option (or those the policy's resolver chooses).
See docs/data.md, "Spark".
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from ._core._extras import require_extra

# Without pyspark, say which extra to install when the module is imported.
require_extra("spark", ("pyspark", "pyarrow"), "tablesdk.spark")

from pyspark.sql import SparkSession  # noqa: E402 - after the check that names the extra
from pyspark.sql import datasource as sds  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
    BinaryType, BooleanType, DataType, DoubleType, IntegerType, LongType, StringType, StructField, StructType, TimestampType,
)

from ._core._account import CloudStorageAccount  # noqa: E402
from ._core._cosmos import cosmos_since_refused  # noqa: E402
from ._columns._arrow import ETAG_COLUMN, edm_type_of_field  # noqa: E402
from ._columns._arrow_fit import edm_type_overrides  # noqa: E402
from ._columns._arrow_since import in_window  # noqa: E402
from ._bulk_loading._bulk import BulkMode  # noqa: E402
from ._clients._client import CloudTableClient  # noqa: E402
from ._entities._edm import EdmType, format_datetime  # noqa: E402
from ._columns._engines import DEFAULT_PARTITIONS, base_query, sample_schema  # noqa: E402
from ._columns._engine_encryption import (  # noqa: E402
    EngineEncryption, engine_encryption, refuse_encrypted, refuse_encrypted_schema, without_metadata,
)
from ._encryption import TableEncryptionPolicy  # noqa: E402
from ._columns._worker_clients import WORKER_CLIENTS  # noqa: E402
from ._entities._entity import DynamicEntity  # noqa: E402
from ._core._errors import SchemaConflictError, TableServiceError, TableValidationError  # noqa: E402
from ._entities._filter import Filter, Or, count_comparisons, prop  # noqa: E402
from ._queries._parallel import find_partition_boundaries  # noqa: E402
from ._queries._query import TableQuery  # noqa: E402
from ._queries._watermark import ChangeWindow  # noqa: E402

__all__ = ["SHORT_NAME", "AzureTablesDataSource", "TableWriteError", "register", "service_filter"]

#: The name of the data source in ``spark.read.format(...)``.
SHORT_NAME = "azuretables"
#: Options whose values Spark must redact in plans: the connection string and any credential.
SECRET_OPTIONS = "connectionString|accountKey|sasToken|sharedAccessSignature"
#: The forms of a secret inside any text Spark shows (a connection string's key or signature, a SAS query's sig).
SECRET_TEXT = r"(?i)(?:AccountKey|SharedAccessSignature)=[^;\s'\"]*|\bsig=[^&;\s'\"]*"
#: The Table service's most comparisons in one ``$filter``; two go to a range's PartitionKey bounds.
_FILTER_BUDGET = 15 - 2
#: The columns an incremental read asks for beside the properties: the keys and Timestamp (the ETag always comes).
_CHANGE_KEYS = ("PartitionKey", "RowKey", "Timestamp")
#: Characters below which Spark's string order (code points) and the service's (UTF-16 code units)
#: agree for any value compared with the literal.
_ORDER_SAFE_BELOW = 0xE000
_PREFIX_SAFE_BELOW = 0xD7FF
#: How far ``<=`` and ``=`` on a DateTime reach past their literal: a millisecond, which Azurite
#: (comparing in milliseconds) answers too; Spark checks those filters again.
_WIDENED = timedelta(milliseconds=1)
_SPARK_TYPES: dict[EdmType, type[DataType]] = {
    EdmType.STRING: StringType, EdmType.GUID: StringType, EdmType.INT32: IntegerType, EdmType.INT64: LongType,
    EdmType.DOUBLE: DoubleType, EdmType.BOOLEAN: BooleanType, EdmType.DATETIME: TimestampType, EdmType.BINARY: BinaryType,
}
#: The EDM types each Spark column type is read from (DateTime as a string: its exact 7-digit text).
_READS = {
    "string": frozenset({EdmType.STRING, EdmType.GUID, EdmType.DATETIME}),
    "integer": frozenset({EdmType.INT32}),
    "long": frozenset({EdmType.INT32, EdmType.INT64}),
    "double": frozenset({EdmType.DOUBLE, EdmType.INT32}),
    "boolean": frozenset({EdmType.BOOLEAN}),
    "timestamp": frozenset({EdmType.DATETIME}),
    "binary": frozenset({EdmType.BINARY}),
}
#: The EDM type a given schema's column is taken to hold, when neither ``edmTypes`` nor a sample says.
_EDM_OF_SPARK = {
    "string": EdmType.STRING, "integer": EdmType.INT32, "long": EdmType.INT64, "double": EdmType.DOUBLE,
    "boolean": EdmType.BOOLEAN, "timestamp": EdmType.DATETIME, "binary": EdmType.BINARY,
}
_logger = logging.getLogger("tablesdk.spark")


def register(
    spark: SparkSession, *, encryption_policy: TableEncryptionPolicy | None = None,
    encryption_resolver: Callable[[str, str, str], bool] | None = None,
) -> None:
    """Register the ``azuretables`` data source with ``spark``, turn on Python filter pushdown
    (``spark.sql.python.filterPushdown.enabled``) and make Spark redact the connection string
    (its option name in ``spark.sql.redaction.options.regex``, the key's forms in
    ``spark.sql.redaction.string.regex``): ``explain()``, plan strings and the UI's SQL plans
    show ``*********(redacted)`` in its place.

    ``encryption_policy`` (a :class:`~tablesdk.TableEncryptionPolicy`) decrypts the session's reads
    and encrypts its writes (the ``encryptColumns`` option's columns, and those
    ``encryption_resolver`` or the policy's resolver chooses): the data source class registered
    holds it, and ships it pickled to the workers (its key must pickle: docs/encryption.md, "Data
    engines"); it never becomes an option, a plan or a log line. Registering again replaces it
    (without a policy: none)."""
    _add_to_regex(spark, "spark.sql.redaction.options.regex", f"(?i:{SECRET_OPTIONS})")
    _add_to_regex(spark, "spark.sql.redaction.string.regex", SECRET_TEXT)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    encryption = engine_encryption(encryption_policy, encryption_resolver)
    if encryption is None:
        spark.dataSource.register(AzureTablesDataSource)
        return
    # A class made here is pickled by value (with its policy), not found by name on the workers.
    source = type("EncryptedAzureTablesDataSource", (AzureTablesDataSource,), {"encryption": encryption})
    spark.dataSource.register(source)


def _add_to_regex(spark: SparkSession, key: str, pattern: str) -> None:
    current = spark.conf.get(key, None)
    if current and pattern in current:
        return
    spark.conf.set(key, f"(?:{current})|{pattern}" if current else pattern)


# ---------------------------------------------------------------- options


class _Options:
    """The options of a read or write, checked (names are case-insensitive, as Spark's)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        lowered = {str(key).lower(): value for key, value in options.items()}
        self._options = lowered
        self.connection_string = self._required("connectionString")
        self.table = self._required("table")
        CloudStorageAccount.parse(self.connection_string)  # a malformed string fails here, not on a worker

    def _required(self, name: str) -> str:
        value = self._options.get(name.lower())
        if not value:
            raise TableValidationError(name, f"the {SHORT_NAME} data source needs the option {name!r}")
        return value

    def text(self, name: str) -> str | None:
        return self._options.get(name.lower()) or None

    def integer(self, name: str, default: int) -> int:
        value = self.text(name)
        if value is None:
            return default
        try:
            number = int(value)
        except ValueError:
            number = 0
        if number < 1:
            raise TableValidationError(name, "the option is a positive integer", f"got {value!r}")
        return number

    def seconds(self, name: str) -> float | None:
        value = self.text(name)
        if value is None:
            return None
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not number > 0 or math.isinf(number):
            raise TableValidationError(name, "the option is a positive number of seconds", f"got {value!r}")
        return number

    def flag(self, name: str) -> bool:
        value = (self.text(name) or "false").lower()
        if value not in ("true", "false"):
            raise TableValidationError(name, "the option is 'true' or 'false'", f"got {value!r}")
        return value == "true"

    def json_value(self, name: str, kind: type) -> Any:
        value = self.text(name)
        if value is None:
            return None
        try:
            parsed = json.loads(value)
        except ValueError as exc:
            raise TableValidationError(name, f"the option is JSON ({kind.__name__})", str(exc)) from None
        if not isinstance(parsed, kind):
            raise TableValidationError(name, f"the option is a JSON {kind.__name__}", f"got {type(parsed).__name__}")
        return parsed

    def edm_types(self) -> dict[str, EdmType]:
        """The ``edmTypes`` option: a JSON object of column name to EDM type name (``"Edm.Guid"``)."""
        given = self.json_value("edmTypes", dict) or {}
        return edm_type_overrides(given, list(given))

    def client(self) -> CloudTableClient:
        """A new client, for planning (closed by the caller)."""
        return CloudStorageAccount.parse(self.connection_string).create_cloud_table_client(
            operation_deadline=self.seconds("operationDeadline")
        )

    def shared_client(self) -> AbstractContextManager[CloudTableClient]:
        """The Python worker's client, shared by every partition it reads or writes (not to be closed):
        Spark reuses its Python workers across tasks, and each would otherwise make its own."""
        return WORKER_CLIENTS.lease(self.connection_string, "json", self.seconds("operationDeadline"))


# ---------------------------------------------------------------- the data source


class AzureTablesDataSource(sds.DataSource):
    """The ``azuretables`` data source (see the module's documentation and docs/data.md).

    Options: ``connectionString`` and ``table`` (required); reading: ``filter`` (raw ``$filter``
    text every range adds), ``columns`` (comma-separated properties: ``$select``), ``numPartitions``
    (default 8) or ``boundaries`` (a JSON list of PartitionKeys), ``sampleSize`` (entities of the
    sample page, default 1000), ``edmTypes`` (JSON: each column's EDM type, for filters and writes),
    ``truncateDateTimes`` (``true``: a DateTime's 100 ns digit may be dropped in a timestamp
    column), ``pushFilters`` (``true``: Spark's filters become ``$filter``; see docs/data.md for
    the one read plan Spark keeps per loaded frame), ``operationDeadline`` (seconds per request),
    ``since`` (a :class:`~tablesdk.ChangeWindow`'s :meth:`~tablesdk.ChangeWindow.to_string`: only the
    rows changed inside it, the same ones each time the frame is computed; the window's
    ``next_watermark`` is the watermark after them); writing: ``writeMode``
    (``insert``, ``merge`` or ``replace``), ``maxWorkers`` (default 8), ``edmTypes``,
    ``encryptColumns`` (comma-separated columns to encrypt with :func:`register`'s policy).
    """

    #: The session's client-side encryption (:func:`register`'s ``encryption_policy``), or None.
    encryption: EngineEncryption | None = None

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        #: Each column's EDM type, learned with the sample schema (when no schema is given).
        self.sampled_types: dict[str, EdmType] = {}

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> StructType:
        """The schema of a sample page (``sampleSize`` entities, the first page with rows of three)."""
        options = _Options(self.options)
        with options.client() as client:
            query = _base_query(client, options, _columns(options), self.encryption)
            sampled = sample_schema(query.page_size(options.integer("sampleSize", 1000)))
        if self.encryption is None:
            refuse_encrypted_schema(sampled, options.table)
        fields = []
        for arrow_field in sampled:
            edm = edm_type_of_field(arrow_field)
            if arrow_field.name == ETAG_COLUMN or edm is None:
                continue
            self.sampled_types[arrow_field.name] = edm
            fields.append(StructField(arrow_field.name, _SPARK_TYPES[edm]()))
        return StructType(fields)

    def reader(self, schema: StructType) -> _Reader:
        options = _Options(self.options)
        kind = _PushingReader if options.flag("pushFilters") else _Reader
        return kind(options, schema, self.sampled_types, self.encryption)

    def writer(self, schema: StructType, overwrite: bool) -> _Writer:
        if overwrite:
            raise TableValidationError(
                "mode", f"the {SHORT_NAME} data source writes with mode('append') only",
                "the writeMode option says what happens to an existing entity (insert, merge, replace)",
            )
        return _Writer(_Options(self.options), schema, self.encryption)


def _base_query(
    client: CloudTableClient, options: _Options, select: Sequence[str], encryption: EngineEncryption | None,
) -> TableQuery[DynamicEntity]:
    return base_query(client, options.table, options.text("filter"), select, encryption)


def _columns(options: _Options) -> tuple[str, ...]:
    """The ``columns`` option: the properties to ask for (``$select``; the keys always come)."""
    text = options.text("columns") or ""
    return tuple(name.strip() for name in text.split(",") if name.strip())


# ---------------------------------------------------------------- reading


class _KeyRange(sds.InputPartition):
    """One PartitionKey range: ``low`` included, ``high`` excluded (None: open). Holds no secret."""

    def __init__(self, index: int, low: str | None, high: str | None) -> None:
        super().__init__(index)
        self.low = low
        self.high = high


class _Reader(sds.DataSourceReader):
    def __init__(self, options: _Options, schema: StructType, sampled: Mapping[str, EdmType],
                 encryption: EngineEncryption | None = None) -> None:
        self.options = options
        self.encryption = encryption
        self.schema = schema
        self.spark_types = {item.name: item.dataType.typeName() for item in schema.fields}
        for name, kind in self.spark_types.items():
            if kind not in _READS:
                raise TableValidationError(
                    name, "a column of the azuretables source is string, int, bigint, double, boolean, "
                    "timestamp or binary", f"got {kind}",
                )
        given = options.edm_types()
        unknown = sorted(set(given) - set(self.spark_types))
        if unknown:
            raise TableValidationError(unknown[0], "edmTypes names a column the schema does not have")
        #: A sampled schema reads every property and refuses one it lacks; a given one asks for its columns.
        self.sampled = bool(sampled)
        self.select = _columns(options)
        if not self.select and not self.sampled:
            self.select = tuple(name for name in self.spark_types)
        self.edm_types = {
            **{name: _EDM_OF_SPARK[kind] for name, kind in self.spark_types.items() if not self.sampled},
            **sampled, **given,
            "PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING, "Timestamp": EdmType.DATETIME,
        }
        self.pushed: list[str] = []
        self.truncate = options.flag("truncateDateTimes")
        since = options.text("since")
        #: The change window of an incremental read (the ``since`` option), or None.
        self.window = None if since is None else ChangeWindow.from_string(since)
        if self.window is not None and CloudStorageAccount.parse(options.connection_string).is_cosmos:
            raise cosmos_since_refused()
        if self.window is not None and self.select:  # the window's rows are told apart by keys, Timestamp, ETag
            self.select = (*self.select, *(name for name in _CHANGE_KEYS if name not in self.select))

    def partitions(self) -> list[sds.InputPartition]:
        boundaries = self.options.json_value("boundaries", list)
        with self.options.client() as client:
            query = self._query(client)
            if boundaries is None:
                boundaries = find_partition_boundaries(query, self.options.integer("numPartitions", DEFAULT_PARTITIONS))
            points = [str(point) for point in boundaries]
            query.partition_ranges(points)  # checks them: sorted, distinct, non-empty strings
        bounds: list[str | None] = [None, *points, None]
        return [_KeyRange(index, low, high) for index, (low, high) in enumerate(zip(bounds[:-1], bounds[1:]))]

    def _query(self, client: CloudTableClient) -> TableQuery[DynamicEntity]:
        query = _base_query(client, self.options, self.select, self.encryption)
        if self.window is not None:
            query = query.where(self.window.filter())
        for text in self.pushed:
            query = query.where(text)
        return query

    def read(self, partition: sds.InputPartition) -> Iterator[Any]:
        from pyspark.sql.pandas.types import to_arrow_schema

        assert isinstance(partition, _KeyRange)
        target = to_arrow_schema(self.schema, timezone="UTC")
        with self.options.shared_client() as client:
            query = self._query(client)
            if partition.low is not None:
                query = query.where(prop("PartitionKey") >= partition.low)
            if partition.high is not None:
                query = query.where(prop("PartitionKey") < partition.high)
            for batch in query.iter_arrow_batches(with_etag=self.window is not None):
                if self.encryption is None:
                    refuse_encrypted(batch, self.options.table)
                    batch = without_metadata(batch)
                if self.window is not None:
                    batch = in_window(batch, self.window, False)
                if batch.num_rows:
                    yield self._spark_batch(batch, target)

    def _spark_batch(self, batch: Any, target: Any) -> Any:
        """``batch`` with the Spark schema's columns and Arrow types (a missing column as nulls)."""
        import pyarrow as pa

        if self.sampled and not self.select:
            extra = [name for name in batch.schema.names if name not in self.spark_types and name != ETAG_COLUMN]
            if extra:
                raise _conflict(batch, extra[0], f"property {extra[0]!r} is not in the schema sampled from the "
                                "first page: give the schema with .schema(...), or the columns option")
        columns = []
        for target_field in target:
            index = batch.schema.get_field_index(target_field.name)
            if index < 0:
                columns.append(pa.nulls(batch.num_rows, target_field.type))
                continue
            edm = edm_type_of_field(batch.schema.field(index))
            columns.append(self._column(batch, target_field, edm, batch.column(index)))
        return pa.RecordBatch.from_arrays(columns, schema=target)

    def _column(self, batch: Any, target_field: Any, edm: EdmType | None, array: Any) -> Any:
        name, kind = target_field.name, self.spark_types[target_field.name]
        if edm not in _READS[kind]:
            raise _conflict(batch, name, f"property {name!r} is {edm.value if edm else 'of mixed types'}, "
                            f"which the schema's {kind} column does not hold")
        if edm is EdmType.DATETIME and kind == "string":
            return _datetime_texts(array)
        if edm is EdmType.DATETIME:
            return _microseconds(batch, name, array, self.truncate or name == "Timestamp")
        return array.cast(target_field.type)


class _PushingReader(_Reader):
    """A reader that takes Spark's filters (the ``pushFilters`` option): see :func:`service_filter`."""

    def pushFilters(self, filters: list[sds.Filter]) -> Iterator[sds.Filter]:
        """Each filter the service answers as Spark would becomes part of the ``$filter``; the others
        (and the ones only narrowed by the service) are returned, for Spark to apply."""
        raw = self.options.text("filter")
        budget = _FILTER_BUDGET - (count_comparisons(raw) if raw else 0)
        if self.window is not None:
            budget -= count_comparisons(self.window.filter())
        for spark_filter in filters:
            found = service_filter(spark_filter, self.spark_types, self.edm_types)
            if found is None:
                yield spark_filter
                continue
            node, exact = found
            cost = count_comparisons(node)
            if cost > budget:
                yield spark_filter
                continue
            budget -= cost
            self.pushed.append(node.render())
            if not exact:
                yield spark_filter


def _conflict(batch: Any, name: str, message: str) -> SchemaConflictError:
    import pyarrow.compute as pc

    row = 0
    if name in batch.schema.names:
        row = pc.index(pc.is_valid(batch.column(name)), True).as_py()
        row = max(row, 0)
    keys = (batch.column("PartitionKey")[row].as_py(), batch.column("RowKey")[row].as_py())
    return SchemaConflictError(f"{message} (at PartitionKey={keys[0]!r}, RowKey={keys[1]!r})",
                               property_name=name, types=(), keys=keys)


def _datetime_texts(array: Any) -> Any:
    """DateTime values (timestamp[ns]) as the service's text, with all 7 fractional digits."""
    import pyarrow as pa

    from ._columns._arrow import _datetime_from_ns

    nanos = array.cast(pa.int64()).to_pylist()
    return pa.array([None if ns is None else format_datetime(_datetime_from_ns(ns)) for ns in nanos], pa.string())


def _microseconds(batch: Any, name: str, array: Any, truncate: bool) -> Any:
    """DateTime values (timestamp[ns]) as Spark's timestamp[us]: a value with a 100 ns digit raises
    (naming its keys) unless ``truncate``, where it is floored to its microsecond."""
    import pyarrow as pa
    import pyarrow.compute as pc

    nanos = array.cast(pa.int64())
    whole = pc.divide(nanos, 1000)  # integer division truncates toward zero
    rest = pc.subtract(nanos, pc.multiply(whole, 1000))
    below = pc.less(rest, 0)
    if pc.any(pc.not_equal(rest, 0)).as_py():
        if not truncate:
            row = pc.index(pc.not_equal(rest, 0), True).as_py()
            keys = (batch.column("PartitionKey")[row].as_py(), batch.column("RowKey")[row].as_py())
            raise SchemaConflictError(
                f"property {name!r} at PartitionKey={keys[0]!r}, RowKey={keys[1]!r} has a 100 ns digit, which "
                "Spark's timestamp cannot hold: declare the column string in .schema(...) for its exact "
                "7-digit text, or set the option truncateDateTimes to true",
                property_name=name, types=(EdmType.DATETIME,), keys=keys,
            )
        whole = pc.subtract(whole, pc.cast(below, pa.int64()))  # floor, for times before 1970
    return whole.cast(pa.timestamp("us", tz="UTC"))


# ---------------------------------------------------------------- filters Spark pushes


def service_filter(
    spark_filter: sds.Filter, spark_types: Mapping[str, str], edm_types: Mapping[str, EdmType]
) -> tuple[Filter, bool] | None:
    """The ``$filter`` node for one of Spark's pushed filters, and whether it is exact; None when the
    service cannot answer it as Spark would (Spark keeps it).

    Exact: comparisons and ``IN`` on String (a literal below U+E000, where Spark's code-point order and
    the service's UTF-16 order agree), Int32, Int64, ``>=`` and ``<`` on DateTime read as timestamps,
    ``=``/``<``/``<=`` on Double (Spark sorts NaN above every number), ``=`` on Boolean, and
    ``startswith`` (a key range). Sent and kept by Spark too: a Guid ``=``; ``>``, ``<=``, ``=`` on
    DateTime (sent as ``ge``, and ``lt`` a millisecond on: Spark sees each value floored to its
    microsecond, Azurite compares milliseconds); a ``NOT`` of ``=``, ``IN`` or ``startswith``. ``IS NULL``, ``endswith``, ``contains``, Binary
    and a DateTime read as text stay with Spark.
    """
    if isinstance(spark_filter, sds.Not):
        inner = service_filter(spark_filter.child, spark_types, edm_types)
        if inner is None or not isinstance(spark_filter.child, (sds.EqualTo, sds.In, sds.StringStartsWith)):
            return None
        return ~inner[0], False
    attribute = getattr(spark_filter, "attribute", None)
    if attribute is None or len(attribute) != 1:
        return None
    name = attribute[0]
    kind, edm = spark_types.get(name), edm_types.get(name)
    if kind is None or edm is None or edm not in _READS[kind]:
        return None
    if kind == "string" and edm is EdmType.DATETIME:
        return None
    ref = prop(name, edm)
    try:
        if isinstance(spark_filter, (sds.EqualTo, sds.EqualNullSafe)):
            return _equal(ref, edm, spark_filter.value)
        if isinstance(spark_filter, sds.In):
            values = [value for value in spark_filter.value if value is not None]
            parts = [_equal(ref, edm, value) for value in values]
            if not parts or any(part is None for part in parts):
                return None
            nodes = [part[0] for part in parts if part is not None]
            node = nodes[0] if len(nodes) == 1 else Or(*nodes)
            return node, all(part[1] for part in parts if part is not None)
        if isinstance(spark_filter, sds.StringStartsWith):
            prefix = spark_filter.value
            if edm is not EdmType.STRING or not isinstance(prefix, str) or any(ord(c) >= _PREFIX_SAFE_BELOW for c in prefix):
                return None
            return ref.startswith(prefix), True
        if isinstance(spark_filter, (sds.GreaterThan, sds.GreaterThanOrEqual, sds.LessThan, sds.LessThanOrEqual)):
            return _order(ref, edm, spark_filter)
    except (TableValidationError, TypeError, ValueError, OverflowError):
        return None  # a literal the property's type cannot hold: Spark compares it
    return None


def _instant(value: Any) -> datetime | None:
    """A timestamp literal as an aware UTC datetime (Spark gives a zone; a value without one is UTC)."""
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _equal(ref: Any, edm: EdmType, value: Any) -> tuple[Filter, bool] | None:
    if value is None or edm is EdmType.BINARY:
        return None
    if edm is EdmType.DATETIME:
        instant = _instant(value)
        return None if instant is None else ((ref >= instant) & (ref < instant + _WIDENED), False)
    if edm is EdmType.DOUBLE and (not isinstance(value, (int, float)) or not math.isfinite(value)):
        return None
    if edm is EdmType.GUID:
        import uuid

        if not isinstance(value, str) or str(uuid.UUID(value)) != value:
            return None
        return ref == value, False  # the service compares Guids, Spark their text: Spark checks again
    if edm is EdmType.STRING and not isinstance(value, str):
        return None
    return ref == value, True


def _order(ref: Any, edm: EdmType, spark_filter: Any) -> tuple[Filter, bool] | None:
    value = spark_filter.value
    if edm in (EdmType.BOOLEAN, EdmType.GUID, EdmType.BINARY) or value is None:
        return None
    greater = isinstance(spark_filter, (sds.GreaterThan, sds.GreaterThanOrEqual))
    strict = isinstance(spark_filter, (sds.GreaterThan, sds.LessThan))
    if edm is EdmType.DOUBLE and (greater or not isinstance(value, (int, float)) or not math.isfinite(value)):
        return None  # Spark sorts NaN above every number; the service never matches it
    if edm is EdmType.STRING and (not isinstance(value, str) or any(ord(c) >= _ORDER_SAFE_BELOW for c in value)):
        return None
    if edm is EdmType.DATETIME:
        instant = _instant(value)
        if instant is None:
            return None
        # Spark sees each value floored to its microsecond (x > t there is x >= t + 1 us on the service),
        # and some targets compare DateTimes in milliseconds: > and <= are sent widened, and checked again.
        if greater:
            return (ref >= instant), not strict
        return (ref < instant if strict else ref < instant + _WIDENED), strict
    if greater:
        return (ref > value if strict else ref >= value), True
    return (ref < value if strict else ref <= value), True


# ---------------------------------------------------------------- writing


#: What a write task did not write: (PartitionKey, RowKey, reason) per entity.
Failures = list[tuple[str | None, str | None, str]]
#: The failures a commit message carries per partition (the count says how many there were).
_FAILURES_KEPT = 100


@dataclass
class PartitionOutcome(sds.WriterCommitMessage):
    """A write task's commit message: its partition, the entities it wrote and the ones it did not."""

    partition: int
    written: int = 0
    failed: int = 0
    failures: Failures = field(default_factory=list)

    def fail(self, pk: str | None, rk: str | None, reason: str) -> None:
        self.failed += 1
        if len(self.failures) < _FAILURES_KEPT:
            self.failures.append((pk, rk, reason))


class TableWriteError(TableServiceError):
    """Some entities of a Spark write were not written.

    ``failures`` maps each Spark partition to its ``(PartitionKey, RowKey, reason)`` triples (the
    first 100 of each), ``written`` each partition's count of entities written.
    """

    def __init__(self, failures: dict[int, Failures], written: dict[int, int], failed: int) -> None:
        shown = []
        for index, items in sorted(failures.items()):
            for pk, rk, reason in items[:3]:
                shown.append(f"partition {index}: PartitionKey={pk!r}, RowKey={rk!r}: {reason}")
            if len(items) > 3:
                shown.append(f"partition {index}: ... {len(items) - 3} more")
        super().__init__(
            f"{failed} entities were not written, in partitions {sorted(failures)} "
            f"({sum(written.values())} were): " + "; ".join(shown)
        )
        self.failures = failures
        self.written = written


class _Writer(sds.DataSourceArrowWriter):
    def __init__(self, options: _Options, schema: StructType, encryption: EngineEncryption | None = None) -> None:
        self.options = options
        columns = [name.strip() for name in (options.text("encryptColumns") or "").split(",") if name.strip()]
        #: What the write encrypts: the ``encryptColumns`` option's columns, the session's resolvers.
        self.encryption = engine_encryption(
            None if encryption is None else encryption.policy, None if encryption is None else encryption.resolver,
            columns, writing=True,
        )
        mode = (options.text("writeMode") or "insert").lower()
        if mode not in ("insert", "merge", "replace"):
            raise TableValidationError("writeMode", "the option is insert, merge or replace", f"got {mode!r}")
        self.mode: BulkMode = mode  # type: ignore[assignment]
        names = [item.name for item in schema.fields]
        for key in ("PartitionKey", "RowKey"):
            if key not in names:
                raise TableValidationError(key, "a frame written to a table needs PartitionKey and RowKey columns")
        self.edm_types = edm_type_overrides(options.edm_types(), names)
        self.max_workers = options.integer("maxWorkers", 8)

    def write(self, iterator: Iterator[Any]) -> PartitionOutcome:
        from pyspark import TaskContext

        context = TaskContext.get()
        outcome = PartitionOutcome(context.partitionId() if context is not None else 0)
        with self.options.shared_client() as client:
            for batch in iterator:
                if batch.num_rows:
                    self._write_batch(client, batch, outcome)
        return outcome

    def _write_batch(self, client: CloudTableClient, batch: Any, outcome: PartitionOutcome) -> None:
        try:
            result = client.write_arrow(
                self.options.table, batch, self.mode, edm_types=self.edm_types, max_workers=self.max_workers,
                options=None if self.encryption is None else self.encryption.options(),
            )
        except Exception as exc:  # noqa: BLE001 - the batch's rows are reported, not lost in a task
            reason = f"{type(exc).__name__}: {exc}"
            for pk, rk in zip(batch.column("PartitionKey").to_pylist(), batch.column("RowKey").to_pylist()):
                outcome.fail(pk, rk, reason)
            return
        outcome.written += len(result.succeeded)
        for failure in result.failed:
            outcome.fail(failure.entity.PartitionKey, failure.entity.RowKey, f"{type(failure.error).__name__}: {failure.error}")

    def commit(self, messages: list[sds.WriterCommitMessage | None]) -> None:
        outcomes = [message for message in messages if isinstance(message, PartitionOutcome)]
        written = {outcome.partition: outcome.written for outcome in outcomes}
        _logger.info("wrote %d entities to %s: %s", sum(written.values()), self.options.table, written)
        failed = sum(outcome.failed for outcome in outcomes)
        if failed:
            raise TableWriteError({o.partition: o.failures for o in outcomes if o.failed}, written, failed)

    def abort(self, messages: list[sds.WriterCommitMessage | None]) -> None:
        outcomes = [message for message in messages if isinstance(message, PartitionOutcome)]
        _logger.warning(
            "a write to %s failed; the tasks that finished wrote %d entities (they stay written)",
            self.options.table, sum(outcome.written for outcome in outcomes),
        )
