#!/usr/bin/env bash
# Health, version, metrics, static page, 404, 405 with Allow, HEAD, request ids and the access log.
. "$(dirname "$0")/lib.sh"
start_daemon --threads 2 || exit 1

check "URL line has host and numeric port" test -n "$(printf '%s' "$URL" | grep -E '^http://127\.0\.0\.1:[0-9]+$')"
check "stdout has exactly one line" test "$(wc -l <"$T/out")" -eq 1

expect_status 200 GET /healthz
expect_json .status ok
expect_json .db ok
expect_status 200 GET "/healthz?fresh=1"
expect_json .db_checked_ms_ago 0
expect_status 400 GET "/healthz?fresh=maybe"
expect_json .error.field fresh
check "healthz is application/json" test "$(header Content-Type)" = "application/json"
check "healthz is no-store" test "$(header Cache-Control)" = "no-store"
check "response has a request id" test -n "$(header X-Request-Id)"

expect_status 200 GET /v1/version
expect_json '.libraries.sqlite | test("^3\\.")' true
expect_json '.libraries.microhttpd | length > 0' true
expect_json '.libraries.jansson | length > 0' true
expect_json '.libraries.gsl | length > 0' true
expect_json '.git_commit | length > 0' true
if head=$(git rev-parse --short=12 HEAD 2>/dev/null); then
    expect_json .git_commit "$head" # the binary was built from this checkout (make test rebuilds it)
fi
expect_json '.schema_version >= 1' true
expect_json '.database.instance_id | length' 16

expect_status 200 GET /
check "/ is HTML" test "$(header Content-Type)" = "text/html; charset=utf-8"
check "/ is the dashboard's shell" grep -q '<script src="/app.js"></script>' "$T/body"
expect_status 200 GET /style.css
check "css content type" test "$(header Content-Type)" = "text/css; charset=utf-8"
# uPlot (npm, node_modules/uplot/dist) is compiled in beside web/*: the dashboard needs no CDN
expect_status 200 GET /uPlot.iife.min.js
check "uPlot is served as JavaScript" test "$(header Content-Type)" = "text/javascript; charset=utf-8"
check "uPlot is the library itself" cmp -s "$T/body" node_modules/uplot/dist/uPlot.iife.min.js
expect_status 200 GET /uPlot.min.css
expect_status 200 HEAD /healthz
check "HEAD has no body" test -z "$(grep -F '{' "$T/body")"

expect_status 404 GET /nope
expect_json .error.code not_found
expect_json '.error.request_id | length > 0' true
expect_status 404 GET /healthz/
expect_status 404 GET /v1/version/extra

expect_status 405 POST /healthz '{}'
expect_json .error.code method_not_allowed
check "405 has Allow: GET, HEAD" test "$(header Allow)" = "GET, HEAD"
expect_status 405 DELETE /v1/echo
check "405 Allow lists POST" test "$(header Allow)" = "POST"
expect_status 405 PUT /
check "static 405 Allow" test "$(header Allow)" = "GET, HEAD"

# A sane client request id is echoed; a hostile one is replaced.
STATUS=$(curl -s -o /dev/null -D "$T/headers" -w '%{http_code}' -H 'X-Request-Id: trace-abc.123' "$URL/healthz")
HEADERS="$T/headers"
check "client request id echoed" test "$(header X-Request-Id)" = "trace-abc.123"
STATUS=$(curl -s -o /dev/null -D "$T/headers" -w '%{http_code}' -H 'X-Request-Id: bad id<script>' "$URL/healthz")
check "hostile request id replaced" test "$(header X-Request-Id)" != "bad id<script>"

expect_status 200 GET /metrics
check "metrics content type" grep -qi '^Content-Type: text/plain; version=0.0.4' "$HEADERS"
check "metrics count healthz 200" grep -qE '^dpsilo_http_requests_total\{route="/healthz",method="GET",status="200"\} [0-9]+$' "$T/body"
check "metrics count 404" grep -qE '^dpsilo_http_requests_total\{route="unmatched",method="any",status="404"\} [0-9]+$' "$T/body"
check "metrics histogram" grep -qE '^dpsilo_http_request_duration_seconds_bucket\{route="/healthz",method="GET",le="\+Inf"\} [0-9]+$' "$T/body"
check "metrics build info" grep -qE '^dpsilo_build_info\{version="[^"]+",git_commit="[^"]+",microhttpd="[^"]+"' "$T/body"

# Access log: one line per request with method, path, status and microseconds.
check "access log line for 404" grep -qE ' GET /nope 404 [0-9]+us$' "$T/err"
check "access log line for 405" grep -qE ' POST /healthz 405 [0-9]+us$' "$T/err"
check "access log carries the request id" grep -qE ' trace-abc\.123 GET /healthz 200 [0-9]+us$' "$T/err"

check "SIGTERM exits 0" stop_daemon
finish
