# lib.sh: helpers for the integration tests (sourced, not run; only test_*.sh files are run).
#
#   . "$(dirname "$0")/lib.sh"
#   start_daemon [extra dpsilod flags]   # port 0, database in a private temp dir; sets URL and DAEMON_PID
#   req METHOD PATH [BODY]                # curl; sets STATUS, BODY (response) and HEADERS (file);
#                                         # sends "Authorization: Bearer $AUTH" when AUTH is set
#   expect_status 404 GET /nope           # req + check the status
#   expect_json '.error.field' 'count'    # jq expression on the last response must print the value
#   check "description" COMMAND...        # runs COMMAND, records pass/fail
#   stop_daemon                           # SIGTERM, waits, returns the daemon's exit status
#   finish                                # prints the summary; exit status 1 if any check failed,
#                                         # the daemon's stderr holds a sanitizer report, or an
#                                         # answer req got does not fit openapi/openapi.json
#
# Every answer req gets is kept ($T/openapi/): finish checks them all against the OpenAPI document
# (tests/integration/openapi_check.py captured: the documented answer of that operation and status,
# and, when the answer is 2xx, the JSON body sent fits the request schema; paths that are not
# operations are skipped). OPENAPI_CHECK=0 turns that off.
#
# The daemon is always killed (by PID) when the script exits, whatever happens: see the EXIT trap.
set -u
DPSILOD=${DPSILOD:-build/dpsilod}
LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/dpsilo-it-XXXXXX")
DAEMON_PID=""
URL=""
FAILS=0
PASSES=0

cleanup() {
    if [ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then
        kill -KILL "$DAEMON_PID" 2>/dev/null
        wait "$DAEMON_PID" 2>/dev/null
    fi
    rm -rf "$T"
}
trap cleanup EXIT

fail() {
    echo "  FAIL: $*"
    FAILS=$((FAILS + 1))
}
pass() {
    echo "  ok:   $*"
    PASSES=$((PASSES + 1))
}
check() {
    local desc=$1
    shift
    if "$@"; then pass "$desc"; else fail "$desc"; fi
}

# start_daemon [flags...]: DB defaults to $T/db unless --db is among the flags.
start_daemon() {
    local dbflag=(--db "$T/db")
    [ -n "${DPSILO_DB:-}" ] && dbflag=()
    for a in "$@"; do case "$a" in --db | --db=*) dbflag=() ;; esac; done
    : >"$T/out"
    local db="${DPSILO_DB:-$T/db}" prev=""
    for a in "$@"; do
        case "$a" in --db=*) db=${a#--db=} ;; esac
        [ "$prev" = --db ] && db=$a
        prev=$a
    done
    case "$db" in */*) ADMIN_TOKEN_FILE="${db%/*}/admin.token" ;; *) ADMIN_TOKEN_FILE="admin.token" ;; esac
    "$DPSILOD" --listen 127.0.0.1:0 "${dbflag[@]}" "$@" >"$T/out" 2>>"$T/err" &
    DAEMON_PID=$!
    for _ in $(seq 1 200); do
        URL=$(sed -n 's/^dpsilod listening on //p' "$T/out")
        if [ -n "$URL" ]; then return 0; fi
        if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
            echo "dpsilod exited during start-up:"; cat "$T/err"; DAEMON_PID=""; return 1
        fi
        sleep 0.05
    done
    echo "dpsilod did not print its URL in 10 s"
    return 1
}

stop_daemon() {
    local rc=0
    kill -TERM "$DAEMON_PID"
    wait "$DAEMON_PID" || rc=$?
    DAEMON_PID=""
    return $rc
}

# req METHOD PATH [BODY [CONTENT-TYPE]]
req() {
    local method=$1 path=$2
    local args=(-s -S --path-as-is -X "$method" -D "$T/headers" -o "$T/body" -w '%{http_code}')
    if [ $# -ge 3 ]; then args+=(-H "Content-Type: ${4:-application/json}" --data-binary "$3"); fi
    # AUTH set (even to ""): that token, or none. AUTH unset: the admin token of an auth-on daemon
    # started by start_daemon (its file beside the database), so that tests about something other
    # than access need no token plumbing; only the calculators, /healthz, /v1/version and
    # /v1/openapi.json are open.
    if [ -n "${AUTH+x}" ]; then
        if [ -n "$AUTH" ]; then args+=(-H "Authorization: Bearer $AUTH"); fi
    elif [ -n "${ADMIN_TOKEN_FILE:-}" ] && [ -s "$ADMIN_TOKEN_FILE" ]; then
        args+=(-H "Authorization: Bearer $(head -1 "$ADMIN_TOKEN_FILE")")
    fi
    [ "$method" = HEAD ] && args=(-s -S --path-as-is -I -D "$T/headers" -o "$T/body" -w '%{http_code}')
    STATUS=$(curl "${args[@]}" "$URL$path") || STATUS="curl-failed"
    BODY=$(cat "$T/body")
    HEADERS="$T/headers"
    if [ "${OPENAPI_CHECK:-1}" != 0 ]; then # files of its own: req also runs in subshells
        local kept sent=- ctype=-
        mkdir -p "$T/openapi" && kept=$(mktemp "$T/openapi/answer.XXXXXX") && cp "$T/body" "$kept" ||
            return 0
        if [ $# -ge 3 ]; then
            sent=$(mktemp "$T/openapi/sent.XXXXXX") && printf '%s' "$3" >"$sent"
            ctype=${4:-application/json}
        fi
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$method" "$path" "$STATUS" "$kept" "$sent" "$ctype" \
            >>"$T/openapi/calls"
    fi
}

expect_status() {
    local want=$1
    shift
    req "$@"
    if [ "$STATUS" = "$want" ]; then pass "$1 $2 -> $want"; else fail "$1 $2 -> $STATUS, want $want: $BODY"; fi
}

expect_json() {
    local got
    got=$(printf '%s' "$BODY" | jq -r "$1" 2>/dev/null) || got="(not JSON: $BODY)"
    if [ "$got" = "$2" ]; then pass "$1 = $2"; else fail "$1 = '$got', want '$2'"; fi
}

header() { # header NAME: value of a response header of the last request (case-insensitive)
    grep -i "^$1:" "$HEADERS" | head -1 | sed -e 's/^[^:]*:[[:space:]]*//' -e 's/\r$//'
}

finish() {
    # A sanitizer build (make asan / tsan) reports into the daemon's stderr; a report fails the test
    # even when every request was answered (TSan, for one, only changes the exit status by default).
    # TSan's "thread leak" is left to the exit status: a forced stop (second signal, drain timeout)
    # ends with _exit() on purpose, without joining the workers, and TSan reports them as leaked.
    # (LeakSanitizer's report starts "==PID==ERROR: LeakSanitizer", the others at the line start)
    local re='^(==[0-9]+==)?(WARNING|ERROR): (ThreadSanitizer|AddressSanitizer|LeakSanitizer)|runtime error:'
    if [ -s "$T/err" ] && grep -E "$re" "$T/err" | grep -qv 'ThreadSanitizer: thread leak'; then
        fail "sanitizer report in the daemon's stderr:"
        grep -E -A30 "$re" "$T/err" | head -60
    fi
    if [ -s "$T/openapi/calls" ]; then
        if python3 "$LIB_DIR/openapi_check.py" captured "$LIB_DIR/../../openapi/openapi.json" \
            "$T/openapi/calls" >"$T/openapi/report"; then
            pass "$(tail -1 "$T/openapi/report" | sed 's/^ *//')"
        else
            fail "answers that do not fit openapi/openapi.json:"
            head -20 "$T/openapi/report"
        fi
    fi
    echo "  $PASSES passed, $FAILS failed"
    [ "$FAILS" -eq 0 ]
}
