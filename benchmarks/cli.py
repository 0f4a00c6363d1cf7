"""The ``tablesdk`` command against the library doing the same work, on the bundled emulator.

Three measurements, each against an emulator started here in its own process
(``python -m tablesdk serve``, sqlite in a temporary file):

1. **Export rate**: ``tablesdk export T FILE`` (a child process, timed from
   start to exit, so interpreter start-up counts against it) next to iterating
   the same table with ``client.create_query(T)`` in this process.
2. **Import rate**: ``tablesdk import FILE T`` (child process) next to
   ``client.bulk_insert`` of the same entities, built before timing.
3. **Peak memory of export**: the child's peak RSS (``os.wait4``'s
   ``ru_maxrss``) exporting 100,000 and 1,000,000 entities.

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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine, sample_properties  # noqa: E402
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


def run_cli(connection_string: str, *args: str) -> tuple[float, int]:
    """Run ``python -m tablesdk ARGS``; (wall seconds, peak RSS in MiB) of the child."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AZURE_STORAGE_CONNECTION_STRING": connection_string}
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "tablesdk", "--no-progress", *args], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        assert child.stderr is not None
        raise SystemExit(f"tablesdk {' '.join(args)} failed: {child.stderr.read().decode()}")
    return elapsed, usage.ru_maxrss // 1024


def entities(count: int, small: bool = False, first: int = 0) -> list[DynamicEntity]:
    def props(n: int) -> dict[str, object]:
        return {"N": n, "Name": f"entity-{n}"} if small else sample_properties(n)

    return [DynamicEntity(PartitionKey=f"p{n // 1000:05d}", RowKey=f"{n:08d}", **props(n))
            for n in range(first, first + count)]


def load(client: CloudTableClient, table: str, count: int, small: bool = False, step: int = 100_000) -> None:
    client.create_table_if_not_exists(table)
    for start in range(0, count, step):
        client.bulk_insert(table, entities(min(step, count - start), small, start)).raise_on_error()


def rates(cs: str, client: CloudTableClient, work: str, count: int, repeats: int) -> dict[str, list[float]]:
    """Entities/s of CLI export vs create_query, and CLI import vs bulk_insert, interleaved."""
    data = entities(count)
    load(client, "benchsource", count)
    file = os.path.join(work, "export.jsonl")
    results: dict[str, list[float]] = {k: [] for k in ("create_query", "cli export", "bulk_insert", "cli import")}
    for run in range(repeats):
        start = time.perf_counter()
        assert sum(1 for _ in client.create_query("benchsource")) == count
        results["create_query"].append(count / (time.perf_counter() - start))
        results["cli export"].append(count / run_cli(cs, "export", "benchsource", file)[0])
        table = f"benchbulk{run}"
        client.create_table(table)
        start = time.perf_counter()
        client.bulk_insert(table, data).raise_on_error()
        results["bulk_insert"].append(count / (time.perf_counter() - start))
        client.delete_table(table)
        table = f"benchimport{run}"
        client.create_table(table)
        results["cli import"].append(count / run_cli(cs, "import", file, table)[0])
        client.delete_table(table)
    return results


def memory(cs: str, client: CloudTableClient, work: str, sizes: list[int]) -> dict[int, tuple[float, int]]:
    """Peak RSS (MiB) and seconds of a CLI export of each size."""
    out: dict[int, tuple[float, int]] = {}
    for size in sizes:
        table = f"benchmem{size}"
        load(client, table, size, small=True)
        out[size] = run_cli(cs, "export", table, os.path.join(work, f"mem{size}.jsonl"))
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
        median = {name: statistics.median(values) for name, values in result.items()}
        print(f"{args.count:,} entities, ten properties; median of {args.repeats} (entities/s)")
        for name, values in result.items():
            print(f"  {name:14} {median[name]:9,.0f}   runs: {', '.join(f'{v:,.0f}' for v in values)}")
        print(f"  export / create_query = {median['cli export'] / median['create_query']:.2f}")
        print(f"  import / bulk_insert  = {median['cli import'] / median['bulk_insert']:.2f}")
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
