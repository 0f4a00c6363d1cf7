"""What reading a table in ranges costs one worker process, against one serial ``to_arrow()``.

    PYTHONPATH=. python benchmarks/range_cost.py [--entities 40000] [--ranges 8] [--repeat 7]

The bundled emulator serves a table of the order-shaped entities of
``benchmarks/distributed_cost.py`` from its own process. In this process, interleaved, once per
repetition each:

* ``serial``: ``client.create_query(table).to_arrow()``;
* ``ranges, one client``: the ``--ranges`` range specs of ``plan_ranges`` read one after the
  other with ``read_range``, as a worker process that runs them all does (the process's client
  is shared by the ranges: made by the first, reused by the rest);
* ``ranges, a client each``: the same, with this process's clients closed before each range, so
  that each range makes its client and opens its connection (what every range cost before the
  clients were shared).

The plan (probes and sample page) is made once, outside the measurements, as an engine's
driver does. Counted: this process's CPU (``time.process_time``: every thread, the read-ahead
threads included) and the emulator's (``/proc/PID/stat``); reported per entity, with each
contender's ratio to the serial read of the same repetition (median over repetitions).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _common import connection_string, machine  # noqa: E402
from distributed_cost import devstore, emulator_cpu, load, uptime  # noqa: E402

from tablesdk import CloudStorageAccount  # noqa: E402
from tablesdk._columns._engines import plan_ranges, read_range  # noqa: E402
from tablesdk._columns._worker_clients import WORKER_CLIENTS  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--entities", type=int, default=40_000)
    parser.add_argument("--ranges", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"machine: {machine()}; before: {uptime()}", flush=True)
    with devstore() as (endpoint, emulator_pid):
        conn = connection_string(endpoint)
        table = f"rangecost{args.entities}"
        client = CloudStorageAccount.parse(conn).create_cloud_table_client()
        load(client, table, args.entities)
        plan = plan_ranges(conn, table, partitions=args.ranges)

        def serial() -> int:
            return int(client.create_query(table).to_arrow().num_rows)

        def shared() -> int:
            return sum(read_range(spec).num_rows for spec in plan.specs)

        def fresh() -> int:
            rows = 0
            for spec in plan.specs:
                WORKER_CLIENTS.close_all()
                rows += read_range(spec).num_rows
            return rows

        contenders: list[tuple[str, Callable[[], int]]] = [
            ("serial to_arrow()", serial), ("ranges, one client", shared), ("ranges, a client each", fresh)]
        for _, run in contenders:
            run()  # warm-up
        made0 = WORKER_CLIENTS.made
        cpu: dict[str, list[float]] = {name: [] for name, _ in contenders}
        emu: dict[str, list[float]] = {name: [] for name, _ in contenders}
        for _ in range(args.repeat):
            for name, run in contenders:
                before, emu0 = time.process_time(), emulator_cpu(emulator_pid)
                count = run()
                cpu[name].append(time.process_time() - before)
                emu[name].append(emulator_cpu(emulator_pid) - emu0)
                assert count == args.entities, (name, count)
        made = WORKER_CLIENTS.made - made0
        client.close()
    print(f"after: {uptime()}")
    print(f"\n{args.entities:,} entities, {len(plan.specs)} ranges, {args.repeat} repetitions; "
          f"clients made during the measurements: {made} "
          f"({args.repeat} x {len(plan.specs)} by the ranges with a client each)\n")
    print("| contender | client CPU µs/entity (median) | x serial, median of per-rep ratios | emulator CPU µs/entity |")
    print("|---|---|---|---|")
    base = cpu[contenders[0][0]]
    for name, _ in contenders:
        ratio = statistics.median(c / b for c, b in zip(cpu[name], base))
        print(f"| {name} | {statistics.median(cpu[name]) / args.entities * 1e6:.2f} | {ratio:.3f} "
              f"| {statistics.median(emu[name]) / args.entities * 1e6:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
