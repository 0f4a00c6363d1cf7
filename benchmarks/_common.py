"""Shared pieces of the benchmark scripts: a local Azurite, the test entities, timing."""

from __future__ import annotations

import contextlib
import os
import platform
import socket
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

ROOT = Path(__file__).resolve().parents[1]
DEVSTORE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def connection_string(endpoint: str) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={DEVSTORE_KEY};"
        f"TableEndpoint={endpoint};"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def azurite(url: str | None = None) -> Iterator[str]:
    """The table endpoint of an Azurite: ``url`` if given, else one started (and stopped) here."""
    if url:
        yield url.rstrip("/")
        return
    port = _free_port()
    env = {**os.environ, "AZURITE_TABLE_PORT": str(port)}
    script = str(ROOT / "scripts" / "azurite.sh")
    subprocess.run(["bash", script, "install"], check=True, env=env)
    subprocess.run(["bash", script, "start"], check=True, env=env)
    try:
        yield f"http://127.0.0.1:{port}/devstoreaccount1"
    finally:
        subprocess.run(["bash", script, "stop"], check=False, env=env)


def sample_properties(n: int) -> dict[str, Any]:
    """Ten properties of mixed types, (about 500 bytes of JSON)."""
    return {
        "Name": f"entity-{n}", "Count": n % 100_000, "Big": 2**40 + n, "Ratio": n / 7,
        "Active": n % 2 == 0, "When": datetime(2024, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=n),
        "Id": uuid.UUID(int=n), "Blob": n.to_bytes(16, "big"), "Note": "x" * 51, "Small": n % 7,
    }


def process_cpu(pid: int | None) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``), or None."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def latency_proxy(endpoint: str, latency: float, cpu: list[float] | None = None) -> Iterator[str]:
    """``endpoint`` seen through a proxy (own process) that holds each request ``latency`` seconds.

    The Table service is a network round trip away (tens of ms); Azurite on
    loopback is not. The concurrency figures are measured through this proxy.
    ``cpu``, when given, receives the relay process's CPU seconds at the end
    (it shares the machine's cores with the client and Azurite).
    """
    if latency <= 0:
        if cpu is not None:
            cpu.append(0.0)
        yield endpoint
        return
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "latency_proxy.py"), endpoint, str(latency)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        used = process_cpu(proc.pid)
        if cpu is not None and used is not None:
            cpu.append(used)
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@dataclass
class Series:
    """Repeated measurements of one contender: entities/s and client CPU seconds per run."""

    label: str
    rates: list[float] = field(default_factory=list)
    cpu_per_entity: list[float] = field(default_factory=list)

    def run(self, func: Callable[[], int]) -> None:
        """Time ``func`` (which returns how many entities it handled): wall clock and process CPU."""
        cpu0, wall0 = time.process_time(), time.perf_counter()
        count = func()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        self.rates.append(count / wall)
        self.cpu_per_entity.append(cpu / count)

    @property
    def median(self) -> float:
        return statistics.median(self.rates)


def interleave(series: list[tuple[Series, Callable[[], int]]], repeats: int, note: str = "") -> None:
    """Run every contender once per repetition, in turn, ``repeats`` times (drift hits all alike)."""
    for rep in range(repeats):
        for one, func in series:
            one.run(func)
        print(f"{note}repetition {rep + 1}/{repeats} done", file=sys.stderr, flush=True)


def report(title: str, series: list[Series], azure: Series | None, floor: Series | None) -> str:
    """A Markdown table: median entities/s (min-max), client CPU us/entity, ratios to azure and floor."""
    lines = [title, "", "| contender | entities/s median (min-max) | client CPU µs/entity | x azure-data-tables | x raw floor |",
             "|---|---|---|---|---|"]
    for one in series:
        rate = one.median
        spread = f"{rate:,.0f} ({min(one.rates):,.0f}-{max(one.rates):,.0f})"
        cpu = statistics.median(one.cpu_per_entity) * 1e6
        x_azure = f"{rate / azure.median:.2f}" if azure else "-"
        x_floor = f"{rate / floor.median:.2f}" if floor else "-"
        lines.append(f"| {one.label} | {spread} | {cpu:.1f} | {x_azure} | {x_floor} |")
    return "\n".join(lines)


def median_rate(run: Callable[[], int], repeats: int = 3) -> tuple[float, list[float]]:
    """Median items/second of ``repeats`` runs of ``run`` (which returns how many items it did)."""
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        count = run()
        rates.append(count / (time.perf_counter() - start))
    return statistics.median(rates), rates


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
