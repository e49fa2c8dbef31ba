#!/usr/bin/env bash
# scripts/embed.sh: the files compiled into the daemon. The web files are web/* plus the extra files
# named after the OpenAPI document (uPlot's, from node_modules/), each under its base name; a name
# that would be embedded twice, or an extra file that is missing, fails the build instead of
# shadowing a file or serving a page without its library.
. "$(dirname "$0")/lib.sh"
cd "$LIB_DIR/../.." || exit 1

mkdir -p "$T/mig" "$T/web" "$T/lib"
printf 'CREATE TABLE t(x);\n' >"$T/mig/0001_init.sql"
printf '<p>hi</p>\n' >"$T/web/index.html"
printf 'x=1;\n' >"$T/lib/chart.js"
printf '{}\n' >"$T/openapi.json"

check "web/* and an extra file are embedded" sh scripts/embed.sh "$T/a.c" "$T/mig" "$T/web" "$T/openapi.json" "$T/lib/chart.js"
check "  index.html is in the table" grep -q '{"index.html", web_' "$T/a.c"
check "  the extra file is in the table under its base name" grep -q '{"chart.js", web_' "$T/a.c"
check "  two web files" grep -q 'EMBED_WEB_N = 2;' "$T/a.c"
check "  the generated C compiles" cc -std=c11 -Wall -Werror -I. -c "$T/a.c" -o "$T/a.o"

cp "$T/lib/chart.js" "$T/web/chart.js"
if sh scripts/embed.sh "$T/b.c" "$T/mig" "$T/web" "$T/openapi.json" "$T/lib/chart.js" 2>"$T/msg"; then
    fail "a name embedded twice is refused"
else
    check "a name embedded twice is refused, saying why" grep -q 'chart.js is already embedded' "$T/msg"
fi
rm "$T/web/chart.js"
if sh scripts/embed.sh "$T/c.c" "$T/mig" "$T/web" "$T/openapi.json" "$T/lib/missing.js" 2>"$T/msg"; then
    fail "a missing extra file is refused"
else
    check "a missing extra file is refused, pointing to make deps" grep -q 'no such file (make deps)' "$T/msg"
fi
check "no output file, nor a half-written one, is left by a failed run" test ! -e "$T/c.c" -a ! -e "$T/c.c.tmp"
finish
