#!/usr/bin/env bash
# Ids, the same on every route (docs/API.md "Conventions"): a malformed {id} in a path is a 400 with
# field "id" and the message `id must be a positive integer (got "...")`; an unknown one is a 404 with
# field "id" and the message "<what> <id> does not exist". Ids in bodies keep their field path and the
# same wording. The routes are read from the route table (service/api/routes.c), so a new {id} route is
# tested as soon as it is added; BODY_FOR gives the body that reaches the id lookup (default {}).
# Before: GET /v1/runs/abc was 404 while /v1/silos/abc was 400; unknown silos and claims named the
# fields silo_id / claim_id, and the wording differed ("no run with id 7", "no tuning draw 7").
. "$(dirname "$0")/lib.sh"

ROUTES_C=${ROUTES_C:-service/api/routes.c}
start_daemon || exit 1

EV='{"event":{"type":"pure","epsilon":0.1}}'
body_for() { # METHOD PATTERN: a body that passes validation up to the lookup of {id}
    case "$1 $2" in
        "PATCH /v1/silos/{id}") echo '{"name":"renamed"}' ;;
        "POST /v1/silos/{id}/charges" | "POST /v1/silos/{id}/claims") echo "$EV" ;;
        "POST "* | "PATCH "* | "PUT "*) echo '{}' ;;
        *) echo "" ;;
    esac
}

rows=$(sed -n 's/^ *{"\([A-Z]*\)", "\([^"]*{id}[^"]*\)".*/\1 \2/p' "$ROUTES_C")
n=$(printf '%s\n' "$rows" | grep -c .)
check "route table has {id} routes ($n)" [ "$n" -ge 10 ]

while read -r method pattern; do
    body=$(body_for "$method" "$pattern")
    for bad in abc 0 -1 01 %2B1 1e3 99999999999999999999; do
        path=${pattern/\{id\}/$bad}
        if [ -n "$body" ]; then req "$method" "$path" "$body"; else req "$method" "$path"; fi
        got="$STATUS $(printf '%s' "$BODY" | jq -r '.error.field + " | " + .error.message')"
        dec=$(printf '%b' "${bad//%/\\x}")
        want="400 id | id must be a positive integer (got \"$dec\")"
        if [ "$got" = "$want" ]; then pass "$method $path"; else fail "$method $path: $got, want $want"; fi
    done
    path=${pattern/\{id\}/987654}
    if [ -n "$body" ]; then req "$method" "$path" "$body"; else req "$method" "$path"; fi
    got="$STATUS $(printf '%s' "$BODY" | jq -r '.error.code + " " + .error.field')"
    msg=$(printf '%s' "$BODY" | jq -r .error.message)
    if [ "$got" = "404 not_found id" ] && [[ $msg =~ ^[a-z][a-z\ ]*\ 987654\ does\ not\ exist$ ]]; then
        pass "$method $path -> 404 id: $msg"
    else
        fail "$method $path: $got, $msg; want 404 not_found id, '<what> 987654 does not exist'"
    fi
done <<<"$rows"

# the wording of each resource
expect_status 404 GET /v1/silos/987654
expect_json .error.message 'silo 987654 does not exist'
expect_status 404 GET /v1/runs/987654
expect_json .error.message 'run 987654 does not exist'
expect_status 404 GET /v1/claims/987654
expect_json .error.message 'claim 987654 does not exist'
expect_status 404 GET /v1/tuning/draws/987654
expect_json .error.message 'tuning draw 987654 does not exist'

# ids in bodies: their own field path, the same wording
expect_status 201 POST /v1/silos '{"name":"ids-a","budget":{"epsilon":5,"delta":1e-5}}'
A=$(printf '%s' "$BODY" | jq -r .id)
expect_status 404 POST /v1/charges "{\"charges\":[{\"silo_id\":$A,\"event\":{\"type\":\"pure\",\"epsilon\":0.1}},
    {\"silo_id\":987654,\"event\":{\"type\":\"pure\",\"epsilon\":0.1}}]}"
expect_json .error.field 'charges[1].silo_id'
expect_json .error.message 'silo 987654 does not exist'
expect_status 404 POST /v1/estimators/beta '{"clients":[{"successes":3,"trials":10,"silo_id":987654},
    {"successes":7,"trials":12}],"privacy":{"epsilon0":1}}'
expect_json .error.field 'clients[0].silo_id'
expect_json .error.message 'silo 987654 does not exist'
# a 404 on a route with an {id} that is about a body path keeps its path: none today, so check the
# dispatcher leaves a non-id 404 (no route) alone
expect_status 404 GET /v1/silos/1/nothing
expect_json .error.field null

check "stop" stop_daemon
finish
