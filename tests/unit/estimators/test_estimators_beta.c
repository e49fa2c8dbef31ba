/*
 * Unit tests for estimators/eb_beta: known-prior posterior (docs/REPRODUCTION.md C9), the
 * leave-one-out moment variants of eq. 6 by hand (with both clamps), beta-binomial ML against scipy
 * (tests/vectors/gen/estimators_refs.py), validation, and the reproduction targets RT4 (Bernoulli
 * gains, literal estimator), RT5 (known-prior ratio n/(S+n)) and RT6 (one-bit private scheme fails,
 * two-bit works), all with fixed seeds.
 */
#include "tests/support/test_util.h"

#include <string.h>

#include <gsl/gsl_errno.h>

#include <gsl/gsl_randist.h>

#include "common/dp_alloc.h"
#include "estimators/eb_beta.h"

#define CF_RTOL 1e-13

static void known_prior_c9_and_posterior_by_hand(void **state)
{
    (void)state;
    /* C9: Beta(2,5), n = 14: MSE 10/(7*8*21) = 0.0085034; local 0.0127551; ratio 2/3 */
    assert_close(eb_beta_known_mse(2, 5, 14), 10.0 / (7 * 8 * 21), CF_RTOL, 0);
    const double z[] = {3}, n[] = {14};
    eb_beta_data b = {1, z, n};
    double mean, sd, shr;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_beta_posterior_known(&b, 2, 5, &mean, &sd, &shr, &e), DP_OK);
    /* posterior Beta(5, 16): mean 5/21, var 5*16/(21^2*22) */
    assert_close(mean, 5.0 / 21.0, CF_RTOL, 0);
    assert_close(sd, sqrt(80.0 / (441.0 * 22.0)), CF_RTOL, 0);
    assert_close(shr, 1.0 - 14.0 / 21.0, CF_RTOL, 0);
}

static void loo_variants_by_hand(void **state)
{
    (void)state;
    const double z[] = {1, 2, 3, 4}, n[] = {4, 4, 4, 4};
    eb_beta_data b = {4, z, n};
    double mean[4], sd[4], shr[4];
    eb_beta_counts c;
    eb_status st;
    dp_err e;
    dp_err_clear(&e);
    /* client 0 sees {0.5, 0.75, 1}: mu 0.75, var (divisor m-2) 0.0625.
     * paper: S = 0.75*0.25/0.0625 - 1 = 2, a = 4/6, p = (2/3) 0.25 + (1/3) 0.75 */
    assert_int_equal(eb_beta_posterior_moments(&b, EB_BETA_PAPER, true, mean, sd, shr, &c, &st, &e),
                     DP_OK);
    assert_close(mean[0], 2.0 / 3.0 * 0.25 + 1.0 / 3.0 * 0.75, CF_RTOL, 1e-15);
    assert_close(shr[0], 1.0 / 3.0, CF_RTOL, 1e-15);
    double p = mean[0];
    assert_close(sd[0], sqrt(p * (1 - p) / (2 + 4 + 1)), CF_RTOL, 0);
    /* paper_no_minus1: S = 3, a = 4/7 */
    assert_int_equal(
        eb_beta_posterior_moments(&b, EB_BETA_PAPER_NO_MINUS1, true, mean, sd, shr, &c, &st, &e),
        DP_OK);
    assert_close(mean[0], 4.0 / 7.0 * 0.25 + 3.0 / 7.0 * 0.75, CF_RTOL, 1e-15);
    /* unbiased: U = z(z-1)/12 = {0, 1/6, 1/2, 1}; client 0: mean U = 5/9 < mu^2 = 0.5625, so
     * sigma2 <= 0: clamped to full pooling (a = 0, p = mu = 0.75, sd 0) */
    assert_int_equal(
        eb_beta_posterior_moments(&b, EB_BETA_UNBIASED, true, mean, sd, shr, &c, &st, &e), DP_OK);
    assert_close(mean[0], 0.75, CF_RTOL, 1e-15);
    assert_close(sd[0], 0.0, 0, 0);
    assert_close(shr[0], 1.0, 0, 0);
    assert_true(c.pooled >= 1);
}

static void over_dispersed_clamps_to_local(void **state)
{
    (void)state;
    /* rates {0, 1, 0, 1, 0}: LOO variance exceeds mu(1-mu) + ... so S <= 0 -> local (a = 1) */
    const double z[] = {0, 5, 0, 5, 0}, n[] = {5, 5, 5, 5, 5};
    eb_beta_data b = {5, z, n};
    double mean[5], shr[5];
    eb_beta_counts c;
    eb_status st;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(
        eb_beta_posterior_moments(&b, EB_BETA_PAPER, true, mean, NULL, shr, &c, &st, &e), DP_OK);
    for (int i = 0; i < 5; i++) {
        assert_close(mean[i], z[i] / 5.0, 0, 1e-15);
        assert_close(shr[i], 0.0, 0, 0);
    }
    assert_int_equal(c.local, 5);
}

static void mle_matches_scipy(void **state)
{
    (void)state;
    const double z[] = {3, 7, 1, 0, 5, 9, 4, 6, 2, 8, 5, 3};
    const double n[] = {10, 12, 8, 5, 10, 14, 9, 10, 10, 11, 7, 6};
    eb_beta_data b = {12, z, n};
    eb_beta_prior p;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_beta_fit_mle(&b, 200, &p, &e), DP_OK);
    assert_int_equal(p.status, EB_STATUS_CONVERGED);
    /* scipy BFGS: 5.57100508353 6.52927292493 -24.7725366119 */
    assert_close(p.alpha, 5.57100508353, 1e-6, 0);
    assert_close(p.beta, 6.52927292493, 1e-6, 0);
    assert_close(p.loglik, -24.7725366119, 1e-10, 0);
    assert_close(eb_beta_loglik(&b, p.alpha, p.beta), p.loglik, 1e-12, 0);
}

/* A set cancel flag stops the ML Newton loop with DP_EBUSY "cancelled"; a clear flag changes
 * nothing (issue #10; the service charges only a fit that returned DP_OK). */
static void cancel_flag_stops_the_fit(void **state)
{
    (void)state;
    const double z[] = {3, 7, 1, 0, 5, 9, 4, 6, 2, 8, 5, 3};
    const double n[] = {10, 12, 8, 5, 10, 14, 9, 10, 10, 11, 7, 6};
    eb_beta_data b = {12, z, n};
    eb_beta_prior plain, p;
    dp_err e;
    dp_err_clear(&e);
    atomic_bool cancel;
    atomic_init(&cancel, false);
    assert_int_equal(eb_beta_fit_mle(&b, 200, &plain, &e), DP_OK);
    assert_int_equal(eb_beta_fit_mle_cancel(&b, 200, &cancel, &p, &e), DP_OK);
    assert_true(p.alpha == plain.alpha && p.beta == plain.beta && p.iterations == plain.iterations);
    atomic_store(&cancel, true);
    dp_err_clear(&e);
    assert_int_equal(eb_beta_fit_mle_cancel(&b, 200, &cancel, &p, &e), DP_EBUSY);
    assert_non_null(strstr(e.msg, "cancelled"));
}

static void unidentifiable_and_boundary_reported(void **state)
{
    (void)state;
    const double z[] = {0, 0, 0}, n[] = {4, 7, 2};
    eb_beta_data b = {3, z, n};
    eb_beta_prior p;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_beta_fit_mle(&b, 100, &p, &e), DP_OK);
    assert_int_equal(p.status, EB_STATUS_UNIDENTIFIABLE);
    assert_int_equal(eb_beta_fit_moments(&b, EB_BETA_PAPER, &p, &e), DP_OK);
    assert_int_equal(p.status, EB_STATUS_UNIDENTIFIABLE);
    double mean[3];
    assert_int_equal(eb_beta_posterior_prior(&b, &p, mean, NULL, NULL, &e), DP_OK);
    assert_close(mean[1], 0.0, 0, 0);
    /* under-dispersed (identical rates, n large): ML runs to the S boundary */
    const double z2[] = {50, 50, 50, 51, 49}, n2[] = {100, 100, 100, 100, 100};
    eb_beta_data b2 = {5, z2, n2};
    assert_int_equal(eb_beta_fit_mle(&b2, 1000, &p, &e), DP_OK);
    assert_int_equal(p.status, EB_STATUS_BOUNDARY);
    assert_true(isinf(p.s));
    assert_close(p.mu, 250.0 / 500.0, 1e-15, 0);
}

static void bad_input_names_the_field(void **state)
{
    (void)state;
    const double z[] = {3, 9}, n[] = {10, 8};
    eb_beta_data b = {2, z, n};
    eb_beta_prior p;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_beta_fit_mle(&b, 100, &p, &e), DP_EINVAL);
    assert_string_equal(e.field, "clients[1].successes");
    const double z1[] = {3}, n1[] = {10};
    eb_beta_data one = {1, z1, n1};
    dp_err_clear(&e);
    assert_int_equal(eb_beta_fit_moments(&one, EB_BETA_PAPER, &p, &e), DP_EINVAL);
    assert_string_equal(e.field, "clients");
    const double z2[] = {1, 1}, n2[] = {0, 3};
    eb_beta_data b2 = {2, z2, n2};
    dp_err_clear(&e);
    assert_int_equal(eb_beta_fit_mle(&b2, 100, &p, &e), DP_EINVAL);
    assert_string_equal(e.field, "clients[0].trials");
}

/* ---- Monte Carlo ---- */

#define RT_M 10000
#define RT_N 14

enum { PRIOR_UNIFORM, PRIOR_SPIKE3, PRIOR_TRUNC_NORMAL, PRIOR_BETA44, PRIOR_BETA25 };

static double draw_p(gsl_rng *r, int kind)
{
    switch (kind) {
        case PRIOR_UNIFORM:
            return gsl_rng_uniform(r);
        case PRIOR_SPIKE3:
            return 0.25 * (double)(1 + gsl_rng_uniform_int(r, 3));
        case PRIOR_TRUNC_NORMAL: {
            double p;
            do
                p = 0.5 + gsl_ran_gaussian(r, 0.15);
            while (p < 0 || p > 1);
            return p;
        }
        case PRIOR_BETA44:
            return gsl_ran_beta(r, 4, 4);
        default:
            return gsl_ran_beta(r, 2, 5);
    }
}

typedef struct mc_buf {
    double z[RT_M], n[RT_M], p[RT_M], est[RT_M];
} mc_buf;

static int mc_setup(void **state)
{
    *state = dp_calloc(1, sizeof(mc_buf));
    return *state ? 0 : -1;
}

static int mc_teardown(void **state)
{
    dp_free(*state);
    return 0;
}

static void draw_clients(gsl_rng *r, mc_buf *b, int kind)
{
    for (int i = 0; i < RT_M; i++) {
        b->p[i] = draw_p(r, kind);
        b->n[i] = RT_N;
        b->z[i] = (double)gsl_ran_binomial(r, b->p[i], RT_N);
    }
}

/* gain = 1 - MSE(estimate)/MSE(local), in percent */
static double gain_pct(const mc_buf *b)
{
    double se = 0, sl = 0;
    for (int i = 0; i < RT_M; i++) {
        double x = b->z[i] / b->n[i];
        se += (b->est[i] - b->p[i]) * (b->est[i] - b->p[i]);
        sl += (x - b->p[i]) * (x - b->p[i]);
    }
    return 100.0 * (1.0 - se / sl);
}

static void rt4_bernoulli_gains_literal_estimator(void **state)
{
    mc_buf *b = *state;
    dp_err e;
    dp_err_clear(&e);
    gsl_rng *r = dp_rng_alloc(20260104, DP_RNG_STREAM_DATA, &e);
    const int kinds[] = {PRIOR_UNIFORM, PRIOR_SPIKE3, PRIOR_TRUNC_NORMAL, PRIOR_BETA44};
    const double target[] = {12.4, 24.5, 37.6, 33.0};
    const char *names[] = {"uniform", "3-spike", "trunc N(.5,.15^2)", "Beta(4,4)"};
    const int reps = 10;
    for (int k = 0; k < 4; k++) {
        double g = 0;
        for (int t = 0; t < reps; t++) {
            draw_clients(r, b, kinds[k]);
            eb_beta_data d = {RT_M, b->z, b->n};
            eb_beta_counts c;
            eb_status st;
            assert_int_equal(
                eb_beta_posterior_moments(&d, EB_BETA_PAPER, true, b->est, NULL, NULL, &c, &st, &e),
                DP_OK);
            g += gain_pct(b);
        }
        g /= reps;
        print_message("RT4: %-18s gain %.2f%% (target %.1f +- 1)\n", names[k], g, target[k]);
        assert_close(g, target[k], 0, 1.0);
    }
    gsl_rng_free(r);
}

static void rt5_known_prior_ratio_is_n_over_s_plus_n(void **state)
{
    mc_buf *b = *state;
    dp_err e;
    dp_err_clear(&e);
    gsl_rng *r = dp_rng_alloc(20260105, DP_RNG_STREAM_DATA, &e);
    double se = 0, sl = 0;
    for (int t = 0; t < 20; t++) {
        draw_clients(r, b, PRIOR_BETA25);
        eb_beta_data d = {RT_M, b->z, b->n};
        assert_int_equal(eb_beta_posterior_known(&d, 2, 5, b->est, NULL, NULL, &e), DP_OK);
        for (int i = 0; i < RT_M; i++) {
            double x = b->z[i] / RT_N;
            se += (b->est[i] - b->p[i]) * (b->est[i] - b->p[i]);
            sl += (x - b->p[i]) * (x - b->p[i]);
        }
    }
    double mse = se / (20.0 * RT_M);
    print_message("RT5: MC MSE %.7f (C9 %.7f), ratio %.4f (n/(S+n) = %.4f)\n", mse,
                  eb_beta_known_mse(2, 5, 14), se / sl, 14.0 / 21.0);
    assert_close(mse, eb_beta_known_mse(2, 5, 14), 0.01, 0);
    assert_close(se / sl, 14.0 / 21.0, 0.01, 0);
    gsl_rng_free(r);
}

static double private_gain(mc_buf *b, gsl_rng *r, eb_beta_scheme s, eb_beta_variant v, double eps,
                           uint64_t seed)
{
    dp_err e;
    dp_err_clear(&e);
    draw_clients(r, b, PRIOR_BETA25);
    eb_beta_data d = {RT_M, b->z, b->n};
    eb_beta_counts c;
    eb_status st;
    eb_beta_private_info info;
    assert_int_equal(
        eb_beta_private(&d, s, v, eps, true, seed, b->est, NULL, NULL, NULL, &c, &info, &st, &e),
        DP_OK);
    assert_close(info.eps0, eps, 0, 0);
    return gain_pct(b);
}

/* Regression (QA): a private run whose pooled mean mu falls below 0 is clamped to 0. The paper's
 * one-bit scheme then pools clients to a point-mass prior (posterior_sd 0 for every client
 * concerned): "degenerate", counted in counts.mean, and only then. The two-bit scheme keeps every
 * client whose mean was clamped at its own estimate (the noise of the mean makes the Thm 2 weight
 * 1), so no client with a success gets sd 0, and the status is never "converged" or "boundary"
 * when the reported prior was clamped. Sparse successes put mu near 0, so over a few seeds the
 * noisy mean falls on both sides of 0. */
static void private_clamped_mean_is_reported(void **state)
{
    (void)state;
    double z[8] = {1, 0, 1, 0, 0, 1, 0, 0}, n[8] = {10, 12, 8, 10, 9, 11, 10, 10}, mean[8], sd[8];
    double z0[8] = {0};
    eb_beta_data d = {8, z, n}, d0 = {8, z0, n};
    int clamped = 0, unclamped = 0, prior_clamped = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        dp_err e;
        dp_err_clear(&e);
        eb_beta_counts c;
        eb_status st;
        /* paper_1bit, all rates 0: the old rule */
        assert_int_equal(eb_beta_private(&d0, EB_BETA_PRIV_PAPER_1BIT, EB_BETA_PAPER_NO_MINUS1, 1.0,
                                         true, seed, mean, sd, NULL, NULL, &c, NULL, &st, &e),
                         DP_OK);
        if (c.mean > 0)
            assert_int_equal(st, EB_STATUS_DEGENERATE);
        else
            assert_int_not_equal(st, EB_STATUS_DEGENERATE);
        assert_int_equal(eb_beta_private(&d, EB_BETA_PRIV_TWO_BIT, EB_BETA_PAPER, 1.0, true, seed,
                                         mean, sd, NULL, NULL, &c, NULL, &st, &e),
                         DP_OK);
        for (int i = 0; i < 8; i++)
            if (z[i] > 0)
                assert_true(sd[i] > 0.05); /* own sd sqrt(p(1-p)/(n+1)) is about 0.1 */
        if (c.prior_mean > 0) {
            prior_clamped++;
            assert_true(st == EB_STATUS_DEGENERATE || st == EB_STATUS_NO_POOLING_GAIN);
        }
        if (c.mean > 0) {
            clamped++;
            assert_int_not_equal(st, EB_STATUS_CONVERGED);
        } else {
            unclamped++;
        }
    }
    assert_true(clamped > 0 && unclamped > 0 && prior_clamped > 0); /* every branch exercised */
}

/* Issue 15: ESTIMATORS.md's private example (two-bit, eps0 = 2, four clients) turned 7 successes
 * of 12 into 0 +- 0: the leave-one-out mean of the other three noisy messages fell below 0, was
 * clamped to 0, the noisy variance was <= 0, and the clamp "variance <= 0 -> full pooling" pooled
 * the client to that 0 with sd 0. With four clients the mean's noise (Var q = e^eps/(e^eps-1)^2 +
 * mu(1-mu) per message, eq. 7) dwarfs everything, so the Thm 2 weight keeps every client close to
 * its own rate, and the run says no_pooling_gain. Every seed. */
static void two_bit_small_m_keeps_own_rates(void **state)
{
    (void)state;
    const double z[] = {3, 7, 1, 5}, n[] = {10, 12, 8, 10};
    eb_beta_data d = {4, z, n};
    int no_gain = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        double mean[4], sd[4], shr[4];
        eb_beta_counts c;
        eb_status st;
        dp_err e;
        dp_err_clear(&e);
        assert_int_equal(eb_beta_private(&d, EB_BETA_PRIV_TWO_BIT, EB_BETA_PAPER, 2.0, true, seed,
                                         mean, sd, shr, NULL, &c, NULL, &st, &e),
                         DP_OK);
        for (int i = 0; i < 4; i++) {
            double x = z[i] / n[i], own_sd = sqrt(x * (1 - x) / (n[i] + 1));
            assert_true(shr[i] >= 0 && shr[i] < 0.1);
            assert_true(fabs(mean[i] - x) <= shr[i] + 1e-12); /* moved at most shr of [0, 1] */
            assert_true(sd[i] > 0.8 * own_sd && sd[i] < 1.2 * own_sd);
        }
        assert_int_not_equal(st, EB_STATUS_CONVERGED);
        no_gain += st == EB_STATUS_NO_POOLING_GAIN;
    }
    assert_true(no_gain >= 30); /* nearly always: the noise leaves nothing to pool */
}

/* At the scale of RT6 (m = 10^4) the two-bit fit pools: its status is not no_pooling_gain. */
static void two_bit_large_m_pools(void **state)
{
    mc_buf *b = *state;
    dp_err e;
    dp_err_clear(&e);
    gsl_rng *r = dp_rng_alloc(20261127, DP_RNG_STREAM_DATA, &e);
    draw_clients(r, b, PRIOR_BETA25);
    eb_beta_data d = {RT_M, b->z, b->n};
    eb_beta_counts c;
    eb_status st;
    assert_int_equal(eb_beta_private(&d, EB_BETA_PRIV_TWO_BIT, EB_BETA_PAPER, 2.0, true, 5, b->est,
                                     NULL, NULL, NULL, &c, NULL, &st, &e),
                     DP_OK);
    assert_int_equal(st, EB_STATUS_CONVERGED);
    assert_int_equal(c.prior_mean, 0);
    gsl_rng_free(r);
}

static void rt6_one_bit_fails_two_bit_works(void **state)
{
    mc_buf *b = *state;
    dp_err e;
    dp_err_clear(&e);
    gsl_rng *r = dp_rng_alloc(20260106, DP_RNG_STREAM_DATA, &e);
    const double eps1[] = {1, 3};
    for (int k = 0; k < 2; k++) {
        double g0 =
            private_gain(b, r, EB_BETA_PRIV_PAPER_1BIT, EB_BETA_PAPER_NO_MINUS1, eps1[k], 7 + k);
        double g1 = private_gain(b, r, EB_BETA_PRIV_PAPER_1BIT, EB_BETA_PAPER, eps1[k], 9 + k);
        print_message("RT6: paper_1bit eps0 %.0f gain %.1f%% (no -1), %.1f%% (with -1)\n", eps1[k],
                      g0, g1);
        assert_true(g0 <= 11.0);
        /* with the "-1" the weight a >= 1 (-13.7 % at eps0 = 1 unclamped); our clamp
         * a <= 1 turns that into exactly local estimation: no gain at all */
        assert_true(g1 <= 0.5);
    }
    const double eps2[] = {1, 2, 4, 8};
    for (int k = 0; k < 4; k++) {
        double g = 0;
        for (int t = 0; t < 3; t++)
            g += private_gain(b, r, EB_BETA_PRIV_TWO_BIT, EB_BETA_PAPER, eps2[k], 100 + 10 * k + t);
        g /= 3;
        print_message("RT6: two_bit eps0 %.0f gain %.1f%% (3 runs; non-private oracle 33.5%%)\n",
                      eps2[k], g);
        assert_true(g >= 20.0 && g <= 34.0);
    }
    /* eps0 = 0.5: the digest's three runs were 26.5, 0.6 and 32.0 % (noisy); with the noise of the
     * pooled mean in the weight (Thm 2) no run may lose to local estimation */
    for (int t = 0; t < 3; t++) {
        double g = private_gain(b, r, EB_BETA_PRIV_TWO_BIT, EB_BETA_PAPER, 0.5, 200 + t);
        print_message("RT6: two_bit eps0 0.5 run %d gain %.1f%%\n", t, g);
        assert_true(g >= 0.0 && g <= 34.0);
    }
    gsl_rng_free(r);
}

int main(void)
{
    gsl_set_error_handler_off(); /* as dpsilod does: GSL must return errors, not abort */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(known_prior_c9_and_posterior_by_hand),
        cmocka_unit_test(loo_variants_by_hand),
        cmocka_unit_test(over_dispersed_clamps_to_local),
        cmocka_unit_test(mle_matches_scipy),
        cmocka_unit_test(cancel_flag_stops_the_fit),
        cmocka_unit_test(unidentifiable_and_boundary_reported),
        cmocka_unit_test(bad_input_names_the_field),
        cmocka_unit_test_setup_teardown(rt4_bernoulli_gains_literal_estimator, mc_setup,
                                        mc_teardown),
        cmocka_unit_test_setup_teardown(rt5_known_prior_ratio_is_n_over_s_plus_n, mc_setup,
                                        mc_teardown),
        cmocka_unit_test_setup_teardown(rt6_one_bit_fails_two_bit_works, mc_setup, mc_teardown),
        cmocka_unit_test(private_clamped_mean_is_reported),
        cmocka_unit_test(two_bit_small_m_keeps_own_rates),
        cmocka_unit_test_setup_teardown(two_bit_large_m_pools, mc_setup, mc_teardown),
    };
    return cmocka_run_group_tests_name("estimators_beta", tests, NULL, NULL);
}
