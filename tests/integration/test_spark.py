"""tablesdk.spark on a local[2] Spark session, against the bundled emulator and Azurite: a read equals
the serial scan, pushed filters keep what Spark keeps after a full read, a failed write names its
keys, every EDM type survives a round trip, and the account key shows in no plan and no log."""

from __future__ import annotations

import math
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

import pyarrow as pa  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, EdmDateTime, EdmType, EntityProperty  # noqa: E402
from tablesdk.devstore import DevStore  # noqa: E402

pytestmark = pytest.mark.integration

DEVSTORE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
UTC = timezone.utc


@pytest.fixture(scope="module")
def devstore() -> Iterator[DevStore]:
    with DevStore(port=0, page_size=40) as store:  # small pages: every range reads several
        yield store


@pytest.fixture(scope="module", params=["devstore", "azurite"])
def target(request: pytest.FixtureRequest) -> str:
    if request.param == "azurite":
        return str(request.getfixturevalue("azurite_connection_string"))
    return str(request.getfixturevalue("devstore").connection_string)


def client_of(connection_string: str) -> CloudTableClient:
    return CloudStorageAccount.parse(connection_string).create_cloud_table_client()


def new_table(client: CloudTableClient, entities: list[DynamicEntity]) -> str:
    name = f"tspark{uuid.uuid4().hex[:16]}"
    client.create_table(name)
    client.bulk_insert(name, entities).raise_on_error()
    return name


def source_entities() -> list[DynamicEntity]:
    """240 entities in 24 partitions: sparse properties, Int64 beyond 2^53, Guids, NaN and astral text."""
    entities = []
    for n in range(240):
        entity = DynamicEntity(f"k{n % 24:02d}", f"{n:04d}", N=n, Name=f"n{n}")
        if n % 3 == 0:
            entity["Big"] = EntityProperty(2**60 + n, EdmType.INT64)
        if n % 4 == 0:
            entity["Ok"] = n % 8 == 0
        if n % 5 == 0:
            entity["Score"] = math.nan if n % 25 == 0 else n / 4
        if n % 6 == 0:
            entity["Id"] = uuid.UUID(int=n)
        if n % 7 == 0:
            entity["Text"] = ["a", "\ue000", "\U0001f600", "b\U0001f600", "z"][n % 5]
        if n % 2 == 0:
            entity["When"] = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=n)
        entities.append(entity)
    return entities


@pytest.fixture(scope="module")
def source(target: str) -> Iterator[str]:
    with client_of(target) as client:
        name = new_table(client, source_entities())
        yield name
        client.delete_table_if_exists(name)


def load(spark: SparkSession, connection_string: str, table: str, **options: str) -> DataFrame:
    reader = spark.read.format("azuretables").option("connectionString", connection_string).option("table", table)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_a_read_in_ranges_equals_the_serial_scan(spark: SparkSession, target: str, source: str) -> None:
    frame = load(spark, target, source, boundaries='["k05", "k10", "k11", "k20"]')
    read = frame.toArrow().sort_by([("PartitionKey", "ascending"), ("RowKey", "ascending")])
    with client_of(target) as client:
        serial = client.create_query(source).to_arrow()
    assert read.num_rows == 240 and len(set(read.column("RowKey").to_pylist())) == 240  # no duplicates, no gaps
    assert read.schema.names == serial.schema.names
    kinds = {field.name: str(field.type) for field in read.schema}
    assert kinds == {
        "PartitionKey": "string", "RowKey": "string", "Timestamp": "timestamp[us, tz=UTC]", "N": "int32",
        "Name": "string", "Big": "int64", "Ok": "bool", "Score": "double", "Id": "string", "Text": "string",
        "When": "timestamp[us, tz=UTC]",
    }
    for name in serial.schema.names:
        expected = serial.column(name)
        if pa.types.is_timestamp(expected.type):  # Spark's timestamps are microseconds: the 100 ns digit floored
            expected = pa.array([None if t is None else t // 1000 for t in expected.cast(pa.int64()).to_pylist()],
                                pa.int64()).cast(pa.timestamp("us", tz="UTC"))
        got, want = read.column(name).to_pylist(), expected.to_pylist()
        assert [repr(v) for v in got] == [repr(v) for v in want], name  # repr: NaN equals NaN


def test_the_number_of_partitions_is_the_ranges(spark: SparkSession, devstore: DevStore) -> None:
    with client_of(devstore.connection_string) as client:
        table = new_table(client, source_entities()[:48])
    frame = load(spark, devstore.connection_string, table, numPartitions="3")
    assert frame.rdd.getNumPartitions() >= 2
    frame = load(spark, devstore.connection_string, table, boundaries='["k05", "k10"]')
    assert frame.rdd.getNumPartitions() == 3
    narrow = load(spark, devstore.connection_string, table, columns="N, Timestamp")
    assert narrow.columns == ["PartitionKey", "RowKey", "Timestamp", "N"]
    assert sorted(row.N for row in narrow.collect()) == list(range(48))


#: Conditions Spark pushes to the source (or keeps), each compared with Spark filtering a full read.
CONDITIONS = [
    "PartitionKey = 'k03'",
    "PartitionKey >= 'k10' AND PartitionKey < 'k12'",
    "RowKey > '0200'",
    "N > 100 AND N <= 150",
    "N IN (1, 2, 3, 48, 999)",
    "NOT (N = 5)",
    "Name LIKE 'n1%'",
    "NOT (Name LIKE 'n1%')",
    "Big >= 1152921504606847000",
    "Big = 1152921504606846997",
    "Ok = true",
    "NOT Ok",
    "Score > 10",
    "Score < 10",
    "Score = 5.0",
    "Text > 'a'",
    "Text < '\ue000'",
    "Text >= '\U0001f600'",
    "Text IN ('b\U0001f600', 'z')",
    "Id = '00000000-0000-0000-0000-00000000000c'",
    "When > timestamp'2026-01-01 01:00:00'",
    "When <= timestamp'2026-01-01 01:00:00'",
    "When = timestamp'2026-01-01 00:10:00'",
    "When >= timestamp'2026-01-01 03:00:00' AND When < timestamp'2026-01-01 03:30:00'",
    "Timestamp > timestamp'2000-01-01 00:00:00'",
    "Name IS NULL OR N = 7",
    "Big IS NOT NULL",
    "Name LIKE '%9'",
]


def test_pushed_filters_keep_what_spark_keeps_after_a_full_read(spark: SparkSession, target: str, source: str) -> None:
    frame = load(spark, target, source, numPartitions="3")
    full = spark.createDataFrame(frame.toArrow(), frame.schema)  # Spark alone filters this one

    def rows(base: DataFrame | None) -> dict[int, list[str]]:
        # Spark (4.1 to 4.3) keeps one pushed-filter plan per loaded frame: each branch loads its own.
        parts = [
            (base if base is not None else load(spark, target, source, numPartitions="3", pushFilters="true"))
            .filter(condition).select(F.lit(index).alias("i"), "RowKey")
            for index, condition in enumerate(CONDITIONS)
        ]
        union = parts[0]
        for part in parts[1:]:
            union = union.unionAll(part)
        found: dict[int, list[str]] = {index: [] for index in range(len(CONDITIONS))}
        for row in union.collect():
            found[row.i].append(row.RowKey)
        return {index: sorted(keys) for index, keys in found.items()}

    pushed, after = rows(None), rows(full)
    for index, condition in enumerate(CONDITIONS):
        assert pushed[index] == after[index], condition
    assert [condition for index, condition in enumerate(CONDITIONS) if not after[index]] == []  # each keeps some


def test_pushed_filters_leave_spark_only_the_rest(spark: SparkSession, devstore: DevStore) -> None:
    with client_of(devstore.connection_string) as client:
        table = new_table(client, source_entities()[:24])
    frame = load(spark, devstore.connection_string, table, pushFilters="true")
    plan = frame.filter("N > 3 AND Name LIKE 'n1%' AND Name LIKE '%2'")._jdf.queryExecution().optimizedPlan().toString()
    assert "EndsWith" in plan and "StartsWith" not in plan and "> 3" not in plan


def test_without_push_filters_a_loaded_frame_serves_every_query(spark: SparkSession, devstore: DevStore) -> None:
    with client_of(devstore.connection_string) as client:
        table = new_table(client, source_entities()[:48])
    frame = load(spark, devstore.connection_string, table)
    assert frame.filter("N > 40").count() == 7
    assert frame.count() == 48  # Spark reuses a frame's read plan: it must hold no filter of an earlier query
    assert "> 40" in frame.filter("N > 40")._jdf.queryExecution().optimizedPlan().toString()


def test_a_write_names_the_keys_it_did_not_write(spark: SparkSession, devstore: DevStore) -> None:
    cs = devstore.connection_string
    with client_of(cs) as client:
        table = new_table(client, [DynamicEntity("p1", "r005", N=-1)])
        rows = [(f"p{n % 2}", f"r{n:03d}", n) for n in range(20)]
        frame = spark.createDataFrame(rows, "PartitionKey string, RowKey string, N int").repartition(2)
        with pytest.raises(Exception) as caught:
            frame.write.format("azuretables").option("connectionString", cs).option("table", table).mode("append").save()
        assert "PartitionKey='p1', RowKey='r005'" in str(caught.value) and "1 entities were not written" in str(caught.value)
        stored = {e.RowKey: e["N"] for e in client.create_query(table)}
        assert len(stored) == 20 and stored["r005"] == -1
        frame.write.format("azuretables").option("connectionString", cs).option("table", table) \
            .option("writeMode", "replace").mode("append").save()
        assert {e.RowKey: e["N"] for e in client.create_query(table)} == {f"r{n:03d}": n for n in range(20)}


def round_trip_entities() -> list[DynamicEntity]:
    return [
        DynamicEntity(
            "p", f"r{n}", Id=uuid.UUID(int=n * 7919 + 1), Big=EntityProperty(2**53 + n * 2 + 1, EdmType.INT64),
            Created=EdmDateTime(2026, 3, 4, 5, 6, 7, 890123, UTC, ticks_remainder=n % 10), Data=bytes([n, 0, 255]),
            Small=EntityProperty(n, EdmType.INT32), Ratio=n / 3,
            **({"Flag": n % 2 == 0} if n % 3 else {}),
        )
        for n in range(12)
    ]


def test_every_edm_type_survives_a_round_trip(spark: SparkSession, target: str) -> None:
    with client_of(target) as client:
        table = new_table(client, round_trip_entities())
        copy = f"tsparkcopy{uuid.uuid4().hex[:12]}"
        client.create_table(copy)
        frame = spark.read.format("azuretables").option("connectionString", target).option("table", table) \
            .schema("PartitionKey string, RowKey string, Id string, Big bigint, Created string, Data binary, "
                    "Small int, Ratio double, Flag boolean").load()
        frame.write.format("azuretables").option("connectionString", target).option("table", copy) \
            .option("edmTypes", '{"Id": "Edm.Guid", "Created": "Edm.DateTime"}').mode("append").save()
        before = {e.RowKey: e for e in client.create_query(table)}
        after = {e.RowKey: e for e in client.create_query(copy)}
        assert sorted(after) == sorted(before)
        for key, entity in before.items():
            written = after[key]
            for name in ("Id", "Big", "Created", "Data", "Small", "Ratio", "Flag"):
                if name not in entity:
                    assert name not in written, (key, name)  # a null stays absent
                    continue
                assert written.edm_type(name) is entity.edm_type(name), (key, name)
                assert written[name] == entity[name], (key, name)
                if name == "Created":
                    assert written[name].ticks_remainder == entity[name].ticks_remainder
        client.delete_table_if_exists(table)
        client.delete_table_if_exists(copy)


def test_a_timestamp_column_refuses_to_drop_the_100ns_digit(spark: SparkSession, devstore: DevStore) -> None:
    with client_of(devstore.connection_string) as client:
        table = new_table(client, round_trip_entities()[:3])
    frame = load(spark, devstore.connection_string, table)
    with pytest.raises(Exception, match="'Created' at PartitionKey='p', RowKey='r1' has a 100 ns digit"):
        frame.select("Created").collect()
    floored = load(spark, devstore.connection_string, table, truncateDateTimes="true").select("RowKey", "Created").collect()
    assert {row.RowKey: row.Created.astimezone(UTC).microsecond for row in floored} == {f"r{n}": 890123 for n in range(3)}


def test_the_account_key_is_in_no_plan_and_no_log(spark: SparkSession, devstore: DevStore, spark_log: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    cs = devstore.connection_string
    assert DEVSTORE_KEY in cs
    with client_of(cs) as client:
        table = new_table(client, source_entities()[:24])
    frame = load(spark, cs, table).filter("N > 3")
    frame.explain(True)
    frame.explain("formatted")
    frame.collect()
    frame.write.format("azuretables").option("connectionString", cs).option("table", table) \
        .option("writeMode", "merge").mode("append").save()
    shown = capsys.readouterr().out
    execution = frame._jdf.queryExecution()
    texts = [shown, execution.toString(), execution.logical().toString(), execution.executedPlan().toString(),
             spark_log.read_text(encoding="utf-8")]
    assert "azuretables" in shown and "N#" in shown
    assert " INFO " in texts[-1] and "azuretables" in texts[-1]  # the log captured the queries
    for text in texts:
        assert DEVSTORE_KEY not in text
        assert DEVSTORE_KEY[:20] not in text


def test_the_sample_runs_on_the_session(spark: SparkSession, devstore: DevStore) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "samples"))
    try:
        import spark_tables
    finally:
        sys.path.pop(0)
    with client_of(devstore.connection_string) as client:
        stored = spark_tables.run(spark, devstore.connection_string, client, f"tsample{uuid.uuid4().hex[:10]}", 120)
    assert stored == spark_tables.expected_totals(120) and len(stored) == 4


def test_the_options_map_in_a_plan_is_redacted(spark: SparkSession, devstore: DevStore) -> None:
    cs = devstore.connection_string
    with client_of(cs) as client:
        table = new_table(client, source_entities()[:4])
    command = f"CREATE OR REPLACE TEMPORARY VIEW spark_redaction USING azuretables OPTIONS (connectionString '{cs}', table '{table}')"

    def explained() -> str:
        return "\n".join(row[0] for row in spark.sql(f"EXPLAIN EXTENDED {command}").collect())

    shown = explained()
    assert "connectionString" in shown and "redacted" in shown and DEVSTORE_KEY not in shown
    keys = ("spark.sql.redaction.options.regex", "spark.sql.redaction.string.regex")
    saved = {key: spark.conf.get(key, None) for key in keys}
    spark.conf.unset(keys[0])
    spark.conf.unset(keys[1])
    try:
        assert DEVSTORE_KEY in explained()  # what Spark shows without register()'s patterns
    finally:
        for key, value in saved.items():
            if value is not None:
                spark.conf.set(key, value)
    spark.sql(command)
    assert spark.table("spark_redaction").count() == 4
    assert DEVSTORE_KEY not in explained()
