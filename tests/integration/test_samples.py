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
