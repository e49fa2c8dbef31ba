/*
 * tuning.c: privacy cost of repeat-and-select hyperparameter searches. Contract and references in
 * tuning.h (PS22 = Papernot & Steinke, ICLR 2022).
 *
 * Numerics. A truncated negative binomial TNB(eta, gamma) is handled through t = log(1/gamma) >= 0,
 * which stays exact when gamma is tiny. Its mean is written
 *     E[K] = (expm1(t) / t) * phi(eta t),   phi(x) = x / (1 - e^{-x})  (phi(0) = 1),
 * which is PS22 Def. 1's eta (1-g) / (g (1 - g^eta)) rearranged (multiply and divide by t), and
 * covers eta = 0 (logarithmic, (1/g - 1)/log(1/g)) without a special case. log E[K] is computed in
 * log space. E[K] increases with t for every eta > -1 (from 1 at t = 0 to infinity), so gamma is
 * found by bisection on t.
 *
 * Auxiliary orders: see tuning.h. The scan is lh - 1 = 10^(k/2), k = -4..9 (1e-2 .. 3.2e4); Brent's
 * method works in x = log(lh - 1) inside the two scan/grid neighbours of the best point, clamped to
 * [1 + 1e-3, 9e4] (inside the accountant's order range).
 */
#include "accounting/tuning.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"

/* Scan of the auxiliary order: lh - 1 = 10^(k/AUX_PER_DECADE) for k in [AUX_K_MIN, AUX_K_MAX], i.e.
 * 1e-2 .. 3.2e4 (inside the accountant's order range [1.0001, 1e5]). Half decades: the scan only
 * has to bracket the minimum of a quasi-convex objective; Brent's method then finds it in ~10
 * evaluations. Every base evaluation inside an event tree may be a quadrature, so fewer is faster.
 * Poisson, whose conversion order depends on the output order, keeps a denser list
 * (POISSON_PER_DECADE) and one parabolic step per output order instead. */
#define AUX_PER_DECADE     2
#define AUX_K_MIN          (-2 * AUX_PER_DECADE)
#define AUX_K_MAX          (9 * AUX_PER_DECADE / 2)
#define AUX_N              (AUX_K_MAX - AUX_K_MIN + 1)
#define POISSON_PER_DECADE 12
/* Refinement never leaves [1 + 1e-3, 9e4]: inside the accountant's order range. */
#define AUX_X_MIN -6.907755278982137 /* log(1e-3) */
#define AUX_X_MAX 11.407564949312402 /* log(9e4 - 1) */
/* Golden-section stopping width in x = log(lh - 1): 1e-6 relative in the order. The objective is
 * smooth at its minimum, so the value is then within ~1e-12 relative of the infimum. */
#define AUX_XTOL 1e-6
/* Poisson refines one conversion order per output order, so it stops earlier: 1e-4 relative in the
 * order, ~1e-8 relative in log(delta) (array API). Inside event trees (acct_tuning_cache_rdp),
 * where every base evaluation may be a quadrature, Poisson does not refine per output order; it
 * minimises over a list of twelfth-decade scan points plus every order the tree has been evaluated
 * at, which costs the final epsilon < 1e-4 relative (bench/tuning) and stays a valid bound. */
#define AUX_XTOL_POISSON 1e-4
/* Poisson per-node candidate list cap (scan + every order asked): bounded memory. */
#define PTS_MAX      8192
#define AUX_MAX_ITER 80
/* The envelope's minimiser only has to be good, not exact: 1e-3 in log(order - 1). */
#define AUX_XTOL_ENV 1e-3
/* dp_accounting (compute_delta) only uses the CKS conversion for orders above 1.01 because of
 * cancellation as the order tends to 1; grid mode mirrors that so that golden values match. */
#define CKS_MIN_ORDER_GRID 1.01
/* Bisection for gamma: iterations cap (t doubles at most ~60 times, then ~60 halvings reach 1 ulp).
 */
#define GAMMA_MAX_ITER 400
/* A resolved TNB carries gamma and the mean it implies; they are recomputed identically, so any
 * disagreement beyond rounding means a caller mixed two distributions. */
#define GAMMA_MEAN_RTOL 1e-12
/* Poisson draws are split into pieces with mean at most this, so that e^{-mean} never underflows.
 */
#define POISSON_DRAW_PIECE 500.0

static const char *const F_DIST = "distribution";
static const char *const F_FIXED = "distribution.fixed";
static const char *const F_POIS_MEAN = "distribution.poisson.mean";
static const char *const F_TNB_ETA = "distribution.truncated_negative_binomial.eta";
static const char *const F_TNB_GAMMA = "distribution.truncated_negative_binomial.gamma";
static const char *const F_TNB_MEAN = "distribution.truncated_negative_binomial.mean";

/* ---- TNB mean ---- */

/* log(expm1(t)/t) for t >= 0. */
static double log_expm1_over_x(double t)
{
    if (t == 0.0)
        return 0.0;
    if (t < 700.0)
        return log(expm1(t) / t);
    return t + log1p(-exp(-t)) - log(t);
}

/* log(phi(x)), phi(x) = x / (1 - e^{-x}), any real x. */
static double log_phi(double x)
{
    if (x == 0.0)
        return 0.0;
    if (x > 0.0) {
        if (x < 700.0)
            return log(x / -expm1(-x));
        return log(x) - log1p(-exp(-x));
    }
    double y = -x; /* phi(x) = y / (e^y - 1) */
    if (y < 700.0)
        return log(y / expm1(y));
    return log(y) - y - log1p(-exp(-y));
}

/* log E[K] of TNB(eta, e^{-t}). */
static double tnb_log_mean_t(double eta, double t)
{
    if (t == 0.0)
        return 0.0;
    return log_expm1_over_x(t) + log_phi(eta * t);
}

double acct_tuning_tnb_mean(double eta, double gamma)
{
    return exp(tnb_log_mean_t(eta, -log(gamma)));
}

int acct_tuning_tnb_gamma(double eta, double mean, double *gamma, dp_err *err)
{
    if (!(isfinite(eta) && eta > -1.0 && eta <= ACCT_TUNING_MAX_ETA))
        return dp_err_set(err, DP_EINVAL, F_TNB_ETA, "eta must be finite, > -1 and <= %g (got %g)",
                          ACCT_TUNING_MAX_ETA, eta);
    if (!(isfinite(mean) && mean >= 1.0 && mean <= ACCT_TUNING_MAX_MEAN))
        return dp_err_set(err, DP_EINVAL, F_TNB_MEAN,
                          "mean must be finite, >= 1 (the distribution has no mass at 0) and <= %g "
                          "(got %g)",
                          ACCT_TUNING_MAX_MEAN, mean);
    if (mean == 1.0) { /* only the point mass K = 1 has mean 1 */
        *gamma = 1.0;
        return DP_OK;
    }
    const double target = log(mean);
    double lo = 0.0, hi = 1.0;
    int it = 0;
    while (tnb_log_mean_t(eta, hi) < target) {
        lo = hi;
        hi *= 2.0;
        if (++it > GAMMA_MAX_ITER || !isfinite(hi))
            return dp_err_set(err, DP_ENUMERIC, F_TNB_MEAN, "could not solve gamma for mean %g",
                              mean);
    }
    /* Invariant: logE(lo) < target <= logE(hi). Halve until lo and hi are adjacent doubles. */
    while (nextafter(lo, DP_INF) < hi) {
        double mid = lo + 0.5 * (hi - lo);
        if (mid <= lo || mid >= hi)
            break;
        if (tnb_log_mean_t(eta, mid) < target)
            lo = mid;
        else
            hi = mid;
        if (++it > GAMMA_MAX_ITER)
            return dp_err_set(err, DP_ENUMERIC, F_TNB_MEAN, "gamma bisection did not converge");
    }
    /* gamma = e^{-hi}, rounded down until the mean it implies (through -log(gamma), which is how
     * every later computation reads it) is at least the mean asked: rounding only ever raises the
     * bound. */
    double g = exp(-hi);
    for (int k = 0; k < 8 && g > 0.0 && tnb_log_mean_t(eta, -log(g)) < target; k++)
        g = nextafter(g, 0.0);
    if (!(g > 1e-300))
        return dp_err_set(
            err, DP_EINVAL, F_TNB_MEAN,
            "mean %g with eta %g needs gamma below 1e-300; use a larger eta or a smaller "
            "mean",
            mean, eta);
    if (tnb_log_mean_t(eta, -log(g)) < target)
        return dp_err_set(err, DP_ENUMERIC, F_TNB_MEAN, "could not round gamma conservatively");
    *gamma = g;
    return DP_OK;
}

/* ---- validation ---- */

int acct_tuning_dist_check(const acct_tuning_dist *d, dp_err *err)
{
    if (d == NULL)
        return dp_err_set(err, DP_EINVAL, F_DIST, "distribution is required");
    switch (d->kind) {
        case ACCT_TUNE_FIXED:
            if (d->k < 1 || d->k > ACCT_TUNING_MAX_K)
                return dp_err_set(err, DP_EINVAL, F_FIXED,
                                  "fixed must be an integer k with 1 <= k <= %d (got %llu)",
                                  ACCT_TUNING_MAX_K, (unsigned long long)d->k);
            return DP_OK;
        case ACCT_TUNE_POISSON:
            if (!(isfinite(d->mean) && d->mean >= 1.0 && d->mean <= ACCT_TUNING_MAX_MEAN))
                return dp_err_set(
                    err, DP_EINVAL, F_POIS_MEAN,
                    "poisson mean must be finite, >= 1 (Papernot & Steinke 2022 Thm. 6 is "
                    "used only for mean >= 1) and <= %g (got %g)",
                    ACCT_TUNING_MAX_MEAN, d->mean);
            return DP_OK;
        case ACCT_TUNE_TRUNC_NEGBIN: {
            if (!(isfinite(d->eta) && d->eta > -1.0 && d->eta <= ACCT_TUNING_MAX_ETA))
                return dp_err_set(err, DP_EINVAL, F_TNB_ETA,
                                  "eta must be finite, > -1 and <= %g (got %g)",
                                  ACCT_TUNING_MAX_ETA, d->eta);
            bool has_gamma = !isnan(d->gamma), has_mean = !isnan(d->mean);
            if (has_gamma && has_mean) {
                /* A resolved distribution carries both; they must then agree (the mean is the one
                 * gamma implies). Clients give one or the other (service/codec/tuning_json.c). */
                double implied = (isfinite(d->gamma) && d->gamma > 0.0 && d->gamma <= 1.0)
                                     ? acct_tuning_tnb_mean(d->eta, d->gamma)
                                     : DP_NAN;
                if (!(fabs(implied - d->mean) <= GAMMA_MEAN_RTOL * fabs(d->mean)))
                    return dp_err_set(err, DP_EINVAL, F_TNB_MEAN,
                                      "give either gamma or mean for truncated_negative_binomial, "
                                      "not both");
                has_mean = false;
            }
            if (!has_gamma && !has_mean)
                return dp_err_set(err, DP_EINVAL, F_TNB_GAMMA,
                                  "truncated_negative_binomial needs gamma or mean");
            if (has_gamma) {
                if (!(isfinite(d->gamma) && d->gamma > 0.0 && d->gamma <= 1.0))
                    return dp_err_set(err, DP_EINVAL, F_TNB_GAMMA,
                                      "gamma must be in (0, 1] (got %g)", d->gamma);
                double lm = tnb_log_mean_t(d->eta, -log(d->gamma));
                if (!(lm <= log(ACCT_TUNING_MAX_MEAN)))
                    return dp_err_set(err, DP_EINVAL, F_TNB_GAMMA,
                                      "gamma %g with eta %g means more than %g expected runs",
                                      d->gamma, d->eta, ACCT_TUNING_MAX_MEAN);
                return DP_OK;
            }
            if (!(isfinite(d->mean) && d->mean >= 1.0 && d->mean <= ACCT_TUNING_MAX_MEAN))
                return dp_err_set(
                    err, DP_EINVAL, F_TNB_MEAN,
                    "mean must be finite, >= 1 (the distribution has no mass at 0) and "
                    "<= %g (got %g)",
                    ACCT_TUNING_MAX_MEAN, d->mean);
            return DP_OK;
        }
    }
    return dp_err_set(err, DP_EINVAL, F_DIST, "unknown distribution kind %d", (int)d->kind);
}

int acct_tuning_dist_resolve(const acct_tuning_dist *in, acct_tuning_dist *out, dp_err *err)
{
    int rc = acct_tuning_dist_check(in, err);
    if (rc != DP_OK)
        return rc;
    acct_tuning_dist r = *in;
    switch (r.kind) {
        case ACCT_TUNE_FIXED:
            r.mean = (double)r.k;
            break;
        case ACCT_TUNE_POISSON:
            break;
        case ACCT_TUNE_TRUNC_NEGBIN:
            if (isnan(r.gamma)) {
                rc = acct_tuning_tnb_gamma(r.eta, r.mean, &r.gamma, err);
                if (rc != DP_OK)
                    return rc;
            }
            /* The mean actually implied by gamma (>= the one asked when it was solved). */
            r.mean = acct_tuning_tnb_mean(r.eta, r.gamma);
            break;
    }
    *out = r;
    return DP_OK;
}

double acct_tuning_expected_runs(const acct_tuning_dist *d)
{
    switch (d->kind) {
        case ACCT_TUNE_FIXED:
            return (double)d->k;
        case ACCT_TUNE_POISSON:
            return d->mean;
        case ACCT_TUNE_TRUNC_NEGBIN:
            if (!isnan(d->gamma))
                return acct_tuning_tnb_mean(d->eta, d->gamma);
            return d->mean;
    }
    return DP_NAN;
}

double acct_tuning_prob_zero(const acct_tuning_dist *d)
{
    return d->kind == ACCT_TUNE_POISSON ? exp(-d->mean) : 0.0;
}

/* ---- auxiliary-order minimisation ---- */

typedef struct aux_ctx {
    acct_tuning_rdp_fn base;
    void *ctx;
    size_t evals;
    int failed; /* base returned NaN */
} aux_ctx;

static double base_eval(aux_ctx *a, double order)
{
    a->evals++;
    double r = a->base(order, a->ctx);
    if (isnan(r)) {
        a->failed = 1;
        return DP_INF;
    }
    /* A negative RDP is a numerical artefact (true RDP is >= 0): clamp up, never down. */
    return r < 0.0 ? 0.0 : r;
}

/* Objective in x = log(order - 1). kind 0: TNB, (1 - 1/lh) r(lh) + t / lh. kind 1: Poisson,
 * CKS log-delta (a-1)(r(a) - ehat + log1p(-1/a)) - log(a). kind 2: the search's own RDP bound at
 * the order (a prepared tree node), for the monotone envelope. */
struct tnode;
typedef struct aux_obj {
    int kind;
    double t;           /* TNB: log(1/gamma) */
    double ehat;        /* Poisson: the epsilon at which delta is wanted */
    struct tnode *node; /* kind 2 */
} aux_obj;

static double node_bound(aux_ctx *ac, struct tnode *n, double order, double r, bool refine);

static double obj_from_r(const aux_obj *o, double order, double r)
{
    if (isinf(r))
        return DP_INF;
    if (o->kind == 0)
        return (1.0 - 1.0 / order) * r + o->t / order;
    if (o->kind == 2)
        return node_bound(NULL, o->node, order, r, false); /* node_bound uses the node's ac */
    return (order - 1.0) * (r - o->ehat + log1p(-1.0 / order)) - log(order);
}

typedef struct cand {
    double x;     /* log(order - 1) */
    double order; /* order > 1 */
    double r;     /* base RDP at order; NAN: not evaluated yet (a lazy node candidate) */
    double rlb;   /* lazy candidates: a lower bound on the base RDP at order */
} cand;

/* The base RDP of a candidate, evaluating a lazy one on demand (tree nodes only, see tnode). */
static double cand_r(struct tnode *n, cand *c);

/* Brent's method (parabolic interpolation with golden-section fallback; Brent 1973, ch. 5) for obj
 * over x in [a, b], started from the interior point x0 whose value f0 is known (the best candidate,
 * so f0 <= obj at a and b). Fresh base evaluations; *best_val / *best_order are only ever improved,
 * so whatever the iteration does the result is obj at a real order. */
static void brent_refine(aux_ctx *ac, const aux_obj *o, double a, double b, double x0, double f0,
                         double xtol, int max_iter, double *best_val, double *best_order)
{
    const double cgold = 0.3819660112501051; /* (3 - sqrt(5)) / 2 */
    a = fmax(a, AUX_X_MIN);
    b = fmin(b, AUX_X_MAX);
    if (!(a < x0 && x0 < b) || !isfinite(f0))
        return;
    double x = x0, w = x0, v = x0, fx = f0, fw = f0, fv = f0, d = 0.0, e = 0.0;
    for (int it = 0; it < max_iter && !ac->failed; it++) {
        double m = 0.5 * (a + b), tol1 = xtol, tol2 = 2.0 * tol1;
        if (fabs(x - m) <= tol2 - 0.5 * (b - a))
            break;
        bool golden = true;
        if (fabs(e) > tol1) { /* try the parabola through x, w, v */
            double r = (x - w) * (fx - fv), q = (x - v) * (fx - fw), p = (x - v) * q - (x - w) * r;
            q = 2.0 * (q - r);
            if (q > 0.0)
                p = -p;
            else
                q = -q;
            double etemp = e;
            e = d;
            if (fabs(p) < fabs(0.5 * q * etemp) && p > q * (a - x) && p < q * (b - x)) {
                d = p / q;
                double u = x + d;
                if (u - a < tol2 || b - u < tol2)
                    d = (m > x) ? tol1 : -tol1;
                golden = false;
            }
        }
        if (golden) {
            e = (x >= m) ? a - x : b - x;
            d = cgold * e;
        }
        double u = x + (fabs(d) >= tol1 ? d : (d > 0.0 ? tol1 : -tol1));
        double ou = 1.0 + exp(u);
        double fu = obj_from_r(o, ou, base_eval(ac, ou));
        if (fu < *best_val) {
            *best_val = fu;
            *best_order = ou;
        }
        if (fu <= fx) {
            if (u >= x)
                a = x;
            else
                b = x;
            v = w;
            fv = fw;
            w = x;
            fw = fx;
            x = u;
            fx = fu;
        } else {
            if (u < x)
                a = u;
            else
                b = u;
            if (fu <= fw || w == x) {
                v = w;
                fv = fw;
                w = u;
                fw = fu;
            } else if (fu <= fv || v == x || v == w) {
                v = u;
                fv = fu;
            }
        }
    }
}

static int cand_cmp(const void *pa, const void *pb)
{
    const cand *a = pa, *b = pb;
    return (a->x > b->x) - (a->x < b->x);
}

/* Minimises obj over the candidates (sorted by x), then (continuous mode) refines around the best.
 * min_order: candidates below it are ignored (grid-mode CKS threshold). Returns the minimum and its
 * order; INFINITY when no candidate is finite. */
static void aux_minimise(aux_ctx *ac, const aux_obj *o, cand *cs, size_t nc, double min_order,
                         bool refine, double xtol, int max_iter, struct tnode *lazy_node,
                         double *val_out, double *order_out)
{
    double best = DP_INF, best_order = DP_NAN;
    size_t ib = (size_t)-1;
    for (size_t i = 0; i < nc; i++) {
        if (cs[i].order < min_order)
            continue;
        /* A lazy candidate (base RDP not evaluated) whose objective at the lower bound rlb is not
         * below the best value cannot become the minimum (every objective is non-decreasing in
         * r): skipped, exactly as an evaluated candidate that loses the strict comparison. */
        if (isnan(cs[i].r) && !(obj_from_r(o, cs[i].order, cs[i].rlb) < best))
            continue;
        double v = obj_from_r(o, cs[i].order, isnan(cs[i].r) ? cand_r(lazy_node, &cs[i]) : cs[i].r);
        if (v < best) {
            best = v;
            best_order = cs[i].order;
            ib = i;
        }
    }
    if (refine && ib != (size_t)-1) {
        double a = ib > 0 ? cs[ib - 1].x : cs[ib].x - 3.0;
        double b = ib + 1 < nc ? cs[ib + 1].x : cs[ib].x + 3.0;
        brent_refine(ac, o, a, b, cs[ib].x, best, xtol, max_iter, &best, &best_order);
    }
    *val_out = best;
    *order_out = best_order;
}

/* Candidate list: caller's orders (> 1) and, in continuous mode, the scan. Owned by caller. */
static cand *build_cands(aux_ctx *ac, const double *orders, const double *base_at, size_t n,
                         bool scan, size_t *nc_out, dp_err *err)
{
    size_t cap = n + (scan ? AUX_N : 0);
    cand *cs = dp_calloc(cap ? cap : 1, sizeof *cs);
    if (cs == NULL) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    size_t nc = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(orders[i] > 1.0) || isinf(orders[i]))
            continue;
        /* base_at, when given, is already sanitised (NaN flagged and made +inf, negatives raised).
         */
        double r = base_at ? base_at[i] : base_eval(ac, orders[i]);
        cs[nc++] = (cand){log(orders[i] - 1.0), orders[i], r, r};
    }
    if (scan) {
        for (int k = AUX_K_MIN; k <= AUX_K_MAX; k++) {
            double om1 = pow(10.0, (double)k / AUX_PER_DECADE);
            double r = base_eval(ac, 1.0 + om1);
            cs[nc++] = (cand){log(om1), 1.0 + om1, r, r};
        }
    }
    qsort(cs, nc, sizeof *cs, cand_cmp);
    *nc_out = nc;
    return cs;
}

/* ---- the bound ---- */

int acct_tuning_rdp(const acct_tuning_dist *d, acct_tuning_rdp_fn base, void *ctx,
                    const double *orders, const double *base_at_orders, size_t n,
                    acct_tuning_aux_mode mode, double *rdp_out, acct_tuning_info *info, dp_err *err)
{
    acct_tuning_dist r;
    int rc = acct_tuning_dist_resolve(d, &r, err);
    if (rc != DP_OK)
        return rc;
    if (base == NULL || (n > 0 && (orders == NULL || rdp_out == NULL)))
        return dp_err_set(err, DP_EINVAL, NULL, "tuning: missing base mechanism or orders");

    aux_ctx ac = {base, ctx, 0, 0};
    acct_tuning_info inf = {DP_NAN, DP_NAN, DP_NAN, acct_tuning_expected_runs(&r), 0};
    const bool continuous = (mode == ACCT_TUNING_AUX_CONTINUOUS);
    cand *cs = NULL;
    size_t nc = 0;

    /* Base RDP at the output orders (kept for the per-order term). */
    double *rb = dp_calloc(n ? n : 1, sizeof *rb);
    if (rb == NULL) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (!(orders[i] > 1.0)) {
            rb[i] = DP_INF;
            continue;
        }
        double v = base_at_orders ? base_at_orders[i] : base_eval(&ac, orders[i]);
        if (isnan(v))
            ac.failed = 1;
        rb[i] = isnan(v) ? HUGE_VAL : (v < 0.0 ? 0.0 : v);
    }

    switch (r.kind) {
        case ACCT_TUNE_FIXED:
            /* k-fold composition (Mironov 2017, Prop. 1); releasing only the best is
             * post-processing. */
            for (size_t i = 0; i < n; i++)
                rdp_out[i] = (double)r.k * rb[i];
            break;

        case ACCT_TUNE_TRUNC_NEGBIN: {
            const double t = -log(r.gamma);
            const double log_mean = tnb_log_mean_t(r.eta, t);
            inf.gamma = r.gamma;
            double c_val, c_order;
            if (t == 0.0) {
                /* gamma = 1: K = 1 surely; the infimum over lh is 0, reached at lh = 1. */
                c_val = 0.0;
                c_order = 1.0;
            } else {
                cs = build_cands(&ac, orders, rb, n, continuous, &nc, err);
                if (cs == NULL) {
                    rc = DP_ENOMEM;
                    goto out;
                }
                aux_obj o = {0, t, 0.0, NULL};
                aux_minimise(&ac, &o, cs, nc, 1.0, continuous, AUX_XTOL, AUX_MAX_ITER, NULL, &c_val,
                             &c_order);
                /* lh = 1 (PS22 Thm. 2 allows lh >= 1): (1 - 1/1) eps(1) = 0 because the KL
                 * divergence is finite whenever any RDP order is (monotonicity), leaving
                 * log(1/gamma). The research code excludes lh = 1 and dp_accounting's grid never
                 * contains it, so grid mode leaves it out too. */
                if (continuous && t < c_val) {
                    bool any_finite = false;
                    for (size_t i = 0; i < nc; i++)
                        any_finite = any_finite || isfinite(cs[i].r);
                    if (any_finite) {
                        c_val = t;
                        c_order = 1.0;
                    }
                }
            }
            const double C = (1.0 + r.eta) * c_val; /* PS22 Thm. 2, the lh terms */
            inf.aux_order = c_order;
            inf.aux_value = C;
            for (size_t i = 0; i < n; i++) {
                if (!(orders[i] > 1.0) || isinf(rb[i]) || isinf(C)) {
                    rdp_out[i] = DP_INF;
                    continue;
                }
                /* PS22 Thm. 2: eps + (1+eta)(1-1/lh) eps(lh) + (1+eta) log(1/g)/lh + log E[K]/(l-1)
                 */
                rdp_out[i] = rb[i] + C + log_mean / (orders[i] - 1.0);
            }
            break;
        }

        case ACCT_TUNE_POISSON: {
            const double mu = r.mean;
            cs = build_cands(&ac, orders, rb, n, continuous, &nc, err);
            if (cs == NULL) {
                rc = DP_ENOMEM;
                goto out;
            }
            /* KL bound: delta <= sqrt(1 - e^{-KL}) and KL <= r(a) for every a (monotonicity); use
             * the smallest candidate r. (Bretagnolle-Huber; as in dp_accounting's compute_delta.)
             */
            double r_min = DP_INF;
            for (size_t i = 0; i < nc; i++)
                r_min = fmin(r_min, cs[i].r);
            const double log_delta_kl =
                r_min == 0.0 ? -HUGE_VAL : (isinf(r_min) ? 0.0 : 0.5 * log1p(-exp(-r_min)));
            for (size_t i = 0; i < n; i++) {
                if (!(orders[i] > 1.0) || isinf(rb[i])) {
                    rdp_out[i] = DP_INF;
                    continue;
                }
                /* PS22 Thm. 6 needs e^ehat <= 1 + 1/(l-1); the largest such ehat gives the smallest
                 * dhat. */
                aux_obj o = {1, 0.0, log1p(1.0 / (orders[i] - 1.0)), NULL};
                double ld, ord;
                aux_minimise(&ac, &o, cs, nc, continuous ? 1.0 : CKS_MIN_ORDER_GRID + DBL_EPSILON,
                             continuous, AUX_XTOL_POISSON, AUX_MAX_ITER, NULL, &ld, &ord);
                ld = fmin(ld, log_delta_kl);
                double dhat = ld >= 0.0 ? 1.0 : exp(ld);
                rdp_out[i] = rb[i] + mu * dhat + log(mu) / (orders[i] - 1.0);
            }
            break;
        }
    }
    if (ac.failed) {
        rc = dp_err_set(err, DP_ENUMERIC, NULL,
                        "the RDP of the repeated mechanism could not be evaluated at some order");
        goto out;
    }
    inf.base_evals = ac.evals;
    if (info)
        *info = inf;
out:
    dp_free(cs);
    dp_free(rb);
    return rc;
}

void acct_tuning_monotone_envelope(const double *orders, double *rdp, size_t n)
{
    /* In place: a value already replaced belongs to an order >= orders[j], whose envelope is a
     * minimum over a subset of the orders >= orders[i], so reading it is still sound. */
    for (size_t i = 0; i < n; i++) {
        double m = rdp[i];
        for (size_t j = 0; j < n; j++)
            if (orders[j] >= orders[i] && rdp[j] < m)
                m = rdp[j];
        rdp[i] = m;
    }
}

/* ---- per-node cache (event trees) ---- */

typedef struct tnode {
    const acct_event *ev; /* borrowed: the repeat_and_select node */
    acct_tuning_dist d;   /* resolved distribution */
    double t;             /* TNB: log(1/gamma) */
    double log_mean;      /* log E[K] */
    double C;             /* TNB: (1+eta) * inf over lh of the auxiliary term */
    double kl_log_delta;  /* Poisson: log of the KL bound on delta */
    size_t ns;            /* scan points (0 for fixed k) */
    cand scan[AUX_N];     /* child RDP on the scan, increasing order */
    double env[AUX_N];    /* env[i] = min over j >= i of the bound at scan[j] */
    double star_order;    /* order minimising the search's own bound (scan + Brent) */
    double star_val;      /* the bound there: every order <= star_order is at most this */
    cand *pts;            /* Poisson: every child evaluation so far (scan + asked orders), sorted */
    size_t np, cap;       /* used and allocated entries of pts */
    double last_order;    /* the last order asked (acct_tuning_cache_rdp), NAN if none */
    double last_r;        /* the child's RDP there */
    /* Lazy candidates (child_convex only): scan and list orders above LAZY_MIN_ORDER are not
     * evaluated at preparation (r = NAN, rlb a convexity lower bound), only on demand (cand_r)
     * where a lower bound does not settle a comparison; every value computed is the same as with
     * every candidate evaluated up front, since the child's RDP at an order does not depend on
     * when it is evaluated. */
    aux_ctx *ac;   /* the callback of the current call (for cand_r), NULL outside calls */
    bool convex;   /* the child's curve is an exact Renyi divergence (acct_tuning_cache_rdp2) */
    bool env_lazy; /* env[i] is NAN for the lazy scan orders (completed by env_complete) */
    double envlb[AUX_N]; /* lower bounds on env[i] where env[i] is NAN */
    cand *snap;          /* Poisson: the candidate list as prepared (env_complete uses it) */
    size_t nsnap;
    struct tnode *next;
} tnode;

/* Inserts (order, r) into the node's sorted evaluation list (Poisson candidates). Silently keeps
 * the list as it is when full or out of memory: fewer candidates only loosen the bound, never break
 * it. */
static void pts_insert(tnode *n, double order, double r, double rlb)
{
    if (n->np == n->cap) {
        if (n->cap >= PTS_MAX)
            return;
        size_t nc = n->cap ? 2 * n->cap : 2 * AUX_N;
        cand *p = dp_realloc(n->pts, nc * sizeof *p);
        if (p == NULL)
            return;
        n->pts = p;
        n->cap = nc;
    }
    double x = log(order - 1.0);
    size_t i = n->np;
    while (i > 0 && n->pts[i - 1].x > x)
        i--;
    if (i > 0 && n->pts[i - 1].order == order)
        return;
    memmove(n->pts + i + 1, n->pts + i, (n->np - i) * sizeof *n->pts);
    n->pts[i] = (cand){x, order, r, rlb};
    n->np++;
}

struct acct_tuning_cache {
    tnode *head;
};

/* Orders above this are lazy candidates (child_convex nodes): their child RDP costs ~0.03 to 1 ms
 * each for a sampled Gaussian (quadrature or long binomial sums) and almost never matters. */
#define LAZY_MIN_ORDER 1100.0

static double cand_r(struct tnode *n, cand *c)
{
    if (!isnan(c->r))
        return c->r;
    if (n == NULL || n->ac == NULL) /* cannot happen: lazy candidates exist only in tree nodes */
        return DP_INF;
    c->r = base_eval(n->ac, c->order);
    return c->r;
}

/* Lower bound on the child's RDP at order > a2 > a1 from the evaluated (a1, r1), (a2, r2): g(a) =
 * (a - 1) r(a) is convex with g(1) = 0 (van Erven & Harremoes 2014, Thm. 11), so g lies above its
 * chord through a1, a2 extended beyond a2; and r is non-decreasing (ibid., Thm. 3). Shrunk by
 * 1e-9 relative against the rounding of the evaluated values. NAN when not usable. */
static double chord_lower(double a1, double r1, double a2, double r2, double a)
{
    if (!(a1 > 1.0 && a2 > a1 && a > a2) || !isfinite(r1) || !isfinite(r2))
        return DP_NAN;
    double g1 = (a1 - 1.0) * r1, g2 = (a2 - 1.0) * r2;
    double g = g2 + (a - a2) * (g2 - g1) / (a2 - a1);
    double lb = fmax(r2, g / (a - 1.0));
    return lb > 0.0 ? lb * (1.0 - 1e-9) : 0.0;
}

/* One parabolic step: the vertex of the parabola through three (x, f) points, or NAN. */
static double parabola_vertex(double x0, double f0, double x1, double f1, double x2, double f2)
{
    double d1 = (x1 - x0) * (f1 - f2), d2 = (x1 - x2) * (f1 - f0);
    double den = 2.0 * (d1 - d2);
    if (!(fabs(den) > 0.0) || !isfinite(den))
        return DP_NAN;
    return x1 - ((x1 - x0) * d1 - (x1 - x2) * d2) / den;
}

static double poisson_log_delta(aux_ctx *ac, tnode *n, double order, bool refine)
{
    aux_obj o = {1, 0.0, log1p(1.0 / (order - 1.0)), NULL};
    const cand *cs = n->np ? n->pts : n->scan;
    size_t nc = n->np ? n->np : n->ns;
    double best = HUGE_VAL;
    size_t ib = (size_t)-1;
    cand *cw = n->np ? n->pts : n->scan; /* cs, writable for on-demand evaluation */
    for (size_t i = 0; i < nc; i++) {
        if (isnan(cs[i].r) && !(obj_from_r(&o, cs[i].order, cs[i].rlb) < best))
            continue; /* lazy and provably not below the best (the objective grows with r) */
        double v = obj_from_r(&o, cs[i].order, cand_r(n, &cw[i]));
        if (v < best) {
            best = v;
            ib = i;
        }
    }
    /* Inside trees one extra base evaluation per output order: at the vertex of the parabola
     * through the best candidate and its neighbours (log delta is convex in the order, so this
     * lands next to the minimiser). Only the true base RDP at that order is used: a valid bound
     * whatever the interpolation guessed. */
    if (refine && ib != (size_t)-1 && ib > 0 && ib + 1 < nc) {
        double f0 = obj_from_r(&o, cs[ib - 1].order, cand_r(n, &cw[ib - 1]));
        double f2 = obj_from_r(&o, cs[ib + 1].order, cand_r(n, &cw[ib + 1]));
        double xv = parabola_vertex(cs[ib - 1].x, f0, cs[ib].x, best, cs[ib + 1].x, f2);
        if (isfinite(xv) && xv > cs[ib - 1].x && xv < cs[ib + 1].x && xv != cs[ib].x &&
            xv >= AUX_X_MIN && xv <= AUX_X_MAX) {
            double ov = 1.0 + exp(xv), rv = base_eval(ac, ov);
            best = fmin(best, obj_from_r(&o, ov, rv));
            if (!ac->failed)
                pts_insert(n, ov, rv, rv);
        }
    }
    return fmin(best, n->kl_log_delta);
}

static double node_bound(aux_ctx *ac, struct tnode *n, double order, double r, bool refine)
{
    if (ac == NULL)
        ac = n->ac;
    if (!(order > 1.0) || isinf(r))
        return HUGE_VAL;
    switch (n->d.kind) {
        case ACCT_TUNE_FIXED:
            return r == 0.0 ? 0.0 : (double)n->d.k * r;
        case ACCT_TUNE_TRUNC_NEGBIN: /* PS22 Thm. 2 */
            return isinf(n->C) ? HUGE_VAL : r + n->C + n->log_mean / (order - 1.0);
        case ACCT_TUNE_POISSON: { /* PS22 Thm. 6 */
            double ld = poisson_log_delta(ac, n, order, refine);
            double dhat = ld >= 0.0 ? 1.0 : exp(ld);
            return r + n->d.mean * dhat + n->log_mean / (order - 1.0);
        }
    }
    return HUGE_VAL;
}

/* Lower bound on node_bound at a lazy scan candidate (every term added to r is >= 0, PS22). */
static double bound_lower(const tnode *n, double order, double rlb)
{
    if (n->d.kind == ACCT_TUNE_TRUNC_NEGBIN)
        return isinf(n->C) ? HUGE_VAL : rlb + n->C + n->log_mean / (order - 1.0);
    return rlb + n->log_mean / (order - 1.0); /* Poisson: mu * dhat >= 0 */
}

/* env[i] for every scan order, exactly as a preparation with every candidate evaluated computes
 * it: node_bound at the scan orders (Poisson: over the candidate list as prepared, n->snap), then
 * the running minimum from the top. */
static void env_compute(tnode *n)
{
    cand *live = n->pts;
    size_t lnp = n->np;
    if (n->snap != NULL) {
        n->pts = n->snap;
        n->np = n->nsnap;
    }
    for (size_t i = n->ns; i-- > 0;) {
        double b = node_bound(n->ac, n, n->scan[i].order, cand_r(n, &n->scan[i]), false);
        n->env[i] = (i + 1 < n->ns) ? fmin(b, n->env[i + 1]) : b;
    }
    if (n->snap != NULL) {
        n->pts = live;
        n->np = lnp;
    }
    n->env_lazy = false;
}

static int node_prepare(tnode *n, acct_tuning_rdp_fn child, void *ctx, dp_err *err)
{
    int rc = acct_tuning_dist_resolve(&n->ev->dist, &n->d, err);
    if (rc != DP_OK)
        return rc;
    n->log_mean = log(acct_tuning_expected_runs(&n->d));
    n->C = 0.0;
    n->kl_log_delta = 0.0;
    n->ns = 0;
    if (n->d.kind == ACCT_TUNE_FIXED)
        return DP_OK;
    aux_ctx ac = {child, ctx, 0, 0};
    n->ac = &ac;
    size_t nlazy = 0;
    for (int k = AUX_K_MIN; k <= AUX_K_MAX; k++) {
        double om1 = pow(10.0, (double)k / AUX_PER_DECADE), o = 1.0 + om1;
        double rlb = DP_NAN;
        if (n->convex && o > LAZY_MIN_ORDER && n->ns - nlazy >= 2 && nlazy == 0)
            rlb = chord_lower(n->scan[n->ns - 2].order, n->scan[n->ns - 2].r,
                              n->scan[n->ns - 1].order, n->scan[n->ns - 1].r, o);
        else if (nlazy > 0)
            rlb = chord_lower(n->scan[n->ns - nlazy - 2].order, n->scan[n->ns - nlazy - 2].r,
                              n->scan[n->ns - nlazy - 1].order, n->scan[n->ns - nlazy - 1].r, o);
        if (!isnan(rlb)) {
            n->scan[n->ns++] = (cand){log(om1), o, DP_NAN, rlb};
            nlazy++;
        } else {
            double r = base_eval(&ac, o);
            n->scan[n->ns++] = (cand){log(om1), o, r, r};
        }
    }
    const size_t ne = n->ns - nlazy; /* scan[0..ne-1] evaluated */
    bool any_finite = false;
    double r_min = HUGE_VAL;
    for (size_t i = 0; i < ne; i++) { /* lazy ones are >= the evaluated scan[ne - 1] */
        any_finite = any_finite || isfinite(n->scan[i].r);
        r_min = fmin(r_min, n->scan[i].r);
    }
    if (n->d.kind == ACCT_TUNE_TRUNC_NEGBIN) {
        n->t = -log(n->d.gamma);
        double c = 0.0, ord = 1.0;
        if (n->t > 0.0) {
            aux_obj o = {0, n->t, 0.0, NULL};
            aux_minimise(&ac, &o, n->scan, n->ns, 1.0, true, AUX_XTOL, AUX_MAX_ITER, n, &c, &ord);
            if (any_finite && n->t < c)
                c = n->t; /* lh = 1, see acct_tuning_rdp */
        }
        n->C = (1.0 + n->d.eta) * c;
    } else {
        n->kl_log_delta =
            r_min == 0.0 ? -HUGE_VAL : (isinf(r_min) ? 0.0 : 0.5 * log1p(-exp(-r_min)));
        for (size_t i = 0; i < n->ns; i++)
            pts_insert(n, n->scan[i].order, n->scan[i].r, n->scan[i].rlb);
        /* The conversion order depends on the output order, so Poisson gets a denser list once
         * (POISSON_PER_DECADE points a decade over the scan's range), instead of a refinement per
         * output order. */
        const int kp_min = AUX_K_MIN * POISSON_PER_DECADE / AUX_PER_DECADE;
        const int kp_max = AUX_K_MAX * POISSON_PER_DECADE / AUX_PER_DECADE;
        for (int k = kp_min; k <= kp_max; k++) {
            if (k % (POISSON_PER_DECADE / AUX_PER_DECADE) == 0)
                continue; /* already a scan point */
            double om1 = pow(10.0, (double)k / POISSON_PER_DECADE), o = 1.0 + om1;
            double rlb = nlazy > 0 && o > n->scan[ne - 1].order
                             ? chord_lower(n->scan[ne - 2].order, n->scan[ne - 2].r,
                                           n->scan[ne - 1].order, n->scan[ne - 1].r, o)
                             : DP_NAN;
            if (!isnan(rlb)) {
                pts_insert(n, o, DP_NAN, rlb);
            } else {
                double r = base_eval(&ac, o);
                pts_insert(n, o, r, r);
            }
        }
        if (nlazy > 0) { /* the list as prepared, for env_compute */
            n->snap = dp_malloc(n->np * sizeof *n->snap);
            if (n->snap != NULL) {
                memcpy(n->snap, n->pts, n->np * sizeof *n->snap);
                n->nsnap = n->np;
            }
        }
    }
    /* Envelope values at the scan orders (no refinement: any auxiliary order gives a valid bound),
     * and the minimiser of the bound itself over a continuum (scan bracket + Brent): the tuned RDP
     * at any order below it is at most its value there, whatever happens in between. With lazy
     * scan orders, env[i] below them is exact when every lazy order's bound is provably above the
     * bound at the last evaluated one (env is non-decreasing in i, so no env[i] with i < ne can
     * change); the lazy env[i] are completed on demand (env_compute). Otherwise, and when the
     * copy of the list could not be made, everything is evaluated now. */
    bool lazy_ok = nlazy > 0 && (n->d.kind != ACCT_TUNE_POISSON || n->snap != NULL);
    if (lazy_ok) {
        double b = node_bound(&ac, n, n->scan[ne - 1].order, n->scan[ne - 1].r, false);
        double lbmin = HUGE_VAL;
        for (size_t i = n->ns; i-- > ne;) {
            lbmin = fmin(lbmin, bound_lower(n, n->scan[i].order, n->scan[i].rlb));
            n->envlb[i] = lbmin;
            n->env[i] = DP_NAN;
        }
        lazy_ok = lbmin > b + 1e-9 * fabs(b);
        if (lazy_ok) {
            n->env[ne - 1] = b;
            for (size_t i = ne - 1; i-- > 0;)
                n->env[i] =
                    fmin(node_bound(&ac, n, n->scan[i].order, n->scan[i].r, false), n->env[i + 1]);
            n->env_lazy = true;
        }
    }
    if (!lazy_ok)
        env_compute(n);
    aux_obj ob = {2, 0.0, 0.0, n};
    aux_minimise(&ac, &ob, n->scan, n->ns, 1.0, true, AUX_XTOL_ENV, AUX_MAX_ITER, n, &n->star_val,
                 &n->star_order);
    n->ac = NULL;
    if (ac.failed)
        return dp_err_set(err, DP_ENUMERIC, NULL,
                          "the RDP of the repeated mechanism could not be evaluated at some order");
    return DP_OK;
}

int acct_tuning_cache_rdp(acct_tuning_cache **cache, const acct_event *ev, acct_tuning_rdp_fn child,
                          void *ctx, double order, double *out, dp_err *err)
{
    return acct_tuning_cache_rdp2(cache, ev, child, ctx, false, order, out, err);
}

int acct_tuning_cache_rdp2(acct_tuning_cache **cache, const acct_event *ev,
                           acct_tuning_rdp_fn child, void *ctx, bool child_convex, double order,
                           double *out, dp_err *err)
{
    if (cache == NULL || ev == NULL || ev->type != ACCT_EV_REPEAT_SELECT || child == NULL)
        return dp_err_set(err, DP_EINTERNAL, NULL, "tuning: bad node");
    if (*cache == NULL) {
        *cache = dp_calloc(1, sizeof **cache);
        if (*cache == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    tnode *n = (*cache)->head;
    while (n != NULL && n->ev != ev)
        n = n->next;
    if (n == NULL) {
        n = dp_calloc(1, sizeof *n);
        if (n == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        n->ev = ev;
        n->last_order = DP_NAN;
        n->convex = child_convex;
        int rc = node_prepare(n, child, ctx, err);
        if (rc != DP_OK) {
            dp_free(n->snap);
            dp_free(n->pts);
            dp_free(n);
            return rc;
        }
        n->next = (*cache)->head;
        (*cache)->head = n;
    }
    if (!(order > 1.0)) {
        *out = HUGE_VAL;
        return DP_OK;
    }
    aux_ctx ac = {child, ctx, 0, 0};
    n->ac = &ac;
    double r = base_eval(&ac, order);
    if (!ac.failed) {
        n->last_order = order;
        n->last_r = r;
    }
    if (n->d.kind == ACCT_TUNE_POISSON && !ac.failed)
        pts_insert(n, order, r, r);
    double v = node_bound(&ac, n, order, r, true);
    /* Monotone envelope over the scan orders >= order and the bound's own minimiser (van Erven &
     * Harremoes 2014, Thm. 3: RDP is non-decreasing in the order). */
    for (size_t i = 0; i < n->ns && !ac.failed; i++) {
        if (n->scan[i].order >= order) {
            if (n->env_lazy && isnan(n->env[i]))
                env_compute(n);
            v = fmin(v, n->env[i]);
            break;
        }
    }
    n->ac = NULL;
    if (ac.failed)
        return dp_err_set(err, DP_ENUMERIC, NULL,
                          "the RDP of the repeated mechanism could not be evaluated at some order");
    if (order <= n->star_order)
        v = fmin(v, n->star_val);
    *out = v;
    return DP_OK;
}

static const tnode *cache_find(const acct_tuning_cache *cache, const acct_event *ev)
{
    const tnode *n = cache ? cache->head : NULL;
    while (n != NULL && n->ev != ev)
        n = n->next;
    return n;
}

bool acct_tuning_cache_lower(const acct_tuning_cache *cache, const acct_event *ev, double order,
                             double r_low, double *out)
{
    const tnode *n = cache_find(cache, ev);
    if (n == NULL)
        return false;
    if (!(order > 1.0)) {
        *out = HUGE_VAL;
        return true;
    }
    r_low = r_low > 0.0 ? r_low : 0.0; /* base_eval clamps negative values up to 0 */
    double v = HUGE_VAL;
    switch (n->d.kind) { /* node_bound with every non-negative term dropped or kept exactly */
        case ACCT_TUNE_FIXED:
            v = r_low == 0.0 ? 0.0 : (double)n->d.k * r_low;
            break;
        case ACCT_TUNE_TRUNC_NEGBIN: /* PS22 Thm. 2: C >= 0 is a constant of the node */
            v = isinf(n->C) ? HUGE_VAL : r_low + n->C + n->log_mean / (order - 1.0);
            break;
        case ACCT_TUNE_POISSON: /* PS22 Thm. 6 with mu * dhat >= 0 dropped */
            v = r_low + n->log_mean / (order - 1.0);
            break;
    }
    /* the envelope terms acct_tuning_cache_rdp mins with: exactly, or a lower bound on a lazy
     * one */
    for (size_t i = 0; i < n->ns; i++) {
        if (n->scan[i].order >= order) {
            v = fmin(v, isnan(n->env[i]) ? n->envlb[i] : n->env[i]);
            break;
        }
    }
    if (order <= n->star_order)
        v = fmin(v, n->star_val);
    *out = v;
    return true;
}

bool acct_tuning_cache_last_child(const acct_tuning_cache *cache, const acct_event *ev,
                                  double *order, double *r)
{
    const tnode *n = cache_find(cache, ev);
    if (n == NULL || isnan(n->last_order))
        return false;
    *order = n->last_order;
    *r = n->last_r;
    return true;
}

bool acct_tuning_cache_stateful(const acct_event *ev)
{
    return ev != NULL && ev->type == ACCT_EV_REPEAT_SELECT && ev->dist.kind == ACCT_TUNE_POISSON;
}

void acct_tuning_cache_free(acct_tuning_cache *cache)
{
    if (cache == NULL)
        return;
    tnode *n = cache->head;
    while (n != NULL) {
        tnode *next = n->next;
        dp_free(n->snap);
        dp_free(n->pts);
        dp_free(n);
        n = next;
    }
    dp_free(cache);
}

/* ---- pure epsilon ---- */

int acct_tuning_pure_epsilon(const acct_tuning_dist *d, double base_eps, double *eps_out,
                             dp_err *err)
{
    acct_tuning_dist r;
    int rc = acct_tuning_dist_resolve(d, &r, err);
    if (rc != DP_OK)
        return rc;
    if (!(base_eps >= 0.0) || isnan(base_eps))
        return dp_err_set(err, DP_EINVAL, "epsilon", "base epsilon must be >= 0 (got %g)",
                          base_eps);
    if (isinf(base_eps)) {
        *eps_out = DP_INF;
        return DP_OK;
    }
    switch (r.kind) {
        case ACCT_TUNE_FIXED:
            *eps_out = (double)r.k * base_eps; /* basic composition */
            break;
        case ACCT_TUNE_TRUNC_NEGBIN:
            /* PS22 Thm. 2 with lambda, lh -> infinity; gamma = 1 is the single run. eta = 1 is Liu
             * & Talwar 2019's 3 eps. */
            *eps_out = r.gamma == 1.0 ? base_eps : (2.0 + r.eta) * base_eps;
            break;
        case ACCT_TUNE_POISSON:
            /* PS22 Thm. 6 as lambda -> infinity: ehat -> 0 and dhat -> (e^eps - 1)/(e^eps + 1) =
             * tanh(eps/2), the total-variation bound of an eps-DP run; log(mu)/(lambda-1) -> 0. */
            *eps_out = base_eps + r.mean * tanh(0.5 * base_eps);
            break;
    }
    return DP_OK;
}

static int event_pure(const acct_event *ev, acct_neighboring nb, int depth, bool *is_pure,
                      double *eps, dp_err *err)
{
    if (ev == NULL || depth > ACCT_EVENT_MAX_DEPTH) {
        *is_pure = false;
        return DP_OK;
    }
    double e = 0.0;
    switch (ev->type) {
        case ACCT_EV_PURE:
            *eps = ev->epsilon;
            *is_pure = isfinite(ev->epsilon) && ev->epsilon >= 0.0;
            return DP_OK;
        case ACCT_EV_LAPLACE:
            /* Laplace with scale b = noise_multiplier * L1 sensitivity is (1/noise_multiplier)-DP.
             */
            *eps = 1.0 / ev->noise_multiplier;
            *is_pure = isfinite(ev->noise_multiplier) && ev->noise_multiplier > 0.0;
            return DP_OK;
        case ACCT_EV_POISSON: {
            int rc = event_pure(ev->child, nb, depth + 1, is_pure, &e, err);
            if (rc != DP_OK || !*is_pure)
                return rc;
            if (nb == ACCT_NB_ADD_REMOVE)
                *eps = log1p(ev->sampling_rate * expm1(e)); /* amplification by Poisson sampling */
            else
                *eps = e; /* replace_one: no amplification claimed (still valid by coupling) */
            return DP_OK;
        }
        case ACCT_EV_SELF_COMPOSED: {
            int rc = event_pure(ev->child, nb, depth + 1, is_pure, &e, err);
            if (rc != DP_OK || !*is_pure)
                return rc;
            *eps = (double)ev->count * e;
            return DP_OK;
        }
        case ACCT_EV_COMPOSED: {
            double sum = 0.0;
            for (size_t i = 0; i < ev->n_children; i++) {
                int rc = event_pure(ev->children[i], nb, depth + 1, is_pure, &e, err);
                if (rc != DP_OK || !*is_pure)
                    return rc;
                sum += e;
            }
            *is_pure = true;
            *eps = sum;
            return DP_OK;
        }
        case ACCT_EV_REPEAT_SELECT: {
            int rc = event_pure(ev->child, nb, depth + 1, is_pure, &e, err);
            if (rc != DP_OK || !*is_pure)
                return rc;
            return acct_tuning_pure_epsilon(&ev->dist, e, eps, err);
        }
        default:
            *is_pure = false;
            return DP_OK;
    }
}

int acct_tuning_event_pure_epsilon(const acct_event *ev, acct_neighboring nb, bool *is_pure,
                                   double *eps_out, dp_err *err)
{
    double e = DP_NAN;
    bool p = false;
    int rc = event_pure(ev, nb, 0, &p, &e, err);
    if (rc != DP_OK)
        return rc;
    *is_pure = p;
    *eps_out = p ? e : DP_NAN;
    return DP_OK;
}

/* ---- sampling ---- */

/* Uniform double in [0, 1) on the 2^-53 grid (exact: no rounding of the 53 bits). */
static int uniform01(acct_tuning_rand64_fn rnd, void *ctx, double *u, dp_err *err)
{
    uint64_t w;
    if (rnd(ctx, &w) != 0)
        return dp_err_set(err, DP_EINTERNAL, NULL, "the random source failed");
    *u = (double)(w >> 11) * 0x1p-53;
    return DP_OK;
}

int acct_tuning_uniform_index(uint64_t n, acct_tuning_rand64_fn rnd, void *ctx, uint64_t *out,
                              dp_err *err)
{
    if (n == 0)
        return dp_err_set(err, DP_EINVAL, "grid_size", "grid size must be >= 1");
    /* Accept w only in [2^64 mod n, 2^64): that range has a multiple of n values, so w mod n is
     * exactly uniform. Each try is rejected with probability < 1/2. */
    const uint64_t threshold = (0 - n) % n;
    for (int tries = 0; tries < 128; tries++) {
        uint64_t w;
        if (rnd(ctx, &w) != 0)
            return dp_err_set(err, DP_EINTERNAL, NULL, "the random source failed");
        if (w >= threshold) {
            *out = w % n;
            return DP_OK;
        }
    }
    return dp_err_set(err, DP_EINTERNAL, NULL, "the random source looks stuck");
}

/* Neumaier (compensated) summation, so that the running CDF is accurate to about one ulp and the
 * inversion is exact up to the 2^-53 resolution of u. */
typedef struct csum {
    double s, c;
} csum;

static void csum_add(csum *a, double x)
{
    double t = a->s + x;
    if (fabs(a->s) >= fabs(x))
        a->c += (a->s - t) + x;
    else
        a->c += (x - t) + a->s;
    a->s = t;
}

static int draw_poisson_piece(double mu, double u, uint64_t *k_out, dp_err *err)
{
    /* Inversion: smallest k with u < F(k); mu <= POISSON_DRAW_PIECE so e^{-mu} is a normal double.
     */
    double p = exp(-mu);
    csum cdf = {p, 0.0};
    uint64_t k = 0;
    while (u >= cdf.s + cdf.c) {
        k++;
        p *= mu / (double)k;
        csum_add(&cdf, p);
        if (p == 0.0 && (double)k > mu)
            break; /* the remaining tail is below the smallest double: u sat in rounding slack */
        if (k > ACCT_TUNING_MAX_DRAW)
            return dp_err_set(err, DP_ENUMERIC, NULL, "poisson draw did not terminate");
    }
    *k_out = k;
    return DP_OK;
}

int acct_tuning_draw(const acct_tuning_dist *d, acct_tuning_rand64_fn rnd, void *ctx,
                     uint64_t *k_out, dp_err *err)
{
    acct_tuning_dist r;
    int rc = acct_tuning_dist_resolve(d, &r, err);
    if (rc != DP_OK)
        return rc;
    if (rnd == NULL)
        return dp_err_set(err, DP_EINTERNAL, NULL, "no random source");
    double u = 0.0;
    switch (r.kind) {
        case ACCT_TUNE_FIXED:
            *k_out = r.k;
            return DP_OK;
        case ACCT_TUNE_POISSON: {
            /* A sum of independent Poissons is Poisson with the summed mean. */
            int pieces = (int)ceil(r.mean / POISSON_DRAW_PIECE);
            double mu = r.mean / pieces;
            uint64_t total = 0;
            for (int i = 0; i < pieces; i++) {
                uint64_t k = 0;
                if ((rc = uniform01(rnd, ctx, &u, err)) != DP_OK)
                    return rc;
                if ((rc = draw_poisson_piece(mu, u, &k, err)) != DP_OK)
                    return rc;
                total += k;
            }
            *k_out = total;
            return DP_OK;
        }
        case ACCT_TUNE_TRUNC_NEGBIN: {
            if (r.gamma == 1.0) {
                *k_out = 1;
                return DP_OK;
            }
            if ((rc = uniform01(rnd, ctx, &u, err)) != DP_OK)
                return rc;
            const double t = -log(r.gamma), eta = r.eta;
            const double log1mg = log(-expm1(-t)); /* log(1 - gamma) */
            /* P[K=1] = (1-g) eta / (g^-eta - 1) = (1-g) eta / expm1(eta t); (1-g)/t at eta = 0.
             * Then P[K=k+1] = P[K=k] (1-g) (k+eta)/(k+1) (PS22 Def. 1). Walk in log space while the
             * terms are below the normal range (they add nothing to the CDF), then in linear space.
             */
            double logp = log1mg + (eta == 0.0 ? -log(t) : log(eta / expm1(eta * t)));
            uint64_t k = 1;
            while (logp < -700.0) {
                logp += log1mg + log1p((eta - 1.0) / (double)(k + 1));
                k++;
                if (k > ACCT_TUNING_MAX_DRAW)
                    goto too_many;
            }
            double p = exp(logp), one_m_g = -expm1(-t);
            csum cdf = {p, 0.0};
            while (u >= cdf.s + cdf.c) {
                p *= one_m_g * ((double)k + eta) / (double)(k + 1);
                k++;
                csum_add(&cdf, p);
                if (p == 0.0)
                    break; /* tail below the smallest double: u sat in rounding slack */
                if (k > ACCT_TUNING_MAX_DRAW)
                    goto too_many;
            }
            *k_out = k;
            return DP_OK;
        too_many:
            return dp_err_set(
                err, DP_ENUMERIC, "distribution",
                "the draw exceeded %llu runs; this distribution is too heavy-tailed to "
                "run (use a larger eta or a smaller mean)",
                (unsigned long long)ACCT_TUNING_MAX_DRAW);
        }
    }
    return dp_err_set(err, DP_EINVAL, F_DIST, "unknown distribution kind");
}
