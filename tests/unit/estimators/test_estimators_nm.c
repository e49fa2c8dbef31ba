/*
 * Unit tests for estimators/eb_nm.c and eb_mixsqp.c (issue #15): the fitted log-likelihood of
 * every family against independent maximum-likelihood references (tests/vectors/nm/ref_nm.json,
 * produced by tests/vectors/gen/nm_refs.py with numpy/scipy: EM to 200,000 iterations with a KKT
 * check, and Nelder-Mead), ashr's default grid, posterior moments against the normal prior's closed
 * forms and against quadrature for the point-normal prior, the solver's KKT conditions, seeded
 * draws, and input validation.
 */
#include "tests/support/test_util.h"

#include <string.h>

#include <jansson.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_math.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "estimators/eb_mixsqp.h"
#include "estimators/eb_nm.h"

#define REF_FILE "tests/vectors/nm/ref_nm.json"
/* closed forms evaluated in another order: a few ulps */
#define CF_RTOL 1e-12

static json_t *load_ref(void)
{
    json_error_t je;
    json_t *root = json_load_file(REF_FILE, 0, &je);
    if (root == NULL)
        fail_msg("%s: %s (line %d)", REF_FILE, je.text, je.line);
    return root;
}

/* The data set name of ref as two arrays (owned by caller). */
static size_t ref_data(const json_t *root, const char *name, double **x, double **s)
{
    const json_t *d = json_object_get(json_object_get(root, "data"), name);
    const json_t *jx = json_object_get(d, "x"), *js = json_object_get(d, "s");
    size_t n = json_array_size(jx);
    assert_true(n > 0 && n == json_array_size(js));
    *x = dp_calloc(n, sizeof **x);
    *s = dp_calloc(n, sizeof **s);
    assert_non_null(*x);
    assert_non_null(*s);
    for (size_t j = 0; j < n; j++) {
        (*x)[j] = json_real_value(json_array_get(jx, j));
        (*s)[j] = json_real_value(json_array_get(js, j));
    }
    return n;
}

static void loglik_matches_independent_references(void **state)
{
    (void)state;
    json_t *root = load_ref();
    const json_t *cases = json_object_get(root, "cases");
    assert_true(json_array_size(cases) >= 18);
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *c = json_array_get(cases, i);
        const char *name = json_string_value(json_object_get(c, "name"));
        double *x = NULL, *s = NULL;
        size_t n = ref_data(root, json_string_value(json_object_get(c, "data")), &x, &s);
        int fam = eb_nm_family_parse(json_string_value(json_object_get(c, "family")));
        assert_true(fam >= 0);
        eb_nm_opts o = eb_nm_opts_default((eb_nm_family)fam);
        const json_t *mode = json_object_get(c, "mode");
        if (json_is_string(mode))
            o.mode_fixed = false;
        else if (json_is_number(mode))
            o.mode = json_number_value(mode);
        if (json_is_integer(json_object_get(c, "grid_size")))
            o.grid_size = (size_t)json_integer_value(json_object_get(c, "grid_size"));
        eb_nm_data d = {n, x, s};
        eb_nm_fit fit;
        dp_err e;
        dp_err_clear(&e);
        int rc = eb_nm_fit_prior(&d, &o, &fit, &e);
        if (rc != DP_OK)
            fail_msg("%s: %s", name, e.msg);
        double want = json_number_value(json_object_get(c, "loglik"));
        double rtol = json_number_value(json_object_get(c, "rtol"));
        printf("  %-28s ours %.12f  reference %.12f  rel %.2g  status %s\n", name, fit.loglik, want,
               fabs(fit.loglik - want) / fabs(want), eb_status_name(fit.status));
        assert_close(fit.loglik, want, rtol, 0);
        assert_true(fit.status == EB_STATUS_CONVERGED || fit.status == EB_STATUS_BOUNDARY);
        /* a maximum: never below the reference by more than the tolerance */
        assert_true(fit.loglik >= want - rtol * fabs(want));
        /* the reported log-likelihood is the prior's, recomputed directly */
        assert_close(eb_nm_loglik(&d, &fit), fit.loglik, 1e-10, 0);
        const json_t *grid = json_object_get(c, "grid");
        if (json_is_array(grid)) { /* ashr's default grid */
            assert_int_equal(fit.k, json_array_size(grid));
            for (size_t k = 0; k < fit.k; k++)
                assert_close(fit.sd[k], json_number_value(json_array_get(grid, k)), 1e-13, 0);
        }
        double sw = 0.0;
        for (size_t k = 0; k < fit.k; k++) {
            assert_true(fit.w[k] >= 0.0);
            sw += fit.w[k];
        }
        assert_close(sw, 1.0, 1e-12, 0);
        eb_nm_fit_free(&fit);
        dp_free(x);
        dp_free(s);
    }
    json_decref(root);
}

/* Posterior moments and lfsr under given point priors against scipy quadrature (key: the
 * fixture's list, family: its prior). */
static void posterior_matches_quadrature(const char *key, eb_nm_family family)
{
    json_t *root = load_ref();
    const json_t *post = json_object_get(root, key);
    assert_true(json_array_size(post) >= 8);
    for (size_t i = 0; i < json_array_size(post); i++) {
        const json_t *c = json_array_get(post, i);
        double pi0 = json_number_value(json_object_get(c, "pi0"));
        double mode = json_number_value(json_object_get(c, "mode"));
        double sc = json_number_value(json_object_get(c, "scale"));
        double x = json_number_value(json_object_get(c, "x"));
        double s = json_number_value(json_object_get(c, "s"));
        double rtol = json_number_value(json_object_get(c, "rtol"));
        double w[2] = {pi0, 1 - pi0}, mean[2] = {mode, mode}, sd[2] = {0.0, sc};
        eb_nm_fit fit = {family, mode, sc, pi0, 2, w, mean, sd, 0, 0, 0, 0};
        eb_nm_data d = {1, &x, &s};
        double pm, psd, p2, lf;
        eb_nm_post p = {&pm, &psd, &p2, &lf, 0, NULL, 0, NULL};
        dp_err e;
        dp_err_clear(&e);
        assert_int_equal(eb_nm_posterior(&d, &fit, &p, &e), DP_OK);
        double m1 = json_number_value(json_object_get(c, "mean"));
        double m2 = json_number_value(json_object_get(c, "second"));
        double neg = json_number_value(json_object_get(c, "neg"));
        double zero = json_number_value(json_object_get(c, "zero"));
        /* quad's own relative error is about rtol; moments near 0 get an absolute allowance */
        assert_close(pm, m1, 10 * rtol, 1e-12);
        assert_close(p2, m2, 10 * rtol, 0);
        assert_close(psd, sqrt(m2 - m1 * m1), 100 * rtol, 0);
        assert_close(lf, fmin(1.0 - neg, neg + zero), 10 * rtol, 1e-12);
    }
    json_decref(root);
}

static void point_normal_posterior_matches_quadrature(void **state)
{
    (void)state;
    posterior_matches_quadrature("point_normal_posterior", EB_NM_POINT_NORMAL);
}

static void point_laplace_posterior_matches_quadrature(void **state)
{
    (void)state;
    posterior_matches_quadrature("point_laplace_posterior", EB_NM_POINT_LAPLACE);
}

static void point_laplace_draws_follow_the_posterior(void **state)
{
    (void)state;
    const double x[] = {1.9, -0.6}, s[] = {0.8, 1.2};
    double w[2] = {0.5, 0.5}, mean[2] = {0.0, 0.0}, sd[2] = {0.0, 1.4};
    eb_nm_fit fit = {EB_NM_POINT_LAPLACE, 0.0, 1.4, 0.5, 2, w, mean, sd, 0, 0, 0, 0};
    eb_nm_data d = {2, x, s};
    size_t D = 1000;
    double *a = dp_calloc(2 * D, sizeof *a);
    double pm[2], psd[2];
    eb_nm_post p = {pm, psd, NULL, NULL, D, a, 7, NULL};
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_nm_posterior(&d, &fit, &p, &e), DP_OK);
    for (size_t j = 0; j < 2; j++) {
        double m = 0;
        for (size_t r = 0; r < D; r++)
            m += a[j * D + r] / (double)D;
        assert_true(fabs(m - pm[j]) < 4.0 * psd[j] / sqrt((double)D));
    }
    dp_free(a);
}

static void normal_prior_posterior_closed_form(void **state)
{
    (void)state;
    /* prior N(0.7, 1.5^2): posterior mean (x/s2 + mu/t2)/(1/s2 + 1/t2), var 1/(1/s2 + 1/t2) */
    const double x[] = {2.385, -0.913, 0.0, 7.25}, s[] = {0.61, 1.37, 0.9, 2.2};
    double w = 1.0, mean = 0.7, sd = 1.5;
    eb_nm_fit fit = {EB_NM_NORMAL, 0.7, 1.5, DP_NAN, 1, &w, &mean, &sd, 0, 0, 0, 0};
    eb_nm_data d = {4, x, s};
    double pm[4], psd[4], p2[4], lf[4];
    eb_nm_post p = {pm, psd, p2, lf, 0, NULL, 0, NULL};
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_nm_posterior(&d, &fit, &p, &e), DP_OK);
    for (size_t j = 0; j < 4; j++) {
        double s2 = s[j] * s[j], t2 = 2.25;
        double v = 1.0 / (1.0 / s2 + 1.0 / t2), m = v * (x[j] / s2 + 0.7 / t2);
        assert_close(pm[j], m, CF_RTOL, 1e-15);
        assert_close(psd[j], sqrt(v), CF_RTOL, 0);
        assert_close(p2[j], v + m * m, CF_RTOL, 0);
        double pneg = gsl_cdf_ugaussian_P(-m / sqrt(v));
        assert_close(lf[j], fmin(pneg, 1.0 - pneg), 1e-12, 1e-15);
    }
}

static void normal_fit_has_the_closed_form_mode(void **state)
{
    (void)state;
    /* with the scale fixed, the ML mode is the precision-weighted mean */
    const double x[] = {2.385, -0.913, 0.41, 1.25, 0.077}, s[] = {0.61, 1.37, 0.9, 2.2, 0.35};
    eb_nm_data d = {5, x, s};
    eb_nm_opts o = eb_nm_opts_default(EB_NM_NORMAL);
    o.mode_fixed = false;
    o.scale_fixed = true;
    o.scale = 0.8;
    eb_nm_fit fit;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_nm_fit_prior(&d, &o, &fit, &e), DP_OK);
    double sw = 0, swx = 0;
    for (size_t j = 0; j < 5; j++) {
        double w = 1.0 / (s[j] * s[j] + 0.64);
        sw += w;
        swx += w * x[j];
    }
    assert_close(fit.mode, swx / sw, CF_RTOL, 0);
    assert_close(fit.scale, 0.8, 0, 0);
    eb_nm_fit_free(&fit);
}

static void normal_scale_at_zero_is_boundary(void **state)
{
    (void)state;
    /* observations far less spread than their standard errors: the prior sd's MLE is 0 */
    const double x[] = {0.01, -0.02, 0.015, 0.0, -0.005, 0.02}, s[] = {1, 1.2, 0.9, 1.1, 1, 1.3};
    eb_nm_data d = {6, x, s};
    eb_nm_opts o = eb_nm_opts_default(EB_NM_NORMAL);
    eb_nm_fit fit;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_nm_fit_prior(&d, &o, &fit, &e), DP_OK);
    assert_int_equal(fit.status, EB_STATUS_BOUNDARY);
    assert_close(fit.scale, 0.0, 0, 0);
    eb_nm_fit_free(&fit);
}

/* KKT of the mixture-weight problem at mixsqp's answer: mean_j L_jk / (L_j pi) <= 1 for all k,
 * = 1 where pi_k > 0 (Kim et al. 2020, Sec. 2.1). Checked on a 20-atom npmle problem large enough
 * (n = 200,000) to take the subsample warm start. */
static void mixsqp_meets_kkt_with_warm_start(void **state)
{
    (void)state;
    size_t n = 200000, k = 20;
    double *L = dp_calloc(n * k, sizeof *L);
    assert_non_null(L);
    dp_err e;
    dp_err_clear(&e);
    gsl_rng *r = dp_rng_alloc(77, DP_RNG_STREAM_DATA, &e);
    assert_non_null(r);
    for (size_t j = 0; j < n; j++) {
        double u = gsl_rng_uniform(r), s = 0.5 + gsl_rng_uniform(r);
        double th = u < 0.5 ? 0.0 : (u < 0.75 ? -2.5 : 1.8);
        double x = th + s * gsl_ran_ugaussian(r), mx = -DP_INF;
        for (size_t c = 0; c < k; c++) {
            double a = -6.0 + 12.0 * (double)c / (double)(k - 1), z = (x - a) / s;
            L[j * k + c] = -0.5 * z * z;
            mx = fmax(mx, L[j * k + c]);
        }
        for (size_t c = 0; c < k; c++)
            L[j * k + c] = exp(L[j * k + c] - mx);
    }
    gsl_rng_free(r);
    double pi[20];
    eb_mixsqp_opts o = eb_mixsqp_opts_default();
    eb_mixsqp_info info;
    assert_int_equal(eb_mixsqp_solve(n, k, L, &o, pi, &info, &e), DP_OK);
    assert_int_equal(info.status, EB_STATUS_CONVERGED);
    assert_true(info.warm_iterations > 0);
    double g[20] = {0};
    for (size_t j = 0; j < n; j++) {
        double u = 0;
        for (size_t c = 0; c < k; c++)
            u += L[j * k + c] * pi[c];
        for (size_t c = 0; c < k; c++)
            g[c] += L[j * k + c] / u / (double)n;
    }
    double sp = 0;
    for (size_t c = 0; c < k; c++) {
        sp += pi[c];
        assert_true(g[c] <= 1.0 + 1e-7);
        if (pi[c] > 1e-6)
            assert_close(g[c], 1.0, 1e-6, 0);
    }
    assert_close(sp, 1.0, 1e-13, 0);
    /* the log-likelihood from the last pass equals a fresh one */
    assert_close(info.sum_log, eb_mixsqp_loglik(n, k, L, NULL, pi), 1e-10, 0);
    dp_free(L);
}

/* npmle on 150,000 observations whose weights on several atoms should be 0: the dual residual
 * stops above tol once the remaining decrease is below rounding, and the fit must say converged
 * in a few iterations, not repeat unmeasurable steps to max_iter (each a pass over the matrix). */
static void npmle_optimal_to_rounding_is_converged(void **state)
{
    (void)state;
    size_t n = 150000;
    double *x = dp_calloc(n, sizeof *x), *s = dp_calloc(n, sizeof *s);
    assert_non_null(x);
    assert_non_null(s);
    dp_err e;
    dp_err_clear(&e);
    gsl_rng *r = dp_rng_alloc(3, DP_RNG_STREAM_DATA, &e);
    assert_non_null(r);
    for (size_t j = 0; j < n; j++) {
        double u = gsl_rng_uniform(r);
        s[j] = 0.5 + gsl_rng_uniform(r);
        double th = u < 0.6 ? 0.0 : (u < 0.8 ? -2.0 : 3.0);
        x[j] = round((th + s[j] * gsl_ran_ugaussian(r)) * 1e6) / 1e6;
    }
    gsl_rng_free(r);
    eb_nm_data d = {n, x, s};
    eb_nm_opts o = eb_nm_opts_default(EB_NM_NPMLE);
    o.grid_size = 20;
    eb_nm_fit fit;
    assert_int_equal(eb_nm_fit_prior(&d, &o, &fit, &e), DP_OK);
    assert_int_equal(fit.status, EB_STATUS_CONVERGED);
    assert_true(fit.iterations < 100);
    eb_nm_fit_free(&fit);
    dp_free(x);
    dp_free(s);
}

static void draws_are_seeded_and_follow_the_posterior(void **state)
{
    (void)state;
    const double x[] = {1.3, -0.4}, s[] = {0.7, 1.1};
    double w[2] = {0.4, 0.6}, mean[2] = {0.0, 0.0}, sd[2] = {0.0, 2.0};
    eb_nm_fit fit = {EB_NM_POINT_NORMAL, 0.0, 2.0, 0.4, 2, w, mean, sd, 0, 0, 0, 0};
    eb_nm_data d = {2, x, s};
    size_t D = 1000;
    double *a = dp_calloc(2 * D, sizeof *a), *b = dp_calloc(2 * D, sizeof *b);
    double pm[2], psd[2];
    eb_nm_post p = {pm, psd, NULL, NULL, D, a, 2026, NULL};
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_nm_posterior(&d, &fit, &p, &e), DP_OK);
    p.draws = b;
    assert_int_equal(eb_nm_posterior(&d, &fit, &p, &e), DP_OK);
    assert_memory_equal(a, b, 2 * D * sizeof *a);
    p.seed = 2027;
    assert_int_equal(eb_nm_posterior(&d, &fit, &p, &e), DP_OK);
    assert_memory_not_equal(a, b, 2 * D * sizeof *a);
    for (size_t j = 0; j < 2; j++) { /* the mean of 1000 draws within 4 standard errors */
        double m = 0;
        for (size_t r = 0; r < D; r++)
            m += a[j * D + r] / (double)D;
        assert_true(fabs(m - pm[j]) < 4.0 * psd[j] / sqrt((double)D));
    }
    dp_free(a);
    dp_free(b);
}

static void bad_input_names_the_field(void **state)
{
    (void)state;
    double x[] = {1.0, 2.0, 3.0}, s[] = {1.0, 0.0, 1.0};
    eb_nm_data d = {3, x, s};
    eb_nm_opts o = eb_nm_opts_default(EB_NM_NPMLE);
    eb_nm_fit fit;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_nm_fit_prior(&d, &o, &fit, &e), DP_EINVAL);
    assert_string_equal(e.field, "s[1]");
    s[1] = 1.0;
    x[2] = DP_NAN;
    dp_err_clear(&e);
    assert_int_equal(eb_nm_fit_prior(&d, &o, &fit, &e), DP_EINVAL);
    assert_string_equal(e.field, "x[2]");
    x[2] = 3.0;
    o.grid_size = EB_NM_MAX_GRID + 1;
    dp_err_clear(&e);
    assert_int_equal(eb_nm_fit_prior(&d, &o, &fit, &e), DP_EINVAL);
    assert_string_equal(e.field, "grid_size");
    o = eb_nm_opts_default(EB_NM_SCALE_MIXTURE);
    o.scale_fixed = true;
    o.scale = 1.0;
    dp_err_clear(&e);
    assert_int_equal(eb_nm_fit_prior(&d, &o, &fit, &e), DP_EINVAL);
    assert_string_equal(e.field, "scale");
    const double g[] = {0.0, 2.0, 1.0};
    o = eb_nm_opts_default(EB_NM_SCALE_MIXTURE);
    o.grid = g;
    o.n_grid = 3;
    dp_err_clear(&e);
    assert_int_equal(eb_nm_fit_prior(&d, &o, &fit, &e), DP_EINVAL);
    assert_string_equal(e.field, "grid");
    assert_int_equal(eb_nm_family_parse("horseshoe"), -1);
    assert_int_equal(eb_nm_family_parse("point_laplace"), EB_NM_POINT_LAPLACE);
    assert_int_equal(eb_nm_family_parse("npmle"), EB_NM_NPMLE);
}

static void all_equal_observations_give_one_atom(void **state)
{
    (void)state;
    const double x[] = {1.25, 1.25, 1.25}, s[] = {1, 2, 0.5};
    eb_nm_data d = {3, x, s};
    eb_nm_opts o = eb_nm_opts_default(EB_NM_NPMLE);
    eb_nm_fit fit;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_nm_fit_prior(&d, &o, &fit, &e), DP_OK);
    assert_int_equal(fit.k, 1);
    assert_close(fit.mean[0], 1.25, 0, 0);
    eb_nm_fit_free(&fit);
}

/* The compute pool's cancel flag (issue #15): clear, every family fits as without it (the same
 * log-likelihood); set, the fit, the mixture-weight solver and the posterior stop with DP_EBUSY
 * and the fit is left empty. */
static void cancel_flag_stops_fit_solver_and_posterior(void **state)
{
    (void)state;
    double x[40], s[40];
    for (size_t j = 0; j < 40; j++) {
        x[j] = (j % 3 == 0 ? 2.2 : 0.0) + 0.37 * sin(1.7 * (double)j);
        s[j] = 0.6 + 0.013 * (double)j;
    }
    eb_nm_data d = {40, x, s};
    atomic_bool flag;
    atomic_init(&flag, false);
    dp_err e;
    for (int f = 0; f < EB_NM_N_FAMILIES; f++) {
        eb_nm_opts o = eb_nm_opts_default((eb_nm_family)f);
        o.mode_fixed = f == EB_NM_NPMLE; /* profile the mode: several profile points */
        eb_nm_fit ref, fit;
        dp_err_clear(&e);
        assert_int_equal(eb_nm_fit_prior(&d, &o, &ref, &e), DP_OK);
        o.cancel = &flag;
        atomic_store(&flag, false);
        assert_int_equal(eb_nm_fit_prior(&d, &o, &fit, &e), DP_OK);
        assert_close(fit.loglik, ref.loglik, 0, 0);
        double pm[40];
        eb_nm_post p = {pm, NULL, NULL, NULL, 0, NULL, 1, &flag};
        assert_int_equal(eb_nm_posterior(&d, &fit, &p, &e), DP_OK);
        atomic_store(&flag, true);
        assert_int_equal(eb_nm_posterior(&d, &fit, &p, &e), DP_EBUSY);
        eb_nm_fit_free(&fit);
        dp_err_clear(&e);
        assert_int_equal(eb_nm_fit_prior(&d, &o, &fit, &e), DP_EBUSY);
        assert_non_null(strstr(e.msg, "cancelled"));
        assert_int_equal(fit.k, 0);
        assert_null(fit.w);
        eb_nm_fit_free(&ref);
    }
    /* the solver alone: polled before each outer iteration */
    double L[40 * 3], pi[3];
    for (size_t j = 0; j < 40; j++)
        for (size_t c = 0; c < 3; c++)
            L[j * 3 + c] = exp(-0.5 * (x[j] - (double)c) * (x[j] - (double)c));
    eb_mixsqp_opts mo = eb_mixsqp_opts_default();
    eb_mixsqp_info info;
    mo.cancel = &flag;
    dp_err_clear(&e);
    assert_int_equal(eb_mixsqp_solve(40, 3, L, &mo, pi, &info, &e), DP_EBUSY);
    atomic_store(&flag, false);
    assert_int_equal(eb_mixsqp_solve(40, 3, L, &mo, pi, &info, &e), DP_OK);
    assert_int_equal(info.status, EB_STATUS_CONVERGED);
}

/* A stored matrix handed out through eb_mixsqp_rows_fn: rows j0, j0 + stride, ... copied,
 * column-major, and the scratch lanes past nb filled with garbage the solver must ignore. */
typedef struct stored_rows {
    const double *L;
    size_t k;
    size_t calls; /* blocks asked for */
} stored_rows;

static void copy_rows(void *vctx, size_t j0, size_t stride, size_t nb, double *out, size_t ld)
{
    stored_rows *c = vctx;
    c->calls++;
    assert_true(ld % 8 == 0 && ld >= nb);
    for (size_t col = 0; col < c->k; col++) {
        for (size_t i = 0; i < nb; i++)
            out[col * ld + i] = c->L[(j0 + i * stride) * c->k + col];
        for (size_t i = nb; i < ld; i++)
            out[col * ld + i] = DP_NAN;
    }
}

/* The scaled likelihood matrix of point masses at atoms a[0..k) built entry by entry in log space
 * (one exp each, the straightforward way), and its row maxima; owned by caller. */
static double *direct_matrix(size_t n, const double *x, const double *s, size_t k, const double *a,
                             double *rowmax)
{
    double *L = dp_calloc(n * k, sizeof *L);
    assert_non_null(L);
    for (size_t j = 0; j < n; j++) {
        double mx = -DP_INF, v = s[j] * s[j];
        for (size_t c = 0; c < k; c++) {
            double z = x[j] - a[c];
            L[j * k + c] = -0.5 * (log(2.0 * M_PI * v) + z * z / v);
            mx = fmax(mx, L[j * k + c]);
        }
        rowmax[j] = mx;
        for (size_t c = 0; c < k; c++)
            L[j * k + c] = exp(L[j * k + c] - mx);
    }
    return L;
}

/* eb_mixsqp_solve_rows on rows generated from a stored matrix is eb_mixsqp_solve on that matrix,
 * bit for bit (same blocks, same arithmetic), through the strided warm start (n >= 131072) too;
 * a NULL generator is refused. */
static void mixsqp_generated_rows_equal_stored_matrix(void **state)
{
    (void)state;
    size_t n = 140000, k = 7;
    double *x = dp_calloc(n, sizeof *x), *s = dp_calloc(n, sizeof *s);
    double *rowmax = dp_calloc(n, sizeof *rowmax);
    assert_non_null(x);
    assert_non_null(s);
    assert_non_null(rowmax);
    dp_err e;
    dp_err_clear(&e);
    gsl_rng *r = dp_rng_alloc(1507, DP_RNG_STREAM_DATA, &e);
    assert_non_null(r);
    for (size_t j = 0; j < n; j++) {
        double u = gsl_rng_uniform(r);
        s[j] = 0.4 + gsl_rng_uniform(r);
        x[j] = (u < 0.7 ? 0.0 : 2.3) + s[j] * gsl_ran_ugaussian(r);
    }
    gsl_rng_free(r);
    double a[7] = {-3.1, -1.7, -0.2, 0.45, 1.9, 2.35, 4.0};
    double *L = direct_matrix(n, x, s, k, a, rowmax);
    double p1[7], p2[7];
    eb_mixsqp_opts o = eb_mixsqp_opts_default();
    eb_mixsqp_info i1, i2;
    assert_int_equal(eb_mixsqp_solve(n, k, L, &o, p1, &i1, &e), DP_OK);
    stored_rows c = {L, k, 0};
    assert_int_equal(eb_mixsqp_solve_rows(n, k, copy_rows, &c, &o, p2, &i2, &e), DP_OK);
    assert_true(c.calls > 1);
    assert_true(i1.warm_iterations > 0);
    assert_int_equal(i1.iterations, i2.iterations);
    assert_int_equal(i1.warm_iterations, i2.warm_iterations);
    assert_int_equal(i1.active_iterations, i2.active_iterations);
    assert_int_equal(i1.status, i2.status);
    assert_memory_equal(&i1.sum_log, &i2.sum_log, sizeof i1.sum_log);
    assert_memory_equal(p1, p2, sizeof p1);
    assert_int_equal(eb_mixsqp_solve_rows(n, k, NULL, NULL, &o, p2, &i2, &e), DP_EINVAL);
    dp_free(L);
    dp_free(rowmax);
    dp_free(x);
    dp_free(s);
}

/* npmle on an evenly spaced grid: eb_nm_fit_prior does not store the likelihood matrix but
 * regenerates it from chains of products out of the grid's middle column (two exponentials a row);
 * its answer must be the one mixsqp gives on the matrix built entry by entry (one exp each), and
 * its log-likelihood the one eb_nm_loglik recomputes by log-sum-exp. Two cases: the default grid on
 * 150,000 observations (the warm start, the vectorised chains), and a given even grid that the data
 * overhang, with standard errors so small against the spacing that rows far from the middle would
 * leave the chains' range and are computed entry by entry (the fallback table), mixed with chained
 * rows near the middle. */
static void npmle_even_grid_unstored_equals_direct_matrix(void **state)
{
    (void)state;
    for (int cs = 0; cs < 3; cs++) {
        size_t n = 150000;
        double *x = dp_calloc(n, sizeof *x), *s = dp_calloc(n, sizeof *s);
        double *rowmax = dp_calloc(n, sizeof *rowmax);
        assert_non_null(x);
        assert_non_null(s);
        assert_non_null(rowmax);
        dp_err e;
        dp_err_clear(&e);
        gsl_rng *r = dp_rng_alloc(1515 + (unsigned long)cs, DP_RNG_STREAM_DATA, &e);
        assert_non_null(r);
        for (size_t j = 0; j < n; j++) {
            double u = gsl_rng_uniform(r);
            s[j] = cs == 1 ? 0.1 + 0.2 * gsl_rng_uniform(r) : 0.5 + gsl_rng_uniform(r);
            if (cs == 2 && j % 10 == 3)
                s[j] = 0.08; /* a tenth of the rows: entries far from x flushed to 0 */
            double th = u < 0.6 ? 0.0 : (u < 0.8 ? -2.0 : 3.0);
            x[j] = cs == 1 ? -9.0 + 18.0 * gsl_rng_uniform(r)
                           : th + 0.3 * gsl_ran_ugaussian(r) + s[j] * gsl_ran_ugaussian(r);
        }
        gsl_rng_free(r);
        double grid[25];
        eb_nm_data d = {n, x, s};
        eb_nm_opts o = eb_nm_opts_default(EB_NM_NPMLE);
        if (cs != 1) {
            o.grid_size = 20;
        } else {
            for (size_t c = 0; c < 25; c++)
                grid[c] = -6.0 + 0.5 * (double)c; /* [-6, 6]: x reaches 9 beyond */
            o.grid = grid;
            o.n_grid = 25;
        }
        eb_nm_fit fit;
        assert_int_equal(eb_nm_fit_prior(&d, &o, &fit, &e), DP_OK);
        assert_int_equal(fit.status, EB_STATUS_CONVERGED);
        /* the log-likelihood reported is the weights' (recomputed independently) */
        assert_close(fit.loglik, eb_nm_loglik(&d, &fit), 1e-12, 0);
        double *L = direct_matrix(n, x, s, fit.k, fit.mean, rowmax), pi[25];
        eb_mixsqp_opts mo = eb_mixsqp_opts_default();
        eb_mixsqp_info info;
        assert_int_equal(eb_mixsqp_solve(n, fit.k, L, &mo, pi, &info, &e), DP_OK);
        assert_int_equal(info.status, EB_STATUS_CONVERGED);
        double ll = eb_mixsqp_loglik(n, fit.k, L, rowmax, pi);
        /* both at the optimum (dual residual <= 1e-8): equal log-likelihoods to rounding */
        assert_close(fit.loglik, ll, 1e-12, 0);
        for (size_t c = 0; c < fit.k; c++)
            assert_close(fit.w[c], pi[c], 0, 1e-6);
        dp_free(L);
        eb_nm_fit_free(&fit);
        dp_free(x);
        dp_free(s);
        dp_free(rowmax);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(loglik_matches_independent_references),
        cmocka_unit_test(point_normal_posterior_matches_quadrature),
        cmocka_unit_test(point_laplace_posterior_matches_quadrature),
        cmocka_unit_test(point_laplace_draws_follow_the_posterior),
        cmocka_unit_test(normal_prior_posterior_closed_form),
        cmocka_unit_test(normal_fit_has_the_closed_form_mode),
        cmocka_unit_test(normal_scale_at_zero_is_boundary),
        cmocka_unit_test(mixsqp_meets_kkt_with_warm_start),
        cmocka_unit_test(npmle_optimal_to_rounding_is_converged),
        cmocka_unit_test(mixsqp_generated_rows_equal_stored_matrix),
        cmocka_unit_test(npmle_even_grid_unstored_equals_direct_matrix),
        cmocka_unit_test(draws_are_seeded_and_follow_the_posterior),
        cmocka_unit_test(bad_input_names_the_field),
        cmocka_unit_test(all_equal_observations_give_one_atom),
        cmocka_unit_test(cancel_flag_stops_fit_solver_and_posterior),
    };
    return cmocka_run_group_tests_name("estimators_nm", tests, NULL, NULL);
}
