/*
 * eb_linreg.c: minimum-norm local regression and EM for the Gaussian-mixture prior over regression
 * vectors (Ozkara et al. 2023, Sec. 3.1, Thm 7, App E; Alg 1; docs/REPRODUCTION.md RT7). See
 * eb_linreg.h.
 *
 * Per client the work is done in the eigenbasis of X^T X = V diag(lambda) V^T, where the posterior
 * covariance of every component is diagonal: c_j = 1/(lambda_j/sigma_w^2 + 1/var_l).
 * Marginal: log|sigma_w^2 I + var X X^T| = n log sigma_w^2 + sum_j log(1 + var lambda_j/sigma_w^2);
 * quadratic form by Woodbury: r^T r/sigma_w^2 - (X^T r)^T C (X^T r)/sigma_w^4 with r = y - X mu.
 */
#include "estimators/eb_linreg.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include <gsl/gsl_eigen.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_math.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"

/* Singular values below this fraction (times max(n, d)) of the largest are treated as 0: the usual
 * pseudo-inverse cutoff (numerical rank at double precision). */
#define EB_LINREG_RCOND DBL_EPSILON

int eb_linreg_minnorm(size_t n, size_t d, const double *X, const double *y, double *theta,
                      dp_err *err)
{
    if (n < 1 || d < 1 || d > EB_MAX_DIM)
        return dp_err_set(err, DP_EINVAL, "X", "need n >= 1 and 1 <= d <= %d", EB_MAX_DIM);
    /* SVD of the tall orientation: n >= d: X = U S V^T, theta = V S^+ U^T y;
     * n < d: X^T = U S V^T, theta = U S^+ V^T y. */
    size_t r = n >= d ? n : d, c = n >= d ? d : n;
    int rc = DP_OK;
    gsl_matrix *A = gsl_matrix_alloc(r, c), *V = gsl_matrix_alloc(c, c);
    gsl_vector *S = gsl_vector_alloc(c), *wk = gsl_vector_alloc(c), *t = gsl_vector_alloc(c);
    if (!A || !V || !S || !wk || !t) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    for (size_t a = 0; a < n; a++) /* X, or X^T when wide */
        for (size_t b = 0; b < d; b++)
            gsl_matrix_set(A, n >= d ? a : b, n >= d ? b : a, X[a * d + b]);
    int st = gsl_linalg_SV_decomp(A, V, S, wk);
    if (st != GSL_SUCCESS) {
        rc = dp_err_set(err, DP_ENUMERIC, "X", "SVD failed (%s)", gsl_strerror(st));
        goto out;
    }
    double smax = gsl_vector_get(S, 0), cut = smax * (double)r * EB_LINREG_RCOND;
    /* n >= d: t = S^+ U^T y, theta = V t (U = A, n x d). n < d: t = S^+ V^T y, theta = U t (V is
     * n x n, U = A, d x n). The same two products with the roles of A and V swapped. */
    const gsl_matrix *to_t = n >= d ? A : V, *to_theta = n >= d ? V : A;
    for (size_t j = 0; j < c; j++) {
        double sj = gsl_vector_get(S, j), u = 0.0;
        for (size_t a = 0; a < n; a++)
            u += gsl_matrix_get(to_t, a, j) * y[a];
        gsl_vector_set(t, j, sj > cut ? u / sj : 0.0);
    }
    for (size_t b = 0; b < d; b++) {
        double s = 0.0;
        for (size_t j = 0; j < c; j++)
            s += gsl_matrix_get(to_theta, b, j) * gsl_vector_get(t, j);
        theta[b] = s;
    }
out:
    gsl_matrix_free(A);
    gsl_matrix_free(V);
    gsl_vector_free(S);
    gsl_vector_free(wk);
    gsl_vector_free(t);
    return rc;
}

typedef struct lr_client {
    double *V;   /* d*d eigenvectors (columns), row-major */
    double *lam; /* d eigenvalues of X^T X (clamped >= 0) */
    double *yt;  /* d: V^T X^T y */
    double yy;   /* y^T y */
    double n;
} lr_client;

static double dot(const double *a, const double *b, size_t d)
{
    double s = 0.0;
    for (size_t j = 0; j < d; j++)
        s += a[j] * b[j];
    return s;
}

/* out = V^T v */
static void vt_mul(const double *V, const double *v, size_t d, double *out)
{
    for (size_t j = 0; j < d; j++)
        out[j] = 0.0;
    for (size_t r = 0; r < d; r++) {
        double vr = v[r];
        const double *row = V + r * d;
        for (size_t j = 0; j < d; j++)
            out[j] += row[j] * vr;
    }
}

/* out = V v */
static void v_mul(const double *V, const double *v, size_t d, double *out)
{
    for (size_t r = 0; r < d; r++)
        out[r] = dot(V + r * d, v, d);
}

static int prep_client(const eb_linreg_client *c, size_t d, lr_client *p,
                       gsl_eigen_symmv_workspace *ws, gsl_matrix *A, gsl_matrix *evec,
                       gsl_vector *eval, double *tmp)
{
    gsl_matrix_set_zero(A);
    for (size_t s = 0; s < c->n; s++) {
        const double *x = c->X + s * d;
        for (size_t a = 0; a < d; a++)
            for (size_t b = a; b < d; b++)
                A->data[a * d + b] += x[a] * x[b];
    }
    for (size_t a = 0; a < d; a++)
        for (size_t b = 0; b < a; b++)
            A->data[a * d + b] = A->data[b * d + a];
    if (gsl_eigen_symmv(A, eval, evec, ws) != GSL_SUCCESS)
        return DP_ENUMERIC;
    memcpy(p->V, evec->data, d * d * sizeof(double));
    for (size_t j = 0; j < d; j++)
        p->lam[j] = eval->data[j] > 0 ? eval->data[j] : 0.0;
    for (size_t j = 0; j < d; j++)
        tmp[j] = 0.0;
    p->yy = 0.0;
    for (size_t s = 0; s < c->n; s++) {
        const double *x = c->X + s * d;
        for (size_t j = 0; j < d; j++)
            tmp[j] += x[j] * c->y[s];
        p->yy += c->y[s] * c->y[s];
    }
    vt_mul(p->V, tmp, d, p->yt);
    p->n = (double)c->n;
    return DP_OK;
}

int eb_linreg_mix_fit(size_t m, size_t d, const eb_linreg_client *c, double sigma_w2,
                      const eb_linreg_mix_opts *o, eb_mix_prior *out, double *theta,
                      eb_mix_fit_info *info, dp_err *err)
{
    if (m < 2 || m > EB_MAX_CLIENTS)
        return dp_err_set(err, DP_EINVAL, "clients", "need 2 <= clients <= %d (got %zu)",
                          EB_MAX_CLIENTS, m);
    if (d < 1 || d > 512)
        return dp_err_set(err, DP_EINVAL, "d", "dimension must be in [1, 512] (got %zu)", d);
    if (o->k < 1 || o->k > EB_MAX_COMPONENTS || o->k > m)
        return dp_err_set(err, DP_EINVAL, "components",
                          "components must be in [1, min(clients, %d)]", EB_MAX_COMPONENTS);
    if (!isfinite(sigma_w2) || sigma_w2 <= 0)
        return dp_err_set(err, DP_EINVAL, "noise_variance", "must be finite and > 0 (got %g)",
                          sigma_w2);
    if (!(o->var_floor > 0) || !(o->tol > 0) || o->max_iter < 1 || o->max_iter > EB_MAX_ITER_CAP)
        return dp_err_set(err, DP_EINVAL, "options", "need var_floor > 0, tol > 0, 1 <= max_iter");
    size_t k = o->k;
    int rc = DP_OK;
    lr_client *pc = dp_calloc(m, sizeof *pc);
    double *store = dp_calloc(m * (d * d + 2 * d), sizeof(double));
    double *mpost = dp_calloc(m * k * d, sizeof(double)); /* per-component posterior means */
    double *resp = dp_calloc(m * k, sizeof(double));
    double *trc = dp_calloc(m * k, sizeof(double)); /* trace of per-component covariance */
    double *init = dp_calloc(m * d, sizeof(double));
    double *tmp = dp_calloc(4 * d, sizeof(double));
    gsl_eigen_symmv_workspace *ws = gsl_eigen_symmv_alloc(d);
    gsl_matrix *A = gsl_matrix_alloc(d, d), *evec = gsl_matrix_alloc(d, d);
    gsl_vector *eval = gsl_vector_alloc(d);
    gsl_rng *rng = NULL;
    if (!pc || !store || !mpost || !resp || !trc || !init || !tmp || !ws || !A || !evec || !eval) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < m; i++) {
        pc[i].V = store + i * (d * d + 2 * d);
        pc[i].lam = pc[i].V + d * d;
        pc[i].yt = pc[i].lam + d;
        if (c[i].n < 1) {
            rc = dp_err_set(err, DP_EINVAL, "clients", "client %zu has no samples", i);
            goto out;
        }
        if (prep_client(&c[i], d, &pc[i], ws, A, evec, eval, tmp) != DP_OK) {
            rc = dp_err_set(err, DP_ENUMERIC, "clients", "eigendecomposition failed");
            goto out;
        }
        rc = eb_linreg_minnorm(c[i].n, d, c[i].X, c[i].y, init + i * d, err);
        if (rc != DP_OK)
            goto out;
    }
    /* init: k-means++ centres of the min-norm estimates; var = their mean coordinate variance */
    rng = dp_rng_alloc(o->seed, DP_RNG_STREAM_LINREG_INIT, err);
    if (rng == NULL) {
        rc = DP_ENOMEM;
        goto out;
    }
    {
        double *d2 = resp; /* m doubles of scratch (resp is m*k >= m) */
        size_t first = (size_t)gsl_rng_uniform_int(rng, (unsigned long)m);
        memcpy(out->mu, init + first * d, d * sizeof(double));
        for (size_t i = 0; i < m; i++) {
            double s = 0;
            for (size_t j = 0; j < d; j++)
                s += (init[i * d + j] - out->mu[j]) * (init[i * d + j] - out->mu[j]);
            d2[i] = s;
        }
        for (size_t l = 1; l < k; l++) {
            double tot = 0;
            for (size_t i = 0; i < m; i++)
                tot += d2[i];
            double u = gsl_rng_uniform(rng) * tot, acc = 0;
            size_t pick = m - 1;
            for (size_t i = 0; i < m; i++) {
                acc += d2[i];
                if (acc > u) {
                    pick = i;
                    break;
                }
            }
            memcpy(out->mu + l * d, init + pick * d, d * sizeof(double));
            for (size_t i = 0; i < m; i++) {
                double s = 0;
                for (size_t j = 0; j < d; j++)
                    s += (init[i * d + j] - out->mu[l * d + j]) *
                         (init[i * d + j] - out->mu[l * d + j]);
                if (s < d2[i])
                    d2[i] = s;
            }
        }
        double v = 0;
        for (size_t j = 0; j < d; j++) {
            double s = 0, s2 = 0;
            for (size_t i = 0; i < m; i++) {
                s += init[i * d + j];
                s2 += init[i * d + j] * init[i * d + j];
            }
            v += s2 / (double)m - (s / (double)m) * (s / (double)m);
        }
        v /= (double)d;
        for (size_t l = 0; l < k; l++) {
            out->w[l] = 1.0 / (double)k;
            out->var[l] = v > o->var_floor ? v : o->var_floor;
        }
    }
    out->k = k;
    out->d = d;
    double ll = -DP_INF, ll_prev = -DP_INF;
    eb_status st = EB_STATUS_MAX_ITER;
    unsigned it;
    double *mt = tmp, *mt2 = tmp + d, *mo = tmp + 2 * d;
    for (it = 1; it <= o->max_iter; it++) {
        ll = 0.0;
        for (size_t i = 0; i < m; i++) {
            const lr_client *p = &pc[i];
            double lw[EB_MAX_COMPONENTS];
            for (size_t l = 0; l < k; l++) {
                double vl = out->var[l];
                vt_mul(p->V, out->mu + l * d, d, mt); /* mu-tilde */
                double logdet = p->n * log(sigma_w2), quad, q2 = 0.0, tr = 0.0;
                double rr = p->yy - 2.0 * dot(mt, p->yt, d);
                for (size_t j = 0; j < d; j++) {
                    double lam = p->lam[j];
                    double cj = 1.0 / (lam / sigma_w2 + 1.0 / vl);
                    double xr = p->yt[j] - lam * mt[j];
                    rr += lam * mt[j] * mt[j];
                    q2 += cj * xr * xr;
                    logdet += log1p(vl * lam / sigma_w2);
                    tr += cj;
                    mt2[j] = cj * (p->yt[j] / sigma_w2 + mt[j] / vl);
                }
                quad = rr / sigma_w2 - q2 / (sigma_w2 * sigma_w2);
                lw[l] = (out->w[l] > 0 ? log(out->w[l]) : (double)-DP_INF) -
                        0.5 * (p->n * log(2.0 * M_PI) + logdet + quad);
                trc[i * k + l] = tr;
                v_mul(p->V, mt2, d, mpost + (i * k + l) * d);
            }
            double lse = eb_logsumexp(lw, k);
            ll += lse;
            for (size_t l = 0; l < k; l++)
                resp[i * k + l] = exp(lw[l] - lse);
        }
        if (it > 1 && ll - ll_prev <= o->tol * (1.0 + fabs(ll))) {
            st = EB_STATUS_CONVERGED;
            break;
        }
        ll_prev = ll;
        /* M-step */
        for (size_t l = 0; l < k; l++) {
            double nl = 0.0;
            memset(mo, 0, d * sizeof(double));
            for (size_t i = 0; i < m; i++) {
                double r = resp[i * k + l];
                nl += r;
                const double *mp = mpost + (i * k + l) * d;
                for (size_t j = 0; j < d; j++)
                    mo[j] += r * mp[j];
            }
            out->w[l] = nl / (double)m;
            if (nl < 1e-10)
                continue;
            for (size_t j = 0; j < d; j++)
                mo[j] /= nl;
            double sv = 0.0;
            for (size_t i = 0; i < m; i++) {
                double r = resp[i * k + l];
                const double *mp = mpost + (i * k + l) * d;
                double q = 0.0;
                for (size_t j = 0; j < d; j++)
                    q += (mp[j] - mo[j]) * (mp[j] - mo[j]);
                sv += r * (q + trc[i * k + l]);
            }
            memcpy(out->mu + l * d, mo, d * sizeof(double));
            double nv = sv / ((double)d * nl);
            out->var[l] = nv > o->var_floor ? nv : o->var_floor;
        }
    }
    if (it > o->max_iter)
        it = o->max_iter;
    if (theta) {
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < d; j++) {
                double s = 0.0;
                for (size_t l = 0; l < k; l++)
                    s += resp[i * k + l] * mpost[(i * k + l) * d + j];
                theta[i * d + j] = s;
            }
    }
    info->loglik = ll;
    info->iterations = it;
    info->status = st;
    for (size_t l = 0; l < k; l++)
        if (out->w[l] * (double)m < 1e-10)
            info->status = eb_status_worst(info->status, EB_STATUS_DEGENERATE);
out:
    if (rng)
        gsl_rng_free(rng);
    gsl_eigen_symmv_free(ws);
    gsl_matrix_free(A);
    gsl_matrix_free(evec);
    gsl_vector_free(eval);
    dp_free(pc);
    dp_free(store);
    dp_free(mpost);
    dp_free(resp);
    dp_free(trc);
    dp_free(init);
    dp_free(tmp);
    return rc;
}
