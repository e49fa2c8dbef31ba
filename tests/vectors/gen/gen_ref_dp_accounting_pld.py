#!/usr/bin/env python3
"""Generates tests/vectors/ref_dp_accounting_pld.json: reference PLD numbers from Google's dp_accounting.

Usage:
  DP_ACCOUNTING_SRC=/path/to/differential-privacy/python/dp_accounting \
      /usr/bin/python3 tests/vectors/gen/gen_ref_dp_accounting_pld.py > tests/vectors/ref_dp_accounting_pld.json

dp_accounting is imported from the checkout named by DP_ACCOUNTING_SRC (it needs numpy, scipy, attrs,
absl; Debian's python3-numpy/-scipy/-attr/-absl are enough). For every case this script builds the
PLD of the event twice with dp_accounting's public constructors, once with pessimistic_estimate=True
(connect-the-dots, what its PLDAccountant reports) and once with pessimistic_estimate=False (its
optimistic "privacy buckets" estimate), composes them, and records epsilon(delta) and
delta(epsilon) for both. The pair brackets the true value; dpsilo's PLD must land inside it.
Only numbers produced here are committed; no dp_accounting code is.
"""
import json
import math
import os
import platform
import subprocess
import sys
import time

SRC = os.environ.get("DP_ACCOUNTING_SRC")
if not SRC:
    sys.exit("set DP_ACCOUNTING_SRC to a checkout of google/differential-privacy/python/dp_accounting")
sys.path.insert(0, SRC)

import numpy  # noqa: E402
import scipy  # noqa: E402
from dp_accounting.pld import privacy_loss_distribution as pld  # noqa: E402


def gaussian(s):
    return {"type": "gaussian", "noise_multiplier": s}


def laplace(b):
    return {"type": "laplace", "noise_multiplier": b}


def poisson(q, ev):
    return {"type": "poisson_sampled", "sampling_rate": q, "event": ev}


def selfc(n, ev):
    return {"type": "self_composed", "count": n, "event": ev}


def composed(*evs):
    return {"type": "composed", "events": list(evs)}


def build(ev, h, pess, count=1):
    """PLD of an event tree (the subset dpsilo's PLD accountant supports), or None for identity."""
    t = ev["type"]
    if t == "self_composed":
        return build(ev["event"], h, pess, count * ev["count"])
    if t == "composed":
        out = None
        for e in ev["events"]:
            p = build(e, h, pess, count)
            out = p if out is None else out.compose(p)
        return out
    if t == "gaussian":  # exact composition of Gaussians, as dp_accounting's accountant does
        return pld.from_gaussian_mechanism(ev["noise_multiplier"] / math.sqrt(count),
                                           pessimistic_estimate=pess, use_connect_dots=pess,
                                           value_discretization_interval=h)
    if t == "laplace":
        return pld.from_laplace_mechanism(ev["noise_multiplier"], pessimistic_estimate=pess,
                                          use_connect_dots=pess,
                                          value_discretization_interval=h).self_compose(count)
    if t == "poisson_sampled":
        inner = ev["event"]
        if inner["type"] == "gaussian":
            base = pld.from_gaussian_mechanism(inner["noise_multiplier"],
                                               sampling_prob=ev["sampling_rate"],
                                               pessimistic_estimate=pess, use_connect_dots=pess,
                                               value_discretization_interval=h)
        else:
            base = pld.from_laplace_mechanism(inner["noise_multiplier"],
                                              sampling_prob=ev["sampling_rate"],
                                              pessimistic_estimate=pess, use_connect_dots=pess,
                                              value_discretization_interval=h)
        return base.self_compose(count)
    raise ValueError(t)


CASES = [
    ("gaussian_s0.8", gaussian(0.8), 1e-5, 2.0),
    ("gaussian_s2_x100", selfc(100, gaussian(2.0)), 1e-6, 3.0),
    ("laplace_b1", laplace(1.0), 1e-5, 0.5),
    ("laplace_b3_x50", selfc(50, laplace(3.0)), 1e-5, 5.0),
    ("poisson_gauss_q0.01_s1.1_x10000", selfc(10000, poisson(0.01, gaussian(1.1))), 1e-5, 4.0),
    ("poisson_gauss_q0.05_s1.0_x1000", selfc(1000, poisson(0.05, gaussian(1.0))), 1e-5, 6.0),
    ("poisson_gauss_q0.2_s2_x200", selfc(200, poisson(0.2, gaussian(2.0))), 1e-6, 4.0),
    ("poisson_gauss_q0.001_s0.8_x20000", selfc(20000, poisson(0.001, gaussian(0.8))), 1e-5, 1.0),
    ("poisson_gauss_q0.5_s0.9_x10", selfc(10, poisson(0.5, gaussian(0.9))), 1e-5, 3.0),
    ("poisson_laplace_q0.05_b2_x500", selfc(500, poisson(0.05, laplace(2.0))), 1e-5, 2.0),
    ("mixed_two_sampled_and_gauss",
     composed(selfc(2000, poisson(0.01, gaussian(1.1))), selfc(300, poisson(0.05, gaussian(2.0))),
              gaussian(5.0)), 1e-5, 2.0),
    ("mixed_laplace_and_sampled",
     composed(selfc(20, laplace(10.0)), selfc(1000, poisson(0.02, gaussian(1.3)))), 1e-6, 2.0),
]
DISCRETIZATIONS = [1e-4, 1e-3]


def main():
    try:
        commit = subprocess.run(["git", "-C", SRC, "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = os.environ.get("DP_ACCOUNTING_COMMIT", "unknown")
    version = open(os.path.join(SRC, "VERSION")).read() if os.path.exists(
        os.path.join(SRC, "VERSION")) else "unknown"
    ver = [l for l in version.splitlines() if l and not l.startswith('"')]
    out = {
        "provenance": {
            "generator": "tests/vectors/gen/gen_ref_dp_accounting_pld.py",
            "reference": "google/differential-privacy python/dp_accounting, PLD "
                         "(privacy_loss_distribution.from_gaussian_mechanism / "
                         "from_laplace_mechanism, self_compose, compose, get_epsilon_for_delta, "
                         "get_delta_for_epsilon); add_remove neighbouring",
            "dp_accounting_commit": commit,
            "dp_accounting_version": ver[0] if ver else "unknown",
            "python": platform.python_version(),
            "numpy": numpy.__version__,
            "scipy": scipy.__version__,
            "generated_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "semantics": "eps_pessimistic/delta_pessimistic: pessimistic_estimate=True (connect the "
                         "dots); eps_optimistic/delta_optimistic: pessimistic_estimate=False "
                         "(privacy buckets, rounded down). The true value lies between them.",
        },
        "cases": [],
    }
    for name, ev, delta, eps in CASES:
        for h in DISCRETIZATIONS:
            rec = {"name": name, "event": ev, "neighboring": "add_remove",
                   "value_discretization": h, "delta": delta, "epsilon": eps}
            for pess, tag in ((True, "pessimistic"), (False, "optimistic")):
                t0 = time.perf_counter()
                p = build(ev, h, pess)
                rec["eps_" + tag] = float(p.get_epsilon_for_delta(delta))
                rec["delta_" + tag] = float(p.get_delta_for_epsilon(eps))
                rec["seconds_" + tag] = round(time.perf_counter() - t0, 4)
            out["cases"].append(rec)
            print(name, h, rec["eps_optimistic"], rec["eps_pessimistic"], file=sys.stderr)
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
