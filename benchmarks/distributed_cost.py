"""CPU per entity of the distributed reads (Dask, Ray, Spark) next to one serial ``to_arrow()``, all processes counted.

    PYTHONPATH=. python benchmarks/distributed_cost.py [--sizes 5000 40000] [--repeat 3] [--ranges 8]
        [--engines serial dask dask-gather ray ray-gather spark spark-gather] [--workers 2]

One run serves two tables of realistic entities (``--sizes``; shaped like an order
service's rows: thirteen properties of every common EDM type, a few optional, text of
varied length, 500 entities a PartitionKey) from the bundled emulator
(``python -m tablesdk.devstore``) in its own process, and reads each of them, once
per repetition and contender, interleaved, one engine at a time (each phase starts its
engine, measures it and the serial read side by side, and stops it):

* ``serial``: ``client.create_query(table).to_arrow()`` in this process;
* ``dask``: ``tablesdk.dask.read_table(conn, table, npartitions=R).map_partitions(len)``
  computed on a ``LocalCluster`` of ``--workers`` processes (one thread each) on loopback:
  every partition is read and made a pandas frame on a worker, only its length comes back;
  ``dask-gather``: ``.compute()`` of the frame (the partitions pickled to this process and
  concatenated);
* ``ray``: ``tablesdk.ray.read_table(conn, table, parallelism=R).materialize()`` on a local
  Ray of ``--workers`` CPUs on loopback (blocks in Ray's object store); ``ray-gather``:
  ``to_arrow_refs()`` fetched to this process and concatenated;
* ``spark``: ``spark.read.format("azuretables")...load()`` written to Spark's ``noop``
  sink (every column read and made Spark rows, nothing written) on ``local[W]``;
  ``spark-gather``: ``DataFrame.toArrow()``.

Every engine is started and warmed up (one read of the small table, so that its worker
processes exist and have imported tablesdk and pyarrow) outside the measurements.

What is counted: the CPU (user + system, ``/proc/PID/stat``, with the CPU of children
each process has reaped) of this process and of every process descended from it, except
the emulator, whose CPU is reported on its own (the service's share). A process that
exits during a read is counted through its parent's reaped-children time. The processes
are grouped: ``driver`` (this process), ``jvm`` (Spark's Java process: its planning, the
conversion of Arrow batches to rows, its threads), ``daemons`` (Ray's GCS, raylet and
agents) and ``workers`` (Dask's worker and nanny processes, Ray's worker processes,
Spark's Python daemon and workers). The engines' idle cost (their daemons' heartbeats)
is measured over ``--idle`` seconds before the reads and reported as a rate; the totals
include it, a second ratio leaves it out (the engine's idle rate times the read's wall time
taken off, against the serial read with no engine started). For Dask the CPU of the threads that run the
tasks (``/proc/PID/task/TID``) is shown apart from the rest of the worker processes (their
event loop, heartbeats, profiler and nanny): the first is our read and Dask's task wrapper,
the second the engine's own. The serial read of each phase runs with that engine idle
beside it (its idle threads in this process count against the serial read too); the
phase without an engine gives the serial read alone.

Per contender and size: client CPU µs/entity (all groups), the ratio to the serial read
of the same repetition (median of the per-repetition ratios), the emulator's CPU
µs/entity, wall seconds; then the fixed cost and the slope (µs per entity) of each
contender from the two sizes: ``cpu(N) = fixed + slope x N``; last, a check of a model
(:func:`model_check`) of each read's rate from its CPU per entity and the share of a core a
busy loop got during the same read. The machine (nproc, ``uptime`` before and after) comes
first.
"""

from __future__ import annotations

import argparse
import json
import contextlib
import logging
import math
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _common import connection_string, machine  # noqa: E402

from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, EdmType, EntityProperty  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PER_PARTITION = 500
CLOCK = os.sysconf("SC_CLK_TCK")
STATUSES = ("Placed", "Paid", "Packed", "Shipped", "Delivered", "Returned")
REGIONS = ("westeurope", "northeurope", "eastus", "eastus2", "westus2", "southeastasia", "japaneast")


# ---------------------------------------------------------------- the service and its data


def order(n: int) -> DynamicEntity:
    """One entity shaped like an order service's row (13 properties, about 600 bytes of JSON)."""
    tenant, index = divmod(n, PER_PARTITION)
    placed = datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=n * 37, microseconds=n % 1000)
    props: dict[str, Any] = {
        "OrderId": uuid.UUID(int=(n * 2654435761) % (1 << 128)),
        "CustomerName": f"Customer {n % 9973} " + "abcdefghij"[: n % 10],
        "Email": f"customer{n % 9973}@example.com",
        "Status": STATUSES[n % len(STATUSES)],
        "Region": REGIONS[n % len(REGIONS)],
        "Quantity": 1 + n % 12,
        "AmountCents": EntityProperty(1_000 + (n * 7919) % 5_000_000, EdmType.INT64),
        "UnitPrice": round(9.99 + (n % 500) * 0.37, 2),
        "Priority": n % 5 == 0,
        "PlacedAt": placed,
        "Notes": ("Leave at the door. " * (n % 4)).strip(),
        "Sku": f"SKU-{(n * 31) % 100_000:06d}",
    }
    if n % 3:
        props["ShippedAt"] = placed + timedelta(hours=1 + n % 72)
    return DynamicEntity(f"tenant-{tenant:04d}", f"{index:08d}", **props)


@contextlib.contextmanager
def devstore() -> Iterator[tuple[str, int]]:
    """(endpoint, pid) of the bundled emulator in its own process."""
    server = subprocess.Popen([sys.executable, "-m", "tablesdk.devstore", "--port", "0", "--no-explorer"],
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split("serving ", 1)[1].strip()
        yield url, server.pid
    finally:
        server.terminate()
        server.wait()


def load(client: CloudTableClient, table: str, count: int) -> None:
    client.create_table(table)
    client.bulk_insert(table, (order(n) for n in range(count))).raise_on_error()


# ---------------------------------------------------------------- CPU of a process tree


def _stat(pid: int) -> tuple[str, int, float] | None:
    """(comm, ppid, CPU seconds with reaped children) of ``pid``, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = text[text.index("(") + 1: text.rindex(")")]
    fields = text.rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
    return comm, int(fields[1]), ticks / CLOCK


def _group(pid: int, comm: str) -> str:
    if pid == os.getpid():
        return "driver"
    if comm == "java":
        return "jvm"
    if comm in ("gcs_server", "raylet") or (not comm.startswith("ray::") and _is_ray_daemon(pid)):
        return "daemons"
    return "workers"


def _is_ray_daemon(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return False
    return any(part in cmdline for part in (b"ray/_private", b"ray/dashboard", b"ray/autoscaler", b"runtime_env"))


def tree_cpu(exclude: set[int]) -> dict[tuple[int, str], tuple[str, float]]:
    """CPU seconds so far of this process and each descendant (but ``exclude`` and theirs), by (pid, start)."""
    stats: dict[int, tuple[str, int, float]] = {}
    starts: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            found = _stat(int(entry))
            if found is not None:
                stats[int(entry)] = found
                try:
                    starts[int(entry)] = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[19]
                except OSError:
                    starts[int(entry)] = "?"
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    found_cpu: dict[tuple[int, str], tuple[str, float]] = {}
    todo = [os.getpid()]
    while todo:
        pid = todo.pop()
        if pid in exclude or pid not in stats:
            continue
        comm, _, cpu = stats[pid]
        found_cpu[(pid, starts[pid])] = (_group(pid, comm), cpu)
        todo.extend(children.get(pid, ()))
    return found_cpu


def cpu_delta(before: dict[tuple[int, str], tuple[str, float]], after: dict[tuple[int, str], tuple[str, float]]) -> dict[str, float]:
    """CPU seconds per group between two snapshots (a process born between them counts from zero)."""
    groups: dict[str, float] = {}
    for key, (group, cpu) in after.items():
        groups[group] = groups.get(group, 0.0) + cpu - (before[key][1] if key in before else 0.0)
    return groups


def emulator_cpu(pid: int) -> float:
    found = _stat(pid)
    return found[2] if found else 0.0


# ---------------------------------------------------------------- the contenders


def thread_cpu(threads: dict[int, list[int]]) -> float:
    """CPU seconds so far of the given threads (process id to thread ids)."""
    total = 0.0
    for pid, tids in threads.items():
        for tid in tids:
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / CLOCK
    return total


@dataclass
class Sample:
    groups: dict[str, float]
    emulator: float
    wall: float
    tasks: float = 0.0  # of which the engine's task threads (Dask: the threads that run tasks on the workers)

    @property
    def total(self) -> float:
        return sum(self.groups.values())


@dataclass
class Contender:
    name: str
    run: Callable[[str, int], int]  # (table, expected) -> entities read
    idle_rate: float = 0.0  # CPU seconds per wall second of its processes when idle
    task_threads: dict[int, list[int]] = field(default_factory=dict)  # the threads that run its tasks
    samples: dict[int, list[Sample]] = field(default_factory=dict)
    shares: dict[int, list[float]] = field(default_factory=dict)  # core_share() during each read, by size


def measure(contender: Contender, table: str, size: int, emulator_pid: int) -> Sample:
    with core_share() as (loop_pid, share):
        skip = {emulator_pid, loop_pid}
        before, emu0, wall0 = tree_cpu(skip), emulator_cpu(emulator_pid), time.perf_counter()
        tasks0 = thread_cpu(contender.task_threads)
        count = contender.run(table, size)
        wall, after, emu1 = time.perf_counter() - wall0, tree_cpu(skip), emulator_cpu(emulator_pid)
        tasks = thread_cpu(contender.task_threads) - tasks0
        contender.shares.setdefault(size, []).append(share())
    assert count == size, f"{contender.name}: read {count} of {size}"
    sample = Sample(cpu_delta(before, after), emu1 - emu0, wall, tasks)
    contender.samples.setdefault(size, []).append(sample)
    return sample


@contextlib.contextmanager
def core_share() -> Iterator[tuple[int, Callable[[], float]]]:
    """A busy loop in its own process while the block runs; gives its pid and a function answering the
    share of a core it got since the block began (1.0 on an idle machine): what one runnable thread of
    the read got, with other work and the read's own processes competing for the cores."""
    loop = subprocess.Popen([sys.executable, "-S", "-c", "while True: pass"])
    cpu0, wall0 = emulator_cpu(loop.pid), time.perf_counter()
    try:
        yield loop.pid, lambda: (emulator_cpu(loop.pid) - cpu0) / (time.perf_counter() - wall0)
    finally:
        loop.kill()
        loop.wait()


def idle_rate(seconds: float, emulator_pid: int) -> float:
    before, wall0 = tree_cpu({emulator_pid}), time.perf_counter()
    time.sleep(seconds)
    after, wall = tree_cpu({emulator_pid}), time.perf_counter() - wall0
    return sum(cpu_delta(before, after).values()) / wall  # this process's share is the engine's threads in it


def serial(conn: str) -> Callable[[str, int], int]:
    client = CloudStorageAccount.parse(conn).create_cloud_table_client()

    def run(table: str, _: int) -> int:
        return int(client.create_query(table).to_arrow().num_rows)

    return run


@contextlib.contextmanager
def dask_engine(conn: str, workers: int, ranges: int) -> Iterator[dict[str, Callable[[str, int], int]]]:
    import dask
    from distributed import Client, LocalCluster

    import tablesdk.dask

    cluster = LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
        silence_logs=logging.ERROR)
    with cluster, Client(cluster):  # type: ignore[no-untyped-call]
        def kept(table: str, _: int) -> int:
            frame = tablesdk.dask.read_table(conn, table, npartitions=ranges)
            return int(sum(frame.map_partitions(len).compute()))

        def gathered(table: str, _: int) -> int:
            return len(tablesdk.dask.read_table(conn, table, npartitions=ranges).compute())

        with dask.config.set({"dataframe.convert-string": True}):
            yield {"dask": kept, "dask-gather": gathered}


def dask_task_threads() -> dict[int, list[int]]:
    """Each Dask worker process's task threads (started by the warm-up): process id to thread ids."""
    from distributed import get_client

    def threads() -> tuple[int, list[int]]:
        import threading

        return os.getpid(), [t.native_id for t in threading.enumerate() if "Dask-Default-Threads" in t.name
                             and t.native_id is not None]

    found: dict[str, tuple[int, list[int]]] = get_client().run(threads)
    return dict(found.values())


@contextlib.contextmanager
def ray_engine(conn: str, workers: int, ranges: int) -> Iterator[dict[str, Callable[[str, int], int]]]:
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keeps every Ray server on loopback
    import ray

    import tablesdk.ray

    ray.init(address="local", include_dashboard=False, num_cpus=workers, _node_ip_address="127.0.0.1",
             log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        def kept(table: str, _: int) -> int:
            return int(tablesdk.ray.read_table(conn, table, parallelism=ranges).materialize().count())

        def gathered(table: str, _: int) -> int:
            import pyarrow as pa

            refs = tablesdk.ray.read_table(conn, table, parallelism=ranges).to_arrow_refs()
            return int(pa.concat_tables(ray.get(refs)).num_rows)

        yield {"ray": kept, "ray-gather": gathered}
    finally:
        ray.shutdown()


@contextlib.contextmanager
def spark_engine(conn: str, workers: int, ranges: int) -> Iterator[dict[str, Callable[[str, int], int]]]:
    from pyspark.sql import SparkSession

    import tablesdk.spark

    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master(f"local[{workers}]").appName("tablesdk-distributed-cost")
        .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    tablesdk.spark.register(session)
    try:
        def frame(table: str) -> Any:
            return (session.read.format("azuretables").option("connectionString", conn).option("table", table)
                    .option("numPartitions", str(ranges)).load())

        def kept(table: str, expected: int) -> int:
            frame(table).write.format("noop").mode("overwrite").save()
            return expected  # the noop sink says nothing; spark-gather checks the count

        def gathered(table: str, _: int) -> int:
            return int(frame(table).toArrow().num_rows)

        yield {"spark": kept, "spark-gather": gathered}
    finally:
        session.stop()


ENGINES = {"dask": dask_engine, "ray": ray_engine, "spark": spark_engine}


# ---------------------------------------------------------------- the run


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[5_000, 40_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ranges", type=int, default=8, help="PartitionKey ranges (tasks) of a read")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (Dask), CPUs (Ray), local[W] (Spark)")
    parser.add_argument("--idle", type=float, default=3.0, help="seconds of idle engines measured for their idle cost")
    parser.add_argument("--json", help="write every sample to this file as well")
    parser.add_argument("--engines", nargs="+", default=["dask", "dask-gather", "ray", "ray-gather",
                                                         "spark", "spark-gather"])
    args = parser.parse_args()
    print(f"machine: {machine()}; before: {uptime()}", flush=True)
    contenders: list[Contender] = []
    with devstore() as (endpoint, emulator_pid):
        conn = connection_string(endpoint)
        small, large = sorted(args.sizes)
        tables = {small: f"cost{small}", large: f"cost{large}"}
        with CloudStorageAccount.parse(conn).create_cloud_table_client() as client:
            for size, table in tables.items():
                load(client, table, size)
        print(f"loaded {small:,} and {large:,} entities; emulator pid {emulator_pid}", file=sys.stderr, flush=True)
        read_serially = serial(conn)
        for engine, start in [("none", None), *ENGINES.items()]:
            wanted = [name for name in args.engines if name.split("-")[0] == engine]
            if start is not None and not wanted:
                continue
            phase = [Contender(f"serial ({engine} idle)" if start else "serial", read_serially)]
            with contextlib.ExitStack() as stack:
                if start is not None:
                    runs = stack.enter_context(start(conn, args.workers, args.ranges))
                    for name in wanted:
                        runs[name](tables[small], small)  # warm-up: worker processes started, imports done
                    rate = idle_rate(args.idle, emulator_pid)
                    threads = dask_task_threads() if engine == "dask" else {}
                    phase.extend(Contender(name, runs[name], rate, threads) for name in wanted)
                    print(f"{engine} started; idle {rate * 1000:.1f} ms CPU a second", file=sys.stderr, flush=True)
                for rep in range(args.repeat):
                    for size in (small, large):
                        for contender in phase:
                            measure(contender, tables[size], size, emulator_pid)
                    print(f"{engine}: repetition {rep + 1}/{args.repeat} done", file=sys.stderr, flush=True)
            contenders.extend(phase)
    print(f"after: {uptime()}")
    report(contenders, small, large, args)
    model_check(contenders, large, args.workers)
    if args.json:
        Path(args.json).write_text(json.dumps([
            {"name": c.name, "idle_rate": c.idle_rate, "shares": c.shares,
             "samples": {size: [vars(sample) for sample in runs] for size, runs in c.samples.items()}}
            for c in contenders
        ], indent=1))
    return 0


def report(contenders: list[Contender], small: int, large: int, args: argparse.Namespace) -> None:
    """Per size, each contender against the serial read of its own phase (same repetition), then fixed cost and slope."""
    print(f"\n{args.ranges} ranges, {args.workers} workers, {args.repeat} repetitions; CPU in µs per entity, medians\n")
    print("| contender | entities | client CPU (all processes) | driver | workers | (of which task threads) | jvm | daemons "
          "| x serial, per rep (median) | idle cost removed, x serial alone | emulator CPU | wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    base: Contender | None = None
    alone = contenders[0]  # the serial read with no engine started
    for size in (small, large):
        for contender in contenders:
            if contender.name.startswith("serial"):
                base = contender
            assert base is not None
            runs = contender.samples[size]

            def per(value: Callable[[Sample], float]) -> str:
                return f"{statistics.median(value(s) for s in runs) / size * 1e6:.1f}"

            serial_cpu = [s.total for s in base.samples[size]]
            found = [s.total / b for s, b in zip(runs, serial_cpu)]
            less = [(s.total - contender.idle_rate * s.wall) / b.total for s, b in zip(runs, alone.samples[size])]
            ratios = ", ".join(f"{r:.2f}" for r in found) + f" ({statistics.median(found):.2f})"
            print(f"| {contender.name} | {size:,} | {per(lambda s: s.total)} | {per(lambda s: s.groups.get('driver', 0))} "
                  f"| {per(lambda s: s.groups.get('workers', 0))} | {per(lambda s: s.tasks) if contender.task_threads else '-'} "
                  f"| {per(lambda s: s.groups.get('jvm', 0))} "
                  f"| {per(lambda s: s.groups.get('daemons', 0))} | {ratios} | {statistics.median(less):.2f} "
                  f"| {per(lambda s: s.emulator)} | {statistics.median(s.wall for s in runs):.2f} |")
    print("\n| contender | fixed CPU ms a read | slope µs/entity | idle ms CPU/s | slope x its serial's slope |")
    print("|---|---|---|---|---|")
    base_slope = 0.0
    for contender in contenders:
        low = statistics.median(s.total for s in contender.samples[small])
        high = statistics.median(s.total for s in contender.samples[large])
        slope = (high - low) / (large - small)
        if contender.name.startswith("serial"):
            base_slope = slope
        fixed = low - slope * small
        print(f"| {contender.name} | {fixed * 1000:.0f} | {slope * 1e6:.1f} | {contender.idle_rate * 1000:.1f} "
              f"| {slope / base_slope:.2f} |")


def model_check(contenders: list[Contender], size: int, workers: int) -> None:
    """The wall-clock rate each contender should reach from its CPU per entity, next to the one it did.

    Each resource that works one thread at a time gets ``a`` of a core (the share a busy loop in its
    own process got during the same read, other work and the read's own processes competing): the emulator (one thread under its GIL) serves at most
    ``a / s`` entities a second (``s`` its CPU per entity), this process at most ``a / d``, and the
    ``W`` worker processes at most ``W x a / w``; the read reaches the smallest (the busy loop takes
    its share from the read too: about one runnable thread more than the read's own).
    Serial reads decode in this process (``d``), reading ahead of the emulator (one thread each).
    """
    print(f"\nModel check, {size:,} entities: predicted against measured entities/s (medians)\n")
    print("| contender | core share a | bound: emulator a/s | driver a/d | workers W a/w "
          "| predicted, overlapped | without overlap W a/(s+w) | measured | measured / predicted |")
    print("|---|---|---|---|---|---|---|---|---|")
    for contender in contenders:
        runs = contender.samples[size]
        share = statistics.median(contender.shares[size])
        emulator = statistics.median(s.emulator for s in runs) / size
        driver = statistics.median(s.groups.get("driver", 0.0) for s in runs) / size
        rest = statistics.median(s.total - s.groups.get("driver", 0.0) for s in runs) / size
        parallel = 1 if contender.name.startswith("serial") else workers
        bounds = [share / emulator, share / driver, parallel * share / rest if rest > 0 else math.inf]
        predicted = min(bounds)
        stream = rest if rest > 0 else driver  # a serial read decodes in this process
        chained = min(predicted, parallel * share / (emulator + stream))
        measured = statistics.median(size / s.wall for s in runs)
        shown = " | ".join("-" if math.isinf(b) else f"{b:,.0f}" for b in bounds)
        print(f"| {contender.name} | {share:.2f} | {shown} | {predicted:,.0f} | {chained:,.0f} | {measured:,.0f} "
              f"| {measured / predicted:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
