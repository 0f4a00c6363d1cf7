"""Sales through Polars: write a frame as entities, query the table lazily with the filter sent to the service, write a summary.

1. A Polars DataFrame of orders (a Guid order id, Int64 cents, UTC timestamps, a Boolean with
   nulls) is written with ``tablesdk.polars.write_table``; ``edm_types`` says the order id is a
   Guid, since a Polars frame holds it as text.
2. ``tablesdk.polars.scan_table`` is a LazyFrame over the table: a filter on the region (the
   PartitionKey) and on the amount goes to the service as ``$filter``, the columns the query
   uses as ``$select``, and Polars totals each region from what arrives.
3. The totals are written to a second table and checked against the same query run on the
   original frame.

Needs the ``polars`` extra: ``pip install '.[polars]'`` in a checkout (see README's Install). Runs
against the account in ``AZURE_STORAGE_CONNECTION_STRING``, or else the bundled emulator started
in-process:

    python samples/polars_sales.py [--rows 500]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import polars as pl

import tablesdk.polars
from tablesdk import CloudStorageAccount, CloudTableClient, EdmType

REGIONS = ("amer", "apac", "emea")


def orders_frame(rows: int) -> pl.DataFrame:
    """``rows`` orders across the regions; every fifth has not been paid yet (null)."""
    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    return pl.DataFrame({
        "PartitionKey": [REGIONS[n % len(REGIONS)] for n in range(rows)],
        "RowKey": [f"order-{n:06d}" for n in range(rows)],
        "OrderId": [str(uuid.UUID(int=n + 1)) for n in range(rows)],
        "Cents": pl.Series([(n % 50 + 1) * 1_999 for n in range(rows)], dtype=pl.Int64),
        "Paid": [None if n % 5 == 0 else n % 2 == 0 for n in range(rows)],
        "At": [start + timedelta(minutes=37 * n) for n in range(rows)],
    })


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


def large_orders_by_region(orders: pl.LazyFrame) -> pl.LazyFrame:
    """Paid orders of at least $500 outside EMEA, totalled per region."""
    return (
        orders.filter((pl.col("PartitionKey") < "emea") & (pl.col("Cents") >= 50_000) & pl.col("Paid"))
        .group_by("PartitionKey")
        .agg(pl.col("Cents").sum().alias("Cents"), pl.len().alias("Orders"))
        .sort("PartitionKey")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--table", default="Orders")
    args = parser.parse_args(argv)
    orders = orders_frame(args.rows)
    totals_table = args.table + "Totals"
    with open_account() as (conn_str, client):
        for name in (args.table, totals_table):
            client.delete_table_if_exists(name)
            client.create_table(name)
        try:
            tablesdk.polars.write_table(orders, conn_str, args.table, edm_types={"OrderId": EdmType.GUID}).raise_on_error()
            first = client.get_entity(args.table, "amer", "order-000000")
            assert first.edm_type("OrderId") is EdmType.GUID and first.edm_type("Cents") is EdmType.INT64

            scan = tablesdk.polars.scan_table(conn_str, args.table, partitions=3)
            totals = large_orders_by_region(scan).collect()
            expected = large_orders_by_region(orders.lazy()).collect()
            assert totals.equals(expected), (totals, expected)
            print(f"large paid orders per region:\n{totals}")

            written = tablesdk.polars.write_table(totals.with_columns(RowKey=pl.lit("large")), conn_str, totals_table)
            assert len(written.succeeded) == totals.height and not written.failed
            back = tablesdk.polars.read_table(conn_str, totals_table).sort("PartitionKey")
            assert back.select("PartitionKey", "Cents", "Orders").equals(totals)
        finally:
            for name in (args.table, totals_table):
                client.delete_table_if_exists(name)
    print("all steps passed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
