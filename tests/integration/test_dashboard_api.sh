#!/usr/bin/env bash
# What the dashboard (issue 14) reads that curl could not before: a silo's open claims
# (GET /v1/silos/{id}/claims, paginated like the charge log, same access rule) and the dry run of
# a job spec (POST /v1/jobs/plan: the submission's checks and plan, each bound silo's budget
# checked, nothing stored or charged).
. "$(dirname "$0")/lib.sh"

python3 - >"$T/sites.csv" <<'EOF'
import random
random.seed(11)
print("site,x1,x2,y")
for s in range(3):
    for i in range(40 + 10 * s):
        x = [random.gauss(0, 1) for _ in range(2)]
        print("s%d,%.6f,%.6f,%.6f" % (s, x[0], x[1], 0.5 * x[0] - 0.2 * x[1] + random.gauss(0, 0.1)))
EOF

start_daemon --threads 2 || exit 1

expect_status 201 POST /v1/silos '{"name":"a","budget":{"epsilon":3,"delta":1e-3}}'
A=$(printf '%s' "$BODY" | jq -r .id)
TA=$(printf '%s' "$BODY" | jq -r .token)
expect_status 201 POST /v1/silos '{"name":"b","budget":{"epsilon":10,"delta":1e-3}}'
B=$(printf '%s' "$BODY" | jq -r .id)
TB=$(printf '%s' "$BODY" | jq -r .token)

# ---- open claims: active and unexpired only, in id order, paginated
expect_status 200 GET "/v1/silos/$A/claims"
expect_json '.claims | length' 0
expect_json .next_after null
EV='{"event":{"type":"gaussian","noise_multiplier":4},"timeout_ms":60000}'
expect_status 201 POST "/v1/silos/$A/claims" "$EV"
C1=$(printf '%s' "$BODY" | jq -r .id)
C1_EPS=$(printf '%s' "$BODY" | jq -r .cost.epsilon)
expect_status 201 POST "/v1/silos/$A/claims" "$EV"
C2=$(printf '%s' "$BODY" | jq -r .id)
expect_status 201 POST "/v1/silos/$A/claims" "$EV"
C3=$(printf '%s' "$BODY" | jq -r .id)
expect_status 201 POST "/v1/silos/$A/claims" '{"event":{"type":"gaussian","noise_multiplier":4},"timeout_ms":30}'
expect_status 201 POST "/v1/silos/$A/claims" "$EV"
C5=$(printf '%s' "$BODY" | jq -r .id)
expect_status 200 POST "/v1/claims/$C2/commit"
expect_status 200 POST "/v1/claims/$C3/abort"
AUTH=$TB expect_status 201 POST "/v1/silos/$B/claims" "$EV"
sleep 0.1 # the 30 ms claim has expired
expect_status 200 GET "/v1/silos/$A/claims"
expect_json '[.claims[].id] | map(tostring) | join(",")' "$C1,$C5"
expect_json '[.claims[].state] | unique | join(",")' active
expect_json .next_after null
# epsilon at the silo's delta from the RDP grid: an upper bound, at most 1% above the creation's
# answer (which refines the order continuously)
expect_json ".claims[0].cost.epsilon >= $C1_EPS and .claims[0].cost.epsilon <= 1.01 * $C1_EPS" true
expect_json '.claims[0].cost.rho > 0' true
expect_json '.claims[0].expires_at > .claims[0].created_at' true
expect_status 200 GET "/v1/silos/$A"
expect_json .reserved.active_claims 2
expect_status 200 GET "/v1/silos/$A/claims?limit=1"
expect_json '[.claims[].id] | map(tostring) | join(",")' "$C1"
expect_json .next_after "$C1"
expect_status 200 GET "/v1/silos/$A/claims?limit=1&after=$C1"
expect_json '[.claims[].id] | map(tostring) | join(",")' "$C5"
expect_json .next_after null
# the charge log's access rule: the admin or that silo's token
AUTH=$TA expect_status 200 GET "/v1/silos/$A/claims"
AUTH=$TB expect_status 403 GET "/v1/silos/$A/claims"
AUTH="" expect_status 401 GET "/v1/silos/$A/claims"
expect_status 404 GET /v1/silos/999/claims
expect_json .error.field id
expect_status 400 GET "/v1/silos/$A/claims?limit=0"
expect_json .error.field limit
expect_status 400 GET "/v1/silos/$A/claims?state=active"
expect_status 200 POST "/v1/claims/$C1/abort"
expect_status 200 POST "/v1/claims/$C5/abort"

# ---- the dry run of a job spec
expect_status 201 POST '/v1/datasets?label=y&silo=site&name=sites' "@$T/sites.csv" text/csv
DS=$(printf '%s' "$BODY" | jq -r .id)
SPEC='"algorithm":"mrmtl","lambda":1,"dataset":'$DS',"model":{"type":"linear"},"batch_size":16,"lr":0.05,"seed":3,"rounds":20'
PRIV='"privacy":{"target_epsilon":6,"delta":1e-3,"clip":1}'
# the submission's 400s, naming the same field
for bad in '"batch_size":0' '"silos":{"nope":1}' '"rounds":0'; do
    JOB='{'"$SPEC"','"$PRIV"','"$bad"'}'
    JOB=$(printf '%s' "$JOB" | jq -c '.') # one key each (jq keeps the later one)
    req POST /v1/jobs "$JOB"
    WANT_STATUS=$STATUS WANT_FIELD=$(printf '%s' "$BODY" | jq -r .error.field)
    expect_status "$WANT_STATUS" POST /v1/jobs/plan "$JOB"
    expect_json .error.field "$WANT_FIELD"
done
expect_status 400 POST /v1/jobs/plan '{'"$SPEC"',"colour":"red"}'
expect_json .error.field colour
expect_status 400 POST /v1/jobs/plan '[1]'
# refuse: silo a cannot afford epsilon 6; the plan says so, with the 409 the submission answers
REFUSE='{'"$SPEC"','"$PRIV"',"silos":{"s0":'$A',"s1":'$B'}}'
expect_status 200 POST /v1/jobs/plan "$REFUSE"
PLAN=$BODY
expect_json .admitted false
expect_json .on_budget_exhausted refuse
expect_json .rounds 20
expect_json '.plan.silos | length' 3
expect_json '[.plan.silos[] | .epsilon <= 6 and .epsilon > 5.9] | all' true
expect_json '[.budget_checks[] | .silo] | join(",")' s0,s1
expect_json '[.budget_checks[] | .affordable] | map(tostring) | join(",")' false,true
expect_json ".budget_checks[0] | .silo_id == $A and .budget == 3 and .would_be > 3 and .unit == \"epsilon\"" true
expect_json '.budget_checks[0].planned_epsilon == .plan.silos[0].epsilon' true
expect_json .refusal.error.code budget_exhausted
expect_json .refusal.error.field silos.s0
expect_status 409 POST /v1/jobs "$REFUSE"
check "the plan's refusal is the submission's 409" test \
    "$(printf '%s' "$BODY" | jq -c '.error | del(.request_id)')" = "$(printf '%s' "$PLAN" | jq -c '.refusal.error | del(.request_id)')"
# nothing stored, nothing charged
expect_status 200 GET /v1/jobs
expect_json '.jobs | length' 0
expect_status 200 GET "/v1/silos/$A"
expect_json .n_charges 1 # the committed claim's
expect_json .reserved.active_claims 0
# stop_silo: admitted, and the check still says which silo will stop early
expect_status 200 POST /v1/jobs/plan '{'"$SPEC"','"$PRIV"',"silos":{"s0":'$A',"s1":'$B'},"on_budget_exhausted":"stop_silo"}'
expect_json .admitted true
expect_json .refusal null
expect_json '[.budget_checks[] | .affordable] | map(tostring) | join(",")' false,true
# an affordable job: the plan is exactly the one the submission stores
OKJOB='{'"$SPEC"',"privacy":{"target_epsilon":2,"delta":1e-3,"clip":1},"silos":{"s0":'$A'}}'
expect_status 200 POST /v1/jobs/plan "$OKJOB"
expect_json .admitted true
expect_json '.budget_checks[0].affordable' true
PLANNED=$(printf '%s' "$BODY" | jq -S -c .plan)
expect_status 202 POST /v1/jobs "$OKJOB"
check "the dry run's plan is the stored plan" test "$(printf '%s' "$BODY" | jq -S -c .plan)" = "$PLANNED"
# a silo's token may bind only its own silo, in the dry run too
AUTH=$TA expect_status 403 POST /v1/jobs/plan '{'"$SPEC"','"$PRIV"',"silos":{"s1":'$B'}}'
expect_json .error.field silos.s1
# a job without privacy or bindings: a plan with no checks
expect_status 200 POST /v1/jobs/plan '{'"$SPEC"'}'
expect_json '.budget_checks | length' 0
expect_json .admitted true

stop_daemon || fail "dpsilod exited non-zero"
finish
