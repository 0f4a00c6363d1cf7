#!/usr/bin/env bash
# Build the sdist and the wheel, check them, and try the wheel where a user would: bash scripts/wheel-check.sh
#
#  1. builds both with `python -m build` (PEP 517, in build's isolated environment) into $TABLESDK_DIST
#     (default <repo>/dist; earlier tablesdk files there are removed first);
#  2. checks their metadata with `twine check --strict` (the README renders as the project description);
#  3. makes a fresh venv outside the checkout and installs the wheel there, without extras first:
#     `tablesdk --help` must fail with status 2 and the missing-extra hint, whose packages are then
#     installed as the hint says; then the wheel with its `cli` extra, as README.md says;
#  4. smoke test, run from an empty directory so nothing of the checkout is importable: import the
#     package (from the venv, with its py.typed and the bundled emulator), `tablesdk --help` and
#     `--version`, the explorer page and its files fetched from the bundled emulator (package data), and
#     the MicroBlogging sample (samples/microblog.py, as scripts/run-sample.sh runs it: against the
#     bundled emulator, started in-process).
#
# Python: the dev venv of scripts/venv.sh ($TABLESDK_TEST_VENV, default <repo>/.venv) runs build and
# twine (the dev extra has both); PYTHON picks the interpreter of the fresh venv (default python3).
# The fresh venv is removed on exit (TABLESDK_KEEP_WHEEL_VENV=1 keeps it). Exit status non-zero on
# any failure.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DIST="${TABLESDK_DIST:-$ROOT/dist}"

say() { echo "wheel-check.sh: $*"; }
die() { echo "wheel-check.sh: ERROR: $*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/tablesdk-wheel-check.XXXXXX")"
cleanup() {
    local rc=$?
    if [[ "${TABLESDK_KEEP_WHEEL_VENV:-0}" == 1 ]]; then
        say "kept $WORK"
    else
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --------------------------------------------------------------------- 1. build
t0="$(now)"
source "$ROOT/scripts/venv.sh"   # sets PY: the dev venv, which has build and twine
"$PY" -c 'import build, twine' 2>/dev/null || die "$PY lacks build or twine (the dev extra has both: pip install -e '.[dev]')"
mkdir -p "$DIST"
rm -f "$DIST"/tablesdk-*.whl "$DIST"/tablesdk-*.tar.gz
"$PY" -m build --sdist --wheel --outdir "$DIST" "$ROOT" >"$WORK/build.log" 2>&1 \
    || { tail -n 40 "$WORK/build.log" >&2; die "python -m build failed (log above)"; }
shopt -s nullglob
wheels=("$DIST"/tablesdk-*-py3-none-any.whl)
sdists=("$DIST"/tablesdk-*.tar.gz)
shopt -u nullglob
(( ${#wheels[@]} == 1 && ${#sdists[@]} == 1 )) || die "expected one wheel and one sdist in $DIST, found: $(ls "$DIST")"
WHEEL="${wheels[0]}"
say "built $(basename "$WHEEL") and $(basename "${sdists[0]}") in $(elapsed "$t0") s"

# The wheel holds the package and nothing else of the checkout.
"$PY" - "$WHEEL" <<'EOF' || die "the wheel's contents are wrong (above)"
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
wanted = {"tablesdk/py.typed", "tablesdk/cli/__init__.py", "tablesdk/devstore/__init__.py", "tablesdk/aio/__init__.py"}
wanted |= {f"tablesdk/devstore/explorer/{name}" for name in ("index.html", "app.js", "app.css", "icon.svg")}
problems = [f"top-level entries {sorted(tops)} (only tablesdk)"] if tops != {"tablesdk"} else []
problems += [f"{name} missing" for name in sorted(wanted - set(names))]
for problem in problems:
    print(f"wheel-check.sh: wheel: {problem}", file=sys.stderr)
sys.exit(1 if problems else 0)
EOF

# --------------------------------------------------------------------- 2. metadata
"$PY" -m twine check --strict "$WHEEL" "${sdists[0]}" || die "twine check failed"

# --------------------------------------------------------------------- 3. a fresh venv, as a user's
t0="$(now)"
BASE_PYTHON="${PYTHON:-python3}"
"$BASE_PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
pip_install() { "$VPY" -m pip install --disable-pip-version-check -q "$@"; }
mkdir "$WORK/empty"
cd "$WORK/empty"   # from here on, nothing of the checkout is on sys.path
unset PYTHONPATH AZURE_STORAGE_CONNECTION_STRING

pip_install "$WHEEL"
rc=0
hint="$("$WORK/venv/bin/tablesdk" --help 2>&1 >/dev/null)" || rc=$?
(( rc == 2 )) || die "without the cli extra, tablesdk --help exited $rc, not 2: $hint"
[[ "$hint" == *"pip install 'click>=8.1' 'rich>=13'"* && "$hint" == *"$(basename "$WHEEL")[cli]"* ]] \
    || die "the missing-extra hint does not say how to install the extra: $hint"
say "without the cli extra: exit 2 and the hint ($hint)"
pip_install "$WHEEL[cli]"   # what README.md says for a wheel
say "fresh venv with the wheel and its cli extra in $(elapsed "$t0") s"

# --------------------------------------------------------------------- 4. smoke test
"$VPY" - "$WORK/venv" <<'EOF' || die "import check failed"
import importlib.resources, sys
import tablesdk, tablesdk.cli, tablesdk.devstore  # tablesdk.testing needs pytest, tablesdk.aio the aio extra
venv = sys.argv[1]
assert tablesdk.__file__.startswith(venv), f"tablesdk imported from {tablesdk.__file__}, not the venv"
assert importlib.resources.files("tablesdk").joinpath("py.typed").is_file(), "py.typed is not installed"
print(f"wheel-check.sh: import tablesdk {tablesdk.__version__} from {tablesdk.__file__}")
EOF
"$VPY" - <<'EOF' || die "the explorer page is not served from the installed wheel"
import re, urllib.request
from tablesdk.devstore import DevStore
with DevStore(port=0) as store:
    for path in ("", "_explorer/app.js", "_explorer/app.css", "_explorer/icon.svg"):
        with urllib.request.urlopen(store.explorer_url + path, timeout=30) as answer:
            body = answer.read()
            assert answer.status == 200 and body, path
            assert "default-src 'self'" in answer.headers["Content-Security-Policy"], path
            if not path:
                assert re.search(rb'<meta name="tablesdk-explorer-token" content="[A-Za-z0-9_-]{40,}">', body)
    print(f"wheel-check.sh: the explorer page and its files are served from the wheel ({store.explorer_url})")
EOF
"$WORK/venv/bin/tablesdk" --help >/dev/null || die "tablesdk --help failed"
version="$("$WORK/venv/bin/tablesdk" --version)" || die "tablesdk --version failed"
say "tablesdk --help ok; $version"
t0="$(now)"
"$VPY" "$ROOT/samples/microblog.py" >"$WORK/sample.log" 2>&1 \
    || { tail -n 40 "$WORK/sample.log" >&2; die "the MicroBlogging sample failed with the installed wheel"; }
say "MicroBlogging sample against the bundled emulator: ok in $(elapsed "$t0") s ($(tail -n 1 "$WORK/sample.log"))"
say "OK"
