#!/usr/bin/env bash
# Private runs and draws, silo token rotation (issue 10 "Access"; reliability report D3, D2).
#   - creating a run or a draw needs a valid token, also when no client names a silo;
#   - a run is read by the admin, the token that created it (or another token of its silo), or the
#     token of a silo it charged; anyone else gets 404, exactly as for an id that does not exist;
#   - GET /v1/runs lists only what the caller may read, with exact pagination;
#   - a draw is read by the admin or its creator's silo;
#   - a valid token of an unrelated silo gets, on every readable resource, the documented answer;
#   - POST /v1/silos/{id}/token rotates (old token 401 at once), DELETE revokes.
. "$(dirname "$0")/lib.sh"

start_daemon --threads 2 || exit 1
ADMIN=$(head -1 "$ADMIN_TOKEN_FILE")
silo() { # silo NAME: creates it (admin); prints its token
    AUTH=$ADMIN req POST /v1/silos "{\"name\":\"$1\",\"budget\":{\"epsilon\":100,\"delta\":1e-5}}"
    printf '%s' "$BODY" | jq -r .token
}
TA=$(silo hospital-a) # silo 1
TB=$(silo hospital-b) # silo 2
TC=$(silo bank-c)     # silo 3: charged by nothing, created nothing
check "three silo tokens" [ ${#TA} -eq 68 ] && [ ${#TB} -eq 68 ] && [ ${#TC} -eq 68 ]
PRIV='"privacy":{"epsilon0":1,"delta":1e-5,"r":1,"sigma_theta_bound":0.5}'
on_silo() { # on_silo SILO: a private run with raw data kept, both clients on that silo
    printf '{"keep_data":true,"noise_variance":1,%s,"clients":[{"id":"patient-42","mean":0.123456,"n":5,"silo_id":%s},{"id":"patient-43","mean":0.2,"n":5,"silo_id":%s}]}' "$PRIV" "$1" "$1"
}
PLAIN='{"noise_variance":1,"clients":[{"id":"a","mean":0.1,"n":5},{"id":"b","mean":0.2,"n":5},{"id":"c","mean":0.4,"n":5}]}'
run() { # run TOKEN BODY: prints the run id
    AUTH=$1 req POST /v1/estimators/gaussian "$2"
    [ "$STATUS" = 201 ] || echo "  (run: $STATUS $BODY)" >&2
    printf '%s' "$BODY" | jq -r .run_id
}

# ---- creating needs a valid token ---------------------------------------------------------------
AUTH="" expect_status 401 POST /v1/estimators/gaussian "$PLAIN"
AUTH="dps_not-a-token-0123456789abcdef0123456789" expect_status 401 POST /v1/estimators/gaussian "$PLAIN"
expect_json .error.code unauthenticated
AUTH="dps_not-a-token-0123456789abcdef0123456789" expect_status 401 POST /v1/estimators/beta '{}'
AUTH="dps_not-a-token-0123456789abcdef0123456789" expect_status 401 POST /v1/estimators/mixture '{}'
RA=$(run "$TA" "$(on_silo 1)")     # A's token, charges A
RB=$(run "$TB" "$(on_silo 2)")     # B's token, charges B
RAD=$(run "$ADMIN" "$(on_silo 1)") # the admin, charges A
RBN=$(run "$TB" "$PLAIN")          # B's token, charges nothing
RN=$(run "$ADMIN" "$PLAIN")        # the admin, charges nothing
check "five runs stored" [ "$RA,$RB,$RAD,$RBN,$RN" = "1,2,3,4,5" ]

# ---- reading: 401 without a token, 404 for a token that may not read it -------------------------
AUTH="" expect_status 401 GET /v1/runs/$RA
AUTH="" expect_status 401 GET /v1/runs
# reads TOKEN "ids it may read" "ids it may not": 200 with the data, or the very 404 of a missing id
reads() {
    local tok=$1 who=$2
    for id in $3; do
        AUTH=$tok expect_status 200 GET /v1/runs/$id
    done
    for id in $4; do
        AUTH=$tok req GET /v1/runs/$id
        check "$who may not read run $id: 404 (got $STATUS)" [ "$STATUS" = 404 ]
        check "$who: the 404 for run $id says what a missing id says" \
            [ "$(printf '%s' "$BODY" | jq -c '.error | del(.request_id)')" = "{\"code\":\"not_found\",\"message\":\"run $id does not exist\",\"field\":\"id\"}" ]
    done
}
reads "$TA" "silo A" "$RA $RAD" "$RB $RBN $RN"
AUTH=$TA req GET /v1/runs/$RA
expect_json '.inputs.clients[0].id' patient-42
reads "$TB" "silo B" "$RB $RBN" "$RA $RAD $RN"
reads "$TC" "unrelated silo C" "" "$RA $RB $RAD $RBN $RN"
reads "$ADMIN" "the admin" "$RA $RB $RAD $RBN $RN" ""
AUTH=$ADMIN req GET /v1/runs/999
missing=$(printf '%s' "$BODY" | jq -c '.error | del(.request_id)')
check "a missing id gives the same error" [ "$missing" = '{"code":"not_found","message":"run 999 does not exist","field":"id"}' ]

# ---- listing filters in SQL: each caller sees what it may read, pages stay exact ----------------
lists() { # lists TOKEN "expected ids, comma-separated"
    AUTH=$1 expect_status 200 GET /v1/runs
    expect_json '[.runs[].id] | map(tostring) | join(",")' "$2"
}
lists "$ADMIN" "1,2,3,4,5"
lists "$TA" "1,3"
lists "$TB" "2,4"
lists "$TC" ""
AUTH=$TB expect_status 200 GET '/v1/runs?limit=1'
expect_json '[.runs[].id] | map(tostring) | join(",")' 2
expect_json .next_after 2
AUTH=$TB expect_status 200 GET '/v1/runs?limit=1&after=2'
expect_json '[.runs[].id] | map(tostring) | join(",")' 4
AUTH=$TB expect_status 200 GET '/v1/runs?limit=1&after=4'
expect_json '.runs | length' 0
expect_json .next_after null

# ---- tuning draws: created with a token, read by the admin or the creator's silo ----------------
DRAW='{"distribution":{"poisson":{"mean":3}},"grid_size":10}'
AUTH="" expect_status 401 POST /v1/tuning/draw "$DRAW"
AUTH="dps_not-a-token-0123456789abcdef0123456789" expect_status 401 POST /v1/tuning/draw "$DRAW"
AUTH=$TA expect_status 201 POST /v1/tuning/draw "$DRAW"
DA=$(printf '%s' "$BODY" | jq -r .id)
AUTH=$ADMIN expect_status 201 POST /v1/tuning/draw "$DRAW"
DAD=$(printf '%s' "$BODY" | jq -r .id)
AUTH="" expect_status 401 GET /v1/tuning/draws/$DA
AUTH=$TA expect_status 200 GET /v1/tuning/draws/$DA
AUTH=$ADMIN expect_status 200 GET /v1/tuning/draws/$DA
AUTH=$TB expect_status 404 GET /v1/tuning/draws/$DA
expect_json .error.message "tuning draw $DA does not exist"
AUTH=$TA expect_status 404 GET /v1/tuning/draws/$DAD
AUTH=$TA expect_status 404 GET /v1/tuning/draws/77

# ---- a valid token of an unrelated silo, on every readable resource (docs/BUDGETS.md) ----------
AUTH=$TA req POST /v1/silos/1/claims '{"event":{"type":"gaussian","noise_multiplier":4},"timeout_ms":60000}'
CLAIM=$(printf '%s' "$BODY" | jq -r .id)
check "silo A holds a claim" [ "$STATUS" = 201 ]
AUTH=$TC expect_status 403 GET /v1/silos/1
AUTH=$TC expect_status 403 GET /v1/silos/1/charges
AUTH=$TC expect_status 403 GET /v1/claims/$CLAIM
AUTH=$TC expect_status 403 GET /v1/silos
AUTH=$TC expect_status 404 GET /v1/runs/$RA
AUTH=$TC expect_status 404 GET /v1/tuning/draws/$DA
AUTH=$TC expect_status 403 POST /v1/silos/1/token
AUTH=$TC expect_status 403 DELETE /v1/silos/1/token

# ---- D2: silo token rotation and revocation --------------------------------------------------
AUTH=$TA expect_status 200 POST /v1/silos/1/token # the silo rotates its own token
TA2=$(printf '%s' "$BODY" | jq -r .token)
expect_json .silo_id 1
expect_json .revoked 1
check "a new 68-character token" [ ${#TA2} -eq 68 ] && [ "$TA2" != "$TA" ]
AUTH=$TA expect_status 401 GET /v1/silos/1 # the old one: 401 at once
AUTH=$TA expect_status 401 GET /v1/runs/$RA
AUTH=$TA2 expect_status 200 GET /v1/silos/1
AUTH=$TA2 expect_status 200 GET /v1/runs/$RA # the silo keeps what its old token created
AUTH=$TA2 expect_status 200 GET /v1/tuning/draws/$DA
AUTH=$TA2 expect_status 403 POST /v1/silos/2/token # not another silo's
AUTH=$ADMIN expect_status 200 POST /v1/silos/2/token # the admin rotates any silo's
TB2=$(printf '%s' "$BODY" | jq -r .token)
AUTH=$TB expect_status 401 GET /v1/silos/2
AUTH=$TB2 expect_status 200 GET /v1/silos/2
AUTH=$TA2 expect_status 403 DELETE /v1/silos/1/token # revocation is the admin's
AUTH=$ADMIN expect_status 200 DELETE /v1/silos/1/token
expect_json .revoked 1
AUTH=$TA2 expect_status 401 GET /v1/silos/1
AUTH=$TA2 expect_status 401 POST /v1/silos/1/token # a revoked silo cannot rotate itself back
AUTH=$ADMIN expect_status 200 DELETE /v1/silos/1/token
expect_json .revoked 0
AUTH=$ADMIN expect_status 404 POST /v1/silos/99/token
AUTH=$ADMIN expect_status 404 DELETE /v1/silos/99/token
AUTH=$ADMIN expect_status 400 POST /v1/silos/x/token
expect_json .error.field id
AUTH=$ADMIN expect_status 200 POST /v1/silos/1/token # the admin gives it a token again
TA3=$(printf '%s' "$BODY" | jq -r .token)
expect_json .revoked 0
AUTH=$TA3 expect_status 200 GET /v1/silos/1
AUTH=$ADMIN expect_status 200 DELETE /v1/silos/3
AUTH=$ADMIN expect_status 409 POST /v1/silos/3/token # archived: no new token
check "SIGTERM exits 0" stop_daemon

# Across a restart: revocations hold, the rotated tokens still work.
start_daemon --threads 2 || exit 1
AUTH=$TA expect_status 401 GET /v1/silos/1
AUTH=$TA2 expect_status 401 GET /v1/silos/1
AUTH=$TA3 expect_status 200 GET /v1/silos/1
AUTH=$TB expect_status 401 GET /v1/silos/2
AUTH=$TB2 expect_status 200 GET /v1/runs/$RB
check "SIGTERM exits 0" stop_daemon
finish
