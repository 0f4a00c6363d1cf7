#!/usr/bin/env bash
# Source this file: ensures a venv with tablesdk and its dev extras installed, and sets PY to its python.
#   VENV defaults to $TABLESDK_TEST_VENV or <repo>/.venv; PYTHON picks the base interpreter (python3).
# The install is redone only when setup.cfg/pyproject.toml change.
ROOT="${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
VENV="${TABLESDK_TEST_VENV:-$ROOT/.venv}"
BASE_PYTHON="${PYTHON:-python3}"
if [[ ! -x "$VENV/bin/python" ]]; then
    command -v "$BASE_PYTHON" >/dev/null || { echo "venv.sh: $BASE_PYTHON not found (set PYTHON=/path/to/python3.10+)" >&2; exit 1; }
    "$BASE_PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
        || { echo "venv.sh: $("$BASE_PYTHON" -V 2>&1) is too old; tablesdk needs Python >= 3.10" >&2; exit 1; }
    echo "venv.sh: creating venv $VENV" >&2
    "$BASE_PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
_stamp_file="$VENV/.tablesdk-dev-install"
_stamp="$(cat "$ROOT/setup.cfg" "$ROOT/pyproject.toml" 2>/dev/null | "$PY" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())') $ROOT"
if [[ "$(cat "$_stamp_file" 2>/dev/null)" != "$_stamp" ]] \
        || ! "$PY" -I -c 'import sys, importlib.metadata as m; sys.exit(m.version("tablesdk") is None)' 2>/dev/null; then
    echo "venv.sh: installing tablesdk with dev extras into $VENV" >&2
    (cd "$ROOT" && "$PY" -m pip install --disable-pip-version-check -q -e '.[dev]')
    echo "$_stamp" >"$_stamp_file"
fi
