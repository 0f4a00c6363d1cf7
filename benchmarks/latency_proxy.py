"""Serve tests/faults.py's FaultProxy with a fixed latency, in its own process.

    python benchmarks/latency_proxy.py UPSTREAM_ENDPOINT LATENCY_SECONDS

Prints the proxied endpoint on one line, then serves until stdin closes. The
benchmarks start it through ``_common.latency_proxy`` so that the proxy's own
CPU (and GIL) never counts as the client's.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from faults import FaultProxy  # noqa: E402


def main() -> None:
    upstream, latency = sys.argv[1], float(sys.argv[2])
    with FaultProxy(upstream, latency=latency, lifetime=24 * 3600, idle_timeout=600, max_delay=60) as proxy:
        print(proxy.endpoint, flush=True)
        sys.stdin.read()  # until the benchmark closes the pipe (or exits)


if __name__ == "__main__":
    main()
