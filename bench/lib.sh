# shellcheck shell=bash
# bench/lib.sh: shell helpers shared by the bench/*/run.sh scripts (sourced, not run).

# bench_listen_url OUT LOG WHAT: the URL dpsilod printed to OUT ("dpsilod listening on URL"), waiting
# up to 5 s for it; when it never comes, says that WHAT's daemon did not start, shows LOG and fails.
bench_listen_url() {
    local url=""
    for _ in $(seq 1 100); do
        url=$(sed -n 's/^dpsilod listening on //p' "$1")
        if [ -n "$url" ]; then
            printf '%s\n' "$url"
            return 0
        fi
        sleep 0.05
    done
    echo "$3: dpsilod did not start" >&2
    cat "$2" >&2
    return 1
}

# bench_scratch NAME: a fresh directory, in BENCH_DIR, removed when the script exits, after the
# daemon whose pid the script keeps in PID (empty: none) has been stopped.
bench_scratch() {
    BENCH_DIR=$(mktemp -d "${TMPDIR:-/tmp}/dpsilo-bench-$1-XXXXXX")
    PID=""
    trap bench_cleanup EXIT
}

bench_cleanup() {
    if [ -n "${PID:-}" ] && kill -0 "$PID" 2>/dev/null; then
        kill -TERM "$PID"
        wait "$PID" 2>/dev/null || true
    fi
    rm -rf "$BENCH_DIR"
}
