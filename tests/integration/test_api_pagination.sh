#!/usr/bin/env bash
# One pagination rule for every list (docs/API.md "Conventions"): ?limit= (default 100, 1..1000) and
# ?after= (exclusive cursor: the last id seen), "next_after" in the answer, null exactly when nothing
# follows, and the same error text for a bad limit or cursor on every list.
# Before: /v1/runs took 1..500 with a default of 50 and worded its error differently ("limit must be
# an integer in 1..500"), and the ledger lists gave a non-null next_after on a full last page.
. "$(dirname "$0")/lib.sh"

start_daemon || exit 1

# 101 items in each list: silos, the charges of one silo, estimator runs 
expect_status 201 POST /v1/silos '{"name":"page-0","budget":{"private":false}}'
S=$(printf '%s' "$BODY" | jq -r .id)
ADMIN=$(head -1 "$ADMIN_TOKEN_FILE")
post_n() { # post_n N PATH BODY: N POSTs of BODY (%d replaced by the index) from one curl process
    local i cfg="$T/post_n.cfg"
    : >"$cfg"
    for i in $(seq 1 "$1"); do
        [ "$i" -gt 1 ] && echo next >>"$cfg"
        printf 'url = "%s"\nheader = "Authorization: Bearer %s"\nheader = "Content-Type: application/json"\n' \
            "$URL$2" "$ADMIN" >>"$cfg"
        printf 'data-binary = "%s"\noutput = "/dev/null"\nwrite-out = "%%{http_code}\\n"\n' \
            "$(printf '%s' "${3//%d/$i}" | sed 's/"/\\"/g')" >>"$cfg"
    done
    curl -s -K "$cfg" | sort | uniq -c | awk '{print $1 " " $2}'
}
check "100 more silos" [ "$(post_n 100 /v1/silos '{"name":"page-%d","budget":{"private":false}}')" = "100 201" ]
check "101 charges" [ "$(post_n 101 "/v1/silos/$S/charges" '{"event":{"type":"pure","epsilon":0.01}}')" = "101 201" ]
RUN='{"clients":[{"mean":0.1,"n":5},{"mean":0.3,"n":5},{"mean":0.2,"n":%d}],"noise_variance":1}'
check "101 runs" [ "$(post_n 101 /v1/estimators/gaussian "$RUN")" = "101 201" ]

for list in "/v1/silos silos" "/v1/silos/$S/charges charges" "/v1/runs runs"; do
    read -r path key <<<"$list"
    echo "-- $path"
    # the default page is 100, and a cursor leads to the rest
    expect_status 200 GET "$path"
    expect_json ".$key | length" 100
    NEXT=$(printf '%s' "$BODY" | jq -r .next_after)
    expect_json ".next_after" "$(printf '%s' "$BODY" | jq -r ".$key[99].id")"
    expect_status 200 GET "$path?after=$NEXT"
    expect_json ".$key | length" 1
    expect_json ".$key[0].id > $NEXT" true
    expect_json ".next_after" null
    # a page that ends exactly at the last item says so
    expect_status 200 GET "$path?limit=101"
    expect_json ".$key | length" 101
    expect_json ".next_after" null
    expect_status 200 GET "$path?limit=1000"
    expect_json ".next_after" null
    expect_status 200 GET "$path?limit=2"
    FIRST2=$(printf '%s' "$BODY" | jq -c "[.$key[].id]")
    N2=$(printf '%s' "$BODY" | jq -r .next_after)
    expect_status 200 GET "$path?limit=2&after=$N2"
    check "pages do not overlap ($FIRST2 then after=$N2)" \
        [ "$(printf '%s' "$BODY" | jq "[.$key[].id | select(. <= $N2)] | length")" = 0 ]
    # the same refusal on every list
    for bad in 0 1001 abc %2B5 05 -1; do
        expect_status 400 GET "$path?limit=$bad"
        dec=$(printf '%b' "${bad//%/\\x}")
        expect_json '.error.field + " | " + .error.message' \
            "limit | limit must be an integer in 1..1000 (got \"$dec\")"
    done
    for bad in -1 abc 01; do
        expect_status 400 GET "$path?after=$bad"
        expect_json '.error.field + " | " + .error.message' \
            "after | after must be the last id of the previous page, an integer >= 0 (got \"$bad\")"
    done
done

check "stop" stop_daemon
finish
