/*
 * eb_gaussian.h: personalized estimation under a Gaussian prior (Ozkara et al., ICLR 2023,
 * Sec. 2.1, Thm 1 and Thm 2, App B.1-B.2;
 * unknown variances, which the paper leaves open, are our extension).
 *
 * Model, per coordinate j: theta_ij ~ N(mu_j, tau2_j) (tau2 = sigma_theta^2) and the client mean
 * xbar_ij | theta_ij ~ N(theta_ij, s_i^2) with s_i^2 = sigma_x^2 / n_i (heteroscedastic n_i
 * allowed). Coordinates are independent and are fitted one at a time (d-dimensional means, per
 * coordinate).
 *
 * Prior fit (the server's aggregate):
 *   - EB_GAUSS_MLE: maximum marginal likelihood, xbar_i ~ N(mu, tau2 + s_i^2 + extra_var). mu
 *     is the precision-weighted mean for a given tau2; tau2 maximizes the profile likelihood
 *     (root of its score by Brent's method on [0, range^2]); tau2 = 0 is reported as
 *     EB_STATUS_BOUNDARY.
 *   - EB_GAUSS_MOMENTS: the paper's estimator, mu = plain mean of the messages (Thm 1, eq. 2),
 *     and our moment extension, tau2 = max(0, sample variance - mean(s_i^2) - extra_var).
 *   - with tau2 known (Thm 1/Thm 2 setting: sigma_theta known, mu unknown) only mu is fitted.
 * extra_var is the variance a local randomizer added to every message (sigma_q^2 of Thm 2), so the
 * fit on privatized messages accounts for it.
 *
 * Posterior (client i, coordinate j), with w = weight_extra (sigma_q^2/(m-1) for Thm 2, else 0):
 *   a_i = (tau2 + w) / (tau2 + w + s_i^2)                     Thm 1 / Thm 2 weight (App B.2)
 *   posterior mean = a_i xbar_i + (1 - a_i) mu                (eq. 2 / Thm 2)
 *   posterior var  = a_i^2 s_i^2 + (1 - a_i)^2 (tau2 + Var(mu-hat))
 *   shrinkage      = 1 - a_i  (0: own mean kept; 1: fully pooled to mu)
 * With w = 0 and a known mu the variance is the exact posterior variance a_i s_i^2; with mu
 * estimated by the plain mean and equal n it equals Thm 1's exact MSE s^2 (a + (1-a)/m)
 * (our derivation from Thm 1).
 *
 * Private mode (Thm 2): each client clips its mean to [-b, b] coordinatewise and sends it through
 * the Gaussian LDP channel or the k-bit quantizer (eb_ldp.h); the server fits on the messages with
 * extra_var = sigma_q^2 and the client combines its raw mean with the fitted prior using w =
 * sigma_q^2/(m-1) as in Thm 2. The noise is simulated here with a seeded stream (eb_common.h).
 *
 * Memory: arrays are borrowed for the call; outputs are caller-allocated. Threading: reentrant.
 */
#ifndef DP_ESTIMATORS_EB_GAUSSIAN_H
#define DP_ESTIMATORS_EB_GAUSSIAN_H

#include <stdbool.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dp_err.h"
#include "estimators/eb_common.h"
#include "estimators/eb_ldp.h"

typedef struct eb_gauss_data {
    size_t m;        /* clients */
    size_t d;        /* coordinates per client mean */
    const double *x; /* m*d row-major: client means (or their privatized messages); borrowed */
    const double *n; /* m sample counts, each >= 1; borrowed */
    double sigma_x2; /* per-observation noise variance sigma_x^2 > 0 */
} eb_gauss_data;

/* Checks sizes (1 <= m <= EB_MAX_CLIENTS, 1 <= d <= EB_MAX_DIM), finiteness, n_i >= 1, sigma_x2 >
 * 0. Field names: "clients[i].mean", "clients[i].n", "noise_variance". */
int eb_gauss_data_check(const eb_gauss_data *g, dp_err *err);

/* Pooled sigma_x^2 from within-client sample variances v_i (divisor n_i - 1):
 * sum_i (n_i - 1) v_i / sum_i (n_i - 1) (the pooled within-client variance). Clients with n_i = 1
 * carry no information and are skipped; DP_EINVAL ("clients") if no client has n_i >= 2 or the
 * result is 0.
 */
int eb_gauss_pool_sigma_x2(size_t m, const double *n, const double *within_var, double *sigma_x2,
                           dp_err *err);

typedef enum eb_gauss_method {
    EB_GAUSS_MLE = 0, /* maximum marginal likelihood (default) */
    EB_GAUSS_MOMENTS  /* paper's plain mean + our moment variance */
} eb_gauss_method;

typedef struct eb_gauss_coord {
    double mu;           /* prior mean of this coordinate */
    double tau2;         /* prior variance sigma_theta^2 */
    double mu_var;       /* sampling variance of mu-hat (0 if mu was given) */
    double loglik;       /* marginal log-likelihood of the messages at (mu, tau2) */
    unsigned iterations; /* solver iterations (0 for closed forms) */
    eb_status status;    /* converged / boundary (tau2 = 0) / unidentifiable / max_iter */
} eb_gauss_coord;

/* Fits the prior of every coordinate (out has d entries). tau2_known: NULL to estimate tau2, or d
 * known variances (>= 0) so only mu is fitted. extra_var >= 0 (sigma_q^2 of a private channel, else
 * 0). Needs m >= 2 (DP_EINVAL "clients" otherwise). max_iter in [1, EB_MAX_ITER_CAP]. */
int eb_gauss_fit(const eb_gauss_data *g, const double *tau2_known, double extra_var,
                 eb_gauss_method method, unsigned max_iter, eb_gauss_coord *out, dp_err *err);

/* eb_gauss_fit with a cancel flag (as eb_mix_opts.cancel; issue #10): NULL, or polled before each
 * coordinate and each root-finding iteration; once it is true the fit stops and returns DP_EBUSY
 * ("cancelled"), out partly filled (discard it). cancel: borrowed. */
int eb_gauss_fit_cancel(const eb_gauss_data *g, const double *tau2_known, double extra_var,
                        eb_gauss_method method, unsigned max_iter, const atomic_bool *cancel,
                        eb_gauss_coord *out, dp_err *err);

/* Projects a fitted prior onto public bounds (Ozkara et al. 2023, App B.2.1: r bounds |mu_j|, and
 * the range b uses a public bound on sigma_theta): mu_j onto [-r, r] and tau2_j onto [0, tau2_max]
 * (tau2_max = INFINITY: no bound). A private fit's prior is computed from privatized messages, so
 * this is post-processing and costs no privacy; it can only bring the estimate closer to every
 * prior the bounds allow. A coordinate that moved gets EB_STATUS_BOUNDARY (unless its status is
 * already worse) and its log-likelihood at the projected values (extra_var as in eb_gauss_fit).
 * r >= 0, tau2_max >= 0. *n_mean / *n_var (may be NULL) get how many coordinates moved. */
void eb_gauss_project(const eb_gauss_data *g, double extra_var, double r, double tau2_max,
                      eb_gauss_coord *c, size_t *n_mean, size_t *n_var);

/* Marginal log-likelihood of coordinate j at (mu, tau2): sum_i log N(x_ij; mu, tau2 + s_i^2 +
 * extra). */
double eb_gauss_loglik(const eb_gauss_data *g, size_t j, double mu, double tau2, double extra_var);

/* Posterior per client and coordinate (m*d outputs, caller-allocated; any output may be NULL).
 * x in g must hold the clients' raw means. prior has d entries. weight_extra >= 0 (see top). */
int eb_gauss_posterior(const eb_gauss_data *g, const eb_gauss_coord *prior, double weight_extra,
                       double *post_mean, double *post_var, double *shrinkage, dp_err *err);

/* eb_gauss_posterior with a weight_extra per coordinate (d entries, each >= 0). */
int eb_gauss_posterior_w(const eb_gauss_data *g, const eb_gauss_coord *prior,
                         const double *weight_extra, double *post_mean, double *post_var,
                         double *shrinkage, dp_err *err);

/* The posterior's weight_extra per coordinate (w, sent->d entries) for local DP, from the
 * messages (sent: sigma_x2 and n as the clients', m >= 1) and the prior fitted to them:
 *   w_j = sigma_q2/(m-1)                                 Thm 2 (App B.2), always; plus, when
 *   tau2_estimated, min(sd_j, tau2_max - tau2_j)         one sd of tau2-hat, within the bound
 * where sd_j = sqrt(2/(m-1)) (tau2_j + mean_i s_i^2 + sigma_q2) is the large-m sd of the sample
 * variance the moment estimate subtracts from (our addition, as the central model's weight has:
 * eb_gauss_central_info.weight_extra). Under local DP the noise sigma_q2 dwarfs tau2 and a
 * tau2-hat at 0 would pull every client to the mean, worse than no pooling as m grows (the noise
 * in tau2-hat falls as 1/sqrt(m), Thm 2's sigma_q2/(m-1) as 1/m); the public bound tau2_max (inf:
 * none) caps what the weight may assume. Post-processing of the released messages: no privacy
 * cost. */
void eb_gauss_ldp_weights(const eb_gauss_data *sent, const eb_gauss_coord *prior, double sigma_q2,
                          double tau2_max, bool tau2_estimated, double *w);

/* Thm 1 exact MSE per coordinate with known sigma's and mu by the plain mean: s^2 (a + (1-a)/m),
 * a = tau2 / (tau2 + s^2). Thm 2 (eq. 5) is the same with tau2 replaced by tau2 + sigma_q^2/(m-1).
 */
double eb_gauss_thm1_mse(double tau2, double sigma_x2, double n, size_t m);
double eb_gauss_thm2_mse(double tau2, double sigma_x2, double n, size_t m, double sigma_q2);

typedef enum eb_channel {
    EB_CHANNEL_GAUSSIAN = 0, /* clip + Gaussian noise, (eps0, delta)-LDP */
    EB_CHANNEL_QUANTIZE      /* clip + k-bit stochastic quantizer (communication, not privacy) */
} eb_channel;

typedef struct eb_gauss_private_opts {
    eb_channel channel;
    double eps0, delta;  /* GAUSSIAN: per-client guarantee */
    bool per_coordinate; /* GAUSSIAN: paper's per-coordinate guarantee (Thm 2); default false */
    eb_calibration cal;  /* GAUSSIAN: classic (paper, eps0 < 1) or analytic */
    unsigned bits;       /* QUANTIZE: k in [1, 52] */
    double r;            /* public bound on |mu_j| (caller-supplied, never estimated) */
    double sigma_theta;  /* prior sd or a public bound on it, used for b (>= 0) */
    double b;            /* NAN: b from r (Thm 2, B.2.1); else an explicit public range > 0 */
    eb_range_mode range_mode;
    uint64_t seed; /* seeds the simulated client randomness */
} eb_gauss_private_opts;

typedef struct eb_gauss_private_info {
    double b;         /* clipping range used */
    double sigma_q;   /* per-coordinate sd of the channel (quantizer: its bound b/(2^k-1)) */
    size_t n_clipped; /* coordinates that were clipped */
    eb_ldp_gauss ldp; /* GAUSSIAN: the calibration (zeroed for QUANTIZE) */
} eb_gauss_private_info;

/* The clipping range and channel calibration only (no noise drawn): what eb_gauss_privatize will
 * use, so a caller can charge the privacy cost before anything is computed. info->n_clipped = 0. */
int eb_gauss_private_calibrate(const eb_gauss_data *g, const eb_gauss_private_opts *o,
                               eb_gauss_private_info *info, dp_err *err);

/* Simulates the clients' channel: msgs (m*d, caller-allocated) = q(Proj_[-b,b](x_i)). b uses n_min
 * over the clients. */
int eb_gauss_privatize(const eb_gauss_data *g, const eb_gauss_private_opts *o, double *msgs,
                       eb_gauss_private_info *info, dp_err *err);

/* ---- Central DP (the service as the trusted aggregator; issue #15) ----
 *
 * Privacy unit: one client (the whole of its data). Each client's contribution to the prior's
 * sufficient statistics is clipped, and the service adds Gaussian noise ONCE to the sums over the
 * clients (the Gaussian mechanism on clipped sums; Dwork & Roth, "The Algorithmic Foundations of
 * Differential Privacy", 2014, Sec. 3.5.3 and App. A):
 *   S1_j = sum_i Proj_[-b,b](x_ij) + N(0, sd_sum^2)           (every coordinate j)
 *   S2_j = sum_i Proj_[-b,b](x_ij)^2 + N(0, sd_sq^2)          (only when tau2 is estimated)
 * Replacing one client changes S1_j by at most 2b and S2_j by at most b^2 (each term lies in
 * [-b, b], resp. [0, b^2]); these bound adding or removing one client too (b, b^2). The release
 * divided by those sensitivities, (S1/2b, S2/b^2), has L2 sensitivity sqrt(k d) (k = 2 statistics
 * per coordinate, 1 with tau2 known), so noise of sd z sqrt(k d) on it, i.e. sd_sum = 2b z sqrt(kd)
 * and sd_sq = b^2 z sqrt(kd), is one Gaussian mechanism with noise multiplier z: rho = 1/(2 z^2)
 * zCDP (Bun & Steinke, "Concentrated Differential Privacy", TCC 2016, Prop. 1.6). The number of
 * clients m, their n_i (or standard errors) and sigma_x^2 are public, as in the local model.
 *
 * Estimate (moments, from the noisy sums only; our construction): mu = S1/m,
 * tau2 = max(0, (S2 - (S1^2 - sd_sum^2)/m)/(m-1) - mean_i s_i^2) (S1^2 - sd_sum^2 is unbiased for
 * the clean S1^2), projected onto |mu| <= r and tau2 <= tau2_max (post-processing). With z = 0
 * this is exactly eb_gauss_fit's EB_GAUSS_MOMENTS on the clipped means. Var(mu-hat) =
 * (tau2 + mean s^2)/m + sd_sum^2/m^2. Each client's posterior then combines this private prior
 * with its own raw mean (eb_gauss_posterior with weight_extra = sd_sum^2/(m(m-1)), the Thm 2
 * weight of Ozkara et al. with the per-message variance sigma_q^2 replaced by its central
 * equivalent sd_sum^2/m, plus, when tau2 is estimated, sd_sq/(m-1), one sd of the noise in
 * tau2-hat: a prior variance the noise cannot resolve must not pool the clients, since
 * under-estimating tau2 costs up to tau2 per client and over-estimating at most s_i^2; our
 * choice, measured by bench/eb_central). That posterior uses the client's data un-noised: it is for
 * that client alone. The log-likelihood of the raw data is not released (loglik = NAN). */

typedef struct eb_gauss_central_opts {
    double b;        /* clipping bound on each coordinate of a client mean, > 0 */
    double z;        /* noise multiplier >= 0 (0: no noise, the non-private clipped estimate) */
    double r;        /* public bound on |mu_j|, >= 0 */
    double tau2_max; /* public bound on tau2 (INFINITY: none) */
    uint64_t seed;   /* seeds the service's noise (DP_RNG_STREAM_GAUSSIAN_CENTRAL) */
} eb_gauss_central_opts;

typedef struct eb_gauss_central_info {
    size_t k;        /* statistics released per coordinate: 1 (sums) or 2 (and sums of squares) */
    double l2_sens;  /* sqrt(k d): L2 sensitivity of the release scaled by 1/(2b), 1/b^2 */
    double sens_sum; /* 2b: sensitivity of each S1_j */
    double sens_sq;  /* b^2: sensitivity of each S2_j (NAN when k = 1) */
    double sd_sum;   /* noise sd added to each S1_j */
    double sd_sq;    /* noise sd added to each S2_j (NAN when k = 1) */
    double rho;      /* zCDP of the release: 1/(2 z^2) (INFINITY for z = 0) */
    double weight_extra;        /* for eb_gauss_posterior: sd_sum^2/(m(m-1)) */
    size_t n_clipped;           /* coordinates of client means that were clipped */
    size_t proj_mean, proj_var; /* coordinates projected onto |mu| <= r, tau2 <= tau2_max */
} eb_gauss_central_info;

/* Sensitivities and noise sds only (nothing computed from data), so a caller can charge first.
 * d in [1, EB_MAX_DIM], var_known: tau2 given (k = 1). DP_EINVAL naming "privacy.b" or
 * "privacy.noise_multiplier". */
int eb_gauss_central_calibrate(size_t d, bool var_known, const eb_gauss_central_opts *o,
                               eb_gauss_central_info *info, dp_err *err);

/* The central release and the prior estimate from it (out has d entries, loglik NAN,
 * iterations 0). tau2_known: NULL or d known variances (>= 0). Needs m >= 2. */
int eb_gauss_central_fit(const eb_gauss_data *g, const double *tau2_known,
                         const eb_gauss_central_opts *o, eb_gauss_coord *out,
                         eb_gauss_central_info *info, dp_err *err);

#endif
