"""``tablesdk export --since-state`` pointed where the watermark cannot be kept: refused before the
export, so the exported rows are never replaced by the watermark's text."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_cli import run_cli

from tablesdk import CloudStorageAccount, DynamicEntity

pytestmark = pytest.mark.integration


@pytest.fixture()
def table(devstore_connection_string: str, unique_table_name: str) -> str:
    with CloudStorageAccount.parse(devstore_connection_string).create_cloud_table_client() as client:
        client.create_table(unique_table_name)
        client.insert_entity(unique_table_name, DynamicEntity("a", "1", V=1))
    return unique_table_name


@pytest.mark.parametrize("through_link", [False, True])
def test_a_state_file_that_is_the_output_is_refused(
    devstore_connection_string: str, table: str, tmp_path: Path, through_link: bool,
) -> None:
    out = tmp_path / "out.jsonl"
    state = out
    if through_link:
        state = tmp_path / "state.json"
        os.symlink(out.name, state)
    result = run_cli("export", table, str(out), "--since-state", str(state),
                     connection_string=devstore_connection_string)
    assert result.returncode != 0
    assert b"--since-state" in result.stderr and b"output" in result.stderr, result.stderr
    assert not out.exists()  # nothing exported, nothing replaced


def test_a_state_on_stdout_is_refused_before_the_export(
    devstore_connection_string: str, table: str, tmp_path: Path,
) -> None:
    result = run_cli("export", table, str(tmp_path / "out.jsonl"), "--since-state", "-",
                     connection_string=devstore_connection_string)
    assert result.returncode != 0 and b"regular file" in result.stderr, result.stderr
    assert not (tmp_path / "out.jsonl").exists()
