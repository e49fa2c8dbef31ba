/*
 * zcdp.h: zero-concentrated differential privacy of event trees (Bun & Steinke 2016) and its
 * conversion to (epsilon, delta).
 *
 * rho of each mechanism (Bun & Steinke 2016; any neighbouring relation, parameters being relative
 * to the sensitivity under that relation):
 *   gaussian  rho = 1 / (2 sigma^2)          (Prop. 1.6)
 *   zcdp      rho                            (Def. 1.1)
 *   pure      rho = eps^2 / 2                (Prop. 1.4)
 *   laplace   rho = 1 / (2 b^2): the Laplace mechanism is (1/b)-DP, then Prop. 1.4
 *   self_composed / composed: rho adds (Lemma 1.7)
 * poisson_sampled and sampled_without_replacement are refused (DP_EINVAL): zCDP has no
 * amplification by subsampling; use the RDP or PLD accountant. repeat_and_select is refused too:
 * the tuning bounds (Papernot & Steinke 2022) are stated in RDP, and the RDP accountant prices it.
 *
 * Thread-safety: pure functions.
 */
#ifndef DP_ACCOUNTING_ZCDP_H
#define DP_ACCOUNTING_ZCDP_H

#include "accounting/event.h"
#include "common/dp_err.h"

/* rho of the whole tree (no open parameters). DP_EINVAL with the field path of an unsupported node.
 */
int acct_zcdp_eval(const acct_event *ev, double *rho, dp_err *err);

typedef enum acct_zcdp_conversion {
    ACCT_ZCDP_BS2016 = 0, /* eps = rho + 2 sqrt(rho log(1/delta)); Bun & Steinke 2016, Prop. 1.3 */
    ACCT_ZCDP_CKS2020     /* eps = inf_{alpha>1} alpha rho + log1p(-1/alpha)
                             - (log delta + log alpha)/(alpha-1); Canonne, Kamath & Steinke 2020,
                             Cor. 13 (Prop. 12 applied to the RDP curve alpha rho), minimised over
                             continuous alpha. Never looser than BS2016. The default. */
} acct_zcdp_conversion;

/* "bun_steinke2016", "cks2020". */
const char *acct_zcdp_conversion_name(acct_zcdp_conversion c);
int acct_zcdp_conversion_parse(const char *s, acct_zcdp_conversion *out, dp_err *err);

/* rho >= 0 finite, delta in (0,1). *opt_order: the minimising alpha for CKS2020, NAN for BS2016. */
int acct_zcdp_to_epsilon(double rho, double delta, acct_zcdp_conversion conv, double *eps,
                         double *opt_order, dp_err *err);

/* Inverse: delta(eps) for eps >= 0. BS2016: exp(-(eps - rho)^2 / (4 rho)) when eps >= rho, else 1.
 * CKS2020: inf_alpha exp((alpha-1)(alpha rho - eps)) (1 - 1/alpha)^(alpha-1) / alpha, capped at 1.
 */
int acct_zcdp_to_delta(double rho, double eps, acct_zcdp_conversion conv, double *delta,
                       double *opt_order, dp_err *err);

#endif
