#!/usr/bin/env bash
# Per-client results of a run (issue 15, "fast end to end"): "results": "full" (the default) answers
# and stores every client's estimate, as columns beside the run, and GET /v1/runs/{id}/clients
# pages through them: every client exactly once, with the same text as the full answer and as
# GET /v1/runs/{id}; "results": "summary" answers and stores the fit alone (no per-client row in the
# database, the page route 404). Ids, draws, Idempotency-Key replays, access rules and 400s naming
# the field. No timings are asserted (bench/e2e measures them).
. "$(dirname "$0")/lib.sh"
start_daemon --threads 2 || exit 1
ADMIN=$(head -1 "$ADMIN_TOKEN_FILE")
DB="$T/db"

M=2500
G=$(python3 -c "import json; print(json.dumps({'noise_variance': 1, 'clients': [{'mean': (i % 97) / 97.0 - 0.3, 'n': 1 + i % 7} for i in range($M)]}))")
GID=$(python3 -c "import json; print(json.dumps({'noise_variance': 1, 'clients': [{'id': 'c%d' % i if i % 3 else i, 'mean': [(i % 89) / 89.0, (i % 13) / 13.0], 'n': 4} for i in range(700)]}))")
B=$(python3 -c "import json; print(json.dumps({'clients': [{'successes': i % 11, 'trials': 10 + i % 5} for i in range($M)]}))")
NM=$(python3 -c "import json; print(json.dumps({'x': [((i % 37) - 18) / 6.0 for i in range(1200)], 's': 1, 'prior_family': 'npmle', 'grid_size': 20, 'draws': 2}))")

# pages ID LIMIT: every page of GET /v1/runs/ID/clients, rows concatenated into $T/pages.json
pages() {
    local after=0 n=0
    : >"$T/pages.ndjson"
    while :; do
        req GET "/v1/runs/$1/clients?limit=$2&after=$after"
        [ "$STATUS" = 200 ] || { fail "page after $after of run $1: $STATUS $BODY"; return; }
        printf '%s' "$BODY" | jq -c '.clients[]' >>"$T/pages.ndjson"
        n=$((n + 1))
        after=$(printf '%s' "$BODY" | jq -r .next_after)
        [ "$after" = null ] && break
    done
    jq -s -c . "$T/pages.ndjson" >"$T/pages.json"
    PAGES=$n
}

# full ROUTE BODY LIMIT: the answer, GET /v1/runs/{id} and the pages hold the same rows
full() {
    expect_status 201 POST "/v1/estimators/$1" "$2"
    expect_json .results full
    local run m
    run=$(printf '%s' "$BODY" | jq -r .run_id)
    printf '%s' "$BODY" | jq -c .estimates >"$T/answer.json"
    m=$(jq length "$T/answer.json")
    expect_status 200 GET "/v1/runs/$run"
    check "$1: GET /v1/runs/$run gives the answer's estimates" \
        [ "$(printf '%s' "$BODY" | jq -c .outputs.estimates)" = "$(cat "$T/answer.json")" ]
    pages "$run" "$3"
    check "$1: $m rows in $PAGES pages of $3" [ "$PAGES" = $(((m + $3 - 1) / $3)) ]
    check "$1: every position once, in order" \
        [ "$(jq -c '[.[].position] == [range(1; length + 1)]' "$T/pages.json")" = true ]
    check "$1: the pages' rows are the answer's, value for value" \
        [ "$(jq -c 'map(del(.position))' "$T/pages.json")" = "$(cat "$T/answer.json")" ]
    check "$1: run $run's rows are stored beside it" \
        [ "$(sqlite3 "$DB" "SELECT n_rows FROM estimator_run_clients WHERE run_id = $run")" = "$m" ]
    RUN=$run
}

full gaussian "$G" 1000
check "gaussian ids are the clients' indexes" [ "$(jq -c '.[2499].id' "$T/pages.json")" = 2499 ]
full gaussian "$GID" 300
check "gaussian: the clients' own ids, strings and numbers" \
    [ "$(jq -c '[.[0].id, .[1].id, .[3].id]' "$T/pages.json")" = '[0,"c1",3]' ]
check "two coordinates: arrays" [ "$(jq -c '.[5].posterior_mean | length' "$T/pages.json")" = 2 ]
full beta "$B" 999
full normal-means "$NM" 500
check "normal-means rows carry their draws" [ "$(jq -c '.[7].draws | length' "$T/pages.json")" = 2 ]
check "normal-means rows have no id" [ "$(jq -c '.[7] | has("id")' "$T/pages.json")" = false ]
NMRUN=$RUN
MIX=$(python3 -c "import json; print(json.dumps({'noise_variance': 0.25, 'components': 2, 'seed': 3, 'clients': [{'mean': (-1 if i % 2 else 1) + (i % 7) / 50.0, 'n': 3} for i in range(300)]}))")
full mixture "$MIX" 128
check "mixture rows carry their responsibilities" \
    [ "$(jq -c '.[0].responsibilities | length' "$T/pages.json")" = 2 ]

# one page past the end: empty, no next page; the default page size
expect_status 200 GET "/v1/runs/$NMRUN/clients?after=1200"
expect_json '.clients | length' 0
expect_json .next_after null
expect_json .total 1200
expect_status 200 GET "/v1/runs/$NMRUN/clients"
expect_json '.clients | length' 1000
expect_json .next_after 1000

# summary: the fit alone, nothing per client answered or stored
for r in gaussian beta normal-means; do
    case $r in gaussian) body=$G ;; beta) body=$B ;; *) body=$NM ;; esac
    expect_status 201 POST "/v1/estimators/$r" "$(printf '%s' "$body" | jq -c '. + {results: "summary"}')"
    expect_json .results summary
    expect_json 'has("estimates")' false
    expect_json '.log_likelihood < 0' true
    run=$(printf '%s' "$BODY" | jq -r .run_id)
    check "$r summary run $run: no per-client row stored" \
        [ "$(sqlite3 "$DB" "SELECT count(*) FROM estimator_run_clients WHERE run_id = $run")" = 0 ]
    expect_status 200 GET "/v1/runs/$run"
    expect_json '.outputs | has("estimates")' false
    expect_json .outputs.results summary
    expect_status 404 GET "/v1/runs/$run/clients"
    expect_json .error.field id
    check "$r summary run $run stores under a quarter of its body (the fit alone)" \
        [ "$(sqlite3 "$DB" "SELECT length(result) + length(params) < ${#body} / 4 FROM estimator_runs WHERE id = $run")" = 1 ]
done

# an Idempotency-Key replay answers the stored rows again
KEYED=$(printf '%s' "$B" | jq -c '.clients |= .[:40]')
req POST /v1/estimators/beta "$KEYED"
FIRST=$(printf '%s' "$BODY" | jq -c .estimates)
curl -s -o "$T/k1" -H "Authorization: Bearer $ADMIN" -H 'Idempotency-Key: e2e-1' -X POST \
    --data-binary "$KEYED" "$URL/v1/estimators/beta"
curl -s -o "$T/k2" -H "Authorization: Bearer $ADMIN" -H 'Idempotency-Key: e2e-1' -X POST \
    --data-binary "$KEYED" "$URL/v1/estimators/beta"
check "a replay is marked" [ "$(jq -r .replayed "$T/k2")" = true ]
check "a replay answers the same estimates" [ "$(jq -c .estimates "$T/k2")" = "$FIRST" ]
check "and the first answer had them" [ "$(jq -c .estimates "$T/k1")" = "$FIRST" ]

# access: a run's rows are read by whoever may read the run, a 404 for anyone else
AUTH=$ADMIN req POST /v1/silos '{"name":"a","budget":{"epsilon":10,"delta":1e-5}}'
TA=$(printf '%s' "$BODY" | jq -r .token)
AUTH=$ADMIN req POST /v1/silos '{"name":"b","budget":{"epsilon":10,"delta":1e-5}}'
TB=$(printf '%s' "$BODY" | jq -r .token)
AUTH=$TA req POST /v1/estimators/beta "$KEYED"
RA=$(printf '%s' "$BODY" | jq -r .run_id)
AUTH=$TA expect_status 200 GET "/v1/runs/$RA/clients?limit=5"
expect_json '.clients | length' 5
AUTH=$TB expect_status 404 GET "/v1/runs/$RA/clients"
expect_json .error.message "run $RA does not exist"
AUTH="" expect_status 401 GET "/v1/runs/$RA/clients"
expect_status 404 GET "/v1/runs/99999/clients"

# 400s naming the field
expect_status 400 POST /v1/estimators/gaussian "$(printf '%s' "$G" | jq -c '. + {results: "partial"}')"
expect_json .error.field results
expect_status 400 POST /v1/estimators/beta "$(printf '%s' "$B" | jq -c '. + {results: true}')"
expect_json .error.field results
expect_status 400 POST /v1/estimators/normal-means "$(printf '%s' "$NM" | jq -c '. + {results: null}')"
expect_json .error.field results
expect_status 400 POST /v1/estimators/mixture '{"clients":[{"mean":0.1,"n":2},{"mean":0.5,"n":2}],"noise_variance":1,"results":"none"}'
expect_json .error.field results
expect_status 400 GET "/v1/runs/$RA/clients?limit=0"
expect_json .error.field limit
expect_status 400 GET "/v1/runs/$RA/clients?limit=100001"
expect_json .error.field limit
expect_status 400 GET "/v1/runs/$RA/clients?after=-1"
expect_json .error.field after
expect_status 400 GET "/v1/runs/$RA/clients?page=2"
finish
