#!/usr/bin/env bash
# Training jobs end to end (issue 12): a CSV uploaded like a user would, jobs submitted with curl,
# budgets enforced inside the round loop (refuse at submission, stop_silo while running, the ledger's
# epsilon in the metrics), the personalised model readable only by its silo, cancel, server-sent
# events, and a job killed with SIGKILL that resumes from its checkpoint and ends bit-identically
# where an uninterrupted run ends.
. "$(dirname "$0")/lib.sh"

poll_status() { # poll_status ID WANT [seconds]: wait until the job's status is WANT
    local id=$1 want=$2 n=$((${3:-60} * 10)) got=""
    for _ in $(seq 1 "$n"); do
        got=$(curl -s -H "Authorization: Bearer $ADMIN" "$URL/v1/jobs/$id" | jq -r .status)
        [ "$got" = "$want" ] && return 0
        case "$got" in succeeded | failed | cancelled | interrupted) [ "$got" != "$want" ] && break ;; esac
        sleep 0.1
    done
    echo "job $id: status $got, want $want"
    curl -s -H "Authorization: Bearer $ADMIN" "$URL/v1/jobs/$id" | jq -c '{status, reason}'
    return 1
}

# A federated regression data set: 4 sites, the label a linear function plus site effects.
python3 - >"$T/sites.csv" <<'EOF'
import random
random.seed(7)
print("site,x1,x2,x3,y")
for s in range(4):
    for i in range(60 + 10 * s):
        x = [random.gauss(0, 1) for _ in range(3)]
        y = 0.5 * x[0] - 0.25 * x[1] + 0.1 * s * x[2] + random.gauss(0, 0.1)
        print("s%d,%.6f,%.6f,%.6f,%.6f" % (s, x[0], x[1], x[2], y))
EOF

start_daemon --threads 2 || exit 1
ADMIN=$(head -1 "$ADMIN_TOKEN_FILE")

# ---- silos and their tokens
expect_status 201 POST /v1/silos '{"name":"a","budget":{"epsilon":3,"delta":1e-3}}'
TA=$(printf '%s' "$BODY" | jq -r .token)
expect_status 201 POST /v1/silos '{"name":"b","budget":{"epsilon":10,"delta":1e-3}}'
TB=$(printf '%s' "$BODY" | jq -r .token)
expect_status 201 POST /v1/silos '{"name":"c","budget":{"epsilon":10,"delta":1e-3}}'
TC=$(printf '%s' "$BODY" | jq -r .token)

# ---- upload: 201 with what the parse found; a bad cell is named by line and column
expect_status 201 POST '/v1/datasets?label=y&silo=site&name=sites' "@$T/sites.csv" text/csv
expect_json .rows 300
expect_json '.silos | map(.rows) | join(",")' 60,70,80,90
expect_json '.features | join(",")' x1,x2,x3
DS=$(printf '%s' "$BODY" | jq -r .id)
printf 'site,x1,y\ns0,1,2\ns0,x,3\n' >"$T/bad.csv"
expect_status 400 POST '/v1/datasets?label=y&silo=site' "@$T/bad.csv" text/csv
expect_json .error.line 3
expect_json .error.column 2
expect_status 400 POST '/v1/datasets?label=y' "@$T/sites.csv" application/json
expect_json .error.field Content-Type
expect_status 200 GET /v1/datasets
expect_json '[.datasets[].id | tostring] | index("synthetic-linreg") != null' true

# ---- the spec is checked whole before anything runs
SPEC='"dataset":'$DS',"model":{"type":"linear"},"batch_size":16,"lr":0.05,"seed":3'
expect_status 400 POST /v1/jobs '{"algorithm":"fedavg","dataset":'$DS',"model":{"type":"linear"},"rounds":5,"batch_size":0,"lr":0.1}'
expect_json .error.field batch_size
expect_status 400 POST /v1/jobs '{"algorithm":"fedavg",'"$SPEC"',"rounds":5,"silos":{"nope":1},"privacy":{"target_epsilon":1,"delta":1e-3,"clip":1}}'
expect_json .error.field silos.nope
expect_status 400 POST /v1/jobs '{"algorithm":"fedavg",'"$SPEC"',"rounds":5,"model":{"type":"softmax"}}'

# ---- refuse: silo a cannot afford epsilon 6; a 409 naming it, and nothing charged
PRIV='"privacy":{"target_epsilon":6,"delta":1e-3,"clip":1}'
expect_status 409 POST /v1/jobs '{"algorithm":"mrmtl","lambda":1,'"$SPEC"',"rounds":30,'"$PRIV"',"silos":{"s0":1,"s1":2}}'
expect_json .error.field silos.s0
expect_json .error.details.silo_id 1
expect_json '.error.details.would_be > 3' true
expect_status 200 GET /v1/silos/1
expect_json .n_charges 0
# a silo's token may bind only its own silo
AUTH=$TA expect_status 403 POST /v1/jobs '{"algorithm":"mrmtl","lambda":1,'"$SPEC"',"rounds":30,'"$PRIV"',"silos":{"s1":2}}'

# ---- stop_silo: a stops when its budget runs out; b and the unbound silos go on
expect_status 202 POST /v1/jobs '{"algorithm":"mrmtl","lambda":1,'"$SPEC"',"rounds":30,'"$PRIV"',"silos":{"s0":1,"s1":2},"on_budget_exhausted":"stop_silo"}'
J1=$(printf '%s' "$BODY" | jq -r .id)
expect_json '.plan.silos | length' 4
expect_json '[.plan.silos[] | .epsilon <= 6] | all' true
poll_status "$J1" succeeded 60 || fail "job $J1 did not succeed"
expect_status 200 GET "/v1/jobs/$J1/metrics?after=29"
expect_json '.rounds | length' 1
# the page's members around the spliced round texts (api/jobs.c), in the order they always had
expect_json '[keys_unsorted[]] | join(",")' rounds,next_after,job_id,status,rounds_total,rounds_done
expect_json '[.next_after, .job_id, .status, .rounds_total, .rounds_done] | map(tostring) | join(",")' "null,$J1,succeeded,30,30"
check "the metrics page is application/json" grep -qi '^content-type: application/json' "$HEADERS"
LAST=$BODY
A_EPS=$(printf '%s' "$LAST" | jq -r '.rounds[0].silos[0].epsilon')
A_TRAINED=$(printf '%s' "$LAST" | jq -r '.rounds[0].silos[0].rounds_trained')
check "silo s0 stopped before the end" test "$(printf '%s' "$LAST" | jq -r '.rounds[0].silos[0].stopped')" = true
check "silo s1 trained every round" test "$(printf '%s' "$LAST" | jq -r '.rounds[0].silos[1].rounds_trained')" = 30
expect_status 200 GET /v1/silos/1
expect_json '.spent.epsilon <= 3' true
expect_json .n_charges "$A_TRAINED"
expect_status 200 GET "/v1/silos/1/charges?limit=1000"
expect_json ".charges[-1].cumulative_after.epsilon == $A_EPS" true
expect_json "[.charges[].job_id] | unique | join(\",\")" "$J1"
expect_status 200 GET /v1/silos/2
expect_json '.spent.epsilon <= 6' true
# an unbound silo's epsilon is the accountant's for its recorded events
EV=$(curl -s -H "Authorization: Bearer $ADMIN" "$URL/v1/jobs/$J1" | jq -c '.plan.silos[2].round_event')
U_EPS=$(printf '%s' "$LAST" | jq -r '.rounds[0].silos[2].epsilon')
expect_status 200 POST /v1/accounting/epsilon '{"event":{"type":"self_composed","count":30,"event":'"$EV"'},"delta":1e-3,"conversion":"balle2020"}'
expect_json "((.epsilon - $U_EPS) | fabs) <= 1e-9 * $U_EPS" true
# metrics pages by round
expect_status 200 GET "/v1/jobs/$J1/metrics?limit=10"
expect_json '.rounds | map(.round) | join(",")' 1,2,3,4,5,6,7,8,9,10
expect_json .next_after 10
expect_json '.rounds[0].personalized.test_mse > 0' true
expect_json '.rounds[0].silos[0] | has("train_loss") and has("n_train") and has("n_test")' true

# ---- who may read what
AUTH=$TB expect_status 200 GET "/v1/jobs/$J1"
# a job's members in their order, spec and plan spliced from their stored texts (api/jobs.c)
expect_json '[keys_unsorted[]] | join(",")' id,name,algorithm,status,reason,cancel_requested,rounds,rounds_done,progress,created_at,started_at,finished_at,updated_at,spec,plan
expect_json '[.spec.algorithm, (.plan.silos | length), .progress] | map(tostring) | join(",")' mrmtl,4,1
expect_status 200 GET "/v1/jobs?limit=1&after=$((J1 - 1))"
expect_json '[keys_unsorted[]] | join(",")' jobs,next_after
expect_json '[.jobs[0].id, (.jobs[0].plan.silos | length)] | map(tostring) | join(",")' "$J1,4"
expect_json ".next_after == null or .next_after == $J1" true
AUTH=$TC expect_status 404 GET "/v1/jobs/$J1"
expect_status 200 GET "/v1/jobs/$J1/model"
expect_json '.params | length' 4
AUTH=$TA expect_status 200 GET "/v1/jobs/$J1/model?silo=s0"
AUTH=$TB expect_status 403 GET "/v1/jobs/$J1/model?silo=s0"
expect_json .error.field silo
expect_status 200 GET "/v1/jobs/$J1/model?silo=s3"

# ---- server-sent events, resumable; a finished job's stream ends with 204 once read
expect_status 200 GET "/v1/jobs/$J1/events"
check "events are text/event-stream" grep -qi '^content-type: text/event-stream' "$HEADERS"
LASTID=$(printf '%s' "$BODY" | sed -n 's/^id: //p' | tail -1)
check "one event per round plus the status changes" test "$(printf '%s' "$BODY" | grep -c '^event: round')" = 30
curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ADMIN" -H "Last-Event-ID: $LASTID" \
    "$URL/v1/jobs/$J1/events" >"$T/sse.code"
check "the stream ends after the last event (204)" test "$(cat "$T/sse.code")" = 204

# ---- ppsgd (issue 13): user-level DP with silo sampling. Every round charges every trainable silo,
# sampled or not (the sampling is part of the event), so the epsilon counts all 20 rounds, not the
# ones the silo trained in; ratio 0 releases nothing and spends nothing.
PPS='"algorithm":"ppsgd",'"$SPEC"',"rounds":20,"privacy":{"target_epsilon":2,"delta":1e-3,"clip":1,"client_rate":0.5}'
expect_status 202 POST /v1/jobs '{'"$PPS"',"ratio":0.5,"silos":{"s0":3}}'
JP=$(printf '%s' "$BODY" | jq -r .id)
expect_json .plan.privacy_unit silo
expect_json '.plan.silos[0].q' 0.5
poll_status "$JP" succeeded 60 || fail "ppsgd job $JP did not succeed"
expect_status 200 GET "/v1/jobs/$JP/metrics?after=19"
PL=$BODY
check "ppsgd: every round was charged" test "$(printf '%s' "$PL" | jq -r '.rounds[0].silos[0].rounds_charged')" = 20
check "ppsgd: a silo trains only in the rounds it is sampled" test "$(printf '%s' "$PL" | jq -r '[.rounds[0].silos[].rounds_trained] | max < 20')" = true
P_EPS=$(printf '%s' "$PL" | jq -r '.rounds[0].silos[0].epsilon')
check "ppsgd: every silo's job epsilon is the 20-round figure (<= target, reached)" test "$(printf '%s' "$PL" | jq -r '[.rounds[0].silos[].job_epsilon | . <= 2 and . > 1.99] | all')" = true
check "ppsgd: the bound silo's epsilon (the ledger's) is at most its job epsilon" test "$(printf '%s' "$PL" | jq -r '.rounds[0].silos[0] | .epsilon <= .job_epsilon and .epsilon > 1.9')" = true
expect_status 200 GET /v1/silos/3
expect_json .n_charges 20
expect_json "((.spent.epsilon - $P_EPS) | fabs) <= 1e-12" true
expect_status 202 POST /v1/jobs '{'"$PPS"',"ratio":0,"silos":{"s0":3}}'
J0=$(printf '%s' "$BODY" | jq -r .id)
expect_json '.plan.silos[0].epsilon' null
poll_status "$J0" succeeded 60 || fail "ppsgd ratio-0 job $J0 did not succeed"
expect_status 200 GET /v1/silos/3
expect_json .n_charges 20
expect_status 400 POST /v1/jobs '{'"$PPS"',"ratio":-1}'
expect_json .error.field ratio
# Alg. 2 of the paper (ppsgd_mode 2: minibatch sums, the sample-weighted objective) runs; Alg. 1
# refuses a sampled job, naming the field
expect_status 202 POST /v1/jobs '{'"$PPS"',"ratio":0.5,"ppsgd_mode":2}'
J2=$(printf '%s' "$BODY" | jq -r .id)
poll_status "$J2" succeeded 60 || fail "ppsgd mode-2 job $J2 did not succeed"
expect_status 400 POST /v1/jobs '{'"$PPS"',"ppsgd_mode":1}'
expect_json .error.field privacy.client_rate

# ---- fedhdp (issue 13, Aldaghri, Mahdavifar & Beirami Alg. 2): privacy groups with their own
# noise. s0 opted out of DP (its ledger silo keeps no budget): no noise on its group, never
# charged. s1 is in a stricter group (epsilon 1), s2 and s3 in the default group (epsilon 2); each
# bound silo is charged its group's event every round it is trainable.
expect_status 201 POST /v1/silos '{"name":"d-opted-out","budget":{"private":false}}'
SD=$(printf '%s' "$BODY" | jq -r .id)
expect_status 201 POST /v1/silos '{"name":"e","budget":{"epsilon":10,"delta":1e-3}}'
SE=$(printf '%s' "$BODY" | jq -r .id)
HDP='"algorithm":"fedhdp","lambda":0.1,'"$SPEC"',"privacy":{"target_epsilon":2,"delta":1e-3,"clip":1,"client_rate":0.5}'
HGROUPS='[{"name":"opted-out","silos":["s0"],"private":false,"lambda":0.5},{"name":"strict","silos":["s1"],"target_epsilon":1,"r":0.2},{"name":"rest","r":0.5}]'
expect_status 202 POST /v1/jobs '{'"$HDP"',"rounds":10,"fedhdp":{"groups":'"$HGROUPS"'},"silos":{"s0":'"$SD"',"s1":'"$SE"'}}'
JH=$(printf '%s' "$BODY" | jq -r .id)
expect_json '[.plan.silos[].group] | join(",")' opted-out,strict,rest,rest
expect_json '.plan.groups | map(.silos) | join(",")' 1,1,2
expect_json '.plan.groups[0].noise_multiplier' null
expect_json '.plan.silos[0].epsilon' null
expect_json '.plan.groups[1].noise_multiplier > .plan.groups[2].noise_multiplier' true
expect_json '.plan.groups[1].epsilon <= 1 and .plan.groups[2].epsilon <= 2' true
poll_status "$JH" succeeded 60 || fail "fedhdp job $JH did not succeed"
expect_status 200 GET "/v1/jobs/$JH/metrics?after=9"
HM=$BODY
check "fedhdp: the opted-out silo is never charged" test "$(printf '%s' "$HM" | jq -r '.rounds[0].silos[0] | [.rounds_charged, .epsilon, .job_epsilon] | map(tostring) | join(",")')" = "0,null,null"
check "fedhdp: the private silos are charged every round" test "$(printf '%s' "$HM" | jq -r '[.rounds[0].silos[1:][].rounds_charged] | join(",")')" = 10,10,10
check "fedhdp: each group's epsilon reaches its own target" test "$(printf '%s' "$HM" | jq -r '.rounds[0].groups | (.[0].epsilon == null) and (.[1].epsilon <= 1 and .[1].epsilon > 0.99) and (.[2].epsilon <= 2 and .[2].epsilon > 1.99)')" = true
H_EPS=$(printf '%s' "$HM" | jq -r '.rounds[0].silos[1].epsilon')
expect_status 200 GET "/v1/silos/$SD"
expect_json .n_charges 0
expect_status 200 GET "/v1/silos/$SE"
expect_json .n_charges 10
expect_json "((.spent.epsilon - $H_EPS) | fabs) <= 1e-12" true
# budgets are enforced inside the loop: s1 (strict group, epsilon 1 over 10 rounds) bound to a
# ledger silo of epsilon 0.5 stops when its next round would overspend; the others go on
expect_status 201 POST /v1/silos '{"name":"f-small","budget":{"epsilon":0.5,"delta":1e-3}}'
SF=$(printf '%s' "$BODY" | jq -r .id)
expect_status 202 POST /v1/jobs '{'"$HDP"',"rounds":10,"fedhdp":{"groups":'"$HGROUPS"'},"silos":{"s1":'"$SF"'},"on_budget_exhausted":"stop_silo"}'
JS=$(printf '%s' "$BODY" | jq -r .id)
poll_status "$JS" succeeded 60 || fail "fedhdp stop_silo job $JS did not succeed"
expect_status 200 GET "/v1/jobs/$JS/metrics?after=9"
HS=$BODY
check "fedhdp: the small budget's silo stopped" test "$(printf '%s' "$HS" | jq -r '.rounds[0].silos[1] | .stopped and .rounds_charged < 10 and .rounds_charged > 0')" = true
check "fedhdp: the others trained on" test "$(printf '%s' "$HS" | jq -r '[.rounds[0].silos[2:][].rounds_charged] | join(",")')" = 10,10
S_CH=$(printf '%s' "$HS" | jq -r '.rounds[0].silos[1].rounds_charged')
expect_status 200 GET "/v1/silos/$SF"
expect_json '.spent.epsilon <= 0.5' true
expect_json .n_charges "$S_CH"
# without a fedhdp block: one private group (DP-FedAvg+Ditto), and the silos bound to opted-out
# ledger silos in an added opted-out group
expect_status 202 POST /v1/jobs '{'"$HDP"',"rounds":1,"silos":{"s0":'"$SD"'}}'
JH2=$(printf '%s' "$BODY" | jq -r .id)
expect_json '[.plan.groups[] | "\(.name):\(.private):\(.silos)"] | join(",")' private:true:3,opted_out:false:1
poll_status "$JH2" succeeded 60 || fail "fedhdp job $JH2 did not succeed"
# adaptive clipping: the count of unclipped updates is a second Gaussian on the same sample, so a
# silo's event has the combined multiplier (z_g^-2 + sigma_b^-2)^(-1/2), calibrated to the target
expect_status 202 POST /v1/jobs '{'"$HDP"',"rounds":5,"fedhdp":{"adaptive_clip":{"count_noise":50},"groups":[{"silos":["s0"],"private":false},{}]}}'
JA=$(printf '%s' "$BODY" | jq -r .id)
expect_json '.plan.silos[1] as $s | .plan.groups[1] | (.noise_multiplier > $s.noise_multiplier) and ((1 / (1 / (.noise_multiplier * .noise_multiplier) + 1 / 2500) | sqrt) - $s.noise_multiplier | fabs) < 1e-9 * $s.noise_multiplier' true
poll_status "$JA" succeeded 60 || fail "fedhdp adaptive job $JA did not succeed"
expect_status 200 GET "/v1/jobs/$JA/metrics?after=4"
expect_json '.rounds[0].groups[1].epsilon | . <= 2 and . > 1.99' true
check "fedhdp: the adaptive clip moved from privacy.clip" test "$(printf '%s' "$BODY" | jq -r '.rounds[0].clip != 1 and .rounds[0].clip > 0')" = true
expect_status 200 GET "/v1/jobs/$JA/metrics?after=0&limit=1"
expect_json '.rounds[0].clip' 1
expect_status 400 POST /v1/jobs '{'"$HDP"',"rounds":5,"fedhdp":{"adaptive_clip":{"count_noise":1},"groups":[{}]}}'
expect_json .error.field fedhdp.adaptive_clip.count_noise
expect_status 400 POST /v1/jobs '{'"$HDP"',"rounds":1,"fedhdp":{"groups":[{"r":1}]},"silos":{"s0":'"$SD"'}}'
expect_json .error.field silos.s0
expect_status 400 POST /v1/jobs '{'"$HDP"',"rounds":1,"fedhdp":{"groups":[{"silos":["s1"],"private":false},{}]},"silos":{"s1":'"$SE"'}}'
expect_json .error.field silos.s1
expect_status 400 POST /v1/jobs '{'"$HDP"',"rounds":1,"fedhdp":{"groups":[{"silos":["nope"]},{}]}}'
expect_json .error.field 'fedhdp.groups[0].silos[0]'
expect_status 400 POST /v1/jobs '{'"$HDP"',"rounds":1,"fedhdp":{"groups":[{"r":-1}]}}'
expect_json .error.field 'fedhdp.groups[0].r'
# partition.rows_per_silo: one class and 5 rows per silo (FedHDP's clients, small); 4 train, 1 test
RPS='"algorithm":"local","dataset":{"generator":"synthetic-classification","silos":2,"dim":3,"n_min":60,"n_max":60,"classes":3,"seed":2},"model":{"type":"softmax"},"rounds":1,"batch_size":4,"lr":0.1'
expect_status 202 POST /v1/jobs '{'"$RPS"',"partition":{"kind":"classes","silos":6,"classes_per_silo":1,"rows_per_silo":5}}'
expect_json '[.plan.silos[] | "\(.n_train)+\(.n_test)"] | unique | join(",")' 4+1
expect_status 400 POST /v1/jobs '{'"$RPS"',"partition":{"kind":"classes","silos":6,"classes_per_silo":1,"rows_per_silo":0}}'
expect_json .error.field partition.rows_per_silo
# ---- altmin (issue 13): APriv-AltMin (Jain et al., NeurIPS 2021, Algs. 1-3) on the synthetic
# low-rank regression, one user per silo. Every silo is charged every round with the round's two
# Gaussian releases (the spectral round 0 costs the same), so the job's epsilon, the ledger's and the
# plan's agree; with almost no noise the personalised models recover the low-rank truth.
ALT='"algorithm":"altmin","dataset":{"generator":"synthetic-lowrank","silos":300,"dim":10,"n_min":24,"rank":2,"noise":0.01,"seed":5},"test_fraction":0.25,"seed":4,"altmin":{"rank":2,"init":"spectral"}'
expect_status 202 POST /v1/jobs '{'"$ALT"',"rounds":4,"privacy":{"noise_multiplier":1e-6,"delta":1e-3,"clip":100}}'
JA=$(printf '%s' "$BODY" | jq -r .id)
poll_status "$JA" succeeded 60 || fail "altmin job $JA did not succeed"
expect_status 200 GET "/v1/jobs/$JA/metrics"
check "altmin: the personalised test MSE falls to the label-noise floor (1e-4)" test "$(printf '%s' "$BODY" | jq -r '(.rounds[0].personalized.test_mse > 0.01) and (.rounds[-1].personalized.test_mse < 3e-4)')" = true
expect_status 201 POST /v1/silos '{"name":"alt","budget":{"epsilon":10,"delta":1e-3}}'
SD=$(printf '%s' "$BODY" | jq -r .id)
expect_status 202 POST /v1/jobs '{'"$ALT"',"rounds":5,"privacy":{"target_epsilon":4,"delta":1e-3,"clip":1e-4},"silos":{"0":'"$SD"'}}'
JB=$(printf '%s' "$BODY" | jq -r .id)
expect_json .plan.privacy_unit silo
A_PLAN=$(printf '%s' "$BODY" | jq -r '.plan.silos[0].epsilon')
poll_status "$JB" succeeded 60 || fail "altmin job $JB did not succeed"
expect_status 200 GET "/v1/jobs/$JB/metrics?after=4"
AL=$BODY
check "altmin: every silo was charged every round" test "$(printf '%s' "$AL" | jq -r '[.rounds[0].silos[].rounds_charged == 5] | all')" = true
check "altmin: the job epsilon is the 5-round figure (<= target, reached)" test "$(printf '%s' "$AL" | jq -r '[.rounds[0].silos[].job_epsilon | . <= 4 and . > 3.99] | all')" = true
A_EPS=$(printf '%s' "$AL" | jq -r '.rounds[0].silos[0].epsilon')
check "altmin: the bound silo's epsilon is the ledger's and at most the plan's" test "$(jq -n "$A_EPS <= $A_PLAN and $A_EPS > 3.9")" = true
expect_status 200 GET "/v1/silos/$SD"
expect_json .n_charges 5
expect_json "((.spent.epsilon - $A_EPS) | fabs) <= 1e-12" true
expect_status 400 POST /v1/jobs '{'"$ALT"',"rounds":2,"privacy":{"noise_multiplier":1,"delta":1e-3,"clip":1},"lr":0.1}'
expect_json .error.field lr
expect_status 400 POST /v1/jobs '{'"$ALT"',"rounds":2,"privacy":{"noise_multiplier":1,"delta":1e-3,"clip":1,"client_rate":0.5}}'
expect_json .error.field privacy.client_rate
expect_status 400 POST /v1/jobs '{'"$ALT"',"rounds":2,"privacy":{"noise_multiplier":1,"delta":1e-3,"clip":1},"standardize":"silo"}'
expect_json .error.field standardize
expect_status 400 POST /v1/jobs '{"algorithm":"altmin","dataset":{"generator":"synthetic-lowrank","silos":30,"dim":4,"rank":2},"rounds":2,"privacy":{"noise_multiplier":1,"delta":1e-3,"clip":1},"altmin":{"rank":5}}'
expect_json .error.field altmin.rank
expect_status 400 POST /v1/jobs '{"algorithm":"altmin","dataset":{"generator":"synthetic-lowrank","silos":30,"dim":4},"rounds":2}'
expect_json .error.field privacy

# ---- adaped / dp_adaped (issue 13, Ozkara, Acharya et al. Alg. 2 and Sec. 3.3): distillation
# towards the global model with the adaptive psi. adaped is not private (no privacy block, no
# event); dp_adaped clips and noises each mu and psi step, its round event is dp_fedavg's at the
# calibrated multiplier, charged every round, and the plan reports Thm. 5's closed form beside it
# as paper_bound, never charged.
expect_status 202 POST /v1/jobs '{"algorithm":"adaped",'"$SPEC"',"rounds":5,"adaped":{"tau":4,"psi_init":2,"lr_psi":0.1}}'
JAP=$(printf '%s' "$BODY" | jq -r .id)
expect_json '.plan.silos[0].epsilon' null
expect_json '.plan.adaped | [.tau, .psi_init, .psi_floor, .lr_psi, .kd_psi] | map(tostring) | join(",")' 4,2,0.5,0.1,1
poll_status "$JAP" succeeded 60 || fail "adaped job $JAP did not succeed"
expect_status 200 GET "/v1/jobs/$JAP/metrics?after=0&limit=1"
check "adaped: psi moved from psi_init in the first round" test "$(printf '%s' "$BODY" | jq -r '.rounds[0].psi | . != 2 and . >= 0.5')" = true
expect_status 201 POST /v1/silos '{"name":"g-adaped","budget":{"epsilon":10,"delta":1e-3}}'
SG=$(printf '%s' "$BODY" | jq -r .id)
DAP='"algorithm":"dp_adaped",'"$SPEC"',"rounds":8,"privacy":{"target_epsilon":2,"delta":1e-3,"clip":1,"client_rate":0.5}'
# Alg. 7: unsampled silos keep training (at most 3 rounds in a row), which costs nothing more.
expect_status 202 POST /v1/jobs '{'"$DAP"',"adaped":{"tau":3,"clip_psi":0.5,"unsampled_rounds":3},"silos":{"s2":'"$SG"'}}'
JDP=$(printf '%s' "$BODY" | jq -r .id)
expect_json .plan.adaped.unsampled_rounds 3
expect_json .plan.privacy_unit silo
expect_json '.plan.silos[2] | .epsilon <= 2 and .epsilon > 1.99 and .q == 0.5' true
expect_json '.plan | (.adaped.step_noise_multiplier - .server_noise * (6 | sqrt) | fabs) < 1e-12 * .server_noise' true
expect_json '.plan.adaped | (.sigma_psi - 0.5 * .step_noise_multiplier | fabs) < 1e-12 and .paper_bound.rho > 0 and .paper_bound.epsilon > 0 and .paper_bound.delta == 0.001' true
poll_status "$JDP" succeeded 60 || fail "dp_adaped job $JDP did not succeed"
expect_status 200 GET "/v1/jobs/$JDP/metrics?after=7"
DM=$BODY
check "dp_adaped: every silo is charged every round" test "$(printf '%s' "$DM" | jq -r '[.rounds[0].silos[].rounds_charged] | join(",")')" = 8,8,8,8
check "dp_adaped: the job epsilon reaches the target" test "$(printf '%s' "$DM" | jq -r '[.rounds[0].silos[].job_epsilon | . <= 2 and . > 1.99] | all')" = true
check "dp_adaped: psi is reported" test "$(printf '%s' "$DM" | jq -r '.rounds[0].psi >= 0.5')" = true
D_EPS=$(printf '%s' "$DM" | jq -r '.rounds[0].silos[2].epsilon')
expect_status 200 GET "/v1/silos/$SG"
expect_json .n_charges 8
expect_json "((.spent.epsilon - $D_EPS) | fabs) <= 1e-12" true
expect_status 400 POST /v1/jobs '{"algorithm":"adaped",'"$SPEC"',"rounds":1,"privacy":{"target_epsilon":2,"delta":1e-3,"clip":1}}'
expect_json .error.field privacy
expect_status 400 POST /v1/jobs '{"algorithm":"adaped",'"$SPEC"',"rounds":1,"adaped":{"tau":0}}'
expect_json .error.field adaped.tau
expect_status 400 POST /v1/jobs '{"algorithm":"adaped",'"$SPEC"',"rounds":1,"adaped":{"unsampled_rounds":-1}}'
expect_json .error.field adaped.unsampled_rounds
expect_status 400 POST /v1/jobs '{"algorithm":"adaped",'"$SPEC"',"rounds":1,"adaped":{"psi_init":0.2}}'
expect_json .error.field adaped.psi_init
expect_status 400 POST /v1/jobs '{"algorithm":"adaped",'"$SPEC"',"rounds":1,"adaped":{"clip_psi":1}}'
expect_json .error.field adaped.clip_psi
expect_status 400 POST /v1/jobs '{'"$DAP"',"adaped":{"lr_psi":-1}}'
expect_json .error.field adaped.lr_psi
expect_status 400 POST /v1/jobs '{'"$DAP"',"adaped":{"client_rate":0.5}}'
expect_json .error.field adaped.client_rate
expect_status 400 POST /v1/jobs '{'"$DAP"',"adaped":{"typo":1}}'
expect_json .error.field adaped.typo
expect_status 400 POST /v1/jobs '{"algorithm":"adaped","dataset":'$DS',"model":{"type":"svm"},"batch_size":16,"lr":0.05,"rounds":1}'
expect_json .error.field model.type
expect_status 400 POST /v1/jobs '{"algorithm":"fedavg",'"$SPEC"',"rounds":1,"adaped":{}}'
expect_json .error.field adaped

# ---- cancel: a running job ends after its current round
expect_status 202 POST /v1/jobs '{"algorithm":"fedavg",'"$SPEC"',"rounds":100000}'
J2=$(printf '%s' "$BODY" | jq -r .id)
poll_status "$J2" running 30 || fail "job $J2 did not start"
expect_status 202 POST "/v1/jobs/$J2/cancel"
poll_status "$J2" cancelled 30 || fail "job $J2 was not cancelled"
expect_status 409 POST "/v1/jobs/$J2/cancel"
stop_daemon

# ---- a data set in use cannot be deleted; a queued job is cancelled at once (no workers)
start_daemon --threads 2 --job-workers 0 || exit 1
expect_status 202 POST /v1/jobs '{"algorithm":"local",'"$SPEC"',"rounds":3}'
J3=$(printf '%s' "$BODY" | jq -r .id)
expect_status 409 DELETE "/v1/datasets/$DS"
expect_status 202 POST "/v1/jobs/$J3/cancel"
expect_json .status cancelled
expect_status 200 DELETE "/v1/datasets/$DS"
stop_daemon

# ---- SIGKILL mid-run: the job resumes from its checkpoint and ends where an uninterrupted run ends
start_daemon --threads 2 || exit 1
python3 -c '
import random
random.seed(11)
print("site,x1,x2,y")
for s in range(6):
    for i in range(400):
        a, b = random.gauss(0, 1), random.gauss(0, 1)
        print("s%d,%.5f,%.5f,%.5f" % (s, a, b, a - b + 0.3 * s + random.gauss(0, 0.2)))' >"$T/big.csv"
expect_status 201 POST '/v1/datasets?label=y&silo=site' "@$T/big.csv" text/csv
DS2=$(printf '%s' "$BODY" | jq -r .id)
# 1,200 rounds (a few seconds): long enough that the job is still running when this script's
# kill -9 or SIGTERM comes, even if the script stalls for a second or two between its polls on a
# loaded machine (at 400 rounds it once finished in such a gap).
LONG='{"algorithm":"mrmtl","lambda":0.5,"dataset":'$DS2',"model":{"type":"linear"},"rounds":1200,"batch_size":8,"lr":0.02,"seed":5,"privacy":{"noise_multiplier":1.1,"delta":1e-4,"clip":1}}'
expect_status 202 POST /v1/jobs "$LONG"
JK=$(printf '%s' "$BODY" | jq -r .id)
for _ in $(seq 1 200); do
    DONE=$(curl -s -H "Authorization: Bearer $ADMIN" "$URL/v1/jobs/$JK" | jq -r .rounds_done)
    [ "$DONE" -ge 5 ] && break
    sleep 0.05
done
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=""
check "the job was killed mid-run" test "$DONE" -ge 5 -a "$DONE" -lt 1200
check "it was left running in the database" test "$(sqlite3 "$T/db" "SELECT status FROM jobs WHERE id = $JK")" = running
start_daemon --threads 2 || exit 1
poll_status "$JK" succeeded 120 || fail "job $JK did not resume to success"
expect_status 200 GET "/v1/jobs/$JK/metrics?limit=1000"
expect_json '.rounds | map(.round) | . == [range(1; 1001)]' true
expect_status 200 GET "/v1/jobs/$JK/metrics?after=1000&limit=1000"
expect_json '.rounds | map(.round) | . == [range(1001; 1201)]' true
curl -s -H "Authorization: Bearer $ADMIN" "$URL/v1/jobs/$JK/model" | jq -c .params >"$T/resumed.json"
expect_status 202 POST /v1/jobs "$LONG"
JU=$(printf '%s' "$BODY" | jq -r .id)
poll_status "$JU" succeeded 120 || fail "job $JU did not succeed"
curl -s -H "Authorization: Bearer $ADMIN" "$URL/v1/jobs/$JU/model" | jq -c .params >"$T/straight.json"
check "the resumed job ends bit-identically" cmp -s "$T/resumed.json" "$T/straight.json"
check "the models are not empty" test "$(jq length "$T/straight.json")" = 3

# ---- SIGTERM mid-run: the job ends its round and is requeued (resume) or interrupted, never left
# running; a job that asked not to resume is interrupted
expect_status 202 POST /v1/jobs "$LONG"
JT=$(printf '%s' "$BODY" | jq -r .id)
NORES=$(printf '%s' "$LONG" | jq -c '.resume = false | .rounds = 100000')
poll_status "$JT" running 30 || fail "job $JT did not start"
check "the daemon stops cleanly with a job running" stop_daemon
check "the stopped job is queued again" test "$(sqlite3 "$T/db" "SELECT status FROM jobs WHERE id = $JT")" = queued
start_daemon --threads 2 || exit 1
poll_status "$JT" succeeded 120 || fail "job $JT did not finish after the restart"
curl -s -H "Authorization: Bearer $ADMIN" "$URL/v1/jobs/$JT/model" | jq -c .params >"$T/termed.json"
check "a job stopped by SIGTERM also ends bit-identically" cmp -s "$T/termed.json" "$T/straight.json"
expect_status 202 POST /v1/jobs "$NORES"
JN=$(printf '%s' "$BODY" | jq -r .id)
poll_status "$JN" running 30 || fail "job $JN did not start"
check "the daemon stops cleanly again" stop_daemon
check "a job that asked not to resume is interrupted" test "$(sqlite3 "$T/db" "SELECT status FROM jobs WHERE id = $JN")" = interrupted
check "no job is left running" test "$(sqlite3 "$T/db" "SELECT count(*) FROM jobs WHERE status = 'running'")" = 0
start_daemon --threads 2 || exit 1
expect_status 200 GET "/v1/jobs/$JN"
expect_json .status interrupted
finish
