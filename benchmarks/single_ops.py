"""Single-entity operations: one insert or one point read per request, against Azurite.

    python benchmarks/single_ops.py [--url URL] [--ops 2000] [--repeats 5]
    python benchmarks/single_ops.py --url URL --callgrind [--ops 400]

Most application calls touch one entity at a time, so the cost of one request
(building, signing, sending, reading the answer) is what bounds them. Each
repetition runs every contender in turn (interleaved): ``ops`` inserts of the
ten-property entity of benchmarks/_common.py into a fresh table, then ``ops``
point reads of them. Contenders:

* the raw floor: one ``requests.Session`` with ``trust_env`` off, SharedKey
  signed by hand, pre-built JSON bodies, no response parsing for inserts and
  ``json.loads`` of the body for reads;
* raw urllib3: the same requests on a ``urllib3.PoolManager`` (what the
  ``requests`` session layer costs on top of it, for information);
* tablesdk: ``client.insert_entity`` / ``client.get_entity`` (a
  ``DynamicEntity`` each, validated, encoded and decoded);
* azure-data-tables 12.7 (``create_entity`` / ``get_entity``) when it is
  installed (benchmarks/setup-venv.sh).

The tables give median operations/s with the min-max range, client CPU µs per
operation (``time.process_time``), and the ratios to azure-data-tables and to
the floor of the same repetitions. ``--callgrind`` counts the client's
instructions per operation instead (valgrind; the process runs 0 and ``ops``
operations after the same setup, and the difference is divided by ``ops``):
repeatable on a loaded machine, where the CPU-time figures move with the load.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from email.utils import formatdate
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _common import DEVSTORE_KEY, Series, azurite, connection_string, machine, sample_properties  # noqa: E402

ACCOUNT = "devstoreaccount1"
CONTENDERS = ("floor", "urllib3", "tablesdk", "azure")
LABELS = {
    "floor": "raw requests, trust_env off (floor)",
    "urllib3": "raw urllib3 pool (information)",
    "tablesdk": "tablesdk insert_entity / get_entity",
    "azure": "azure-data-tables 12.7 create_entity / get_entity",
}


def have_azure() -> bool:
    try:
        import azure.data.tables  # noqa: F401
    except ImportError:
        return False
    return True


def fresh_table() -> str:
    return "single" + uuid.uuid4().hex[:12]


# ------------------------------------------------------------------ contenders
#
# Each contender is made for one endpoint and gives insert(table, count) and read(table, count):
# ``count`` operations each, the reads of the entities the inserts wrote (RowKeys r0..r{count-1}).


class Raw:
    """The floor: SharedKey signed by hand, pre-built bodies (``requests`` or a bare urllib3 pool)."""

    def __init__(self, endpoint: str, bodies: list[bytes], *, pool: bool) -> None:
        self.endpoint = endpoint
        self.bodies = bodies
        self.key = base64.b64decode(DEVSTORE_KEY)
        self.prefix = "/" + endpoint.split("/", 3)[3]
        if pool:
            import urllib3

            manager = urllib3.PoolManager(maxsize=16)
            host = endpoint.split("/", 3)[2]
            self.pool = manager.connection_from_url(f"http://{host}/")
            self.send = self._send_urllib3
        else:
            import requests

            self.session = requests.Session()
            self.session.trust_env = False
            self.send = self._send_requests

    def _headers(self, method: str, path: str, content_type: str) -> dict[str, str]:
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
        return headers

    def _send_requests(self, method: str, path: str, body: bytes | None, content_type: str) -> tuple[int, bytes]:
        response = self.session.request(
            method, self.endpoint.rsplit("/", 1)[0] + path, data=body, headers=self._headers(method, path, content_type)
        )
        return response.status_code, response.content

    def _send_urllib3(self, method: str, path: str, body: bytes | None, content_type: str) -> tuple[int, bytes]:
        response = self.pool.urlopen(method, path, body=body, headers=self._headers(method, path, content_type),
                                     redirect=False, retries=False)
        return response.status, response.data

    def insert(self, table: str, count: int) -> int:
        path = f"{self.prefix}/{table}"
        for body in self.bodies[:count]:
            status, _ = self.send("POST", path, body, "application/json")
            if status != 204:
                raise RuntimeError(f"raw insert failed: {status}")
        return count

    def read(self, table: str, count: int) -> int:
        for n in range(count):
            path = f"{self.prefix}/{table}(PartitionKey='p',RowKey='r{n}')"
            status, body = self.send("GET", path, None, "")
            if status != 200:
                raise RuntimeError(f"raw read failed: {status}")
            json.loads(body)
        return count


class Tablesdk:
    def __init__(self, endpoint: str, count: int) -> None:
        from tablesdk import CloudStorageAccount, DynamicEntity

        self.client = CloudStorageAccount.parse(connection_string(endpoint)).create_cloud_table_client()
        self.make: Callable[[int], DynamicEntity] = lambda n: DynamicEntity(
            PartitionKey="p", RowKey=f"r{n}", **sample_properties(n)
        )
        self.entities = [self.make(n) for n in range(count)]

    def bodies(self) -> list[bytes]:
        from tablesdk._entities._entity import entity_to_payload

        return [self.client._format.serialize_entity(entity_to_payload(e)) for e in self.entities]

    def create(self, table: str) -> None:
        self.client.create_table(table)

    def insert(self, table: str, count: int) -> int:
        for entity in self.entities[:count]:
            entity.etag = None
            self.client.insert_entity(table, entity)
        return count

    def read(self, table: str, count: int) -> int:
        get = self.client.get_entity
        for n in range(count):
            get(table, "p", f"r{n}")
        return count


class Azure:
    def __init__(self, endpoint: str, count: int) -> None:
        from azure.data.tables import EdmType, EntityProperty, TableServiceClient

        self.service = TableServiceClient.from_connection_string(connection_string(endpoint))
        self.entities = []
        for n in range(count):
            entity = {"PartitionKey": "p", "RowKey": f"r{n}", **sample_properties(n)}
            entity["Big"] = EntityProperty(entity["Big"], EdmType.INT64)
            self.entities.append(entity)

    def insert(self, table: str, count: int) -> int:
        client = self.service.get_table_client(table)
        for entity in self.entities[:count]:
            client.create_entity(entity)
        return count

    def read(self, table: str, count: int) -> int:
        client = self.service.get_table_client(table)
        for n in range(count):
            client.get_entity("p", f"r{n}")
        return count


def make_contenders(endpoint: str, count: int, names: list[str]) -> tuple[Tablesdk, dict[str, Any]]:
    sdk = Tablesdk(endpoint, count)
    made: dict[str, Any] = {}
    for name in names:
        if name == "floor":
            made[name] = Raw(endpoint, sdk.bodies(), pool=False)
        elif name == "urllib3":
            made[name] = Raw(endpoint, sdk.bodies(), pool=True)
        elif name == "tablesdk":
            made[name] = sdk
        elif name == "azure":
            made[name] = Azure(endpoint, count)
    return sdk, made


# ------------------------------------------------------------------ timed runs


def timed(args: argparse.Namespace, endpoint: str) -> None:
    names = [n for n in args.only if n != "azure" or have_azure()]
    sdk, made = make_contenders(endpoint, args.ops, names)
    inserts = {n: Series(LABELS[n]) for n in names}
    reads = {n: Series(LABELS[n]) for n in names}
    made_tables: list[str] = []
    for rep in range(args.repeats):
        for name in names:
            table = fresh_table()
            sdk.create(table)
            made_tables.append(table)
            contender = made[name]
            inserts[name].run(lambda: contender.insert(table, args.ops))
            reads[name].run(lambda: contender.read(table, args.ops))
        print(f"repetition {rep + 1}/{args.repeats} done", file=sys.stderr, flush=True)
    for table in made_tables:
        sdk.client.delete_table(table)
    print(f"{machine()}; {args.ops} operations per run, {args.repeats} interleaved repetitions\n")
    for title, series in (("Single inserts", inserts), ("Point reads", reads)):
        print(table_of(title, series))
        print()


def table_of(title: str, series: dict[str, Series]) -> str:
    floor, azure = series.get("floor"), series.get("azure")
    lines = [f"{title}:", "", "| contender | ops/s median (min-max) | client CPU µs/op | x azure-data-tables | x raw floor (ops/s) | x raw floor (CPU) |",
             "|---|---|---|---|---|---|"]
    floor_cpu = statistics.median(floor.cpu_per_entity) if floor else None
    for one in series.values():
        rate = one.median
        cpu = statistics.median(one.cpu_per_entity)
        x_azure = f"{rate / azure.median:.2f}" if azure else "-"
        x_floor = f"{rate / floor.median:.2f}" if floor else "-"
        x_cpu = f"{floor_cpu / cpu:.2f}" if floor_cpu else "-"
        lines.append(f"| {one.label} | {rate:,.0f} ({min(one.rates):,.0f}-{max(one.rates):,.0f}) | {cpu * 1e6:.1f} "
                     f"| {x_azure} | {x_floor} | {x_cpu} |")
    return "\n".join(lines)


# ------------------------------------------------------------------ instructions


def child(args: argparse.Namespace, endpoint: str) -> None:
    """One contender, ``--child-ops`` operations of ``--kind`` after a setup that does not depend on them."""
    sdk, made = make_contenders(endpoint, args.ops, [args.child])
    contender = made[args.child]
    table = args.table
    contender.read(table, 1)  # warm: the connection, lazy imports, caches
    if args.kind == "insert":
        contender.insert(fresh_sub(sdk, table), 1)
        target = fresh_sub(sdk, table)
        contender.insert(target, args.child_ops)
    else:
        contender.read(table, args.child_ops)


def fresh_sub(sdk: Tablesdk, table: str) -> str:
    name = table + "x" + uuid.uuid4().hex[:8]  # under the run's prefix, which the run deletes
    sdk.create(name)
    return name


def callgrind(args: argparse.Namespace, endpoint: str) -> None:
    names = [n for n in args.only if n != "azure" or have_azure()]
    sdk = Tablesdk(endpoint, args.ops)
    table = fresh_table()
    sdk.create(table)
    sdk.insert(table, args.ops)
    rows = []
    try:
        for name in names:
            per_kind = []
            for kind in ("insert", "read"):
                counts = [instructions(endpoint, name, kind, n, args.ops, table) for n in (0, args.ops)]
                per_kind.append((counts[1] - counts[0]) / args.ops)
            rows.append((name, *per_kind))
            print(f"{name}: done", file=sys.stderr, flush=True)
    finally:
        for listed in list(sdk.client.list_tables()):
            if listed.startswith(table):  # this run's tables only (others may be running)
                sdk.client.delete_table(listed)
    floor = {kind: dict((r[0], r[1 + i]) for r in rows).get("floor") for i, kind in enumerate(("insert", "read"))}
    print(f"{machine()}; client instructions per operation (callgrind, {args.ops} operations)\n")
    print("| contender | insert | x floor | point read | x floor |")
    print("|---|---|---|---|---|")
    for name, ins, read in rows:
        fi = f"{floor['insert'] / ins:.2f}" if floor["insert"] else "-"
        fr = f"{floor['read'] / read:.2f}" if floor["read"] else "-"
        print(f"| {LABELS[name]} | {ins:,.0f} | {fi} | {read:,.0f} | {fr} |")


def instructions(endpoint: str, name: str, kind: str, count: int, ops: int, table: str) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__,
             "--url", endpoint, "--child", name, "--kind", kind, "--child-ops", str(count), "--ops", str(ops),
             "--table", table],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        match = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.M)
        assert match, "no totals in the callgrind output"
        return int(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="an Azurite table endpoint (default: start one)")
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", nargs="+", choices=CONTENDERS, default=list(CONTENDERS))
    parser.add_argument("--callgrind", action="store_true", help="count instructions (valgrind) instead of timing")
    parser.add_argument("--child", choices=CONTENDERS, help=argparse.SUPPRESS)
    parser.add_argument("--kind", choices=("insert", "read"), help=argparse.SUPPRESS)
    parser.add_argument("--child-ops", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--table", help=argparse.SUPPRESS)
    args = parser.parse_args()
    with azurite(args.url) as endpoint:
        if args.child:
            child(args, endpoint)
        elif args.callgrind:
            callgrind(args, endpoint)
        else:
            start = time.perf_counter()
            timed(args, endpoint)
            print(f"({time.perf_counter() - start:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
