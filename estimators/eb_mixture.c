/*
 * eb_mixture.c: mixture-prior empirical Bayes (Ozkara et al. 2023, Thm 6, Alg 3, Lemma 3, App D).
 * See eb_mixture.h for the model, the algorithms and the contracts.
 *
 * Workspace: one allocation per fit (responsibilities m*k, log-terms k, scratch), reused across
 * restarts and iterations (GSL's workspace rule: allocate once, pass it in).
 */
#include "estimators/eb_mixture.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_math.h>
#include <gsl/gsl_randist.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"

/* Default variance floor relative to the mean noise variance s_i^2: keeps a point-mass component
 * numerically alive without biasing a real component variance measurably. */
#define EB_MIX_FLOOR_REL 1e-6
/* Weights of a given prior must sum to 1 within this (JSON round-trips of decimal weights). */
#define EB_MIX_WSUM_TOL 1e-9
/* A component whose expected count falls below this is empty (status degenerate). */
#define EB_MIX_EMPTY 1e-10
/* Lloyd iterations per Alg 3 round (assignments usually settle in a handful). */
#define EB_MIX_LLOYD_MAX 100

eb_mix_opts eb_mix_opts_default(size_t k)
{
    eb_mix_opts o = {EB_MIX_EM, k, 1000, 1e-10, 3, DP_NAN, 1, NULL};
    return o;
}

static bool cancelled(const eb_mix_opts *o)
{
    return o->cancel != NULL && atomic_load(o->cancel);
}

static double sq_dist(const double *a, const double *b, size_t d)
{
    double s = 0.0;
    for (size_t j = 0; j < d; j++) {
        double t = a[j] - b[j];
        s += t * t;
    }
    return s;
}

int eb_mix_prior_check(const eb_mix_prior *p, dp_err *err)
{
    if (p->k < 1 || p->k > EB_MAX_COMPONENTS)
        return dp_err_set(err, DP_EINVAL, "prior.components",
                          "components must be in [1, %d] (got %zu)", EB_MAX_COMPONENTS, p->k);
    char f[DP_ERR_FIELD_MAX];
    double ws = 0.0;
    for (size_t l = 0; l < p->k; l++) {
        if (!isfinite(p->w[l]) || p->w[l] < 0) {
            snprintf(f, sizeof f, "prior.components[%zu].weight", l);
            return dp_err_set(err, DP_EINVAL, f, "weight must be finite and >= 0 (got %g)",
                              p->w[l]);
        }
        ws += p->w[l];
        if (!isfinite(p->var[l]) || p->var[l] < 0) {
            snprintf(f, sizeof f, "prior.components[%zu].variance", l);
            return dp_err_set(err, DP_EINVAL, f, "variance must be finite and >= 0 (got %g)",
                              p->var[l]);
        }
        for (size_t j = 0; j < p->d; j++)
            if (!isfinite(p->mu[l * p->d + j])) {
                snprintf(f, sizeof f, "prior.components[%zu].mean", l);
                return dp_err_set(err, DP_EINVAL, f, "mean must be finite");
            }
    }
    if (fabs(ws - 1.0) > EB_MIX_WSUM_TOL)
        return dp_err_set(err, DP_EINVAL, "prior.components", "weights must sum to 1 (got %.12g)",
                          ws);
    return DP_OK;
}

/* log p_l + log N(x; mu_l, v I_d) */
static double comp_logdens(double logw, const double *x, const double *mu, double v, size_t d)
{
    return logw - 0.5 * (double)d * log(2.0 * M_PI * v) - sq_dist(x, mu, d) / (2.0 * v);
}

/* E-step for one client: fills lr[k] with normalized log-responsibilities; returns the log
 * marginal. */
static double estep_one(const double *x, double s2, const eb_mix_prior *p, double *lr)
{
    size_t k = p->k, d = p->d;
    for (size_t l = 0; l < k; l++)
        lr[l] = p->w[l] > 0 ? comp_logdens(log(p->w[l]), x, p->mu + l * d, p->var[l] + s2, d)
                            : (double)-DP_INF;
    double lse = eb_logsumexp(lr, k);
    for (size_t l = 0; l < k; l++)
        lr[l] -= lse;
    return lse;
}

double eb_mix_loglik(const eb_gauss_data *g, double extra_var, const eb_mix_prior *p)
{
    double lr[EB_MAX_COMPONENTS];
    double ll = 0.0;
    for (size_t i = 0; i < g->m; i++)
        ll += estep_one(g->x + i * g->d, g->sigma_x2 / g->n[i] + extra_var, p, lr);
    return ll;
}

size_t eb_mix_project(eb_mix_prior *p, double r, double var_max, eb_mix_fit_info *info)
{
    size_t moved = 0, d = p->d;
    for (size_t l = 0; l < p->k; l++) {
        double *mu = p->mu + l * d, nrm2 = 0.0;
        for (size_t j = 0; j < d; j++)
            nrm2 += mu[j] * mu[j];
        bool mv = false;
        if (nrm2 > r * r) {
            double f = r / sqrt(nrm2);
            for (size_t j = 0; j < d; j++)
                mu[j] *= f;
            mv = true;
        }
        if (p->var[l] > var_max) {
            p->var[l] = var_max;
            mv = true;
        }
        moved += mv;
    }
    if (moved > 0 && info != NULL)
        info->status = eb_status_worst(info->status, EB_STATUS_BOUNDARY);
    return moved;
}

int eb_mix_mean_var(const eb_gauss_data *g, double extra_var, const eb_mix_prior *p, double *mu_var,
                    dp_err *err)
{
    int rc = eb_gauss_data_check(g, err);
    if (rc != DP_OK)
        return rc;
    if (p->d != g->d)
        return dp_err_set(err, DP_EINVAL, "prior.components",
                          "prior dimension %zu != data dimension %zu", p->d, g->d);
    if (!isfinite(extra_var) || extra_var < 0)
        return dp_err_set(err, DP_EINVAL, "extra_var", "channel variance must be >= 0 (got %g)",
                          extra_var);
    size_t k = p->k;
    double lr[EB_MAX_COMPONENTS], prec[EB_MAX_COMPONENTS] = {0};
    for (size_t i = 0; i < g->m; i++) {
        double s2 = g->sigma_x2 / g->n[i] + extra_var;
        estep_one(g->x + i * g->d, s2, p, lr);
        for (size_t l = 0; l < k; l++)
            prec[l] += exp(lr[l]) / (p->var[l] + s2);
    }
    for (size_t l = 0; l < k; l++)
        mu_var[l] = prec[l] > 0 ? 1.0 / prec[l] : DP_INF;
    return DP_OK;
}

int eb_mix_posterior(const eb_gauss_data *g, const eb_mix_prior *p, double *resp, double *post_mean,
                     double *post_var, double *shrinkage, dp_err *err)
{
    return eb_mix_posterior_fitted(g, p, NULL, resp, post_mean, post_var, shrinkage, err);
}

int eb_mix_posterior_fitted(const eb_gauss_data *g, const eb_mix_prior *p, const double *mu_var,
                            double *resp, double *post_mean, double *post_var, double *shrinkage,
                            dp_err *err)
{
    int rc = eb_gauss_data_check(g, err);
    if (rc != DP_OK)
        return rc;
    if (p->d != g->d)
        return dp_err_set(err, DP_EINVAL, "prior.components",
                          "prior dimension %zu != data dimension %zu", p->d, g->d);
    rc = eb_mix_prior_check(p, err);
    if (rc != DP_OK)
        return rc;
    size_t k = p->k, d = g->d;
    double lr[EB_MAX_COMPONENTS];
    for (size_t i = 0; i < g->m; i++) {
        const double *x = g->x + i * d;
        double s2 = g->sigma_x2 / g->n[i];
        estep_one(x, s2, p, lr);
        double sa = 0.0;
        for (size_t l = 0; l < k; l++) {
            double w = exp(lr[l]);
            if (resp)
                resp[i * k + l] = w;
            sa += w * p->var[l] / (p->var[l] + s2);
        }
        if (shrinkage)
            shrinkage[i] = 1.0 - sa;
        for (size_t j = 0; j < d; j++) {
            double mean = 0.0, m2 = 0.0;
            for (size_t l = 0; l < k; l++) {
                double w = exp(lr[l]);
                if (w == 0.0)
                    continue;
                double a = p->var[l] / (p->var[l] + s2);
                double ml = a * x[j] + (1.0 - a) * p->mu[l * d + j];
                /* within component l: a s^2, plus (1 - a)^2 Var(mu_l) for an estimated mean */
                double vl = a * s2 + (mu_var ? (1.0 - a) * (1.0 - a) * mu_var[l] : 0.0);
                mean += w * ml;
                m2 += w * (vl + ml * ml);
            }
            if (post_mean)
                post_mean[i * d + j] = mean;
            if (post_var) {
                double v = m2 - mean * mean;
                post_var[i * d + j] = v > 0 ? v : 0.0;
            }
        }
    }
    return DP_OK;
}

/* ---- fitting ---- */

typedef struct mix_ws {
    double *resp;            /* m*k */
    double *s2;              /* m: s_i^2 + extra */
    double *d2;              /* m: k-means++ distances */
    double *theta;           /* m*d: altmin estimates */
    double *cen;             /* k*d: altmin centres / scratch */
    size_t *asg;             /* m: altmin assignments */
    double *bw, *bmu, *bvar; /* best restart */
} mix_ws;

static void ws_free(mix_ws *w)
{
    dp_free(w->resp);
    dp_free(w->s2);
    dp_free(w->d2);
    dp_free(w->theta);
    dp_free(w->cen);
    dp_free(w->asg);
    dp_free(w->bw);
    dp_free(w->bmu);
    dp_free(w->bvar);
}

static int ws_alloc(mix_ws *w, size_t m, size_t d, size_t k)
{
    memset(w, 0, sizeof *w);
    w->resp = dp_calloc(m * k, sizeof(double));
    w->s2 = dp_calloc(m, sizeof(double));
    w->d2 = dp_calloc(m, sizeof(double));
    w->theta = dp_calloc(m * d, sizeof(double));
    w->cen = dp_calloc(k * d, sizeof(double));
    w->asg = dp_calloc(m, sizeof(size_t));
    w->bw = dp_calloc(k, sizeof(double));
    w->bmu = dp_calloc(k * d, sizeof(double));
    w->bvar = dp_calloc(k, sizeof(double));
    if (!w->resp || !w->s2 || !w->d2 || !w->theta || !w->cen || !w->asg || !w->bw || !w->bmu ||
        !w->bvar) {
        ws_free(w);
        return DP_ENOMEM;
    }
    return DP_OK;
}

/* k-means++ seeding (Arthur & Vassilvitskii 2007) of k centres from the rows of pts (m*d). */
static void kmeanspp(const double *pts, size_t m, size_t d, size_t k, gsl_rng *rng, double *d2,
                     double *cen)
{
    size_t first = (size_t)gsl_rng_uniform_int(rng, (unsigned long)m);
    memcpy(cen, pts + first * d, d * sizeof *cen);
    for (size_t i = 0; i < m; i++)
        d2[i] = sq_dist(pts + i * d, cen, d);
    for (size_t l = 1; l < k; l++) {
        double tot = 0.0;
        for (size_t i = 0; i < m; i++)
            tot += d2[i];
        size_t pick = 0;
        if (tot > 0) {
            double u = gsl_rng_uniform(rng) * tot, c = 0.0;
            pick = m - 1;
            for (size_t i = 0; i < m; i++) {
                c += d2[i];
                if (c > u) {
                    pick = i;
                    break;
                }
            }
        } else {
            pick = (size_t)gsl_rng_uniform_int(rng, (unsigned long)m);
        }
        memcpy(cen + l * d, pts + pick * d, d * sizeof *cen);
        for (size_t i = 0; i < m; i++) {
            double t = sq_dist(pts + i * d, cen + l * d, d);
            if (t < d2[i])
                d2[i] = t;
        }
    }
}

static size_t nearest(const double *x, const double *cen, size_t k, size_t d)
{
    size_t best = 0;
    double bd = DP_INF;
    for (size_t l = 0; l < k; l++) {
        double t = sq_dist(x, cen + l * d, d);
        if (t < bd) {
            bd = t;
            best = l;
        }
    }
    return best;
}

/* Initial prior from centres: hard assignment, weights, per-cluster variance minus mean noise. */
static void init_from_centres(const eb_gauss_data *g, const mix_ws *w, const double *cen,
                              double floor_v, eb_mix_prior *p)
{
    size_t m = g->m, d = g->d, k = p->k;
    double cnt[EB_MAX_COMPONENTS] = {0}, ss[EB_MAX_COMPONENTS] = {0}, sn[EB_MAX_COMPONENTS] = {0};
    memcpy(p->mu, cen, k * d * sizeof(double));
    for (size_t i = 0; i < m; i++) {
        size_t l = nearest(g->x + i * d, cen, k, d);
        cnt[l] += 1.0;
        ss[l] += sq_dist(g->x + i * d, cen + l * d, d);
        sn[l] += w->s2[i];
    }
    for (size_t l = 0; l < k; l++) {
        p->w[l] = (cnt[l] + 1.0) / ((double)m + (double)k); /* never exactly 0 at the start */
        double v = cnt[l] > 0 ? ss[l] / (cnt[l] * (double)d) - sn[l] / cnt[l] : 0.0;
        p->var[l] = v > floor_v ? v : floor_v;
    }
}

/* One EM run from the current p. Returns the final log-likelihood; sets *iters, *st. */
static double em_run(const eb_gauss_data *g, mix_ws *w, const eb_mix_opts *o, double floor_v,
                     bool homo, eb_mix_prior *p, unsigned *iters, eb_status *st)
{
    size_t m = g->m, d = g->d, k = p->k;
    double ll_prev = -DP_INF, ll = -DP_INF;
    *st = EB_STATUS_MAX_ITER;
    unsigned it;
    for (it = 1; it <= o->max_iter && !cancelled(o); it++) {
        /* E-step: per-component constants hoisted out of the client loop; one exp per component
         * and one log per client. */
        double lw[EB_MAX_COMPONENTS], cst[EB_MAX_COMPONENTS], inv2v[EB_MAX_COMPONENTS];
        for (size_t l = 0; l < k; l++) {
            lw[l] = p->w[l] > 0 ? log(p->w[l]) : (double)-DP_INF;
            double v = p->var[l] + w->s2[0];
            cst[l] = lw[l] - 0.5 * (double)d * log(2.0 * M_PI * v);
            inv2v[l] = 0.5 / v;
        }
        ll = 0.0;
        for (size_t i = 0; i < m; i++) {
            double *r = w->resp + i * k;
            const double *x = g->x + i * d;
            double mx = -DP_INF;
            for (size_t l = 0; l < k; l++) {
                double dd = sq_dist(x, p->mu + l * d, d);
                if (homo) {
                    r[l] = cst[l] - dd * inv2v[l];
                } else {
                    double v = p->var[l] + w->s2[i];
                    r[l] = lw[l] - 0.5 * (double)d * log(2.0 * M_PI * v) - dd / (2.0 * v);
                }
                if (r[l] > mx)
                    mx = r[l];
            }
            double sum = 0.0;
            for (size_t l = 0; l < k; l++) {
                r[l] = exp(r[l] - mx);
                sum += r[l];
            }
            for (size_t l = 0; l < k; l++)
                r[l] /= sum;
            ll += mx + log(sum);
        }
        if (it > 1 && ll - ll_prev <= o->tol * (1.0 + fabs(ll))) {
            *st = EB_STATUS_CONVERGED;
            break;
        }
        ll_prev = ll;
        /* M-step */
        double nl[EB_MAX_COMPONENTS] = {0};
        for (size_t i = 0; i < m; i++)
            for (size_t l = 0; l < k; l++)
                nl[l] += w->resp[i * k + l];
        for (size_t l = 0; l < k; l++) {
            p->w[l] = nl[l] / (double)m;
            if (nl[l] < EB_MIX_EMPTY)
                continue; /* empty: keep its parameters; reported as degenerate below */
            double *mu = p->mu + l * d;
            double vl = p->var[l];
            /* new mean: homoscedastic -> weighted mean of x; heteroscedastic -> of E[theta | x, l]
             */
            double *nm = w->cen + l * d;
            memset(nm, 0, d * sizeof *nm);
            for (size_t i = 0; i < m; i++) {
                double r = w->resp[i * k + l];
                if (r == 0.0)
                    continue;
                double a = homo ? 1.0 : vl / (vl + w->s2[i]);
                const double *x = g->x + i * d;
                for (size_t j = 0; j < d; j++)
                    nm[j] += r * (mu[j] + a * (x[j] - mu[j]));
            }
            for (size_t j = 0; j < d; j++)
                nm[j] /= nl[l];
            double sv = 0.0;
            for (size_t i = 0; i < m; i++) {
                double r = w->resp[i * k + l];
                if (r == 0.0)
                    continue;
                const double *x = g->x + i * d;
                if (homo) {
                    sv += r * sq_dist(x, nm, d);
                } else {
                    double v = vl + w->s2[i];
                    double a = vl / v;
                    double q = 0.0;
                    for (size_t j = 0; j < d; j++) {
                        double t = mu[j] + a * (x[j] - mu[j]) - nm[j];
                        q += t * t;
                    }
                    sv += r * (q + (double)d * vl * w->s2[i] / v);
                }
            }
            double nv = sv / ((double)d * nl[l]);
            if (homo)
                nv -= w->s2[0]; /* v_l = var_l + s^2 */
            p->var[l] = nv > floor_v ? nv : floor_v;
            memcpy(mu, nm, d * sizeof *mu);
        }
    }
    if (it > o->max_iter)
        it = o->max_iter;
    *iters = it;
    for (size_t l = 0; l < k; l++)
        if (p->w[l] * (double)m < EB_MIX_EMPTY)
            *st = eb_status_worst(*st, EB_STATUS_DEGENERATE);
    return ll;
}

/* Alg 3 (alternating minimization) from the k-means++ centres in w->cen. */
static void altmin_run(const eb_gauss_data *g, mix_ws *w, const eb_mix_opts *o, eb_mix_prior *p,
                       unsigned *iters, eb_status *st)
{
    size_t m = g->m, d = g->d, k = p->k;
    double scale = 0.0;
    for (size_t i = 0; i < m * d; i++)
        scale = fmax(scale, fabs(g->x[i]));
    memcpy(w->theta, g->x, m * d * sizeof(double));
    *st = EB_STATUS_MAX_ITER;
    unsigned it;
    for (it = 1; it <= o->max_iter && !cancelled(o); it++) {
        /* server: Lloyd on theta^{t-1}, warm-started from the previous centres */
        for (unsigned li = 0; li < EB_MIX_LLOYD_MAX; li++) {
            size_t changed = 0;
            for (size_t i = 0; i < m; i++) {
                size_t a = nearest(w->theta + i * d, w->cen, k, d);
                if (li == 0 || a != w->asg[i])
                    changed++;
                w->asg[i] = a;
            }
            double cnt[EB_MAX_COMPONENTS] = {0};
            for (size_t i = 0; i < m; i++)
                cnt[w->asg[i]] += 1.0;
            for (size_t l = 0; l < k; l++)
                if (cnt[l] > 0)
                    memset(w->cen + l * d, 0, d * sizeof(double));
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < d; j++)
                    w->cen[w->asg[i] * d + j] += w->theta[i * d + j] / cnt[w->asg[i]];
            for (size_t l = 0; l < k; l++)
                p->w[l] = cnt[l] / (double)m;
            if (changed == 0)
                break;
        }
        memcpy(p->mu, w->cen, k * d * sizeof(double));
        for (size_t l = 0; l < k; l++)
            p->var[l] = 0.0;
        /* clients: Thm 6 posterior mean under the point-mass prior */
        double move = 0.0;
        double lr[EB_MAX_COMPONENTS];
        for (size_t i = 0; i < m; i++) {
            estep_one(g->x + i * d, w->s2[i], p, lr);
            for (size_t j = 0; j < d; j++) {
                double t = 0.0;
                for (size_t l = 0; l < k; l++)
                    if (isfinite(lr[l]))
                        t += exp(lr[l]) * p->mu[l * d + j];
                move = fmax(move, fabs(t - w->theta[i * d + j]));
                w->theta[i * d + j] = t;
            }
        }
        if (move <= o->tol * (1.0 + scale)) {
            *st = EB_STATUS_CONVERGED;
            break;
        }
    }
    if (it > o->max_iter)
        it = o->max_iter;
    *iters = it;
    for (size_t l = 0; l < k; l++)
        if (p->w[l] == 0.0)
            *st = eb_status_worst(*st, EB_STATUS_DEGENERATE);
}

static void sort_components(eb_mix_prior *p)
{
    size_t k = p->k, d = p->d;
    for (size_t a = 1; a < k; a++)
        for (size_t b = a; b > 0 && p->mu[b * d] < p->mu[(b - 1) * d]; b--) {
            double t = p->w[b];
            p->w[b] = p->w[b - 1];
            p->w[b - 1] = t;
            t = p->var[b];
            p->var[b] = p->var[b - 1];
            p->var[b - 1] = t;
            for (size_t j = 0; j < d; j++) {
                t = p->mu[b * d + j];
                p->mu[b * d + j] = p->mu[(b - 1) * d + j];
                p->mu[(b - 1) * d + j] = t;
            }
        }
}

int eb_mix_fit(const eb_gauss_data *g, double extra_var, const eb_mix_opts *o, eb_mix_prior *out,
               eb_mix_fit_info *info, dp_err *err)
{
    int rc = eb_gauss_data_check(g, err);
    if (rc != DP_OK)
        return rc;
    if (g->m < 2)
        return dp_err_set(err, DP_EINVAL, "clients",
                          "estimating the prior needs at least 2 clients (got %zu)", g->m);
    if (o->k < 1 || o->k > EB_MAX_COMPONENTS || o->k > g->m)
        return dp_err_set(err, DP_EINVAL, "components",
                          "components must be in [1, min(clients, %d)] (got %zu)",
                          EB_MAX_COMPONENTS, o->k);
    if (o->max_iter < 1 || o->max_iter > EB_MAX_ITER_CAP)
        return dp_err_set(err, DP_EINVAL, "max_iter", "max_iter must be in [1, %d] (got %u)",
                          EB_MAX_ITER_CAP, o->max_iter);
    if (!(o->tol > 0) || !isfinite(o->tol))
        return dp_err_set(err, DP_EINVAL, "tol", "tol must be finite and > 0 (got %g)", o->tol);
    if (o->n_init < 1 || o->n_init > 100)
        return dp_err_set(err, DP_EINVAL, "n_init", "n_init must be in [1, 100] (got %u)",
                          o->n_init);
    if (!isnan(o->var_floor) && (!isfinite(o->var_floor) || o->var_floor < 0))
        return dp_err_set(err, DP_EINVAL, "variance_floor", "variance_floor must be >= 0 (got %g)",
                          o->var_floor);
    if (!isfinite(extra_var) || extra_var < 0)
        return dp_err_set(err, DP_EINVAL, "extra_var", "channel variance must be >= 0 (got %g)",
                          extra_var);
    if (o->method != EB_MIX_EM && o->method != EB_MIX_ALTMIN)
        return dp_err_set(err, DP_EINVAL, "method", "unknown method");
    size_t m = g->m, d = g->d, k = o->k;
    out->k = k;
    out->d = d;
    mix_ws w;
    if (ws_alloc(&w, m, d, k) != DP_OK)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    bool homo = true;
    double ms2 = 0.0;
    for (size_t i = 0; i < m; i++) {
        w.s2[i] = g->sigma_x2 / g->n[i] + extra_var;
        ms2 += w.s2[i];
        if (g->n[i] != g->n[0])
            homo = false;
    }
    ms2 /= (double)m;
    double floor_v = isnan(o->var_floor) ? EB_MIX_FLOOR_REL * ms2 : o->var_floor;

    /* fewer than k distinct points: the prior cannot be identified */
    size_t distinct = 0;
    for (size_t i = 0; i < m && distinct < k; i++) {
        bool seen = false;
        for (size_t l = 0; l < distinct && !seen; l++)
            seen = sq_dist(g->x + i * d, w.cen + l * d, d) == 0.0;
        if (!seen)
            memcpy(w.cen + (distinct++) * d, g->x + i * d, d * sizeof(double));
    }

    double best_ll = -DP_INF;
    unsigned best_it = 0;
    eb_status best_st = EB_STATUS_MAX_ITER;
    for (unsigned r = 0; r < o->n_init; r++) {
        gsl_rng *rng =
            dp_rng_alloc(o->seed, dp_rng_stream_at(DP_RNG_STREAM_MIXTURE_RESTART, r), err);
        if (rng == NULL) {
            ws_free(&w);
            return DP_ENOMEM;
        }
        kmeanspp(g->x, m, d, k, rng, w.d2, w.cen);
        gsl_rng_free(rng);
        unsigned it = 0;
        eb_status st;
        double ll;
        if (o->method == EB_MIX_EM) {
            init_from_centres(g, &w, w.cen, floor_v, out);
            ll = em_run(g, &w, o, floor_v, homo, out, &it, &st);
        } else {
            altmin_run(g, &w, o, out, &it, &st);
            ll = eb_mix_loglik(g, extra_var, out);
        }
        if (cancelled(o)) {
            ws_free(&w);
            return dp_err_set(err, DP_EBUSY, NULL, "the fit was cancelled (restart %u of %u)",
                              r + 1, o->n_init);
        }
        if (r == 0 || ll > best_ll) {
            best_ll = ll;
            best_it = it;
            best_st = st;
            memcpy(w.bw, out->w, k * sizeof(double));
            memcpy(w.bmu, out->mu, k * d * sizeof(double));
            memcpy(w.bvar, out->var, k * sizeof(double));
        }
    }
    memcpy(out->w, w.bw, k * sizeof(double));
    memcpy(out->mu, w.bmu, k * d * sizeof(double));
    memcpy(out->var, w.bvar, k * sizeof(double));
    sort_components(out);
    info->loglik = eb_mix_loglik(g, extra_var, out);
    info->iterations = best_it;
    info->status = best_st;
    info->var_floor = floor_v;
    info->n_floor = 0;
    for (size_t l = 0; o->method == EB_MIX_EM && l < k; l++)
        if (out->var[l] <= floor_v && out->w[l] * (double)m >= EB_MIX_EMPTY)
            info->n_floor++;
    if (info->n_floor > 0)
        info->status = eb_status_worst(info->status, EB_STATUS_BOUNDARY);
    (void)best_ll;
    if (distinct < k)
        info->status = eb_status_worst(info->status, EB_STATUS_UNIDENTIFIABLE);
    ws_free(&w);
    return DP_OK;
}

int eb_mix_private_calibrate(const eb_gauss_data *g, const eb_mix_private_opts *o,
                             eb_mix_private_info *info, dp_err *err)
{
    int rc = eb_gauss_data_check(g, err);
    if (rc != DP_OK)
        return rc;
    double R = o->radius;
    if (isnan(R)) {
        if (!isfinite(o->r) || o->r < 0)
            return dp_err_set(err, DP_EINVAL, "privacy.r", "r must be finite and >= 0 (got %g)",
                              o->r);
        if (!isfinite(o->sigma_theta) || o->sigma_theta < 0)
            return dp_err_set(err, DP_EINVAL, "privacy.sigma_theta_bound",
                              "sigma_theta_bound must be finite and >= 0 (got %g)", o->sigma_theta);
        double nmin = DP_INF;
        for (size_t i = 0; i < g->m; i++)
            nmin = fmin(nmin, g->n[i]);
        double u = g->sigma_x2 / nmin + o->sigma_theta * o->sigma_theta;
        double l = 2.0 * log((double)g->m) + log(nmin);
        /* Lemma 3: R = 4 sqrt(d u) + 2 sqrt(ln(m^2 n) u) + r */
        R = o->r + 4.0 * sqrt((double)g->d * u) + 2.0 * sqrt((l > 0 ? l : 0.0) * u);
    } else if (!isfinite(R) || R <= 0) {
        return dp_err_set(err, DP_EINVAL, "privacy.radius",
                          "radius must be finite and > 0 (got %g)", R);
    }
    info->radius = R;
    info->sensitivity = 2.0 * R;
    rc = eb_ldp_sigma(info->sensitivity, o->eps0, o->delta, o->cal, &info->sigma, &info->analytic,
                      err);
    if (rc != DP_OK) {
        dp_err_prefix_field(err, "privacy");
        return rc;
    }
    info->rho = info->sensitivity * info->sensitivity / (2.0 * info->sigma * info->sigma);
    info->n_clipped = 0;
    return DP_OK;
}

int eb_mix_privatize(const eb_gauss_data *g, const eb_mix_private_opts *o, double *msgs,
                     eb_mix_private_info *info, dp_err *err)
{
    int rc = eb_mix_private_calibrate(g, o, info, err);
    if (rc != DP_OK)
        return rc;
    double R = info->radius;
    gsl_rng *rng = dp_rng_alloc(o->seed, DP_RNG_STREAM_MIXTURE_NOISE, err);
    if (rng == NULL)
        return DP_ENOMEM;
    size_t d = g->d;
    for (size_t i = 0; i < g->m; i++) {
        const double *x = g->x + i * d;
        double s = 0.0;
        for (size_t j = 0; j < d; j++)
            s += x[j] * x[j];
        double nrm = sqrt(s);
        double f = nrm > R ? R / nrm : 1.0;
        if (nrm > R)
            info->n_clipped++;
        for (size_t j = 0; j < d; j++)
            msgs[i * d + j] = f * x[j] + gsl_ran_gaussian_ziggurat(rng, info->sigma);
    }
    gsl_rng_free(rng);
    return DP_OK;
}
