"""Client-side encryption: what an encrypted insert and an encrypted query cost per entity, against plain.

    python benchmarks/encryption_cost.py [--entities 2000] [--repeats 5] [--instructions]

Every contender runs in this one process, interleaved (each repetition runs them all in turn,
so a change in the machine's load hits them alike), through the whole client (entity to
payload, the engine, the codec, the transport and retry loop) with a
:class:`~tablesdk.MockSender` answering from memory: no server, so the figures are the client's.

Contenders: ``plain`` (no policy); ``authenticated, 2 strings`` (AES-GCM, two of the ten
properties of benchmarks/_common.py's mix chosen); ``1.0, 2 strings`` (the legacy AES-CBC, the same
two); ``authenticated, all 10`` (every property). ``insert`` is ``insert_entity`` one entity at a time
(a 204 answer); ``query`` iterates a query over pages of 1,000 entities stored as each contender
writes them. Reported: client CPU µs per entity (median of the repetitions, min-max) and the ratio
to plain; with ``--instructions`` also valgrind callgrind's instructions per entity (a run of N
entities minus a run of none, in a child process), which a loaded machine does not move. The load
average is printed before and after: CPU figures on a busy shared machine spread more.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(1, str(ROOT))

from _common import machine, sample_properties  # noqa: E402

from tablesdk import (  # noqa: E402
    PROTOCOL_AUTHENTICATED,
    PROTOCOL_LEGACY,
    CloudStorageAccount,
    CloudTableClient,
    DynamicEntity,
    LocalKeyWrapper,
    MockSender,
    TableEncryptionPolicy,
)
from tablesdk._encryption import encrypt_payload  # noqa: E402
from tablesdk._entities._entity import entity_to_payload  # noqa: E402
from tablesdk._pipeline._http import HttpRequest, HttpResponse  # noqa: E402

KEY = LocalKeyWrapper(bytes(range(32)), "bench")
TWO = frozenset({"Name", "Note"})
ALL = frozenset(sample_properties(0))

#: label -> (policy or None, the properties it encrypts)
CONTENDERS: dict[str, tuple[TableEncryptionPolicy | None, frozenset[str]]] = {
    "plain": (None, frozenset()),
    "authenticated, 2 strings": (TableEncryptionPolicy(key=KEY), TWO),
    "1.0, 2 strings": (TableEncryptionPolicy(key=KEY, protocol=PROTOCOL_LEGACY), TWO),
    "authenticated, all 10": (TableEncryptionPolicy(key=KEY, protocol=PROTOCOL_AUTHENTICATED), ALL),
}
WORKLOADS = ("insert", "query")
PAGE = 1000
CONNECTION = ("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey="
              "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
              "TableEndpoint=http://127.0.0.1:9/devstoreaccount1;")


def entities(count: int) -> list[DynamicEntity]:
    return [DynamicEntity(PartitionKey=f"p{n % 10}", RowKey=f"{n:08d}", **sample_properties(n)) for n in range(count)]


def resolver(names: frozenset[str]) -> Callable[[str, str, str], bool]:
    def chosen(partition_key: str, row_key: str, name: str) -> bool:
        return name in names

    return chosen


def page_body(client: CloudTableClient, policy: TableEncryptionPolicy | None, names: frozenset[str]) -> bytes:
    """A page of :data:`PAGE` entities as the service answers a query, stored as ``policy`` writes them."""
    items = []
    for entity in entities(PAGE):
        payload = entity_to_payload(entity)
        if policy is not None:
            payload = encrypt_payload(payload, policy, resolver(names))
        item = json.loads(client.format.serialize_entity(payload))
        item["odata.etag"] = "W/\"datetime'2026-11-29T09%3A00%3A00.1234567Z'\""
        item["Timestamp"] = "2026-11-29T09:00:00.1234567Z"
        items.append(item)
    return json.dumps({"odata.metadata": "http://x/$metadata#t", "value": items}).encode()


def client_for(workload: str, label: str, total: int) -> tuple[CloudTableClient, Callable[[int], int]]:
    """A client answering from memory, and the run of ``workload`` for contender ``label`` over n entities."""
    policy, names = CONTENDERS[label]
    served = [0]
    body: list[bytes] = []

    def answer(request: HttpRequest) -> HttpResponse:
        if request.method == "POST":
            return MockSender.response(204, headers={"ETag": "W/\"datetime'2026-11-29T09%3A00%3A00.1Z'\""})
        served[0] += 1
        headers = {"Content-Type": "application/json;odata=minimalmetadata;streaming=true;charset=utf-8"}
        if served[0] * PAGE < total:
            headers["x-ms-continuation-NextPartitionKey"] = f"1!8!{served[0]:06d}"
            headers["x-ms-continuation-NextRowKey"] = "1!8!MDAwMDAw"
        return MockSender.response(200, body[0], headers)

    account = CloudStorageAccount.parse(CONNECTION)
    encryption = policy.replace(encryption_resolver=resolver(names)) if policy is not None else None
    client = account.create_cloud_table_client(sender=MockSender(answer), encryption_policy=encryption)
    if workload == "insert":
        rows = entities(total)

        def insert(count: int) -> int:
            for entity in rows[:count]:
                client.insert_entity("bench", entity)
            return count

        return client, insert

    body.append(page_body(client, policy, names))  # queries only: under valgrind it is most of a run

    def query(count: int) -> int:
        served[0] = 0
        seen = 0
        for _ in client.create_query("bench"):
            seen += 1
            if seen == count:
                break
        return seen

    return client, query


def cpu_per_entity(runs: dict[tuple[str, str], Callable[[int], int]], count: int, repeats: int) -> dict[tuple[str, str], list[float]]:
    """CPU seconds per entity of every run, ``repeats`` times, interleaved."""
    found: dict[tuple[str, str], list[float]] = {key: [] for key in runs}
    for repeat in range(repeats):
        for key, run in runs.items():
            run(min(count, PAGE))  # warm-up: first-use costs (the key, the codec) are not per entity
            start = time.process_time()
            done = run(count)
            found[key].append((time.process_time() - start) / done)
        print(f"repetition {repeat + 1}/{repeats} done", file=sys.stderr, flush=True)
    return found


def instructions(workload: str, label: str, count: int) -> int:
    """Instructions of a child process running ``workload`` for ``label`` over ``count`` entities."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__,
                        "--child", workload, label, str(count)], check=True, capture_output=True)
        match = re.search(r"^summary:\s*(\d+)", out.read_text(), re.M)
        assert match, "no callgrind summary"
        return int(match.group(1))


def child(workload: str, label: str, count: int) -> None:
    _, run = client_for(workload, label, max(count, PAGE))
    run(10)  # the same warm-up in both runs: what differs is count entities
    if count:
        run(count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entities", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--instructions", action="store_true", help="Also count instructions with valgrind.")
    parser.add_argument("--child", nargs=3, metavar=("WORKLOAD", "LABEL", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    load_before = os.getloadavg()
    runs = {}
    for workload in WORKLOADS:
        for label in CONTENDERS:
            runs[workload, label] = client_for(workload, label, args.entities)[1]
    cpu = cpu_per_entity(runs, args.entities, args.repeats)
    counted: dict[tuple[str, str], float] = {}
    if args.instructions:
        n = min(args.entities, 200)
        for key in runs:
            counted[key] = (instructions(*key, n) - instructions(*key, 0)) / n
    load_after = os.getloadavg()
    print(f"## Client-side encryption, per entity ({machine()}; {args.entities} entities x {args.repeats})\n")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}\n")
    print("| workload | contender | CPU µs/entity median (min-max) | x plain |"
          + (" instructions/entity | x plain |" if counted else ""))
    print("|---|---|---|---|" + ("---|---|" if counted else ""))
    for workload in WORKLOADS:
        plain = statistics.median(cpu[workload, "plain"])
        for label in CONTENDERS:
            values = cpu[workload, label]
            median = statistics.median(values)
            row = (f"| {workload} | {label} | {median * 1e6:.1f} ({min(values) * 1e6:.1f}-{max(values) * 1e6:.1f}) "
                   f"| {median / plain:.2f} |")
            if counted:
                row += f" {counted[workload, label]:,.0f} | {counted[workload, label] / counted[workload, 'plain']:.2f} |"
            print(row)


if __name__ == "__main__":
    main()
