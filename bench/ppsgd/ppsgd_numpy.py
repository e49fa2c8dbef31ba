#!/usr/bin/env python3
"""ppsgd_numpy.py: the NumPy side of bench/ppsgd. PPSGD (Bietti et al., ICML 2022, Alg. 3 with the
step split of its experiments, as federated/fl_algo_ppsgd.c runs it) on the same synthetic
personalised regression (N = 1000 users, d = 100, 10 fresh samples per user per round, every user
every round, ratio 1, noise multiplier 10, clip 10, step 0.4), vectorised over the users in float32
(the C library's precision), one thread. Written for this benchmark from the paper's algorithm; it
prints one JSON line in the format of bench_ppsgd.c. Usage: ppsgd_numpy.py [rounds]."""
import json
import sys
import time

import numpy as np


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    n, d, m, personal = 1000, 100, 10, 5
    eta, ratio, clip, sigma = 0.4, 1.0, 10.0, 10.0
    eta_w, eta_t = (ratio * eta, eta) if ratio <= 1 else (eta, eta / ratio)
    rng = np.random.default_rng(42)
    theta0 = 10.0 * rng.standard_normal(d)
    star = np.tile(theta0, (n, 1))
    star[:, d - personal:] += 0.1 * rng.standard_normal((n, personal))
    star32 = star.astype(np.float32)
    scale = (1.0 / np.sqrt(np.arange(1, d + 1))).astype(np.float32)
    w = np.zeros(d + 1, dtype=np.float32)
    th = np.zeros((n, d + 1), dtype=np.float32)
    gen = train = 0.0
    cpu0 = time.process_time()
    for _ in range(rounds):
        t0 = time.perf_counter()
        x = rng.standard_normal((n, m, d), dtype=np.float32) * scale
        y = np.einsum("nmd,nd->nm", x, star32) + 0.01 * rng.standard_normal((n, m), dtype=np.float32)
        t1 = time.perf_counter()
        u = w + th
        res = np.einsum("nmd,nd->nm", x, u[:, :d]) + u[:, d:] - y
        g = np.empty((n, d + 1), dtype=np.float32)
        g[:, :d] = np.einsum("nm,nmd->nd", res, x)
        g[:, d] = res.sum(axis=1)
        g /= m
        th -= eta_t * g
        norms = np.sqrt(np.einsum("nd,nd->n", g, g))[:, None]
        gc = g / np.maximum(1.0, norms / clip)
        noise = rng.standard_normal(d + 1, dtype=np.float32) * (sigma * clip)
        w -= eta_w * (gc.sum(axis=0) + noise) / n
        gen += t1 - t0
        train += time.perf_counter() - t1
    cpu = time.process_time() - cpu0
    err = (w + th)[:, :d] - star
    risk = float(np.mean(np.sum(err * err / np.arange(1, d + 1), axis=1) + (w + th)[:, d] ** 2))
    print(json.dumps({"impl": "numpy " + np.__version__, "rounds": rounds, "users": n, "dim": d,
                      "rows": m, "train_ms_per_round": 1e3 * train / rounds,
                      "data_ms_per_round": 1e3 * gen / rounds, "cpu_ms_per_round": 1e3 * cpu / rounds,
                      "final_excess_risk": risk}))


if __name__ == "__main__":
    main()
