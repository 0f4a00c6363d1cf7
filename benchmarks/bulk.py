"""Bulk insert throughput against Azurite: tablesdk ``bulk_insert`` next to azure-data-tables.

Inserts N entities (default 10,000: 100 partitions x 100 rows, each with the
ten properties: str, Int32, Int64, Double, bool,
DateTime, Guid, 16-byte Binary, a 51-character str and Int32) with:

* tablesdk ``client.bulk_insert`` with 1, 4 and 8 workers;
* tablesdk ``client.execute_batch`` in a sequential loop of 100-operation
  transactions (what bulk_insert does, without its machinery or threads);
* azure-data-tables ``TableClient.submit_transaction`` in a sequential loop of
  100-entity transactions (measured at about 2,667 entities/s
  on this 2-vCPU machine).

Every measurement gets a fresh table (created before and deleted after the
timed part); the configurations are interleaved, repeated R times (default 3)
and the median is reported with the min-max range, the client's CPU seconds
(``time.process_time``) and, when Azurite's PID is known, the server's CPU
seconds. Entities (tablesdk objects and azure-data-tables dicts) are built
before timing. Ratios are against the azure-data-tables median.

azure-data-tables must not be a project dependency: run this from a separate
virtualenv that has it, with the repository on ``sys.path`` (this script adds it)::

    python -m venv /tmp/benchvenv
    /tmp/benchvenv/bin/pip install azure-data-tables==12.7.0 requests lxml python-dateutil
    /tmp/benchvenv/bin/python benchmarks/bulk.py                      # starts Azurite itself
    /tmp/benchvenv/bin/python benchmarks/bulk.py --url http://127.0.0.1:10102/devstoreaccount1

Without ``--url`` the script starts Azurite on a free loopback port through
scripts/azurite.sh (in memory) and stops it at the end. Without
azure-data-tables installed it measures tablesdk only and says so.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "benchmarks"))

from _common import latency_proxy, process_cpu  # noqa: E402

from tablesdk import (  # noqa: E402
    BatchOperation,
    BatchOperationKind,
    CloudStorageAccount,
    CloudTableClient,
    DynamicEntity,
    EdmType,
    EntityProperty,
)
from tablesdk._entities._entity import entity_to_payload  # noqa: E402

ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
BASE_TIME = datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc)


# --------------------------------------------------------------------------- data


def values(i: int, rows_per_partition: int) -> dict[str, Any]:
    """The keys and ten properties of entity ``i`` (section 6 mix), as plain Python values."""
    return {
        "PartitionKey": f"pk{i // rows_per_partition:04d}", "RowKey": f"{i:07d}",
        "Name": f"name-{i}", "Count": i, "Big": 2**40 + i, "Score": i * 1.5, "Active": i % 2 == 0,
        "When": BASE_TIME + timedelta(seconds=i), "Id": uuid.UUID(int=i), "Blob": bytes(range(16)),
        "Text": "x" * 40 + f"{i:011d}", "Small": i % 7,
    }


def tablesdk_entities(count: int, rows: int) -> list[DynamicEntity]:
    out = []
    for i in range(count):
        v = values(i, rows)
        v["Big"] = EntityProperty(v["Big"], EdmType.INT64)
        out.append(DynamicEntity(**v))
    return out


def azure_entities(count: int, rows: int) -> list[dict[str, Any]]:
    from azure.data.tables import EdmType as AzEdmType
    from azure.data.tables import EntityProperty as AzEntityProperty

    out = []
    for i in range(count):
        v = values(i, rows)
        v["Big"] = AzEntityProperty(v["Big"], AzEdmType.INT64)
        out.append(v)
    return out


# --------------------------------------------------------------------------- Azurite


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def azurite(url: str | None) -> Iterator[tuple[str, int | None]]:
    """(endpoint URL, server PID or None): the given URL, or an Azurite started through scripts/azurite.sh."""
    if url:
        yield url.rstrip("/"), None
        return
    script = ROOT / "scripts" / "azurite.sh"
    env = dict(os.environ, AZURITE_TABLE_PORT=str(_free_port()))
    subprocess.run(["bash", str(script), "install"], env=env, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["bash", str(script), "start"], env=env, check=True)
    try:
        run_dir = Path(env.get("AZURITE_RUN", str(Path(env.get("AZURITE_DIR", ROOT / ".azurite")) / "run")))
        pid_file = run_dir / f"table-{env['AZURITE_TABLE_PORT']}.pid"
        pid = int(pid_file.read_text().strip()) if pid_file.exists() else None
        yield f"http://127.0.0.1:{env['AZURITE_TABLE_PORT']}/{ACCOUNT}", pid
    finally:
        subprocess.run(["bash", str(script), "stop"], env=env, check=False)


# --------------------------------------------------------------------------- measurements


@dataclass
class Series:
    label: str
    rates: list[float] = field(default_factory=list)
    client_cpu: list[float] = field(default_factory=list)
    server_cpu: list[float] = field(default_factory=list)
    requests: list[int] = field(default_factory=list)


def fresh_name(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:12]}"


def measure(series: Series, count: int, pid: int | None, setup: Callable[[], Any],
            run: Callable[[Any], int | None], teardown: Callable[[Any], None]) -> None:
    """Time ``run(setup())`` (setup and teardown untimed) and record entities/s and CPU."""
    state = setup()
    try:
        cpu0, srv0, wall0 = time.process_time(), process_cpu(pid), time.perf_counter()
        requests = run(state)
        wall = time.perf_counter() - wall0
        cpu, srv1 = time.process_time() - cpu0, process_cpu(pid)
    finally:
        teardown(state)
    series.rates.append(count / wall)
    series.client_cpu.append(cpu)
    if srv0 is not None and srv1 is not None:
        series.server_cpu.append(srv1 - srv0)
    if requests is not None:
        series.requests.append(requests)


def tablesdk_bulk(client: CloudTableClient, entities: list[DynamicEntity], workers: int) -> Callable[[str], int]:
    def run(table: str) -> int:
        result = client.bulk_insert(table, entities, max_workers=workers)
        if result.failed:
            raise RuntimeError(f"bulk_insert failed for {len(result.failed)} entities: {result.failed[0].error}")
        return result.requests
    return run


def tablesdk_sequential(client: CloudTableClient, entities: list[DynamicEntity]) -> Callable[[str], int]:
    def run(table: str) -> int:
        sent = 0
        for start in range(0, len(entities), 100):
            ops = []
            for entity in entities[start:start + 100]:
                payload = entity_to_payload(entity)
                ops.append(BatchOperation(BatchOperationKind.INSERT, table, entity.PartitionKey, entity.RowKey,
                                          payload, None))
            client.execute_batch(ops)
            sent += 1
        return sent
    return run


def tablesdk_context(client: CloudTableClient, entities: list[DynamicEntity]) -> Callable[[str], int]:
    """One context: add 100 entities, save_changes(BATCH), and so on (the context keeps them all tracked)."""
    from tablesdk import SaveChangesOptions

    def run(table: str) -> int:
        ctx = client.get_table_service_context()
        sent = 0
        for start in range(0, len(entities), 100):
            for entity in entities[start:start + 100]:
                ctx.add_object(table, entity)
            ctx.save_changes(SaveChangesOptions.BATCH)
            sent += 1
        return sent
    return run


def raw_floor_setup(client: CloudTableClient, entities: list[DynamicEntity], rows: int,
                    create: Callable[[], str]) -> Callable[[], Any]:
    """A fresh table and its batch bodies, built before timing (the floor sends pre-built bodies)."""
    from tablesdk._formats._batch import build_batch_request

    def setup() -> tuple[str, list[tuple[bytes, str]]]:
        table = create()
        bodies = []
        for start in range(0, len(entities), rows):
            ops = [BatchOperation(BatchOperationKind.INSERT, table, e.PartitionKey, e.RowKey, entity_to_payload(e), None)
                   for e in entities[start:start + rows]]
            bodies.append(build_batch_request(client.table_endpoint, ops, client.format, api_version=client.api_version))
        return table, bodies
    return setup


def raw_floor_run(endpoint: str) -> Callable[[Any], int]:
    """The floor: one requests session, SharedKey signed by hand, pre-built bodies, no response parsing."""
    import base64
    import hashlib
    import hmac
    from email.utils import formatdate

    import requests

    session = requests.Session()
    key = base64.b64decode(KEY)
    path = f"/{endpoint.split('/', 3)[3]}/$batch"

    def run(state: tuple[str, list[tuple[bytes, str]]]) -> int:
        for body, content_type in state[1]:
            date = formatdate(usegmt=True)
            to_sign = f"POST\n\n{content_type}\n{date}\n/{ACCOUNT}{path}"
            sig = base64.b64encode(hmac.new(key, to_sign.encode(), hashlib.sha256).digest()).decode()
            response = session.post(f"{endpoint}/$batch", data=body, headers={
                "x-ms-date": date, "x-ms-version": "2019-02-02", "Content-Type": content_type,
                "Accept": "application/json;odata=minimalmetadata", "DataServiceVersion": "3.0",
                "Authorization": f"SharedKey {ACCOUNT}:{sig}"})
            if response.status_code != 202 or b"HTTP/1.1 201" not in response.content and b"HTTP/1.1 204" not in response.content:
                raise RuntimeError(f"raw batch failed: {response.status_code} {response.content[:300]!r}")
        return len(state[1])
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="Azurite table endpoint, e.g. http://127.0.0.1:10102/devstoreaccount1 "
                        "(default: start one through scripts/azurite.sh)")
    parser.add_argument("--azurite-pid", type=int, help="PID of that Azurite, to report its CPU time")
    parser.add_argument("--entities", type=int, default=10_000)
    parser.add_argument("--rows-per-partition", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--latency", type=float, default=0.0,
                        help="seconds a proxy (own process) adds to every request, like a network round trip")
    parser.add_argument("--no-sequential", action="store_true", help="leave out the execute_batch loop, floor and azure")
    args = parser.parse_args()
    count, rows = args.entities, args.rows_per_partition

    try:
        import azure.core
        import azure.data.tables
        from azure.data.tables import TableServiceClient
        have_azure = True
    except ImportError:
        have_azure = False

    relay_cpu: list[float] = []
    with azurite(args.url) as (direct, started_pid), latency_proxy(direct, args.latency, relay_cpu) as endpoint:
        pid = args.azurite_pid or started_pid
        conn = (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
                f"TableEndpoint={endpoint};")
        client = CloudStorageAccount.parse(conn).create_cloud_table_client()
        ours = tablesdk_entities(count, rows)

        def create(prefix: str) -> Callable[[], str]:
            def setup() -> str:
                name = fresh_name(prefix)
                client.create_table(name)
                return name
            return setup

        def drop(name: str) -> None:
            client.delete_table_if_exists(name)

        configs: list[tuple[Series, Callable[[], Any], Callable[[Any], int | None], Callable[[Any], None]]] = []
        for workers in args.workers:
            configs.append((Series(f"tablesdk bulk_insert, {workers} worker{'s' if workers > 1 else ''}"),
                            create("bulk"), tablesdk_bulk(client, ours, workers), drop))
        if not args.no_sequential:
            configs.append((Series("tablesdk execute_batch loop (100/tx)"), create("seq"),
                            tablesdk_sequential(client, ours), drop))
            configs.append((Series("tablesdk context save_changes(BATCH) loop (100/tx)"), create("ctx"),
                            tablesdk_context(client, ours), drop))
            configs.insert(0, (Series("raw requests, pre-built bodies (floor)"),
                               raw_floor_setup(client, ours, rows, create("raw")), raw_floor_run(endpoint),
                               lambda state: drop(state[0])))

        if have_azure and not args.no_sequential:
            service = TableServiceClient.from_connection_string(conn)
            theirs = azure_entities(count, rows)
            chunks = [[("create", e) for e in theirs[i:i + rows]] for i in range(0, count, rows)]
            if rows > 100:
                raise SystemExit("--rows-per-partition above 100 cannot be one azure-data-tables transaction")

            def az_setup() -> Any:
                return service.create_table(fresh_name("az"))

            def az_run(table_client: Any) -> int:
                for chunk in chunks:
                    table_client.submit_transaction(chunk)
                return len(chunks)

            def az_drop(table_client: Any) -> None:
                service.delete_table(table_client.table_name)

            baseline = Series("azure-data-tables submit_transaction loop (100/tx)")
            configs.append((baseline, az_setup, az_run, az_drop))

        # Warm up every client (connections, imports, code paths) on a small load, untimed.
        warm = Series("warm-up")
        small = ours[: min(200, count)]
        measure(warm, len(small), None, create("warm"), tablesdk_bulk(client, small, 2), drop)
        if have_azure and not args.no_sequential:
            table_client = az_setup()
            try:
                table_client.submit_transaction([("create", e) for e in theirs[:rows]])
            finally:
                az_drop(table_client)

        for rep in range(args.repeat):
            for series, setup, run, teardown in configs:
                measure(series, count, pid, setup, run, teardown)
            print(f"repetition {rep + 1}/{args.repeat} done", file=sys.stderr)
        client.close()

    cpu_count = os.cpu_count()
    print(f"bulk insert of {count:,} entities ({count // rows} partitions x {rows}, 10 mixed properties), "
          f"median of {args.repeat}, fresh table each")
    print(f"machine: {cpu_count} vCPU, {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"Azurite at {endpoint}")
    if have_azure:
        print(f"azure-data-tables {azure.data.tables.__version__} (azure-core {azure.core.__version__})")
    else:
        print("azure-data-tables not installed here: its baseline was not measured (see the module docstring)")
    labels = {series.label: series for series, *_ in configs}
    azure_series = labels.get("azure-data-tables submit_transaction loop (100/tx)")
    floor_series = labels.get("raw requests, pre-built bodies (floor)")
    base = statistics.median(azure_series.rates) if azure_series else None
    floor = statistics.median(floor_series.rates) if floor_series else None
    if args.latency:
        print(f"every request held {args.latency * 1000:.0f} ms by a proxy in its own process "
              f"({relay_cpu[0] if relay_cpu else float('nan'):.2f} s of its CPU over the whole run)")
    print()
    print("| contender | entities/s median (min-max) | client CPU µs/entity | server CPU s | x azure-data-tables | x raw floor |")
    print("|---|---|---|---|---|---|")
    for series, *_ in configs:
        rate = statistics.median(series.rates)
        spread = f"{rate:,.0f} ({min(series.rates):,.0f}-{max(series.rates):,.0f})"
        cpu = f"{statistics.median(series.client_cpu) / count * 1e6:.1f}"
        srv = f"{statistics.median(series.server_cpu):.2f}" if series.server_cpu else "-"
        x_azure = f"{rate / base:.2f}" if base else "-"
        x_floor = f"{rate / floor:.2f}" if floor else "-"
        print(f"| {series.label} | {spread} | {cpu} | {srv} | {x_azure} | {x_floor} |")
    one = next((s for s in labels.values() if s.label.endswith(", 1 worker")), None)
    if one:
        for series in labels.values():
            if "bulk_insert" in series.label and series is not one:
                ratio = statistics.median(series.rates) / statistics.median(one.rates)
                print(f"{series.label} / 1 worker: {ratio:.2f}x")


if __name__ == "__main__":
    main()
