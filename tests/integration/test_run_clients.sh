#!/usr/bin/env bash
# Per-client results of a run (issue 15, "fast end to end"): "results": "full" (the default) answers
# every client's estimate and stores the fit alone; with "keep_results": true the rows are stored
# too, as columns beside the run, and GET /v1/runs/{id}/clients pages through them: every client
# exactly once, with the same text as the full answer and as GET /v1/runs/{id}; "results":
# "summary" answers the fit alone (and keeps the rows to be paged when asked). Ids, draws,
# Idempotency-Key replays (rows not kept are computed again, and a stored fit that differs is a
# 409), access rules and 400s naming the field. No timings are asserted (bench/e2e measures them).
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

# full ROUTE BODY LIMIT: the answer, GET /v1/runs/{id} and the pages hold the same rows (kept)
full() {
    expect_status 201 POST "/v1/estimators/$1" "$(printf '%s' "$2" | jq -c '. + {keep_results: true}')"
    expect_json .results full
    expect_json .keep_results true
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
# ids read without jansson (plain strings, integer tokens) and with it (escapes, UTF-8, -0): each
# row's id is the one json_dumps writes for the client's, in the answer and in the stored rows
python3 - "$T/ids.json" <<'PY'
import json, sys
ids = ['"x"', '"q\\"uote"', '-0', '7', '"a/b"', '123456789012345678', '"caf\u00e9"', '"\u00e9t\u00e9"', '-12']
cl = ",".join('{"id":%s,"successes":%d,"trials":10}' % (t, i % 11) for i, t in enumerate(ids * 40))
open(sys.argv[1], "w").write('{"keep_results":true,"clients":[%s]}' % cl)
PY
curl -s -o "$T/ids.out" -X POST -H "Authorization: Bearer $ADMIN" --data-binary "@$T/ids.json" "$URL/v1/estimators/beta"
IDRUN=$(jq -r .run_id "$T/ids.out")
curl -s -o "$T/ids.page" -H "Authorization: Bearer $ADMIN" "$URL/v1/runs/$IDRUN/clients?limit=1000"
check "ids: the answer's and the page's rows carry the clients' ids, as jansson writes them" \
    python3 -c '
import json, sys
body = json.load(open(sys.argv[1]))
want = [c["id"] for c in body["clients"]]
ans = json.load(open(sys.argv[2]))
page = json.load(open(sys.argv[3]))
raw = open(sys.argv[2]).read()
ok = [e["id"] for e in ans["estimates"]] == want and [e["id"] for e in page["clients"]] == want
ok = ok and "\"id\":123456789012345678," in raw and "\"id\":0," in raw and "\"id\":-0" not in raw
sys.exit(0 if ok else 1)' "$T/ids.json" "$T/ids.out" "$T/ids.page"
expect_status 400 POST /v1/estimators/beta '{"clients":[{"id":"a","successes":1,"trials":3},{"id":1.5,"successes":1,"trials":3}]}'
expect_json .error.field 'clients[1].id'
expect_status 400 POST /v1/estimators/gaussian '{"noise_variance":1,"clients":[{"id":"a","mean":1,"n":3},{"id":"b","mean":"1","n":3}]}'
expect_json .error.field 'clients[1].mean'
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

# the default: every row answered (the same rows as a kept run's), the fit alone stored
for r in gaussian beta normal-means; do
    case $r in gaussian) body=$G ;; beta) body=$B ;; *) body=$NM ;; esac
    expect_status 201 POST "/v1/estimators/$r" "$(printf '%s' "$body" | jq -c '. + {keep_results: true}')"
    printf '%s' "$BODY" | jq -c .estimates >"$T/kept.json"
    expect_status 201 POST "/v1/estimators/$r" "$body"
    expect_json .results full
    expect_json .keep_results false
    check "$r: the default answers every row, as a kept run does" \
        [ "$(printf '%s' "$BODY" | jq -c .estimates)" = "$(cat "$T/kept.json")" ]
    run=$(printf '%s' "$BODY" | jq -r .run_id)
    check "$r run $run: no per-client row stored" \
        [ "$(sqlite3 "$DB" "SELECT count(*) FROM estimator_run_clients WHERE run_id = $run")" = 0 ]
    check "$r run $run stores under a quarter of its body (the fit alone)" \
        [ "$(sqlite3 "$DB" "SELECT length(result) + length(params) < ${#body} / 4 FROM estimator_runs WHERE id = $run")" = 1 ]
    expect_status 200 GET "/v1/runs/$run"
    expect_json '.outputs | has("estimates")' false
    expect_json .outputs.results full
    expect_json .outputs.keep_results false
    expect_json '.outputs.log_likelihood < 0' true
    expect_status 404 GET "/v1/runs/$run/clients"
    expect_json .error.field id
done

# summary: the fit alone answered, nothing per client stored
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

# summary with keep_results: a small answer, the rows paged from the run
expect_status 201 POST /v1/estimators/normal-means "$(printf '%s' "$NM" | jq -c '. + {keep_results: true}')"
printf '%s' "$BODY" | jq -c .estimates >"$T/answer.json"
expect_status 201 POST /v1/estimators/normal-means "$(printf '%s' "$NM" | jq -c '. + {results: "summary", keep_results: true}')"
expect_json .results summary
expect_json .keep_results true
expect_json 'has("estimates")' false
SK=$(printf '%s' "$BODY" | jq -r .run_id)
pages "$SK" 500
check "summary + keep_results: the pages hold the full answer's rows" \
    [ "$(jq -c 'map(del(.position))' "$T/pages.json")" = "$(cat "$T/answer.json")" ]

# an Idempotency-Key replay answers the first answer again: from the stored rows when kept,
# computed again when not (the fit checked equal to the stored one); charged nothing either way
KEYED=$(printf '%s' "$B" | jq -c '.clients |= .[:40]')
req POST /v1/estimators/beta "$KEYED"
FIRST=$(printf '%s' "$BODY" | jq -c .estimates)
keyed() { # KEY BODY OUT [TOKEN]
    curl -s -o "$3" -H "Authorization: Bearer ${4:-$ADMIN}" -H "Idempotency-Key: $1" -X POST \
        --data-binary "$2" "$URL/v1/estimators/beta"
}
for kr in false true; do
    keyed "e2e-$kr" "$(printf '%s' "$KEYED" | jq -c --argjson k $kr '. + {keep_results: $k}')" "$T/k1"
    keyed "e2e-$kr" "$(printf '%s' "$KEYED" | jq -c --argjson k $kr '. + {keep_results: $k}')" "$T/k2"
    check "keep_results $kr: a replay is marked" [ "$(jq -r .replayed "$T/k2")" = true ]
    check "keep_results $kr: a replay answers the same estimates" [ "$(jq -c .estimates "$T/k2")" = "$FIRST" ]
    check "keep_results $kr: and the first answer had them" [ "$(jq -c .estimates "$T/k1")" = "$FIRST" ]
    check "keep_results $kr: the same run" [ "$(jq -r .run_id "$T/k2")" = "$(jq -r .run_id "$T/k1")" ]
    check "keep_results $kr: the replay is the first answer, byte for byte but the mark" \
        [ "$(jq -c 'del(.replayed)' "$T/k2")" = "$(jq -c . "$T/k1")" ]
done
keyed e2e-sum "$(printf '%s' "$KEYED" | jq -c '. + {results: "summary"}')" "$T/k1"
keyed e2e-sum "$(printf '%s' "$KEYED" | jq -c '. + {results: "summary"}')" "$T/k2"
check "a summary's replay is the fit alone" [ "$(jq -c 'has("estimates")' "$T/k2")" = false ]
check "a summary's replay is its first answer" [ "$(jq -c 'del(.replayed)' "$T/k2")" = "$(jq -c . "$T/k1")" ]

# access: a run's rows are read by whoever may read the run, a 404 for anyone else
AUTH=$ADMIN req POST /v1/silos '{"name":"a","budget":{"epsilon":10,"delta":1e-5}}'
TA=$(printf '%s' "$BODY" | jq -r .token)
SA=$(printf '%s' "$BODY" | jq -r .id)
AUTH=$ADMIN req POST /v1/silos '{"name":"b","budget":{"epsilon":10,"delta":1e-5}}'
TB=$(printf '%s' "$BODY" | jq -r .token)
AUTH=$TA req POST /v1/estimators/beta "$(printf '%s' "$KEYED" | jq -c '. + {keep_results: true}')"
RA=$(printf '%s' "$BODY" | jq -r .run_id)
AUTH=$TA expect_status 200 GET "/v1/runs/$RA/clients?limit=5"
expect_json '.clients | length' 5
AUTH=$TB expect_status 404 GET "/v1/runs/$RA/clients"
expect_json .error.message "run $RA does not exist"
AUTH="" expect_status 401 GET "/v1/runs/$RA/clients"
expect_status 404 GET "/v1/runs/99999/clients"

# a private keyed run that did not keep its rows: the replay computes them again (the same noise,
# from the same seed), charges nothing more, and answers the first answer
PRIV=$(printf '%s' "$KEYED" | jq -c --argjson a "$SA" '.clients[0].silo_id = $a | .clients[1].silo_id = $a | . + {privacy: {epsilon0: 2, scheme: "two_bit"}}')
keyed priv-1 "$PRIV" "$T/p1" "$TA"
check "the private run is charged" [ "$(jq -r '.privacy.charges | length' "$T/p1")" = 1 ]
SPENT=$(sqlite3 "$DB" "SELECT count(*) FROM charges")
keyed priv-1 "$PRIV" "$T/p2" "$TA"
check "its replay answers the first answer" [ "$(jq -c 'del(.replayed)' "$T/p2")" = "$(jq -c . "$T/p1")" ]
check "its replay is charged nothing" [ "$(sqlite3 "$DB" "SELECT count(*) FROM charges")" = "$SPENT" ]
check "its rows were not kept" [ "$(sqlite3 "$DB" "SELECT count(*) FROM estimator_run_clients WHERE run_id = $(jq -r .run_id "$T/p1")")" = 0 ]

# a replay is answered even when the run itself spent what was left of the budget: it is charged
# nothing, so it is not refused as a new charge would be
AUTH=$ADMIN req POST /v1/silos '{"name":"c","budget":{"epsilon":1,"delta":1e-5}}'
SC=$(printf '%s' "$BODY" | jq -r .id)
LAST=$(printf '%s' "$KEYED" | jq -c --argjson c "$SC" '.clients[0].silo_id = $c | . + {privacy: {epsilon0: 0.9}}')
keyed last-1 "$LAST" "$T/l1"
check "the run spends about 0.9 of the silo's 1" [ "$(jq -r '.privacy.charges[0].cost_eps | . > 0.89 and . <= 0.9' "$T/l1")" = true ]
keyed last-1 "$LAST" "$T/l2"
check "its replay, with 0.1 left, is its first answer" [ "$(jq -c 'del(.replayed)' "$T/l2")" = "$(jq -c . "$T/l1")" ]
keyed last-2 "$LAST" "$T/l3"
check "while the same run under a new key is refused" [ "$(jq -r .error.code "$T/l3")" = budget_exhausted ]

# a stored fit that the replay does not compute again (as a run stored by another build would be):
# 409 naming the key, not rows that would not be the first answer's
keyed tamper "$KEYED" "$T/t1"
TR=$(jq -r .run_id "$T/t1")
sqlite3 "$DB" "DROP TRIGGER estimator_runs_no_update; UPDATE estimator_runs SET result = CAST(replace(CAST(result AS TEXT), '\"iterations\":', '\"iterations\":1') AS BLOB) WHERE id = $TR"
curl -s -o "$T/t2" -w '%{http_code}' -H "Authorization: Bearer $ADMIN" -H "Idempotency-Key: tamper" \
    -X POST --data-binary "$KEYED" "$URL/v1/estimators/beta" >"$T/t2.code"
check "a fit that differs: 409" [ "$(cat "$T/t2.code")" = 409 ]
check "naming the key" [ "$(jq -r .error.field "$T/t2")" = Idempotency-Key ]
# and rows that differ (their digest), the fit the same
keyed tamper-rows "$KEYED" "$T/t3"
TR=$(jq -r .run_id "$T/t3")
sqlite3 "$DB" "UPDATE estimator_runs SET result = CAST(replace(CAST(result AS TEXT), '\"estimates_digest\":\"', '\"estimates_digest\":\"0') AS BLOB) WHERE id = $TR"
curl -s -o "$T/t4" -w '%{http_code}' -H "Authorization: Bearer $ADMIN" -H "Idempotency-Key: tamper-rows" \
    -X POST --data-binary "$KEYED" "$URL/v1/estimators/beta" >"$T/t4.code"
check "rows that differ from the first answer's: 409" [ "$(cat "$T/t4.code")" = 409 ]
check "the first answer carried its rows' digest" [ "$(jq -r '.estimates_digest | test("^[0-9a-f]{16}$")' "$T/t3")" = true ]

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
expect_status 400 POST /v1/estimators/gaussian "$(printf '%s' "$G" | jq -c '. + {keep_results: "yes"}')"
expect_json .error.field keep_results
expect_status 400 POST /v1/estimators/normal-means "$(printf '%s' "$NM" | jq -c '. + {keep_results: 1}')"
expect_json .error.field keep_results
finish
