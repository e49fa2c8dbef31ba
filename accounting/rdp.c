/*
 * rdp.c: RDP curves of mechanisms, tree evaluation, and RDP -> (epsilon, delta). See rdp.h.
 *
 * DESIGN (sampled Gaussian). With mu0 = N(0, s^2) and t = (z - 1/2)/s^2, the privacy-loss ratio of
 * the Poisson-subsampled Gaussian is 1 + u with u = q (e^t - 1) (Mironov, Talwar & Zhang 2019,
 * §3.3), and A_alpha = E_{z~mu0}[(1 + u)^alpha],   RDP = log(A_alpha) / (alpha - 1). Since E[u] =
 * 0, A_alpha - 1 = E[f(u)] with f(u) = (1+u)^alpha - 1 - alpha u >= 0 (convexity), so log(A_alpha -
 * 1) is a log-sum of POSITIVE terms and RDP = log1p(A_alpha - 1)/(alpha - 1) keeps full relative
 * precision even when A_alpha = 1 + 1e-27 (q = 1e-8, sigma = 1e5). This is where the classic
 * two-sided series of MTZ/TF-Privacy loses every digit: it forms A_alpha itself and subtracts 1.
 *   Integer alpha: f(u) expands binomially and E[(e^t-1)^k ...] collapses to
 *     A - 1 = sum_{k=2}^{alpha} C(alpha,k) (1-q)^{alpha-k} q^k expm1((k^2-k)/(2 s^2))
 *   (MTZ 2019, §3.3 integer-alpha sum, with the k = 0, 1 terms cancelled against the 1).
 *   Fractional alpha: f(u) is integrated against the normal density by the trapezoidal rule on the
 *   line (sgm_log_am1_trap: geometric convergence for this analytic integrand, checked by nested
 *   halvings); where that cannot settle cheaply, by adaptive Gauss-Kronrod (GSL qag) separately on
 *   z < 1/2 (u < 0) and z > 1/2 (u > 0), where f(u(z)) is log-concave; each piece is rescaled by
 *   its peak (found by golden-section search) and integrated over the window where the
 *   log-integrand is within ACCT_QUAD_LOG_WINDOW of the peak.
 *
 * Conversions: see rdp.h for formulas and papers. Everything is evaluated in log space
 * (log-sum-exp of log1p/expm1 terms, never exp then log; accounting/logmath.h).
 */
#include "accounting/rdp.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_integration.h>
#include <gsl/gsl_math.h>
#include <gsl/gsl_min.h>
#include <gsl/gsl_sf_gamma.h>

#include "accounting/logmath.h"
#include "accounting/tuning.h"
#include "common/dp_alloc.h"
#include "common/dp_math.h"

/* Relative accuracy asked of each quadrature piece: 100x below the 1e-9 RDP target. */
#define ACCT_QUAD_EPSREL 1e-11
/* Accepted relative error estimate when GSL reports round-off limits (GSL_EROUND). */
#define ACCT_QUAD_EPSREL_ACCEPT 1e-10
/* Cap of the scaled tolerance (scale = log A_alpha can reach 1e11 at sigma = 0.1, alpha = 1e5). */
#define ACCT_QUAD_EPSREL_MAX 1e-4
/* Subintervals available to one adaptive quadrature. */
#define ACCT_QUAD_LIMIT 200
/* The log-integrand window: mass beyond peak - 60 is below e^-60 ~ 1e-26 of the peak's. */
#define ACCT_QUAD_LOG_WINDOW 60.0
/* Golden-section iterations for the integrand peak: reaches ~1e-9 of the bracket. */
#define ACCT_PEAK_ITERS 60 /* cap; the search stops at ACCT_PEAK_XTOL */
/* Peak located to 0.05 sigma: it only sets the scale and the split point of the quadrature. */
#define ACCT_PEAK_XTOL 0.05
/* Series f(u) = sum_{k>=2} C(alpha,k) u^k is used for |u| < 0.5 and |alpha u| < 2 (no
 * cancellation). */
#define ACCT_SERIES_MAX_U     0.5
#define ACCT_SERIES_MAX_AU    2.0
#define ACCT_SERIES_MAX_TERMS 400
#define ACCT_SERIES_MAX_A1U   0.05
/* Stop the series once a term is below this fraction of the sum (below half an ulp). */
#define ACCT_SERIES_REL 1e-18
/* Beyond t = 700, e^t overflows a double: switch to pure log-space formulas. */
#define ACCT_EXP_SAFE 700.0
/* Recompute log C(alpha, k) from lgamma every this many recurrence steps, bounding drift. */
#define ACCT_LNCHOOSE_RESYNC 128
/* sigma below this: the sampled Gaussian's RDP exceeds double range at every order; report +inf. */
#define ACCT_SIGMA_TINY 1e-100
/* Continuous order search: golden section in x = log(alpha - 1) until the bracket is narrower than
 * XTOL (alpha located to 1e-5 relative; the objective is flat there, so eps moves by ~1e-10
 * relative), with an iteration cap. */
#define ACCT_ORDER_SEARCH_ITERS 80
#define ACCT_ORDER_SEARCH_XTOL  1e-5

static const double GOLDEN = 0.6180339887498949; /* (sqrt(5) - 1) / 2 */

/* ---- default orders ---- */

/* 1 + x/10 exactly as Opacus and TF-Privacy compute it (a constant expression, evaluated in
 * double). */
#define FRAC(x) (1.0 + (x) / 10.0)
/* The default grid (rdp.h); immutable, so it is safe to share between threads. */
static const double DEFAULT_ORDERS[] = {
    FRAC(1),  FRAC(2),  FRAC(3),  FRAC(4),  FRAC(5),  FRAC(6),  FRAC(7),  FRAC(8),  FRAC(9),
    FRAC(10), FRAC(11), FRAC(12), FRAC(13), FRAC(14), FRAC(15), FRAC(16), FRAC(17), FRAC(18),
    FRAC(19), FRAC(20), FRAC(21), FRAC(22), FRAC(23), FRAC(24), FRAC(25), FRAC(26), FRAC(27),
    FRAC(28), FRAC(29), FRAC(30), FRAC(31), FRAC(32), FRAC(33), FRAC(34), FRAC(35), FRAC(36),
    FRAC(37), FRAC(38), FRAC(39), FRAC(40), FRAC(41), FRAC(42), FRAC(43), FRAC(44), FRAC(45),
    FRAC(46), FRAC(47), FRAC(48), FRAC(49), FRAC(50), FRAC(51), FRAC(52), FRAC(53), FRAC(54),
    FRAC(55), FRAC(56), FRAC(57), FRAC(58), FRAC(59), FRAC(60), FRAC(61), FRAC(62), FRAC(63),
    FRAC(64), FRAC(65), FRAC(66), FRAC(67), FRAC(68), FRAC(69), FRAC(70), FRAC(71), FRAC(72),
    FRAC(73), FRAC(74), FRAC(75), FRAC(76), FRAC(77), FRAC(78), FRAC(79), FRAC(80), FRAC(81),
    FRAC(82), FRAC(83), FRAC(84), FRAC(85), FRAC(86), FRAC(87), FRAC(88), FRAC(89), FRAC(90),
    FRAC(91), FRAC(92), FRAC(93), FRAC(94), FRAC(95), FRAC(96), FRAC(97), FRAC(98), FRAC(99),
    11.0,     12.0,     13.0,     14.0,     15.0,     16.0,     17.0,     18.0,     19.0,
    20.0,     21.0,     22.0,     23.0,     24.0,     25.0,     26.0,     27.0,     28.0,
    29.0,     30.0,     31.0,     32.0,     33.0,     34.0,     35.0,     36.0,     37.0,
    38.0,     39.0,     40.0,     41.0,     42.0,     43.0,     44.0,     45.0,     46.0,
    47.0,     48.0,     49.0,     50.0,     51.0,     52.0,     53.0,     54.0,     55.0,
    56.0,     57.0,     58.0,     59.0,     60.0,     61.0,     62.0,     63.0,     64.0,
    80.0,     96.0,     128.0,    192.0,    256.0,    384.0,    512.0,    1024.0,   2048.0,
    4096.0};
#undef FRAC

size_t acct_rdp_default_orders(const double **orders)
{
    if (orders)
        *orders = DEFAULT_ORDERS;
    return sizeof DEFAULT_ORDERS / sizeof DEFAULT_ORDERS[0];
}

int acct_rdp_check_orders(const double *orders, size_t n, dp_err *err)
{
    if (orders == NULL || n == 0)
        return dp_err_set(err, DP_EINVAL, "orders", "orders must be a non-empty list");
    if (n > ACCT_RDP_MAX_ORDERS)
        return dp_err_set(err, DP_EINVAL, "orders", "at most %d orders are accepted",
                          ACCT_RDP_MAX_ORDERS);
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(orders[i]) || orders[i] <= 1.0 || orders[i] > ACCT_RDP_MAX_ORDER) {
            char f[32];
            snprintf(f, sizeof f, "orders[%zu]", i);
            return dp_err_set(err, DP_EINVAL, f, "each order must be in (1, %g], got %g",
                              ACCT_RDP_MAX_ORDER, orders[i]);
        }
    }
    return DP_OK;
}

/* ---- simple mechanisms ---- */

double acct_rdp_gaussian(double sigma, double alpha)
{
    /* Mironov 2017, Table II (Gaussian mechanism, sensitivity 1): alpha / (2 sigma^2). */
    return alpha / (2.0 * sigma * sigma);
}

/* h(x) = e^x - 1 - x >= 0, accurate for all x (series near 0, where expm1(x) - x cancels). */
static double expm1_minus_x(double x)
{
    if (fabs(x) < 0.5) {
        double term = x * x / 2.0, s = term;
        for (int k = 3; k < 60; k++) {
            term *= x / k;
            s += term;
            if (fabs(term) < ACCT_SERIES_REL * fabs(s))
                break;
        }
        return s;
    }
    return expm1(x) - x;
}

double acct_rdp_laplace(double b, double alpha)
{
    /* Mironov 2017, Prop. 6 / Table II, Laplace with scale b and sensitivity 1, alpha > 1:
     *   r = 1/(alpha-1) log(S),
     *   S = alpha/(2alpha-1) e^{(alpha-1)/b} + (alpha-1)/(2alpha-1) e^{-alpha/b}.
     * The sum S is 1 + O(1/b^2); writing e^x = 1 + x + h(x) the first-order terms cancel exactly
     * and S - 1 = (alpha h((alpha-1)/b) + (alpha-1) h(-alpha/b)) / (2 alpha - 1)  (all terms >= 0).
     */
    double x1 = (alpha - 1.0) / b, x2 = -alpha / b;
    if (x1 < 1.0) {
        double sm1 =
            (alpha * expm1_minus_x(x1) + (alpha - 1.0) * expm1_minus_x(x2)) / (2.0 * alpha - 1.0);
        return log1p(sm1) / (alpha - 1.0);
    }
    double la = log(alpha / (2.0 * alpha - 1.0)) + x1;
    double lb = log((alpha - 1.0) / (2.0 * alpha - 1.0)) + x2;
    return dp_log_add(la, lb) / (alpha - 1.0);
}

/* log cosh(y), accurate near 0 (log1p(2 sinh^2(y/2))) and for large |y|. */
static double log_cosh(double y)
{
    y = fabs(y);
    if (y < 1.0) {
        double sh = sinh(0.5 * y);
        return log1p(2.0 * sh * sh);
    }
    return y + log1p(exp(-2.0 * y)) - M_LN2;
}

double acct_rdp_pure(double eps, double alpha)
{
    /* Every eps-DP mechanism is dominated by randomized response with the same eps (Kairouz, Oh &
     * Viswanath 2015), whose Renyi divergence is (Mironov 2017, Table II)
     *   r = (eps alpha + log(1 + e^{eps(1-2 alpha)}) - log(1 + e^eps)) / (alpha - 1)
     * (dp_accounting uses the same bound). With log(1 + e^y) = log 2 + y/2 + log cosh(y/2) the
     * linear terms cancel exactly:  r = (log cosh((2 alpha - 1) eps/2) - log cosh(eps/2))/(alpha -
     * 1), which keeps full precision for tiny eps. It is <= min(eps, alpha eps^2/2) (Mironov 2017
     * §III; Bun & Steinke 2016, Prop. 1.4); the min guards rounding. */
    double r = (log_cosh((2.0 * alpha - 1.0) * eps / 2.0) - log_cosh(eps / 2.0)) / (alpha - 1.0);
    double z = alpha * eps * eps / 2.0;
    if (r < 0.0)
        r = 0.0;
    return fmin(r, fmin(z, eps));
}

/* ---- sampled Gaussian: integer orders ---- */

static int lnchoose(double n, double k, double *out)
{
    gsl_sf_result r;
    int st = gsl_sf_lnchoose_e((unsigned)n, (unsigned)k, &r);
    if (st != GSL_SUCCESS)
        return DP_ENUMERIC;
    *out = r.val;
    return DP_OK;
}

/* log(A_alpha - 1) for integer alpha >= 2 and 0 < q < 1 (see DESIGN above). */
/* Orders, rates and multipliers for which every factor of the binomial sum stays far inside the
 * double range, so it can be summed in linear scale (below). */
#define ACCT_INT_LINEAR_LOG_MAX 600.0

static int sgm_log_am1_int(double q, double sigma, double alpha, double *out)
{
    const double lq = log(q), l1q = log1p(-q), inv2s2 = 1.0 / (2.0 * sigma * sigma);
    const double a = alpha;
    if ((a * a - a) * inv2s2 < ACCT_INT_LINEAR_LOG_MAX && -a * lq < ACCT_INT_LINEAR_LOG_MAX &&
        -a * l1q < ACCT_INT_LINEAR_LOG_MAX && a <= 1000.0) {
        /* The same sum with w_k = C(a,k) q^k (1-q)^(a-k) by its ratio recurrence w_{k+1} = w_k
         * (a-k)/(k+1) q/(1-q): every w_k lies in [e^-600 C(a,k), 1] and every expm1 factor below
         * e^600, so nothing under- or overflows; all terms are positive (relative error ~k ulps,
         * as the log-space sum). */
        const double ratio = q / (1.0 - q);
        double w = 0.5 * a * (a - 1.0) * exp(2.0 * lq + (a - 2.0) * l1q), sum = 0.0;
        for (double k = 2.0; k <= a; k += 1.0) {
            sum += w * expm1((k * k - k) * inv2s2);
            w *= (a - k) / (k + 1.0) * ratio;
        }
        *out = log(sum);
        return isnan(*out) ? DP_ENUMERIC : DP_OK;
    }
    dp_lse acc;
    dp_lse_init(&acc);
    double lc = 0.0;
    for (double k = 2.0; k <= a; k += 1.0) {
        if (((long long)k - 2) % ACCT_LNCHOOSE_RESYNC == 0) {
            if (lnchoose(a, k, &lc) != DP_OK)
                return DP_ENUMERIC;
        }
        /* log expm1(x) = x + log1p(-e^-x) is x to the last bit beyond x = 40 (e^-40 ~ 4e-18 is
         * below half an ulp of 40): skip the two transcendental calls there */
        const double x = (k * k - k) * inv2s2;
        double term = lc + k * lq + (a - k) * l1q + (x > 40.0 ? x : dp_logexpm1(x));
        dp_lse_add(&acc, term);
        lc += log((a - k) / (k + 1.0)); /* C(a,k+1) = C(a,k) (a-k)/(k+1) */
    }
    *out = dp_lse_value(&acc);
    return isnan(*out) ? DP_ENUMERIC : DP_OK;
}

/* ---- sampled Gaussian: fractional orders (quadrature) ---------------------------------------- */

/* Series coefficients C(alpha, k), k = 2..ACCT_SERIES_COEFS - 1, precomputed once per order (the
 * series loop is otherwise bound by one division per term); later terms use the recurrence. With
 * |u| < 0.05/(alpha - 1) the series rarely needs more than ~12 terms except for orders near 1. */
#define ACCT_SERIES_COEFS 24

typedef struct sgm_ctx {
    double alpha, q, lq, l1q, s2;   /* order, rate, log q, log(1-q), sigma^2 */
    double shift;                   /* log-integrand value at the peak (rescaling) */
    double inv_s2;                  /* 1 / sigma^2 */
    double series_u;                /* the series is used for |u| < series_u (see sgm_log_f) */
    double coef[ACCT_SERIES_COEFS]; /* coef[k] = C(alpha, k) for k >= 2 */
} sgm_ctx;

static void sgm_ctx_init(sgm_ctx *c, double q, double sigma, double alpha)
{
    c->alpha = alpha;
    c->q = q;
    c->lq = log(q);
    c->l1q = log1p(-q);
    c->s2 = sigma * sigma;
    c->shift = 0.0;
    c->inv_s2 = 1.0 / c->s2;
    /* The direct formula expm1(alpha log1p(u)) - alpha u loses a factor ~2/((alpha-1)|u|) to
     * cancellation (f ~ alpha(alpha-1)u^2/2 against terms of size alpha|u|): above (alpha-1)|u| =
     * ACCT_SERIES_MAX_A1U that is <= 40 ulps, so the series serves only below it (and where it
     * converges fast: |u| < ACCT_SERIES_MAX_U, |alpha u| < ACCT_SERIES_MAX_AU). */
    c->series_u = fmin(ACCT_SERIES_MAX_U,
                       fmin(ACCT_SERIES_MAX_AU / alpha, ACCT_SERIES_MAX_A1U / (alpha - 1.0)));
    c->coef[0] = c->coef[1] = 0.0;
    c->coef[2] = alpha * (alpha - 1.0) / 2.0;
    for (int k = 2; k + 1 < ACCT_SERIES_COEFS; k++)
        c->coef[k + 1] = c->coef[k] * ((alpha - k) / (k + 1.0));
}

/* f(u) = sum_{k>=2} C(alpha,k) u^k for |u| < ACCT_SERIES_MAX_U, |alpha u| < ACCT_SERIES_MAX_AU,
 * stopped once a term is below ACCT_SERIES_REL of the sum; coefficients from the table, the
 * recurrence beyond it. */
static double sgm_series(const sgm_ctx *c, double u)
{
    const double alpha = c->alpha;
    double pw = u * u, term = c->coef[2] * pw, s = term;
    int k = 2;
    while (k + 1 < ACCT_SERIES_COEFS) {
        k++;
        pw *= u;
        term = c->coef[k] * pw;
        s += term;
        if (fabs(term) <= ACCT_SERIES_REL * fabs(s))
            return s;
    }
    for (; k < ACCT_SERIES_MAX_TERMS; k++) {
        term *= (alpha - k) / (k + 1.0) * u;
        s += term;
        if (fabs(term) <= ACCT_SERIES_REL * fabs(s))
            break;
    }
    return s;
}

/* log f(u) with u = q (e^t - 1), f(u) = (1+u)^alpha - 1 - alpha u; -HUGE_VAL at u = 0. */
/* log f(u) for u = q (e^t - 1) with t <= ACCT_EXP_SAFE; *l1pu caches log1p(u) (NAN = not yet). */
static double sgm_log_f_u(const sgm_ctx *c, double u, double *l1pu)
{
    const double alpha = c->alpha;
    if (u == 0.0)
        return -HUGE_VAL;
    double au = alpha * u;
    if (fabs(u) < c->series_u) {
        double sr = sgm_series(c, u);
        return sr > 0.0 ? log(sr) : -HUGE_VAL;
    }
    if (isnan(*l1pu))
        *l1pu = log1p(u);
    double L = alpha * *l1pu;
    if (u < 0.0 || L < ACCT_EXP_SAFE)
        return log(expm1(L) - au);
    return L + dp_log1mexp(log1p(au) - L);
}

static double sgm_log_f(const sgm_ctx *c, double t)
{
    const double alpha = c->alpha;
    if (t > ACCT_EXP_SAFE) {
        double l1u = c->q < 1.0 ? dp_log_add(c->l1q, c->lq + t) : t; /* log(1 - q + q e^t) */
        double L = alpha * l1u;
        double l1au = dp_log_add(0.0, log(alpha) + c->lq + dp_logexpm1(t)); /* log(1 + alpha u) */
        return L + dp_log1mexp(l1au - L);
    }
    double l1pu = DP_NAN;
    return sgm_log_f_u(c, c->q * expm1(t), &l1pu);
}

static double sgm_log_integrand(const sgm_ctx *c, double z)
{
    return -0.5 * z * z * c->inv_s2 + sgm_log_f(c, (z - 0.5) * c->inv_s2);
}

static double sgm_integrand(double z, void *p)
{
    const sgm_ctx *c = p;
    return exp(sgm_log_integrand(c, z) - c->shift);
}

/* A log-integrand g(ctx, x), as the shared peak and window helpers below see it (the sampled
 * Gaussian's and the WBK 2019 moments' integrals use the same two steps). */
typedef double (*log_integrand_fn)(const void *ctx, double x);

/* Golden-section maximisation of the (unimodal) log-integrand g on [lo, hi], stopping at width
 * ACCT_PEAK_XTOL * sigma; returns the peak's abscissa and its value in *gmax. */
static double golden_peak(log_integrand_fn g, const void *c, double lo, double hi, double sigma,
                          double *gmax)
{
    double a = lo, b = hi;
    double x1 = b - GOLDEN * (b - a), x2 = a + GOLDEN * (b - a);
    double f1 = g(c, x1), f2 = g(c, x2);
    const double xtol = ACCT_PEAK_XTOL * sigma;
    for (int i = 0; i < ACCT_PEAK_ITERS && b - a > xtol; i++) {
        if (f1 < f2) {
            a = x1;
            x1 = x2;
            f1 = f2;
            x2 = a + GOLDEN * (b - a);
            f2 = g(c, x2);
        } else {
            b = x2;
            x2 = x1;
            f2 = f1;
            x1 = b - GOLDEN * (b - a);
            f1 = g(c, x1);
        }
    }
    double z = f1 > f2 ? x1 : x2;
    *gmax = f1 > f2 ? f1 : f2;
    return z;
}

/* Window around the peak zp of g (value gmax) inside [dlo, dhi]: step out from the peak, doubling
 * from sigma / 8, until g is ACCT_QUAD_LOG_WINDOW below gmax, the step passes 16 sigma, or the
 * domain end is reached (then that end is the window's edge). */
static void log_window(log_integrand_fn g, const void *c, double zp, double gmax, double sigma,
                       double dlo, double dhi, double *lo_out, double *hi_out)
{
    double lo = zp, hi = zp;
    for (double d = 0.125 * sigma;; d *= 2.0) {
        lo = zp - d;
        if (lo <= dlo) {
            lo = dlo;
            break;
        }
        if (g(c, lo) < gmax - ACCT_QUAD_LOG_WINDOW || d > 16.0 * sigma)
            break;
    }
    for (double d = 0.125 * sigma;; d *= 2.0) {
        hi = zp + d;
        if (hi >= dhi) {
            hi = dhi;
            break;
        }
        if (g(c, hi) < gmax - ACCT_QUAD_LOG_WINDOW || d > 16.0 * sigma)
            break;
    }
    *lo_out = lo;
    *hi_out = hi;
}

static double sgm_log_integrand_fn(const void *c, double z)
{
    return sgm_log_integrand(c, z);
}

/* Golden-section maximisation of the (unimodal) sampled-Gaussian log-integrand on [lo, hi]. */
static double sgm_peak(const sgm_ctx *c, double lo, double hi, double *gmax)
{
    return golden_peak(sgm_log_integrand_fn, c, lo, hi, sqrt(c->s2), gmax);
}

/* Integral of exp(g - shift) over [a, b] by GSL qag; DP_ENUMERIC on failure. */
static int sgm_qag(sgm_ctx *c, gsl_integration_workspace *w, double a, double b, double *val)
{
    /* When the log-integrand is large (A_alpha = e^shift, shift >> 1), its evaluation carries
     * absolute rounding ~ DBL_EPSILON * shift, so the integral can only be resolved to that
     * relative level; that is still a relative error ~ ACCT_QUAD_EPSREL in log(A_alpha) and hence
     * in the RDP. */
    double scale = c->shift > 1.0 ? c->shift : 1.0;
    *val = 0.0;
    if (!(b > a))
        return DP_OK;
    gsl_function F = {sgm_integrand, c};
    double res = 0.0, abserr = 0.0;
    double epsrel = ACCT_QUAD_EPSREL * scale;
    if (epsrel > ACCT_QUAD_EPSREL_MAX)
        epsrel = ACCT_QUAD_EPSREL_MAX;
    /* Non-adaptive Gauss-Kronrod (21/43/87 points) first: on these smooth, peak-scaled pieces it
     * usually meets the tolerance with its own error estimate; otherwise adaptive qag decides. */
    size_t neval = 0;
    int st = gsl_integration_qng(&F, a, b, 0.0, epsrel, &res, &abserr, &neval);
    if (st != GSL_SUCCESS || !(abserr <= epsrel * fabs(res))) {
        st = gsl_integration_qag(&F, a, b, 0.0, epsrel, ACCT_QUAD_LIMIT, GSL_INTEG_GAUSS31, w, &res,
                                 &abserr);
        if (st != GSL_SUCCESS && !(abserr <= ACCT_QUAD_EPSREL_ACCEPT * scale * fabs(res)))
            return DP_ENUMERIC;
    }
    if (!isfinite(res) || res < 0.0)
        return DP_ENUMERIC;
    *val = res;
    return DP_OK;
}

/* Log of the integral of exp(g) over the piece [dlo, dhi] (one of them infinite), where g peaks
 * inside [blo, bhi]. Returns -HUGE_VAL for an empty/zero piece. */
static int sgm_piece(sgm_ctx *c, gsl_integration_workspace *w, double dlo, double dhi, double blo,
                     double bhi, double *log_int)
{
    double sigma = sqrt(c->s2), gmax;
    double zp = sgm_peak(c, blo, bhi, &gmax);
    if (gmax == -HUGE_VAL) {
        *log_int = -HUGE_VAL;
        return DP_OK;
    }
    if (isnan(gmax))
        return DP_ENUMERIC;
    c->shift = gmax;
    /* Window: step out from the peak until the log-integrand is ACCT_QUAD_LOG_WINDOW below it. The
     * normal factor alone guarantees this within sqrt(2 * window) sigma ~ 11 sigma. */
    double lo, hi;
    log_window(sgm_log_integrand_fn, c, zp, gmax, sigma, dlo, dhi, &lo, &hi);
    double i1, i2;
    if (sgm_qag(c, w, lo, zp, &i1) != DP_OK || sgm_qag(c, w, zp, hi, &i2) != DP_OK)
        return DP_ENUMERIC;
    double s = i1 + i2;
    *log_int = s > 0.0 ? gmax + log(s) : -HUGE_VAL;
    return DP_OK;
}

/* Integral of exp(g) over the window [wlo, whi] of the u > 0 piece; g may have several spikes in it
 * (sigma < 1), which qag resolves adaptively; the scale is the peak found by golden section. */
static int sgm_window(sgm_ctx *c, gsl_integration_workspace *w, double wlo, double whi,
                      double *log_int)
{
    double gmax;
    double zp = sgm_peak(c, wlo, whi, &gmax);
    if (gmax == -HUGE_VAL) {
        *log_int = -HUGE_VAL;
        return DP_OK;
    }
    if (isnan(gmax))
        return DP_ENUMERIC;
    c->shift = gmax;
    double i1, i2;
    if (sgm_qag(c, w, wlo, zp, &i1) != DP_OK || sgm_qag(c, w, zp, whi, &i2) != DP_OK)
        return DP_ENUMERIC;
    double s = i1 + i2;
    *log_int = s > 0.0 ? gmax + log(s) : -HUGE_VAL;
    return DP_OK;
}

/* Margin around a significant component, in units of sigma: a normal tail beyond 12 sigma is
 * e^-72 ~ 5e-32 of its peak. */
#define ACCT_COMPONENT_MARGIN_SIGMA 12.0
/* Components (binomial terms) more than this below the largest one in log are dropped: e^-50 ~
 * 2e-22. */
#define ACCT_COMPONENT_LOG_CUT 50.0
/* Most disjoint windows tracked (the component weights have at most two local maxima in k). */
#define ACCT_MAX_WINDOWS 8

/* The u > 0 integrand is a mixture of normal bumps centred at z = k (k = 2..ceil(alpha)) with
 * weights C(alpha,k) q^k (1-q)^(alpha-k) e^{(k^2-k)/(2 s^2)} (MTZ 2019, §3.3 expansions; for
 * fractional alpha the second expansion puts them at alpha - j, within 1 of an integer). The
 * significant k form at most two runs (log weight = concave + convex in k); each run becomes an
 * integration window widened by 1 + ACCT_COMPONENT_MARGIN_SIGMA sigma. This makes the quadrature
 * robust to bimodal and (sigma < 1) comb-shaped integrands that a single peak search would miss. */
static int sgm_right(sgm_ctx *c, gsl_integration_workspace *w, double *log_int)
{
    const double a = c->alpha, sigma = sqrt(c->s2), inv2s2 = 1.0 / (2.0 * c->s2);
    const double kmax = ceil(a);
    /* pass 1: largest log weight; pass 2: runs above the cut */
    double lmax = -HUGE_VAL;
    for (int pass = 0; pass < 2; pass++) {
        double wlo[ACCT_MAX_WINDOWS], whi[ACCT_MAX_WINDOWS];
        int nw = 0;
        double lc = 0.0, run_lo = -1.0;
        for (double k = 2.0; k <= kmax; k += 1.0) {
            if (((long long)k - 2) % ACCT_LNCHOOSE_RESYNC == 0) {
                gsl_sf_result r1, r2, r3;
                if (gsl_sf_lngamma_e(a + 1.0, &r1) || gsl_sf_lngamma_e(k + 1.0, &r2) ||
                    gsl_sf_lngamma_e(a - k + 1.0, &r3))
                    return DP_ENUMERIC;
                lc = r1.val - r2.val - r3.val;
            }
            double lw = lc + k * c->lq + (a - k) * c->l1q + (k * k - k) * inv2s2;
            if (k < kmax)
                lc += log((a - k) / (k + 1.0));
            if (pass == 0) {
                if (lw > lmax)
                    lmax = lw;
                continue;
            }
            bool sig = lw >= lmax - ACCT_COMPONENT_LOG_CUT;
            if (sig && run_lo < 0.0)
                run_lo = k;
            if ((!sig || k == kmax) && run_lo >= 0.0) {
                double run_hi = sig ? k : k - 1.0;
                if (nw == ACCT_MAX_WINDOWS)
                    return DP_ENUMERIC;
                wlo[nw] = run_lo - 1.0 - ACCT_COMPONENT_MARGIN_SIGMA * sigma;
                whi[nw] = run_hi + 1.0 + ACCT_COMPONENT_MARGIN_SIGMA * sigma;
                if (wlo[nw] < 0.5)
                    wlo[nw] = 0.5;
                if (nw > 0 && wlo[nw] <= whi[nw - 1]) /* merge overlapping windows */
                    whi[nw - 1] = whi[nw];
                else
                    nw++;
                run_lo = -1.0;
            }
        }
        if (pass == 0)
            continue;
        dp_lse acc;
        dp_lse_init(&acc);
        for (int i = 0; i < nw; i++) {
            double li;
            if (sgm_window(c, w, wlo[i], whi[i], &li) != DP_OK)
                return DP_ENUMERIC;
            dp_lse_add(&acc, li);
        }
        *log_int = dp_lse_value(&acc);
    }
    return DP_OK;
}

/* Trapezoid nodes shared by the fractional orders of one (q, sigma) within a call: the nodes are
 * zlo + i h0 (level 0) and zlo + (j + 1/2) h0 / 2^(L-1) (level L), independent of the order, and
 * u = q expm1(t), log1p(u) do not depend on it either; only expm1(alpha log1p u) and the series do.
 * A cached value is the one the same expression computes, so results do not depend on the cache. */
#define ACCT_TRAP_LEVELS 10
typedef struct sgm_nodes {
    double q, sigma;                /* key; sigma == 0: empty */
    double *u[ACCT_TRAP_LEVELS];    /* u at the node, NAN until computed */
    double *l1pu[ACCT_TRAP_LEVELS]; /* log1p(u), NAN until computed */
    size_t cap[ACCT_TRAP_LEVELS];
} sgm_nodes;

static void sgm_nodes_free(sgm_nodes *nc)
{
    if (nc == NULL)
        return;
    for (int l = 0; l < ACCT_TRAP_LEVELS; l++) {
        dp_free(nc->u[l]);
        dp_free(nc->l1pu[l]);
    }
    dp_free(nc);
}

/* The cache for (q, sigma): *holder, (re)keyed and emptied when it held another pair; NULL (no
 * caching) when out of memory. */
static sgm_nodes *sgm_nodes_for(sgm_nodes **holder, double q, double sigma)
{
    sgm_nodes *nc = *holder;
    if (nc == NULL && (nc = *holder = dp_calloc(1, sizeof *nc)) == NULL)
        return NULL;
    if (nc->q != q || nc->sigma != sigma) {
        for (int l = 0; l < ACCT_TRAP_LEVELS; l++)
            for (size_t k = 0; k < nc->cap[l]; k++)
                nc->u[l][k] = nc->l1pu[l][k] = DP_NAN;
        nc->q = q;
        nc->sigma = sigma;
    }
    return nc;
}

/* Slots of node idx at level (grown on demand); false when out of memory or out of levels. */
static bool sgm_node_slot(sgm_nodes *nc, int level, size_t idx, double **u, double **l1pu)
{
    if (level >= ACCT_TRAP_LEVELS)
        return false;
    if (idx >= nc->cap[level]) {
        size_t cap = nc->cap[level] ? 2 * nc->cap[level] : 64;
        while (cap <= idx)
            cap *= 2;
        double *nu = dp_realloc(nc->u[level], cap * sizeof *nu);
        if (nu == NULL)
            return false;
        nc->u[level] = nu;
        double *nl = dp_realloc(nc->l1pu[level], cap * sizeof *nl);
        if (nl == NULL)
            return false;
        nc->l1pu[level] = nl;
        for (size_t k = nc->cap[level]; k < cap; k++)
            nu[k] = nl[k] = DP_NAN;
        nc->cap[level] = cap;
    }
    *u = &nc->u[level][idx];
    *l1pu = &nc->l1pu[level][idx];
    return true;
}

/* u at node z (level, idx), from the cache when there is one. */
static double sgm_node_u(sgm_nodes *nc, const sgm_ctx *c, int level, size_t idx, double z,
                         double **l1pu, double *local)
{
    double *us;
    if (nc != NULL && sgm_node_slot(nc, level, idx, &us, l1pu)) {
        if (isnan(*us))
            *us = c->q * expm1((z - 0.5) * c->inv_s2);
        return *us;
    }
    *local = DP_NAN;
    *l1pu = local;
    return c->q * expm1((z - 0.5) * c->inv_s2);
}

/* ---- sampled Gaussian: fractional orders, trapezoidal rule on the line ----
 * The integrand F(z) = phi_sigma(z) f(u(z)) of A_alpha - 1 (DESIGN above) is analytic in the strip
 * |Im z| < pi sigma^2 (the only singularities are the branch points where 1 + u = 0) and decays
 * like a Gaussian, so the trapezoidal rule on the whole line converges geometrically in 1/h:
 * halving h roughly squares its error (Trefethen & Weideman 2014, "The exponentially convergent
 * trapezoidal rule", SIAM Review 56(3), §5). We sum h sum_i F(z0 + i h) on a window that holds
 * every node where F exceeds e^-ACCT_TRAP_LOG_CUT of its maximum, halve h (nested nodes) until two
 * successive sums agree to ACCT_TRAP_RTOL, and accept the finer one, whose error is then far below
 * that. Cases the rule cannot settle cheaply (sigma small against the bump spacing, very large
 * orders, an integrand still significant at the window's ends) return false and the adaptive
 * Gauss-Kronrod path below decides. The first step is h0 = min(1.5 sigma, pi sigma^2 / 2): the
 * rule's error for a Gaussian of width sigma is ~2 exp(-2 pi^2 sigma^2 / h^2) (e^-35 at h0 / 2),
 * and the strip limits h below sigma ~ 1. The two methods agree to 2e-12 on 8,280 (q, sigma,
 * order) settings; tests/vectors/mpmath_rdp.json covers both paths. */
#define ACCT_TRAP_MAX_NODES 1024  /* most integrand evaluations before handing over */
#define ACCT_TRAP_MIN_LEVEL 2     /* accept no coarser step than h0 / 4 */
#define ACCT_TRAP_RTOL      1e-10 /* agreement of two successive halvings */
#define ACCT_TRAP_LOG_CUT   45.0  /* nodes below max - 45 (e^-45 ~ 3e-20) bound the window */
#define ACCT_TRAP_MAX_ORDER 512.0 /* larger orders: the adaptive path */

/* exp(log-integrand(z) - shift), computed without the log/exp round trip where f(u) is a plain
 * double (the same formulas as sgm_log_f); the log form elsewhere. */
static double sgm_integrand_scaled_u(const sgm_ctx *c, double z, double u, double *l1pu,
                                     double shift)
{
    const double alpha = c->alpha;
    if (u == 0.0)
        return 0.0;
    double au = alpha * u, f;
    if (fabs(u) < c->series_u) {
        f = sgm_series(c, u);
        return f > 0.0 ? f * exp(-0.5 * z * z * c->inv_s2 - shift) : 0.0;
    }
    if (isnan(*l1pu))
        *l1pu = log1p(u);
    double L = alpha * *l1pu;
    if (!(u < 0.0 || L < ACCT_EXP_SAFE))
        return exp(sgm_log_integrand(c, z) - shift);
    f = expm1(L) - au;
    if (!(f > 0.0))
        return f == 0.0 ? 0.0 : DP_NAN; /* as log(f) in sgm_log_f */
    return f * exp(-0.5 * z * z * c->inv_s2 - shift);
}

static bool sgm_log_am1_trap(sgm_ctx *c, double sigma, sgm_nodes *nc, double *out)
{
    const double a = c->alpha, inv2s2 = 0.5 * c->inv_s2;
    if (a > ACCT_TRAP_MAX_ORDER || !(sigma >= 0.2))
        return false;
    /* right extent: the last significant bump (as sgm_right: centres k = 2..ceil(alpha), log
     * weights lnC(alpha,k) + k log q + (alpha-k) log(1-q) + (k^2-k)/(2 s^2)) */
    const double kmax = ceil(a);
    double lw[(int)ACCT_TRAP_MAX_ORDER + 2];
    double lc = log(c->coef[2]), lmax = -HUGE_VAL;
    int nk = 0;
    for (double k = 2.0; k <= kmax; k += 1.0, nk++) {
        lw[nk] = lc + k * c->lq + (a - k) * c->l1q + (k * k - k) * inv2s2;
        if (lw[nk] > lmax)
            lmax = lw[nk];
        if (k < kmax)
            lc += log((a - k) / (k + 1.0));
    }
    double ksig = 2.0;
    for (int i = 0; i < nk; i++)
        if (lw[i] >= lmax - 50.0)
            ksig = 2.0 + i;
    /* order-independent nodes (sgm_nodes): zlo and h0 depend on sigma only */
    const double zlo = -13.0 * sigma - 1.0, zhi = ksig + 1.0 + 13.0 * sigma;
    const double h0 = fmin(1.5 * sigma, 0.5 * M_PI * c->s2);
    /* level 0: nodes zlo + i h0, i = 0..n */
    const double nd = ceil((zhi - zlo) / h0); /* +inf or NaN for sigma near DBL_MAX */
    if (!((nd + 1.0) * (1 << ACCT_TRAP_MIN_LEVEL) <= ACCT_TRAP_MAX_NODES))
        return false;
    const int n = (int)nd;
    double g[ACCT_TRAP_MAX_NODES + 1];
    double gmax = -HUGE_VAL;
    for (int i = 0; i <= n; i++) {
        const double z = zlo + i * h0;
        if ((z - 0.5) * c->inv_s2 > ACCT_EXP_SAFE) {
            g[i] = sgm_log_integrand(c, z);
        } else {
            double *l1pu, local;
            double u = sgm_node_u(nc, c, 0, (size_t)i, z, &l1pu, &local);
            g[i] = -0.5 * z * z * c->inv_s2 + sgm_log_f_u(c, u, l1pu);
        }
        if (isnan(g[i]))
            return false;
        if (g[i] > gmax)
            gmax = g[i];
    }
    if (!isfinite(gmax))
        return false;
    /* trim to the nodes above the cut, plus one on each side; both ends must be below it */
    int i0 = 0, i1 = n;
    while (i0 <= n && g[i0] < gmax - ACCT_TRAP_LOG_CUT)
        i0++;
    while (i1 >= 0 && g[i1] < gmax - ACCT_TRAP_LOG_CUT)
        i1--;
    if (i0 == 0 || i1 == n)
        return false; /* still significant at a window end */
    i0--;
    i1++;
    const double shift = gmax;
    size_t m = (size_t)(i1 - i0), jbase = (size_t)i0; /* intervals; first one's absolute index */
    double sum = 0.0, h = h0;
    for (int i = i0; i <= i1; i++)
        sum += exp(g[i] - shift);
    double prev = sum * h;
    size_t evals = (size_t)n + 1;
    for (int level = 1;; level++) {
        /* midpoints of the current intervals: zlo + (J + 1/2) h, J = jbase .. jbase + m - 1 */
        for (size_t j = 0; j < m; j++) {
            const size_t J = jbase + j;
            const double z = zlo + ((double)J + 0.5) * h;
            double fz;
            if ((z - 0.5) * c->inv_s2 > ACCT_EXP_SAFE || shift < -600.0) {
                fz = exp(sgm_log_integrand(c, z) - shift);
            } else {
                double *l1pu, local;
                double u = sgm_node_u(nc, c, level, J, z, &l1pu, &local);
                fz = sgm_integrand_scaled_u(c, z, u, l1pu, shift);
            }
            if (!(fz <= 1e260)) /* NaN, or far above the level-0 maximum */
                return false;
            sum += fz;
        }
        evals += m;
        m *= 2;
        jbase *= 2;
        h *= 0.5;
        double cur = sum * h;
        if (level >= ACCT_TRAP_MIN_LEVEL && fabs(cur - prev) <= ACCT_TRAP_RTOL * cur) {
            if (!(cur > 0.0))
                return false;
            *out = shift + log(cur) - log(sigma) - 0.5 * log(2.0 * M_PI);
            return isfinite(*out);
        }
        prev = cur;
        if (evals + m > ACCT_TRAP_MAX_NODES)
            return false;
    }
}

static int sgm_log_am1_frac(double q, double sigma, double alpha, gsl_integration_workspace *w,
                            sgm_nodes *nc, double *out)
{
    sgm_ctx c;
    sgm_ctx_init(&c, q, sigma, alpha);
    if (sgm_log_am1_trap(&c, sigma, nc, out))
        return DP_OK;
    double lL, lR;
    /* u < 0 piece: z in (-inf, 1/2), where 0 <= f(u) <= f(-q) and the integrand is unimodal. */
    double bl = 0.5 - 45.0 * sigma - 1.0;
    if (sgm_piece(&c, w, -HUGE_VAL, 0.5, bl, 0.5, &lL) != DP_OK)
        return DP_ENUMERIC;
    /* u > 0 piece: z in (1/2, inf). */
    if (sgm_right(&c, w, &lR) != DP_OK)
        return DP_ENUMERIC;
    /* normal density 1/(sigma sqrt(2 pi)) */
    *out = dp_log_add(lL, lR) - log(sigma) - 0.5 * log(2.0 * M_PI);
    return isnan(*out) ? DP_ENUMERIC : DP_OK;
}

static int sgm_rdp(double q, double sigma, double alpha, gsl_integration_workspace **w,
                   sgm_nodes **nc, double *out, dp_err *err)
{
    if (q >= 1.0) {
        *out = acct_rdp_gaussian(sigma, alpha);
        return DP_OK;
    }
    if (sigma < ACCT_SIGMA_TINY) {
        *out = HUGE_VAL;
        return DP_OK;
    }
    double lam1;
    int rc;
    if (alpha == floor(alpha)) {
        rc = sgm_log_am1_int(q, sigma, alpha, &lam1);
    } else {
        if (*w == NULL) {
            *w = gsl_integration_workspace_alloc(ACCT_QUAD_LIMIT);
            if (*w == NULL)
                return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        }
        sgm_nodes *nodes = nc != NULL ? sgm_nodes_for(nc, q, sigma) : NULL;
        rc = sgm_log_am1_frac(q, sigma, alpha, *w, nodes, &lam1);
    }
    if (rc != DP_OK)
        return dp_err_set(err, DP_ENUMERIC, NULL,
                          "RDP of the sampled Gaussian did not converge (q=%g, sigma=%g, order=%g)",
                          q, sigma, alpha);
    /* log A = log1p(A - 1) = log(1 + e^lam1) */
    *out = dp_log_add(0.0, lam1) / (alpha - 1.0);
    return DP_OK;
}

int acct_rdp_sampled_gaussian(double q, double sigma, double alpha, double *out, dp_err *err)
{
    if (!(q > 0.0 && q <= 1.0) || !(sigma > 0.0) || !isfinite(sigma) || !(alpha > 1.0) ||
        !(alpha <= ACCT_RDP_MAX_ORDER))
        return dp_err_set(err, DP_EINVAL, NULL, "sampled Gaussian parameters out of domain");
    gsl_integration_workspace *w = NULL;
    int rc = sgm_rdp(q, sigma, alpha, &w, NULL, out, err);
    if (w)
        gsl_integration_workspace_free(w);
    return rc;
}

/* ---- tree evaluation ---- */

/* Central moments of the Gaussian likelihood ratio used by WBK 2019 Thm. 27 (see swor_int). */
#define ACCT_WBK_MAX_MOMENT 256 /* moments are used for j <= this (as dp_accounting, max_alpha) */

typedef struct rdp_ws {
    acct_neighboring nb;
    gsl_integration_workspace *w; /* lazily allocated quadrature workspace */
    acct_tuning_cache *tuning; /* prepared repeat_and_select nodes (tuning.h), lazily allocated */
    double wbk_sigma;          /* sigma of the cached moments (0 = none) */
    int wbk_n;                 /* wbk_logB[2..wbk_n] are valid */
    double wbk_logB[ACCT_WBK_MAX_MOMENT + 2]; /* log E[(L - 1)^k], k even (Thm. 27 bound) */
    sgm_nodes *nodes; /* trapezoid nodes of the last sampled Gaussian, lazily allocated */
    /* The last sampled Gaussian evaluated: sgm_rdp is a function of (q, sigma, alpha) alone, so a
     * tree holding the same mechanism twice (the ledger's log of one round event composed with the
     * next charge of it) evaluates it once per order. sgm_ok: the four fields are set. */
    bool sgm_ok;
    double sgm_q, sgm_sigma, sgm_alpha, sgm_out;
} rdp_ws;

/* Prefixes a child's error path, except "neighboring", which is a request-level field. */
static void prefix_path(dp_err *err, const char *name)
{
    if (err && strcmp(err->field, "neighboring") != 0)
        dp_err_prefix_field(err, name);
}

/* Structural support check with field paths (before any number is computed). */
static int rdp_supported(const acct_event *ev, acct_neighboring nb, dp_err *err)
{
    int rc = DP_OK;
    switch (ev->type) {
        case ACCT_EV_POISSON:
            if (nb != ACCT_NB_ADD_REMOVE)
                return dp_err_set(err, DP_EINVAL, "neighboring",
                                  "poisson_sampled is accounted under add_remove neighbouring only "
                                  "(Mironov, Talwar & Zhang 2019)");
            if (ev->child->type != ACCT_EV_GAUSSIAN) {
                dp_err_set(err, DP_EINVAL, "type",
                           "RDP of poisson_sampled supports a gaussian inner event only");
                dp_err_prefix_field(err, "event");
                return DP_EINVAL;
            }
            return DP_OK;
        case ACCT_EV_SWOR:
            if (nb != ACCT_NB_REPLACE_ONE)
                return dp_err_set(err, DP_EINVAL, "neighboring",
                                  "sampled_without_replacement is accounted under replace_one "
                                  "neighbouring only (Wang, Balle & Kasiviswanathan 2019)");
            rc = rdp_supported(ev->child, nb, err);
            if (rc != DP_OK)
                prefix_path(err, "event");
            return rc;
        case ACCT_EV_SELF_COMPOSED:
            rc = rdp_supported(ev->child, nb, err);
            if (rc != DP_OK)
                prefix_path(err, "event");
            return rc;
        case ACCT_EV_COMPOSED:
            for (size_t i = 0; i < ev->n_children; i++) {
                rc = rdp_supported(ev->children[i], nb, err);
                if (rc != DP_OK) {
                    char idx[32];
                    snprintf(idx, sizeof idx, "[%zu]", i);
                    prefix_path(err, idx);
                    prefix_path(err, "events");
                    return rc;
                }
            }
            return DP_OK;
        case ACCT_EV_REPEAT_SELECT: /* Papernot & Steinke 2022, via accounting/tuning.h */
            rc = rdp_supported(ev->child, nb, err);
            if (rc != DP_OK)
                prefix_path(err, "event");
            return rc;
        default:
            return DP_OK;
    }
}

static int node_rdp(const acct_event *ev, double alpha, rdp_ws *ws, double *out, dp_err *err);
static bool tree_quasiconvex(const acct_event *ev);

/* eps(infinity) of a node, an upper bound (+inf when unknown): used by WBK 2019, Thm. 9. */
static double node_rdp_inf(const acct_event *ev)
{
    switch (ev->type) {
        case ACCT_EV_PURE:
            return ev->epsilon;
        case ACCT_EV_LAPLACE:
            return 1.0 / ev->noise_multiplier; /* Mironov 2017, Table II: alpha -> inf */
        case ACCT_EV_SELF_COMPOSED:
            return (double)ev->count * node_rdp_inf(ev->child);
        case ACCT_EV_COMPOSED: {
            double s = 0.0;
            for (size_t i = 0; i < ev->n_children; i++)
                s += node_rdp_inf(ev->children[i]);
            return s;
        }
        case ACCT_EV_SWOR:
            return node_rdp_inf(ev->child); /* subsampling never increases eps(inf) */
        case ACCT_EV_REPEAT_SELECT: {       /* pure bound of the search (tuning.h) */
            double e = node_rdp_inf(ev->child), out = HUGE_VAL;
            if (isfinite(e) && acct_tuning_pure_epsilon(&ev->dist, e, &out, NULL) != DP_OK)
                out = HUGE_VAL;
            return out;
        }
        default:
            return HUGE_VAL;
    }
}

/* Wang, Balle & Kasiviswanathan 2019, Thm. 9: sampling m of n without replacement (gamma = m/n),
 * replace-one, integer alpha >= 2, inner mechanism with RDP eps(j) and eps(inf):
 *   A = 1 + gamma^2 C(alpha,2) min{4(e^{eps(2)} - 1), e^{eps(2)} min{2, (e^{eps(inf)} - 1)^2}}
 *         + sum_{j=3}^{alpha} gamma^j C(alpha,j) e^{(j-1) eps(j)} min{2, (e^{eps(inf)} - 1)^j},
 *   r(alpha) <= log(A)/(alpha - 1). */
/* ---- WBK 2019 Thm. 27: moments of the Gaussian likelihood ratio ----
 * For the pair N(1, s^2), N(0, s^2) with multiplier sigma, the log-likelihood ratio at z ~ N(0,
 * s^2) is W ~ N(-1/(2 sigma^2), 1/sigma^2), and B_k = E[(e^W - 1)^k] = the k-th forward difference
 * at 0 of f(i) = e^{(i-1) eps(i)}. Forming that alternating sum loses every digit for large sigma
 * (B_k ~ (k-1)!! sigma^-k), so B_k (k even, a positive integrand) is integrated instead, in log
 * space: on w < 0 and w > 0 the log-integrand k log|e^w - 1| - (w - mu)^2/(2 s^2) is concave, hence
 * unimodal. */
typedef struct mom_ctx {
    double k, mu, s2; /* moment, mean and variance of W */
    double shift;     /* log-integrand at the peak */
} mom_ctx;

static double mom_log_integrand(const mom_ctx *c, double w)
{
    double lb = w > 0.0 ? dp_logexpm1(w) : dp_log1mexp(w); /* log |e^w - 1| */
    return c->k * lb - (w - c->mu) * (w - c->mu) / (2.0 * c->s2);
}

static double mom_integrand(double w, void *p)
{
    const mom_ctx *c = p;
    return exp(mom_log_integrand(c, w) - c->shift);
}

static double mom_log_integrand_fn(const void *c, double w)
{
    return mom_log_integrand(c, w);
}

/* log of the integral of exp(h) over [dlo, dhi] (one end may be infinite), h unimodal with its
 * peak inside [blo, bhi]; windowed like sgm_piece. */
static int mom_piece(mom_ctx *c, gsl_integration_workspace *w, double dlo, double dhi, double blo,
                     double bhi, double *out)
{
    const double s = sqrt(c->s2);
    double gmax;
    double zp = golden_peak(mom_log_integrand_fn, c, blo, bhi, s, &gmax);
    if (gmax == -HUGE_VAL) {
        *out = -HUGE_VAL;
        return DP_OK;
    }
    if (isnan(gmax))
        return DP_ENUMERIC;
    c->shift = gmax;
    double lo, hi;
    log_window(mom_log_integrand_fn, c, zp, gmax, s, dlo, dhi, &lo, &hi);
    gsl_function F = {mom_integrand, c};
    double scale = gmax > 1.0 ? gmax : 1.0, epsrel = ACCT_QUAD_EPSREL * scale, sum = 0.0;
    if (epsrel > ACCT_QUAD_EPSREL_MAX)
        epsrel = ACCT_QUAD_EPSREL_MAX;
    const double ends[3] = {lo, zp, hi};
    for (int i = 0; i < 2; i++) {
        if (!(ends[i + 1] > ends[i]))
            continue;
        double res = 0.0, abserr = 0.0;
        int st = gsl_integration_qag(&F, ends[i], ends[i + 1], 0.0, epsrel, ACCT_QUAD_LIMIT,
                                     GSL_INTEG_GAUSS31, w, &res, &abserr);
        if ((st != GSL_SUCCESS && !(abserr <= ACCT_QUAD_EPSREL_ACCEPT * scale * fabs(res))) ||
            !isfinite(res) || res < 0.0)
            return DP_ENUMERIC;
        sum += res;
    }
    *out = sum > 0.0 ? gmax + log(sum) : -HUGE_VAL;
    return DP_OK;
}

/* log B_k for even k >= 4 (k = 2 is exact: e^{1/sigma^2} - 1). */
static int wbk_log_even_moment(double sigma, double k, gsl_integration_workspace *w, double *out)
{
    const double s2 = 1.0 / (sigma * sigma), s = 1.0 / sigma, mu = -0.5 * s2;
    mom_ctx c = {k, mu, s2, 0.0};
    double lneg, lpos;
    /* w < 0: |e^w - 1| < 1, the peak lies between mu - 40 s and 0 */
    if (mom_piece(&c, w, -HUGE_VAL, 0.0, (mu < 0.0 ? mu : 0.0) - 40.0 * s - 1.0, 0.0, &lneg))
        return DP_ENUMERIC;
    /* w > 0: the stationary point satisfies (w - mu)/s^2 = k e^w/(e^w - 1) >= k */
    double top = mu + 2.6 * k * s2;
    if (mom_piece(&c, w, 0.0, HUGE_VAL, 0.0, (top > 0.5 ? top : 0.5) + 40.0 * s, &lpos))
        return DP_ENUMERIC;
    *out = dp_log_add(lneg, lpos) - log(s) - 0.5 * log(2.0 * M_PI);
    return isnan(*out) ? DP_ENUMERIC : DP_OK;
}

/* Fills ws->wbk_logB[2..n] (n <= ACCT_WBK_MAX_MOMENT + 1) for sigma, reusing what is cached. */
static int wbk_moments(rdp_ws *ws, double sigma, int n, dp_err *err)
{
    if (ws->wbk_sigma != sigma) {
        ws->wbk_sigma = sigma;
        ws->wbk_n = 1;
    }
    if (n <= ws->wbk_n)
        return DP_OK;
    if (ws->w == NULL && (ws->w = gsl_integration_workspace_alloc(ACCT_QUAD_LIMIT)) == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (int k = ws->wbk_n + 1; k <= n; k++) {
        if (k % 2 == 1)
            continue;
        if (k == 2) {
            ws->wbk_logB[2] = dp_logexpm1(1.0 / (sigma * sigma));
        } else if (wbk_log_even_moment(sigma, k, ws->w, &ws->wbk_logB[k]) != DP_OK) {
            ws->wbk_sigma = 0.0;
            return dp_err_set(err, DP_ENUMERIC, NULL,
                              "moment %d of the Gaussian likelihood ratio did not converge", k);
        }
    }
    for (int k = 3; k <= n; k += 2) /* odd: Cauchy-Schwarz, sqrt(B_{k-1} B_{k+1}) */
        if (k + 1 <= n)
            ws->wbk_logB[k] = 0.5 * (ws->wbk_logB[k - 1] + ws->wbk_logB[k + 1]);
    ws->wbk_n = n % 2 == 1 ? n - 1 : n; /* an odd top entry needs B_{n+1}: recomputed next time */
    return DP_OK;
}

static int swor_int(const acct_event *ev, double alpha, rdp_ws *ws, double *out, dp_err *err)
{
    const double lg = log((double)ev->sample_size) - log((double)ev->source_size);
    const double einf = node_rdp_inf(ev->child);
    const double lem1inf = einf == HUGE_VAL ? HUGE_VAL : dp_logexpm1(einf); /* log(e^einf - 1) */
    double e2;
    int rc = node_rdp(ev->child, 2.0, ws, &e2, err);
    if (rc != DP_OK)
        return rc;
    dp_lse acc;
    dp_lse_init(&acc);
    double lc;
    if (lnchoose(alpha, 2.0, &lc) != DP_OK)
        return dp_err_set(err, DP_ENUMERIC, NULL, "lnchoose failed");
    /* j = 2: min{ log 4 + log(e^e2 - 1), e2 + min(log 2, 2 log(e^einf - 1)) } */
    double m2a = log(4.0) + dp_logexpm1(e2);
    double m2b = e2 + fmin(M_LN2, 2.0 * lem1inf);
    dp_lse_add(&acc, 2.0 * lg + lc + fmin(m2a, m2b));
    /* Gaussian inner event: WBK 2019 Thm. 27 adds the bound 4 B_j on the j-th central moment of
     * the likelihood ratio (B_j exact for even j, sqrt(B_{j-1} B_{j+1}) for odd j), used up to
     * j = ACCT_WBK_MAX_MOMENT. */
    bool gauss = ev->child->type == ACCT_EV_GAUSSIAN;
    if (gauss) {
        int nmom = alpha + 1.0 < ACCT_WBK_MAX_MOMENT + 1 ? (int)alpha + 1 : ACCT_WBK_MAX_MOMENT + 1;
        if ((rc = wbk_moments(ws, ev->child->noise_multiplier, nmom, err)) != DP_OK)
            return rc;
    }
    for (double j = 3.0; j <= alpha; j += 1.0) {
        double ej;
        rc = node_rdp(ev->child, j, ws, &ej, err);
        if (rc != DP_OK)
            return rc;
        if (lnchoose(alpha, j, &lc) != DP_OK)
            return dp_err_set(err, DP_ENUMERIC, NULL, "lnchoose failed");
        double t = (j - 1.0) * ej + fmin(M_LN2, j * lem1inf);
        if (gauss && alpha <= ACCT_WBK_MAX_MOMENT) /* as dp_accounting: moments up to 256 */
            t = fmin(t, log(4.0) + ws->wbk_logB[(int)j]);
        dp_lse_add(&acc, j * lg + lc + t);
    }
    double lsum = dp_lse_value(&acc);
    if (isnan(lsum))
        return dp_err_set(err, DP_ENUMERIC, NULL, "sampled_without_replacement RDP is undefined");
    *out = dp_log_add(0.0, lsum) / (alpha - 1.0);
    return DP_OK;
}

static int swor_rdp(const acct_event *ev, double alpha, rdp_ws *ws, double *out, dp_err *err)
{
    if (ev->sample_size == ev->source_size) /* the whole data set: the inner mechanism itself */
        return node_rdp(ev->child, alpha, ws, out, err);
    double fl = floor(alpha);
    if (fl == alpha && alpha >= 2.0)
        return swor_int(ev, alpha, ws, out, err);
    /* (alpha-1) r(alpha) is convex in alpha and 0 at alpha = 1: interpolate linearly between the
     * integer orders around alpha (for 1 < alpha < 2, between 1 and 2). */
    double lo = fl < 2.0 ? 1.0 : fl, hi = fl < 2.0 ? 2.0 : fl + 1.0;
    double rlo = 0.0, rhi;
    int rc;
    if (lo >= 2.0 && (rc = swor_int(ev, lo, ws, &rlo, err)) != DP_OK)
        return rc;
    if ((rc = swor_int(ev, hi, ws, &rhi, err)) != DP_OK)
        return rc;
    double x = (alpha - lo) / (hi - lo);
    double h = (1.0 - x) * (lo - 1.0) * rlo + x * (hi - 1.0) * rhi;
    *out = h / (alpha - 1.0);
    return DP_OK;
}

/* repeat_and_select: the child's RDP as the callback tuning.h wants (NAN on error, code kept). */
typedef struct rs_child_ctx {
    const acct_event *child;
    rdp_ws *ws;
    dp_err *err;
    int rc; /* first error from the child */
} rs_child_ctx;

static double rs_child_rdp(double alpha, void *p)
{
    rs_child_ctx *c = p;
    double r;
    int rc = node_rdp(c->child, alpha, c->ws, &r, c->err);
    if (rc != DP_OK) {
        if (c->rc == DP_OK)
            c->rc = rc;
        return DP_NAN;
    }
    return r;
}

static int node_rdp(const acct_event *ev, double alpha, rdp_ws *ws, double *out, dp_err *err)
{
    int rc;
    switch (ev->type) {
        case ACCT_EV_GAUSSIAN:
            *out = acct_rdp_gaussian(ev->noise_multiplier, alpha);
            return DP_OK;
        case ACCT_EV_LAPLACE:
            *out = acct_rdp_laplace(ev->noise_multiplier, alpha);
            return DP_OK;
        case ACCT_EV_ZCDP:
            *out = ev->rho * alpha; /* Bun & Steinke 2016, Def. 1.1 */
            return DP_OK;
        case ACCT_EV_PURE:
            *out = acct_rdp_pure(ev->epsilon, alpha);
            return DP_OK;
        case ACCT_EV_POISSON: {
            double q = ev->sampling_rate, sigma = ev->child->noise_multiplier;
            if (ws->sgm_ok && ws->sgm_q == q && ws->sgm_sigma == sigma && ws->sgm_alpha == alpha) {
                *out = ws->sgm_out;
                return DP_OK;
            }
            if ((rc = sgm_rdp(q, sigma, alpha, &ws->w, &ws->nodes, out, err)) != DP_OK)
                return rc;
            ws->sgm_ok = true;
            ws->sgm_q = q;
            ws->sgm_sigma = sigma;
            ws->sgm_alpha = alpha;
            ws->sgm_out = *out;
            return DP_OK;
        }
        case ACCT_EV_SWOR:
            return swor_rdp(ev, alpha, ws, out, err);
        case ACCT_EV_SELF_COMPOSED: {
            double r;
            if ((rc = node_rdp(ev->child, alpha, ws, &r, err)) != DP_OK)
                return rc;
            /* Mironov 2017, Prop. 1; rounded up, as the ledger's sums (logmath.h) */
            *out = r == 0.0 ? 0.0 : dp_mul_up((double)ev->count, r);
            return DP_OK;
        }
        case ACCT_EV_COMPOSED: {
            double s = 0.0;
            for (size_t i = 0; i < ev->n_children; i++) {
                double r;
                if ((rc = node_rdp(ev->children[i], alpha, ws, &r, err)) != DP_OK)
                    return rc;
                s = dp_sum_up(s, r); /* rounded up, as the ledger's sums (logmath.h) */
            }
            *out = s;
            return DP_OK;
        }
        case ACCT_EV_REPEAT_SELECT: {
            /* Papernot & Steinke 2022 (Thm. 2 / Thm. 6) on the child's curve; the node's auxiliary
             * minimisation is done once per evaluation and kept in ws->tuning. */
            rs_child_ctx c = {ev->child, ws, err, DP_OK};
            rc = acct_tuning_cache_rdp2(&ws->tuning, ev, rs_child_rdp, &c,
                                        tree_quasiconvex(ev->child), alpha, out, err);
            return c.rc != DP_OK ? c.rc : rc;
        }
    }
    return dp_err_set(err, DP_EINVAL, "type", "event type not supported by the RDP accountant");
}

static int eval_prepare(const acct_event *ev, acct_neighboring nb, dp_err *err)
{
    int rc = acct_event_check(ev, false, err);
    if (rc != DP_OK)
        return rc;
    if (nb != ACCT_NB_ADD_REMOVE && nb != ACCT_NB_REPLACE_ONE)
        return dp_err_set(err, DP_EINVAL, "neighboring", "unknown neighbouring relation");
    return rdp_supported(ev, nb, err);
}

static int eval_orders(const acct_event *ev, rdp_ws *ws, const double *orders, size_t n,
                       double *out, dp_err *err)
{
    for (size_t i = 0; i < n; i++) {
        int rc = node_rdp(ev, orders[i], ws, &out[i], err);
        if (rc != DP_OK)
            return rc;
        if (isnan(out[i]))
            return dp_err_set(err, DP_ENUMERIC, NULL, "RDP evaluated to NaN at order %g",
                              orders[i]);
    }
    return DP_OK;
}

int acct_rdp_eval(const acct_event *ev, acct_neighboring nb, const double *orders, size_t n_orders,
                  double *rdp_out, dp_err *err)
{
    int rc = eval_prepare(ev, nb, err);
    if (rc != DP_OK)
        return rc;
    if ((rc = acct_rdp_check_orders(orders, n_orders, err)) != DP_OK)
        return rc;
    rdp_ws ws = {.nb = nb}; /* everything else zero: nothing cached yet */
    rc = eval_orders(ev, &ws, orders, n_orders, rdp_out, err);
    if (ws.w)
        gsl_integration_workspace_free(ws.w);
    acct_tuning_cache_free(ws.tuning);
    sgm_nodes_free(ws.nodes);
    return rc;
}

/* ---- conversions ---- */

const char *acct_conversion_name(acct_conversion c)
{
    switch (c) {
        case ACCT_CONV_MIRONOV2017:
            return "mironov2017";
        case ACCT_CONV_BALLE2020:
            return "balle2020";
        case ACCT_CONV_OPTIMAL:
            return "optimal";
    }
    return "unknown";
}

int acct_conversion_parse(const char *s, acct_conversion *out, dp_err *err)
{
    static const acct_conversion all[] = {ACCT_CONV_MIRONOV2017, ACCT_CONV_BALLE2020,
                                          ACCT_CONV_OPTIMAL};
    for (size_t i = 0; s && i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(s, acct_conversion_name(all[i])) == 0) {
            *out = all[i];
            return DP_OK;
        }
    }
    return dp_err_set(err, DP_EINVAL, "conversion",
                      "conversion must be \"mironov2017\", \"balle2020\" or \"optimal\"");
}

/* The KL shortcut's test dd + expm1(-r) >= 0 (dd = delta * delta), without expm1 where its answer
 * is certain to be false: for 4 dd < r <= 1/2, 1 - e^-r >= r - r^2/2 >= 3r/4 > 3 dd, and expm1 is
 * accurate to an ulp, so fl(expm1(-r)) < -2.9 dd and the sum is negative; for r > 1/2,
 * 1 - e^-r > 0.39 > dd when dd < 0.3. Otherwise (and for NaN) the test is evaluated as written,
 * so the answer is the same as the plain expression's for every input. */
static bool kl_zero(double r, double dd)
{
    if (r > 4.0 * dd && (r <= 0.5 || dd < 0.3))
        return false;
    return dd + expm1(-r) >= 0.0;
}

/* eps at one order. */
static double eps_at(double a, double r, double log_delta, double delta, acct_conversion conv)
{
    if (r == HUGE_VAL)
        return HUGE_VAL;
    if (conv == ACCT_CONV_MIRONOV2017) /* Mironov 2017, Prop. 3 */
        return r - log_delta / (a - 1.0);
    /* KL shortcut: D_alpha >= KL and TV <= sqrt(1 - e^-KL), so (0, delta)-DP when delta^2 >= 1 -
     * e^-r (as dp_accounting's compute_epsilon). */
    if (kl_zero(r, delta * delta))
        return 0.0;
    /* Balle et al. 2020, Thm. 21. */
    double e = r + log1p(-1.0 / a) - (log_delta + log(a)) / (a - 1.0);
    return e > 0.0 ? e : 0.0;
}

/* ---- conversion tables (acct_conv_table in accounting/rdp.h) ----
 * eps_at with the terms that depend only on (alpha, delta) computed once: the same operations in
 * the same order on the same operands, so every value is bit for bit eps_at's. */

static int check_delta(double delta, dp_err *err);

struct acct_conv_table {
    size_t n;
    double delta, log_delta, dd; /* dd = delta * delta, as eps_at computes it */
    acct_conversion base;        /* MIRONOV2017 or BALLE2020 */
    bool increasing;             /* orders strictly increasing (acct_rdp_epsilon_curve_table) */
    double *orders;
    double *c1; /* BALLE2020: log1p(-1 / alpha); MIRONOV2017: unused */
    double *c2; /* BALLE2020: (log delta + log alpha) / (alpha - 1); MIRONOV2017: log delta /
                   (alpha - 1) */
};

acct_conv_table *acct_conv_table_new(const double *orders, size_t n, double delta,
                                     acct_conversion conv, dp_err *err)
{
    int rc = check_delta(delta, err);
    if (rc != DP_OK || (rc = acct_rdp_check_orders(orders, n, err)) != DP_OK)
        return NULL;
    if (conv != ACCT_CONV_MIRONOV2017 && conv != ACCT_CONV_BALLE2020 && conv != ACCT_CONV_OPTIMAL) {
        dp_err_set(err, DP_EINVAL, "conversion", "unknown conversion");
        return NULL;
    }
    acct_conv_table *t = dp_calloc(1, sizeof *t);
    double *a = t != NULL ? dp_malloc(3 * n * sizeof *a) : NULL;
    if (a == NULL) {
        dp_free(t);
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    t->n = n;
    t->delta = delta;
    t->log_delta = log(delta);
    t->dd = delta * delta;
    t->base = conv == ACCT_CONV_MIRONOV2017 ? ACCT_CONV_MIRONOV2017 : ACCT_CONV_BALLE2020;
    t->orders = a;
    t->c1 = a + n;
    t->c2 = a + 2 * n;
    t->increasing = true;
    for (size_t i = 0; i < n; i++) {
        double al = orders[i];
        t->orders[i] = al;
        if (i > 0 && !(orders[i - 1] < al))
            t->increasing = false;
        if (t->base == ACCT_CONV_MIRONOV2017) {
            t->c1[i] = 0.0;
            t->c2[i] = t->log_delta / (al - 1.0);
        } else {
            t->c1[i] = log1p(-1.0 / al);
            t->c2[i] = (t->log_delta + log(al)) / (al - 1.0);
        }
    }
    return t;
}

void acct_conv_table_free(acct_conv_table *t)
{
    if (t == NULL)
        return;
    dp_free(t->orders);
    dp_free(t);
}

/* eps_at(t->orders[i], r, t->log_delta, t->delta, t->base), bit for bit. */
static double eps_at_table(const acct_conv_table *t, size_t i, double r)
{
    if (r == HUGE_VAL)
        return HUGE_VAL;
    if (t->base == ACCT_CONV_MIRONOV2017)
        return r - t->c2[i];
    if (kl_zero(r, t->dd))
        return 0.0;
    double e = r + t->c1[i] - t->c2[i];
    return e > 0.0 ? e : 0.0;
}

/* eps_at split as r + c(alpha) for the bounds of the pruned grid search (which only compare
 * against the best value with a slack, so the different rounding does not matter). */
static double conv_const(double a, double log_delta, acct_conversion conv)
{
    if (conv == ACCT_CONV_MIRONOV2017)
        return -log_delta / (a - 1.0);
    return log1p(-1.0 / a) - (log_delta + log(a)) / (a - 1.0);
}

static double eps_with_const(double r, double cst, double r_kl, acct_conversion conv)
{
    if (r == HUGE_VAL)
        return HUGE_VAL;
    if (conv == ACCT_CONV_MIRONOV2017)
        return r + cst;
    if (r <= r_kl) /* the KL shortcut: delta^2 + expm1(-r) >= 0 */
        return 0.0;
    double e = r + cst;
    return e > 0.0 ? e : 0.0;
}

static double log_delta_at(double a, double r, double eps, acct_conversion conv)
{
    if (r == HUGE_VAL)
        return 0.0;
    if (conv == ACCT_CONV_MIRONOV2017) { /* Mironov 2017, Prop. 3 inverted */
        double l = (a - 1.0) * (r - eps);
        return l < 0.0 ? l : 0.0;
    }
    double kl = 0.5 * dp_log1mexp(-r);                           /* delta <= sqrt(1 - e^-KL) */
    double b = (a - 1.0) * (r - eps + log1p(-1.0 / a)) - log(a); /* Balle et al. 2020, Thm. 21 */
    double l = kl < b ? kl : b;
    return l < 0.0 ? l : 0.0;
}

static int check_curve(const double *orders, const double *rdp, size_t n, dp_err *err)
{
    int rc = acct_rdp_check_orders(orders, n, err);
    if (rc != DP_OK)
        return rc;
    for (size_t i = 0; i < n; i++)
        if (isnan(rdp[i]) || rdp[i] < 0.0)
            return dp_err_set(err, DP_EINVAL, "rdp", "RDP values must be >= 0, got %g", rdp[i]);
    return DP_OK;
}

static int check_delta(double delta, dp_err *err)
{
    if (!isfinite(delta) || delta <= 0.0 || delta >= 1.0)
        return dp_err_set(err, DP_EINVAL, "delta", "delta must be in (0, 1), got %g", delta);
    return DP_OK;
}

static int check_epsilon(double eps, dp_err *err)
{
    if (!isfinite(eps) || eps < 0.0)
        return dp_err_set(err, DP_EINVAL, "epsilon", "epsilon must be finite and >= 0, got %g",
                          eps);
    return DP_OK;
}

int acct_rdp_to_epsilon(const double *orders, const double *rdp, size_t n, double delta,
                        acct_conversion conv, double *eps, double *opt_order, dp_err *err)
{
    int rc;
    if ((rc = check_delta(delta, err)) != DP_OK || (rc = check_curve(orders, rdp, n, err)) != DP_OK)
        return rc;
    double best = HUGE_VAL, ba = DP_NAN, ld = log(delta);
    for (size_t i = 0; i < n; i++) {
        double e = eps_at(orders[i], rdp[i], ld, delta, conv);
        if (e < best) {
            best = e;
            ba = orders[i];
        }
    }
    *eps = best;
    if (opt_order)
        *opt_order = ba;
    return DP_OK;
}

int acct_rdp_to_epsilon_table(const acct_conv_table *t, const double *rdp, double *eps,
                              double *opt_order, dp_err *err)
{
    for (size_t i = 0; i < t->n; i++)
        if (isnan(rdp[i]) || rdp[i] < 0.0)
            return dp_err_set(err, DP_EINVAL, "rdp", "RDP values must be >= 0, got %g", rdp[i]);
    double best = HUGE_VAL, ba = DP_NAN;
    for (size_t i = 0; i < t->n; i++) {
        double e = eps_at_table(t, i, rdp[i]);
        if (e < best) {
            best = e;
            ba = t->orders[i];
        }
    }
    *eps = best;
    if (opt_order)
        *opt_order = ba;
    return DP_OK;
}

int acct_rdp_to_delta(const double *orders, const double *rdp, size_t n, double eps,
                      acct_conversion conv, double *delta, double *opt_order, dp_err *err)
{
    int rc;
    if ((rc = check_epsilon(eps, err)) != DP_OK || (rc = check_curve(orders, rdp, n, err)) != DP_OK)
        return rc;
    /* the first order attaining the minimum of log delta (each value is <= 0) */
    double best = log_delta_at(orders[0], rdp[0], eps, conv), ba = orders[0];
    for (size_t i = 1; i < n; i++) {
        double l = log_delta_at(orders[i], rdp[i], eps, conv);
        if (l < best) {
            best = l;
            ba = orders[i];
        }
    }
    *delta = dp_exp_prob_up(best);
    if (opt_order)
        *opt_order = ba;
    return DP_OK;
}

/* ---- tree-level answers with continuous order search ---- */

typedef struct order_obj {
    const acct_event *ev;
    rdp_ws *ws;
    bool want_delta; /* objective is log delta(eps) instead of eps(delta) */
    double delta, log_delta, eps;
    dp_err *err;
    int rc;
} order_obj;

static double objective(order_obj *o, double a)
{
    double r;
    if (o->rc != DP_OK)
        return HUGE_VAL;
    o->rc = node_rdp(o->ev, a, o->ws, &r, o->err);
    if (o->rc != DP_OK)
        return HUGE_VAL;
    if (o->want_delta)
        return log_delta_at(a, r, o->eps, ACCT_CONV_BALLE2020);
    return eps_at(a, r, o->log_delta, o->delta, ACCT_CONV_BALLE2020);
}

static double objective_x(double x, void *p)
{
    return objective(p, 1.0 + exp(x));
}

/* The objective at grid index i (memo[i] when the grid search evaluated it). */
static double grid_value(order_obj *o, const double *ord, const double *memo, size_t i)
{
    return isnan(memo[i]) ? objective(o, ord[i]) : memo[i];
}

/* Brent's method (GSL, golden section with parabolic steps) in x = log(alpha - 1) on the bracket
 * formed by the grid neighbours of the grid minimum ord[bi] (interior), down to a bracket of
 * ACCT_ORDER_SEARCH_XTOL as the golden-section search. Returns false, with nothing decided, when
 * the bracket is not strict (a tie with a neighbour) or GSL refuses; o->rc carries evaluation
 * errors and running out of memory (then true: the caller stops). The objective is smooth and
 * quasi-convex there, where parabolic steps converge in a handful of evaluations instead of ~20
 * golden-section ones. */
static bool brent_search(order_obj *o, const double *ord, const double *memo, size_t bi,
                         double fmid, double *xbest, double *fbest)
{
    double flo = grid_value(o, ord, memo, bi - 1), fhi = grid_value(o, ord, memo, bi + 1);
    if (o->rc != DP_OK || !(fmid < flo && fmid < fhi) || !isfinite(fmid))
        return false;
    gsl_min_fminimizer *m = gsl_min_fminimizer_alloc(gsl_min_fminimizer_brent);
    if (m == NULL) { /* an error, not the golden-section search: the answer never depends on it */
        o->rc = dp_err_set(o->err, DP_ENOMEM, NULL, "out of memory");
        return true;
    }
    gsl_function F = {objective_x, o};
    double xl = log(ord[bi - 1] - 1.0), xm = log(ord[bi] - 1.0), xu = log(ord[bi + 1] - 1.0);
    bool ok = gsl_min_fminimizer_set_with_values(m, &F, xm, fmid, xl, flo, xu, fhi) == GSL_SUCCESS;
    for (int it = 0; ok && it < ACCT_ORDER_SEARCH_ITERS && o->rc == DP_OK; it++) {
        if (gsl_min_fminimizer_iterate(m) != GSL_SUCCESS) {
            ok = false;
            break;
        }
        if (gsl_min_fminimizer_x_upper(m) - gsl_min_fminimizer_x_lower(m) <
            0.1 * ACCT_ORDER_SEARCH_XTOL)
            break;
    }
    if (ok) {
        *xbest = gsl_min_fminimizer_x_minimum(m);
        *fbest = gsl_min_fminimizer_f_minimum(m);
    }
    gsl_min_fminimizer_free(m);
    return ok || o->rc != DP_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Grid evaluation, then (conv == OPTIMAL) golden-section refinement in log(alpha - 1) between the
 * grid neighbours of the best order. The refined value is taken only if it is smaller. */
/* True when every node's curve is an exact Renyi divergence (or a sum/multiple of them): then
 * (alpha-1) r(alpha) is convex (van Erven & Harremoes 2014, Thm. 11) and the conversion objectives
 * are quasi-convex in alpha. pure (min of two bounds) and sampled_without_replacement (WBK bound,
 * interpolated) are upper bounds without that guarantee. */
static bool tree_quasiconvex(const acct_event *ev)
{
    if (ev->type == ACCT_EV_PURE || ev->type == ACCT_EV_SWOR || ev->type == ACCT_EV_REPEAT_SELECT)
        return false;
    if (ev->child && !tree_quasiconvex(ev->child))
        return false;
    for (size_t i = 0; i < ev->n_children; i++)
        if (!tree_quasiconvex(ev->children[i]))
            return false;
    return true;
}

typedef struct grid_obj {
    const acct_event *ev;
    rdp_ws *ws;
    const double *ord;
    double *val; /* memo: objective at ord[i], NAN until evaluated */
    double *rv;  /* memo: RDP at ord[i] (valid where val is) */
    double *cc;  /* memo: conversion constant at ord[i] (conv_const), NAN until computed */
    double r_kl; /* -log1p(-target^2): RDP at or below which the KL shortcut gives epsilon 0 */
    bool want_delta;
    double target;
    acct_conversion base;
    dp_err *err;
    int rc;
    bool prune_rs; /* rs_pruned_scan allowed (false: the full scan, for tests) */
} grid_obj;

static double grid_f(grid_obj *g, size_t i)
{
    if (!isnan(g->val[i]) || g->rc != DP_OK)
        return g->val[i];
    double r;
    g->rc = node_rdp(g->ev, g->ord[i], g->ws, &r, g->err);
    if (g->rc != DP_OK)
        return HUGE_VAL;
    if (isnan(r)) {
        g->rc =
            dp_err_set(g->err, DP_ENUMERIC, NULL, "RDP evaluated to NaN at order %g", g->ord[i]);
        return HUGE_VAL;
    }
    g->rv[i] = r;
    g->val[i] = g->want_delta ? log_delta_at(g->ord[i], r, g->target, g->base)
                              : eps_at(g->ord[i], r, log(g->target), g->target, g->base);
    return g->val[i];
}

/* Largest bracket handled by the bound-pruned search (its bookkeeping is quadratic in the width).
 */
#define ACCT_PRUNE_MAX_WIDTH 64
/* Relative slack of the pruning test: a candidate is skipped only if its lower bound exceeds the
 * best value by this much (times the extrapolation factor), far above the ~1e-11 relative error of
 * the evaluated RDP values that enter the bound, so rounding can never prune the true minimum. */
#define ACCT_PRUNE_REL 1e-8

/* A lower bound on the RDP of a quasi-convex tree (tree_quasiconvex) at alpha, without
 * quadrature: exact for the closed-form leaves; for the Poisson-sampled Gaussian D_alpha >= KL >= 2
 * TV^2 (monotonicity in alpha, van Erven & Harremoes 2014, Thm. 3; Pinsker's inequality), with
 * TV(mu, mu0) = q TV(N(1, s^2), N(0, s^2)) = q erf(1/(2 sqrt(2) sigma)) because mu - mu0 = q (mu1 -
 * mu0) (MTZ 2019, §3.3 notation). Leaves are shrunk by 1e-12 relative against rounding. */
static double node_rdp_lower(const acct_event *ev, double alpha)
{
    const double shrink = 1.0 - 1e-12;
    switch (ev->type) {
        case ACCT_EV_GAUSSIAN:
            return shrink * acct_rdp_gaussian(ev->noise_multiplier, alpha);
        case ACCT_EV_LAPLACE:
            return shrink * acct_rdp_laplace(ev->noise_multiplier, alpha);
        case ACCT_EV_ZCDP:
            return shrink * ev->rho * alpha;
        case ACCT_EV_POISSON: {
            double q = ev->sampling_rate, s = ev->child->noise_multiplier;
            if (q >= 1.0)
                return shrink * acct_rdp_gaussian(s, alpha);
            double tv = q * erf(1.0 / (2.0 * M_SQRT2 * s));
            return shrink * 2.0 * tv * tv;
        }
        case ACCT_EV_SELF_COMPOSED:
            return (double)ev->count * node_rdp_lower(ev->child, alpha);
        case ACCT_EV_COMPOSED: {
            double sum = 0.0;
            for (size_t i = 0; i < ev->n_children; i++)
                sum += node_rdp_lower(ev->children[i], alpha);
            return shrink * sum;
        }
        default:
            return 0.0;
    }
}

/* Lower bound on the epsilon objective at ord[i] from the orders already evaluated (memo), valid
 * for quasi-convex trees: g(a) = (a - 1) r(a) is convex on [1, inf) with g(1) = 0 (van Erven &
 * Harremoes 2014, Thm. 11) and r is non-decreasing (ibid., Thm. 3). With evaluated a1 < a2 < a the
 * chord through (a1, g(a1)), (a2, g(a2)) extended to a lies below g(a); likewise from the right
 * with a < b1 < b2; and r(a) >= r(a2). The Balle conversion is non-decreasing in r, so it maps a
 * lower bound on r to one on epsilon. *slack receives the tolerance the caller adds to its test. */
static double dmax(double x, double y)
{
    return x > y ? x : y; /* operands are never NaN here */
}

/* The parabola through (x0, y0), (x1, y1), (x2, y2) at x (Lagrange form). */
static double quad_interp(double x0, double y0, double x1, double y1, double x2, double y2,
                          double x)
{
    return y0 * (x - x1) * (x - x2) / ((x0 - x1) * (x0 - x2)) +
           y1 * (x - x0) * (x - x2) / ((x1 - x0) * (x1 - x2)) +
           y2 * (x - x0) * (x - x1) / ((x2 - x0) * (x2 - x1));
}

static double grid_lower_bound(const grid_obj *g, size_t n, size_t i, double *slack, double *est)
{
    const double a = g->ord[i];
    double la[2], lg[2], ra[2], rg[2];
    int nl = 0, nr = 0;
    for (size_t j = i; j-- > 0 && nl < 2;)
        if (!isnan(g->val[j])) {
            la[nl] = g->ord[j];
            lg[nl++] = (g->ord[j] - 1.0) * g->rv[j];
        }
    if (nl < 2) { /* the point (1, 0); with no evaluated order on the left it stands alone */
        la[nl] = 1.0;
        lg[nl++] = 0.0;
    }
    for (size_t j = i + 1; j < n && nr < 2; j++)
        if (!isnan(g->val[j])) {
            ra[nr] = g->ord[j];
            rg[nr++] = (g->ord[j] - 1.0) * g->rv[j];
        }
    double lb = -HUGE_VAL, gmax = 0.0, fac = 1.0;
    if (la[0] > 1.0) /* monotonicity: r(a) >= r(la[0]) */
        lb = (a - 1.0) * (lg[0] / (la[0] - 1.0));
    if (nl == 2 && isfinite(lg[0]) && isfinite(lg[1]) && la[0] > la[1]) {
        double f = (a - la[0]) / (la[0] - la[1]);
        lb = dmax(lb, lg[0] + f * (lg[0] - lg[1]));
        gmax = dmax(gmax, dmax(fabs(lg[0]), fabs(lg[1])));
        fac = dmax(fac, 1.0 + 2.0 * f);
    }
    if (nr == 2 && isfinite(rg[0]) && isfinite(rg[1])) {
        double f = (ra[0] - a) / (ra[1] - ra[0]);
        lb = dmax(lb, rg[0] - f * (rg[1] - rg[0]));
        gmax = dmax(gmax, dmax(fabs(rg[0]), fabs(rg[1])));
        fac = dmax(fac, 1.0 + 2.0 * f);
    }
    if (lb == -HUGE_VAL || isnan(lb)) {
        *est = -HUGE_VAL;
        return -HUGE_VAL;
    }
    double r = lb > 0.0 ? lb / (a - 1.0) : 0.0;
    if (isnan(g->cc[i]))
        g->cc[i] = conv_const(a, log(g->target), g->base);
    const double cst = g->cc[i];
    *slack = ACCT_PRUNE_REL * fac * (gmax / (a - 1.0) + fabs(r));
    /* Only to choose what to evaluate first: an estimate of g(a) by quadratic interpolation
     * through the nearest evaluated orders (the mean of the left- and right-leaning parabolas). */
    *est = -HUGE_VAL;
    if (nr >= 1 && isfinite(rg[0]) && isfinite(lg[0])) {
        double sum = 0.0;
        int cnt = 0;
        if (nl == 2 && isfinite(lg[1]) && la[0] > la[1]) {
            sum += quad_interp(la[1], lg[1], la[0], lg[0], ra[0], rg[0], a);
            cnt++;
        }
        if (nr == 2 && isfinite(rg[1])) {
            sum += quad_interp(la[0], lg[0], ra[0], rg[0], ra[1], rg[1], a);
            cnt++;
        }
        double ge = cnt ? sum / cnt : lg[0] + (a - la[0]) * (rg[0] - lg[0]) / (ra[0] - la[0]);
        *est = eps_with_const(dmax(ge, 0.0) / (a - 1.0), cst, g->r_kl, g->base);
    }
    return eps_with_const(r, cst, g->r_kl, g->base);
}

/* Minimum of the objective over ord[lo..hi] (a bracket known to hold the grid minimum), evaluating
 * only the orders whose lower bound (grid_lower_bound) does not exceed the best value found so far
 * (best bound first). Returns the same minimum and the same (first) minimising index as a full
 * scan of the bracket, with typically three of its fractional orders evaluated. */
static void pruned_min(grid_obj *g, size_t n, size_t lo, size_t hi, double *best, size_t *bi)
{
    /* a pruned candidate stays pruned: its bound was valid and the best value only decreases */
    bool dead[ACCT_PRUNE_MAX_WIDTH + 1] = {false};
    while (g->rc == DP_OK) {
        double fb = HUGE_VAL;
        for (size_t i = lo; i <= hi; i++)
            if (!isnan(g->val[i]) && g->val[i] < fb)
                fb = g->val[i];
        size_t pick = hi + 1;
        double plb = HUGE_VAL;
        for (size_t i = lo; i <= hi; i++) {
            if (!isnan(g->val[i]) || dead[i - lo])
                continue;
            double slack = 0.0, est, lb = grid_lower_bound(g, n, i, &slack, &est);
            if (lb > fb + (fabs(fb) * ACCT_PRUNE_REL + slack)) {
                dead[i - lo] = true; /* provably not below the best value */
                continue;
            }
            if (pick > hi || est < plb) { /* the most promising candidate first */
                pick = i;
                plb = est;
            }
        }
        if (pick > hi)
            break;
        grid_f(g, pick);
    }
    *best = HUGE_VAL;
    *bi = lo;
    for (size_t i = lo; i <= hi && g->rc == DP_OK; i++)
        if (!isnan(g->val[i]) && g->val[i] < *best) {
            *best = g->val[i];
            *bi = i;
        }
}

/* The repeat_and_select root's grid minimum without evaluating every order (epsilon objective,
 * child tree quasi-convex, so the child's curve is an exact Renyi divergence and non-decreasing in
 * the order: van Erven & Harremoes 2014, Thm. 3). The tuned RDP at order a is at least
 * acct_tuning_cache_lower(r_low) with r_low = the child's RDP at any evaluated order below a (or
 * node_rdp_lower), and the conversion is non-decreasing in the RDP, so an order whose lower bound
 * exceeds the best value found (plus a slack far above the ~1e-11 relative error of the evaluated
 * child values) cannot be the grid minimum: the minimum and its (first) index are those of the full
 * scan. Stateless nodes (TNB, fixed k) first evaluate a few seed orders (galloping from the low
 * end, then a ternary search of the bracket: a heuristic, only to find a good value early);
 * stateful ones (Poisson, whose later values depend on the orders asked before) go strictly
 * upwards, evaluating in the same order as the full scan. Returns false (nothing decided) when the
 * cache has no prepared node after the first evaluation. */
static bool rs_pruned_scan(grid_obj *g, size_t n, double *best, size_t *bi)
{
    const acct_event *ev = g->ev, *child = ev->child;
    double *crv = dp_malloc(n * sizeof *crv); /* the child's RDP where evaluated, NAN elsewhere */
    if (crv == NULL)
        return false;
    for (size_t i = 0; i < n; i++)
        crv[i] = DP_NAN;
    double fb = HUGE_VAL;
    const double ld = log(g->target);
#define RS_EVAL(i)                                                                                 \
    do {                                                                                           \
        double v_ = grid_f(g, (i)), o_, r_;                                                        \
        if (g->rc == DP_OK && acct_tuning_cache_last_child(g->ws->tuning, ev, &o_, &r_) &&         \
            o_ == g->ord[(i)])                                                                     \
            crv[(i)] = r_;                                                                         \
        if (v_ < fb)                                                                               \
            fb = v_;                                                                               \
    } while (0)
    RS_EVAL(0);
    double probe;
    if (g->rc != DP_OK || !acct_tuning_cache_lower(g->ws->tuning, ev, g->ord[0], 0.0, &probe)) {
        dp_free(crv);
        if (g->rc != DP_OK) {
            *best = HUGE_VAL;
            *bi = 0;
            return true;
        }
        return false;
    }
    if (!acct_tuning_cache_stateful(ev) && n >= 4) {
        size_t pp = 0, p = 0, b = n - 1;
        double fprev = g->val[0];
        for (size_t next = 1; g->rc == DP_OK; next = next * 2 < n - 1 ? next * 2 : n - 1) {
            RS_EVAL(next);
            if (!(g->val[next] < fprev)) {
                b = next;
                break;
            }
            pp = p;
            p = next;
            fprev = g->val[next];
            if (next == n - 1)
                break;
        }
        size_t a = pp;
        while (g->rc == DP_OK && b - a > 3) {
            size_t m1 = a + (b - a) / 3, m2 = b - (b - a) / 3;
            RS_EVAL(m1);
            RS_EVAL(m2);
            if (g->val[m1] < g->val[m2])
                b = m2;
            else
                a = m1;
        }
    }
    double r_low = 0.0;
    for (size_t i = 0; i < n && g->rc == DP_OK; i++) {
        if (isnan(g->val[i])) {
            const double a = g->ord[i];
            double rl = dmax(r_low, node_rdp_lower(child, a)), tl;
            if (isfinite(fb) && acct_tuning_cache_lower(g->ws->tuning, ev, a, rl, &tl)) {
                double lb = eps_at(a, tl, ld, g->target, g->base);
                if (lb > fb + ACCT_PRUNE_REL * (fabs(fb) + fabs(rl) + fabs(tl)))
                    continue; /* provably above the best value */
            }
            RS_EVAL(i);
        }
        if (!isnan(crv[i]))
            r_low = dmax(r_low, crv[i]);
    }
#undef RS_EVAL
    dp_free(crv);
    *best = HUGE_VAL;
    *bi = 0;
    for (size_t i = 0; i < n && g->rc == DP_OK; i++)
        if (!isnan(g->val[i]) && g->val[i] < *best) {
            *best = g->val[i];
            *bi = i;
        }
    return true;
}

/* Minimum of the objective over the sorted grid. For quasi-convex trees: galloping + ternary search
 * over the integer orders, then the bound-pruned search (pruned_min) between the best integer's
 * neighbours; this finds the same minimum and index as a full scan (memoised evaluations). A tie
 * (flat or infinite stretch) or a wide bracket falls back to the ternary/full scan. */
static void grid_min(grid_obj *g, size_t n, bool qc, double *best, size_t *bi)
{
    size_t lo = 0, hi = n - 1;
    /* delta: the KL bound (increasing in alpha) is min'ed with a convex bound, which need not be
     * quasi-convex: always scan. */
    qc = qc && !g->want_delta;
    /* The KL shortcut may hold on a prefix of the orders (objective 0 there). A cheap lower bound
     * on the RDP at the first order settles that question without evaluating it when it is a
     * fractional order (a quadrature). */
    bool maybe_zero = true;
    if (qc && g->ord[0] != floor(g->ord[0])) {
        double rlb = node_rdp_lower(g->ev, g->ord[0]);
        maybe_zero = !(eps_at(g->ord[0], rlb, log(g->target), g->target, g->base) > 0.0);
    }
    if (qc && maybe_zero && grid_f(g, 0) == 0.0) { /* KL shortcut holds on a prefix */
        *best = 0.0;
        *bi = 0;
        return;
    }
    /* Integer orders first (their RDP is a cheap exact sum, fractional ones need quadrature): if k
     * is the best integer order, quasi-convexity puts the grid minimum between the integer orders
     * on either side of k, so only the fractional orders there are candidates. */
    size_t *J = qc ? dp_malloc(n * sizeof *J) : NULL, m = 0;
    for (size_t i = 0; J != NULL && i < n; i++)
        if (g->ord[i] == (double)(long long)g->ord[i]) /* orders <= 1e5: an exact floor */
            J[m++] = i;
    bool bracketed = false;
    if (J != NULL && m >= 4) {
        /* Galloping from the low end (positions 0, 1, 2, 4, 8, ...) until the objective rises:
         * the optimum is usually a small order, and low integer orders are the cheapest ones. A
         * rise after a strict fall brackets the minimum in [p_{j-2}, p_j]; a tie (flat or
         * infinite stretch) falls back to the ternary search over all integer positions. */
        size_t a = 0, b = m - 1, pp = 0, p = 0;
        bool tie = false;
        double fprev = grid_f(g, J[0]);
        for (size_t next = 1; g->rc == DP_OK; next = next * 2 < m - 1 ? next * 2 : m - 1) {
            double fn = grid_f(g, J[next]);
            if (fn == fprev) {
                tie = true;
                break;
            }
            if (fn > fprev) { /* minimum in [pp, next] */
                a = pp;
                b = next;
                break;
            }
            pp = p;
            p = next;
            fprev = fn;
            if (next == m - 1) { /* still falling at the top: minimum in [pp, m - 1] */
                a = pp;
                break;
            }
        }
        if (tie) {
            a = 0;
            b = m - 1;
            tie = false;
        }
        while (g->rc == DP_OK && b - a > 3) {
            size_t m1 = a + (b - a) / 3, m2 = b - (b - a) / 3;
            double fa = grid_f(g, J[m1]), fb = grid_f(g, J[m2]);
            if (fa < fb) {
                b = m2 - 1;
            } else if (fa > fb) {
                a = m1 + 1;
            } else {
                tie = true;
                break;
            }
        }
        if (!tie && g->rc == DP_OK) {
            size_t pos = a;
            double fbest = HUGE_VAL;
            for (size_t k = a; k <= b && g->rc == DP_OK; k++) {
                double v = grid_f(g, J[k]);
                if (v < fbest) {
                    fbest = v;
                    pos = k;
                }
            }
            lo = pos > 0 ? J[pos - 1] : 0;
            hi = pos + 1 < m ? J[pos + 1] : n - 1;
            /* the integer orders around the bracket feed the convexity bounds below */
            for (size_t k = pos >= 2 ? pos - 2 : 0; k <= pos + 2 && k < m && g->rc == DP_OK; k++)
                grid_f(g, J[k]);
            bracketed = hi - lo <= ACCT_PRUNE_MAX_WIDTH;
        }
    }
    dp_free(J);
    if (bracketed && g->rc == DP_OK) {
        pruned_min(g, n, lo, hi, best, bi);
        return;
    }
    size_t lo0 = lo, hi0 = hi;
    while (qc && g->rc == DP_OK && hi - lo > 3) {
        size_t m1 = lo + (hi - lo) / 3, m2 = hi - (hi - lo) / 3;
        double a = grid_f(g, m1), b = grid_f(g, m2);
        if (a < b)
            hi = m2 - 1;
        else if (a > b)
            lo = m1 + 1;
        else
            break;
    }
    if (!qc && !g->want_delta && g->ev->type == ACCT_EV_REPEAT_SELECT && g->prune_rs &&
        tree_quasiconvex(g->ev->child) && rs_pruned_scan(g, n, best, bi))
        return;
    if (!qc) {
        lo = 0;
        hi = n - 1;
    } else if (hi - lo > 3) { /* a tie: scan the whole bracket */
        lo = lo0;
        hi = hi0;
    }
    *best = HUGE_VAL;
    *bi = lo;
    for (size_t i = lo; i <= hi && g->rc == DP_OK; i++) {
        double v = grid_f(g, i);
        if (v < *best) {
            *best = v;
            *bi = i;
        }
    }
}

/* The continuous order search of conv == OPTIMAL: Brent's method (eps) or golden-section search
 * in x = log(alpha - 1) between the grid neighbours of the grid minimum ord[bi], evaluating the
 * tree's curve; memo[i] holds the objective at the grid orders evaluated so far (NAN: not yet). The
 * refined value replaces *best (and *oa, *continuous) only if it is smaller, so the answer is never
 * looser than the grid's. */
static int refine_order(const acct_event *ev, rdp_ws *ws, bool want_delta, double target,
                        const double *ord, const double *memo, size_t n, size_t bi, double *best,
                        double *oa, bool *continuous, dp_err *err)
{
    int rc = DP_OK;
    bool improvable =
        want_delta ? *best > -HUGE_VAL && *best < 0.0 : isfinite(*best) && *best > 0.0;
    if (!improvable)
        return DP_OK;
    double lo = bi > 0 ? ord[bi - 1] : ACCT_RDP_MIN_ORDER;
    double hi = bi + 1 < n ? ord[bi + 1] : ACCT_RDP_MAX_ORDER;
    order_obj o = {ev, ws, want_delta, target, log(target), target, err, DP_OK};
    /* search variable x = log(alpha - 1) */
    double xa = log(lo - 1.0), xb = log(hi - 1.0);
    double fbr = HUGE_VAL, xbr = 0.0;
    if (!want_delta && bi > 0 && bi + 1 < n && brent_search(&o, ord, memo, bi, *best, &xbr, &fbr)) {
        rc = o.rc;
        if (rc == DP_OK && fbr < *best) {
            *best = fbr;
            *oa = 1.0 + exp(xbr);
            *continuous = true;
        }
        return rc;
    }
    if (o.rc != DP_OK)
        return o.rc;
    double x1 = xb - GOLDEN * (xb - xa), x2 = xa + GOLDEN * (xb - xa);
    double f1 = objective(&o, 1.0 + exp(x1)), f2 = objective(&o, 1.0 + exp(x2));
    for (int it = 0; it < ACCT_ORDER_SEARCH_ITERS && o.rc == DP_OK; it++) {
        if (xb - xa < ACCT_ORDER_SEARCH_XTOL)
            break;
        if (f1 < f2) {
            xb = x2;
            x2 = x1;
            f2 = f1;
            x1 = xb - GOLDEN * (xb - xa);
            f1 = objective(&o, 1.0 + exp(x1));
        } else {
            xa = x1;
            x1 = x2;
            f1 = f2;
            x2 = xa + GOLDEN * (xb - xa);
            f2 = objective(&o, 1.0 + exp(x2));
        }
    }
    rc = o.rc;
    double fb = f1 < f2 ? f1 : f2, xbst = f1 < f2 ? x1 : x2;
    if (rc == DP_OK && fb < *best) {
        *best = fb;
        *oa = 1.0 + exp(xbst);
        *continuous = true;
    }
    return rc;
}

/* Sum of epsilon over a tree made only of pure leaves under composed and self_composed nodes,
 * rounded up; +INFINITY when any other node occurs. Basic composition (Dwork, McSherry, Nissim &
 * Smith 2006; Dwork & Roth 2014, Thm. 3.16): running eps_i-DP mechanisms in sequence (adaptively)
 * is (sum eps_i)-DP, hence (sum eps_i, delta)-DP for every delta >= 0. The theorem also composes
 * (eps1, 0) with (eps2, delta) into (eps1 + eps2, delta), but the answers use this sum only for an
 * all-pure tree, so that the calculator and the ledger apply one and the same rule. */
static double pure_eps_sum(const acct_event *ev)
{
    switch (ev->type) {
        case ACCT_EV_PURE:
            return ev->epsilon;
        case ACCT_EV_SELF_COMPOSED: {
            double e = pure_eps_sum(ev->child);
            return isfinite(e) ? dp_mul_up((double)ev->count, e) : HUGE_VAL;
        }
        case ACCT_EV_COMPOSED: {
            double s = 0.0;
            for (size_t i = 0; i < ev->n_children && isfinite(s); i++)
                s = dp_sum_up(s, pure_eps_sum(ev->children[i]));
            return s;
        }
        default:
            return HUGE_VAL;
    }
}

/* Fills out's value and order from the search's best objective at order oa, and applies basic
 * composition to an all-pure tree (pure_eps_sum): eps = min(RDP answer, sum eps_i); delta = 0 when
 * the asked epsilon is at least sum eps_i. */
static void answer_set(const acct_event *ev, bool want_delta, double target, double best, double oa,
                       acct_rdp_answer *out)
{
    double pure = pure_eps_sum(ev);
    out->basic_composition = false;
    if (want_delta) {
        out->value = dp_exp_prob_up(best);
        out->optimal_order = oa;
        if (target >= pure && out->value > 0.0) {
            out->value = 0.0;
            out->optimal_order = DP_NAN;
            out->basic_composition = true;
        }
        return;
    }
    out->value = best;
    out->optimal_order = isfinite(best) ? oa : DP_NAN;
    if (pure < out->value) {
        out->value = pure;
        out->optimal_order = DP_NAN;
        out->continuous = false;
        out->basic_composition = true;
    }
}

/* Grid minimum, then (conv == OPTIMAL) golden-section refinement in log(alpha - 1) between the grid
 * neighbours of the best order, until the bracket is ACCT_ORDER_SEARCH_XTOL wide. The refined value
 * is taken only if it is smaller, so the answer is never looser than the grid's. */
static int tree_answer(const acct_event *ev, acct_neighboring nb, bool want_delta, double target,
                       acct_conversion conv, const double *orders, size_t n, bool rdp_full_scan,
                       acct_rdp_answer *out, dp_err *err)
{
    int rc = eval_prepare(ev, nb, err);
    if (rc != DP_OK)
        return rc;
    if (want_delta ? check_epsilon(target, err) : check_delta(target, err))
        return err ? err->code : DP_EINVAL;
    if (conv != ACCT_CONV_MIRONOV2017 && conv != ACCT_CONV_BALLE2020 && conv != ACCT_CONV_OPTIMAL)
        return dp_err_set(err, DP_EINVAL, "conversion", "unknown conversion");
    if (orders == NULL || n == 0)
        n = acct_rdp_default_orders(&orders);
    if ((rc = acct_rdp_check_orders(orders, n, err)) != DP_OK)
        return rc;
    double *ord = dp_malloc(4 * n * sizeof *ord);
    if (ord == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    double *memo = ord + n, *rmemo = ord + 2 * n, *cmemo = ord + 3 * n;
    memcpy(ord, orders, n * sizeof *ord);
    bool sorted = true; /* the default grid and most user lists already are */
    for (size_t i = 1; i < n && sorted; i++)
        sorted = ord[i - 1] <= ord[i];
    if (!sorted)
        qsort(ord, n, sizeof *ord, cmp_double);
    for (size_t i = 0; i < n; i++)
        memo[i] = cmemo[i] = DP_NAN;
    rdp_ws ws = {.nb = nb}; /* everything else zero: nothing cached yet */
    acct_conversion base =
        conv == ACCT_CONV_MIRONOV2017 ? ACCT_CONV_MIRONOV2017 : ACCT_CONV_BALLE2020;
    grid_obj g = {ev,         &ws,    ord,  memo, rmemo, cmemo,         -log1p(-target * target),
                  want_delta, target, base, err,  DP_OK, !rdp_full_scan};
    double best;
    size_t bi;
    grid_min(&g, n, tree_quasiconvex(ev), &best, &bi);
    rc = g.rc;
    double oa = ord[bi];
    out->conversion = base;
    out->continuous = false;
    if (rc == DP_OK && conv == ACCT_CONV_OPTIMAL)
        rc = refine_order(ev, &ws, want_delta, target, ord, memo, n, bi, &best, &oa,
                          &out->continuous, err);
    if (ws.w)
        gsl_integration_workspace_free(ws.w);
    acct_tuning_cache_free(ws.tuning);
    sgm_nodes_free(ws.nodes);
    dp_free(ord);
    if (rc != DP_OK)
        return rc;
    answer_set(ev, want_delta, target, best, oa, out);
    return DP_OK;
}

int acct_rdp_epsilon(const acct_event *ev, acct_neighboring nb, double delta, acct_conversion conv,
                     const double *orders, size_t n_orders, acct_rdp_answer *out, dp_err *err)
{
    return tree_answer(ev, nb, false, delta, conv, orders, n_orders, false, out, err);
}

int acct_rdp_epsilon_full_scan(const acct_event *ev, acct_neighboring nb, double delta,
                               acct_conversion conv, const double *orders, size_t n_orders,
                               acct_rdp_answer *out, dp_err *err)
{
    return tree_answer(ev, nb, false, delta, conv, orders, n_orders, true, out, err);
}

int acct_rdp_delta(const acct_event *ev, acct_neighboring nb, double epsilon, acct_conversion conv,
                   const double *orders, size_t n_orders, acct_rdp_answer *out, dp_err *err)
{
    return tree_answer(ev, nb, true, epsilon, conv, orders, n_orders, false, out, err);
}

/* acct_rdp_epsilon_curve, its grid pass through t when t is not NULL (then orders are t's, delta
 * t->delta and conv one that t was made for; the values are the same bit for bit). */
static int curve_answer(const acct_event *ev, acct_neighboring nb, double delta,
                        acct_conversion conv, const double *orders, const double *rdp, size_t n,
                        const acct_conv_table *t, acct_rdp_answer *out, dp_err *err)
{
    int rc = eval_prepare(ev, nb, err);
    if (rc != DP_OK)
        return rc;
    if (t == NULL) {
        if ((rc = check_delta(delta, err)) != DP_OK ||
            (rc = check_curve(orders, rdp, n, err)) != DP_OK)
            return rc;
        for (size_t i = 1; i < n; i++)
            if (!(orders[i - 1] < orders[i]))
                return dp_err_set(err, DP_EINVAL, "orders", "orders must be strictly increasing");
    } else {
        for (size_t i = 0; i < n; i++)
            if (isnan(rdp[i]) || rdp[i] < 0.0)
                return dp_err_set(err, DP_EINVAL, "rdp", "RDP values must be >= 0, got %g", rdp[i]);
        if (!t->increasing)
            return dp_err_set(err, DP_EINVAL, "orders", "orders must be strictly increasing");
    }
    if (conv != ACCT_CONV_MIRONOV2017 && conv != ACCT_CONV_BALLE2020 && conv != ACCT_CONV_OPTIMAL)
        return dp_err_set(err, DP_EINVAL, "conversion", "unknown conversion");
    acct_conversion base =
        conv == ACCT_CONV_MIRONOV2017 ? ACCT_CONV_MIRONOV2017 : ACCT_CONV_BALLE2020;
    if (t != NULL && t->base != base)
        return dp_err_set(err, DP_EINVAL, "conversion", "the table is for another conversion");
    double *memo = dp_malloc(n * sizeof *memo);
    if (memo == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    double ld = log(delta), best = HUGE_VAL;
    size_t bi = 0;
    for (size_t i = 0; i < n; i++) { /* the grid minimum of the given curve (the first on ties) */
        memo[i] =
            t != NULL ? eps_at_table(t, i, rdp[i]) : eps_at(orders[i], rdp[i], ld, delta, base);
        if (memo[i] < best) {
            best = memo[i];
            bi = i;
        }
    }
    double oa = orders[bi];
    out->conversion = base;
    out->continuous = false;
    rdp_ws ws = {.nb = nb}; /* everything else zero: nothing cached yet */
    if (conv == ACCT_CONV_OPTIMAL)
        rc = refine_order(ev, &ws, false, delta, orders, memo, n, bi, &best, &oa, &out->continuous,
                          err);
    if (ws.w)
        gsl_integration_workspace_free(ws.w);
    acct_tuning_cache_free(ws.tuning);
    sgm_nodes_free(ws.nodes);
    dp_free(memo);
    if (rc != DP_OK)
        return rc;
    answer_set(ev, false, delta, best, oa, out);
    return DP_OK;
}

int acct_rdp_epsilon_curve(const acct_event *ev, acct_neighboring nb, double delta,
                           acct_conversion conv, const double *orders, const double *rdp, size_t n,
                           acct_rdp_answer *out, dp_err *err)
{
    return curve_answer(ev, nb, delta, conv, orders, rdp, n, NULL, out, err);
}

int acct_rdp_epsilon_curve_table(const acct_event *ev, acct_neighboring nb,
                                 const acct_conv_table *t, acct_conversion conv, const double *rdp,
                                 acct_rdp_answer *out, dp_err *err)
{
    return curve_answer(ev, nb, t->delta, conv, t->orders, rdp, t->n, t, out, err);
}
