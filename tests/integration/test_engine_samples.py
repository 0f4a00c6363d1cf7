"""samples/ray_devices.py, polars_sales.py and duckdb_report.py run end to end on the bundled emulator."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("sample", ["ray_devices.py", "polars_sales.py", "duckdb_report.py"])
def test_engine_sample(devstore_connection_string: str, sample: str) -> None:
    env = {**os.environ, "AZURE_STORAGE_CONNECTION_STRING": devstore_connection_string, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, str(ROOT / "samples" / sample), "--rows", "120", "--table", f"Sample{sample[:3]}"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all steps passed" in result.stdout
