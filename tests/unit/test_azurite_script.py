"""scripts/azurite.sh start, with a stand-in for Azurite's table server (a few lines of node)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from loopback import unused_port

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "azurite.sh"

# Answers every HTTP request with 200, on the port given after --tablePort, as Azurite's main.js would.
FAKE_MAIN = """
const port = Number(process.argv[process.argv.indexOf("--tablePort") + 1]);
require("http").createServer((req, res) => res.end("ok")).listen(port, "127.0.0.1");
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_start_waits_for_the_server_process_to_become_azurite(tmp_path: Path) -> None:
    # On a loaded machine the background subshell can still be bash (between fork and
    # exec of node) when start first looks at the recorded pid: an exported `cd` that
    # sleeps widens that window to a certainty.
    main_js = tmp_path / "node_modules" / "azurite" / "dist" / "src" / "table" / "main.js"
    main_js.parent.mkdir(parents=True)
    main_js.write_text(FAKE_MAIN)
    port = str(unused_port())
    env = {**os.environ, "AZURITE_DIR": str(tmp_path), "AZURITE_TABLE_PORT": port,
           "AZURITE_START_TIMEOUT": "20", "BASH_FUNC_cd%%": "() { sleep 1; builtin cd \"$@\"; }"}
    try:
        started = subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True,
                                 timeout=60, check=False)
        assert started.returncode == 0, started.stdout + started.stderr
        assert "ready on http://127.0.0.1:" + port in started.stdout
    finally:
        stopped = subprocess.run(["bash", str(SCRIPT), "stop"], env=env, capture_output=True, text=True,
                                 timeout=60, check=False)
    assert stopped.returncode == 0 and "stopped azurite" in stopped.stdout, stopped.stdout + stopped.stderr
