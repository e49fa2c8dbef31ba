#!/usr/bin/env bash
# Ledger rules of issue #10, through HTTP, from the reliability report's reproductions:
#   D8  a PLD silo filled past its RDP bound can be renamed and raised; lowering uses min(RDP, PLD);
#   D10 PLD claim commits record a cumulative epsilon within the cap, never decreasing;
#   D11 a batch idempotency key reused with another set of silos is 409, never a partial replay;
#   silo names are unique among active silos (409, field "name"), reusable once archived;
#   a charge reports the calculator's epsilon (continuous order; pure events: the sum when tighter).
. "$(dirname "$0")/lib.sh"

start_daemon --auth off || exit 1
AUTH=""

# ---- D8: rename, raise and lower a PLD silo ---------------------------------------------------------
expect_status 201 POST /v1/silos '{"name":"p","budget":{"epsilon":3,"delta":1e-5,"accountant":"pld"}}'
P=$(printf '%s' "$BODY" | jq -r .id)
n=0
while [ $n -lt 100 ]; do
    req POST "/v1/silos/$P/charges" '{"event":{"type":"gaussian","noise_multiplier":8}}'
    [ "$STATUS" = 201 ] || break
    n=$((n + 1))
done
check "33 gaussian(8) charges fit a (3, 1e-5) PLD silo (got $n)" [ "$n" = 33 ]
expect_status 200 PATCH "/v1/silos/$P" '{"name":"renamed"}'
expect_json '.name' renamed
expect_status 200 PATCH "/v1/silos/$P" '{"budget":{"epsilon":3.05}}'
expect_json '.budget.epsilon' 3.05
expect_status 200 PATCH "/v1/silos/$P" '{"budget":{"epsilon":3}}'
expect_status 409 PATCH "/v1/silos/$P" '{"budget":{"epsilon":2.9}}'
expect_json '.error.field' budget.epsilon

# ---- D10: PLD claim commits stay within the cap in the audit log -----------------------------------
expect_status 201 POST /v1/silos '{"name":"q","budget":{"epsilon":3,"delta":1e-5,"accountant":"pld"}}'
Q=$(printf '%s' "$BODY" | jq -r .id)
n=0
while [ $n -lt 100 ]; do
    req POST "/v1/silos/$Q/claims" '{"event":{"type":"gaussian","noise_multiplier":8}}'
    [ "$STATUS" = 201 ] || break
    id=$(printf '%s' "$BODY" | jq -r .id)
    req POST "/v1/claims/$id/commit" '{}'
    [ "$STATUS" = 200 ] || break
    n=$((n + 1))
done
check "33 claims committed (got $n)" [ "$n" = 33 ]
expect_status 200 GET "/v1/silos/$Q/charges?limit=100"
expect_json '[.charges[] | select(.cumulative_after.epsilon > 3)] | length' 0
expect_json '[.charges[].cumulative_after.epsilon] | . == sort' true

# ---- D11: a batch key with another silo set -------------------------------------------------------
for s in a b c; do expect_status 201 POST /v1/silos "{\"name\":\"$s\",\"budget\":{\"rho\":10}}"; done
E='{"type":"zcdp","rho":0.1}'
expect_status 201 POST /v1/charges "{\"idempotency_key\":\"BK\",\"charges\":[{\"silo_id\":3,\"event\":$E},{\"silo_id\":4,\"event\":$E}]}"
expect_status 409 POST /v1/charges "{\"idempotency_key\":\"BK\",\"charges\":[{\"silo_id\":3,\"event\":$E},{\"silo_id\":5,\"event\":$E}]}"
expect_json '.error.field' idempotency_key
expect_json '.error.code' conflict
expect_status 200 GET /v1/silos/5
expect_json '.n_charges' 0
expect_status 201 POST /v1/charges "{\"idempotency_key\":\"BK\",\"charges\":[{\"silo_id\":4,\"event\":$E},{\"silo_id\":3,\"event\":$E}]}"
expect_json '[.charges[].replayed] | all' true

# ---- duplicate names --------------------------------------------------------------------------------
expect_status 409 POST /v1/silos '{"name":"a","budget":{"rho":1}}'
expect_json '.error.field' name
expect_status 409 PATCH /v1/silos/4 '{"name":"a"}'
expect_json '.error.field' name
expect_status 200 DELETE /v1/silos/3
expect_status 201 POST /v1/silos '{"name":"a","budget":{"rho":1}}'

# ---- the ledger reports the calculator's epsilon (newcomer report 5(a)); pure events sum up --------
EPOCH='{"type":"self_composed","count":1000,"event":{"type":"poisson_sampled","sampling_rate":0.01,"event":{"type":"gaussian","noise_multiplier":1.1}}}'
expect_status 200 POST /v1/accounting/epsilon "{\"event\":$EPOCH,\"delta\":1e-5}"
CALC=$(printf '%s' "$BODY" | jq -r .epsilon)
expect_status 201 POST /v1/silos '{"name":"sgd","budget":{"epsilon":10,"delta":1e-5}}'
expect_json '.budget.conversion' optimal
SGD=$(printf '%s' "$BODY" | jq -r .id)
expect_status 201 POST "/v1/silos/$SGD/charges" "{\"event\":$EPOCH}"
expect_json '.cost.epsilon' "$CALC"
expect_json '.totals_after.spent_epsilon' "$CALC"
expect_status 200 GET "/v1/silos/$SGD"
expect_json '.spent.epsilon' "$CALC"
PURE='{"type":"pure","epsilon":0.5}'
expect_status 201 POST /v1/silos '{"name":"pure","budget":{"epsilon":1,"delta":1e-9}}'
PU=$(printf '%s' "$BODY" | jq -r .id)
expect_status 201 POST "/v1/silos/$PU/charges" "{\"event\":$PURE}"
expect_status 201 POST "/v1/silos/$PU/charges" "{\"event\":$PURE}"
expect_json '.totals_after.spent_epsilon == 1' true
expect_status 200 POST /v1/accounting/epsilon "{\"event\":{\"type\":\"self_composed\",\"count\":2,\"event\":$PURE},\"delta\":1e-9}"
expect_json '.epsilon == 1' true
expect_json '.basic_composition' true

check "daemon exits 0 on SIGTERM" stop_daemon
finish
