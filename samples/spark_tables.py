"""A table in Spark: read readings in PartitionKey ranges, total them with a pushed filter, write the totals back.

1. Readings (sensor, time, value, a Guid per reading) are written with ``bulk_insert``.
2. Spark reads the table through the ``azuretables`` data source (``tablesdk.spark``), one
   Spark partition per PartitionKey range, and checks the count against the table.
3. A filtered aggregate: ``Value > 10`` is sent to the service as ``$filter``; Spark totals
   each sensor's values and writes one entity a sensor to a second table (``writeMode`` replace).
4. The readings are copied through Spark with their Guid kept (``edmTypes``).

Needs the ``spark`` extra and Java 17: ``pip install '.[spark]'`` in a checkout (see README's
Install). Runs a ``local[2]`` Spark session against the account in
``AZURE_STORAGE_CONNECTION_STRING``, or else the bundled emulator started in-process:

    python samples/spark_tables.py [--readings 300]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import uuid
from collections.abc import Iterator

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import tablesdk.spark
from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, EdmType

SENSORS = ("sensor-a", "sensor-b", "sensor-c", "sensor-d")


def readings(count: int) -> list[DynamicEntity]:
    """``count`` readings spread over the sensors, each with its own Guid."""
    return [
        DynamicEntity(SENSORS[n % len(SENSORS)], f"{n:06d}", Value=float(n % 20), Reading=uuid.UUID(int=n + 1))
        for n in range(count)
    ]


def expected_totals(count: int) -> dict[str, float]:
    """What step 3 writes: each sensor's total of the readings above 10 (sensors with none have no total)."""
    totals: dict[str, float] = {}
    for entity in readings(count):
        if entity["Value"] > 10:
            totals[entity.PartitionKey] = totals.get(entity.PartitionKey, 0.0) + entity["Value"]
    return totals


@contextlib.contextmanager
def open_account() -> Iterator[tuple[str, CloudTableClient]]:
    """The connection string and a client: $AZURE_STORAGE_CONNECTION_STRING, or the bundled emulator."""
    conn_str = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    if conn_str:
        with CloudStorageAccount.parse(conn_str).create_cloud_table_client() as client:
            yield conn_str, client
        return
    from tablesdk.devstore import DevStore

    with DevStore(port=0) as store:
        with CloudStorageAccount.parse(store.connection_string).create_cloud_table_client() as client:
            yield store.connection_string, client


def run(spark: SparkSession, conn_str: str, client: CloudTableClient, table: str, count: int) -> dict[str, float]:
    """Steps 1 to 4 on ``table`` (and ``table`` + Totals, + Copy); returns each sensor's total."""
    totals_table, copy_table = table + "Totals", table + "Copy"
    for name in (table, totals_table, copy_table):
        client.delete_table_if_exists(name)
        client.create_table(name)
    try:
        client.bulk_insert(table, readings(count)).raise_on_error()
        tablesdk.spark.register(spark)
        frame = spark.read.format("azuretables").option("connectionString", conn_str).option("table", table) \
            .option("boundaries", '["sensor-b", "sensor-c"]').load()
        assert frame.rdd.getNumPartitions() == 3 and frame.count() == count
        totals = frame.filter("Value > 10").groupBy("PartitionKey").agg(F.sum("Value").alias("Total")) \
            .withColumn("RowKey", F.lit("total"))
        totals.write.format("azuretables").option("connectionString", conn_str).option("table", totals_table) \
            .option("writeMode", "replace").mode("append").save()
        frame.write.format("azuretables").option("connectionString", conn_str).option("table", copy_table) \
            .option("edmTypes", '{"Reading": "Edm.Guid"}').mode("append").save()
        copied = client.create_query(copy_table).first()
        assert copied is not None and copied.edm_type("Reading") is EdmType.GUID
        stored = {entity.PartitionKey: entity["Total"] for entity in client.create_query(totals_table)}
        print("total of the readings above 10, per sensor:", stored)
        assert stored == expected_totals(count)
        return stored
    finally:
        for name in (table, totals_table, copy_table):
            client.delete_table_if_exists(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--readings", type=int, default=300)
    parser.add_argument("--table", default="Readings")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers use this interpreter and its tablesdk
    spark = (SparkSession.builder.master("local[2]").appName("tablesdk-sample")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "false").getOrCreate())
    try:
        with open_account() as (conn_str, client):
            stored = run(spark, conn_str, client, args.table, args.readings)
    finally:
        spark.stop()
    assert stored == expected_totals(args.readings)
    print("all steps passed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
