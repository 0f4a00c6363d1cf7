"""How close ``bulk_insert`` with W workers comes to the CPU ceiling the machine leaves it.

    python benchmarks/bulk_ceiling.py [--latency 0.02] [--repeats 5] [--workers 8]

The client alone, against concurrency.py's in-process synthetic service (a sleep of
``--latency`` per request, answers from memory: no proxy, no Azurite, no connection pool).
With W workers and C seconds of client CPU per request, W x C > L + C means the workers
want more than one core; under the GIL the process can then use at most one core, so
its ceiling is 1 / C requests per second and ``utilisation = rate x C`` (process CPU
seconds per wall second) says how much of it was reached. A core is not all there is
on a shared machine: before and after each W-worker run a busy loop (one thread, pure
Python, ``--probe`` seconds) measures the share of a core one always-runnable thread
gets right then; the W-worker run is compared with the mean of the two probes.

Each repetition runs, in turn: probe, 1 worker, probe, W workers, probe, W workers
with ``sys.setswitchinterval(--switch)`` (a shorter GIL hand-off), probe. Printed per
run: entities/s, CPU us/entity, utilisation, the probes' share, involuntary context
switches per request (the process preempted by another) and the load average.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _common import DEVSTORE_KEY, machine  # noqa: E402
from bulk import tablesdk_entities  # noqa: E402
from concurrency import SyntheticService  # noqa: E402
from query import PARTITIONS, PER_PARTITION  # noqa: E402

from tablesdk import CloudStorageAccount  # noqa: E402


def probe(seconds: float) -> float:
    """The share of one core a single always-runnable Python thread gets now (CPU / wall)."""
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    n = 0
    while time.perf_counter() - wall0 < seconds:
        for _ in range(2000):
            n += 1
    return (time.thread_time() - cpu0) / (time.perf_counter() - wall0)


def run(client: Any, entities: list[Any], workers: int) -> dict[str, float]:
    before = resource.getrusage(resource.RUSAGE_SELF)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = client.bulk_insert("synthetic", entities, max_workers=workers)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    after = resource.getrusage(resource.RUSAGE_SELF)
    assert not result.failed, result.failed[0].error
    requests = len(entities) / PER_PARTITION
    return {
        "rate": len(entities) / wall,
        "cpu_us": cpu / len(entities) * 1e6,
        "util": cpu / wall,
        "preempted": (after.ru_nivcsw - before.ru_nivcsw) / requests,
        "switches": (after.ru_nvcsw - before.ru_nvcsw) / requests,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--probe", type=float, default=0.5)
    parser.add_argument("--switch", type=float, default=0.0005)
    args = parser.parse_args()
    service = SyntheticService(args.latency)
    conn = ("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
            f"AccountKey={DEVSTORE_KEY};TableEndpoint=http://127.0.0.1:9/devstoreaccount1;")
    client = CloudStorageAccount.parse(conn).create_cloud_table_client(sender=service, pool_size=max(16, args.workers))
    entities = tablesdk_entities(PARTITIONS * PER_PARTITION, PER_PARTITION)
    run(client, entities, args.workers)  # warm-up
    default_switch = sys.getswitchinterval()
    rows: dict[str, list[dict[str, float]]] = {"1": [], "W": [], "W, short switch": []}
    loads: list[float] = []
    for rep in range(args.repeats):
        shares = [probe(args.probe)]
        rows["1"].append({**run(client, entities, 1), "share": shares[-1]})
        shares.append(probe(args.probe))
        one = run(client, entities, args.workers)
        shares.append(probe(args.probe))
        rows["W"].append({**one, "share": (shares[-2] + shares[-1]) / 2})
        sys.setswitchinterval(args.switch)
        try:
            short = run(client, entities, args.workers)
        finally:
            sys.setswitchinterval(default_switch)
        shares.append(probe(args.probe))
        rows["W, short switch"].append({**short, "share": (shares[-2] + shares[-1]) / 2})
        loads.append(os.getloadavg()[0])
        print(f"repetition {rep + 1}/{args.repeats} done, load average {loads[-1]:.1f}", file=sys.stderr, flush=True)

    lat = args.latency * 1000
    print(f"bulk_insert of {len(entities):,} entities, synthetic service, {lat:.0f} ms per request; {machine()}; "
          f"{args.repeats} interleaved repetitions; load average (1 min) {min(loads):.1f}-{max(loads):.1f}; "
          f"switch interval {default_switch * 1000:g} ms (short: {args.switch * 1000:g} ms)")
    print()
    print("| workers | entities/s median (min-max) | CPU µs/entity | utilisation (cores) | core share of a busy loop | "
          "utilisation / share | preempted per request | voluntary switches per request |")
    print("|---|---|---|---|---|---|---|---|")
    for label, runs in rows.items():
        name = label.replace("W", str(args.workers))
        rates = [r["rate"] for r in runs]

        def med(key: str) -> float:
            return statistics.median(r[key] for r in runs)

        print(f"| {name} | {statistics.median(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f}) | {med('cpu_us'):.1f} | "
              f"{med('util'):.2f} | {med('share'):.2f} | {statistics.median(r['util'] / r['share'] for r in runs):.2f} | "
              f"{med('preempted'):.1f} | {med('switches'):.1f} |")
    print()
    c8 = statistics.median(r["cpu_us"] for r in rows["W"]) * PER_PARTITION / 1e6
    c1 = statistics.median(r["cpu_us"] for r in rows["1"]) * PER_PARTITION / 1e6
    r1 = statistics.median(r["rate"] for r in rows["1"])
    r8 = statistics.median(r["rate"] for r in rows["W"])
    share = statistics.median(r["share"] for r in rows["W"])
    bound = (args.latency + c8) / c8
    print(f"{args.workers} workers / 1 worker: {r8 / r1:.2f}x; (L+C)/C with C of {args.workers} workers "
          f"({c8 * 1000:.2f} ms per request): {bound:.2f}x, reached {r8 / r1 / bound:.0%}; "
          f"with C of 1 worker ({c1 * 1000:.2f} ms): {(args.latency + c1) / c1:.2f}x")
    print(f"CPU ceiling of {args.workers} workers: one core / C = {PER_PARTITION / c8:,.0f} entities/s; "
          f"the core share the machine left ({share:.2f}) / C = {share * PER_PARTITION / c8:,.0f} entities/s; "
          f"reached {statistics.median(r['util'] / r['share'] for r in rows['W']):.0%} (median of the runs' utilisation / share)")
    print(f"with the 1-worker rate as measured (its planning overlaps its round trips): bound "
          f"{share * PER_PARTITION / c8 / r1:.2f}x at the share left, {PER_PARTITION / c8 / r1:.2f}x with a whole core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
