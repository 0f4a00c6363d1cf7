"""Shared pytest fixtures and the CI guard for tablesdk's test suite.

Fixtures
  azurite_endpoint           (session) table endpoint of a running Azurite, path-style,
                             e.g. "http://127.0.0.1:10102/devstoreaccount1". Uses
                             $TABLESDK_AZURITE_URL if set; otherwise installs (if needed) and
                             starts Azurite through scripts/azurite.sh on a free loopback port
                             and stops it at the end of the session. Fails (never skips) if
                             Azurite cannot be started or reached.
  azurite_connection_string  (session) connection string for that endpoint with the
                             well-known devstoreaccount1 key.
  unique_table_name          a fresh lower-case alphanumeric table name per test.

CI guard
  When $CI is true, $TABLESDK_REQUIRE_INTEGRATION=1 or --require-integration is given, a
  run in which no `integration` test was executed, or in which any `integration` test was
  skipped, ends with a non-zero exit status and a message saying why.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import uuid
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

import pytest

# Ray (tests/integration/test_ray.py) on one machine: its servers and node address stay on loopback
# only when it is told this is no cluster, which it reads when first imported, so it is said here,
# before any test module imports it.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

from loopback import unused_port

pytest_plugins = ["tablesdk.testing"]  # the devstore fixtures users get, used by our integration tests

REPO_ROOT = Path(__file__).resolve().parent.parent
AZURITE_SH = REPO_ROOT / "scripts" / "azurite.sh"

DEVSTORE_ACCOUNT = "devstoreaccount1"
DEVSTORE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

INTEGRATION_MARK = "integration"
_TRUE = {"1", "true", "yes", "on"}


# --------------------------------------------------------------------------- options


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tablesdk")
    group.addoption(
        "--require-integration",
        action="store_true",
        default=False,
        help="fail the run if no integration test ran or any was skipped "
        "(on by default when $CI is true or $TABLESDK_REQUIRE_INTEGRATION=1)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # Also registered in setup.cfg; repeated here so the guard works wherever this file is used.
    config.addinivalue_line(
        "markers", f"{INTEGRATION_MARK}: needs a running Table service (Azurite or the bundled emulator)"
    )
    if _guard_enabled(config):
        config.pluginmanager.register(_IntegrationGuard(), "tablesdk-ci-guard")


# --------------------------------------------------------------------------- Azurite


def _run_azurite_sh(command: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(AZURITE_SH), command],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )


def _check_reachable(url: str) -> str | None:
    """Return None if host:port of ``url`` accepts TCP connections, else the reason."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=5):
            return None
    except OSError as exc:
        return f"{host}:{port}: {exc}"


@pytest.fixture(scope="session")
def azurite_endpoint() -> Iterator[str]:
    """Table endpoint (path-style, account devstoreaccount1) of a running Azurite."""
    url = os.environ.get("TABLESDK_AZURITE_URL", "").strip()
    if url:
        url = url.rstrip("/")
        problem = _check_reachable(url)
        if problem is not None:
            pytest.fail(f"TABLESDK_AZURITE_URL={url} is not reachable ({problem})", pytrace=False)
        yield url
        return

    if not AZURITE_SH.is_file():
        pytest.fail(f"cannot start Azurite: {AZURITE_SH} is missing", pytrace=False)

    env = dict(os.environ)
    try:
        installed = _run_azurite_sh("install", env, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"cannot install Azurite: {exc}", pytrace=False)
    if installed.returncode != 0:
        pytest.fail(
            f"cannot install Azurite (scripts/azurite.sh install exited {installed.returncode}):\n"
            f"{installed.stdout}",
            pytrace=False,
        )

    port = 0
    for attempt in range(3):  # a free port can be taken between probing and binding it
        port = unused_port()
        env["AZURITE_TABLE_PORT"] = str(port)
        try:
            started = _run_azurite_sh("start", env, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            _run_azurite_sh("stop", env, timeout=60)
            pytest.fail(f"cannot start Azurite on port {port}: {exc}", pytrace=False)
        if started.returncode == 0:
            break
        if "already in use" not in started.stdout or attempt == 2:
            pytest.fail(
                f"cannot start Azurite (scripts/azurite.sh start exited {started.returncode}):\n"
                f"{started.stdout}",
                pytrace=False,
            )

    try:
        yield f"http://127.0.0.1:{port}/{DEVSTORE_ACCOUNT}"
    finally:
        stopped = _run_azurite_sh("stop", env, timeout=60)
        if stopped.returncode != 0:  # pragma: no cover - only if the process resists SIGKILL
            print(f"warning: stopping Azurite failed:\n{stopped.stdout}")


@pytest.fixture(scope="session")
def azurite_connection_string(azurite_endpoint: str) -> str:
    return (
        "DefaultEndpointsProtocol=http;"
        f"AccountName={DEVSTORE_ACCOUNT};"
        f"AccountKey={DEVSTORE_KEY};"
        f"TableEndpoint={azurite_endpoint};"
    )


@pytest.fixture
def unique_table_name(request: pytest.FixtureRequest) -> str:
    """A fresh table name: lower case (Azurite handles mixed-case table names only partly), starts with a letter, 3-63 chars."""
    hint = re.sub(r"[^a-z0-9]", "", request.node.name.lower())[:18]
    return f"t{hint}{uuid.uuid4().hex[:16]}"


# --------------------------------------------------------------------------- CI guard


def _guard_enabled(config: pytest.Config) -> bool:
    if config.getoption("--require-integration", default=False):
        return True
    if os.environ.get("TABLESDK_REQUIRE_INTEGRATION", "").strip().lower() in _TRUE:
        return True
    return os.environ.get("CI", "").strip().lower() in _TRUE


class _IntegrationGuard:
    """Plugin object: counts executed and skipped `integration` tests and fails the run if needed."""

    def __init__(self) -> None:
        self.selected: set[str] = set()
        self.executed: set[str] = set()
        self.skipped: dict[str, str] = {}
        self.message: str | None = None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # session.items is the selection after -m/-k deselection.
        self.selected = {
            item.nodeid for item in session.items if item.get_closest_marker(INTEGRATION_MARK) is not None
        }

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.nodeid not in self.selected:
            return
        if report.skipped:
            if report.when == "call" and hasattr(report, "wasxfail"):
                self.executed.add(report.nodeid)  # it ran, and failed as expected (xfail)
                return
            longrepr = report.longrepr
            reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
            self.skipped[report.nodeid] = reason.removeprefix("Skipped: ")
        elif report.when == "call":
            self.executed.add(report.nodeid)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        problems = []
        if not self.executed:
            problems.append(f"no integration test was executed ({len(self.selected)} selected)")
        if self.skipped:
            lines = "\n".join(f"  {nodeid}: {why}" for nodeid, why in sorted(self.skipped.items()))
            problems.append(f"{len(self.skipped)} integration test(s) skipped:\n{lines}")
        if not problems:
            return
        self.message = (
            "integration tests are required here (CI=true, TABLESDK_REQUIRE_INTEGRATION=1 or "
            "--require-integration), but " + "; ".join(problems)
        )
        if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.message is None:
            return
        terminalreporter.section("tablesdk CI guard", sep="=", red=True, bold=True)
        terminalreporter.write_line(f"FAILED: {self.message}", red=True, bold=True)
