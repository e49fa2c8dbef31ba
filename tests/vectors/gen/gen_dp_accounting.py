#!/usr/bin/python3
"""gen_dp_accounting.py: writes tests/vectors/ref_dp_accounting_rdp.json from Google's dp_accounting.

    DP_ACCOUNTING_SRC=/tmp/refs-dp /usr/bin/python3 tests/vectors/gen/gen_dp_accounting.py

Only the library's public API is used (RdpAccountant, DpEvent classes, mechanism_calibration). The values
are the library's own answers; gen_discrepancies.py later compares them with ref_exact_rdp.json and marks
the ones that are wrong ("library_wrong": true, "exact": ...).
"""
import logging
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import grid as G  # noqa: E402

RTOL_RDP = 1e-9
RTOL_EPS = 1e-6
TIMEOUT_S = 300


def main():
    src, dpa, rdpmod = C.load_dp_accounting()
    logging.disable(logging.WARNING)  # the library logs a warning per non-converging fractional order
    NR = dpa.NeighboringRelation
    Acc = rdpmod.RdpAccountant
    assert list(rdpmod.DEFAULT_RDP_ORDERS) == G.DP_ACCOUNTING_DEFAULT_ORDERS, "default orders changed"

    def rdp_curve(event, orders, nr=NR.ADD_OR_REMOVE_ONE):
        acc = Acc(orders=orders, neighboring_relation=nr)
        acc.compose(event)
        return [float(x) for x in acc.rdp]

    cases, notes = [], []

    def add_rdp(name, ev_json, order, val, nb="add_remove"):
        if math.isnan(val):
            notes.append({"name": name, "order": order, "library_value": "nan"})
            return
        if val == -math.inf:
            notes.append({"name": name, "order": order, "library_value": "-inf"})
            return
        cases.append({"name": name, "event": ev_json, "neighboring": nb, "order": order,
                      "rdp": C.num(val), "rtol": RTOL_RDP})

    # 1. Poisson-subsampled Gaussian, per order
    for q in G.Q_GRID:
        for s in G.SIGMA_GRID:
            if q == 1.0:
                ev, evj = dpa.GaussianDpEvent(s), C.ev_gaussian(s)
            else:
                ev, evj = dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(s)), C.ev_poisson(q, C.ev_gaussian(s))
            for a in G.ORDER_GRID:
                name = f"sgm q={q:g} sigma={s:g} order={a:g}"
                try:
                    v = C.call_with_timeout(rdp_curve, TIMEOUT_S, ev, [a])[0]
                except C.Timeout:
                    notes.append({"name": name, "order": a, "library_value": f"timeout>{TIMEOUT_S}s"})
                    continue
                except (OverflowError, ValueError, FloatingPointError) as e:
                    notes.append({"name": name, "order": a, "library_value": f"error: {type(e).__name__}"})
                    continue
                add_rdp(name, evj, a, v)
        print(f"sgm q={q:g} done", file=sys.stderr, flush=True)

    # 2. Laplace (LaplaceDpEvent, Mironov 2017 Prop. 6 in the library)
    for b in G.LAPLACE_B_GRID:
        vals = rdp_curve(dpa.LaplaceDpEvent(b), G.ORDER_GRID)
        for a, v in zip(G.ORDER_GRID, vals):
            add_rdp(f"laplace b={b:g} order={a:g}", C.ev_laplace(b), a, v)

    # 3. Gaussian under sampling without replacement, replace-one (Wang, Balle & Kasiviswanathan 2019)
    for n, m in G.SWOR_SIZES:
        for s in G.SWOR_SIGMAS:
            ev = dpa.SampledWithoutReplacementDpEvent(n, m, dpa.GaussianDpEvent(s))
            vals = rdp_curve(ev, G.SWOR_ORDERS, NR.REPLACE_ONE)
            for a, v in zip(G.SWOR_ORDERS, vals):
                add_rdp(f"swor n={n} m={m} sigma={s:g} order={a:g}", C.ev_swor(n, m, C.ev_gaussian(s)), a, v,
                        nb="replace_one")

    # 4. pure epsilon-DP (the library's EpsilonDeltaDpEvent with delta = 0: randomized-response bound)
    for e in G.PURE_EPS:
        vals = rdp_curve(dpa.dp_event.EpsilonDeltaDpEvent(e, 0.0), G.ORDER_GRID)
        for a, v in zip(G.ORDER_GRID, vals):
            add_rdp(f"pure eps={e:g} order={a:g}", {"type": "pure", "epsilon": e}, a, v)

    # 5. zCDP (rho * alpha)
    for r in G.ZCDP_RHO:
        vals = rdp_curve(dpa.ZCDpEvent(r), G.ORDER_GRID)
        for a, v in zip(G.ORDER_GRID, vals):
            add_rdp(f"zcdp rho={r:g} order={a:g}", {"type": "zcdp", "rho": r}, a, v)

    # 6. epsilon with the library's default orders: its own conversion (Balle et al. 2020 with a KL
    #    shortcut and orders > 1.01 only) and the classic Mironov 2017 one applied to its RDP curve
    orders = G.DP_ACCOUNTING_DEFAULT_ORDERS
    for q, s in G.EPS_PAIRS:
        inner = dpa.GaussianDpEvent(s) if q == 1.0 else dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(s))
        innerj = C.ev_gaussian(s) if q == 1.0 else C.ev_poisson(q, C.ev_gaussian(s))
        for n in G.EPS_STEPS:
            acc = Acc()
            acc.compose(dpa.SelfComposedDpEvent(inner, n))
            rdp = acc.rdp
            for delta in G.EPS_DELTAS:
                e, opt = acc.get_epsilon_and_optimal_order(delta)
                base = {"event": C.ev_self(n, innerj), "neighboring": "add_remove", "delta": delta,
                        "orders": orders, "orders_name": "dp_accounting_default"}
                cases.append(dict({"name": f"eps q={q:g} sigma={s:g} steps={n} delta={delta:g} balle2020 "
                                            "dp_accounting_default"}, **base, conversion="balle2020",
                                  epsilon=C.num(e), optimal_order=float(opt), rtol=RTOL_EPS,
                                  api="RdpAccountant.get_epsilon_and_optimal_order"))
                with np.errstate(all="ignore"):
                    classic = rdp - math.log(delta) / (np.array(orders) - 1)
                i = int(np.nanargmin(classic))
                cases.append(dict({"name": f"eps q={q:g} sigma={s:g} steps={n} delta={delta:g} mironov2017 "
                                            "dp_accounting_default"}, **base, conversion="mironov2017",
                                  epsilon=C.num(classic[i]), optimal_order=float(orders[i]), rtol=RTOL_EPS,
                                  api="RdpAccountant.rdp + Mironov 2017 Prop. 3 in the generator"))

    # 7. mixed compositions
    mixes = [
        ("mix sgm+sgm+laplace",
         dpa.ComposedDpEvent([
             dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.01, dpa.GaussianDpEvent(1.1)), 1000),
             dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.001, dpa.GaussianDpEvent(0.8)), 5000),
             dpa.SelfComposedDpEvent(dpa.LaplaceDpEvent(10.0), 3)]),
         {"type": "composed", "events": [C.ev_sgm(0.01, 1.1, 1000), C.ev_sgm(0.001, 0.8, 5000),
                                         C.ev_self(3, C.ev_laplace(10.0))]}),
        ("mix gaussian+zcdp+pure",
         dpa.ComposedDpEvent([dpa.GaussianDpEvent(5.0), dpa.ZCDpEvent(0.01),
                              dpa.dp_event.EpsilonDeltaDpEvent(0.1, 0.0)]),
         {"type": "composed", "events": [C.ev_gaussian(5.0), {"type": "zcdp", "rho": 0.01},
                                         {"type": "pure", "epsilon": 0.1}]}),
    ]
    for name, ev, evj in mixes:
        for delta in (1e-5, 1e-8):
            acc = Acc()
            acc.compose(ev)
            e, opt = acc.get_epsilon_and_optimal_order(delta)
            cases.append({"name": f"{name} delta={delta:g} balle2020 dp_accounting_default", "event": evj,
                          "neighboring": "add_remove", "delta": delta, "conversion": "balle2020",
                          "orders": orders, "orders_name": "dp_accounting_default", "epsilon": C.num(e),
                          "optimal_order": float(opt), "rtol": RTOL_EPS,
                          "api": "RdpAccountant.get_epsilon_and_optimal_order"})
        for a, v in zip(orders, rdp_curve(ev, orders)):
            add_rdp(f"{name} order={a:g}", evj, a, v)

    # 8. calibration: smallest sigma with eps <= target (mechanism_calibration, Brent to tol 1e-9)
    calib = []
    for target, q, n, delta in [(1.0, 0.01, 10**4, 1e-5), (8.0, 0.01, 20000, 1e-4), (1.0, 0.02, 2000, 1e-4),
                                (3.0, 256 / 60000, 14063, 1e-5)]:
        def make_event(sig, q=q, n=n):
            return dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sig)), n)
        sig = dpa.calibrate_dp_mechanism(Acc, make_event, target, delta,
                                         dpa.LowerEndpointAndGuess(0.1, 1.0), tol=1e-9)
        acc = Acc()
        acc.compose(make_event(sig))
        achieved = acc.get_epsilon(delta)
        calib.append({"name": f"calibrate sigma eps={target:g} q={q:g} steps={n} delta={delta:g}",
                      "event": C.ev_sgm(q, None, n), "neighboring": "add_remove", "delta": delta,
                      "conversion": "balle2020", "orders": orders, "orders_name": "dp_accounting_default",
                      "target_epsilon": target, "noise_multiplier": sig, "epsilon_achieved": achieved,
                      "rtol": 1e-6, "api": "calibrate_dp_mechanism(tol=1e-9)"})
    cases.extend(calib)

    # Pure epsilon (randomized-response bound) and sampling without replacement (WBK 2019 Thm 27) were
    # kept apart in "cases_pending" until dpsilo implemented those bounds; they are ordinary cases now.
    # gen_discrepancies.py marks where the library is off (6 cases, docs/ACCOUNTING.md).
    out = {"provenance": C.provenance("dp_accounting", "https://github.com/google/differential-privacy", src,
                                      __file__),
           "notes": notes,
           "cases": cases}
    C.write_json(os.path.join(C.VECTORS, "ref_dp_accounting_rdp.json"), out)
    print(f"{len(cases)} cases, {len(notes)} notes", file=sys.stderr)


if __name__ == "__main__":
    main()
