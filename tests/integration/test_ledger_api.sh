#!/usr/bin/env bash
# Budgets over HTTP (issue #5): silo lifecycle, charges, idempotency, 409 figures, batch all-or-nothing,
# claims, audit log, access control (401/403, tokens cannot cross silos, tokens never logged), opt-out
# and rho silos, persistence across a restart, and the --auth off rules.
. "$(dirname "$0")/lib.sh"

start_daemon || exit 1
ADM=$(cat "$T/admin.token")
check "admin token generated with mode 0600" [ "$(stat -c %a "$T/admin.token")" = 600 ]
check "admin token is 68 characters" [ "${#ADM}" -eq 68 ]

G5='{"type":"gaussian","noise_multiplier":5}'

# ---- access control ---------------------------------------------------------------------------------
AUTH="" expect_status 401 POST /v1/silos '{"name":"a","budget":{"epsilon":1,"delta":1e-5}}'
expect_json '.error.code' unauthenticated
AUTH="dps_0000" expect_status 401 GET /v1/silos
AUTH=$ADM
expect_status 201 POST /v1/silos '{"name":"hospital-a","budget":{"epsilon":1,"delta":1e-5}}'
A=$(printf '%s' "$BODY" | jq -r .id)
TA=$(printf '%s' "$BODY" | jq -r .token)
check "Location of the new silo" [ "$(header Location)" = "/v1/silos/$A" ]
expect_json '.budget.accountant' rdp
expect_json '.remaining.epsilon' 1
expect_status 201 POST /v1/silos '{"name":"hospital-b","budget":{"epsilon":3,"delta":1e-6}}'
B=$(printf '%s' "$BODY" | jq -r .id)
TB=$(printf '%s' "$BODY" | jq -r .token)
check "silo tokens differ" [ "$TA" != "$TB" ]

AUTH=$TB expect_status 403 GET "/v1/silos/$A"
AUTH=$TB expect_status 403 POST "/v1/silos/$A/charges" "{\"event\":$G5}"
AUTH=$TB expect_status 403 GET "/v1/silos/$A/charges"
AUTH=$TB expect_status 403 POST /v1/charges "{\"charges\":[{\"silo_id\":$A,\"event\":$G5}]}"
AUTH=$TA expect_status 403 GET /v1/silos
AUTH=$TA expect_status 403 POST /v1/silos '{"name":"x","budget":{"epsilon":1,"delta":1e-5}}'
AUTH=$TA expect_status 403 PATCH "/v1/silos/$A" '{"budget":{"epsilon":9}}'
AUTH=$TA expect_status 403 DELETE "/v1/silos/$A"
AUTH=$TA expect_status 200 GET "/v1/silos/$A"
expect_json '.n_charges' 0
AUTH=$ADM expect_status 200 GET /v1/silos
expect_json '.silos | length' 2

# ---- charges ---------------------------------------------------------------------------------------
AUTH=$TA
expect_status 201 POST "/v1/silos/$A/charges" "{\"event\":$G5,\"idempotency_key\":\"r1\",\"reason\":\"round 1\",\"job_id\":7}"
ID1=$(printf '%s' "$BODY" | jq -r .id)
EPS1=$(printf '%s' "$BODY" | jq -r .totals_after.spent_epsilon)
expect_json '.replayed' false
expect_json '.cost.rho' 0.02
expect_status 201 POST "/v1/silos/$A/charges" "{\"event\":$G5,\"idempotency_key\":\"r1\",\"reason\":\"round 1\",\"job_id\":7}"
expect_json '.replayed' true
expect_json '.id' "$ID1"
expect_json '.totals_after.spent_epsilon' "$EPS1"
expect_status 409 POST "/v1/silos/$A/charges" '{"event":{"type":"gaussian","noise_multiplier":9},"idempotency_key":"r1"}'
expect_json '.error.code' conflict
expect_json '.error.field' idempotency_key
expect_status 200 POST "/v1/silos/$A/charges" '{"event":{"type":"gaussian","noise_multiplier":50},"dry_run":true}'
expect_json '.dry_run' true
expect_json '.id' null
expect_status 409 POST "/v1/silos/$A/charges" "{\"event\":$G5,\"dry_run\":true}"
expect_json '.error.code' budget_exhausted
expect_status 409 POST "/v1/silos/$A/charges" "{\"event\":$G5}"
expect_json '.error.code' budget_exhausted
expect_json '.error.details.unit' epsilon
expect_json '.error.details.budget' 1
expect_json '.error.details.spent' "$EPS1"
expect_json '(.error.details.would_be > .error.details.budget)' true
expect_json '(.error.details.requested > 0)' true
expect_status 200 GET "/v1/silos/$A?verify=true"
expect_json '.n_charges' 1
expect_json '.verification.consistent' true
expect_json '.spent.epsilon' "$EPS1"

# bad input names the field
expect_status 400 POST "/v1/silos/$A/charges" '{"event":{"type":"gaussian","noise_multiplier":5},"bogus":1}'
expect_json '.error.field' bogus
expect_status 400 POST "/v1/silos/$A/charges" '{"reason":"no event"}'
expect_json '.error.field' event
expect_status 400 POST "/v1/silos/$A/charges" "{\"event\":$G5,\"neighboring\":\"sideways\"}"
expect_json '.error.field' neighboring
expect_status 400 POST "/v1/silos/abc/charges" "{\"event\":$G5}"
expect_json '.error.field' id
AUTH=$ADM expect_status 404 GET /v1/silos/999
AUTH=$ADM expect_status 400 POST /v1/silos '{"name":"x","budget":{"epsilon":1}}'
expect_json '.error.field' budget.delta
AUTH=$ADM expect_status 400 POST /v1/silos '{"name":"x","budget":{"epsilon":1,"delta":2}}'
expect_json '.error.field' budget.delta
AUTH=$ADM expect_status 400 POST /v1/silos '{"name":"x","budget":{"epsilon":1,"delta":1e-5,"accountant":"magic"}}'
expect_json '.error.field' budget.accountant

# ---- batch: all or nothing ----------------------------------------------------------------------------
AUTH=$ADM
expect_status 201 POST /v1/charges "{\"idempotency_key\":\"round-2\",\"charges\":[{\"silo_id\":$B,\"event\":$G5},{\"silo_id\":$A,\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":500}}]}"
expect_json '.charges | length' 2
expect_status 409 POST /v1/charges "{\"charges\":[{\"silo_id\":$B,\"event\":$G5},{\"silo_id\":$A,\"event\":$G5}]}"
expect_json '.error.code' budget_exhausted
expect_json '.error.field' 'charges[1]'
expect_json '.error.details.silo_id' "$A"
expect_status 200 GET "/v1/silos/$B"
expect_json '.n_charges' 1

# ---- budgets: raise, lower, archive -------------------------------------------------------------------
expect_status 409 PATCH "/v1/silos/$A" '{"budget":{"epsilon":0.5}}'
expect_json '.error.field' budget.epsilon
expect_status 200 PATCH "/v1/silos/$A" '{"budget":{"epsilon":2.5},"name":"hospital-a2"}'
expect_json '.budget.epsilon' 2.5
expect_json '.name' hospital-a2
AUTH=$TA expect_status 201 POST "/v1/silos/$A/charges" "{\"event\":$G5,\"job_id\":8}"

# ---- claims -------------------------------------------------------------------------------------------
AUTH=$TB
expect_status 201 POST "/v1/silos/$B/claims" '{"event":{"type":"zcdp","rho":0.05},"timeout_ms":60000}'
C1=$(printf '%s' "$BODY" | jq -r .id)
expect_json '.state' active
expect_status 200 GET "/v1/silos/$B"
expect_json '.reserved.active_claims' 1
AUTH=$TA expect_status 403 POST "/v1/claims/$C1/commit"
expect_status 400 POST "/v1/claims/$C1/commit" '{"job_id":1}'
expect_json '.error.field' job_id
expect_json '.error.message' "commit takes no body fields"
expect_status 400 POST "/v1/claims/$C1/abort" '{"reason":"x"}'
expect_json '.error.field' reason
expect_json '.error.message' "abort takes no body fields"
expect_status 200 POST "/v1/claims/$C1/commit"
expect_json '.state' committed
expect_json '.charge.seq' 2
expect_status 409 POST "/v1/claims/$C1/abort"
expect_status 201 POST "/v1/silos/$B/claims" '{"event":{"type":"zcdp","rho":0.05},"timeout_ms":40}'
C2=$(printf '%s' "$BODY" | jq -r .id)
sleep 0.2
expect_status 409 POST "/v1/claims/$C2/commit"
expect_status 200 GET "/v1/claims/$C2"
expect_json '.state' expired
expect_status 201 POST "/v1/silos/$B/claims" '{"event":{"type":"zcdp","rho":0.05}}'
C3=$(printf '%s' "$BODY" | jq -r .id)
expect_status 200 POST "/v1/claims/$C3/abort"
expect_json '.state' aborted
expect_status 409 POST "/v1/silos/$B/claims" '{"event":{"type":"gaussian","noise_multiplier":0.5}}'
expect_json '.error.code' budget_exhausted
expect_status 200 GET "/v1/silos/$B?verify=true"
expect_json '.n_charges' 2
expect_json '.reserved.active_claims' 0
expect_json '.verification.consistent' true

# ---- audit log ----------------------------------------------------------------------------------------
AUTH=$TA
expect_status 200 GET "/v1/silos/$A/charges"
expect_json '.charges | length' 3
expect_json '.charges[0].idempotency_key' r1
expect_json '.charges[0].reason' 'round 1'
expect_json '.charges[0].event.noise_multiplier' 5
expect_json '.charges[0].actor_token_id != null' true
expect_json '.charges[0].cumulative_after.epsilon' "$EPS1"
expect_json '(.charges[2].cumulative_after.epsilon > .charges[1].cumulative_after.epsilon)' true
expect_status 200 GET "/v1/silos/$A/charges?job_id=8"
expect_json '.charges | length' 1
expect_status 200 GET "/v1/silos/$A/charges?limit=2"
expect_json '.charges | length' 2
NEXT=$(printf '%s' "$BODY" | jq -r .next_after)
expect_status 200 GET "/v1/silos/$A/charges?after=$NEXT"
expect_json '.charges | length' 1
expect_status 200 GET "/v1/silos/$A/charges?since=2000-01-01T00:00:00Z&until=2000-01-02T00:00:00Z"
expect_json '.charges | length' 0
expect_status 400 GET "/v1/silos/$A/charges?since=yesterday"
expect_json '.error.field' since

# ---- opt-out and rho silos ------------------------------------------------------------------------------
AUTH=$ADM
expect_status 201 POST /v1/silos '{"name":"opted-out","budget":{"private":false}}'
O=$(printf '%s' "$BODY" | jq -r .id)
expect_json '.spent.epsilon' null
for i in 1 2 3; do
    expect_status 201 POST "/v1/silos/$O/charges" '{"event":{"type":"pure","epsilon":100}}'
done
expect_status 200 GET "/v1/silos/$O"
expect_json '.n_charges' 3
expect_json '.remaining' null
expect_status 201 POST /v1/silos '{"name":"zc","budget":{"rho":0.1}}'
Z=$(printf '%s' "$BODY" | jq -r .id)
expect_json '.budget.accountant' zcdp
expect_status 201 POST "/v1/silos/$Z/charges" '{"event":{"type":"zcdp","rho":0.0625}}'
expect_status 409 POST "/v1/silos/$Z/charges" '{"event":{"type":"zcdp","rho":0.0625}}'
expect_json '.error.details.unit' rho
expect_json '.error.details.would_be' 0.125
expect_status 422 POST "/v1/silos/$Z/charges" '{"event":{"type":"poisson_sampled","sampling_rate":0.01,"event":{"type":"gaussian","noise_multiplier":1}}}'

# a PLD silo: the log is recomposed; spent never exceeds the RDP figure of the same log
expect_status 201 POST /v1/silos '{"name":"tight","budget":{"epsilon":2.5,"delta":1e-5,"accountant":"pld"}}'
PL=$(printf '%s' "$BODY" | jq -r .id)
expect_json '.budget.accountant' pld
EP='{"type":"self_composed","count":1000,"event":{"type":"poisson_sampled","sampling_rate":0.01,"event":{"type":"gaussian","noise_multiplier":1.1}}}'
expect_status 201 POST "/v1/silos/$PL/charges" "{\"event\":$EP}"
expect_status 201 POST "/v1/silos/$PL/charges" "{\"event\":$EP}"
expect_status 200 GET "/v1/silos/$PL?verify=true"
expect_json '.n_charges' 2
expect_json '.verification.consistent' true
expect_json '(.spent.epsilon < 2.3809347587077587)' true
expect_json '(.spent.epsilon > 0)' true

# ---- archive keeps the log ----------------------------------------------------------------------------------
expect_status 200 DELETE "/v1/silos/$A"
expect_json '.archived' true
AUTH=$TA expect_status 409 POST "/v1/silos/$A/charges" "{\"event\":$G5}"
AUTH=$TA expect_status 200 GET "/v1/silos/$A/charges"
expect_json '.charges | length' 3
expect_status 200 GET /v1/silos
expect_json "[.silos[].id] | index($A)" null
expect_status 200 GET "/v1/silos?archived=true"
expect_json "[.silos[].id] | index($A) != null" true

# ---- /metrics counts the ledger's group commits (any valid token; not open like /healthz) --------------------
AUTH="" expect_status 401 GET /metrics
AUTH=$TA expect_status 200 GET /metrics
check "metrics: group commits counted" bash -c "grep -q '^dpsilo_ledger_group_commits_total [1-9]' '$T/body'"
check "metrics: ledger ops counted" bash -c "grep -q '^dpsilo_ledger_ops_total [1-9]' '$T/body'"
# the same event charged again took its RDP curve from the ledger's cost cache
check "metrics: curve cache hits counted" bash -c "grep -q '^dpsilo_ledger_curve_cache_hits_total [1-9]' '$T/body'"
check "metrics: curve cache entries" bash -c "grep -q '^dpsilo_ledger_curve_cache_entries [1-9]' '$T/body'"

# ---- a round's charge after its dry run takes the dry run's would-be epsilon: the same figures as a silo
# charged the same events without a dry run, and counted in /metrics ------------------------------------------
R='{"type":"self_composed","count":38,"event":{"type":"poisson_sampled","sampling_rate":0.027,"event":{"type":"gaussian","noise_multiplier":1.1}}}'
expect_status 201 POST /v1/silos '{"name":"round-r1","budget":{"epsilon":100,"delta":1e-5}}'
R1=$(printf '%s' "$BODY" | jq -r .id)
expect_status 201 POST /v1/silos '{"name":"round-r2","budget":{"epsilon":100,"delta":1e-5}}'
R2=$(printf '%s' "$BODY" | jq -r .id)
reused() { AUTH=$TA req GET /metrics >/dev/null; sed -n 's/^dpsilo_ledger_would_be_reused_total //p' "$T/body"; }
for round in 1 2 3; do
    N0=$(reused)
    expect_status 200 POST /v1/charges "{\"charges\":[{\"silo_id\":$R1,\"event\":$R}],\"dry_run\":true}"
    DRY=$(printf '%s' "$BODY" | jq -c '.charges[0] | [.cost, .totals_after]')
    expect_status 201 POST /v1/charges "{\"charges\":[{\"silo_id\":$R1,\"event\":$R}]}"
    WITH=$(printf '%s' "$BODY" | jq -c '.charges[0] | [.cost, .totals_after]')
    expect_status 201 POST /v1/charges "{\"charges\":[{\"silo_id\":$R2,\"event\":$R}]}"
    WITHOUT=$(printf '%s' "$BODY" | jq -c '.charges[0] | [.cost, .totals_after]')
    check "round $round: the charge after its dry run has the figures of one without ($WITH)" \
        test "$WITH" = "$WITHOUT"
    check "round $round: and the dry run's" test "$WITH" = "$DRY"
    check "round $round: one would-be epsilon reused ($N0 -> $(reused))" test "$(reused)" = $((N0 + 1))
done

# ---- restart: everything persists, tokens still work ----------------------------------------------------------
check "daemon stops cleanly" stop_daemon
start_daemon || exit 1
AUTH=$TB expect_status 200 GET "/v1/silos/$B?verify=true"
expect_json '.n_charges' 2
expect_json '.verification.consistent' true
AUTH=$TB expect_status 403 GET "/v1/silos/$A"
check "stop after restart" stop_daemon

# ---- no token ever reaches the logs ----------------------------------------------------------------------------
for tok in "$ADM" "$TA" "$TB"; do
    check "token absent from stderr and stdout" bash -c "! grep -qF '$tok' '$T/err' '$T/out'"
done

# ---- --auth off: loopback only, loud --------------------------------------------------------------------------
"$DPSILOD" --listen 0.0.0.0:0 --auth off --db "$T/db2" >"$T/o2" 2>"$T/e2"
check "--auth off refused off loopback (exit 2)" [ $? -eq 2 ]
check "the refusal names --auth" grep -q -- "--auth off is allowed only" "$T/e2"
start_daemon --auth off --db "$T/db3" || exit 1
check "a loud warning when auth is off" grep -q "NO ACCESS CONTROL" "$T/err"
AUTH="" expect_status 201 POST /v1/silos '{"name":"dev","budget":{"epsilon":1,"delta":1e-5}}'
check "stop" stop_daemon

finish
