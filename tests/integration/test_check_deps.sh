#!/usr/bin/env bash
# make check-deps: passes on this tree, and fails (naming file and rule) on a tree that breaks each rule.
. "$(dirname "$0")/lib.sh"
ROOT=$(pwd)

check "check-deps passes on the repository" make -s -C "$ROOT" check-deps

mk() { mkdir -p "$(dirname "$T/$1")"; printf '%s\n' "$2" >"$T/$1"; }
violates() { # name, file, content, expected rule text
    rm -rf "$T/tree"
    mkdir -p "$T/tree"
    mk "tree/$2" "$3"
    if sh "$ROOT/scripts/check-deps.sh" "$T/tree" >"$T/cd.out" 2>&1; then
        fail "$1: not detected"
    elif grep -qF "$4" "$T/cd.out" && grep -qF "$2" "$T/cd.out"; then
        pass "$1: detected"
    else
        fail "$1: wrong report: $(cat "$T/cd.out")"
    fi
}
violates "jansson in accounting" accounting/x.c '#include <jansson.h>' "service-only header"
violates "sqlite3 in federated" federated/x.h '#  include "sqlite3.h"' "service-only header"
violates "microhttpd in common" common/x.c '#include <microhttpd.h>' "service-only header"
violates "service header in estimators" estimators/x.c '#include "service/http/server.h"' "may include only"
violates "estimators header in accounting" accounting/x.c '#include "estimators/eb_common.h"' "may include only"
violates "threads in accounting" accounting/x.c '#include <pthread.h>' "must not use threads"
violates "printing in estimators" estimators/x.c 'void f(void) { fprintf(stderr, "x"); }' "never print"
# The layers of service/ (docs/ARCHITECTURE.md).
violates "http reaching the ledger" service/http/x.c '#include "service/ledger/ledger.h"' "service/http/ may include only"
violates "http reaching the api" service/http/x.c '#include "service/api/auth.h"' "service/http/ may include only"
violates "http borrowing more of db than store.h" service/http/x.c '#include "service/db/runs.h"' "service/http/ may include only"
violates "db reaching the ledger" service/db/x.c '#include "service/ledger/ledger.h"' "service/db/ may include only"
violates "codec reaching db" service/codec/x.h '#include "service/db/store.h"' "service/codec/ may include only"
violates "base reaching http" service/base/x.c '#include "service/http/server.h"' "service/base/ may include only"
violates "ledger reaching http" service/ledger/x.c '#include "service/http/server.h"' "service/ledger/ may include only"
violates "a file outside the layers" service/loose.c 'int x;' "outside its directory"
violates "an unknown layer" service/misc/x.c 'int x;' "not a known layer"
violates "SQL in the api" service/api/x.c 'int f(sqlite3_stmt *st) { return sqlite3_step(st); }' "no SQL in service/api/"
violates "sqlite3.h in the api" service/api/x.c '#include <sqlite3.h>' "no SQL in service/api/"
violates "microhttpd in the api" service/api/x.c '#include <microhttpd.h>' "only service/http/ includes microhttpd.h"

violates "float NAN in service" service/x.c 'double f(void) { return NAN; }' "float INFINITY/NAN"
violates "float INFINITY in a test" tests/unit/x.c 'static const double lim = -INFINITY;' "float INFINITY/NAN"

rm -rf "$T/tree"; mkdir -p "$T/tree/service/api" "$T/tree/service/http"
printf '#include "service/app.h"\n#include "service/db/store.h"\n#include "service/http/router.h"\n' >"$T/tree/service/http/ok.c"
printf '#include "service/ledger/ledger.h"\n#include "service/http/server.h"\n#include "service/db/runs.h"\n' >"$T/tree/service/api/ok.c"
check "allowed service includes pass" sh "$ROOT/scripts/check-deps.sh" "$T/tree"

rm -rf "$T/tree"; mkdir -p "$T/tree/federated" "$T/tree/accounting"
printf '#include <pthread.h>\n#include "estimators/eb_common.h"\n' >"$T/tree/federated/ok.c"
printf 'int f(char *b) { return snprintf(b, 4, "%%d", 1); } /* printf-style */\n' >"$T/tree/accounting/ok.c"
# INFINITY / NAN named in comments and strings, DP_INF / DP_NAN and longer identifiers are fine.
printf '/* +INFINITY,\n * or NAN */ double g(void) { return DP_NAN; } // NAN\n' >"$T/tree/accounting/c.c"
printf 'const char *s = "NAN \\" INFINITY"; char q = %s; double h = -DP_INF + MY_NAN_X;\n' "'\"'" >"$T/tree/accounting/d.c"
check "allowed includes and snprintf pass" sh "$ROOT/scripts/check-deps.sh" "$T/tree"
finish
