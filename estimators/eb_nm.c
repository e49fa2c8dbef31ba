/*
 * eb_nm.c: empirical Bayes normal means (ebnm's interface). See eb_nm.h for the model, the
 * families, the grids and the fit.
 *
 * Invariants: every prior is held as a mixture of normals (weights, means, sds with sd 0 a point
 * mass), so one likelihood builder, one log-likelihood and one posterior serve every family. The
 * likelihood matrix is built in log space and each row is divided by its largest entry before
 * exponentiation (eb_mixsqp.h), so no entry under- or overflows whatever the spread of x and s.
 * Evenly spaced point masses (npmle) are not stored: their rows are regenerated block by block on
 * every pass of the solver (even_rows, eb_mixsqp_solve_rows): about as fast on one core as reading
 * the matrix back from memory, without holding n x k doubles (160 MB for 10^6 observations and 20
 * atoms) or paying their first touch (docs/BENCHMARKS.md, normal means).
 */
#include "estimators/eb_nm.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_math.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_sf_erf.h>

#include "common/dp_alloc.h"
#include "common/dp_huge.h"
#include "common/dp_math.h"
#include "common/dp_rng.h"
#include "estimators/eb_mixsqp.h"
#include "estimators/eb_simd.h"

/* Golden-section stopping width, relative to the profiled interval: the log-likelihood is
 * quadratic at its maximum, so a parameter this close changes it by far less than 1e-12
 * relative. */
#define GOLDEN_RTOL 1e-9
/* A scale under this fraction of its search interval is reported as 0 (the boundary). */
#define SCALE_ZERO_RTOL 1e-7
/* pi0 within this of 0 or 1 is a boundary estimate. */
#define PI0_BOUNDARY 1e-8
/* even_rows: a row whose chains from the middle column would reach a value or ratio beyond
 * e^+-EVEN_LIM is computed entry by entry instead (EVEN_LIM leaves L_j x, a sum of at most
 * EB_NM_MAX_GRID such values times weights <= 1, far from overflow, and no product subnormal). */
#define EVEN_LIM   600.0
#define EVEN_LANES 64 /* lanes of even_rows' local state */

static const char *const family_names[EB_NM_N_FAMILIES] = {
    "normal", "point_normal", "normal_scale_mixture", "npmle", "point_laplace"};

const char *eb_nm_family_name(eb_nm_family f)
{
    return (unsigned)f < EB_NM_N_FAMILIES ? family_names[f] : "unknown";
}

int eb_nm_family_parse(const char *name)
{
    for (int i = 0; name != NULL && i < EB_NM_N_FAMILIES; i++)
        if (strcmp(name, family_names[i]) == 0)
            return i;
    return -1;
}

int eb_nm_data_check(const eb_nm_data *d, dp_err *err)
{
    if (d->n < 1 || d->n > EB_MAX_CLIENTS)
        return dp_err_set(err, DP_EINVAL, "x", "x must hold 1..%d observations (got %zu)",
                          EB_MAX_CLIENTS, d->n);
    if (eb_finite_and_positive(d->x, d->s, d->n))
        return DP_OK; /* the usual case, eight at a time; else the first bad one is named below */
    for (size_t j = 0; j < d->n; j++) {
        if (!isfinite(d->x[j])) {
            char f[48];
            snprintf(f, sizeof f, "x[%zu]", j);
            return dp_err_set(err, DP_EINVAL, f, "x[%zu] must be finite", j);
        }
        if (!isfinite(d->s[j]) || !(d->s[j] > 0.0)) {
            char f[48];
            snprintf(f, sizeof f, "s[%zu]", j);
            return dp_err_set(err, DP_EINVAL, f, "s[%zu] must be finite and > 0 (got %g)", j,
                              d->s[j]);
        }
    }
    return DP_OK;
}

eb_nm_opts eb_nm_opts_default(eb_nm_family family)
{
    eb_nm_opts o;
    memset(&o, 0, sizeof o);
    o.family = family;
    o.mode_fixed = true;
    o.mode = 0.0;
    o.scale_fixed = false;
    o.scale = DP_NAN;
    o.max_iter = 1000;
    o.tol = 1e-8;
    return o;
}

int eb_nm_opts_check(const eb_nm_opts *o, dp_err *err)
{
    if ((unsigned)o->family >= EB_NM_N_FAMILIES)
        return dp_err_set(err, DP_EINVAL, "prior_family", "unknown prior family");
    if (o->mode_fixed && !isfinite(o->mode))
        return dp_err_set(err, DP_EINVAL, "mode", "mode must be finite or \"estimate\"");
    if (o->scale_fixed) {
        if (o->family != EB_NM_NORMAL && o->family != EB_NM_POINT_NORMAL &&
            o->family != EB_NM_POINT_LAPLACE)
            return dp_err_set(err, DP_EINVAL, "scale",
                              "a fixed scale applies to the normal, point_normal and point_laplace "
                              "families; give the mixture families a grid");
        double lo = o->family == EB_NM_NORMAL ? 0.0 : DBL_MIN;
        if (!isfinite(o->scale) || !(o->scale >= lo))
            return dp_err_set(err, DP_EINVAL, "scale", "scale must be finite and %s (got %g)",
                              o->family == EB_NM_NORMAL ? ">= 0" : "> 0", o->scale);
    }
    if (o->grid != NULL) {
        if (o->family != EB_NM_SCALE_MIXTURE && o->family != EB_NM_NPMLE)
            return dp_err_set(err, DP_EINVAL, "grid",
                              "grid applies to normal_scale_mixture and "
                              "npmle");
        if (o->n_grid < 1 || o->n_grid > EB_NM_MAX_GRID)
            return dp_err_set(err, DP_EINVAL, "grid", "grid must hold 1..%d points (got %zu)",
                              EB_NM_MAX_GRID, o->n_grid);
        for (size_t i = 0; i < o->n_grid; i++) {
            double g = o->grid[i];
            if (!isfinite(g) || (o->family == EB_NM_SCALE_MIXTURE && g < 0.0) ||
                (i > 0 && !(g > o->grid[i - 1])))
                return dp_err_set(err, DP_EINVAL, "grid",
                                  "grid must be finite and increasing%s (point %zu is %g)",
                                  o->family == EB_NM_SCALE_MIXTURE ? ", with sds >= 0" : "", i, g);
        }
    }
    if (o->grid_size > EB_NM_MAX_GRID)
        return dp_err_set(err, DP_EINVAL, "grid_size", "grid_size must be in 1..%d (got %zu)",
                          EB_NM_MAX_GRID, o->grid_size);
    if (o->grid_mult != 0.0 && !(o->grid_mult > 1.0 && isfinite(o->grid_mult)))
        return dp_err_set(err, DP_EINVAL, "grid_mult", "grid_mult must be > 1 (got %g)",
                          o->grid_mult);
    if (o->max_iter < 1 || o->max_iter > EB_MAX_ITER_CAP)
        return dp_err_set(err, DP_EINVAL, "max_iter", "max_iter must be in [1, %d] (got %u)",
                          EB_MAX_ITER_CAP, o->max_iter);
    if (!(o->tol > 0.0) || !isfinite(o->tol))
        return dp_err_set(err, DP_EINVAL, "tol", "tol must be finite and > 0 (got %g)", o->tol);
    return DP_OK;
}

void eb_nm_fit_free(eb_nm_fit *fit)
{
    if (fit == NULL)
        return;
    dp_free(fit->w);
    dp_free(fit->mean);
    dp_free(fit->sd);
    memset(fit, 0, sizeof *fit);
}

/* log N(x; m, v) */
static double log_npdf(double x, double m, double v)
{
    double z = x - m;
    return -0.5 * (log(2.0 * M_PI * v) + z * z / v);
}

/* log Phi(t), accurate in both tails (GSL's log erfc). */
static double log_Phi(double t)
{
    gsl_sf_result r;
    if (gsl_sf_log_erfc_e(-t / M_SQRT2, &r) != GSL_SUCCESS)
        return t < 0.0 ? -DP_INF : 0.0;
    return r.val - M_LN2;
}

/* The two halves of the Laplace(0, b) * N(0, s^2) convolution at z, as logs: lp (theta > 0) and ln
 * (theta < 0), each including -log(2b) + s^2/2b^2; the density is e^lp + e^ln (eb_nm.h). */
static void laplace_halves(double z, double s, double b, double *lp, double *ln)
{
    double c = -log(2.0 * b) + 0.5 * (s / b) * (s / b);
    *lp = c - z / b + log_Phi(z / s - s / b);
    *ln = c + z / b + log_Phi(-z / s - s / b);
}

/* log of the Laplace(m, b) * N(0, s^2) density at x. */
static double log_laplace_conv(double x, double m, double s, double b)
{
    double lp, ln;
    laplace_halves(x - m, s, b, &lp, &ln);
    double mx = fmax(lp, ln);
    return mx + log1p(exp(fmin(lp, ln) - mx));
}

/* log of component c's marginal density at x with standard error s. */
static double log_comp(const eb_nm_fit *f, size_t c, double x, double s)
{
    if (f->family == EB_NM_POINT_LAPLACE && c == 1)
        return log_laplace_conv(x, f->mean[c], s, f->sd[c]);
    return log_npdf(x, f->mean[c], s * s + f->sd[c] * f->sd[c]);
}

double eb_nm_loglik(const eb_nm_data *d, const eb_nm_fit *fit)
{
    double s = 0.0;
    for (size_t j = 0; j < d->n; j++) {
        double mx = -DP_INF, acc = 0.0;
        for (size_t c = 0; c < fit->k; c++) {
            if (!(fit->w[c] > 0.0))
                continue;
            double l = log(fit->w[c]) + log_comp(fit, c, d->x[j], d->s[j]);
            if (l > mx) {
                acc = acc * exp(mx - l) + 1.0;
                mx = l;
            } else {
                acc += exp(l - mx);
            }
        }
        s += mx + log(acc);
    }
    return s;
}

/* The caller's cancel flag (eb_nm_opts.cancel, eb_nm_post.cancel) is set. */
static bool nm_cancelled(const atomic_bool *cancel)
{
    return cancel != NULL && atomic_load(cancel);
}

/* ---- the weights of a fixed set of components ---- */

/* Work space of one fit: the likelihood matrix and its row maxima. */
typedef struct nm_ws {
    const eb_nm_data *d;
    const eb_nm_opts *o;
    size_t k;
    double *mean, *sd; /* [k] components (the family's layout) */
    bool laplace;      /* component 1 is Laplace(mean[1], sd[1]) (point_laplace) */
    double *w;         /* [k] weights: warm start in, answer out */
    double *L;         /* [n * k], on first use; never for an even grid (solve_weights) */
    double *rowmax;    /* [n], with L */
    /* an even grid's rows (even_seed, even_rows): per row its first ratio and q, or NaN and its
     * values in the fallback table */
    double *seed;    /* [3n] r_m, then q, then v_m (0 for a fallback row) */
    size_t nfb;      /* fallback rows */
    size_t *fb_row;  /* [nfb] their indices, ascending */
    size_t *fb_lo;   /* [nfb] the first column of each one's run of entries */
    size_t *fb_off;  /* [nfb + 1] where each one's run starts in fb_val */
    double *fb_val;  /* the runs */
    size_t cm;       /* the middle column, where every fast row is 1 */
    double seed_sum; /* sum over the rows of the log of the factor each was divided by */
    unsigned iterations, evaluations;
    eb_status last;  /* the solver's status at the last weights solved (the answer's) */
    eb_status worst; /* boundary flags of the answer */
    dp_err *err;
    int rc; /* first failure of a profiled evaluation */
} nm_ws;

/* count doubles, uninitialised: on huge pages from 8 MB (common/dp_huge.h; the likelihood matrix of
 * 10^6 observations is 160 MB, whose first touch in 4 kB pages took longer than the whole solve).
 * Free with dp_free. */
static double *big_alloc(size_t count)
{
    if (count > SIZE_MAX / sizeof(double))
        return NULL;
    return dp_huge_alloc(count * sizeof(double));
}

/* Whether the components are k >= 3 evenly spaced point masses (the npmle default grid); *h the
 * spacing. */
static bool even_grid(const nm_ws *ws, double *h)
{
    size_t k = ws->k;
    bool even = k >= 3;
    *h = k >= 2 ? ws->mean[1] - ws->mean[0] : 0.0;
    for (size_t c = 0; even && c < k; c++)
        even = ws->sd[c] == 0.0 &&
               (c == 0 || fabs((ws->mean[c] - ws->mean[c - 1]) - *h) <= 1e-12 * fabs(*h));
    return even;
}

/* The rows of the likelihood matrix for evenly spaced point masses a_c = a_m + (c - m) h (m the
 * middle column ws->cm, h the spacing), each divided by its largest entry (eb_mixsqp.h's contract:
 * the largest is 1, so the objective's scale, and with it the solver's rounding test, is that of
 * a matrix built entry by entry). With e = c - m and v = s^2 the log of entry c over entry m is
 * L(e) = e z h / v - e^2 h^2 / 2v (z = x - a_m), largest at the nearest atom e* (z / h rounded and
 * clamped to the grid). The ratio of neighbouring columns is exp(-(x - a_{c+1})^2/2v + (x -
 * a_c)^2/2v) = exp((x - a_c) h / v - h^2/2v) = r_c, with r_{c+1} = r_c q, q = exp(-h^2/v): from
 * column m, whose entry is v_m = exp(-L(e*)), upward L_{c+1} = L_c r_c starting at r_m =
 * exp(z h / v - h^2/2v), and downward L_{c-1} = L_c d_c starting at d_m = exp(-z h / v - h^2/2v)
 * = q / r_m with d_{c-1} = d_c q. A row is three exponentials computed once per fit (even_seed:
 * r_m, q and v_m per row, 24 bytes) and k products every time it is generated; at most (k/2)^2
 * roundings separate an entry from its exact value (3e-13 relative at k = 100, 8e-12 at 1000).
 * Values are unimodal in c, so an entry under DBL_MIN is flushed to 0 and the chain stays 0 from
 * there, as the true values only fall further. Because every row is anchored at the same column,
 * the rows of a chunk are lanes of one vector loop (eb_simd.h). The log-likelihood adds back each
 * row's factor, log N(x; a_e*, v), from ws->seed_sum.
 *
 * A row whose ratios would leave [e^-EVEN_LIM, e^EVEN_LIM], or whose v_m would fall under
 * e^-EVEN_LIM (s tiny against the spacing, or x far beyond the grid: a few entries are nonzero),
 * is computed entry by entry, divided by its largest entry, and kept sparsely: its run of entries
 * not under DBL_MIN (ws->fb_*; its v_m is 0 and its chains give zeros). */
/* even_seed's arithmetic for EVEN_LANES rows (x, s padded to whole vectors): lr, lq, lv the logs of
 * r_m, q and v_m, 0 where the row is not fast; fast the mask (-1 or 0) of rows whose chains stay
 * within e^+-EVEN_LIM; quad (lane sums) += (x - a_m)^2 / 2v - L(e*) over fast rows; s's binary
 * exponents into esum and its mantissas into mprod (lane by lane, renormalised: a lane multiplies
 * EVEN_LANES / EB_VL mantissas in [1, 2) before). */
typedef struct seed_arg {
    const double *x, *s;
    double am, h, e_lo, e_hi;
    double *lr, *lq, *lv, *quad, *mprod;
    long long *fast, *esum;
} seed_arg;

#define AS_L(v)      ((eb_v8l)(v)) /* a vector's bits */
#define AS_D(v)      ((eb_v8d)(v))
#define SEL(m, a, b) AS_D((AS_L(a) & (m)) | (AS_L(b) & ~(m))) /* m ? a : b, lane by lane */

static inline __attribute__((always_inline)) void seed_body(const seed_arg *a)
{
    const eb_v8d am = EB_BC8(a->am), h = EB_BC8(a->h), one = EB_BC8(1.0), half = EB_BC8(0.5),
                 lo = EB_BC8(a->e_lo), hi = EB_BC8(a->e_hi), lim = EB_BC8(EVEN_LIM),
                 nlim = EB_BC8(-EVEN_LIM), e_hi1 = EB_BC8(a->e_hi - 1.0),
                 e_lo1 = EB_BC8(-a->e_lo - 1.0), shift = EB_BC8(6755399441055744.0),
                 zero = EB_BC8(0.0);
    const eb_v8l bias = {1023, 1023, 1023, 1023, 1023, 1023, 1023, 1023},
                 mmask = {0xfffffffffffffLL, 0xfffffffffffffLL, 0xfffffffffffffLL,
                          0xfffffffffffffLL, 0xfffffffffffffLL, 0xfffffffffffffLL,
                          0xfffffffffffffLL, 0xfffffffffffffLL};
    eb_v8l obits = AS_L(one), esum;
    eb_v8d quad, mprod;
    EB_LD8(quad, a->quad);
    EB_LD8(mprod, a->mprod);
    memcpy(&esum, a->esum, sizeof esum);
    for (size_t i = 0; i < EVEN_LANES; i += EB_VL) {
        eb_v8d x, sv;
        EB_LD8(x, a->x + i);
        EB_LD8(sv, a->s + i);
        eb_v8d iv = one / (sv * sv), z = x - am, hh = h * h * iv;
        eb_v8d q_ = -hh, zhi = z * h * iv, r_ = zhi - half * hh, d_ = q_ - r_;
        /* e* = z / h rounded (by adding and subtracting 1.5 2^52), clamped to [e_lo, e_hi] */
        eb_v8d t = z / h;
        eb_v8l big = (t > hi) | (t < lo); /* also where |t| is beyond the rounding's range */
        eb_v8d es = (t + shift) - shift;
        es = SEL(big, SEL(t > hi, hi, lo), es);
        es = SEL(es > hi, hi, SEL(es < lo, lo, es));
        eb_v8d l_star = es * zhi - half * es * es * hh;
        eb_v8d r_top = r_ + e_hi1 * q_, d_top = d_ + e_lo1 * q_;
        eb_v8l f = (l_star < lim) & (q_ > nlim) & (r_ < lim) & (r_ > nlim) & (d_ < lim) &
                   (d_ > nlim) & (r_top < lim) & (r_top > nlim) & (d_top < lim) & (d_top > nlim);
        quad += SEL(f, half * z * z * iv - l_star, zero);
        eb_v8d o;
        o = SEL(f, r_, zero);
        EB_ST8(a->lr + i, o);
        o = SEL(f, q_, zero);
        EB_ST8(a->lq + i, o);
        o = SEL(f, -l_star, zero);
        EB_ST8(a->lv + i, o);
        memcpy(a->fast + i, &f, sizeof f);
        eb_v8l b = AS_L(sv); /* s = mantissa * 2^e */
        esum += (b >> 52) - bias;
        b = (b & mmask) | obits;
        mprod *= AS_D(b);
    }
    eb_v8l b = AS_L(mprod);
    esum += (b >> 52) - bias;
    b = (b & mmask) | obits;
    mprod = AS_D(b);
    EB_ST8(a->quad, quad);
    EB_ST8(a->mprod, mprod);
    memcpy(a->esum, &esum, sizeof esum);
}

static void seed_base(const seed_arg *a)
{
    seed_body(a);
}

#if EB_X86_SIMD
__attribute__((target("avx2"))) static void seed_avx2(const seed_arg *a)
{
    seed_body(a);
}

__attribute__((target("avx512f"))) static void seed_avx512(const seed_arg *a)
{
    seed_body(a);
}
#endif

/* Appends row j, entry by entry (divided by its largest, the run of entries not under DBL_MIN),
 * to the fallback table; returns its log factor, log N(x; a_top, v) less -log(2 pi v) / 2, or NaN
 * when out of memory. */
static double fallback_row(nm_ws *ws, size_t j, size_t *cap_rows, size_t *cap_vals)
{
    const eb_nm_data *d = ws->d;
    size_t k = ws->k;
    double x = d->x[j], iv = 1.0 / (d->s[j] * d->s[j]), mx = -DP_INF;
    for (size_t c = 0; c < k; c++) {
        double zc = x - ws->mean[c];
        mx = fmax(mx, -0.5 * zc * zc * iv);
    }
    size_t c_lo = k, c_hi = 0;
    for (size_t c = 0; c < k; c++) {
        double zc = x - ws->mean[c];
        if (exp(-0.5 * zc * zc * iv - mx) >= DBL_MIN) {
            c_lo = c < c_lo ? c : c_lo;
            c_hi = c + 1;
        }
    }
    if (c_hi <= c_lo) /* no entry at all (s so small that s^2 underflows): a row of zeros, which
                         the solver answers as an observation of zero likelihood */
        c_lo = c_hi = 0;
    size_t nv = ws->nfb ? ws->fb_off[ws->nfb] : 0, len = c_hi - c_lo;
    if (ws->nfb + 1 >= *cap_rows) {
        size_t nc = *cap_rows ? 2 * *cap_rows : 64;
        size_t *r = dp_realloc(ws->fb_row, nc * sizeof *r);
        if (r == NULL)
            return DP_NAN;
        ws->fb_row = r;
        size_t *o = dp_realloc(ws->fb_off, (nc + 1) * sizeof *o);
        if (o == NULL)
            return DP_NAN;
        ws->fb_off = o;
        size_t *l = dp_realloc(ws->fb_lo, nc * sizeof *l);
        if (l == NULL)
            return DP_NAN;
        ws->fb_lo = l;
        *cap_rows = nc;
    }
    if (nv + len > *cap_vals) {
        size_t nc = *cap_vals ? 2 * *cap_vals : 64 * k;
        while (nc < nv + len)
            nc *= 2;
        double *v = dp_realloc(ws->fb_val, nc * sizeof *v);
        if (v == NULL)
            return DP_NAN;
        ws->fb_val = v;
        *cap_vals = nc;
    }
    if (ws->nfb == 0)
        ws->fb_off[0] = 0;
    for (size_t c = c_lo; c < c_hi; c++) {
        double zc = x - ws->mean[c], e = exp(-0.5 * zc * zc * iv - mx);
        ws->fb_val[nv + c - c_lo] = e >= DBL_MIN ? e : 0.0;
    }
    ws->fb_row[ws->nfb] = j;
    ws->fb_lo[ws->nfb] = c_lo;
    ws->fb_off[ws->nfb + 1] = nv + len;
    ws->nfb++;
    return mx;
}

static bool even_seed(nm_ws *ws, double h)
{
    const eb_nm_data *d = ws->d;
    size_t n = d->n, k = ws->k, cm = (k - 1) / 2;
    ws->cm = cm;
    dp_free(ws->seed);
    dp_free(ws->fb_row);
    dp_free(ws->fb_off);
    dp_free(ws->fb_lo);
    dp_free(ws->fb_val);
    ws->fb_row = ws->fb_off = ws->fb_lo = NULL;
    ws->fb_val = NULL;
    ws->nfb = 0;
    ws->seed = big_alloc(3 * n);
    if (ws->seed == NULL)
        goto oom;
    void (*seed)(const seed_arg *) = seed_base;
#if EB_X86_SIMD
    int lvl = eb_simd_level();
    if (lvl == EB_SIMD_AVX512)
        seed = seed_avx512;
    else if (lvl == EB_SIMD_AVX2)
        seed = seed_avx2;
#endif
    double *seed_r = ws->seed, *seed_q = ws->seed + n, *seed_v = ws->seed + 2 * n;
    /* sum_j log N(x_j; a_top, v_j) = -n log(2 pi) / 2 - sum_j log s_j - sum_j (x_j - a_top)^2 /
     * 2v_j, the log s_j summed as binary exponents plus the log of products of mantissas (no log
     * per row) */
    _Alignas(64) double lr[EVEN_LANES], lq[EVEN_LANES], lv[EVEN_LANES], px[EVEN_LANES],
        ps[EVEN_LANES];
    _Alignas(64) double quad[EB_VL] = {0}, mprod[EB_VL] = {1, 1, 1, 1, 1, 1, 1, 1};
    _Alignas(64) long long fast[EVEN_LANES], esum[EB_VL] = {0};
    seed_arg sa = {NULL, NULL, ws->mean[cm], h,    -(double)cm, (double)(k - 1 - cm), lr, lq,
                   lv,   quad, mprod,        fast, esum};
    double quad_fb = 0.0; /* the rows computed entry by entry: their log factor */
    size_t cap_rows = 0, cap_vals = 0;
    for (size_t j0 = 0; j0 < n; j0 += EVEN_LANES) {
        if (j0 % EB_NM_CANCEL_ROWS < EVEN_LANES && nm_cancelled(ws->o->cancel))
            return false;
        size_t m = n - j0 < EVEN_LANES ? n - j0 : EVEN_LANES;
        if (m == EVEN_LANES) {
            sa.x = d->x + j0;
            sa.s = d->s + j0;
        } else { /* the last rows, padded with rows of no weight: s = 1 adds nothing to sum log s */
            for (size_t i = 0; i < EVEN_LANES; i++) {
                px[i] = i < m ? d->x[j0 + i] : sa.am;
                ps[i] = i < m ? d->s[j0 + i] : 1.0;
            }
            sa.x = px;
            sa.s = ps;
        }
        seed(&sa);
        size_t nl = (m + EB_VL - 1) / EB_VL * EB_VL;
        eb_exp_n(lr, lr, nl);
        eb_exp_n(lq, lq, nl);
        eb_exp_n(lv, lv, nl);
        for (size_t i = 0; i < m; i++) {
            if (fast[i])
                continue;
            double mx = fallback_row(ws, j0 + i, &cap_rows, &cap_vals);
            if (isnan(mx))
                goto oom;
            quad_fb -= mx;
            lr[i] = lq[i] = 1.0; /* its chains: zeros from v_m = 0 */
            lv[i] = 0.0;
        }
        memcpy(seed_r + j0, lr, m * sizeof *lr);
        memcpy(seed_q + j0, lq, m * sizeof *lq);
        memcpy(seed_v + j0, lv, m * sizeof *lv);
    }
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    double sum_log_s = 0.0, sum_quad = quad_fb, es = 0.0;
    for (size_t l = 0; l < EB_VL; l++) {
        sum_log_s += (double)esum[l] * ln2_hi + log(mprod[l]);
        es += (double)esum[l] * ln2_lo;
        sum_quad += quad[l];
    }
    ws->seed_sum = -0.5 * (double)n * log(2.0 * M_PI) - (sum_log_s + es) - sum_quad;
    return true;
oom:
    ws->rc = dp_err_set(ws->err, DP_ENOMEM, NULL, "out of memory");
    return false;
}

/* The chains of even_rows for nl lanes (a multiple of EB_VL) from the lanes' r_m, q and v_m:
 * values under DBL_MIN flushed to 0 (no subnormal is ever formed or multiplied again). Every lane
 * is on its own, so the body is written for a vector of W doubles (VD, with VL its mask type) and
 * compiled at the width of each instruction set (8 for AVX-512, 4 for AVX2, 2 for the baseline's
 * SSE2): the same operations on each lane whatever W, hence the same bits. (A vector wider than
 * the target's registers, which GCC splits, ran 4x slower here.) */
typedef double nm_v4d __attribute__((vector_size(4 * sizeof(double))));
typedef long long nm_v4l __attribute__((vector_size(4 * sizeof(long long))));
typedef double nm_v2d __attribute__((vector_size(2 * sizeof(double))));
typedef long long nm_v2l __attribute__((vector_size(2 * sizeof(long long))));

#define CHAINS_BODY(VD, VL, W)                                                                     \
    do {                                                                                           \
        VD tiny;                                                                                   \
        for (int l_ = 0; l_ < (W); l_++)                                                           \
            tiny[l_] = DBL_MIN;                                                                    \
        for (size_t i = 0; i < nl; i += (W)) {                                                     \
            VD ru, dq, qq, v, v0;                                                                  \
            memcpy(&ru, r + i, sizeof ru);                                                         \
            memcpy(&qq, q + i, sizeof qq);                                                         \
            memcpy(&v0, vm + i, sizeof v0);                                                        \
            dq = qq / ru;                                                                          \
            memcpy(out + cm * ld + i, &v0, sizeof v0);                                             \
            v = v0;                                                                                \
            for (size_t c = cm + 1; c < k; c++) {                                                  \
                v *= ru;                                                                           \
                v = (VD)((VL)v & (VL)(v >= tiny));                                                 \
                memcpy(out + c * ld + i, &v, sizeof v);                                            \
                ru *= qq;                                                                          \
            }                                                                                      \
            v = v0;                                                                                \
            for (size_t c = cm; c-- > 0;) {                                                        \
                v *= dq;                                                                           \
                v = (VD)((VL)v & (VL)(v >= tiny));                                                 \
                memcpy(out + c * ld + i, &v, sizeof v);                                            \
                dq *= qq;                                                                          \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static void chains_base(size_t k, size_t cm, size_t nl, const double *r, const double *q,
                        const double *vm, double *out, size_t ld)
{
    CHAINS_BODY(nm_v2d, nm_v2l, 2);
}

#if EB_X86_SIMD
__attribute__((target("avx2"))) static void chains_avx2(size_t k, size_t cm, size_t nl,
                                                        const double *r, const double *q,
                                                        const double *vm, double *out, size_t ld)
{
    CHAINS_BODY(nm_v4d, nm_v4l, 4);
}

__attribute__((target("avx512f"))) static void chains_avx512(size_t k, size_t cm, size_t nl,
                                                             const double *r, const double *q,
                                                             const double *vm, double *out,
                                                             size_t ld)
{
    CHAINS_BODY(eb_v8d, eb_v8l, 8);
}
#endif

/* Rows j0, j0 + stride, ... (nb of them) of the even grid's matrix (see even_seed), column-major
 * into out with leading dimension ld (eb_mixsqp_rows_fn). */
static void even_rows(void *vctx, size_t j0, size_t stride, size_t nb, double *out, size_t ld)
{
    nm_ws *ws = vctx;
    size_t k = ws->k, n = ws->d->n;
    void (*chains)(size_t, size_t, size_t, const double *, const double *, const double *, double *,
                   size_t) = chains_base;
#if EB_X86_SIMD
    int lvl = eb_simd_level();
    if (lvl == EB_SIMD_AVX512)
        chains = chains_avx512;
    else if (lvl == EB_SIMD_AVX2)
        chains = chains_avx2;
#endif
    const double *seed_r = ws->seed, *seed_q = ws->seed + n, *seed_v = ws->seed + 2 * n;
    size_t direct = 0; /* lanes read in place: consecutive rows, whole vectors */
    if (stride == 1) {
        direct = nb / EB_VL * EB_VL;
        chains(k, ws->cm, direct, seed_r + j0, seed_q + j0, seed_v + j0, out, ld);
    }
    _Alignas(64) double r[EVEN_LANES], q[EVEN_LANES], v[EVEN_LANES];
    for (size_t i0 = direct; i0 < nb; i0 += EVEN_LANES) {
        size_t m = nb - i0 < EVEN_LANES ? nb - i0 : EVEN_LANES;
        size_t nl = (m + EB_VL - 1) / EB_VL * EB_VL;
        for (size_t i = 0; i < nl; i++) {
            size_t j = j0 + (i0 + i) * stride;
            r[i] = i < m ? seed_r[j] : 1.0;
            q[i] = i < m ? seed_q[j] : 1.0;
            v[i] = i < m ? seed_v[j] : 0.0;
        }
        chains(k, ws->cm, nl, r, q, v, out + i0, ld);
    }
    if (ws->nfb == 0)
        return;
    /* rows computed entry by entry (zeros from the chains): their runs from the table, which is in
     * row order */
    size_t lo = 0, hi = ws->nfb, last = j0 + (nb - 1) * stride;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ws->fb_row[mid] < j0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t f = lo; f < ws->nfb && ws->fb_row[f] <= last; f++) {
        size_t j = ws->fb_row[f];
        if ((j - j0) % stride != 0)
            continue;
        size_t i = (j - j0) / stride, c0 = ws->fb_lo[f];
        for (size_t e = ws->fb_off[f]; e < ws->fb_off[f + 1]; e++)
            out[(c0 + e - ws->fb_off[f]) * ld + i] = ws->fb_val[e];
    }
}

/* Builds L (row-scaled) and rowmax for the current components, one exponential per entry (an even
 * grid of point masses is not stored: see solve_weights). */
static bool build_L(nm_ws *ws)
{
    const eb_nm_data *d = ws->d;
    size_t k = ws->k;
    for (size_t j = 0; j < d->n; j++) {
        if (j % EB_NM_CANCEL_ROWS == 0 && nm_cancelled(ws->o->cancel))
            return false;
        double *row = ws->L + j * k, s2 = d->s[j] * d->s[j], x = d->x[j];
        double mx = -DP_INF;
        for (size_t c = 0; c < k; c++) {
            row[c] = ws->laplace && c == 1 ? log_laplace_conv(x, ws->mean[c], d->s[j], ws->sd[c])
                                           : log_npdf(x, ws->mean[c], s2 + ws->sd[c] * ws->sd[c]);
            mx = fmax(mx, row[c]);
        }
        ws->rowmax[j] = mx;
        for (size_t c = 0; c < k; c++)
            row[c] = exp(row[c] - mx);
    }
    return true;
}

/* The fit was cancelled (ws->o->cancel): recorded once in ws->rc, so that every later profile
 * point returns at once. */
static double nm_cancel(nm_ws *ws)
{
    if (ws->rc == DP_OK)
        ws->rc = dp_err_set(ws->err, DP_EBUSY, NULL, "the fit was cancelled (profile point %u)",
                            ws->evaluations);
    return -DP_INF;
}

/* Solves the weights of the current components (warm start from ws->w) and returns the
 * log-likelihood; on failure (or cancel) records ws->rc and returns -inf. */
static double solve_weights(nm_ws *ws)
{
    if (ws->rc != DP_OK)
        return -DP_INF;
    ws->evaluations++;
    if (nm_cancelled(ws->o->cancel))
        return nm_cancel(ws);
    const eb_nm_data *d = ws->d;
    double h;
    /* evenly spaced atoms: the matrix is not stored; mixsqp regenerates its rows a chunk at a time
     * on every pass (even_rows: k products a row from three exponentials computed once, even_seed),
     * the answer equal to the one on a matrix built entry by entry to rounding (tests) */
    bool gen = ws->k >= 3 && even_grid(ws, &h);
    if (gen && !even_seed(ws, h))
        return ws->rc != DP_OK ? -DP_INF : nm_cancel(ws);
    if (!gen && ws->L == NULL) {
        ws->L = big_alloc(d->n * ws->k);
        ws->rowmax = dp_calloc(d->n, sizeof *ws->rowmax);
        if (ws->L == NULL || ws->rowmax == NULL) {
            ws->rc = dp_err_set(ws->err, DP_ENOMEM, NULL, "out of memory");
            return -DP_INF;
        }
    }
    if (!gen && !build_L(ws))
        return nm_cancel(ws);
    if (ws->k == 1) {
        ws->w[0] = 1.0;
        ws->last = EB_STATUS_CONVERGED;
        return eb_mixsqp_loglik(d->n, 1, ws->L, ws->rowmax, ws->w);
    }
    eb_mixsqp_opts mo = eb_mixsqp_opts_default();
    mo.max_iter = ws->o->max_iter;
    mo.tol = ws->o->tol;
    mo.start_given = true;
    mo.cancel = ws->o->cancel;
    eb_mixsqp_info info;
    int rc = gen ? eb_mixsqp_solve_rows(d->n, ws->k, even_rows, ws, &mo, ws->w, &info, ws->err)
                 : eb_mixsqp_solve(d->n, ws->k, ws->L, &mo, ws->w, &info, ws->err);
    if (rc != DP_OK) {
        ws->rc = rc;
        return -DP_INF;
    }
    ws->iterations += info.iterations + info.warm_iterations;
    ws->last = info.status;
    if (gen) /* the log-likelihood: the rows' factors back, plus mixsqp's last pass */
        return ws->seed_sum + info.sum_log;
    double srm = 0.0;
    for (size_t j = 0; j < d->n; j++)
        srm += ws->rowmax[j];
    return srm + info.sum_log;
}

/* ---- one-dimensional profiles ---- */

typedef double (*profile_fn)(void *ctx, double u);

/* Maximises f on [lo, hi]: EB_NM_SCAN evenly spaced points, then golden-section search on the
 * bracket around the best one, to GOLDEN_RTOL of the interval. *u_best, returns f there. */
static double maximize_1d(profile_fn f, void *ctx, double lo, double hi, double *u_best)
{
    double best_u = lo, best = -DP_INF;
    size_t best_i = 0;
    for (size_t i = 0; i < EB_NM_SCAN; i++) {
        double u = lo + (hi - lo) * (double)i / (double)(EB_NM_SCAN - 1);
        double v = f(ctx, u);
        if (v > best) {
            best = v;
            best_u = u;
            best_i = i;
        }
    }
    double step = (hi - lo) / (double)(EB_NM_SCAN - 1);
    double a = best_i > 0 ? best_u - step : best_u,
           b = best_i + 1 < EB_NM_SCAN ? best_u + step : best_u;
    const double gr = 0.6180339887498949; /* (sqrt(5) - 1) / 2 */
    double c = b - gr * (b - a), e = a + gr * (b - a);
    double fc = f(ctx, c), fe = f(ctx, e);
    while (b - a > GOLDEN_RTOL * (hi - lo)) {
        if (fc >= fe) {
            b = e;
            e = c;
            fe = fc;
            c = b - gr * (b - a);
            fc = f(ctx, c);
        } else {
            a = c;
            c = e;
            fc = fe;
            e = a + gr * (b - a);
            fe = f(ctx, e);
        }
    }
    double u = fc >= fe ? c : e, fu = fmax(fc, fe);
    if (fu >= best) {
        best = fu;
        best_u = u;
    }
    /* the ends of the interval: the scan met them, but golden search may stop just inside */
    *u_best = best_u;
    return best;
}

/* Normal family: profile over the prior sd t in [0, hi]; the mode is fixed or, given t, the
 * precision-weighted mean. */
typedef struct normal_ctx {
    const eb_nm_data *d;
    const eb_nm_opts *o;
    double mode; /* the mode at the last evaluation */
} normal_ctx;

static double normal_mode(const eb_nm_data *d, double t2)
{
    double sw = 0.0, swx = 0.0;
    for (size_t j = 0; j < d->n; j++) {
        double w = 1.0 / (d->s[j] * d->s[j] + t2);
        sw += w;
        swx += w * d->x[j];
    }
    return swx / sw;
}

static double normal_profile(void *vctx, double t)
{
    normal_ctx *c = vctx;
    if (nm_cancelled(c->o->cancel))
        return -DP_INF; /* eb_nm_fit_prior reports it */
    double t2 = t * t;
    double mu = c->o->mode_fixed ? c->o->mode : normal_mode(c->d, t2);
    c->mode = mu;
    double s = 0.0;
    for (size_t j = 0; j < c->d->n; j++)
        s += log_npdf(c->d->x[j], mu, c->d->s[j] * c->d->s[j] + t2);
    return s;
}

static void data_range(const eb_nm_data *d, double *xmin, double *xmax, double *smin, double *smax)
{
    *xmin = *xmax = d->x[0];
    *smin = *smax = d->s[0];
    for (size_t j = 1; j < d->n; j++) {
        double x = d->x[j], s = d->s[j]; /* finite (eb_nm_data_check): no NaN to order */
        *xmin = x < *xmin ? x : *xmin;
        *xmax = x > *xmax ? x : *xmax;
        *smin = s < *smin ? s : *smin;
        *smax = s > *smax ? s : *smax;
    }
}

/* Point-normal: the scale profile (log sd) at a mode, weights (pi0, 1 - pi0) by mixsqp. */
typedef struct pn_ctx {
    nm_ws *ws;
    double lo, hi; /* log-sd interval */
} pn_ctx;

static double pn_scale_profile(void *vctx, double u)
{
    pn_ctx *c = vctx;
    c->ws->sd[1] = exp(u);
    return solve_weights(c->ws);
}

/* The log-likelihood at the current mode (ws->mean[*]) with the scale fixed or profiled; leaves
 * the best scale in ws->sd[1] and its weights in ws->w. */
static double pn_at_mode(pn_ctx *c)
{
    if (c->ws->o->scale_fixed) {
        c->ws->sd[1] = c->ws->o->scale;
        return solve_weights(c->ws);
    }
    double u;
    maximize_1d(pn_scale_profile, c, c->lo, c->hi, &u);
    c->ws->sd[1] = exp(u);
    return solve_weights(c->ws); /* at the best scale: weights and L consistent */
}

static double pn_mode_profile(void *vctx, double m)
{
    pn_ctx *c = vctx;
    c->ws->mean[0] = c->ws->mean[1] = m;
    return pn_at_mode(c);
}

/* Scale mixture, mode profiled: the weights at a mode. */
static double smn_mode_profile(void *vctx, double m)
{
    nm_ws *ws = vctx;
    for (size_t c = 0; c < ws->k; c++)
        ws->mean[c] = m;
    return solve_weights(ws);
}

/* The default scale-mixture grid (eb_nm.h): into sd[] when sd is not NULL; returns its size. */
static size_t smn_default_grid(const eb_nm_data *d, double center, double mult, double *sd)
{
    double smin = DP_INF, m2 = -DP_INF;
    for (size_t j = 0; j < d->n; j++) {
        smin = fmin(smin, d->s[j]);
        double z = d->x[j] - center;
        m2 = fmax(m2, z * z - d->s[j] * d->s[j]);
    }
    double lo = smin / 10.0;
    double hi = m2 > 0.0 ? 2.0 * sqrt(m2) : 8.0 * lo;
    if (!(hi > lo))
        hi = 8.0 * lo;
    size_t P = (size_t)ceil(log2(hi / lo) / log2(mult));
    if (P + 2 > EB_NM_MAX_GRID)
        P = EB_NM_MAX_GRID - 2;
    if (sd != NULL) {
        sd[0] = 0.0;
        for (size_t i = 0; i <= P; i++)
            sd[1 + i] = hi * pow(mult, -(double)(P - i));
    }
    return P + 2;
}

static int ws_alloc(nm_ws *ws, size_t k, dp_err *err)
{
    size_t n = ws->d->n;
    if ((double)n * (double)k > EB_NM_MAX_CELLS)
        return dp_err_set(err, DP_EINVAL, ws->o->grid ? "grid" : "grid_size",
                          "observations x grid points = %zu x %zu exceeds %d; use a smaller grid",
                          n, k, EB_NM_MAX_CELLS);
    ws->k = k;
    ws->mean = dp_calloc(k, sizeof *ws->mean);
    ws->sd = dp_calloc(k, sizeof *ws->sd);
    ws->w = dp_calloc(k, sizeof *ws->w);
    if (!ws->mean || !ws->sd || !ws->w)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (size_t c = 0; c < k; c++)
        ws->w[c] = 1.0 / (double)k;
    return DP_OK;
}

static void ws_free(nm_ws *ws)
{
    dp_free(ws->mean);
    dp_free(ws->sd);
    dp_free(ws->w);
    dp_free(ws->L);
    dp_free(ws->rowmax);
    dp_free(ws->seed);
    dp_free(ws->fb_row);
    dp_free(ws->fb_lo);
    dp_free(ws->fb_off);
    dp_free(ws->fb_val);
}

int eb_nm_fit_prior(const eb_nm_data *d, const eb_nm_opts *o, eb_nm_fit *fit, dp_err *err)
{
    memset(fit, 0, sizeof *fit);
    if (eb_nm_data_check(d, err) != DP_OK || eb_nm_opts_check(o, err) != DP_OK)
        return err->code;
    double xmin, xmax, smin, smax;
    data_range(d, &xmin, &xmax, &smin, &smax);
    nm_ws ws;
    memset(&ws, 0, sizeof ws);
    ws.d = d;
    ws.o = o;
    ws.err = err;
    ws.worst = ws.last = EB_STATUS_CONVERGED;
    ws.rc = DP_OK;
    int rc = DP_OK;
    fit->family = o->family;
    fit->mode = fit->scale = fit->pi0 = DP_NAN;
    double ll = -DP_INF;
    switch (o->family) {
        case EB_NM_NORMAL: {
            normal_ctx c = {d, o, 0.0};
            double t;
            if (o->scale_fixed) {
                t = o->scale;
                ll = normal_profile(&c, t);
            } else {
                double hi = (xmax - xmin) + smax;
                maximize_1d(normal_profile, &c, 0.0, hi, &t);
                if (t <= SCALE_ZERO_RTOL * hi)
                    t = 0.0;
                ll = normal_profile(&c, t);
                if (t == 0.0)
                    ws.worst = eb_status_worst(ws.worst, EB_STATUS_BOUNDARY);
            }
            rc = ws_alloc(&ws, 1, err);
            if (rc != DP_OK)
                goto out;
            ws.mean[0] = c.mode;
            ws.sd[0] = t;
            ws.w[0] = 1.0;
            ws.evaluations = 1;
            fit->mode = c.mode;
            fit->scale = t;
            break;
        }
        case EB_NM_POINT_NORMAL:
        case EB_NM_POINT_LAPLACE: {
            rc = ws_alloc(&ws, 2, err);
            if (rc != DP_OK)
                goto out;
            ws.laplace = o->family == EB_NM_POINT_LAPLACE;
            pn_ctx c = {&ws, log(smin / 10.0), log((xmax - xmin) + smax)};
            if (!(c.hi > c.lo))
                c.hi = c.lo + log(100.0);
            ws.w[0] = ws.w[1] = 0.5;
            if (o->mode_fixed) {
                ws.mean[0] = ws.mean[1] = o->mode;
                ll = pn_at_mode(&c);
            } else {
                double m;
                maximize_1d(pn_mode_profile, &c, xmin, xmax, &m);
                ll = pn_mode_profile(&c, m);
            }
            if (ws.rc != DP_OK) {
                rc = ws.rc;
                goto out;
            }
            fit->mode = ws.mean[0];
            fit->scale = ws.sd[1];
            fit->pi0 = ws.w[0];
            if (ws.w[0] < PI0_BOUNDARY || ws.w[0] > 1.0 - PI0_BOUNDARY)
                ws.worst = eb_status_worst(ws.worst, EB_STATUS_BOUNDARY);
            break;
        }
        case EB_NM_SCALE_MIXTURE: {
            double mult = o->grid_mult > 0.0 ? o->grid_mult : EB_NM_DEFAULT_MULT;
            double center = o->mode_fixed ? o->mode : 0.5 * (xmin + xmax);
            size_t k = o->grid ? o->n_grid : smn_default_grid(d, center, mult, NULL);
            rc = ws_alloc(&ws, k, err);
            if (rc != DP_OK)
                goto out;
            if (o->grid)
                memcpy(ws.sd, o->grid, k * sizeof *ws.sd);
            else
                smn_default_grid(d, center, mult, ws.sd);
            if (o->mode_fixed) {
                ll = smn_mode_profile(&ws, o->mode);
            } else {
                double m;
                maximize_1d(smn_mode_profile, &ws, xmin, xmax, &m);
                ll = smn_mode_profile(&ws, m);
            }
            if (ws.rc != DP_OK) {
                rc = ws.rc;
                goto out;
            }
            fit->mode = ws.mean[0];
            break;
        }
        case EB_NM_NPMLE: {
            size_t k =
                o->grid ? o->n_grid : (o->grid_size ? o->grid_size : EB_NM_NPMLE_DEFAULT_GRID);
            if (!(xmax > xmin) && o->grid == NULL)
                k = 1; /* all observations equal: one atom */
            rc = ws_alloc(&ws, k, err);
            if (rc != DP_OK)
                goto out;
            for (size_t c = 0; c < k; c++)
                ws.mean[c] =
                    o->grid ? o->grid[c]
                            : (k == 1 ? xmin : xmin + (xmax - xmin) * (double)c / (double)(k - 1));
            ll = solve_weights(&ws);
            if (ws.rc != DP_OK) {
                rc = ws.rc;
                goto out;
            }
            break;
        }
        default:
            rc = dp_err_set(err, DP_EINVAL, "prior_family", "unknown prior family");
            goto out;
    }
    if (ws.rc == DP_OK && nm_cancelled(o->cancel))
        nm_cancel(&ws);
    if (ws.rc != DP_OK) {
        rc = ws.rc;
        goto out;
    }
    if (!isfinite(ll)) {
        rc = dp_err_set(err, DP_ENUMERIC, "x", "the marginal log-likelihood is not finite");
        goto out;
    }
    fit->k = ws.k;
    fit->w = ws.w;
    fit->mean = ws.mean;
    fit->sd = ws.sd;
    ws.w = ws.mean = ws.sd = NULL;
    fit->loglik = ll;
    fit->iterations = ws.iterations;
    fit->evaluations = ws.evaluations;
    fit->status = eb_status_worst(ws.worst, ws.last);
out:
    ws_free(&ws);
    if (rc != DP_OK)
        eb_nm_fit_free(fit);
    return rc;
}

/* ---- posterior ---- */

/* N(m, s^2) truncated to (0, inf): mean, variance. lambda = phi(u)/Phi(u), u = m/s (the inverse
 * Mills ratio, from logs so that it stays finite far in the tail); Var = s^2 (1 - lambda (u +
 * lambda)) (Johnson, Kotz & Balakrishnan, Continuous Univariate Distributions vol. 1, 2nd ed.,
 * Sec. 13.10.1). */
static void tn_pos(double m, double s, double *e1, double *var)
{
    double u = m / s;
    double lam = exp(-0.5 * u * u - 0.5 * log(2.0 * M_PI) - log_Phi(u));
    *e1 = m + s * lam;
    *var = fmax(0.0, s * s * (1.0 - lam * (u + lam)));
}

/* A draw of N(m, s^2) truncated to (0, inf) by inversion on the upper tail: Z = Qinv(t), t uniform
 * on (0, Q(-m/s)), so Z > -m/s, precise when the truncation point is far out. */
static double tn_pos_draw(double m, double s, gsl_rng *r)
{
    double q = gsl_cdf_ugaussian_Q(-m / s);
    double t = q * gsl_rng_uniform_pos(r);
    return fmax(0.0, m + s * gsl_cdf_ugaussian_Qinv(t));
}

/* P(X < c) for X ~ N(m, s^2) truncated to (0, inf). */
static double tn_pos_cdf(double m, double s, double c)
{
    if (c <= 0.0)
        return 0.0;
    return (gsl_cdf_ugaussian_P((c - m) / s) - gsl_cdf_ugaussian_P(-m / s)) /
           gsl_cdf_ugaussian_P(m / s);
}

/* One observation under a point-Laplace prior (eb_nm.h): mean, variance, P(theta < 0),
 * P(theta = 0), and n_draws draws (rng may be NULL when n_draws is 0). */
static void laplace_row(const eb_nm_fit *f, double x, double s, double *mean, double *var,
                        double *neg, double *zero, size_t n_draws, double *draws, gsl_rng *rng)
{
    double mu = f->mean[0], b = f->sd[1], z = x - mu, lp, ln;
    laplace_halves(z, s, b, &lp, &ln);
    double l0 = f->w[0] > 0.0 ? log(f->w[0]) + log_npdf(x, mu, s * s) : -DP_INF;
    double l1 = f->w[1] > 0.0 ? log(f->w[1]) : -DP_INF;
    double lw[3] = {l0, l1 + lp, l1 + ln}, mx = fmax(l0, fmax(lw[1], lw[2])), w[3], tot = 0.0;
    for (int c = 0; c < 3; c++) {
        w[c] = isfinite(lw[c]) ? exp(lw[c] - mx) : 0.0;
        tot += w[c];
    }
    for (int c = 0; c < 3; c++)
        w[c] /= tot;
    /* theta = mu + t: t = 0, t ~ TN(z - s^2/b) on (0, inf), t ~ -TN(-(z + s^2/b)) on (0, inf) */
    double mp = z - s * s / b, mn = -(z + s * s / b), ep, vp, en, vn;
    tn_pos(mp, s, &ep, &vp);
    tn_pos(mn, s, &en, &vn);
    double cm[3] = {mu, mu + ep, mu - en}, cv[3] = {0.0, vp, vn};
    double m = w[0] * cm[0] + w[1] * cm[1] + w[2] * cm[2], v = 0.0;
    for (int c = 0; c < 3; c++)
        v += w[c] * (cv[c] + (cm[c] - m) * (cm[c] - m));
    *mean = m;
    *var = v;
    /* P(theta < 0) = P(t < -mu) */
    double c0 = -mu;
    *neg = (mu < 0.0 ? w[0] : 0.0) + w[1] * tn_pos_cdf(mp, s, c0) +
           w[2] * (c0 >= 0.0 ? 1.0 : 1.0 - tn_pos_cdf(mn, s, -c0));
    *zero = mu == 0.0 ? w[0] : 0.0;
    for (size_t r = 0; r < n_draws; r++) {
        double u = gsl_rng_uniform(rng);
        if (u < w[0])
            draws[r] = mu;
        else if (u < w[0] + w[1])
            draws[r] = mu + tn_pos_draw(mp, s, rng);
        else
            draws[r] = mu - tn_pos_draw(mn, s, rng);
    }
}

int eb_nm_posterior(const eb_nm_data *d, const eb_nm_fit *fit, eb_nm_post *p, dp_err *err)
{
    if (eb_nm_data_check(d, err) != DP_OK)
        return err->code;
    if (fit->k < 1 || fit->w == NULL || fit->mean == NULL || fit->sd == NULL ||
        (fit->family == EB_NM_POINT_LAPLACE && (fit->k != 2 || !(fit->sd[1] > 0.0))))
        return dp_err_set(err, DP_EINVAL, "prior", "the prior has no components");
    if (p->n_draws > EB_NM_MAX_DRAWS_PER_OBS || (p->n_draws > 0 && p->draws == NULL))
        return dp_err_set(err, DP_EINVAL, "draws", "draws must be in 0..%d (got %zu)",
                          EB_NM_MAX_DRAWS_PER_OBS, p->n_draws);
    size_t k = fit->k;
    double *lw = dp_calloc(k, sizeof *lw), *pm = dp_calloc(k, sizeof *pm),
           *pv = dp_calloc(k, sizeof *pv), *lpi = dp_calloc(k, sizeof *lpi);
    gsl_rng *rng = NULL;
    int rc = DP_OK;
    if (!lw || !pm || !pv || !lpi) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if (p->n_draws > 0 && (rng = dp_rng_alloc(p->seed, DP_RNG_STREAM_NM_DRAWS, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    for (size_t c = 0; c < k; c++)
        lpi[c] = fit->w[c] > 0.0 ? log(fit->w[c]) : -DP_INF;
    for (size_t j = 0; j < d->n; j++) {
        if (j % EB_NM_CANCEL_ROWS == 0 && nm_cancelled(p->cancel)) {
            rc = dp_err_set(err, DP_EBUSY, NULL, "the posterior was cancelled (observation %zu)",
                            j + 1);
            goto out;
        }
        if (fit->family == EB_NM_POINT_LAPLACE) {
            double mean, var, neg, zero;
            laplace_row(fit, d->x[j], d->s[j], &mean, &var, &neg, &zero, p->n_draws,
                        p->draws ? p->draws + j * p->n_draws : NULL, rng);
            if (p->mean)
                p->mean[j] = mean;
            if (p->sd)
                p->sd[j] = sqrt(var);
            if (p->second)
                p->second[j] = var + mean * mean;
            if (p->lfsr)
                p->lfsr[j] = fmin(fmax(0.0, 1.0 - neg), fmin(1.0, neg + zero));
            continue;
        }
        double x = d->x[j], s2 = d->s[j] * d->s[j], mx = -DP_INF, l2ps = log(2.0 * M_PI * s2);
        for (size_t c = 0; c < k; c++) {
            double t2 = fit->sd[c] * fit->sd[c], z = x - fit->mean[c];
            /* a point mass's marginal variance is s2: its log normaliser is the row's */
            lw[c] = isfinite(lpi[c])
                        ? lpi[c] - 0.5 * ((t2 > 0.0 ? log(2.0 * M_PI * (s2 + t2)) : l2ps) +
                                          z * z / (s2 + t2))
                        : -DP_INF;
            mx = fmax(mx, lw[c]);
            if (t2 > 0.0) { /* normal-normal conjugacy */
                double b = t2 / (t2 + s2);
                pm[c] = fit->mean[c] + b * (x - fit->mean[c]);
                pv[c] = b * s2;
            } else {
                pm[c] = fit->mean[c];
                pv[c] = 0.0;
            }
        }
        double tot = 0.0;
        for (size_t c = 0; c < k; c++) {
            lw[c] = isfinite(lw[c]) ? exp(lw[c] - mx) : 0.0;
            tot += lw[c];
        }
        double mean = 0.0, neg = 0.0, zero = 0.0;
        for (size_t c = 0; c < k; c++) {
            lw[c] /= tot;
            mean += lw[c] * pm[c];
            if (pv[c] > 0.0)
                neg += lw[c] * gsl_cdf_ugaussian_P(-pm[c] / sqrt(pv[c]));
            else if (pm[c] < 0.0)
                neg += lw[c];
            else if (pm[c] == 0.0)
                zero += lw[c];
        }
        double var = 0.0;
        for (size_t c = 0; c < k; c++) {
            double z = pm[c] - mean;
            var += lw[c] * (pv[c] + z * z);
        }
        if (p->mean)
            p->mean[j] = mean;
        if (p->sd)
            p->sd[j] = sqrt(var);
        if (p->second)
            p->second[j] = var + mean * mean;
        if (p->lfsr)
            p->lfsr[j] = fmin(fmax(0.0, 1.0 - neg), fmin(1.0, neg + zero));
        for (size_t r = 0; r < p->n_draws; r++) {
            double u = gsl_rng_uniform(rng), acc = 0.0;
            size_t c = 0;
            for (; c + 1 < k; c++) {
                acc += lw[c];
                if (u < acc)
                    break;
            }
            double z = gsl_ran_ugaussian(rng);
            p->draws[j * p->n_draws + r] = pm[c] + sqrt(pv[c]) * z;
        }
    }
out:
    gsl_rng_free(rng);
    dp_free(lw);
    dp_free(pm);
    dp_free(pv);
    dp_free(lpi);
    return rc;
}
