/*
 * eb_mixsqp.c: mixture proportions by SQP with an active-set inner solver. See eb_mixsqp.h for the
 * problem, the method and its references.
 *
 * Invariants: x >= 0 componentwise at every iterate (the QP keeps y >= 0 and the step is a convex
 * combination of x and y); every row of the scaled L has a positive entry, so L_j x > 0 whenever
 * x > 0 on the row's support, which the check in evaluate() enforces.
 */
#include "estimators/eb_mixsqp.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include <cblas.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"

/* openblas.h is not part of the CBLAS interface cblas.h declares on every Debian BLAS; the
 * OpenBLAS entry points the library links against. */
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);

#define BLOCK_ROWS 256 /* rows per block: 256 x k doubles stay in L2 for k up to ~200 */
/* Armijo constant and step reduction of the line search (mixsqp's suffdecr and stepsizereduce
 * defaults, 0.01 and 0.75). */
#define LS_SUFFICIENT 0.01
#define LS_REDUCE     0.75
#define LS_MIN_STEP   1e-10 /* below this the search stops: no decrease is measurable */
/* Ridge on the Hessian's diagonal, relative to its mean diagonal: keeps H_FF positive definite
 * when columns of L are (nearly) collinear, e.g. neighbouring atoms of a fine grid. */
#define HESS_RIDGE 1e-10
/* The QP's own tolerance on its multipliers, relative to the largest |b|: tighter than any outer
 * tolerance a caller may ask for, so the outer test decides convergence. */
#define QP_TOL 1e-14
/* When the line search finds no decrease, the iterate is the numerical optimum if the dual
 * residual is within this (the objective is flat to rounding there); else it is reported as not
 * converged. */
#define STALL_TOL 1e-6
/* A predicted decrease of the objective below this many roundings of it is not measurable. */
#define ROUND_TOL (16.0 * DBL_EPSILON)
/* Warm start on a strided subsample of SUB_ROWS rows when there are at least SUB_MIN_ROWS. */
#define SUB_ROWS     16384
#define SUB_MIN_ROWS 131072

void eb_blas_single_thread(void)
{
    if (openblas_get_num_threads() != 1)
        openblas_set_num_threads(1);
}

eb_mixsqp_opts eb_mixsqp_opts_default(void)
{
    eb_mixsqp_opts o = {1000, 0, 1e-8, false, NULL};
    return o;
}

double eb_mixsqp_loglik(size_t n, size_t k, const double *L, const double *rowmax, const double *pi)
{
    double s = 0.0;
    for (size_t j = 0; j < n; j++) {
        double u = 0.0;
        for (size_t c = 0; c < k; c++)
            u += L[j * k + c] * pi[c];
        s += log(u) + (rowmax ? rowmax[j] : 0.0);
    }
    return s;
}

typedef struct ws {
    size_t n, k;
    const double *L;        /* the stored matrix, or NULL: rows come from rows(ctx, ...) */
    eb_mixsqp_rows_fn rows; /* fills a block of rows when L is NULL */
    void *ctx;              /* rows' context; borrowed */
    double *blk;            /* [BLOCK_ROWS * k] generated rows (L NULL) */
    double *u;              /* [BLOCK_ROWS] */
    double *tmp;            /* [BLOCK_ROWS * k] */
    double *g;              /* [k] gradient of phi */
    double *H;              /* [k * k] Hessian, full */
    double *xt;             /* [k] trial point */
    double *y;              /* [k] QP solution */
    double *p;              /* [k] */
    double *b;              /* [k] QP gradient */
    double *c;              /* [k] QP linear term */
    double *M;              /* [k * k] Cholesky of H_FF */
    double *r;              /* [k] */
    size_t *idx;            /* [k] free indices */
    bool *active;           /* [k] in the working set (y_i = 0 held) */
} ws;

/* Rows b0 .. b0 + nb - 1 of the problem: in place in a stored L, else generated into w->blk. */
static const double *block(ws *w, size_t b0, size_t nb)
{
    if (w->L != NULL)
        return w->L + b0 * w->k;
    w->rows(w->ctx, b0, 1, nb, w->blk);
    return w->blk;
}

/* One pass over the problem's n rows, block by block (block(): a stored or generated block holds
 * the same values, and the arithmetic is the same): phi at x into *obj, and with
 * want_g the gradient into w->g, with want_H the Hessian into w->H, both averaged over the rows.
 * DP_ENUMERIC when some L_j x is not positive. */
static int pass(ws *w, const double *x, bool want_g, bool want_H, double *obj, dp_err *err)
{
    size_t k = w->k, n = w->n;
    double s = 0.0;
    if (want_g)
        memset(w->g, 0, k * sizeof *w->g);
    if (want_H)
        memset(w->H, 0, k * k * sizeof *w->H);
    for (size_t b0 = 0; b0 < n; b0 += BLOCK_ROWS) {
        size_t nb = n - b0 < BLOCK_ROWS ? n - b0 : BLOCK_ROWS;
        const double *Lb = block(w, b0, nb);
        cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)nb, (int)k, 1.0, Lb, (int)k, x, 1, 0.0, w->u,
                    1);
        for (size_t j = 0; j < nb; j++) {
            double u = w->u[j];
            if (!(u > 0.0) || !isfinite(u))
                return dp_err_set(err, DP_ENUMERIC, "mixsqp",
                                  "observation %zu has zero likelihood under the mixture", b0 + j);
            s -= log(u);
            w->u[j] = 1.0 / u;
        }
        if (want_g)
            cblas_dgemv(CblasRowMajor, CblasTrans, (int)nb, (int)k, 1.0, Lb, (int)k, w->u, 1, 1.0,
                        w->g, 1);
        if (!want_H)
            continue;
        for (size_t j = 0; j < nb; j++) {
            double d = w->u[j];
            for (size_t c = 0; c < k; c++)
                w->tmp[j * k + c] = d * Lb[j * k + c];
        }
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)k, (int)nb, 1.0, w->tmp, (int)k,
                    1.0, w->H, (int)k);
    }
    double inv = 1.0 / (double)n, sx = 0.0;
    for (size_t c = 0; c < k; c++)
        sx += x[c];
    *obj = s * inv + sx;
    if (!isfinite(*obj))
        return dp_err_set(err, DP_ENUMERIC, "mixsqp", "the mixture objective is not finite");
    if (want_g)
        for (size_t a = 0; a < k; a++)
            w->g[a] = 1.0 - w->g[a] * inv;
    if (want_H) {
        double tr = 0.0;
        for (size_t a = 0; a < k; a++) {
            for (size_t c = a; c < k; c++) {
                w->H[a * k + c] *= inv;
                w->H[c * k + a] = w->H[a * k + c];
            }
            tr += w->H[a * k + a];
        }
        double ridge = HESS_RIDGE * (tr / (double)k);
        for (size_t a = 0; a < k; a++)
            w->H[a * k + a] += ridge;
    }
    return DP_OK;
}

/* phi at x into *obj; with grad, also g and H. */
static int evaluate(ws *w, const double *x, bool grad, double *obj, dp_err *err)
{
    return pass(w, x, grad, grad, obj, err);
}

/* Cholesky of the m x m matrix M (row-major, in place, lower); false if not positive definite. */
static bool cholesky(double *M, size_t m)
{
    for (size_t i = 0; i < m; i++) {
        for (size_t j = 0; j <= i; j++) {
            double s = M[i * m + j];
            for (size_t l = 0; l < j; l++)
                s -= M[i * m + l] * M[j * m + l];
            if (i == j) {
                if (!(s > 0.0))
                    return false;
                M[i * m + i] = sqrt(s);
            } else {
                M[i * m + j] = s / M[j * m + j];
            }
        }
    }
    return true;
}

/* Solves M M^T z = r in place (r becomes z). */
static void chol_solve(const double *M, size_t m, double *r)
{
    for (size_t i = 0; i < m; i++) {
        double s = r[i];
        for (size_t l = 0; l < i; l++)
            s -= M[i * m + l] * r[l];
        r[i] = s / M[i * m + i];
    }
    for (size_t i = m; i-- > 0;) {
        double s = r[i];
        for (size_t l = i + 1; l < m; l++)
            s -= M[l * m + i] * r[l];
        r[i] = s / M[i * m + i];
    }
}

/* Primal active-set method for min_y y^T H y / 2 + c^T y subject to y >= 0, started at y (>= 0).
 * Returns the iterations used. */
static unsigned active_set(ws *w, unsigned max_it)
{
    size_t k = w->k;
    const double *H = w->H;
    double *y = w->y;
    for (size_t i = 0; i < k; i++)
        w->active[i] = !(y[i] > 0.0);
    unsigned it = 0;
    while (it < max_it) {
        it++;
        double bmax = 0.0;
        for (size_t i = 0; i < k; i++) {
            double s = w->c[i];
            for (size_t l = 0; l < k; l++)
                s += H[i * k + l] * y[l];
            w->b[i] = s;
            bmax = fmax(bmax, fabs(s));
        }
        size_t m = 0;
        for (size_t i = 0; i < k; i++)
            if (!w->active[i])
                w->idx[m++] = i;
        bool moved = false;
        if (m > 0) {
            for (size_t a = 0; a < m; a++) {
                for (size_t bb = 0; bb < m; bb++)
                    w->M[a * m + bb] = H[w->idx[a] * k + w->idx[bb]];
                w->r[a] = -w->b[w->idx[a]];
            }
            if (!cholesky(w->M, m))
                break; /* cannot happen with the ridge; keep the current feasible y */
            chol_solve(w->M, m, w->r);
            double pmax = 0.0, ymax = 0.0;
            for (size_t a = 0; a < m; a++) {
                pmax = fmax(pmax, fabs(w->r[a]));
                ymax = fmax(ymax, y[w->idx[a]]);
            }
            if (pmax > QP_TOL * fmax(1.0, ymax)) {
                double alpha = 1.0;
                size_t block = k;
                for (size_t a = 0; a < m; a++) {
                    double pa = w->r[a];
                    if (pa < 0.0) {
                        double t = -y[w->idx[a]] / pa;
                        if (t < alpha) {
                            alpha = t;
                            block = w->idx[a];
                        }
                    }
                }
                for (size_t a = 0; a < m; a++)
                    y[w->idx[a]] = fmax(0.0, y[w->idx[a]] + alpha * w->r[a]);
                if (block < k) {
                    y[block] = 0.0;
                    w->active[block] = true;
                }
                moved = true;
            }
        }
        if (moved)
            continue;
        /* stationary on the free set: release the most negative multiplier, or stop */
        size_t imin = k;
        double bmin = -QP_TOL * fmax(1.0, bmax);
        for (size_t i = 0; i < k; i++)
            if (w->active[i] && w->b[i] < bmin) {
                bmin = w->b[i];
                imin = i;
            }
        if (imin == k)
            break;
        w->active[imin] = false;
    }
    return it;
}

static void ws_free(ws *w)
{
    dp_free(w->u);
    dp_free(w->blk);
    dp_free(w->tmp);
    dp_free(w->g);
    dp_free(w->H);
    dp_free(w->xt);
    dp_free(w->y);
    dp_free(w->p);
    dp_free(w->b);
    dp_free(w->c);
    dp_free(w->M);
    dp_free(w->r);
    dp_free(w->idx);
    dp_free(w->active);
}

static double dual_residual(const double *g, size_t k)
{
    double gmin = DP_INF;
    for (size_t c = 0; c < k; c++)
        gmin = fmin(gmin, g[c]);
    return gmin < 0.0 ? -gmin : 0.0;
}

/* The SQP from x (normalised on entry, > 0 sum) on the n rows of L, or (L NULL) of rows(ctx). */
static int solve_core(size_t n, size_t k, const double *L, eb_mixsqp_rows_fn rows, void *ctx,
                      const eb_mixsqp_opts *o, double *x, eb_mixsqp_info *info, dp_err *err)
{
    ws w = {0};
    w.n = n;
    w.k = k;
    w.L = L;
    w.rows = rows;
    w.ctx = ctx;
    w.u = dp_calloc(BLOCK_ROWS, sizeof *w.u);
    w.blk = L == NULL ? dp_calloc(BLOCK_ROWS * k, sizeof *w.blk) : NULL;
    w.tmp = dp_calloc(BLOCK_ROWS * k, sizeof *w.tmp);
    w.g = dp_calloc(k, sizeof *w.g);
    w.H = dp_calloc(k * k, sizeof *w.H);
    w.xt = dp_calloc(k, sizeof *w.xt);
    w.y = dp_calloc(k, sizeof *w.y);
    w.p = dp_calloc(k, sizeof *w.p);
    w.b = dp_calloc(k, sizeof *w.b);
    w.c = dp_calloc(k, sizeof *w.c);
    w.M = dp_calloc(k * k, sizeof *w.M);
    w.r = dp_calloc(k, sizeof *w.r);
    w.idx = dp_calloc(k, sizeof *w.idx);
    w.active = dp_calloc(k, sizeof *w.active);
    int rc = DP_OK;
    if (!w.u || (L == NULL && !w.blk) || !w.tmp || !w.g || !w.H || !w.xt || !w.y || !w.p || !w.b ||
        !w.c || !w.M || !w.r || !w.idx || !w.active) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    unsigned max_active = o->max_iter_active ? o->max_iter_active : 20 + 2 * (unsigned)k;
    eb_mixsqp_info in = {0, 0, 0, DP_NAN, DP_NAN, DP_NAN, EB_STATUS_MAX_ITER};
    double f = 0.0;
    rc = evaluate(&w, x, true, &f, err);
    if (rc != DP_OK)
        goto out;
    for (;;) {
        double res = dual_residual(w.g, k);
        in.objective = f;
        in.dual_residual = res;
        if (res <= o->tol) {
            in.status = EB_STATUS_CONVERGED;
            break;
        }
        if (in.iterations >= o->max_iter)
            break;
        if (o->cancel != NULL && atomic_load(o->cancel)) { /* the caller's deadline (issue #15) */
            rc = dp_err_set(err, DP_EBUSY, NULL, "the fit was cancelled (SQP iteration %u)",
                            in.iterations + 1);
            goto out;
        }
        in.iterations++;
        /* QP in y = x + p: min y^T H y / 2 + (g - H x)^T y, y >= 0, from y = x */
        for (size_t a = 0; a < k; a++) {
            double s = w.g[a];
            for (size_t c = 0; c < k; c++)
                s -= w.H[a * k + c] * x[c];
            w.c[a] = s;
            w.y[a] = x[a];
        }
        in.active_iterations += active_set(&w, max_active);
        double dd = 0.0;
        for (size_t a = 0; a < k; a++) {
            w.p[a] = w.y[a] - x[a];
            dd += w.g[a] * w.p[a];
        }
        if (!(dd < 0.0)) { /* no descent direction left: the model's optimum is x */
            in.status = res <= STALL_TOL ? EB_STATUS_CONVERGED : EB_STATUS_MAX_ITER;
            break;
        }
        if (-dd <= ROUND_TOL * fabs(f)) {
            /* the full step's predicted decrease is at the rounding of f: no step can measurably
             * improve x, which is optimal to working precision even when the dual residual is
             * above tol (it is, when weights that should be 0 are tiny: g_k is accurate only to
             * about eps / x_k there) */
            in.status = EB_STATUS_CONVERGED;
            break;
        }
        /* backtracking line search. The full step's pass also gives the next g and H (the usual
         * case); shorter steps are tried on the objective alone, and the accepted one then pays
         * a pass for g and H. A step whose predicted decrease is below the rounding of f cannot
         * be measured: the search stops there instead of halving to LS_MIN_STEP. */
        double alpha = 1.0, ft = 0.0;
        bool ok = false, have_grad = false;
        while (alpha >= LS_MIN_STEP && -alpha * dd > DBL_EPSILON * fabs(f)) {
            for (size_t a = 0; a < k; a++)
                w.xt[a] = fmax(0.0, x[a] + alpha * w.p[a]);
            dp_err e2;
            dp_err_clear(&e2);
            have_grad = alpha == 1.0;
            int r2 = evaluate(&w, w.xt, have_grad, &ft, &e2);
            if (r2 == DP_OK && ft <= f + LS_SUFFICIENT * alpha * dd) {
                ok = true;
                break;
            }
            if (r2 != DP_OK && r2 != DP_ENUMERIC) {
                rc = dp_err_set(err, e2.code, e2.field, "%s", e2.msg);
                goto out;
            }
            alpha *= LS_REDUCE;
        }
        if (ok && !have_grad) {
            rc = evaluate(&w, w.xt, true, &ft, err);
            if (rc != DP_OK)
                goto out;
        }
        if (!ok) { /* no measurable decrease: re-evaluate at x and stop */
            rc = evaluate(&w, x, true, &f, err);
            if (rc != DP_OK)
                goto out;
            in.objective = f;
            in.dual_residual = dual_residual(w.g, k);
            in.status = in.dual_residual <= STALL_TOL ? EB_STATUS_CONVERGED : EB_STATUS_MAX_ITER;
            break;
        }
        if (!(ft < f)) { /* accepted only because the decrease is below rounding: a stall that
                            would repeat to max_iter, one pass over L each time */
            memcpy(x, w.xt, k * sizeof *x);
            in.objective = f = ft;
            in.dual_residual = dual_residual(w.g, k);
            in.status = in.dual_residual <= STALL_TOL ? EB_STATUS_CONVERGED : EB_STATUS_MAX_ITER;
            break;
        }
        memcpy(x, w.xt, k * sizeof *x);
        f = ft;
    }
    /* normalise; sum_j log(L_j x / sx) = -n (f - sx) - n log(sx), from the last pass */
    double sx = 0.0;
    for (size_t c = 0; c < k; c++)
        sx += x[c];
    for (size_t c = 0; c < k; c++)
        x[c] /= sx;
    in.sum_log = -(double)n * (in.objective - sx) - (double)n * log(sx);
    *info = in;
out:
    ws_free(&w);
    return rc;
}

/* eb_mixsqp_solve and eb_mixsqp_solve_rows: the matrix is L, or (L NULL) rows(ctx, ...). */
static int solve_src(size_t n, size_t k, const double *L, eb_mixsqp_rows_fn rows, void *ctx,
                     const eb_mixsqp_opts *o, double *x, eb_mixsqp_info *info, dp_err *err)
{
    if (n < 1 || n > EB_MAX_CLIENTS || k < 1 || k > EB_MIXSQP_MAX_K)
        return dp_err_set(err, DP_EINVAL, "mixsqp",
                          "mixsqp needs 1..%d rows and 1..%d components (got %zu x %zu)",
                          EB_MAX_CLIENTS, EB_MIXSQP_MAX_K, n, k);
    if (o->max_iter < 1 || o->max_iter > EB_MAX_ITER_CAP || !(o->tol > 0.0) || !isfinite(o->tol))
        return dp_err_set(err, DP_EINVAL, "mixsqp",
                          "mixsqp needs max_iter in [1, %d] and a finite tol > 0", EB_MAX_ITER_CAP);
    eb_blas_single_thread();
    double sx = 0.0;
    if (o->start_given) {
        for (size_t c = 0; c < k; c++) {
            if (!(x[c] >= 0.0) || !isfinite(x[c]))
                return dp_err_set(err, DP_EINVAL, "mixsqp", "a start must be finite and >= 0");
            sx += x[c];
        }
    }
    if (!(sx > 0.0))
        for (size_t c = 0; c < k; c++)
            x[c] = 1.0 / (double)k;
    else
        for (size_t c = 0; c < k; c++)
            x[c] /= sx;
    /* warm start: the same problem on every stride-th row (a few MB, in cache), then the full
     * data from its answer, where the SQP's local convergence needs few passes */
    eb_mixsqp_info sub = {0, 0, 0, DP_NAN, DP_NAN, DP_NAN, EB_STATUS_CONVERGED};
    if (n >= SUB_MIN_ROWS) {
        size_t stride = n / SUB_ROWS, ns = n / stride;
        double *Ls = dp_malloc(ns * k * sizeof *Ls);
        if (Ls == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        if (L != NULL)
            for (size_t i = 0; i < ns; i++)
                memcpy(Ls + i * k, L + i * stride * k, k * sizeof *Ls);
        else
            rows(ctx, 0, stride, ns, Ls);
        int rc = solve_core(ns, k, Ls, NULL, NULL, o, x, &sub, err);
        dp_free(Ls);
        if (rc != DP_OK)
            return rc;
    }
    eb_mixsqp_info in;
    int rc = solve_core(n, k, L, rows, ctx, o, x, &in, err);
    if (rc != DP_OK)
        return rc;
    in.warm_iterations = sub.iterations;
    in.active_iterations += sub.active_iterations;
    if (info)
        *info = in;
    return DP_OK;
}

int eb_mixsqp_solve(size_t n, size_t k, const double *L, const eb_mixsqp_opts *o, double *x,
                    eb_mixsqp_info *info, dp_err *err)
{
    return solve_src(n, k, L, NULL, NULL, o, x, info, err);
}

int eb_mixsqp_solve_rows(size_t n, size_t k, eb_mixsqp_rows_fn rows, void *ctx,
                         const eb_mixsqp_opts *o, double *x, eb_mixsqp_info *info, dp_err *err)
{
    if (rows == NULL)
        return dp_err_set(err, DP_EINVAL, "mixsqp", "mixsqp needs a row generator");
    return solve_src(n, k, NULL, rows, ctx, o, x, info, err);
}
