#!/usr/bin/env bash
# Hostile HTTP (issue 10; reliability report probe 3), short form: every probe of hostile_http.py once
# against a daemon with --auth off, then the daemon must still be alive, answer /healthz and stop
# cleanly, with no sanitizer report. `make soak` runs the long form (HOSTILE_SECONDS, several workers,
# open files and memory watched).
. "$(dirname "$0")/lib.sh"

start_daemon --auth off --threads 2 || exit 1
PORT=${URL##*:}
SECS=${HOSTILE_SECONDS:-0}
WORKERS=1
[ "$SECS" != 0 ] && WORKERS=4
python3 "$(dirname "$0")/hostile_http.py" --port "$PORT" --pid "$DAEMON_PID" --seconds "$SECS" --workers "$WORKERS" >"$T/hostile.out" 2>&1
rc=$?
cat "$T/hostile.out"
check "every hostile probe answered as allowed" test "$rc" -eq 0
check "daemon alive after the probes" kill -0 "$DAEMON_PID"
expect_status 200 GET /healthz
check "no sanitizer report in the log" bash -c "! grep -q 'ERROR: AddressSanitizer\|runtime error:\|WARNING: ThreadSanitizer' '$T/err'"
check "SIGTERM exits 0" stop_daemon
finish
