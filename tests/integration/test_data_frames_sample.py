"""samples/data_frames.py runs end to end (pandas -> entities -> Arrow/pandas -> Dask totals) on both formats."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("payload_format", ["json", "atom"])
def test_data_frames_sample(devstore_connection_string: str, payload_format: str) -> None:
    env = {**os.environ, "AZURE_STORAGE_CONNECTION_STRING": devstore_connection_string, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, str(ROOT / "samples" / "data_frames.py"), "--format", payload_format, "--rows", "200",
         "--table", f"Sales{payload_format}"],
        env=env, capture_output=True, text=True, timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all steps passed" in result.stdout
