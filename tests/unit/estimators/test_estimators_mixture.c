/*
 * Unit tests for estimators/eb_mixture: the exact mixture posterior by hand (our Gaussian-mixture
 * extension; Thm 6 as the point-mass limit; k = 1 is the Gaussian case), EM on homoscedastic and
 * heteroscedastic data recovering a known prior, alternating minimization (Alg 3), statuses,
 * validation and the private mode (clip + Gaussian noise, cost reported).
 */
#include "tests/support/test_util.h"

#include <stdatomic.h>
#include <string.h>

#include <gsl/gsl_errno.h>

#include <gsl/gsl_math.h>
#include <gsl/gsl_randist.h>

#include "common/dp_alloc.h"
#include "estimators/eb_gaussian.h"
#include "estimators/eb_mixture.h"
#include "common/dp_math.h"

#define CF_RTOL 1e-12

static void posterior_by_hand_two_components(void **state)
{
    (void)state;
    /* d = 1, one client x = 0.4, s^2 = 0.25 (sigma_x^2 = 1, n = 4);
     * prior 0.3 N(-1, 0.5) + 0.7 N(1, 0.25) */
    double w[] = {0.3, 0.7}, mu[] = {-1.0, 1.0}, var[] = {0.5, 0.25};
    eb_mix_prior p = {2, 1, w, mu, var};
    const double x[] = {0.4}, n[] = {4};
    eb_gauss_data g = {1, 1, x, n, 1.0};
    double resp[2], pm, pv, shr;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_mix_posterior(&g, &p, resp, &pm, &pv, &shr, &e), DP_OK);
    double v1 = 0.75, v2 = 0.5;
    double l1 = log(0.3) - 0.5 * log(2 * M_PI * v1) - 1.4 * 1.4 / (2 * v1);
    double l2 = log(0.7) - 0.5 * log(2 * M_PI * v2) - 0.6 * 0.6 / (2 * v2);
    double r1 = 1.0 / (1.0 + exp(l2 - l1)), r2 = 1.0 - r1;
    assert_close(resp[0], r1, CF_RTOL, 0);
    assert_close(resp[1], r2, CF_RTOL, 0);
    double a1 = 0.5 / 0.75, a2 = 0.25 / 0.5;
    double m1 = a1 * 0.4 + (1 - a1) * -1.0, m2 = a2 * 0.4 + (1 - a2) * 1.0;
    assert_close(pm, r1 * m1 + r2 * m2, CF_RTOL, 0);
    double ex2 = r1 * (a1 * 0.25 + m1 * m1) + r2 * (a2 * 0.25 + m2 * m2);
    assert_close(pv, ex2 - pm * pm, CF_RTOL, 1e-15);
    assert_close(shr, 1.0 - (r1 * a1 + r2 * a2), CF_RTOL, 0);
}

static void point_masses_give_thm6_and_k1_gives_gaussian(void **state)
{
    (void)state;
    dp_err e;
    dp_err_clear(&e);
    /* Thm 6: w_l ∝ p_l exp(-n |x - mu_l|^2/(2 sigma_x^2)) and theta = sum w_l mu_l */
    double w[] = {0.5, 0.5}, mu[] = {0.0, 1.0}, var[] = {0.0, 0.0};
    eb_mix_prior p = {2, 1, w, mu, var};
    const double x[] = {0.6}, n[] = {3};
    eb_gauss_data g = {1, 1, x, n, 0.5};
    double pm, shr;
    assert_int_equal(eb_mix_posterior(&g, &p, NULL, &pm, NULL, &shr, &e), DP_OK);
    double a0 = -3 * 0.36 / 1.0, a1 = -3 * 0.16 / 1.0;
    double w1 = 1.0 / (1.0 + exp(a0 - a1));
    assert_close(pm, w1 * 1.0, CF_RTOL, 0);
    assert_close(shr, 1.0, 0, 0);
    /* k = 1 equals the Gaussian posterior with known (mu, tau2) */
    double w1s[] = {1.0}, mu1[] = {0.3}, var1[] = {0.2};
    eb_mix_prior p1 = {1, 1, w1s, mu1, var1};
    double pv;
    assert_int_equal(eb_mix_posterior(&g, &p1, NULL, &pm, &pv, NULL, &e), DP_OK);
    eb_gauss_coord c = {0.3, 0.2, 0.0, 0, 0, EB_STATUS_CONVERGED};
    double gm, gv;
    assert_int_equal(eb_gauss_posterior(&g, &c, 0.0, &gm, &gv, NULL, &e), DP_OK);
    assert_close(pm, gm, CF_RTOL, 0);
    assert_close(pv, gv, CF_RTOL, 0);
}

/* synthetic: 3 components in d = 2 */
static void make_data(gsl_rng *r, size_t m, double *x, double *n, bool hetero)
{
    const double w[] = {0.2, 0.5, 0.3}, mu[][2] = {{-3, 0}, {0, 2}, {3, -1}},
                 sd[] = {0.5, 0.3, 0.7};
    for (size_t i = 0; i < m; i++) {
        double u = gsl_rng_uniform(r);
        int l = u < w[0] ? 0 : (u < w[0] + w[1] ? 1 : 2);
        n[i] = hetero ? (double)(1 + gsl_rng_uniform_int(r, 20)) : 10.0;
        for (int j = 0; j < 2; j++) {
            double th = mu[l][j] + gsl_ran_gaussian(r, sd[l]);
            x[i * 2 + j] = th + gsl_ran_gaussian(r, sqrt(1.0 / n[i]));
        }
    }
}

static void em_recovers_prior(bool hetero, uint64_t seed)
{
    size_t m = 6000;
    double *x = dp_calloc(m * 2, sizeof(double)), *n = dp_calloc(m, sizeof(double));
    dp_err e;
    dp_err_clear(&e);
    gsl_rng *r = dp_rng_alloc(seed, DP_RNG_STREAM_DATA, &e);
    make_data(r, m, x, n, hetero);
    eb_gauss_data g = {m, 2, x, n, 1.0};
    double w[3], mu[6], var[3];
    eb_mix_prior p = {3, 2, w, mu, var};
    eb_mix_opts o = eb_mix_opts_default(3);
    o.seed = seed;
    eb_mix_fit_info info;
    assert_int_equal(eb_mix_fit(&g, 0.0, &o, &p, &info, &e), DP_OK);
    print_message(
        "EM %s: status %s, %u iterations, loglik %.4f; w %.3f %.3f %.3f; var %.3f %.3f %.3f\n",
        hetero ? "hetero" : "homo", eb_status_name(info.status), info.iterations, info.loglik, w[0],
        w[1], w[2], var[0], var[1], var[2]);
    assert_int_equal(info.status, EB_STATUS_CONVERGED);
    const double tw[] = {0.2, 0.5, 0.3}, tmu[] = {-3, 0, 0, 2, 3, -1}, tvar[] = {0.25, 0.09, 0.49};
    for (int l = 0; l < 3; l++) {
        assert_close(w[l], tw[l], 0, 0.03);
        assert_close(mu[2 * l], tmu[2 * l], 0, 0.08);
        assert_close(mu[2 * l + 1], tmu[2 * l + 1], 0, 0.08);
        assert_close(var[l], tvar[l], 0.2, 0.02);
    }
    /* EM is a local maximizer: perturbing the fit lowers the likelihood */
    double ll = eb_mix_loglik(&g, 0.0, &p);
    assert_close(ll, info.loglik, 1e-12, 0);
    var[1] *= 1.05;
    assert_true(eb_mix_loglik(&g, 0.0, &p) < ll);
    gsl_rng_free(r);
    dp_free(x);
    dp_free(n);
}

static void em_homoscedastic_recovers_prior(void **state)
{
    (void)state;
    em_recovers_prior(false, 31);
}

static void em_heteroscedastic_recovers_prior(void **state)
{
    (void)state;
    em_recovers_prior(true, 32);
}

static void altmin_finds_point_mass_clusters(void **state)
{
    (void)state;
    size_t m = 3000;
    double *x = dp_calloc(m, sizeof(double)), *n = dp_calloc(m, sizeof(double));
    dp_err e;
    dp_err_clear(&e);
    gsl_rng *r = dp_rng_alloc(41, DP_RNG_STREAM_DATA, &e);
    for (size_t i = 0; i < m; i++) {
        double th = (i % 2) ? 2.0 : -2.0;
        n[i] = 5;
        x[i] = th + gsl_ran_gaussian(r, sqrt(0.5 / 5));
    }
    eb_gauss_data g = {m, 1, x, n, 0.5};
    double w[2], mu[2], var[2];
    eb_mix_prior p = {2, 1, w, mu, var};
    eb_mix_opts o = eb_mix_opts_default(2);
    o.method = EB_MIX_ALTMIN;
    o.tol = 1e-12;
    eb_mix_fit_info info;
    assert_int_equal(eb_mix_fit(&g, 0.0, &o, &p, &info, &e), DP_OK);
    assert_int_equal(info.status, EB_STATUS_CONVERGED);
    assert_close(mu[0], -2.0, 0, 0.02);
    assert_close(mu[1], 2.0, 0, 0.02);
    assert_close(w[0], 0.5, 0, 0.01);
    assert_close(var[0], 0.0, 0, 0);
    gsl_rng_free(r);
    dp_free(x);
    dp_free(n);
}

static void statuses_and_validation(void **state)
{
    (void)state;
    dp_err e;
    const double x[] = {1, 1, 1, 1}, n[] = {2, 2, 2, 2};
    eb_gauss_data g = {4, 1, x, n, 1.0};
    double w[2], mu[2], var[2];
    eb_mix_prior p = {2, 1, w, mu, var};
    eb_mix_opts o = eb_mix_opts_default(2);
    eb_mix_fit_info info;
    dp_err_clear(&e);
    assert_int_equal(eb_mix_fit(&g, 0.0, &o, &p, &info, &e), DP_OK);
    assert_int_equal(info.status, EB_STATUS_UNIDENTIFIABLE);
    o.k = 5;
    dp_err_clear(&e);
    assert_int_equal(eb_mix_fit(&g, 0.0, &o, &p, &info, &e), DP_EINVAL);
    assert_string_equal(e.field, "components");
    o.k = 0;
    dp_err_clear(&e);
    assert_int_equal(eb_mix_fit(&g, 0.0, &o, &p, &info, &e), DP_EINVAL);
    /* max_iter too small is reported, not hidden */
    const double y[] = {-1, -1.1, 0.9, 1.2, 1.0, -0.8}, ny[] = {2, 2, 2, 2, 2, 2};
    eb_gauss_data h = {6, 1, y, ny, 0.1};
    o = eb_mix_opts_default(2);
    o.max_iter = 1;
    dp_err_clear(&e);
    assert_int_equal(eb_mix_fit(&h, 0.0, &o, &p, &info, &e), DP_OK);
    assert_int_equal(info.status, EB_STATUS_MAX_ITER);
    /* prior weights must sum to 1 */
    double bw[] = {0.5, 0.6}, bmu[] = {0, 1}, bvar[] = {1, 1};
    eb_mix_prior bad = {2, 1, bw, bmu, bvar};
    dp_err_clear(&e);
    assert_int_equal(eb_mix_posterior(&h, &bad, NULL, NULL, NULL, NULL, &e), DP_EINVAL);
    assert_string_equal(e.field, "prior.components");
}

/* Issue 15 (ESTIMATORS.md's EM example): two clusters whose means vary less than their noise
 * (s^2 = 0.025) drive both component variances to the floor. That is a boundary estimate, never
 * "converged"; and the posterior sd carries the uncertainty of the estimated component means
 * (eb_mix_mean_var): about s/sqrt(2) and s/sqrt(3) here, not sqrt(floor) = 1.6e-4. */
static void variance_at_floor_is_boundary_and_sd_counts_the_means(void **state)
{
    (void)state;
    dp_err e;
    dp_err_clear(&e);
    const double x[] = {-1.1, -0.9, 1.0, 1.2, 0.9}, n[] = {10, 10, 10, 10, 10};
    eb_gauss_data g = {5, 1, x, n, 0.25};
    double w[2], mu[2], var[2], mv[2], pm[5], pv[5];
    eb_mix_prior p = {2, 1, w, mu, var};
    eb_mix_opts o = eb_mix_opts_default(2);
    eb_mix_fit_info info;
    assert_int_equal(eb_mix_fit(&g, 0.0, &o, &p, &info, &e), DP_OK);
    assert_int_equal(info.status, EB_STATUS_BOUNDARY);
    assert_int_equal(info.n_floor, 2);
    assert_close(info.var_floor, 1e-6 * 0.025, 1e-12, 0);
    assert_close(var[0], info.var_floor, 0, 0);
    assert_int_equal(eb_mix_mean_var(&g, 0.0, &p, mv, &e), DP_OK);
    assert_close(mv[0], (var[0] + 0.025) / 2.0, 1e-9, 0); /* two clients, all responsibility */
    assert_close(mv[1], (var[1] + 0.025) / 3.0, 1e-9, 0);
    assert_int_equal(eb_mix_posterior_fitted(&g, &p, mv, NULL, pm, pv, NULL, &e), DP_OK);
    double a = var[0] / (var[0] + 0.025);
    assert_close(pv[0], a * 0.025 + (1 - a) * (1 - a) * mv[0], 1e-9, 0);
    assert_true(sqrt(pv[0]) > 0.1 && sqrt(pv[4]) > 0.09);
    /* the known-prior posterior (means given) is unchanged by the new path */
    double pv2[5];
    assert_int_equal(eb_mix_posterior(&g, &p, NULL, NULL, pv2, NULL, &e), DP_OK);
    assert_true(sqrt(pv2[0]) < 1e-3);
    /* a spread larger than the noise: interior variances, converged */
    const double y[] = {-1.5, -0.5, -1.0, 1.6, 0.4, 1.0}, ny[] = {10, 10, 10, 10, 10, 10};
    eb_gauss_data h = {6, 1, y, ny, 0.25};
    assert_int_equal(eb_mix_fit(&h, 0.0, &o, &p, &info, &e), DP_OK);
    assert_int_equal(info.n_floor, 0);
    assert_int_equal(info.status, EB_STATUS_CONVERGED);
}

/* Issue 15: a private fit is projected onto its public bounds (post-processing). */
static void projection_onto_public_bounds(void **state)
{
    (void)state;
    double w[] = {0.5, 0.5}, mu[] = {3.0, 4.0, 0.1, 0.2}, var[] = {2.0, 0.5};
    eb_mix_prior p = {2, 2, w, mu, var};
    eb_mix_fit_info info = {0, 0, EB_STATUS_CONVERGED, 0, 0};
    assert_int_equal(eb_mix_project(&p, 1.0, 1.0, &info), 1);
    assert_close(mu[0], 0.6, 1e-15, 0); /* (3, 4) scaled to norm 1 */
    assert_close(mu[1], 0.8, 1e-15, 0);
    assert_close(mu[2], 0.1, 0, 0);
    assert_close(var[0], 1.0, 0, 0);
    assert_close(var[1], 0.5, 0, 0);
    assert_int_equal(info.status, EB_STATUS_BOUNDARY);
    info.status = EB_STATUS_CONVERGED;
    assert_int_equal(eb_mix_project(&p, 2.0, DP_INF, &info), 0);
    assert_int_equal(info.status, EB_STATUS_CONVERGED);
}

static void private_mode_clips_and_accounts(void **state)
{
    (void)state;
    size_t m = 4000;
    double *x = dp_calloc(m, sizeof(double)), *n = dp_calloc(m, sizeof(double)),
           *q = dp_calloc(m, sizeof(double));
    dp_err e;
    dp_err_clear(&e);
    gsl_rng *r = dp_rng_alloc(51, DP_RNG_STREAM_DATA, &e);
    for (size_t i = 0; i < m; i++) {
        n[i] = 20;
        x[i] =
            ((i % 2) ? 1.0 : -1.0) + gsl_ran_gaussian(r, 0.2) + gsl_ran_gaussian(r, sqrt(1.0 / 20));
    }
    eb_gauss_data g = {m, 1, x, n, 1.0};
    /* a large eps0 keeps the noise comparable to the separation so recovery is testable */
    eb_mix_private_opts po = {40.0, 1e-5, EB_CAL_CLASSIC, 1.0, 0.2, DP_NAN, 77};
    eb_mix_private_info pi;
    assert_int_equal(eb_mix_privatize(&g, &po, q, &pi, &e), DP_OK);
    /* Lemma 3 radius with u = 1/20 + 0.04 */
    double u = 0.05 + 0.04;
    double R = 1.0 + 4 * sqrt(u) + 2 * sqrt((2 * log(4000.0) + log(20.0)) * u);
    assert_close(pi.radius, R, CF_RTOL, 0);
    assert_close(pi.rho, 4 * R * R / (2 * pi.sigma * pi.sigma), CF_RTOL, 0);
    assert_true(pi.analytic);
    assert_true(eb_gauss_delta_exact(2 * R, pi.sigma, 40.0) <= 1e-5);
    /* the fit on the messages removes the channel variance: a one-component fit estimates the
     * spread of theta (1 + 0.04 for +-1 plus N(0, 0.2^2)), not theta + noise + channel */
    eb_gauss_data gq = {m, 1, q, n, 1.0};
    double w[1], mu[1], var[1];
    eb_mix_prior p = {1, 1, w, mu, var};
    eb_mix_opts o = eb_mix_opts_default(1);
    eb_mix_fit_info info;
    assert_int_equal(eb_mix_fit(&gq, pi.sigma * pi.sigma, &o, &p, &info, &e), DP_OK);
    print_message(
        "private mixture: R %.3f sigma %.3f rho %.4f clipped %zu -> mu %.3f var %.3f (%s)\n",
        pi.radius, pi.sigma, pi.rho, pi.n_clipped, mu[0], var[0], eb_status_name(info.status));
    assert_int_equal(info.status, EB_STATUS_CONVERGED);
    assert_close(mu[0], 0.0, 0, 0.12);
    assert_close(var[0], 1.04, 0, 0.3);
    gsl_rng_free(r);
    dp_free(x);
    dp_free(n);
    dp_free(q);
}

/* A set cancel flag stops both methods' loops: DP_EBUSY "cancelled", at most one iteration per
 * restart; a clear flag changes nothing. */
static void cancel_flag_stops_the_fit(void **state)
{
    (void)state;
    size_t m = 600;
    double *x = dp_calloc(m * 2, sizeof(double)), *n = dp_calloc(m, sizeof(double));
    dp_err e;
    dp_err_clear(&e);
    gsl_rng *r = dp_rng_alloc(7, DP_RNG_STREAM_DATA, &e);
    make_data(r, m, x, n, false);
    eb_gauss_data g = {m, 2, x, n, 1.0};
    double w[3], mu[6], var[3];
    eb_mix_prior p = {3, 2, w, mu, var};
    atomic_bool cancel;
    atomic_init(&cancel, false);
    for (int meth = 0; meth < 2; meth++) {
        eb_mix_opts o = eb_mix_opts_default(3);
        o.method = meth == 0 ? EB_MIX_EM : EB_MIX_ALTMIN;
        o.cancel = &cancel;
        eb_mix_fit_info info;
        atomic_store(&cancel, false);
        dp_err_clear(&e);
        assert_int_equal(eb_mix_fit(&g, 0.0, &o, &p, &info, &e), DP_OK);
        atomic_store(&cancel, true);
        dp_err_clear(&e);
        assert_int_equal(eb_mix_fit(&g, 0.0, &o, &p, &info, &e), DP_EBUSY);
        assert_non_null(strstr(e.msg, "cancelled"));
    }
    gsl_rng_free(r);
    dp_free(x);
    dp_free(n);
}

int main(void)
{
    gsl_set_error_handler_off(); /* as dpsilod does: GSL must return errors, not abort */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(posterior_by_hand_two_components),
        cmocka_unit_test(variance_at_floor_is_boundary_and_sd_counts_the_means),
        cmocka_unit_test(projection_onto_public_bounds),
        cmocka_unit_test(cancel_flag_stops_the_fit),
        cmocka_unit_test(point_masses_give_thm6_and_k1_gives_gaussian),
        cmocka_unit_test(em_homoscedastic_recovers_prior),
        cmocka_unit_test(em_heteroscedastic_recovers_prior),
        cmocka_unit_test(altmin_finds_point_mass_clusters),
        cmocka_unit_test(statuses_and_validation),
        cmocka_unit_test(private_mode_clips_and_accounts),
    };
    return cmocka_run_group_tests_name("estimators_mixture", tests, NULL, NULL);
}
