#!/usr/bin/env bash
# bench/memory/run.sh: peak memory of one large estimator run against its body size (issue 10,
# "peak memory stays within a small documented multiple of the body size").
#
# For each body, a fresh daemon (--max-body 67108864, auth off, database in a temporary directory)
# takes one POST, and the daemon's VmHWM (peak resident set) is read before and after. The bodies:
#   plain  the Gaussian body of bench/starve: RSS_CLIENTS clients {"mean": x, "n": 5},
#          noise_variance 1;
#   ids    the same clients with an "id" each and "keep_data": true (every per-client pass of the
#          handler, and the stored copy of the clients);
#   bad    the plain body with its last client malformed ({"mean": 01, ...}: a 400 whose error
#          names line, column and position, as jansson would).
# With BASELINE_DPSILOD (a dpsilod built from an earlier commit) each body also runs against it,
# right after, in the same run, and the ratio of the two peaks is printed. Not part of
# `make test`; nothing is asserted.
#
# Usage: BASELINE_DPSILOD=<old build>/dpsilod bash bench/memory/run.sh
# Knobs: RSS_CLIENTS="1000000" (space-separated list), BODIES="plain ids bad", THREADS (--threads,
#        default nproc)
set -euo pipefail
BUILD=${BUILD:-build}
DPSILOD=${DPSILOD:-$BUILD/dpsilod}
RSS_CLIENTS=${RSS_CLIENTS:-1000000}
BODIES=${BODIES:-plain ids bad}
THREADS=${THREADS:-$(nproc)}
[ -x "$DPSILOD" ] || { echo "bench/memory: $DPSILOD not built (run make)"; exit 1; }

T=$(mktemp -d "${TMPDIR:-/tmp}/dpsilo-memory-XXXXXX")
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
    "$1" --listen 127.0.0.1:0 --db "$T/db" --auth off --threads "$THREADS" \
        --max-body 67108864 >"$T/out" 2>"$T/log" &
    PID=$!
    URL=""
    for _ in $(seq 1 100); do
        URL=$(sed -n 's/^dpsilod listening on //p' "$T/out")
        [ -n "$URL" ] && return 0
        sleep 0.05
    done
    echo "bench/memory: dpsilod did not start"
    cat "$T/log"
    exit 1
}

hwm() { awk '/VmHWM/ {print $2}' "/proc/$PID/status"; } # kB

LAST_KB=0
measure() { # label, binary, body file
    start_d "$2"
    local before after code bytes t0 t1
    before=$(hwm)
    t0=$(date +%s.%N)
    code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/v1/estimators/gaussian" \
        --data-binary "@$3")
    t1=$(date +%s.%N)
    after=$(hwm)
    stop_d
    bytes=$(stat -c %s "$3")
    LAST_KB=$after
    awk -v l="$1" -v c="$code" -v b="$bytes" -v h0="$before" -v h1="$after" -v t0="$t0" \
        -v t1="$t1" 'BEGIN { printf "  %-9s %s in %5.1f s, peak RSS %6.0f MB (idle %4.0f MB): %5.1fx the body\n",
        l, c, t1-t0, h1/1024, h0/1024, h1*1024/b }'
}

echo "bench/memory: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)," \
    "$(date -u +%Y-%m-%dT%H:%MZ)"
for n in $RSS_CLIENTS; do
    python3 -c "import json,sys; n=int(sys.argv[1]); print(json.dumps({'clients':[{'mean':(i%997)/997.0,'n':5} for i in range(n)],'noise_variance':1}))" \
        "$n" >"$T/plain.json"
    python3 -c "import json,sys; n=int(sys.argv[1]); print(json.dumps({'clients':[{'id':'c%d'%i,'mean':(i%997)/997.0,'n':5} for i in range(n)],'noise_variance':1,'keep_data':True}))" \
        "$n" >"$T/ids.json"
    sed 's/{"mean": \([0-9.]*\), "n": 5}]/{"mean": 01, "n": 5}]/' "$T/plain.json" >"$T/bad.json"
    for body in $BODIES; do
        echo "$n clients, body '$body' ($(stat -c %s "$T/$body.json") bytes):"
        measure "dpsilod" "$DPSILOD" "$T/$body.json"
        now=$LAST_KB
        if [ -n "${BASELINE_DPSILOD:-}" ]; then
            measure "baseline" "$BASELINE_DPSILOD" "$T/$body.json"
            awk -v a="$now" -v b="$LAST_KB" 'BEGIN { printf "  peak now / baseline: %.3f\n", a/b }'
        fi
    done
done
