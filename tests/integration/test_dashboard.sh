#!/usr/bin/env bash
# The web dashboard in a real browser (issue 14; docs/DASHBOARD.md): Debian's chromium driven by
# playwright-core (npm, installed by `make deps`) through every tests/browser/*.test.mjs module
# (tests/browser/run.mjs says what each gets and what fails a run), against a daemon with --auth off
# (make run's default) and one with tokens. Every request the pages make is checked against the
# OpenAPI document by run.mjs (operation, query parameters, status) and by finish below (each answer
# against its schema, as for req). Screenshots go to $T/screenshots (to $DASHBOARD_ARTEFACTS when
# set, which is kept) and, with UPDATE_SCREENSHOTS=1, to docs/img/. BROWSER_ONLY=silos,shell runs
# only the modules named.
#
# Only the default build (build/) runs it: the page does not change with the compiler or a
# sanitizer, and CI's budget is better spent elsewhere.
. "$(dirname "$0")/lib.sh"
cd "$LIB_DIR/../.." || exit 1

if [ "${BUILD:-build}" != build ]; then
    echo "  skipped: the browser tests run only in the default build (BUILD=build, here ${BUILD})"
    exit 0
fi
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
for need in "$CHROMIUM" node_modules/playwright-core/package.json; do
    if [ ! -e "$need" ]; then
        echo "  FAIL: $need is missing: run make deps"
        exit 1
    fi
done
command -v node >/dev/null || { echo "  FAIL: node is missing: run make deps"; exit 1; }

# Two daemons: lib.sh tracks one (DAEMON_PID), so the first one's PID is kept here and killed on exit.
start_daemon --auth on --db "$T/db-on" || exit 1
URL_ON=$URL PID_ON=$DAEMON_PID TOKEN_FILE_ON=$ADMIN_TOKEN_FILE
trap 'kill -KILL "$PID_ON" 2>/dev/null; cleanup' EXIT
start_daemon --auth off --db "$T/db-off" || exit 1

SHOTS=${DASHBOARD_ARTEFACTS:-$T/screenshots}
mkdir -p "$SHOTS" "$T/openapi"
check "browser tests (--auth off and on)" env CHROMIUM="$CHROMIUM" timeout 120 node tests/browser/run.mjs \
    --base "$URL" --base-on "$URL_ON" --admin-token-file "$TOKEN_FILE_ON" --out "$SHOTS" \
    --calls "$T/openapi/calls" ${BROWSER_ONLY:+--only "$BROWSER_ONLY"}
check "dpsilod (--auth off) stops cleanly" stop_daemon
DAEMON_PID=$PID_ON
check "dpsilod (--auth on) stops cleanly" stop_daemon
finish
