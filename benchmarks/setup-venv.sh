#!/usr/bin/env bash
# Creates the benchmark venv (default <repo>/.bench-venv): tablesdk (editable) plus azure-data-tables 12.7.0,
# the baseline the benchmarks compare against. azure-data-tables is never a dependency of tablesdk itself.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${BENCH_VENV:-$ROOT/.bench-venv}"
[[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --disable-pip-version-check -q -e "$ROOT" "azure-data-tables==12.7.0"
echo "$VENV/bin/python"
