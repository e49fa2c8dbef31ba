#!/usr/bin/env bash
# Concurrency (issue #5): 32 concurrent connections fire 5,000 charges at one silo whose budget admits
# exactly N = 137 of them (zCDP rho 0.01 each against a cap of 1.375). Exactly N must be accepted (201),
# every other answer must be 409 budget_exhausted, and the silo's cached totals must equal a full
# recomputation from its log. A second round does the same through POST /v1/charges batches over two
# silos, which must stay all-or-nothing under contention.
. "$(dirname "$0")/lib.sh"

start_daemon --threads 4 || exit 1
AUTH=$(cat "$T/admin.token")
N=137
TOTAL=5000
PAR=32

expect_status 201 POST /v1/silos '{"name":"storm","budget":{"rho":1.375}}'
S=$(printf '%s' "$BODY" | jq -r .id)

# One curl process, PAR connections, TOTAL requests; one status code per line. Per-transfer options
# must be repeated in every block of the config (curl resets them at "next").
xfer_opts() {
    printf 'request = "POST"\nheader = "Authorization: Bearer %s"\n' "$AUTH"
    printf 'header = "Content-Type: application/json"\noutput = "/dev/null"\n'
    printf 'write-out = "%%{http_code}\\n"\n'
}
{
    for i in $(seq 1 "$TOTAL"); do
        printf 'url = "%s/v1/silos/%s/charges"\n' "$URL" "$S"
        printf 'data = "{\\"event\\":{\\"type\\":\\"zcdp\\",\\"rho\\":0.01},\\"reason\\":\\"storm %s\\"}"\n' "$i"
        xfer_opts
        [ "$i" -lt "$TOTAL" ] && printf 'next\n'
    done
} >"$T/storm.cfg"
curl -s --no-progress-meter -Z --parallel-max "$PAR" -K "$T/storm.cfg" >"$T/codes"
ok=$(grep -c '^201$' "$T/codes")
refused=$(grep -c '^409$' "$T/codes")
all=$(wc -l <"$T/codes")
check "all $TOTAL requests answered (got $all)" [ "$all" -eq "$TOTAL" ]
check "exactly $N accepted (got $ok)" [ "$ok" -eq "$N" ]
check "every other request refused with 409 (got $refused)" [ "$refused" -eq $((TOTAL - N)) ]
[ "$refused" -eq $((TOTAL - N)) ] || sort "$T/codes" | uniq -c

expect_status 200 GET "/v1/silos/$S?verify=true"
expect_json '.n_charges' "$N"
expect_json '.verification.consistent' true
expect_json '.verification.n_charges_log' "$N"
expect_json '(.spent.rho <= 1.375)' true
# The log itself: N rows with seq 1..N and a non-decreasing cumulative spend.
expect_status 200 GET "/v1/silos/$S/charges?limit=1000"
expect_json '.charges | length' "$N"
expect_json '[.charges[].seq] == [range(1; '"$((N + 1))"')]' true
expect_json '[.charges[].cumulative_after.rho] | . == sort' true

# Batches over two silos under contention: each batch charges both or neither.
expect_status 201 POST /v1/silos '{"name":"p","budget":{"rho":0.5}}'
P=$(printf '%s' "$BODY" | jq -r .id)
expect_status 201 POST /v1/silos '{"name":"q","budget":{"rho":100}}'
Q=$(printf '%s' "$BODY" | jq -r .id)
{
    for i in $(seq 1 400); do
        printf 'url = "%s/v1/charges"\n' "$URL"
        printf 'data = "{\\"charges\\":[{\\"silo_id\\":%s,\\"event\\":{\\"type\\":\\"zcdp\\",\\"rho\\":0.03125}},{\\"silo_id\\":%s,\\"event\\":{\\"type\\":\\"zcdp\\",\\"rho\\":0.03125}}]}"\n' "$Q" "$P"
        xfer_opts
        [ "$i" -lt 400 ] && printf 'next\n'
    done
} >"$T/batch.cfg"
curl -s --no-progress-meter -Z --parallel-max "$PAR" -K "$T/batch.cfg" >"$T/bcodes"
bok=$(grep -c '^201$' "$T/bcodes")
check "exactly 16 batches accepted (0.5 / 0.03125; got $bok)" [ "$bok" -eq 16 ]
expect_status 200 GET "/v1/silos/$Q?verify=true"
expect_json '.n_charges' 16
expect_json '.verification.consistent' true
expect_status 200 GET "/v1/silos/$P?verify=true"
expect_json '.n_charges' 16
expect_json '.verification.consistent' true

check "daemon stops cleanly" stop_daemon
finish
