#!/usr/bin/python3
"""Independent reference values for tests/unit/estimators/test_estimators_*.c (issue #6).

Run: /usr/bin/python3 tests/vectors/gen/estimators_refs.py
Uses scipy (Debian python3-scipy) only; none of this code is derived from the C implementation.
- Analytic Gaussian mechanism (Balle & Wang 2018, Thm 8): smallest sigma with delta(sigma) <= delta, by
  brentq on log sigma with scipy.stats.norm (logcdf for the e^eps term).
- Heteroscedastic Gaussian marginal-likelihood MLE (mu, tau2) by scipy.optimize.minimize (L-BFGS-B on
  the negative log-likelihood), on the fixed data set in the C test.
- Beta-binomial MLE by scipy.optimize.minimize on (log a, log b) with scipy.special.betaln.
"""
import numpy as np
from scipy import optimize, special, stats

def agm_delta(sens, sigma, eps):
    u = sens / (2 * sigma); v = eps * sigma / sens
    return stats.norm.cdf(u - v) - np.exp(eps + stats.norm.logcdf(-u - v))

def agm_sigma(sens, eps, delta):
    f = lambda ls: agm_delta(sens, np.exp(ls), eps) - delta
    return np.exp(optimize.brentq(f, np.log(sens) - 20, np.log(sens) + 20, xtol=1e-15, rtol=1e-15))

print("# analytic Gaussian mechanism: sens eps delta sigma")
for sens, eps, delta in [(1.0, 0.5, 1e-5), (1.0, 1.0, 1e-5), (1.0, 4.0, 1e-5), (4.1062, 8.0, 1e-5),
                         (2.0, 2.0, 1e-6)]:
    print(f"{sens} {eps} {delta} {agm_sigma(sens, eps, delta):.15g}")

# heteroscedastic Gaussian MLE
x = np.array([0.31, -0.12, 0.55, 0.08, 0.97, 0.44, -0.35, 0.21])
n = np.array([15, 3, 40, 7, 2, 22, 5, 11], dtype=float)
sx2 = 0.25
s2 = sx2 / n
def nll(p):
    mu, lt = p; v = np.exp(lt) + s2
    return 0.5 * np.sum(np.log(2 * np.pi * v) + (x - mu) ** 2 / v)
r = optimize.minimize(nll, [0.2, np.log(0.05)], method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-12})
print("# gaussian hetero MLE: mu tau2 loglik")
print(f"{r.x[0]:.12g} {np.exp(r.x[1]):.12g} {-r.fun:.12g}")

# beta-binomial MLE
z = np.array([3, 7, 1, 0, 5, 9, 4, 6, 2, 8, 5, 3], dtype=float)
nn = np.array([10, 12, 8, 5, 10, 14, 9, 10, 10, 11, 7, 6], dtype=float)
def bnll(p):
    a, b = np.exp(p)
    return -np.sum(special.gammaln(nn + 1) - special.gammaln(z + 1) - special.gammaln(nn - z + 1)
                   + special.betaln(a + z, b + nn - z) - special.betaln(a, b))
r = optimize.minimize(bnll, [0.0, 0.0], method="BFGS", options={"gtol": 1e-12})
print("# beta-binomial MLE: alpha beta loglik")
print(f"{np.exp(r.x[0]):.12g} {np.exp(r.x[1]):.12g} {-r.fun:.12g}")
