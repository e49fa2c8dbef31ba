/*
 * federated/fl_altmin.c: APriv-AltMin and APriv-init of Jain, Rush, Smith, Song & Thakurta,
 * NeurIPS 2021, with the synthetic low-rank regression of its §6 (contract and conventions in
 * fl_altmin.h).
 *
 * Linear algebra: the v-fit (k x k) and the per-user least squares of the baseline (m x m or d x d)
 * are small positive definite systems solved by our own Cholesky (a failed pivot is reported, never
 * aborted on); the noisy U-step system (d k x d k, indefinite in general once noised; the paper
 * does not say what to do then, we solve it as it is, Alg. 2 line 3, and keep U(t) when it is
 * singular) by GSL's LU with an explicit singularity check before the solve; Alg. 3's top-k
 * eigenvectors by gsl_eigen_symmv. GSL's error handler is never reached: every input is checked
 * first.
 */
#include "federated/fl_altmin.h"

#include <math.h>
#include <string.h>

#include <gsl/gsl_eigen.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "common/dp_rng.h"
#include "federated/fl_data_priv.h"
#include "federated/fl_model.h"
#include "federated/fl_rng.h"

#define FL_SEED_LOWRANK UINT64_C(0x6c6f7772616e6b) /* "lowrank" */
/* labels under the generator's seed */
#define LR_USTAR 0
#define LR_VSTAR 1
#define LR_X     2
#define LR_NOISE 3
#define LR_RAND  4 /* the random model baseline */
#define LR_SSP   5 /* the single-model baseline's noise */
/* labels under a run's seed */
#define AM_RANDOM_INIT 10
#define AM_INIT_NOISE  11
#define AM_ORDER       12  /* Alg. 1's user order (disjoint batches) */
#define AM_EPOCH       100 /* + t: epoch t's noise */

/* Relative ridge of the small least-squares fits: keeps Z^T Z (and X X^T) invertible when a user
 * has fewer samples than unknowns, 10 orders of magnitude below the data's own scale. */
#define FL_ALTMIN_VRIDGE 1e-10
/* Normals per fl_gauss_fill call (a stack buffer; each chunk has its own derived seed). */
#define GAUSS_CHUNK 512

static void gauss_fill_d(double *out, size_t n, uint64_t seed)
{
    float buf[GAUSS_CHUNK];
    for (size_t off = 0, c = 0; off < n; off += GAUSS_CHUNK, c++) {
        size_t len = n - off < GAUSS_CHUNK ? n - off : GAUSS_CHUNK;
        fl_gauss_fill(buf, len, 1.0, dp_rng_derive(seed, c));
        for (size_t i = 0; i < len; i++)
            out[off + i] = (double)buf[i];
    }
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* Solves G z = r in place (r <- z) for a symmetric n x n G (column-major, upper triangle read; G is
 * overwritten by its Cholesky factor). false when G is not numerically positive definite. */
static bool chol_solve(double *g, size_t n, double *r)
{
    for (size_t j = 0; j < n; j++) {
        double s = g[j + j * n];
        for (size_t l = 0; l < j; l++)
            s -= g[l + j * n] * g[l + j * n];
        if (!(s > 0))
            return false;
        double piv = sqrt(s);
        g[j + j * n] = piv;
        for (size_t i = j + 1; i < n; i++) {
            double t = g[j + i * n];
            for (size_t l = 0; l < j; l++)
                t -= g[l + j * n] * g[l + i * n];
            g[j + i * n] = t / piv; /* R[j][i], R upper: G = R^T R */
        }
    }
    for (size_t i = 0; i < n; i++) { /* R^T z = r */
        double t = r[i];
        for (size_t l = 0; l < i; l++)
            t -= g[l + i * n] * r[l];
        r[i] = t / g[i + i * n];
    }
    for (size_t i = n; i-- > 0;) { /* R x = z */
        double t = r[i];
        for (size_t l = i + 1; l < n; l++)
            t -= g[i + l * n] * r[l];
        r[i] = t / g[i + i * n];
    }
    return true;
}

void fl_altmin_orthonormalize(double *z, size_t d, size_t k)
{
    for (size_t c = 0; c < k; c++) {
        double *col = z + c * d;
        for (int pass = 0; pass < 2; pass++)
            for (size_t p = 0; p < c; p++) {
                double r = dot(z + p * d, col, d);
                for (size_t i = 0; i < d; i++)
                    col[i] -= r * z[p * d + i];
            }
        double nrm = sqrt(dot(col, col, d));
        if (nrm > 0 && isfinite(nrm)) {
            for (size_t i = 0; i < d; i++)
                col[i] /= nrm;
            continue;
        }
        /* a vanished (or non-finite) column: the first unit vector e_i that stays independent */
        for (size_t e = 0; e < d; e++) {
            memset(col, 0, d * sizeof *col);
            col[e] = 1.0;
            for (int pass = 0; pass < 2; pass++)
                for (size_t p = 0; p < c; p++) {
                    double r = dot(z + p * d, col, d);
                    for (size_t i = 0; i < d; i++)
                        col[i] -= r * z[p * d + i];
                }
            nrm = sqrt(dot(col, col, d));
            if (nrm > 0.5) { /* e_i keeps at least half its length: well conditioned */
                for (size_t i = 0; i < d; i++)
                    col[i] /= nrm;
                break;
            }
        }
    }
}

void fl_altmin_random_u(size_t d, size_t k, uint64_t seed, double *u)
{
    gauss_fill_d(u, d * k, seed);
    fl_altmin_orthonormalize(u, d, k);
}

/* ---- the generator ---- */

fl_lowrank_spec fl_lowrank_paper_spec(void)
{
    return (fl_lowrank_spec){.users = 50000, .m = 10, .d = 50, .k = 2, .sigma_f = 0.01, .seed = 1};
}

static int lowrank_check(const fl_lowrank_spec *s, dp_err *err)
{
    if (s->users < 1 || s->users > FL_ALTMIN_MAX_USERS)
        return dp_err_set(err, DP_EINVAL, "users", "users must be in 1..%d (got %zu)",
                          FL_ALTMIN_MAX_USERS, s->users);
    if (s->m < 1 || s->m > FL_ALTMIN_MAX_M)
        return dp_err_set(err, DP_EINVAL, "m", "m must be in 1..%d (got %zu)", FL_ALTMIN_MAX_M,
                          s->m);
    if (s->d < 1 || s->d > FL_ALTMIN_MAX_D)
        return dp_err_set(err, DP_EINVAL, "d", "d must be in 1..%d (got %zu)", FL_ALTMIN_MAX_D,
                          s->d);
    if (s->k < 1 || s->k > s->d || s->k > FL_ALTMIN_MAX_K || s->d * s->k > FL_ALTMIN_MAX_DK)
        return dp_err_set(err, DP_EINVAL, "k",
                          "k must be in 1..min(d, %d) with d k <= %d (got k = %zu, d = %zu)",
                          FL_ALTMIN_MAX_K, FL_ALTMIN_MAX_DK, s->k, s->d);
    if (!(isfinite(s->sigma_f) && s->sigma_f >= 0))
        return dp_err_set(err, DP_EINVAL, "sigma_f", "sigma_f must be finite and >= 0 (got %g)",
                          s->sigma_f);
    return DP_OK;
}

int fl_lowrank_init(const fl_lowrank_spec *spec, fl_lowrank *out, dp_err *err)
{
    memset(out, 0, sizeof *out);
    int rc = lowrank_check(spec, err);
    if (rc != DP_OK)
        return rc;
    size_t d = spec->d, k = spec->k, n = spec->users;
    uint64_t base = dp_rng_derive(spec->seed, FL_SEED_LOWRANK);
    out->u_star = dp_malloc(d * k * sizeof *out->u_star);
    out->basis = dp_malloc(d * k * sizeof *out->basis);
    out->v_star = dp_malloc(n * k * sizeof *out->v_star);
    if (out->u_star == NULL || out->basis == NULL || out->v_star == NULL) {
        fl_lowrank_free(out);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    out->spec = *spec;
    gauss_fill_d(out->u_star, d * k, dp_rng_derive(base, LR_USTAR));
    for (size_t c = 0; c < k; c++) { /* unit columns (§6) */
        double *col = out->u_star + c * d, nrm = sqrt(dot(col, col, d));
        for (size_t i = 0; i < d; i++)
            col[i] /= nrm;
    }
    memcpy(out->basis, out->u_star, d * k * sizeof *out->basis);
    fl_altmin_orthonormalize(out->basis, d, k);
    gauss_fill_d(out->v_star, n * k, dp_rng_derive(base, LR_VSTAR));
    return DP_OK;
}

void fl_lowrank_free(fl_lowrank *g)
{
    if (g == NULL)
        return;
    dp_free(g->u_star);
    dp_free(g->basis);
    dp_free(g->v_star);
    memset(g, 0, sizeof *g);
}

int fl_lowrank_dataset(const fl_lowrank *g, fl_dataset *out, dp_err *err)
{
    memset(out, 0, sizeof *out);
    size_t n = g->spec.users, m = g->spec.m, d = g->spec.d;
    if ((double)n * (double)m * (double)d > (double)FL_MAX_CELLS)
        return dp_err_set(err, DP_EINVAL, "n_min",
                          "users x rows x dim must be at most %zu cells (got %zu x %zu x %zu)",
                          (size_t)FL_MAX_CELLS, n, m, d);
    double *x = dp_malloc(m * d * sizeof *x), *y = dp_malloc(m * sizeof *y);
    out->n = n * m;
    out->d = d;
    out->n_silos = n;
    out->x = dp_malloc(n * m * d * sizeof(float));
    out->y = dp_malloc(n * m * sizeof(float));
    out->silo = dp_malloc(n * m * sizeof(uint32_t));
    out->silo_names = fl_numbered_names(n);
    if (!x || !y || !out->x || !out->y || !out->silo || !out->silo_names) {
        dp_free(x);
        dp_free(y);
        fl_dataset_free(out);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    for (size_t j = 0; j < n; j++) {
        fl_lowrank_user(g, j, x, y);
        for (size_t i = 0; i < m; i++) {
            size_t row = j * m + i;
            for (size_t q = 0; q < d; q++)
                out->x[row * d + q] = (float)x[i * d + q];
            out->y[row] = (float)y[i];
            out->silo[row] = (uint32_t)j;
        }
    }
    dp_free(x);
    dp_free(y);
    return DP_OK;
}

void fl_lowrank_theta(const fl_lowrank *g, size_t j, double *theta)
{
    size_t d = g->spec.d, k = g->spec.k;
    const double *v = g->v_star + j * k;
    for (size_t i = 0; i < d; i++) {
        double s = 0.0;
        for (size_t c = 0; c < k; c++)
            s += g->u_star[c * d + i] * v[c];
        theta[i] = s;
    }
}

void fl_lowrank_user(const fl_lowrank *g, size_t j, double *x, double *y)
{
    size_t d = g->spec.d, m = g->spec.m, k = g->spec.k;
    uint64_t base = dp_rng_derive(g->spec.seed, FL_SEED_LOWRANK);
    gauss_fill_d(x, m * d, dp_rng_derive(dp_rng_derive(base, LR_X), j));
    gauss_fill_d(y, m, dp_rng_derive(dp_rng_derive(base, LR_NOISE), j));
    const double *v = g->v_star + j * k;
    for (size_t i = 0; i < m; i++) {
        double s = 0.0;
        for (size_t c = 0; c < k; c++)
            s += v[c] * dot(g->u_star + c * d, x + i * d, d);
        y[i] = s + g->spec.sigma_f * y[i];
    }
}

double fl_lowrank_subspace_dist(const fl_lowrank *g, const double *u)
{
    size_t d = g->spec.d, k = g->spec.k;
    /* ||(I - B B^T) U||_F^2 = ||U||_F^2 - ||B^T U||_F^2 for U with k orthonormal columns */
    double s = 0.0, proj = 0.0;
    for (size_t c = 0; c < k; c++) {
        s += dot(u + c * d, u + c * d, d);
        for (size_t b = 0; b < k; b++) {
            double t = dot(g->basis + b * d, u + c * d, d);
            proj += t * t;
        }
    }
    double r = s - proj;
    return r > 0 ? sqrt(r) : 0.0;
}

/* ---- the steps ---- */

void fl_altmin_vfit(const double *u, size_t d, size_t k, const double *x, const double *y, size_t m,
                    double *v)
{
    double gm[FL_ALTMIN_MAX_K * FL_ALTMIN_MAX_K], z[FL_ALTMIN_MAX_K];
    memset(gm, 0, k * k * sizeof *gm);
    memset(v, 0, k * sizeof *v);
    for (size_t i = 0; i < m; i++) {
        for (size_t c = 0; c < k; c++)
            z[c] = dot(u + c * d, x + i * d, d);
        for (size_t b = 0; b < k; b++) {
            v[b] += y[i] * z[b];
            for (size_t a = 0; a <= b; a++)
                gm[a + b * k] += z[a] * z[b];
        }
    }
    double tr = 0.0;
    for (size_t c = 0; c < k; c++)
        tr += gm[c + c * k];
    if (!(tr > 0) || !isfinite(tr)) {
        memset(v, 0, k * sizeof *v);
        return;
    }
    for (size_t c = 0; c < k; c++)
        gm[c + c * k] += FL_ALTMIN_VRIDGE * tr / (double)k;
    if (!chol_solve(gm, k, v))
        memset(v, 0, k * sizeof *v);
}

static double clip_scalar(double y, double zeta)
{
    if (zeta > 0 && fabs(y) > zeta)
        return y > 0 ? zeta : -zeta;
    return y;
}

void fl_altmin_ustats_add(const double *x, const double *y, size_t m, size_t d, size_t k,
                          const double *v, double eta, double zeta, double *a, double *b)
{
    /* W_i = c_i (v (x) x_i), c_i = min(1, eta / (||v|| ||x_i||)); so
     * mean_i W_i W_i^T = (v v^T) (x) S with S = mean_i c_i^2 x_i x_i^T, and
     * mean_i y~_i W_i = v (x) s with s = mean_i y~_i c_i x_i: d^2 work per sample, not (d k)^2. */
    size_t dk = d * k;
    double vn = sqrt(dot(v, v, k));
    for (size_t i = 0; i < m; i++) {
        const double *xi = x + i * d;
        double xn = sqrt(dot(xi, xi, d)), c = 1.0;
        if (eta > 0 && vn * xn > eta)
            c = eta / (vn * xn);
        double c2 = c * c / (double)m, cy = c * clip_scalar(y[i], zeta) / (double)m;
        for (size_t bb = 0; bb < k; bb++) {
            double f = cy * v[bb];
            for (size_t p = 0; p < d; p++)
                b[bb * d + p] += f * xi[p];
        }
        if (c2 == 0.0)
            continue;
        /* rank one c2 (v (x) x)(v (x) x)^T, upper triangle of a */
        for (size_t cb = 0; cb < k; cb++)
            for (size_t q = 0; q < d; q++) {
                double fq = c2 * v[cb] * xi[q];
                if (fq == 0.0)
                    continue;
                double *col = a + (cb * d + q) * dk;
                for (size_t ca = 0; ca <= cb; ca++) {
                    double f = fq * v[ca];
                    size_t lim = ca == cb ? q + 1 : d;
                    double *dst = col + ca * d;
                    for (size_t p = 0; p < lim; p++)
                        dst[p] += f * xi[p];
                }
            }
    }
}

/* Mirrors the upper triangle of the n x n column-major a into its lower one and adds Wigner noise:
 * i.i.d. N(0, std^2) on the upper triangle, diagonal included, mirrored (N_sym, §4). */
static void sym_noise(double *a, size_t n, double std, gsl_rng *r)
{
    for (size_t q = 0; q < n; q++)
        for (size_t p = 0; p <= q; p++) {
            double e = std > 0 ? std * gsl_ran_gaussian_ziggurat(r, 1.0) : 0.0;
            a[p + q * n] += e;
            a[q + p * n] = a[p + q * n];
        }
}

int fl_altmin_ustep(double *a, double *b, size_t d, size_t k, double noise_a, double noise_b,
                    uint64_t rng_seed, double *u, bool *kept, dp_err *err)
{
    fl_blas_single_thread(); /* GSL's linear algebra calls OpenBLAS */
    size_t n = d * k;
    *kept = false;
    gsl_rng *r = dp_rng_alloc(rng_seed, DP_RNG_STREAM_FL_DP_NOISE, err);
    gsl_permutation *perm = gsl_permutation_alloc(n);
    if (r == NULL || perm == NULL) {
        gsl_rng_free(r);
        gsl_permutation_free(perm);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    sym_noise(a, n, noise_a, r);
    for (size_t i = 0; i < n; i++)
        b[i] += noise_b > 0 ? noise_b * gsl_ran_gaussian_ziggurat(r, 1.0) : 0.0;
    gsl_rng_free(r);
    bool finite = true;
    for (size_t i = 0; i < n * n && finite; i++)
        finite = isfinite(a[i]);
    int sgn = 0;
    gsl_matrix_view mv = gsl_matrix_view_array(a, n, n); /* symmetric: layout does not matter */
    gsl_vector_view bv = gsl_vector_view_array(b, n);
    bool ok = finite && gsl_linalg_LU_decomp(&mv.matrix, perm, &sgn) == GSL_SUCCESS;
    for (size_t i = 0; i < n && ok; i++)
        ok =
            a[i + i * n] != 0.0 && isfinite(a[i + i * n]); /* U of LU: singular when a pivot is 0 */
    if (ok)
        ok = gsl_linalg_LU_svx(&mv.matrix, perm, &bv.vector) == GSL_SUCCESS;
    for (size_t i = 0; i < n && ok; i++)
        ok = isfinite(b[i]);
    gsl_permutation_free(perm);
    if (!ok) {
        *kept = true; /* keep U(t): post-processing of the releases, no privacy cost */
        return DP_OK;
    }
    memcpy(u, b, n * sizeof *u); /* vec(Z) is column-major d x k: the layout of U */
    fl_altmin_orthonormalize(u, d, k);
    return DP_OK;
}

void fl_altmin_init_add(const double *x, const double *y, size_t m, size_t d, double zeta,
                        double *mm)
{
    size_t pairs = m / 2;
    if (pairs == 0)
        return;
    for (size_t i = 0; i < pairs; i++) {
        const double *x0 = x + 2 * i * d, *x1 = x + (2 * i + 1) * d;
        double n0 = sqrt(dot(x0, x0, d)), n1 = sqrt(dot(x1, x1, d));
        if (!(n0 > 0) || !(n1 > 0))
            continue; /* a zero sample carries no direction */
        double w = clip_scalar(y[2 * i], zeta) * clip_scalar(y[2 * i + 1], zeta) /
                   (n0 * n1 * (double)pairs);
        /* sym(x0 x1^T): the upper triangle (p <= q) of x0 x1^T, read back mirrored */
        for (size_t q = 0; q < d; q++) {
            double f = w * x1[q];
            double *col = mm + q * d;
            for (size_t p = 0; p <= q; p++)
                col[p] += f * x0[p];
        }
    }
}

typedef struct eig_pair {
    double val;
    size_t idx;
} eig_pair;

int fl_altmin_init_finish(double *mm, size_t d, size_t k, double noise, uint64_t rng_seed,
                          double *u, dp_err *err)
{
    fl_blas_single_thread(); /* GSL's linear algebra calls OpenBLAS */
    gsl_rng *r = dp_rng_alloc(rng_seed, DP_RNG_STREAM_FL_DP_NOISE, err);
    gsl_eigen_symmv_workspace *ws = gsl_eigen_symmv_alloc(d);
    gsl_vector *eval = gsl_vector_alloc(d);
    gsl_matrix *evec = gsl_matrix_alloc(d, d);
    int rc = DP_OK;
    if (r == NULL || ws == NULL || eval == NULL || evec == NULL) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    sym_noise(mm, d, noise, r);
    for (size_t i = 0; i < d * d; i++)
        if (!isfinite(mm[i])) {
            rc = dp_err_set(err, DP_ENUMERIC, NULL, "the initialisation matrix is not finite");
            goto out;
        }
    gsl_matrix_view mv = gsl_matrix_view_array(mm, d, d);
    if (gsl_eigen_symmv(&mv.matrix, eval, evec, ws) != GSL_SUCCESS ||
        gsl_eigen_symmv_sort(eval, evec, GSL_EIGEN_SORT_VAL_DESC) != GSL_SUCCESS) {
        rc = dp_err_set(err, DP_ENUMERIC, NULL, "the eigendecomposition did not converge");
        goto out;
    }
    for (size_t c = 0; c < k; c++)
        for (size_t i = 0; i < d; i++)
            u[c * d + i] = gsl_matrix_get(evec, i, c);
    fl_altmin_orthonormalize(u, d, k); /* already orthonormal; normalises rounding */
out:
    gsl_rng_free(r);
    gsl_eigen_symmv_free(ws);
    gsl_vector_free(eval);
    gsl_matrix_free(evec);
    return rc;
}

/* ---- the run ---- */

int fl_altmin_params_check(const fl_altmin_params *p, size_t d, dp_err *err)
{
    if (p->k < 1 || p->k > d || p->k > FL_ALTMIN_MAX_K || d * p->k > FL_ALTMIN_MAX_DK)
        return dp_err_set(err, DP_EINVAL, "k",
                          "k must be in 1..min(d, %d) with d k <= %d (got %zu)", FL_ALTMIN_MAX_K,
                          FL_ALTMIN_MAX_DK, p->k);
    if (p->epochs > FL_ALTMIN_MAX_EPOCHS)
        return dp_err_set(err, DP_EINVAL, "epochs", "epochs must be in 0..%d (got %u)",
                          FL_ALTMIN_MAX_EPOCHS, p->epochs);
    if (p->init != FL_ALTMIN_INIT_RANDOM && p->init != FL_ALTMIN_INIT_SPECTRAL)
        return dp_err_set(err, DP_EINVAL, "init", "init must be random or spectral");
    if (p->split != FL_ALTMIN_SPLIT_NONE && p->split != FL_ALTMIN_SPLIT_QUARTERS)
        return dp_err_set(err, DP_EINVAL, "split", "split must be none or quarters");
    const double *vals[] = {&p->eta, &p->zeta, &p->sigma, &p->sigma_init};
    const char *names[] = {"eta", "zeta", "sigma", "sigma_init"};
    for (size_t i = 0; i < 4; i++)
        if (!(isfinite(*vals[i]) && *vals[i] >= 0))
            return dp_err_set(err, DP_EINVAL, names[i], "%s must be finite and >= 0 (got %g)",
                              names[i], *vals[i]);
    bool uses_init = p->init == FL_ALTMIN_INIT_SPECTRAL, uses_alt = p->epochs > 0;
    bool priv = (uses_alt && p->sigma > 0) || (uses_init && p->sigma_init > 0);
    /* a private run noises every release that reads the data: an unnoised one would leak */
    if (priv && uses_alt && !(p->sigma > 0))
        return dp_err_set(err, DP_EINVAL, "sigma",
                          "a private run (sigma_init > 0) needs sigma > 0 for its AltMin steps");
    if (priv && uses_init && !(p->sigma_init > 0))
        return dp_err_set(err, DP_EINVAL, "sigma_init",
                          "a private run (sigma > 0) needs sigma_init > 0 for its spectral init");
    if (priv && uses_alt && !(p->eta > 0 && p->zeta > 0))
        return dp_err_set(err, DP_EINVAL, p->eta > 0 ? "zeta" : "eta",
                          "a private AltMin step needs the clips eta > 0 and zeta > 0");
    if (priv && uses_init && !(p->zeta > 0))
        return dp_err_set(err, DP_EINVAL, "zeta", "a private spectral init needs zeta > 0");
    return DP_OK;
}

double fl_altmin_sigma(double eps, double delta, double c)
{
    if (!(eps > 0 && delta > 0 && delta < 1 && c > 0 && isfinite(c)))
        return DP_NAN;
    return sqrt(c * log(1.0 / delta)) / eps;
}

void fl_altmin_batch(size_t n, unsigned T, unsigned t, size_t *lo, size_t *hi)
{
    /* n <= FL_ALTMIN_MAX_USERS and T <= FL_ALTMIN_MAX_EPOCHS: n T fits in 64 bits */
    *lo = (size_t)((uint64_t)n * t / T);
    *hi = (size_t)((uint64_t)n * (t + 1) / T);
}

void fl_altmin_order(size_t n, uint64_t seed, size_t *perm)
{
    fl_rng r;
    fl_rng_seed(&r, dp_rng_derive(seed, AM_ORDER), DP_RNG_STREAM_FL_CLIENT_SAMPLING);
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    for (size_t i = n; i > 1; i--) { /* swap perm[i-1] with a uniform one of perm[0..i-1] */
        uint64_t lim = UINT64_MAX - UINT64_MAX % i, x;
        do
            x = fl_rng_next(&r);
        while (x >= lim); /* rejection: no modulo bias */
        size_t j = (size_t)(x % i), tmp = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = tmp;
    }
}

void fl_altmin_noise_stds(const fl_altmin_params *p, double *noise_a, double *noise_b,
                          double *noise_init)
{
    double f = p->replace ? 2.0 : 1.0;
    *noise_a = p->sigma * f * p->eta * p->eta;
    *noise_b = p->sigma * f * p->eta * p->zeta;
    *noise_init = p->sigma_init * f * p->zeta * p->zeta;
}

int fl_altmin_event(const fl_altmin_params *p, acct_event **ev, bool *none, dp_err *err)
{
    acct_event *parts[2] = {NULL, NULL};
    size_t n = 0;
    *ev = NULL;
    *none = false;
    if (p->init == FL_ALTMIN_INIT_SPECTRAL && p->sigma_init > 0) {
        parts[n++] = acct_event_gaussian(p->sigma_init);
        if (parts[0] == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    if (p->epochs > 0 && p->sigma > 0) {
        /* disjoint batches: each user is read by one U-step only (Alg. 1, parallel composition) */
        uint64_t releases = p->disjoint ? 2 : 2 * (uint64_t)p->epochs;
        parts[n] = acct_event_self_composed(releases, acct_event_gaussian(p->sigma));
        if (parts[n++] == NULL) {
            acct_event_free(parts[0]);
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        }
    }
    if (n == 0) {
        *none = true;
        return DP_OK;
    }
    *ev = n == 1 ? parts[0] : acct_event_composed(parts, n);
    if (*ev == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    return DP_OK;
}

typedef struct run_bufs {
    double *x, *y, *v, *theta, *a, *b;
} run_bufs;

static void bufs_free(run_bufs *w)
{
    dp_free(w->x);
    dp_free(w->y);
    dp_free(w->v);
    dp_free(w->theta);
    dp_free(w->a);
    dp_free(w->b);
}

/* The personalised MSE, each user's head fitted on its samples [lo, lo + cnt). */
static double mse_range(const fl_lowrank *g, const double *u, size_t lo, size_t cnt)
{
    size_t d = g->spec.d, m = g->spec.m, k = g->spec.k;
    double *x = dp_malloc(m * d * sizeof *x), *y = dp_malloc(m * sizeof *y);
    double *th = dp_malloc(d * sizeof *th), v[FL_ALTMIN_MAX_K];
    double s = DP_NAN;
    if (x != NULL && y != NULL && th != NULL) {
        s = 0.0;
        for (size_t j = 0; j < g->spec.users; j++) {
            fl_lowrank_user(g, j, x, y);
            fl_altmin_vfit(u, d, k, x + lo * d, y + lo, cnt, v);
            fl_lowrank_theta(g, j, th);
            for (size_t i = 0; i < d; i++) {
                double e = th[i];
                for (size_t c = 0; c < k; c++)
                    e -= u[c * d + i] * v[c];
                s += e * e;
            }
        }
        s /= (double)g->spec.users;
    }
    dp_free(x);
    dp_free(y);
    dp_free(th);
    return s;
}

double fl_altmin_mse(const fl_lowrank *g, const double *u)
{
    return mse_range(g, u, 0, g->spec.m);
}

int fl_altmin_run(const fl_lowrank *g, const fl_altmin_params *p, double *u_out,
                  fl_altmin_result *out, dp_err *err)
{
    memset(out, 0, sizeof *out);
    size_t d = g->spec.d, m = g->spec.m, n = g->spec.users, k = p->k;
    int rc = fl_altmin_params_check(p, d, err);
    if (rc != DP_OK)
        return rc;
    if (k != g->spec.k)
        return dp_err_set(err, DP_EINVAL, "k", "k must equal the data's rank %zu (got %zu)",
                          g->spec.k, k);
    /* the sample ranges [lo, lo + cnt) of the v-step, the U-step, Alg. 3 and the final fit */
    size_t v_lo = 0, v_n = m, u_lo = 0, u_n = m, i_lo = 0, i_n = m;
    if (p->split == FL_ALTMIN_SPLIT_QUARTERS) {
        if (m % 4 != 0)
            return dp_err_set(err, DP_EINVAL, "split",
                              "quarter splits need m a multiple of 4 (got %zu)", m);
        v_n = u_lo = u_n = m / 4;
        i_lo = i_n = m / 2;
    }
    if (p->disjoint && p->epochs > n)
        return dp_err_set(err, DP_EINVAL, "epochs",
                          "disjoint batches need epochs <= users %zu (got %u)", n, p->epochs);
    size_t dk = d * k, mat = dk * dk > d * d ? dk * dk : d * d;
    size_t *order = NULL;
    if (p->disjoint && p->epochs > 0) {
        order = dp_malloc(n * sizeof *order);
        if (order == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        fl_altmin_order(n, p->seed, order);
    }
    run_bufs w = {0};
    w.x = dp_malloc(m * d * sizeof *w.x);
    w.y = dp_malloc(m * sizeof *w.y);
    w.v = dp_malloc(k * sizeof *w.v);
    w.theta = dp_malloc(dk * sizeof *w.theta); /* U */
    w.a = dp_malloc(mat * sizeof *w.a);
    w.b = dp_malloc(dk * sizeof *w.b);
    if (!w.x || !w.y || !w.v || !w.theta || !w.a || !w.b) {
        bufs_free(&w);
        dp_free(order);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    double *u = w.theta, na, nb, ni;
    fl_altmin_noise_stds(p, &na, &nb, &ni);
    if (p->init == FL_ALTMIN_INIT_RANDOM) {
        fl_altmin_random_u(d, k, dp_rng_derive(p->seed, AM_RANDOM_INIT), u);
    } else {
        memset(w.a, 0, d * d * sizeof *w.a);
        for (size_t j = 0; j < n; j++) {
            fl_lowrank_user(g, j, w.x, w.y);
            fl_altmin_init_add(w.x + i_lo * d, w.y + i_lo, i_n, d, p->zeta, w.a);
        }
        rc = fl_altmin_init_finish(w.a, d, k, ni, dp_rng_derive(p->seed, AM_INIT_NOISE), u, err);
    }
    if (rc == DP_OK)
        out->init_dist = fl_lowrank_subspace_dist(g, u);
    for (unsigned t = 0; t < p->epochs && rc == DP_OK; t++) {
        memset(w.a, 0, dk * dk * sizeof *w.a);
        memset(w.b, 0, dk * sizeof *w.b);
        size_t lo = 0, hi = n;
        if (order != NULL)
            fl_altmin_batch(n, p->epochs, t, &lo, &hi);
        for (size_t q = lo; q < hi; q++) {
            size_t j = order != NULL ? order[q] : q;
            fl_lowrank_user(g, j, w.x, w.y);
            fl_altmin_vfit(u, d, k, w.x + v_lo * d, w.y + v_lo, v_n, w.v);
            fl_altmin_ustats_add(w.x + u_lo * d, w.y + u_lo, u_n, d, k, w.v, p->eta, p->zeta, w.a,
                                 w.b);
        }
        bool kept = false;
        rc = fl_altmin_ustep(w.a, w.b, d, k, na, nb, dp_rng_derive(p->seed, AM_EPOCH + t), u, &kept,
                             err);
        out->kept += kept;
    }
    if (rc == DP_OK) {
        out->subspace_dist = fl_lowrank_subspace_dist(g, u);
        out->mse = mse_range(g, u, i_lo, i_n); /* the final fit: the init's half, or all */
        if (isnan(out->mse))
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    if (rc == DP_OK && u_out != NULL)
        memcpy(u_out, u, dk * sizeof *u);
    bufs_free(&w);
    dp_free(order);
    return rc;
}

/* ---- baselines ---- */

int fl_lowrank_local_mse(const fl_lowrank *g, double *mse, dp_err *err)
{
    size_t d = g->spec.d, m = g->spec.m, n = g->spec.users;
    size_t s = m < d ? m : d; /* the system's size */
    double *x = dp_malloc(m * d * sizeof *x), *y = dp_malloc(m * sizeof *y);
    double *gm = dp_malloc(s * s * sizeof *gm), *r = dp_malloc((s > d ? s : d) * sizeof *r);
    double *th = dp_malloc(d * sizeof *th), *est = dp_malloc(d * sizeof *est);
    if (!x || !y || !gm || !r || !th || !est) {
        dp_free(x), dp_free(y), dp_free(gm), dp_free(r), dp_free(th), dp_free(est);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    double sum = 0.0;
    for (size_t j = 0; j < n; j++) {
        fl_lowrank_user(g, j, x, y);
        double tr = 0.0;
        if (m < d) { /* minimum norm: theta = X^T (X X^T)^{-1} y */
            for (size_t b = 0; b < m; b++) {
                for (size_t a = 0; a <= b; a++)
                    gm[a + b * m] = dot(x + a * d, x + b * d, d);
                tr += gm[b + b * m];
                r[b] = y[b];
            }
        } else { /* ordinary least squares: (X^T X) theta = X^T y */
            for (size_t q = 0; q < d; q++) {
                r[q] = 0.0;
                for (size_t p = 0; p <= q; p++)
                    gm[p + q * d] = 0.0;
            }
            for (size_t i = 0; i < m; i++)
                for (size_t q = 0; q < d; q++) {
                    r[q] += x[i * d + q] * y[i];
                    for (size_t p = 0; p <= q; p++)
                        gm[p + q * d] += x[i * d + p] * x[i * d + q];
                }
            for (size_t q = 0; q < d; q++)
                tr += gm[q + q * d];
        }
        for (size_t i = 0; i < s; i++)
            gm[i + i * s] += FL_ALTMIN_VRIDGE * tr / (double)s;
        bool ok = tr > 0 && chol_solve(gm, s, r);
        if (m < d)
            for (size_t p = 0; p < d; p++) {
                est[p] = 0.0;
                for (size_t i = 0; ok && i < m; i++)
                    est[p] += x[i * d + p] * r[i];
            }
        else
            for (size_t p = 0; p < d; p++)
                est[p] = ok ? r[p] : 0.0;
        fl_lowrank_theta(g, j, th);
        for (size_t p = 0; p < d; p++)
            sum += (est[p] - th[p]) * (est[p] - th[p]);
    }
    *mse = sum / (double)n;
    dp_free(x), dp_free(y), dp_free(gm), dp_free(r), dp_free(th), dp_free(est);
    return DP_OK;
}

int fl_lowrank_single_mse(const fl_lowrank *g, double eta, double zeta, double sigma, bool replace,
                          uint64_t seed, double *mse, dp_err *err)
{
    fl_blas_single_thread(); /* GSL's linear algebra calls OpenBLAS */
    size_t d = g->spec.d, m = g->spec.m, n = g->spec.users;
    if (!(isfinite(eta) && eta >= 0 && isfinite(zeta) && zeta >= 0 && isfinite(sigma) &&
          sigma >= 0))
        return dp_err_set(err, DP_EINVAL, "sigma", "eta, zeta and sigma must be finite and >= 0");
    if (sigma > 0 && !(eta > 0 && zeta > 0))
        return dp_err_set(err, DP_EINVAL, "eta", "a private single model needs eta, zeta > 0");
    double *x = dp_malloc(m * d * sizeof *x), *y = dp_malloc(m * sizeof *y);
    double *a = dp_calloc(d * d, sizeof *a), *b = dp_calloc(d, sizeof *b);
    double *th = dp_malloc(d * sizeof *th);
    gsl_permutation *perm = gsl_permutation_alloc(d);
    gsl_rng *r = dp_rng_alloc(dp_rng_derive(seed, LR_SSP), DP_RNG_STREAM_FL_DP_NOISE, err);
    int rc = DP_OK;
    if (!x || !y || !a || !b || !th || !perm || !r) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    for (size_t j = 0; j < n; j++) {
        fl_lowrank_user(g, j, x, y);
        for (size_t i = 0; i < m; i++) {
            const double *xi = x + i * d;
            double xn = sqrt(dot(xi, xi, d)), c = eta > 0 && xn > eta ? eta / xn : 1.0;
            double c2 = c * c / (double)m, cy = c * clip_scalar(y[i], zeta) / (double)m;
            for (size_t q = 0; q < d; q++) {
                b[q] += cy * xi[q];
                for (size_t p = 0; p <= q; p++)
                    a[p + q * d] += c2 * xi[p] * xi[q];
            }
        }
    }
    double f = replace ? 2.0 : 1.0;
    sym_noise(a, d, sigma * f * eta * eta, r);
    for (size_t q = 0; q < d; q++)
        b[q] += sigma > 0 ? sigma * f * eta * zeta * gsl_ran_gaussian_ziggurat(r, 1.0) : 0.0;
    int sgn = 0;
    gsl_matrix_view mv = gsl_matrix_view_array(a, d, d);
    gsl_vector_view bv = gsl_vector_view_array(b, d);
    bool ok = gsl_linalg_LU_decomp(&mv.matrix, perm, &sgn) == GSL_SUCCESS;
    for (size_t i = 0; i < d && ok; i++)
        ok = a[i + i * d] != 0.0 && isfinite(a[i + i * d]);
    if (ok)
        ok = gsl_linalg_LU_svx(&mv.matrix, perm, &bv.vector) == GSL_SUCCESS;
    for (size_t i = 0; i < d; i++)
        if (!ok || !isfinite(b[i]))
            b[i] = 0.0; /* an unusable release: the zero model */
    double sum = 0.0;
    for (size_t j = 0; j < n; j++) {
        fl_lowrank_theta(g, j, th);
        for (size_t p = 0; p < d; p++)
            sum += (b[p] - th[p]) * (b[p] - th[p]);
    }
    *mse = sum / (double)n;
out:
    dp_free(x), dp_free(y), dp_free(a), dp_free(b), dp_free(th);
    gsl_permutation_free(perm);
    gsl_rng_free(r);
    return rc;
}

double fl_lowrank_random_mse(const fl_lowrank *g, uint64_t seed, double *zero)
{
    size_t d = g->spec.d, k = g->spec.k, n = g->spec.users;
    double *ur = dp_malloc(d * k * sizeof *ur), *th = dp_malloc(d * sizeof *th);
    double vr[FL_ALTMIN_MAX_K], s = DP_NAN, z = DP_NAN;
    if (ur != NULL && th != NULL) {
        uint64_t base = dp_rng_derive(dp_rng_derive(g->spec.seed, FL_SEED_LOWRANK), LR_RAND);
        gauss_fill_d(ur, d * k, dp_rng_derive(base, seed));
        for (size_t c = 0; c < k; c++) {
            double *col = ur + c * d, nrm = sqrt(dot(col, col, d));
            for (size_t i = 0; i < d; i++)
                col[i] /= nrm;
        }
        s = z = 0.0;
        for (size_t j = 0; j < n; j++) {
            gauss_fill_d(vr, k, dp_rng_derive(dp_rng_derive(base, seed), 1 + (uint64_t)j));
            fl_lowrank_theta(g, j, th);
            for (size_t i = 0; i < d; i++) {
                double e = th[i];
                for (size_t c = 0; c < k; c++)
                    e -= ur[c * d + i] * vr[c];
                s += e * e;
                z += th[i] * th[i];
            }
        }
        s /= (double)n;
        z /= (double)n;
    }
    if (zero != NULL)
        *zero = z;
    dp_free(ur);
    dp_free(th);
    return s;
}
