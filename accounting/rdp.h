/*
 * rdp.h: Rényi differential privacy of event trees, and conversion to (epsilon, delta).
 *
 * An RDP curve is r(alpha) = sup over neighbouring inputs of D_alpha(M(x) || M(x')) at each order
 * alpha > 1 (Mironov 2017, Def. 3). Curves compose by addition at each order (Mironov 2017, Prop.
 * 1), so a tree is evaluated order by order: self_composed multiplies by count, composed adds.
 *
 * Mechanisms and neighbouring relations (ACCT_NB_ADD_REMOVE is the default everywhere):
 *   gaussian: r = alpha / (2 sigma^2), Mironov 2017, Prop. 7. Either relation: sigma is
 *       std / L2 sensitivity under the relation in force, so the formula is the same.
 *   laplace: Mironov 2017, Prop. 6 (Table II); same remark (b = scale / L1 sensitivity).
 *   zcdp: r = rho * alpha, Bun & Steinke 2016, Def. 1.1.
 *   pure: randomized response with the same eps, which dominates every eps-DP mechanism
 *       (Kairouz, Oh & Viswanath 2015): r = (log cosh((2 alpha-1) eps/2) - log cosh(eps/2))
 *       / (alpha - 1) (Mironov 2017, Table II, rewritten without cancellation; as
 *       dp_accounting); never above min(eps, alpha eps^2/2).
 *   poisson_sampled(gaussian), add/remove ONLY: the sampled Gaussian mechanism of Mironov,
 *       Talwar & Zhang 2019 (§3.3): r = log(A_alpha)/(alpha-1), with
 *       A_alpha = E_{z~N(0,s^2)}[(1-q+q e^{(2z-1)/(2 s^2)})^alpha].
 *       Integer alpha: the binomial sum (MTZ 2019, §3.3, eq. (3)); fractional alpha: quadrature
 *       of the same expectation (trapezoidal rule on the line, adaptive Gauss-Kronrod where it
 *       does not settle; not the MTZ two-sided series, which loses all digits for large sigma,
 *       see docs/ACCOUNTING.md). Both are computed as log(A_alpha - 1), whose terms are all
 *       positive, so r is accurate even at r ~ 1e-27. Under replace_one this evaluator refuses
 *       the event (DP_EINVAL, field "neighboring"), as dp_accounting does.
 *   sampled_without_replacement, replace_one ONLY: Wang, Balle & Kasiviswanathan 2019, Thm. 9
 *       at integer alpha >= 2 for any inner event (using its RDP at orders 2..alpha and its
 *       eps(infinity), +inf unless pure/laplace), and linear interpolation of
 *       (alpha-1) r(alpha) between integers for fractional alpha (a valid upper bound since
 *       (alpha-1) D_alpha is convex in alpha; Van Erven & Harremoës 2014, Thm. 11).
 *       sample_size == source_size is the inner event itself. Under add_remove the evaluator
 *       refuses it (DP_EINVAL).
 *   repeat_and_select: private hyperparameter tuning, Papernot & Steinke 2022 (Thm. 2 for the
 *       truncated negative binomial, Thm. 6 for Poisson; fixed k by composition), evaluated by
 *       accounting/tuning.h on the child's RDP curve, with the auxiliary order minimised once
 *       per evaluation. Its eps(infinity) is the search's pure bound (tuning.h).

 * Accuracy (tests/vectors/mpmath_rdp.json): relative error <= 1e-9 against 60-digit mpmath for q in
 * [1e-8, 1], sigma in [0.1, 1e5], alpha in [1.0001, 1e5]. Never NaN; +INFINITY only where the value
 * is infinite (or beyond double range, rounded up).
 *
 * Thread-safety: all functions are reentrant; each call allocates its own workspace.
 */
#ifndef DP_ACCOUNTING_RDP_H
#define DP_ACCOUNTING_RDP_H

#include <stdbool.h>
#include <stddef.h>

#include "accounting/event.h"
#include "common/dp_err.h"

#define ACCT_RDP_MIN_ORDER  1.0001 /* smallest order accepted: the search range starts here */
#define ACCT_RDP_MAX_ORDER  1.0e5  /* largest order accepted (integer sums cost O(alpha) terms) */
#define ACCT_RDP_MAX_ORDERS 4096   /* most orders in one call (bounded user input) */

/* The default grid, sorted: 1.1, 1.2, ..., 10.9 (99 fractional orders), 11, 12, ..., 64, then 80,
 * 96, 128, 192, 256, 384, 512, 1024, 2048, 4096 (for small epsilon / tiny delta). It contains
 * Opacus's DEFAULT_ALPHAS and TF-Privacy's compute_dp_sgd_privacy grid ([1 + x/10] + [12..63]) as
 * subsets, so the grid answer is never looser than theirs. Stores a pointer to static storage;
 * returns the count. */
size_t acct_rdp_default_orders(const double **orders);

/* Validates an order list: 1 <= n <= ACCT_RDP_MAX_ORDERS, each finite, > 1 and <=
 * ACCT_RDP_MAX_ORDER (field "orders[i]"). */
int acct_rdp_check_orders(const double *orders, size_t n, dp_err *err);

/* RDP of the whole tree at each order: rdp_out[i] = r(orders[i]) (caller-owned array of n_orders).
 * The tree must have no open parameters. +INFINITY is a valid output. Errors: DP_EINVAL for a bad
 * tree/order or an event the relation does not support (field names the node); DP_ENUMERIC if a
 * quadrature fails; DP_ENOMEM. */
int acct_rdp_eval(const acct_event *ev, acct_neighboring nb, const double *orders, size_t n_orders,
                  double *rdp_out, dp_err *err);

/* Single-mechanism curves at one order alpha > 1 (no validation beyond what is stated). */
double acct_rdp_gaussian(double sigma, double alpha);
double acct_rdp_laplace(double b, double alpha);
double acct_rdp_pure(double eps, double alpha);
/* Poisson-subsampled Gaussian (MTZ 2019), q in (0,1], sigma > 0, alpha in (1, ACCT_RDP_MAX_ORDER].
 */
int acct_rdp_sampled_gaussian(double q, double sigma, double alpha, double *out, dp_err *err);

/* Conversions from an RDP curve to (epsilon, delta). */
typedef enum acct_conversion {
    ACCT_CONV_MIRONOV2017 = 0, /* eps = r + log(1/delta)/(alpha-1); Mironov 2017, Prop. 3 */
    ACCT_CONV_BALLE2020,       /* eps = r + log1p(-1/alpha) - (log delta + log alpha)/(alpha-1);
                                  Balle et al. 2020, Thm. 21 (= Canonne, Kamath & Steinke 2020,
                                  Prop. 12), plus the KL shortcut (eps = 0 when delta >= sqrt(1 -
                                  e^-r), Pinsker-type bound used by dp_accounting). Never looser than
                                  Mironov at the same order. */
    ACCT_CONV_OPTIMAL          /* BALLE2020 minimised over a continuous order range, not only the
                                  grid: the grid minimum, refined by golden-section search between
                                  its neighbours (the objective is quasi-convex in alpha). The default.
                                  With curve arrays only (acct_rdp_to_epsilon) it equals BALLE2020. */
} acct_conversion;

/* "mironov2017", "balle2020", "optimal". */
const char *acct_conversion_name(acct_conversion c);
/* Parses the names above; DP_EINVAL otherwise (field "conversion"). */
int acct_conversion_parse(const char *s, acct_conversion *out, dp_err *err);

/* eps(delta) = min over the given orders of the conversion; clamped at >= 0. delta in (0,1).
 * *opt_order is the order attaining it (NAN if eps is +INFINITY). rdp values must be >= 0 or +INF.
 */
int acct_rdp_to_epsilon(const double *orders, const double *rdp, size_t n, double delta,
                        acct_conversion conv, double *eps, double *opt_order, dp_err *err);

/* A conversion table: the terms of the conversion at each order that depend only on the order and
 * delta (log1p(-1/alpha), (log delta + log alpha)/(alpha - 1), ...), computed once for a caller
 * that converts many curves on one grid at one delta. Immutable once made: it may be shared by
 * threads. conv is the conversion the table is used with (OPTIMAL and BALLE2020 share a table). */
typedef struct acct_conv_table acct_conv_table;
/* NULL on a bad delta, order list or conversion (err says which) or DP_ENOMEM. */
acct_conv_table *acct_conv_table_new(const double *orders, size_t n, double delta,
                                     acct_conversion conv, dp_err *err);
void acct_conv_table_free(acct_conv_table *t); /* NULL: nothing */
/* acct_rdp_to_epsilon(t's orders, rdp, t's n, t's delta, the table's conversion): the same eps and
 * order bit for bit, without the transcendental functions of each order. */
int acct_rdp_to_epsilon_table(const acct_conv_table *t, const double *rdp, double *eps,
                              double *opt_order, dp_err *err);

/* delta(eps) = min over orders (the inverse of the bound above: Mironov 2017 Prop. 3 gives
 * log delta = (alpha-1)(r - eps); Balle 2020 gives (alpha-1)(r - eps + log1p(-1/alpha)) - log
 * alpha, and the KL bound 0.5 log(1 - e^-r)); clamped to <= 1. eps >= 0 finite. */
int acct_rdp_to_delta(const double *orders, const double *rdp, size_t n, double eps,
                      acct_conversion conv, double *delta, double *opt_order, dp_err *err);

/* Full answer of a tree-level computation. */
typedef struct acct_rdp_answer {
    double value;               /* epsilon (or delta for acct_rdp_delta) */
    double optimal_order;       /* order attaining it; NAN when value is infinite */
    acct_conversion conversion; /* bound used: MIRONOV2017 or BALLE2020 */
    bool continuous;            /* true when the order came from the continuous search */
    bool basic_composition;     /* true when an all-pure tree's sum of epsilon decided (then
                                   optimal_order is NAN): Dwork & Roth 2014, Thm. 3.16 */
} acct_rdp_answer;

/* epsilon of a tree at delta: evaluates the curve on orders (NULL/0 = default grid) and converts.
 * With ACCT_CONV_OPTIMAL the order is then refined on [ACCT_RDP_MIN_ORDER, ACCT_RDP_MAX_ORDER]; the
 * answer is min(grid, refined), so it is never looser than the grid answer. A tree made only of
 * pure events (under composed / self_composed) answers min(that, sum of its epsilons): basic
 * composition, Dwork & Roth 2014, Thm. 3.16 (acct_rdp_delta: delta = 0 when epsilon >= that sum).
 * Composed curves are summed rounding upward (logmath.h dp_sum_up / dp_mul_up), as the ledger's
 * totals are. */
int acct_rdp_epsilon(const acct_event *ev, acct_neighboring nb, double delta, acct_conversion conv,
                     const double *orders, size_t n_orders, acct_rdp_answer *out, dp_err *err);

/* acct_rdp_epsilon evaluating every order of the grid at a repeat_and_select root (no bound-pruned
 * scan): the reference the pruned scan is tested against (tests/unit/test_accounting_tuning.c). */
int acct_rdp_epsilon_full_scan(const acct_event *ev, acct_neighboring nb, double delta,
                               acct_conversion conv, const double *orders, size_t n_orders,
                               acct_rdp_answer *out, dp_err *err);

/* acct_rdp_epsilon of a tree whose curve on `orders` (strictly increasing) is already known: rdp[i]
 * must be >= the tree's RDP at orders[i] (e.g. the ledger's upward-rounded per-order sums of the
 * tree's parts). The grid minimum is taken on rdp; with ACCT_CONV_OPTIMAL it is refined by the same
 * continuous search as acct_rdp_epsilon, which evaluates the tree only near that minimum (a few
 * evaluations instead of the whole grid); the pure-event rule applies as there. With rdp equal to
 * the tree's own curve on the grid, the answer equals acct_rdp_epsilon's. */
int acct_rdp_epsilon_curve(const acct_event *ev, acct_neighboring nb, double delta,
                           acct_conversion conv, const double *orders, const double *rdp, size_t n,
                           acct_rdp_answer *out, dp_err *err);

/* acct_rdp_epsilon_curve on t's orders at t's delta (conv: one t was made for), the same answer
 * bit for bit; the grid conversion uses the table. */
int acct_rdp_epsilon_curve_table(const acct_event *ev, acct_neighboring nb,
                                 const acct_conv_table *t, acct_conversion conv, const double *rdp,
                                 acct_rdp_answer *out, dp_err *err);

/* delta of a tree at epsilon; same order handling as acct_rdp_epsilon. */
int acct_rdp_delta(const acct_event *ev, acct_neighboring nb, double epsilon, acct_conversion conv,
                   const double *orders, size_t n_orders, acct_rdp_answer *out, dp_err *err);

#endif
