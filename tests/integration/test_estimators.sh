#!/usr/bin/env bash
# Estimator endpoints (issue #6): shapes, 400s naming the field, private runs, stored runs, pagination,
# and runs surviving a restart.
. "$(dirname "$0")/lib.sh"
start_daemon --threads 2 || exit 1

G='{"clients":[{"id":"a","mean":0.31,"n":15},{"id":"b","mean":0.12,"n":8},{"id":"c","mean":0.55,"n":30},{"id":"d","mean":-0.05,"n":4}],"noise_variance":0.25}'
expect_status 201 POST /v1/estimators/gaussian "$G"
expect_json '.estimates | length' 4
expect_json '.estimates[0].id' a
expect_json '.prior.mean > 0.2 and .prior.mean < 0.4' true
expect_json '.prior.variance >= 0' true
expect_json '.fits.mle.status' converged
expect_json '.fits.moments.mean * 1e6 | round' 232500
expect_json '.converged' true
expect_json '.privacy' null
expect_json '[.estimates[] | (.shrinkage >= 0 and .shrinkage <= 1 and .posterior_sd > 0)] | all' true
RUN1=$(printf '%s' "$BODY" | jq -r .run_id)
check "Location names the run" test "$(header Location)" = "/v1/runs/$RUN1"

# moments, known variance (Thm 1 setting), vector means
expect_status 201 POST /v1/estimators/gaussian '{"clients":[{"mean":[1,12],"n":4},{"mean":[2,14],"n":4},{"mean":[3,16],"n":4},{"mean":[6,22],"n":4}],"noise_variance":2,"method":"moments"}'
expect_json '.prior.mean | tojson' '[3,16]'
expect_json '.estimates[0].id' 0
# pooled noise variance from within-client variances
expect_status 201 POST /v1/estimators/gaussian '{"clients":[{"mean":0.1,"n":3,"within_variance":0.2},{"mean":0.5,"n":5,"within_variance":0.5},{"mean":0.3,"n":1}]}'
expect_json '.noise_variance * 1e9 | round' 400000000
expect_json '.noise_variance_source' pooled
# known prior: Thm 1 posterior by hand (x=3, n=4, s2=0.5, prior N(1, 0.5): mean 2, sd 0.5)
expect_status 201 POST /v1/estimators/gaussian '{"clients":[{"mean":3,"n":4}],"noise_variance":2,"prior":{"mean":1,"variance":0.5}}'
expect_json '.estimates[0].posterior_mean' 2
expect_json '.estimates[0].posterior_sd' 0.5
expect_json '.estimates[0].shrinkage' 0.5

# private Gaussian (Thm 2), with the cost reported
expect_status 201 POST /v1/estimators/gaussian "$(printf '%s' "$G" | jq -c '. + {privacy:{epsilon0:0.5,delta:1e-5,r:1,sigma_theta_bound:0.1}, seed:7}')"
expect_json '.privacy.mechanism' gaussian
expect_json '.privacy.epsilon0' 0.5
expect_json '.privacy.rho > 0' true
expect_json '.privacy.charges | tojson' '[]'
expect_json '.privacy.calibration | startswith("classic")' true
PRIV=$(printf '%s' "$BODY" | jq -c .estimates)
expect_status 201 POST /v1/estimators/gaussian "$(printf '%s' "$G" | jq -c '. + {privacy:{epsilon0:0.5,delta:1e-5,r:1,sigma_theta_bound:0.1}, seed:7}')"
check "same seed, same private result" test "$(printf '%s' "$BODY" | jq -c .estimates)" = "$PRIV"
expect_status 201 POST /v1/estimators/gaussian "$(printf '%s' "$G" | jq -c '. + {privacy:{epsilon0:4,delta:1e-5,r:1,sigma_theta_bound:0.1}}')"
expect_json '.privacy.calibration | startswith("analytic")' true

B='{"clients":[{"id":"a","successes":3,"trials":10},{"id":"b","successes":7,"trials":12},{"id":"c","successes":1,"trials":8},{"id":"d","successes":5,"trials":10},{"id":"e","successes":9,"trials":14}]}'
expect_status 201 POST /v1/estimators/beta "$B"
expect_json '.prior.alpha > 0' true
expect_json '.fits.mle.status' converged
expect_json '.estimates | length' 5
expect_status 201 POST /v1/estimators/beta "$(printf '%s' "$B" | jq -c '. + {method:"moments", variant:"unbiased"}')"
expect_json '.variant' unbiased
expect_status 201 POST /v1/estimators/beta "$(printf '%s' "$B" | jq -c '. + {privacy:{epsilon0:2}}')"
expect_json '.privacy.scheme' two_bit
expect_json '.privacy.epsilon_per_bit' 1
expect_json '.privacy.rho' 2
expect_status 201 POST /v1/estimators/beta "$(printf '%s' "$B" | jq -c '. + {privacy:{epsilon0:2, scheme:"paper_1bit"}, variant:"paper_no_minus1"}')"
expect_json '.privacy.bits' 1
expect_status 201 POST /v1/estimators/beta '{"clients":[{"successes":3,"trials":14}],"prior":{"alpha":2,"beta":5}}'
expect_json '.estimates[0].posterior_mean * 21 | . * 1000 | round' 5000

M='{"clients":[{"id":"a","mean":-1.1,"n":10},{"id":"b","mean":-0.9,"n":10},{"id":"c","mean":1.0,"n":10},{"id":"d","mean":1.2,"n":10},{"id":"e","mean":0.9,"n":10}],"noise_variance":0.25,"components":2}'
# Regression (QA fuzz): an epsilon0 so small that the paper's eq. 26 noise is infinite (5e-324) or
# overflows when squared (1e-300) was answered 503 "out of memory" / 400 naming an internal field.
for e0 in 5e-324 1e-300; do
    expect_status 422 POST /v1/estimators/gaussian "$(printf '%s' "$G" | jq -c --argjson e "$e0" '. + {privacy:{epsilon0:$e,delta:1e-5,r:1,sigma_theta_bound:0.1}}')"
    expect_json .error.field privacy.epsilon0
    expect_status 422 POST /v1/estimators/mixture "$(printf '%s' "$M" | jq -c --argjson e "$e0" '. + {privacy:{epsilon0:$e,delta:1e-5,r:1.5}}')"
    expect_json .error.field privacy.epsilon0
done
expect_status 201 POST /v1/estimators/mixture "$M"
expect_json '.prior.components | length' 2
expect_json '.estimates[0].responsibilities | length' 2
expect_json '.prior.components[0].weight' 0.4
expect_status 201 POST /v1/estimators/mixture "$(printf '%s' "$M" | jq -c '. + {method:"altmin"}')"
expect_json '.method' altmin
expect_status 201 POST /v1/estimators/mixture '{"clients":[{"mean":0.4,"n":4}],"noise_variance":1,"prior":{"components":[{"weight":0.3,"mean":-1,"variance":0.5},{"weight":0.7,"mean":1,"variance":0.25}]}}'
expect_json '.prior.source' given
expect_status 201 POST /v1/estimators/mixture "$(printf '%s' "$M" | jq -c '. + {privacy:{epsilon0:2,delta:1e-5,r:1.5}}')"
expect_json '.privacy.radius > 1.5' true
expect_json '.privacy.sensitivity == 2 * .privacy.radius' true

# raw samples instead of summaries: the server computes mean, n and the within-client variance
expect_status 201 POST /v1/estimators/gaussian '{"clients":[{"id":"a","samples":[0.1,0.3,0.2]},{"id":"b","samples":[0.5,0.7]},{"id":"c","samples":[0.3]}]}'
expect_json '.noise_variance_source' pooled
expect_json '.noise_variance * 1e9 | round' 13333333
expect_status 201 POST /v1/estimators/gaussian '{"clients":[{"samples":[[1,2],[3,4]]},{"samples":[[0,0],[2,2]]}],"noise_variance":1}'
expect_json '.estimates | length' 2
expect_status 201 POST /v1/estimators/beta '{"clients":[{"samples":[1,0,0,1]},{"samples":[true,false,false]},{"successes":2,"trials":5}]}'
expect_json '.estimates | length' 3
expect_status 400 POST /v1/estimators/gaussian '{"clients":[{"samples":[0.1,0.3],"mean":0.2},{"samples":[0.5]}],"noise_variance":1}'
expect_json .error.field 'clients[0].samples'
expect_status 400 POST /v1/estimators/beta '{"clients":[{"samples":[1,2]},{"successes":1,"trials":2}]}'
expect_json .error.field 'clients[0].samples'

# bad input: 400 naming the field
expect_status 400 POST /v1/estimators/gaussian '{"clients":[{"mean":0.1,"n":0},{"mean":0.2,"n":3}],"noise_variance":1}'
expect_json .error.field 'clients[0].n'
expect_status 400 POST /v1/estimators/gaussian '{"clients":[{"mean":0.1,"n":3}],"noise_variance":1}'
expect_json .error.field clients
expect_status 400 POST /v1/estimators/gaussian '{"clients":[{"mean":NaN,"n":3},{"mean":0.2,"n":3}],"noise_variance":1}'
expect_status 400 POST /v1/estimators/gaussian '{"clients":[{"mean":"x","n":3},{"mean":0.2,"n":3}],"noise_variance":1}'
expect_json .error.field 'clients[0].mean'
expect_status 400 POST /v1/estimators/gaussian "$(printf '%s' "$G" | jq -c '. + {privacy:{epsilon0:0.5,delta:1e-5,sigma_theta_bound:0.1}}')"
expect_json .error.field 'privacy.r'
expect_status 400 POST /v1/estimators/gaussian "$(printf '%s' "$G" | jq -c '. + {privacy:{epsilon0:0.5,delta:1e-5,r:1}}')"
expect_json .error.field 'privacy.sigma_theta_bound'
expect_status 400 POST /v1/estimators/gaussian "$(printf '%s' "$G" | jq -c '. + {bogus:1}')"
expect_json .error.field bogus
expect_status 400 POST /v1/estimators/gaussian '{"clients":[{"mean":0.1,"n":3},{"mean":0.2,"n":3}]}'
expect_json .error.field noise_variance
expect_status 400 POST /v1/estimators/beta '{"clients":[{"successes":3,"trials":10},{"successes":11,"trials":10}]}'
expect_json .error.field 'clients[1].successes'
expect_status 400 POST /v1/estimators/beta '{"clients":[{"successes":3,"trials":10}]}'
expect_json .error.field clients
expect_status 400 POST /v1/estimators/beta "$(printf '%s' "$B" | jq -c '. + {variant:"nope"}')"
expect_json .error.field variant
expect_status 400 POST /v1/estimators/mixture "$(printf '%s' "$M" | jq -c '.components = 0')"
expect_json .error.field components
expect_status 400 POST /v1/estimators/mixture "$(printf '%s' "$M" | jq -c '.components = 6')"
expect_json .error.field components
expect_status 400 POST /v1/estimators/mixture "$(printf '%s' "$M" | jq -c '. + {privacy:{epsilon0:2,delta:1e-5}}')"
expect_json .error.field 'privacy.r'
expect_status 400 POST /v1/estimators/gaussian '{"clients":[{"mean":0.1,"n":3,"silo_id":4},{"mean":0.2,"n":3}],"noise_variance":1}'
expect_json .error.field 'privacy'
expect_status 400 POST /v1/estimators/gaussian '{"clients":[{"mean":0.1,"n":3,"silo_id":"x"},{"mean":0.2,"n":3}],"noise_variance":1}'
expect_json .error.field 'clients[0].silo_id'

# ledger charging: silos named by clients are charged in one all-or-nothing batch before computing
ADM=$(cat "$T/admin.token")
AUTH=$ADM expect_status 201 POST /v1/silos '{"name":"hosp-a","budget":{"epsilon":2,"delta":1e-5}}'
SA=$(printf '%s' "$BODY" | jq -r .id); TA=$(printf '%s' "$BODY" | jq -r .token)
AUTH=$ADM expect_status 201 POST /v1/silos '{"name":"hosp-b","budget":{"epsilon":0.3,"delta":1e-5}}'
SB=$(printf '%s' "$BODY" | jq -r .id)
GS=$(printf '%s' "$G" | jq -c --argjson a "$SA" --argjson b "$SB" '.clients[0].silo_id=$a | .clients[1].silo_id=$a | .clients[2].silo_id=$b | . + {privacy:{epsilon0:0.5,delta:1e-5,r:1,sigma_theta_bound:0.1}}')
RUNS_BEFORE=$(curl -s "$URL/v1/runs?limit=500" | jq '.runs | length')
AUTH="" expect_status 401 POST /v1/estimators/gaussian "$GS"
# silo b (epsilon cap 0.3) cannot afford eps0 = 0.5: refused, nothing charged anywhere, nothing stored
AUTH=$ADM expect_status 409 POST /v1/estimators/gaussian "$GS"
expect_json .error.code budget_exhausted
expect_json .error.field 'clients[2].silo_id'
AUTH=$ADM expect_status 200 GET "/v1/silos/$SA"
expect_json .n_charges 0
check "a refused run is not stored" test "$(curl -s "$URL/v1/runs?limit=500" | jq '.runs | length')" = "$RUNS_BEFORE"
# without silo b: silo a is charged once for its two clients (self-composed twice)
GA=$(printf '%s' "$GS" | jq -c 'del(.clients[2].silo_id)')
AUTH=$ADM expect_status 201 POST /v1/estimators/gaussian "$GA"
expect_json '.privacy.charges | length' 1
expect_json '.privacy.charges[0].silo_id' "$SA"
expect_json '.privacy.charges[0].clients' 2
expect_json '.privacy.charges[0].event.type' self_composed
expect_json '.privacy.charges[0].cost_eps > 0 and .privacy.charges[0].cost_eps <= 1.0' true
expect_json '.privacy.charging | startswith("charged")' true
AUTH=$ADM expect_status 200 GET "/v1/silos/$SA"
expect_json .n_charges 1
# a silo token may charge its own silo only
AUTH=$TA expect_status 201 POST /v1/estimators/beta "$(printf '%s' "$B" | jq -c --argjson a "$SA" '.clients[0].silo_id=$a | . + {privacy:{epsilon0:0.5}}')"
expect_json '.privacy.charges[0].event.type' self_composed
AUTH=$TA expect_status 403 POST /v1/estimators/beta "$(printf '%s' "$B" | jq -c --argjson b "$SB" '.clients[0].silo_id=$b | . + {privacy:{epsilon0:0.1}}')"
AUTH=$ADM expect_status 404 POST /v1/estimators/mixture "$(printf '%s' "$M" | jq -c '.clients[0].silo_id=999 | . + {privacy:{epsilon0:1,delta:1e-5,r:1.5}}')"
expect_json .error.field 'clients[0].silo_id'
AUTH=$ADM expect_status 201 POST /v1/estimators/mixture "$(printf '%s' "$M" | jq -c --argjson b "$SB" '.clients[0].silo_id=$b | . + {privacy:{epsilon0:0.2,delta:1e-5,r:1.5}}')"
expect_json '.privacy.charges[0].event.type' gaussian
# central DP (issue 15): the service noises clipped sums once; a silo with the run's delta is charged
# the reported epsilon, once for all its clients (privacy unit: a client)
AUTH=$ADM expect_status 201 POST /v1/silos '{"name":"hosp-c","budget":{"epsilon":3,"delta":1e-5}}'
SC=$(printf '%s' "$BODY" | jq -r .id)
GC=$(printf '%s' "$G" | jq -c --argjson c "$SC" '.clients[0].silo_id=$c | .clients[1].silo_id=$c | .clients[2].silo_id=$c | . + {privacy:{model:"central",epsilon:1,delta:1e-5,r:1,sigma_theta_bound:0.5}, seed:3}')
AUTH=$ADM expect_status 201 POST /v1/estimators/gaussian "$GC"
expect_json '.privacy.model' central
expect_json '.privacy.privacy_unit' client
expect_json '.privacy.epsilon <= 1 and .privacy.epsilon > 0.999999' true
expect_json '(.privacy.rho - 1/(2*.privacy.noise_multiplier*.privacy.noise_multiplier)) | fabs < 1e-12' true
expect_json '(.privacy.noise_std.sum - .privacy.noise_multiplier*.privacy.sensitivities.l2_scaled*.privacy.sensitivities.sum) | fabs < 1e-9' true
expect_json '(.privacy.sensitivities.sum - 2*.privacy.b) | fabs < 1e-12' true
expect_json '.privacy.posterior_scope | test("that client alone")' true
expect_json '.method' moments
expect_json '.fits' null
expect_json '.log_likelihood' null
expect_json '.prior.mean >= -1 and .prior.mean <= 1 and .prior.variance <= 0.25' true
expect_json '.privacy.charges | length' 1
expect_json '.privacy.charges[0].clients' 3
expect_json '.privacy.charges[0].event.type' gaussian
expect_json '(.privacy.charges[0].cost_eps - .privacy.epsilon) | fabs < 1e-6' true
# a given noise multiplier: epsilon reported at delta, the same noise seeded
expect_status 201 POST /v1/estimators/gaussian "$(printf '%s' "$G" | jq -c '. + {privacy:{model:"central",noise_multiplier:2,delta:1e-5,r:1,b:3}, prior:{variance:0.04}}')"
expect_json '.privacy.noise_multiplier' 2
expect_json '.privacy.sensitivities.sum_of_squares' null
expect_json '.privacy.noise_std.sum' 12
expect_json '.prior.variance' 0.04
# bad combinations name the field
GP='{"clients":[{"mean":0.1,"n":3},{"mean":0.2,"n":3}],"noise_variance":1}'
for bad in 'epsilon0:1,epsilon:1|privacy.epsilon0' 'per_coordinate:true,epsilon:1|privacy.per_coordinate' 'bits:4,epsilon:1|privacy.bits' \
           'mechanism:"quantize",epsilon:1|privacy.mechanism' 'epsilon:1,noise_multiplier:2|privacy.noise_multiplier' \
           'r:1|privacy.epsilon' 'epsilon:-1|privacy.epsilon' 'epsilon:1,delta:2|privacy.delta' ; do
    extra=${bad%|*}; field=${bad#*|}
    body=$(printf '%s' "$GP" | jq -c "{privacy:({model:\"central\",delta:1e-5,r:1,sigma_theta_bound:0.5} + {$extra})} + .")
    expect_status 400 POST /v1/estimators/gaussian "$body"
    expect_json .error.field "$field"
done
expect_status 400 POST /v1/estimators/gaussian "$(printf '%s' "$GP" | jq -c '. + {privacy:{model:"central",epsilon:1,delta:1e-5,sigma_theta_bound:0.5}}')"
expect_json .error.field privacy.r
expect_status 400 POST /v1/estimators/gaussian "$(printf '%s' "$GP" | jq -c '. + {privacy:{model:"central",epsilon:1,delta:1e-5,r:1}}')"
expect_json .error.field privacy.sigma_theta_bound
expect_status 400 POST /v1/estimators/gaussian "$(printf '%s' "$GP" | jq -c '. + {method:"mle", privacy:{model:"central",epsilon:1,delta:1e-5,r:1,b:2}}')"
expect_json .error.field method
expect_status 400 POST /v1/estimators/gaussian "$(printf '%s' "$GP" | jq -c '. + {privacy:{model:"centre",epsilon:1,delta:1e-5,r:1,b:2}}')"
expect_json .error.field privacy.model
expect_status 400 POST /v1/estimators/gaussian "$(printf '%s' "$GP" | jq -c '. + {privacy:{epsilon:1,epsilon0:1,delta:1e-5,r:1,b:2}}')"
expect_json .error.field privacy.epsilon
# central DP for the Beta estimator (issue 15): two noisy sums over the clients' rates and unbiased
# squares; silo d is charged the release's one Gaussian event once for its two clients, and a
# second run it cannot afford is refused with nothing charged or stored
AUTH=$ADM expect_status 201 POST /v1/silos '{"name":"hosp-d","budget":{"epsilon":1.2,"delta":1e-5}}'
SD=$(printf '%s' "$BODY" | jq -r .id)
BCD=$(printf '%s' "$B" | jq -c --argjson d "$SD" '.clients[0].silo_id=$d | .clients[3].silo_id=$d | . + {privacy:{model:"central",epsilon:1,delta:1e-5}, seed:3}')
AUTH=$ADM expect_status 201 POST /v1/estimators/beta "$BCD"
expect_json '.privacy.model' central
expect_json '.privacy.privacy_unit' client
expect_json '.method + " " + .variant + " " + (.leave_one_out | tostring)' 'moments unbiased false'
expect_json '.privacy.epsilon <= 1 and .privacy.epsilon > 0.999999' true
expect_json '(.privacy.noise_std.sum - .privacy.noise_multiplier * 1.4142135623730951) | fabs < 1e-12' true
expect_json '.privacy.sensitivities | [.sum, .sum_of_squares] | tojson' '[1,1]'
expect_json '.privacy.posterior_scope | test("that client alone")' true
expect_json '.log_likelihood' null
expect_json '.prior.mean >= 0 and .prior.mean <= 1' true
expect_json '[.estimates[] | .posterior_mean >= 0 and .posterior_mean <= 1] | all' true
expect_json '.privacy.charges | length' 1
expect_json '.privacy.charges[0].silo_id' "$SD"
expect_json '.privacy.charges[0].clients' 2
expect_json '.privacy.charges[0].event.type' gaussian
expect_json '.privacy.charges[0].event.noise_multiplier == .privacy.noise_multiplier' true
expect_json '(.privacy.charges[0].cost_eps - .privacy.epsilon) | fabs < 1e-6' true
AUTH=$ADM expect_status 200 GET "/v1/silos/$SD"
expect_json .n_charges 1
RUNS_BEFORE=$(curl -s -H "Authorization: Bearer $ADM" "$URL/v1/runs?limit=500" | jq '.runs | length')
AUTH=$ADM expect_status 409 POST /v1/estimators/beta "$BCD"
expect_json .error.code budget_exhausted
expect_json .error.field 'clients[0].silo_id'
AUTH=$ADM expect_status 200 GET "/v1/silos/$SD"
expect_json .n_charges 1
check "a refused central run is not stored" test "$(curl -s -H "Authorization: Bearer $ADM" "$URL/v1/runs?limit=500" | jq '.runs | length')" = "$RUNS_BEFORE"
# a given noise multiplier: its epsilon at delta is reported
expect_status 201 POST /v1/estimators/beta "$(printf '%s' "$B" | jq -c '. + {privacy:{model:"central",noise_multiplier:2,delta:1e-5}}')"
expect_json '.privacy.noise_multiplier' 2
expect_json '.privacy.rho' 0.125
expect_json '.privacy.epsilon > 0' true
# bad privacy blocks and options name the field
for bad in 'epsilon0:1,epsilon:1|privacy.epsilon0' 'scheme:"two_bit",epsilon:1|privacy.scheme' \
           'epsilon:1,noise_multiplier:2|privacy.noise_multiplier' 'delta:2,epsilon:1|privacy.delta' \
           'epsilon:-1|privacy.epsilon' 'model:"centre",epsilon:1|privacy.model' ; do
    extra=${bad%|*}; field=${bad#*|}
    expect_status 400 POST /v1/estimators/beta "$(printf '%s' "$B" | jq -c "{privacy:({model:\"central\",delta:1e-5} + {$extra})} + .")"
    expect_json .error.field "$field"
done
for opt in 'method:"mle"|method' 'variant:"paper"|variant' 'leave_one_out:true|leave_one_out'; do
    extra=${opt%|*}; field=${opt#*|}
    expect_status 400 POST /v1/estimators/beta "$(printf '%s' "$B" | jq -c ". + {$extra, privacy:{model:\"central\",epsilon:1,delta:1e-5}}")"
    expect_json .error.field "$field"
done
expect_status 400 POST /v1/estimators/beta "$(printf '%s' "$B" | jq -c '.clients[2].trials=1 | .clients[2].successes=1 | . + {privacy:{model:"central",epsilon:1,delta:1e-5}}')"
expect_json .error.field 'clients[2].trials'
expect_status 400 POST /v1/estimators/beta "$(printf '%s' "$B" | jq -c '. + {privacy:{epsilon0:1,delta:1e-5}}')"
expect_json .error.field privacy.delta
unset AUTH # the admin token from here on (lib.sh req)

# stored runs
expect_status 200 GET "/v1/runs/$RUN1"
expect_json .kind gaussian
expect_json '.inputs.clients' null
expect_json '.inputs.n_clients' 4
expect_json '.outputs | has("estimates")' false # answered, not kept: the fit alone is stored
expect_json .outputs.keep_results false
expect_json '.created_at | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z$")' true
expect_status 201 POST /v1/estimators/gaussian "$(printf '%s' "$G" | jq -c '. + {keep_data:true}')"
KEPT=$(printf '%s' "$BODY" | jq -r .run_id)
expect_status 200 GET "/v1/runs/$KEPT"
expect_json '.inputs.clients | length' 4
expect_json '.data_kept' true
expect_status 201 POST /v1/estimators/gaussian "$(printf '%s' "$G" | jq -c '. + {keep_results:true}')"
expect_json .keep_results true
expect_status 200 GET "/v1/runs/$(printf '%s' "$BODY" | jq -r .run_id)"
expect_json '.outputs.estimates | length' 4
expect_status 404 GET /v1/runs/999999
expect_status 400 GET /v1/runs/abc
# Regression (QA): ids and query numbers are canonical decimals; strtoll alone answered run 1 for
# "01", " 1" and "+1", and took limit=+2. A malformed id is a 400 as on every route (test_api_ids.sh).
for id in 01 %201 %2B1; do expect_status 400 GET "/v1/runs/$id"; done
expect_status 400 GET '/v1/runs?limit=%2B2'
expect_json .error.field limit
expect_status 400 GET '/v1/runs?after=00'
expect_status 200 GET '/v1/runs?limit=2'
expect_json '.runs | length' 2
expect_json '.runs[0].id' 1
NEXT=$(printf '%s' "$BODY" | jq -r .next_after)
expect_status 200 GET "/v1/runs?limit=2&after=$NEXT"
expect_json '.runs[0].id' 3
expect_status 400 GET '/v1/runs?limit=0'
expect_json .error.field limit
expect_status 200 GET '/v1/runs?limit=500'
TOTAL=$(printf '%s' "$BODY" | jq '.runs | length')
expect_json '.next_after' null

# runs survive a restart
check "daemon stops cleanly" stop_daemon
start_daemon --db "$T/db" --threads 2 || exit 1
expect_status 200 GET "/v1/runs/$RUN1"
expect_json .kind gaussian
expect_status 200 GET '/v1/runs?limit=500'
expect_json '.runs | length' "$TOTAL"
# ---- issue 15: answers that say what they are (docs/ESTIMATORS.md "Status"): every status from a request ----
# converged, with nothing to add
expect_status 201 POST /v1/estimators/gaussian "$G"
expect_json .status converged
expect_json .status_reason null
# boundary: prior variance 0 (the means vary less than their noise): pooled to the mean, said in words
expect_status 201 POST /v1/estimators/gaussian '{"clients":[{"mean":0.01,"n":1},{"mean":-0.01,"n":2},{"mean":0.02,"n":1},{"mean":0,"n":3}],"noise_variance":1}'
expect_json .status boundary
expect_json '.status_reason | test("variance is estimated as 0.*pooled")' true
# boundary: a mixture whose component variances sit at the floor (ESTIMATORS.md EM example) is never
# "converged", and its posterior sds carry the uncertainty of the component means (s/sqrt(2) and
# s/sqrt(3) here, s = 0.158), not sqrt(floor) = 0.00016
MF='{"clients":[{"id":"a","mean":-1.1,"n":10},{"id":"b","mean":-0.9,"n":10},{"id":"c","mean":1.0,"n":10},{"id":"d","mean":1.2,"n":10},{"id":"e","mean":0.9,"n":10}],"noise_variance":0.25,"components":2}'
expect_status 201 POST /v1/estimators/mixture "$MF"
expect_json .status boundary
expect_json '.status_reason | test("floor")' true
expect_json '.estimates[0].posterior_sd * 1e4 | round' 1118
expect_json '.estimates[4].posterior_sd * 1e4 | round' 913
# no_pooling_gain + projection: the private Gaussian example (r = 1) fitted a prior mean of 18.6; it is
# projected onto |mean| <= r, and the run says that its answers are the clients' own means
expect_status 201 POST /v1/estimators/gaussian "$(printf '%s' "$G" | jq -c '. + {privacy:{epsilon0:0.5,delta:1e-5,r:1,sigma_theta_bound:0.1}, seed:7}')"
expect_json .prior.mean 1
expect_json '.fits.moments.mean' 1
expect_json .status no_pooling_gain
expect_json '.status_reason | test("projected") and test("no_pooling_gain")' true
expect_json '[.estimates[].shrinkage] | max < 0.05' true
NG=$(printf '%s' "$BODY" | jq -r .run_id)
expect_status 200 GET "/v1/runs/$NG"
expect_json .status no_pooling_gain
# the newcomer's 300 clients (issue 15): local DP at eps0 = 1 adds nothing, and says so; at eps0 = 5 it
# pools (the variance then exceeds sigma_theta_bound^2 = 0.04 and is projected onto it: boundary)
C300=$(python3 -c '
import json, random
random.seed(3)
print(json.dumps([{"mean": round(random.gauss(0.5, 0.15) + random.gauss(0, (0.25 / 22) ** 0.5), 4), "n": 22} for _ in range(300)]))')
expect_status 201 POST /v1/estimators/gaussian "{\"clients\":$C300,\"noise_variance\":0.25,\"seed\":1,\"privacy\":{\"epsilon0\":1,\"delta\":1e-5,\"r\":1,\"sigma_theta_bound\":0.2}}"
expect_json .status no_pooling_gain
expect_status 201 POST /v1/estimators/gaussian "{\"clients\":$C300,\"noise_variance\":0.25,\"seed\":1,\"privacy\":{\"epsilon0\":5,\"delta\":1e-5,\"r\":1,\"sigma_theta_bound\":0.2}}"
expect_json .status boundary
expect_json '.prior.variance * 1e6 | round' 40000
expect_json '[.estimates[].shrinkage] | max > 0.05' true
# a private mixture's component means are projected onto the public ball |mean| <= r (here r = 0.5)
expect_status 201 POST /v1/estimators/mixture "$(printf '%s' "$M" | jq -c '. + {privacy:{epsilon0:2,delta:1e-5,r:0.5,sigma_theta_bound:0.1}, seed:1}')"
expect_json '[.prior.components[] | (.mean | fabs) <= 0.5 + 1e-12] | all' true
expect_json .status boundary
expect_json '.status_reason | test("projected")' true
# unidentifiable: every client sent the same mean
expect_status 201 POST /v1/estimators/gaussian '{"clients":[{"mean":0.5,"n":3},{"mean":0.5,"n":4},{"mean":0.5,"n":5}],"noise_variance":1}'
expect_json .status unidentifiable
expect_json '.status_reason | test("same value")' true
# max_iter: the fit stopped early, converged false
expect_status 201 POST /v1/estimators/mixture '{"clients":[{"mean":-1,"n":2},{"mean":-1.1,"n":2},{"mean":0.9,"n":2},{"mean":1.2,"n":2},{"mean":1.0,"n":2},{"mean":-0.8,"n":2}],"noise_variance":0.1,"components":2,"max_iter":1}'
expect_json .status max_iter
expect_json .converged false
expect_json '.status_reason | test("max_iter")' true
# degenerate: the paper's one-bit scheme pools every client to a mean clamped to 0 (posterior_sd 0 is
# the clamp's artefact, and the run says so)
expect_status 201 POST /v1/estimators/beta '{"clients":[{"successes":0,"trials":10},{"successes":0,"trials":12},{"successes":0,"trials":8},{"successes":0,"trials":10},{"successes":1,"trials":10}],"method":"moments","variant":"paper_no_minus1","privacy":{"epsilon0":1,"scheme":"paper_1bit"},"seed":1}'
expect_json .status degenerate
expect_json .clamped.mean 5
expect_json '.status_reason | test("artefact of the clamp")' true
# ---- issue 15: the two-bit Beta scheme at eps0 = 2 on four clients (ESTIMATORS.md) no longer turns 7 of 12
# into 0 +- 0: the noise of the pooled mean keeps every client near its own rate, and the run says so
B4='{"clients":[{"successes":3,"trials":10},{"successes":7,"trials":12},{"successes":1,"trials":8},{"successes":5,"trials":10}]'
for seed in 1 2 3; do
    expect_status 201 POST /v1/estimators/beta "$B4,\"privacy\":{\"epsilon0\":2},\"seed\":$seed}"
    expect_json '.estimates[1].posterior_mean > 0.55 and .estimates[1].posterior_mean < 0.6' true
    expect_json '[.estimates[].posterior_sd] | min > 0.1' true
    expect_json .status no_pooling_gain
    expect_json '.prior.reason // "" | test("full pooling") | not' true
done
# (the old regression: eps0 1, seed 1 used to pool every client to a mean clamped to 0, sd 0)
expect_status 201 POST /v1/estimators/beta '{"clients": [{"successes": 3, "trials": 10}, {"successes": 7, "trials": 12}, {"successes": 1, "trials": 8}, {"successes": 5, "trials": 10}], "method": "moments", "privacy": {"epsilon0": 1, "scheme": "two_bit"}, "seed": 1}'
expect_json .status no_pooling_gain
expect_json .clamped.mean 4
expect_json '[.estimates[].posterior_sd] | min > 0.1' true
expect_json '.status_reason | test("point mass")' true
DEG=$(printf '%s' "$BODY" | jq -r .run_id)
expect_status 200 GET "/v1/runs/$DEG"
expect_json .status no_pooling_gain
# ---- issue 15: a standard error per client (se, ebnm's (x, s)) and a non-integer n on the Gaussian route ----
GN='{"clients":[{"id":"a","mean":0.31,"n":15.5},{"id":"b","mean":0.12,"n":8},{"id":"c","mean":0.55,"n":30},{"id":"d","mean":-0.05,"n":4.25}],"noise_variance":0.25}'
expect_status 201 POST /v1/estimators/gaussian "$GN"
BYN=$(printf '%s' "$BODY" | jq -c '[.estimates[] | .posterior_mean, .posterior_sd]')
GS=$(printf '%s' "$GN" | jq -c '{clients: [.clients[] | {id, mean, se: ((0.25 / .n) | sqrt)}]}')
expect_status 201 POST /v1/estimators/gaussian "$GS"
expect_json .noise_variance null
expect_json .noise_variance_source standard_errors
check "se answers equal the n answers (1e-9)" test "$(printf '%s' "$BODY" | jq --argjson n "$BYN" '[[.estimates[] | .posterior_mean, .posterior_sd], $n] | transpose | map((.[0] - .[1]) | fabs < 1e-9) | all')" = true
expect_status 400 POST /v1/estimators/gaussian '{"clients":[{"mean":0.1,"se":0.2},{"mean":0.2,"se":0.3}],"noise_variance":1}'
expect_json .error.field noise_variance
expect_status 400 POST /v1/estimators/gaussian '{"clients":[{"mean":0.1,"se":0.2},{"mean":0.2,"n":3}],"noise_variance":1}'
expect_json .error.field 'clients[1].se'
expect_status 400 POST /v1/estimators/gaussian '{"clients":[{"mean":0.1,"n":0.5},{"mean":0.2,"n":3}],"noise_variance":1}'
expect_json .error.field 'clients[0].n'
finish
