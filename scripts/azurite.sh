#!/usr/bin/env bash
# Manage a local Azurite (Table service only) for tests and samples.
#
#   scripts/azurite.sh install   npm-install azurite@$AZURITE_VERSION into $AZURITE_DIR (no-op if present)
#   scripts/azurite.sh start     start it on 127.0.0.1:$AZURITE_TABLE_PORT, in memory, and wait until it answers
#   scripts/azurite.sh wait      wait until the recorded server answers HTTP (fails at once if it died)
#   scripts/azurite.sh status    print state; exit 0 if running, 3 if not
#   scripts/azurite.sh stop      stop the recorded server (SIGTERM, SIGKILL after 5 s); no-op if not running
#
# Environment (defaults in brackets):
#   AZURITE_DIR            [<repo>/.azurite]  where node_modules/ goes (gitignored)
#   AZURITE_VERSION        [3.37.0]           npm version to install
#   AZURITE_TABLE_PORT     [10102]            table port; one server per port
#   AZURITE_RUN            [$AZURITE_DIR/run] pid and log files: table-<port>.pid / table-<port>.log
#   AZURITE_START_TIMEOUT  [30]               seconds to wait for the server to answer
#   AZURITE_EXTRA_ARGS     []                 extra flags for main.js (word-split)
#   AZURITE_KEEP_LOG       [0]                1: keep the log after a clean stop
#
# The server is only ever bound to 127.0.0.1. stop never kills by name: it signals the PID
# in the pid file, and only if /proc/PID/cmdline still names azurite's table main.js.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AZURITE_DIR="${AZURITE_DIR:-$ROOT/.azurite}"
AZURITE_VERSION="${AZURITE_VERSION:-3.37.0}"
AZURITE_TABLE_PORT="${AZURITE_TABLE_PORT:-10102}"
AZURITE_RUN="${AZURITE_RUN:-$AZURITE_DIR/run}"
AZURITE_START_TIMEOUT="${AZURITE_START_TIMEOUT:-30}"
AZURITE_EXTRA_ARGS="${AZURITE_EXTRA_ARGS:-}"

HOST=127.0.0.1
PORT="$AZURITE_TABLE_PORT"
MAIN_REL="node_modules/azurite/dist/src/table/main.js"
MAIN_JS="$AZURITE_DIR/$MAIN_REL"
PID_FILE="$AZURITE_RUN/table-$PORT.pid"
LOG_FILE="$AZURITE_RUN/table-$PORT.log"

say() { echo "azurite.sh: $*"; }
die() { echo "azurite.sh: ERROR: $*" >&2; exit 1; }

case "$PORT" in
    ''|*[!0-9]*) die "AZURITE_TABLE_PORT must be a number, got '$PORT'" ;;
esac

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

installed_version() {
    local pj="$AZURITE_DIR/node_modules/azurite/package.json"
    [[ -f "$pj" && -f "$MAIN_JS" ]] || return 1
    node -e 'process.stdout.write(require(process.argv[1]).version)' "$pj" 2>/dev/null
}

port_open() {  # true if something accepts TCP connections on HOST:PORT
    (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null
}

http_answers() {  # true if the port answers an HTTP request with any status line
    local line=""
    { exec 3<>"/dev/tcp/$HOST/$PORT"; } 2>/dev/null || return 1
    printf 'GET / HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n\r\n' "$HOST" "$PORT" >&3 2>/dev/null || { exec 3<&-; return 1; }
    IFS= read -r -t 5 line <&3 || true
    exec 3<&-
    [[ "$line" == HTTP/* ]]
}

recorded_pid() {  # prints the PID from the pid file if that process is our azurite table server
    [[ -f "$PID_FILE" ]] || return 1
    local pid
    pid="$(tr -dc '0-9' <"$PID_FILE")"
    [[ -n "$pid" ]] || return 1
    is_our_azurite "$pid" || return 1
    echo "$pid"
}

is_our_azurite() {
    local pid="$1" cmdline
    [[ -r "/proc/$pid/cmdline" ]] || return 1
    cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
    [[ "$cmdline" == *"azurite/dist/src/table/main.js"* ]]
}

show_log() {
    if [[ -s "$LOG_FILE" ]]; then
        echo "----- $LOG_FILE -----" >&2
        tail -n 50 "$LOG_FILE" >&2
        echo "----- end of log -----" >&2
    else
        echo "(log $LOG_FILE is empty)" >&2
    fi
}

cmd_install() {
    command -v node >/dev/null || die "node is not installed (need Node.js >= 20 and npm)"
    command -v npm >/dev/null || die "npm is not installed"
    mkdir -p "$AZURITE_DIR"
    # Serialise concurrent installs into the same directory (several test sessions at once).
    exec 9>"$AZURITE_DIR/.install.lock"
    if command -v flock >/dev/null; then
        flock -w 600 9 || die "timed out waiting for another install into $AZURITE_DIR"
    fi
    local have=""
    have="$(installed_version || true)"
    if [[ "$have" == "$AZURITE_VERSION" ]]; then
        say "azurite@$have already installed in $AZURITE_DIR"
        return 0
    fi
    [[ -n "$have" ]] && say "replacing azurite@$have with $AZURITE_VERSION"
    if [[ ! -f "$AZURITE_DIR/package.json" ]]; then
        printf '{\n  "name": "tablesdk-azurite",\n  "private": true\n}\n' >"$AZURITE_DIR/package.json"
    fi
    say "installing azurite@$AZURITE_VERSION into $AZURITE_DIR (about 360 MB; 30 to 60 s measured, longer on a slow network) ..."
    local t0
    t0="$(now)"
    # No progress spinner and no "new npm version" notice: they would land in the test output.
    if ! (cd "$AZURITE_DIR" && NO_UPDATE_NOTIFIER=1 npm install --no-audit --no-fund --no-progress \
            --no-update-notifier --save-exact --loglevel=error "azurite@$AZURITE_VERSION" </dev/null); then
        die "npm install azurite@$AZURITE_VERSION failed"
    fi
    have="$(installed_version || true)"
    [[ "$have" == "$AZURITE_VERSION" ]] || die "after npm install, found azurite version '${have:-none}' (wanted $AZURITE_VERSION; $MAIN_JS missing?)"
    say "installed azurite@$have in $(elapsed "$t0") s"
}

cmd_wait() {
    local pid t0
    pid="$(recorded_pid)" || { show_log; die "no azurite table server recorded for port $PORT (is it started?)"; }
    t0="$(now)"
    local deadline=$((SECONDS + AZURITE_START_TIMEOUT))
    while true; do
        if ! kill -0 "$pid" 2>/dev/null || ! is_our_azurite "$pid"; then
            show_log
            rm -f "$PID_FILE"
            die "azurite (pid $pid) exited during startup"
        fi
        if port_open && http_answers; then
            say "ready on http://$HOST:$PORT/devstoreaccount1 (pid $pid, waited $(elapsed "$t0") s)"
            return 0
        fi
        if (( SECONDS >= deadline )); then
            show_log
            return 2
        fi
        sleep 0.1
    done
}

cmd_start() {
    local pid
    if pid="$(recorded_pid)"; then
        say "already running on port $PORT (pid $pid)"
        cmd_wait
        return
    fi
    rm -f "$PID_FILE"
    [[ -f "$MAIN_JS" ]] || die "azurite is not installed in $AZURITE_DIR (run: $0 install)"
    command -v node >/dev/null || die "node is not installed"
    if port_open; then
        die "port $HOST:$PORT is already in use by something else; refusing to start"
    fi
    mkdir -p "$AZURITE_RUN"
    : >"$LOG_FILE"
    local t0
    t0="$(now)"
    # shellcheck disable=SC2086  # AZURITE_EXTRA_ARGS is word-split on purpose
    (cd "$AZURITE_RUN" && exec nohup node "$MAIN_JS" --tableHost "$HOST" --tablePort "$PORT" \
        --inMemoryPersistence --disableTelemetry --silent $AZURITE_EXTRA_ARGS \
        </dev/null >>"$LOG_FILE" 2>&1) &
    pid=$!
    echo "$pid" >"$PID_FILE"
    say "started azurite table service pid $pid on $HOST:$PORT (log: $LOG_FILE)"
    # $! is the background subshell: until it has exec'd node (slow on a loaded machine) its
    # command line is this script's, and cmd_wait would not recognise it as azurite.
    local deadline=$((SECONDS + AZURITE_START_TIMEOUT))
    while kill -0 "$pid" 2>/dev/null && ! is_our_azurite "$pid" && (( SECONDS < deadline )); do
        sleep 0.05
    done
    local rc=0
    cmd_wait || rc=$?
    if (( rc != 0 )); then
        cmd_stop >/dev/null 2>&1 || true
        if (( rc == 2 )); then
            die "azurite did not answer on $HOST:$PORT within ${AZURITE_START_TIMEOUT} s; stopped it"
        fi
        exit "$rc"
    fi
    say "start took $(elapsed "$t0") s"
}

cmd_stop() {
    if [[ ! -f "$PID_FILE" ]]; then
        say "not running on port $PORT (no pid file)"
        return 0
    fi
    local pid
    pid="$(tr -dc '0-9' <"$PID_FILE")"
    if [[ -z "$pid" ]] || ! kill -0 "$pid" 2>/dev/null; then
        say "not running on port $PORT (stale pid file for pid ${pid:-?} removed)"
        rm -f "$PID_FILE"
        return 0
    fi
    if ! is_our_azurite "$pid"; then
        say "pid $pid is no longer azurite's table server; not touching it (stale pid file removed)"
        rm -f "$PID_FILE"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    local i
    for ((i = 0; i < 50; i++)); do
        is_our_azurite "$pid" || break
        sleep 0.1
    done
    if is_our_azurite "$pid"; then
        say "pid $pid ignored SIGTERM for 5 s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do
            is_our_azurite "$pid" || break
            sleep 0.1
        done
        is_our_azurite "$pid" && die "could not stop pid $pid"
    fi
    rm -f "$PID_FILE"
    # A clean stop leaves nothing behind (with --silent the log is only the startup banner);
    # logs of servers that failed to start or died on their own are kept.
    [[ "${AZURITE_KEEP_LOG:-0}" == 1 ]] || rm -f "$LOG_FILE"
    say "stopped azurite on port $PORT (pid $pid)"
}

cmd_status() {
    local pid
    if pid="$(recorded_pid)"; then
        if port_open; then
            say "running: pid $pid, http://$HOST:$PORT/devstoreaccount1"
        else
            say "process pid $pid is alive but port $PORT is not accepting connections"
        fi
        return 0
    fi
    if port_open; then
        say "not running here (no recorded server), but port $HOST:$PORT is in use by something else"
    else
        say "not running on port $PORT"
    fi
    return 3
}

case "${1:-}" in
    install) cmd_install ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    wait) cmd_wait || die "azurite did not answer on $HOST:$PORT within ${AZURITE_START_TIMEOUT} s" ;;
    *)
        echo "usage: $0 install|start|stop|status|wait   (see the header of this script for the environment)" >&2
        exit 64
        ;;
esac
