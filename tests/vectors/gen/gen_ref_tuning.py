#!/usr/bin/python3
"""gen_ref_tuning.py: golden values for accounting/tuning.c (repeat-and-select, Papernot & Steinke 2022).

Runs three independent public implementations of the tuning bounds on the same base RDP curves and
writes only the resulting numbers (plus their provenance) to tests/vectors/ref_tuning.json:

  dp_accounting  google/differential-privacy, python/dp_accounting, rdp_privacy_accountant
                 (_compute_rdp_repeat_and_select: TNB with eta >= 0 given by its mean, Poisson);
                 env DP_ACCOUNTING_SRC = <checkout>/python/dp_accounting
  ps_research    tensorflow/privacy, research/hyperparameters_2022/figure7.py (repeat_*_rdp: TNB given by
                 gamma with eta = 0, eta = 1 or eta > 0, and Poisson); env PS_RESEARCH_SRC = that directory
  liu_fl         kenziyuliu/private-cross-silo-fl, plot_hparam_cost.py (trunc_neg_binom_tuning_rdp, the
                 code behind Fig. 7 of Liu, Hu, Wu & Smith, NeurIPS 2022: TNB, any eta > -1);
                 env PCSFL_SRC = that checkout

The research scripts run plotting code at import, so only their function definitions are taken (AST)
and executed; nothing of them is copied into this repository. Closed-form checks (Gaussian base, where the
auxiliary minimum of Thm. 2 is 2 sqrt(t rho) - rho) and the continuous minimisations are computed here
with scipy. Run with Debian's /usr/bin/python3 (numpy, scipy, python3-attr, python3-absl).

Usage: DP_ACCOUNTING_SRC=... PS_RESEARCH_SRC=... PCSFL_SRC=... /usr/bin/python3 gen_ref_tuning.py OUT.json
"""
import ast
import json
import math
import os
import subprocess
import sys

import numpy as np
import scipy
from scipy import optimize

TF_ORDERS = ([1.25, 1.5, 1.75, 2., 2.25, 2.5, 3., 3.5, 4., 4.5] + [float(x) for x in range(5, 64)] +
             [128., 256., 512.])


def git_head(path):
    try:
        return subprocess.check_output(['git', '-C', path, 'rev-parse', 'HEAD'], text=True).strip()
    except Exception:  # pylint: disable=broad-except
        return 'unknown'


def read_version(path):
    """Last non-empty line of a VERSION file (dp_accounting's starts with a docstring)."""
    try:
        with open(path, encoding='utf-8') as f:
            lines = [l.strip() for l in f if l.strip()]
        return lines[-1] if lines else 'unknown'
    except OSError:
        return 'unknown'


def load_functions(path, names, extra_globals):
    """Executes only the named top-level function definitions of a script."""
    with open(path, encoding='utf-8') as f:
        tree = ast.parse(f.read())
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    mod = ast.Module(body=body, type_ignores=[])
    g = dict(extra_globals)
    exec(compile(mod, path, 'exec'), g)  # pylint: disable=exec-used
    return g


# ---- TNB helpers (our own, from PS22 Def. 1) -----------------------------------------------------
def tnb_mean(eta, gamma):
    if gamma == 1.0:
        return 1.0
    t = -math.log(gamma)
    if eta == 0:
        return math.expm1(t) / t
    return eta * (1 - gamma) / (gamma * (1 - gamma ** eta))


def tnb_gamma(eta, mean):
    """gamma with E[K] = mean, by bisection on t = log(1/gamma) to full double precision."""
    lo, hi = 0.0, 1.0
    while tnb_mean(eta, math.exp(-hi)) < mean:
        lo, hi = hi, 2 * hi
    for _ in range(300):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if tnb_mean(eta, math.exp(-mid)) < mean:
            lo = mid
        else:
            hi = mid
    return math.exp(-hi)


# ---- conversions (TF-Privacy / CKS20 Prop. 12, as used by Liu et al.'s code) ----------------------
def eps_from_rdp(orders, rdp, delta):
    best = math.inf
    for a, r in zip(orders, rdp):
        if delta ** 2 + math.expm1(-r) >= 0:
            e = 0.0
        elif a > 1.01:
            e = r + math.log1p(-1 / a) - math.log(delta * a) / (a - 1)
        else:
            e = math.inf
        best = min(best, e)
    return max(0.0, best)


def thm2_grid(orders, rdp, eta, gamma):
    """PS22 Thm. 2, auxiliary order over the grid, no envelope (our own evaluation)."""
    t = -math.log(gamma)
    lm = math.log(tnb_mean(eta, gamma))
    c = (1 + eta) * min((1 - 1 / b) * rb + t / b for b, rb in zip(orders, rdp))
    return [r + c + lm / (a - 1) for a, r in zip(orders, rdp)]


def envelope(orders, vals):
    """min over larger-or-equal orders (RDP is monotone in the order), as dp_accounting applies."""
    return [min(v2 for a2, v2 in zip(orders, vals) if a2 >= a) for a in orders]


def calibrate(eps_of_z, target, lo=0.1, hi=1e4):
    """Smallest z (to 1e-12 relative) with eps(z) <= target; eps decreasing in z."""
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if eps_of_z(mid) <= target:
            hi = mid
        else:
            lo = mid
        if hi / lo - 1 < 1e-13:
            break
    return hi


def main():
    out_path = sys.argv[1]
    dpa_src = os.environ['DP_ACCOUNTING_SRC']
    ps_src = os.environ['PS_RESEARCH_SRC']
    fl_src = os.environ['PCSFL_SRC']
    sys.path.insert(0, dpa_src)
    sys.path.insert(0, ps_src)
    from dp_accounting.rdp import rdp_privacy_accountant as dpa  # pylint: disable=import-outside-toplevel
    import rdp_accountant as ps_acct  # pylint: disable=import-outside-toplevel

    ps = load_functions(os.path.join(ps_src, 'figure7.py'),
                        {'repeat_logarithmic_rdp', 'repeat_geometric_rdp', 'repeat_negativebinomial_rdp',
                         'repeat_poisson_rdp'},
                        {'math': math, 'np': np, 'rdp_accountant': ps_acct})
    fl = load_functions(os.path.join(fl_src, 'plot_hparam_cost.py'),
                        {'trunc_neg_binom_expectation', 'trunc_neg_binom_tuning_rdp'}, {'np': np})
    ps_defaults = load_functions(os.path.join(ps_src, 'figure7_default_values.py'), set(), {})
    # The research defaults are module-level lists: read them with ast.literal_eval.
    with open(os.path.join(ps_src, 'figure7_default_values.py'), encoding='utf-8') as f:
        tree = ast.parse(f.read())
    ps_fig7_rdp = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], 'id', '') == 'rdp':
            ps_fig7_rdp = [float(v) for v in ast.literal_eval(node.value)]
    del ps_defaults

    orders = TF_ORDERS
    bases = {
        'gauss_s2': {'desc': 'gaussian, noise_multiplier 2, one release (rdp = a / 8)',
                     'event': {'type': 'gaussian', 'noise_multiplier': 2.0},
                     'rdp': [a / (2 * 2.0 ** 2) for a in orders]},
        'sgm_q01_s11_t1000': {
            'desc': 'poisson_sampled gaussian, q 0.01, noise_multiplier 1.1, 1000 steps (dp_accounting)',
            'event': {'type': 'self_composed', 'count': 1000,
                      'event': {'type': 'poisson_sampled', 'sampling_rate': 0.01,
                                'event': {'type': 'gaussian', 'noise_multiplier': 1.1}}},
            'rdp': [float(v) for v in
                    1000 * dpa._compute_rdp_poisson_subsampled_gaussian(0.01, 1.1, orders)]},
        'ps22_fig7': {'desc': 'the RDP curve shipped with the PS22 research code (figure7_default_values)',
                      'event': None, 'rdp': ps_fig7_rdp},
    }

    dists = [
        {'kind': 'poisson', 'mean': 2.0}, {'kind': 'poisson', 'mean': 10.0},
        {'kind': 'poisson', 'mean': 100.0},
        {'kind': 'tnb', 'eta': 1.0, 'mean': 10.0}, {'kind': 'tnb', 'eta': 1.0, 'mean': 100.0},
        {'kind': 'tnb', 'eta': 0.0, 'mean': 10.0}, {'kind': 'tnb', 'eta': 0.0, 'mean': 3.0},
        {'kind': 'tnb', 'eta': -0.5, 'mean': 10.0}, {'kind': 'tnb', 'eta': 0.5, 'mean': 10.0},
        {'kind': 'tnb', 'eta': 2.0, 'mean': 10.0}, {'kind': 'tnb', 'eta': 5.0, 'mean': 10.0},
        {'kind': 'tnb', 'eta': 0.5, 'mean': 100.0},
    ]
    cases = []
    for bname, base in bases.items():
        rdp = base['rdp']
        for d in dists:
            case = {'base': bname, 'distribution': d, 'refs': {}}
            if d['kind'] == 'poisson':
                mu = d['mean']
                case['refs']['dp_accounting'] = [
                    float(v) for v in dpa._compute_rdp_repeat_and_select(orders, rdp, mu, np.inf)]
                case['refs']['ps_research'] = [float(v) for v in ps['repeat_poisson_rdp'](orders, rdp, mu)]
                case['dp_accounting_envelope'] = False
            else:
                eta, mean = d['eta'], d['mean']
                gamma = tnb_gamma(eta, mean)
                case['gamma'] = gamma
                case['refs']['theorem_grid'] = thm2_grid(orders, rdp, eta, gamma)
                case['refs']['theorem_grid_envelope'] = envelope(orders, case['refs']['theorem_grid'])
                _, fl_vals = fl['trunc_neg_binom_tuning_rdp'](eta, gamma, orders, rdp)
                case['refs']['liu_fl'] = [float(v) for v in fl_vals]
                if eta >= 0:
                    case['refs']['dp_accounting'] = [
                        float(v) for v in dpa._compute_rdp_repeat_and_select(orders, rdp, mean, eta)]
                    case['dp_accounting_envelope'] = True
                if eta == 0:
                    case['refs']['ps_research'] = [
                        float(v) for v in ps['repeat_logarithmic_rdp'](orders, rdp, gamma)]
                elif eta == 1:
                    case['refs']['ps_research'] = [
                        float(v) for v in ps['repeat_geometric_rdp'](orders, rdp, gamma)]
                elif eta > 0:
                    case['refs']['ps_research'] = [
                        float(v) for v in ps['repeat_negativebinomial_rdp'](orders, rdp, gamma, eta)]
            # Agreement table (max relative difference between each pair, finite entries).
            agree = {}
            names = sorted(case['refs'])
            for i, a in enumerate(names):
                for b in names[i + 1:]:
                    # dp_accounting applies the monotone envelope to TNB; compare it only with the
                    # enveloped theorem, and the others only with each other.
                    if case.get('dp_accounting_envelope') and ('dp_accounting' in (a, b)) != (
                            'theorem_grid_envelope' in (a, b)):
                        continue
                    va, vb = np.array(case['refs'][a]), np.array(case['refs'][b])
                    m = np.isfinite(va) & np.isfinite(vb)
                    agree[a + '~' + b] = float(np.max(np.abs(va[m] - vb[m]) / np.maximum(
                        np.abs(va[m]), np.abs(vb[m])))) if m.any() else None
            case['max_rel_diff'] = agree
            if 'dp_accounting' in case['refs']:
                case['dp_accounting_epsilon_delta1e-5'] = float(
                    dpa.compute_epsilon(orders, case['refs']['dp_accounting'], 1e-5)[0])
            cases.append(case)

    # ---- continuous auxiliary order (our default), Gaussian base: closed form and scipy ---------------
    cont = []
    for sigma, steps in ((2.0, 1), (14.567, 1), (1.0, 10)):
        rho = steps / (2 * sigma ** 2)
        for eta, mean in ((1.0, 10.0), (0.0, 10.0), (-0.5, 10.0), (2.0, 100.0), (0.0, 1.5)):
            gamma = tnb_gamma(eta, mean)
            t = -math.log(gamma)
            g = lambda x: (1 - 1 / (1 + math.exp(x))) * (1 + math.exp(x)) * rho + t / (1 + math.exp(x))
            res = optimize.minimize_scalar(g, bounds=(math.log(1e-4), math.log(1e6)), method='bounded',
                                           options={'xatol': 1e-12})
            scipy_min = min(float(res.fun), t)
            lh = math.sqrt(t / rho)
            closed = 2 * math.sqrt(t * rho) - rho if lh >= 1 else t
            cont.append({'noise_multiplier': sigma, 'steps': steps, 'eta': eta, 'mean': mean,
                         'gamma': gamma, 'aux_min_closed_form': closed, 'aux_min_scipy': scipy_min,
                         'aux_order_closed_form': max(lh, 1.0),
                         'C': (1 + eta) * closed})
    # Poisson with a Gaussian base, continuous conversion order: dhat(l) = inf_a CKS(a).
    pois_cont = []
    for sigma in (2.0, 5.0):
        rho = 1 / (2 * sigma ** 2)
        for lam in (2.0, 5.0, 32.0):
            ehat = math.log1p(1 / (lam - 1))
            f = lambda x: ((math.exp(x)) * ((1 + math.exp(x)) * rho - ehat + math.log1p(-1 / (1 + math.exp(x))))
                           - math.log(1 + math.exp(x)))
            res = optimize.minimize_scalar(f, bounds=(math.log(1e-2), math.log(1e5)), method='bounded',
                                           options={'xatol': 1e-12})
            pois_cont.append({'noise_multiplier': sigma, 'order': lam, 'log_dhat_cks': float(res.fun),
                              'aux_order': 1 + math.exp(res.x)})

    # ---- Liu et al. 2022, Fig. 7 calibration (K=1 Gaussian release, eps 0.25, delta 1e-5, E[K] = 10) ----------
    delta, target = 1e-5, 0.25
    z_untuned = calibrate(lambda z: eps_from_rdp(orders, [a / (2 * z * z) for a in orders], delta), target)
    seed = {'orders': 'tf72', 'delta': delta, 'epsilon': target, 'expected_runs': 10.0,
            'untuned_noise_multiplier': z_untuned, 'tuned': []}
    for eta in (-0.5, 0.0, 0.5, 1.0, 2.0, 5.0):
        gamma = tnb_gamma(eta, 10.0)
        z = calibrate(lambda z, e=eta, g=gamma: eps_from_rdp(
            orders, thm2_grid(orders, [a / (2 * z * z) for a in orders], e, g), delta), target)
        seed['tuned'].append({'eta': eta, 'gamma': gamma, 'noise_multiplier': z,
                              'ratio': z / z_untuned})

    doc = {
        'provenance': {
            'generator': 'tests/vectors/gen/gen_ref_tuning.py',
            'paper': 'Papernot & Steinke, Hyperparameter Tuning with Renyi Differential Privacy, ICLR 2022, '
                     'Thm. 2 (TNB) and Thm. 6 (Poisson)',
            'dp_accounting': {'repo': 'google/differential-privacy', 'commit': git_head(dpa_src),
                              'path': 'python/dp_accounting/dp_accounting/rdp/rdp_privacy_accountant.py',
                              'version': read_version(os.path.join(dpa_src, 'VERSION'))},
            'ps_research': {'repo': 'tensorflow/privacy', 'commit': git_head(ps_src),
                            'path': 'research/hyperparameters_2022/figure7.py'},
            'liu_fl': {'repo': 'kenziyuliu/private-cross-silo-fl', 'commit': git_head(fl_src),
                       'path': 'plot_hparam_cost.py'},
            'python': sys.version.split()[0], 'numpy': np.__version__, 'scipy': scipy.__version__,
        },
        'orders': orders,
        'bases': bases,
        'cases': cases,
        'continuous_gaussian_tnb': cont,
        'continuous_gaussian_poisson': pois_cont,
        'seed001_fig7': seed,
    }
    with open(out_path, 'w', encoding='utf-8') as f:
        json.dump(doc, f, indent=1)
        f.write('\n')


if __name__ == '__main__':
    main()
