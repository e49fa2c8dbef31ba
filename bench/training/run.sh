#!/usr/bin/env bash
# bench/training/run.sh: the training benchmark's reference anchor. Runs torch_anchor.py (one epoch
# of PyTorch SGD and of Opacus 1.4 DP-SGD per model, see its header) and prints the rows as a table
# (table.py). When a C driver $BUILD/bench/training exists it runs first, and its JSON lines in the
# same schema (with "impl": "dpsilo") join the same table. Not part of `make test`; timings are
# printed, never asserted. Without python3-torch (CI) the anchor prints why it skipped and exits 0.
#
# Setup (Debian 12 packages, Opacus v1.4.0 source, the opt_einsum stand-in): bench/training/README.md.
# Knobs:
#   OPACUS_PATH=/work/scratch/opacus-1.4.0   Opacus v1.4.0 source tree (not in this repository)
#   OPACUS_SHIM=/work/scratch/pyshim         directory holding the opt_einsum stand-in package
#   ANCHOR_BLAS=openmp|system   openmp (default): LD_LIBRARY_PATH selects Debian's OpenMP OpenBLAS,
#                               which follows torch.set_num_threads; system: whatever
#                               update-alternatives points libblas.so.3 at
#   ANCHOR_MALLOC=jemalloc|glibc  jemalloc (default when libjemalloc2 is installed): LD_PRELOAD it
#                               with purging off, so freed blocks are reused instead of returned to
#                               the kernel; see README.md for why this matters for Opacus here
#   ANCHOR_MODES=pytorch,opacus  (opacus_tensorbatch also available)   REPEATS=1 (best of N epochs)
#   NICE=10                     niceness of the measured processes (0 when the machine is quiet
#                               and the figures matter: at 10 any busy neighbour takes ~90% of a core)
#   ANCHOR_ARGS=...             further torch_anchor.py options (e.g. --configs, --synthetic)
set -euo pipefail
BUILD=${BUILD:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-/usr/bin/python3}
OPENBLAS_OMP=/usr/lib/x86_64-linux-gnu/openblas-openmp
JEMALLOC=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
export OPACUS_PATH=${OPACUS_PATH:-/work/scratch/opacus-1.4.0}
export OPACUS_SHIM=${OPACUS_SHIM:-/work/scratch/pyshim}

T=$(mktemp -d "${TMPDIR:-/tmp}/dpsilo-bench-training-XXXXXX")
trap 'rm -rf "$T"' EXIT
: >"$T/rows"

echo "bench/training: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)"
if [ -x "$BUILD/bench/training" ]; then
    nice -n "${NICE:-10}" "$BUILD/bench/training" >>"$T/rows" || echo "bench/training: $BUILD/bench/training failed"
fi

if ! command -v "$PY" >/dev/null; then
    echo "bench/training: $PY not found: PyTorch/Opacus anchor skipped"
else
    envs=()
    if [ "${ANCHOR_BLAS:-openmp}" = openmp ] && [ -d "$OPENBLAS_OMP" ]; then
        envs+=("LD_LIBRARY_PATH=$OPENBLAS_OMP${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    fi
    if [ "${ANCHOR_MALLOC:-jemalloc}" = jemalloc ] && [ -f "$JEMALLOC" ]; then
        envs+=("LD_PRELOAD=$JEMALLOC" "MALLOC_CONF=oversize_threshold:0,dirty_decay_ms:-1,muzzy_decay_ms:-1")
    fi
    # shellcheck disable=SC2086  # ANCHOR_ARGS is a list of options
    env "${envs[@]}" nice -n "${NICE:-10}" "$PY" "$HERE/torch_anchor.py" --modes "${ANCHOR_MODES:-pytorch,opacus}" \
        --repeats "${REPEATS:-1}" ${ANCHOR_ARGS:-} >>"$T/rows" ||
        echo "bench/training: torch_anchor.py failed (see above)"
fi
"$PY" "$HERE/table.py" "$T/rows" 2>/dev/null || cat "$T/rows"
