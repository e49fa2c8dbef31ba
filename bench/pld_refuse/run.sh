#!/usr/bin/env bash
# bench/pld_refuse: CPU time to refuse a 256-mechanism PLD request over the work cap, with the PMFs
# built (the late check) beside the early estimate (issue #10). Run by `make bench`.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
echo "load average: $(cut -d" " -f1-3 /proc/loadavg) on $(nproc) cores (CPU times below)"
nice -n 10 "$BUILD/bench/pld_refuse" "${PLD_REFUSE_REPS:-5}"
