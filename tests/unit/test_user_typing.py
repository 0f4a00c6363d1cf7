"""Static typing of user code: what mypy --strict infers for code in the README's style,
and the run-time half of the bargain (a real bool is still refused)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tablesdk import CloudStorageAccount, TableEntity, col, prop
from tablesdk._entities._filter import PropertyRef

ROOT = Path(__file__).resolve().parents[2]

USER_CODE = '''\
from datetime import datetime
from typing_extensions import assert_type

from tablesdk import CloudStorageAccount, DynamicEntity, Int64, TableEntity, col
from tablesdk._entities._filter import PropertyRef
from tablesdk._queries._query import ResultSegment, TableQuery


class Note(TableEntity):
    Text: str
    Views: Int64
    Stars: int
    When: datetime


client = CloudStorageAccount.development_storage_account().create_cloud_table_client()
ctx = client.get_table_service_context()
assert_type(client.create_query("Notes", Note), TableQuery[Note])
assert_type(ctx.create_query("Notes", Note), TableQuery[Note])
assert_type(client.create_query("Notes"), TableQuery[DynamicEntity])
q = ctx.create_query("Notes", Note).where((Note.PartitionKey == "a") & (Note.Stars > 2)).where(Note.Views >= 5)
for note in q:
    assert_type(note, Note)
    assert_type(note.Views, int)
    note.Stars += 1
assert_type(q.first(), Note)
assert_type(q.first_or_default(), Note | None)
assert_type(q.execute_segmented(None), ResultSegment[Note])
assert_type(ctx.get("Notes", "a", "b", Note), Note)
assert_type(ctx.get_or_none("Notes", "a", "b", Note), Note | None)
assert_type(client.get_entity("Notes", "a", "b", Note), Note)
assert_type(client.get_entity("Notes", "a", "b"), DynamicEntity)
assert_type(col(Note.Stars), PropertyRef)
q2 = q.where(col(Note.Stars).between(1, 5) | (Note.Text == "x"))
'''


def test_user_code_in_the_readme_style_type_checks(tmp_path: Path) -> None:
    user = tmp_path / "user_code.py"
    user.write_text(USER_CODE, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(user)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


class Note(TableEntity):
    Stars: int


def test_where_refuses_a_real_bool_at_run_time() -> None:
    client = CloudStorageAccount.development_storage_account().create_cloud_table_client()
    query = client.create_query("Notes", Note)
    with pytest.raises(TypeError, match="bool"):
        query.where(1 > 2)
    with pytest.raises(TypeError, match="bool"):
        query.where((Note.Stars > 2) & True)


def test_col_returns_the_property_reference_and_refuses_anything_else() -> None:
    ref = col(Note.Stars)
    assert isinstance(ref, PropertyRef)
    assert str(ref.between(1, 5)) == "(Stars ge 1 and Stars le 5)"
    assert col(prop("X")) is not None
    with pytest.raises(TypeError, match="declared property"):
        col(3)
