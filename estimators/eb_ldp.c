/*
 * eb_ldp.c: local randomizers and their calibration (Ozkara et al. 2023, Thm 2 and eq. 7; Balle &
 * Wang 2018). See eb_ldp.h for the contracts.
 */
#include "estimators/eb_ldp.h"

#include <math.h>

#include <gsl/gsl_math.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_sf_erf.h>

#include "estimators/eb_common.h"

/* Bisection stops when the sigma bracket is this narrow (relative); we return its upper end. */
#define EB_CAL_RTOL 1e-12
/* Bracket expansion/bisection steps: log2(1e300) doublings and ~60 halvings are ample. */
#define EB_CAL_MAX_STEPS 4000

int eb_range_b(double r, double sigma_theta, double sigma_x2, double n, size_t m,
               eb_range_mode mode, double *b, dp_err *err)
{
    if (!isfinite(r) || r < 0)
        return dp_err_set(err, DP_EINVAL, "r", "r must be finite and >= 0 (got %g)", r);
    if (!isfinite(sigma_theta) || sigma_theta < 0)
        return dp_err_set(err, DP_EINVAL, "sigma_theta",
                          "sigma_theta must be finite and >= 0 (got %g)", sigma_theta);
    if (!isfinite(sigma_x2) || sigma_x2 <= 0)
        return dp_err_set(err, DP_EINVAL, "noise_variance",
                          "noise_variance must be finite and > 0 (got %g)", sigma_x2);
    if (!isfinite(n) || n < 1)
        return dp_err_set(err, DP_EINVAL, "n", "n must be >= 1 (got %g)", n);
    if (m < 1)
        return dp_err_set(err, DP_EINVAL, "clients", "at least one client is needed");
    double md = (double)m;
    /* ln(m^2 n) computed as 2 ln m + ln n to avoid overflow. */
    double l = 2.0 * log(md) + log(n);
    double t;
    if (mode == EB_RANGE_SAFE)
        t = sqrt(2.0 *
                 (M_LN2 + l)); /* two-sided Gaussian tail with union bound over 2 m^2 n events */
    else
        t = sqrt(l); /* App B.2.1 as printed */
    if (l <= 0)      /* m = n = 1: the paper's log vanishes; keep at least one sd of margin */
        t = 1.0;
    *b = r + (sigma_theta + sqrt(sigma_x2 / n)) * t;
    return DP_OK;
}

static double std_normal_cdf(double x)
{
    return 0.5 * erfc(-x / M_SQRT2);
}

double eb_gauss_delta_exact(double sensitivity, double sigma, double eps)
{
    /* Balle & Wang 2018, Thm 8: the Gaussian mechanism is (eps, delta)-DP iff
     * Phi(D/(2s) - eps s/D) - e^eps Phi(-D/(2s) - eps s/D) <= delta. */
    double u = sensitivity / (2.0 * sigma);
    double v = eps * sigma / sensitivity;
    double t1 = std_normal_cdf(u - v);
    /* e^eps Phi(-u - v) in log space: log Phi(y) = log(erfc(-y/sqrt2)) - ln 2. */
    gsl_sf_result le;
    double y = -u - v;
    double t2;
    if (gsl_sf_log_erfc_e(-y / M_SQRT2, &le) == GSL_SUCCESS)
        t2 = exp(eps + le.val - M_LN2);
    else
        t2 = exp(eps) * std_normal_cdf(y);
    double d = t1 - t2;
    return d > 0 ? d : 0.0;
}

int eb_gauss_sigma_analytic(double sensitivity, double eps, double delta, double *sigma,
                            dp_err *err)
{
    if (!isfinite(sensitivity) || sensitivity <= 0)
        return dp_err_set(err, DP_EINVAL, "sensitivity",
                          "sensitivity must be finite and > 0 (got %g)", sensitivity);
    if (!isfinite(eps) || eps <= 0)
        return dp_err_set(err, DP_EINVAL, "epsilon0", "epsilon0 must be finite and > 0 (got %g)",
                          eps);
    if (!isfinite(delta) || delta <= 0 || delta >= 1)
        return dp_err_set(err, DP_EINVAL, "delta", "delta must be in (0, 1) (got %g)", delta);
    double hi = sensitivity, lo = sensitivity;
    int steps = 0;
    while (eb_gauss_delta_exact(sensitivity, hi, eps) > delta) {
        hi *= 2.0;
        if (++steps > EB_CAL_MAX_STEPS || !isfinite(hi))
            return dp_err_set(err, DP_ENUMERIC, "delta",
                              "no noise level meets delta %g at epsilon0 %g", delta, eps);
    }
    while (eb_gauss_delta_exact(sensitivity, lo, eps) <= delta) {
        /* A huge epsilon0 (1e308) meets delta at every noise level down to the underflow: no lower
         * end of the bracket exists. The smallest level tried still meets delta, so it is a valid
         * (conservative) answer: almost no noise, as such an epsilon0 asks. */
        if (steps + 1 > EB_CAL_MAX_STEPS || !(lo * 0.5 > 0)) {
            *sigma = lo;
            return DP_OK;
        }
        lo *= 0.5;
        ++steps;
    }
    /* Invariant: delta(lo) > target >= delta(hi). */
    while (hi - lo > EB_CAL_RTOL * hi) {
        double mid = 0.5 * (lo + hi);
        if (eb_gauss_delta_exact(sensitivity, mid, eps) <= delta)
            hi = mid;
        else
            lo = mid;
        if (++steps > EB_CAL_MAX_STEPS)
            return dp_err_set(err, DP_ENUMERIC, "delta", "calibration did not converge");
    }
    *sigma = hi; /* conservative end of the bracket */
    return DP_OK;
}

/* The (eps0, delta) every local Gaussian channel is calibrated to. */
static int check_eps0_delta(double eps0, double delta, dp_err *err)
{
    if (!isfinite(eps0) || eps0 <= 0)
        return dp_err_set(err, DP_EINVAL, "epsilon0", "epsilon0 must be finite and > 0 (got %g)",
                          eps0);
    if (!isfinite(delta) || delta <= 0 || delta >= 1)
        return dp_err_set(err, DP_EINVAL, "delta", "delta must be in (0, 1) (got %g)", delta);
    return DP_OK;
}

/* sigma for a checked (sensitivity, eps0, delta): the classic bound (App B.2 eq. 26,
 * sigma^2 = Delta^2 2 ln(2/delta) / eps0^2, valid for eps0 < 1) when asked for and valid, else the
 * analytic Gaussian mechanism (Balle & Wang 2018). */
static int sigma_for(double sensitivity, double eps0, double delta, eb_calibration cal,
                     double *sigma, bool *analytic, dp_err *err)
{
    if (cal == EB_CAL_CLASSIC && eps0 < 1.0) {
        *analytic = false;
        *sigma = sensitivity * sqrt(2.0 * log(2.0 / delta)) / eps0;
    } else {
        *analytic = true;
        int rc = eb_gauss_sigma_analytic(sensitivity, eps0, delta, sigma, err);
        if (rc != DP_OK)
            return rc;
    }
    /* the classic sigma grows like 1/eps0: refuse what is infinite or overflows when squared */
    if (*sigma <= EB_LDP_MAX_SIGMA)
        return DP_OK;
    return dp_err_set(err, DP_ENUMERIC, "epsilon0",
                      "epsilon0 %g (delta %g) needs a noise sd of %g, above the largest usable %g; "
                      "use a larger epsilon0",
                      eps0, delta, *sigma, EB_LDP_MAX_SIGMA);
}

int eb_ldp_gauss_calibrate(double eps0, double delta, double b, size_t d, bool per_coordinate,
                           eb_calibration cal, eb_ldp_gauss *out, dp_err *err)
{
    int rc = check_eps0_delta(eps0, delta, err);
    if (rc != DP_OK)
        return rc;
    if (!isfinite(b) || b <= 0)
        return dp_err_set(err, DP_EINVAL, "b", "b must be finite and > 0 (got %g)", b);
    if (d < 1 || d > EB_MAX_DIM)
        return dp_err_set(err, DP_EINVAL, "d", "dimension must be in [1, %d] (got %zu)", EB_MAX_DIM,
                          d);
    out->eps0 = eps0;
    out->delta = delta;
    out->b = b;
    out->d = d;
    out->per_coordinate = per_coordinate;
    /* Vector sensitivity 2b sqrt(d) by default (Thm 2 holds per coordinate only); the paper's
     * per-coordinate 2b on request. */
    out->sensitivity = per_coordinate ? 2.0 * b : 2.0 * b * sqrt((double)d);
    /* classic: App B.2 eq. 26, sigma_q^2 = 8 b^2 log(2/delta)/eps0^2 in the paper's 1-D case */
    rc = sigma_for(out->sensitivity, eps0, delta, cal, &out->sigma, &out->analytic, err);
    if (rc != DP_OK)
        return rc;
    /* zCDP of the released vector: each coordinate has sensitivity 2b, noise sigma; d coordinates
     * compose (equals the vector mechanism's Delta^2/(2 sigma^2) with Delta = 2b sqrt(d)). */
    out->rho = (double)d * (2.0 * b) * (2.0 * b) / (2.0 * out->sigma * out->sigma);
    return DP_OK;
}

int eb_ldp_sigma(double sensitivity, double eps0, double delta, eb_calibration cal, double *sigma,
                 bool *analytic, dp_err *err)
{
    int rc = check_eps0_delta(eps0, delta, err);
    if (rc != DP_OK)
        return rc;
    if (!isfinite(sensitivity) || sensitivity <= 0)
        return dp_err_set(err, DP_EINVAL, "sensitivity",
                          "sensitivity must be finite and > 0 (got %g)", sensitivity);
    return sigma_for(sensitivity, eps0, delta, cal, sigma, analytic, err);
}

double eb_clip(double x, double b)
{
    return x < -b ? -b : (x > b ? b : x);
}

double eb_quantize_sigma(double b, unsigned k)
{
    return b / (ldexp(1.0, (int)k) - 1.0);
}

double eb_quantize(double x, double b, unsigned k, gsl_rng *rng)
{
    /* App B.2 eq. 20-21: x~ = (2^k-1)(x+b)/(2b); q = 2b/(2^k-1) (floor(x~) + Bern(frac)) - b. */
    double levels = ldexp(1.0, (int)k) - 1.0;
    double xc = eb_clip(x, b);
    double xt = levels * (xc + b) / (2.0 * b);
    double fl = floor(xt);
    if (fl > levels)
        fl = levels;
    double frac = xt - fl;
    double lev = fl + (gsl_rng_uniform(rng) < frac ? 1.0 : 0.0);
    return 2.0 * b / levels * lev - b;
}

double eb_rr_bit(double x, double eps, gsl_rng *rng)
{
    /* eq. 7: A = -1/(e-1) w.p. e/(e+1) - x(e-1)/(e+1); B = e/(e-1) otherwise (e = e^eps). */
    double xc = x < 0 ? 0 : (x > 1 ? 1 : x);
    double em1 = expm1(eps);
    double e = em1 + 1.0;
    double pB = (1.0 + xc * em1) / (e + 1.0);
    return gsl_rng_uniform(rng) < pB ? e / em1 : -1.0 / em1;
}

double eb_rr_bit_variance(double x, double eps)
{
    double em1 = expm1(eps);
    return (em1 + 1.0) / (em1 * em1) + x * (1.0 - x);
}
