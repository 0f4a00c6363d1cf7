"""Going on after an interrupted ``tablesdk import``: ``--resume`` and ``--skip-existing``, in key order or not.

Against the bundled emulator in its own process (``tablesdk serve``, sqlite in a
temporary file), with N entities (default 20,000, ten properties, partitions of
1,000) written to a JSON-lines file twice: in key order and shuffled. For each file:

* ``import``: the whole file into an empty table (the reference);
* ``--skip-existing``: the first half of the file's lines is in the table (an
  import that stopped there), then ``import --skip-existing`` of the whole file;
  and ``--skip-existing, all``: the same into the table the whole file went to
  (every entity is there: only the look-ups);
* ``--resume``: an import started as a child process is interrupted (SIGINT) once
  its state file records half of the file written, then ``import --resume``;
* with ``--plain-rerun``: the half-loaded table imported again without either
  (every entity already there is refused with 409; minutes).

Each timing is one child process, start to exit (interpreter start-up included).
``--tree PATH`` runs the commands from another checkout (the code before a change:
``git archive COMMIT | tar -x -C PATH``); a tree without ``--resume`` skips that step.
The machine's load average is printed: the machine may be shared. ``--requests-only``
counts the requests ``--skip-existing`` makes with every entity there (an emulator in
this process counts them), which no load changes. Run::

    python benchmarks/cli_import.py
    python benchmarks/cli_import.py --count 20000 --tree /tmp/before
    python benchmarks/cli_import.py --requests-only --tree /tmp/before
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import machine, sample_properties  # noqa: E402
from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity  # noqa: E402
from tablesdk.cli._files import payload_json  # noqa: E402
from tablesdk._entities._entity import entity_to_payload  # noqa: E402


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


class Cli:
    """``python -m tablesdk`` from a source tree, against one account."""

    def __init__(self, tree: Path, connection_string: str) -> None:
        self.tree = tree
        self.env = {**os.environ, "PYTHONPATH": str(tree), "AZURE_STORAGE_CONNECTION_STRING": connection_string}
        self.has_resume = "--state-file" in (tree / "tablesdk" / "cli" / "_app.py").read_text()  # import --resume

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        # cwd: ``python -m`` puts the working directory first on sys.path, before PYTHONPATH
        return subprocess.Popen([sys.executable, "-m", "tablesdk", "--no-progress", *args], env=self.env,
                                cwd=self.tree, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def timed(self, *args: str) -> tuple[float, str]:
        """Wall seconds of the command and its summary line."""
        start = time.perf_counter()
        child = self.start(*args)
        _, err = child.communicate()
        elapsed = time.perf_counter() - start
        text = err.decode()
        if child.returncode not in (0, 3):
            raise SystemExit(f"tablesdk {' '.join(args)} failed ({child.returncode}): {text}")
        return elapsed, next((line for line in text.splitlines() if "imported" in line), text.strip())


def write_file(path: str, entities: list[DynamicEntity]) -> None:
    with open(path, "wb") as handle:
        for entity in entities:
            handle.write(payload_json(entity_to_payload(entity)) + b"\n")


def recorded(state_path: str) -> int:
    try:
        with open(state_path, encoding="utf-8") as handle:
            flat = json.load(handle)["written"]
    except (OSError, ValueError, KeyError):
        return 0
    return sum(end - start + 1 for start, end in zip(flat[0::2], flat[1::2]))


def interrupted_import(cli: Cli, path: str, table: str, half: int) -> int:
    """Start an import and interrupt it (SIGINT) once its state records ``half`` entities; returns how many."""
    state = path + ".tablesdk-import"
    child = cli.start("import", path, table)
    while child.poll() is None and recorded(state) < half:
        time.sleep(0.05)  # a benchmark: where exactly it stops does not matter, only that it stops half-way
    child.send_signal(signal.SIGINT)
    child.communicate()
    return recorded(state)


def count_requests(tree: Path, count: int) -> None:
    """Requests ``import --skip-existing`` makes when every entity is there, by kind (an in-process
    emulator counts them): independent of the machine's load."""
    import collections

    from tablesdk.devstore import DevStore

    entities = [DynamicEntity(PartitionKey=f"p{n // 1000:05d}", RowKey=f"{n:08d}", N=n) for n in range(count)]
    shuffled = list(entities)
    random.Random(1).shuffle(shuffled)
    with DevStore(port=0, explorer=False) as store, tempfile.TemporaryDirectory() as work:
        server = store._server
        assert server is not None
        answer, seen = server.answer, collections.Counter[str]()

        def counting(request: Any) -> Any:
            seen["batches" if request.raw_path.endswith("$batch") else f"{request.method} requests"] += 1
            return answer(request)

        server.answer = counting
        client = CloudStorageAccount.parse(store.connection_string).create_cloud_table_client()
        client.create_table("counted")
        client.bulk_insert("counted", entities).raise_on_error()
        cli = Cli(tree, store.connection_string)
        for order, rows in (("in key order", entities), ("shuffled", shuffled)):
            path = os.path.join(work, "in.jsonl")
            write_file(path, rows)
            seen.clear()
            seconds, line = cli.timed("import", path, "counted", "--skip-existing")
            print(f"  {order:12} --skip-existing, all: {dict(seen)} ({seconds:.1f} s)")
        client.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose CLI is timed")
    parser.add_argument("--plain-rerun", action="store_true", help="also time a rerun without --skip-existing")
    parser.add_argument("--requests-only", action="store_true",
                        help="only count the requests of --skip-existing with every entity there")
    args = parser.parse_args()
    if args.requests_only:
        print(f"requests of tablesdk import --skip-existing, {args.count:,} entities all there; tree {args.tree}")
        count_requests(args.tree, args.count)
        return 0
    count, half = args.count, args.count // 2
    entities = [DynamicEntity(PartitionKey=f"p{n // 1000:05d}", RowKey=f"{n:08d}", **sample_properties(n))
                for n in range(count)]
    shuffled = list(entities)
    random.Random(1).shuffle(shuffled)
    print(f"tablesdk import, going on after a stop; {count:,} entities; {machine()}; tree {args.tree}")
    print(f"load average at start: {os.getloadavg()[0]:.1f} (1 min), {os.getloadavg()[1]:.1f} (5 min)")
    with tempfile.TemporaryDirectory() as work, emulator(work) as cs:
        client: CloudTableClient = CloudStorageAccount.parse(cs).create_cloud_table_client()
        cli = Cli(args.tree, cs)
        for order, rows in (("in key order", entities), ("shuffled", shuffled)):
            path = os.path.join(work, f"{order.split()[0]}.jsonl")
            write_file(path, rows)
            name = order.split()[0]
            client.create_table(f"full{name}")
            print(f"  {order:12} import               {cli.timed('import', path, f'full{name}')[0]:7.1f} s")
            client.create_table(f"skip{name}")
            client.bulk_insert(f"skip{name}", rows[:half]).raise_on_error()
            seconds, line = cli.timed("import", path, f"skip{name}", "--skip-existing")
            print(f"  {order:12} --skip-existing      {seconds:7.1f} s   {line}")
            seconds, line = cli.timed("import", path, f"full{name}", "--skip-existing")  # every entity there
            print(f"  {order:12} --skip-existing, all {seconds:7.1f} s   {line}")
            if cli.has_resume:
                client.create_table(f"resume{name}")
                done = interrupted_import(cli, path, f"resume{name}", half)
                seconds, line = cli.timed("import", path, f"resume{name}", "--resume")
                print(f"  {order:12} --resume             {seconds:7.1f} s   {line} (stopped at {done:,})")
            if args.plain_rerun:
                client.create_table(f"plain{name}")
                client.bulk_insert(f"plain{name}", rows[:half]).raise_on_error()
                seconds, line = cli.timed("import", path, f"plain{name}")
                print(f"  {order:12} plain rerun          {seconds:7.1f} s   {line}")
        client.close()
    print(f"load average at end: {os.getloadavg()[0]:.1f} (1 min), {os.getloadavg()[1]:.1f} (5 min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
