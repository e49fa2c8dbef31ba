#!/usr/bin/env bash
# bench/starve/run.sh: is /healthz still answered quickly while heavy work runs? (issue 10, "never
# starved"). Measures /healthz latency (p50, p99, max, failures: one new connection every 50 ms, 5 s
# timeout) for SECONDS while:
#   idle        nothing else runs;
#   estimators  two worst-case estimator requests (the D4 body: 25,000 clients, components 64,
#               n_init 100, max_iter 100000) - first with the default caps (refused at once), then
#               with --max-estimator-work lifted so that both really run, on the compute pool;
#   pld         four clients charge one PLD silo whose log holds PLD_EVENTS distinct events;
#   slow        SLOW_CONNS connections trickling one header byte every 10 s;
#   jobs        two private MLP training jobs run at once (issue 12: /healthz p99 < 50 ms while
#               two jobs train).
# Each scenario gets a fresh daemon (database in a temporary directory). Not part of `make test`;
# timings are printed, never asserted.
#
# Usage: bash bench/starve/run.sh      (or `make bench`)
# Knobs: SECONDS_EACH=15 THREADS=<--threads, default nproc> PLD_EVENTS=200 SLOW_CONNS=1100
#        BASELINE_DPSILOD=<a dpsilod built from an earlier commit>: each scenario without daemon flags
#        also runs against it, printed right below as "baseline".
set -euo pipefail
BUILD=${BUILD:-build}
DPSILOD=${DPSILOD:-$BUILD/dpsilod}
SECONDS_EACH=${SECONDS_EACH:-15}
THREADS=${THREADS:-$(nproc)}
PLD_EVENTS=${PLD_EVENTS:-200}
SLOW_CONNS=${SLOW_CONNS:-1100}
HERE=$(cd "$(dirname "$0")" && pwd)
[ -x "$DPSILOD" ] || { echo "bench/starve: $DPSILOD not built (run make)"; exit 1; }

T=$(mktemp -d "${TMPDIR:-/tmp}/dpsilo-starve-XXXXXX")
PID=""
stop_d() {
    if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
        kill -KILL "$PID" 2>/dev/null || true # heavy runs may still be going: no drain needed here
        wait "$PID" 2>/dev/null || true
    fi
    PID=""
}
cleanup() { stop_d; rm -rf "$T"; }
trap cleanup EXIT

start_d() { # flags...
    rm -rf "$T/db"*
    : >"$T/out"
    "$DPSILOD" --listen 127.0.0.1:0 --db "$T/db" --auth off --threads "$THREADS" \
        --max-body 4194304 "$@" >"$T/out" 2>"$T/log" &
    PID=$!
    URL=""
    for _ in $(seq 1 100); do
        URL=$(sed -n 's/^dpsilod listening on //p' "$T/out")
        [ -n "$URL" ] && return 0
        sleep 0.05
    done
    echo "bench/starve: dpsilod did not start"
    cat "$T/log"
    exit 1
}

echo "bench/starve: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)," \
    "dpsilod --threads $THREADS, $SECONDS_EACH s per scenario, $(date -u +%Y-%m-%dT%H:%MZ)"
run() { # label, scenario, python opts, daemon flags...
    local label=$1 sc=$2 py=$3
    shift 3
    start_d "$@"
    printf '%-34s ' "$label"
    # shellcheck disable=SC2086
    python3 "$HERE/starve.py" "$URL" "$sc" seconds="$SECONDS_EACH" $py
    stop_d
    # The same scenario against the daemon before issue 10 (BASELINE_DPSILOD, e.g. built from
    # commit 2e73a48), side by side: it knows none of the new flags, and has no work caps at all.
    if [ -n "${BASELINE_DPSILOD:-}" ] && [ $# -eq 0 ]; then
        local cur=$DPSILOD
        DPSILOD=$BASELINE_DPSILOD
        start_d
        printf '%-34s ' "  baseline"
        # shellcheck disable=SC2086
        python3 "$HERE/starve.py" "$URL" "$sc" seconds="$SECONDS_EACH" $py || true
        stop_d
        DPSILOD=$cur
    fi
}
run "idle" idle ""
run "(a) D4 x2, default caps" estimators ""
run "(a) D4 x2, caps lifted (pool)" estimators "" --max-estimator-work 1e15 --max-estimator-cells 1e15
run "(b) PLD silo, 4 chargers" pld "pld_events=$PLD_EVENTS"
run "(c) slow connections" slow "slow_conns=$SLOW_CONNS"
run "(d) two training jobs" jobs "" --job-workers 2

# Peak memory of one large Gaussian run (RSS_CLIENTS clients, about 25 bytes each): VmHWM of the
# daemon before and after, against the body size.
RSS_CLIENTS=${RSS_CLIENTS:-1000000}
start_d --max-body 67108864
python3 -c "import json,sys; n=int(sys.argv[1]); print(json.dumps({'clients':[{'mean':(i%997)/997.0,'n':5} for i in range(n)],'noise_variance':1}))" \
    "$RSS_CLIENTS" >"$T/big.json"
hwm() { awk '/VmHWM/ {print $2}' "/proc/$PID/status"; }
before=$(hwm)
t0=$(date +%s.%N)
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/v1/estimators/gaussian" --data-binary "@$T/big.json")
t1=$(date +%s.%N)
after=$(hwm)
bytes=$(stat -c %s "$T/big.json")
awk -v c="$code" -v n="$RSS_CLIENTS" -v b="$bytes" -v h0="$before" -v h1="$after" -v t0="$t0" -v t1="$t1" \
    'BEGIN { printf "%-34s %d clients, body %.1f MB: %s in %.1f s, peak RSS %.0f MB before, %.0f MB after (%.1fx the body)\n", "memory, one Gaussian run", n, b/1e6, c, t1-t0, h0/1024, h1/1024, h1*1024/b }'
stop_d
