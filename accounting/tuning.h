/*
 * tuning.h: the privacy cost of private hyperparameter tuning ("repeat and select").
 *
 * A search runs a base training K times with candidates drawn at random and releases only the best
 * run. K itself is random (Liu & Talwar 2019; Papernot & Steinke 2022, "Hyperparameter Tuning with
 * Renyi Differential Privacy", ICLR 2022, hereafter PS22). This module prices that search:
 *
 *   - RDP of the search at an order lambda, given the RDP curve eps(.) of one run as a callback:
 *       fixed k: k * eps(lambda) (RDP composition, Mironov 2017 Prop. 1; best-of-k is
 *           post-processing);
 *       TNB(eta, g): eps(lambda) + (1+eta) * inf_{lh >= 1} [(1 - 1/lh) eps(lh) + log(1/g)/lh]
 *           + log E[K] / (lambda - 1) (PS22 Thm. 2; its corollaries for eta = 0, logarithmic,
 *           and eta = 1, geometric);
 *       Poisson(mu): eps(lambda) + mu * dhat + log(mu) / (lambda - 1) (PS22 Thm. 6), where the
 *           run is (ehat, dhat)-DP with ehat = log(1 + 1/(lambda-1)), the largest ehat the
 *           theorem allows, and dhat is the run's delta at ehat from its RDP curve (Canonne,
 *           Kamath & Steinke 2020, Prop. 12; plus the KL bound dhat <= sqrt(1 - exp(-KL)),
 *           Bretagnolle-Huber, as dp_accounting does).
 *   - The auxiliary orders (lh for TNB, the conversion order for Poisson) are minimised over a
 *     continuum: a half-decade scan of lh - 1 in [1e-2, 3.2e4] plus the caller's orders, then
 *     Brent's method (parabolic steps, golden-section fallback) in log(lh - 1) around the best
 *     point. Every reported number is the bound evaluated at an actual (order, aux order) pair, so
 *     whatever the search finds is a valid upper bound; refinement only tightens it. The objective
 *     is quasi-convex in lh for true RDP curves ((a-1) D_a is convex in a; van Erven & Harremoes
 *     2014), so the bracket holds the infimum.
 *     ACCT_TUNING_AUX_GRID restricts the auxiliary orders to the caller's orders, which is what
 *     dp_accounting and the PS22 research code do (used for golden tests).
 *   - Pure epsilon: a run that is eps-DP gives a search that is
 *       fixed k: k eps;
 *       TNB: (2 + eta) eps (PS22 Thm. 2 as lambda, lh -> inf; eta = 1 is Liu & Talwar 2019's
 *           random-stopping bound, 3 eps);
 *       Poisson: eps + mu * tanh(eps/2) (PS22 Thm. 6 as lambda -> inf, with
 *           dhat(0) = (e^eps - 1)/(e^eps + 1), the total-variation bound of eps-DP).
 *   - E[K], P(K = 0), gamma from (eta, mean), and a sampler for K driven by a caller-supplied
 *     source of uniform 64-bit words (the service passes getrandom(2); tests pass a fixed stream).
 *
 * Distributions (acct_tuning_dist in accounting/event.h):
 *   - fixed k >= 1;
 *   - Poisson mean mu in [1, ACCT_TUNING_MAX_MEAN] (PS22 Thm. 6 is only used for mu >= 1, as
 *     dp_accounting does: for mu < 1 its log(mu) term is negative and the bound would claim less
 *     than zero loss for a run that leaks nothing);
 *   - truncated negative binomial with eta > -1 and either gamma in (0, 1] or mean in
 *     [1, ACCT_TUNING_MAX_MEAN] (gamma = 1 is the point mass K = 1). Its pmf (PS22 Def. 1):
 *       P[K=k] = (1-g)^k / (g^-eta - 1) * prod_{l<k} (l+eta)/(l+1) for eta != 0,
 *       P[K=k] = (1-g)^k / (k log(1/g)) for eta = 0;
 *     E[K] = eta (1-g) / (g (1 - g^eta)), and (1/g - 1)/log(1/g) at eta = 0.
 *
 * Errors: DP_EINVAL with err->field naming the JSON field ("distribution.poisson.mean", ...);
 * DP_ENUMERIC when the base callback returns NaN or a solver fails to converge.
 *
 * Thread-safety: all functions are reentrant; no global state. The callbacks are called from the
 * calling thread only.
 */
#ifndef DP_ACCOUNTING_TUNING_H
#define DP_ACCOUNTING_TUNING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accounting/event.h"
#include "common/dp_err.h"

#define ACCT_TUNING_MAX_MEAN 1e6     /* E[K] cap: no search runs a million trainings */
#define ACCT_TUNING_MAX_K    1000000 /* fixed k cap, same reason */
#define ACCT_TUNING_MAX_ETA  1e6     /* eta cap: beyond it TNB is a Poisson for all purposes */
/* A draw above 1e8 runs is refused (see acct_tuning_draw). */
#define ACCT_TUNING_MAX_DRAW 100000000ULL

/* RDP of one run at `order` (> 1, or exactly 1 for KL). Returns eps >= 0, +INFINITY when unbounded,
 * NAN on failure (reported as DP_ENUMERIC). ctx is borrowed. */
typedef double (*acct_tuning_rdp_fn)(double order, void *ctx);

/* Source of uniformly random 64-bit words; returns 0 on success, nonzero on failure. */
typedef int (*acct_tuning_rand64_fn)(void *ctx, uint64_t *out);

typedef enum acct_tuning_aux_mode {
    ACCT_TUNING_AUX_CONTINUOUS = 0, /* default: auxiliary orders minimised over [1, 9e4] */
    ACCT_TUNING_AUX_GRID            /* auxiliary orders restricted to the caller's orders */
} acct_tuning_aux_mode;

/* What the evaluation chose; reported next to every figure. */
typedef struct acct_tuning_info {
    double aux_order;  /* TNB: the lambda-hat of PS22 Thm. 2 (1 = the KL limit); else NAN */
    double aux_value;  /* TNB: (1+eta) * [(1-1/lh) eps(lh) + log(1/g)/lh] at aux_order; else NAN */
    double gamma;      /* TNB: the gamma used (solved from the mean when the mean was given) */
    double mean;       /* E[K] used in the log E[K] term */
    size_t base_evals; /* number of base-RDP callback calls */
} acct_tuning_info;

/* Validates d: field names relative to the event ("distribution.truncated_negative_binomial.eta").
 * Returns DP_OK or DP_EINVAL. */
int acct_tuning_dist_check(const acct_tuning_dist *d, dp_err *err);

/* Validates `in` and writes a copy with both gamma and mean filled in (TNB: gamma solved from the
 * mean, rounded down so that the mean it implies is >= the one asked, which only raises the bound;
 * or the mean computed from gamma; Poisson/fixed: mean = mu or k). in and out may alias. */
int acct_tuning_dist_resolve(const acct_tuning_dist *in, acct_tuning_dist *out, dp_err *err);

/* E[K] of a TNB(eta, gamma); gamma in (0, 1], eta > -1. Returns +INFINITY on overflow. */
double acct_tuning_tnb_mean(double eta, double gamma);

/* Smallest-error gamma in (0, 1] with E[K] >= mean (bisection in log gamma, to a few ulps).
 * mean in [1, ACCT_TUNING_MAX_MEAN]. */
int acct_tuning_tnb_gamma(double eta, double mean, double *gamma, dp_err *err);

/* E[K] and P(K = 0) of a resolved distribution. */
double acct_tuning_expected_runs(const acct_tuning_dist *d);
double acct_tuning_prob_zero(const acct_tuning_dist *d);

/* RDP of the search at each of orders[0..n-1] (any order; orders <= 1 give +INFINITY), given the
 * run's RDP curve `base`. base_at_orders: optional (may be NULL) precomputed base(orders[i]),
 * saving calls. rdp_out: n values, owned by caller. info may be NULL. The values are the per-order
 * bounds (no monotone envelope; see acct_tuning_monotone_envelope). d must be valid (resolved or
 * not). */
int acct_tuning_rdp(const acct_tuning_dist *d, acct_tuning_rdp_fn base, void *ctx,
                    const double *orders, const double *base_at_orders, size_t n,
                    acct_tuning_aux_mode mode, double *rdp_out, acct_tuning_info *info,
                    dp_err *err);

/* Replaces rdp[i] by min over j with orders[j] >= orders[i] of rdp[j]: RDP is non-decreasing in the
 * order (van Erven & Harremoes 2014, Thm. 3), so this stays a valid bound (dp_accounting does it
 * for repeat-and-select). Orders need not be sorted. O(n^2), n is small. */
void acct_tuning_monotone_envelope(const double *orders, double *rdp, size_t n);

/* ---- per-node evaluation inside an event tree (accounting/rdp.c) ---- */

/* Per-evaluation cache of prepared repeat_and_select nodes (opaque). NULL is an empty cache. */
typedef struct acct_tuning_cache acct_tuning_cache;

/* RDP at one order of the repeat_and_select node ev (type ACCT_EV_REPEAT_SELECT; distribution
 * validated), whose child's RDP is child(order, ctx). The first call for a node prepares it:
 * resolves the distribution, evaluates the child on a half-decade scan (lh - 1 = 10^(k/2), 1e-2
 * .. 3.2e4), minimises the TNB auxiliary order (Brent's method inside the scan bracket), builds
 * Poisson's twelfth-decade list of conversion orders, and finds the minimiser of the search's own
 * bound (for the monotone envelope). Later calls reuse that: a curve over n orders costs about n +
 * 40 child evaluations for TNB and 2n + 100 for Poisson (one parabolic step of the conversion order
 * per output order). The value is the bound at the output order, lowered by the monotone envelope
 * (scan orders
 * >= order, and the bound's minimiser when it lies above the order).
 * *cache is created on first use (owned by caller: acct_tuning_cache_free). ev is borrowed and must
 * outlive the cache. Errors: as acct_tuning_rdp; DP_ENOMEM. */
int acct_tuning_cache_rdp(acct_tuning_cache **cache, const acct_event *ev, acct_tuning_rdp_fn child,
                          void *ctx, double order, double *out, dp_err *err);

/* A lower bound on what acct_tuning_cache_rdp returns for ev at order, given r_low <= the child's
 * RDP at that order, without evaluating the child (for the pruned order scan in accounting/rdp.c).
 * Sound because every term PS22 adds to the child's RDP is >= 0 (TNB: (1+eta) times an infimum of
 * non-negative terms, eta > -1; Poisson: mu * dhat >= 0; both: log E[K] / (order - 1) >= 0 as E[K]
 * >= 1; fixed: k r), and the envelope terms are constants of the prepared node. Returns false (and
 * leaves *out alone) when ev has not been evaluated yet in this cache. */
bool acct_tuning_cache_lower(const acct_tuning_cache *cache, const acct_event *ev, double order,
                             double r_low, double *out);

/* The child's RDP at the last order acct_tuning_cache_rdp was asked for ev (false if none). */
bool acct_tuning_cache_last_child(const acct_tuning_cache *cache, const acct_event *ev,
                                  double *order, double *r);

/* True when evaluations of ev depend on the orders asked before (Poisson: every asked order joins
 * the list of conversion orders), so skipping or reordering orders may change later values. */
bool acct_tuning_cache_stateful(const acct_event *ev);

/* acct_tuning_cache_rdp for a child whose curve is an exact Renyi divergence (child_convex: (a-1)
 * r(a) convex and r non-decreasing, van Erven & Harremoes 2014): the node then evaluates its scan
 * and Poisson list orders above ~1100 only when a convexity lower bound cannot settle whether they
 * matter. Same values as acct_tuning_cache_rdp. child_convex is read when the node is prepared. */
int acct_tuning_cache_rdp2(acct_tuning_cache **cache, const acct_event *ev,
                           acct_tuning_rdp_fn child, void *ctx, bool child_convex, double order,
                           double *out, dp_err *err);

/* Frees the cache; NULL is a no-op. */
void acct_tuning_cache_free(acct_tuning_cache *cache);

/* Pure epsilon of the search when one run is base_eps-DP (see file comment). */
int acct_tuning_pure_epsilon(const acct_tuning_dist *d, double base_eps, double *eps_out,
                             dp_err *err);

/* Pure epsilon of an event tree when every leaf is pure (pure, laplace) and the tree uses only
 * composition, self-composition, Poisson subsampling (add/remove: log(1 + q(e^eps - 1)), Balle,
 * Barthe & Gaboardi 2018, Poisson subsampling; under replace_one no amplification is claimed) and
 * repeat_and_select. Sets *is_pure false (and *eps_out NAN) for any other tree. Laplace eps =
 * 1/noise_multiplier (Dwork et al. 2006). */
int acct_tuning_event_pure_epsilon(const acct_event *ev, acct_neighboring nb, bool *is_pure,
                                   double *eps_out, dp_err *err);

/* Draws K from d (resolved or not) by inversion of its CDF with a 53-bit uniform from rnd. Refuses
 * (DP_ENUMERIC, no K) when K would exceed ACCT_TUNING_MAX_DRAW, which only happens for heavy-tailed
 * TNB with eta < 0 and a huge mean. */
int acct_tuning_draw(const acct_tuning_dist *d, acct_tuning_rand64_fn rnd, void *ctx,
                     uint64_t *k_out, dp_err *err);

/* Uniform integer in [0, n), n >= 1, by rejection sampling on 64-bit words (no modulo bias). */
int acct_tuning_uniform_index(uint64_t n, acct_tuning_rand64_fn rnd, void *ctx, uint64_t *out,
                              dp_err *err);

#endif
