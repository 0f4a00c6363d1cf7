"""Scan throughput: iterating 10,000 entities from Azurite, tablesdk next to azure-data-tables and a raw floor.

    bash benchmarks/setup-venv.sh            # once: .bench-venv with tablesdk and azure-data-tables 12.7.0
    .bench-venv/bin/python benchmarks/query.py [--url URL] [--repeats 5]
    .bench-venv/bin/python benchmarks/query.py --latency 0.02 [--workers 8]   # parallel range scan

Without --url it starts its own Azurite. The table holds 100 partitions x 100
entities with ten properties of mixed types; the DateTime property comes in the
forms Python clients and the service write: six digits (``.123456Z``), trimmed
(``.94687Z``, ``.1Z``) and whole seconds (``Z``). They are stored exactly so,
through pre-built batch bodies.

Every contender runs once per repetition, in turn (interleaved), and the table
reports the median entities/s with the min-max range, the client's CPU time per
entity (``time.process_time``: this process only; Azurite runs in its own), and
the ratios to azure-data-tables 12.7 and to a raw floor (requests, a hand-signed
GET, ``json.loads``, no entity objects) measured in the same run.

With ``--latency S`` every request goes through a proxy (its own process) that
holds it S seconds, like a network round trip, and the contenders are one scan
against ``TableQuery.iter_parallel(workers)`` over PartitionKey ranges (found by
probing, and given: 25 ranges of equal size); the relay's own CPU time is
printed too. Iteration reads the next page ahead (``TableQuery.read_ahead``,
on by default); one contender of each kind runs with ``read_ahead(False)``,
one request at a time, which is what the client's CPU alone allows. ``--partitions N`` sets the table's size (N x 100 entities; 100 by
default, 1,000 for the 100,000 entities a parallel scan is more often used for).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import sys
import uuid
from datetime import datetime, timedelta, timezone
from email.utils import formatdate
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

import requests  # noqa: E402
from _common import (  # noqa: E402
    DEVSTORE_KEY, Series, azurite, connection_string, interleave, latency_proxy, machine, report,
)

from tablesdk import BatchOperation, BatchOperationKind, CloudStorageAccount, CloudTableClient, MergeOption  # noqa: E402
from tablesdk._entities._edm import EdmType, EntityPayload  # noqa: E402

PARTITIONS, PER_PARTITION = 100, 100


def known_boundaries(partitions: int = PARTITIONS) -> list[str]:
    """What a caller who knows the keys passes: 25 ranges of equal size (4 partitions each of 100)."""
    step = max(1, partitions // 25)
    return [f"p{p:03d}" for p in range(step, partitions, step)]


KNOWN_BOUNDARIES = known_boundaries()
BASE = datetime(2024, 1, 1, tzinfo=timezone.utc)


def when_text(n: int) -> str:
    """The DateTime wire text of entity ``n``: 6-digit, trimmed and whole-second forms in turn."""
    stamp = (BASE + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%S")
    return (f"{stamp}.{n % 1_000_000:06d}Z", f"{stamp}.94687Z", f"{stamp}.1Z", f"{stamp}Z")[n % 4]


def entity_body(p: int, r: int) -> bytes:
    """One entity as a Python client writes it (Int64 and DateTime annotated), exactly."""
    n = p * PER_PARTITION + r
    body: dict[str, Any] = {
        "PartitionKey": f"p{p:03d}", "RowKey": f"{r:04d}", "Name": f"entity-{n}", "Count": n % 100_000,
        "Big": str(2**40 + n), "Big@odata.type": "Edm.Int64", "Ratio": n / 7, "Ratio@odata.type": "Edm.Double",
        "Active": n % 2 == 0, "When": when_text(n), "When@odata.type": "Edm.DateTime",
        "Id": str(uuid.UUID(int=n)), "Id@odata.type": "Edm.Guid",
        "Blob": base64.b64encode(n.to_bytes(16, "big")).decode(), "Blob@odata.type": "Edm.Binary",
        "Note": "x" * 51, "Small": n % 7,
    }
    return json.dumps(body, separators=(",", ":")).encode()


def load(client: CloudTableClient, table: str, partitions: int = PARTITIONS) -> None:
    for p in range(partitions):
        ops = []
        for r in range(PER_PARTITION):
            payload = EntityPayload({"PartitionKey": f"p{p:03d}", "RowKey": f"{r:04d}"},
                                    {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING})
            ops.append(BatchOperation(BatchOperationKind.INSERT, table, f"p{p:03d}", f"{r:04d}", payload, None,
                                      body=entity_body(p, r)))
        client.execute_batch(ops)


def raw_scan(endpoint: str, table: str) -> int:
    """The floor: one session, SharedKey signed by hand, json.loads, no entity objects."""
    session = requests.Session()
    key = base64.b64decode(DEVSTORE_KEY)
    path = f"/{endpoint.split('/', 3)[3]}/{table}()"
    count = 0
    params: dict[str, str] = {}
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


def local_runs(client: CloudTableClient, endpoint: str, conn: str, table: str) -> list[tuple[Series, Any]]:
    from azure.data.tables import TableServiceClient

    azure_table = TableServiceClient.from_connection_string(conn).get_table_client(table)
    untracked = client.get_table_service_context(merge_option=MergeOption.NO_TRACKING)
    return [
        (Series("raw requests + json.loads (floor)"), lambda: raw_scan(endpoint, table)),
        (Series("azure-data-tables 12.7 list_entities"),
         lambda: sum(1 for _ in azure_table.list_entities(results_per_page=1000))),
        (Series("tablesdk client.create_query (untracked)"), lambda: sum(1 for _ in client.create_query(table))),
        (Series("tablesdk client.create_query, read_ahead(False)"),
         lambda: sum(1 for _ in client.create_query(table).read_ahead(False))),
        (Series("tablesdk context, NO_TRACKING"), lambda: sum(1 for _ in untracked.create_query(table))),
        (Series("tablesdk context, tracked (APPEND_ONLY)"),
         lambda: sum(1 for _ in client.get_table_service_context().create_query(table))),
    ]


def latency_runs(client: CloudTableClient, table: str, workers: int, partitions: int) -> list[tuple[Series, Any]]:
    query = client.create_query(table)
    given = known_boundaries(partitions)
    return [
        (Series("tablesdk one scan"), lambda: sum(1 for _ in query)),
        (Series("tablesdk one scan, read_ahead(False)"), lambda: sum(1 for _ in query.read_ahead(False))),
        (Series(f"tablesdk iter_parallel({workers}) (boundaries found by probing)"),
         lambda: sum(1 for _ in query.iter_parallel(workers))),
        (Series(f"tablesdk iter_parallel({workers}) (boundaries given: {len(given) + 1} equal ranges)"),
         lambda: sum(1 for _ in query.iter_parallel(workers, boundaries=given))),
    ]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every request by a proxy")
    parser.add_argument("--workers", type=int, default=8, help="iter_parallel workers (with --latency)")
    parser.add_argument("--partitions", type=int, default=PARTITIONS,
                        help=f"partitions of {PER_PARTITION} entities in the table (at most 1000)")
    args = parser.parse_args()
    total = args.partitions * PER_PARTITION
    relay_cpu: list[float] = []

    with azurite(args.url) as direct:
        setup = CloudStorageAccount.parse(connection_string(direct)).create_cloud_table_client()
        table = "querybench" + uuid.uuid4().hex[:8]
        setup.create_table(table)
        load(setup, table, args.partitions)
        with latency_proxy(direct, args.latency, relay_cpu) as endpoint:
            conn = connection_string(endpoint)
            client = CloudStorageAccount.parse(conn).create_cloud_table_client(pool_size=max(16, args.workers))
            runs = (latency_runs(client, table, args.workers, args.partitions) if args.latency
                    else local_runs(client, endpoint, conn, table))
            for _, run in runs:
                assert run() == total  # warm-up and check
            interleave(runs, args.repeats)
            client.close()
        setup.delete_table(table)

    series = [one for one, _ in runs]
    azure = next((one for one in series if one.label.startswith("azure")), None)
    floor = next((one for one in series if "floor" in one.label), None)
    where = f", {args.latency * 1000:.0f} ms added per request" if args.latency else ""
    print(report(
        f"Iterating {total:,} entities (10 properties, DateTime in 6-digit and trimmed forms) "
        f"from Azurite 3.37.0{where}; {machine()}; {args.repeats} interleaved repetitions",
        series, azure, floor,
    ))
    if args.latency:
        for one in series[1:]:
            print(f"\n{one.label} / one scan: {one.median / series[0].median:.2f}x")
        print(f"\nlatency relay: {relay_cpu[0]:.2f} s CPU over the whole run (its own process)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
