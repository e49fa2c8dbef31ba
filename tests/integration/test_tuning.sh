#!/usr/bin/env bash
# Private hyperparameter tuning (issue #4): /v1/tuning/draw (+ GET of the record), /v1/tuning/cost and
# /v1/tuning/plan, including the 400s that name the field, and a restart to show draws persist.
. "$(dirname "$0")/lib.sh"
start_daemon --threads 2 || exit 1

# ---- draw ---------------------------------------------------------------------------------------------
expect_status 201 POST /v1/tuning/draw '{"distribution":{"geometric":{"mean":10}},"grid_size":10,"label":"lambda"}'
expect_json '.runs >= 1' true
expect_json '(.candidates | length) == .runs' true
expect_json '[.candidates[] | select(. < 0 or . > 9)] | length' 0
expect_json '.distribution.truncated_negative_binomial.eta' 1
expect_json '.prob_no_run' 0
expect_json '.label' lambda
ID=$(printf '%s' "$BODY" | jq -r .id)
RUNS=$(printf '%s' "$BODY" | jq -r .runs)
CANDS=$(printf '%s' "$BODY" | jq -c .candidates)
check "Location names the record" test "$(header Location)" = "/v1/tuning/draws/$ID"
expect_status 200 GET "/v1/tuning/draws/$ID"
expect_json .runs "$RUNS"
expect_json '.candidates | tojson' "$CANDS"

expect_status 201 POST /v1/tuning/draw '{"distribution":{"poisson":{"mean":3}}}'
expect_json '.candidates' null
expect_json '.prob_no_run > 0.0497 and .prob_no_run < 0.0498' true
expect_status 201 POST /v1/tuning/draw '{"distribution":{"fixed":7},"grid_size":3}'
expect_json .runs 7
expect_status 201 POST /v1/tuning/draw '{"distribution":{"truncated_negative_binomial":{"eta":-0.5,"mean":10}}}'
expect_json '.distribution.truncated_negative_binomial.gamma > 0.00277 and .distribution.truncated_negative_binomial.gamma < 0.00278' true

# Twenty geometric draws with mean 10 are not all equal (the draw is random, not a fixed stream).
seen=""
for _ in $(seq 1 20); do
    req POST /v1/tuning/draw '{"distribution":{"geometric":{"mean":10}}}'
    seen="$seen $(printf '%s' "$BODY" | jq -r .runs)"
done
check "draws vary" test "$(printf '%s\n' $seen | sort -u | wc -l)" -gt 3

# Bad parameters: 400 naming the field.
bad() { # bad BODY FIELD
    expect_status 400 POST /v1/tuning/draw "$1"
    expect_json .error.field "$2"
}
bad '{"distribution":{"truncated_negative_binomial":{"eta":-1,"mean":10}}}' distribution.truncated_negative_binomial.eta
bad '{"distribution":{"truncated_negative_binomial":{"eta":2,"gamma":0}}}' distribution.truncated_negative_binomial.gamma
bad '{"distribution":{"truncated_negative_binomial":{"eta":2,"gamma":1.5}}}' distribution.truncated_negative_binomial.gamma
bad '{"distribution":{"truncated_negative_binomial":{"eta":2,"mean":0.5}}}' distribution.truncated_negative_binomial.mean
bad '{"distribution":{"truncated_negative_binomial":{"eta":2,"mean":5,"gamma":0.5}}}' distribution.truncated_negative_binomial.mean
bad '{"distribution":{"geometric":{"gamma":-0.1}}}' distribution.geometric.gamma
bad '{"distribution":{"poisson":{"mean":0.5}}}' distribution.poisson.mean
bad '{"distribution":{"poisson":{"mean":"ten"}}}' distribution.poisson.mean
bad '{"distribution":{"fixed":0}}' distribution.fixed
bad '{"distribution":{"fixed":2.5}}' distribution.fixed
bad '{"distribution":{"uniform":{}}}' distribution.uniform
bad '{"distribution":{}}' distribution
bad '{"distribution":{"fixed":3},"grid_size":0}' grid_size
bad '{"distribution":{"fixed":3},"seed":1}' seed
bad '{}' distribution
expect_status 404 GET /v1/tuning/draws/999999
expect_status 400 GET /v1/tuning/draws/abc
expect_json .error.field id

# ---- draws persist across a restart -----------------------------------------------------------------
stop_daemon || fail "clean stop"
start_daemon --threads 2 || exit 1
expect_status 200 GET "/v1/tuning/draws/$ID"
expect_json .runs "$RUNS"
check "draws are append-only in SQLite" sh -c "! sqlite3 '$T/db' 'DELETE FROM tuning_draws' 2>/dev/null"

finish
