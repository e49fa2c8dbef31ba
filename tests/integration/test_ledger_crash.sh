#!/usr/bin/env bash
# Crash safety (issue #5): kill -9 the daemon during a storm of charges, three times. After each restart:
#   - every acknowledged charge (201) is in the log (its idempotency key is there);
#   - nothing is half-written: the cached totals equal a recomputation from the log, seq runs 1..n,
#     no key appears twice, and SQLite's integrity check passes;
#   - retrying every unacknowledged request lands each exactly once (replayed if it had committed).
# The silo admits exactly CAP_N charges in total, so at the end exactly CAP_N have been accepted no
# matter where the crashes fell. Then a graceful SIGTERM in the middle of a storm (default pool).
. "$(dirname "$0")/lib.sh"

PAR=32
PER_ROUND=1500
CAP_N=3500 # rho 0.0078125 (2^-7) each, cap 27.34375 + half a charge: sums are exact in binary

start_daemon --auth off --threads 4 || exit 1
expect_status 201 POST /v1/silos '{"name":"crashy","budget":{"rho":27.34765625}}'
S=$(printf '%s' "$BODY" | jq -r .id)

storm_cfg() { # storm_cfg KEYFILE: one charge per key, the key also sent as X-Request-Id (echoed back) so -w can report it
    local n=0 total
    total=$(wc -l <"$1")
    while read -r k; do
        n=$((n + 1))
        printf 'url = "%s/v1/silos/%s/charges"\nheader = "X-Request-Id: %s"\n' "$URL" "$S" "$k"
        printf 'data = "{\\"event\\":{\\"type\\":\\"zcdp\\",\\"rho\\":0.0078125},\\"idempotency_key\\":\\"%s\\"}"\n' "$k"
        printf 'request = "POST"\nheader = "Content-Type: application/json"\noutput = "/dev/null"\n'
        printf 'write-out = "%%{http_code} %%header{x-request-id}\\n"\n'
        [ "$n" -lt "$total" ] && printf 'next\n'
    done <"$1"
}

log_keys() { # all idempotency keys of the silo's log, one per line, in log order
    local after=0
    : >"$T/logkeys"
    while :; do
        req GET "/v1/silos/$S/charges?limit=1000&after=$after"
        printf '%s' "$BODY" | jq -r '.charges[].idempotency_key' >>"$T/logkeys"
        after=$(printf '%s' "$BODY" | jq -r .next_after)
        [ "$after" = null ] && break
    done
}

check_consistent() { # check_consistent LABEL
    expect_status 200 GET "/v1/silos/$S?verify=true"
    expect_json '.verification.consistent' true
    local n
    n=$(printf '%s' "$BODY" | jq -r .n_charges)
    log_keys
    check "$1: log length equals n_charges ($n)" [ "$(wc -l <"$T/logkeys")" -eq "$n" ]
    check "$1: no key twice in the log" [ "$(sort "$T/logkeys" | uniq -d | wc -l)" -eq 0 ]
    check "$1: SQLite integrity check" [ "$(sqlite3 "$T/db" 'PRAGMA integrity_check')" = ok ]
}

for round in 1 2 3; do
    seq -f "r$round-k%g" 1 "$PER_ROUND" >"$T/keys.$round"
    storm_cfg "$T/keys.$round" >"$T/storm.cfg"
    curl -s --no-progress-meter -Z --parallel-max "$PAR" -K "$T/storm.cfg" >"$T/ack.$round" 2>/dev/null &
    CURL_PID=$!
    # kill -9 as soon as the first acknowledgements reach the file (curl writes them in blocks), i.e.
    # in the middle of the storm; bounded wait in case the storm is slow to start
    for _ in $(seq 1 200); do
        [ -s "$T/ack.$round" ] && break
        sleep 0.01
    done
    kill -KILL "$DAEMON_PID"
    wait "$DAEMON_PID" 2>/dev/null
    DAEMON_PID=""
    wait "$CURL_PID"
    grep '^201 ' "$T/ack.$round" | sed 's/^201 //' | sort >"$T/acked.$round"
    echo "  round $round: $(wc -l <"$T/acked.$round") charges acknowledged before kill -9"

    start_daemon --auth off --threads 4 || exit 1
    check_consistent "round $round after restart"
    sort "$T/logkeys" >"$T/logkeys.sorted"
    check "round $round: every acknowledged charge survived" \
        [ "$(comm -23 "$T/acked.$round" "$T/logkeys.sorted" | wc -l)" -eq 0 ]

    # Retry everything that was not acknowledged: each lands once (or is refused by the budget).
    comm -23 <(sort "$T/keys.$round") "$T/acked.$round" >"$T/retry.$round"
    if [ -s "$T/retry.$round" ]; then
        storm_cfg "$T/retry.$round" >"$T/retry.cfg"
        curl -s --no-progress-meter -Z --parallel-max "$PAR" -K "$T/retry.cfg" >"$T/rack.$round"
        check "round $round: retries answered 201 or 409 only" \
            [ "$(grep -vc '^20[01] \|^409 ' "$T/rack.$round")" -eq 0 ]
    fi
    check_consistent "round $round after retries"
done

expect_status 200 GET "/v1/silos/$S"
expect_json '.n_charges' "$CAP_N"
expect_json '(.spent.rho <= .budget.rho)' true
check "daemon stops cleanly" stop_daemon

# Graceful stop (SIGTERM) in the middle of a storm, with the default MHD pool: charges whose
# connection is suspended until their group commits must be answered or dropped cleanly, never
# crash the daemon, and every acknowledged one is in the log.
start_daemon --auth off || exit 1
expect_status 201 POST /v1/silos '{"name":"termy","budget":{"rho":1000}}'
S=$(printf '%s' "$BODY" | jq -r .id)
seq -f "term-k%g" 1 6000 >"$T/keys.term"
storm_cfg "$T/keys.term" >"$T/storm.cfg"
curl -s --no-progress-meter -Z --parallel-max "$PAR" -K "$T/storm.cfg" >"$T/ack.term" 2>/dev/null &
CURL_PID=$!
for _ in $(seq 1 200); do
    [ -s "$T/ack.term" ] && break
    sleep 0.01
done
check "SIGTERM during a charge storm: the daemon exits 0" stop_daemon
wait "$CURL_PID"
grep '^201 ' "$T/ack.term" | sed 's/^201 //' | sort >"$T/acked.term"
echo "  $(wc -l <"$T/acked.term") charges acknowledged before SIGTERM"
start_daemon --auth off || exit 1
check_consistent "after SIGTERM"
sort "$T/logkeys" >"$T/logkeys.sorted"
check "after SIGTERM: every acknowledged charge is in the log" \
    [ "$(comm -23 "$T/acked.term" "$T/logkeys.sorted" | wc -l)" -eq 0 ]
check "daemon stops cleanly" stop_daemon
finish
