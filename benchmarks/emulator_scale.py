"""The bundled emulator at volume: memory per entity, a restart after ``kill -9``, 16 clients at once.

    python benchmarks/emulator_scale.py load [--entities 2000000] [--db | --memory]
    python benchmarks/emulator_scale.py clients [--clients 16] [--seconds 60] [--db]

``load`` starts the emulator in its own process (``python -m tablesdk.devstore``,
with ``--db`` a sqlite file, else in memory), loads ``--entities`` entities of the
ten-property mix (100-entity change sets, four loader threads) and records the
server's resident memory (``VmRSS``) every tenth of the way. It then queries the
table (point reads spread over it, a 1,000-entity page from its middle, a
filtered query), and with ``--db`` kills the server with SIGKILL, starts it again
on the same file and checks that every entity is there (a keys-only scan of the
table, as ``tablesdk count`` does), with its memory after the restart.

``clients`` runs ``--clients`` threads against one emulator for ``--seconds``:
each inserts entities of its own (every acknowledged insert is recorded), reads
them back, queries its partition, and increments one shared counter entity with
``If-Match`` (optimistic concurrency: a 412 is expected when another client got
there first, and retried). Afterwards it checks that no answer was a 5xx, that
every acknowledged insert is stored, and that the counter equals the number of
increments the server acknowledged (no lost update). The client threads share one
Python process, so they are also limited by its interpreter lock; the server
sees 16 connections at once all the same.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from emulator import Client, batch_body, entity_json  # noqa: E402

from _common import machine, process_cpu  # noqa: E402


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


class Server:
    """``python -m tablesdk.devstore`` in its own process."""

    def __init__(self, db: str | None) -> None:
        command = [sys.executable, "-m", "tablesdk.devstore", "--port", "0"]
        if db:
            command += ["--db", db]
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().split("serving ", 1)[1].strip()
        self.proc.stdout.readline()
        self.pid = self.proc.pid

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


def count_keys(client: Client, table: str) -> int:
    total = 0
    query = "$select=PartitionKey,RowKey"
    while True:
        status, body, headers = client.send("GET", f"{client.prefix}/{table}()", query=query)
        if status != 200:
            raise RuntimeError(f"count: {status} {body[:200]!r}")
        total += len(json.loads(body)["value"])
        npk = headers.get("x-ms-continuation-NextPartitionKey")
        if not npk:
            return total
        query = (f"$select=PartitionKey,RowKey&NextPartitionKey={npk}"
                 f"&NextRowKey={headers.get('x-ms-continuation-NextRowKey', '')}")


def load(args: argparse.Namespace) -> int:
    work = tempfile.mkdtemp(prefix="emulator-scale-")
    db = os.path.join(work, "store.db") if args.db else None
    server = Server(db)
    table = "scale"
    try:
        client = Client(server.url)
        client.create_table(table)
        baseline = rss_mib(server.pid)
        batches = args.entities // 100
        step = max(1, batches // 10)
        print(f"{machine()}; emulator {'--db ' + str(db) if db else 'in memory'}; "
              f"{args.entities:,} entities of ten properties\n")
        print("| entities | server RSS MiB | load rate entities/s (this tenth) | server CPU ms per batch |")
        print("|---|---|---|---|")
        print(f"| 0 | {baseline:.0f} | - | - |", flush=True)
        done = 0
        lock = threading.Lock()
        failures: list[str] = []

        def loader(first: int, last: int, stride: int) -> None:
            me = Client(server.url)
            for b in range(first, last, stride):
                try:
                    me.batch([batch_body(me.endpoint, table, f"p{b:07d}", 0)])
                except RuntimeError as exc:
                    with lock:
                        failures.append(str(exc))
                    return

        while done < batches:
            upto = min(batches, done + step)
            cpu0, wall0 = process_cpu(server.pid), time.perf_counter()
            threads = [threading.Thread(target=loader, args=(done + k, upto, 4)) for k in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if failures:
                raise RuntimeError(failures[0])
            wall, cpu1 = time.perf_counter() - wall0, process_cpu(server.pid)
            assert cpu0 is not None and cpu1 is not None
            print(f"| {upto * 100:,} | {rss_mib(server.pid):.0f} | {(upto - done) * 100 / wall:,.0f} "
                  f"| {(cpu1 - cpu0) / (upto - done) * 1e3:.2f} |", flush=True)
            done = upto
        loaded = rss_mib(server.pid)
        if not db:
            print(f"\nin memory: {(loaded - baseline) * 2**20 / args.entities:,.0f} bytes of RSS per entity "
                  f"({baseline:.0f} MiB empty, {loaded:.0f} MiB with {args.entities:,})")
        reads = 500
        start = time.perf_counter()
        for _ in range(reads):
            b = random.randrange(batches)
            n = random.randrange(100)
            status, body, _ = client.send("GET", f"{client.prefix}/{table}(PartitionKey='p{b:07d}',RowKey='r{n:06d}')")
            assert status == 200, (status, body[:200])
        print(f"\n{reads} random point reads: {reads / (time.perf_counter() - start):,.0f}/s")
        start = time.perf_counter()
        status, body, _ = client.send("GET", f"{client.prefix}/{table}()",
                                      query=f"$top=1000&NextPartitionKey={_token(f'p{batches // 2:07d}')}"
                                            f"&NextRowKey={_token('r000000')}")
        assert status == 200, (status, body[:200])
        print(f"a page from the middle ({len(json.loads(body)['value']):,} entities): "
              f"{(time.perf_counter() - start) * 1e3:.0f} ms")
        start = time.perf_counter()
        status, body, _ = client.send("GET", f"{client.prefix}/{table}()",
                                      query=f"$filter=PartitionKey%20eq%20'p{batches // 3:07d}'%20and%20Small%20eq%203")
        assert status == 200, (status, body[:200])
        print(f"a filtered query inside one partition ({len(json.loads(body)['value'])} matches): "
              f"{(time.perf_counter() - start) * 1e3:.0f} ms")
        if db:
            before = rss_mib(server.pid)
            server.kill()
            size = os.path.getsize(db) + sum(os.path.getsize(db + s) for s in ("-wal", "-shm") if os.path.exists(db + s))
            server = Server(db)
            client = Client(server.url)
            start = time.perf_counter()
            counted = count_keys(client, table)
            elapsed = time.perf_counter() - start
            print(f"\nafter kill -9 and a restart on the same file ({size / 2**20:,.0f} MiB with its WAL): "
                  f"{counted:,} entities counted in {elapsed:.1f} s (keys-only scan), "
                  f"server RSS {rss_mib(server.pid):.0f} MiB (before the kill {before:.0f} MiB)")
            if counted != args.entities:
                raise SystemExit(f"LOST: {args.entities - counted} entities")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _token(text: str) -> str:
    """A continuation token for a key, as the emulator writes them (``1!<n>!<base64url>``)."""
    data = base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")
    return f"1!{len(data)}!{data}"


def clients(args: argparse.Namespace) -> int:
    work = tempfile.mkdtemp(prefix="emulator-clients-")
    db = os.path.join(work, "store.db") if args.db else None
    server = Server(db)
    table = "busy"
    statuses: Counter[int] = Counter()
    acknowledged: list[set[str]] = [set() for _ in range(args.clients)]
    increments = [0] * args.clients
    lock = threading.Lock()
    stop = threading.Event()
    try:
        setup = Client(server.url)
        setup.create_table(table)
        status, _, _ = setup.send("POST", f"{setup.prefix}/{table}",
                                  json.dumps({"PartitionKey": "shared", "RowKey": "counter", "N": 0}).encode(),
                                  "application/json")
        assert status == 204
        cpu0 = process_cpu(server.pid)

        def worker(me: int) -> None:
            client = Client(server.url)
            seen: Counter[int] = Counter()
            n = 0
            while not stop.is_set():
                n += 1
                rk = f"r{n:07d}"
                body = json.dumps({**entity_json(f"c{me:02d}", n), "RowKey": rk}).encode()
                status, _, _ = client.send("POST", f"{client.prefix}/{table}", body, "application/json")
                seen[status] += 1
                if status == 204:
                    acknowledged[me].add(rk)
                status, _, _ = client.send("GET", f"{client.prefix}/{table}(PartitionKey='c{me:02d}',RowKey='{rk}')")
                seen[status] += 1
                if n % 10 == 0:
                    status, _, _ = client.send("GET", f"{client.prefix}/{table}()",
                                               query=f"$filter=PartitionKey%20eq%20'c{me:02d}'&$top=100")
                    seen[status] += 1
                if n % 3 == 0:  # increment the shared counter, optimistically
                    while not stop.is_set():
                        status, answer, headers = client.send(
                            "GET", f"{client.prefix}/{table}(PartitionKey='shared',RowKey='counter')")
                        seen[status] += 1
                        value = json.loads(answer)["N"]
                        status, _, _ = put_if_match(client, table, value + 1, headers["ETag"])
                        seen[status] += 1
                        if status == 204:
                            increments[me] += 1
                            break
                        if status != 412:
                            break
            with lock:
                statuses.update(seen)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(args.clients)]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        time.sleep(args.seconds)
        stop.set()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - start
        cpu1 = process_cpu(server.pid)
        requests_made = sum(statuses.values())
        assert cpu0 is not None and cpu1 is not None
        missing = 0
        for me in range(args.clients):
            stored: set[str] = set()
            query = f"$filter=PartitionKey%20eq%20'c{me:02d}'&$select=RowKey"
            while True:
                status, body, headers = setup.send("GET", f"{setup.prefix}/{table}()", query=query)
                assert status == 200
                stored.update(e["RowKey"] for e in json.loads(body)["value"])
                npk = headers.get("x-ms-continuation-NextPartitionKey")
                if not npk:
                    break
                query = (f"$filter=PartitionKey%20eq%20'c{me:02d}'&$select=RowKey&NextPartitionKey={npk}"
                         f"&NextRowKey={headers.get('x-ms-continuation-NextRowKey', '')}")
            missing += len(acknowledged[me] - stored)
        status, body, _ = setup.send("GET", f"{setup.prefix}/{table}(PartitionKey='shared',RowKey='counter')")
        counter = json.loads(body)["N"]
        print(f"{machine()}; load average {os.getloadavg()[0]:.1f}; emulator {'--db file' if db else 'in memory'}; "
              f"{args.clients} client threads for {elapsed:.0f} s")
        print(f"requests: {requests_made:,} ({requests_made / elapsed:,.0f}/s), server CPU "
              f"{(cpu1 - cpu0) / requests_made * 1e3:.3f} ms/request; statuses {dict(sorted(statuses.items()))}")
        five = sum(v for k, v in statuses.items() if k >= 500)
        inserted = sum(len(a) for a in acknowledged)
        print(f"5xx answers: {five}; acknowledged inserts {inserted:,}, missing {missing}; "
              f"counter {counter} after {sum(increments)} acknowledged increments")
        if five or missing or counter != sum(increments):
            raise SystemExit("FAILED")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


def put_if_match(client: Client, table: str, value: int, etag: str) -> tuple[int, bytes, object]:
    import base64
    import hashlib
    import hmac
    from email.utils import formatdate

    path = f"{client.prefix}/{table}(PartitionKey='shared',RowKey='counter')"
    date = formatdate(usegmt=True)
    to_sign = f"PUT\n\napplication/json\n{date}\n/devstoreaccount1{path}"
    sig = base64.b64encode(hmac.new(client.key, to_sign.encode(), hashlib.sha256).digest()).decode()
    response = client.session.put(client.base + path, data=json.dumps({"N": value}).encode(), headers={
        "x-ms-date": date, "x-ms-version": "2019-02-02", "Content-Type": "application/json",
        "Authorization": f"SharedKey devstoreaccount1:{sig}", "If-Match": etag, "DataServiceVersion": "3.0;",
    })
    return response.status_code, response.content, response.headers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    one = sub.add_parser("load")
    one.add_argument("--entities", type=int, default=2_000_000)
    one.add_argument("--db", action="store_true", help="a sqlite file (default: in memory)")
    many = sub.add_parser("clients")
    many.add_argument("--clients", type=int, default=16)
    many.add_argument("--seconds", type=float, default=60)
    many.add_argument("--db", action="store_true")
    args = parser.parse_args()
    return load(args) if args.what == "load" else clients(args)


if __name__ == "__main__":
    sys.exit(main())
