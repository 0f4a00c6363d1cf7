#!/usr/bin/env bash
# CPU load for reproducing timing-dependent failures, as on a busy machine.
#
#   bash scripts/load.sh [N] -- COMMAND [ARGS...]   run COMMAND while N busy processes spin, then stop them;
#                                                   exits with COMMAND's status
#   bash scripts/load.sh [N]                        spin until interrupted (Ctrl-C / SIGTERM), then stop them
#
# N (default 4) pure-CPU spinners (`python3 -c 'while True: pass'`, or `yes` when there is no python3) are
# started and their PIDs printed. They are stopped by PID, by a trap on exit, interrupt and termination,
# so no spinner outlives this script. Example:
#   bash scripts/load.sh 4 -- bash scripts/test.sh tests/integration/test_fault_tolerance.py
set -euo pipefail

N=4
if [[ $# -gt 0 && "$1" != "--" ]]; then
    N="$1"
    shift
fi
if ! [[ "$N" =~ ^[0-9]+$ ]] || (( N < 1 )); then
    echo "load.sh: N must be a positive integer, got '$N'" >&2
    exit 2
fi
if [[ $# -gt 0 ]]; then
    if [[ "$1" != "--" ]]; then
        echo "usage: bash scripts/load.sh [N] [-- COMMAND [ARGS...]]" >&2
        exit 2
    fi
    shift
fi

SPINNERS=()
stop_spinners() {
    local pid
    # A spinner killed in the instant between its fork and its exec is still a copy of this
    # shell and may run this trap: only the script itself stops the spinners.
    [[ "$BASHPID" == "$$" ]] || exit 143
    for pid in "${SPINNERS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${SPINNERS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    if (( ${#SPINNERS[@]} )); then
        echo "load.sh: stopped ${#SPINNERS[@]} spinners" >&2
    fi
    SPINNERS=()
}
trap stop_spinners EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for ((i = 0; i < N; i++)); do
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'while True: pass' &
    else
        yes >/dev/null &
    fi
    SPINNERS+=("$!")
done
echo "load.sh: $N spinners running, PIDs ${SPINNERS[*]}" >&2

if [[ $# -eq 0 ]]; then
    echo "load.sh: spinning until interrupted" >&2
    while true; do
        sleep 3600 &
        wait $! || true  # wait returns at once on a trapped signal
    done
fi

rc=0
"$@" || rc=$?
exit "$rc"
