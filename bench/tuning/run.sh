#!/usr/bin/env bash
# bench/tuning: the price of a private hyperparameter search, in-process (build/bench/tuning), and
# dp_accounting's time for the same events when DP_ACCOUNTING_SRC points at
# <google/differential-privacy checkout>/python/dp_accounting (run with Debian's /usr/bin/python3).
set -eu
BUILD=${BUILD:-build}
# DP_ACCOUNTING_SRC may name the google/differential-privacy checkout or its python/dp_accounting folder.
if [ -n "${DP_ACCOUNTING_SRC:-}" ] && [ -d "$DP_ACCOUNTING_SRC/python/dp_accounting" ]; then
    export DP_ACCOUNTING_SRC="$DP_ACCOUNTING_SRC/python/dp_accounting"
fi
nice -n 10 "$BUILD/bench/tuning"
if [ -n "${DP_ACCOUNTING_SRC:-}" ]; then
    nice -n 10 /usr/bin/python3 "$(dirname "$0")/dpa_time.py"
else
    echo "(set DP_ACCOUNTING_SRC to time dp_accounting on the same events)"
fi
