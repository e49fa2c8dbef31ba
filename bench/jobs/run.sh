#!/usr/bin/env bash
# bench/jobs/run.sh: one row per job type (bench_jobs.c's header gives the settings): the wall time
# of a whole run through the engine on one thread. Not part of `make test`; timings are printed,
# never asserted. The School rows need DPSILO_SCHOOL_CSV (the CSV is not in the repository) and are
# printed as skipped without it. Knobs: BENCH_REPEATS=3, BENCH_ONLY=text, NICE=0, PIN=<cpu> (runs
# under taskset -c <cpu> when taskset exists).
set -euo pipefail
BUILD=${BUILD:-build}
if [ ! -x "$BUILD/bench/jobs" ]; then
    echo "bench/jobs: $BUILD/bench/jobs not built (make bench-build)"
    exit 1
fi
pin=()
if [ -n "${PIN:-}" ] && command -v taskset >/dev/null; then
    pin=(taskset -c "$PIN")
fi
echo "bench/jobs: $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
"${pin[@]}" nice -n "${NICE:-0}" "$BUILD/bench/jobs"
# the same School job through the daemon, its 139 silos bound to ledger silos (bench/jobs/bound.sh)
BUILD=$BUILD PIN=${PIN:-} bash "$(dirname "$0")/bound.sh"
