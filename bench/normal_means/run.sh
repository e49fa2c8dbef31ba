#!/usr/bin/env bash
# bench/normal_means/run.sh: timings of the normal-means estimator (issue #15) and, when R with mixsqp
# is installed (Debian r-cran-mixsqp), R's mixsqp on the same 10^6 x 20 matrix in the same run.
# Not part of `make test`. Usage: bash bench/normal_means/run.sh   (or `make bench`); REPS=5 by default.
# Both are pinned to one core (taskset -c ${CPU:-0}); the figures are CPU times.
set -euo pipefail
BUILD=${BUILD:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$BUILD/bench/normal_means
[ -x "$BIN" ] || { echo "bench/normal_means: $BIN not built (make bench builds it)"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/dpsilo-bench-nm-XXXXXX")
trap 'rm -rf "$T"' EXIT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
taskset -c "${CPU:-0}" "$BIN" --dump "$T" --reps "${REPS:-5}"
if command -v Rscript >/dev/null && Rscript -e 'library(mixsqp)' >/dev/null 2>&1; then
    echo "$(Rscript -e 'cat(R.version.string)')"
    OPENBLAS_NUM_THREADS=1 taskset -c "${CPU:-0}" Rscript "$HERE/compare.R" "$T" "${REPS:-5}"
else
    echo "R with mixsqp not installed: comparison skipped (apt-get install r-cran-mixsqp)"
fi
