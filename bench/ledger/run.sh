#!/usr/bin/env bash
# bench/ledger: acknowledged durable charges per second and latency percentiles (issue #5).
#
#   make bench            (or: BUILD=build bash bench/ledger/run.sh)
#
# 1. HTTP: starts dpsilod (--auth off, default threads then --threads 64, a fresh database in a temp dir each,
#    synchronous=FULL as always),
#    creates an (epsilon, delta) silo whose cap is never reached (every request is admitted and appended), and runs
#    build/bench/ledger with 1, 4, 16, 32, 64 and 128 keep-alive connections.
# 2. API: the same appends through ledger_charge() from 1 to 128 threads, without HTTP/JSON.
# Every acknowledged charge was committed (group commit, one fsync per group) before its answer.
# Runs under nice -n 10 (the machine is shared); figures go to docs/BENCHMARKS.md by hand.
set -eu
BUILD=${BUILD:-build}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/../lib.sh"
BIN=$BUILD/bench/ledger
bench_scratch ledger
D=$BENCH_DIR
TOTAL=${LEDGER_BENCH_TOTAL:-16000}
per_client() { # requests per client: TOTAL split over the clients, at most 2000 (1 client ~ 4 ms each)
    local n=$((TOTAL / $1))
    [ "$n" -gt 2000 ] && n=2000
    echo "$n"
}
# A charging request defers its answer (the connection is suspended until its group commits), so the
# MHD pool does not bound the group size. Runs the daemon with its default pool (one thread per core)
# and with --threads 64; LEDGER_BENCH_HTTP_THREADS="default 64" (the default) picks the pools.
groups_ops() { # "group_commits ops" from /metrics
    curl -s "$URL/metrics" | awk '/^dpsilo_ledger_group_commits_total/ {g = $2} /^dpsilo_ledger_ops_total/ {o = $2} END {print g, o}'
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; } # utime + stime of dpsilod, clock ticks
HZ=$(getconf CLK_TCK)
for THREADS in ${LEDGER_BENCH_HTTP_THREADS:-default 64}; do
    TFLAG=""
    [ "$THREADS" = default ] || TFLAG="--threads $THREADS"
    rm -f "$D/db" "$D/db-wal" "$D/db-shm"
    # shellcheck disable=SC2086 # TFLAG is empty or two words
    nice -n 10 "$BUILD/dpsilod" --listen 127.0.0.1:0 --db "$D/db" --auth off $TFLAG \
        --log-level warn >"$D/out" 2>"$D/err" &
    PID=$!
    URL=$(bench_listen_url "$D/out" "$D/err" bench/ledger) || exit 1
    PORT=${URL##*:}
    # An (epsilon, delta) silo with a cap no run reaches: every charge is admitted and pays the full
    # RDP admission work (RDP curve, two conversions to epsilon) plus the append.
    SILO=$(curl -s -X POST "$URL/v1/silos" -d '{"name":"bench","budget":{"epsilon":1e9,"delta":1e-5}}' | jq -r .id)
    echo "== HTTP ($URL, server threads: $THREADS, $(nproc) cores): POST /v1/silos/$SILO/charges"
    for c in 1 4 16 32 64 128; do
        n=$(per_client "$c")
        g0=$(groups_ops)
        t0=$(cpu_ticks)
        line=$(nice -n 10 "$BIN" http 127.0.0.1 "$PORT" "$SILO" "$c" "$n")
        t1=$(cpu_ticks)
        g1=$(groups_ops)
        # mean group = ops / group commits during this row (from /metrics)
        mg=$(echo "$g0 $g1" | awk '{g = $3 - $1; o = $4 - $2; printf "%.1f", (g > 0 ? o / g : 0)}')
        echo "$line daemon_cpu_us_per_charge=$(( (t1 - t0) * 1000000 / HZ / (c * n) )) mean_group=$mg"
    done
    N=$(curl -s "$URL/v1/silos/$SILO?verify=true" | jq -r '"\(.n_charges) charges, log consistent: \(.verification.consistent)"')
    echo "   silo after the runs: $N"
    kill -TERM "$PID"
    wait "$PID" || true
    PID=""
done
echo "== API (ledger_charge from N threads, same database, no HTTP)"
for c in 1 4 16 32 64 128; do
    nice -n 10 "$BIN" api "$D/db" "$c" "$(per_client "$c")"
done
# 3. DP-SGD round events (issue: 2.9k/s before the ledger's cost cache): 139 silos, each with its own
#    self_composed(steps, poisson(q, gaussian(1.1))), charged as a training round charges them (one
#    ledger_charge_batch of 139 items per round) and by single charges from 64 threads; each part runs
#    with the cost cache off (every charge evaluates its event's curve, as before the cache) and on,
#    side by side in one process. The trivial-event row is the floor (SQLite and the group commits).
#    The "jobs" line: LEDGER_BENCH_JOBS (default 4) jobs' rounds of 139 silos each in flight at once.
echo "== DP-SGD round events (ledger_charge_batch of 139 silos; ledger_charge from 64 threads)"
LEDGER_BENCH_JOBS="${LEDGER_BENCH_JOBS:-4}" nice -n 10 "$BIN" dpsgd "$D/dpsgd.db" 139 "${LEDGER_BENCH_ROUNDS:-30}" 64 "${LEDGER_BENCH_DPSGD_PER:-150}" 2>/dev/null
nice -n 10 "$BIN" dpsgd "$D/trivial.db" 139 "${LEDGER_BENCH_ROUNDS:-30}" 64 "${LEDGER_BENCH_DPSGD_PER:-150}" optimal trivial 2>/dev/null
