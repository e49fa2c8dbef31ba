/*
 * test_fl_additive.c: federated/fl_additive (the synthetic personalised regression of Bietti et
 * al., ICML 2022, §6.1) and a small-scale run of its Fig. 1a trends through the ppsgd algorithm:
 *   - the generator: theta_i* shared on the first d - p coordinates, apart on the last p; x's
 *     column k has variance 1/k; y - theta_i*.x has the label noise's std; the excess risk of the
 *     zero model is (1/N) sum_i ||theta_i*||_Sigma^2; seeded draws repeat;
 *   - the trends (the paper's §6.1; the full-size run is `make reproduce PART=ppsgd`): with much
 *     privacy noise, local learning (r = 0) ends best and the final risks are ordered by r
 *     (0 < 0.3 < 1 < inf); without noise, global learning (r = inf) is ahead of local learning
 *     early on. Statistical bounds are wide; the draws are seeded, so the test is deterministic.
 */
#include "tests/support/test_util.h"

#include <math.h>
#include <string.h>

#include "common/dp_math.h"
#include "federated/fl_additive.h"
#include "federated/fl_algo.h"

static dp_err E;

/* The paper's setting, smaller: 50 users of 20 features. */
static fl_additive_spec small_spec(void)
{
    fl_additive_spec s = fl_additive_paper_spec();
    s.users = 50;
    s.dim = 20;
    return s;
}

static void generator_has_the_papers_law(void **state)
{
    (void)state;
    fl_additive_spec sp = small_spec();
    sp.rows = 400;
    fl_additive a;
    fl_federation f;
    assert_int_equal(fl_additive_init(&sp, &a, &E), DP_OK);
    assert_int_equal(fl_additive_federation(&a, &f, &E), DP_OK);
    assert_int_equal(fl_additive_draw(&a, 0, &f, &E), DP_OK);
    size_t d = sp.dim, shared = d - sp.personal;
    for (size_t i = 1; i < sp.users; i++)
        for (size_t k = 0; k < d; k++) {
            double diff = fabs(a.theta[i * d + k] - a.theta[k]);
            if (k < shared)
                assert_true(diff == 0.0);
            else
                assert_true(diff < 0.1 * 6); /* N(0, 2 s^2) differences */
        }
    /* column variances 1/k (20,000 rows: relative sd of a variance ~1%) and the residual */
    double var[64] = {0}, res = 0;
    size_t n = 0;
    for (size_t i = 0; i < sp.users; i++) {
        const fl_silo_data *s = &f.silo[i];
        for (size_t r = 0; r < s->n_train; r++, n++) {
            double y = (double)s->y_train[r];
            for (size_t k = 0; k < d; k++) {
                double x = (double)s->x_train[r * d + k];
                var[k] += x * x;
                y -= a.theta[i * d + k] * x;
            }
            res += y * y;
        }
    }
    for (size_t k = 0; k < d; k++)
        assert_close(var[k] / (double)n, 1.0 / (double)(k + 1), 0.05, 0);
    assert_close(sqrt(res / (double)n), 0.01, 0.05, 0);
    /* the zero model's excess risk */
    float zero[50 * 21] = {0};
    double want = 0;
    for (size_t i = 0; i < sp.users; i++)
        for (size_t k = 0; k < d; k++)
            want += a.theta[i * d + k] * a.theta[i * d + k] / (double)(k + 1);
    assert_close(fl_additive_excess_risk(&a, zero), want / (double)sp.users, 1e-12, 0);
    /* a bias adds b^2 */
    zero[d] = 2.0f;
    assert_close(fl_additive_excess_risk(&a, zero), want / (double)sp.users + 4.0 / 50, 1e-12, 0);
    /* seeded: round 0 again gives the same rows */
    float first = f.silo[3].x_train[17];
    assert_int_equal(fl_additive_draw(&a, 1, &f, &E), DP_OK);
    assert_true(f.silo[3].x_train[17] != first);
    assert_int_equal(fl_additive_draw(&a, 0, &f, &E), DP_OK);
    assert_true(f.silo[3].x_train[17] == first);
    fl_federation_free(&f);
    fl_additive_free(&a);
    sp.personal = 21;
    assert_int_equal(fl_additive_init(&sp, &a, &E), DP_EINVAL);
    assert_string_equal(E.field, "dim");
    dp_err_clear(&E);
}

/* Excess risk after rounds t1 and t2 of ppsgd with ratio r, noise sigma, step eta. */
static void run(const fl_additive *a, fl_federation *f, double r, double sigma, double eta,
                uint64_t t1, uint64_t t2, double *risk1, double *risk2)
{
    fl_job_cfg c;
    fl_job_cfg_default(&c);
    c.algorithm = "ppsgd";
    c.model = (fl_model_spec){.type = FL_MODEL_LINEAR, .d_in = a->spec.dim};
    c.rounds = t2;
    c.batch_size = a->spec.rows;
    c.lr = eta;
    c.seed = 3;
    c.ppsgd_ratio = r;
    c.update_clip = 10;
    c.server_noise = sigma;
    fl_state st;
    assert_int_equal(fl_state_init(&c, f, &st, &E), DP_OK);
    for (uint64_t t = 0; t < t2; t++) {
        assert_int_equal(fl_additive_draw(a, t, f, &E), DP_OK);
        assert_int_equal(fl_round_run(&c, f, &st, NULL, 2, NULL, &E), DP_OK);
        if (t + 1 == t1)
            *risk1 = fl_additive_excess_risk(a, st.personal);
    }
    *risk2 = fl_additive_excess_risk(a, st.personal);
    fl_state_free(&st);
}

static void ppsgd_shows_the_fig_1a_trends(void **state)
{
    (void)state;
    fl_additive_spec sp = small_spec();
    fl_additive a;
    fl_federation f;
    assert_int_equal(fl_additive_init(&sp, &a, &E), DP_OK);
    assert_int_equal(fl_additive_federation(&a, &f, &E), DP_OK);
    /* much noise (sigma = 10 with N = 50): the final risks are ordered by r, local best */
    const double ratios[4] = {0, 0.3, 1, DP_INF};
    double early[4], late[4];
    for (size_t i = 0; i < 4; i++)
        run(&a, &f, ratios[i], 10.0, 0.4, 10, 200, &early[i], &late[i]);
    for (size_t i = 1; i < 4; i++)
        if (!(late[i - 1] < late[i]))
            fail_msg("sigma 10: risk at r = %g (%g) is not below r = %g (%g)", ratios[i - 1],
                     late[i - 1], ratios[i], late[i]);
    /* no noise: global learning is ahead of local learning early on, each at its best step size
     * (the paper's figures take the pointwise best over a grid; at one shared step size the
     * clipped global step can trail the unclipped personal one) */
    double g_early = DP_INF, l_early = DP_INF, e, l;
    const double etas[4] = {0.2, 0.4, 0.7, 1.2};
    for (size_t k = 0; k < 4; k++) {
        run(&a, &f, DP_INF, 0.0, etas[k], 10, 10, &e, &l);
        g_early = fmin(g_early, e);
        run(&a, &f, 0.0, 0.0, etas[k], 10, 10, &e, &l);
        l_early = fmin(l_early, e);
    }
    if (!(g_early < l_early))
        fail_msg("sigma 0, t = 10: global %g is not below local %g", g_early, l_early);
    fl_federation_free(&f);
    fl_additive_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(generator_has_the_papers_law),
        cmocka_unit_test(ppsgd_shows_the_fig_1a_trends),
    };
    return cmocka_run_group_tests_name("federated_fl_additive", tests, NULL, NULL);
}
