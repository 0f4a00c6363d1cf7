"""A SQL report with DuckDB over a table, streamed a page at a time as Arrow record batches.

1. Sensor readings (Int64 counters beyond 2**53, DateTimes with their seventh fractional
   digit) are written as entities.
2. The query's pages (``iter_arrow_batches``) become one ``pyarrow.RecordBatchReader``, and
   DuckDB runs a report over it with SQL, pulling one page at a time: nothing holds the whole
   table.
3. The report is checked against the same figures computed from ``to_arrow()``.

Needs pyarrow (the ``arrow`` extra) and duckdb: ``pip install '.[arrow]' duckdb`` in a checkout (see
README's Install). Runs against the account in ``AZURE_STORAGE_CONNECTION_STRING``, or else the
bundled emulator started in-process:

    python samples/duckdb_report.py [--rows 500]
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from datetime import timezone

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, EdmDateTime, EdmType, EntityProperty

SENSORS = 4


def reading(n: int) -> DynamicEntity:
    return DynamicEntity(
        f"sensor-{n % SENSORS}", f"{n:06d}", Level=(n * 7) % 100 / 4,
        Counter=EntityProperty(2**55 + n * 3, EdmType.INT64),
        At=EdmDateTime(2024, 6, 1, n % 24, n % 60, 0, 0, timezone.utc, ticks_remainder=n % 10),
    )


@contextlib.contextmanager
def open_client() -> Iterator[CloudTableClient]:
    """A client on $AZURE_STORAGE_CONNECTION_STRING, or on the bundled emulator started here."""
    conn_str = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    if conn_str:
        with CloudStorageAccount.parse(conn_str).create_cloud_table_client() as client:
            yield client
        return
    from tablesdk.devstore import DevStore

    with DevStore(port=0) as store:
        with CloudStorageAccount.parse(store.connection_string).create_cloud_table_client() as client:
            yield client


def report(client: CloudTableClient, table: str) -> list[tuple[str, int, float, int, int]]:
    """Per sensor: readings, mean level, the largest counter and the latest time (ns since 1970)."""
    query = client.create_query(table).page_size(100)
    schema = query.take(100).to_arrow().schema  # one schema for every batch of the stream
    reader = pa.RecordBatchReader.from_batches(schema, query.iter_arrow_batches(schema=schema))  # noqa: F841
    relation = duckdb.sql(
        'select PartitionKey, count(*), avg(Level), max(Counter), max(epoch_ns("At"))'
        " from reader group by PartitionKey order by PartitionKey"
    )
    assert relation is not None
    return [tuple(row) for row in relation.fetchall()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--table", default="Sensors")
    args = parser.parse_args(argv)
    with open_client() as client:
        client.delete_table_if_exists(args.table)
        client.create_table(args.table)
        try:
            client.bulk_insert(args.table, [reading(n) for n in range(args.rows)]).raise_on_error()
            rows = report(client, args.table)
            table = client.create_query(args.table).to_arrow()
            for sensor, count, mean, counter, latest in rows:
                mine = table.filter(pc.equal(table.column("PartitionKey"), sensor))
                assert count == mine.num_rows and abs(mean - pc.mean(mine.column("Level")).as_py()) < 1e-9
                assert counter == pc.max(mine.column("Counter")).as_py()  # exact beyond 2**53
                assert latest == pc.max(mine.column("At").cast(pa.int64())).as_py()  # to the 100 ns digit
                print(f"{sensor}: {count} readings, mean level {mean:.2f}, counter {counter}, latest {latest} ns")
        finally:
            client.delete_table_if_exists(args.table)
    print("all steps passed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
