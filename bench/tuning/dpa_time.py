#!/usr/bin/python3
"""dpa_time.py: dp_accounting's time for the events bench/tuning times in C (the comparison row of
docs/BENCHMARKS.md). Needs DP_ACCOUNTING_SRC = <google/differential-privacy checkout>/python/dp_accounting.

Each case composes one RepeatAndSelectDpEvent into a fresh RdpAccountant (dp_accounting's default
orders) and asks for epsilon at delta = 1e-5; the time is the median over repeats of one such call.
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.environ['DP_ACCOUNTING_SRC'])
from dp_accounting import dp_event  # pylint: disable=wrong-import-position
from dp_accounting.rdp import rdp_privacy_accountant as rdp  # pylint: disable=wrong-import-position

BASE = dp_event.SelfComposedDpEvent(
    dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(1.1)), 1000)
CASES = [('geometric mean 10', 10.0, 1.0), ('logarithmic mean 10', 10.0, 0.0),
         ('tnb eta 0.5 mean 10', 10.0, 0.5), ('poisson mean 10', 10.0, float('inf'))]


def one(mean, shape):
    acc = rdp.RdpAccountant()
    acc.compose(dp_event.RepeatAndSelectDpEvent(BASE, mean, shape))
    return acc.get_epsilon(1e-5)


def main():
    for name, mean, shape in CASES:
        times = []
        eps = None
        for _ in range(int(os.environ.get('BENCH_REPEATS', '20'))):
            t0 = time.perf_counter()
            eps = one(mean, shape)
            times.append(time.perf_counter() - t0)
        print(f'dp_accounting  {name:24s} eps={eps:.6f}  median {1e3 * statistics.median(times):8.3f} ms'
              f'  (min {1e3 * min(times):.3f} ms, {len(times)} runs)')


if __name__ == '__main__':
    main()
