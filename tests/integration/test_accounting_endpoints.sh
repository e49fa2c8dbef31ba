#!/usr/bin/env bash
# /v1/accounting/{epsilon,delta,rdp,calibrate} over HTTP: published values, how-it-was-computed
# members, calibration round trip, 400 naming the field for every bad-input class of issue #3, 422 for
# an impossible target, and agreement with the CLI (same handlers).
. "$(dirname "$0")/lib.sh"
# --max-body 8 MiB: a tree of more than 10^5 nodes needs ~2.8 MB of JSON (default cap: 1 MiB -> 413)
start_daemon --threads 2 --max-body 8388608 || exit 1
CLI=${BUILD:-build}/dpsilo-account

SGM='{"type":"self_composed","count":14063,"event":{"type":"poisson_sampled","sampling_rate":0.0042666666666666667,"event":{"type":"gaussian","noise_multiplier":1.1}}}'
OPACUS_ORDERS=$(python3 -c 'print([1+x/10 for x in range(1,100)]+list(range(12,64)))')

# TF-Privacy tutorial: 3.008 classic, 2.597 Balle et al. 2020 (Opacus orders)
expect_status 200 POST /v1/accounting/epsilon "{\"event\":$SGM,\"delta\":1e-5,\"conversion\":\"mironov2017\",\"orders\":$OPACUS_ORDERS}"
expect_json '.epsilon * 1000 | round' 3008
expect_json .conversion mironov2017
expect_json .order_search grid
expect_json .accountant rdp
expect_json .neighboring add_remove
expect_json '.orders | length' 151
expect_status 200 POST /v1/accounting/epsilon "{\"event\":$SGM,\"delta\":1e-5,\"conversion\":\"balle2020\",\"orders\":$OPACUS_ORDERS}"
expect_json '.epsilon * 1000 | round' 2597
expect_json .optimal_order 8.1
# default: optimal conversion, continuous order, never looser
expect_status 200 POST /v1/accounting/epsilon "{\"event\":$SGM,\"delta\":1e-5}"
expect_json .conversion balle2020
expect_json .order_search continuous
expect_json '.epsilon <= 2.597 and .epsilon > 2.5' true
EPS=$(printf '%s' "$BODY" | jq .epsilon)
check "CLI prints the same epsilon as the daemon" \
    test "$("$CLI" epsilon --sampling-rate 0.0042666666666666667 --noise-multiplier 1.1 --steps 14063 --delta 1e-5 --json | jq .epsilon)" = "$EPS"

# delta inverts epsilon
expect_status 200 POST /v1/accounting/delta "{\"event\":$SGM,\"epsilon\":$EPS}"
expect_json '(.delta - 1e-5 | fabs) < 1e-10' true

# zcdp (Bun & Steinke 2016, Prop. 1.6 and 1.3): sigma 10, T 1000 -> rho 5, Bun-Steinke 18.57 at 1e-4
Z='{"type":"self_composed","count":1000,"event":{"type":"gaussian","noise_multiplier":10}}'
expect_status 200 POST /v1/accounting/epsilon "{\"event\":$Z,\"delta\":1e-4,\"accountant\":\"zcdp\",\"conversion\":\"bun_steinke2016\"}"
expect_json '.epsilon * 100 | round' 1857
expect_json .rho 5
expect_status 200 POST /v1/accounting/epsilon "{\"event\":$Z,\"delta\":1e-4,\"accountant\":\"zcdp\"}"
expect_json .conversion cks2020
expect_json '.epsilon < 18.57' true

# pld: the bracket, and it is tighter than RDP on the same event (docs/ACCOUNTING.md)
P='{"type":"self_composed","count":10000,"event":{"type":"poisson_sampled","sampling_rate":0.01,"event":{"type":"gaussian","noise_multiplier":1.1}}}'
expect_status 200 POST /v1/accounting/epsilon "{\"event\":$P,\"delta\":1e-5,\"accountant\":\"pld\"}"
expect_json .accountant pld
expect_json '.epsilon_lower <= .epsilon and .epsilon < 5.63' true
expect_json .value_discretization 0.0001
expect_status 200 POST /v1/accounting/calibrate "{\"event\":${P/1.1/null},\"delta\":1e-5,\"target_epsilon\":1,\"accountant\":\"pld\",\"value_discretization\":0.001}"
expect_json '.epsilon <= 1 and .noise_multiplier > 3' true
expect_status 400 POST /v1/accounting/epsilon "{\"event\":$P,\"delta\":1e-5,\"value_discretization\":0.001}"
expect_json .error.field value_discretization
expect_status 400 POST /v1/accounting/epsilon "{\"event\":$P,\"delta\":1e-5,\"accountant\":\"pld\",\"value_discretization\":5}"
expect_json .error.field value_discretization

# repeat_and_select (tuning engine, issue #4) inside an accounting request
expect_status 200 POST /v1/accounting/epsilon "{\"event\":{\"type\":\"repeat_and_select\",\"distribution\":{\"poisson\":{\"mean\":10}},\"event\":$P},\"delta\":1e-5}"
expect_json '.epsilon > 5.63' true

# rdp curve
expect_status 200 POST /v1/accounting/rdp '{"event":{"type":"gaussian","noise_multiplier":2},"orders":[2,4.5]}'
expect_json '.rdp | join(",")' '0.25,0.5625'
expect_status 200 POST /v1/accounting/rdp '{"event":{"type":"gaussian","noise_multiplier":2}}'
expect_json '(.rdp | length) == (.orders | length)' true

# calibration round trip: noise, count, rate
C='{"type":"self_composed","count":10000,"event":{"type":"poisson_sampled","sampling_rate":0.01,"event":{"type":"gaussian","noise_multiplier":null}}}'
expect_status 200 POST /v1/accounting/calibrate "{\"event\":$C,\"target_epsilon\":1,\"delta\":1e-5}"
expect_json '.epsilon <= 1' true
SIG=$(printf '%s' "$BODY" | jq .noise_multiplier)
expect_status 200 POST /v1/accounting/epsilon "{\"event\":${C/null/$SIG},\"delta\":1e-5}"
expect_json '.epsilon <= 1' true
CN='{"type":"self_composed","count":null,"event":{"type":"poisson_sampled","sampling_rate":0.01,"event":{"type":"gaussian","noise_multiplier":1.1}}}'
expect_status 200 POST /v1/accounting/calibrate "{\"event\":$CN,\"target_epsilon\":2,\"delta\":1e-5}"
expect_json '.count > 100' true
CQ='{"type":"self_composed","count":1000,"event":{"type":"poisson_sampled","sampling_rate":null,"event":{"type":"gaussian","noise_multiplier":1.1}}}'
expect_status 200 POST /v1/accounting/calibrate "{\"event\":$CQ,\"target_epsilon\":2,\"delta\":1e-5}"
expect_json '.sampling_rate > 0 and .sampling_rate < 1' true

# 422: a pure part already exceeds the budget
expect_status 422 POST /v1/accounting/calibrate "{\"event\":{\"type\":\"composed\",\"events\":[$C,{\"type\":\"pure\",\"epsilon\":3}]},\"target_epsilon\":1,\"delta\":1e-5}"
expect_json .error.field target_epsilon

# 400 naming the field
expect_status 400 POST /v1/accounting/epsilon '{"event":{"type":"gaussan","noise_multiplier":1},"delta":1e-5}'
expect_json .error.field event.type
expect_status 400 POST /v1/accounting/epsilon '{"event":{"type":"self_composed","count":5,"event":{"type":"poisson_sampled","sampling_rate":1.5,"event":{"type":"gaussian","noise_multiplier":1}}},"delta":1e-5}'
expect_json .error.field event.event.sampling_rate
expect_status 400 POST /v1/accounting/epsilon '{"event":{"type":"poisson_sampled","sampling_rate":0,"event":{"type":"gaussian","noise_multiplier":1}},"delta":1e-5}'
expect_json .error.field event.sampling_rate
expect_status 400 POST /v1/accounting/epsilon '{"event":{"type":"composed","events":[{"type":"gaussian","noise_multiplier":1},{"type":"gaussian","noise_multiplier":0}]},"delta":1e-5}'
expect_json .error.field 'event.events[1].noise_multiplier'
expect_status 400 POST /v1/accounting/rdp '{"event":{"type":"gaussian","noise_multiplier":1},"orders":[2,1]}'
expect_json .error.field 'orders[1]'
expect_status 400 POST /v1/accounting/epsilon '{"event":{"type":"self_composed","count":2.5,"event":{"type":"gaussian","noise_multiplier":1}},"delta":1e-5}'
expect_json .error.field event.count
expect_status 400 POST /v1/accounting/epsilon '{"event":{"type":"gaussian","noise_multiplier":NaN},"delta":1e-5}'
expect_status 400 POST /v1/accounting/epsilon '{"event":{"type":"gaussian","noise_multiplier":"NaN"},"delta":1e-5}'
expect_json .error.field event.noise_multiplier
expect_status 400 POST /v1/accounting/epsilon '{"event":{"type":"gaussian","noise_multiplier":1,"sigma":2},"delta":1e-5}'
expect_json .error.field event.sigma
expect_status 400 POST /v1/accounting/epsilon '{"event":{"type":"gaussian","noise_multiplier":1},"delta":1e-5,"foo":1}'
expect_json .error.field foo
expect_status 400 POST /v1/accounting/epsilon '{"event":{"type":"gaussian","noise_multiplier":null},"delta":1e-5}'
expect_json .error.field event.noise_multiplier
expect_status 400 POST /v1/accounting/epsilon '{"event":{"type":"gaussian","noise_multiplier":1},"delta":1}'
expect_json .error.field delta
expect_status 400 POST /v1/accounting/epsilon '{"event":{"type":"gaussian","noise_multiplier":1},"delta":1e-5,"accountant":"moments"}'
expect_json .error.field accountant
expect_status 400 POST /v1/accounting/epsilon '{"event":{"type":"poisson_sampled","sampling_rate":0.1,"event":{"type":"gaussian","noise_multiplier":1}},"delta":1e-5,"neighboring":"replace_one"}'
expect_json .error.field neighboring
# depth 65 and 100001 nodes
DEEP=$(python3 -c 'e={"type":"gaussian","noise_multiplier":1}
import json
for _ in range(64): e={"type":"self_composed","count":2,"event":e}
print(json.dumps({"event":e,"delta":1e-5}))')
expect_status 400 POST /v1/accounting/epsilon "$DEEP"
expect_json '.error.message | contains("deeper than 64")' true
python3 -c 'import json; print(json.dumps({"event":{"type":"composed","events":[{"type":"pure","epsilon":0}]*100001},"delta":1e-5}, separators=(",",":")))' >"$T/wide.json"
STATUS=$(curl -s -o "$T/body" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$T/wide.json" "$URL/v1/accounting/epsilon")
BODY=$(cat "$T/body")
check "100001 nodes -> 400" test "$STATUS" = 400
expect_json '.error.message | contains("100000 nodes")' true

# ---- PLD work cap before any PMF is built (issue #10; docs/ACCOUNTING.md "Work caps"): 256 distinct
# sampled Gaussians, each run 1000 times, compose on a ~933k-point window, and 256 x that is over
# 16 x --max-pld-points (2^22): 400 naming value_discretization and the point-FFT cap, from the early
# estimate (the unit test test_accounting_pld checks that no leaf PMF is built).
python3 -c 'import json; print(json.dumps({"event":{"type":"composed","events":[{"type":"self_composed","count":1000,"event":{"type":"poisson_sampled","sampling_rate":0.01,"event":{"type":"gaussian","noise_multiplier":1+0.001*i}}} for i in range(256)]},"delta":1e-5,"accountant":"pld"}, separators=(",",":")))' >"$T/pld256.json"
STATUS=$(curl -s -o "$T/body" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$T/pld256.json" "$URL/v1/accounting/epsilon")
BODY=$(cat "$T/body")
check "256 mechanisms over the PLD work cap -> 400" test "$STATUS" = 400
expect_json .error.field value_discretization
expect_json '.error.message | test("^composing 256 mechanisms on a [0-9]+-point window takes more than 6.71089e\\+07 point-FFTs")' true
check "the CLI refuses the same body the same way" \
    sh -c '"$1" epsilon --accountant pld --delta 1e-5 --event "$(jq -c .event "$2")" --json | jq -e ".error.field == \"value_discretization\"" >/dev/null' _ "$CLI" "$T/pld256.json"

# ---- fairness (docs/API.md "Heavy requests"): requests without a token (the PLD calculators) hold
# at most half of the compute threads and half of the queue, so a token's estimator run still finds
# a thread. Two compute threads and two places: one anonymous PLD runs, one waits, a third is 503.
stop_daemon
start_daemon --threads 4 --compute-threads 2 --compute-queue 2 || exit 1
SLOW='{"event":{"type":"composed","events":[{"type":"self_composed","count":1000,"event":{"type":"poisson_sampled","sampling_rate":0.01,"event":{"type":"gaussian","noise_multiplier":0.9}}},{"type":"self_composed","count":3000,"event":{"type":"poisson_sampled","sampling_rate":0.02,"event":{"type":"gaussian","noise_multiplier":1.3}}},{"type":"self_composed","count":7000,"event":{"type":"poisson_sampled","sampling_rate":0.03,"event":{"type":"gaussian","noise_multiplier":2.1}}}]},"delta":1e-5,"accountant":"pld","value_discretization":0.00001}'
FP=""
for i in 1 2 3; do
    curl -s -o "$T/fair$i.out" -w '%{http_code}' -X POST "$URL/v1/accounting/epsilon" \
        --data-binary "$SLOW" >"$T/fair$i.code" &
    FP="$FP $!"
    sleep 0.1
done
sleep 0.3
expect_status 201 POST /v1/estimators/gaussian '{"clients":[{"mean":1,"n":2},{"mean":2,"n":2}],"noise_variance":1}'
wait $FP
CODES=$(for i in 1 2 3; do cat "$T/fair$i.code"; echo; done | sort | tr '\n' ' ')
check "two anonymous PLD requests answered 200 and one 503 ($CODES)" test "$CODES" = "200 200 503 "
check "the 503 names the share of requests without a token" \
    grep -q 'full for requests without a token' "$T"/fair[123].out

finish
