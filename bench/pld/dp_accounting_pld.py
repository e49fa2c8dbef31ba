#!/usr/bin/env python3
"""Times dp_accounting's PLD accountant on bench/pld's reference event (no dp_accounting code here).

Needs DP_ACCOUNTING_SRC = path of google/differential-privacy/python/dp_accounting (see
docs/BENCHMARKS.md for how to fetch it). Usage: dp_accounting_pld.py [repetitions] [discretization]
Prints: "dp_accounting_pld median_ms M min_ms m cpu_median_ms C eps E h H" (process CPU time:
numpy may use more than one thread, which CPU time counts and wall time does not).
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.environ["DP_ACCOUNTING_SRC"])
from dp_accounting import dp_event  # noqa: E402
from dp_accounting.pld import pld_privacy_accountant  # noqa: E402

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
h = float(sys.argv[2]) if len(sys.argv) > 2 else 1e-4
event = dp_event.SelfComposedDpEvent(
    dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(1.1)), 10000)
times = []
cpu = []
eps = None
for _ in range(reps):
    t0, c0 = time.perf_counter(), time.process_time()
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=h)
    acc.compose(event)
    eps = acc.get_epsilon(1e-5)
    times.append(1e3 * (time.perf_counter() - t0))
    cpu.append(1e3 * (time.process_time() - c0))
print("dp_accounting_pld median_ms %.3f min_ms %.3f cpu_median_ms %.3f eps %.10f h %g"
      % (statistics.median(times), min(times), statistics.median(cpu), eps, h))
