#!/usr/bin/env bash
# bench/jobs/bound.sh: a School job whose 139 silos are bound to ledger silos, through the daemon
# (POST /v1/jobs), so that every round charges 139 silos through the ledger as one batch (after the
# round's dry run): the whole job's wall time, and its rounds' training time beside it. Not part of
# `make test`; timings are printed, never asserted. Needs DPSILO_SCHOOL_CSV (the School CSV, which
# is not in the repository), jq and GNU date, and prints "skipped" without them.
# Knobs: BUILD=build, ALGORITHM=mrmtl, ROUNDS=200, PIN=<cpu> (taskset -c for the daemon).
set -euo pipefail
BUILD=${BUILD:-build}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/../lib.sh"
CSV=${DPSILO_SCHOOL_CSV:-}
if [ -z "$CSV" ] || [ ! -f "$CSV" ]; then
    echo "bench/jobs/bound: skipped (set DPSILO_SCHOOL_CSV to the School CSV)"
    exit 0
fi
if ! command -v jq >/dev/null || ! date -d 2026-01-01T00:00:00.5Z +%N >/dev/null 2>&1; then
    echo "bench/jobs/bound: skipped (needs jq and GNU date)"
    exit 0
fi
bench_scratch bound
D=$BENCH_DIR
pin=()
if [ -n "${PIN:-}" ] && command -v taskset >/dev/null; then
    pin=(taskset -c "$PIN")
fi
"${pin[@]}" "$BUILD/dpsilod" --listen 127.0.0.1:0 --db "$D/db" --auth off --log-level warn \
    >"$D/out" 2>"$D/err" &
PID=$!
U=$(bench_listen_url "$D/out" "$D/err" bench/jobs/bound) || exit 1
DS=$(curl -sf -X POST "$U/v1/datasets?label=score&silo=school&name=school" \
    -H 'Content-Type: text/csv' --data-binary @"$CSV" | jq -r .id)
# one ledger silo per school, a cap the job never reaches (rdp, conversion "optimal")
MAP=$(curl -sf "$U/v1/datasets/$DS" | jq -r '.silos[].name' | while read -r name; do
    id=$(curl -sf -X POST "$U/v1/silos" -d "{\"name\":\"school-$name\",\"budget\":{\"epsilon\":1000,\"delta\":1e-3}}" | jq -r .id)
    printf '"%s":%s,' "$name" "$id"
done)
MAP="{${MAP%,}}"
SPEC="{\"algorithm\":\"${ALGORITHM:-mrmtl}\",\"lambda\":1,\"dataset\":$DS,\"model\":{\"type\":\"linear\"},
  \"rounds\":${ROUNDS:-200},\"batch_size\":32,\"lr\":0.01,\"seed\":1,\"test_fraction\":0.2,
  \"privacy\":{\"target_epsilon\":6,\"delta\":1e-3,\"clip\":1},\"silos\":$MAP}"
t0=$(date +%s.%N)
JOB=$(curl -sf -X POST "$U/v1/jobs" -d "$SPEC" | jq -r .id)
for i in $(seq 1 3000); do # at most 10 minutes
    ST=$(curl -sf "$U/v1/jobs/$JOB" | jq -r .status)
    case "$ST" in succeeded | failed | cancelled | interrupted) break ;; esac
    [ "$i" -lt 3000 ] || { echo "bench/jobs/bound: job $JOB still $ST after 10 minutes"; exit 1; }
    sleep 0.2 # a dashboard's poll (each answer carries the 139 silos' plan)
done
t1=$(date +%s.%N)
J=$(curl -sf "$U/v1/jobs/$JOB")
TRAIN=$(curl -sf "$U/v1/jobs/$JOB/metrics?limit=1000" | jq '[.rounds[].wall_ms] | add')
ms() { echo "$J" | jq -r ".$1" | { read -r t; echo $(($(date -d "$t" +%s%N) / 1000000)); }; }
RUN=$(($(ms finished_at) - $(ms started_at)))
echo "$J" | jq -c --arg wall "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')" --arg train "$TRAIN" --arg run "$RUN" \
    '{algorithm, status, rounds_done, silos: (.plan.silos | length), run_ms: ($run | tonumber),
      rounds_wall_ms_sum: ($train | tonumber), submit_to_done_s: ($wall | tonumber)}'
