#!/usr/bin/python3
"""Independent reference values for the normal-means estimator (estimators/eb_nm.c, issue #15).

Run: /usr/bin/python3 tests/vectors/gen/nm_refs.py > tests/vectors/nm/ref_nm.json
Uses numpy and scipy (Debian python3-numpy, python3-scipy) only; none of this code is derived from
the C implementation. Read by tests/unit/estimators/test_estimators_nm.c.

Data: three sets of n observations from numpy's default_rng(seed): theta from a three-point prior
plus normal noise, s uniform on [0.5, 1.5] (heteroscedastic), x ~ N(theta, s^2); one with a null
majority (point-normal shaped). Each case holds the data, the options, and the maximised marginal
log-likelihood, found here by methods unlike the C code's:
  - mixture weights on a fixed grid (npmle, normal_scale_mixture): EM (the fixed-point iteration
    pi <- mean_j L_jk pi_k / L_j pi) for 200,000 iterations from uniform weights, then the KKT
    check max_k mean_j L_jk / L_j pi <= 1 + 1e-9 (the optimality condition of the convex problem);
  - normal, point_normal: scipy.optimize.minimize, Nelder-Mead with xatol = fatol = 1e-13, on
    unconstrained parameters (mode, log sd, logit pi0), restarted from its own answer until it
    stops improving; the normal family's boundary (sd = 0) is compared with the interior optimum;
  - the scale mixture's default grid is computed from ashr's rule (autoselect.mixsd, mult sqrt(2),
    point mass first) and written out, so the C test checks its grid too;
  - point_laplace: the same Nelder-Mead on the closed-form marginal (Laplace convolved with a
    normal, via scipy.special.log_ndtr), which check_laplace_closed_form first compares with
    scipy.integrate.quad of the convolution (to 1e-10);
  - posterior moments and lfsr under given point-normal and point-Laplace priors by scipy.integrate.quad of
    theta^m N(x; theta, s^2) over the continuous part plus the point mass, for a few x and s.
"""
import json
import platform
import sys

import numpy as np
import scipy
from scipy import integrate, optimize, special, stats


def make_data(seed, n, null_frac):
    r = np.random.default_rng(seed)
    u = r.uniform(size=n)
    theta = np.where(u < null_frac, 0.0,
                     np.where(u < null_frac + (1 - null_frac) / 2, -2.0, 3.0) + 0.5 * r.standard_normal(n))
    s = r.uniform(0.5, 1.5, size=n)
    x = theta + s * r.standard_normal(n)
    return x, s


def loglik_mix(x, s, w, mean, sd):
    v = s[:, None] ** 2 + np.asarray(sd)[None, :] ** 2
    lp = stats.norm.logpdf(x[:, None], loc=np.asarray(mean)[None, :], scale=np.sqrt(v))
    with np.errstate(divide="ignore"):
        lw = np.log(np.asarray(w))
    return float(np.sum(special.logsumexp(lp + lw[None, :], axis=1)))


def em_weights(x, s, mean, sd, iters=200000):
    v = s[:, None] ** 2 + np.asarray(sd)[None, :] ** 2
    lp = stats.norm.logpdf(x[:, None], loc=np.asarray(mean)[None, :], scale=np.sqrt(v))
    L = np.exp(lp - lp.max(axis=1, keepdims=True))
    k = L.shape[1]
    pi = np.full(k, 1.0 / k)
    for _ in range(iters):
        d = L @ pi
        pi = pi * (L.T @ (1.0 / d)) / len(x)
    kkt = float(np.max(L.T @ (1.0 / (L @ pi)) / len(x)))
    assert kkt <= 1 + 1e-9, kkt
    return pi, kkt


def ashr_grid(x, s, mode, mult=np.sqrt(2)):
    smin = np.min(s) / 10
    m2 = np.max((x - mode) ** 2 - s ** 2)
    smax = 2 * np.sqrt(m2) if m2 > 0 else 8 * smin
    if smax <= smin:
        smax = 8 * smin
    npoint = int(np.ceil(np.log2(smax / smin) / np.log2(mult)))
    return [0.0] + list(mult ** np.arange(-npoint, 1) * smax)


def nm_minimize(f, p0):
    best = None
    p = np.asarray(p0, dtype=float)
    for _ in range(20):
        r = optimize.minimize(f, p, method="Nelder-Mead",
                              options={"xatol": 1e-13, "fatol": 1e-13, "maxiter": 100000, "maxfev": 100000})
        if best is not None and r.fun >= best.fun - 1e-12:
            break
        best = r
        p = r.x
    return best


def normal_fit(x, s, mode):
    if mode is None:
        f = lambda p: -loglik_mix(x, s, [1.0], [p[0]], [np.exp(p[1])])
        r = nm_minimize(f, [np.mean(x), np.log(np.std(x))])
        ll = -r.fun
        # boundary: sd = 0, the mode is then the precision-weighted mean
        m0 = np.sum(x / s ** 2) / np.sum(1 / s ** 2)
        return max(ll, loglik_mix(x, s, [1.0], [m0], [0.0]))
    f = lambda p: -loglik_mix(x, s, [1.0], [mode], [np.exp(p[0])])
    r = nm_minimize(f, [np.log(np.std(x))])
    return max(-r.fun, loglik_mix(x, s, [1.0], [mode], [0.0]))


def point_normal_fit(x, s, mode):
    def ll(m, lsd, lpi):
        p0 = special.expit(lpi)
        return loglik_mix(x, s, [p0, 1 - p0], [m, m], [0.0, np.exp(lsd)])
    if mode is None:
        r = nm_minimize(lambda p: -ll(p[0], p[1], p[2]), [np.median(x), np.log(np.std(x)), 0.0])
    else:
        r = nm_minimize(lambda p: -ll(mode, p[0], p[1]), [np.log(np.std(x)), 0.0])
    return -r.fun


def laplace_slab_logpdf(x, s, m, b):
    """log of the Laplace(m, b) * N(0, s^2) density, closed form; checked against quadrature below."""
    z = x - m
    c = -np.log(2 * b) + 0.5 * (s / b) ** 2
    return np.logaddexp(c - z / b + special.log_ndtr(z / s - s / b),
                        c + z / b + special.log_ndtr(-z / s - s / b))


def check_laplace_closed_form():
    for (x, s, m, b) in [(0.3, 1.0, 0.0, 1.5), (-4.0, 0.6, 0.2, 0.4), (7.0, 1.3, -1.0, 2.5)]:
        f = lambda t: stats.laplace.pdf(t, loc=m, scale=b) * stats.norm.pdf(x, loc=t, scale=s)
        q = integrate.quad(f, -np.inf, m, epsabs=0, epsrel=1e-13)[0] + \
            integrate.quad(f, m, np.inf, epsabs=0, epsrel=1e-13)[0]
        assert abs(np.exp(laplace_slab_logpdf(x, s, m, b)) / q - 1) < 1e-10, (x, s, m, b)


def point_laplace_fit(x, s, mode):
    def ll(m, lb, lpi):
        p0 = special.expit(lpi)
        point = stats.norm.logpdf(x, loc=m, scale=s)
        slab = laplace_slab_logpdf(x, s, m, np.exp(lb))
        return float(np.sum(np.logaddexp(np.log(p0) + point, np.log1p(-p0) + slab)))
    if mode is None:
        r = nm_minimize(lambda p: -ll(p[0], p[1], p[2]), [np.median(x), np.log(np.std(x)), 0.0])
    else:
        r = nm_minimize(lambda p: -ll(mode, p[0], p[1]), [np.log(np.std(x)), 0.0])
    return -r.fun


def pl_posterior(x, s, pi0, mode, b):
    """As pn_posterior, for pi0 delta_mode + (1 - pi0) Laplace(mode, b), by quadrature."""
    like = lambda t: stats.norm.pdf(x, loc=t, scale=s)
    slab = lambda t: (1 - pi0) * stats.laplace.pdf(t, loc=mode, scale=b) * like(t)
    lo, hi = mode - 60 * b - 20 * s, mode + 60 * b + 20 * s
    pts = sorted({mode, x, 0.0})
    def q(g, a, c):
        inner = [p for p in pts if a < p < c]
        edges = [a] + inner + [c]
        return sum(integrate.quad(g, edges[i], edges[i + 1], epsabs=0, epsrel=1e-12, limit=500)[0]
                   for i in range(len(edges) - 1))
    z = q(slab, lo, hi) + pi0 * like(mode)
    m1 = (q(lambda t: t * slab(t), lo, hi) + pi0 * mode * like(mode)) / z
    m2 = (q(lambda t: t * t * slab(t), lo, hi) + pi0 * mode ** 2 * like(mode)) / z
    neg = (q(slab, lo, 0.0) if lo < 0 else 0.0) / z + (pi0 * like(mode) / z if mode < 0 else 0.0)
    zero = pi0 * like(mode) / z if mode == 0 else 0.0
    return m1, m2, neg, zero


def pn_posterior(x, s, pi0, mode, sd):
    """E[theta], E[theta^2], P(theta < 0), P(theta = 0) under pi0 delta_mode + (1-pi0) N(mode, sd^2)."""
    like = lambda t: stats.norm.pdf(x, loc=t, scale=s)
    slab = lambda t: (1 - pi0) * stats.norm.pdf(t, loc=mode, scale=sd) * like(t)
    lo, hi = mode - 40 * sd, mode + 40 * sd
    brk = sorted({min(max(mode, lo), hi), min(max(x, lo), hi), min(max(0.0, lo), hi)})
    def q(g, a, b):
        return integrate.quad(g, a, b, points=[p for p in brk if a < p < b] or None,
                              epsabs=0, epsrel=1e-13, limit=500)[0]
    z = q(slab, lo, hi) + pi0 * like(mode)
    m1 = (q(lambda t: t * slab(t), lo, hi) + pi0 * mode * like(mode)) / z
    m2 = (q(lambda t: t * t * slab(t), lo, hi) + pi0 * mode ** 2 * like(mode)) / z
    neg = (q(slab, lo, min(0.0, hi)) if lo < 0 else 0.0) / z + (pi0 * like(mode) / z if mode < 0 else 0.0)
    zero = pi0 * like(mode) / z if mode == 0 else 0.0
    return m1, m2, neg, zero


def main():
    cases = []
    sets = {"mixed": make_data(1501, 300, 0.3), "sparse": make_data(1502, 400, 0.8),
            "small": make_data(1503, 40, 0.5)}
    for name, (x, s) in sets.items():
        # npmle on 20 evenly spaced atoms spanning the data
        atoms = list(np.linspace(np.min(x), np.max(x), 20))
        pi, kkt = em_weights(x, s, atoms, [0.0] * 20)
        cases.append({"name": f"{name}/npmle20", "family": "npmle", "data": name, "grid_size": 20,
                      "loglik": loglik_mix(x, s, pi, atoms, [0.0] * 20), "kkt": kkt, "rtol": 1e-6})
        # scale mixture, ashr's default grid, mode 0 and mode estimated
        g = ashr_grid(x, s, 0.0)
        pi, kkt = em_weights(x, s, [0.0] * len(g), g)
        cases.append({"name": f"{name}/smn_mode0", "family": "normal_scale_mixture", "data": name,
                      "mode": 0.0, "grid": g, "loglik": loglik_mix(x, s, pi, [0.0] * len(g), g),
                      "kkt": kkt, "rtol": 1e-6})
        for fam, fit in (("normal", normal_fit), ("point_normal", point_normal_fit),
                         ("point_laplace", point_laplace_fit)):
            cases.append({"name": f"{name}/{fam}_mode0", "family": fam, "data": name, "mode": 0.0,
                          "loglik": fit(x, s, 0.0), "rtol": 1e-6})
            cases.append({"name": f"{name}/{fam}_modeest", "family": fam, "data": name,
                          "mode": "estimate", "loglik": fit(x, s, None), "rtol": 1e-6})
    post = []
    for (pi0, mode, sd) in [(0.7, 0.0, 1.3), (0.25, 0.4, 2.0)]:
        for (x, s) in [(0.0, 1.0), (1.7, 0.8), (-2.9, 1.1), (6.0, 0.5)]:
            m1, m2, neg, zero = pn_posterior(x, s, pi0, mode, sd)
            post.append({"pi0": pi0, "mode": mode, "scale": sd, "x": x, "s": s, "mean": m1,
                         "second": m2, "neg": neg, "zero": zero, "rtol": 1e-9})
    check_laplace_closed_form()
    lap = []
    for (pi0, mode, b) in [(0.6, 0.0, 1.1), (0.3, -0.5, 0.7)]:
        for (x, s) in [(0.0, 1.0), (1.7, 0.8), (-2.9, 1.1), (6.0, 0.5)]:
            m1, m2, neg, zero = pl_posterior(x, s, pi0, mode, b)
            lap.append({"pi0": pi0, "mode": mode, "scale": b, "x": x, "s": s, "mean": m1,
                        "second": m2, "neg": neg, "zero": zero, "rtol": 1e-8})
    out = {"provenance": {"script": "tests/vectors/gen/nm_refs.py",
                          "command": "/usr/bin/python3 tests/vectors/gen/nm_refs.py > tests/vectors/nm/ref_nm.json",
                          "python": platform.python_version(), "numpy": np.__version__,
                          "scipy": scipy.__version__},
           "data": {k: {"x": list(map(float, v[0])), "s": list(map(float, v[1]))} for k, v in sets.items()},
           "cases": cases, "point_normal_posterior": post, "point_laplace_posterior": lap}
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
