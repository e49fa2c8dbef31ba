#!/usr/bin/env bash
# scripts/figures.sh: regenerates the figures of docs/ESTIMATORS.md (`make figures` runs it after
# building build/bench/eb_central and build/dpsilod). Deterministic: the same files on every run.
#   docs/img/eb-central-mse.csv, .svg  bench/eb_central --csv --reps $REPS, drawn by scripts/svgplot.py
#   docs/img/normal-means-shrinkage.svg  a seeded data set (svgplot.py nm-data) sent as a user would
#                                        to POST /v1/estimators/normal-means of a fresh daemon
#                                        (auth off, port 0, a temporary database), twice
# REPS (default 200) sets eb_central's repetitions floor: about 11 s of CPU at 200.
set -euo pipefail
BUILD=${BUILD:-build}
REPS=${REPS:-200}
OUT=docs/img
T=$(mktemp -d "${TMPDIR:-/tmp}/dpsilo-figures-XXXXXX")
PID=""
cleanup() {
    if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then kill -TERM "$PID"; wait "$PID" || true; fi
    rm -rf "$T"
}
trap cleanup EXIT

echo "figures: MSE by model (bench/eb_central --csv --reps $REPS)"
nice -n 10 "$BUILD/bench/eb_central" --csv --reps "$REPS" >"$OUT/eb-central-mse.csv"
python3 scripts/svgplot.py mse "$OUT/eb-central-mse.csv" "$OUT/eb-central-mse.svg"

echo "figures: raw against shrunk normal-means estimates (dpsilod over HTTP)"
python3 scripts/svgplot.py nm-data --n 200 --seed 15 "$T/data.json"
"$BUILD/dpsilod" --listen 127.0.0.1:0 --db "$T/db" --auth off --log-level warn >"$T/out" 2>"$T/err" &
PID=$!
URL=""
for _ in $(seq 1 200); do
    URL=$(sed -n 's/^dpsilod listening on //p' "$T/out")
    [ -n "$URL" ] && break
    kill -0 "$PID" 2>/dev/null || { echo "dpsilod exited:"; cat "$T/err"; exit 1; }
    sleep 0.05
done
[ -n "$URL" ] || { echo "dpsilod did not start"; exit 1; }
fit() { # fit NAME FAMILY: the answer for the data set with that prior family, mode estimated
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["prior_family"]=sys.argv[2]
d["mode"]="estimate"; print(json.dumps(d))' "$T/data.json" "$2" >"$T/$1.req"
    local code
    code=$(curl -s -o "$T/$1.json" -w '%{http_code}' -X POST "$URL/v1/estimators/normal-means" \
        -H 'Content-Type: application/json' --data-binary "@$T/$1.req")
    [ "$code" = 201 ] || { echo "normal-means $2: HTTP $code: $(cat "$T/$1.json")"; exit 1; }
}
fit normal normal
fit point_normal point_normal
python3 scripts/svgplot.py shrink "$T/data.json" "$OUT/normal-means-shrinkage.svg" \
    "prior_family normal=$T/normal.json" "prior_family point_normal=$T/point_normal.json"
for f in normal point_normal; do
    jq -r --arg f "$f" '"  \($f): prior mode \(.prior.mode) scale \(.prior.scale) pi0 \(.prior.pi0), " +
        "log-likelihood \(.log_likelihood), status \(.status)"' "$T/$f.json"
done
ls -l "$OUT"/eb-central-mse.* "$OUT"/normal-means-shrinkage.svg
