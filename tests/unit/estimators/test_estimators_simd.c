/*
 * Unit tests for estimators/eb_simd.c and the vector kernels of eb_mixsqp.c (issue #15): the vector
 * exponential against libm across its whole input range, every instruction-set copy giving the same
 * bits, and the mixture solver's pass (logs by exponents and mantissa products, lane sums) against
 * a plain scalar evaluation of its objective, gradient and optimum; npmle's generated rows through
 * every copy.
 */
#include "tests/support/test_util.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_math.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "common/dp_alloc.h"
#include "estimators/eb_mixsqp.h"
#include "estimators/eb_nm.h"
#include "estimators/eb_simd.h"

/* Units in the last place between a and the exact value b (b > 0 normal). */
static double ulps(double a, double b)
{
    return fabs(a - b) / (nextafter(b, DBL_MAX) - b);
}

#define NX 4096

/* exp on a grid of [-700, 700] and on random points, and at the edges of its reduction
 * intervals (multiples of log 2 / 2): within 2 ulps of libm's exp (itself within 1 ulp here). */
static void eb_exp_n_is_accurate(void **state)
{
    (void)state;
    static double x[NX], y[NX];
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 5);
    for (size_t i = 0; i < NX; i++) {
        if (i < NX / 4)
            x[i] = -700.0 + 1400.0 * (double)i / (double)(NX / 4 - 1);
        else if (i < NX / 2)
            x[i] =
                nextafter(0.5 * M_LN2 * (double)((long)i - (long)(3 * NX / 8)), i % 2 ? 1e9 : -1e9);
        else
            x[i] = gsl_ran_flat(r, -40.0, 40.0);
    }
    gsl_rng_free(r);
    int top = eb_simd_level();
    static double y0[NX];
    for (int lv = EB_SIMD_BASE; lv <= top; lv++) { /* every copy: the same bits */
        eb_simd_cap(lv);
        eb_exp_n(x, lv == EB_SIMD_BASE ? y0 : y, NX);
        if (lv > EB_SIMD_BASE)
            assert_memory_equal(y0, y, sizeof y);
    }
    eb_simd_cap(top);
    eb_exp_n(x, y, NX);
    double worst = 0.0;
    for (size_t i = 0; i < NX; i++)
        worst = fmax(worst, ulps(y[i], exp(x[i])));
    assert_true(worst <= 2.0);
    assert_true(y[0] > 0.0 && y[0] < 1e-300); /* exp(-700) is normal, not flushed */
}

/* A positive n x k matrix, each row divided by its largest entry, entries spread over 40 orders of
 * magnitude, from a seeded stream. */
static double *random_matrix(size_t n, size_t k, unsigned long seed)
{
    double *L = dp_calloc(n * k, sizeof *L);
    assert_non_null(L);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    for (size_t j = 0; j < n; j++) {
        double mx = 0.0;
        size_t peak = gsl_rng_uniform_int(r, k);
        for (size_t c = 0; c < k; c++) {
            double d = (double)c - (double)peak;
            L[j * k + c] = exp(-0.5 * d * d * gsl_rng_uniform(r) - gsl_rng_uniform(r));
            mx = fmax(mx, L[j * k + c]);
        }
        for (size_t c = 0; c < k; c++)
            L[j * k + c] /= mx;
    }
    gsl_rng_free(r);
    return L;
}

/* The solver on the same matrix through every instruction-set copy this CPU has: the same
 * weights, log-likelihood and iterations, bit for bit. Three widths: odd (7), the npmle default
 * (20), and above the lane-vector Hessian's limit of 512 (520: dsyrk, three iterations); n = 3001
 * and 701 leave a short last chunk; 140,000 rows take the warm start. */
static void mixsqp_same_bits_on_every_instruction_set(void **state)
{
    (void)state;
    const size_t ks[4] = {7, 20, 520, 20}, ns[4] = {3001, 3001, 701, 140000};
    int top = eb_simd_level();
    for (int cs = 0; cs < 4; cs++) {
        size_t n = ns[cs], k = ks[cs];
        double *L = random_matrix(n, k, 40 + (unsigned long)cs);
        double ref[520], got[520];
        eb_mixsqp_info iref, igot;
        int levels = 0;
        for (int lv = EB_SIMD_BASE; lv <= EB_SIMD_AVX512; lv++) {
            eb_simd_cap(lv);
            if (eb_simd_level() != lv)
                continue; /* this CPU lacks it */
            eb_mixsqp_opts o = eb_mixsqp_opts_default();
            if (k > 512)
                o.max_iter = 3, o.max_iter_active = 4; /* dsyrk: a few steps show it */
            dp_err e;
            dp_err_clear(&e);
            assert_int_equal(
                eb_mixsqp_solve(n, k, L, &o, levels ? got : ref, levels ? &igot : &iref, &e),
                DP_OK);
            if (levels++ == 0)
                continue;
            assert_memory_equal(ref, got, k * sizeof *ref);
            assert_memory_equal(&iref.sum_log, &igot.sum_log, sizeof iref.sum_log);
            assert_int_equal(iref.iterations, igot.iterations);
            assert_int_equal(iref.active_iterations, igot.active_iterations);
        }
        assert_true(levels >= 1);
        if (k <= 512)
            assert_int_equal(iref.status, EB_STATUS_CONVERGED);
        if (cs == 3)
            assert_true(iref.warm_iterations > 0);
        dp_free(L);
    }
    eb_simd_cap(top);
}

/* The pass's sums against a plain evaluation in long double at the solver's answer: the
 * log-likelihood (logs as exponents plus mantissa products, lane sums) to 1e-13 relative, and the
 * optimality conditions with the gradient recomputed row by row. */
static void mixsqp_pass_matches_direct_evaluation(void **state)
{
    (void)state;
    const size_t n = 5000, k = 20;
    double *L = random_matrix(n, k, 77), x[20];
    eb_mixsqp_opts o = eb_mixsqp_opts_default();
    eb_mixsqp_info info;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_mixsqp_solve(n, k, L, &o, x, &info, &e), DP_OK);
    assert_int_equal(info.status, EB_STATUS_CONVERGED);
    long double ll = 0.0L, g[20] = {0};
    for (size_t j = 0; j < n; j++) {
        long double u = 0.0L;
        for (size_t c = 0; c < k; c++)
            u += (long double)L[j * k + c] * (long double)x[c];
        ll += logl(u);
        for (size_t c = 0; c < k; c++)
            g[c] += (long double)L[j * k + c] / u;
    }
    assert_true(fabs(info.sum_log - (double)ll) <= 1e-13 * fabs((double)ll));
    /* KKT of max sum log(L x) on the simplex: (1/n) sum_j L_jc / L_j x <= 1, = 1 where x_c > 0 */
    for (size_t c = 0; c < k; c++) {
        double gc = (double)(g[c] / (long double)n);
        assert_true(gc <= 1.0 + 1e-7);
        if (x[c] > 1e-4)
            assert_true(fabs(gc - 1.0) <= 1e-6);
    }
    assert_true(fabs((double)ll - eb_mixsqp_loglik(n, k, L, NULL, x)) <= 1e-9 * fabs((double)ll));
    dp_free(L);
}

/* The Hessian formed on a subset S of the components (eb_mixsqp.h) reaches the optimum: the default
 * solve, and one with S cut to the support of x (hess_support_only) started from a single atom with
 * at most three active-set steps a QP, so that weights that must grow are found by the stall check,
 * which repeats the pass on every component (restarts > 0). Both equal to each other and at least
 * as good as 2,000 EM iterations (no Hessian at all; EM rises monotonically to the optimum). */
static void mixsqp_partial_hessian_reaches_the_optimum(void **state)
{
    (void)state;
    const size_t n = 4000, k = 30;
    double *L = random_matrix(n, k, 91);
    double em[30], part[30], so[30], nx[30];
    eb_mixsqp_info ipart, iso;
    dp_err e;
    dp_err_clear(&e);
    eb_mixsqp_opts o = eb_mixsqp_opts_default();
    assert_int_equal(eb_mixsqp_solve(n, k, L, &o, part, &ipart, &e), DP_OK);
    assert_int_equal(ipart.status, EB_STATUS_CONVERGED);
    o.hess_support_only = true;
    o.start_given = true;
    o.max_iter_active = 3;
    for (size_t c = 0; c < k; c++)
        so[c] = c % 3 == 0 ? 1.0 : 0.0;
    assert_int_equal(eb_mixsqp_solve(n, k, L, &o, so, &iso, &e), DP_OK);
    assert_int_equal(iso.status, EB_STATUS_CONVERGED);
    assert_true(iso.restarts > 0);
    for (size_t c = 0; c < k; c++)
        em[c] = 1.0 / (double)k;
    for (int it = 0; it < 2000; it++) {
        memset(nx, 0, sizeof nx);
        for (size_t j = 0; j < n; j++) {
            double t = 0.0;
            for (size_t c = 0; c < k; c++)
                t += L[j * k + c] * em[c];
            for (size_t c = 0; c < k; c++)
                nx[c] += L[j * k + c] * em[c] / t;
        }
        for (size_t c = 0; c < k; c++)
            em[c] = nx[c] / (double)n;
    }
    double le = eb_mixsqp_loglik(n, k, L, NULL, em), lp = eb_mixsqp_loglik(n, k, L, NULL, part),
           ls = eb_mixsqp_loglik(n, k, L, NULL, so);
    assert_true(lp >= le - 1e-9 * fabs(le));
    assert_true(fabs(lp - ls) <= 1e-10 * fabs(lp));
    for (size_t c = 0; c < k; c++)
        assert_true(fabs(part[c] - so[c]) <= 1e-5);
    dp_free(L);
}

/* npmle on an even grid (rows from two exponentials and chains of products, eb_nm.c) through
 * every copy: the same fit bit for bit, with rows far enough from the grid's middle to be computed
 * entry by entry mixed in. */
static void npmle_even_grid_same_bits_on_every_instruction_set(void **state)
{
    (void)state;
    const size_t n = 4000;
    double *x = dp_calloc(n, sizeof *x), *s = dp_calloc(n, sizeof *s);
    assert_non_null(x);
    assert_non_null(s);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 9);
    for (size_t j = 0; j < n; j++) {
        s[j] = j % 50 == 0 ? 0.05 : 0.5 + gsl_rng_uniform(r);
        x[j] = (j % 3 == 0 ? 2.0 : -1.0) + gsl_ran_gaussian(r, 1.0) + (j % 50 == 0 ? 4.0 : 0.0);
    }
    gsl_rng_free(r);
    eb_nm_data d = {n, x, s};
    eb_nm_opts o = eb_nm_opts_default(EB_NM_NPMLE);
    o.grid_size = 20;
    int top = eb_simd_level(), levels = 0;
    eb_nm_fit ref, got;
    for (int lv = EB_SIMD_BASE; lv <= top; lv++) {
        eb_simd_cap(lv);
        dp_err e;
        dp_err_clear(&e);
        assert_int_equal(eb_nm_fit_prior(&d, &o, levels ? &got : &ref, &e), DP_OK);
        if (levels++ == 0)
            continue;
        assert_int_equal(ref.k, got.k);
        assert_memory_equal(ref.w, got.w, ref.k * sizeof *ref.w);
        assert_memory_equal(&ref.loglik, &got.loglik, sizeof ref.loglik);
        eb_nm_fit_free(&got);
    }
    eb_simd_cap(top);
    assert_int_equal(ref.status, EB_STATUS_CONVERGED);
    assert_true(fabs(ref.loglik - eb_nm_loglik(&d, &ref)) <= 1e-12 * fabs(ref.loglik));
    eb_nm_fit_free(&ref);
    dp_free(x);
    dp_free(s);
}

/* The dual residual max(0, max_c (1/n) sum_j L_jc / L_j w - 1) of weights w on the atoms a, with
 * L built entry by entry (one exp each): the optimality test of the fit, recomputed. */
static double npmle_dual_residual(size_t n, const double *x, const double *s, size_t k,
                                  const double *a, const double *w)
{
    double g[64] = {0};
    assert_true(k <= 64);
    for (size_t j = 0; j < n; j++) {
        double l[64], mx = -DBL_MAX, u = 0.0, v = s[j] * s[j];
        for (size_t c = 0; c < k; c++) {
            double z = x[j] - a[c];
            l[c] = -0.5 * z * z / v;
            mx = fmax(mx, l[c]);
        }
        for (size_t c = 0; c < k; c++) {
            l[c] = exp(l[c] - mx);
            u += l[c] * w[c];
        }
        for (size_t c = 0; c < k; c++)
            g[c] += l[c] / u;
    }
    double res = 0.0;
    for (size_t c = 0; c < k; c++)
        res = fmax(res, g[c] / (double)n - 1.0);
    return res;
}

/* Rows whose largest entries are many atoms from the grid's middle (two groups at +-4 on a grid of
 * [-5, 5] in steps of 0.25, s about 0.3): the generated rows are divided by their largest entry, as
 * a stored matrix's are, so the solver's stopping test sees the same objective scale and the fit
 * is optimal to its tolerance. (Rows divided by their middle entry instead stopped at a dual
 * residual of 5e-6 and reported converged.) */
static void npmle_even_grid_far_rows_are_optimal(void **state)
{
    (void)state;
    const size_t n = 140000, k = 41;
    double *x = dp_calloc(n, sizeof *x), *s = dp_calloc(n, sizeof *s), grid[41];
    assert_non_null(x);
    assert_non_null(s);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 1517);
    for (size_t j = 0; j < n; j++) {
        double u = gsl_rng_uniform(r);
        s[j] = 0.3 + 0.05 * gsl_rng_uniform(r);
        x[j] = (u < 0.5 ? -4.0 : 4.0) + 0.5 * gsl_ran_ugaussian(r) + s[j] * gsl_ran_ugaussian(r);
    }
    gsl_rng_free(r);
    for (size_t c = 0; c < k; c++)
        grid[c] = -5.0 + 0.25 * (double)c;
    eb_nm_data d = {n, x, s};
    eb_nm_opts o = eb_nm_opts_default(EB_NM_NPMLE);
    o.grid = grid;
    o.n_grid = k;
    eb_nm_fit fit;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_nm_fit_prior(&d, &o, &fit, &e), DP_OK);
    assert_int_equal(fit.status, EB_STATUS_CONVERGED);
    assert_true(npmle_dual_residual(n, x, s, fit.k, fit.mean, fit.w) <= 1e-8);
    eb_nm_fit_free(&fit);
    dp_free(x);
    dp_free(s);
}

/* A standard error whose square underflows (s = 1e-300: s^2 is 0) leaves its row without a single
 * representable entry: the fit answers that observation's zero likelihood at once (an empty row of
 * the fallback table once sized itself by an unsigned c_hi - c_lo < 0 and never returned). */
static void npmle_underflowing_s_is_a_numerical_failure(void **state)
{
    (void)state;
    double x[5] = {1, 2, 3, 4, 5}, s[5] = {1e-300, 1, 1, 1, 1};
    eb_nm_data d = {5, x, s};
    eb_nm_opts o = eb_nm_opts_default(EB_NM_NPMLE);
    eb_nm_fit fit;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_nm_fit_prior(&d, &o, &fit, &e), DP_ENUMERIC);
    assert_non_null(strstr(e.msg, "zero likelihood"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(eb_exp_n_is_accurate),
        cmocka_unit_test(mixsqp_same_bits_on_every_instruction_set),
        cmocka_unit_test(mixsqp_pass_matches_direct_evaluation),
        cmocka_unit_test(mixsqp_partial_hessian_reaches_the_optimum),
        cmocka_unit_test(npmle_even_grid_same_bits_on_every_instruction_set),
        cmocka_unit_test(npmle_even_grid_far_rows_are_optimal),
        cmocka_unit_test(npmle_underflowing_s_is_a_numerical_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
