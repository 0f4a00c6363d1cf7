"""A scan reading ahead against one reading in turn, on loopback and behind 20 ms of latency.

    .venv/bin/python benchmarks/read_ahead.py [--repeats 5] [--latency 0.02] [--async]

The pages of a 10,000-entity scan (100 partitions x 100 entities, the ten mixed
properties of benchmarks/query.py, 1,000 per page) are recorded once from the bundled
emulator and served again by benchmarks/_replay.py in its own process: about a
millisecond of server CPU a page, a fast server. Two modes: that server on loopback,
and the same server behind benchmarks/latency_proxy.py (``--latency`` seconds per
request, its own process). Contenders, interleaved in each repetition:
``read_ahead("auto")`` (the default: reads ahead when what it measures says it pays),
``read_ahead(True)`` (always) and ``read_ahead(False)`` (in turn). With ``--async``
the same three through ``AsyncCloudTableClient``.

Per mode: median entities/s (min-max), client CPU µs per entity (``time.process_time``:
this process only; the server and the relay run in their own) and each contender's
ratio to reading in turn within each repetition (both ran under the same load). The
load average is printed with each repetition.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _common import latency_proxy, machine  # noqa: E402
from arrow import PARTITIONS, PER_PARTITION, TABLE, Contender, connection, load, record, replay_server, service  # noqa: E402

from tablesdk import CloudStorageAccount  # noqa: E402

SETTINGS: tuple[Any, ...] = ("auto", True, False)


@contextlib.contextmanager
def contenders(conn: str, use_async: bool) -> Iterator[list[tuple[str, Callable[[], int]]]]:
    account = CloudStorageAccount.parse(conn)
    if not use_async:
        query = account.create_cloud_table_client().create_query(TABLE)

        def sync_scan(setting: Any) -> Callable[[], int]:
            return lambda: sum(1 for _ in query.read_ahead(setting))

        yield [(f"read_ahead({setting!r})", sync_scan(setting)) for setting in SETTINGS]
        return

    loop = asyncio.new_event_loop()
    client = account.create_async_cloud_table_client()

    def async_scan(setting: Any) -> Callable[[], int]:
        async def count() -> int:
            return sum([1 async for _ in client.create_query(TABLE).read_ahead(setting)])

        return lambda: loop.run_until_complete(count())

    try:
        yield [(f"async read_ahead({setting!r})", async_scan(setting)) for setting in SETTINGS]
    finally:
        loop.run_until_complete(client.close())
        loop.close()


def measure(conn: str, mode: str, repeats: int, use_async: bool) -> tuple[list[Contender], list[float]]:
    with contenders(conn, use_async) as funcs:
        return _measure(funcs, mode, repeats)


def _measure(funcs: list[tuple[str, Callable[[], int]]], mode: str, repeats: int) -> tuple[list[Contender], list[float]]:
    expected = PARTITIONS * PER_PARTITION
    assert all(func() == expected for _, func in funcs)  # warm every path up
    runs = [Contender(label) for label, _ in funcs]
    loads = [os.getloadavg()[0]]
    for rep in range(repeats):
        for one, (_, func) in zip(runs, funcs):
            cpu0, wall0 = time.process_time(), time.perf_counter()
            count = func()
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
            one.rates.append(count / wall)
            one.cpu_per_entity.append(cpu / count)
        loads.append(os.getloadavg()[0])
        print(f"{mode}: repetition {rep + 1}/{repeats} done, load average {loads[-1]:.2f}", file=sys.stderr, flush=True)
    return runs, loads


def report(mode: str, runs: list[Contender], loads: list[float]) -> str:
    in_turn = runs[-1]
    lines = [f"### {mode}: {PARTITIONS * PER_PARTITION:,} entities, 1,000 per page; {machine()}; load average "
             f"(1 min) during the runs {min(loads):.2f}-{max(loads):.2f}", "",
             "| contender | entities/s median (min-max) | client CPU µs/entity | x in turn, per repetition (median) |",
             "|---|---|---|---|"]
    for one in runs:
        ratios = [mine / theirs for mine, theirs in zip(one.rates, in_turn.rates)]
        lines.append(
            f"| {one.label} | {statistics.median(one.rates):,.0f} ({min(one.rates):,.0f}-{max(one.rates):,.0f}) "
            f"| {statistics.median(one.cpu_per_entity) * 1e6:.1f} "
            f"| {', '.join(f'{r:.2f}' for r in ratios)} (**{statistics.median(ratios):.2f}**) |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--async", dest="use_async", action="store_true", help="the async client's scans")
    args = parser.parse_args()
    with service(None, True) as (conn, _):
        load(CloudStorageAccount.parse(conn).create_cloud_table_client())
        pages = record(conn)
    results = []
    with replay_server(pages) as (conn, _):
        endpoint = conn.split("TableEndpoint=", 1)[1].rstrip(";")
        results.append(("loopback", *measure(conn, "loopback", args.repeats, args.use_async)))
        with latency_proxy(endpoint, args.latency) as proxied:
            mode = f"{args.latency * 1000:.0f} ms latency proxy"
            results.append((mode, *measure(connection(proxied), mode, args.repeats, args.use_async)))
    for mode, runs, loads in results:
        print(report(mode, runs, loads) + "\n")


if __name__ == "__main__":
    main()
