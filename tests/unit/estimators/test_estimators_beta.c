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

#include "accounting/event.h"
#include "accounting/zcdp.h"
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

/* ---- central DP (issue 15) ---- */

/* Twelve clients, heteroscedastic trials (all >= 2), rates spread over (0, 1). */
static const double CZ[12] = {3, 7, 1, 0, 5, 9, 4, 6, 2, 8, 5, 3};
static const double CNT[12] = {10, 12, 8, 5, 10, 14, 9, 10, 10, 11, 7, 6};

/* With noise multiplier 0 the central prior is exactly the unbiased moment fit of all clients
 * (eq. 6 with U_i = Z(Z-1)/(n(n-1))), and every posterior is eb_beta_posterior_prior's under it. */
static void central_noise_zero_equals_unbiased_moments(void **state)
{
    (void)state;
    eb_beta_data b = {12, CZ, CNT};
    eb_beta_central_opts o = {0.0, 9};
    eb_beta_central_info ci;
    eb_beta_prior p, ref;
    eb_beta_counts cnt;
    eb_status st;
    double pm[12], psd[12], sh[12], rm[12], rsd[12], rsh[12];
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_beta_central_fit(&b, &o, pm, psd, sh, &p, &cnt, &ci, &st, &e), DP_OK);
    assert_int_equal(eb_beta_fit_moments(&b, EB_BETA_UNBIASED, &ref, &e), DP_OK);
    assert_close(p.mu, ref.mu, 1e-13, 0);
    assert_close(p.s, ref.s, 1e-11, 0);
    assert_close(p.alpha, ref.alpha, 1e-11, 0);
    assert_close(p.beta, ref.beta, 1e-11, 0);
    assert_int_equal(st, EB_STATUS_CONVERGED);
    assert_true(isnan(p.loglik)); /* the raw data's likelihood is not released */
    assert_close(ci.weight_extra, 0.0, 0, 0);
    assert_int_equal(eb_beta_posterior_prior(&b, &ref, rm, rsd, rsh, &e), DP_OK);
    for (size_t i = 0; i < 12; i++) {
        assert_close(pm[i], rm[i], 1e-12, 1e-15);
        assert_close(psd[i], rsd[i], 1e-11, 1e-15);
        assert_close(sh[i], rsh[i], 1e-11, 1e-15);
    }
}

/* The clean sums of a z = 0 release, read back from the prior: S1 = m mu, S2 = m (var + mu^2). */
static void central_sums(const eb_beta_data *b, double *s1, double *s2)
{
    eb_beta_central_opts o = {0.0, 1};
    eb_beta_central_info ci;
    eb_beta_prior p;
    eb_status st;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_beta_central_fit(b, &o, NULL, NULL, NULL, &p, NULL, &ci, &st, &e), DP_OK);
    *s1 = (double)b->m * p.mu;
    *s2 = (double)b->m * (ci.var_raw + p.mu * p.mu);
}

/* Sensitivity: replacing any one client by any other (every (Z, n) of a grid, extremes included)
 * moves S1 and S2 by at most 1 each and the pair by at most sqrt(2) in L2, the figures the noise
 * is calibrated to; (0 of 2) against (2 of 2) reaches the L2 bound. */
static void central_sensitivity_bounds_the_sums(void **state)
{
    (void)state;
    eb_beta_central_opts o = {0.0, 1};
    eb_beta_central_info ci;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(eb_beta_central_calibrate(&o, &ci, &e), DP_OK);
    assert_close(ci.sens_sum, 1.0, 0, 0);
    assert_close(ci.sens_sq, 1.0, 0, 0);
    assert_close(ci.l2_sens, sqrt(2.0), 1e-15, 0);
    double z[12], n[12], a1, a2, c1, c2, worst = 0.0;
    memcpy(z, CZ, sizeof z);
    memcpy(n, CNT, sizeof n);
    eb_beta_data b = {12, z, n};
    central_sums(&b, &a1, &a2);
    const double trials[] = {2, 3, 7, 1000};
    for (size_t i = 0; i < 12; i++)
        for (size_t t = 0; t < 4; t++)
            for (double zz = 0; zz <= trials[t]; zz += trials[t] > 10 ? 111 : 1) {
                z[i] = zz;
                n[i] = trials[t];
                central_sums(&b, &c1, &c2);
                double d1 = fabs(c1 - a1), d2 = fabs(c2 - a2);
                assert_true(d1 <= ci.sens_sum + 1e-12);
                assert_true(d2 <= ci.sens_sq + 1e-12);
                assert_true(d1 * d1 + d2 * d2 <= ci.l2_sens * ci.l2_sens + 1e-12);
                worst = fmax(worst, d1 * d1 + d2 * d2);
                z[i] = CZ[i];
                n[i] = CNT[i];
            }
    const double z0[] = {0, 3}, z1[] = {2, 3}, n2[] = {2, 7};
    eb_beta_data b0 = {2, z0, n2}, b1 = {2, z1, n2};
    central_sums(&b0, &a1, &a2);
    central_sums(&b1, &c1, &c2);
    assert_close(c1 - a1, 1.0, 1e-13, 1e-13);
    assert_close(c2 - a2, 1.0, 1e-13, 1e-13);
    assert_true(worst > 0.5); /* the grid came near the bound too */
}

/* The noise sds are z sqrt(2) (the sensitivities times z times the L2 sensitivity), the noise
 * actually drawn has that sd (Monte Carlo over seeds), the weight carries it, and the event the
 * service charges, gaussian(z), has the release's zCDP 1/(2 z^2) (Bun & Steinke 2016, Prop. 1.6).
 */
static void central_noise_sd_and_event_match_calibration(void **state)
{
    (void)state;
    const double z[12] = {4, 5, 3, 4, 6, 4, 5, 3, 4, 5, 4, 6}, n = 10;
    double nn[12];
    for (size_t i = 0; i < 12; i++)
        nn[i] = n;
    eb_beta_data b = {12, z, nn};
    eb_beta_central_opts o = {0.5, 0};
    eb_beta_central_info ci, c0i;
    eb_beta_prior p, p0;
    eb_status st;
    dp_err e;
    dp_err_clear(&e);
    eb_beta_central_opts z0 = {0.0, 0};
    assert_int_equal(eb_beta_central_fit(&b, &z0, NULL, NULL, NULL, &p0, NULL, &c0i, &st, &e),
                     DP_OK);
    assert_int_equal(eb_beta_central_calibrate(&o, &ci, &e), DP_OK);
    assert_close(ci.sd_sum, 0.5 * sqrt(2.0), 1e-15, 0);
    assert_close(ci.sd_sq, 0.5 * sqrt(2.0), 1e-15, 0);
    assert_close(ci.rho, 2.0, 1e-15, 0);
    const int reps = 4000;
    double acc_mu = 0.0, acc_var = 0.0;
    for (int t = 0; t < reps; t++) {
        o.seed = (uint64_t)t + 1;
        assert_int_equal(eb_beta_central_fit(&b, &o, NULL, NULL, NULL, &p, NULL, &ci, &st, &e),
                         DP_OK);
        assert_false(ci.proj_mean); /* mu 0.408, its noise sd 0.059: never clamped here */
        acc_mu += (p.mu - p0.mu) * (p.mu - p0.mu);
        acc_var += (ci.var_raw - c0i.var_raw) * (ci.var_raw - c0i.var_raw);
    }
    assert_close(sqrt(acc_mu / reps), ci.sd_sum / 12.0, 0.05, 0);
    double want_var =
        sqrt(ci.sd_sq * ci.sd_sq + 4.0 * p0.mu * p0.mu * ci.sd_sum * ci.sd_sum) / 12.0;
    assert_close(sqrt(acc_var / reps), want_var, 0.05, 0);
    /* the weight: Thm 2's sd_sum^2/(m(m-1)) plus one sd of the noise in the variance */
    assert_close(ci.weight_extra, ci.sd_sum * ci.sd_sum / (12.0 * 11.0) + ci.sd_var, 1e-14, 0);
    assert_close(ci.sd_var,
                 sqrt(ci.sd_sq * ci.sd_sq + 4.0 * p.mu * p.mu * ci.sd_sum * ci.sd_sum) / 12.0,
                 1e-14, 0);
    /* seeded: the same seed gives the same release */
    eb_beta_prior p2;
    assert_int_equal(eb_beta_central_fit(&b, &o, NULL, NULL, NULL, &p2, NULL, &ci, &st, &e), DP_OK);
    assert_close(p2.mu, p.mu, 0, 0);
    /* the charged event */
    acct_event *ev = acct_event_gaussian(o.z);
    double rho;
    assert_int_equal(acct_zcdp_eval(ev, &rho, &e), DP_OK);
    acct_event_free(ev);
    double sigma = ci.sd_sum / ci.sens_sum; /* sd on the release scaled by its sensitivities */
    assert_close(rho, ci.l2_sens * ci.l2_sens / (2.0 * sigma * sigma), 1e-13, 0);
    assert_close(rho, ci.rho, 1e-13, 0);
}

/* Projection onto valid Beta parameters and the statuses it gives. */
static void central_projection_and_statuses(void **state)
{
    (void)state;
    eb_beta_prior p;
    eb_beta_counts cnt;
    eb_beta_central_info ci;
    eb_status st;
    double pm[40], psd[40], sh[40];
    dp_err e;
    dp_err_clear(&e);
    /* every rate equal: variance <= 0, projected onto 0 (S = inf); without noise full pooling */
    const double ze[4] = {3, 6, 3, 9}, ne[4] = {10, 20, 10, 30};
    eb_beta_data be = {4, ze, ne};
    eb_beta_central_opts o0 = {0.0, 1};
    assert_int_equal(eb_beta_central_fit(&be, &o0, pm, psd, sh, &p, &cnt, &ci, &st, &e), DP_OK);
    assert_true(ci.proj_var_low && isinf(p.s));
    assert_int_equal(st, EB_STATUS_BOUNDARY);
    assert_int_equal(cnt.pooled, 4);
    assert_close(sh[1], 1.0, 0, 0);
    /* rates 0 and 1 only: the variance reaches mu(1 - mu), more than any Beta allows: S onto its
     * floor, every client keeps its own rate */
    double zx[40], nx[40];
    for (size_t i = 0; i < 40; i++) {
        nx[i] = 20;
        zx[i] = i % 2 ? 20 : 0;
    }
    eb_beta_data bx = {40, zx, nx};
    assert_int_equal(eb_beta_central_fit(&bx, &o0, pm, psd, sh, &p, &cnt, &ci, &st, &e), DP_OK);
    assert_true(ci.proj_var_high);
    assert_close(p.s, EB_BETA_CENTRAL_S_MIN, 0, 0);
    assert_true(p.alpha > 0 && p.beta > 0);
    assert_int_equal(st, EB_STATUS_BOUNDARY);
    assert_int_equal(cnt.local, 40);
    assert_true(sh[0] < 1e-6 && fabs(pm[1] - 1.0) < 1e-6);
    /* large noise: the prior is always projected into [0, 1] x [0, mu(1-mu)], estimates stay
     * rates, the mean is sometimes projected, and the answers say no_pooling_gain */
    eb_beta_data b = {12, CZ, CNT};
    eb_beta_central_opts o = {50.0, 0};
    size_t moved = 0;
    for (uint64_t t = 1; t <= 40; t++) {
        o.seed = t;
        assert_int_equal(eb_beta_central_fit(&b, &o, pm, psd, sh, &p, &cnt, &ci, &st, &e), DP_OK);
        assert_true(p.mu >= 0.0 && p.mu <= 1.0 && p.s >= EB_BETA_CENTRAL_S_MIN);
        for (size_t i = 0; i < 12; i++)
            assert_true(pm[i] >= 0.0 && pm[i] <= 1.0 && psd[i] >= 0.0);
        assert_int_equal(st, EB_STATUS_NO_POOLING_GAIN);
        moved += ci.proj_mean;
        assert_int_equal(cnt.mean, ci.proj_mean ? 12 : 0);
    }
    assert_true(moved > 10);
    /* bad input names the field */
    const double z1[] = {1, 0, 2}, n1[] = {4, 1, 5};
    eb_beta_data b1 = {3, z1, n1};
    assert_int_equal(eb_beta_central_fit(&b1, &o, pm, psd, sh, &p, &cnt, &ci, &st, &e), DP_EINVAL);
    assert_string_equal(e.field, "clients[1].trials");
    dp_err_clear(&e);
    o.z = -1.0;
    assert_int_equal(eb_beta_central_fit(&b, &o, pm, psd, sh, &p, &cnt, &ci, &st, &e), DP_EINVAL);
    assert_string_equal(e.field, "privacy.noise_multiplier");
}

/* The example of issue 15 (four clients) at epsilon = 1 (noise multiplier 4.0451, the service's
 * calibration at delta = 1e-5): 7 of 12 keeps its own rate and a sensible sd (never 0 +- 0), and
 * the run says no_pooling_gain; with 3000 clients of Beta(2, 5), n = 14 (RT6's population), the
 * same noise pools: the gain over each client's own rate is within 6 points of the oracle's 33.5 %.
 */
static void central_small_m_keeps_own_rates_large_m_pools(void **state)
{
    (void)state;
    const double z[] = {3, 7, 1, 5}, n[] = {10, 12, 8, 10};
    eb_beta_data b = {4, z, n};
    eb_beta_central_opts o = {4.0451, 3};
    eb_beta_prior p;
    eb_beta_central_info ci;
    eb_status st;
    double pm[4], psd[4], sh[4];
    dp_err e;
    dp_err_clear(&e);
    for (uint64_t t = 1; t <= 20; t++) {
        o.seed = t;
        assert_int_equal(eb_beta_central_fit(&b, &o, pm, psd, sh, &p, NULL, &ci, &st, &e), DP_OK);
        assert_int_equal(st, EB_STATUS_NO_POOLING_GAIN);
        assert_close(pm[1], 7.0 / 12.0, 0.02, 0);
        assert_close(psd[1], sqrt(7.0 / 12.0 * 5.0 / 12.0 / 13.0), 0.05, 0);
    }
    size_t m = 3000;
    double *zz = dp_calloc(m, sizeof *zz), *nn = dp_calloc(m, sizeof *nn), *th = dp_calloc(m, 8);
    double *post = dp_calloc(m, sizeof *post);
    assert_true(zz && nn && th && post);
    gsl_rng *r = dp_rng_alloc(2023, DP_RNG_STREAM_DATA, &e);
    assert_non_null(r);
    double own = 0.0, pooled = 0.0;
    for (int rep = 0; rep < 5; rep++) {
        for (size_t i = 0; i < m; i++) {
            th[i] = gsl_ran_beta(r, 2.0, 5.0);
            nn[i] = 14;
            zz[i] = (double)gsl_ran_binomial(r, th[i], 14);
        }
        eb_beta_data bl = {m, zz, nn};
        o.seed = (uint64_t)rep + 100;
        assert_int_equal(eb_beta_central_fit(&bl, &o, post, NULL, NULL, &p, NULL, &ci, &st, &e),
                         DP_OK);
        for (size_t i = 0; i < m; i++) {
            own += (zz[i] / 14.0 - th[i]) * (zz[i] / 14.0 - th[i]);
            pooled += (post[i] - th[i]) * (post[i] - th[i]);
        }
    }
    gsl_rng_free(r);
    double gain = 1.0 - pooled / own;
    print_message("central, m = 3000, z = 4.05: gain %.3f (oracle 0.335)\n", gain);
    assert_true(gain > 0.335 - 0.06 && gain < 0.36);
    dp_free(zz);
    dp_free(nn);
    dp_free(th);
    dp_free(post);
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
        cmocka_unit_test(central_noise_zero_equals_unbiased_moments),
        cmocka_unit_test(central_sensitivity_bounds_the_sums),
        cmocka_unit_test(central_noise_sd_and_event_match_calibration),
        cmocka_unit_test(central_projection_and_statuses),
        cmocka_unit_test(central_small_m_keeps_own_rates_large_m_pools),
    };
    return cmocka_run_group_tests_name("estimators_beta", tests, NULL, NULL);
}
