#!/usr/bin/env bash
# bench/http/run.sh: HTTP throughput and latency of dpsilod, driven by wrk from a second process on
# loopback. Measures GET /healthz (database verified at most every 250 ms, see api/core.c),
# GET /healthz?fresh=1 (a real SQLite read on every request) and POST /v1/echo (a small JSON body: body
# accumulation, parsing, strict validation, JSON reply). Not part of `make test`.
#
# Usage: bash bench/http/run.sh            (or `make bench`)
# Knobs (environment): DURATION=10s CONNS=64 WRK_THREADS=1 THREADS=<dpsilod --threads, default nproc>
#                      LOG_LEVEL=info (the access log is written, to a file, as in production)
# Output: one line per endpoint: req/s, p50, p99 (wrk --latency); the CPU time per request of dpsilod
# (from /proc/<pid>/stat, all threads) and of wrk (bash time), which depend much less than req/s on
# what else runs on the shared machine; and cpu_bound_rps = cores * 1e6 / (dpsilod_us + wrk_us), the
# rate both processes could sustain if they had every core to themselves.
set -euo pipefail
BUILD=${BUILD:-build}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/../lib.sh"
DPSILOD=${DPSILOD:-$BUILD/dpsilod}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-64}
WRK_THREADS=${WRK_THREADS:-1}
THREADS=${THREADS:-$(nproc)}
LOG_LEVEL=${LOG_LEVEL:-info}
HERE=$(cd "$(dirname "$0")" && pwd)

command -v wrk >/dev/null || { echo "bench/http: wrk is not installed (make deps installs it)"; exit 1; }
[ -x "$DPSILOD" ] || { echo "bench/http: $DPSILOD not built (run make)"; exit 1; }

bench_scratch http
T=$BENCH_DIR

"$DPSILOD" --listen 127.0.0.1:0 --db "$T/db" --auth off --threads "$THREADS" --log-level "$LOG_LEVEL" >"$T/out" 2>"$T/log" &
PID=$!
URL=$(bench_listen_url "$T/out" "$T/log" bench/http) || exit 1

cpu_ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
HZ=$(getconf CLK_TCK)

echo "bench/http: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), dpsilod --threads $THREADS," \
    "wrk -t$WRK_THREADS -c$CONNS -d$DURATION, log level $LOG_LEVEL, $(date -u +%Y-%m-%dT%H:%MZ)"
printf '%-22s %10s %10s %10s %12s %12s %14s\n' endpoint req/s p50 p99 dpsilod_us wrk_us cpu_bound_rps

run() { # name, extra wrk args..., url
    local name=$1
    shift
    wrk -t1 -c"$CONNS" -d2s "$@" >/dev/null # warm-up
    local c0 c1
    c0=$(cpu_ticks)
    local TIMEFORMAT='%U %S'
    { time wrk -t"$WRK_THREADS" -c"$CONNS" -d"$DURATION" --latency "$@" >"$T/wrk.txt"; } 2>"$T/wrk.time"
    c1=$(cpu_ticks)
    if grep -q "Non-2xx" "$T/wrk.txt"; then echo "bench/http: $name had non-2xx responses:"; cat "$T/wrk.txt"; exit 1; fi
    local rps p50 p99 nreq cpu
    rps=$(awk '/^Requests\/sec:/ {print $2}' "$T/wrk.txt")
    p50=$(awk '$1 == "50%" {print $2}' "$T/wrk.txt")
    p99=$(awk '$1 == "99%" {print $2}' "$T/wrk.txt")
    nreq=$(awk '/requests in/ {print $1}' "$T/wrk.txt")
    cpu=$(awk -v a="$c0" -v b="$c1" -v hz="$HZ" -v n="$nreq" 'BEGIN {printf "%.1f", (b - a) / hz * 1e6 / n}')
    wcpu=$(awk -v n="$nreq" '{printf "%.1f", ($1 + $2) * 1e6 / n}' "$T/wrk.time")
    cap=$(awk -v a="$cpu" -v b="$wcpu" -v c="$(nproc)" 'BEGIN {printf "%.0f", c * 1e6 / (a + b)}')
    printf '%-22s %10s %10s %10s %12s %12s %14s\n' "$name" "$rps" "$p50" "$p99" "$cpu" "$wcpu" "$cap"
}

run "GET /healthz" "$URL/healthz"
run "GET /healthz?fresh=1" "$URL/healthz?fresh=1"
run "POST /v1/echo" -s "$HERE/post_echo.lua" "$URL/v1/echo"
