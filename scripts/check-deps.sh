#!/bin/sh
# check-deps.sh: enforces the dependency direction of DESIGN.md / STYLE.md 2.1 with grep.
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
# report() runs in the main shell (here-documents, not pipes), so bad is visible here.
if [ "$bad" -ne 0 ]; then
    exit 1
fi
