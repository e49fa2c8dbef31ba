#!/usr/bin/python3
"""py_ref.py: the Python half of bench/accounting: times Google's dp_accounting and Opacus' RDP accountant
in-process on the tasks of bench/accounting/tasks.json (the file the C bench reads), so dpsilo's figures
and theirs are measured on the same work, on the same machine.

Needs checkouts of the two public libraries (never copied into this repository; see README.md here):
    DP_ACCOUNTING_SRC=/tmp/refs-dp OPACUS_SRC=/tmp/refs-opacus /usr/bin/python3 bench/accounting/py_ref.py
Without them it prints a note on stderr and exits 0 with no measurements.

Tasks (issue #3, "Performance"):
  single_eps  one epsilon, q=0.01, sigma=1.1, 10^4 steps, delta=1e-5, over each library's default orders
              (dp_accounting: RdpAccountant + get_epsilon; Opacus: compute_rdp + get_privacy_spent)
  sweep_N     the N = |q| x |sigma| x |steps| settings of tasks.json (1000), one epsilon each
  calibrate   smallest sigma with eps <= 1 at delta=1e-5, q=0.01, 10^4 steps: dp_accounting's
              mechanism_calibration.calibrate_dp_mechanism (default bracket and tolerance); for Opacus the
              search scheme of its get_noise_multiplier (double sigma from 10, bisect until eps is within
              0.01 below the target), written here because that function's module imports torch.
Output: one line per measurement; --format json (default): {"task", "library", "seconds_per_call",
"seconds_total", "calls", "value"}; --format tsv: "task<TAB>implementation<TAB>seconds<TAB>result" with
seconds the median per call (the total for the sweep), the protocol of bench/accounting/run.sh.
Timings are medians of --reps repetitions (each repetition is one call; the sweep is timed once).
"""
import argparse
import importlib.util
import json
import logging
import math
import os
import statistics
import sys
import time
import warnings


def load_libs():
    dp_src, op_src = os.environ.get("DP_ACCOUNTING_SRC"), os.environ.get("OPACUS_SRC")
    libs = {}
    if dp_src and os.path.isdir(os.path.join(dp_src, "python", "dp_accounting")):
        dp_src = os.path.join(dp_src, "python", "dp_accounting")  # the checkout's root was given
    if dp_src and os.path.isdir(os.path.join(dp_src, "dp_accounting")):
        sys.path.insert(0, dp_src)
        import dp_accounting
        from dp_accounting.rdp import rdp_privacy_accountant
        libs["dp_accounting"] = (dp_accounting, rdp_privacy_accountant)
    if op_src:
        path = os.path.join(op_src, "opacus", "accountants", "analysis", "rdp.py")
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("opacus_analysis_rdp", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            libs["opacus"] = mod
    return libs


# Opacus' RDPAccountant.DEFAULT_ALPHAS (opacus/accountants/rdp.py); that module imports torch, so the
# grid is written here: 1.1, 1.2, ..., 10.9, then 12, 13, ..., 63.
OPACUS_ALPHAS = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))


def dp_eps(libs, q, sigma, steps, delta):
    dpa, rdp = libs["dp_accounting"]
    acc = rdp.RdpAccountant()  # default orders
    acc.compose(dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), steps))
    return acc.get_epsilon(delta)


def op_eps(libs, q, sigma, steps, delta):
    o = libs["opacus"]
    r = o.compute_rdp(q=q, noise_multiplier=sigma, steps=steps, orders=OPACUS_ALPHAS)
    return float(o.get_privacy_spent(orders=OPACUS_ALPHAS, rdp=r, delta=delta)[0])


def dp_calibrate(libs, q, steps, delta, target):
    dpa, rdp = libs["dp_accounting"]
    return dpa.calibrate_dp_mechanism(
        rdp.RdpAccountant,
        lambda s: dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(s)), steps),
        target, delta)


def op_calibrate(libs, q, steps, delta, target, tol=0.01):
    lo, hi, e_hi = 0.0, 10.0, math.inf
    while e_hi > target:
        hi *= 2
        e_hi = op_eps(libs, q, hi, steps, delta)
        if hi > 1e6:
            raise ValueError("budget too low")
    while target - e_hi > tol:
        mid = (lo + hi) / 2
        e = op_eps(libs, q, mid, steps, delta)
        if e < target:
            hi, e_hi = mid, e
        else:
            lo = mid
    return hi


def timed(fn, reps):
    ts, v = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        v = fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), sum(ts), v


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", default=os.path.join(here, "tasks.json"))
    ap.add_argument("--format", choices=("json", "tsv"), default="json")
    ap.add_argument("--reps", type=int, default=int(os.environ.get("PY_REPS", "20")))
    ap.add_argument("--only", choices=("single_eps", "sweep", "calibrate"), action="append")
    ap.add_argument("--sweep-values", help="write each sweep setting's epsilon to this JSON file")
    args = ap.parse_args()

    libs = load_libs()
    if not libs:
        print("py_ref: set DP_ACCOUNTING_SRC and/or OPACUS_SRC to checkouts (bench/accounting/README.md)",
              file=sys.stderr)
        return 0
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    with open(args.tasks) as f:
        tasks = json.load(f)
    only = set(args.only or ("single_eps", "sweep", "calibrate"))

    def emit(task, lib, per_call, total, calls, value):
        if args.format == "tsv":
            secs = total if task.startswith("sweep") else per_call
            print(f"{task}\t{lib}\t{secs:.9f}\t{value:.10f}", flush=True)
        else:
            print(json.dumps({"task": task, "library": lib, "seconds_per_call": per_call,
                              "seconds_total": total, "calls": calls, "value": value}), flush=True)

    eps_fns = {"dp_accounting": dp_eps, "opacus": op_eps}
    cal_fns = {"dp_accounting": dp_calibrate, "opacus": op_calibrate}
    names = {"dp_accounting": "dp_accounting", "opacus": "opacus"}

    if "single_eps" in only:
        s = tasks["single"]
        for lib in libs:
            med, tot, v = timed(lambda: eps_fns[lib](libs, s["q"], s["sigma"], int(s["steps"]), s["delta"]),
                                args.reps)
            emit("single_eps", names[lib], med, tot, args.reps, v)
    if "sweep" in only:
        sw = tasks["sweep"]
        settings = [(q, sg, int(n)) for q in sw["q"] for sg in sw["sigma"] for n in sw["steps"]]
        dump = {}
        for lib in libs:
            vals = []
            t0 = time.perf_counter()
            for q, sg, n in settings:
                vals.append(eps_fns[lib](libs, q, sg, n, sw["delta"]))
            tot = time.perf_counter() - t0
            emit(f"sweep_{len(settings)}", names[lib], tot / len(settings), tot, len(settings), math.fsum(vals))
            dump[lib] = vals
        if args.sweep_values:
            with open(args.sweep_values, "w") as f:
                json.dump({"settings": settings, "delta": sw["delta"], "epsilon": dump}, f)
    if "calibrate" in only:
        c = tasks["calibrate"]
        reps = max(3, args.reps // 5)
        for lib in libs:
            med, tot, v = timed(lambda: cal_fns[lib](libs, c["q"], int(c["steps"]), c["delta"],
                                                     c["target_epsilon"]), reps)
            emit("calibrate", names[lib] + ("" if lib == "dp_accounting" else "_bisect"), med, tot, reps, v)
    return 0


if __name__ == "__main__":
    sys.exit(main())
