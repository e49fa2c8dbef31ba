#!/usr/bin/env bash
# The OpenAPI document (openapi/openapi.json, docs/API.md "The OpenAPI document") against the code and
# the docs: it is what openapi/build.py writes, well formed (3.1.0, every $ref resolves, every path
# parameter declared), the route table and the document have the same operations with the same query
# parameters, access and body, every curl example of README.md and docs/*.md calls a documented
# operation with a body and a shown answer that fit its schemas, and the daemon serves the file byte
# for byte to anyone. Then each check is shown to fail on a broken copy of the document (a route
# left out, an operation too many, a query parameter missing, a body member missing, an answer
# member missing, a wrong openapi version), so a check that passes cannot be one that never looks.
. "$(dirname "$0")/lib.sh"

PY=tests/integration/openapi_check.py
DOC=openapi/openapi.json
MD="README.md $(ls docs/*.md | tr '\n' ' ')"

check "the validator accepts and refuses what it should" python3 "$PY" selftest
check "openapi/openapi.json is what openapi/build.py writes" python3 openapi/build.py --check
check "the document is well formed" python3 "$PY" document "$DOC"
# The OpenAPI 3.1 meta-schema, when a validator for it is installed (openapi-spec-validator: pip, not
# a Debian 12 package; the checks above need nothing beyond python3).
if python3 -c 'import openapi_spec_validator' 2>/dev/null; then
    check "the document is valid against the OpenAPI 3.1 meta-schema (openapi-spec-validator)" \
        python3 -c 'import json, sys; from openapi_spec_validator import validate; validate(json.load(open(sys.argv[1])))' "$DOC"
else
    echo "  (openapi-spec-validator not installed: the meta-schema check is skipped)"
fi
check "the route table and the document have the same operations" \
    python3 "$PY" routes "$DOC" service/api/routes.c
# shellcheck disable=SC2086
check "every curl example of the docs fits the document" python3 "$PY" examples "$DOC" $MD
check "every status an integration test expects of an operation is documented" \
    python3 "$PY" statuses "$DOC" tests/integration/test_*.sh
check "the fuzzer's seed bodies fit the request schemas" \
    python3 "$PY" seeds "$DOC" tests/integration/fuzz_driver.py

# ---- each check fails on a broken document -------------------------------------------------------------
mutate() { # mutate NAME PYTHON-STATEMENTS-ON-d: writes $T/NAME.json
    python3 - "$DOC" "$T/$1.json" "$2" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"))
EOF
}
fails() { # fails DESCRIPTION COMMAND...: the command must exit non-zero
    local desc=$1
    shift
    if "$@" >"$T/mut.out" 2>&1; then
        fail "$desc (the check passed)"
    else
        pass "$desc: $(grep -v '^  [a-z]*: ' "$T/mut.out" | head -1 | sed 's/^ *//')"
    fi
}
mutate no_route 'del d["paths"]["/v1/silos/{id}/claims"]'
fails "a route missing from the document is caught" python3 "$PY" routes "$T/no_route.json" service/api/routes.c
mutate extra_op 'd["paths"]["/v1/silos/{id}"]["put"] = d["paths"]["/v1/silos/{id}"]["patch"]'
fails "an operation that is not a route is caught" python3 "$PY" routes "$T/extra_op.json" service/api/routes.c
mutate no_query 'o = d["paths"]["/v1/jobs"]["get"]; o["parameters"] = [p for p in o["parameters"] if p.get("name") != "status"]'
fails "a query parameter missing from the document is caught" python3 "$PY" routes "$T/no_query.json" service/api/routes.c
mutate open_admin 'd["paths"]["/v1/silos"]["post"]["security"] = []'
fails "an access level that differs is caught" python3 "$PY" routes "$T/open_admin.json" service/api/routes.c
mutate no_field 'del d["components"]["schemas"]["JobSpec"]["properties"]["lambda"]'
# shellcheck disable=SC2086
fails "a request body member the document lacks is caught" python3 "$PY" examples "$T/no_field.json" $MD
mutate no_member 's = d["components"]["schemas"]["Silo"]; del s["properties"]["n_charges"]; s["required"].remove("n_charges")'
# shellcheck disable=SC2086
fails "an answer member the document lacks is caught" python3 "$PY" examples "$T/no_member.json" $MD
mutate no_status 'del d["paths"]["/v1/jobs/{id}/cancel"]["post"]["responses"]["409"]'
# shellcheck disable=SC2086
fails "a shown status the document lacks is caught" python3 "$PY" examples "$T/no_status.json" $MD
mutate no_404 'del d["paths"]["/v1/runs/{id}"]["get"]["responses"]["404"]'
fails "a status a test expects that the document lacks is caught" \
    python3 "$PY" statuses "$T/no_404.json" tests/integration/test_*.sh
mutate bad_seed 'd["components"]["schemas"]["ChargeRequest"]["properties"].pop("dry_run")'
fails "a seed body member the document lacks is caught" \
    python3 "$PY" seeds "$T/bad_seed.json" tests/integration/fuzz_driver.py
mutate bad_ref 'd["components"]["schemas"]["Job"]["properties"]["spec"] = {"$ref": "#/components/schemas/Nope"}'
fails "a \$ref that does not resolve is caught" python3 "$PY" document "$T/bad_ref.json"
mutate old_version 'd["openapi"] = "3.0.3"'
fails "an openapi version other than 3.1.0 is caught" python3 "$PY" document "$T/old_version.json"

# ---- the daemon serves the file, to anyone ------------------------------------------------------------
start_daemon --auth on || exit 1
AUTH="" expect_status 200 GET /v1/openapi.json
check "it is served as application/json" [ "$(header Content-Type)" = "application/json" ]
check "the served document is openapi/openapi.json byte for byte" cmp -s "$T/body" "$DOC"
expect_json '.openapi' '3.1.0'
expect_json '[.paths[] | keys[]] | length' "$(grep -c '^ *{"[A-Z]*", "/' service/api/routes.c)"
AUTH="" expect_status 405 POST /v1/openapi.json '{}'
# The document's access levels are the daemon's: without a token every operation that is not open
# answers 401 (ids filled with 1), and no open one does.
python3 - "$DOC" >"$T/ops" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for path, item in d["paths"].items():
    for m, o in item.items():
        print(m.upper(), path.replace("{id}", "1"), o["x-access"], "body" if "requestBody" in o else "-")
EOF
n_ops=0
before=$FAILS
while read -r m p access body; do
    n_ops=$((n_ops + 1))
    if [ "$body" = body ]; then AUTH="" req "$m" "$p" '{}'; else AUTH="" req "$m" "$p"; fi
    if [ "$access" = open ]; then
        [ "$STATUS" != 401 ] || fail "$m $p is open in the document but answers 401"
    else
        [ "$STATUS" = 401 ] || fail "$m $p needs a token ($access) in the document but answers $STATUS"
    fi
done <"$T/ops"
check "every operation's access ($n_ops of them) is the daemon's" [ "$FAILS" -eq "$before" ]
check "daemon stops cleanly" stop_daemon
finish
