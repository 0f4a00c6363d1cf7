"""tablesdk.spark reads a ChangeWindow (the ``since`` option, the window's text) on a local[2] Spark
session, against the bundled emulator and Azurite: the scenarios of since_engines.py, the frame
collected twice (Spark reads again for every action)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytest.importorskip("pyspark")

from faults import FaultProxy  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from since_engines import Row, on_azurite, on_the_emulator, upsert  # noqa: E402

from tablesdk import ChangeWindow, CloudTableClient, Watermark  # noqa: E402

pytestmark = pytest.mark.integration


def load(spark: SparkSession, connection_string: str, table: str, **options: str) -> DataFrame:
    reader = spark.read.format("azuretables").option("connectionString", connection_string).option("table", table)
    return reader.options(**options).load()


def spark_engine(spark: SparkSession) -> Callable[[str, str, ChangeWindow, list[str]], Callable[[], list[Row]]]:
    def engine(connection_string: str, table: str, window: ChangeWindow, boundaries: list[str]) -> Callable[[], list[Row]]:
        frame = load(spark, connection_string, table, since=window.to_string(), boundaries=str(boundaries).replace("'", '"'))
        return lambda: sorted((row.PartitionKey, row.RowKey, row.V) for row in frame.collect())

    return engine


def test_the_scenarios_on_the_emulator(spark: SparkSession) -> None:
    on_the_emulator(spark_engine(spark))


def test_the_scenarios_on_azurite(
    spark: SparkSession, proxy: FaultProxy, azurite_connection_string: str, direct: CloudTableClient,
    fault_table_name: str,
) -> None:
    on_azurite(spark_engine(spark), proxy, azurite_connection_string, direct, fault_table_name)


def test_a_given_schema_and_pushed_filters_keep_the_window(
    spark: SparkSession, direct: CloudTableClient, fault_table_name: str, azurite_connection_string: str,
) -> None:
    for n, pk in enumerate("abcd"):
        upsert(direct, fault_table_name, pk, "1", n)
    seen = {("c", "1", next(e.etag for e in direct.create_query(fault_table_name) if e.PartitionKey == "c"))}
    window = ChangeWindow(Watermark(None, seen=seen), until=max(e.Timestamp for e in direct.create_query(fault_table_name)))
    # The schema names V only: the keys, Timestamp and ETag the window needs are asked for all the same.
    only_v = (spark.read.format("azuretables").schema("V int").option("connectionString", azurite_connection_string)
              .option("table", fault_table_name).option("since", window.to_string()).load())
    assert sorted(row.V for row in only_v.collect()) == [0, 1, 3]  # c/1: seen, same keys and ETag
    pushed = load(spark, azurite_connection_string, fault_table_name, since=window.to_string(), pushFilters="true")
    assert sorted(row.V for row in pushed.filter("V >= 1").collect()) == [1, 3]


def test_a_bare_watermark_is_refused_with_the_way_to_a_window(spark: SparkSession, azurite_connection_string: str) -> None:
    frame = (spark.read.format("azuretables").schema("PartitionKey string, RowKey string, V int")
             .option("connectionString", azurite_connection_string).option("table", "anytable")
             .option("since", Watermark.start().to_string()).load())
    with pytest.raises(Exception, match="ChangeWindow"):
        frame.collect()
