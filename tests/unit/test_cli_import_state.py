"""The resume state of ``tablesdk import``: the records written, as intervals, and the bound of those sent."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tablesdk.cli._import_state import READ_AHEAD, ImportSpec, ImportState, ImportStateError, RecordSet

SPEC = ImportSpec("T", "http://127.0.0.1:10002/devstoreaccount1", "insert", "jsonl")


def test_record_set_merges_numbers_in_any_order_into_intervals() -> None:
    records = RecordSet()
    records.add([5, 3, 4, 10])
    records.add([11, 1, 12, 7])
    assert records.flat() == [1, 1, 3, 5, 7, 7, 10, 12]
    assert [n for n in range(15) if n in records] == [1, 3, 4, 5, 7, 10, 11, 12]
    assert len(records) == 8 and "3" not in records
    records.add(range(1, 13))
    assert RecordSet(records.flat()).flat() == [1, 12]


def test_state_moves_read_through_ahead_before_a_record_is_sent(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("{}\n" * 3)
    path = str(source) + ".tablesdk-import"
    state = ImportState.open(path, SPEC, str(source), False, "cmd")
    assert state is not None and not os.path.exists(path)  # nothing sent: no file yet
    state.handing_out(1)
    assert json.loads(Path(path).read_text())["read_through"] == 1 + READ_AHEAD  # saved before it goes
    state.handing_out(2)
    state.written.add([2])
    state.stopped()  # every batch answered: only what was handed out may have been written
    state.save()
    resumed = ImportState.open(path, SPEC, str(source), True, "cmd")
    assert resumed is not None and resumed.resumed == 1 and 2 in resumed.written
    assert resumed.uncertain(1) and not resumed.uncertain(3)


def test_state_refuses_to_start_over_and_a_changed_input(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("{}\n")
    path = str(source) + ".tablesdk-import"
    state = ImportState.open(path, SPEC, str(source), False, "cmd")
    assert state is not None
    state.handing_out(1)
    with pytest.raises(ImportStateError, match="to continue it .* run: tablesdk import X --resume"):
        ImportState.open(path, SPEC, str(source), False, "tablesdk import X --resume")
    source.write_text("{}\n{}\n")
    with pytest.raises(ImportStateError, match="changed since the import stopped"):
        ImportState.open(path, SPEC, str(source), True, "cmd")


def test_a_directory_that_takes_no_state_is_said_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("{}\n")
    state = ImportState.open(str(tmp_path / "missing" / "state"), SPEC, str(source), False, "cmd")
    assert state is not None
    state.handing_out(1)
    state.save()
    assert capsys.readouterr().err.count("cannot keep the import's state") == 1
    assert not state.exists()
