#!/bin/sh
# check-deps.sh: enforces the dependency direction of docs/ARCHITECTURE.md with grep.
#
#   1. Only service/ may include microhttpd.h, jansson.h or sqlite3.h.
#   2. Each library includes project headers only from the libraries below it:
#        common      -> common
#        accounting  -> common accounting
#        estimators  -> common accounting estimators
#        federated   -> common accounting estimators federated
#      (nobody below service/ includes service/ or cli/ headers).
#   3. accounting/ and estimators/ do not use threads (pthread.h); only federated/ may.
#   4. Libraries never print: no printf/fprintf/puts/fputs/perror/putchar outside common/dp_log.c.
#   5. service/ is in layers (docs/ARCHITECTURE.md); each directory includes service/ headers only
#      from the directories below it:
#        base    -> base                          (configuration, version, the compute pool)
#        codec   -> base codec                    (JSON <-> library structs)
#        db      -> base codec db                 (SQLite: connections, migrations, resources)
#        ledger  -> base codec db ledger          (the budget ledger)
#        jobs    -> base codec db ledger jobs     (training jobs: jobs/runner, prepare, round_json)
#        http    -> base codec http + db/store.h  (server, router, errors, static, metrics, bearer)
#        api     -> everything but main.c         (the route table, access policy, handlers)
#      service/app.h (opaque pointers only) may be included anywhere in service/.
#   6. Only service/http/ includes microhttpd.h (and base/version.c, which reports library
#      versions); the http layer never includes the ledger or the api. No SQL in service/api/: no
#      sqlite3.h and no sqlite3_* call there (a handler reads and writes through its db/ file).
#   7. No float INFINITY / NAN in code (comments and strings may name them) anywhere but
#      common/dp_math.h: use DP_INF / DP_NAN. The float constants are what clang's -Wdouble-promotion
#      rejects and gcc's does not, so a gcc-only build would not notice them.
#
# Usage: scripts/check-deps.sh [ROOT]   (ROOT defaults to the current directory). Exit 1 on a violation,
# listing every offending file and line.
set -u
root=${1:-.}
bad=0

report() { # $1 = rule, then grep -n output lines on stdin
    while IFS= read -r line; do
        [ -n "$line" ] || continue
        echo "check-deps: $1: $line"
        bad=1
    done
}

libs="common accounting estimators federated"
for lib in $libs; do
    [ -d "$root/$lib" ] || continue
    files=$(find "$root/$lib" -name '*.[ch]' | sort)
    [ -n "$files" ] || continue
    # 1
    report "service-only header in $lib/" <<EOF2
$(grep -HnE '#[[:space:]]*include[[:space:]]*[<"](microhttpd|jansson|sqlite3)\.h' $files)
EOF2
    # 2
    case $lib in
        common) allowed="common" ;;
        accounting) allowed="common|accounting" ;;
        estimators) allowed="common|accounting|estimators" ;;
        federated) allowed="common|accounting|estimators|federated" ;;
    esac
    report "$lib/ may include only ($allowed)/ headers" <<EOF2
$(grep -HnE '#[[:space:]]*include[[:space:]]*"[A-Za-z0-9_]+/' $files | grep -vE "#[[:space:]]*include[[:space:]]*\"($allowed)/")
EOF2
    # 3
    if [ "$lib" = accounting ] || [ "$lib" = estimators ]; then
        report "$lib/ must not use threads" <<EOF2
$(grep -HnE '#[[:space:]]*include[[:space:]]*<pthread\.h>' $files)
EOF2
    fi
    # 4
    report "libraries never print (use dp_err; only service/ logs)" <<EOF2
$(grep -HnE '(^|[^A-Za-z0-9_])(printf|fprintf|vfprintf|puts|fputs|perror|putchar)[[:space:]]*\(' $files | grep -v '^[^:]*common/dp_log\.c:')
EOF2
done
# 5, 6: the layers of service/.
layer_allowed() {
    case $1 in
        base) echo "base" ;;
        codec) echo "base|codec" ;;
        db) echo "base|codec|db" ;;
        ledger) echo "base|codec|db|ledger" ;;
        jobs) echo "base|codec|db|ledger|jobs" ;;
        http) echo "base|codec|http|db/store\.h" ;;
        api) echo "base|codec|db|ledger|jobs|http|api" ;;
        *) echo "" ;;
    esac
}
if [ -d "$root/service" ]; then
    for dir in $(find "$root/service" -mindepth 1 -maxdepth 1 -type d | sort); do
        layer=$(basename "$dir")
        allowed=$(layer_allowed "$layer")
        files=$(find "$dir" -name '*.[ch]' | sort)
        [ -n "$files" ] || continue
        if [ -z "$allowed" ]; then
            report "service/$layer/ is not a known layer (add it to scripts/check-deps.sh and docs/ARCHITECTURE.md)" <<EOF2
$files
EOF2
            continue
        fi
        report "service/$layer/ may include only service/($allowed)/ headers and service/app.h" <<EOF2
$(grep -HnE '#[[:space:]]*include[[:space:]]*"service/' $files | grep -vE "#[[:space:]]*include[[:space:]]*\"service/(($allowed)/|app\.h\")" | grep -vE "#[[:space:]]*include[[:space:]]*\"service/($allowed)\"")
EOF2
    done
    report "service/*.c outside its directory (every file but main.c and app.h belongs to a layer)" <<EOF2
$(find "$root/service" -maxdepth 1 -name '*.[ch]' ! -name main.c ! -name app.h)
EOF2
    report "no SQL in service/api/ (use the resource's file in service/db/)" <<EOF2
$(grep -rHnE '#[[:space:]]*include[[:space:]]*[<"]sqlite3\.h|(^|[^A-Za-z0-9_])sqlite3_[a-z0-9_]+[[:space:]]*\(' "$root/service/api" 2>/dev/null)
EOF2
    report "only service/http/ includes microhttpd.h" <<EOF2
$(grep -rHnE '#[[:space:]]*include[[:space:]]*<microhttpd\.h>' "$root/service" | grep -v "/service/http/" | grep -v "/service/base/version\.c:")
EOF2
fi
# 7: awk drops comments, string and character literals (tracking /* */ across lines), then looks for
# the identifiers.
for d in common accounting estimators federated service cli tests bench; do
    [ -d "$root/$d" ] || continue
    files=$(find "$root/$d" -name '*.[ch]' ! -path '*/common/dp_math.h' | sort)
    [ -n "$files" ] || continue
    report "float INFINITY/NAN in code (use DP_INF/DP_NAN from common/dp_math.h)" <<EOF2
$(awk '
FNR == 1 { inc = 0 }
{
    line = $0; code = ""; i = 1; n = length(line)
    while (i <= n) {
        c = substr(line, i, 1); c2 = substr(line, i, 2)
        if (inc) {
            if (c2 == "*/") { inc = 0; i += 2 } else i++
        } else if (c2 == "/*") { inc = 1; i += 2; code = code " "
        } else if (c2 == "//") { break
        } else if (c == "\"" || c == "\047") {
            q = c; i++
            while (i <= n && substr(line, i, 1) != q) i += (substr(line, i, 1) == "\\") ? 2 : 1
            i++; code = code " "
        } else { code = code c; i++ }
    }
    if (code ~ /(^|[^A-Za-z0-9_])(INFINITY|NAN)([^A-Za-z0-9_]|$)/) print FILENAME ":" FNR ":" $0
}' $files)
EOF2
done

# report() runs in the main shell (here-documents, not pipes), so bad is visible here.
if [ "$bad" -ne 0 ]; then
    exit 1
fi
