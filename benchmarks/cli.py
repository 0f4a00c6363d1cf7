"""The ``tablesdk`` command against the library doing the same work, on the bundled emulator.

Three measurements, each against an emulator started here in its own process
(``python -m tablesdk serve``, sqlite in a temporary file):

1. **Export rate**: ``tablesdk export T FILE`` (a child process, timed from
   start to exit, so interpreter start-up counts against it) next to iterating
   the same table with ``client.create_query(T)`` in this process.
2. **Import rate**: ``tablesdk import FILE T`` (child process) next to
   ``client.bulk_insert`` of the same entities, built before timing.
3. **Peak memory of export**: the child's peak RSS (``VmHWM`` of
   ``/proc/PID/status``, polled) exporting 100,000 and 1,000,000 entities.

Rates use N entities (default 50,000) with the ten-property mix of
benchmarks/_common.py; each is the median of R runs (default 3), runs
interleaved. The memory tables hold small entities (four properties) so the
1,000,000-entity table loads in minutes. Run::

    python benchmarks/cli.py                   # everything (loading 1,000,000 entities takes a while)
    python benchmarks/cli.py --skip-memory     # rates only
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import machine, sample_properties  # noqa: E402
from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity  # noqa: E402


@contextmanager
def emulator(directory: str) -> Iterator[str]:
    """The connection string of a bundled emulator serving from a sqlite file, in its own process."""
    command = [sys.executable, "-m", "tablesdk", "serve", "--port", "0", "--db", os.path.join(directory, "store.db")]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert server.stdout is not None
        server.stdout.readline()
        yield server.stdout.readline().decode().split("connection string ", 1)[1].strip()
    finally:
        server.terminate()
        server.wait()


def run_cli(connection_string: str, *args: str) -> tuple[float, int, float]:
    """Run ``python -m tablesdk ARGS``: wall seconds, peak RSS in MiB and CPU seconds of the child."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AZURE_STORAGE_CONNECTION_STRING": connection_string}
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "tablesdk", "--no-progress", *args], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while True:  # VmHWM: this process image's peak RSS (wait4's ru_maxrss would count the forking parent's)
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, _high_water_mark(child.pid))
        time.sleep(0.02)
    elapsed = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        assert child.stderr is not None
        raise SystemExit(f"tablesdk {' '.join(args)} failed: {child.stderr.read().decode()}")
    return elapsed, peak // 1024, usage.ru_utime + usage.ru_stime


def _high_water_mark(pid: int) -> int:
    """Peak resident set size in KiB of process ``pid`` (Linux), 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def timed(work: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds (this process, all threads) of ``work()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - wall, time.process_time() - cpu


def entities(count: int, small: bool = False, first: int = 0) -> list[DynamicEntity]:
    def props(n: int) -> dict[str, Any]:
        return {"N": n, "Name": f"entity-{n}"} if small else sample_properties(n)

    return [DynamicEntity(PartitionKey=f"p{n // 1000:05d}", RowKey=f"{n:08d}", **props(n))
            for n in range(first, first + count)]


def load(client: CloudTableClient, table: str, count: int, small: bool = False, step: int = 100_000) -> None:
    client.create_table_if_not_exists(table)
    for start in range(0, count, step):
        client.bulk_insert(table, entities(min(step, count - start), small, start)).raise_on_error()


Measure = dict[str, list[tuple[float, float]]]  # name -> [(entities/s, client CPU microseconds/entity)]


def rates(cs: str, client: CloudTableClient, work: str, count: int, repeats: int) -> Measure:
    """CLI export vs create_query, CLI import vs bulk_insert, interleaved: rate and client CPU per entity."""
    data = entities(count)
    load(client, "benchsource", count)
    file = os.path.join(work, "export.jsonl")
    results: Measure = {k: [] for k in ("create_query", "cli export", "bulk_insert", "cli import")}

    def record(name: str, wall: float, cpu: float) -> None:
        results[name].append((count / wall, cpu / count * 1e6))

    for run in range(repeats):
        record("create_query", *timed(lambda: sum(1 for _ in client.create_query("benchsource"))))
        wall, _, cpu = run_cli(cs, "export", "benchsource", file, "--overwrite")  # the same file each repeat
        record("cli export", wall, cpu)
        client.create_table(f"benchbulk{run}")
        record("bulk_insert", *timed(lambda: client.bulk_insert(f"benchbulk{run}", data).raise_on_error()))
        client.delete_table(f"benchbulk{run}")
        client.create_table(f"benchimport{run}")
        wall, _, cpu = run_cli(cs, "import", file, f"benchimport{run}")
        record("cli import", wall, cpu)
        client.delete_table(f"benchimport{run}")
    return results


def startup(cs: str) -> float:
    """CPU seconds of a command that does nothing but start (``tablesdk --help``)."""
    return min(run_cli(cs, "--help")[2] for _ in range(3))


def memory(cs: str, client: CloudTableClient, work: str, sizes: list[int]) -> dict[int, tuple[float, int]]:
    """Peak RSS (MiB) and seconds of a CLI export of each size."""
    out: dict[int, tuple[float, int]] = {}
    for size in sizes:
        table = f"benchmem{size}"
        load(client, table, size, small=True)
        wall, rss, _ = run_cli(cs, "export", table, os.path.join(work, f"mem{size}.jsonl"))
        out[size] = (wall, rss)
        client.delete_table(table)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=50_000, help="entities of the rate measurements")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--memory-sizes", default="100000,1000000")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work, emulator(work) as cs:
        client = CloudStorageAccount.parse(cs).create_cloud_table_client()
        print(f"tablesdk CLI vs library on the bundled emulator (sqlite file); {machine()}")
        result = rates(cs, client, work, args.count, args.repeats)
        base = startup(cs)
        print(f"{args.count:,} entities, ten properties; median of {args.repeats}; CLI in a child process "
              f"(its start-up, {base:.2f} s CPU, included)")
        median = {}
        for name, values in result.items():
            rate = statistics.median(v[0] for v in values)
            cpu = statistics.median(v[1] for v in values)
            median[name] = (rate, cpu)
            runs = ", ".join(f"{v[0]:,.0f}" for v in values)
            print(f"  {name:14} {rate:9,.0f} entities/s   client CPU {cpu:6.1f} us/entity   runs: {runs}")
        for cli_name, lib_name in (("cli export", "create_query"), ("cli import", "bulk_insert")):
            rate_ratio = median[cli_name][0] / median[lib_name][0]
            cpu_ratio = median[lib_name][1] / median[cli_name][1]
            print(f"  {cli_name} / {lib_name}: rate {rate_ratio:.2f}, CPU efficiency {cpu_ratio:.2f}")
            # the same ratio taken within each repetition (both ran back to back, under the same load)
            within = [c[0] / lib[0] for c, lib in zip(result[cli_name], result[lib_name])]
            print(f"    rate ratio within each repetition: median {statistics.median(within):.2f} "
                  f"({', '.join(f'{r:.2f}' for r in within)})")
        if not args.skip_memory:
            sizes = [int(size) for size in args.memory_sizes.split(",")]
            peaks = memory(cs, client, work, sizes)
            for size, (seconds, rss) in peaks.items():
                print(f"  export of {size:>9,} entities: peak RSS {rss} MiB, {seconds:.1f} s ({size / seconds:,.0f}/s)")
            if len(sizes) == 2:
                print(f"  peak RSS ratio {sizes[1]:,} / {sizes[0]:,} = {peaks[sizes[1]][1] / peaks[sizes[0]][1]:.2f}")
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
