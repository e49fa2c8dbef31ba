/*
 * Unit tests for estimators/eb_gaussian: Thm 1 and Thm 2 formulas (docs/REPRODUCTION.md checks
 * C1-C8), hand-computed posteriors, the moment and ML prior fits (ML checked against scipy, see
 * tests/vectors/gen/estimators_refs.py), input validation, and the Monte-Carlo reproduction targets
 * RT1 (Thm 1), RT2 (private Gaussian curve) and RT3 (quantizer) with fixed seeds.
 */
#include "tests/support/test_util.h"

#include <string.h>

#include <gsl/gsl_errno.h>

#include <gsl/gsl_math.h>
#include <gsl/gsl_randist.h>

#include "common/dp_alloc.h"
#include "accounting/calibrate.h"
#include "accounting/zcdp.h"
#include "estimators/eb_gaussian.h"
#include "common/dp_math.h"

/* closed forms evaluated in a different order: a few ulps */
#define CF_RTOL 1e-13

static void thm1_checks_c1_to_c4(void **state)
{
    (void)state;
    /* C1: m=1e4, n=15, sigma_theta=0.1, sigma_x=0.5: a = 0.375, MSE = 0.0062510 */
    double mse = eb_gauss_thm1_mse(0.01, 0.25, 15, 10000);
    double s2 = 0.25 / 15, a = 0.01 / (0.01 + s2);
    assert_close(a, 0.375, CF_RTOL, 0);
    assert_close(mse, s2 * (0.375 + 0.625 / 10000), CF_RTOL, 0);
    assert_close(mse, 0.0062510, 0, 5e-8);
    /* C2 (Remark 1): m=1e4, n=100, sigma_x^2=10, sigma_theta^2=1e-3: the ratio to local is
     * a + (1-a)/m = (tau2 + s^2/m)/(tau2 + s^2) = 0.00101/0.101 = 0.0100000 exactly, as the paper
     * says
     * ("0.0100"); our first hand value "0.0099990" was an arithmetic slip (docs/REPRODUCTION.md).
     */
    assert_close(eb_gauss_thm1_mse(1e-3, 10, 100, 10000) / (10.0 / 100), 0.0100000, 1e-12, 0);
    /* C3: lower bound (30) d (s_theta^2 s_x^2 + s_x^4/(mn)) / (n s_theta^2 + s_x^2) equals Thm 1 */
    double lb30 = (0.01 * 0.25 + 0.0625 / (10000.0 * 15)) / (15 * 0.01 + 0.25);
    assert_close(lb30, mse, CF_RTOL, 0);
    /* Thm 2 with sigma_q = 0 is Thm 1 */
    assert_close(eb_gauss_thm2_mse(0.01, 0.25, 15, 10000, 0.0), mse, CF_RTOL, 0);
}

static void posterior_known_prior_by_hand(void **state)
{
    (void)state;
    /* two clients, d = 1, sigma_x^2 = 2, n = {4, 1}; prior N(1, 0.5) known */
    const double x[] = {3.0, -1.0}, n[] = {4.0, 1.0};
    eb_gauss_data g = {2, 1, x, n, 2.0};
    eb_gauss_coord p = {1.0, 0.5, 0.0, 0, 0, EB_STATUS_CONVERGED};
    double mean[2], var[2], shr[2];
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_gauss_posterior(&g, &p, 0.0, mean, var, shr, &e), DP_OK);
    /* client 0: s^2 = 0.5, a = 0.5: mean 2, var 0.25 (= a s^2), shrinkage 0.5 */
    assert_close(mean[0], 2.0, CF_RTOL, 0);
    assert_close(var[0], 0.25, CF_RTOL, 0);
    assert_close(shr[0], 0.5, CF_RTOL, 0);
    /* client 1: s^2 = 2, a = 0.2: mean 0.2*(-1) + 0.8*1 = 0.6, var 0.4, shrinkage 0.8 */
    assert_close(mean[1], 0.6, CF_RTOL, 0);
    assert_close(var[1], 0.4, CF_RTOL, 0);
    assert_close(shr[1], 0.8, CF_RTOL, 0);
}

static void shrinkage_limits(void **state)
{
    (void)state;
    const double x[] = {0.7, 0.1, -0.4}, n[] = {10, 10, 10};
    eb_gauss_data g = {3, 1, x, n, 1.0};
    double mean[3], shr[3];
    dp_err e;
    dp_err_clear(&e);
    /* tau2 -> 0: everything pooled to mu */
    eb_gauss_coord p0 = {0.25, 0.0, 0.0, 0, 0, EB_STATUS_CONVERGED};
    assert_int_equal(eb_gauss_posterior(&g, &p0, 0.0, mean, NULL, shr, &e), DP_OK);
    for (int i = 0; i < 3; i++) {
        assert_close(mean[i], 0.25, CF_RTOL, 0);
        assert_close(shr[i], 1.0, CF_RTOL, 0);
    }
    /* tau2 huge: local */
    eb_gauss_coord p1 = {0.25, 1e12, 0.0, 0, 0, EB_STATUS_CONVERGED};
    assert_int_equal(eb_gauss_posterior(&g, &p1, 0.0, mean, NULL, shr, &e), DP_OK);
    for (int i = 0; i < 3; i++)
        assert_close(mean[i], x[i], 1e-12, 1e-12);
}

static void moments_fit_by_hand(void **state)
{
    (void)state;
    /* x = {1, 2, 3, 6}, n = 4, sigma_x^2 = 2 -> s^2 = 0.5; mean 3; S = 4+1+0+9 = 14; S/(m-1) =
     * 14/3; tau2 = 14/3 - 0.5 = 25/6; mu_var = (tau2 + s^2)/m = (14/3)/4 */
    const double x[] = {1, 2, 3, 6}, n[] = {4, 4, 4, 4};
    eb_gauss_data g = {4, 1, x, n, 2.0};
    eb_gauss_coord c;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_gauss_fit(&g, NULL, 0.0, EB_GAUSS_MOMENTS, 100, &c, &e), DP_OK);
    assert_close(c.mu, 3.0, CF_RTOL, 0);
    assert_close(c.tau2, 25.0 / 6.0, CF_RTOL, 0);
    assert_close(c.mu_var, 14.0 / 12.0, CF_RTOL, 0);
    assert_int_equal(c.status, EB_STATUS_CONVERGED);
    /* equal n MLE in closed form: tau2 = S/m - s^2 = 3.5 - 0.5 = 3 */
    assert_int_equal(eb_gauss_fit(&g, NULL, 0.0, EB_GAUSS_MLE, 100, &c, &e), DP_OK);
    assert_close(c.tau2, 3.0, CF_RTOL, 0);
    assert_close(c.mu, 3.0, CF_RTOL, 0);
    /* log-likelihood by hand: -1/2 sum [log(2 pi 3.5) + r^2/3.5] */
    double ll = -0.5 * (4 * log(2 * M_PI * 3.5) + 14.0 / 3.5);
    assert_close(c.loglik, ll, CF_RTOL, 0);
}

static void hetero_mle_matches_scipy(void **state)
{
    (void)state;
    const double x[] = {0.31, -0.12, 0.55, 0.08, 0.97, 0.44, -0.35, 0.21};
    const double n[] = {15, 3, 40, 7, 2, 22, 5, 11};
    eb_gauss_data g = {8, 1, x, n, 0.25};
    eb_gauss_coord c;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_gauss_fit(&g, NULL, 0.0, EB_GAUSS_MLE, 200, &c, &e), DP_OK);
    assert_int_equal(c.status, EB_STATUS_CONVERGED);
    assert_true(c.iterations > 0);
    /* scipy L-BFGS-B (estimators_refs.py): 0.270278772238 0.0539359092639 -2.6624643473 */
    assert_close(c.mu, 0.270278772238, 1e-6, 0);
    assert_close(c.tau2, 0.0539359092639, 1e-5, 0);
    assert_close(c.loglik, -2.6624643473, 1e-9, 0);
    /* it is a maximum: nearby points are lower */
    assert_true(eb_gauss_loglik(&g, 0, c.mu, c.tau2 * 1.01, 0) < c.loglik);
    assert_true(eb_gauss_loglik(&g, 0, c.mu + 0.001, c.tau2, 0) < c.loglik);
}

static void boundary_and_unidentifiable_are_reported(void **state)
{
    (void)state;
    dp_err e;
    dp_err_clear(&e);
    eb_gauss_coord c;
    /* spread smaller than the noise: tau2 = 0, boundary */
    const double x[] = {0.01, -0.01, 0.02, 0.0}, n[] = {1, 2, 1, 3};
    eb_gauss_data g = {4, 1, x, n, 1.0};
    assert_int_equal(eb_gauss_fit(&g, NULL, 0.0, EB_GAUSS_MLE, 100, &c, &e), DP_OK);
    assert_int_equal(c.status, EB_STATUS_BOUNDARY);
    assert_close(c.tau2, 0.0, 0, 0);
    /* all equal: unidentifiable */
    const double y[] = {0.5, 0.5, 0.5};
    eb_gauss_data h = {3, 1, y, n, 1.0};
    assert_int_equal(eb_gauss_fit(&h, NULL, 0.0, EB_GAUSS_MLE, 100, &c, &e), DP_OK);
    assert_int_equal(c.status, EB_STATUS_UNIDENTIFIABLE);
    assert_int_equal(eb_gauss_fit(&h, NULL, 0.0, EB_GAUSS_MOMENTS, 100, &c, &e), DP_OK);
    assert_int_equal(c.status, EB_STATUS_UNIDENTIFIABLE);
}

/* Issue 15: a private prior is projected onto its public bounds, |mu| <= r and tau2 <=
 * sigma_theta_bound^2 (post-processing): ESTIMATORS.md's private example fitted mu = 18.6 with
 * r = 1. A coordinate that moved is boundary with the log-likelihood at the projected values; one
 * inside its bounds is untouched. */
static void projection_onto_public_bounds(void **state)
{
    (void)state;
    const double x[] = {18.0, 19.5, 17.9, 0.2, 0.3, -0.1}, n[] = {4, 8, 15, 4, 8, 15};
    eb_gauss_data g = {3, 2, x, n, 0.25};
    eb_gauss_coord c[2] = {{18.6, 0.5, 0.1, 0.0, 3, EB_STATUS_CONVERGED},
                           {0.2, 0.05, 0.1, -1.0, 3, EB_STATUS_CONVERGED}};
    size_t nm = 9, nv = 9;
    eb_gauss_project(&g, 4.0, 1.0, 0.01, c, &nm, &nv);
    assert_int_equal(nm, 1);
    assert_int_equal(nv, 2);
    assert_close(c[0].mu, 1.0, 0, 0);
    assert_close(c[0].tau2, 0.01, 0, 0);
    assert_int_equal(c[0].status, EB_STATUS_BOUNDARY);
    assert_close(c[0].loglik, eb_gauss_loglik(&g, 0, 1.0, 0.01, 4.0), CF_RTOL, 0);
    assert_close(c[1].mu, 0.2, 0, 0);
    assert_close(c[1].tau2, 0.01, 0, 0);
    assert_int_equal(c[1].status, EB_STATUS_BOUNDARY);
    /* one coordinate: below -r is projected to -r; inside its bounds nothing changes */
    eb_gauss_data g1 = {3, 1, x, n, 0.25};
    eb_gauss_coord d = {-18.6, 0.0, 0.1, -7.0, 2, EB_STATUS_MAX_ITER};
    eb_gauss_project(&g1, 0.0, 1.0, DP_INF, &d, &nm, NULL);
    assert_int_equal(nm, 1);
    assert_close(d.mu, -1.0, 0, 0);
    assert_int_equal(d.status, EB_STATUS_MAX_ITER); /* worse than boundary: kept */
    eb_gauss_coord f = {0.5, 0.0, 0.1, -7.0, 2, EB_STATUS_CONVERGED};
    eb_gauss_project(&g1, 0.0, 1.0, DP_INF, &f, &nm, &nv);
    assert_int_equal(nm + nv, 0);
    assert_int_equal(f.status, EB_STATUS_CONVERGED);
    assert_close(f.loglik, -7.0, 0, 0);
}

/* A set cancel flag (the compute pool's deadline / SIGTERM flag, as eb_mix_opts.cancel) stops the
 * fit of both methods with DP_EBUSY "cancelled" before any coordinate is reported; a clear flag
 * changes nothing. The service charges only a fit that returned DP_OK (issue #10). */
static void cancel_flag_stops_the_fit(void **state)
{
    (void)state;
    const double x[] = {0.31, -0.12, 0.55, 0.08, 0.97, 0.44, -0.35, 0.21};
    const double n[] = {15, 3, 40, 7, 2, 22, 5, 11};
    eb_gauss_data g = {8, 1, x, n, 0.25};
    atomic_bool cancel;
    atomic_init(&cancel, false);
    for (int meth = 0; meth < 2; meth++) {
        eb_gauss_method m = meth == 0 ? EB_GAUSS_MLE : EB_GAUSS_MOMENTS;
        eb_gauss_coord plain, c;
        dp_err e;
        dp_err_clear(&e);
        assert_int_equal(eb_gauss_fit(&g, NULL, 0.0, m, 200, &plain, &e), DP_OK);
        assert_int_equal(eb_gauss_fit_cancel(&g, NULL, 0.0, m, 200, &cancel, &c, &e), DP_OK);
        assert_true(c.tau2 == plain.tau2 && c.mu == plain.mu && c.iterations == plain.iterations);
        atomic_store(&cancel, true);
        dp_err_clear(&e);
        assert_int_equal(eb_gauss_fit_cancel(&g, NULL, 0.0, m, 200, &cancel, &c, &e), DP_EBUSY);
        assert_non_null(strstr(e.msg, "cancelled"));
        atomic_store(&cancel, false);
    }
}

static void bad_input_names_the_field(void **state)
{
    (void)state;
    dp_err e;
    eb_gauss_coord c[2];
    const double x1[] = {0.5}, n1[] = {3};
    eb_gauss_data one = {1, 1, x1, n1, 1.0};
    dp_err_clear(&e);
    assert_int_equal(eb_gauss_fit(&one, NULL, 0.0, EB_GAUSS_MLE, 100, c, &e), DP_EINVAL);
    assert_string_equal(e.field, "clients");
    const double x[] = {0.5, DP_NAN}, n[] = {3, 4};
    eb_gauss_data g = {2, 1, x, n, 1.0};
    dp_err_clear(&e);
    assert_int_equal(eb_gauss_fit(&g, NULL, 0.0, EB_GAUSS_MLE, 100, c, &e), DP_EINVAL);
    assert_string_equal(e.field, "clients[1].mean");
    const double x2[] = {0.5, 0.1}, n2[] = {3, 0.5};
    eb_gauss_data g2 = {2, 1, x2, n2, 1.0};
    dp_err_clear(&e);
    assert_int_equal(eb_gauss_fit(&g2, NULL, 0.0, EB_GAUSS_MLE, 100, c, &e), DP_EINVAL);
    assert_string_equal(e.field, "clients[1].n");
    eb_gauss_data g3 = {2, 1, x2, n1, -1.0};
    dp_err_clear(&e);
    assert_int_equal(eb_gauss_fit(&g3, NULL, 0.0, EB_GAUSS_MLE, 100, c, &e), DP_EINVAL);
    assert_string_equal(e.field, "noise_variance");
}

static void pooled_sigma_x2_by_hand(void **state)
{
    (void)state;
    const double n[] = {3, 1, 5}, v[] = {0.2, 9.0, 0.5};
    double s;
    dp_err e;
    dp_err_clear(&e);
    /* (2*0.2 + 4*0.5) / (2 + 4) = 0.4; n = 1 carries no information */
    assert_int_equal(eb_gauss_pool_sigma_x2(3, n, v, &s, &e), DP_OK);
    assert_close(s, 0.4, CF_RTOL, 0);
    const double n1[] = {1, 1};
    dp_err_clear(&e);
    assert_int_equal(eb_gauss_pool_sigma_x2(2, n1, v, &s, &e), DP_EINVAL);
}

static void d_dim_fits_each_coordinate(void **state)
{
    (void)state;
    /* coordinate 1 is coordinate 0 shifted by 10 and scaled by 2 */
    const double x[] = {1, 12, 2, 14, 3, 16, 6, 22}, n[] = {4, 4, 4, 4};
    eb_gauss_data g = {4, 2, x, n, 2.0};
    eb_gauss_coord c[2];
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_gauss_fit(&g, NULL, 0.0, EB_GAUSS_MOMENTS, 100, c, &e), DP_OK);
    assert_close(c[0].mu, 3.0, CF_RTOL, 0);
    assert_close(c[1].mu, 16.0, CF_RTOL, 0);
    assert_close(c[1].tau2, 4 * 14.0 / 3.0 - 0.5, CF_RTOL, 0);
}

/* ---- Monte-Carlo reproduction targets ---- */

#define RT_M    10000
#define RT_N    15
#define RT_REPS 200

/* One replicate of the Thm 1 / Thm 2 experiment; returns the mean squared error over clients.
 * sigma_q = 0: non-private. channel < 0: Gaussian noise of sd sigma_q added after clipping to b by
 * the test itself (RT2, paper's calibration at every eps0); channel = quantizer bits otherwise. */
static double rt_rep(gsl_rng *r, double *x, double *th, double *q, double mu, double sq_added,
                     double b, unsigned bits, double sigma_q, uint64_t seed)
{
    const double st = 0.1, sx = 0.5;
    static double nn[RT_M]; /* test-only: single-threaded cmocka binary */
    for (int i = 0; i < RT_M; i++) {
        th[i] = mu + gsl_ran_gaussian_ziggurat(r, st);
        x[i] = th[i] + gsl_ran_gaussian_ziggurat(r, sx / sqrt(RT_N));
        nn[i] = RT_N;
    }
    eb_gauss_data g = {RT_M, 1, x, nn, sx * sx};
    dp_err e;
    dp_err_clear(&e);
    const double *msg = x;
    double sq2 = 0.0;
    if (bits > 0) {
        eb_gauss_private_opts o = {0};
        o.channel = EB_CHANNEL_QUANTIZE;
        o.bits = bits;
        o.r = 1.0;
        o.sigma_theta = st;
        o.b = DP_NAN;
        o.seed = seed;
        eb_gauss_private_info info;
        assert_int_equal(eb_gauss_privatize(&g, &o, q, &info, &e), DP_OK);
        assert_close(info.b, b, 0, 5e-5);
        sq2 = info.sigma_q * info.sigma_q;
        msg = q;
    } else if (sq_added > 0) {
        for (int i = 0; i < RT_M; i++)
            q[i] = eb_clip(x[i], b) + gsl_ran_gaussian_ziggurat(r, sq_added);
        sq2 = sq_added * sq_added;
        msg = q;
    }
    (void)sigma_q;
    /* server: mu by the plain mean of the messages (Thm 1/2), tau2 known */
    eb_gauss_data gm = {RT_M, 1, msg, nn, sx * sx};
    double tau2 = st * st;
    eb_gauss_coord c;
    assert_int_equal(eb_gauss_fit(&gm, &tau2, sq2, EB_GAUSS_MOMENTS, 10, &c, &e), DP_OK);
    /* client: raw mean, Thm 2 weight */
    assert_int_equal(eb_gauss_posterior(&g, &c, sq2 / (RT_M - 1.0), q, NULL, NULL, &e), DP_OK);
    double s = 0.0;
    for (int i = 0; i < RT_M; i++)
        s += (q[i] - th[i]) * (q[i] - th[i]);
    return s / RT_M;
}

typedef struct rt_buf {
    double *x, *th, *q;
} rt_buf;

static int rt_setup(void **state)
{
    rt_buf *b = dp_calloc(1, sizeof *b);
    b->x = dp_calloc(RT_M, sizeof(double));
    b->th = dp_calloc(RT_M, sizeof(double));
    b->q = dp_calloc(RT_M, sizeof(double));
    *state = b;
    return 0;
}

static int rt_teardown(void **state)
{
    rt_buf *b = *state;
    dp_free(b->x);
    dp_free(b->th);
    dp_free(b->q);
    dp_free(b);
    return 0;
}

static void rt1_thm1_mse_within_one_percent(void **state)
{
    rt_buf *bf = *state;
    dp_err e;
    dp_err_clear(&e);
    gsl_rng *r = dp_rng_alloc(20260101, DP_RNG_STREAM_DATA, &e);
    double acc = 0.0;
    for (int t = 0; t < RT_REPS; t++)
        acc += rt_rep(r, bf->x, bf->th, bf->q, 0.37, 0.0, 0, 0, 0, 0);
    acc /= RT_REPS;
    double ref = eb_gauss_thm1_mse(0.01, 0.25, RT_N, RT_M); /* 0.0062510 */
    print_message("RT1: MC MSE %.7f over %d reps, Thm 1 %.7f, local %.7f\n", acc, RT_REPS, ref,
                  0.25 / RT_N);
    assert_close(acc, ref, 0.01, 0);
    gsl_rng_free(r);
}

static void rt2_private_gaussian_curve_within_two_percent(void **state)
{
    rt_buf *bf = *state;
    dp_err e;
    dp_err_clear(&e);
    gsl_rng *r = dp_rng_alloc(20260102, DP_RNG_STREAM_DATA, &e);
    const double eps[] = {0.1, 0.25, 0.5, 1, 2, 4, 8, 16};
    /* docs/REPRODUCTION.md C6 analytic MSEs (paper calibration sigma_q^2 = 8 b^2 ln(2/delta)/eps0^2
     * at every eps0) */
    const double c6[] = {.016600, .016261, .015215, .012572, .009151, .007168, .006496, .006313};
    const double b = 2.0531, delta = 1e-5;
    double prev = DP_INF;
    for (size_t k = 0; k < 8; k++) {
        double sq = 2.0 * b * sqrt(2.0 * log(2.0 / delta)) / eps[k];
        double ana = eb_gauss_thm2_mse(0.01, 0.25, RT_N, RT_M, sq * sq);
        assert_close(ana, c6[k], 0, 6e-7); /* our formula reproduces the C6 table */
        double acc = 0.0;
        for (int t = 0; t < RT_REPS; t++)
            acc += rt_rep(r, bf->x, bf->th, bf->q, 0.5, sq, b, 0, sq, 0);
        acc /= RT_REPS;
        print_message("RT2: eps0 %5.2f MC MSE %.6f analytic %.6f\n", eps[k], acc, ana);
        assert_close(acc, ana, 0.02, 0);
        /* bracketed by the non-private and local values, decreasing in eps0 */
        assert_true(ana < 0.25 / RT_N && ana > eb_gauss_thm1_mse(0.01, 0.25, RT_N, RT_M));
        assert_true(ana < prev);
        prev = ana;
    }
    gsl_rng_free(r);
}

static void rt3_quantizer_matches_c5(void **state)
{
    rt_buf *bf = *state;
    dp_err e;
    dp_err_clear(&e);
    gsl_rng *r = dp_rng_alloc(20260103, DP_RNG_STREAM_DATA, &e);
    const unsigned bits[] = {1, 2, 4, 8};
    const double c5[] = {0.0064131, 0.0062693, 0.0062518, 0.0062510};
    for (size_t k = 0; k < 4; k++) {
        double sq = eb_quantize_sigma(2.0531, bits[k]);
        double ana = eb_gauss_thm2_mse(0.01, 0.25, RT_N, RT_M, sq * sq);
        assert_close(ana, c5[k], 0, 2e-7);
        double acc = 0.0;
        for (int t = 0; t < RT_REPS; t++)
            acc +=
                rt_rep(r, bf->x, bf->th, bf->q, 0.5, 0.0, 2.05310, bits[k], sq, 1000 + (uint64_t)t);
        acc /= RT_REPS;
        print_message("RT3: k %u MC MSE %.7f analytic %.7f\n", bits[k], acc, ana);
        /* the quantizer's true variance is below its bound, so the MSE can only be slightly lower
         */
        assert_close(acc, ana, 0.01, 0);
    }
    gsl_rng_free(r);
}

/* ---- local DP with tau2 estimated: the weight counts tau2-hat's own noise (issue 15) ---- */

/* eb_gauss_ldp_weights by hand: Thm 2's sigma_q^2/(m-1) alone when tau2 is known; with tau2
 * estimated one sd of tau2-hat, sqrt(2/(m-1)) (tau2 + mean s_i^2 + sigma_q^2), capped at the room
 * left below the public bound. */
static void ldp_weights_by_hand(void **state)
{
    (void)state;
    double x[4] = {0, 0, 0, 0}, n[4] = {1, 2, 4, 4};
    eb_gauss_data g = {4, 1, x, n, 0.5}; /* mean s_i^2 = 0.5 (1 + 1/2 + 1/4 + 1/4) / 4 = 0.25 */
    eb_gauss_coord c = {0.1, 0.05, 0.0, 0.0, 0, EB_STATUS_CONVERGED};
    double w;
    eb_gauss_ldp_weights(&g, &c, 3.0, DP_INF, false, &w);
    assert_close(w, 1.0, CF_RTOL, 0);
    eb_gauss_ldp_weights(&g, &c, 3.0, DP_INF, true, &w);
    assert_close(w, 1.0 + sqrt(2.0 / 3.0) * 3.3, CF_RTOL, 0);
    eb_gauss_ldp_weights(&g, &c, 3.0, 0.25, true, &w); /* room 0.2 < sd */
    assert_close(w, 1.2, CF_RTOL, 0);
    c.tau2 = 0.25; /* at the bound: no room */
    eb_gauss_ldp_weights(&g, &c, 3.0, 0.25, true, &w);
    assert_close(w, 1.0, CF_RTOL, 0);
}

/* bench/eb_central's population at m = 10^5, eps0 = 2: local DP cannot resolve tau2 (its sd is
 * ~50x tau2), and with Thm 2's weight alone a tau2-hat at 0 pulled every client 81 % of the way
 * to the mean, for a mean MSE of 1.2 s^2 over 200 repetitions (worse than no pooling). With
 * tau2-hat's noise in the weight no repetition may be worse than no pooling; 6 repetitions,
 * fixed seeds (with Thm 2's weight alone the first of them has 1.335 s^2). */
static void ldp_estimated_tau2_never_worse_than_no_pooling(void **state)
{
    (void)state;
    const size_t m = 100000;
    const double sx2 = 0.25, nobs = 22, s2 = sx2 / nobs, stb = 0.5;
    double *x = dp_calloc(m, sizeof(double)), *th = dp_calloc(m, sizeof(double));
    double *q = dp_calloc(m, sizeof(double)), *nn = dp_calloc(m, sizeof(double));
    double *post = dp_calloc(m, sizeof(double));
    assert_non_null(x && th && q && nn && post);
    dp_err e;
    dp_err_clear(&e);
    gsl_rng *r = dp_rng_alloc(20261127, DP_RNG_STREAM_DATA, &e);
    for (uint64_t rep = 0; rep < 6; rep++) {
        for (size_t i = 0; i < m; i++) {
            th[i] = 0.3 + gsl_ran_gaussian_ziggurat(r, 0.15);
            x[i] = th[i] + gsl_ran_gaussian_ziggurat(r, sqrt(s2));
            nn[i] = nobs;
        }
        eb_gauss_data g = {m, 1, x, nn, sx2};
        eb_gauss_private_opts o = {.channel = EB_CHANNEL_GAUSSIAN,
                                   .eps0 = 2.0,
                                   .delta = 1e-5,
                                   .cal = EB_CAL_CLASSIC,
                                   .r = 1.0,
                                   .sigma_theta = stb,
                                   .b = DP_NAN,
                                   .range_mode = EB_RANGE_PAPER,
                                   .seed = 100 + rep};
        eb_gauss_private_info pi;
        assert_int_equal(eb_gauss_privatize(&g, &o, q, &pi, &e), DP_OK);
        eb_gauss_data sent = g;
        sent.x = q;
        double extra = pi.sigma_q * pi.sigma_q, w;
        eb_gauss_coord c;
        assert_int_equal(eb_gauss_fit(&sent, NULL, extra, EB_GAUSS_MLE, 1000, &c, &e), DP_OK);
        eb_gauss_project(&sent, extra, 1.0, stb * stb, &c, NULL, NULL);
        eb_gauss_ldp_weights(&sent, &c, extra, stb * stb, true, &w);
        assert_int_equal(eb_gauss_posterior(&g, &c, w, post, NULL, NULL, &e), DP_OK);
        double sse = 0.0;
        for (size_t i = 0; i < m; i++)
            sse += (post[i] - th[i]) * (post[i] - th[i]);
        double rel = sse / (double)m / s2;
        print_message("local DP m = 1e5, eps0 2, rep %u: tau2-hat %.4f, MSE %.3f s^2\n",
                      (unsigned)rep, c.tau2, rel);
        assert_true(rel < 1.0);
    }
    gsl_rng_free(r);
    dp_free(x);
    dp_free(th);
    dp_free(q);
    dp_free(nn);
    dp_free(post);
}

/* ---- central DP (issue 15) ---- */

/* Twelve client means, two far outside b = 2 so clipping matters, heteroscedastic n. */
static const double CX[12] = {0.31, -0.42, 1.17, 0.05, 2.9,  -0.77,
                              0.66, -3.4,  0.12, 0.93, -0.2, 1.41};
static const double CN[12] = {4, 9, 16, 4, 25, 9, 4, 16, 9, 4, 25, 16};

/* With noise multiplier 0 the central estimate is exactly the moments estimate of the clipped
 * means (mean, variance, Var(mu-hat)), with tau2 estimated and with tau2 given. */
static void central_noise_zero_equals_clipped_moments(void **state)
{
    (void)state;
    double clipped[12];
    for (size_t i = 0; i < 12; i++)
        clipped[i] = eb_clip(CX[i], 2.0);
    eb_gauss_data g = {12, 1, CX, CN, 0.8}, gc = {12, 1, clipped, CN, 0.8};
    eb_gauss_central_opts o = {2.0, 0.0, 100.0, DP_INF, 5};
    eb_gauss_coord c, ref;
    eb_gauss_central_info ci;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_gauss_central_fit(&g, NULL, &o, &c, &ci, &e), DP_OK);
    assert_int_equal(eb_gauss_fit(&gc, NULL, 0.0, EB_GAUSS_MOMENTS, 100, &ref, &e), DP_OK);
    assert_int_equal(ci.n_clipped, 2);
    assert_close(c.mu, ref.mu, 1e-13, 1e-15);
    assert_close(c.tau2, ref.tau2, 1e-12, 1e-15);
    assert_close(c.mu_var, ref.mu_var, 1e-12, 0);
    assert_true(c.tau2 > 0);
    assert_int_equal(c.status, EB_STATUS_CONVERGED);
    assert_true(isnan(c.loglik)); /* the raw data's likelihood is not released */
    assert_close(ci.weight_extra, 0.0, 0, 0);
    double tk = 0.3;
    assert_int_equal(eb_gauss_central_fit(&g, &tk, &o, &c, &ci, &e), DP_OK);
    assert_int_equal(eb_gauss_fit(&gc, &tk, 0.0, EB_GAUSS_MOMENTS, 100, &ref, &e), DP_OK);
    assert_int_equal(ci.k, 1);
    assert_close(c.mu, ref.mu, 1e-13, 1e-15);
    assert_close(c.tau2, 0.3, 0, 0);
    assert_close(c.mu_var, ref.mu_var, 1e-12, 0);
    /* and the posterior is then the non-private one on the raw means */
    double pm[12], pr[12];
    eb_gauss_coord refp = ref;
    assert_int_equal(eb_gauss_posterior(&g, &c, ci.weight_extra, pm, NULL, NULL, &e), DP_OK);
    assert_int_equal(eb_gauss_posterior(&g, &refp, 0.0, pr, NULL, NULL, &e), DP_OK);
    for (size_t i = 0; i < 12; i++)
        assert_close(pm[i], pr[i], 1e-13, 1e-15);
}

/* The noise sds follow the sensitivities (2b and b^2 per coordinate, scaled L2 sensitivity
 * sqrt(k d)), and the noise actually added to the sum has that sd (Monte Carlo over seeds). */
static void central_noise_matches_its_sensitivity(void **state)
{
    (void)state;
    eb_gauss_central_opts o = {1.5, 0.7, 100.0, DP_INF, 0};
    eb_gauss_central_info ci;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_gauss_central_calibrate(3, false, &o, &ci, &e), DP_OK);
    assert_close(ci.l2_sens, sqrt(6.0), 1e-15, 0);
    assert_close(ci.sens_sum, 3.0, 0, 0);
    assert_close(ci.sens_sq, 2.25, 0, 0);
    assert_close(ci.sd_sum, 0.7 * sqrt(6.0) * 3.0, 1e-15, 0);
    assert_close(ci.sd_sq, 0.7 * sqrt(6.0) * 2.25, 1e-15, 0);
    assert_close(ci.rho, 1.0 / (2.0 * 0.49), 1e-15, 0);
    assert_int_equal(eb_gauss_central_calibrate(3, true, &o, &ci, &e), DP_OK);
    assert_close(ci.sd_sum, 0.7 * sqrt(3.0) * 3.0, 1e-15, 0);
    assert_true(isnan(ci.sd_sq));
    /* empirical sd of mu-hat around the clean clipped mean: sd_sum / m */
    eb_gauss_data g = {12, 1, CX, CN, 0.8};
    eb_gauss_central_opts z0 = o;
    z0.z = 0.0;
    eb_gauss_coord c0, c;
    double tk = 0.3, acc = 0.0;
    assert_int_equal(eb_gauss_central_fit(&g, &tk, &z0, &c0, &ci, &e), DP_OK);
    const int reps = 4000;
    for (int t = 0; t < reps; t++) {
        o.seed = (uint64_t)t + 1;
        assert_int_equal(eb_gauss_central_fit(&g, &tk, &o, &c, &ci, &e), DP_OK);
        acc += (c.mu - c0.mu) * (c.mu - c0.mu);
    }
    double want = ci.sd_sum / 12.0;
    assert_close(sqrt(acc / reps), want, 0.05, 0);
    assert_close(ci.weight_extra, ci.sd_sum * ci.sd_sum / (12.0 * 11.0), 1e-14, 0);
    /* with tau2 estimated the weight also carries one sd of the noise in tau2-hat */
    eb_gauss_coord cu;
    eb_gauss_central_info cu_i;
    assert_int_equal(eb_gauss_central_fit(&g, NULL, &o, &cu, &cu_i, &e), DP_OK);
    assert_close(cu_i.weight_extra, cu_i.sd_sum * cu_i.sd_sum / (12.0 * 11.0) + cu_i.sd_sq / 11.0,
                 1e-14, 0);
    /* the noise is seeded: the same seed gives the same release */
    eb_gauss_coord c2;
    assert_int_equal(eb_gauss_central_fit(&g, &tk, &o, &c2, &ci, &e), DP_OK);
    assert_close(c2.mu, c.mu, 0, 0);
}

/* The event a central run charges, gaussian(z) on the scaled release of L2 sensitivity sqrt(kd)
 * with sd z sqrt(kd): its zCDP is the Gaussian mechanism's closed form Delta^2/(2 sigma^2) (Bun &
 * Steinke 2016, Prop. 1.6), its epsilon by Bun & Steinke's conversion the closed form
 * rho + 2 sqrt(rho log(1/delta)) (Prop. 1.3), and the (tighter) epsilon the service reports
 * (CKS 2020 conversion, calibrated) holds exactly for the Gaussian mechanism: the analytic delta
 * at that epsilon (Balle & Wang 2018, Thm 8) is at most the target delta. */
static void central_event_epsilon_is_the_gaussian_mechanism(void **state)
{
    (void)state;
    const double eps = 1.0, delta = 1e-5;
    acct_event *open = acct_event_gaussian(DP_NAN);
    acct_calib_zcdp_ctx zc = {delta, ACCT_ZCDP_CKS2020};
    acct_calib_result cr;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(acct_calibrate(open, eps, acct_calib_zcdp_eps, &zc, &cr, &e), DP_OK);
    acct_event_free(open);
    assert_true(cr.epsilon <= eps && cr.epsilon > eps * (1 - 1e-6));
    eb_gauss_central_opts o = {2.0, cr.value, 1.0, DP_INF, 0};
    eb_gauss_central_info ci;
    assert_int_equal(eb_gauss_central_calibrate(2, false, &o, &ci, &e), DP_OK);
    double sigma = ci.sd_sum / ci.sens_sum; /* sd on the scaled release */
    assert_close(sigma, cr.value * ci.l2_sens, 1e-15, 0);
    acct_event *ev = acct_event_gaussian(cr.value);
    double rho;
    assert_int_equal(acct_zcdp_eval(ev, &rho, &e), DP_OK);
    acct_event_free(ev);
    assert_close(rho, ci.l2_sens * ci.l2_sens / (2.0 * sigma * sigma), 1e-13, 0);
    assert_close(rho, ci.rho, 1e-13, 0);
    double bs, order;
    assert_int_equal(acct_zcdp_to_epsilon(rho, delta, ACCT_ZCDP_BS2016, &bs, &order, &e), DP_OK);
    assert_close(bs, rho + 2.0 * sqrt(rho * log(1.0 / delta)), 1e-13, 0);
    assert_true(cr.epsilon < bs);
    double dex = eb_gauss_delta_exact(ci.l2_sens, sigma, cr.epsilon);
    assert_true(dex <= delta);
    assert_true(dex > 0.1 * delta); /* and not wildly loose */
}

/* Projection: a noisy mean beyond r and a variance beyond its bound land on the bounds, and the
 * coordinate reports boundary. */
static void central_prior_is_projected_onto_public_bounds(void **state)
{
    (void)state;
    eb_gauss_data g = {12, 1, CX, CN, 0.8};
    eb_gauss_central_opts o = {2.0, 0.0, 0.05, 0.01, 0};
    eb_gauss_coord c;
    eb_gauss_central_info ci;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_gauss_central_fit(&g, NULL, &o, &c, &ci, &e), DP_OK);
    assert_close(c.mu, 0.05, 0, 0);
    assert_close(c.tau2, 0.01, 0, 0);
    assert_int_equal(ci.proj_mean, 1);
    assert_int_equal(ci.proj_var, 1);
    assert_int_equal(c.status, EB_STATUS_BOUNDARY);
    /* a large noise pushes |mu| far beyond r on some seed: always projected */
    o.z = 50.0;
    o.r = 1.0;
    o.tau2_max = DP_INF;
    size_t moved = 0;
    for (uint64_t t = 1; t <= 50; t++) {
        o.seed = t;
        assert_int_equal(eb_gauss_central_fit(&g, NULL, &o, &c, &ci, &e), DP_OK);
        assert_true(c.mu >= -1.0 && c.mu <= 1.0);
        assert_true(c.tau2 >= 0);
        moved += ci.proj_mean;
    }
    assert_true(moved > 25);
    /* bad options name the field */
    o.b = -1;
    assert_int_equal(eb_gauss_central_fit(&g, NULL, &o, &c, &ci, &e), DP_EINVAL);
    assert_string_equal(e.field, "privacy.b");
}

int main(void)
{
    gsl_set_error_handler_off(); /* as dpsilod does: GSL must return errors, not abort */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(thm1_checks_c1_to_c4),
        cmocka_unit_test(posterior_known_prior_by_hand),
        cmocka_unit_test(shrinkage_limits),
        cmocka_unit_test(moments_fit_by_hand),
        cmocka_unit_test(hetero_mle_matches_scipy),
        cmocka_unit_test(boundary_and_unidentifiable_are_reported),
        cmocka_unit_test(projection_onto_public_bounds),
        cmocka_unit_test(bad_input_names_the_field),
        cmocka_unit_test(pooled_sigma_x2_by_hand),
        cmocka_unit_test(d_dim_fits_each_coordinate),
        cmocka_unit_test(cancel_flag_stops_the_fit),
        cmocka_unit_test(ldp_weights_by_hand),
        cmocka_unit_test(ldp_estimated_tau2_never_worse_than_no_pooling),
        cmocka_unit_test(central_noise_zero_equals_clipped_moments),
        cmocka_unit_test(central_noise_matches_its_sensitivity),
        cmocka_unit_test(central_event_epsilon_is_the_gaussian_mechanism),
        cmocka_unit_test(central_prior_is_projected_onto_public_bounds),
        cmocka_unit_test_setup_teardown(rt1_thm1_mse_within_one_percent, rt_setup, rt_teardown),
        cmocka_unit_test_setup_teardown(rt2_private_gaussian_curve_within_two_percent, rt_setup,
                                        rt_teardown),
        cmocka_unit_test_setup_teardown(rt3_quantizer_matches_c5, rt_setup, rt_teardown),
    };
    return cmocka_run_group_tests_name("estimators_gaussian", tests, NULL, NULL);
}
