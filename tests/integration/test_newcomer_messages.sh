#!/usr/bin/env bash
# Newcomer findings about what the binaries and the errors say (issue 10, "Newcomer findings"):
# --version on both binaries (was "unknown argument"), the CLI help no longer calls PLD a future
# option, calibrate names the field "event" when the whole tree has no open parameter (was
# "event.event"), delta 0 says why it is refused, and a 413 says how to raise the limit when
# --max-body is what caps the route.
. "$(dirname "$0")/lib.sh"

BUILD=${BUILD:-build}
CLI="$BUILD/dpsilo-account"
VERSION=$(cat VERSION)

# ---- --version ---------------------------------------------------------------------------------------
out=$("$DPSILOD" --version)
check "dpsilod --version exits 0 and names the version ($out)" \
    bash -c "[[ '$out' == 'dpsilod $VERSION (git '*'libmicrohttpd '*'SQLite '* ]]"
out=$("$CLI" --version)
check "dpsilo-account --version exits 0 and names the version ($out)" \
    bash -c "[[ '$out' == 'dpsilo-account $VERSION (git '* ]]"
check "dpsilod --help lists --version" bash -c "'$DPSILOD' --help | grep -q -- '--version'"
help=$("$CLI" --help)
check "CLI help: PLD is an accountant, not a future one" \
    bash -c "printf '%s' \"\$1\" | grep -q 'rdp|zcdp|pld' && ! printf '%s' \"\$1\" | grep -q 'when built in'" _ "$help"
check "CLI help: the title lists PLD" bash -c "printf '%s' \"\$1\" | grep -q '(RDP, zCDP, PLD)'" _ "$help"

start_daemon --auth off || exit 1

# ---- calibrate without an open parameter: the field is the tree, "event" ---------------------------
for ev in '{"type":"pure","epsilon":1}' \
    '{"type":"self_composed","count":3,"event":{"type":"pure","epsilon":1}}' \
    '{"type":"gaussian","noise_multiplier":1}'; do
    expect_status 400 POST /v1/accounting/calibrate "{\"event\":$ev,\"target_epsilon\":1,\"delta\":1e-5}"
    expect_json .error.field event
done
# a node inside the tree keeps its path
expect_status 400 POST /v1/accounting/calibrate \
    '{"event":{"type":"poisson_sampled","sampling_rate":1.5,"event":{"type":"gaussian","noise_multiplier":null}},"target_epsilon":1,"delta":1e-5}'
expect_json .error.field event.sampling_rate
out=$("$CLI" calibrate --event '{"type":"pure","epsilon":1}' --target-epsilon 1 --delta 1e-5 2>&1)
check "CLI calibrate names event ($out)" bash -c "[[ \"\$1\" == 'dpsilo-account: event: '* ]]" _ "$out"

# ---- delta 0 says why --------------------------------------------------------------------------------
expect_status 400 POST /v1/accounting/epsilon '{"event":{"type":"pure","epsilon":1},"delta":0}'
expect_json .error.field delta
check "delta 0: the message says why and what pure events cost" \
    bash -c "printf '%s' '$BODY' | jq -r .error.message | grep -q 'delta > 0 only; pure events'"
expect_status 400 POST /v1/accounting/epsilon '{"event":{"type":"pure","epsilon":1},"delta":1.5}'
expect_json .error.message 'delta must be in (0, 1), got 1.5'

# ---- 413 says how to raise the limit ------------------------------------------------------------------
big=$(python3 -c 'import json; print(json.dumps({"clients":[{"mean":0.1,"n":5}]*48000,"noise_variance":1}))')
printf '%s' "$big" >"$T/big.json"
STATUS=$(curl -s -o "$T/body" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary @"$T/big.json" "$URL/v1/estimators/gaussian")
BODY=$(cat "$T/body")
check "a body over --max-body on a route that takes more: 413 ($STATUS)" [ "$STATUS" = 413 ]
expect_json .error.message "request body of $(stat -c %s "$T/big.json") bytes exceeds the limit of 1048576 bytes set by --max-body; this route takes up to 67108864 bytes: start dpsilod with a larger --max-body (or DPSILO_MAX_BODY)"
# without Content-Length (chunked): the same advice, found while reading
STATUS=$(curl -s -o "$T/body" -w '%{http_code}' -H 'Content-Type: application/json' \
    -H 'Transfer-Encoding: chunked' --data-binary @"$T/big.json" "$URL/v1/estimators/gaussian")
BODY=$(cat "$T/body")
check "chunked: 413 ($STATUS)" [ "$STATUS" = 413 ]
check "chunked: the message names --max-body" grep -q 'start dpsilod with a larger --max-body' "$T/body"
# a route's own cap cannot be raised: the message names the route
ECHO="{\"message\":\"$(head -c 5000 /dev/zero | tr '\0' a)\"}"
expect_status 413 POST /v1/echo "$ECHO"
expect_json .error.message "request body of ${#ECHO} bytes exceeds the limit of POST /v1/echo, 4096 bytes"
expect_status 413 GET /v1/version '{"a":1}'
expect_json .error.message 'GET /v1/version takes no request body'

check "stop" stop_daemon
finish
