#!/usr/bin/env bash
# POST /v1/estimators/normal-means (issue 15): every family, fixed and estimated mode and scale,
# posterior summaries and seeded draws, the stored run, and 400s naming the field.
. "$(dirname "$0")/lib.sh"
start_daemon --threads 2 || exit 1

X='[1.2,-0.3,2.5,0.1,-1.7,3.9,0.4,-0.2,0.05,2.2]'
S='[1,0.8,1.1,0.9,1.2,1,0.7,0.6,1.3,0.9]'
nm() { printf '{"x":%s,"s":%s,"prior_family":"%s"%s}' "$X" "$S" "$1" "${2:-}"; }

# normal prior with the scale fixed: posteriors are the conjugate closed forms
expect_status 201 POST /v1/estimators/normal-means "$(nm normal ',"mode":0.5,"scale":1.5')"
expect_json '.model' normal_means
expect_json '.prior.scale' 1.5
expect_json '.prior.mode' 0.5
# x = 1.2, s = 1: v = 1/(1 + 1/2.25) = 0.6923..., mean = v (1.2 + 0.5/2.25)
expect_json '.estimates[0].posterior_mean * 1e9 | round' "$(python3 -c 'v=1/(1+1/2.25); print(round(v*(1.2+0.5/2.25)*1e9))')"
expect_json '.estimates[0].posterior_sd * 1e9 | round' "$(python3 -c 'print(round((1/(1+1/2.25))**0.5*1e9))')"
expect_json '.status' converged
expect_json '.privacy' null
RUN=$(printf '%s' "$BODY" | jq -r .run_id)
check "Location names the run" test "$(header Location)" = "/v1/runs/$RUN"
expect_status 200 GET "/v1/runs/$RUN"
expect_json '.kind' normal-means
expect_json '.outputs.prior.scale' 1.5
expect_json '.inputs | has("x") or has("s")' false
expect_json '.n_clients' 10

# every family fits; npmle and the scale mixture report their grids as components
for f in normal point_normal point_laplace normal_scale_mixture npmle; do
    expect_status 201 POST /v1/estimators/normal-means "$(nm $f)"
    expect_json '.prior_family' $f
    expect_json '[.estimates[] | (.posterior_sd >= 0 and .lfsr >= 0 and .lfsr <= 1)] | all' true
    expect_json '(.prior.components | map(.weight) | add) * 1e9 | round' 1000000000
    expect_json '.log_likelihood < 0' true
done
expect_status 201 POST /v1/estimators/normal-means "$(nm npmle ',"grid_size":7')"
expect_json '.prior.components | length' 7
expect_status 201 POST /v1/estimators/normal-means "$(nm point_laplace ',"scale":0.9')"
expect_json '.prior.components[1].sd' 0.9
expect_status 201 POST /v1/estimators/normal-means "$(nm point_normal ',"mode":"estimate"')"
expect_json '.evaluations > 1' true
expect_status 201 POST /v1/estimators/normal-means "$(nm normal_scale_mixture ',"grid":[0,0.5,1,2,4]')"
expect_json '[.prior.components[].sd] | tojson' '[0,0.5,1,2,4]'
# a scalar s, as ebnm's
expect_status 201 POST /v1/estimators/normal-means "{\"x\":$X,\"s\":1,\"prior_family\":\"normal\"}"
expect_json '.n_observations' 10

# draws: as many as asked, the same for the same seed, others for another
expect_status 201 POST /v1/estimators/normal-means "$(nm point_normal ',"draws":4,"seed":9')"
expect_json '.estimates[2].draws | length' 4
D1=$(printf '%s' "$BODY" | jq -c '[.estimates[].draws]')
expect_status 201 POST /v1/estimators/normal-means "$(nm point_normal ',"draws":4,"seed":9')"
check "same seed, same draws" test "$(printf '%s' "$BODY" | jq -c '[.estimates[].draws]')" = "$D1"
expect_status 201 POST /v1/estimators/normal-means "$(nm point_normal ',"draws":4,"seed":10')"
check "another seed, other draws" test "$(printf '%s' "$BODY" | jq -c '[.estimates[].draws]')" != "$D1"

# bad input: 400 naming the field
expect_status 400 POST /v1/estimators/normal-means '{"x":[1,2,3],"s":[1,1],"prior_family":"normal"}'
expect_json '.error.field' s
expect_status 400 POST /v1/estimators/normal-means '{"x":[1,2,3],"s":[1,0,1],"prior_family":"normal"}'
expect_json '.error.field' 's[1]'
expect_status 400 POST /v1/estimators/normal-means '{"x":[1,"a",3],"s":1,"prior_family":"normal"}'
expect_json '.error.field' 'x[1]'
# x and s are read from the body text when they are plain arrays of numbers (issue 15); anything
# else takes jansson's tree and gets the same answers as before
expect_status 400 POST /v1/estimators/normal-means '{"x":[1,2,3],"s":[1,"a",1],"prior_family":"normal"}'
expect_json '.error.field' 's[1]'
expect_status 400 POST /v1/estimators/normal-means '{"x":[1,2,3],"s":[1,1,null],"prior_family":"normal"}'
expect_json '.error.field' 's[2]'
expect_status 400 POST /v1/estimators/normal-means '{"x":[1,NaN,3],"s":1,"prior_family":"normal"}'
expect_json '.error.message | startswith("malformed JSON at line 1")' true
expect_status 400 POST /v1/estimators/normal-means '{"x":[1,+2,3],"s":1,"prior_family":"normal"}'
expect_json '.error.message | startswith("malformed JSON")' true
expect_status 400 POST /v1/estimators/normal-means '{"x":[1,2],"s":[1,1],"x":[3],"prior_family":"normal"}'
expect_json '.error.message | contains("duplicate object key")' true
expect_status 400 POST /v1/estimators/normal-means '{"x":[],"s":[],"prior_family":"normal"}'
expect_json '.error.field' x
expect_status 400 POST /v1/estimators/normal-means '{"x":[1,2,3],"s":1,"prior_family":"horseshoe"}'
expect_json '.error.field' prior_family
expect_status 400 POST /v1/estimators/normal-means '{"x":[1,2,3],"s":1}'
expect_json '.error.field' prior_family
expect_status 400 POST /v1/estimators/normal-means '{"x":[],"s":1,"prior_family":"npmle"}'
expect_json '.error.field' x
expect_status 400 POST /v1/estimators/normal-means '{"x":[1,2],"s":1,"prior_family":"npmle","scale":2}'
expect_json '.error.field' scale
expect_status 400 POST /v1/estimators/normal-means '{"x":[1,2],"s":1,"prior_family":"normal","mode":"median"}'
expect_json '.error.field' mode
expect_status 400 POST /v1/estimators/normal-means '{"x":[1,2],"s":1,"prior_family":"npmle","grid":[1,0]}'
expect_json '.error.field' grid
expect_status 400 POST /v1/estimators/normal-means '{"x":[1,2],"s":1,"prior_family":"npmle","draws":-1}'
expect_json '.error.field' draws
expect_status 400 POST /v1/estimators/normal-means '{"x":[1,2],"s":1,"prior_family":"npmle","colour":1}'
expect_json '.error.field' colour
expect_status 400 POST /v1/estimators/normal-means '{"x":[1,2],"s":-1,"prior_family":"npmle"}'
expect_json '.error.field' 's[0]'
# Answers that say what they are (issue 15): a normal prior whose fitted scale is 0 (observations
# far closer together than their standard errors) is boundary, with the reason in words; a
# converged fit has no reason.
expect_status 201 POST /v1/estimators/normal-means '{"x":[0.1,0.1,0.1,0.1,0.1,0.1],"s":1,"prior_family":"normal"}'
expect_json '.status' boundary
expect_json '.prior.scale' 0
expect_json '.status_reason | test("full pooling")' true
expect_status 201 POST /v1/estimators/normal-means '{"x":[-3,-1,0,1,3,6],"s":0.5,"prior_family":"normal"}'
expect_json '.status' converged
expect_json '.status_reason' null
stop_daemon

# The compute deadline (issue 15): the fit polls the pool's cancel flag at every profile point,
# every mixsqp iteration and in its long passes, so a run past --compute-timeout stops at once and
# is answered like the other estimators (503 busy, "cancelled", nothing stored). This one (10^5
# observations, mode and scale both profiled: about 3,000 weight solves) computes for minutes
# uncancelled; curl's --max-time 60 is a guard that only a fit that ignores the flag can reach.
DB=$T/db_deadline
start_daemon --auth off --threads 2 --db "$DB" --compute-threads 1 --compute-timeout 1 || exit 1
python3 -c 'import json,random; random.seed(3); n=100000
x=[(0 if random.random() < 0.5 else random.gauss(0, 2)) + random.gauss(0, 1) for i in range(n)]
print(json.dumps({"x":[round(v, 4) for v in x],"s":1,"prior_family":"point_laplace","mode":"estimate"}))' >"$T/nm_long.json"
code=$(curl -s --max-time 60 -o "$T/nm_long.out" -w '%{http_code}' -X POST "$URL/v1/estimators/normal-means" \
    --data-binary "@$T/nm_long.json") || code="curl-failed($?)"
check "the long fit answered 503 at its deadline ($code)" test "$code" = 503
check "its message says it was cancelled and nothing was charged" test "$(jq -r \
    '.error.code == "busy" and (.error.message | test("cancelled.*nothing was charged"))' "$T/nm_long.out")" = true
check "nothing was stored" test "$(sqlite3 "$DB" 'SELECT count(*) FROM estimator_runs')" = 0
# the compute thread is free again: a small fit completes
expect_status 201 POST /v1/estimators/normal-means "$(nm point_laplace)"

# Idempotency-Key: the request's hash covers x and s even when they are read from the text (the
# same values written otherwise replay, other values are a conflict)
idem() {
    curl -s -o "$T/idem" -w '%{http_code}' -H "Authorization: Bearer $(head -1 "$ADMIN_TOKEN_FILE")" \
        -H 'Idempotency-Key: nm-1' -X POST --data-binary "$1" "$URL/v1/estimators/normal-means"
}
check "a keyed request is answered" test "$(idem "$(nm normal)")" = 201
check "and not as a replay" test "$(jq -r .replayed "$T/idem")" != true
X2='[1.20,-0.3,2.5e0,0.1,-1.7,3.9,0.4,-0.2,0.05,2.2]' # the same values
check "the same values written otherwise replay" test "$(X=$X2 idem "$(X=$X2 nm normal)")" = 201
check "as a replay" test "$(jq -r .replayed "$T/idem")" = true
X3='[1.2,-0.3,2.5,0.1,-1.7,3.9,0.4,-0.2,0.05,2.3]'
check "other values under the same key conflict" test "$(X=$X3 idem "$(X=$X3 nm normal)")" = 409
finish
