"""Start-up cost: ``import tablesdk`` and ``import tablesdk.aio`` over a bare interpreter, and ``tablesdk --help``.

    python benchmarks/startup.py [--runs 20]
    python benchmarks/startup.py --callgrind      # instructions instead (valgrind): repeatable under load

Each run starts a fresh interpreter (the same one that runs this script, with
this checkout first on ``PYTHONPATH``); the commands take turns
(interleaved) so that the load of a shared machine falls on all of them alike.
Reported per command: the median wall-clock time and the median CPU time
(user + system of the child, which a loaded machine inflates less), each
also over the bare interpreter's. Bytecode is written once
before measuring, as an installed package has it.
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

COMMANDS = {
    "bare interpreter": [sys.executable, "-c", "pass"],
    "import tablesdk": [sys.executable, "-c", "import tablesdk"],
    "import tablesdk.aio": [sys.executable, "-c", "import tablesdk.aio"],
    "tablesdk --help": [sys.executable, "-m", "tablesdk", "--help"],
}


def run_once(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one run of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def instructions(command: list[str], env: dict[str, str]) -> int:
    """Instructions one run of ``command`` executes (valgrind callgrind)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command], env=env,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        match = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.M)
        assert match, "no totals in the callgrind output"
        return int(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--callgrind", action="store_true", help="count instructions (valgrind) instead of timing")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    for command in COMMANDS.values():  # write the bytecode, warm the file cache
        run_once(command, env)
    if args.callgrind:
        counts = {name: instructions(command, env) for name, command in COMMANDS.items()}
        print("| command | instructions (millions) | over bare |")
        print("|---|---|---|")
        for name, count in counts.items():
            print(f"| {name} | {count / 1e6:.1f} | {(count - counts['bare interpreter']) / 1e6:.1f} |")
        return
    walls: dict[str, list[float]] = {name: [] for name in COMMANDS}
    cpus: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.runs):
        for name, command in COMMANDS.items():
            wall, cpu = run_once(command, env)
            walls[name].append(wall)
            cpus[name].append(cpu)
    bare_wall = statistics.median(walls["bare interpreter"])
    bare_cpu = statistics.median(cpus["bare interpreter"])
    load = os.getloadavg()[0]
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load:.1f}; medians of {args.runs} runs\n")
    print("| command | wall ms | CPU ms | wall ms over bare | CPU ms over bare |")
    print("|---|---|---|---|---|")
    for name in COMMANDS:
        wall, cpu = statistics.median(walls[name]) * 1e3, statistics.median(cpus[name]) * 1e3
        print(f"| {name} | {wall:.0f} | {cpu:.0f} | {wall - bare_wall * 1e3:.0f} | {cpu - bare_cpu * 1e3:.0f} |")


if __name__ == "__main__":
    main()
