#!/usr/bin/env bash
# bench/pld: one PLD epsilon (q = 0.01, sigma = 1.1, 10^4 steps, delta = 1e-5, h = 1e-4), dpsilo in C
# beside dp_accounting's PLD accountant in Python, and the speed-up ratio. The Python side runs only
# when DP_ACCOUNTING_SRC points at google/differential-privacy/python/dp_accounting (docs/BENCHMARKS.md).
# Run by `make bench`; timings never enter `make test`.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
# DP_ACCOUNTING_SRC may name the google/differential-privacy checkout or its python/dp_accounting folder.
if [ -n "${DP_ACCOUNTING_SRC:-}" ] && [ -d "$DP_ACCOUNTING_SRC/python/dp_accounting" ]; then
    export DP_ACCOUNTING_SRC="$DP_ACCOUNTING_SRC/python/dp_accounting"
fi
REPS=${PLD_BENCH_REPS:-15}
PYREPS=${PLD_BENCH_PY_REPS:-5}
H=${PLD_BENCH_H:-1e-4}
echo "load average: $(cut -d" " -f1-3 /proc/loadavg) on $(nproc) cores (wall and CPU times below)"
c_out=$(nice -n 10 "$BUILD/bench/pld" "$REPS" "$H")
echo "$c_out"
if [ -n "${DP_ACCOUNTING_SRC:-}" ] && [ -d "$DP_ACCOUNTING_SRC/dp_accounting" ]; then
    py_out=$(nice -n 10 /usr/bin/python3 bench/pld/dp_accounting_pld.py "$PYREPS" "$H")
    echo "$py_out"
    py_ms=$(echo "$py_out" | awk '{print $3}')
    py_cpu=$(echo "$py_out" | awk '{print $7}')
    echo "$c_out" | awk -v py="$py_ms" -v pc="$py_cpu" \
        '{printf "ratio dp_accounting/dpsilo (%s): wall median %.1fx, cpu median %.1fx\n", $2, py / $4, pc / $8}'
else
    echo "dp_accounting side skipped: set DP_ACCOUNTING_SRC to a checkout of python/dp_accounting"
fi
