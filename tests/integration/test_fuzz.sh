#!/usr/bin/env bash
# Bounded robustness fuzz of every POST route (tests/integration/fuzz_driver.py): a few hundred
# mutated bodies per route from a fixed seed, on loopback with --auth off. The daemon must never crash
# or answer 5xx, every error must be the JSON of docs/API.md (a field named where one applies), and it must
# still shut down cleanly afterwards. Under the sanitizers (BUILD=build-asan / build-tsan, set by the
# Makefile) the time budget is larger (and fewer cases are sent under TSan), so the run stays
# bounded.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

PER_ROUTE=${FUZZ_PER_ROUTE:-300}
BUDGET_S=${FUZZ_BUDGET_S:-20}
case "${BUILD:-build}" in
    *asan*) PER_ROUTE=${FUZZ_PER_ROUTE:-300} BUDGET_S=${FUZZ_BUDGET_S:-30} ;;
    *tsan*) PER_ROUTE=${FUZZ_PER_ROUTE:-100} BUDGET_S=${FUZZ_BUDGET_S:-30} ;;
esac

start_daemon --auth off --threads 2 || exit 1
if python3 "$ROOT/tests/integration/fuzz_driver.py" --url "$URL" --routes "$ROOT/service/api/routes.c" \
    --seed "${FUZZ_SEED:-20261122}" --per-route "$PER_ROUTE" --budget-s "$BUDGET_S" --timeout-s 15; then
    pass "fuzz: no crash, no 5xx, every error in the documented shape"
else
    fail "fuzz (reproduce: FUZZ_SEED=${FUZZ_SEED:-20261122} bash $0)"
fi
check "daemon still alive after the fuzz" kill -0 "$DAEMON_PID"
check "no sanitizer report in the log" test -z "$(grep -E 'runtime error|AddressSanitizer|ThreadSanitizer|LeakSanitizer' "$T/err")"
# stop_daemon waits for ever; a request still computing (a fuzz case that timed out) must not hang
# the suite: SIGTERM, then SIGKILL after 20 s.
stop_bounded() {
    kill -TERM "$DAEMON_PID"
    for _ in $(seq 1 200); do
        if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
            local rc=0
            wait "$DAEMON_PID" || rc=$?
            DAEMON_PID=""
            return $rc
        fi
        sleep 0.1
    done
    echo "  dpsilod still running 20 s after SIGTERM"
    return 1
}
check "SIGTERM after the fuzz exits 0 within 20 s" stop_bounded
finish
