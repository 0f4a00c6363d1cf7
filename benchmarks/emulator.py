"""The bundled emulator next to Azurite, side by side in one run: throughput and server CPU.

    python benchmarks/emulator.py [--azurite-url URL --azurite-pid PID] [--repeats 3]
        [--ops 1000] [--batches 30] [--page-entities 10000] [--cli-rows 60000] [--skip-cli] [--db]

Both servers run in their own processes on loopback: the emulator as
``python -m tablesdk.devstore`` (in memory, or with ``--db`` in a sqlite file),
Azurite as started by scripts/azurite.sh (or the one at ``--azurite-url``, whose
process id ``--azurite-pid`` gives, so that its CPU can be read). Every
repetition runs each workload against each server in turn (interleaved, so the
machine's load drifts over both alike):

* single inserts (``Prefer: return-no-content``) and point reads, ``--ops``
  each, one sequential client (``requests`` with Shared Key signed by hand,
  pre-built bodies: the cheapest Python client);
* ``--batches`` change sets of 100 inserts each;
* page queries of 1,000 entities, scanning a table of ``--page-entities``
  entities (``json.loads`` of every page);
* the CLI: ``tablesdk import`` of ``--cli-rows`` JSON lines, ``tablesdk copy``
  of that table to a new one and ``tablesdk count`` of it (child processes, 8
  workers, the CLI's defaults).

For each workload and server: the median throughput (min-max), the server
process's CPU per request (``/proc/PID/stat`` before and after), and the
emulator's ratio to Azurite per repetition. The machine is shared: read the
ratios of one repetition, not the absolute rates.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from email.utils import formatdate
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(1, str(ROOT))

from _common import DEVSTORE_KEY, azurite, connection_string, machine, process_cpu  # noqa: E402

ACCOUNT = "devstoreaccount1"


def entity_json(pk: str, n: int) -> dict[str, Any]:
    """The ten-property entity of benchmarks/_common.py in the JSON wire form."""
    return {
        "PartitionKey": pk, "RowKey": f"r{n:06d}", "Name": f"entity-{n}", "Count": n % 100_000,
        "Big": str(2**40 + n), "Big@odata.type": "Edm.Int64", "Ratio": n / 7, "Active": n % 2 == 0,
        "When": "2024-01-01T00:00:00Z", "When@odata.type": "Edm.DateTime",
        "Id": str(uuid.UUID(int=n)), "Id@odata.type": "Edm.Guid",
        "Blob": base64.b64encode(n.to_bytes(16, "big")).decode(), "Blob@odata.type": "Edm.Binary",
        "Note": "x" * 51, "Small": n % 7,
    }


class Client:
    """One keep-alive ``requests`` session, Shared Key signed by hand: the cheapest Python client."""

    def __init__(self, endpoint: str) -> None:
        import requests

        self.endpoint = endpoint.rstrip("/")
        self.base = self.endpoint.rsplit("/", 1)[0]
        self.prefix = "/" + self.endpoint.split("/", 3)[3]
        self.key = base64.b64decode(DEVSTORE_KEY)
        self.session = requests.Session()
        self.session.trust_env = False

    def send(self, method: str, path: str, body: bytes | None = None, content_type: str = "",
             query: str = "") -> tuple[int, bytes, Any]:
        date = formatdate(usegmt=True)
        to_sign = f"{method}\n\n{content_type}\n{date}\n/{ACCOUNT}{path}"
        sig = base64.b64encode(hmac.new(self.key, to_sign.encode(), hashlib.sha256).digest()).decode()
        headers = {
            "x-ms-date": date, "x-ms-version": "2019-02-02", "Accept": "application/json;odata=minimalmetadata",
            "DataServiceVersion": "3.0;NetFx", "MaxDataServiceVersion": "3.0;NetFx",
            "Authorization": f"SharedKey {ACCOUNT}:{sig}",
        }
        if content_type:
            headers["Content-Type"] = content_type
            headers["Prefer"] = "return-no-content"
        url = self.base + path + ("?" + query if query else "")
        response = self.session.request(method, url, data=body, headers=headers)
        return response.status_code, response.content, response.headers

    def create_table(self, table: str) -> None:
        status, body, _ = self.send("POST", f"{self.prefix}/Tables", json.dumps({"TableName": table}).encode(),
                                    "application/json")
        if status not in (201, 204):
            raise RuntimeError(f"create table: {status} {body[:200]!r}")

    def insert(self, table: str, bodies: list[bytes]) -> int:
        path = f"{self.prefix}/{table}"
        for body in bodies:
            status, answer, _ = self.send("POST", path, body, "application/json")
            if status != 204:
                raise RuntimeError(f"insert: {status} {answer[:200]!r}")
        return len(bodies)

    def read(self, table: str, count: int) -> int:
        for n in range(count):
            status, body, _ = self.send("GET", f"{self.prefix}/{table}(PartitionKey='p',RowKey='r{n:06d}')")
            if status != 200:
                raise RuntimeError(f"read: {status} {body[:200]!r}")
            json.loads(body)
        return count

    def batch(self, bodies: list[tuple[str, bytes]]) -> int:
        for content_type, body in bodies:
            status, answer, _ = self.send("POST", f"{self.prefix}/$batch", body, content_type)
            if status != 202 or b"HTTP/1.1 4" in answer or b"HTTP/1.1 5" in answer:
                raise RuntimeError(f"batch: {status} {answer[:600]!r}")
        return len(bodies)

    def scan(self, table: str) -> tuple[int, int]:
        """(entities, pages) of a scan of ``table``, 1,000 a page."""
        entities = pages = 0
        query = "$top=1000"
        while True:
            status, body, headers = self.send("GET", f"{self.prefix}/{table}()", query=query)
            if status != 200:
                raise RuntimeError(f"query: {status} {body[:200]!r}")
            entities += len(json.loads(body)["value"])
            pages += 1
            npk = headers.get("x-ms-continuation-NextPartitionKey")
            if not npk:
                return entities, pages
            query = f"$top=1000&NextPartitionKey={npk}&NextRowKey={headers.get('x-ms-continuation-NextRowKey', '')}"


def batch_body(endpoint: str, table: str, pk: str, start: int, count: int = 100) -> tuple[str, bytes]:
    outer, inner = f"batch_{uuid.uuid4()}", f"changeset_{uuid.uuid4()}"
    out = [f"--{outer}\r\nContent-Type: multipart/mixed; boundary={inner}\r\n\r\n"]
    for n in range(start, start + count):
        body = json.dumps(entity_json(pk, n))
        out.append(f"--{inner}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
                   f"POST {endpoint}/{table} HTTP/1.1\r\nContent-Type: application/json\r\n"
                   "Accept: application/json;odata=minimalmetadata\r\nPrefer: return-no-content\r\n"
                   f"DataServiceVersion: 3.0;\r\nContent-Length: {len(body.encode())}\r\n\r\n{body}\r\n")
    out.append(f"--{inner}--\r\n--{outer}--\r\n")
    return f"multipart/mixed; boundary={outer}", "".join(out).encode()


@contextmanager
def devstore(db: str | None) -> Iterator[tuple[str, int]]:
    """(endpoint, pid) of the bundled emulator in its own process."""
    command = [sys.executable, "-m", "tablesdk.devstore", "--port", "0"]
    if db:
        command += ["--db", db]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split("serving ", 1)[1].strip()
        server.stdout.readline()
        yield url, server.pid
    finally:
        server.terminate()
        server.wait()


@contextmanager
def azurite_server(url: str | None, pid: int | None) -> Iterator[tuple[str, int]]:
    if url:
        if pid is None:
            raise SystemExit("--azurite-url needs --azurite-pid (its CPU is read from /proc)")
        yield url.rstrip("/"), pid
        return
    with azurite() as endpoint:
        port = endpoint.split(":")[2].split("/")[0]
        run = Path(os.environ.get("AZURITE_RUN", ROOT / ".azurite" / "run"))
        yield endpoint, int((run / f"table-{port}.pid").read_text().strip())


class Measure:
    """Per server: throughput of each repetition and server CPU seconds per request."""

    def __init__(self) -> None:
        self.rates: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}
        self.wall: dict[str, list[float]] = {}
        self.client_cpu: dict[str, list[float]] = {}

    def run(self, name: str, pid: int, work: Callable[[], tuple[int, int]]) -> None:
        cpu0, wall0, mine0 = process_cpu(pid), time.perf_counter(), time.process_time()
        units, requests_made = work()
        wall, cpu1, mine = time.perf_counter() - wall0, process_cpu(pid), time.process_time() - mine0
        self.client_cpu.setdefault(name, []).append(mine / requests_made)
        self.rates.setdefault(name, []).append(units / wall)
        self.wall.setdefault(name, []).append(wall)
        assert cpu0 is not None and cpu1 is not None
        self.cpu.setdefault(name, []).append((cpu1 - cpu0) / requests_made)


def run_cli(cs: str, counts: tuple[int, int], *args: str) -> tuple[int, int]:
    """Run ``python -m tablesdk ARGS`` against ``cs``; returns ``counts`` (rows, requests) for :meth:`Measure.run`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AZURE_STORAGE_CONNECTION_STRING": cs}
    done = subprocess.run([sys.executable, "-m", "tablesdk", "--no-progress", *args], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"tablesdk {' '.join(args)}: {done.stderr[-800:]}")
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--azurite-url")
    parser.add_argument("--azurite-pid", type=int)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ops", type=int, default=1000, help="single inserts and point reads per repetition")
    parser.add_argument("--batches", type=int, default=30, help="100-insert change sets per repetition")
    parser.add_argument("--page-entities", type=int, default=10_000, help="entities the page queries scan")
    parser.add_argument("--cli-rows", type=int, default=60_000, help="rows of the CLI import/copy/count")
    parser.add_argument("--skip-cli", action="store_true")
    parser.add_argument("--db", action="store_true", help="the emulator keeps its data in a sqlite file")
    parser.add_argument("--only", default="", help="comma-separated workloads (insert,read,batch,page,cli)")
    args = parser.parse_args()
    only = set(filter(None, args.only.split(","))) or {"insert", "read", "batch", "page", "cli"}
    if args.skip_cli:
        only.discard("cli")

    with tempfile.TemporaryDirectory(prefix="emulator-bench-") as work:
        return run(args, only, work)


def run(args: argparse.Namespace, only: set[str], work: str) -> int:
    """Every workload against both servers, ``args.repeats`` times; prints the table."""
    with devstore(os.path.join(work, "store.db") if args.db else None) as ours, \
            azurite_server(args.azurite_url, args.azurite_pid) as theirs:
        servers = {"devstore": ours, "azurite": theirs}
        clients = {name: Client(url) for name, (url, _) in servers.items()}
        insert_bodies = [json.dumps(entity_json("p", n)).encode() for n in range(args.ops)]
        rows_file = os.path.join(work, "rows.jsonl")
        if "cli" in only:
            with open(rows_file, "w") as out:
                for n in range(args.cli_rows):
                    row = entity_json(f"p{n // 1000:05d}", n)
                    out.write(json.dumps(row) + "\n")
        measures = {name: Measure() for name in servers}
        page_tables: dict[str, str] = {}
        for name, client in clients.items():  # the table the page queries scan, loaded once
            table = "pages" + uuid.uuid4().hex[:10]
            client.create_table(table)
            if "page" in only:
                client.batch([batch_body(client.endpoint, table, f"p{i:04d}", 0)
                              for i in range(args.page_entities // 100)])
            page_tables[name] = table
        for rep in range(args.repeats):
            for name, client in clients.items():
                pid = servers[name][1]
                measure = measures[name]
                table = "bench" + uuid.uuid4().hex[:10]
                client.create_table(table)
                if "insert" in only or "read" in only:
                    measure.run("single inserts", pid, lambda: (client.insert(table, insert_bodies),) * 2)
                if "read" in only:
                    measure.run("point reads", pid, lambda: (client.read(table, args.ops),) * 2)
                if "batch" in only:
                    bodies = [batch_body(client.endpoint, table, f"b{i:04d}", 0) for i in range(args.batches)]
                    measure.run("100-entity batches", pid, lambda: (100 * client.batch(bodies), len(bodies)))
                if "page" in only:
                    measure.run("1,000-entity pages", pid, lambda: client.scan(page_tables[name]))
                if "cli" in only:
                    cs = connection_string(client.endpoint)
                    target, copy_target = "imp" + uuid.uuid4().hex[:10], "cpy" + uuid.uuid4().hex[:10]
                    rows = args.cli_rows
                    measure.run("CLI import", pid, lambda: run_cli(
                        cs, (rows, max(1, rows // 100)), "import", rows_file, target, "--create-table"))
                    measure.run("CLI copy", pid, lambda: run_cli(
                        cs, (rows, max(1, rows // 100) * 2), "copy", target, copy_target, "--create-table"))
                    measure.run("CLI count", pid, lambda: run_cli(cs, (rows, max(1, rows // 1000)), "count", target))
            print(f"repetition {rep + 1}/{args.repeats} done", file=sys.stderr, flush=True)

    load = os.getloadavg()
    print(f"{machine()}; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end; "
          f"emulator {'--db file' if args.db else 'in memory'}; {args.repeats} repetitions\n")
    print("| workload | devstore units/s median (min-max) | Azurite units/s median (min-max) "
          "| devstore / Azurite per repetition | server CPU ms/request devstore | Azurite | CPU ratio "
          "| client CPU ms/request |")
    print("|---|---|---|---|---|---|---|---|")
    ours_m, theirs_m = measures["devstore"], measures["azurite"]
    for workload in ours_m.rates:
        a, b = ours_m.rates[workload], theirs_m.rates[workload]
        ratios = ", ".join(f"{x / y:.2f}" for x, y in zip(a, b))
        ca, cb = statistics.median(ours_m.cpu[workload]) * 1e3, statistics.median(theirs_m.cpu[workload]) * 1e3
        print(f"| {workload} | {statistics.median(a):,.0f} ({min(a):,.0f}-{max(a):,.0f}) "
              f"| {statistics.median(b):,.0f} ({min(b):,.0f}-{max(b):,.0f}) | {ratios} "
              f"| {ca:.3f} | {cb:.3f} | {ca / cb:.2f} | {statistics.median(ours_m.client_cpu[workload]) * 1e3:.3f} |")
    print("\nunits: entities (inserts, reads, batches, pages, CLI rows); requests: HTTP requests "
          "(a batch is one; the CLI's per 100 rows a batch, per 1,000 a page); client CPU: this process "
          "(the CLI runs in a child, not counted)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
