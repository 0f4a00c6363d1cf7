"""Tables as data frames: load sales from pandas, analyse them with Arrow, pandas and Dask, write a summary back.

1. A pandas DataFrame of sales (nullable integers, booleans, UTC timestamps) is written
   as entities with ``client.write_pandas`` (one entity a row; missing values left out).
2. The table is read back as a ``pyarrow.Table`` (``to_arrow``) and as a DataFrame
   (``to_pandas``), with the same values and dtypes as were written.
3. ``tablesdk.dask.read_table`` reads it again in PartitionKey ranges as a Dask DataFrame
   and totals each region; ``tablesdk.dask.write_table`` writes the totals to a second table.

Needs the ``dask`` extra: ``pip install '.[dask]'`` in a checkout (see README's Install). Runs against the account in
``AZURE_STORAGE_CONNECTION_STRING``, or else the bundled emulator started in-process:

    python samples/data_frames.py [--format json|atom] [--rows 500]
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator

import dask
import pandas as pd
import pyarrow as pa

import tablesdk.dask
from tablesdk import CloudStorageAccount, CloudTableClient

REGIONS = ("emea", "apac", "amer")


def sales_frame(rows: int) -> pd.DataFrame:
    """``rows`` sales across the regions; every seventh has no discount and every fifth is unpaid yet."""
    return pd.DataFrame({
        "PartitionKey": [REGIONS[n % len(REGIONS)] for n in range(rows)],
        "RowKey": [f"sale-{n:06d}" for n in range(rows)],
        "Units": pd.array([1 + n % 9 for n in range(rows)], dtype="Int32"),
        "Cents": pd.array([250 * (1 + n % 40) for n in range(rows)], dtype="Int64"),
        "Discount": pd.array([None if n % 7 == 0 else n % 15 for n in range(rows)], dtype="Int32"),
        "Paid": pd.array([None if n % 5 == 0 else n % 2 == 0 for n in range(rows)], dtype="boolean"),
        "At": pd.date_range("2024-01-01", periods=rows, freq="37min", tz="UTC", unit="ns"),
    })


@contextlib.contextmanager
def open_account(payload_format: str) -> Iterator[tuple[str, CloudTableClient]]:
    """The connection string and a client: $AZURE_STORAGE_CONNECTION_STRING, or the bundled emulator."""
    conn_str = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    if conn_str:
        with CloudStorageAccount.parse(conn_str).create_cloud_table_client(payload_format=payload_format) as client:
            yield conn_str, client
        return
    from tablesdk.devstore import DevStore

    with DevStore(port=0) as store:
        account = CloudStorageAccount.parse(store.connection_string)
        with account.create_cloud_table_client(payload_format=payload_format) as client:
            yield store.connection_string, client


def load_and_read_back(client: CloudTableClient, table: str, sales: pd.DataFrame) -> pd.DataFrame:
    """Steps 1 and 2: write the frame, read it as Arrow and as pandas, check both against it."""
    client.write_pandas(table, sales).raise_on_error()
    arrow = client.create_query(table).to_arrow()
    assert arrow.num_rows == len(sales)
    assert arrow.schema.field("Cents").type == pa.int64()
    assert arrow.schema.field("At").type == pa.timestamp("ns", tz="UTC")
    back = client.create_query(table).to_pandas().drop(columns=["Timestamp"])
    expected = sales.astype({"PartitionKey": "string", "RowKey": "string"})
    back = back.sort_values("RowKey").reset_index(drop=True)[list(expected.columns)]
    pd.testing.assert_frame_equal(back, expected.sort_values("RowKey").reset_index(drop=True))
    print(f"wrote and read back {len(back)} sales: dtypes {dict(back.dtypes.astype(str))}")
    return back


def totals_with_dask(conn_str: str, table: str, totals_table: str) -> pd.DataFrame:
    """Step 3: total each region in Dask partitions (PartitionKey ranges) and write the totals."""
    ddf = tablesdk.dask.read_table(conn_str, table, columns=["Units", "Cents"], boundaries=["apac", "emea"])
    revenue = (ddf["Units"].astype("int64") * ddf["Cents"]).rename("Cents")
    per_region = revenue.groupby(revenue.index).sum().to_frame().reset_index().assign(RowKey="total")
    with dask.config.set(scheduler="threads"):
        totals = per_region.compute()
        written = tablesdk.dask.write_table(per_region, conn_str, totals_table, mode="replace")
    assert sum(written) == len(REGIONS)
    print("revenue per region (cents):", {row.PartitionKey: int(row.Cents) for row in totals.itertuples()})
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--format", choices=["json", "atom"], default="json")
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--table", default="Sales")
    args = parser.parse_args(argv)
    sales = sales_frame(args.rows)
    totals_table = args.table + "Totals"
    with open_account(args.format) as (conn_str, client):
        for name in (args.table, totals_table):
            client.delete_table_if_exists(name)
            client.create_table(name)
        try:
            load_and_read_back(client, args.table, sales)
            totals = totals_with_dask(conn_str, args.table, totals_table)
            revenue = sales["Units"].astype("int64") * sales["Cents"]
            expected = revenue.groupby(sales["PartitionKey"]).sum()
            assert {r.PartitionKey: int(r.Cents) for r in totals.itertuples()} == {k: int(v) for k, v in expected.items()}
            stored = client.create_query(totals_table).to_pandas()
            assert sorted(stored["PartitionKey"]) == sorted(REGIONS)
        finally:
            for name in (args.table, totals_table):
                client.delete_table_if_exists(name)
    print("all steps passed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
