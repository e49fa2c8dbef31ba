#!/usr/bin/env bash
# Ledger regressions found by QA: strict id/limit parsing on every ledger route (plain decimal only,
# like the other routes), "reserved" of a silo without claims after an unbounded-rho charge, and the
# width of the --auth off warning box.
. "$(dirname "$0")/lib.sh"

start_daemon --auth off || exit 1
AUTH=""
expect_status 201 POST /v1/silos '{"name":"a","budget":{"epsilon":1,"delta":1e-5}}'
A=$(printf '%s' "$BODY" | jq -r .id)
check "first silo has id 1" [ "$A" = 1 ]

# ---- ids and limits: "01", " 1", "+1", "+5", " 5" are refused naming the parameter -------------------
for bad in 01 %201 %2B1 1e0 0x1; do
    expect_status 400 GET "/v1/silos/$bad"
    expect_json '.error.field' id
done
expect_status 400 GET "/v1/silos/%2B1/charges"
expect_status 400 POST "/v1/claims/%2B1/abort" '{}'
expect_json '.error.field' id
for bad in %2B5 %205 05 0 1001x; do
    expect_status 400 GET "/v1/silos?limit=$bad"
    expect_json '.error.field' limit
    expect_status 400 GET "/v1/silos/1/charges?limit=$bad"
    expect_json '.error.field' limit
done
expect_status 400 GET "/v1/silos?after=%2B1"
expect_json '.error.field' after
expect_status 400 GET "/v1/silos/1/charges?job_id=%2B7"
expect_json '.error.field' job_id
expect_status 200 GET "/v1/silos/1"
expect_status 200 GET "/v1/silos?limit=5&after=0"
expect_status 200 GET "/v1/silos/1/charges?limit=5&job_id=7"

# ---- reserved with no claims is 0, also once the spent rho is unbounded ------------------------------
PS='{"type":"poisson_sampled","sampling_rate":0.01,"event":{"type":"gaussian","noise_multiplier":2}}'
expect_status 201 POST "/v1/silos/$A/charges" "{\"event\":$PS}"
expect_status 200 GET "/v1/silos/$A"
expect_json '.spent.rho' null
expect_json '.reserved.rho' 0
expect_json '.reserved.epsilon' 0
expect_json '.reserved.active_claims' 0
expect_json '.reserved | has("rho_reason")' false
check "no reason blames a missing delta" bash -c "! printf '%s' '$BODY' | grep -q 'has no delta'"

# ---- the --auth off box: every line as wide as its border ----------------------------------------------
check "warning box printed" grep -q "NO ACCESS CONTROL" "$T/err"
widths=$(grep '^\*' "$T/err" | awk '{ print length($0) }' | sort -u)
check "all box lines 80 columns (got: $(echo $widths))" [ "$widths" = 80 ]
check "stop" stop_daemon
finish
