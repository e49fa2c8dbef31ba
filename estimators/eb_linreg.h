/*
 * eb_linreg.h: personalized linear regression under a Gaussian-mixture prior (Ozkara et al., ICLR
 * 2023, Sec. 3.1 "AdaMix" setting, Table 3; Thm 7 / App E for the per-component posterior;
 * docs/REPRODUCTION.md RT7).
 *
 * Model: theta_i ~ sum_l p_l N(mu_l, var_l I_d); y_i = X_i theta_i + w_i, w_i ~ N(0, sigma_w^2
 * I_{n_i}).
 *
 * - eb_linreg_minnorm: the "local" baseline of Table 3, the minimum-norm least-squares solution
 *   X^+ y (complete orthogonal decomposition), which for n < d projects theta onto the row space.
 * - eb_linreg_mix_fit: empirical Bayes for the mixture prior by EM on the marginal likelihood
 *   y_i ~ sum_l p_l N(X_i mu_l, sigma_w^2 I + var_l X_i X_i^T). This is the server-side GMM step of
 *   AdaMix (Alg 1) carried out exactly: instead of gradient steps on theta_i followed by an
 *   EM-GMM on the theta_i (which the paper leaves unspecified), each E-step uses the exact
 *   per-component posterior (Thm 7, eq. 47: M = I/var_l + X^T X/sigma_w^2,
 *   m_il = M^{-1}(X^T y/sigma_w^2 + mu_l/var_l), Cov = M^{-1}) and the responsibilities; the M-step
 *   updates p_l, mu_l, var_l in closed form. Each client's X^T X is diagonalised once
 *   (gsl_eigen_symmv), so an iteration costs O(m k d^2). Output: the prior, the posterior means
 *   theta_i = sum_l r_il m_il, the log-likelihood, iterations and status. Init: k-means++ on the
 *   min-norm estimates, var_l = their mean per-coordinate variance.
 *
 * Memory: inputs borrowed; outputs caller-allocated. Threading: reentrant.
 */
#ifndef DP_ESTIMATORS_EB_LINREG_H
#define DP_ESTIMATORS_EB_LINREG_H

#include <stddef.h>
#include <stdint.h>

#include "common/dp_err.h"
#include "estimators/eb_common.h"
#include "estimators/eb_mixture.h"

typedef struct eb_linreg_client {
    size_t n;        /* samples */
    const double *X; /* n*d row-major; borrowed */
    const double *y; /* n; borrowed */
} eb_linreg_client;

/* theta (d) = X^+ y, the minimum-norm least-squares solution. n >= 1, 1 <= d <= EB_MAX_DIM. */
int eb_linreg_minnorm(size_t n, size_t d, const double *X, const double *y, double *theta,
                      dp_err *err);

typedef struct eb_linreg_mix_opts {
    size_t k;          /* components, 1 <= k <= min(m, EB_MAX_COMPONENTS) */
    unsigned max_iter; /* EM iterations */
    double tol;        /* stop when the log-likelihood gains <= tol (1 + |ll|) */
    double var_floor;  /* lower bound on var_l, > 0 */
    uint64_t seed;     /* k-means++ seeding */
} eb_linreg_mix_opts;

/* Fits the prior (out sized k, k*d, k) and writes the posterior means theta (m*d, may be NULL).
 * sigma_w2 > 0 known. m >= 2. */
int eb_linreg_mix_fit(size_t m, size_t d, const eb_linreg_client *c, double sigma_w2,
                      const eb_linreg_mix_opts *o, eb_mix_prior *out, double *theta,
                      eb_mix_fit_info *info, dp_err *err);

#endif
