/*
 * eb_nm.h: empirical Bayes normal means, the interface of R's ebnm(x, s, prior_family)
 * (Willwerscheid, Carbonetto & Stephens, "ebnm: an R package for solving the empirical Bayes normal
 * means problem using a variety of prior families", arXiv:2110.00152, 2021/2025) and of ashr
 * (Stephens, "False discovery rates: a new deal", Biostatistics 18(2), 2017).
 *
 * Model: x_j | theta_j ~ N(theta_j, s_j^2) with s_j > 0 known, theta_j ~ g iid, g in a family:
 *   EB_NM_NORMAL          g = N(mode, scale^2)
 *   EB_NM_POINT_NORMAL    g = pi0 delta_mode + (1 - pi0) N(mode, scale^2)
 *   EB_NM_SCALE_MIXTURE   g = sum_k pi_k N(mode, sigma_k^2) on a fixed grid of sds sigma_k (the
 *                         first 0: a point mass at the mode), weights by maximum likelihood (ashr's
 *                         "normal" mixcompdist)
 *   EB_NM_NPMLE           g = sum_k pi_k delta_{a_k} on a fixed grid of atoms spanning the data
 *                         (Koenker & Mizera, "Convex optimization, shape constraints, compound
 *                         decisions, and empirical Bayes rules", JASA 109, 2014)
 *   EB_NM_POINT_LAPLACE   g = pi0 delta_mode + (1 - pi0) Laplace(mode, scale), density
 *                         exp(-|theta - mode| / scale) / (2 scale)
 * Every g but the Laplace is a finite mixture of normals (sd 0 = point mass): the marginal of x_j
 * is sum_k pi_k N(x_j; m_k, s_j^2 + sigma_k^2), and the posterior of theta_j is the mixture of the
 * components' normal posteriors with weights pi_k N(x_j; m_k, s_j^2 + sigma_k^2) / marginal.
 * point_laplace is held the same way with component 1 (sd = the Laplace scale b) flagged as
 * Laplace: its marginal, with z = x - mode, is (1/2b) e^{s^2/2b^2} [e^{-z/b} Phi(z/s - s/b) +
 * e^{z/b} Phi(-z/s - s/b)], and its posterior the mixture of N(z - s^2/b, s^2) truncated to theta >
 * mode and N(z + s^2/b, s^2) truncated to theta < mode, in those two proportions (the convolution
 * of a Laplace and a normal; the form ebnm's point_laplace uses).
 *
 * Fit: g maximises the marginal log-likelihood. Mixture weights come from eb_mixsqp_solve (SQP,
 * Kim et al. 2020) on the likelihood matrix built in log space with row-wise max subtraction.
 * For npmle atoms evenly spaced (the default grid, or a given grid with equal steps) the matrix is
 * not stored: eb_mixsqp_solve_rows regenerates its rows a chunk at a time on every pass, as
 * products across the atoms from the grid's middle column (three exponentials a row computed once
 * per fit, 24 bytes a row kept; eb_nm.c, even_seed and even_rows), each entry within (k/2)^2
 * roundings of the stored matrix's (3e-13 relative at k = 100); other layouts hold the n x k
 * matrix. The mode and a scale may each be fixed
 * or estimated; an estimated one is profiled: a coarse scan (EB_NM_SCAN points) then golden-section
 * search on the best bracket, the weights re-solved at each point (warm-started). For the normal
 * family the mode given the scale is the precision-weighted mean (closed form). A scale estimated
 * at 0 (normal), or pi0 at 0 or 1 (point_normal), is reported as EB_STATUS_BOUNDARY.
 *
 * Default grids (when the caller passes none):
 *   - scale mixture: ashr's autoselect.mixsd with mult = sqrt(2): sigma_min = min_j s_j / 10,
 *     sigma_max = 2 sqrt(max_j ((x_j - mode)^2 - s_j^2)) (8 sigma_min when that is not above
 *     sigma_min), the sds sigma_max mult^-i for i = P..0 with P = ceil(log2(sigma_max/sigma_min) /
 *     log2(mult)), and 0 first (ashr's pointmass = TRUE).
 *   - npmle: grid_size (default EB_NM_NPMLE_DEFAULT_GRID) atoms evenly spaced on [min x, max x].
 *
 * Posterior draws: from dp_rng stream DP_RNG_STREAM_NM_DRAWS of the caller's seed, observation
 * by observation in order, draws per observation in order (a component by its posterior weight,
 * then its normal): the same seed gives the same draws on every machine.
 *
 * Memory: inputs borrowed for the call; eb_nm_fit holds owned arrays (eb_nm_fit_free). Threading:
 * reentrant, single-threaded (BLAS pinned to one thread by eb_mixsqp).
 */
#ifndef DP_ESTIMATORS_EB_NM_H
#define DP_ESTIMATORS_EB_NM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dp_err.h"
#include "estimators/eb_common.h"

#define EB_NM_MAX_GRID           1000      /* grid points (atoms or scales) */
#define EB_NM_MAX_CELLS          200000000 /* n x grid likelihoods held at once (1.6 GB) */
#define EB_NM_NPMLE_DEFAULT_GRID 100       /* npmle atoms unless the caller says otherwise */
#define EB_NM_DEFAULT_MULT       1.4142135623730951 /* scale mixture grid ratio, sqrt(2) */
#define EB_NM_SCAN               16                 /* coarse scan points of a profiled parameter */
#define EB_NM_MAX_DRAWS_PER_OBS  1000               /* posterior draws per observation */
#define EB_NM_CANCEL_ROWS        4096 /* rows between two polls of the cancel flag in long passes */

typedef enum eb_nm_family {
    EB_NM_NORMAL = 0,
    EB_NM_POINT_NORMAL,
    EB_NM_SCALE_MIXTURE,
    EB_NM_NPMLE,
    EB_NM_POINT_LAPLACE,
    EB_NM_N_FAMILIES
} eb_nm_family;

/* "normal", "point_normal", "normal_scale_mixture", "npmle", "point_laplace" (ebnm's names). */
const char *eb_nm_family_name(eb_nm_family f);
/* The family of a name, or -1. */
int eb_nm_family_parse(const char *name);

typedef struct eb_nm_data {
    size_t n;        /* observations, [1, EB_MAX_CLIENTS] */
    const double *x; /* n observations, finite; borrowed */
    const double *s; /* n standard errors, finite and > 0; borrowed */
} eb_nm_data;

/* Sizes and values: fields "x" (with index), "s" (with index). */
int eb_nm_data_check(const eb_nm_data *d, dp_err *err);

typedef struct eb_nm_opts {
    eb_nm_family family;
    bool mode_fixed;  /* default true: mode = 0, as ebnm's default */
    double mode;      /* the fixed mode */
    bool scale_fixed; /* normal, point_normal, point_laplace: the scale is given (default false) */
    double scale;     /* the fixed prior sd or Laplace scale (> 0; normal also >= 0) */
    const double *grid; /* NULL: the default grid; else n_grid sds (scale mixture, >= 0,
                           increasing) or atoms (npmle, increasing); borrowed */
    size_t n_grid;
    size_t grid_size;  /* npmle default grid: atoms (0 = EB_NM_NPMLE_DEFAULT_GRID), >= 1 */
    double grid_mult;  /* scale mixture default grid ratio (0 = sqrt 2), > 1 */
    unsigned max_iter; /* mixsqp outer iterations, [1, EB_MAX_ITER_CAP] */
    double tol;        /* mixsqp dual residual tolerance, > 0 */
    /* NULL, or polled at every profile point, every mixsqp outer iteration and every
     * EB_NM_CANCEL_ROWS rows of the likelihood matrix: once true the fit stops with DP_EBUSY
     * ("cancelled"); borrowed (the compute pool's deadline, issue #15) */
    const atomic_bool *cancel;
} eb_nm_opts;

/* family normal, mode fixed at 0, scale estimated, default grids, max_iter 1000, tol 1e-8, no
 * cancel flag. */
eb_nm_opts eb_nm_opts_default(eb_nm_family family);

/* Options against the data (fields "prior_family", "mode", "scale", "grid", "grid_size",
 * "grid_mult", "max_iter", "tol"). */
int eb_nm_opts_check(const eb_nm_opts *o, dp_err *err);

typedef struct eb_nm_fit {
    eb_nm_family family;
    double mode;          /* the prior's mode (NaN for npmle) */
    double scale;         /* normal, point_normal: prior sd (NaN otherwise) */
    double pi0;           /* point_normal: weight of the point mass (NaN otherwise) */
    size_t k;             /* mixture components of g */
    double *w;            /* [k] weights, sum 1; owned */
    double *mean;         /* [k] component means; owned */
    double *sd;           /* [k] component sds (0 = point mass); owned */
    double loglik;        /* sum_j log marginal density of x_j under g */
    unsigned iterations;  /* mixsqp outer iterations (summed over profile points) */
    unsigned evaluations; /* profile points (weights solved), 1 with nothing profiled */
    eb_status status;     /* the answer's: converged, boundary, or max_iter (its weights) */
} eb_nm_fit;

/* Fits g. On success fit owns its arrays (eb_nm_fit_free). DP_EINVAL (bad data or options, a
 * grid too large for n: "grid_size"/"grid"), DP_ENUMERIC, DP_ENOMEM, DP_EBUSY (o->cancel set; fit
 * left empty). */
int eb_nm_fit_prior(const eb_nm_data *d, const eb_nm_opts *o, eb_nm_fit *fit, dp_err *err);

/* Frees fit's arrays and zeroes it; NULL is a no-op. */
void eb_nm_fit_free(eb_nm_fit *fit);

/* sum_j log sum_k w_k N(x_j; mean_k, s_j^2 + sd_k^2). */
double eb_nm_loglik(const eb_nm_data *d, const eb_nm_fit *fit);

typedef struct eb_nm_post {
    double *mean;   /* [n] posterior mean, or NULL */
    double *sd;     /* [n] posterior sd, or NULL */
    double *second; /* [n] posterior second moment E[theta^2 | x], or NULL */
    double *lfsr;   /* [n] local false sign rate min(P(theta >= 0 | x), P(theta <= 0 | x)), or
                       NULL (Stephens 2017, Sec. 2.3) */
    size_t n_draws; /* draws per observation, [0, EB_NM_MAX_DRAWS_PER_OBS] */
    double *draws;  /* [n * n_draws] row-major, or NULL when n_draws = 0 */
    uint64_t seed;  /* seeds the draws */
    const atomic_bool *cancel; /* NULL, or polled every EB_NM_CANCEL_ROWS observations: once true
                                  DP_EBUSY ("cancelled"), outputs partly filled; borrowed */
} eb_nm_post;

/* Posterior summaries of every observation under fit (caller-allocated outputs). DP_EBUSY when
 * p->cancel was set. */
int eb_nm_posterior(const eb_nm_data *d, const eb_nm_fit *fit, eb_nm_post *p, dp_err *err);

#endif
