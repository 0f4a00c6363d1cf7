"""Entities/second for iterating 10,000 entities from Azurite: tablesdk next to azure-data-tables.

    bash benchmarks/setup-venv.sh            # once: .bench-venv with tablesdk and azure-data-tables 12.7.0
    .bench-venv/bin/python benchmarks/query.py [--url http://127.0.0.1:10102/devstoreaccount1] [--repeats 3]

Without --url it starts its own Azurite. Every measurement runs in this process against the same
table; the ratios compare each client with azure-data-tables and with a raw requests + json.loads scan.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import sys
from email.utils import formatdate
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import requests  # noqa: E402
from _common import azurite, connection_string, machine, median_rate, sample_properties, DEVSTORE_KEY  # noqa: E402

from tablesdk import CloudStorageAccount, DynamicEntity, MergeOption, SaveChangesOptions  # noqa: E402

PARTITIONS, PER_PARTITION = 100, 100


def load(client, table: str) -> None:  # type: ignore[no-untyped-def]
    for p in range(PARTITIONS):
        ctx = client.get_table_service_context()
        for r in range(PER_PARTITION):
            n = p * PER_PARTITION + r
            ctx.add_object(table, DynamicEntity(PartitionKey=f"p{p:03d}", RowKey=f"{r:04d}", **sample_properties(n)))
        ctx.save_changes(SaveChangesOptions.BATCH)


def raw_scan(endpoint: str, table: str) -> int:
    """The floor: one session, SharedKey signed by hand, json.loads, no entity objects."""
    session = requests.Session()
    key = base64.b64decode(DEVSTORE_KEY)
    path = f"/{endpoint.split('/', 3)[3]}/{table}()"
    count, params = 0, {}
    while True:
        date = formatdate(usegmt=True)
        sig = base64.b64encode(hmac.new(key, f"GET\n\n\n{date}\n/devstoreaccount1{path}".encode(), hashlib.sha256).digest())
        headers = {"x-ms-date": date, "x-ms-version": "2019-02-02", "Accept": "application/json;odata=minimalmetadata",
                   "Authorization": f"SharedKey devstoreaccount1:{sig.decode()}"}
        response = session.get(f"{endpoint}/{table}()", headers=headers, params=params)
        count += len(json.loads(response.content)["value"])
        npk = response.headers.get("x-ms-continuation-NextPartitionKey")
        if not npk:
            return count
        params = {"NextPartitionKey": npk, "NextRowKey": response.headers.get("x-ms-continuation-NextRowKey", "")}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from azure.data.tables import TableServiceClient

    with azurite(args.url) as endpoint:
        conn = connection_string(endpoint)
        client = CloudStorageAccount.parse(conn).create_cloud_table_client()
        table = "querybench"
        client.delete_table_if_exists(table)
        client.create_table(table)
        load(client, table)
        azure_table = TableServiceClient.from_connection_string(conn).get_table_client(table)

        def azure_scan() -> int:
            return sum(1 for _ in azure_table.list_entities(results_per_page=1000))

        def tablesdk_client_scan() -> int:
            return sum(1 for _ in client.create_query(table))

        def tablesdk_tracked_scan() -> int:
            return sum(1 for _ in client.get_table_service_context().create_query(table))

        def tablesdk_untracked_context_scan() -> int:
            ctx = client.get_table_service_context(merge_option=MergeOption.NO_TRACKING)
            return sum(1 for _ in ctx.create_query(table))

        runs = {
            "raw requests + json.loads (floor)": lambda: raw_scan(endpoint, table),
            "azure-data-tables 12.7 list_entities": azure_scan,
            "tablesdk client.create_query (untracked)": tablesdk_client_scan,
            "tablesdk context, NO_TRACKING": tablesdk_untracked_context_scan,
            "tablesdk context, tracked (APPEND_ONLY)": tablesdk_tracked_scan,
        }
        for run in runs.values():
            assert run() == PARTITIONS * PER_PARTITION
        results = {name: median_rate(run, args.repeats) for name, run in runs.items()}
        client.delete_table(table)

    azure_rate = results["azure-data-tables 12.7 list_entities"][0]
    floor = results["raw requests + json.loads (floor)"][0]
    print(f"Iterating {PARTITIONS * PER_PARTITION:,} entities (10 properties) from Azurite 3.37.0; {machine()}")
    print(f"median of {args.repeats}; ratios against azure-data-tables and against the raw floor")
    print(f"{'client':45} {'entities/s':>11} {'x azure':>8} {'x floor':>8}")
    for name, (rate, _) in results.items():
        print(f"{name:45} {rate:11,.0f} {rate / azure_rate:8.2f} {rate / floor:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
