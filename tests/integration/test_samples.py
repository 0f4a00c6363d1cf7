"""The samples run end to end against each target (the main job of the README)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_microblog_sample(target: str, connection_string: str) -> None:
    env = {**os.environ, "AZURE_STORAGE_CONNECTION_STRING": connection_string, "PYTHONPATH": str(ROOT)}
    payload_format = target.rsplit("-", 1)[1]
    result = subprocess.run(
        [sys.executable, str(ROOT / "samples" / "microblog.py"), "--format", payload_format],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all steps passed" in result.stdout


def test_todo_sample(target: str, connection_string: str) -> None:
    env = {**os.environ, "AZURE_STORAGE_CONNECTION_STRING": connection_string, "PYTHONPATH": str(ROOT)}
    payload_format = target.rsplit("-", 1)[1]
    result = subprocess.run(
        [sys.executable, str(ROOT / "samples" / "todo.py"), "--format", payload_format],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all steps passed" in result.stdout


def test_encryption_sample(target: str, connection_string: str) -> None:
    env = {**os.environ, "AZURE_STORAGE_CONNECTION_STRING": connection_string, "PYTHONPATH": str(ROOT)}
    payload_format = target.rsplit("-", 1)[1]
    result = subprocess.run(
        [sys.executable, str(ROOT / "samples" / "encryption.py"), "--format", payload_format],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "refused: an encrypted entity cannot be merged" in result.stdout
    assert "0002 Alan Turing: 4 visits" in result.stdout and "all steps passed" in result.stdout


def test_readme_quick_start_runs(devstore_connection_string: str) -> None:
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    # the block that uses conn_str (the one before it only says where conn_str comes from)
    match = re.search(r"```python\n(from tablesdk import .*?)```", section, re.S)
    assert match, "README.md lost its quick start block"
    namespace: dict[str, object] = {"conn_str": devstore_connection_string}
    exec(compile(match.group(1), "README.md", "exec"), namespace)  # noqa: S102 - our own README
    client = namespace["client"]
    ratings = [(b.RowKey, b.Rating) for b in client.create_query("Blogs", namespace["Blog"])]  # type: ignore[attr-defined]
    client.delete_table("Blogs")  # type: ignore[attr-defined]
    assert ratings == [("Oct-29", 4)]


def test_orders_sample(target: str, connection_string: str) -> None:
    env = {**os.environ, "AZURE_STORAGE_CONNECTION_STRING": connection_string, "PYTHONPATH": str(ROOT)}
    payload_format = target.rsplit("-", 1)[1]
    result = subprocess.run(
        [sys.executable, str(ROOT / "samples" / "orders.py"), "--format", payload_format],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all steps passed" in result.stdout
