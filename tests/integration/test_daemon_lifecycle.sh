#!/usr/bin/env bash
# Start-up and shutdown: --help, flag and environment errors, unusable databases, a newer schema,
# data persisting across a restart, 200 concurrent requests, and SIGTERM letting a request in flight
# finish before a clean exit.
. "$(dirname "$0")/lib.sh"

"$DPSILOD" --help >"$T/help"; rc=$?
check "--help exits 0" test "$rc" -eq 0
check "--help lists --listen and DPSILO_DB" grep -q -e '--listen' "$T/help"
check "--help lists env vars" grep -q 'DPSILO_DB' "$T/help"

"$DPSILOD" --threads zero >/dev/null 2>"$T/e1"; rc=$?
check "bad flag exits 2" test "$rc" -eq 2
check "bad flag names it" grep -q -- '--threads' "$T/e1"
DPSILO_MAX_BODY=-5 "$DPSILOD" >/dev/null 2>"$T/e2"; rc=$?
check "bad env var exits 2" test "$rc" -eq 2
check "bad env var names it" grep -q 'DPSILO_MAX_BODY' "$T/e2"

"$DPSILOD" --listen 127.0.0.1:0 --db "$T/no/such/dir/x.db" >"$T/o3" 2>"$T/e3"; rc=$?
check "unopenable db exits 1" test "$rc" -eq 1
check "unopenable db message names the path" grep -q "cannot open database $T/no/such/dir/x.db" "$T/e3"
check "nothing printed to stdout on failure" test ! -s "$T/o3"
mkdir "$T/adir"
"$DPSILOD" --listen 127.0.0.1:0 --db "$T/adir" >/dev/null 2>"$T/e4"; rc=$?
check "directory as db exits 1" test "$rc" -eq 1

# A database file the daemon cannot write: read-only mode for a normal user; for root (which writes
# through file modes) the immutable attribute, where the filesystem supports it.
sqlite3 "$T/ro.db" "CREATE TABLE x(y)"
if [ "$(id -u)" != 0 ]; then chmod 0444 "$T/ro.db"; ro=1; elif chattr +i "$T/ro.db" 2>/dev/null; then ro=1; else ro=0; fi
if [ "$ro" = 1 ]; then
    "$DPSILOD" --listen 127.0.0.1:0 --db "$T/ro.db" >/dev/null 2>"$T/e7"; rc=$?
    chattr -i "$T/ro.db" 2>/dev/null
    check "unwritable db exits 1" test "$rc" -eq 1
    check "unwritable db message" grep -q "database $T/ro.db is read-only" "$T/e7"
else
    echo "  note: cannot make a file unwritable for root here (no chattr); unwritable-db case not run"
fi

# Environment variables configure the daemon (the flag for the DB comes from DPSILO_DB here).
DPSILO_DB="$T/db" DPSILO_LOG_LEVEL=warn start_daemon || exit 1
req GET /v1/version
INSTANCE=$(printf '%s' "$BODY" | jq -r .database.instance_id)
check "instance id present" test ${#INSTANCE} -eq 16
check "log level warn suppresses access lines" test -z "$(grep -E ' GET /v1/version 200 ' "$T/err")"

# 200 concurrent requests, each on its own connection: all must succeed.
: >"$T/urls"
for i in $(seq 1 200); do
    [ "$i" -gt 1 ] && echo next >>"$T/urls"
    if [ $((i % 4)) -eq 0 ]; then
        printf 'url = "%s/v1/echo"\nrequest = "POST"\nheader = "Authorization: Bearer %s"\nheader = "Content-Type: application/json"\ndata = "{\\"message\\": \\"m%d\\"}"\noutput = "/dev/null"\nwrite-out = "%%{http_code}\\n"\n' "$URL" "$(head -1 "$ADMIN_TOKEN_FILE")" "$i" >>"$T/urls"
    else
        printf 'url = "%s/healthz"\noutput = "/dev/null"\nwrite-out = "%%{http_code}\\n"\n' "$URL" >>"$T/urls"
    fi
done
curl -s --parallel --parallel-immediate --parallel-max 200 -K "$T/urls" >"$T/codes" 2>"$T/curlerr"
check "200 concurrent requests all answered 200" test "$(grep -c '^200$' "$T/codes")" -eq 200
if [ "$(grep -c '^200$' "$T/codes")" -ne 200 ]; then # say why, so a failure in CI can be diagnosed
    echo "  status counts:"; sort "$T/codes" | uniq -c | sed 's/^/    /'
    echo "  curl errors:"; sort "$T/curlerr" | uniq -c | head -5 | sed 's/^/    /'
    echo "  open-files limit: $(ulimit -n)"
fi

check "SIGTERM exits 0" stop_daemon

# A request in flight when SIGTERM arrives still completes: a ~1 kB body sent at 400 bytes/s.
start_daemon || exit 1
msg=$(head -c 1000 /dev/zero | tr '\0' 'z')
printf '{"message": "%s"}' "$msg" >"$T/slow.json"
curl -s -o "$T/slow.out" -w '%{http_code}' --limit-rate 400 -H 'Expect:' -H 'Content-Type: application/json' \
    -H "Authorization: Bearer $(head -1 "$ADMIN_TOKEN_FILE")" \
    --data-binary @"$T/slow.json" "$URL/v1/echo" >"$T/slow.code" &
CURL_PID=$!
sleep 1
check "SIGTERM exits 0" stop_daemon
wait "$CURL_PID"
check "request in flight at SIGTERM got 200" test "$(cat "$T/slow.code")" = 200
check "request in flight got its full answer" test "$(jq -r '.message | length' "$T/slow.out")" -eq 1000
check "clean stop logged" grep -q "stopped cleanly" "$T/err"
check "new connections refused after stop" test "$(curl -s -o /dev/null -w '%{http_code}' "$URL/healthz")" = 000

# Restart on the same file: same data.
start_daemon || exit 1
req GET /v1/version
check "instance id survives restart" test "$(printf '%s' "$BODY" | jq -r .database.instance_id)" = "$INSTANCE"
check "SIGINT exits 0" bash -c "kill -INT $DAEMON_PID"
wait "$DAEMON_PID"; rc=$?; DAEMON_PID=""
check "SIGINT stop exit status 0" test "$rc" -eq 0

# A database written by a newer dpsilod is refused, untouched.
sqlite3 "$T/db" "INSERT INTO schema_migrations(version, name, applied_at_ms) VALUES (9999, '9999_future.sql', 0)"
"$DPSILOD" --listen 127.0.0.1:0 --db "$T/db" >/dev/null 2>"$T/e5"; rc=$?
check "newer schema exits 1" test "$rc" -eq 1
check "newer schema message" grep -q "schema version 9999, newer than this dpsilod knows" "$T/e5"
check "newer schema left in place" test "$(sqlite3 "$T/db" 'SELECT count(*) FROM schema_migrations WHERE version = 9999')" = 1

# The port in use: a clear message and exit 1.
start_daemon --db "$T/db2" || exit 1
PORT=${URL##*:}
"$DPSILOD" --listen "127.0.0.1:$PORT" --db "$T/db3" >/dev/null 2>"$T/e6"; rc=$?
check "port in use exits 1" test "$rc" -eq 1
check "port in use message" grep -q "cannot listen on 127.0.0.1:$PORT" "$T/e6"
check "SIGTERM exits 0" stop_daemon
finish
