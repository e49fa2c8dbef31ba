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
#include <stdint.h>
#include <string.h>

#include <cblas.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "estimators/eb_simd.h"

/* openblas.h is not part of the CBLAS interface cblas.h declares on every Debian BLAS; the
 * OpenBLAS entry points the library links against. */
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);

/* Rows per chunk of a pass: the lanes of a column-major k x CH block (eight vectors of EB_VL). */
#define CH 64
#define NV (CH / EB_VL)
/* Up to this many components the Hessian is summed in one vector of lanes per pair (k (k + 1) / 2
 * vectors: 13 kB at k = 20, 323 kB at 100, 8.4 MB at 512); above, each chunk's block goes to
 * dsyrk. The lane sums were faster than dsyrk at every k measured (2x at k = 100, 1.3x at 400:
 * docs/BENCHMARKS.md, normal means). */
#define H_VEC_MAX_K 512
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
    eb_mixsqp_opts o = {1000, 0, 1e-8, false, NULL, false};
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

typedef struct ws ws;
typedef void (*u_fn)(size_t k, const double *V, const double *x, double *ut);
typedef void (*gh_fn)(ws *w, bool want_H);

struct ws {
    size_t n, k;
    const double *L;        /* the stored matrix, or NULL: rows come from rows(ctx, ...) */
    eb_mixsqp_rows_fn rows; /* fills a chunk of rows when L is NULL */
    void *ctx;              /* rows' context; borrowed */
    u_fn kern_u;            /* the chunk kernels of this CPU (eb_simd_level) */
    gh_fn kern_gh;
    void *arena;  /* one block holding V .. esum, each 64-byte aligned (whole cache lines) */
    double *V;    /* [k * CH] the chunk, column-major (lane i of row c: V[c CH + i]); R in place */
    double *ut;   /* [CH] L_j x of the chunk's rows (1 in unused lanes) */
    double *live; /* [CH] 1 for the chunk's rows, 0 for unused lanes */
    double *gacc; /* [k * EB_VL] gradient sums, lane by lane */
    double *hacc; /* [k (k + 1) / 2 * EB_VL] Hessian sums lane by lane (k <= H_VEC_MAX_K) */
    double *prod; /* [EB_VL] product of the mantissas of L_j x, lane by lane */
    long long *esum; /* [EB_VL] sum of their binary exponents */
    bool *hs;        /* [k] the Hessian's rows and columns this pass forms (the set S) */
    size_t *hidx;    /* [k] S in order, hm of them */
    size_t hm;
    bool h_all; /* S is every component (the first pass, or after a stall on a partial S) */
    bool h_all_next;
    bool support_only; /* eb_mixsqp_opts.hess_support_only */
    double *g;         /* [k] gradient of phi */
    double *H;         /* [k * k] Hessian, full */
    double *xt;        /* [k] trial point */
    double *y;         /* [k] QP solution */
    double *p;         /* [k] */
    double *b;         /* [k] QP gradient */
    double *c;         /* [k] QP linear term */
    double *M;         /* [k * k] Cholesky of H_FF */
    double *r;         /* [k] */
    size_t *idx;       /* [k] free indices */
    bool *active;      /* [k] in the working set (y_i = 0 held) */
};

/* ---- the chunk kernels: written once, compiled for each instruction set (eb_simd.h) ---- */

/* ut = (L_j x) for the CH lanes of V: a sum over the columns in column order. */
static inline __attribute__((always_inline)) void u_body(size_t k, const double *V, const double *x,
                                                         double *ut)
{
    eb_v8d u[NV];
    for (size_t v = 0; v < NV; v++)
        u[v] = EB_BC8(0.0);
    for (size_t c = 0; c < k; c++) {
        eb_v8d xc = EB_BC8(x[c]);
        const double *row = V + c * CH;
        for (size_t v = 0; v < NV; v++) {
            eb_v8d t;
            EB_LD8(t, row + v * EB_VL);
            u[v] += xc * t;
        }
    }
    for (size_t v = 0; v < NV; v++)
        EB_ST8(ut + v * EB_VL, u[v]);
}

/* The eight vectors of a chunk's column at p into v0 .. v7 (v a name prefix). */
#define LOAD_COLUMN(v, p)                                                                          \
    do {                                                                                           \
        EB_LD8(v##0, (p));                                                                         \
        EB_LD8(v##1, (p) + EB_VL);                                                                 \
        EB_LD8(v##2, (p) + 2 * EB_VL);                                                             \
        EB_LD8(v##3, (p) + 3 * EB_VL);                                                             \
        EB_LD8(v##4, (p) + 4 * EB_VL);                                                             \
        EB_LD8(v##5, (p) + 5 * EB_VL);                                                             \
        EB_LD8(v##6, (p) + 6 * EB_VL);                                                             \
        EB_LD8(v##7, (p) + 7 * EB_VL);                                                             \
    } while (0)
/* sum_v a[v] * b_v over the eight vectors, as a tree (the same order everywhere). */
#define DOT8(a, b0, b1, b2, b3, b4, b5, b6, b7)                                                    \
    (((a[0] * (b0) + a[1] * (b1)) + (a[2] * (b2) + a[3] * (b3))) +                                 \
     ((a[4] * (b4) + a[5] * (b5)) + (a[6] * (b6) + a[7] * (b7))))

/* With the chunk's ut (every live lane a positive normal value): their logs into the
 * lanes' mantissa products and exponent sums, R = V / u in place (0 in unused lanes), the gradient
 * sums sum_j R_jc, and with want_H the Hessian's sums sum_j R_ja R_jb (a <= b; lane vectors when
 * k <= H_VEC_MAX_K, else left to the caller's dsyrk on R). The log of a product of normal numbers
 * is the sum of their binary exponents (times log 2) plus the log of the product of their
 * mantissas in [1, 2), which is renormalised after every chunk: one rounding per row instead of
 * one log per row, and more accurate than a running sum of logs. */
static inline __attribute__((always_inline)) void gh_body(ws *w, bool want_H)
{
    size_t k = w->k;
    double *V = w->V;
    eb_v8d iv[NV];
    eb_v8d prod, one = EB_BC8(1.0);
    eb_v8l esum, bias = {1023, 1023, 1023, 1023, 1023, 1023, 1023, 1023};
    const eb_v8l mmask = {0xfffffffffffffLL, 0xfffffffffffffLL, 0xfffffffffffffLL,
                          0xfffffffffffffLL, 0xfffffffffffffLL, 0xfffffffffffffLL,
                          0xfffffffffffffLL, 0xfffffffffffffLL};
    eb_v8l obits;
    memcpy(&obits, &one, sizeof obits);
    EB_LD8(prod, w->prod);
    memcpy(&esum, w->esum, sizeof esum);
    for (size_t v = 0; v < NV; v++) {
        eb_v8d u, l;
        EB_LD8(u, w->ut + v * EB_VL);
        EB_LD8(l, w->live + v * EB_VL);
        iv[v] = l / u;
        eb_v8l bits;
        memcpy(&bits, &u, sizeof bits);
        esum += (bits >> 52) - bias;
        bits = (bits & mmask) | obits;
        eb_v8d m;
        memcpy(&m, &bits, sizeof m);
        prod *= m;
    }
    { /* renormalise: prod in [1, 2) times NV mantissas in [1, 2) is below 2^(NV + 1) here */
        eb_v8l bits;
        memcpy(&bits, &prod, sizeof bits);
        esum += (bits >> 52) - bias;
        bits = (bits & mmask) | obits;
        memcpy(&prod, &bits, sizeof prod);
    }
    EB_ST8(w->prod, prod);
    memcpy(w->esum, &esum, sizeof esum);
    /* R = V / u and the gradient's sums, the eight vectors of a column written out (held in
     * registers: an array indexed in a loop would live on the stack) */
    eb_v8d i0 = iv[0], i1 = iv[1], i2 = iv[2], i3 = iv[3], i4 = iv[4], i5 = iv[5], i6 = iv[6],
           i7 = iv[7];
    for (size_t c = 0; c < k; c++) {
        double *row = V + c * CH;
        eb_v8d r0, r1, r2, r3, r4, r5, r6, r7, gc;
        LOAD_COLUMN(r, row);
        r0 *= i0;
        r1 *= i1;
        r2 *= i2;
        r3 *= i3;
        r4 *= i4;
        r5 *= i5;
        r6 *= i6;
        r7 *= i7;
        EB_ST8(row, r0);
        EB_ST8(row + EB_VL, r1);
        EB_ST8(row + 2 * EB_VL, r2);
        EB_ST8(row + 3 * EB_VL, r3);
        EB_ST8(row + 4 * EB_VL, r4);
        EB_ST8(row + 5 * EB_VL, r5);
        EB_ST8(row + 6 * EB_VL, r6);
        EB_ST8(row + 7 * EB_VL, r7);
        eb_v8d t = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7));
        EB_LD8(gc, w->gacc + c * EB_VL);
        gc += t;
        EB_ST8(w->gacc + c * EB_VL, gc);
    }
    if (!want_H || w->hacc == NULL)
        return;
    /* pairs of S = hidx[0 .. m) (i <= j) at hacc + EB_VL * (i m - i (i - 1) / 2 + j - i); two rows
     * at a time share the loads of the third */
    size_t m = w->hm;
    const size_t *S = w->hidx;
    size_t i = 0;
    for (; i + 1 < m; i += 2) {
        eb_v8d ra[NV], rc[NV];
        for (size_t v = 0; v < NV; v++) {
            EB_LD8(ra[v], V + S[i] * CH + v * EB_VL);
            EB_LD8(rc[v], V + S[i + 1] * CH + v * EB_VL);
        }
        double *hp0 = w->hacc + EB_VL * (i * m - i * (i - 1) / 2);
        double *hp1 = hp0 + EB_VL * (m - i); /* row i + 1 starts at its diagonal */
        {                                    /* (i, i) */
            eb_v8d t = DOT8(ra, ra[0], ra[1], ra[2], ra[3], ra[4], ra[5], ra[6], ra[7]), h;
            EB_LD8(h, hp0);
            h += t;
            EB_ST8(hp0, h);
        }
        for (size_t j = i + 1; j < m; j++) {
            const double *rb = V + S[j] * CH;
            eb_v8d b0, b1, b2, b3, b4, b5, b6, b7, h0, h1;
            LOAD_COLUMN(b, rb);
            eb_v8d t0 = DOT8(ra, b0, b1, b2, b3, b4, b5, b6, b7);
            double *q0 = hp0 + EB_VL * (j - i);
            EB_LD8(h0, q0);
            h0 += t0;
            EB_ST8(q0, h0);
            eb_v8d t1 = DOT8(rc, b0, b1, b2, b3, b4, b5, b6, b7);
            double *q1 = hp1 + EB_VL * (j - i - 1);
            EB_LD8(h1, q1);
            h1 += t1;
            EB_ST8(q1, h1);
        }
    }
    if (i < m) { /* the last row when m is odd: (m - 1, m - 1) */
        eb_v8d ra[NV], h;
        for (size_t v = 0; v < NV; v++)
            EB_LD8(ra[v], V + S[i] * CH + v * EB_VL);
        eb_v8d t = DOT8(ra, ra[0], ra[1], ra[2], ra[3], ra[4], ra[5], ra[6], ra[7]);
        double *hp = w->hacc + EB_VL * (i * m - i * (i - 1) / 2);
        EB_LD8(h, hp);
        h += t;
        EB_ST8(hp, h);
    }
}

_Static_assert(NV == 8, "gh_body's sums are written out for eight vectors a chunk");

static void u_base(size_t k, const double *V, const double *x, double *ut)
{
    u_body(k, V, x, ut);
}

static void gh_base(ws *w, bool want_H)
{
    gh_body(w, want_H);
}

#if EB_X86_SIMD
__attribute__((target("avx2"))) static void u_avx2(size_t k, const double *V, const double *x,
                                                   double *ut)
{
    u_body(k, V, x, ut);
}

__attribute__((target("avx2"))) static void gh_avx2(ws *w, bool want_H)
{
    gh_body(w, want_H);
}

__attribute__((target("avx512f"))) static void u_avx512(size_t k, const double *V, const double *x,
                                                        double *ut)
{
    u_body(k, V, x, ut);
}

__attribute__((target("avx512f"))) static void gh_avx512(ws *w, bool want_H)
{
    gh_body(w, want_H);
}
#endif

static void pick_kernels(ws *w)
{
    w->kern_u = u_base;
    w->kern_gh = gh_base;
#if EB_X86_SIMD
    int lv = eb_simd_level();
    if (lv == EB_SIMD_AVX512) {
        w->kern_u = u_avx512;
        w->kern_gh = gh_avx512;
    } else if (lv == EB_SIMD_AVX2) {
        w->kern_u = u_avx2;
        w->kern_gh = gh_avx2;
    }
#endif
}

/* Rows b0 .. b0 + nb - 1 (nb <= CH) into the chunk w->V, column-major, lanes nb .. CH - 1 zero:
 * transposed from a stored L, or generated. */
static void load_chunk(ws *w, size_t b0, size_t nb)
{
    size_t k = w->k;
    double *V = w->V;
    if (w->L != NULL) {
        const double *Lb = w->L + b0 * k;
        for (size_t i = 0; i < nb; i++)
            for (size_t c = 0; c < k; c++)
                V[c * CH + i] = Lb[i * k + c];
    } else {
        w->rows(w->ctx, b0, 1, nb, V, CH);
    }
    if (nb < CH)
        for (size_t c = 0; c < k; c++)
            memset(V + c * CH + nb, 0, (CH - nb) * sizeof *V);
}

/* One pass over the problem's n rows, chunk by chunk (a stored or generated chunk holds the same
 * values, and the arithmetic is the same): phi at x into *obj, and with want_g the gradient into
 * w->g, with want_H the Hessian into w->H, both averaged over the rows. The sums run lane by lane
 * in a fixed order, so a pass gives the same bits whatever the instruction set.
 * DP_ENUMERIC when some L_j x is not positive. */
static int pass(ws *w, const double *x, bool want_g, bool want_H, double *obj, dp_err *err)
{
    size_t k = w->k, n = w->n;
    want_g = want_g || want_H; /* the kernel forms R, the Hessian's rows, with the gradient */
    memset(w->gacc, 0, k * EB_VL * sizeof *w->gacc);
    if (want_H && w->hacc != NULL)
        memset(w->hacc, 0, w->hm * (w->hm + 1) / 2 * EB_VL * sizeof *w->hacc);
    if (want_H)
        memset(w->H, 0, k * k * sizeof *w->H);
    for (size_t l = 0; l < EB_VL; l++) {
        w->prod[l] = 1.0;
        w->esum[l] = 0;
    }
    for (size_t b0 = 0; b0 < n; b0 += CH) {
        size_t nb = n - b0 < CH ? n - b0 : CH;
        load_chunk(w, b0, nb);
        w->kern_u(k, w->V, x, w->ut);
        for (size_t i = 0; i < nb; i++) {
            double u = w->ut[i];
            /* a subnormal L_j x would overflow 1 / L_j x, the Hessian's scale: as a zero, the
             * line search steps back from it */
            if (!(u >= DBL_MIN && u <= DBL_MAX))
                return dp_err_set(err, DP_ENUMERIC, "mixsqp",
                                  "observation %zu has zero likelihood under the mixture", b0 + i);
        }
        if (nb < CH)
            for (size_t i = nb; i < CH; i++) {
                w->ut[i] = 1.0;
                w->live[i] = 0.0;
            }
        w->kern_gh(w, want_H);
        if (nb < CH)
            for (size_t i = nb; i < CH; i++)
                w->live[i] = 1.0;
        if (want_H && w->hacc == NULL)
            cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)k, CH, 1.0, w->V, CH, 1.0,
                        w->H, (int)k);
    }
    /* sum_j log(L_j x): exponents times log 2 (in two parts: the first has 32 significant bits)
     * plus the logs of the mantissa products */
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    double s = 0.0, s_lo = 0.0;
    for (size_t l = 0; l < EB_VL; l++) {
        s += (double)w->esum[l] * ln2_hi + log(w->prod[l]);
        s_lo += (double)w->esum[l] * ln2_lo;
    }
    s += s_lo;
    double inv = 1.0 / (double)n, sx = 0.0;
    for (size_t c = 0; c < k; c++)
        sx += x[c];
    *obj = -s * inv + sx;
    if (!isfinite(*obj))
        return dp_err_set(err, DP_ENUMERIC, "mixsqp", "the mixture objective is not finite");
    if (want_g)
        for (size_t a = 0; a < k; a++) {
            const double *ga = w->gacc + a * EB_VL;
            double t = ((ga[0] + ga[1]) + (ga[2] + ga[3])) + ((ga[4] + ga[5]) + (ga[6] + ga[7]));
            w->g[a] = 1.0 - t * inv;
        }
    if (want_H) {
        if (w->hacc != NULL) { /* S x S; the rest of H stays 0 and is not used (the QP is on S) */
            const double *hp = w->hacc;
            for (size_t i = 0; i < w->hm; i++)
                for (size_t j = i; j < w->hm; j++, hp += EB_VL)
                    w->H[w->hidx[i] * k + w->hidx[j]] =
                        ((hp[0] + hp[1]) + (hp[2] + hp[3])) + ((hp[4] + hp[5]) + (hp[6] + hp[7]));
        }
        double tr = 0.0;
        for (size_t a = 0; a < k; a++) {
            for (size_t c = a; c < k; c++) {
                w->H[a * k + c] *= inv;
                w->H[c * k + a] = w->H[a * k + c];
            }
            tr += w->H[a * k + a];
        }
        double ridge = HESS_RIDGE * (tr / (double)(w->hm ? w->hm : k));
        for (size_t a = 0; a < k; a++)
            w->H[a * k + a] += ridge;
    }
    return DP_OK;
}

/* phi at x into *obj; with grad, also g and H. */
static int evaluate(ws *w, const double *x, bool grad, double *obj, dp_err *err)
{
    if (grad) { /* S: the weights > 0 at x and those the last gradient would release */
        bool all = w->h_all_next || w->hacc == NULL;
        w->h_all = all;
        w->h_all_next = false;
        w->hm = 0;
        for (size_t a = 0; a < w->k; a++) {
            w->hs[a] = all || x[a] > 0.0 || (w->g[a] < 0.0 && !w->support_only);
            if (w->hs[a])
                w->hidx[w->hm++] = a;
        }
    }
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
            if (w->active[i] && w->hs[i] && w->b[i] < bmin) {
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
    dp_free(w->arena);
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
    dp_free(w->hs);
    dp_free(w->hidx);
}

/* After a stall on a partial Hessian (w->h_all false): whether a weight outside S has a negative
 * gradient, so that the pass should be repeated on every component before giving up. */
static bool should_restart(const ws *w)
{
    if (w->h_all)
        return false;
    for (size_t a = 0; a < w->k; a++)
        if (!w->hs[a] && w->g[a] < 0.0)
            return true;
    return false;
}

static int evaluate(ws *w, const double *x, bool grad, double *obj, dp_err *err);

/* The pass at x again, on every component (a restart after a stall on a partial Hessian). */
static int restart_on_all(ws *w, const double *x, double *obj, eb_mixsqp_info *in, dp_err *err)
{
    in->restarts++;
    w->h_all_next = true;
    return evaluate(w, x, true, obj, err);
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
    pick_kernels(&w);
    /* the vector kernels' buffers, cache-line aligned: a 64-byte vector that straddles two lines
     * costs two loads */
    size_t nh = k <= H_VEC_MAX_K ? k * (k + 1) / 2 * EB_VL : 0;
    size_t sizes[7] = {k * CH, CH, CH, k * EB_VL, nh, EB_VL, EB_VL}, total = 8;
    for (size_t i = 0; i < 7; i++)
        total += (sizes[i] + 7) / 8 * 8;
    w.arena = dp_calloc(total, sizeof(double));
    if (w.arena != NULL) {
        double *base = (double *)(((uintptr_t)w.arena + 63) & ~(uintptr_t)63);
        double **dst[6] = {&w.V, &w.ut, &w.live, &w.gacc, &w.hacc, &w.prod};
        for (size_t i = 0; i < 7; i++) {
            if (i < 6)
                *dst[i] = sizes[i] ? base : NULL;
            else
                w.esum = (long long *)(void *)base;
            base += (sizes[i] + 7) / 8 * 8;
        }
    }
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
    w.hs = dp_calloc(k, sizeof *w.hs);
    w.hidx = dp_calloc(k, sizeof *w.hidx);
    w.h_all_next = true;
    w.support_only = o->hess_support_only;
    int rc = DP_OK;
    if (!w.arena || !w.g || !w.H || !w.xt || !w.y || !w.p || !w.b || !w.c || !w.M || !w.r ||
        !w.idx || !w.active || !w.hs || !w.hidx) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < CH; i++)
        w.live[i] = 1.0;
    unsigned max_active = o->max_iter_active ? o->max_iter_active : 20 + 2 * (unsigned)k;
    eb_mixsqp_info in = {0, 0, 0, DP_NAN, DP_NAN, DP_NAN, EB_STATUS_MAX_ITER, 0};
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
        bool dir_full = w.h_all; /* the direction's Hessian was on every component */
        double dd = 0.0;
        for (size_t a = 0; a < k; a++) {
            w.p[a] = w.y[a] - x[a];
            dd += w.g[a] * w.p[a];
        }
        if ((!(dd < 0.0) || -dd <= ROUND_TOL * fabs(f)) && should_restart(&w)) {
            /* no (measurable) descent on S, but a weight outside S may want to grow: once more
             * on every component */
            rc = restart_on_all(&w, x, &f, &in, err);
            if (rc != DP_OK)
                goto out;
            continue;
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
        if (!ok) { /* no measurable decrease: re-evaluate at x and stop, or, when the direction came
                      from a partial Hessian, once more with every component */
            bool retry = !dir_full; /* (w.h_all is now the trial point's) */
            rc = retry ? restart_on_all(&w, x, &f, &in, err) : evaluate(&w, x, true, &f, err);
            if (rc != DP_OK)
                goto out;
            if (retry)
                continue;
            in.objective = f;
            in.dual_residual = dual_residual(w.g, k);
            in.status = in.dual_residual <= STALL_TOL ? EB_STATUS_CONVERGED : EB_STATUS_MAX_ITER;
            break;
        }
        if (!(ft < f)) { /* accepted only because the decrease is below rounding: a stall that
                            would repeat to max_iter, one pass over L each time */
            memcpy(x, w.xt, k * sizeof *x);
            f = ft;
            if (should_restart(&w)) { /* unless a weight outside S should grow */
                rc = restart_on_all(&w, x, &f, &in, err);
                if (rc != DP_OK)
                    goto out;
                continue;
            }
            in.objective = f;
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
    eb_mixsqp_info sub = {0, 0, 0, DP_NAN, DP_NAN, DP_NAN, EB_STATUS_CONVERGED, 0};
    if (n >= SUB_MIN_ROWS) {
        size_t stride = n / SUB_ROWS, ns = n / stride;
        double *Ls = dp_malloc(ns * k * sizeof *Ls);
        if (Ls == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        if (L != NULL) {
            for (size_t i = 0; i < ns; i++)
                memcpy(Ls + i * k, L + i * stride * k, k * sizeof *Ls);
        } else { /* generated a chunk at a time, column-major, into row-major Ls */
            double *blk = dp_malloc(k * CH * sizeof *blk);
            if (blk == NULL) {
                dp_free(Ls);
                return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
            }
            for (size_t i0 = 0; i0 < ns; i0 += CH) {
                size_t nb = ns - i0 < CH ? ns - i0 : CH;
                rows(ctx, i0 * stride, stride, nb, blk, CH);
                for (size_t i = 0; i < nb; i++)
                    for (size_t c = 0; c < k; c++)
                        Ls[(i0 + i) * k + c] = blk[c * CH + i];
            }
            dp_free(blk);
        }
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
    in.restarts += sub.restarts;
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
