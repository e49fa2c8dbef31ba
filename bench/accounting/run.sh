#!/usr/bin/env bash
# bench/accounting/run.sh: the accounting benchmark (issue #3). Times dpsilo's RDP accountant
# (build/bench/accounting, C) and, when present, the reference harness (bench/accounting/py_ref.py:
# dp_accounting and Opacus run here on the same tasks.json; needs DP_ACCOUNTING_SRC / OPACUS_SRC
# checkouts, see py_ref.py), then prints every task side by side with the ratio reference/dpsilo.
# Also the median HTTP round trip of POST /v1/accounting/epsilon.
#
# Protocol shared with the reference harness: both print lines
#   task <TAB> implementation <TAB> seconds <TAB> result
# (seconds = median per call; for sweep_1000 the total). Not part of `make test`.
# Knobs: REPS=200 (repetitions for medians), THREADS=2 (dpsilod --threads).
set -euo pipefail
BUILD=${BUILD:-build}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/../lib.sh"
REPS=${REPS:-200}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=$(cd "$BUILD/bench" 2>/dev/null && pwd)/accounting
DPSILOD=${DPSILOD:-$BUILD/dpsilod}
[ -x "$BIN" ] || { echo "bench/accounting: $BIN not built (make bench)"; exit 1; }

bench_scratch acct
T=$BENCH_DIR

"$DPSILOD" --listen 127.0.0.1:0 --db "$T/db" --threads "${THREADS:-2}" --log-level warn >"$T/out" 2>"$T/log" &
PID=$!
URL=$(bench_listen_url "$T/out" "$T/log" bench/accounting) || exit 1
URL=${URL#http://}

echo "bench/accounting: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)"
(cd "$ROOT" && nice -n 10 "$BIN" --reps "$REPS" --http "$URL") >"$T/ours.tsv"
: >"$T/ref.tsv"
if [ -f "$HERE/py_ref.py" ]; then
    (cd "$ROOT" && nice -n 10 /usr/bin/python3 "$HERE/py_ref.py" --format tsv --tasks "$HERE/tasks.json") >"$T/ref.tsv" ||
        echo "bench/accounting: reference harness failed (see above); dpsilo figures only"
else
    echo "bench/accounting: reference harness bench/accounting/py_ref.py not present; dpsilo figures only"
fi
printf '%-20s %-14s %14s %20s %12s\n' task implementation seconds result "ratio(ref/us)"
awk -F'\t' 'FNR==NR { ours[$1]=$3; print; next }
            { print; if ($1 in ours && ours[$1] > 0) ratio[$1 " " $2] = $3 / ours[$1] }
            END { for (k in ratio) printf "ratio %-40s %.1fx\n", k, ratio[k] }' "$T/ours.tsv" "$T/ref.tsv" |
    awk -F'\t' 'NF==4 { printf "%-20s %-14s %14.6g %20s\n", $1, $2, $3, $4; next } { print }'
