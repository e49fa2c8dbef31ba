"""common.py: shared helpers of dpsilo's golden-vector generators (our own code).

The reference libraries are never copied into this repository: they are imported from checkouts named by
environment variables (see tests/vectors/README.md):
    DP_ACCOUNTING_SRC  a checkout of github.com/google/differential-privacy (we use python/dp_accounting)
    OPACUS_SRC         a checkout of github.com/pytorch/opacus (we use opacus/accountants/analysis/rdp.py)
"""
import importlib.util
import json
import math
import os
import platform
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.dirname(HERE)
REPO_ROOT = os.path.dirname(os.path.dirname(VECTORS))


def need_env(name):
    v = os.environ.get(name)
    if not v or not os.path.isdir(v):
        sys.exit(f"{name} must point at a checkout (see tests/vectors/README.md)")
    return v


def git_commit(path):
    try:
        return subprocess.check_output(["git", "-C", path, "rev-parse", "HEAD"], text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def load_dp_accounting():
    src = need_env("DP_ACCOUNTING_SRC")
    sys.path.insert(0, os.path.join(src, "python", "dp_accounting"))
    import dp_accounting  # noqa: E402
    from dp_accounting.rdp import rdp_privacy_accountant  # noqa: E402
    return src, dp_accounting, rdp_privacy_accountant


def load_opacus_rdp():
    """Opacus' RDP analysis module by file path: the package __init__ imports torch, the module does not."""
    src = need_env("OPACUS_SRC")
    path = os.path.join(src, "opacus", "accountants", "analysis", "rdp.py")
    spec = importlib.util.spec_from_file_location("opacus_analysis_rdp", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return src, mod


def opacus_default_alphas(src):
    """Opacus' RDPAccountant.DEFAULT_ALPHAS, read from its source text (the module imports torch)."""
    import ast
    text = open(os.path.join(src, "opacus", "accountants", "rdp.py")).read()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "DEFAULT_ALPHAS":
            return eval(compile(ast.Expression(node.value), "DEFAULT_ALPHAS", "eval"), {})
    raise RuntimeError("DEFAULT_ALPHAS not found in opacus/accountants/rdp.py")


def provenance(library, repo, src, script):
    import numpy
    import scipy
    import mpmath
    p = {"library": library, "repo": repo, "commit": git_commit(src) if src else None,
         "script": os.path.relpath(os.path.abspath(script), REPO_ROOT),
         "python": platform.python_version(), "numpy": numpy.__version__, "scipy": scipy.__version__,
         "mpmath": mpmath.__version__}
    return p


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


def call_with_timeout(fn, seconds, *args, **kw):
    """Runs fn; raises Timeout after `seconds` (some library loops never end for extreme inputs)."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn(*args, **kw)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# ---- event JSON (docs/ACCOUNTING.md, "The event tree") -------------------------------------------------------

def ev_gaussian(sigma):
    return {"type": "gaussian", "noise_multiplier": sigma}


def ev_laplace(b):
    return {"type": "laplace", "noise_multiplier": b}


def ev_poisson(q, inner):
    return {"type": "poisson_sampled", "sampling_rate": q, "event": inner}


def ev_swor(n, m, inner):
    return {"type": "sampled_without_replacement", "source_size": n, "sample_size": m, "event": inner}


def ev_self(count, inner):
    return inner if count == 1 else {"type": "self_composed", "count": int(count), "event": inner}


def ev_sgm(q, sigma, steps=1):
    return ev_self(steps, ev_poisson(q, ev_gaussian(sigma)))


# ---- numbers ---------------------------------------------------------------------------------------------

def num(x):
    """A JSON number: +inf -> None (null). NaN must be handled by the caller (it is not a privacy figure)."""
    if x is None:
        return None
    x = float(x)
    if math.isnan(x):
        raise ValueError("NaN is not a valid vector value")
    if math.isinf(x):
        if x < 0:
            raise ValueError("-inf is not a valid vector value")
        return None
    return x


def rel_err(val, ref):
    """|val - ref| / |ref| with inf/None handling; returns float('inf') when one is infinite and the other
    is not, 0 when both are infinite."""
    if val is None and ref is None:
        return 0.0
    if val is None or ref is None:
        return float("inf")
    if ref == 0:
        return 0.0 if val == 0 else float("inf")
    return abs(val - ref) / abs(ref)


def write_json(path, obj):
    """Writes obj as JSON with one list element per line (readable diffs), no NaN."""
    def dump(v):
        return json.dumps(v, separators=(",", ":"), allow_nan=False)
    with open(path, "w") as f:
        f.write("{\n")
        keys = list(obj.keys())
        for i, k in enumerate(keys):
            v = obj[k]
            sep = "," if i + 1 < len(keys) else ""
            if isinstance(v, list):
                f.write(f" {dump(k)}: [\n")
                for j, e in enumerate(v):
                    f.write("  " + dump(e) + ("," if j + 1 < len(v) else "") + "\n")
                f.write(f" ]{sep}\n")
            else:
                f.write(f" {dump(k)}: {dump(v)}{sep}\n")
        f.write("}\n")


def fmt_g(x, d=6):
    if x is None:
        return "inf"
    return f"{x:.{d}g}"
