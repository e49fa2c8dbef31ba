#!/usr/bin/python3
"""gen_exact.py: writes tests/vectors/ref_exact_rdp.json, dpsilo's high-precision reference (mpmath).

Needs no accounting library: every number comes from exact_rdp.py (the finite binomial sum at integer orders,
quadrature of the defining integral at fractional orders, the two cross-checked at integer orders <= 256).

    /usr/bin/python3 tests/vectors/gen/gen_exact.py        (about 20 CPU minutes; run under nice)

Intermediate results are cached in $EXACT_CACHE (default /tmp/dpsilo_exact_cache.json) so that a rerun
only computes what is missing.
"""
import json
import os
import sys

import mpmath as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import exact_rdp as X  # noqa: E402
import grid as G  # noqa: E402

CACHE = os.environ.get("EXACT_CACHE", "/tmp/dpsilo_exact_cache.json")
RTOL_RDP = 1e-9   # issue #3: RDP within 1e-9 relative of the exact value
RTOL_EPS = 1e-6   # issue #3: epsilon within 1e-6 relative for the same orders and conversion
B_ORDERS = [1.0001, 1.01, 2.0, 10.5, 256.0, 1e5]  # orders at which the B direction is also evaluated


def load_cache():
    try:
        with open(CACHE) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def save_cache(cache):
    tmp = CACHE + ".tmp"
    with open(tmp, "w") as f:
        json.dump(cache, f)
    os.replace(tmp, CACHE)


def key(*a):
    return "|".join(repr(float(x)) if not isinstance(x, str) else x for x in a)


def sgm(cache, q, s, a, direction="A"):
    k = key("sgm", direction, q, s, a)
    if k not in cache:
        cache[k] = mp.nstr(X.sgm_rdp(q, s, a, direction), 25)
    return float(mp.mpf(cache[k])), cache[k]


def main():
    cache = load_cache()
    n_new = [0]

    def tick():
        n_new[0] += 1
        if n_new[0] % 50 == 0:
            save_cache(cache)
            print(f"  ... {n_new[0]} evaluations", file=sys.stderr, flush=True)

    cases = []
    checks = {"quad_vs_binomial_max_rel_diff": 0.0, "b_over_a_max": 0.0, "b_over_a_argmax": None}

    # 1. per-order RDP of the Poisson-subsampled Gaussian
    for q in G.Q_GRID:
        for s in G.SIGMA_GRID:
            for a in G.ORDER_GRID:
                val, txt = sgm(cache, q, s, a)
                tick()
                ev = C.ev_gaussian(s) if q == 1.0 else C.ev_poisson(q, C.ev_gaussian(s))
                cases.append({"name": f"sgm q={q:g} sigma={s:g} order={a:g}", "event": ev,
                              "neighboring": "add_remove", "order": a, "rdp": C.num(val), "rtol": RTOL_RDP,
                              "exact_digits": txt})
                if q < 1 and float(a).is_integer() and a <= 256:
                    kb = key("quad", q, s, a)
                    if kb not in cache:
                        cache[kb] = mp.nstr(X.sgm_rdp_quad(q, s, a), 25)
                        tick()
                    d = C.rel_err(float(mp.mpf(cache[kb])), val)
                    checks["quad_vs_binomial_max_rel_diff"] = max(checks["quad_vs_binomial_max_rel_diff"], d)
                if q < 1 and a in B_ORDERS:
                    bval, _ = sgm(cache, q, s, a, "B")
                    tick()
                    r = bval / val if val > 0 else 0.0
                    if r > checks["b_over_a_max"]:
                        checks["b_over_a_max"] = r
                        checks["b_over_a_argmax"] = [q, s, a]

    # 2. self-composition is linear: a few large counts (the C side must scale without overflow)
    for q, s, a, n in [(0.01, 1.1, 8.0, 10**4), (1e-8, 1.0, 2.0, 10**12), (1e-6, 0.3, 32.0, 10**12),
                       (0.1, 0.3, 1000.0, 10**6)]:
        val, _ = sgm(cache, q, s, a)
        cases.append({"name": f"sgm q={q:g} sigma={s:g} order={a:g} x{n}",
                      "event": C.ev_sgm(q, s, n), "neighboring": "add_remove", "order": a,
                      "rdp": C.num(val * n), "rtol": RTOL_RDP})

    # 3. Laplace (Mironov 2017 Prop. 6)
    for b in G.LAPLACE_B_GRID:
        for a in G.ORDER_GRID:
            v = X.laplace_rdp(b, a)
            cases.append({"name": f"laplace b={b:g} order={a:g}", "event": C.ev_laplace(b),
                          "neighboring": "add_remove", "order": a, "rdp": C.num(v), "rtol": RTOL_RDP})

    # 4. epsilon over the libraries' default orders, both conversions
    for q, s in G.EPS_PAIRS:
        rd = []
        for a in G.DP_ACCOUNTING_DEFAULT_ORDERS:
            rd.append(sgm(cache, q, s, a)[0])
            tick()
        for name, orders in (("dp_accounting_default", G.DP_ACCOUNTING_DEFAULT_ORDERS),
                             ("opacus_default", G.OPACUS_DEFAULT_ORDERS)):
            idx = [G.DP_ACCOUNTING_DEFAULT_ORDERS.index(a) for a in orders]
            for n in G.EPS_STEPS:
                tot = [mp.mpf(rd[i]) * n for i in idx]
                for delta in G.EPS_DELTAS:
                    for conv, fn in (("balle2020", X.eps_balle2020), ("mironov2017", X.eps_mironov2017)):
                        e, opt = fn(orders, tot, delta)
                        ev = C.ev_self(n, C.ev_gaussian(s) if q == 1.0 else C.ev_poisson(q, C.ev_gaussian(s)))
                        cases.append({"name": f"eps q={q:g} sigma={s:g} steps={n} delta={delta:g} {conv} "
                                              f"{name}", "event": ev, "neighboring": "add_remove",
                                      "delta": delta, "conversion": conv, "orders": orders,
                                      "orders_name": name, "epsilon": C.num(e), "optimal_order": float(opt),
                                      "rtol": RTOL_EPS})
    # 5. the mixed composition of gen_dp_accounting.py, exact: the sum of its parts (composition of RDP)
    for a in G.DP_ACCOUNTING_DEFAULT_ORDERS:
        v = (mp.mpf(sgm(cache, 0.01, 1.1, a)[1]) * 1000 + mp.mpf(sgm(cache, 0.001, 0.8, a)[1]) * 5000 +
             3 * X.laplace_rdp(10.0, a))
        cases.append({"name": f"mix sgm+sgm+laplace order={a:g}",
                      "event": {"type": "composed", "events": [C.ev_sgm(0.01, 1.1, 1000), C.ev_sgm(0.001, 0.8, 5000),
                                                               C.ev_self(3, C.ev_laplace(10.0))]},
                      "neighboring": "add_remove", "order": a, "rdp": C.num(v), "rtol": RTOL_RDP})
    save_cache(cache)

    out = {"provenance": dict(C.provenance("mpmath (dpsilo tests/vectors/gen/exact_rdp.py)", None, None,
                                           __file__),
                              dps=X.DPS, checks=checks,
                              note="exact RDP of the Poisson-subsampled Gaussian, A direction of Mironov, "
                                   "Talwar & Zhang 2019 (log A_alpha / (alpha-1)) by quadrature; Laplace by "
                                   "Mironov 2017 Prop. 6; epsilon by Balle et al. 2020 Thm 21 (clamped at 0) "
                                   "and Mironov 2017 Prop. 3 over the listed orders"),
           "cases": cases}
    C.write_json(os.path.join(C.VECTORS, "ref_exact_rdp.json"), out)
    print(json.dumps(checks))


if __name__ == "__main__":
    main()
