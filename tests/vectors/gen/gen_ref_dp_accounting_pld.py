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
from dp_accounting import privacy_accountant  # noqa: E402
from dp_accounting.pld import privacy_loss_distribution as pld  # noqa: E402

REPLACE_ONE = privacy_accountant.NeighboringRelation.REPLACE_ONE
ADD_REMOVE = privacy_accountant.NeighboringRelation.ADD_OR_REMOVE_ONE


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


def build(ev, h, pess, replace=False, count=1):
    """PLD of an event tree (the subset dpsilo's PLD accountant supports), or None for identity.

    replace: dpsilo's replace_one, where noise_multiplier is std over the replace-one sensitivity
    (accounting/pld.h). dp_accounting's REPLACE_ONE keeps the add/remove sensitivity and shifts both
    ways, so the same mechanism is its Gaussian with noise_multiplier 2 sigma."""
    t = ev["type"]
    if t == "self_composed":
        return build(ev["event"], h, pess, replace, count * ev["count"])
    if t == "composed":
        out = None
        for e in ev["events"]:
            p = build(e, h, pess, replace, count)
            out = p if out is None else out.compose(p)
        return out
    rel, f = (REPLACE_ONE, 2.0) if replace else (ADD_REMOVE, 1.0)
    if t == "gaussian":  # exact composition of Gaussians, as dp_accounting's accountant does
        return pld.from_gaussian_mechanism(f * ev["noise_multiplier"] / math.sqrt(count),
                                           pessimistic_estimate=pess, use_connect_dots=pess,
                                           value_discretization_interval=h,
                                           neighboring_relation=rel)
    if t == "laplace":
        return pld.from_laplace_mechanism(ev["noise_multiplier"], pessimistic_estimate=pess,
                                          use_connect_dots=pess,
                                          value_discretization_interval=h).self_compose(count)
    if t == "poisson_sampled":
        inner = ev["event"]
        if inner["type"] == "gaussian":
            base = pld.from_gaussian_mechanism(f * inner["noise_multiplier"],
                                               sampling_prob=ev["sampling_rate"],
                                               pessimistic_estimate=pess, use_connect_dots=pess,
                                               value_discretization_interval=h,
                                               neighboring_relation=rel)
        else:
            base = pld.from_laplace_mechanism(inner["noise_multiplier"],
                                              sampling_prob=ev["sampling_rate"],
                                              pessimistic_estimate=pess, use_connect_dots=pess,
                                              value_discretization_interval=h)
        return base.self_compose(count)
    raise ValueError(t)


# (name, event, delta, epsilon[, neighboring]); neighboring defaults to add_remove.
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
    ("replace_gaussian_s1.3", gaussian(1.3), 1e-5, 2.0, "replace_one"),
    ("replace_poisson_gauss_q0.01_s1.1_x1000", selfc(1000, poisson(0.01, gaussian(1.1))), 1e-5, 0.8,
     "replace_one"),
    ("replace_poisson_gauss_q0.2_s1.5_x100", selfc(100, poisson(0.2, gaussian(1.5))), 1e-6, 5.0,
     "replace_one"),
    ("replace_mixed",
     composed(selfc(500, poisson(0.05, gaussian(1.2))), selfc(20, gaussian(4.0))), 1e-5, 2.0,
     "replace_one"),
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
                         "get_delta_for_epsilon); add_remove cases, and replace_one cases "
                         "computed with dp_accounting's REPLACE_ONE and noise_multiplier 2 sigma "
                         "(its convention keeps the add/remove sensitivity; dpsilo's sigma is "
                         "relative to the replace-one sensitivity)",
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
    for case in CASES:
        name, ev, delta, eps = case[:4]
        nb = case[4] if len(case) > 4 else "add_remove"
        for h in DISCRETIZATIONS:
            rec = {"name": name, "event": ev, "neighboring": nb,
                   "value_discretization": h, "delta": delta, "epsilon": eps}
            for pess, tag in ((True, "pessimistic"), (False, "optimistic")):
                t0 = time.perf_counter()
                p = build(ev, h, pess, nb == "replace_one")
                rec["eps_" + tag] = float(p.get_epsilon_for_delta(delta))
                rec["delta_" + tag] = float(p.get_delta_for_epsilon(eps))
                rec["seconds_" + tag] = round(time.perf_counter() - t0, 4)
            out["cases"].append(rec)
            print(name, h, rec["eps_optimistic"], rec["eps_pessimistic"], file=sys.stderr)
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
