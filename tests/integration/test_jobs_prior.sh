#!/usr/bin/env bash
# adamix and gaussian_prior over HTTP (issue 13; Ozkara, Acharya et al., ICLR 2023, Alg. 1, Alg. 4
# and Alg. 5; docs/TRAINING.md "adamix and gaussian_prior"): jobs submitted with curl run to the
# end, the plan shows each block as run and says the job is not private (no epsilon, nothing
# charged), the metrics show the personal models beating the prior mean on heterogeneous silos, and
# bad specs are refused with a 400 naming the field.
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
    curl -s -H "Authorization: Bearer $ADMIN" "$URL/v1/jobs/$id" | jq -c '{status, reason}'
    return 1
}

start_daemon --threads 2 || exit 1
ADMIN=$(head -1 "$ADMIN_TOKEN_FILE")

LIN='"dataset":{"generator":"synthetic-linreg","silos":8,"dim":4,"n_min":30,"n_max":40,"tau":1,"seed":2},"model":{"type":"linear"},"batch_size":16,"lr":1,"seed":5'
CLS='"dataset":{"generator":"synthetic-classification","silos":6,"dim":3,"n_min":40,"n_max":50,"classes":2,"tau":1,"seed":4},"model":{"type":"logistic"},"batch_size":16,"lr":1,"seed":5'

# ---- gaussian_prior, em (linear): the personal models against the prior mean mu
expect_status 202 POST /v1/jobs '{"algorithm":"gaussian_prior",'"$LIN"',"rounds":10,"gaussian_prior":{"variant":"em"}}'
JE=$(printf '%s' "$BODY" | jq -r .id)
expect_json '.plan.silos[0].epsilon' null
expect_json '.plan.gaussian_prior | [.private, .variant, .steps, .sigma_theta2, .lr_var] | map(tostring) | join(",")' false,em,1,1,1
poll_status "$JE" succeeded 60 || fail "gaussian_prior em job $JE did not succeed"
expect_status 200 GET "/v1/jobs/$JE/metrics?after=9"
check "gaussian_prior em: personal models beat the prior mean on heterogeneous silos" \
    test "$(printf '%s' "$BODY" | jq -r '.rounds[0] | .personalized.test_mse < .global.test_mse')" = true
check "gaussian_prior em: the round reports the learnt variances" \
    test "$(printf '%s' "$BODY" | jq -r '.rounds[0] | .sigma_theta2 > 0 and .sigma_x2 > 0')" = true

# ---- gaussian_prior, gd (Alg. 5, logistic) and adamix (Alg. 1)
expect_status 202 POST /v1/jobs '{"algorithm":"gaussian_prior",'"$CLS"',"rounds":6,"gaussian_prior":{"steps":3,"lr_var":0.5,"sigma_theta2":2}}'
JL=$(printf '%s' "$BODY" | jq -r .id)
expect_json '.plan.gaussian_prior | [.variant, .steps, .sigma_theta2, .lr_var] | map(tostring) | join(",")' gd,3,2,0.5
expect_status 202 POST /v1/jobs '{"algorithm":"adamix",'"$LIN"',"rounds":8,"adamix":{"components":2,"steps":10,"noise_var":0.01}}'
JM=$(printf '%s' "$BODY" | jq -r .id)
expect_json '.plan.adamix | [.private, .components, .steps, .em_iters, .noise_var, .var_floor] | map(tostring) | join(",")' false,2,10,3,0.01,0.0001
poll_status "$JL" succeeded 60 || fail "gaussian_prior gd job $JL did not succeed"
expect_status 200 GET "/v1/jobs/$JL/metrics?after=5"
check "gaussian_prior gd: a logistic job reports accuracies" \
    test "$(printf '%s' "$BODY" | jq -r '.rounds[0].personalized.test_accuracy > 0.5')" = true
poll_status "$JM" succeeded 60 || fail "adamix job $JM did not succeed"
expect_status 200 GET "/v1/jobs/$JM/metrics?after=7"
check "adamix: no global model, personal models evaluated" \
    test "$(printf '%s' "$BODY" | jq -r '.rounds[0] | .global == null and .personalized.test_mse > 0')" = true
check "adamix: the round reports the fitted mixture" \
    test "$(printf '%s' "$BODY" | jq -r '.rounds[0].mixture | (.weights | length) == 2 and ((.weights | add) - 1 | fabs) < 1e-6 and (.variances | min) >= 0.0000999')" = true

# ---- refused with the field named
expect_status 400 POST /v1/jobs '{"algorithm":"adamix",'"$LIN"',"rounds":1,"privacy":{"target_epsilon":2,"delta":1e-3,"clip":1}}'
expect_json .error.field privacy
expect_status 400 POST /v1/jobs '{"algorithm":"adamix",'"$LIN"',"rounds":1,"adamix":{"components":0}}'
expect_json .error.field adamix.components
expect_status 400 POST /v1/jobs '{"algorithm":"adamix",'"$LIN"',"rounds":1,"adamix":{"typo":1}}'
expect_json .error.field adamix.typo
expect_status 400 POST /v1/jobs '{"algorithm":"gaussian_prior",'"$LIN"',"rounds":1,"adamix":{"steps":2}}'
expect_json .error.field adamix
expect_status 400 POST /v1/jobs '{"algorithm":"gaussian_prior",'"$LIN"',"rounds":1,"gaussian_prior":{"variant":"map"}}'
expect_json .error.field gaussian_prior.variant
expect_status 400 POST /v1/jobs '{"algorithm":"gaussian_prior",'"$CLS"',"rounds":1,"gaussian_prior":{"variant":"em"}}'
expect_json .error.field gaussian_prior.variant
expect_status 400 POST /v1/jobs '{"algorithm":"gaussian_prior",'"$LIN"',"rounds":1,"gaussian_prior":{"lr_var":2}}'
expect_json .error.field gaussian_prior.lr_var
expect_status 400 POST /v1/jobs '{"algorithm":"gaussian_prior",'"$LIN"',"rounds":1,"standardize":"silo"}'
expect_json .error.field standardize
expect_status 400 POST /v1/jobs '{"algorithm":"gaussian_prior","dataset":{"generator":"synthetic-linreg","silos":3},"model":{"type":"linear"},"batch_size":4,"lr":3,"rounds":1}'
expect_json .error.field lr
expect_status 400 POST /v1/jobs '{"algorithm":"adamix","dataset":{"generator":"synthetic-classification","silos":3,"classes":3},"model":{"type":"softmax"},"batch_size":4,"lr":1,"rounds":1}'
expect_json .error.field model.type
finish
