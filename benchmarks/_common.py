"""Shared pieces of the benchmark scripts: a local Azurite, the test entities, timing."""

from __future__ import annotations

import contextlib
import os
import platform
import socket
import statistics
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

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


def sample_properties(n: int) -> dict[str, object]:
    """Ten properties of mixed types, like the AZURITE.md baseline (about 500 bytes of JSON)."""
    return {
        "Name": f"entity-{n}", "Count": n % 100_000, "Big": 2**40 + n, "Ratio": n / 7,
        "Active": n % 2 == 0, "When": datetime(2024, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=n),
        "Id": uuid.UUID(int=n), "Blob": n.to_bytes(16, "big"), "Note": "x" * 51, "Small": n % 7,
    }


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
