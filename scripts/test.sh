#!/usr/bin/env bash
# The project's test command (works from a clean clone):  bash scripts/test.sh [pytest args...]
#
#  1. creates/reuses a venv ($TABLESDK_TEST_VENV, default <repo>/.venv) and installs the
#     package with its dev extras (`pip install -e '.[dev]'`, redone when setup.cfg/pyproject change);
#  1b. headless Chromium for the explorer's browser tests (tests/devstore/test_explorer_browser.py): when none
#     is found and CI=true, installs Debian's `chromium` package with apt-get (as root, or through sudo); elsewhere
#     it only says so, and those tests skip (with CI=true they fail instead of skipping);
#  2. unless $TABLESDK_AZURITE_URL is set: installs Azurite (scripts/azurite.sh install) and starts
#     it on a free loopback port (or $AZURITE_TABLE_PORT), stopping it on exit;
#  3. runs mypy (strict config in setup.cfg) on the package, and mypy --strict on samples/, benchmarks/ and
#     every Python block of README.md and docs/: errors fail the run (TABLESDK_MYPY_STRICT=0 to only print them),
#     and ruff's pyflakes checks (unused imports, undefined names), which always fail the run;
#  4. runs `python -m pytest` over the whole suite with the CI guard on
#     (TABLESDK_REQUIRE_INTEGRATION=1 unless set otherwise): a skipped integration test, or none run,
#     fails the run. pytest exit code 5 (no tests collected) is a failure too.
#
# Exit status: non-zero on any failure. Extra arguments go to pytest.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

AZURITE_SH="$ROOT/scripts/azurite.sh"

say() { echo "test.sh: $*"; }
die() { echo "test.sh: ERROR: $*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

STARTED_AZURITE=0
cleanup() {
    local rc=$?
    if (( STARTED_AZURITE )); then
        bash "$AZURITE_SH" stop || rc=1
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --------------------------------------------------------------------- 1. venv + package
t0="$(now)"
source "$ROOT/scripts/venv.sh"
say "venv ready in $(elapsed "$t0") s ($("$PY" -V))"

# --------------------------------------------------------------------- 1b. Chromium
find_chromium() { "$PY" -c 'import sys; sys.path.insert(0, "tests"); from chromium import find_chromium; print(find_chromium() or "")'; }
chromium_path="$(find_chromium)"
if [[ -z "$chromium_path" ]]; then
    if [[ "${CI:-}" == true ]]; then
        t0="$(now)"
        as_root=()
        (( EUID == 0 )) || as_root=(sudo)
        "${as_root[@]}" apt-get update -qq >/dev/null || die "apt-get update failed (Chromium is needed for the browser tests)"
        DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq chromium >/dev/null \
            || die "apt-get install chromium failed (the browser tests need it)"
        chromium_path="$(find_chromium)"
        [[ -n "$chromium_path" ]] || die "chromium installed but not found on PATH"
        say "installed Chromium in $(elapsed "$t0") s"
    else
        say "no Chromium found (apt-get install chromium, or set TABLESDK_CHROMIUM): the explorer's browser tests will skip"
    fi
fi
if [[ -n "$chromium_path" ]]; then
    say "browser tests use $chromium_path"
fi

# --------------------------------------------------------------------- 2. Azurite
if [[ -n "${TABLESDK_AZURITE_URL:-}" ]]; then
    say "using the Table service at TABLESDK_AZURITE_URL=$TABLESDK_AZURITE_URL"
else
    t0="$(now)"
    bash "$AZURITE_SH" install
    say "azurite install step took $(elapsed "$t0") s"
    port_given="${AZURITE_TABLE_PORT:-}"
    for attempt in 1 2 3; do
        if [[ -n "$port_given" ]]; then
            port="$port_given"
        else  # a free port, so parallel runs on one machine don't collide
            port="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
        fi
        export AZURITE_TABLE_PORT="$port"
        t0="$(now)"
        STARTED_AZURITE=1
        rc=0
        start_out="$(bash "$AZURITE_SH" start 2>&1)" || rc=$?
        echo "$start_out"
        if (( rc == 0 )); then
            break
        fi
        STARTED_AZURITE=0
        if [[ -n "$port_given" || "$start_out" != *"already in use"* || $attempt == 3 ]]; then
            die "could not start Azurite (scripts/azurite.sh start exited $rc)"
        fi
    done
    say "azurite start took $(elapsed "$t0") s"
    export TABLESDK_AZURITE_URL="http://127.0.0.1:$AZURITE_TABLE_PORT/devstoreaccount1"
fi

# --------------------------------------------------------------------- 3. mypy
t0="$(now)"
mypy_rc=0
"$PY" -m mypy || mypy_rc=$?
# What users write: the samples, the benchmarks and every Python block of README.md and docs/
# (one module per document, errors reported at the document's lines), all under --strict.
# benchmarks import the fault proxy from tests/ (benchmarks/latency_proxy.py puts it on sys.path).
MYPYPATH=tests "$PY" -m mypy --strict samples benchmarks || mypy_rc=$?
"$PY" -m tests.doc_examples || mypy_rc=$?
if (( mypy_rc != 0 )); then
    if [[ "${TABLESDK_MYPY_STRICT:-1}" == 1 ]]; then
        say "mypy FAILED (exit $mypy_rc) and TABLESDK_MYPY_STRICT=1: this fails the run"
    else
        say "mypy reported problems (exit $mypy_rc); not fatal because TABLESDK_MYPY_STRICT=0"
        mypy_rc=0
    fi
fi
say "mypy took $(elapsed "$t0") s"

# --------------------------------------------------------------------- 3b. pyflakes checks
lint_rc=0
"$PY" -m ruff check --select F --quiet tablesdk tests samples benchmarks conftest.py || lint_rc=$?
if (( lint_rc != 0 )); then
    say "ruff found unused imports or undefined names (exit $lint_rc): this fails the run"
fi

# --------------------------------------------------------------------- 4. pytest
export TABLESDK_REQUIRE_INTEGRATION="${TABLESDK_REQUIRE_INTEGRATION:-1}"
t0="$(now)"
pytest_rc=0
"$PY" -m pytest "$@" || pytest_rc=$?
say "pytest took $(elapsed "$t0") s (exit $pytest_rc)"
if (( pytest_rc == 5 )); then
    say "FAILED: pytest collected no tests (exit 5)"
fi
if (( pytest_rc != 0 || mypy_rc != 0 || lint_rc != 0 )); then
    say "FAILED (pytest exit $pytest_rc, mypy exit $mypy_rc, ruff exit $lint_rc)"
    exit 1
fi
say "OK"
