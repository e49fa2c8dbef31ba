#!/usr/bin/env bash
# Every shell example in README.md and docs/*.md runs as written against a fresh daemon started like
# `make run` and gives what the document shows. The convention (which blocks run, `# -> STATUS JSON`
# for what a command gives, elisions with `...`) is in docs/API.md "Examples" and at the top of
# docs_examples.py, which does the work; this script starts a fresh daemon (fresh database) for each
# document with the flags its `make run` line asks for (default --auth off, as `make run`), runs the
# examples in a scratch directory whose var/ holds the database and admin token and whose build/ is
# the build directory, and stops the daemon.
# Before: 2 of 37 examples failed as written (BUDGETS.md batch charge of a silo never created,
# ESTIMATORS.md private run with an undefined $ADMIN_TOKEN), 3 showed stale digits.
. "$(dirname "$0")/lib.sh"

ROOT=$(pwd)
BUILD=${BUILD:-build}
PY="$ROOT/tests/integration/docs_examples.py"
DOCS=${DOCS:-"README.md $(ls docs/*.md | tr '\n' ' ')"}

check "the matcher accepts and refuses what it should" python3 "$PY" selftest
for doc in $DOCS; do
    echo "-- $doc (at ${SECONDS}s)"
    if [ "$(python3 "$PY" count "$doc")" = 0 ]; then
        echo "  (no examples to run)"
        continue
    fi
    W="$T/work-$(basename "$doc" .md)"
    mkdir -p "$W/var"
    ln -s "$ROOT/$BUILD" "$W/build"
    read -r -a flags <<<"$(python3 "$PY" flags "$doc")"
    start_daemon --db "$W/var/dpsilo.db" "${flags[@]}" || exit 1
    if python3 "$PY" run "$doc" "$URL" "$W"; then pass "$doc"; else fail "$doc"; fi
    check "$doc: daemon stops cleanly" stop_daemon
    # examples run from the repository root: they must leave no file there (a token in ./a.json)
    left=$(cd "$W" && ls -A | grep -v '^\(var\|build\|\.doctest\)$' | tr '\n' ' ')
    check "$doc: the examples leave no file in their directory (${left:-none})" [ -z "$left" ]
done
finish
