#!/usr/bin/env bash
# bench/estimators/run.sh: timings of the empirical-Bayes estimators (issue #6) and, when R with VGAM and
# mclust is installed, the independent checks and the mclust comparison of compare.R on the same data.
# Not part of `make test`. Usage: bash bench/estimators/run.sh   (or `make bench`); REPS=5 by default.
set -euo pipefail
BUILD=${BUILD:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$BUILD/bench/estimators
[ -x "$BIN" ] || { echo "bench/estimators: $BIN not built (make bench builds it)"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/dpsilo-bench-est-XXXXXX")
trap 'rm -rf "$T"' EXIT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
nice -n 10 "$BIN" --dump "$T" --reps "${REPS:-5}"
if command -v Rscript >/dev/null && Rscript -e 'library(VGAM); library(mclust)' >/dev/null 2>&1; then
    echo "$(Rscript -e 'cat(R.version.string, "mclust", as.character(packageVersion("mclust")), "VGAM", as.character(packageVersion("VGAM")))')"
    nice -n 10 Rscript "$HERE/compare.R" "$T"
else
    echo "R with VGAM and mclust not installed: independent checks skipped (apt-get install r-base-core r-cran-vgam r-cran-mclust)"
fi
