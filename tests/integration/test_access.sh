#!/usr/bin/env bash
# Access table and query parameters (issue 10): with auth on, only the calculators, /healthz,
# /v1/version and /v1/openapi.json answer without a token; every other route answers 401 before reading anything.
# Unknown query parameters are a 400 naming them, on every route.
. "$(dirname "$0")/lib.sh"

start_daemon --threads 2 || exit 1
AUTH=""
expect_status 200 GET /healthz
expect_status 200 GET /v1/version
expect_status 200 GET /v1/openapi.json
expect_status 200 POST /v1/accounting/epsilon '{"event":{"type":"gaussian","noise_multiplier":1},"delta":1e-5}'
expect_status 200 POST /v1/tuning/cost '{"event":{"type":"gaussian","noise_multiplier":2},"distribution":{"poisson":{"mean":2}},"delta":1e-5}'
# Every non-open route, reached with plausible ids and no token: 401 (D3: runs were readable by anyone)
for r in "GET /metrics" "POST /v1/echo" "GET /v1/runs" "GET /v1/runs/1" "POST /v1/estimators/gaussian" \
    "POST /v1/estimators/beta" "POST /v1/estimators/mixture" "POST /v1/tuning/draw" "GET /v1/tuning/draws/1" \
    "POST /v1/silos" "GET /v1/silos" "GET /v1/silos/1" "PATCH /v1/silos/1" "DELETE /v1/silos/1" \
    "POST /v1/silos/1/charges" "GET /v1/silos/1/charges" "POST /v1/charges" "POST /v1/silos/1/claims" \
    "GET /v1/claims/1" "POST /v1/claims/1/commit" "POST /v1/claims/1/abort" \
    "POST /v1/silos/1/token" "DELETE /v1/silos/1/token"; do
    set -- $r
    if [ "$1" = GET ] || [ "$1" = DELETE ]; then expect_status 401 "$1" "$2"; else expect_status 401 "$1" "$2" '{}'; fi
    expect_json .error.code unauthenticated
done
# A token that resolves to nobody is also 401 on a token route.
AUTH="dps_not-a-token-0123456789abcdef" expect_status 401 GET /v1/silos/1
unset AUTH # the admin token (lib.sh)

# Unknown query parameters: 400 naming the parameter; known ones still work.
expect_status 400 GET '/v1/silos?page=2'
expect_json .error.field page
expect_status 400 GET '/v1/runs?kind=beta'
expect_json .error.field kind
expect_status 400 GET '/healthz?verbose=1'
expect_json .error.field verbose
expect_status 400 POST '/v1/accounting/epsilon?accountant=pld' '{"event":{"type":"gaussian","noise_multiplier":1},"delta":1e-5}'
expect_json .error.field accountant
expect_status 200 GET '/v1/silos?limit=5'
expect_status 200 GET '/healthz?fresh=1'
check "SIGTERM exits 0" stop_daemon
finish
