"""Columns vs entities: ``TableQuery.to_arrow()`` of 10,000 entities next to iterating ``create_query``.

    /work/main/.venv/bin/python benchmarks/arrow.py [--url URL | --devstore] [--repeats 5] [--modes azurite replay]

Without --url it starts its own Azurite (``--devstore``: the bundled emulator). The
table holds 100 partitions x 100 entities with the ten mixed properties of
benchmarks/query.py. Contenders, interleaved in each repetition:

* ``entities``: ``list(client.create_query(table))`` (DynamicEntity objects);
* ``entities -> rows``: the same, then a list of dicts (what a caller building
  columns from entities does at the least);
* ``to_arrow``: ``client.create_query(table).to_arrow()`` (a pyarrow.Table);
* ``to_pandas``: ``to_pandas()`` (through Arrow).

Two modes, each reported on its own:

* ``azurite``: the pages come from the emulator. On a 2-core machine it spends
  35-43 ms of CPU on each 1,000-entity page on one Node thread, more than either
  contender's client, so this mode measures the server as much as the client.
* ``replay``: every page of the same scan, recorded once from the emulator (status,
  headers, body), is served again from memory by a loopback server in its own
  process (benchmarks/_replay.py, about a millisecond of CPU a page), so entities/s
  are the client's. The client does all its usual work (signing, HTTP, reading ahead).

Per mode the table gives the median entities/s (min-max), client CPU µs per entity
(``time.process_time``: this process only), the server's CPU ms per page (its
process; none for an Azurite given with --url) and the ratio to ``entities``: the
median of the ratios taken within each repetition (both contenders then ran under
the same load). The load average is printed with each repetition. The goal of
issue 26 is to_arrow >= 1.3x entities.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _common import DEVSTORE_KEY, ROOT, machine, process_cpu, sample_properties  # noqa: E402
from _replay import Pages, Recorder  # noqa: E402

from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, EdmType, EntityProperty  # noqa: E402
from tablesdk._pipeline._requests_sender import RequestsSender  # noqa: E402

PARTITIONS, PER_PARTITION = 100, 100
TABLE = "benchcolumns"
LABELS = ("entities", "entities -> rows", "to_arrow", "to_pandas")


@dataclass
class Contender:
    """One contender's runs in one mode: entities/s, client CPU s/entity, server CPU s/page."""

    label: str
    rates: list[float] = field(default_factory=list)
    cpu_per_entity: list[float] = field(default_factory=list)
    server_per_page: list[float] = field(default_factory=list)


def connection(endpoint: str) -> str:
    return f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={DEVSTORE_KEY};TableEndpoint={endpoint};"


@contextlib.contextmanager
def service(url: str | None, devstore: bool) -> Iterator[tuple[str, int | None]]:
    """The emulator's connection string and its pid (None: not ours, its CPU is not measured)."""
    if url:
        yield connection(url.rstrip("/")), None
    elif devstore:
        from tablesdk.devstore import DevStore

        with DevStore(port=0) as store:
            yield store.connection_string, os.getpid()  # in this process: its CPU is counted as the client's too
    else:
        from dask_scan import own_azurite

        subprocess.run(["bash", str(ROOT / "scripts" / "azurite.sh"), "install"], check=True, stdout=sys.stderr)
        with own_azurite(ROOT / "scripts" / "azurite.sh") as (endpoint, pid):
            yield connection(endpoint), pid


@contextlib.contextmanager
def replay_server(pages: Pages) -> Iterator[tuple[str, int]]:
    """benchmarks/_replay.py serving ``pages`` in its own process: connection string and pid."""
    with tempfile.NamedTemporaryFile(suffix=".pickle", delete=False) as handle:
        pickle.dump(pages, handle)
    proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "_replay.py"), handle.name],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield connection(proc.stdout.readline().strip()), proc.pid
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
        os.unlink(handle.name)


def load(client: CloudTableClient) -> None:
    client.delete_table_if_exists(TABLE)
    client.create_table(TABLE)
    entities = []
    for p in range(PARTITIONS):
        for r in range(PER_PARTITION):
            n = p * PER_PARTITION + r
            props = sample_properties(n)
            props["Big"] = EntityProperty(props["Big"], EdmType.INT64)
            entities.append(DynamicEntity(f"p{p:03d}", f"{r:04d}", **props))
    client.bulk_insert(TABLE, entities).raise_on_error()


def record(conn: str) -> Pages:
    """Every page of the scan as the service answered it."""
    recorder = Recorder(RequestsSender())
    client = CloudStorageAccount.parse(conn).create_cloud_table_client(sender=recorder)
    assert sum(1 for _ in client.create_query(TABLE)) == PARTITIONS * PER_PARTITION
    return recorder.pages


def contenders(conn: str) -> list[Callable[[], int]]:
    query = CloudStorageAccount.parse(conn).create_cloud_table_client().create_query(TABLE)

    def entities() -> int:
        return len(list(query))

    def entity_rows() -> int:
        rows = [{"PartitionKey": e.PartitionKey, "RowKey": e.RowKey, "Timestamp": e.Timestamp, **e} for e in query]
        return len(rows)

    def arrow() -> int:
        return int(query.to_arrow().num_rows)

    def pandas() -> int:
        return len(query.to_pandas())

    expected = PARTITIONS * PER_PARTITION
    assert entities() == arrow() == pandas() == entity_rows() == expected  # and warm every path up
    return [entities, entity_rows, arrow, pandas]


def measure(mode: str, conn: str, server_pid: int | None, pages: int, repeats: int) -> tuple[list[Contender], list[float]]:
    """Every contender once per repetition, in turn; the runs and the load average after each repetition."""
    funcs = contenders(conn)
    runs = [Contender(label) for label in LABELS]
    loads = [os.getloadavg()[0]]
    for rep in range(repeats):
        for one, func in zip(runs, funcs):
            server0, cpu0, wall0 = process_cpu(server_pid), time.process_time(), time.perf_counter()
            count = func()
            wall, cpu, server1 = time.perf_counter() - wall0, time.process_time() - cpu0, process_cpu(server_pid)
            one.rates.append(count / wall)
            one.cpu_per_entity.append(cpu / count)
            if server0 is not None and server1 is not None:
                one.server_per_page.append((server1 - server0) / pages)
        loads.append(os.getloadavg()[0])
        print(f"{mode}: repetition {rep + 1}/{repeats} done, load average {loads[-1]:.2f}", file=sys.stderr, flush=True)
    return runs, loads


def report(mode: str, runs: list[Contender], loads: list[float]) -> str:
    base = runs[0]
    lines = [f"### {mode}: {PARTITIONS * PER_PARTITION:,} entities; {machine()}; load average (1 min) during the runs "
             f"{min(loads):.2f}-{max(loads):.2f}", "",
             "| contender | entities/s median (min-max) | client CPU µs/entity | server CPU ms/page | "
             "x entities per repetition (median) |", "|---|---|---|---|---|"]
    for one in runs:
        ratios = [mine / theirs for mine, theirs in zip(one.rates, base.rates)]
        server = f"{statistics.median(one.server_per_page) * 1e3:.1f}" if one.server_per_page else "-"
        lines.append(
            f"| {one.label} | {statistics.median(one.rates):,.0f} ({min(one.rates):,.0f}-{max(one.rates):,.0f}) "
            f"| {statistics.median(one.cpu_per_entity) * 1e6:.1f} | {server} "
            f"| {', '.join(f'{r:.2f}' for r in ratios)} (**{statistics.median(ratios):.2f}**) |")
    arrow = runs[2]
    cpu_ratio = statistics.median(base.cpu_per_entity) / statistics.median(arrow.cpu_per_entity)
    speed = statistics.median(mine / theirs for mine, theirs in zip(arrow.rates, base.rates))
    lines += ["", f"to_arrow ({mode}): {speed:.2f}x the entities/s of iterating entities (median of per-repetition "
              f"ratios), {cpu_ratio:.2f}x less client CPU per entity (goal >= 1.3x)"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="an Azurite table endpoint (default: start one)")
    parser.add_argument("--devstore", action="store_true", help="use the bundled emulator instead of Azurite")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--modes", nargs="+", choices=("azurite", "replay"), default=["azurite", "replay"])
    args = parser.parse_args()
    results = []
    with service(args.url, args.devstore) as (conn, pid):
        load(CloudStorageAccount.parse(conn).create_cloud_table_client())
        try:
            pages = record(conn)
            if "azurite" in args.modes:
                runs, loads = measure("azurite", conn, pid, len(pages), args.repeats)
                results.append(("azurite" if not args.devstore else "devstore", runs, loads))
        finally:
            CloudStorageAccount.parse(conn).create_cloud_table_client().delete_table_if_exists(TABLE)
    if "replay" in args.modes:
        with replay_server(pages) as (conn, pid):
            runs, loads = measure("replay", conn, pid, len(pages), args.repeats)
            results.append(("replay", runs, loads))
    for mode, runs, loads in results:
        print(report(mode, runs, loads) + "\n")


if __name__ == "__main__":
    main()
