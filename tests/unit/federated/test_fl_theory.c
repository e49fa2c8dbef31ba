/*
 * test_fl_theory.c: federated/fl_theory, the planning closed forms, against published or
 * independently computed values and against their own defining properties:
 *   - MR-MTL (Liu et al., NeurIPS 2022, §6): the K = 20, n = 200, sigma = 0.4 setting of Fig. 7
 *     (lambda*, the errors of local, FedAvg and MR-MTL at lambda*, non-private and with noise
 *     multiplier 14.567), Lemma 6.7 at 0, lambda* and inf against the endpoint formulas, lambda* as
 *     the argmin of a fine grid, the heterogeneous Theorem E.5 reducing to Theorem 6.3 for equal
 *     silos and its error as the minimum over lambda of each silo's exact error;
 *   - FedHDP (Aldaghri et al., App. A): the paper's Lemma 2/3 and Eq. 41 at four configurations
 *     computed by an independent script (two groups with opt-outs, large noise, N = 1000, and two
 *     private levels), lambda* as the argmin of the exact error without the client's own noise,
 *     r* as the argmin of the server variance;
 *   - PPSGD (Bietti et al., ICML 2022, §4): the threshold n* of Eq. 10 and the bound of Eq. 7 at
 *     alpha in {0, 1/N, inf} at the paper's synthetic scale, and the minimiser over alpha.
 * Printed reference values have 3-6 significant digits; each check's tolerance is half a unit of
 * the last printed digit (relative), stated beside it.
 */
#include "tests/support/test_util.h"

#include <math.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "common/dp_math.h"
#include "common/dp_rng.h"
#include "federated/fl_theory.h"

static dp_err E;

/* |x - ref| <= rel * |ref| */
#define assert_rel(x, ref, rel)                                                                    \
    do {                                                                                           \
        double x_ = (x), r_ = (ref);                                                               \
        if (!(fabs(x_ - r_) <= (rel)*fabs(r_)))                                                    \
            fail_msg("%s = %.9g, expected %.9g (rel %g)", #x, x_, r_, (double)(rel));              \
    } while (0)

/* ---- MR-MTL ---- */

static fl_mrmtl_out mrmtl(double tau, double sigma_dp, double lambda)
{
    fl_mrmtl_in in = {
        .silos = 20, .n = 200, .sigma = 0.4, .tau = tau, .sigma_dp = sigma_dp, .lambda = lambda};
    fl_mrmtl_out o;
    assert_int_equal(fl_mrmtl_theory(&in, &o, &E), DP_OK);
    return o;
}

static void mrmtl_matches_the_fig7_setting(void **state)
{
    (void)state;
    /* Liu et al. 2022 §6 setting of Fig. 7: K = 20, n = 200, sigma = 0.4; values 4 digits. */
    fl_mrmtl_out o = mrmtl(0.03, 0.0, DP_NAN);
    assert_rel(o.sigma_loc2, 8.000e-4, 1e-9);
    assert_rel(o.lambda_star, 0.8889, 6e-5);
    assert_rel(o.mse_fedavg, 8.950e-4, 6e-5);
    assert_rel(o.mse_star, 4.424e-4, 2e-4);
    o = mrmtl(0.03, 14.567, DP_NAN);
    assert_rel(o.sigma_loc2, 6.105e-3, 1e-4);
    assert_rel(o.lambda_star, 6.783, 1e-4);
    assert_rel(o.mse_fedavg, 1.160e-3, 5e-4);
    assert_rel(o.mse_star, 1.050e-3, 5e-4);
    o = mrmtl(0.08, 14.567, DP_NAN);
    assert_rel(o.lambda_star, 0.9539, 6e-5);
    assert_rel(o.mse_fedavg, 6.385e-3, 1e-4);
    assert_rel(o.mse_star, 3.274e-3, 2e-4);
    o = mrmtl(0.2, 14.567, DP_NAN);
    assert_rel(o.lambda_star, 0.1526, 4e-4);
    assert_rel(o.mse_fedavg, 3.831e-2, 2e-4);
    assert_rel(o.mse_star, 5.337e-3, 1e-4);
    assert_rel(o.gain_local, o.mse_local - o.mse_star, 1e-12);
    assert_rel(o.gain_fedavg, o.mse_fedavg - o.mse_star, 1e-12);
}

static void mrmtl_lemma_6_7_has_its_minimum_at_lambda_star(void **state)
{
    (void)state;
    double taus[] = {0.01, 0.03, 0.08, 0.2, 1.0};
    for (size_t t = 0; t < sizeof taus / sizeof taus[0]; t++) {
        fl_mrmtl_out s = mrmtl(taus[t], 14.567, DP_NAN);
        assert_rel(mrmtl(taus[t], 14.567, 0.0).mse_lambda, s.mse_local, 1e-12);
        assert_rel(mrmtl(taus[t], 14.567, DP_INF).mse_lambda, s.mse_fedavg, 1e-12);
        assert_rel(mrmtl(taus[t], 14.567, s.lambda_star).mse_lambda, s.mse_star, 1e-12);
        /* no lambda on a fine log grid does better than lambda* */
        for (double l = 1e-4; l < 1e4; l *= 1.01)
            assert_true(mrmtl(taus[t], 14.567, l).mse_lambda >= s.mse_star * (1 - 1e-12));
        /* Theorem 6.8 at the ends: sigma_dp^2/n^2 (local), sigma_dp^2/(K n^2) (FedAvg) */
        double dp2 = 14.567 * 14.567 / (200.0 * 200.0);
        assert_rel(mrmtl(taus[t], 14.567, 0.0).privacy_gap, dp2, 1e-12);
        assert_rel(mrmtl(taus[t], 14.567, DP_INF).privacy_gap, dp2 / 20, 1e-12);
    }
    /* tau = 0: federate fully */
    assert_true(isinf(mrmtl(0.0, 1.0, DP_NAN).lambda_star));
}

static void mrmtl_silos_reduce_to_theorem_6_3_and_minimise_each_error(void **state)
{
    (void)state;
    enum { K = 20 };
    fl_mrmtl_silo s[K];
    fl_mrmtl_silo_out o[K];
    for (int i = 0; i < K; i++)
        s[i] = (fl_mrmtl_silo){200, 0.4, 14.567};
    assert_int_equal(fl_mrmtl_theory_silos(s, K, 0.08, o, &E), DP_OK);
    fl_mrmtl_out h = mrmtl(0.08, 14.567, DP_NAN);
    for (int i = 0; i < K; i++) {
        assert_rel(o[i].lambda_star, h.lambda_star, 1e-12);
        assert_rel(o[i].mse_star, h.mse_star, 1e-12);
        assert_rel(o[i].mse_fedavg, h.mse_fedavg, 1e-12);
    }
    /* silos that differ: each silo's error alpha^2 s + (1 - alpha)^2 V at alpha(lambda) of Lemma
     * 6.1 is smallest at its lambda_k*, and a noisier silo leans more on the others */
    for (int i = 0; i < K; i++)
        s[i] = (fl_mrmtl_silo){50.0 + 25.0 * i, 0.4 + 0.01 * i, 5.0 + i};
    assert_int_equal(fl_mrmtl_theory_silos(s, K, 0.05, o, &E), DP_OK);
    double sum = 0;
    for (int i = 0; i < K; i++)
        sum += o[i].sigma_loc2;
    for (int i = 0; i < K; i++) {
        double sk = o[i].sigma_loc2,
               V = K * 0.0025 / (K - 1.0) + (sum - sk) / ((K - 1.0) * (K - 1.0));
        assert_true(isfinite(o[i].lambda_star));
        double a = (K + o[i].lambda_star) / ((1 + o[i].lambda_star) * K);
        assert_rel(a * a * sk + (1 - a) * (1 - a) * V, o[i].mse_star, 1e-9);
        for (double l = 1e-4; l < 1e4; l *= 1.02) {
            double al = (K + l) / ((1 + l) * K);
            assert_true(al * al * sk + (1 - al) * (1 - al) * V >= o[i].mse_star * (1 - 1e-12));
        }
        if (i > 0 && o[i].sigma_loc2 > o[i - 1].sigma_loc2)
            assert_true(o[i].lambda_star > o[i - 1].lambda_star);
    }
    /* one silo far noisier than the rest together with tau = 0: use the global model */
    for (int i = 0; i < K; i++)
        s[i] = (fl_mrmtl_silo){200, 0.4, i == 0 ? 1e4 : 1.0};
    assert_int_equal(fl_mrmtl_theory_silos(s, K, 0.0, o, &E), DP_OK);
    assert_true(isinf(o[0].lambda_star));
    assert_rel(o[0].mse_star, o[0].mse_fedavg, 1e-12);
}

static void mrmtl_refuses_bad_input_naming_the_field(void **state)
{
    (void)state;
    fl_mrmtl_out o;
    fl_mrmtl_in in = {.silos = 1, .n = 10, .sigma = 1, .tau = 1, .sigma_dp = 0, .lambda = DP_NAN};
    assert_int_equal(fl_mrmtl_theory(&in, &o, &E), DP_EINVAL);
    assert_string_equal(E.field, "silos");
    dp_err_clear(&E);
    in.silos = 3, in.n = 0;
    assert_int_equal(fl_mrmtl_theory(&in, &o, &E), DP_EINVAL);
    assert_string_equal(E.field, "n");
    dp_err_clear(&E);
    in.n = 5, in.lambda = -1;
    assert_int_equal(fl_mrmtl_theory(&in, &o, &E), DP_EINVAL);
    assert_string_equal(E.field, "lambda");
    dp_err_clear(&E);
    fl_mrmtl_silo s[2] = {{10, 1, 0}, {10, DP_NAN, 0}};
    fl_mrmtl_silo_out so[2];
    assert_int_equal(fl_mrmtl_theory_silos(s, 2, 0.1, so, &E), DP_EINVAL);
    assert_string_equal(E.field, "silos[1].sigma");
    dp_err_clear(&E);
}

/* ---- FedHDP ---- */

typedef struct hdp_ref {
    double n1, l1, n2, l2, alpha2, tau2;
    double r2, var_star, var_uniform, lambda1, lambda2, bayes1, bayes2;
} hdp_ref;

static void fedhdp_matches_the_independent_configurations(void **state)
{
    (void)state;
    /* Per-client noise L = N_g gamma_g^2. A: N = 100, 5 opt out, gamma^2 = 0.05; B: gamma^2 =
     * 0.5, tau^2 = 0.1; C: N = 1000; D: two private levels (30 at 0.01, 70 at 0.05). 6 digits. */
    const hdp_ref refs[] = {
        {5, 0, 95, 95 * 0.05, 1, 0.25, 0.208333, 0.0504202, 0.057625, 4, 3.44928, 0.232269,
         0.231270},
        {5, 0, 95, 95 * 0.5, 1, 0.1, 0.0226337, 0.153842, 0.46225, 10, 3.99425, 0.218051, 0.202762},
        {50, 0, 950, 950 * 0.05, 1, 0.25, 0.025641, 0.0168103, 0.046375, 4, 3.75405, 0.210759,
         0.210619},
        {30, 30 * 0.01, 70, 70 * 0.05, 1, 0.2, 0.31915, 0.0286585, DP_NAN, 4.86070, 4.51791,
         0.186474, 0.186221},
    };
    for (size_t c = 0; c < sizeof refs / sizeof refs[0]; c++) {
        const hdp_ref *r = &refs[c];
        fl_hdp_group g[2] = {{r->n1, r->l1}, {r->n2, r->l2}};
        fl_hdp_out o;
        fl_hdp_group_out og[2];
        assert_int_equal(fl_hdp_theory(g, 2, r->alpha2, r->tau2, &o, og, &E), DP_OK);
        assert_rel(og[0].r_star, 1.0, 1e-15);
        assert_rel(og[1].r_star, r->r2, 2e-5);
        assert_rel(o.server_var_star, r->var_star, 1e-5);
        if (!isnan(r->var_uniform))
            assert_rel(o.server_var_uniform, r->var_uniform, 1e-5);
        assert_rel(og[0].lambda_star, r->lambda1, 2e-6);
        assert_rel(og[1].lambda_star, r->lambda2, 2e-6);
        assert_rel(og[0].bayes_mse, r->bayes1, 3e-6);
        assert_rel(og[1].bayes_mse, r->bayes2, 3e-6);
        /* the weights sum to 1 */
        assert_rel(r->n1 * og[0].weight_star + r->n2 * og[1].weight_star, 1.0, 1e-12);
        for (size_t j = 0; j < 2; j++) {
            /* Bayes = FedHDP's error at (r*, lambda*) without the client's own noise, and no
             * lambda on a grid does better without it */
            double m;
            double rs[2] = {og[0].r_star, og[1].r_star};
            assert_int_equal(fl_hdp_client_mse(g, 2, r->alpha2, r->tau2, rs, j, og[j].lambda_star,
                                               false, &m, &E),
                             DP_OK);
            assert_rel(m, og[j].bayes_mse, 1e-9);
            for (double l = 1e-3; l < 1e3; l *= 1.01) {
                assert_int_equal(
                    fl_hdp_client_mse(g, 2, r->alpha2, r->tau2, rs, j, l, false, &m, &E), DP_OK);
                assert_true(m >= og[j].bayes_mse * (1 - 1e-12));
                assert_int_equal(
                    fl_hdp_client_mse(g, 2, r->alpha2, r->tau2, rs, j, l, true, &m, &E), DP_OK);
                assert_true(m >= og[j].mse_best_own * (1 - 1e-12));
            }
        }
    }
    /* Config A with the client's own noise kept: 0.231472 at lambda*, argmin 3.445 (grid of 1e-3)
     */
    fl_hdp_group g[2] = {{5, 0}, {95, 4.75}};
    fl_hdp_out o;
    fl_hdp_group_out og[2];
    assert_int_equal(fl_hdp_theory(g, 2, 1, 0.25, &o, og, &E), DP_OK);
    assert_rel(og[1].mse_own_noise, 0.231472, 3e-6);
    assert_true(fabs(og[1].lambda_best_own - 3.445) <= 0.0015);
    assert_rel(og[0].lambda_best_own, 4.0, 1e-9); /* an opted-out client adds no noise */
}

static void fedhdp_r_star_minimises_the_server_variance(void **state)
{
    (void)state;
    fl_hdp_group g[3] = {{10, 0.5}, {40, 3}, {50, 12}};
    fl_hdp_out o;
    fl_hdp_group_out og[3];
    assert_int_equal(fl_hdp_theory(g, 3, 0.7, 0.3, &o, og, &E), DP_OK);
    double rs[3] = {og[0].r_star, og[1].r_star, og[2].r_star}, v;
    assert_int_equal(fl_hdp_server_var(g, 3, 0.7, 0.3, rs, &v, &E), DP_OK);
    assert_rel(v, o.server_var_star, 1e-12);
    for (double a = 0.02; a <= 1.0; a += 0.02)
        for (double b = 0.0; b <= 1.0; b += 0.02) {
            double r[3] = {1.0, a, b};
            assert_int_equal(fl_hdp_server_var(g, 3, 0.7, 0.3, r, &v, &E), DP_OK);
            assert_true(v >= o.server_var_star * (1 - 1e-12));
        }
    /* three groups: lambda* is still the argmin of the error without the own noise */
    for (size_t j = 0; j < 3; j++) {
        double m;
        assert_int_equal(fl_hdp_client_mse(g, 3, 0.7, 0.3, rs, j, og[j].lambda_star, false, &m, &E),
                         DP_OK);
        assert_rel(m, og[j].bayes_mse, 1e-9);
    }
    /* equal noise everywhere (r* = 1): r* = 1 and the uniform variance is optimal */
    fl_hdp_group e[2] = {{20, 1}, {30, 1}};
    assert_int_equal(fl_hdp_theory(e, 2, 1, 0.1, &o, og, &E), DP_OK);
    assert_rel(og[1].r_star, 1.0, 1e-15);
    assert_rel(o.server_var_uniform, o.server_var_star, 1e-12);
}

static void fedhdp_refuses_bad_input_naming_the_field(void **state)
{
    (void)state;
    fl_hdp_out o;
    fl_hdp_group_out og[2];
    fl_hdp_group g[2] = {{5, 0}, {2.5, 1}};
    assert_int_equal(fl_hdp_theory(g, 2, 1, 0.1, &o, og, &E), DP_EINVAL);
    assert_string_equal(E.field, "groups[1].clients");
    dp_err_clear(&E);
    g[1] = (fl_hdp_group){3, -1};
    assert_int_equal(fl_hdp_theory(g, 2, 1, 0.1, &o, og, &E), DP_EINVAL);
    assert_string_equal(E.field, "groups[1].per_client_noise");
    dp_err_clear(&E);
    g[1] = (fl_hdp_group){3, 1};
    assert_int_equal(fl_hdp_theory(g, 2, 0, 0.1, &o, og, &E), DP_EINVAL);
    assert_string_equal(E.field, "alpha2");
    dp_err_clear(&E);
    fl_hdp_group one = {1, 0};
    assert_int_equal(fl_hdp_theory(&one, 1, 1, 0.1, &o, og, &E), DP_EINVAL);
    assert_string_equal(E.field, "groups");
    dp_err_clear(&E);
}

/* ---- PPSGD ---- */

static fl_ppsgd_in ppsgd_in(double N, double sigma, double eps, double d, double G, double delta)
{
    return (fl_ppsgd_in){.users = N,
                         .sigma = sigma,
                         .epsilon = eps,
                         .delta = delta,
                         .dim_w = d,
                         .grad = G,
                         .c = 1,
                         .n = DP_NAN,
                         .smooth = DP_NAN,
                         .v_norm2 = DP_NAN};
}

static void ppsgd_threshold_matches_lemma_4_6(void **state)
{
    (void)state;
    /* Eq. 10 with eps^2, c = 1; 4 digits */
    const double v[][7] = {{1000, 1, 1, 100, 10, 1e-4, 10.85},
                           {1000, 1, 10, 100, 10, 1e-4, 1085},
                           {100, 1, 1, 10, 1, 1e-5, 85.99},
                           {1e4, 1, 1, 100, 10, 1e-6, 723.8},
                           {1000, 0.01, 1, 100, 10, 1e-4, 0.001085}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        fl_ppsgd_in in = ppsgd_in(v[i][0], v[i][1], v[i][2], v[i][3], v[i][4], v[i][5]);
        fl_ppsgd_out o;
        assert_int_equal(fl_ppsgd_theory(&in, &o, &E), DP_OK);
        assert_rel(o.n_star, v[i][6], 5e-4);
        assert_true(isnan(o.bound_best));
    }
}

static void ppsgd_bound_matches_theorem_4_5_and_is_minimised(void **state)
{
    (void)state;
    /* Eq. 7 at N = 1000, L = 2, ||v||^2 = 1, d_w = 100, G = 10, delta = 1e-4, sigma = 1; printed to
     * 4 (or 3) digits: bound at alpha = 0, 1/N, inf */
    const double v[][5] = {{10, 1, 1.749, 1.330, 1.711},
                           {1000, 1, 0.1029, 0.651, 0.919},
                           {100, 10, 0.380, 0.262, 0.1715}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        fl_ppsgd_in in = ppsgd_in(1000, 1, v[i][1], 100, 10, 1e-4);
        in.n = v[i][0], in.smooth = 2, in.v_norm2 = 1;
        fl_ppsgd_out o;
        assert_int_equal(fl_ppsgd_theory(&in, &o, &E), DP_OK);
        assert_rel(o.bound_local, v[i][2], 2e-3);
        assert_rel(o.bound_1n, v[i][3], 2e-3);
        assert_rel(o.bound_global, v[i][4], 2e-3);
        assert_true(o.bound_best <= fmin(o.bound_local, fmin(o.bound_1n, o.bound_global)));
        assert_rel(fl_ppsgd_bound(&in, o.alpha_best), o.bound_best, 1e-12);
        for (double a = 1e-9; a < 1e9; a *= 1.05)
            assert_true(fl_ppsgd_bound(&in, a) >= o.bound_best * (1 - 1e-9));
        /* the bound at a huge alpha tends to the alpha = inf limit */
        assert_rel(fl_ppsgd_bound(&in, 1e14), o.bound_global, 1e-6);
    }
    /* n = 1000, eps = 1 is past n* = 10.85: local (alpha = 0) is best */
    fl_ppsgd_in in = ppsgd_in(1000, 1, 1, 100, 10, 1e-4);
    in.n = 1000, in.smooth = 2, in.v_norm2 = 1;
    fl_ppsgd_out o;
    assert_int_equal(fl_ppsgd_theory(&in, &o, &E), DP_OK);
    assert_true(o.alpha_best == 0.0);
}

static void ppsgd_refuses_bad_input_naming_the_field(void **state)
{
    (void)state;
    fl_ppsgd_out o;
    fl_ppsgd_in in = ppsgd_in(1000, 1, 1, 100, 10, 1.5);
    assert_int_equal(fl_ppsgd_theory(&in, &o, &E), DP_EINVAL);
    assert_string_equal(E.field, "delta");
    dp_err_clear(&E);
    in = ppsgd_in(1000, 1, 0, 100, 10, 1e-5);
    assert_int_equal(fl_ppsgd_theory(&in, &o, &E), DP_EINVAL);
    assert_string_equal(E.field, "epsilon");
    dp_err_clear(&E);
    in = ppsgd_in(1000, 1, 1, 100, 10, 1e-5);
    in.n = 100; /* the bound needs smoothness and v_norm2 too */
    assert_int_equal(fl_ppsgd_theory(&in, &o, &E), DP_EINVAL);
    assert_string_equal(E.field, "smoothness");
    dp_err_clear(&E);
}

/* R3: Monte Carlo of Algorithm 3 (point estimation) on the Bayesian model of App. B, config A
 * (N = 100, 5 clients opted out, 95 private with per-client noise N_p gamma^2 = 4.75, alpha^2 = 1,
 * tau^2 = 0.25): theta = 0, p_j = N(0, tau^2), phi_j = p_j + N(0, alpha^2), psi_j = phi_j +
 * N(0, L_g). Algorithm 3's estimates match the closed forms (the server's variance, each group's
 * error with the client's own noise inside the global model) within 4 standard errors, at
 * (r*, lambda*) and at r = 1 (HDP-FedAvg+Ditto), and FedHDP beats HDP-FedAvg+Ditto for both groups
 * on the same draws (Theorem 5: it is Bayes optimal). */
#define HDP_MC_TRIALS 20000
static void fedhdp_algorithm_3_matches_its_closed_forms_by_monte_carlo(void **state)
{
    (void)state;
    enum { N = 100, NNP = 5 };
    fl_hdp_group g[2] = {{NNP, 0}, {N - NNP, 4.75}};
    const double alpha2 = 1, tau2 = 0.25;
    fl_hdp_out o;
    fl_hdp_group_out og[2];
    assert_int_equal(fl_hdp_theory(g, 2, alpha2, tau2, &o, og, &E), DP_OK);
    assert_rel(og[1].r_star, 0.208333, 2e-6);
    const double rs[2][2] = {{og[0].r_star, og[1].r_star}, {1, 1}};
    const double lam[2] = {og[0].lambda_star, og[1].lambda_star};
    uint32_t grp[N];
    for (size_t j = 0; j < N; j++)
        grp[j] = j < NNP ? 0 : 1;
    static double phi[N], psi[N], pj[N], pers[N];
    double glob;
    /* sums over trials of: server error, per-group mean error; [algorithm][quantity] */
    double sum[2][3] = {{0}}, sq[2][3] = {{0}}, dsum[2] = {0}, dsq[2] = {0};
    gsl_rng *rng = dp_rng_alloc(20261127, DP_RNG_STREAM_DATA, NULL);
    assert_non_null(rng);
    for (int t = 0; t < HDP_MC_TRIALS; t++) {
        for (size_t j = 0; j < N; j++) {
            pj[j] = gsl_ran_gaussian_ziggurat(rng, sqrt(tau2));
            phi[j] = pj[j] + gsl_ran_gaussian_ziggurat(rng, sqrt(alpha2));
            psi[j] = phi[j] + (grp[j] ? gsl_ran_gaussian_ziggurat(rng, sqrt(4.75)) : 0.0);
        }
        double grp_err[2][2];
        for (int a = 0; a < 2; a++) {
            assert_int_equal(fl_hdp_alg1(N, 1, phi, psi, grp, 2, rs[a], lam, &glob, pers, &E),
                             DP_OK);
            double e[3] = {glob * glob, 0, 0};
            for (size_t j = 0; j < N; j++)
                e[1 + grp[j]] += (pers[j] - pj[j]) * (pers[j] - pj[j]);
            e[1] /= NNP;
            e[2] /= N - NNP;
            for (int k = 0; k < 3; k++) {
                sum[a][k] += e[k];
                sq[a][k] += e[k] * e[k];
            }
            grp_err[a][0] = e[1];
            grp_err[a][1] = e[2];
        }
        for (int k = 0; k < 2; k++) {
            double dd = grp_err[1][k] - grp_err[0][k]; /* HDP - FedHDP, same draws */
            dsum[k] += dd;
            dsq[k] += dd * dd;
        }
    }
    gsl_rng_free(rng);
    const double T = HDP_MC_TRIALS;
    for (int a = 0; a < 2; a++) {
        double want[3];
        assert_int_equal(fl_hdp_server_var(g, 2, alpha2, tau2, rs[a], &want[0], &E), DP_OK);
        for (size_t k = 0; k < 2; k++)
            assert_int_equal(
                fl_hdp_client_mse(g, 2, alpha2, tau2, rs[a], k, lam[k], true, &want[1 + k], &E),
                DP_OK);
        for (int k = 0; k < 3; k++) {
            double mean = sum[a][k] / T, se = sqrt((sq[a][k] / T - mean * mean) / T);
            if (!(fabs(mean - want[k]) <= 4 * se))
                fail_msg("algorithm %d quantity %d: Monte Carlo %.6f, closed form %.6f (se %.2g)",
                         a, k, mean, want[k], se);
        }
    }
    assert_rel(sum[0][0] / T, 0.0504202, 0.05); /* the paper's sigma^2_s,opt (Eq. 78) */
    for (int k = 0; k < 2; k++) {
        double mean = dsum[k] / T, se = sqrt((dsq[k] / T - mean * mean) / T);
        assert_true(mean > 4 * se); /* FedHDP's error is below HDP-FedAvg+Ditto's */
    }
}

/* R4: the opt-out trade-off of §3.1.4 (Figs. 1, 2), from the exact error: N = 10 clients, one other
 * client opted out, the other 8 private with per-client noise 10, alpha^2 = 1, tau^2 = 0.1; client
 * c_k is private (noise 10) or opts out. Its best error over lambda is lower when it opts out,
 * under HDP-FedAvg+Ditto (r = 1) and FedHDP (r*), FedHDP's is the lower one, and the best lambda of
 * the opted-out client is alpha^2 / tau^2 = 10, above the private client's (Theorem 8: lambda*_p <
 * lambda*_np). */
static double best_mse(const fl_hdp_group *g, const double *r, double *lambda_at)
{
    double best = DP_INF;
    for (double l = 0.01; l <= 100.0; l *= 1.001) {
        double m;
        assert_int_equal(fl_hdp_client_mse(g, 3, 1.0, 0.1, r, 2, l, true, &m, &E), DP_OK);
        if (m < best) {
            best = m;
            *lambda_at = l;
        }
    }
    return best;
}

static void fedhdp_opting_out_lowers_a_clients_error(void **state)
{
    (void)state;
    double mse[2][2], lam[2][2]; /* [client private, opted out][HDP r = 1, FedHDP r*] */
    for (int out = 0; out < 2; out++) {
        fl_hdp_group g[3] = {{1, 0}, {8, 10}, {1, out ? 0.0 : 10.0}};
        fl_hdp_out o;
        fl_hdp_group_out og[3];
        assert_int_equal(fl_hdp_theory(g, 3, 1.0, 0.1, &o, og, &E), DP_OK);
        const double ones[3] = {1, 1, 1}, rs[3] = {og[0].r_star, og[1].r_star, og[2].r_star};
        mse[out][0] = best_mse(g, ones, &lam[out][0]);
        mse[out][1] = best_mse(g, rs, &lam[out][1]);
    }
    for (int a = 0; a < 2; a++)
        assert_true(mse[1][a] < mse[0][a]);                      /* opting out helps */
    assert_true(mse[0][1] < mse[0][0] && mse[1][1] < mse[1][0]); /* FedHDP < HDP-FedAvg */
    assert_true(fabs(lam[1][1] - 10.0) < 0.02);                  /* alpha^2 / tau^2 */
    assert_true(lam[0][1] < lam[1][1]);
    /* the values of an independent script (to its 4 digits) */
    assert_true(fabs(mse[0][0] - 0.5714) < 1e-4 && fabs(mse[1][0] - 0.5475) < 1e-4);
    assert_true(fabs(mse[0][1] - 0.4266) < 1e-4 && fabs(mse[1][1] - 0.4164) < 1e-4);
    assert_true(fabs(lam[0][1] - 1.53) < 0.01);
}

static void fedhdp_algorithm_1_refuses_bad_input(void **state)
{
    (void)state;
    const double phi[2] = {1, 2}, r[2] = {1, 0}, r0[2] = {0, 0}, lam[2] = {1, DP_INF};
    const uint32_t grp[2] = {0, 1}, bad[2] = {0, 2};
    double glob, pers[2];
    assert_int_equal(fl_hdp_alg1(2, 1, phi, phi, grp, 2, r, lam, &glob, pers, &E), DP_OK);
    assert_close(glob, 1.0, 0, 0); /* r = 0: the second client is ignored */
    assert_close(pers[0], 1.0, 0, 0);
    assert_close(pers[1], 1.0, 0, 0); /* lambda inf: the global model */
    dp_err_clear(&E);
    assert_int_equal(fl_hdp_alg1(2, 1, phi, phi, grp, 2, r0, lam, &glob, pers, &E), DP_EINVAL);
    assert_string_equal(E.field, "r");
    dp_err_clear(&E);
    assert_int_equal(fl_hdp_alg1(2, 1, phi, phi, bad, 2, r, lam, &glob, pers, &E), DP_EINVAL);
    assert_string_equal(E.field, "group");
    dp_err_clear(&E);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mrmtl_matches_the_fig7_setting),
        cmocka_unit_test(mrmtl_lemma_6_7_has_its_minimum_at_lambda_star),
        cmocka_unit_test(mrmtl_silos_reduce_to_theorem_6_3_and_minimise_each_error),
        cmocka_unit_test(mrmtl_refuses_bad_input_naming_the_field),
        cmocka_unit_test(fedhdp_matches_the_independent_configurations),
        cmocka_unit_test(fedhdp_r_star_minimises_the_server_variance),
        cmocka_unit_test(fedhdp_refuses_bad_input_naming_the_field),
        cmocka_unit_test(fedhdp_algorithm_3_matches_its_closed_forms_by_monte_carlo),
        cmocka_unit_test(fedhdp_opting_out_lowers_a_clients_error),
        cmocka_unit_test(fedhdp_algorithm_1_refuses_bad_input),
        cmocka_unit_test(ppsgd_threshold_matches_lemma_4_6),
        cmocka_unit_test(ppsgd_bound_matches_theorem_4_5_and_is_minimised),
        cmocka_unit_test(ppsgd_refuses_bad_input_naming_the_field),
    };
    return cmocka_run_group_tests_name("federated_fl_theory", tests, NULL, NULL);
}
