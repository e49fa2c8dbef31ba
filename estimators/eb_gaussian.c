/*
 * eb_gaussian.c: Gaussian-prior empirical Bayes (Ozkara et al. 2023, Thm 1, Thm 2).
 * See eb_gaussian.h for the model and the contracts.
 */
#include "estimators/eb_gaussian.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_math.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_roots.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"

/* Brent on the tau2 score stops when the bracket is this narrow: relative to tau2, plus an absolute
 * floor relative to the data scale (range^2), far below any statistically meaningful difference. */
#define EB_GAUSS_TAU2_RTOL     1e-12
#define EB_GAUSS_TAU2_ATOL_REL 1e-15

int eb_gauss_data_check(const eb_gauss_data *g, dp_err *err)
{
    if (g->m < 1 || g->m > EB_MAX_CLIENTS)
        return dp_err_set(err, DP_EINVAL, "clients",
                          "number of clients must be in [1, %d] (got %zu)", EB_MAX_CLIENTS, g->m);
    if (g->d < 1 || g->d > EB_MAX_DIM)
        return dp_err_set(err, DP_EINVAL, "clients[0].mean",
                          "dimension must be in [1, %d] (got %zu)", EB_MAX_DIM, g->d);
    if (!isfinite(g->sigma_x2) || g->sigma_x2 <= 0)
        return dp_err_set(err, DP_EINVAL, "noise_variance",
                          "noise_variance must be finite and > 0 (got %g)", g->sigma_x2);
    char f[DP_ERR_FIELD_MAX];
    for (size_t i = 0; i < g->m; i++) {
        if (!isfinite(g->n[i]) || g->n[i] < 1) {
            snprintf(f, sizeof f, "clients[%zu].n", i);
            return dp_err_set(err, DP_EINVAL, f, "n must be >= 1 (got %g)", g->n[i]);
        }
        for (size_t j = 0; j < g->d; j++)
            if (!isfinite(g->x[i * g->d + j])) {
                snprintf(f, sizeof f, "clients[%zu].mean", i);
                return dp_err_set(err, DP_EINVAL, f, "mean must be finite");
            }
    }
    return DP_OK;
}

int eb_gauss_pool_sigma_x2(size_t m, const double *n, const double *within_var, double *sigma_x2,
                           dp_err *err)
{
    double num = 0.0, den = 0.0;
    char f[DP_ERR_FIELD_MAX];
    for (size_t i = 0; i < m; i++) {
        if (!isfinite(within_var[i]) || within_var[i] < 0) {
            snprintf(f, sizeof f, "clients[%zu].within_variance", i);
            return dp_err_set(err, DP_EINVAL, f, "within_variance must be finite and >= 0 (got %g)",
                              within_var[i]);
        }
        if (n[i] >= 2) {
            num += (n[i] - 1.0) * within_var[i];
            den += n[i] - 1.0;
        }
    }
    if (den <= 0)
        return dp_err_set(
            err, DP_EINVAL, "clients",
            "pooling noise_variance needs a client with n >= 2 and a within_variance");
    if (num <= 0)
        return dp_err_set(err, DP_EINVAL, "clients",
                          "pooled within-client variance is 0; give noise_variance instead");
    *sigma_x2 = num / den;
    return DP_OK;
}

double eb_gauss_loglik(const eb_gauss_data *g, size_t j, double mu, double tau2, double extra_var)
{
    double ll = 0.0;
    for (size_t i = 0; i < g->m; i++) {
        double v = tau2 + g->sigma_x2 / g->n[i] + extra_var;
        double r = g->x[i * g->d + j] - mu;
        ll += -0.5 * (log(2.0 * M_PI * v) + r * r / v);
    }
    return ll;
}

/* Precision-weighted mean of coordinate j at tau2; *sw = sum of weights. */
static double weighted_mean(const eb_gauss_data *g, size_t j, double tau2, double extra, double *sw)
{
    double s = 0.0, sx = 0.0;
    for (size_t i = 0; i < g->m; i++) {
        double w = 1.0 / (tau2 + g->sigma_x2 / g->n[i] + extra);
        s += w;
        sx += w * g->x[i * g->d + j];
    }
    *sw = s;
    return sx / s;
}

typedef struct score_ctx {
    const eb_gauss_data *g;
    size_t j;
    double extra;
} score_ctx;

/* d/dtau2 of the profile log-likelihood (envelope theorem: mu is optimal at each tau2):
 * 1/2 sum_i [ (x_i - mu)^2 / v_i^2 - 1 / v_i ],  v_i = tau2 + s_i^2 + extra. */
static double profile_score(double tau2, void *p)
{
    const score_ctx *c = p;
    double sw;
    double mu = weighted_mean(c->g, c->j, tau2, c->extra, &sw);
    double s = 0.0;
    for (size_t i = 0; i < c->g->m; i++) {
        double v = tau2 + c->g->sigma_x2 / c->g->n[i] + c->extra;
        double r = c->g->x[i * c->g->d + c->j] - mu;
        s += (r * r / v - 1.0) / v;
    }
    return 0.5 * s;
}

/* Clients grouped by n (heteroscedastic data usually has few distinct n): the profile likelihood
 * then costs O(groups) per evaluation instead of O(m). Per group: count c, noise s^2 = sigma_x^2/n,
 * mean and within-group sum of squares, so sum_{i in k} (x_i - mu)^2 = ss_k + c_k (mean_k - mu)^2
 * without cancellation. */
#define EB_GAUSS_MAX_GROUPS 4096 /* more distinct n: evaluate per client instead */
#define EB_GAUSS_HASH       8192 /* open-addressing table, 2x the groups */

typedef struct ngroup {
    double n, s2, c, mean, ss;
} ngroup;

/* Assigns each client a group id by n; returns the number of groups, or 0 if above the cap. */
static size_t group_by_n(const eb_gauss_data *g, uint32_t *gid, ngroup *grp, int32_t *table)
{
    for (size_t h = 0; h < EB_GAUSS_HASH; h++)
        table[h] = -1;
    size_t k = 0;
    for (size_t i = 0; i < g->m; i++) {
        double n = g->n[i];
        uint64_t bits;
        memcpy(&bits, &n, sizeof bits);
        size_t h = (size_t)((bits * 0x9e3779b97f4a7c15ULL) >> 51) & (EB_GAUSS_HASH - 1);
        while (table[h] >= 0 && grp[table[h]].n != n)
            h = (h + 1) & (EB_GAUSS_HASH - 1);
        if (table[h] < 0) {
            if (k == EB_GAUSS_MAX_GROUPS)
                return 0;
            table[h] = (int32_t)k;
            grp[k] = (ngroup){n, g->sigma_x2 / n, 0, 0, 0};
            k++;
        }
        gid[i] = (uint32_t)table[h];
    }
    return k;
}

/* Per-group mean and within sum of squares of coordinate j (two passes). */
static void group_stats(const eb_gauss_data *g, size_t j, const uint32_t *gid, ngroup *grp,
                        size_t k)
{
    for (size_t l = 0; l < k; l++)
        grp[l].c = grp[l].mean = grp[l].ss = 0.0;
    for (size_t i = 0; i < g->m; i++) {
        grp[gid[i]].c += 1.0;
        grp[gid[i]].mean += g->x[i * g->d + j];
    }
    for (size_t l = 0; l < k; l++)
        grp[l].mean /= grp[l].c;
    for (size_t i = 0; i < g->m; i++) {
        double r = g->x[i * g->d + j] - grp[gid[i]].mean;
        grp[gid[i]].ss += r * r;
    }
}

typedef struct grp_ctx {
    const ngroup *grp;
    size_t k;
    double extra;
} grp_ctx;

static double grp_mu(const grp_ctx *c, double tau2, double *sw)
{
    double s = 0.0, sx = 0.0;
    for (size_t l = 0; l < c->k; l++) {
        double w = c->grp[l].c / (tau2 + c->grp[l].s2 + c->extra);
        s += w;
        sx += w * c->grp[l].mean;
    }
    *sw = s;
    return sx / s;
}

static double grp_score(double tau2, void *p)
{
    const grp_ctx *c = p;
    double sw, mu = grp_mu(c, tau2, &sw), s = 0.0;
    for (size_t l = 0; l < c->k; l++) {
        const ngroup *q = &c->grp[l];
        double w = 1.0 / (tau2 + q->s2 + c->extra), dm = q->mean - mu;
        s += w * w * (q->ss + q->c * dm * dm) - q->c * w;
    }
    return 0.5 * s;
}

static bool cancelled(const atomic_bool *cancel)
{
    return cancel != NULL && atomic_load(cancel);
}

static int fit_coord(const eb_gauss_data *g, size_t j, const double *tau2_known, double extra,
                     eb_gauss_method method, unsigned max_iter, const atomic_bool *cancel,
                     gsl_root_fsolver *solver, const uint32_t *gid, ngroup *grp, size_t k_groups,
                     eb_gauss_coord *o, dp_err *err)
{
    size_t m = g->m, d = g->d;
    double md = (double)m;
    double mean = 0.0, mn = DP_INF, mx = -DP_INF, ms2 = 0.0;
    int homo = 1;
    for (size_t i = 0; i < m; i++) {
        double x = g->x[i * d + j];
        mean += x;
        mn = fmin(mn, x);
        mx = fmax(mx, x);
        ms2 += g->sigma_x2 / g->n[i];
        if (g->n[i] != g->n[0])
            homo = 0;
    }
    mean /= md;
    ms2 /= md;
    double ss = 0.0;
    for (size_t i = 0; i < m; i++) {
        double r = g->x[i * d + j] - mean;
        ss += r * r;
    }
    o->iterations = 0;
    o->status = EB_STATUS_CONVERGED;
    double range = mx - mn;

    if (tau2_known != NULL) {
        o->tau2 = tau2_known[j];
        if (method == EB_GAUSS_MOMENTS) {
            o->mu = mean; /* Thm 1 / Thm 2: plain average of the messages */
            double vs = 0.0;
            for (size_t i = 0; i < m; i++)
                vs += o->tau2 + g->sigma_x2 / g->n[i] + extra;
            o->mu_var = vs / (md * md);
        } else {
            double sw;
            o->mu = weighted_mean(g, j, o->tau2, extra, &sw);
            o->mu_var = 1.0 / sw;
        }
    } else if (method == EB_GAUSS_MOMENTS || homo) {
        /* Moments, our extension to unknown variances (heteroscedastic: mean of s_i^2): tau2 =
         * max(0, S/(m-1) - mean s^2). MLE with equal n: the marginal is N(mu, tau2 + s^2 + extra)
         * i.i.d., so the same closed form with the divisor m. */
        double t = ss / (method == EB_GAUSS_MOMENTS ? md - 1.0 : md) - ms2 - extra;
        o->mu = mean;
        o->tau2 = t > 0 ? t : 0.0;
        if (!(t > 0))
            o->status = EB_STATUS_BOUNDARY;
        o->mu_var = (o->tau2 + ms2 + extra) / md;
    } else {
        score_ctx c = {g, j, extra};
        grp_ctx gc = {grp, k_groups, extra};
        gsl_function F = {profile_score, &c};
        if (k_groups > 0) {
            group_stats(g, j, gid, grp, k_groups);
            F.function = grp_score;
            F.params = &gc;
        }
        double hi = range * range; /* score < 0 there: every residual^2 <= range^2 < v_i */
        if (!(hi > 0) || GSL_FN_EVAL(&F, 0.0) <= 0) {
            o->tau2 = 0.0;
            o->status = EB_STATUS_BOUNDARY;
        } else {
            int st = gsl_root_fsolver_set(solver, &F, 0.0, hi);
            if (st != GSL_SUCCESS)
                return dp_err_set(err, DP_ENUMERIC, "clients",
                                  "prior variance root bracket failed (%s)", gsl_strerror(st));
            unsigned it = 0;
            int conv = 0;
            double lo = 0.0, up = hi;
            while (it < max_iter) {
                if (cancelled(cancel))
                    return dp_err_set(err, DP_EBUSY, NULL,
                                      "the fit was cancelled (coordinate %zu of %zu, iteration %u)",
                                      j + 1, d, it + 1);
                it++;
                st = gsl_root_fsolver_iterate(solver);
                if (st != GSL_SUCCESS)
                    return dp_err_set(err, DP_ENUMERIC, "clients",
                                      "prior variance solver failed (%s)", gsl_strerror(st));
                lo = gsl_root_fsolver_x_lower(solver);
                up = gsl_root_fsolver_x_upper(solver);
                if (gsl_root_test_interval(lo, up, EB_GAUSS_TAU2_ATOL_REL * hi,
                                           EB_GAUSS_TAU2_RTOL) == GSL_SUCCESS) {
                    conv = 1;
                    break;
                }
            }
            o->tau2 = gsl_root_fsolver_root(solver);
            o->iterations = it;
            if (!conv)
                o->status = EB_STATUS_MAX_ITER;
        }
        double sw;
        o->mu = weighted_mean(g, j, o->tau2, extra, &sw);
        o->mu_var = 1.0 / sw;
    }
    if (tau2_known == NULL && !(range > 0))
        o->status = EB_STATUS_UNIDENTIFIABLE; /* all values equal: heterogeneity cannot be seen */
    o->loglik = eb_gauss_loglik(g, j, o->mu, o->tau2, extra);
    return DP_OK;
}

int eb_gauss_fit(const eb_gauss_data *g, const double *tau2_known, double extra_var,
                 eb_gauss_method method, unsigned max_iter, eb_gauss_coord *out, dp_err *err)
{
    return eb_gauss_fit_cancel(g, tau2_known, extra_var, method, max_iter, NULL, out, err);
}

int eb_gauss_fit_cancel(const eb_gauss_data *g, const double *tau2_known, double extra_var,
                        eb_gauss_method method, unsigned max_iter, const atomic_bool *cancel,
                        eb_gauss_coord *out, dp_err *err)
{
    int rc = eb_gauss_data_check(g, err);
    if (rc != DP_OK)
        return rc;
    if (g->m < 2)
        return dp_err_set(err, DP_EINVAL, "clients",
                          "estimating the prior needs at least 2 clients (got %zu)", g->m);
    if (!isfinite(extra_var) || extra_var < 0)
        return dp_err_set(err, DP_EINVAL, "extra_var", "channel variance must be >= 0 (got %g)",
                          extra_var);
    if (max_iter < 1 || max_iter > EB_MAX_ITER_CAP)
        return dp_err_set(err, DP_EINVAL, "max_iter", "max_iter must be in [1, %d] (got %u)",
                          EB_MAX_ITER_CAP, max_iter);
    if (method != EB_GAUSS_MLE && method != EB_GAUSS_MOMENTS)
        return dp_err_set(err, DP_EINVAL, "method", "unknown method");
    if (tau2_known != NULL)
        for (size_t j = 0; j < g->d; j++)
            if (!isfinite(tau2_known[j]) || tau2_known[j] < 0)
                return dp_err_set(err, DP_EINVAL, "prior.variance",
                                  "prior variance must be finite and >= 0 (got %g)", tau2_known[j]);
    gsl_root_fsolver *solver = gsl_root_fsolver_alloc(gsl_root_fsolver_brent);
    uint32_t *gid = NULL;
    ngroup *grp = NULL;
    int32_t *table = NULL;
    size_t k_groups = 0;
    if (method == EB_GAUSS_MLE && tau2_known == NULL) {
        gid = dp_calloc(g->m, sizeof *gid);
        grp = dp_calloc(EB_GAUSS_MAX_GROUPS, sizeof *grp);
        table = dp_calloc(EB_GAUSS_HASH, sizeof *table);
        if (gid == NULL || grp == NULL || table == NULL)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        else
            k_groups = group_by_n(g, gid, grp, table);
    }
    if (solver == NULL)
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (size_t j = 0; j < g->d && rc == DP_OK; j++) {
        if (cancelled(cancel)) {
            rc = dp_err_set(err, DP_EBUSY, NULL, "the fit was cancelled (coordinate %zu of %zu)",
                            j + 1, g->d);
            break;
        }
        rc = fit_coord(g, j, tau2_known, extra_var, method, max_iter, cancel, solver, gid, grp,
                       k_groups, &out[j], err);
    }
    gsl_root_fsolver_free(solver);
    dp_free(gid);
    dp_free(grp);
    dp_free(table);
    return rc;
}

void eb_gauss_project(const eb_gauss_data *g, double extra_var, double r, double tau2_max,
                      eb_gauss_coord *c, size_t *n_mean, size_t *n_var)
{
    size_t nm = 0, nv = 0;
    for (size_t j = 0; j < g->d; j++) {
        bool moved = false;
        if (c[j].mu > r || c[j].mu < -r) {
            c[j].mu = c[j].mu > r ? r : -r;
            nm++;
            moved = true;
        }
        if (c[j].tau2 > tau2_max) {
            c[j].tau2 = tau2_max;
            nv++;
            moved = true;
        }
        if (moved) {
            c[j].status = eb_status_worst(c[j].status, EB_STATUS_BOUNDARY);
            c[j].loglik = eb_gauss_loglik(g, j, c[j].mu, c[j].tau2, extra_var);
        }
    }
    if (n_mean)
        *n_mean = nm;
    if (n_var)
        *n_var = nv;
}

void eb_gauss_ldp_weights(const eb_gauss_data *sent, const eb_gauss_coord *prior, double sigma_q2,
                          double tau2_max, bool tau2_estimated, double *w)
{
    double md = (double)sent->m, ms2 = 0.0;
    for (size_t i = 0; i < sent->m; i++)
        ms2 += sent->sigma_x2 / sent->n[i];
    ms2 /= md;
    for (size_t j = 0; j < sent->d; j++) {
        w[j] = sent->m > 1 ? sigma_q2 / (md - 1.0) : 0.0; /* Thm 2 (App B.2) */
        if (!tau2_estimated || sent->m < 2)
            continue;
        double t = prior[j].tau2;
        double sd = sqrt(2.0 / (md - 1.0)) * (t + ms2 + sigma_q2);
        double room = tau2_max > t ? tau2_max - t : 0.0; /* inf - t = inf */
        w[j] += sd < room ? sd : room;
    }
}

static int gauss_posterior(const eb_gauss_data *g, const eb_gauss_coord *prior, double weight_extra,
                           const double *weights, double *post_mean, double *post_var,
                           double *shrinkage, dp_err *err)
{
    int rc = eb_gauss_data_check(g, err);
    if (rc != DP_OK)
        return rc;
    for (size_t j = 0; j < (weights ? g->d : 1); j++) {
        double w = weights ? weights[j] : weight_extra;
        if (!isfinite(w) || w < 0)
            return dp_err_set(err, DP_EINVAL, "weight_extra", "must be >= 0 (got %g)", w);
    }
    for (size_t j = 0; j < g->d; j++)
        if (!isfinite(prior[j].mu) || !isfinite(prior[j].tau2) || prior[j].tau2 < 0 ||
            !isfinite(prior[j].mu_var) || prior[j].mu_var < 0)
            return dp_err_set(err, DP_EINVAL, "prior",
                              "prior mean/variance must be finite, variance >= 0");
    for (size_t i = 0; i < g->m; i++) {
        double s2 = g->sigma_x2 / g->n[i];
        for (size_t j = 0; j < g->d; j++) {
            const eb_gauss_coord *p = &prior[j];
            double t = p->tau2 + (weights ? weights[j] : weight_extra);
            double a = t / (t + s2); /* Thm 1 (w = 0) / Thm 2 weight */
            size_t k = i * g->d + j;
            if (post_mean)
                post_mean[k] = a * g->x[k] + (1.0 - a) * p->mu;
            if (post_var)
                post_var[k] = a * a * s2 + (1.0 - a) * (1.0 - a) * (p->tau2 + p->mu_var);
            if (shrinkage)
                shrinkage[k] = 1.0 - a;
        }
    }
    return DP_OK;
}

int eb_gauss_posterior(const eb_gauss_data *g, const eb_gauss_coord *prior, double weight_extra,
                       double *post_mean, double *post_var, double *shrinkage, dp_err *err)
{
    return gauss_posterior(g, prior, weight_extra, NULL, post_mean, post_var, shrinkage, err);
}

int eb_gauss_posterior_w(const eb_gauss_data *g, const eb_gauss_coord *prior,
                         const double *weight_extra, double *post_mean, double *post_var,
                         double *shrinkage, dp_err *err)
{
    return gauss_posterior(g, prior, 0.0, weight_extra, post_mean, post_var, shrinkage, err);
}

double eb_gauss_thm1_mse(double tau2, double sigma_x2, double n, size_t m)
{
    double s2 = sigma_x2 / n;
    double a = tau2 / (tau2 + s2);
    return s2 * (a + (1.0 - a) / (double)m);
}

double eb_gauss_thm2_mse(double tau2, double sigma_x2, double n, size_t m, double sigma_q2)
{
    /* eq. 5 with a = (tau2 + sq^2/(m-1)) / (tau2 + sq^2/(m-1) + s^2) (App B.2: sigma_q^2/(m-1));
     * exact, our derivation. */
    return eb_gauss_thm1_mse(tau2 + sigma_q2 / ((double)m - 1.0), sigma_x2, n, m);
}

int eb_gauss_private_calibrate(const eb_gauss_data *g, const eb_gauss_private_opts *o,
                               eb_gauss_private_info *info, dp_err *err)
{
    int rc = eb_gauss_data_check(g, err);
    if (rc != DP_OK)
        return rc;
    double nmin = DP_INF;
    for (size_t i = 0; i < g->m; i++)
        nmin = fmin(nmin, g->n[i]);
    double b = o->b;
    if (isnan(b)) {
        rc = eb_range_b(o->r, o->sigma_theta, g->sigma_x2, nmin, g->m, o->range_mode, &b, err);
        if (rc != DP_OK) {
            dp_err_prefix_field(err, "privacy");
            return rc;
        }
    } else if (!isfinite(b) || b <= 0) {
        return dp_err_set(err, DP_EINVAL, "privacy.b", "b must be finite and > 0 (got %g)", b);
    }
    info->b = b;
    info->n_clipped = 0;
    info->ldp = (eb_ldp_gauss){0};
    if (o->channel == EB_CHANNEL_GAUSSIAN) {
        rc = eb_ldp_gauss_calibrate(o->eps0, o->delta, b, g->d, o->per_coordinate, o->cal,
                                    &info->ldp, err);
        if (rc != DP_OK) {
            dp_err_prefix_field(err, "privacy");
            return rc;
        }
        info->sigma_q = info->ldp.sigma;
    } else if (o->channel == EB_CHANNEL_QUANTIZE) {
        if (o->bits < 1 || o->bits > 52)
            return dp_err_set(err, DP_EINVAL, "privacy.bits", "bits must be in [1, 52] (got %u)",
                              o->bits);
        info->sigma_q = eb_quantize_sigma(b, o->bits);
    } else {
        return dp_err_set(err, DP_EINVAL, "privacy.mechanism", "unknown channel");
    }
    return DP_OK;
}

int eb_gauss_privatize(const eb_gauss_data *g, const eb_gauss_private_opts *o, double *msgs,
                       eb_gauss_private_info *info, dp_err *err)
{
    int rc = eb_gauss_private_calibrate(g, o, info, err);
    if (rc != DP_OK)
        return rc;
    double b = info->b;
    gsl_rng *rng = dp_rng_alloc(o->seed, DP_RNG_STREAM_GAUSSIAN_NOISE, err);
    if (rng == NULL)
        return DP_ENOMEM;
    size_t total = g->m * g->d;
    for (size_t k = 0; k < total; k++) {
        double x = g->x[k];
        if (x < -b || x > b)
            info->n_clipped++;
        if (o->channel == EB_CHANNEL_GAUSSIAN)
            msgs[k] = eb_clip(x, b) + gsl_ran_gaussian_ziggurat(rng, info->sigma_q);
        else
            msgs[k] = eb_quantize(x, b, o->bits, rng);
    }
    gsl_rng_free(rng);
    return DP_OK;
}

int eb_gauss_central_calibrate(size_t d, bool var_known, const eb_gauss_central_opts *o,
                               eb_gauss_central_info *info, dp_err *err)
{
    if (d < 1 || d > EB_MAX_DIM)
        return dp_err_set(err, DP_EINVAL, "clients[0].mean", "dimension must be in [1, %d]",
                          EB_MAX_DIM);
    if (!isfinite(o->b) || o->b <= 0 || o->b > 1e50)
        return dp_err_set(err, DP_EINVAL, "privacy.b", "b must be finite, > 0 and <= 1e50 (got %g)",
                          o->b);
    if (!isfinite(o->z) || o->z < 0)
        return dp_err_set(err, DP_EINVAL, "privacy.noise_multiplier",
                          "noise_multiplier must be finite and >= 0 (got %g)", o->z);
    if (!isfinite(o->r) || o->r < 0)
        return dp_err_set(err, DP_EINVAL, "privacy.r", "r must be finite and >= 0 (got %g)", o->r);
    if (isnan(o->tau2_max) || o->tau2_max < 0)
        return dp_err_set(err, DP_EINVAL, "privacy.sigma_theta_bound",
                          "the bound on the prior variance must be >= 0");
    memset(info, 0, sizeof *info);
    info->k = var_known ? 1 : 2;
    info->l2_sens = sqrt((double)(info->k * d));
    info->sens_sum = 2.0 * o->b;
    info->sens_sq = var_known ? DP_NAN : o->b * o->b;
    info->sd_sum = o->z * info->l2_sens * info->sens_sum;
    info->sd_sq = var_known ? DP_NAN : o->z * info->l2_sens * info->sens_sq;
    info->rho = o->z > 0 ? 1.0 / (2.0 * o->z * o->z) : DP_INF;
    if (!(info->sd_sum <= EB_LDP_MAX_SIGMA) || (!var_known && !(info->sd_sq <= EB_LDP_MAX_SIGMA)))
        return dp_err_set(err, DP_ENUMERIC, "privacy.noise_multiplier",
                          "the noise needed (sd %g) is beyond what the estimate can use",
                          var_known ? info->sd_sum : info->sd_sq);
    return DP_OK;
}

int eb_gauss_central_fit(const eb_gauss_data *g, const double *tau2_known,
                         const eb_gauss_central_opts *o, eb_gauss_coord *out,
                         eb_gauss_central_info *info, dp_err *err)
{
    int rc = eb_gauss_data_check(g, err);
    if (rc != DP_OK)
        return rc;
    if (g->m < 2)
        return dp_err_set(err, DP_EINVAL, "clients",
                          "estimating the prior needs at least 2 clients (got %zu)", g->m);
    if (tau2_known != NULL)
        for (size_t j = 0; j < g->d; j++)
            if (!isfinite(tau2_known[j]) || tau2_known[j] < 0)
                return dp_err_set(err, DP_EINVAL, "prior.variance",
                                  "prior variance must be finite and >= 0 (got %g)", tau2_known[j]);
    if ((rc = eb_gauss_central_calibrate(g->d, tau2_known != NULL, o, info, err)) != DP_OK)
        return rc;
    gsl_rng *rng = NULL;
    if (o->z > 0 && (rng = dp_rng_alloc(o->seed, DP_RNG_STREAM_GAUSSIAN_CENTRAL, err)) == NULL)
        return DP_ENOMEM;
    size_t m = g->m, d = g->d;
    double md = (double)m, b = o->b, ms2 = 0.0;
    for (size_t i = 0; i < m; i++)
        ms2 += g->sigma_x2 / g->n[i];
    ms2 /= md;
    for (size_t j = 0; j < d; j++) {
        /* the clipped sums: each client's contribution is bounded before anything is added */
        double s1 = 0.0, s2 = 0.0;
        for (size_t i = 0; i < m; i++) {
            double x = g->x[i * d + j];
            if (x < -b || x > b)
                info->n_clipped++;
            double c = eb_clip(x, b);
            s1 += c;
            s2 += c * c;
        }
        if (rng != NULL) { /* noise once, on the aggregates */
            s1 += gsl_ran_gaussian_ziggurat(rng, info->sd_sum);
            if (tau2_known == NULL)
                s2 += gsl_ran_gaussian_ziggurat(rng, info->sd_sq);
        }
        eb_gauss_coord *c = &out[j];
        c->mu = s1 / md;
        c->iterations = 0;
        c->loglik = DP_NAN; /* a likelihood of the raw data would not be private */
        c->status = EB_STATUS_CONVERGED;
        if (tau2_known != NULL) {
            c->tau2 = tau2_known[j];
        } else {
            double a2 = s1 * s1 - info->sd_sum * info->sd_sum; /* unbiased for the clean s1^2 */
            double t = (s2 - a2 / md) / (md - 1.0) - ms2;
            c->tau2 = t > 0 ? t : 0.0;
            if (!(t > 0))
                c->status = EB_STATUS_BOUNDARY;
        }
        /* post-processing onto the public bounds: no privacy cost */
        bool moved = false;
        if (c->mu > o->r || c->mu < -o->r) {
            c->mu = c->mu > o->r ? o->r : -o->r;
            info->proj_mean++;
            moved = true;
        }
        if (c->tau2 > o->tau2_max) {
            c->tau2 = o->tau2_max;
            info->proj_var++;
            moved = true;
        }
        if (moved)
            c->status = eb_status_worst(c->status, EB_STATUS_BOUNDARY);
        c->mu_var = (c->tau2 + ms2) / md + info->sd_sum * info->sd_sum / (md * md);
    }
    /* Thm 2's weight with sigma_q^2 -> sd_sum^2/m, plus (tau2 estimated) one sd of the noise in
     * tau2-hat, sd_sq/(m-1): a variance the noise cannot resolve must not pool the clients
     * (under-estimating tau2 costs up to tau2 per client, over-estimating at most s_i^2) */
    info->weight_extra = info->sd_sum * info->sd_sum / (md * (md - 1.0));
    if (tau2_known == NULL)
        info->weight_extra += info->sd_sq / (md - 1.0);
    gsl_rng_free(rng);
    return DP_OK;
}
