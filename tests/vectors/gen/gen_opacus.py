#!/usr/bin/python3
"""gen_opacus.py: writes tests/vectors/ref_opacus_rdp.json from Opacus' RDP analysis.

    OPACUS_SRC=/tmp/refs-opacus /usr/bin/python3 tests/vectors/gen/gen_opacus.py

Uses only opacus/accountants/analysis/rdp.py (public functions compute_rdp and get_privacy_spent), loaded
by file path because the opacus package imports torch. Opacus has no Laplace or sampling-without-
replacement RDP. gen_discrepancies.py later marks the values that are wrong.
"""
import math
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import grid as G  # noqa: E402

RTOL_RDP = 1e-9
RTOL_EPS = 1e-6
TIMEOUT_S = 300


def main():
    src, rdp = C.load_opacus_rdp()
    warnings.simplefilter("ignore")  # get_privacy_spent warns when the optimum is at the end of the grid
    assert [float(a) for a in C.opacus_default_alphas(src)] == G.OPACUS_DEFAULT_ORDERS, "default alphas changed"

    cases, notes = [], []

    for q in G.Q_GRID:
        for s in G.SIGMA_GRID:
            evj = C.ev_gaussian(s) if q == 1.0 else C.ev_poisson(q, C.ev_gaussian(s))
            for a in G.ORDER_GRID:
                name = f"sgm q={q:g} sigma={s:g} order={a:g}"
                try:
                    with np.errstate(all="ignore"):
                        v = float(C.call_with_timeout(rdp.compute_rdp, TIMEOUT_S, q=q, noise_multiplier=s,
                                                      steps=1, orders=[a])[0])
                except C.Timeout:
                    notes.append({"name": name, "order": a, "library_value": f"timeout>{TIMEOUT_S}s"})
                    continue
                except (OverflowError, ValueError, ZeroDivisionError) as e:
                    notes.append({"name": name, "order": a, "library_value": f"error: {type(e).__name__}"})
                    continue
                if math.isnan(v) or v == -math.inf:
                    notes.append({"name": name, "order": a, "library_value": repr(v)})
                    continue
                cases.append({"name": name, "event": evj, "neighboring": "add_remove", "order": a,
                              "rdp": C.num(v), "rtol": RTOL_RDP})
        print(f"sgm q={q:g} done", file=sys.stderr, flush=True)

    orders = G.OPACUS_DEFAULT_ORDERS
    for q, s in G.EPS_PAIRS:
        innerj = C.ev_gaussian(s) if q == 1.0 else C.ev_poisson(q, C.ev_gaussian(s))
        for n in G.EPS_STEPS:
            with np.errstate(all="ignore"):
                tot = rdp.compute_rdp(q=q, noise_multiplier=s, steps=n, orders=orders)
            for delta in G.EPS_DELTAS:
                base = {"event": C.ev_self(n, innerj), "neighboring": "add_remove", "delta": delta}
                with np.errstate(all="ignore"):
                    e, opt = rdp.get_privacy_spent(orders=orders, rdp=tot, delta=delta)
                    classic = tot - math.log(delta) / (np.array(orders) - 1)
                if not math.isnan(e):
                    cases.append(dict({"name": f"eps q={q:g} sigma={s:g} steps={n} delta={delta:g} balle2020 "
                                               "opacus_default"}, **base, conversion="balle2020",
                                      orders=orders, orders_name="opacus_default", epsilon=C.num(e),
                                      optimal_order=float(opt), rtol=RTOL_EPS, api="get_privacy_spent"))
                i = int(np.nanargmin(classic))
                cases.append(dict({"name": f"eps q={q:g} sigma={s:g} steps={n} delta={delta:g} mironov2017 "
                                           "opacus_default"}, **base, conversion="mironov2017",
                                  orders=orders, orders_name="opacus_default", epsilon=C.num(classic[i]),
                                  optimal_order=float(orders[i]), rtol=RTOL_EPS,
                                  api="compute_rdp + Mironov 2017 Prop. 3 in the generator"))

    out = {"provenance": C.provenance("opacus (opacus/accountants/analysis/rdp.py)",
                                      "https://github.com/pytorch/opacus", src, __file__),
           "notes": notes, "cases": cases}
    C.write_json(os.path.join(C.VECTORS, "ref_opacus_rdp.json"), out)
    print(f"{len(cases)} cases, {len(notes)} notes", file=sys.stderr)


if __name__ == "__main__":
    main()
