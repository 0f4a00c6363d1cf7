"""``tablesdk export --since`` and ``--since-state``: runs that each export the rows changed after the
last one, the state replaced only after a successful export."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_cli import ok, run_cli

from tablesdk import CloudStorageAccount, DynamicEntity, Watermark

pytestmark = pytest.mark.integration


def _rows(path: Path) -> list[tuple[str, str, int]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return sorted((row["PartitionKey"], row["RowKey"], row["V"]) for row in lines)


@pytest.mark.parametrize("parallel", ["1", "3"])
def test_each_run_exports_the_changes_after_the_last(
    devstore_connection_string: str, unique_table_name: str, tmp_path: Path, parallel: str,
) -> None:
    table = unique_table_name
    state = tmp_path / "state.json"
    with CloudStorageAccount.parse(devstore_connection_string).create_cloud_table_client() as client:
        client.create_table(table)
        for pk in "abcd":
            client.insert_entity(table, DynamicEntity(pk, "1", V=0))

        def export(name: str, *extra: str) -> Path:
            out = tmp_path / name
            ok(run_cli("export", table, str(out), "--since-state", str(state), "--parallel", parallel, *extra,
                       connection_string=devstore_connection_string))
            return out

        assert _rows(export("first.jsonl")) == [(pk, "1", 0) for pk in "abcd"]
        first = Watermark.from_string(state.read_text(encoding="utf-8"))
        assert len(first.seen) == 4  # written within the overlap: kept to skip them next time

        client.upsert_entity(table, DynamicEntity("b", "1", V=1), mode="replace")
        client.insert_entity(table, DynamicEntity("e", "1", V=1))
        assert _rows(export("second.jsonl")) == [("b", "1", 1), ("e", "1", 1)]
        assert _rows(export("third.jsonl")) == []

        # A failed export leaves the state as it was: the next run reads the same changes.
        client.insert_entity(table, DynamicEntity("f", "1", V=2))
        before = state.read_text(encoding="utf-8")
        (tmp_path / "taken.jsonl").write_text("x\n", encoding="utf-8")
        refused = run_cli("export", table, str(tmp_path / "taken.jsonl"), "--since-state", str(state),
                          connection_string=devstore_connection_string)
        assert refused.returncode != 0 and state.read_text(encoding="utf-8") == before
        assert _rows(export("fourth.jsonl")) == [("f", "1", 2)]
        client.delete_table(table)


def test_since_text_and_a_state_behind_a_link(
    devstore_connection_string: str, unique_table_name: str, tmp_path: Path,
) -> None:
    table = unique_table_name
    with CloudStorageAccount.parse(devstore_connection_string).create_cloud_table_client() as client:
        client.create_table(table)
        client.insert_entity(table, DynamicEntity("a", "1", V=0))
        client.insert_entity(table, DynamicEntity("a", "2", V=0))
        stamps = {e.RowKey: e.Timestamp for e in client.create_query(table)}
        since = Watermark.at(stamps["1"]).floor
        assert since is not None
        from tablesdk._entities._edm import format_datetime

        out = tmp_path / "since.jsonl"
        ok(run_cli("export", table, str(out), "--since", format_datetime(since),
                   connection_string=devstore_connection_string))
        assert _rows(out) == [("a", "2", 0)]

        real = tmp_path / "real-state"
        link = tmp_path / "state-link"
        os.symlink(real, link)
        ok(run_cli("export", table, str(tmp_path / "linked.jsonl"), "--since-state", str(link),
                   connection_string=devstore_connection_string))
        assert link.is_symlink() and Watermark.from_string(real.read_text(encoding="utf-8")).seen

        bad = run_cli("export", table, str(tmp_path / "bad.jsonl"), "--since", "yesterday",
                      connection_string=devstore_connection_string)
        assert bad.returncode != 0 and b"--since" in bad.stderr
        parquet = run_cli("export", table, str(tmp_path / "x.parquet"), "--since-state", str(real),
                          connection_string=devstore_connection_string)
        assert parquet.returncode != 0 and b"Parquet" in parquet.stderr
        client.delete_table(table)
