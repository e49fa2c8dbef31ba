/*
 * eb_beta.h: personalized estimation of Bernoulli rates under a Beta prior (Ozkara et al., ICLR
 * 2023, Sec. 2.2, Thm 3, Thm 4, App C; where we depart from the paper, and why: docs/ESTIMATORS.md,
 * "Beta-Bernoulli").
 *
 * Model: p_i ~ Beta(alpha, beta), Z_i | p_i ~ Bin(n_i, p_i); xbar_i = Z_i / n_i; S = alpha + beta.
 *
 * Known prior (App C.1): posterior Beta(alpha + Z_i, beta + n_i - Z_i); its mean is
 * a_i xbar_i + (1 - a_i) alpha/S with a_i = n_i/(S + n_i); shrinkage = 1 - a_i.
 *
 * Moment estimator (eq. 6, leave-one-out by default as in the paper): for client i, from the
 * other clients' messages, mu_i = mean, sigma2_i = variance (divisor m-2), then
 *   EB_BETA_PAPER:            S_i = mu_i(1-mu_i)/sigma2_i - 1  (eq. 6 as printed, with the "-1")
 *   EB_BETA_PAPER_NO_MINUS1:  S_i = mu_i(1-mu_i)/sigma2_i      (eq. 32/36, the private formula)
 *   EB_BETA_UNBIASED:         sigma2_i = mean U_l - mu_i^2 with U_l = Z_l(Z_l-1)/(n_l(n_l-1))
 *                             (unbiased for p_l^2: the paper's sigma2 estimates the variance of
 *                             xbar, not of p), S_i = mu_i(1-mu_i)/sigma2_i - 1
 * and a_i = n_i/(S_i + n_i), p_i-hat = a_i xbar_i + (1 - a_i) mu_i.
 * Clamps (issue #6): sigma2_i <= 0 (no visible heterogeneity, or mu_i in {0,1}) gives a_i = 0
 * (full pooling); S_i <= 0 (more spread than any Beta allows) gives a_i = 1 (local). Both are
 * counted. The posterior sd is that of Beta(mu_i S_i + Z_i, (1-mu_i) S_i + n_i - Z_i), i.e.
 * sqrt(p-hat (1 - p-hat) / (S_i + n_i + 1)) (0 when fully pooled).
 *
 * Maximum likelihood: the beta-binomial marginal likelihood, maximised by Newton's method in
 * (log alpha, log beta) with backtracking, over the distinct (n, Z) pairs (so 10^6 clients with few
 * distinct n cost little). S growing without bound (under-dispersed data) is reported as
 * EB_STATUS_BOUNDARY with S capped at EB_BETA_S_MAX.
 *
 * Private (eq. 7, Thm 4, App C.3): EB_BETA_PRIV_PAPER_1BIT sends one
 * randomized-response value of xbar_i at eps0 and runs the moment estimator on the messages,
 * faithfully; it cannot identify the prior variance (Var q = e^eps/(e^eps-1)^2 + mu(1-mu) whatever
 * the heterogeneity), so it degrades to about local estimation (or worse, with the "-1").
 * EB_BETA_PRIV_TWO_BIT (the default) sends q1 = RR_{eps0/2}(xbar_i) and q2 = RR_{eps0/2}(U_i);
 * basic composition makes each client eps0-LDP (pure). The server takes mu = mean q1, var = mean
 * q2 - mu^2 (leave-one-out), and, unlike the non-private moments, weighs client i with
 * a = (sigma2 + V) / (sigma2 + V + s2) (issue 15; eb_beta.c weight_two_bit): V = Var(mu) from the
 * known randomized-response noise (Thm 2's sigma_q^2/(m-1) for the Beta), sigma2 the posterior mean
 * of the prior variance given var and its sampling sd under a flat prior on [0, mu(1-mu)], and s2 =
 * (mu(1-mu) - sigma2)/n_i; mu is projected onto [0, 1]. Noisy moments (few clients, small eps0)
 * thus keep clients near their own rates instead of pooling them to a noise-driven (or clamped)
 * mean. mu from noisy messages outside [0, 1] is counted in counts->mean (per client) and
 * counts->prior_mean (all clients: the reported prior is then a point mass at 0 or 1).
 * Status (never "converged" in these cases): two-bit: EB_STATUS_NO_POOLING_GAIN when no client's
 * shrinkage reaches EB_NO_POOLING_GAIN, else EB_STATUS_DEGENERATE when the reported prior's mean
 * was clamped; one-bit: EB_STATUS_DEGENERATE when any client's pooled mean was clamped (its clients
 * are then pooled to a point mass), else EB_STATUS_NO_POOLING_GAIN as for two-bit.
 *
 * Central DP (issue #15; the section at the end): the service, trusted, sums every client's xbar_i
 * and U_i (both in [0, 1]), adds Gaussian noise once to the two sums, and fits the prior from them.
 *
 * Memory: arrays borrowed for the call; outputs caller-allocated (any may be NULL). Threading:
 * reentrant.
 */
#ifndef DP_ESTIMATORS_EB_BETA_H
#define DP_ESTIMATORS_EB_BETA_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dp_err.h"
#include "estimators/eb_common.h"

/* Cap on alpha + beta: beyond it the prior is a point mass for any n. */
#define EB_BETA_S_MAX      1e12
#define EB_BETA_MAX_TRIALS 1000000000.0 /* trials per client */

typedef struct eb_beta_data {
    size_t m;        /* clients */
    const double *z; /* m successes, integers in [0, n_i]; borrowed */
    const double *n; /* m trials, integers >= 1; borrowed */
} eb_beta_data;

typedef enum eb_beta_variant {
    EB_BETA_PAPER = 0,
    EB_BETA_PAPER_NO_MINUS1,
    EB_BETA_UNBIASED
} eb_beta_variant;

typedef enum eb_beta_scheme {
    EB_BETA_PRIV_TWO_BIT = 0, /* default: two RR bits at eps0/2 (fixes eq. 7) */
    EB_BETA_PRIV_PAPER_1BIT   /* eq. 7 as published */
} eb_beta_scheme;

typedef struct eb_beta_prior {
    double alpha, beta; /* fitted or given; +inf when S is unbounded (then see status) */
    double mu;          /* alpha / S */
    double s;           /* S = alpha + beta */
    double loglik; /* beta-binomial marginal log-likelihood at (alpha, beta) (NAN if S = inf) */
    unsigned iterations; /* Newton iterations (0 for closed forms) */
    eb_status status;
} eb_beta_prior;

typedef struct eb_beta_counts {
    size_t pooled; /* clients clamped to a = 0 (sigma2 <= 0) */
    size_t local;  /* clients clamped to a = 1 (S <= 0) */
    size_t mean;   /* clients whose pooled mean mu (from noisy messages) fell outside [0, 1] and was
                      clamped to 0 or 1: their prior is then a point mass, so the status is
                      "degenerate" and posterior_sd 0 is an artefact of the clamp, not certainty
                      (paper_1bit; two_bit keeps these clients' own estimates) */
    size_t prior_mean; /* private runs: 1 when the all-client mean of the messages (the reported
                          prior's) fell outside [0, 1] and was clamped, else 0 */
} eb_beta_counts;

/* Field names: "clients[i].successes", "clients[i].trials". 1 <= m <= EB_MAX_CLIENTS. */
int eb_beta_data_check(const eb_beta_data *b, dp_err *err);

/* Beta-binomial marginal log-likelihood (with the binomial coefficients). alpha, beta > 0. */
double eb_beta_loglik(const eb_beta_data *b, double alpha, double beta);

/* Known-prior MSE of the posterior mean, alpha beta / (S (S+1) (S+n)) (App C.1, exact). */
double eb_beta_known_mse(double alpha, double beta, double n);

/* Posterior with a known prior (alpha, beta > 0, finite). */
int eb_beta_posterior_known(const eb_beta_data *b, double alpha, double beta, double *mean,
                            double *sd, double *shrinkage, dp_err *err);

/* Posterior with a fitted prior (uses p->mu and p->s; s = inf means full pooling: mean mu, sd 0).
 */
int eb_beta_posterior_prior(const eb_beta_data *b, const eb_beta_prior *p, double *mean, double *sd,
                            double *shrinkage, dp_err *err);

/* The prior by the moment estimator on all clients (not leave-one-out), for reporting. m >= 2. */
int eb_beta_fit_moments(const eb_beta_data *b, eb_beta_variant v, eb_beta_prior *out, dp_err *err);

/* The prior by beta-binomial maximum likelihood. m >= 2; max_iter in [1, EB_MAX_ITER_CAP]. */
int eb_beta_fit_mle(const eb_beta_data *b, unsigned max_iter, eb_beta_prior *out, dp_err *err);

/* eb_beta_fit_mle with a cancel flag (as eb_mix_opts.cancel; issue #10): NULL, or polled before
 * each Newton iteration; once it is true the fit stops and returns DP_EBUSY ("cancelled"), out not
 * filled. cancel: borrowed. */
int eb_beta_fit_mle_cancel(const eb_beta_data *b, unsigned max_iter, const atomic_bool *cancel,
                           eb_beta_prior *out, dp_err *err);

/* Posterior means by the moment estimator: leave_one_out (the paper) or all clients. m >= 2 (with
 * leave-one-out and m = 2 the variance is undefined: every client stays local, status
 * unidentifiable). */
int eb_beta_posterior_moments(const eb_beta_data *b, eb_beta_variant v, bool leave_one_out,
                              double *mean, double *sd, double *shrinkage, eb_beta_counts *counts,
                              eb_status *status, dp_err *err);

typedef struct eb_beta_private_info {
    double eps0;        /* per-client pure LDP */
    double eps_per_bit; /* eps0 (1-bit) or eps0/2 (two-bit) */
    unsigned bits;      /* messages per client: 1 or 2 */
    double rho;         /* zCDP implied by pure eps0: eps0^2/2 */
} eb_beta_private_info;

/* Private moment estimator. eps0 > 0 finite; paper_1bit accepts variants paper / paper_no_minus1;
 * two_bit needs n_i >= 2. prior_out (may be NULL) gets the all-client moment prior from the
 * messages. m >= 3 with leave_one_out. */
int eb_beta_private(const eb_beta_data *b, eb_beta_scheme scheme, eb_beta_variant v, double eps0,
                    bool leave_one_out, uint64_t seed, double *mean, double *sd, double *shrinkage,
                    eb_beta_prior *prior_out, eb_beta_counts *counts, eb_beta_private_info *info,
                    eb_status *status, dp_err *err);

/* ---- Central DP (the service as the trusted aggregator; issue #15) ----
 *
 * Privacy unit: one client (the whole of its data). The moment estimator of the prior needs two
 * sums over the clients, and each client's contribution to them is bounded before anything is
 * added; the service then adds Gaussian noise ONCE to each sum (the Gaussian mechanism on clipped
 * sums; Dwork & Roth, "The Algorithmic Foundations of Differential Privacy", 2014, Sec. 3.5.3 and
 * App. A):
 *   S1 = sum_i Proj_[0,1](xbar_i) + N(0, sd_sum^2),   xbar_i = Z_i / n_i
 *   S2 = sum_i Proj_[0,1](U_i)    + N(0, sd_sq^2),    U_i = Z_i (Z_i - 1) / (n_i (n_i - 1))
 * What is clipped: the client's rate xbar_i and U_i, the unbiased estimate of p_i^2 from its own
 * trials (a U-statistic; EB_BETA_UNBIASED and the two-bit scheme above use the same U_i). U_i is
 * used instead of xbar_i^2, whose mean p_i^2 + p_i(1-p_i)/n_i would need each n_i to be debiased
 * in the aggregate: with U_i the trials enter only through the client's own contribution (which
 * needs n_i >= 2) and its own posterior weight, and the release does not depend on them
 * otherwise. Both lie in [0, 1] by construction (0 <= U_i <= xbar_i^2 <= 1), so the public
 * bounds are the data's own range and the projection is the identity on valid input (kept as the
 * guard the sensitivity rests on).
 * Sensitivities: replacing one client moves S1 and S2 by at most 1 each (the width of [0, 1]),
 * which also bounds adding or removing one; the pair (S1, S2) has L2 sensitivity sqrt(2) (tight:
 * (xbar, U) = (0, 0) against (1, 1)). Noise of sd z sqrt(2) on each sum is one Gaussian mechanism
 * with noise multiplier z: rho = 1/(2 z^2) zCDP (Bun & Steinke, "Concentrated Differential
 * Privacy", TCC 2016, Prop. 1.6). The number of clients m is public.
 *
 * Prior (moments, from the noisy sums only; our construction, the non-private estimate being
 * Ozkara et al. 2023, Sec. 2.2, eq. 6 with the unbiased second moment): mu = S1/m and
 * sigma2 = S2/m - (S1^2 - sd_sum^2)/m^2 (S1^2 - sd_sum^2 is unbiased for the clean S1^2). With
 * z = 0 this is exactly eb_beta_fit_moments(EB_BETA_UNBIASED). Projection onto valid Beta
 * parameters (post-processing, no privacy cost): mu onto [0, 1]; sigma2 onto [0, mu(1-mu)] (a
 * Beta's variance mu(1-mu)/(S+1) lies strictly inside), i.e. S = mu(1-mu)/sigma2 - 1 onto
 * [EB_BETA_CENTRAL_S_MIN, inf] (sigma2 = 0: S = inf, a point mass at mu; mu in {0, 1}: likewise).
 *
 * Posterior of client i (its own Z_i, n_i, un-noised: for that client alone), as the two-bit
 * weight and Thm 2 of Ozkara et al. do for noisy moments:
 *   a_i = (sigma2 + w) / (sigma2 + w + s2_i),  s2_i = (mu(1-mu) - sigma2)/n_i = E p(1-p) / n_i,
 *   w = sd_sum^2/(m(m-1)) + sd_var,  sd_var = sqrt(sd_sq^2 + 4 mu^2 sd_sum^2) / m,
 * the first term Thm 2's sigma_q^2/(m-1) with the per-message variance sigma_q^2 replaced by its
 * central equivalent sd_sum^2/m (the noise in mu), the second one standard deviation of the noise
 * in sigma2 (linearised: d sigma2/d S2 = 1/m, d sigma2/d S1 = -2 mu/m), as the Gaussian central
 * weight adds sd_sq/(m-1): a prior variance the noise cannot resolve must not pool the clients.
 * Then posterior mean a_i xbar_i + (1 - a_i) mu = that of Beta(mu S_i + Z_i, (1-mu) S_i + n_i -
 * Z_i) with S_i = n_i (1 - a_i)/a_i, and its sd as eb_beta_posterior_prior's. For w = 0 and
 * sigma2 > 0 this is App C.1's n_i/(S + n_i). */

/* S below this is projected onto it: S -> 0 is two point masses at 0 and 1, no Beta; at 1e-6
 * alpha, beta > 0 and no posterior mean moves by more than 1e-6/n_i from the client's own rate. */
#define EB_BETA_CENTRAL_S_MIN 1e-6

typedef struct eb_beta_central_opts {
    double z;      /* noise multiplier >= 0 (0: no noise, the non-private estimate) */
    uint64_t seed; /* seeds the service's noise (DP_RNG_STREAM_BETA_CENTRAL) */
} eb_beta_central_opts;

typedef struct eb_beta_central_info {
    double l2_sens;      /* sqrt(2): L2 sensitivity of (S1, S2) */
    double sens_sum;     /* 1: sensitivity of S1 */
    double sens_sq;      /* 1: sensitivity of S2 */
    double sd_sum;       /* noise sd added to S1: z sqrt(2) */
    double sd_sq;        /* noise sd added to S2: z sqrt(2) */
    double rho;          /* zCDP of the release: 1/(2 z^2) (INFINITY for z = 0) */
    double var_raw;      /* the variance estimate before its projection */
    double sd_var;       /* sd of the noise in the variance estimate (see above) */
    double weight_extra; /* w above, added to the prior variance in every client's weight */
    bool proj_mean;      /* mu fell outside [0, 1] and was projected */
    bool proj_var_low;   /* sigma2 <= 0: projected onto 0 (S = inf) */
    bool
        proj_var_high; /* sigma2 above what a Beta allows: S projected onto EB_BETA_CENTRAL_S_MIN */
} eb_beta_central_info;

/* Sensitivities and noise sds only (nothing computed from data), so a caller can charge first.
 * DP_EINVAL "privacy.noise_multiplier" unless z is finite and >= 0. */
int eb_beta_central_calibrate(const eb_beta_central_opts *o, eb_beta_central_info *info,
                              dp_err *err);

/* The central release, the projected prior (prior: loglik NAN, iterations 0, status converged or
 * boundary) and every client's posterior (mean, sd, shrinkage: m each, caller-allocated, any may be
 * NULL). Needs m >= 2 and every n_i >= 2 ("clients[i].trials"). *status: the prior's status,
 * raised to EB_STATUS_NO_POOLING_GAIN when no client's shrinkage reaches EB_NO_POOLING_GAIN.
 * counts (may be NULL): pooled / local / mean = m when the variance was projected onto 0 / onto
 * its upper end / the mean onto [0, 1] (every client shares the one prior), prior_mean 1 with the
 * mean projected. */
int eb_beta_central_fit(const eb_beta_data *b, const eb_beta_central_opts *o, double *mean,
                        double *sd, double *shrinkage, eb_beta_prior *prior, eb_beta_counts *counts,
                        eb_beta_central_info *info, eb_status *status, dp_err *err);

#endif
