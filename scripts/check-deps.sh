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
#   5. No float INFINITY / NAN in code (comments and strings may name them) anywhere but
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
# 5: awk drops comments, string and character literals (tracking /* */ across lines), then looks for
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
