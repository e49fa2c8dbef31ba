/*
 * eb_mixture.h: personalized estimation under a mixture prior (Ozkara et al., ICLR 2023, App D: Thm
 * 6, Alg 3, Lemma 3, App D; Gaussian
 * components are our extension of Sec. 3.1).
 *
 * Model: theta_i ~ sum_l p_l N(mu_l, var_l I_d) (var_l = 0 is the discrete prior of Thm 6) and
 * x_i | theta_i ~ N(theta_i, s_i^2 I_d), s_i^2 = sigma_x^2/n_i (+ extra_var for privatized
 * messages).
 *
 * Known prior (exact; reduces to Thm 6 when var_l = 0):
 *   v_il = var_l + s_i^2;  log w_il = log p_l - (d/2) log v_il - |x_i - mu_l|^2/(2 v_il)
 * (normalized) a_il = var_l / v_il;   posterior mean = sum_l w_il (a_il x_i + (1 - a_il) mu_l)
 *   posterior var (per coordinate) = sum_l w_il (a_il s_i^2 + m_ilj^2) - mean_ij^2
 *   (a fitted prior adds (1 - a_il)^2 Var(mu_l-hat) inside the sum: eb_mix_posterior_fitted)
 *   shrinkage_i = 1 - sum_l w_il a_il (0: own mean kept; 1: fully moved to the component means).
 *
 * Unknown prior:
 *   EB_MIX_EM (default): EM on the marginal likelihood x_i ~ sum_l p_l N(mu_l, (var_l + s_i^2) I).
 *     Equal s_i: the classical spherical-GMM EM on v_l = var_l + s^2 (v_l floored at s^2 + floor).
 *     Heteroscedastic s_i: EM with theta_i as missing data (E: responsibilities and the
 * per-component posterior of theta_i; M: p_l, mu_l, var_l in closed form); the marginal likelihood
 * never decreases. Initialization: k-means++ (Arthur & Vassilvitskii 2007) seeds + one hard
 * assignment; n_init restarts from independent seeded streams, the best log-likelihood kept. var_l
 * >= var_floor. EB_MIX_ALTMIN: Alg 3 (alternating minimization): Lloyd k-means on the current
 * estimates, p_l = |S_l|/m, then the Thm 6 posterior mean; point-mass components (var_l = 0).
 * Alg 3 leaves the clustering open; ours: k-means++ init, warm-started Lloyd, an empty cluster
 * keeps its centre with weight 0 (status degenerate). Components are returned sorted by the first
 * coordinate of their means (stable labels). Status: converged; max_iter; boundary (EM: a
 * component variance at var_floor, i.e. estimated as 0: that component is a point mass and the
 * posterior sds of its clients reflect the floor, not the data); degenerate (a component emptied);
 * unidentifiable (fewer than k distinct points).
 *
 * Private mode (Lemma 3 sketch made concrete, App D): each client clips x_i to the L2 ball of
 * radius R and adds N(0, sigma^2 I) calibrated to (eps0, delta) with L2 sensitivity 2R (one
 * message, one Gaussian mechanism, zCDP rho = (2R)^2/(2 sigma^2)); the server fits on the messages
 * with extra_var = sigma^2 and each client applies the posterior to its raw mean. R from the
 * caller's public bound r on |mu_l| (Lemma 3): R = r + 4 sqrt(d u) + 2 sqrt(ln(m^2 n) u) with u =
 * sigma_x^2/n_min + sigma_theta^2 (sigma_theta a public bound on the component sd, 0 for the
 * discrete prior of the lemma).
 *
 * Memory: inputs borrowed; outputs caller-allocated with the sizes stated. Threading: reentrant.
 */
#ifndef DP_ESTIMATORS_EB_MIXTURE_H
#define DP_ESTIMATORS_EB_MIXTURE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dp_err.h"
#include "estimators/eb_common.h"
#include "estimators/eb_gaussian.h"
#include "estimators/eb_ldp.h"

typedef struct eb_mix_prior {
    size_t k;    /* components */
    size_t d;    /* dimension */
    double *w;   /* k weights (sum 1); caller-allocated */
    double *mu;  /* k*d means, row-major; caller-allocated */
    double *var; /* k variances per coordinate (>= 0); caller-allocated */
} eb_mix_prior;

typedef enum eb_mix_method { EB_MIX_EM = 0, EB_MIX_ALTMIN } eb_mix_method;

typedef struct eb_mix_opts {
    eb_mix_method method;
    size_t k;          /* components, 1 <= k <= min(m, EB_MAX_COMPONENTS) */
    unsigned max_iter; /* EM iterations / Alg 3 rounds, in [1, EB_MAX_ITER_CAP] */
    double tol;        /* EM: stop when the log-likelihood gains <= tol (1 + |ll|); altmin: when the
                          estimates move <= tol * data scale. > 0 */
    unsigned n_init;   /* restarts, >= 1 */
    double var_floor;  /* NAN: 1e-6 times the mean s_i^2; else >= 0 */
    uint64_t seed;
    const atomic_bool *cancel; /* NULL, or polled once per iteration: when it becomes true the fit
                                  stops and eb_mix_fit returns DP_EBUSY ("cancelled"); borrowed */
} eb_mix_opts;

/* Defaults: EM, max_iter 1000, tol 1e-10, n_init 3, var_floor NAN, seed 1, cancel NULL. k must be
 * set. */
eb_mix_opts eb_mix_opts_default(size_t k);

typedef struct eb_mix_fit_info {
    double loglik;       /* marginal log-likelihood of the fitted prior */
    unsigned iterations; /* of the kept restart */
    eb_status status;
    size_t n_floor;   /* EM: components whose variance sits at var_floor (the M-step wanted less):
                         the status is then at least boundary, never converged */
    double var_floor; /* the floor used (EM) */
} eb_mix_fit_info;

/* Fits the prior (out arrays sized for o->k and g->d). extra_var >= 0. */
int eb_mix_fit(const eb_gauss_data *g, double extra_var, const eb_mix_opts *o, eb_mix_prior *out,
               eb_mix_fit_info *info, dp_err *err);

/* Checks a given prior: k in range, weights finite >= 0 summing to 1 (within 1e-9), means finite,
 * variances finite >= 0. Fields "prior.components[l].weight" etc. */
int eb_mix_prior_check(const eb_mix_prior *p, dp_err *err);

/* Marginal log-likelihood of the messages in g under p (s_i^2 + extra_var noise). */
double eb_mix_loglik(const eb_gauss_data *g, double extra_var, const eb_mix_prior *p);

/* Projects a private fit onto its public bounds (post-processing, no privacy cost): each
 * component mean onto the L2 ball of radius r, each variance onto [0, var_max] (INFINITY: no
 * bound). Returns how many components moved; a fit that moved gets status at least boundary. */
size_t eb_mix_project(eb_mix_prior *p, double r, double var_max, eb_mix_fit_info *info);

/* Exact posterior (see top). resp m*k, post_mean m*d, post_var m*d, shrinkage m; any may be NULL.
 */
int eb_mix_posterior(const eb_gauss_data *g, const eb_mix_prior *p, double *resp, double *post_mean,
                     double *post_var, double *shrinkage, dp_err *err);

/* Sampling variance of each fitted component mean (k values into mu_var, per coordinate):
 * 1 / sum_i w_il / (var_l + s_i^2 + extra_var), the precision-weighted mean's variance with the
 * responsibilities w_il held fixed, computed on the messages the prior was fitted to (g; extra_var
 * the channel's noise variance, 0 for a public fit). INFINITY for a component no client belongs
 * to. As the Gaussian estimator's Var(mu-hat) (eb_gaussian.h), it makes a fitted prior's posterior
 * sd carry the uncertainty of the estimated means: without it a component whose variance is at its
 * floor gives every client in it a posterior sd of about sqrt(floor). */
int eb_mix_mean_var(const eb_gauss_data *g, double extra_var, const eb_mix_prior *p, double *mu_var,
                    dp_err *err);

/* eb_mix_posterior for a fitted prior: mu_var (k values, from eb_mix_mean_var; NULL = means known)
 * adds (1 - a_il)^2 mu_var[l] to the variance within component l, as the Gaussian estimator's
 * posterior variance a^2 s^2 + (1 - a)^2 (tau2 + Var mu-hat) does. */
int eb_mix_posterior_fitted(const eb_gauss_data *g, const eb_mix_prior *p, const double *mu_var,
                            double *resp, double *post_mean, double *post_var, double *shrinkage,
                            dp_err *err);

typedef struct eb_mix_private_opts {
    double eps0, delta;
    eb_calibration cal;
    double r;           /* public bound on |mu_l|_2 */
    double sigma_theta; /* public bound on the component sd (>= 0) */
    double radius;      /* NAN: R from r (Lemma 3); else an explicit public radius > 0 */
    uint64_t seed;
} eb_mix_private_opts;

typedef struct eb_mix_private_info {
    double radius;      /* R */
    double sensitivity; /* 2R */
    double sigma;       /* per-coordinate noise sd */
    double rho;         /* (2R)^2/(2 sigma^2) */
    bool analytic;      /* analytic Gaussian mechanism used */
    size_t n_clipped;   /* clients whose mean was clipped */
} eb_mix_private_info;

/* Radius and noise calibration only (no noise drawn), so the cost can be charged first. */
int eb_mix_private_calibrate(const eb_gauss_data *g, const eb_mix_private_opts *o,
                             eb_mix_private_info *info, dp_err *err);

/* Simulates the clients' messages (m*d, caller-allocated). */
int eb_mix_privatize(const eb_gauss_data *g, const eb_mix_private_opts *o, double *msgs,
                     eb_mix_private_info *info, dp_err *err);

#endif
