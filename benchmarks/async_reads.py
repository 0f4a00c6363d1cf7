"""Concurrent point reads: the asyncio client next to the sync client on a thread pool.

    .venv/bin/python benchmarks/async_reads.py [--url http://127.0.0.1:10102/devstoreaccount1] [--repeats 5]
    .venv/bin/python benchmarks/async_reads.py --libraries     # also: raw httpx vs aiohttp, signing included

Without --url it starts its own Azurite. Measured, each the median of ``--repeats`` runs:

1. 200 concurrent point reads (``get_entity``): ``AsyncCloudTableClient`` with
   ``asyncio.gather`` (one thread) against ``CloudTableClient`` with a
   ``ThreadPoolExecutor`` of 16 threads (pool_size 16).
2. Through a proxy that holds every request 20 ms (the Table service is a
   network round trip away; Azurite on loopback is not): 100 reads one after
   the other against 100 reads with ``asyncio.gather``. The proxy runs in its
   own process (``_common.latency_proxy``: tests/faults.py's FaultProxy with a
   fixed latency), so its CPU never counts as the client's.
3. ``--libraries``: the same 200 signed reads sent with bare httpx and bare
   aiohttp sessions (how the HTTP library of ``tablesdk.aio`` was chosen).

Not a timed test: numbers depend on the machine; docs/async.md records a run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from email.utils import formatdate
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import azurite, connection_string, latency_proxy, machine  # noqa: E402

from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity  # noqa: E402
from tablesdk.aio import AsyncCloudTableClient  # noqa: E402
from tablesdk._formats._batch import entity_path  # noqa: E402

def median_seconds(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def amedian_seconds(run: Callable[[], Awaitable[object]], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        await run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def keys(n: int) -> list[str]:
    return [f"{i:04d}" for i in range(n)]


def sync_pool(client: CloudTableClient, table: str, n: int, repeats: int) -> float:
    with ThreadPoolExecutor(16) as pool:
        def run() -> None:
            list(pool.map(lambda rk: client.get_entity(table, "p", rk), keys(n)))

        run()  # warm the connections
        return n / median_seconds(run, repeats)


async def async_gather(client: AsyncCloudTableClient, table: str, n: int, repeats: int) -> float:
    async def run() -> None:
        await asyncio.gather(*(client.get_entity(table, "p", rk) for rk in keys(n)))

    await run()
    return n / await amedian_seconds(run, repeats)


async def async_sequential(client: AsyncCloudTableClient, table: str, n: int, repeats: int) -> float:
    async def run() -> None:
        for rk in keys(n):
            await client.get_entity(table, "p", rk)

    await client.get_entity(table, "p", "0000")
    return n / await amedian_seconds(run, repeats)


async def libraries(account: CloudStorageAccount, endpoint: str, table: str, n: int, repeats: int) -> None:
    """Bare httpx and aiohttp sessions, 100 connections each, signing each request."""
    import aiohttp
    import httpx

    credential = account.credential

    def signed(rk: str) -> tuple[str, dict[str, str]]:
        headers = {"x-ms-version": "2019-02-02", "Accept": "application/json;odata=minimalmetadata",
                   "x-ms-date": formatdate(usegmt=True), "x-ms-client-request-id": str(uuid.uuid4())}
        url = f"{endpoint}/{entity_path(table, 'p', rk)}"
        return (credential.apply("GET", url, headers) if credential else url), headers

    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=100, max_keepalive_connections=100)) as hc:
        async def with_httpx() -> None:
            async def one(rk: str) -> None:
                url, headers = signed(rk)
                assert (await hc.get(url, headers=headers)).status_code == 200
            await asyncio.gather(*(one(rk) for rk in keys(n)))

        await with_httpx()
        cpu = time.process_time()
        rate = n / await amedian_seconds(with_httpx, repeats)
        print(f"  bare httpx   : {rate:7.0f} reads/s, client CPU {(time.process_time() - cpu) / (n * repeats) * 1e6:5.0f} us/read")

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=100)) as session:
        async def with_aiohttp() -> None:
            async def one(rk: str) -> None:
                url, headers = signed(rk)
                async with session.get(url, headers=headers) as response:
                    await response.read()
                    assert response.status == 200
            await asyncio.gather(*(one(rk) for rk in keys(n)))

        await with_aiohttp()
        cpu = time.process_time()
        rate = n / await amedian_seconds(with_aiohttp, repeats)
        print(f"  bare aiohttp : {rate:7.0f} reads/s, client CPU {(time.process_time() - cpu) / (n * repeats) * 1e6:5.0f} us/read")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", help="table endpoint of a running Azurite (default: start one)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds the proxy holds each request")
    parser.add_argument("--libraries", action="store_true", help="also compare bare httpx and aiohttp")
    parser.add_argument("--rounds", type=int, default=3, help="sync/async measurements, interleaved")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    with azurite(args.url) as endpoint:
        account = CloudStorageAccount.parse(connection_string(endpoint))
        table = "asyncreads" + uuid.uuid4().hex[:8]
        with account.create_cloud_table_client() as client:
            client.create_table(table)
            client.bulk_insert(table, [DynamicEntity(PartitionKey="p", RowKey=rk, Name="x" * 50, N=i)
                                       for i, rk in enumerate(keys(200))]).raise_on_error()
            try:
                compare_200(client, account, table, args.repeats, args.rounds)
                with latency_proxy(endpoint, args.latency) as slow:
                    sequential, concurrent = asyncio.run(_through_proxy(slow, table, args.repeats))
                print(f"100 point reads through a {args.latency * 1000:.0f} ms latency proxy:")
                print(f"  async, one after another: {sequential:7.1f} reads/s")
                print(f"  async, gather           : {concurrent:7.1f} reads/s  ({concurrent / sequential:.1f}x)")
                if args.libraries:
                    print("200 concurrent signed point reads, bare HTTP libraries:")
                    asyncio.run(libraries(account, endpoint, table, 200, args.repeats))
            finally:
                client.delete_table_if_exists(table)
    return 0


def compare_200(
    client: CloudTableClient, account: CloudStorageAccount, table: str, repeats: int, rounds: int
) -> None:
    """Interleaved rounds of both contenders, so a busy neighbour slows both alike."""
    rates: dict[str, list[float]] = {"sync": [], "async": []}
    cpu: dict[str, list[float]] = {"sync": [], "async": []}
    ratios = []
    for _ in range(rounds):
        start = time.process_time()
        rates["sync"].append(sync_pool(client, table, 200, repeats))
        cpu["sync"].append((time.process_time() - start) / (200 * (repeats + 1)))
        start = time.process_time()
        rates["async"].append(asyncio.run(_gather_200(account, table, repeats)))
        cpu["async"].append((time.process_time() - start) / (200 * (repeats + 1)))
        ratios.append(rates["async"][-1] / rates["sync"][-1])
    print(f"200 concurrent point reads, Azurite on loopback ({rounds} interleaved rounds, each a median of {repeats}):")
    for name, label in (("sync", "sync client, 16 threads"), ("async", "async client, gather  ")):
        print(f"  {label}: {statistics.median(rates[name]):7.0f} reads/s, "
              f"client CPU {statistics.median(cpu[name]) * 1e6:4.0f} us/read")
    print(f"  async / sync: median {statistics.median(ratios):.2f}x, rounds {[round(r, 2) for r in ratios]}")


async def _gather_200(account: CloudStorageAccount, table: str, repeats: int) -> float:
    async with account.create_async_cloud_table_client() as client:
        return await async_gather(client, table, 200, repeats)


async def _through_proxy(endpoint: str, table: str, repeats: int) -> tuple[float, float]:
    account = CloudStorageAccount.parse(connection_string(endpoint))
    async with account.create_async_cloud_table_client() as client:
        sequential = await async_sequential(client, table, 100, max(1, repeats // 2))
        concurrent = await async_gather(client, table, 100, repeats)
    return sequential, concurrent


if __name__ == "__main__":
    sys.exit(main())
