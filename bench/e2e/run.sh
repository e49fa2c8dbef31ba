#!/usr/bin/env bash
# bench/e2e/run.sh: one estimator request of 10^6 clients end to end over HTTP (issue 15, "fast end
# to end, not only in the library"): parse, fit, render, store, answer.
#
# For each body a fresh daemon (--max-body 67108864, auth off, --threads 2, database in a
# temporary directory) takes one POST; the script prints the wall time of the request (curl), the
# daemon's CPU time over the request (utime + stime of /proc/PID/stat, all its threads), the answer's
# size and how much the database grew (main file + WAL: a run's pages are written twice until the
# WAL is checkpointed), beside the body's size. The bodies:
#   gaussian  {"clients": [{"mean": x, "n": 5}, ...], "noise_variance": 1}
#   beta      {"clients": [{"successes": z, "trials": 10}, ...]}
#   nm        {"x": [...], "s": [...], "prior_family": "npmle", "grid_size": 20}  (normal-means: the
#             problem of bench/normal_means, theta from {-2, 0, 3} plus N(0, 0.3^2), s on [0.5, 1.5])
# each sent as is ("full": every estimate answered, the fit alone stored), with "results": "summary"
# (the fit only; no per-client rows answered or stored) and with "keep_results": true ("keep": every
# estimate answered and stored as columns), as RESULTS says.
# With BASELINE_DPSILOD (a dpsilod built from an earlier commit) every request also runs against
# it, alternating, and the old binary gets the bodies without "results" (a binary from before
# "results" refuses the field), or with "results": "summary" when BASELINE_RESULTS=summary.
# Not part of `make test`; nothing is asserted.
#
# Usage: BASELINE_DPSILOD=<old build>/dpsilod bash bench/e2e/run.sh
# Knobs: E2E_CLIENTS (default 1000000), KINDS="gaussian beta nm", RESULTS="full summary keep",
#        REPEAT (alternations, default 1), PIN (taskset -c list for the daemon, default none),
#        BASELINE_RESULTS (full or summary, default full)
set -euo pipefail
BUILD=${BUILD:-build}
DPSILOD=${DPSILOD:-$BUILD/dpsilod}
N=${E2E_CLIENTS:-1000000}
KINDS=${KINDS:-gaussian beta nm}
RESULTS=${RESULTS:-full summary keep}
REPEAT=${REPEAT:-1}
PIN=${PIN:-}
BASELINE_RESULTS=${BASELINE_RESULTS:-full}
[ -x "$DPSILOD" ] || { echo "bench/e2e: $DPSILOD not built (run make)"; exit 1; }

T=$(mktemp -d "${TMPDIR:-/tmp}/dpsilo-e2e-XXXXXX")
PID=""
stop_d() {
    if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
        kill -TERM "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
    fi
    PID=""
}
cleanup() { stop_d; rm -rf "$T"; }
trap cleanup EXIT

start_d() { # binary
    rm -rf "$T/db"*
    : >"$T/out"
    local pin=()
    [ -n "$PIN" ] && pin=(taskset -c "$PIN")
    "${pin[@]}" "$1" --listen 127.0.0.1:0 --db "$T/db" --auth off --threads 2 --log-level warn \
        --max-body 67108864 --max-estimator-cells 1e8 >"$T/out" 2>"$T/log" &
    PID=$!
    URL=""
    for _ in $(seq 1 200); do
        URL=$(sed -n 's/^dpsilod listening on //p' "$T/out")
        [ -n "$URL" ] && return 0
        sleep 0.05
    done
    echo "bench/e2e: dpsilod did not start"
    cat "$T/log"
    exit 1
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
db_bytes() { du -cb "$T"/db* 2>/dev/null | tail -1 | cut -f1; }

measure() { # label, binary, route, body file
    start_d "$2"
    local c0 c1 d0 d1 out
    d0=$(db_bytes)
    c0=$(cpu_ticks)
    out=$(curl -s -o "$T/answer" -w '%{http_code} %{time_total}' -X POST "$URL/v1/estimators/$3" \
        --data-binary "@$4")
    c1=$(cpu_ticks)
    d1=$(db_bytes)
    stop_d
    awk -v l="$1" -v o="$out" -v c="$((c1 - c0))" -v hz="$(getconf CLK_TCK)" \
        -v b="$(stat -c %s "$4")" -v a="$(stat -c %s "$T/answer")" -v db="$((d1 - d0))" \
        'BEGIN { split(o, f, " "); printf "  %-16s %s in %6.3f s wall, %6.3f s CPU; answer %7.1f MB, database +%7.2f MB (%.4fx the body)\n",
        l, f[1], f[2], c / hz, a / 1e6, db / 1e6, db / b }'
}

echo "bench/e2e: $N clients, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)," \
    "$(date -u +%Y-%m-%dT%H:%MZ)"
python3 - "$N" "$T" <<'PY'
import json, random, sys
n, t = int(sys.argv[1]), sys.argv[2]
bodies = {
    "gaussian": {"clients": [{"mean": (i % 997) / 997.0, "n": 5} for i in range(n)],
                 "noise_variance": 1},
    "beta": {"clients": [{"successes": (i * 7) % 11, "trials": 10} for i in range(n)]},
}
rng = random.Random(15)
th = [rng.choice((-2, 0, 0, 0, 3)) + rng.gauss(0, 0.3) for _ in range(n)]
s = [round(rng.uniform(0.5, 1.5), 6) for _ in range(n)]
bodies["nm"] = {"x": [round(t + rng.gauss(0, si), 9) for t, si in zip(th, s)], "s": s,
                "prior_family": "npmle", "grid_size": 20}
for k, b in bodies.items():
    with open(f"{t}/{k}.json", "w") as f:
        json.dump(b, f)
    with open(f"{t}/{k}-keep.json", "w") as f:
        json.dump(dict(b, keep_results=True), f)
    b["results"] = "summary"
    with open(f"{t}/{k}-summary.json", "w") as f:
        json.dump(b, f)
PY
route() { case "$1" in nm) echo normal-means ;; *) echo "$1" ;; esac; }
for kind in $KINDS; do
    echo "$kind ($(stat -c %s "$T/$kind.json") bytes):"
    for r in $(seq 1 "$REPEAT"); do
        for res in $RESULTS; do
            body="$T/$kind.json"
            [ "$res" = full ] || body="$T/$kind-$res.json"
            measure "dpsilod $res" "$DPSILOD" "$(route "$kind")" "$body"
        done
        if [ -n "${BASELINE_DPSILOD:-}" ]; then
            body="$T/$kind.json"
            [ "$BASELINE_RESULTS" = summary ] && body="$T/$kind-summary.json"
            measure "baseline $BASELINE_RESULTS" "$BASELINE_DPSILOD" "$(route "$kind")" "$body"
        fi
    done
done
