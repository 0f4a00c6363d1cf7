"""A table read by ``tablesdk.dask.read_table`` on worker processes next to one serial scan, at 20 ms a request.

    PYTHONPATH=. python benchmarks/dask_scan.py [--endpoint URL] [--entities 100000] [--repeat 3]
        [--latency 0.02] [--config K:T ...] [--azurite-script scripts/azurite.sh]

Issue 26's goal: through the latency relay (benchmarks/latency_proxy.py) in
front of Azurite, ``read_table(conn, table, npartitions=K).compute()`` on a
``LocalCluster(n_workers=2, processes=True)`` reads 100,000 entities at least
6x faster than one serial scan, and each worker's peak memory stays bounded by
the partition size.

Without ``--endpoint`` it starts its own Azurite on a free loopback port (with
``--azurite-script``; stopped at the end) and loads ``--entities`` entities
(the ten mixed properties of benchmarks/query.py) over partitions of 100 with
``bulk_insert``, straight to Azurite. Then, with the relay holding each request
``--latency`` seconds, it times, interleaved over ``--repeat`` repetitions:

* ``serial entities``: iterating ``client.create_query(table)`` (read-ahead on,
  as by default): one process, one thread decoding;
* ``serial to_arrow``: ``to_arrow()`` of the same query;
* ``dask K=.. T=..``: ``read_table(conn, table, npartitions=K).compute()`` on a
  fresh ``LocalCluster(n_workers=2, threads_per_worker=T, processes=True)``
  per run (started and warmed up, with pandas, pyarrow and tablesdk imported
  on the workers, outside the timing; finding boundaries and the schema
  sample are inside it).

It prints entities/s, the ratio of each dask run to the serial scans of the
same repetition (and the median), the client CPU per entity
(``time.process_time`` of this process; for the dask runs that is the
scheduler and gathering the frame, and the workers' own CPU is measured on
them), the CPU per page of Azurite and of the relay (``/proc``), each worker's
peak RSS (``ru_maxrss``) against its RSS after the warm-up and the in-memory
size of one partition, and the machine (nproc, load average before and after).
Last, the bound: a serial scan that reads ahead costs about ``max(L, C)`` per
page (``L`` the relay's latency, ``C`` the client CPU per page); two processes
on two cores can at best halve the CPU part, and they share those cores with
Azurite and the relay.
"""

from __future__ import annotations

import argparse
import functools
import logging
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _common import _free_port, connection_string, latency_proxy, machine, process_cpu, sample_properties  # noqa: E402

from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, EdmType, EntityProperty  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PER_PARTITION = 100
PAGE = 1000  # entities per page the service returns (no page_size is set)
TABLE = "benchdaskscan"


# ---------------------------------------------------------------- the service and its data


@contextmanager
def own_azurite(script: Path) -> Iterator[tuple[str, int | None]]:
    """An Azurite started with ``script`` on a free loopback port: its endpoint and its pid (for its CPU)."""
    port = _free_port()
    env = {**os.environ, "AZURITE_TABLE_PORT": str(port)}
    subprocess.run(["bash", str(script), "start"], check=True, env=env, stdout=sys.stderr)
    try:
        run_dir = Path(os.environ.get("AZURITE_RUN") or Path(os.environ.get("AZURITE_DIR") or script.parents[1] / ".azurite") / "run")
        try:
            pid: int | None = int((run_dir / f"table-{port}.pid").read_text().strip())
        except (OSError, ValueError):
            pid = None
        yield f"http://127.0.0.1:{port}/devstoreaccount1", pid
    finally:
        subprocess.run(["bash", str(script), "stop"], check=False, env=env, stdout=sys.stderr)


def entities(count: int) -> Iterator[DynamicEntity]:
    """``count`` entities, 100 a partition (p00000, p00001, ...), ten mixed properties each."""
    for n in range(count):
        props = sample_properties(n)
        props["Big"] = EntityProperty(props["Big"], EdmType.INT64)
        yield DynamicEntity(f"p{n // PER_PARTITION:05d}", f"{n % PER_PARTITION:04d}", **props)


def load(client: CloudTableClient, count: int) -> float:
    """Create the table afresh and insert ``count`` entities; returns the seconds it took."""
    client.delete_table_if_exists(TABLE)
    client.create_table(TABLE)
    start = time.perf_counter()
    client.bulk_insert(TABLE, entities(count)).raise_on_error()
    return time.perf_counter() - start


# ---------------------------------------------------------------- measurements


@dataclass
class Runs:
    """One contender's runs: entities/s, client CPU s per entity and the service's CPU per run."""

    label: str
    rates: list[float] = field(default_factory=list)
    cpu_per_entity: list[float] = field(default_factory=list)
    azurite_cpu: list[float] = field(default_factory=list)
    worker_cpu_per_entity: list[float] = field(default_factory=list)
    worker_maxrss_kib: list[int] = field(default_factory=list)
    worker_peak_kib: list[int] = field(default_factory=list)
    worker_growth_kib: list[int] = field(default_factory=list)
    partition_bytes: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.rates)

    def record(self, count: int, wall: float, cpu: float, azurite_cpu: float | None) -> None:
        self.rates.append(count / wall)
        self.cpu_per_entity.append(cpu / count)
        if azurite_cpu is not None:
            self.azurite_cpu.append(azurite_cpu)


def _cpu_seconds() -> float:
    """This process's CPU seconds (run on each worker)."""
    return time.process_time()


def _memory_kib() -> dict[str, int]:
    """This process's memory, KiB (run on each worker): ``ru_maxrss`` and ``/proc/self/status``'s
    VmRSS (now) and VmHWM (peak). A worker is forked from this process and then exec'd, and Linux
    carries ``ru_maxrss`` across both: it starts at this process's peak (the frames read so far).
    VmHWM is the peak of the worker's own address space, the figure that says what a read cost."""
    status = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            status[name] = int(value.split()[0])
    return {"ru_maxrss": int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss), **status}


def _warm_up() -> dict[str, int]:
    """Import what a read task imports, so the baseline RSS holds the libraries and not the data."""
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
    import pyarrow.compute  # noqa: F401

    import tablesdk.dask  # noqa: F401

    return _memory_kib()


def timed(func: Callable[[], int], azurite_pid: int | None) -> tuple[int, float, float, float | None]:
    """Run ``func`` (returns its entity count): count, wall seconds, this process's CPU, Azurite's CPU."""
    azurite0 = process_cpu(azurite_pid)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    count = func()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    azurite1 = process_cpu(azurite_pid)
    used = azurite1 - azurite0 if azurite0 is not None and azurite1 is not None else None
    return count, wall, cpu, used


def serial_run(runs: Runs, func: Callable[[], int], expected: int, azurite_pid: int | None) -> None:
    count, wall, cpu, azurite_cpu = timed(func, azurite_pid)
    assert count == expected, f"{runs.label}: read {count} of {expected}"
    runs.record(count, wall, cpu, azurite_cpu)


def dask_run(runs: Runs, conn: str, npartitions: int, threads: int, expected: int, azurite_pid: int | None) -> None:
    """One read_table(...).compute() on a fresh 2-process LocalCluster (cluster start not timed)."""
    from dask.distributed import Client, LocalCluster

    import tablesdk.dask

    cluster = LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=2, threads_per_worker=threads, processes=True, dashboard_address=None, silence_logs=logging.ERROR)
    with cluster, Client(cluster) as client:  # type: ignore[no-untyped-call]
        baseline: dict[str, dict[str, int]] = client.run(_warm_up)
        worker_cpu0: dict[str, float] = client.run(_cpu_seconds)
        frame: list[Any] = []

        def read() -> int:  # Dask's default config: the Binary property comes back as Arrow binary
            frame.append(tablesdk.dask.read_table(conn, TABLE, npartitions=npartitions).compute())
            return len(frame[0])

        count, wall, cpu, azurite_cpu = timed(read, azurite_pid)
        worker_cpu1: dict[str, float] = client.run(_cpu_seconds)
        peaks: dict[str, dict[str, int]] = client.run(_memory_kib)
    assert count == expected, f"{runs.label}: read {count} of {expected}"
    runs.record(count, wall, cpu, azurite_cpu)
    runs.worker_cpu_per_entity.append(sum(worker_cpu1[w] - worker_cpu0[w] for w in worker_cpu1) / count)
    for worker, memory in sorted(peaks.items()):
        runs.worker_maxrss_kib.append(memory["ru_maxrss"])
        runs.worker_peak_kib.append(memory["VmHWM"])
        runs.worker_growth_kib.append(memory["VmHWM"] - baseline[worker]["VmRSS"])
    runs.partition_bytes.append(float(frame[0].memory_usage(deep=True).sum()) / npartitions)


# ---------------------------------------------------------------- the report


def parse_config(text: str) -> tuple[int, int]:
    partitions, _, threads = text.partition(":")
    return int(partitions), int(threads or 1)


def load_average() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", help="an Azurite table endpoint (default: start one)")
    parser.add_argument("--azurite-script", type=Path, default=ROOT / "scripts" / "azurite.sh",
                        help="scripts/azurite.sh of a checkout whose .azurite holds an installed Azurite")
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds the relay holds each request")
    parser.add_argument("--config", action="append", type=parse_config, metavar="K:T",
                        help="npartitions:threads_per_worker of a dask contender (default 8:1 and 16:4)")
    args = parser.parse_args()
    configs: list[tuple[int, int]] = args.config or [(8, 1), (16, 4)]
    nproc, load_before = len(os.sched_getaffinity(0)), load_average()
    print(f"machine: {machine()}; nproc {nproc}; load average (1/5/15 min) before: {load_before}", file=sys.stderr)

    @contextmanager
    def service() -> Iterator[tuple[str, int | None]]:
        if args.endpoint:
            yield args.endpoint.rstrip("/"), None
        else:
            with own_azurite(args.azurite_script) as started:
                yield started

    relay_cpu: list[float] = []
    with service() as (endpoint, azurite_pid):
        direct = CloudStorageAccount.parse(connection_string(endpoint)).create_cloud_table_client()
        load_seconds = load(direct, args.entities)
        print(f"loaded {args.entities:,} entities in {load_seconds:.1f} s", file=sys.stderr)
        try:
            with latency_proxy(endpoint, args.latency, relay_cpu) as proxied:
                conn = connection_string(proxied)
                client = CloudStorageAccount.parse(conn).create_cloud_table_client()
                query = client.create_query(TABLE)
                assert query.reads_ahead
                query.take(PAGE).to_arrow()  # imports pyarrow and warms both paths up before any timing
                sum(1 for _ in query.take(PAGE))
                serial = [Runs("serial entities"), Runs("serial to_arrow")]
                dasks = [Runs(f"dask K={k} T={t}") for k, t in configs]
                work: list[tuple[Runs, Callable[[], None]]] = [
                    (serial[0], lambda: serial_run(serial[0], lambda: sum(1 for _ in query), args.entities, azurite_pid)),
                    (serial[1], lambda: serial_run(serial[1], lambda: int(query.to_arrow().num_rows), args.entities,
                                                   azurite_pid)),
                ]
                for runs, (k, t) in zip(dasks, configs):
                    work.append((runs, functools.partial(dask_run, runs, conn, k, t, args.entities, azurite_pid)))
                for rep in range(args.repeat):
                    for runs, run in work:
                        run()
                        print(f"  rep {rep + 1}: {runs.label}: {runs.rates[-1]:,.0f} entities/s", file=sys.stderr,
                              flush=True)
        finally:
            direct.delete_table_if_exists(TABLE)
    load_after = load_average()
    print_report(args, configs, serial, dasks, relay_cpu, nproc, load_before, load_after)


def print_report(args: argparse.Namespace, configs: list[tuple[int, int]], serial: list[Runs], dasks: list[Runs],
                 relay_cpu: list[float], nproc: int, load_before: str, load_after: str) -> None:
    n, repeats = args.entities, args.repeat
    pages = math.ceil(n / PAGE)
    print(f"read_table on 2 worker processes vs one serial scan: {n:,} entities ({n // PER_PARTITION:,} partitions "
          f"of {PER_PARTITION}), relay latency {args.latency * 1000:.0f} ms, {repeats} interleaved repetitions")
    print(f"machine: {machine()}; nproc {nproc}; load average (1/5/15 min) before {load_before}, after {load_after}\n")
    print("| contender | entities/s median (min-max) | client CPU µs/entity | worker CPU µs/entity "
          "| Azurite CPU ms/page | x serial entities, per rep (median) | x serial to_arrow, per rep (median) |")
    print("|---|---|---|---|---|---|---|")
    for runs in serial + dasks:
        worker = f"{statistics.median(runs.worker_cpu_per_entity) * 1e6:.1f}" if runs.worker_cpu_per_entity else "-"
        azurite = f"{statistics.median(runs.azurite_cpu) / pages * 1000:.1f}" if runs.azurite_cpu else "-"
        ratios = []
        for base in serial:
            per_rep = [mine / theirs for mine, theirs in zip(runs.rates, base.rates)]
            ratios.append(", ".join(f"{r:.2f}" for r in per_rep) + f" ({statistics.median(per_rep):.2f})")
        print(f"| {runs.label} | {runs.median:,.0f} ({min(runs.rates):,.0f}-{max(runs.rates):,.0f}) "
              f"| {statistics.median(runs.cpu_per_entity) * 1e6:.1f} | {worker} | {azurite} | {ratios[0]} | {ratios[1]} |")
    print("\nworker memory (ru_maxrss, each of the 2 workers of each run):\n")
    print("| contender | entities a partition | one partition in pandas, MiB | ru_maxrss MiB (inherited, see "
          "_memory_kib) | peak RSS (VmHWM) MiB (min-max) | peak over the warmed-up worker's RSS, MiB (min-max) |")
    print("|---|---|---|---|---|---|")
    for runs, (k, _) in zip(dasks, configs):
        mib = 1024.0
        print(f"| {runs.label} | {n // k:,} | {statistics.median(runs.partition_bytes) / 2**20:.1f} "
              f"| {statistics.median(runs.worker_maxrss_kib) / mib:.0f} "
              f"| {statistics.median(runs.worker_peak_kib) / mib:.0f} ({min(runs.worker_peak_kib) / mib:.0f}-"
              f"{max(runs.worker_peak_kib) / mib:.0f}) | {statistics.median(runs.worker_growth_kib) / mib:.0f} "
              f"({min(runs.worker_growth_kib) / mib:.0f}-{max(runs.worker_growth_kib) / mib:.0f}) |")

    # The bound. Serial with read-ahead: about max(L, C) a page (the next page is fetched while
    # this one is decoded). Two processes can at best halve the CPU part: C / 2 a page, so at most
    # max(L, C) / (C / 2). Azurite (S, one Node thread) and the relay (R) run on the same two cores:
    # S is part of each round trip of the serial scan (max(L + S, C)), and the two cores must also
    # give S + R to every page of the parallel read (and S alone bounds it: one thread).
    latency = args.latency
    total_pages = pages * sum(len(r.rates) for r in serial + dasks)
    relay = (relay_cpu[0] / total_pages) if relay_cpu else 0.0
    print()
    for runs in serial:
        c = statistics.median(runs.cpu_per_entity) * PAGE
        s = statistics.median(runs.azurite_cpu) / pages if runs.azurite_cpu else 0.0
        measured = PAGE / runs.median
        simple = max(latency, c) / (c / 2)
        shared = max(latency + s, c) / max((c + s + relay) / 2, s)
        print(f"{runs.label}: C = {c * 1000:.1f} ms/page, L = {latency * 1000:.0f} ms, Azurite S = {s * 1000:.1f} "
              f"ms/page, relay R = {relay * 1000:.2f} ms/page; measured {measured * 1000:.1f} ms/page "
              f"(model max(L, C) = {max(latency, c) * 1000:.1f}, max(L + S, C) = {max(latency + s, c) * 1000:.1f})")
        print(f"  bound on 2 cores: max(L, C) / (C / 2) = {simple:.2f}x; with Azurite and the relay on them: "
              f"max(L + S, C) / max((C + S + R) / 2, S) = {shared:.2f}x")
        # Azurite serves every page on one thread: no number of client processes gets past 1 / S pages/s.
        if s > 0:  # unknown (0) with --endpoint: not our process to measure
                print(f"  Azurite bound: one thread at S a page serves at most {PAGE / s:,.0f} entities/s with a whole core "
                  f"to itself, max(L + S, C) / S = {max(latency + s, c) / s:.2f}x this scan's model; measured "
                  f"{runs.median:,.0f} entities/s, i.e. Azurite had about {s * runs.median / PAGE:.2f} of a core")
        # n cores for the client alone: max(L, C) / (C / n) >= 6.
        print(f"  6x needs >= {6 * c / max(latency, c):.1f} cores for the client's part (Azurite's and the relay's "
              f"besides), or C <= L / 3 = {latency / 3 * 1000:.1f} ms/page with 2 cores to itself")
    for runs in dasks:
        if runs.worker_cpu_per_entity:
            cw = statistics.median(runs.worker_cpu_per_entity) * PAGE
            cd = statistics.median(runs.cpu_per_entity) * PAGE
            c = statistics.median(serial[0].cpu_per_entity) * PAGE
            print(f"{runs.label}: workers' CPU {cw * 1000:.1f} ms/page (both together), scheduler and gather in this "
                  f"process {cd * 1000:.1f} ms/page; with these, max(L, C) / ((Cw + Cd) / 2) = "
                  f"{max(latency, c) / ((cw + cd) / 2):.2f}x over serial entities at best")


if __name__ == "__main__":
    main()
