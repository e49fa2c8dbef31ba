#!/usr/bin/env python3
"""bench/training/torch_anchor.py: the PyTorch / Opacus anchor of the training benchmark.

Measures the throughput (samples/s) of ONE epoch of minibatch SGD on Fashion-MNIST-shaped data
(60,000 x 784 float32, 10 classes) for the models the C DP-SGD is compared on:

    logistic        softmax regression 784 -> 10                 B = 256, 1 thread
    mlp-784-50-10   Linear(784,50) -> ReLU -> Linear(50,10)      B = 64,  1 thread
    mlp-784-256-10  Linear(784,256) -> ReLU -> Linear(256,10)    B = 256, 1 and 2 threads

each in these modes:

    pytorch             non-private SGD; each epoch is a fresh random permutation cut into batches of
                        B rows gathered with index_select (no DataLoader); cross-entropy, batch mean.
    opacus              Opacus DP-SGD exactly as its documentation sets it up: a DataLoader over a
                        TensorDataset handed to PrivacyEngine.make_private (noise_multiplier 1.0,
                        max_grad_norm 1.0, flat clipping, per-sample gradients by hooks), which
                        replaces it with Poisson sampling at rate q = 1/ceil(n/B) (Opacus' default).
    opacus_tensorbatch  the same GradSampleModule and DPOptimizer, with the same Poisson sampling done
                        by a mask and index_select instead of the DataLoader's per-example fetch and
                        collate: the part of Opacus' cost that is DP-SGD itself.

Before the timed epochs, --warmup-steps (3) steps train a spare model of the same configuration,
so that one-off costs (OpenMP pool, first BLAS call) are not in the figure. The learning rate is 0.1
for every model (--lr). The loss is the batch mean; under Opacus the
summed clipped gradient plus N(0, (sigma C)^2) noise is divided by the expected batch size, as
Opacus does. Timing covers the epoch only (sampling, forward, backward, clipping, noise, step);
the test accuracy on the 10,000 t10k images is computed afterwards when the real files exist.

Data: the IDX files train-{images,labels}, t10k-{images,labels} (gzip) in --data-dir (default
/usr/share/datasets/fashion-mnist); pixels scaled to [0, 1]. Without them (or with --synthetic) the
inputs are uniform random in [0, 1) with random labels and test_accuracy is null.

Output: one JSON object per line on stdout, for a driver or bench/training/table.py to print:
    {"model", "arch", "batch", "threads", "mode", "samples_per_s", "seconds", "samples_per_cpu_s",
     "cpu_seconds", "samples", "steps",
     "test_accuracy", "epsilon", "delta", "data", "lr", "noise_multiplier", "max_grad_norm",
     "runs_samples_per_s", "torch", "opacus", "blas", "malloc"}
With --repeats R every configuration is trained R times from scratch; samples_per_s is the best of
the R epochs (the machine is shared: the best is the least disturbed), runs_samples_per_s lists all.
samples_per_cpu_s divides by the process's CPU time (all threads) over the same epoch: on a machine
that other jobs keep busy it is the steadier figure for 1-thread runs; with 2 threads it also counts
OpenMP's spin-waiting.
Messages go to stderr. A missing PyTorch or Opacus is reported there and its rows are skipped; the
exit status stays 0 so that `make bench` carries on.

Environment (see bench/training/README.md for the setup from a fresh Debian 12):
    PYTHONPATH   must reach the Opacus v1.4.0 source tree and an `opt_einsum` stand-in, e.g.
                 PYTHONPATH=/work/scratch/opacus-1.4.0:/work/scratch/pyshim
    OPACUS_PATH  alternatively the Opacus source tree alone (prepended to sys.path here); the
                 opt_einsum stand-in is then looked for in OPACUS_SHIM (default: none).
    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp makes Debian's torch (which links
                 libblas.so.3 and libopenblas.so.0 through update-alternatives) load the OpenMP
                 build of OpenBLAS, which obeys torch.set_num_threads. The pthread build ignores it;
                 this script then calls openblas_set_num_threads itself (reported in "blas").
Run it with Debian's interpreter, /usr/bin/python3 (python3-torch is installed for it).
"""

import argparse
import ctypes
import gzip
import json
import math
import os
import struct
import sys
import time

DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"
N_FEATURES = 784
N_CLASSES = 10

# name -> (arch string, hidden width or None)
MODELS = {
    "logistic": ("784-10", None),
    "mlp-784-50-10": ("784-50-10", 50),
    "mlp-784-256-10": ("784-256-10", 256),
}
# (model, batch, threads), the table
DEFAULT_CONFIGS = "logistic:256:1,mlp-784-50-10:64:1,mlp-784-256-10:256:1,mlp-784-256-10:256:2"
MODES = ("pytorch", "opacus", "opacus_tensorbatch")


def note(msg):
    print("torch_anchor: " + msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Data


def read_idx(path):
    """An IDX file (LeCun's MNIST format, gzip): big-endian magic 0x0000 0x08 ndim, then ndim
    uint32 sizes, then unsigned bytes. Returns (bytes, dims)."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    zero, dtype, ndim = struct.unpack_from(">HBB", raw, 0)
    if zero != 0 or dtype != 0x08:
        raise ValueError("%s: not an unsigned-byte IDX file" % path)
    dims = struct.unpack_from(">" + "I" * ndim, raw, 4)
    off = 4 + 4 * ndim
    count = 1
    for d in dims:
        count *= d
    if len(raw) - off != count:
        raise ValueError("%s: %d payload bytes, header says %d" % (path, len(raw) - off, count))
    return raw[off:], dims


def load_split(np, torch, data_dir, split):
    pix, idims = read_idx(os.path.join(data_dir, split + "-images-idx3-ubyte.gz"))
    lab, ldims = read_idx(os.path.join(data_dir, split + "-labels-idx1-ubyte.gz"))
    if len(idims) != 3 or idims[1] * idims[2] != N_FEATURES or ldims != (idims[0],):
        raise ValueError("%s: unexpected shapes %s / %s" % (split, idims, ldims))
    x = np.frombuffer(pix, dtype=np.uint8).reshape(idims[0], N_FEATURES).astype(np.float32) / 255.0
    y = np.frombuffer(lab, dtype=np.uint8).astype(np.int64)
    if y.max() >= N_CLASSES:
        raise ValueError("%s: label %d out of range" % (split, y.max()))
    return torch.from_numpy(x), torch.from_numpy(y)


def load_data(np, torch, args):
    """Returns (x_train, y_train, x_test or None, y_test or None, description)."""
    files = [
        os.path.join(args.data_dir, s + "-" + k + ".gz")
        for s in ("train", "t10k")
        for k in ("images-idx3-ubyte", "labels-idx1-ubyte")
    ]
    if not args.synthetic and all(os.path.exists(f) for f in files):
        xtr, ytr = load_split(np, torch, args.data_dir, "train")
        xte, yte = load_split(np, torch, args.data_dir, "t10k")
        return xtr, ytr, xte, yte, "fashion-mnist"
    if not args.synthetic:
        note("no Fashion-MNIST IDX files in %s: random data, no test accuracy" % args.data_dir)
    g = torch.Generator().manual_seed(args.seed)
    x = torch.rand(args.n_synthetic, N_FEATURES, generator=g)
    y = torch.randint(0, N_CLASSES, (args.n_synthetic,), generator=g)
    return x, y, None, None, "synthetic"


# ---------------------------------------------------------------------------------------------
# BLAS


def malloc_info():
    """'jemalloc' when LD_PRELOAD put it in the process (bench/training/run.sh does, see there),
    else 'glibc'."""
    with open("/proc/self/maps") as f:
        return "jemalloc" if any("libjemalloc" in line for line in f) else "glibc"


def blas_info():
    """Which BLAS the process has mapped (Debian's torch reaches it through update-alternatives):
    'openblas-openmp', 'openblas-pthread', 'reference' or the library path."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            base = os.path.basename(p)
            if base.startswith(("libopenblas", "libblas.so", "libmkl_rt", "libblis")):
                libs.add(p)
    for p in sorted(libs):
        if "libopenblas" in p:
            return "openblas-openmp" if "openblas-openmp" in p else "openblas-pthread"
    for p in sorted(libs):
        if "/blas/" in p:
            return "reference"
    return ",".join(sorted(libs)) or "unknown"


_openblas = None


def set_threads(torch, n):
    """torch.set_num_threads sets OpenMP's count, which the OpenMP OpenBLAS follows; the pthread
    OpenBLAS keeps its own pool (all cores by default), so set it too."""
    global _openblas
    torch.set_num_threads(n)
    if _openblas is None:
        try:
            _openblas = ctypes.CDLL("libopenblas.so.0", mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
        except OSError:
            _openblas = False
    if _openblas and hasattr(_openblas, "openblas_set_num_threads"):
        _openblas.openblas_set_num_threads(ctypes.c_int(n))


# ---------------------------------------------------------------------------------------------
# Models and training


def make_model(torch, name):
    nn = torch.nn
    _, hidden = MODELS[name]
    if hidden is None:
        return nn.Sequential(nn.Linear(N_FEATURES, N_CLASSES))
    return nn.Sequential(nn.Linear(N_FEATURES, hidden), nn.ReLU(), nn.Linear(hidden, N_CLASSES))


def accuracy(torch, model, x, y):
    if x is None:
        return None
    with torch.no_grad():
        correct = 0
        for i in range(0, x.shape[0], 1000):
            correct += (model(x[i : i + 1000]).argmax(dim=1) == y[i : i + 1000]).sum().item()
    return correct / x.shape[0]


def epoch_pytorch(torch, model, x, y, batch, lr, max_steps):
    f = torch.nn.functional
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    n = x.shape[0]
    samples = steps = 0
    t0, c0 = time.perf_counter(), time.process_time()
    perm = torch.randperm(n)
    for i in range(0, n, batch):
        idx = perm[i : i + batch]
        xb, yb = x.index_select(0, idx), y.index_select(0, idx)
        opt.zero_grad(set_to_none=True)
        f.cross_entropy(model(xb), yb).backward()
        opt.step()
        samples += idx.shape[0]
        steps += 1
        if steps == max_steps:
            break
    return time.perf_counter() - t0, time.process_time() - c0, samples, steps, None


def epoch_opacus(torch, opacus, model, x, y, batch, lr, args, tensorbatch, max_steps):
    f = torch.nn.functional
    data = torch.utils.data
    loader = data.DataLoader(data.TensorDataset(x, y), batch_size=batch)
    engine = opacus.PrivacyEngine(accountant="rdp")
    model, opt, loader = engine.make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=lr),
        data_loader=loader,
        noise_multiplier=args.noise_multiplier,
        max_grad_norm=args.max_grad_norm,
        poisson_sampling=not tensorbatch,
    )
    n = x.shape[0]
    n_steps = math.ceil(n / batch)  # Opacus: sample_rate = 1 / len(data_loader)
    q = 1.0 / n_steps
    if max_steps:
        n_steps = min(n_steps, max_steps)

    def tensor_batches():
        for _ in range(n_steps):
            idx = (torch.rand(n) < q).nonzero().reshape(-1)
            yield x.index_select(0, idx), y.index_select(0, idx)

    batches = tensor_batches() if tensorbatch else loader
    samples = steps = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for xb, yb in batches:
        opt.zero_grad(set_to_none=True)
        f.cross_entropy(model(xb), yb).backward()
        opt.step()
        samples += yb.shape[0]
        steps += 1
        if steps == n_steps:
            break
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    eps = engine.get_epsilon(args.delta)
    return seconds, cpu, samples, steps, (model, eps)


def run_config(torch, opacus, data, name, batch, threads, mode, args):
    xtr, ytr, xte, yte, desc = data
    set_threads(torch, threads)

    def epoch(model, max_steps):
        if mode == "pytorch":
            return epoch_pytorch(torch, model, xtr, ytr, batch, args.lr, max_steps)
        return epoch_opacus(
            torch, opacus, model, xtr, ytr, batch, args.lr, args, mode == "opacus_tensorbatch",
            max_steps,
        )

    if args.warmup_steps:
        # a throw-away model: thread pools, BLAS buffers and the allocator are warm, the timed
        # model starts from its initialisation
        torch.manual_seed(args.seed + 1000)
        epoch(make_model(torch, name), args.warmup_steps)
    runs = []
    best = None
    for r in range(args.repeats):
        torch.manual_seed(args.seed + r)
        model = make_model(torch, name)
        sec, cpu, samples, steps, extra = epoch(model, args.max_steps)
        eps = None
        if extra is not None:
            model, eps = extra
        sps = samples / sec
        runs.append(round(sps, 1))
        if best is None or sps > best["samples_per_s"]:
            best = {
                "samples_per_s": sps,
                "seconds": sec,
                "cpu_seconds": cpu,
                "samples": samples,
                "steps": steps,
                "test_accuracy": accuracy(torch, model, xte, yte),
                "epsilon": eps,
            }
    private = mode != "pytorch"
    row = {
        "model": name,
        "arch": MODELS[name][0],
        "batch": batch,
        "threads": threads,
        "mode": mode,
        "samples_per_s": round(best["samples_per_s"], 1),
        "seconds": round(best["seconds"], 4),
        "samples_per_cpu_s": round(best["samples"] / best["cpu_seconds"], 1),
        "cpu_seconds": round(best["cpu_seconds"], 4),
        "samples": best["samples"],
        "steps": best["steps"],
        "test_accuracy": best["test_accuracy"],
        "epsilon": None if best["epsilon"] is None else round(best["epsilon"], 4),
        "delta": args.delta if private else None,
        "data": desc,
        "lr": args.lr,
        "noise_multiplier": args.noise_multiplier if private else None,
        "max_grad_norm": args.max_grad_norm if private else None,
        "runs_samples_per_s": runs,
        "torch": torch.__version__,
        "opacus": getattr(opacus, "__version__", None) if private else None,
        "blas": blas_info(),
        "malloc": malloc_info(),
    }
    if args.max_steps:
        row["max_steps"] = args.max_steps
    return row


def parse_configs(text):
    out = []
    for item in text.split(","):
        parts = item.strip().split(":")
        if len(parts) != 3 or parts[0] not in MODELS:
            raise SystemExit(
                "torch_anchor: bad config %r (want model:batch:threads, model in %s)"
                % (item, ", ".join(MODELS))
            )
        batch, threads = int(parts[1]), int(parts[2])
        if batch < 1 or threads < 1:
            raise SystemExit("torch_anchor: batch and threads must be >= 1 in %r" % item)
        out.append((parts[0], batch, threads))
    return out


def import_opacus():
    extra = os.environ.get("OPACUS_PATH")
    for p in (os.environ.get("OPACUS_SHIM"), extra):
        if p and p not in sys.path:
            sys.path.insert(0, p)
    try:
        import opacus  # noqa: F401  (PYTHONPATH / OPACUS_PATH, see the module comment)
    except ImportError as e:
        note(
            "Opacus not importable (%s): Opacus rows skipped. Put the v1.4.0 source tree and the "
            "opt_einsum stand-in on PYTHONPATH (bench/training/README.md)" % e
        )
        return None
    return opacus


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", default=DEFAULT_CONFIGS, help="model:batch:threads,...")
    ap.add_argument("--modes", default="pytorch,opacus", help="comma list of " + ",".join(MODES))
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--noise-multiplier", type=float, default=1.0)
    ap.add_argument("--max-grad-norm", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-5, help="for the reported epsilon")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    ap.add_argument("--synthetic", action="store_true", help="random data even if files exist")
    ap.add_argument("--n-synthetic", type=int, default=60000)
    ap.add_argument("--max-steps", type=int, default=0, help="stop each epoch early (smoke tests)")
    ap.add_argument("--warmup-steps", type=int, default=3, help="untimed steps on a spare model")
    args = ap.parse_args(argv)
    configs = parse_configs(args.configs)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            raise SystemExit("torch_anchor: unknown mode %r (one of %s)" % (m, ", ".join(MODES)))
    if args.repeats < 1 or args.lr <= 0 or args.max_grad_norm <= 0 or args.noise_multiplier < 0:
        raise SystemExit("torch_anchor: --repeats >= 1, --lr > 0, --max-grad-norm > 0, sigma >= 0")

    try:
        import numpy as np
        import torch
    except ImportError as e:
        note(
            "PyTorch/NumPy not importable (%s): PyTorch and Opacus rows skipped. On Debian 12: "
            "apt-get install --no-install-recommends python3-torch python3-numpy, and run "
            "/usr/bin/python3" % e
        )
        return 0
    opacus = None
    if any(m != "pytorch" for m in modes):
        opacus = import_opacus()
        if opacus is None:
            modes = [m for m in modes if m == "pytorch"]
        else:
            import warnings

            warnings.filterwarnings("ignore", module="opacus")  # secure_mode / RNG notices
            # Opacus 1.4's hooks on torch 1.13 (register_backward_hook): harmless for Linear/ReLU
            warnings.filterwarnings("ignore", message="Using a non-full backward hook")

    data = load_data(np, torch, args)
    note(
        "torch %s, opacus %s, BLAS %s, malloc %s, data %s (%d train)"
        % (
            torch.__version__,
            getattr(opacus, "__version__", "-"),
            blas_info(),
            malloc_info(),
            data[4],
            data[0].shape[0],
        )
    )
    for name, batch, threads in configs:
        for mode in modes:
            row = run_config(torch, opacus, data, name, batch, threads, mode, args)
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
