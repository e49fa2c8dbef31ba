#!/usr/bin/env bash
# ifca jobs end to end (issue 13; Liu et al., NeurIPS 2022, App. A and Alg. A2): the plan shows each
# silo's DP-SGD round event and the event of its selection rounds (the round's composed with the
# exponential mechanism's zCDP eps^2/8), the ledger is charged exactly those events, round by
# round, the metrics report each silo's cluster, and a target the selections alone exceed is a 422.
. "$(dirname "$0")/lib.sh"

poll_status() { # poll_status ID WANT [seconds]
    local id=$1 want=$2 n=$((${3:-60} * 10)) got=""
    for _ in $(seq 1 "$n"); do
        got=$(curl -s -H "Authorization: Bearer $ADMIN" "$URL/v1/jobs/$id" | jq -r .status)
        [ "$got" = "$want" ] && return 0
        case "$got" in succeeded | failed | cancelled | interrupted) break ;; esac
        sleep 0.1
    done
    echo "job $id: status $got, want $want"
    return 1
}

start_daemon --threads 2 || exit 1
ADMIN=$(head -1 "$ADMIN_TOKEN_FILE")

expect_status 201 POST /v1/silos '{"name":"north","budget":{"epsilon":10,"delta":1e-5}}'
S0=$(printf '%s' "$BODY" | jq -r .id)
expect_status 201 POST /v1/silos '{"name":"south","budget":{"epsilon":10,"delta":1e-5}}'
S1=$(printf '%s' "$BODY" | jq -r .id)

SPEC='"algorithm":"ifca","dataset":{"generator":"synthetic-linreg","silos":4,"dim":3,"n_min":60,"n_max":90,"tau":1,"seed":3},"model":{"type":"linear"},"batch_size":16,"lr":0.1,"seed":9'
expect_status 202 POST /v1/jobs '{'"$SPEC"',"rounds":6,"ifca":{"clusters":2,"select_rounds":2,"selection_epsilon":0.2},"privacy":{"target_epsilon":3,"delta":1e-5,"clip":1},"silos":{"0":'"$S0"',"1":'"$S1"'}}'
J=$(printf '%s' "$BODY" | jq -r .id)
PLAN=$BODY
expect_json .plan.ifca.clusters 2
expect_json .plan.ifca.select_rounds 2
expect_json '[.plan.silos[].select_rounds] | unique | join(",")' 2
expect_json '[.plan.silos[].select_event.type] | unique | join(",")' composed
expect_json '[.plan.silos[].epsilon | . <= 3 and . > 2.99] | all' true
expect_json '.plan.silos[0].select_event.events[1] | (.type == "zcdp" and ((.rho - 0.005) | fabs) < 1e-15)' true
poll_status "$J" succeeded 60 || fail "ifca job $J did not succeed"
expect_status 200 GET "/v1/jobs/$J/metrics"
M=$BODY
check "ifca: every silo reports its cluster every round" test "$(printf '%s' "$M" | jq -r '[.rounds[].silos[].cluster | . == 0 or . == 1] | (length == 24 and all)')" = true
check "ifca: every silo was charged every round" test "$(printf '%s' "$M" | jq -r '[.rounds[-1].silos[].rounds_charged == 6] | all')" = true
check "ifca: the job epsilon is the plan's" test "$(printf '%s' "$M" | jq -r --argjson p "$PLAN" '[.rounds[-1].silos | to_entries[] | (.value.job_epsilon - $p.plan.silos[.key].epsilon) | fabs < 1e-12] | all')" = true
check "ifca: after the selection rounds the epsilon grows by DP-SGD only" test "$(printf '%s' "$M" | jq -r '.rounds[1].silos[2].job_epsilon < .rounds[2].silos[2].job_epsilon')" = true
# the ledger holds exactly the planned events: 2 selection rounds, then 4 DP-SGD rounds
expect_status 200 GET "/v1/silos/$S0/charges?limit=100"
CH=$BODY
check "ifca: 6 charges for the bound silo" test "$(printf '%s' "$CH" | jq -r '.charges | length')" = 6
SEL=$(printf '%s' "$PLAN" | jq -cS '.plan.silos[0].select_event')
RND=$(printf '%s' "$PLAN" | jq -cS '.plan.silos[0].round_event')
check "ifca: rounds 1-2 charge the selection round's event" test "$(printf '%s' "$CH" | jq -r --argjson s "$SEL" '[.charges | sort_by(.seq) | .[0:2][] | .event == $s] | all')" = true
check "ifca: rounds 3-6 charge the DP-SGD round's event" test "$(printf '%s' "$CH" | jq -r --argjson r "$RND" '[.charges | sort_by(.seq) | .[2:6][] | .event == $r] | all')" = true
check "ifca: the selection charges say so" test "$(printf '%s' "$CH" | jq -r '[.charges | sort_by(.seq) | .[0:2][] | .reason | test("cluster selection")] | all')" = true
E0=$(printf '%s' "$M" | jq -r '.rounds[-1].silos[0].epsilon')
expect_status 200 GET "/v1/silos/$S0"
expect_json "((.spent.epsilon - $E0) | fabs) <= 1e-12" true
expect_json ".spent.epsilon <= $(printf '%s' "$PLAN" | jq -r '.plan.silos[0].epsilon')" true

# the spec's ifca block is checked whole, each refusal naming its field
expect_status 400 POST /v1/jobs '{'"$SPEC"',"rounds":6,"ifca":{"clusters":0}}'
expect_json .error.field ifca.clusters
expect_status 400 POST /v1/jobs '{'"$SPEC"',"rounds":6,"ifca":{"warm_rounds":7}}'
expect_json .error.field ifca.warm_rounds
expect_status 400 POST /v1/jobs '{'"$SPEC"',"rounds":6,"privacy":{"noise_multiplier":2,"delta":1e-5,"clip":1}}'
expect_json .error.field ifca.selection_epsilon
expect_status 400 POST /v1/jobs '{'"$SPEC"',"rounds":6,"ifca":{"selection_epsilon":0.1}}'
expect_json .error.field ifca.selection_epsilon
expect_status 400 POST /v1/jobs '{"algorithm":"fedavg","dataset":1,"model":{"type":"linear"},"rounds":5,"batch_size":8,"lr":0.05,"ifca":{}}'
expect_json .error.field ifca
# selecting every round at 0.5 each: the selections alone cost more than epsilon 3 (Liu et al.,
# Fig. 4: "IFCA selecting every round" is infeasible)
expect_status 422 POST /v1/jobs '{'"$SPEC"',"rounds":40,"ifca":{"selection_epsilon":0.5},"privacy":{"target_epsilon":3,"delta":1e-5,"clip":1}}'
expect_json .error.code numerical_failure
finish
