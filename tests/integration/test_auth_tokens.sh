#!/usr/bin/env bash
# Token handling (issue 10, "Access"; reliability report D2, D12, D15):
#   - the admin token file is refused when it is planted by someone else, writable by group or
#     others, a symbolic link, or holds a weak token; the log states the file's real mode (D12);
#   - changing the admin token file and restarting revokes the old admin token (D2);
#   - silo tokens are rotated (old one 401 at once, new one works) and revoked by the admin (D2);
#   - the database, WAL and SHM files are created 0600 whatever the umask (D15).
. "$(dirname "$0")/lib.sh"
umask 022

# refuse_start NAME DB [flags]: the daemon must exit 1 at start-up, naming the token file problem.
refuse_start() {
    local name=$1 db=$2 rc=0
    shift 2
    mkdir -p "${db%/*}"
    timeout 20 "$DPSILOD" --listen 127.0.0.1:0 --db "$db" "$@" >"$T/rout" 2>"$T/rerr" || rc=$?
    check "$name: start-up fails with exit 1 (got $rc)" [ "$rc" = 1 ]
    check "$name: nothing listened" [ ! -s "$T/rout" ]
}

# ---- D12: the report's repro, a world-writable admin.token planted in a shared directory -------
D="$T/shared"
mkdir -p "$D" && chmod 1777 "$D"
echo attacker-chosen-admin-token-0123456789-XYZ >"$D/admin.token"
chmod 666 "$D/admin.token"
refuse_start "planted 0666 admin.token" "$D/x.db"
check "the message names the real mode 0666" grep -q "mode 0666" "$T/rerr"
check "the message says it is refused" grep -q "refused" "$T/rerr"
# The same token in a file of ours, but writable by the group: refused too.
chmod 620 "$D/admin.token"
refuse_start "group-writable admin.token" "$D/x.db"
check "the message names the mode 0620" grep -q "mode 0620" "$T/rerr"
# Owned by another user (uid 65534; only root can give a file away).
if [ "$(id -u)" = 0 ]; then
    chmod 600 "$D/admin.token" && chown 65534 "$D/admin.token"
    refuse_start "admin.token owned by another user" "$D/x.db"
    check "the message names the owner" grep -q "owned by uid 65534" "$T/rerr"
fi
rm -f "$D/admin.token"
# A symbolic link, as --admin-token-file and as the default <db dir>/admin.token.
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/real.token"
chmod 600 "$T/real.token"
ln -s "$T/real.token" "$T/link.token"
refuse_start "--admin-token-file is a symbolic link" "$T/l1/x.db" --admin-token-file "$T/link.token"
check "the message says symbolic link" grep -q "symbolic link" "$T/rerr"
mkdir -p "$T/l2" && ln -s "$T/real.token" "$T/l2/admin.token"
refuse_start "<db dir>/admin.token is a symbolic link" "$T/l2/x.db"
# Weak tokens (fewer than 128 bits by the documented estimate, or one repeated character).
for weak in aaaaaaaaaaaaaaaa aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa abcdefghijklmnopqrstuv; do
    printf '%s\n' "$weak" >"$T/weak.token" && chmod 600 "$T/weak.token"
    refuse_start "weak token $weak" "$T/w/x.db" --admin-token-file "$T/weak.token"
    check "the message explains the rule" grep -Eq "bits of randomness|distinct characters|bytes" "$T/rerr"
done

# ---- D12: the log states the file's real mode; D15: database files 0600 -------------------------
OLD=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "$OLD" >"$T/admin.tok" && chmod 640 "$T/admin.tok"
start_daemon --admin-token-file "$T/admin.tok" || exit 1
check "the log states mode 0640" grep -q "admin token read from $T/admin.tok (mode 0640" "$T/err"
check "the log warns that group or others can read it" grep -q "readable by group or others" "$T/err"
AUTH=$OLD expect_status 201 POST /v1/silos '{"name":"a","budget":{"rho":1}}'
for f in db db-wal db-shm; do
    check "$f is mode 600 under umask 022 (D15)" [ "$(stat -c %a "$T/$f")" = 600 ]
done
check "SIGTERM exits 0" stop_daemon

# ---- D2: the admin token file changes and the daemon restarts: the old token answers 401 -------
NEW=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "$NEW" >"$T/admin.tok" && chmod 600 "$T/admin.tok"
: >"$T/err"
start_daemon --admin-token-file "$T/admin.tok" || exit 1
check "the log states mode 0600" grep -q "admin token read from $T/admin.tok (mode 0600)" "$T/err"
check "the log says one earlier admin token was revoked" grep -q "1 earlier admin token revoked" "$T/err"
AUTH=$OLD expect_status 401 POST /v1/silos '{"name":"evil","budget":{"rho":1000000000}}'
AUTH=$OLD expect_status 401 GET /v1/silos
AUTH=$NEW expect_status 200 GET /v1/silos
expect_json '.silos | length' 1
check "SIGTERM exits 0" stop_daemon
# Putting the revoked token back is refused: a revoked token stays revoked.
printf '%s\n' "$OLD" >"$T/admin.tok"
refuse_start "a revoked admin token put back into the file" "$T/db" --admin-token-file "$T/admin.tok"
check "the message says it was revoked" grep -q "revoked" "$T/rerr"
printf '%s\n' "$NEW" >"$T/admin.tok"

# ---- make run: overriding one setting never changes another (issue 10) ------------------------
runline() { make -s -n run "$@" 2>/dev/null | grep 'dpsilod --listen'; }
L=$(runline)
check "make run: auth off by default ($L)" [ -n "$(printf '%s' "$L" | grep -- '--auth off')" ]
L=$(runline RUN_FLAGS="--threads 4")
check "make run RUN_FLAGS=\"--threads 4\" keeps --auth off ($L)" [ -n "$(printf '%s' "$L" | grep -- '--auth off' | grep -- '--threads 4')" ]
L=$(AUTH=dps_some_token runline)
check "an AUTH environment variable does not reach make run ($L)" [ -n "$(printf '%s' "$L" | grep -- '--auth off')" ]
L=$(runline AUTH=on RUN_FLAGS="--threads 4")
check "make run AUTH=on turns auth on and keeps RUN_FLAGS ($L)" [ -n "$(printf '%s' "$L" | grep -- '--auth on' | grep -- '--threads 4')" ]
check "make run AUTH=on says where the admin token is" sh -c "make -s -n run AUTH=on DB=/srv/x/d.db 2>/dev/null | grep -q '/srv/x/admin.token'"

finish
