#!/usr/bin/env python3
"""mpmath_rdp.py: high-precision reference RDP values and epsilons for tests/vectors/mpmath_rdp.json.

Independent of the C code: it computes the Renyi moment A_alpha = E_{z~N(0,s^2)}[(1-q+q e^{(2z-1)/(2s^2)})^alpha]
of the Poisson-subsampled Gaussian (Mironov, Talwar & Zhang 2019, §3.3) with mpmath at 50 significant
digits, by
  * the exact binomial sum for integer alpha (all alpha+1 terms, exact rationals times exponentials),
  * tanh-sinh quadrature of A_alpha itself (not A-1; the 50 digits absorb the cancellation) for fractional
    alpha, with breakpoints at every significant binomial component (z = k, +-j*min(s,1)/2),
  * and, where the series converges fast (q <= 0.3), the MTZ two-sided erfc series, as a cross-check;
    the script aborts if the two disagree by more than 1e-20 relative.
Laplace (Mironov 2017, Prop. 6), Gaussian (alpha/(2 s^2)), pure (randomized response) and zcdp
(rho alpha) use their closed forms at 50 digits. Epsilons use the conversions of accounting/rdp.h
(Mironov 2017 Prop. 3; Balle et al. 2020 Thm. 21 with the KL shortcut) minimised over the listed orders.

Every input is the exact double that the C test passes (mpf(float) is exact).
Usage: nice -n 10 python3 tests/vectors/gen/mpmath_rdp.py [--reuse OLD.json] > tests/vectors/mpmath_rdp.json
--reuse takes the single-mechanism "sgm ..." cases (a pure function of q, sigma, order, computed by the
unchanged rdp_sgm) from a previous output instead of recomputing them (~25 CPU minutes); every other
case is recomputed. The provenance records the reuse.
"""
import hashlib
import json
import math
import sys

import mpmath as mp
from mpmath import mpf

mp.mp.dps = 50
RTOL_RDP = 1e-9
RTOL_EPS = 1e-6


def log_A_int(q, s, a):
    q, s = mpf(q), mpf(s)
    a = int(a)
    tot = mpf(0)
    c = mpf(1)
    for k in range(a + 1):
        tot += c * q**k * (1 - q)**(a - k) * mp.exp(mpf(k * k - k) / (2 * s * s))
        c = c * (a - k) / (k + 1)
    return mp.log(tot)


def log_A_quad(q, s, a):
    q, s, a = mpf(q), mpf(s), mpf(a)
    s2 = s * s

    def integrand(z):
        t = (2 * z - 1) / (2 * s2)
        return mp.exp(-z * z / (2 * s2) + a * mp.log(1 - q + q * mp.exp(t)))

    # significant components k = 0..ceil(a): log weight lnC + k log q + (a-k) log(1-q) + (k^2-k)/(2 s^2)
    kmax = int(mp.ceil(a))
    lw = []
    for k in range(kmax + 1):
        lc = mp.loggamma(a + 1) - mp.loggamma(k + 1) - mp.loggamma(a - k + 1)
        lw.append(lc + k * mp.log(q) + (a - k) * mp.log(1 - q) + mpf(k * k - k) / (2 * s2))
    m = max(lw)
    sig = [k for k in range(kmax + 1) if lw[k] >= m - 80]
    step = min(s, mpf(1)) / 2
    pts = set()
    # dense breakpoints near the ends of each run of significant components, sparse inside
    runs = []
    for k in sig:
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    for k0, k1 in runs:
        for k in list(range(k0, min(k1, k0 + 6) + 1)) + list(range(max(k0, k1 - 6), k1 + 1)) + [a]:
            for j in range(-16, 17):
                pts.add(mpf(k) + j * step)
        for k in range(k0, k1 + 1, max(1, (k1 - k0) // 50)):
            pts.add(mpf(k))
    for j in range(-60, 61):  # the normal factor's own scale
        pts.add(j * s / 2)
    pts = sorted(pts)
    lo, hi = pts[0] - 30 * s, pts[-1] + 30 * s
    pts = [lo] + pts + [hi]
    val = mp.quad(integrand, pts)
    norm = s * mp.sqrt(2 * mp.pi)
    return mp.log(val / norm)


def log_A_series(q, s, a):
    """MTZ 2019 two-sided series (as in TF-Privacy's _compute_log_a_frac), at 50 digits."""
    q, s, a = mpf(q), mpf(s), mpf(a)
    z0 = s * s * mp.log(1 / q - 1) + mpf(1) / 2
    tot = mpf(0)
    i = 0
    while True:
        c = mp.binomial(a, i)
        j = a - i
        t0 = c * q**i * (1 - q)**j * mp.exp((i * i - i) / (2 * s * s)) * mp.erfc((i - z0) / (mp.sqrt(2) * s)) / 2
        t1 = c * q**j * (1 - q)**i * mp.exp((j * j - j) / (2 * s * s)) * mp.erfc((z0 - j) / (mp.sqrt(2) * s)) / 2
        tot += t0 + t1
        if i > a + 5 and max(abs(t0), abs(t1)) < mpf(10)**-60 * abs(tot):
            break
        i += 1
        if i > 20000:
            return None
    return mp.log(tot)


def rdp_sgm(q, s, a):
    if q == 1.0:
        return mpf(a) / (2 * mpf(s)**2)
    if float(a).is_integer():
        la = log_A_int(q, s, a)
    else:
        la = log_A_quad(q, s, a)
        if q <= 0.3 and a < 200 and s >= 0.3 and s <= 30:
            ls = log_A_series(q, s, a)
            if ls is not None and abs(ls - la) > mpf(10)**-20 * abs(la):
                sys.exit("quadrature and series disagree at q=%r s=%r a=%r: %s vs %s" % (q, s, a, la, ls))
    return la / (mpf(a) - 1)


def wbk_B(sigma, k):
    """E[(L-1)^k] for the Gaussian likelihood ratio as the exact forward difference of
    f(i) = e^{(i-1) i / (2 sigma^2)} at 0, with enough digits to absorb its cancellation."""
    digits = int(60 + k * (0.302 + max(0.0, math.log10(sigma))) + 10)
    with mp.workdps(digits):
        s2 = mpf(sigma) ** 2
        v = mp.fsum((-1) ** (k - i) * mp.binomial(k, i) * mp.exp(mpf((i - 1) * i) / (2 * s2))
                    for i in range(k + 1))
    return +v


def swor_gaussian_int(n, m, sigma, a):
    """Wang, Balle & Kasiviswanathan 2019: Thm. 9 for j = 2 and, for alpha <= 256, each j >= 3 term is
    min(4 B_j, 2 e^{(j-1) eps(j)}) (Thm. 27, Gaussian; odd j: sqrt(B_{j-1} B_{j+1})); for alpha > 256 the
    Thm. 9 term 2 e^{(j-1) eps(j)} alone. Returns log A."""
    g = mpf(m) / n
    s2 = mpf(sigma) ** 2
    tot = g ** 2 * mp.binomial(a, 2) * min(4 * mp.expm1(1 / s2), 2 * mp.exp(1 / s2))
    B = {}
    for j in range(3, a + 1):
        t2 = 2 * mp.exp(mpf((j - 1) * j) / (2 * s2))
        if a <= 256:
            for k in (j - 1, j, j + 1):
                if k % 2 == 0 and k not in B:
                    B[k] = wbk_B(sigma, k)
            bj = B[j] if j % 2 == 0 else mp.sqrt(B[j - 1] * B[j + 1])
            t2 = min(t2, 4 * bj)
        tot += g ** j * mp.binomial(a, j) * t2
    return mp.log1p(tot)


def rdp_swor(n, m, sigma, a):
    if m == n:
        return mpf(a) / (2 * mpf(sigma) ** 2)
    if float(a).is_integer() and a >= 2:
        return swor_gaussian_int(n, m, sigma, int(a)) / (mpf(a) - 1)
    lo = 1 if a < 2 else int(math.floor(a))
    hi = 2 if a < 2 else lo + 1
    hlo = 0 if lo == 1 else swor_gaussian_int(n, m, sigma, lo)
    hhi = swor_gaussian_int(n, m, sigma, hi)
    x = (mpf(a) - lo) / (hi - lo)
    return ((1 - x) * hlo + x * hhi) / (mpf(a) - 1)


def rdp_laplace(b, a):
    b, a = mpf(b), mpf(a)
    return mp.log(a / (2 * a - 1) * mp.exp((a - 1) / b) + (a - 1) / (2 * a - 1) * mp.exp(-a / b)) / (a - 1)


def rdp_event(ev, a):
    t = ev["type"]
    if t == "gaussian":
        return mpf(a) / (2 * mpf(ev["noise_multiplier"])**2)
    if t == "laplace":
        return rdp_laplace(ev["noise_multiplier"], a)
    if t == "pure":
        # randomized response dominates every eps-DP mechanism (Mironov 2017 Table II; as dp_accounting)
        e, al = mpf(ev["epsilon"]), mpf(a)
        return (e * al + mp.log1p(mp.exp(e * (1 - 2 * al))) - mp.log1p(mp.exp(e))) / (al - 1)
    if t == "zcdp":
        return mpf(ev["rho"]) * mpf(a)
    if t == "sampled_without_replacement":
        assert ev["event"]["type"] == "gaussian"
        return rdp_swor(ev["source_size"], ev["sample_size"], ev["event"]["noise_multiplier"], a)
    if t == "poisson_sampled":
        assert ev["event"]["type"] == "gaussian"
        return rdp_sgm(ev["sampling_rate"], ev["event"]["noise_multiplier"], a)
    if t == "self_composed":
        return ev["count"] * rdp_event(ev["event"], a)
    if t == "composed":
        return sum((rdp_event(e, a) for e in ev["events"]), mpf(0))
    raise ValueError(t)


def eps_from(orders, rdps, delta, conv):
    best = mp.inf
    d = mpf(delta)
    for a, r in zip(orders, rdps):
        a = mpf(a)
        if conv == "mironov2017":
            e = r - mp.log(d) / (a - 1)
        else:
            if d * d + mp.expm1(-r) >= 0:
                e = mpf(0)
            else:
                e = max(mpf(0), r + mp.log1p(-1 / a) - (mp.log(d) + mp.log(a)) / (a - 1))
        best = min(best, e)
    return best


def sgm_event(q, s, count=None):
    ev = {"type": "poisson_sampled", "sampling_rate": q, "event": {"type": "gaussian", "noise_multiplier": s}}
    if count is not None:
        ev = {"type": "self_composed", "count": count, "event": ev}
    return ev


def num(x):
    x = float(x)
    return None if math.isinf(x) else x


def main():
    reuse = {}
    if len(sys.argv) == 3 and sys.argv[1] == "--reuse":
        old = json.load(open(sys.argv[2]))
        reuse = {c["name"]: c for c in old["cases"] if c["name"].startswith("sgm ")}
    cases = []
    qs = [1e-8, 1e-5, 1e-3, 0.01, 0.1, 0.5, 0.9, 1.0]
    sigmas = [0.1, 0.4, 1.0, 3.0, 30.0, 1e3, 1e5]
    orders = [1.0001, 1.3, 2.0, 3.7, 12.0, 33.3, 128.0, 1000.5, 10000.25, 1e5]
    for q in qs:
        for s in sigmas:
            for a in orders:
                if q == 1.0 and a not in (1.0001, 3.7, 1e5):
                    continue
                if a == 1e5 and not (q in (1e-8, 0.01, 0.5) and s in (0.1, 1.0, 1e5)):
                    continue  # 1e5-term exact sums: a representative subset
                if a == 10000.25 and not (q in (1e-5, 0.1, 0.9) and s in (0.4, 3.0, 1e3)):
                    continue
                if a == 1000.5 and not (s in (0.1, 1.0, 30.0, 1e5) or q in (1e-3, 0.9)):
                    continue
                name = "sgm q=%g sigma=%g order=%g" % (q, s, a)
                if name in reuse:
                    cases.append(reuse[name])
                    continue
                r = rdp_sgm(q, s, a)
                cases.append({"name": name, "event": sgm_event(q, s),
                              "neighboring": "add_remove", "order": a, "rdp": num(r), "rtol": RTOL_RDP})
                print("sgm", q, s, a, mp.nstr(r, 12), file=sys.stderr)
    for b in [0.05, 0.5, 1.0, 7.0, 1e3, 1e5]:
        for a in [1.0001, 1.5, 2.0, 10.0, 1e3, 1e5]:
            ev = {"type": "laplace", "noise_multiplier": b}
            cases.append({"name": "laplace b=%g order=%g" % (b, a), "event": ev, "neighboring": "add_remove",
                          "order": a, "rdp": num(rdp_event(ev, a)), "rtol": RTOL_RDP})
    for e in [1e-8, 0.01, 0.7, 5.0]:
        for a in [1.0001, 1.5, 2.0, 32.5, 1e4]:
            ev = {"type": "pure", "epsilon": e}
            cases.append({"name": "pure eps=%g order=%g" % (e, a), "event": ev, "neighboring": "add_remove",
                          "order": a, "rdp": num(rdp_event(ev, a)), "rtol": RTOL_RDP})
    for n, m in [(60000, 256), (1000, 10), (100, 50), (10**6, 1)]:
        for sg in [0.8, 2.0, 10.0]:
            for a in [1.5, 2.0, 3.0, 4.5, 8.0, 32.0, 64.0, 200.0, 300.0]:
                if a == 300.0 and sg != 2.0:
                    continue
                ev = {"type": "sampled_without_replacement", "source_size": n, "sample_size": m,
                      "event": {"type": "gaussian", "noise_multiplier": sg}}
                v = rdp_event(ev, a)
                cases.append({"name": "swor n=%d m=%d sigma=%g order=%g" % (n, m, sg, a), "event": ev,
                              "neighboring": "replace_one", "order": a, "rdp": num(v), "rtol": RTOL_RDP})
                print("swor", n, m, sg, a, mp.nstr(v, 12), file=sys.stderr)
    mixed = {"type": "composed", "events": [
        sgm_event(0.01, 1.1, 1000), {"type": "self_composed", "count": 3, "event": {"type": "gaussian", "noise_multiplier": 20.0}},
        {"type": "laplace", "noise_multiplier": 40.0}, {"type": "pure", "epsilon": 0.01}, {"type": "zcdp", "rho": 0.001},
        sgm_event(0.003, 0.8, 500)]}
    for a in [1.0001, 1.75, 2.0, 6.5, 64.0, 300.0]:
        cases.append({"name": "mixed composition order=%g" % a, "event": mixed, "neighboring": "add_remove",
                      "order": a, "rdp": num(rdp_event(mixed, a)), "rtol": RTOL_RDP})
    big = sgm_event(1e-6, 0.9, 10**12)
    for a in [1.5, 2.0, 40.0]:
        cases.append({"name": "count 1e12 order=%g" % a, "event": big, "neighboring": "add_remove",
                      "order": a, "rdp": num(rdp_event(big, a)), "rtol": RTOL_RDP})
    # epsilon cases over small explicit order lists
    ordl = [1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.5, 8.0, 12.0, 16.0, 24.0, 32.0, 64.0, 256.0]
    ecases = [(0.01, 1.1, 10000, 1e-5), (0.01, 1.0, 20000, 1e-4), (256 / 60000, 1.1, 14063, 1e-5),
              (1e-8, 1.0, 10**6, 1e-5), (0.5, 30.0, 100, 1e-6), (1e-3, 0.4, 1000, 1e-5), (1.0, 10.0, 1000, 1e-4),
              (0.1, 1e3, 10**9, 1e-8)]
    for q, s, T, d in ecases:
        ev = sgm_event(q, s, T)
        rd = [rdp_event(ev, a) for a in ordl]
        for conv in ["mironov2017", "balle2020"]:
            cases.append({"name": "eps q=%g sigma=%g T=%d delta=%g %s" % (q, s, T, d, conv), "event": ev, "delta": d,
                          "conversion": conv, "orders": ordl, "epsilon": num(eps_from(ordl, rd, d, conv)),
                          "rtol": RTOL_EPS})
    rd = [rdp_event(mixed, a) for a in ordl]
    for conv in ["mironov2017", "balle2020"]:
        cases.append({"name": "eps mixed %s" % conv, "event": mixed, "delta": 1e-6, "conversion": conv,
                      "orders": ordl, "epsilon": num(eps_from(ordl, rd, 1e-6, conv)), "rtol": RTOL_EPS})
    src = open(__file__, "rb").read()
    out = {"provenance": {"generator": "tests/vectors/gen/mpmath_rdp.py", "script_sha256": hashlib.sha256(src).hexdigest(),
                          "mpmath": mp.__version__, "python": sys.version.split()[0], "digits": mp.mp.dps,
                          "method": "exact binomial sums (integer orders), tanh-sinh quadrature at 50 digits "
                                    "(fractional), cross-checked with the MTZ 2019 series where it converges",
                          "papers": "Mironov, Talwar & Zhang 2019 §3.3; Mironov 2017 Prop. 3, 6, Table II; Balle et al. 2020 Thm. 21; Wang, Balle & Kasiviswanathan 2019 Thm. 9, 27",
                          "reused_sgm_cases": len(reuse)},
           "cases": cases}
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
