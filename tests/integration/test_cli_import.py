"""``tablesdk import``: resuming a stopped import, --skip-existing on an input in any order, --infer-types.

The stops are ordered by signals, never by the clock: an in-process import is
interrupted from its progress call after a known number of entities; a child
process is stopped (SIGTERM, SIGKILL) while the emulator holds back every batch
after the first few (a gate on the emulator's request handler).
"""

from __future__ import annotations

import json
import os
import random
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, EdmType
from tablesdk.cli import main
from tablesdk.cli._progress import Progress
from tablesdk.devstore import DevStore

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def dev_table(table_client: CloudTableClient, unique_table_name: str) -> str:
    """A fresh table on the bundled emulator (emptied after the test by ``table_client``)."""
    table_client.create_table(unique_table_name)
    return unique_table_name


def shuffled_entities(count: int, partitions: int = 6) -> list[DynamicEntity]:
    """``count`` entities over ``partitions`` partitions, in no key order (a fixed shuffle)."""
    entities = [DynamicEntity(PartitionKey=f"p{i % partitions}", RowKey=f"{i:05d}", N=i) for i in range(count)]
    random.Random(7).shuffle(entities)
    return entities


def write_jsonl(path: Path, entities: list[DynamicEntity]) -> None:
    path.write_text("".join(json.dumps({"PartitionKey": e.PartitionKey, "RowKey": e.RowKey, "N": e["N"]}) + "\n"
                            for e in entities))


def contents(client: CloudTableClient, table: str) -> dict[tuple[str, str], int]:
    return {(e.PartitionKey, e.RowKey): e["N"] for e in client.create_query(table)}


def summary_line(stderr: str) -> str:
    return next(line for line in stderr.splitlines() if line.startswith("tablesdk: imported"))


class Sent:
    """Every entity ``bulk_insert`` is given and every query page requested, while installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.keys: list[tuple[str, str]] = []
        self.queries = 0
        bulk_insert, fetch = CloudTableClient.bulk_insert, CloudTableClient.fetch_query_segment

        def counting_insert(client: CloudTableClient, table: str, items: Any, *args: Any, **kwargs: Any) -> Any:
            def recorded() -> Iterator[Any]:
                for entity in items:
                    self.keys.append((entity.PartitionKey, entity.RowKey))
                    yield entity
            return bulk_insert(client, table, recorded(), *args, **kwargs)

        def counting_fetch(client: CloudTableClient, *args: Any, **kwargs: Any) -> Any:
            self.queries += 1
            return fetch(client, *args, **kwargs)

        monkeypatch.setattr(CloudTableClient, "bulk_insert", counting_insert)
        monkeypatch.setattr(CloudTableClient, "fetch_query_segment", counting_fetch)


# ---------------------------------------------------------------- an interrupted import, in process


def test_interrupted_import_says_how_to_resume_and_resume_asks_the_service_nothing(
    table_client: CloudTableClient, dev_table: str, devstore_connection_string: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    entities = shuffled_entities(3000)
    source = tmp_path / "in.jsonl"
    write_jsonl(source, entities)
    account = ["--connection-string", devstore_connection_string]
    update = Progress.update

    def interrupting(self: Progress, done: int, total: int | None = None) -> None:
        update(self, done, total)
        if done >= 1000:
            raise KeyboardInterrupt  # Ctrl-C, after a known number of entities

    with monkeypatch.context() as patch:
        patch.setattr(Progress, "update", interrupting)
        assert main(["import", str(source), dev_table, "--workers", "2", *account]) == 130
    err = capsys.readouterr().err
    state_path = Path(str(source) + ".tablesdk-import")
    state = json.loads(state_path.read_text())
    recorded = sum(end - start + 1 for start, end in zip(state["written"][0::2], state["written"][1::2]))
    before = contents(table_client, dev_table)
    assert 1000 <= recorded <= len(before) < 3000
    assert f"to continue it: tablesdk import {source} {dev_table} --workers 2 --connection-string" in err
    assert "--resume" in err and devstore_connection_string not in err  # the key is redacted

    refused = main(["import", str(source), dev_table, *account])  # started over plainly: refused, nothing sent
    assert refused == 1 and "an unfinished import of" in capsys.readouterr().err
    assert contents(table_client, dev_table) == before

    from tablesdk.cli._import_state import RecordSet
    from tablesdk.cli._transfer import ExistingKeys

    looked_up: list[tuple[str, str]] = []
    present = ExistingKeys.present

    def recording(self: ExistingKeys, keys: list[tuple[str, str]]) -> set[tuple[str, str]]:
        looked_up.extend(keys)
        return present(self, keys)

    monkeypatch.setattr(ExistingKeys, "present", recording)
    sent = Sent(monkeypatch)
    assert main(["import", str(source), dev_table, "--resume", *account]) == 0
    err = capsys.readouterr().err
    assert contents(table_client, dev_table) == {(e.PartitionKey, e.RowKey): e["N"] for e in entities}
    assert not set(sent.keys) & set(before)  # nothing written by the stopped run was sent again
    assert len(sent.keys) == 3000 - len(before)
    # The recorded records were skipped unasked; only those that may have been in flight were looked up.
    written = RecordSet(state["written"])
    recorded_keys = {(e.PartitionKey, e.RowKey) for n, e in enumerate(entities, 1) if n in written}
    assert len(recorded_keys) == recorded and not recorded_keys & set(looked_up)
    assert set(before) - recorded_keys <= set(looked_up)
    line = summary_line(err)
    assert f"imported {3000 - len(before)} entities, {recorded} skipped (written before the import stopped)" in line
    assert line.endswith(", 0 failed")
    assert not state_path.exists()  # done: the state goes


def test_resume_refuses_a_changed_input_and_says_when_there_is_nothing_to_resume(
    table_client: CloudTableClient, dev_table: str, devstore_connection_string: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = tmp_path / "in.jsonl"
    write_jsonl(source, shuffled_entities(10))
    account = ["--connection-string", devstore_connection_string]
    assert main(["import", str(source), dev_table, "--resume", *account]) == 0
    assert "no unfinished import of" in capsys.readouterr().err  # said, then every entity imported
    state = Path(str(source) + ".tablesdk-import")
    state.write_text(json.dumps({"version": 1, "spec": {
        "table": dev_table, "endpoint": table_client.table_endpoint, "mode": "insert", "file_format": "jsonl",
        "infer_types": False}, "input": [1, 2], "read_through": 5000, "written": [1, 5]}))
    assert main(["import", str(source), dev_table, "--resume", *account]) == 1
    assert "changed since the import stopped" in capsys.readouterr().err
    assert main(["import", str(source), "othertable", "--resume", *account]) == 1
    assert "is the state of another import" in capsys.readouterr().err


# ---------------------------------------------------------------- a child process stopped mid-import


@contextmanager
def gated_store(batches: int) -> Iterator[tuple[DevStore, threading.Event, threading.Event]]:
    """An emulator that answers ``batches`` batch requests, then holds every other one until released."""
    with DevStore(port=0, explorer=False) as store:
        server = store._server
        assert server is not None
        answer = server.answer
        held, release = threading.Event(), threading.Event()
        count = [0]
        lock = threading.Lock()

        def gate(request: Any) -> Any:
            if request.method == "POST" and request.raw_path.endswith("/$batch"):
                with lock:
                    count[0] += 1
                    over = count[0] > batches
                if over:
                    held.set()
                    release.wait()
            return answer(request)

        server.answer = gate
        try:
            yield store, held, release
        finally:
            release.set()


def child_import(store: DevStore, *args: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "AZURE_STORAGE_CONNECTION_STRING"}
    env.update(PYTHONPATH=str(REPO), AZURE_STORAGE_CONNECTION_STRING=store.connection_string)
    return subprocess.Popen([sys.executable, "-m", "tablesdk", "import", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def run_printed(command: str, store: DevStore) -> subprocess.CompletedProcess[bytes]:
    words = shlex.split(command)
    assert words[0] == "tablesdk"
    env = {k: v for k, v in os.environ.items() if k != "AZURE_STORAGE_CONNECTION_STRING"}
    env.update(PYTHONPATH=str(REPO), AZURE_STORAGE_CONNECTION_STRING=store.connection_string)
    return subprocess.run([sys.executable, "-m", "tablesdk", *words[1:]], env=env, capture_output=True,
                          timeout=300, check=False)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
def test_import_stopped_by_a_signal_resumes_exactly(stop: signal.Signals, tmp_path: Path) -> None:
    entities = shuffled_entities(4000, partitions=40)  # batches of about 100: a few dozen of them
    source = tmp_path / "in put.jsonl"
    write_jsonl(source, entities)
    expected = {(e.PartitionKey, e.RowKey): e["N"] for e in entities}
    with gated_store(batches=10) as (store, held, release):
        client = CloudStorageAccount.parse(store.connection_string).create_cloud_table_client()
        client.create_table("stopped")
        child = child_import(store, str(source), "stopped", "--workers", "2")
        assert held.wait(120), "the import never reached its eleventh batch"
        child.send_signal(stop)  # the child waits for a batch the emulator holds back
        release.set()
        _, errors = child.communicate(timeout=120)
        err = errors.decode()
        if stop == signal.SIGKILL:
            assert child.returncode == -signal.SIGKILL
            command = f"tablesdk import '{source}' stopped --workers 2 --resume"
        else:
            assert child.returncode == 143, err
            assert "tablesdk: terminated" in err
            command = err.split("to continue it: ", 1)[1].splitlines()[0]
            assert command == f"tablesdk import '{source}' stopped --workers 2 --resume"
        written = len(contents(client, "stopped"))
        assert 0 < written < 4000
        resumed = run_printed(command, store)
        assert resumed.returncode == 0, resumed.stderr
        assert contents(client, "stopped") == expected
        line = summary_line(resumed.stderr.decode())
        numbers = [int(word) for word in line.replace(",", " ").split() if word.isdigit()]
        assert numbers[0] == 4000 - written and sum(numbers) == 4000 and line.endswith(", 0 failed"), line
        assert not Path(str(source) + ".tablesdk-import").exists()
        client.close()


# ---------------------------------------------------------------- --skip-existing, an input in any order


def test_skip_existing_on_an_unsorted_input_sends_no_entity_twice(
    table_client: CloudTableClient, dev_table: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tablesdk.cli import _transfer

    entities = shuffled_entities(3000)
    present = entities[:1800]
    table_client.bulk_insert(dev_table, present).raise_on_error()
    # Blocks of 100 keys: a block of an unsorted input spans the whole table, past the look-up's budget.
    monkeypatch.setattr(_transfer, "EXISTING_CHECK_BLOCK", 100)
    sent = Sent(monkeypatch)
    lines = [(n, DynamicEntity(PartitionKey=e.PartitionKey, RowKey=e.RowKey, N=e["N"]), "")
             for n, e in enumerate(entities, 1)]
    summary = _transfer.import_entities(table_client, dev_table, lines, "insert", Progress("x", False),
                                        _transfer.ImportSummary(), skip_existing=True)
    assert (summary.written, summary.skipped, summary.failed) == (1200, 1800, 0)
    assert len(sent.keys) == 1200  # every existing one was found by a look-up: none was sent to be refused
    assert sent.queries <= 3000 // 100 + 2  # about one key-only page per block of the sorted keys


# ---------------------------------------------------------------- --infer-types


def test_infer_types_makes_numeric_filters_match(
    table_client: CloudTableClient, dev_table: str, devstore_connection_string: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = tmp_path / "people.csv"
    source.write_text(
        "PartitionKey,RowKey,Age,Score,Member,Joined,Id,Zip,Mixed,Big\r\n"
        "p,1,34,1.5,true,2024-01-02T03:04:05Z,12345678-1234-5678-1234-567812345678,007,12,9223372036854775807\r\n"
        "p,2,61,2,False,2024-02-03T04:05:06.1234567+02:00,87654321-4321-8765-4321-876543218765,10115,x,1\r\n"
        "p,3,58,,TRUE,,,02134,3,\r\n")
    account = ["--connection-string", devstore_connection_string]
    assert main(["import", str(source), dev_table, *account]) == 0
    assert main(["count", dev_table, "--filter", "Age gt 55", *account]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "0"  # every column a String: the number matches nothing, and it is said
    assert "warning: --filter compares Age with a number, but Age is text (Edm.String)" in err

    other = "i" + dev_table[1:]
    assert main(["import", str(source), other, "--infer-types", "--create-table", *account]) == 0
    err = capsys.readouterr().err
    assert ("--infer-types: Age Edm.Int32, Score Edm.Double, Member Edm.Boolean, Joined Edm.DateTime, "
            "Id Edm.Guid, Big Edm.Int64") in err
    try:
        assert main(["count", other, "--filter", "Age gt 55", *account]) == 0
        out, err = capsys.readouterr()
        assert out.strip() == "2" and "warning" not in err
        payload = table_client.get_entity_payload(other, "p", "1")
        types = {name: payload.types[name] for name in ("Age", "Score", "Member", "Joined", "Id", "Zip", "Mixed",
                                                         "Big")}
        assert types == {"Age": EdmType.INT32, "Score": EdmType.DOUBLE, "Member": EdmType.BOOLEAN,
                         "Joined": EdmType.DATETIME, "Id": EdmType.GUID, "Zip": EdmType.STRING,
                         "Mixed": EdmType.STRING, "Big": EdmType.INT64}
        assert payload.values["Zip"] == "007" and payload.values["Big"] == 2**63 - 1
        assert "Score" not in table_client.get_entity_payload(other, "p", "3").values  # an empty cell: absent
    finally:
        table_client.delete_table(other)


def test_infer_types_is_refused_where_it_cannot_apply(
    dev_table: str, devstore_connection_string: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    source = tmp_path / "in.jsonl"
    write_jsonl(source, shuffled_entities(2))
    assert main(["import", str(source), dev_table, "--infer-types", "--connection-string",
                 devstore_connection_string]) == 2
    assert "--infer-types reads a CSV file" in capsys.readouterr().err


# ---------------------------------------------------------------- the warning of a --filter comparing text with a number


def test_filter_comparing_text_with_a_number_warns_on_every_command(
    table_client: CloudTableClient, dev_table: str, devstore_connection_string: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    table_client.bulk_insert(dev_table, [DynamicEntity(PartitionKey="p", RowKey=str(i), Age=str(30 + i * 10),
                                                       Name=f"n{i}") for i in range(4)]).raise_on_error()
    account = ["--connection-string", devstore_connection_string]
    commands = {
        "count": ["count", dev_table, "--filter", "Age gt 55"],
        "query": ["query", dev_table, "--filter", "Age gt 55", "-o", "jsonl"],
        "query grid": ["query", dev_table, "--filter", "Age gt 55", "-o", "table"],
        "query json": ["query", dev_table, "--filter", "Age gt 55", "-o", "json"],
        "export": ["export", dev_table, str(tmp_path / "out.jsonl"), "--filter", "Age gt 55"],
        "delete-entities": ["delete-entities", dev_table, "--filter", "Age gt 55", "--dry-run"],
        "matched other": ["query", dev_table, "--filter", "Age gt 55 or RowKey eq '1'", "-o", "jsonl"],
    }
    for name, command in commands.items():
        assert main([*command, *account]) == 0, name
        err = capsys.readouterr().err
        assert err.count("warning: --filter compares Age with a number") == 1, (name, err)
        where = "the entities that matched" if name == "matched other" else f"the first 4 entities of {dev_table}"
        assert f"in {where} (PartitionKey 'p', RowKey " in err, (name, err)
    # No warning where none is due: text with text, a number with a number, a property no entity has.
    table_client.insert_entity(dev_table, DynamicEntity(PartitionKey="q", RowKey="1", Age=70, Weight=80.5))
    for command in (["count", dev_table, "--filter", "Name gt 'n1'"],
                    ["query", dev_table, "--filter", "Age gt 55", "-o", "jsonl"],
                    ["count", dev_table, "--filter", "Height gt 1.5"],
                    ["count", dev_table, "--filter", "Weight gt 100"]):
        assert main([*command, *account]) == 0
        assert "warning" not in capsys.readouterr().err, command


def test_a_parquet_import_resumes_by_row_number(
    table_client: CloudTableClient, dev_table: str, devstore_connection_string: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("pyarrow")
    entities = shuffled_entities(1500, partitions=15)
    table_client.bulk_insert(dev_table, entities).raise_on_error()
    account = ["--connection-string", devstore_connection_string]
    source = tmp_path / "rows.parquet"
    assert main(["export", dev_table, str(source), *account]) == 0
    other = "r" + dev_table[1:]
    table_client.create_table(other)
    update = Progress.update

    def interrupting(self: Progress, done: int, total: int | None = None) -> None:
        update(self, done, total)
        if done >= 300:
            raise KeyboardInterrupt

    try:
        with monkeypatch.context() as patch:
            patch.setattr(Progress, "update", interrupting)
            assert main(["import", str(source), other, "--workers", "1", *account]) == 130
        assert "--resume" in capsys.readouterr().err
        before = contents(table_client, other)
        assert 300 <= len(before) < 1500
        sent = Sent(monkeypatch)
        assert main(["import", str(source), other, "--workers", "1", "--resume", *account]) == 0
        assert contents(table_client, other) == {(e.PartitionKey, e.RowKey): e["N"] for e in entities}
        assert not set(sent.keys) & set(before) and len(sent.keys) == 1500 - len(before)
    finally:
        table_client.delete_table(other)


def test_stdin_keeps_its_state_only_where_told(
    table_client: CloudTableClient, dev_table: str, devstore_connection_string: str, tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "AZURE_STORAGE_CONNECTION_STRING"}
    env.update(PYTHONPATH=str(REPO), AZURE_STORAGE_CONNECTION_STRING=devstore_connection_string)
    data = b"".join(json.dumps({"PartitionKey": "p", "RowKey": str(i), "N": i}).encode() + b"\n" for i in range(5))

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-m", "tablesdk", "import", "-", dev_table, *args], input=data,
                              env=env, cwd=tmp_path, capture_output=True, timeout=120, check=False)

    refused = run("--resume")
    assert refused.returncode == 2 and b"--resume of an import from '-' needs the --state-file" in refused.stderr
    state = tmp_path / "elsewhere" / "stdin.state"
    state.parent.mkdir()
    assert run("--state-file", str(state)).returncode == 0
    assert len(contents(table_client, dev_table)) == 5
    assert list(tmp_path.rglob("*")) == [state.parent]  # done: no state left, none beside a file
