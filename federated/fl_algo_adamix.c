/*
 * federated/fl_algo_adamix.c: personalised learning under a learnt prior on the silos' models
 * (Ozkara, Acharya et al., "A Statistical Framework for Personalized Federated Learning and
 * Estimation: Theory, Algorithms, and Privacy", ICLR 2023): AdaMix (Sec. 3.1, Alg. 1, a
 * Gaussian-mixture prior) and the Gaussian-prior learners (App. E, Alg. 4, linear regression with
 * mu, sigma_theta^2 and sigma_x^2 unknown; App. F, Alg. 5, logistic regression). Both are one
 * prior family with one client objective, so they share this file; each is its own job type.
 *
 * MODEL. Silo k's parameters theta_k (the whole parameter vector of a linear or logistic model, its
 * intercept included: P = d + 1) are drawn from a prior; the MAP objective is Eq. (9),
 * sum_k f_k(theta_k) - sum_k log prior(theta_k), with f_k the negative log-likelihood of the
 * silo's training rows: sum_j (y_j - f(x_j))^2 / (2 s_x) for the linear model (s_x the noise
 * variance) and the summed logistic loss for the logistic model (s_x = 1). Gradients are full
 * batch (batch_size is unused), as the paper's pseudo-code.
 *
 * STEP SIZE. Each gradient step on theta_k is lr / L_k, L_k = c lambda_max(Xt^T Xt) / s_x + the
 * prior's largest curvature (Xt = [x, 1] the silo's rows with the intercept column, c = 1 for the
 * linear loss, 1/4 for the logistic), so that lr in (0, 2) is stable whatever the data's scale and
 * the prior's variance: the paper's single eta is infeasible when the variances are small (digest
 * erratum A14; lambda_max by the eigenvalues of the smaller Gram matrix, or its trace, an upper
 * bound, when both sides exceed PR_GRAM_EIGEN_MAX).
 *
 * ADAMIX (Alg. 1). Prior: sum_l p_l N(mu_l, v_l I_P) (the paper's normaliser (2 pi sigma)^(d/2) is
 * a typo for (2 pi sigma^2)^(d/2)). Round t:
 *   silo k: pr_steps steps theta -= lr / L_k (grad f_k(theta) + sum_l r_l(theta) (theta - mu_l) /
 *           v_l), r_l the posterior responsibilities (log domain), from its last theta_k; it
 *           uploads theta_k. Before the first fit (round 0) there is no prior: the steps are on
 *           f_k alone, from the model's initial value (0 for linear models: gradient descent from
 *           0 tends to the minimum-norm least-squares solution, the digest's initialisation).
 *   server: pr_em_iters EM iterations of a spherical Gaussian mixture on the uploaded theta's
 *           (fl_gmm_em_step), warm-started from the previous round's fit; the first fit starts
 *           from k-means++ seeds (Arthur & Vassilvitskii 2007) drawn from the server's round seed,
 *           p_l = 1/k, v_l the mean squared distance to the nearest seed per coordinate. Every
 *           variance is kept >= pr_var_floor (a constrained M-step, so EM stays monotone).
 *   State: state->extra (shared by all silos) = [fitted flag, p_1..p_k, v_1..v_k, mu_1..mu_k];
 *   state->global is unused (has_global false: AdaMix has no global model).
 *   The paper leaves the GMM algorithm, the iterations, the initialisation and the floors open
 *   (digest A13); the choices above are the digest's, which reproduce its Table 3.
 *
 * GAUSSIAN PRIOR (Alg. 4 with the linear model, Alg. 5 with the logistic). Prior N(mu, s_theta
 * I_P); state->global is mu (evaluated as the federation's model: the prior mean is the "global
 * model" of pFedMe and Ditto, Sec. 2), state->extra = [s_theta, s_x] (0 before the first round: the
 * configured initial values). Variants (cfg->pr_variant):
 *   FL_GP_GD, the paper's gradient descent on the joint negative log-likelihood Eq. (54) (Alg. 4;
 *     Eq. (55) and Alg. 5 for the logistic model, with their sign errors corrected: digest A14,
 *     A15). Silo k, from the broadcast (mu, s_theta, s_x) and its theta^{t-1}: pr_steps steps
 *     theta -= lr / L_k (grad f_k(theta) + (theta - mu) / s_theta); and, Jacobi-style at
 *     theta^{t-1} as in the paper,
 *       mu_k      = mu - lr_mu (mu - theta^{t-1})            (the paper's step eta (mu - theta) /
 *                                                             s_theta with eta = lr_mu s_theta)
 *       s_theta_k = s_theta - lr_var (s_theta - ||mu - theta^{t-1}||^2 / P)
 *       s_x_k     = s_x - lr_var (s_x - sum_j r_j^2 / n_k)   (linear only; r the residuals)
 *     the paper's variance gradients d/(2 s) - S/(2 s^2) with steps eta = lr_var 2 s^2 / d: one
 *     step size per block, scaled by its curvature (A14: a single eta makes the variance steps
 *     explode); lr_mu = lr_var = 1 are the exact block minimisers. Variances floored. The server
 *     averages mu_k, s_theta_k and s_x_k over the silos that took part (the paper's line 13 typo,
 *     sigma_x from the sigma_theta's, corrected). The joint MAP (54) is unbounded below as s_theta
 *     -> 0 with every theta = mu, and this variant does collapse there (docs/REPRODUCTION.md).
 *   FL_GP_EM (linear only), the robust alternative the digest recommends (type-II maximum
 *     likelihood): silo k's E-step is the exact posterior of Thm. 7, Eq. (47): M = I / s_theta +
 *     Xt^T Xt / s_x, theta_k = M^{-1} (Xt^T y / s_x + mu / s_theta) (its personal model), and it
 *     uploads theta_k - mu, tr M^{-1} and ||y - Xt theta_k||^2 + tr(M^{-1} Xt^T Xt); the server's
 *     M-step: mu = mean theta_k, s_theta = sum (||theta_k - mu||^2 + tr M^{-1}) / (K P), s_x =
 *     sum_k (...) / sum_k n_k. lr and pr_steps are unused.
 *
 * PRIVACY. Neither job type is private: theta_k (adamix), mu_k and the variances (gaussian_prior)
 * leave the silo in the clear. They have no event and charge nothing (the paper only sketches a
 * private mixture fit: DP clustering with strong composition, digest §2.5); the service refuses a
 * privacy block for them.
 *
 * DETERMINISM. No silo draws anything; the server's k-means++ seeds come from its round seed; sums
 * run in silo order in double. Results do not depend on the number of threads.
 */
#include "federated/fl_algo_impl.h"

#include <math.h>
#include <string.h>

#include <gsl/gsl_eigen.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_math.h>
#include <gsl/gsl_randist.h>
#include <stdio.h>

#include "accounting/logmath.h"
#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "common/dp_rng.h"

#define PR_GRAM_EIGEN_MAX 256 /* exact lambda_max up to this Gram size, else the trace */
#define ADAMIX_INIT_LABEL                                                                          \
    0x616d6978 /* "amix": the server's k-means++ seeds under its round seed                        \
                */

static bool is_linear(const fl_job_cfg *cfg)
{
    return cfg->model.type == FL_MODEL_LINEAR;
}

/* ---- shared pieces ---- */

int fl_pr_gram_lmax(const float *x, size_t n, size_t d, double *lmax, dp_err *err)
{
    size_t p = d + 1, g = n <= p ? n : p;
    double trace = 0.0;
    for (size_t i = 0; i < n; i++) {
        double s = 1.0;
        for (size_t j = 0; j < d; j++)
            s += (double)x[i * d + j] * (double)x[i * d + j];
        trace += s;
    }
    if (g > PR_GRAM_EIGEN_MAX) {
        *lmax = trace; /* >= lambda_max: a smaller, still stable step */
        return DP_OK;
    }
    fl_blas_single_thread(); /* GSL's linear algebra may call OpenBLAS */
    gsl_matrix *m = gsl_matrix_alloc(g, g);
    gsl_vector *ev = gsl_vector_alloc(g);
    gsl_eigen_symm_workspace *ws = gsl_eigen_symm_alloc(g);
    int rc = DP_OK;
    if (m == NULL || ev == NULL || ws == NULL) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    for (size_t a = 0; a < g; a++)
        for (size_t b = 0; b <= a; b++) {
            double s = 0.0;
            if (n <= p) { /* Xt Xt^T: rows a and b */
                s = 1.0;
                for (size_t j = 0; j < d; j++)
                    s += (double)x[a * d + j] * (double)x[b * d + j];
            } else { /* Xt^T Xt: columns a and b (column d is the intercept's ones) */
                for (size_t i = 0; i < n; i++)
                    s +=
                        (a < d ? (double)x[i * d + a] : 1.0) * (b < d ? (double)x[i * d + b] : 1.0);
            }
            gsl_matrix_set(m, a, b, s);
            gsl_matrix_set(m, b, a, s);
        }
    if (gsl_eigen_symm(m, ev, ws) != GSL_SUCCESS) {
        rc = dp_err_set(err, DP_ENUMERIC, NULL, "the Gram matrix's eigenvalues failed");
        goto out;
    }
    *lmax = gsl_vector_max(ev);
out:
    gsl_eigen_symm_free(ws);
    gsl_vector_free(ev);
    gsl_matrix_free(m);
    return rc;
}

/* The data term's curvature bound c lambda_max / s_x of silo c. */
static int data_curvature(const fl_silo_ctx *c, double s_x, double *l, dp_err *err)
{
    double lmax = 0.0;
    int rc = fl_pr_gram_lmax(c->data->x_train, c->data->n_train, c->d, &lmax, err);
    *l = (is_linear(c->cfg) ? 1.0 : 0.25) * lmax / s_x;
    return rc;
}

static int positive(double x, const char *block, const char *key, dp_err *err)
{
    if (isfinite(x) && x > 0)
        return DP_OK;
    char f[DP_ERR_FIELD_MAX];
    snprintf(f, sizeof f, "%s.%s", block, key);
    return dp_err_set(err, DP_EINVAL, f, "%s must be finite and > 0 (got %g)", f, x);
}

static int pr_check_common(const fl_job_cfg *cfg, dp_err *err)
{
    const char *b = cfg->algorithm;
    if (cfg->model.type != FL_MODEL_LINEAR && cfg->model.type != FL_MODEL_LOGISTIC)
        return dp_err_set(err, DP_EINVAL, "model.type",
                          "%s puts its prior on a linear or logistic model's parameters", b);
    if (!(cfg->lr < 2))
        return dp_err_set(
            err, DP_EINVAL, "lr",
            "%s takes lr in (0, 2): each step is lr / L, L the silo's curvature bound "
            "(got %g)",
            b, cfg->lr);
    if (cfg->pr_steps < 1 || cfg->pr_steps > FL_MAX_PR_STEPS) {
        char f[DP_ERR_FIELD_MAX];
        snprintf(f, sizeof f, "%s.steps", b);
        return dp_err_set(err, DP_EINVAL, f, "%s must be in 1..%d (got %llu)", f, FL_MAX_PR_STEPS,
                          (unsigned long long)cfg->pr_steps);
    }
    return positive(cfg->pr_var_floor, b, "var_floor", err);
}

/* ---- AdaMix ---- */

static size_t adamix_extra(const fl_job_cfg *cfg, size_t n_silos, size_t n_params)
{
    (void)n_silos;
    return 1 + cfg->pr_components * (2 + n_params);
}

static int adamix_check(const fl_job_cfg *cfg, dp_err *err)
{
    int rc = pr_check_common(cfg, err);
    if (rc == DP_OK && (cfg->pr_components < 1 || cfg->pr_components > FL_MAX_MIX_COMPONENTS))
        rc = dp_err_set(err, DP_EINVAL, "adamix.components",
                        "adamix.components must be in 1..%d (got %zu)", FL_MAX_MIX_COMPONENTS,
                        cfg->pr_components);
    if (rc == DP_OK && (cfg->pr_em_iters < 1 || cfg->pr_em_iters > FL_MAX_PR_EM_ITERS))
        rc = dp_err_set(err, DP_EINVAL, "adamix.em_iters",
                        "adamix.em_iters must be in 1..%d (got %llu)", FL_MAX_PR_EM_ITERS,
                        (unsigned long long)cfg->pr_em_iters);
    if (rc == DP_OK)
        rc = positive(cfg->pr_noise_var, "adamix", "noise_var", err);
    return rc;
}

/* log(p_l N(theta; mu_l, v_l I_p)) for l < k into lr; returns their log-sum-exp. */
static double mix_logdens(const double *theta, size_t p, size_t k, const double *w,
                          const double *mu, const double *var, double *lr)
{
    for (size_t l = 0; l < k; l++) {
        if (!(w[l] > 0)) {
            lr[l] = -DP_INF;
            continue;
        }
        double d2 = 0.0;
        for (size_t j = 0; j < p; j++) {
            double e = theta[j] - mu[l * p + j];
            d2 += e * e;
        }
        lr[l] = log(w[l]) - 0.5 * (double)p * log(2.0 * M_PI * var[l]) - d2 / (2.0 * var[l]);
    }
    return dp_logsumexp(lr, k);
}

void fl_adamix_prior_grad(const double *theta, size_t p, size_t k, const double *w,
                          const double *mu, const double *var, double *resp, double *g)
{
    double lse = mix_logdens(theta, p, k, w, mu, var, resp);
    for (size_t l = 0; l < k; l++)
        resp[l] = isinf(resp[l]) ? 0.0 : exp(resp[l] - lse);
    for (size_t j = 0; j < p; j++) {
        double s = 0.0;
        for (size_t l = 0; l < k; l++)
            s += resp[l] * (theta[j] - mu[l * p + j]) / var[l];
        g[j] = s;
    }
}

double fl_gmm_loglik(const double *x, size_t m, size_t p, size_t k, const double *w,
                     const double *mu, const double *var, double *lr)
{
    double ll = 0.0;
    for (size_t i = 0; i < m; i++)
        ll += mix_logdens(x + i * p, p, k, w, mu, var, lr);
    return ll;
}

double fl_gmm_em_step(const double *x, size_t m, size_t p, size_t k, double var_floor, double *w,
                      double *mu, double *var, double *resp)
{
    double ll = 0.0;
    for (size_t i = 0; i < m; i++) { /* E-step */
        double *r = resp + i * k;
        double lse = mix_logdens(x + i * p, p, k, w, mu, var, r);
        ll += lse;
        for (size_t l = 0; l < k; l++)
            r[l] = isinf(r[l]) ? 0.0 : exp(r[l] - lse);
    }
    for (size_t l = 0; l < k; l++) { /* M-step */
        double nl = 0.0;
        for (size_t i = 0; i < m; i++)
            nl += resp[i * k + l];
        w[l] = nl / (double)m;
        if (!(nl > 0))
            continue; /* an emptied component keeps its mean and variance, weight 0 */
        double *ml = mu + l * p;
        for (size_t j = 0; j < p; j++) {
            double s = 0.0;
            for (size_t i = 0; i < m; i++)
                s += resp[i * k + l] * x[i * p + j];
            ml[j] = s / nl;
        }
        double sv = 0.0;
        for (size_t i = 0; i < m; i++) {
            double d2 = 0.0;
            for (size_t j = 0; j < p; j++) {
                double e = x[i * p + j] - ml[j];
                d2 += e * e;
            }
            sv += resp[i * k + l] * d2;
        }
        var[l] = fmax(sv / ((double)p * nl), var_floor);
    }
    return ll;
}

/* The extra layout: [flag, w (k), var (k), mu (k x p)]. */
static void mix_load(const float *ex, size_t k, size_t p, double *w, double *var, double *mu)
{
    for (size_t l = 0; l < k; l++) {
        w[l] = (double)ex[1 + l];
        var[l] = (double)ex[1 + k + l];
    }
    for (size_t j = 0; j < k * p; j++)
        mu[j] = (double)ex[1 + 2 * k + j];
}

static int adamix_update(const fl_silo_ctx *c, double *train_loss, dp_err *err)
{
    const fl_job_cfg *cfg = c->cfg;
    const fl_silo_data *sd = c->data;
    size_t p = c->n_params, n = sd->n_train, k = cfg->pr_components;
    const float *ex = c->shared_extra;
    bool fitted = ex != NULL && ex[0] > 0;
    double s_x = is_linear(cfg) ? cfg->pr_noise_var : 1.0, l_k = 0.0;
    int rc = data_curvature(c, s_x, &l_k, err);
    if (rc != DP_OK)
        return rc;
    double *buf = dp_calloc(3 * p + k * (p + 3), sizeof(double));
    if (buf == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    double *th = buf, *gp = th + p, *mu = gp + p, *w = mu + k * p, *var = w + k, *resp = var + k;
    float *g = c->scratch, *theta = c->personal;
    if (fitted) {
        mix_load(ex, k, p, w, var, mu);
        double vmin = DP_INF;
        for (size_t l = 0; l < k; l++)
            vmin = w[l] > 0 ? fmin(vmin, var[l]) : vmin;
        l_k += 1.0 / vmin;
    }
    double eta = cfg->lr / l_k, loss = 0.0;
    for (uint64_t s = 0; s < cfg->pr_steps; s++) {
        loss = fl_model_grad_sum(c->model, theta, sd->x_train, sd->y_train, n, c->ws, g);
        for (size_t j = 0; j < p; j++)
            th[j] = (double)theta[j];
        if (fitted)
            fl_adamix_prior_grad(th, p, k, w, mu, var, resp, gp);
        for (size_t j = 0; j < p; j++)
            theta[j] = (float)(th[j] - eta * ((double)g[j] / s_x + (fitted ? gp[j] : 0.0)));
    }
    dp_free(buf);
    *train_loss = loss / (double)n; /* the mean loss at the last step's starting point */
    memcpy(c->upload, theta, p * sizeof(float));
    return DP_OK;
}

/* k-means++ seeds (Arthur & Vassilvitskii 2007) of the first fit: p_l = 1/k, mu_l the seeds, v_l
 * the mean squared distance to the nearest seed per coordinate (floored). */
static int mix_init(const fl_server_ctx *c, const double *x, size_t m, size_t p, double *w,
                    double *mu, double *var, double *d2, dp_err *err)
{
    size_t k = c->cfg->pr_components;
    gsl_rng *r =
        dp_rng_alloc(dp_rng_derive(fl_server_seed(c->cfg->seed, c->round), ADAMIX_INIT_LABEL),
                     DP_RNG_STREAM_FL_MODEL_INIT, err);
    if (r == NULL)
        return err != NULL ? err->code : DP_ENOMEM;
    for (size_t l = 0; l < k; l++) {
        size_t pick = 0;
        double total = 0.0;
        for (size_t i = 0; l > 0 && i < m; i++)
            total += d2[i];
        if (l == 0 || !(total > 0)) {
            pick = (size_t)gsl_rng_uniform_int(r, (unsigned long)m);
        } else {
            double u = gsl_rng_uniform(r) * total, acc = 0.0;
            pick = m - 1;
            for (size_t i = 0; i < m; i++) {
                acc += d2[i];
                if (u < acc) {
                    pick = i;
                    break;
                }
            }
        }
        memcpy(mu + l * p, x + pick * p, p * sizeof(double));
        for (size_t i = 0; i < m; i++) {
            double e2 = 0.0;
            for (size_t j = 0; j < p; j++) {
                double e = x[i * p + j] - mu[l * p + j];
                e2 += e * e;
            }
            d2[i] = l == 0 ? e2 : fmin(d2[i], e2);
        }
    }
    gsl_rng_free(r);
    double sv = 0.0;
    for (size_t i = 0; i < m; i++)
        sv += d2[i];
    for (size_t l = 0; l < k; l++) {
        w[l] = 1.0 / (double)k;
        var[l] = fmax(sv / ((double)m * (double)p), c->cfg->pr_var_floor);
    }
    return DP_OK;
}

static int adamix_aggregate(const fl_server_ctx *c, dp_err *err)
{
    fl_state *s = c->state;
    size_t p = s->n_params, k = c->cfg->pr_components, m = 0;
    for (size_t i = 0; i < s->n_silos; i++)
        m += c->took_part[i];
    if (m == 0)
        return DP_OK;
    double *x = dp_calloc(m * p + k * (p + 2) + m * k + m, sizeof(double));
    if (x == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    double *mu = x + m * p, *w = mu + k * p, *var = w + k, *resp = var + k, *d2 = resp + m * k;
    for (size_t i = 0, r = 0; i < s->n_silos; i++)
        if (c->took_part[i]) {
            for (size_t j = 0; j < p; j++)
                x[r * p + j] = (double)c->uploads[i * c->upload_stride + j];
            r++;
        }
    int rc = DP_OK;
    if (s->extra[0] > 0)
        mix_load(s->extra, k, p, w, var, mu);
    else
        rc = mix_init(c, x, m, p, w, mu, var, d2, err);
    for (uint64_t it = 0; rc == DP_OK && it < c->cfg->pr_em_iters; it++)
        fl_gmm_em_step(x, m, p, k, c->cfg->pr_var_floor, w, mu, var, resp);
    if (rc == DP_OK) {
        s->extra[0] = 1.0f;
        for (size_t l = 0; l < k; l++) {
            s->extra[1 + l] = (float)w[l];
            s->extra[1 + k + l] = (float)fmax(var[l], c->cfg->pr_var_floor);
        }
        for (size_t j = 0; j < k * p; j++)
            s->extra[1 + 2 * k + j] = (float)mu[j];
    }
    dp_free(x);
    return rc;
}

int fl_adamix_mixture(const fl_job_cfg *cfg, const fl_state *s, double *w, double *var, double *mu)
{
    size_t k = cfg->pr_components, p = s->n_params;
    if (s->n_extra != 1 + k * (2 + p) || !(s->extra[0] > 0))
        return DP_ENOTFOUND;
    mix_load(s->extra, k, p, w, var, mu);
    return DP_OK;
}

/* ---- Gaussian prior ---- */

static size_t gp_extra(const fl_job_cfg *cfg, size_t n_silos, size_t n_params)
{
    (void)cfg;
    (void)n_silos;
    (void)n_params;
    return 2;
}

static size_t gp_upload(const fl_job_cfg *cfg, size_t n_params)
{
    (void)cfg;
    return n_params + 2;
}

static int gp_check(const fl_job_cfg *cfg, dp_err *err)
{
    int rc = pr_check_common(cfg, err);
    if (rc == DP_OK && cfg->pr_variant != FL_GP_GD && cfg->pr_variant != FL_GP_EM)
        rc = dp_err_set(err, DP_EINVAL, "gaussian_prior.variant",
                        "gaussian_prior.variant must be gd or em");
    if (rc == DP_OK && cfg->pr_variant == FL_GP_EM && !is_linear(cfg))
        rc = dp_err_set(err, DP_EINVAL, "gaussian_prior.variant",
                        "gaussian_prior.variant em needs the linear model (its E-step is the "
                        "closed-form Gaussian posterior); the logistic model takes gd (Alg. 5)");
    if (rc == DP_OK && cfg->pr_variant == FL_GP_EM &&
        fl_model_n_params(&cfg->model) > FL_MAX_GP_EM_PARAMS)
        rc = dp_err_set(err, DP_EINVAL, "model.d_in",
                        "gaussian_prior.variant em solves a P x P system per silo: at most %d "
                        "parameters",
                        FL_MAX_GP_EM_PARAMS);
    if (rc == DP_OK)
        rc = positive(cfg->pr_sigma_theta2, "gaussian_prior", "sigma_theta2", err);
    if (rc == DP_OK)
        rc = positive(cfg->pr_sigma_x2, "gaussian_prior", "sigma_x2", err);
    if (rc == DP_OK && !(cfg->pr_lr_mu >= 0 && cfg->pr_lr_mu <= 2))
        rc = dp_err_set(err, DP_EINVAL, "gaussian_prior.lr_mu",
                        "gaussian_prior.lr_mu must be in [0, 2] (got %g)", cfg->pr_lr_mu);
    if (rc == DP_OK && !(cfg->pr_lr_var >= 0 && cfg->pr_lr_var <= 1))
        rc = dp_err_set(err, DP_EINVAL, "gaussian_prior.lr_var",
                        "gaussian_prior.lr_var must be in [0, 1] (got %g)", cfg->pr_lr_var);
    return rc;
}

void fl_gp_variances(const fl_job_cfg *cfg, const fl_state *s, double *s_theta, double *s_x)
{
    bool set = s->n_extra == 2 && s->extra[0] > 0;
    *s_theta = set ? (double)s->extra[0] : cfg->pr_sigma_theta2;
    *s_x = !is_linear(cfg) ? 1.0 : set ? (double)s->extra[1] : cfg->pr_sigma_x2;
}

static void gp_broadcast(const fl_silo_ctx *c, double *s_theta, double *s_x)
{
    const float *ex = c->shared_extra;
    bool set = ex != NULL && ex[0] > 0;
    *s_theta = set ? (double)ex[0] : c->cfg->pr_sigma_theta2;
    *s_x = !is_linear(c->cfg) ? 1.0 : set ? (double)ex[1] : c->cfg->pr_sigma_x2;
}

/* Alg. 4 / Alg. 5 (see the top). */
static int gp_update_gd(const fl_silo_ctx *c, double *train_loss, dp_err *err)
{
    const fl_job_cfg *cfg = c->cfg;
    const fl_silo_data *sd = c->data;
    size_t p = c->n_params, n = sd->n_train;
    double s_t, s_x, l_k = 0.0;
    gp_broadcast(c, &s_t, &s_x);
    int rc = data_curvature(c, s_x, &l_k, err);
    if (rc != DP_OK)
        return rc;
    float *g = c->scratch, *theta = c->personal;
    const float *mu = c->global;
    double dmu2 = 0.0;
    for (size_t j = 0; j < p; j++) {
        double e = (double)mu[j] - (double)theta[j];
        dmu2 += e * e;
        c->upload[j] = (float)(-cfg->pr_lr_mu * e); /* mu_k - mu */
    }
    double loss0 = 0.0, eta = cfg->lr / (l_k + 1.0 / s_t);
    for (uint64_t s = 0; s < cfg->pr_steps; s++) {
        double loss = fl_model_grad_sum(c->model, theta, sd->x_train, sd->y_train, n, c->ws, g);
        loss0 = s == 0 ? loss : loss0;
        for (size_t j = 0; j < p; j++)
            theta[j] = (float)((double)theta[j] - eta * ((double)g[j] / s_x +
                                                         ((double)theta[j] - (double)mu[j]) / s_t));
    }
    double st_k = fmax(s_t - cfg->pr_lr_var * (s_t - dmu2 / (double)p), cfg->pr_var_floor);
    /* linear: the loss is 1/2 sum r^2, so sum r^2 = 2 loss */
    double sx_k = is_linear(cfg) ? fmax(s_x - cfg->pr_lr_var * (s_x - 2.0 * loss0 / (double)n),
                                        cfg->pr_var_floor)
                                 : 1.0;
    c->upload[p] = (float)st_k;
    c->upload[p + 1] = (float)sx_k;
    *train_loss = loss0 / (double)n; /* at theta^{t-1} */
    return DP_OK;
}

/* The exact E-step (Thm. 7, Eq. (47)) in double with a Cholesky factorisation. */
static int gp_update_em(const fl_silo_ctx *c, double *train_loss, dp_err *err)
{
    const fl_silo_data *sd = c->data;
    size_t p = c->n_params, n = sd->n_train, d = c->d;
    double s_t, s_x;
    gp_broadcast(c, &s_t, &s_x);
    fl_blas_single_thread();
    gsl_matrix *mm = gsl_matrix_calloc(p, p), *gram = gsl_matrix_calloc(p, p);
    gsl_vector *b = gsl_vector_calloc(p), *mean = gsl_vector_alloc(p);
    int rc = DP_OK;
    if (mm == NULL || gram == NULL || b == NULL || mean == NULL) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const float *xi = sd->x_train + i * d;
        double yi = (double)sd->y_train[i];
        for (size_t u = 0; u < p; u++) {
            double xu = u < d ? (double)xi[u] : 1.0;
            b->data[u] += xu * yi;
            for (size_t v = 0; v <= u; v++)
                gram->data[u * p + v] += xu * (v < d ? (double)xi[v] : 1.0);
        }
    }
    for (size_t u = 0; u < p; u++) {
        for (size_t v = 0; v <= u; v++) {
            double gv = gram->data[u * p + v];
            gram->data[v * p + u] = gv;
            double a = gv / s_x + (u == v ? 1.0 / s_t : 0.0);
            gsl_matrix_set(mm, u, v, a);
            gsl_matrix_set(mm, v, u, a);
        }
        b->data[u] = b->data[u] / s_x + (double)c->global[u] / s_t;
    }
    if (gsl_linalg_cholesky_decomp1(mm) != GSL_SUCCESS ||
        gsl_linalg_cholesky_solve(mm, b, mean) != GSL_SUCCESS ||
        gsl_linalg_cholesky_invert(mm) != GSL_SUCCESS) {
        rc = dp_err_set(err, DP_ENUMERIC, NULL, "the posterior's Cholesky factorisation failed");
        goto out;
    }
    double tr = 0.0, trg = 0.0, rss = 0.0;
    for (size_t u = 0; u < p; u++) {
        tr += gsl_matrix_get(mm, u, u);
        for (size_t v = 0; v < p; v++)
            trg += gsl_matrix_get(mm, u, v) * gram->data[u * p + v];
    }
    for (size_t i = 0; i < n; i++) {
        const float *xi = sd->x_train + i * d;
        double f = mean->data[d];
        for (size_t j = 0; j < d; j++)
            f += (double)xi[j] * mean->data[j];
        double r = (double)sd->y_train[i] - f;
        rss += r * r;
    }
    for (size_t j = 0; j < p; j++) {
        c->personal[j] = (float)mean->data[j];
        c->upload[j] = (float)(mean->data[j] - (double)c->global[j]);
    }
    c->upload[p] = (float)tr;
    c->upload[p + 1] = (float)(rss + trg);
    *train_loss = 0.5 * rss / (double)n; /* at the new posterior mean */
out:
    gsl_vector_free(mean);
    gsl_vector_free(b);
    gsl_matrix_free(gram);
    gsl_matrix_free(mm);
    return rc;
}

static int gp_update(const fl_silo_ctx *c, double *train_loss, dp_err *err)
{
    return c->cfg->pr_variant == FL_GP_EM ? gp_update_em(c, train_loss, err)
                                          : gp_update_gd(c, train_loss, err);
}

static int gp_aggregate(const fl_server_ctx *c, dp_err *err)
{
    fl_state *s = c->state;
    const fl_job_cfg *cfg = c->cfg;
    size_t p = s->n_params, st = c->upload_stride, m = 0, n_rows = 0;
    double *acc = dp_calloc(p, sizeof(double));
    if (acc == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    double a_t = 0.0, a_x = 0.0;
    for (size_t k = 0; k < s->n_silos; k++) {
        if (!c->took_part[k])
            continue;
        m++;
        n_rows += c->fed->silo[k].n_train;
        for (size_t j = 0; j < p; j++)
            acc[j] += (double)c->uploads[k * st + j];
        a_t += (double)c->uploads[k * st + p];
        a_x += (double)c->uploads[k * st + p + 1];
    }
    if (m == 0) {
        dp_free(acc);
        return DP_OK;
    }
    double s_t, s_x;
    fl_gp_variances(cfg, s, &s_t, &s_x);
    if (cfg->pr_variant == FL_GP_GD) {
        s_t = a_t / (double)m;
        s_x = is_linear(cfg) ? a_x / (double)m : 1.0;
    } else { /* M-step: theta_k = mu + upload_k, mu' = mu + mean upload */
        for (size_t j = 0; j < p; j++)
            acc[j] /= (double)m;
        double ss = 0.0;
        for (size_t k = 0; k < s->n_silos; k++) {
            if (!c->took_part[k])
                continue;
            for (size_t j = 0; j < p; j++) {
                double e = (double)c->uploads[k * st + j] - acc[j];
                ss += e * e;
            }
        }
        s_t = (ss + a_t) / ((double)m * (double)p);
        s_x = a_x / (double)n_rows;
        for (size_t j = 0; j < p; j++)
            acc[j] *= (double)m; /* back to the sum for the common update below */
    }
    for (size_t j = 0; j < p; j++)
        s->global[j] = (float)((double)s->global[j] + acc[j] / (double)m);
    s->extra[0] = (float)fmax(s_t, cfg->pr_var_floor);
    s->extra[1] = (float)fmax(s_x, cfg->pr_var_floor);
    dp_free(acc);
    return DP_OK;
}

static bool pr_never(const fl_job_cfg *cfg)
{
    (void)cfg;
    return false;
}

const fl_algo_ops fl_algo_adamix_ops = {
    .name = "adamix",
    .steps_factor = 1,
    .has_global = false,
    .record_level = false,
    .extra_per_silo = false,
    .extra_floats = adamix_extra,
    .check = adamix_check,
    .select = NULL, /* every trainable silo, every round (Alg. 1) */
    .silo_update = adamix_update,
    .aggregate = adamix_aggregate,
    .releases = pr_never, /* non-private: no event, nothing charged */
};

const fl_algo_ops fl_algo_gaussian_prior_ops = {
    .name = "gaussian_prior",
    .steps_factor = 1,
    .has_global = true,
    .record_level = false,
    .extra_per_silo = false,
    .extra_floats = gp_extra,
    .check = gp_check,
    .select = NULL, /* every trainable silo, every round (Alg. 4, Alg. 5) */
    .silo_update = gp_update,
    .aggregate = gp_aggregate,
    .releases = pr_never,
    .upload_floats = gp_upload,
};

/* ---- synthetic federations of the paper's linear-regression experiments ---- */

static void synth_rows(gsl_rng *r, const fl_prior_synth *s, const double *th, size_t n, float *x,
                       float *y)
{
    double sx = sqrt(s->x_var), sw = sqrt(s->noise_var);
    for (size_t i = 0; i < n; i++) {
        double v = 0.0;
        for (size_t j = 0; j < s->dim; j++) {
            x[i * s->dim + j] = (float)(sx * gsl_ran_gaussian_ziggurat(r, 1.0));
            v += th[j] * (double)x[i * s->dim + j];
        }
        y[i] = (float)(v + sw * gsl_ran_gaussian_ziggurat(r, 1.0));
    }
}

int fl_prior_synth_generate(const fl_prior_synth *s, fl_federation *out, double *theta, dp_err *err)
{
    memset(out, 0, sizeof *out);
    if (s->silos < 1 || s->silos > FL_MAX_SILOS || s->dim < 1 || s->dim > 100000 ||
        s->n_train < 1 || s->n_train > 1000000 || s->n_test > 1000000 ||
        (s->components != 1 && s->components != 2) || !(s->mu_scale >= 0) ||
        !(s->sigma_theta2 >= 0) || !(s->x_var > 0) || !(s->noise_var >= 0))
        return dp_err_set(err, DP_EINVAL, "spec", "the synthetic prior spec is out of range");
    size_t d = s->dim;
    double *mu = dp_calloc(d, sizeof(double)), *th = dp_calloc(d, sizeof(double));
    gsl_rng *r = dp_rng_alloc(s->seed, DP_RNG_STREAM_DATA, err);
    out->silo = dp_calloc(s->silos, sizeof(fl_silo_data));
    int rc = DP_OK;
    if (mu == NULL || th == NULL || r == NULL || out->silo == NULL) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    out->d = d;
    out->n_classes = 0;
    out->n_silos = s->silos;
    for (size_t j = 0; j < d; j++)
        mu[j] = s->components == 1 ? s->mu_scale * gsl_ran_gaussian_ziggurat(r, 1.0) : s->mu_scale;
    double st = sqrt(s->sigma_theta2);
    for (size_t k = 0; k < s->silos && rc == DP_OK; k++) {
        double sign = s->components == 2 && gsl_rng_uniform(r) < 0.5 ? -1.0 : 1.0;
        for (size_t j = 0; j < d; j++)
            th[j] = sign * mu[j] + st * gsl_ran_gaussian_ziggurat(r, 1.0);
        if (theta != NULL)
            memcpy(theta + k * d, th, d * sizeof(double));
        fl_silo_data *sd = &out->silo[k];
        sd->n_train = s->n_train;
        sd->n_test = s->n_test;
        sd->x_train = dp_calloc(s->n_train * d, sizeof(float));
        sd->y_train = dp_calloc(s->n_train, sizeof(float));
        sd->x_test = dp_calloc(s->n_test * d + 1, sizeof(float));
        sd->y_test = dp_calloc(s->n_test + 1, sizeof(float));
        sd->name = dp_calloc(24, 1);
        if (!sd->x_train || !sd->y_train || !sd->x_test || !sd->y_test || !sd->name) {
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
            break;
        }
        snprintf(sd->name, 24, "s%zu", k);
        synth_rows(r, s, th, s->n_train, sd->x_train, sd->y_train);
        synth_rows(r, s, th, s->n_test, sd->x_test, sd->y_test);
    }
    if (rc == DP_OK)
        rc = fl_federation_refresh(out, err);
out:
    gsl_rng_free(r);
    dp_free(th);
    dp_free(mu);
    if (rc != DP_OK)
        fl_federation_free(out);
    return rc;
}

fl_prior_synth fl_prior_rt8_spec(size_t silos, size_t dim, uint64_t seed)
{
    return (fl_prior_synth){.silos = silos,
                            .dim = dim,
                            .n_train = 10,
                            .n_test = 10,
                            .components = 1,
                            .mu_scale = 0.1,
                            .sigma_theta2 = 0.01,
                            .x_var = 0.05,
                            .noise_var = 0.05,
                            .seed = seed};
}

fl_prior_synth fl_prior_rt7_spec(size_t silos, size_t n, uint64_t seed)
{
    return (fl_prior_synth){.silos = silos,
                            .dim = 50,
                            .n_train = n,
                            .n_test = 10,
                            .components = 2,
                            .mu_scale = 1.0,
                            .sigma_theta2 = 0.001,
                            .x_var = 1.0,
                            .noise_var = 0.1,
                            .seed = seed};
}
