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

# ---- cost -------------------------------------------------------------------------------------------
RUN='{"type":"self_composed","count":5000,"event":{"type":"poisson_sampled","sampling_rate":0.02,"event":{"type":"gaussian","noise_multiplier":1.5}}}'
expect_status 200 POST /v1/tuning/cost "{\"event\":$RUN,\"distribution\":{\"logarithmic\":{\"mean\":10}},\"delta\":1e-5,\"grid_size\":10}"
expect_json '.epsilon > .epsilon_one_run and .epsilon < .epsilon_naive' true
expect_json '.epsilon_naive > 2 * .epsilon' true
expect_json .naive_runs 10
expect_json '.expected_runs > 9.999999 and .expected_runs < 10.000001' true
expect_json .prob_no_run 0
expect_json .accounting.bound "Papernot & Steinke 2022, Thm. 2"
expect_json .accounting.conversion balle2020
expect_json .pure null
# Pure runs: Liu & Talwar's 3 eps for the geometric distribution, 10 eps for the naive grid.
expect_status 200 POST /v1/tuning/cost '{"event":{"type":"laplace","noise_multiplier":4},"distribution":{"geometric":{"mean":10}},"delta":1e-6,"grid_size":10}'
expect_json .pure.epsilon 0.75
expect_json .epsilon 0.75
expect_json .pure.epsilon_naive 2.5
expect_json .epsilon_one_run 0.25
# A degenerate distribution is plain composition: fixed k = 1 costs one run.
expect_status 200 POST /v1/tuning/cost "{\"event\":$RUN,\"distribution\":{\"fixed\":1},\"delta\":1e-5}"
expect_json '.epsilon == .epsilon_one_run' true
expect_json .epsilon_naive null
expect_json .epsilon_naive_reason "grid_size not given"
expect_status 200 POST /v1/tuning/cost "{\"event\":$RUN,\"distribution\":{\"poisson\":{\"mean\":10}},\"delta\":1e-5}"
expect_json '.prob_no_run > 4.53e-5 and .prob_no_run < 4.55e-5' true
expect_json .accounting.bound "Papernot & Steinke 2022, Thm. 6"
# The cost grows with the mean number of runs.
prev=0
for m in 2 5 10 50; do
    req POST /v1/tuning/cost "{\"event\":$RUN,\"distribution\":{\"geometric\":{\"mean\":$m}},\"delta\":1e-5}"
    cur=$(printf '%s' "$BODY" | jq .epsilon)
    check "cost grows: mean $m ($cur > $prev)" awk -v a="$cur" -v b="$prev" 'BEGIN{exit !(a > b)}'
    prev=$cur
done
# repeat_and_select is an event like any other: nested in a composition at /v1/accounting/epsilon.
expect_status 200 POST /v1/accounting/epsilon "{\"event\":{\"type\":\"composed\",\"events\":[{\"type\":\"repeat_and_select\",\"event\":$RUN,\"distribution\":{\"geometric\":{\"mean\":10}}},{\"type\":\"gaussian\",\"noise_multiplier\":20}]},\"delta\":1e-5}"
expect_json '.epsilon > 0' true
expect_status 400 POST /v1/accounting/epsilon "{\"event\":{\"type\":\"composed\",\"events\":[{\"type\":\"repeat_and_select\",\"event\":$RUN,\"distribution\":{\"poisson\":{\"mean\":0.5}}}]},\"delta\":1e-5}"
expect_json .error.field 'event.events[0].distribution.poisson.mean'
expect_status 400 POST /v1/tuning/cost "{\"event\":$RUN,\"distribution\":{\"truncated_negative_binomial\":{\"eta\":-2,\"mean\":10}},\"delta\":1e-5}"
expect_json .error.field distribution.truncated_negative_binomial.eta
expect_status 400 POST /v1/tuning/cost "{\"event\":$RUN,\"distribution\":{\"fixed\":3},\"delta\":2}"
expect_json .error.field delta
expect_status 400 POST /v1/tuning/cost '{"event":{"type":"gaussian","noise_multiplier":-1},"distribution":{"fixed":3},"delta":1e-5}'
expect_json .error.field event.noise_multiplier
expect_status 400 POST /v1/tuning/cost "{\"event\":$RUN,\"distribution\":{\"fixed\":3},\"delta\":1e-5,\"grid_size\":0}"
expect_json .error.field grid_size

# ---- plan ---------------------------------------------------------------------------------------------
# Liu, Hu, Wu & Smith 2022 (NeurIPS), Fig. 7: one Gaussian release, eps 0.25, delta 1e-5, E[K] = 10, eta = -0.5. The paper's grid
# calibration gives 23.785 (untuned 14.567); the continuous orders never need more noise.
expect_status 200 POST /v1/tuning/plan '{"epsilon":0.25,"delta":1e-5,"expected_runs":10,"training":{"sampling_rate":1,"steps":1},"distribution":{"truncated_negative_binomial":{"eta":-0.5}}}'
expect_json '.noise_multiplier <= 23.785 and .noise_multiplier > 22' true
expect_json '.noise_multiplier_untuned <= 14.567 and .noise_multiplier_untuned > 14.56' true
expect_json '.price_of_tuning > 1.5 and .price_of_tuning < 1.64' true
expect_json '.epsilon <= 0.25' true
expect_json '.runs.distribution.truncated_negative_binomial.gamma > 0.00277 and .runs.distribution.truncated_negative_binomial.gamma < 0.00278' true
expect_status 200 POST /v1/tuning/plan '{"epsilon":1,"delta":1e-5,"grid_size":10,"training":{"sampling_rate":0.02,"steps":5000},"distribution":{"logarithmic":{}}}'
expect_json '.noise_multiplier > .noise_multiplier_untuned and .noise_multiplier < .noise_multiplier_naive' true
expect_json '.runs.expected > 9.999999 and .runs.expected < 10.000001' true
expect_json .naive_runs 10
# the same "conversion" as /v1/tuning/cost and /v1/accounting/* (the bound used; was "optimal")
expect_json .accounting.conversion balle2020
# An impossible target is 422 naming epsilon.
expect_status 422 POST /v1/tuning/plan '{"epsilon":1e-9,"delta":1e-12,"grid_size":10,"training":{"sampling_rate":1,"steps":1000000000},"distribution":{"geometric":{}}}'
expect_json .error.field epsilon
expect_status 400 POST /v1/tuning/plan '{"epsilon":1,"delta":1e-5,"training":{"sampling_rate":0.02,"steps":5000},"distribution":{"logarithmic":{}}}'
expect_json .error.field expected_runs
expect_status 400 POST /v1/tuning/plan '{"epsilon":1,"delta":1e-5,"grid_size":10,"training":{"sampling_rate":0.02,"steps":0},"distribution":{"logarithmic":{}}}'
expect_json .error.field training.steps
expect_status 400 POST /v1/tuning/plan '{"epsilon":1,"delta":1e-5,"grid_size":10,"training":{"sampling_rate":1.5,"steps":10},"distribution":{"geometric":{}}}'
expect_json .error.field training.sampling_rate
expect_status 400 POST /v1/tuning/plan '{"epsilon":-1,"delta":1e-5,"grid_size":10,"training":{"sampling_rate":0.5,"steps":10},"distribution":{"geometric":{}}}'
expect_json .error.field epsilon
expect_status 400 POST /v1/tuning/plan '{"epsilon":1,"delta":1e-5,"grid_size":10,"training":{"sampling_rate":0.5,"steps":10},"distribution":{"poisson":{"mean":0.2}}}'
expect_json .error.field distribution.poisson.mean

# ---- draws persist across a restart -----------------------------------------------------------------
stop_daemon || fail "clean stop"
start_daemon --threads 2 || exit 1
expect_status 200 GET "/v1/tuning/draws/$ID"
expect_json .runs "$RUNS"
check "draws are append-only in SQLite" sh -c "! sqlite3 '$T/db' 'DELETE FROM tuning_draws' 2>/dev/null"

finish
