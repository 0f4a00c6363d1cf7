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
# TABLESDK_VENV_EXTRAS picks the extras to install: "dev" (the default: tests, mypy, ruff) or ""
# (the package and its runtime dependencies only, what running a sample needs). A venv set up
# with the dev extras also serves a run that asks for none.
_extras="${TABLESDK_VENV_EXTRAS-dev}"
_stamp_file="$VENV/.tablesdk-dev-install"
_hash="$(cat "$ROOT/setup.cfg" "$ROOT/pyproject.toml" 2>/dev/null | "$PY" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())') $ROOT"
_have="$(cat "$_stamp_file" 2>/dev/null || true)"
if [[ "$_have" != "$_hash [$_extras]" && ( -n "$_extras" || "$_have" != "$_hash ["*"]" ) ]] \
        || ! "$PY" -I -c 'import sys, importlib.metadata as m; sys.exit(m.version("tablesdk") is None)' 2>/dev/null; then
    echo "venv.sh: installing tablesdk${_extras:+ with $_extras extras} into $VENV" >&2
    (cd "$ROOT" && "$PY" -m pip install --disable-pip-version-check -q -e ".${_extras:+[$_extras]}")
    # azure-cosmosdb-table (the deprecated client, for interop tests) ships its own top-level
    # `tests`, `samples` and `doc` packages, which would shadow this repository's `tests`: remove them.
    "$PY" - <<'PYEOF'
import importlib.metadata as metadata, shutil
try:
    files = metadata.files("azure-cosmosdb-table") or []
except metadata.PackageNotFoundError:
    files = []
for top in sorted({f.parts[0] for f in files if f.parts[0] in ("tests", "samples", "doc")}):
    shutil.rmtree(metadata.distribution("azure-cosmosdb-table").locate_file(top), ignore_errors=True)
PYEOF
    echo "$_hash [$_extras]" >"$_stamp_file"
fi
