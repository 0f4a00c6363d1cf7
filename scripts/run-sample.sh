#!/usr/bin/env bash
# Run the main job, the MicroBlogging sample:  bash scripts/run-sample.sh [--azurite] [sample args...]
#
# By default the sample runs against the bundled emulator (tablesdk.devstore), which it starts
# in-process: nothing but Python is needed. With --azurite it installs Azurite if needed, starts
# it on 127.0.0.1:$AZURITE_TABLE_PORT (default 10102), runs the sample with
# AZURE_STORAGE_CONNECTION_STRING pointing at it, then stops Azurite (only if this script started
# it: an Azurite already started by scripts/azurite.sh on that port is reused and left running).
# Sample arguments: --format json|atom (Atom works against the bundled emulator only: with --azurite
# it is refused with a one-line explanation).
#
# Python: the venv scripts/venv.sh prepares (<repo>/.venv, created on first use; only the package and its
# runtime dependencies are installed for a sample). Set TABLESDK_SAMPLE=path/to/other_sample.py to run another one.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
AZURITE_SH="$ROOT/scripts/azurite.sh"
SAMPLE="${TABLESDK_SAMPLE:-samples/microblog.py}"
export AZURITE_TABLE_PORT="${AZURITE_TABLE_PORT:-10102}"

say() { echo "run-sample.sh: $*" >&2; }
die() { echo "run-sample.sh: ERROR: $*" >&2; exit 1; }

[[ -f "$SAMPLE" ]] || die "$SAMPLE does not exist (yet)"

# A sample needs the package and its runtime dependencies only, not the test tools.
TABLESDK_VENV_EXTRAS="" source "$ROOT/scripts/venv.sh" >&2

if [[ "${1:-}" != "--azurite" ]]; then
    unset AZURE_STORAGE_CONNECTION_STRING
    say "running $PY $SAMPLE $* against the bundled emulator"
    exec "$PY" "$SAMPLE" "$@"
fi
shift

# Azurite answers every AtomPub request with 415: say so instead of letting the sample fail.
prev=""
for arg in "$@"; do
    if [[ "$arg" == "--format=atom" || ( "$prev" == "--format" && "$arg" == "atom" ) ]]; then
        die "Azurite does not support AtomPub (it answers 415 to Atom requests): run --format atom without --azurite (the bundled emulator speaks both formats), or use JSON with Azurite"
    fi
    prev="$arg"
done

STARTED=0
cleanup() {
    local rc=$?
    if (( STARTED )); then
        bash "$AZURITE_SH" stop >&2 || rc=1
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bash "$AZURITE_SH" install >&2
if bash "$AZURITE_SH" status >/dev/null 2>&1; then
    say "reusing the Azurite already running on port $AZURITE_TABLE_PORT (left running afterwards)"
else
    STARTED=1
    bash "$AZURITE_SH" start >&2 || { STARTED=0; die "could not start Azurite on port $AZURITE_TABLE_PORT"; }
fi

export AZURE_STORAGE_CONNECTION_STRING="DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;TableEndpoint=http://127.0.0.1:$AZURITE_TABLE_PORT/devstoreaccount1;"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

say "running $PY $SAMPLE $* against http://127.0.0.1:$AZURITE_TABLE_PORT/devstoreaccount1"
rc=0
"$PY" "$SAMPLE" "$@" || rc=$?
(( rc == 0 )) || say "sample exited $rc"
exit "$rc"
