#!/usr/bin/env bash
# bench/eb_central/run.sh: MSE of central DP, local DP, no pooling and non-private EB for the Gaussian
# estimator as the number of clients grows, then the same for the Beta-Bernoulli estimator (rows
# marked "beta") (issue #15; the tables in docs/ESTIMATORS.md "Central DP"). Not part of
# `make test`. Usage: bash bench/eb_central/run.sh [--reps N] [--csv] (about 20 s of CPU at the
# default 5-repetition floor, most of it the Beta table; deterministic). `make figures` draws its
# CSV (the Gaussian rows).
set -euo pipefail
BUILD=${BUILD:-build}
BIN=$BUILD/bench/eb_central
[ -x "$BIN" ] || { echo "bench/eb_central: $BIN not built (make bench-build builds it)"; exit 1; }
nice -n 10 "$BIN" "$@"
