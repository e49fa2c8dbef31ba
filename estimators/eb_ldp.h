/*
 * eb_ldp.h: the clients' local randomizers of Ozkara et al. (ICLR 2023) and their calibration.
 *
 * - Range b of the clipped client mean (Thm 2, App B.2.1).
 * - Gaussian local-DP channel q_p(x) = Proj_[-b,b](x) + N(0, sigma_q^2) (App B.2 eq. 24-26),
 *   calibrated either as the paper does (classical Gaussian mechanism with log(2/delta), valid
 *   only for eps0 < 1) or by the analytic Gaussian mechanism (Balle & Wang 2018, Thm 8), which is
 *   exact for every eps0 and is used whenever eps0 >= 1.
 * - Dimension (Thm 2 states (eps0, delta) per coordinate): the default calibrates to the L2
 *   sensitivity 2b*sqrt(d) of the clipped d-vector, so the whole vector is (eps0, delta)-LDP;
 *   "per coordinate" calibrates each coordinate to sensitivity 2b as the paper does, and the
 *   vector is then only (eps0, delta)-LDP per coordinate (the zCDP rho reported for the vector is
 *   the d-fold composition).
 * - k-bit stochastic quantizer q_k (App B.2 eq. 20-22): unbiased, per-coordinate variance
 *   <= (b/(2^k-1))^2.
 * - One-bit randomized response on x in [0,1] (eq. 7): unbiased, pure eps0-LDP.
 *
 * Conservative direction: calibrated sigmas are the upper end of the final bisection bracket, so
 * the delivered delta never exceeds the target (every approximation errs towards more privacy
 * loss). zCDP figures use rho = Delta^2/(2 sigma^2) (Bun & Steinke 2016, Prop. 1.6) and
 * rho = eps^2/2 for pure eps-DP (ibid., Prop. 1.4).
 *
 * Threading: reentrant; the gsl_rng passed in is owned by the calling thread.
 */
#ifndef DP_ESTIMATORS_EB_LDP_H
#define DP_ESTIMATORS_EB_LDP_H

#include <stdbool.h>
#include <stddef.h>

#include <gsl/gsl_rng.h>

#include "common/dp_err.h"

typedef enum eb_range_mode {
    EB_RANGE_PAPER = 0, /* b = r + (sigma_theta + sigma_x/sqrt(n)) sqrt(ln(m^2 n))  (App B.2.1) */
    EB_RANGE_SAFE       /* same with sqrt(2 ln(2 m^2 n)): correct Gaussian tails */
} eb_range_mode;

/* Range b of Thm 2. r >= 0 is the caller's public bound on |mu| (never estimated from data),
 * sigma_theta >= 0 the prior sd (or a public bound on it), sigma_x2 > 0, n >= 1, m >= 1.
 * Returns DP_OK and *b, or DP_EINVAL naming the field. */
int eb_range_b(double r, double sigma_theta, double sigma_x2, double n, size_t m,
               eb_range_mode mode, double *b, dp_err *err);

typedef enum eb_calibration {
    EB_CAL_CLASSIC = 0, /* eps0 < 1: sigma = Delta sqrt(2 ln(2/delta))/eps0 (paper eq. 26); eps0 >=
                           1: analytic (Balle & Wang 2018) */
    EB_CAL_ANALYTIC     /* analytic Gaussian mechanism for every eps0 (Balle & Wang 2018) */
} eb_calibration;

/* delta(eps) of the Gaussian mechanism with L2 sensitivity Delta and noise sd sigma, exactly:
 * Phi(Delta/(2 sigma) - eps sigma/Delta) - e^eps Phi(-Delta/(2 sigma) - eps sigma/Delta)
 * (Balle & Wang 2018, Thm 8). Requires Delta > 0, sigma > 0, eps >= 0. */
double eb_gauss_delta_exact(double sensitivity, double sigma, double eps);

/* Smallest sigma (up to a relative bracket width EB_CAL_RTOL, rounded up) with
 * eb_gauss_delta_exact(Delta, sigma, eps) <= delta. eps > 0, 0 < delta < 1. */
int eb_gauss_sigma_analytic(double sensitivity, double eps, double delta, double *sigma,
                            dp_err *err);

/* What a calibration produced. */
typedef struct eb_ldp_gauss {
    double eps0, delta;  /* the per-client guarantee asked for */
    double b;            /* clipping range: each coordinate is clipped to [-b, b] */
    size_t d;            /* coordinates per message */
    bool per_coordinate; /* true: the (eps0, delta) holds per coordinate only (Thm 2) */
    bool analytic;       /* true: analytic Gaussian mechanism; false: paper's classical formula */
    double sensitivity;  /* L2 sensitivity used: 2b (per coordinate) or 2b sqrt(d) (vector) */
    double sigma;        /* noise sd added to each coordinate */
    double rho;          /* zCDP of the whole released vector: d (2b)^2/(2 sigma^2) */
} eb_ldp_gauss;

/* Largest noise sd the channels accept: above it, squares and sums of the noisy messages in the
 * estimators overflow (1e100^2 times any realistic client count stays far below DBL_MAX), and no
 * information about the data survives anyway. A calibration asking for more (an epsilon0 of, say,
 * 1e-300) fails with DP_ENUMERIC naming "epsilon0". */
#define EB_LDP_MAX_SIGMA 1e100

/* Calibrates the Gaussian channel for messages of d coordinates clipped to [-b, b].
 * eps0 > 0, 0 < delta < 1, b > 0, 1 <= d <= EB_MAX_DIM. DP_ENUMERIC ("epsilon0") when the noise
 * needed is above EB_LDP_MAX_SIGMA. */
int eb_ldp_gauss_calibrate(double eps0, double delta, double b, size_t d, bool per_coordinate,
                           eb_calibration cal, eb_ldp_gauss *out, dp_err *err);

/* Noise sd for an L2 sensitivity (vector Gaussian mechanism) under the calibration cal; *analytic
 * tells which formula was used. */
int eb_ldp_sigma(double sensitivity, double eps0, double delta, eb_calibration cal, double *sigma,
                 bool *analytic, dp_err *err);

/* Proj_[-b,b](x) (coordinatewise clipping). */
double eb_clip(double x, double b);

/* k-bit stochastic quantizer of x in [-b, b] (eq. 20-21; x is clipped first). 1 <= k <= 52.
 * E q = x for x in [-b, b]; per-coordinate variance <= (b/(2^k-1))^2. */
double eb_quantize(double x, double b, unsigned k, gsl_rng *rng);

/* sigma_q of the k-bit quantizer used by Thm 2: b/(2^k-1). */
double eb_quantize_sigma(double b, unsigned k);

/* One-bit randomized response of x in [0,1] (eq. 7): returns -1/(e^eps-1) w.p.
 * e^eps/(e^eps+1) - x(e^eps-1)/(e^eps+1), else e^eps/(e^eps-1). Unbiased; pure eps-LDP; x is
 * clipped to [0, 1]. eps > 0. */
double eb_rr_bit(double x, double eps, gsl_rng *rng);

/* Variance of eb_rr_bit at input x: e^eps/(e^eps-1)^2 + x(1-x). */
double eb_rr_bit_variance(double x, double eps);

#endif
