#!/usr/bin/env bash
# bench/ppsgd: one PPSGD run (Bietti et al., ICML 2022, §6.1 setting; docs/BENCHMARKS.md "PPSGD")
# through the C library and through a NumPy implementation of the same algorithm, side by side in
# one run, one thread each; prints both JSON lines and the ratios. Needs python3-numpy for the
# NumPy side (without it, only the C line).
set -u
BUILD=${BUILD:-build}
ROUNDS=${PPSGD_ROUNDS:-200}
BIN="$BUILD/bench/ppsgd"
[ -x "$BIN" ] || { echo "bench/ppsgd: $BIN is missing (make bench-build)"; exit 1; }
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
C=$("$BIN" "$ROUNDS") || exit 1
echo "$C"
PY=/usr/bin/python3
if ! "$PY" -c 'import numpy' 2>/dev/null; then
    echo "bench/ppsgd: NumPy is not installed (python3-numpy): the C line stands alone"
    exit 0
fi
N=$("$PY" "$(dirname "$0")/ppsgd_numpy.py" "$ROUNDS") || exit 1
echo "$N"
"$PY" - "$C" "$N" <<'PYEOF'
import json, sys
c, n = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for k in ("train_ms_per_round", "data_ms_per_round", "cpu_ms_per_round"):
    print("%-20s dpsilo %8.3f ms   %s %8.3f ms   ratio %.1fx" % (k, c[k], n["impl"], n[k], n[k] / c[k]))
PYEOF
