#!/usr/bin/env bash
# The training benchmark's reference half (bench/training): the IDX reader, the argument checks,
# the table (ratios against the dpsilo row, foreign lines kept), and the skip when PyTorch is
# missing, with no PyTorch needed. When Debian's python3-torch is installed, a two-step smoke run on
# tiny IDX files also checks the rows it prints. No daemon, and no timing is asserted.
. "$(dirname "$0")/lib.sh"
ROOT=$(pwd)
B=$ROOT/bench/training
PY=${PYTHON:-python3}

# --- read_idx: a round trip, a wrong type byte, a short payload
cat >"$T/idx.py" <<'EOF'
import gzip, struct, sys
sys.path.insert(0, sys.argv[1])
import torch_anchor as ta
d = sys.argv[2]
def write(name, dtype, dims, payload):
    with gzip.open(d + "/" + name, "wb") as f:
        f.write(struct.pack(">HBB", 0, dtype, len(dims)) + struct.pack(">" + "I" * len(dims), *dims) + payload)
pix = bytes((7 * i + 3) % 256 for i in range(3 * 28 * 28))
write("ok.gz", 8, (3, 28, 28), pix)
raw, dims = ta.read_idx(d + "/ok.gz")
assert dims == (3, 28, 28) and raw == pix, (dims, len(raw))
write("float.gz", 0x0D, (2,), b"\0" * 8)
write("short.gz", 8, (3, 28, 28), pix[:-1])
for bad in ("float.gz", "short.gz"):
    try:
        ta.read_idx(d + "/" + bad)
    except ValueError as e:
        print("refused", bad, e)
    else:
        raise SystemExit(bad + " accepted")
EOF
check "IDX reader: round trip, wrong type and short payload refused" "$PY" "$T/idx.py" "$B" "$T"

# --- argument checks happen before torch is imported
args_refused() { # expected text, args...
    local want=$1
    shift
    if "$PY" "$B/torch_anchor.py" "$@" >"$T/out" 2>&1; then return 1; fi
    grep -qF "$want" "$T/out"
}
check "unknown model refused" args_refused "bad config" --configs logistic:256:1,resnet:64:1
check "batch 0 refused" args_refused "must be >= 1" --configs logistic:0:1
check "unknown mode refused" args_refused "unknown mode" --modes pytorch,tf

# --- no PyTorch: a clear message, no rows, exit 0 (make bench carries on)
mkdir -p "$T/notorch/torch"
echo 'raise ImportError("torch deliberately missing")' >"$T/notorch/torch/__init__.py"
no_torch() {
    PYTHONPATH="$T/notorch" "$PY" "$B/torch_anchor.py" >"$T/rows" 2>"$T/err" || return 1
    [ ! -s "$T/rows" ] && grep -q "PyTorch/NumPy not importable.*rows skipped" "$T/err"
}
check "missing PyTorch: rows skipped with a message, exit 0" no_torch

# --- table.py: grouping, ratio against the dpsilo row, foreign lines copied through
cat >"$T/mixed" <<'EOF'
dpsilo driver: 2 cores
{"impl": "dpsilo", "model": "logistic", "batch": 256, "threads": 1, "mode": "dpsgd", "samples_per_s": 40000.0, "test_accuracy": 0.8}
{"model": "logistic", "batch": 256, "threads": 1, "mode": "opacus", "samples_per_s": 10000.0, "samples_per_cpu_s": 12500.0, "test_accuracy": 0.75, "epsilon": 0.93}
{"model": "mlp-784-50-10", "batch": 64, "threads": 1, "mode": "pytorch", "samples_per_s": 5.0, "test_accuracy": null}
EOF
"$PY" "$B/table.py" "$T/mixed" >"$T/table"
check "table: foreign line kept" grep -qx "dpsilo driver: 2 cores" "$T/table"
check "table: opacus row is 0.25x of dpsilo" \
    grep -qE '^logistic +256 +1 +torch/opacus +10000 +12500 +0\.7500 +0\.25x +epsilon=0\.93' "$T/table"
check "table: dpsilo row is 1x" grep -qE '^logistic +256 +1 +dpsilo/dpsgd +40000 +- +0\.8000 +1x' "$T/table"
check "table: no dpsilo row, no ratio" grep -qE '^mlp-784-50-10 +64 +1 +torch/pytorch +5 +- +- +-' "$T/table"

# --- with Debian's PyTorch: a smoke run on tiny IDX files (2 steps, both modes when Opacus is set up)
TPY=/usr/bin/python3
if [ -x "$TPY" ] && "$TPY" -c 'import torch, numpy' 2>/dev/null; then
    mkdir -p "$T/fm"
    cat >"$T/mkdata.py" <<'EOF'
import gzip, struct, sys
d = sys.argv[1]
def write(name, dims, payload):
    with gzip.open(d + "/" + name, "wb") as f:
        f.write(struct.pack(">HBB", 0, 8, len(dims)) + struct.pack(">" + "I" * len(dims), *dims) + payload)
for split, n in (("train", 40), ("t10k", 8)):
    labels = bytes(i % 10 for i in range(n))
    # class c lights up pixel block c: separable, so the smoke run has something to learn
    pix = bytearray(n * 784)
    for i, c in enumerate(labels):
        for p in range(c * 70, c * 70 + 70):
            pix[i * 784 + p] = 255
    write(split + "-images-idx3-ubyte.gz", (n, 28, 28), bytes(pix))
    write(split + "-labels-idx1-ubyte.gz", (n,), labels)
EOF
    "$TPY" "$T/mkdata.py" "$T/fm"
    modes=pytorch
    if OPACUS_PATH=${OPACUS_PATH:-} "$TPY" -c 'import os, sys; sys.path[:0] = [p for p in (os.environ.get("OPACUS_PATH"), os.environ.get("OPACUS_SHIM")) if p]; import opacus' 2>/dev/null; then
        modes=pytorch,opacus,opacus_tensorbatch
    fi
    smoke() {
        "$TPY" "$B/torch_anchor.py" --data-dir "$T/fm" --configs logistic:8:1,mlp-784-50-10:8:2 \
            --modes "$modes" --max-steps 2 --warmup-steps 1 >"$T/rows" 2>"$T/err" || return 1
        "$TPY" - "$T/rows" "$modes" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
modes = sys.argv[2].split(",")
want = [(m, b, t, mode) for (m, b, t) in (("logistic", 8, 1), ("mlp-784-50-10", 8, 2)) for mode in modes]
got = [(r["model"], r["batch"], r["threads"], r["mode"]) for r in rows]
assert got == want, (got, want)
for r in rows:
    assert r["data"] == "fashion-mnist" and r["steps"] == 2 and r["samples_per_s"] > 0, r
    assert r["test_accuracy"] in [k / 8 for k in range(9)], r
    if r["mode"] == "pytorch":
        assert r["samples"] == 16 and r["epsilon"] is None, r
    else:
        assert r["epsilon"] > 0 and r["noise_multiplier"] == 1.0 and r["max_grad_norm"] == 1.0, r
EOF
    }
    check "torch smoke run ($modes): rows, data source, steps, accuracy" smoke
else
    echo "  (skipped: /usr/bin/python3 has no torch; the smoke run needs python3-torch)"
fi
finish
