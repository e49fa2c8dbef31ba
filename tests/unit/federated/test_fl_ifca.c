/*
 * test_fl_ifca.c: the ifca algorithm (federated/fl_algo_ifca.c): one cluster is FedAvg bit for
 * bit (models, metrics and privacy cost); the report-noisy-min picks the argmin without noise and
 * samples the exponential mechanism's distribution with it; the selection's privacy event is
 * alpha eps^2 / 8 on top of the round's DP-SGD curve, and the planned epsilon of a job is the
 * closed-form composition; the calibration leaves the DP-SGD what the selections leave of the
 * target and refuses a target the selections alone exceed (Liu et al., NeurIPS 2022, §3.3 and
 * Fig. 4: IFCA selecting every round is infeasible); two well-separated groups of silos are found
 * by two clusters, which then beat one; trend (vii)'s utility half (at a small epsilon IFCA
 * selecting in 10% of the rounds beats selecting in every round, whose noisy selections collapse
 * at a smaller one); the warm-started MR-MTL freezes the assignment. The thread
 * count and resume invariants run in test_fl_algo.c (ifca is in its list of algorithms).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "accounting/rdp.h"
#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "common/dp_rng.h"
#include "federated/fl_algo.h"
#include "federated/fl_data.h"
#include "tests/support/test_util.h"

#define D 3
#define P (D + 1)

/* Silo k: x ~ N(0, I), y = w_k.x + 0.05 N(0, 1), w_k = sign_k theta + tau N(0, I) with sign_k
 * = +1 for the even silos and -1 for the odd ones (two groups: the clusters to find). */
static void fed_make(fl_federation *f, size_t k_n, size_t n, double tau, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    f->d = D;
    f->n_silos = k_n;
    f->silo = dp_calloc(k_n, sizeof(fl_silo_data));
    assert_non_null(f->silo);
    gsl_rng *r = dp_rng_alloc(seed, DP_RNG_STREAM_DATA, NULL);
    assert_non_null(r);
    double theta[P] = {1.5, -1.0, 2.0, 0.5};
    for (size_t k = 0; k < k_n; k++) {
        fl_silo_data *s = &f->silo[k];
        double w[P];
        for (size_t j = 0; j < P; j++)
            w[j] = (k % 2 == 0 ? 1.0 : -1.0) * theta[j] + tau * gsl_ran_gaussian(r, 1.0);
        s->n_train = n + 3 * k;
        s->n_test = n / 4 + 1;
        s->x_train = dp_calloc(s->n_train * D, sizeof(float));
        s->y_train = dp_calloc(s->n_train, sizeof(float));
        s->x_test = dp_calloc(s->n_test * D, sizeof(float));
        s->y_test = dp_calloc(s->n_test, sizeof(float));
        assert_true(s->x_train && s->y_train && s->x_test && s->y_test);
        for (size_t part = 0; part < 2; part++) {
            size_t m = part == 0 ? s->n_train : s->n_test;
            float *x = part == 0 ? s->x_train : s->x_test;
            float *y = part == 0 ? s->y_train : s->y_test;
            for (size_t i = 0; i < m; i++) {
                double v = w[D];
                for (size_t j = 0; j < D; j++) {
                    x[i * D + j] = (float)gsl_ran_gaussian(r, 1.0);
                    v += w[j] * (double)x[i * D + j];
                }
                y[i] = (float)(v + 0.05 * gsl_ran_gaussian(r, 1.0));
            }
        }
    }
    gsl_rng_free(r);
}

static const double Z6[6] = {0.9, 1.2, 1.0, 1.4, 0.8, 1.1};

static fl_job_cfg cfg_of(const char *algo, bool private_)
{
    fl_job_cfg c;
    fl_job_cfg_default(&c);
    c.algorithm = algo;
    c.model.type = FL_MODEL_LINEAR;
    c.model.d_in = D;
    c.rounds = 12;
    c.batch_size = 8;
    c.lr = 0.1;
    c.seed = 77;
    if (private_) {
        c.clip = 2.0;
        c.noise_multiplier = Z6;
        c.ifca_select_eps = 0.4;
    }
    return c;
}

static void run(const fl_job_cfg *c, const fl_federation *f, fl_state *s, fl_round_metrics *m)
{
    dp_err err = {0};
    assert_int_equal(fl_state_init(c, f, s, &err), DP_OK);
    while (s->round < c->rounds)
        if (fl_round_run(c, f, s, NULL, 2, m, &err) != DP_OK)
            fail_msg("round %llu: %s (%s)", (unsigned long long)s->round, err.msg, err.field);
}

static void one_cluster_is_fedavg_bit_for_bit(void **state)
{
    (void)state;
    fl_federation f;
    fed_make(&f, 6, 30, 0.3, 1);
    fl_job_cfg ci = cfg_of("ifca", true), cf = cfg_of("fedavg", true);
    ci.ifca_clusters = 1;
    fl_state si, sf;
    fl_round_metrics mi = {0}, mf = {0};
    run(&ci, &f, &si, &mi);
    run(&cf, &f, &sf, &mf);
    assert_memory_equal(si.personal, sf.personal, 6 * P * sizeof(float));
    assert_memory_equal(si.extra, sf.global, P * sizeof(float)); /* cluster 0 = the global */
    for (size_t k = 0; k < 6; k++) {
        assert_memory_equal(&mi.silo[k].personal, &mf.silo[k].personal, sizeof(fl_model_metrics));
        assert_int_equal(mi.silo[k].cluster, 0);
        assert_int_equal(mf.silo[k].cluster, -1);
    }
    /* and the same privacy cost: no selection with one cluster */
    fl_silo_plan pi, pf;
    acct_event *ei = NULL, *ef = NULL, *sel = NULL;
    dp_err err = {0};
    assert_int_equal(fl_plan_silo(&ci, 2, 30, &pi, &ei, &err), DP_OK);
    assert_int_equal(fl_plan_silo(&cf, 2, 30, &pf, &ef, &err), DP_OK);
    assert_int_equal(pi.select_rounds, 0);
    assert_int_equal(fl_plan_silo_select(&ci, &pi, ei, &sel, &err), DP_OK);
    assert_null(sel);
    fl_accountant acct = {1e-5, ACCT_CONV_OPTIMAL, NULL, 0};
    double e1, e2;
    assert_int_equal(fl_plan_epsilon(ei, ci.rounds, &acct, &e1, &err), DP_OK);
    assert_int_equal(fl_plan_epsilon(ef, cf.rounds, &acct, &e2, &err), DP_OK);
    assert_true(e1 == e2);
    acct_event_free(ei);
    acct_event_free(ef);
    fl_round_metrics_free(&mi);
    fl_round_metrics_free(&mf);
    fl_state_free(&si);
    fl_state_free(&sf);
    fl_federation_free(&f);
}

static void noise_zero_picks_the_argmin_and_noise_samples_the_exponential_mechanism(void **state)
{
    (void)state;
    const double score[4] = {7.25, 3.5, 3.75, 9.0};
    for (uint64_t seed = 0; seed < 200; seed++)
        assert_int_equal(fl_ifca_select(score, 4, 0.0, seed), 1);
    const double tie[3] = {2.0, 2.0, 5.0};
    assert_int_equal(fl_ifca_select(tie, 3, 0.0, 5), 0);
    /* with scale 2 B / eps the draw is Pr[g] ~ exp(-score_g / scale) */
    const double scale = 1.6;
    const size_t n = 40000;
    size_t count[4] = {0};
    for (uint64_t seed = 0; seed < n; seed++)
        count[fl_ifca_select(score, 4, scale, dp_rng_derive(99, seed))]++;
    double z = 0, p[4];
    for (size_t g = 0; g < 4; g++)
        z += exp(-score[g] / scale);
    for (size_t g = 0; g < 4; g++) {
        p[g] = exp(-score[g] / scale) / z;
        double sd = sqrt(p[g] * (1 - p[g]) / (double)n);
        /* 5 standard deviations: a fixed seed set, so this either always passes or never */
        assert_close((double)count[g] / (double)n, p[g], 0, 5 * sd + 1e-4);
    }
}

static void the_selection_event_is_alpha_eps_squared_over_8_on_top_of_the_round(void **state)
{
    (void)state;
    fl_job_cfg c = cfg_of("ifca", true);
    c.ifca_clusters = 3;
    c.ifca_select_rounds = 4;
    dp_err err = {0};
    fl_silo_plan p;
    acct_event *ev = NULL, *sel = NULL;
    assert_int_equal(fl_plan_silo(&c, 1, 40, &p, &ev, &err), DP_OK);
    assert_int_equal(p.select_rounds, 4);
    assert_true(p.select_epsilon == 0.4);
    assert_int_equal(fl_plan_silo_select(&c, &p, ev, &sel, &err), DP_OK);
    assert_non_null(sel);
    const double *orders;
    size_t n = acct_rdp_default_orders(&orders);
    double *r = dp_calloc(n, sizeof *r), *s = dp_calloc(n, sizeof *s), *tot = dp_calloc(n, 8);
    assert_true(r && s && tot);
    assert_int_equal(acct_rdp_eval(ev, ACCT_NB_ADD_REMOVE, orders, n, r, &err), DP_OK);
    assert_int_equal(acct_rdp_eval(sel, ACCT_NB_ADD_REMOVE, orders, n, s, &err), DP_OK);
    for (size_t i = 0; i < n; i++) {
        assert_close(s[i] - r[i], orders[i] * 0.4 * 0.4 / 8.0, 1e-9, 1e-12);
        tot[i] = (double)c.rounds * r[i] + 4.0 * orders[i] * 0.02;
    }
    /* the job's planned epsilon: 12 rounds of DP-SGD and 4 selections, as the closed form */
    fl_accountant acct = {1e-5, ACCT_CONV_OPTIMAL, NULL, 0};
    double eps, exact, opt;
    assert_int_equal(fl_plan_epsilon_select(ev, sel, c.rounds, 4, &acct, &eps, &err), DP_OK);
    assert_int_equal(
        acct_rdp_to_epsilon(orders, tot, n, 1e-5, ACCT_CONV_OPTIMAL, &exact, &opt, &err), DP_OK);
    assert_true(eps >= exact);
    assert_close(eps, exact, 1e-9, 0);
    /* no selection round: fl_plan_epsilon's figure bit for bit; more of them: more epsilon */
    double e0, e0s, e8;
    assert_int_equal(fl_plan_epsilon(ev, c.rounds, &acct, &e0, &err), DP_OK);
    assert_int_equal(fl_plan_epsilon_select(ev, sel, c.rounds, 0, &acct, &e0s, &err), DP_OK);
    assert_true(e0 == e0s);
    assert_int_equal(fl_plan_epsilon_select(ev, sel, c.rounds, 8, &acct, &e8, &err), DP_OK);
    assert_true(e0 < eps && eps < e8);
    /* a private job's selection must be private */
    c.ifca_select_eps = DP_INF;
    acct_event *bad = NULL;
    dp_err_clear(&err);
    assert_int_equal(fl_plan_silo(&c, 1, 40, &p, &bad, &err), DP_EINVAL);
    assert_string_equal(err.field, "ifca.selection_epsilon");
    assert_null(bad);
    dp_free(r);
    dp_free(s);
    dp_free(tot);
    acct_event_free(ev);
    acct_event_free(sel);
}

static void calibration_leaves_dpsgd_the_rest_and_refuses_what_selection_alone_exceeds(void **state)
{
    (void)state;
    fl_job_cfg c = cfg_of("ifca", true), c1 = c;
    c.rounds = 40;
    c.ifca_select_rounds = 4; /* "IFCA (10%)" */
    c.ifca_select_eps = 0.03 * 1.0;
    c1 = c;
    c1.ifca_clusters = 1; /* no selection */
    fl_accountant acct = {1e-5, ACCT_CONV_OPTIMAL, NULL, 0};
    dp_err err = {0};
    double z, z1, e, e1;
    assert_int_equal(fl_calibrate_noise(&c, 200, 1.0, &acct, &z, &e, &err), DP_OK);
    assert_int_equal(fl_calibrate_noise(&c1, 200, 1.0, &acct, &z1, &e1, &err), DP_OK);
    assert_true(e <= 1.0 && e1 <= 1.0);
    assert_true(z > z1); /* the selections take part of the budget */
    /* the plan at z: within the target, and 1% less noise exceeds it */
    fl_job_cfg cz = c;
    double zs[1] = {z};
    cz.noise_multiplier = zs;
    fl_silo_plan p;
    acct_event *ev = NULL, *sel = NULL;
    assert_int_equal(fl_plan_silo(&cz, 0, 200, &p, &ev, &err), DP_OK);
    assert_int_equal(fl_plan_silo_select(&cz, &p, ev, &sel, &err), DP_OK);
    double ep;
    assert_int_equal(fl_plan_epsilon_select(ev, sel, c.rounds, 4, &acct, &ep, &err), DP_OK);
    assert_true(ep <= 1.0);
    acct_event_free(ev);
    acct_event_free(sel);
    zs[0] = z * 0.99;
    assert_int_equal(fl_plan_silo(&cz, 0, 200, &p, &ev, &err), DP_OK);
    assert_int_equal(fl_plan_silo_select(&cz, &p, ev, &sel, &err), DP_OK);
    assert_int_equal(fl_plan_epsilon_select(ev, sel, c.rounds, 4, &acct, &ep, &err), DP_OK);
    assert_true(ep > 1.0);
    acct_event_free(ev);
    acct_event_free(sel);
    /* selecting in all 40 rounds at 0.03 eps each: the selections alone cost more than 1 */
    c.ifca_select_rounds = 40;
    c.ifca_select_eps = 0.12;
    dp_err_clear(&err);
    assert_int_equal(fl_calibrate_noise(&c, 200, 1.0, &acct, &z, &e, &err), DP_ENUMERIC);
}

/* Trend (vii) of Liu et al., NeurIPS 2022, on their accountant's own numbers (the Vehicle silo of
 * their App. C.4: n = 872, B = 64, 401 rounds counted as their code does, delta = 1e-7, selection
 * epsilon 0.03 x the target per selection round, computed with the authors' TF-Privacy accountant
 * for the reproduction notes): no selection needs z = 50.90 at epsilon 0.5, 40 selections ("IFCA
 * (10%)") z = 57.16, 401 selections (every round) cannot meet the target at all (the selections
 * alone spend 0.735). Our calibration gives the same to 2e-4 relative. */
static void trend_vii_every_round_selection_is_infeasible_and_ten_percent_is_not(void **state)
{
    (void)state;
    fl_job_cfg c;
    fl_job_cfg_default(&c);
    c.algorithm = "ifca";
    c.model.type = FL_MODEL_SVM;
    c.model.d_in = 100;
    c.rounds = 401;
    c.batch_size = 64;
    c.lr = 0.01;
    c.clip = 6;
    c.ifca_clusters = 4;
    c.ifca_select_eps = 0.03 * 0.5;
    fl_accountant acct = {1e-7, ACCT_CONV_OPTIMAL, NULL, 0};
    dp_err err = {0};
    double z, e;
    fl_job_cfg c1 = c;
    c1.ifca_clusters = 1;
    assert_int_equal(fl_calibrate_noise(&c1, 872, 0.5, &acct, &z, &e, &err), DP_OK);
    assert_close(z, 50.90, 2e-4, 0);
    c.ifca_select_rounds = 40;
    assert_int_equal(fl_calibrate_noise(&c, 872, 0.5, &acct, &z, &e, &err), DP_OK);
    assert_close(z, 57.16, 2e-4, 0);
    c.ifca_select_rounds = 401;
    dp_err_clear(&err);
    assert_int_equal(fl_calibrate_noise(&c, 872, 0.5, &acct, &z, &e, &err), DP_ENUMERIC);
}

/* The mean test MSE of the silos' personal models. */
static double mean_mse(const fl_round_metrics *m)
{
    return m->personal.pooled_test_metric;
}

static void two_clusters_find_the_two_groups_and_beat_one(void **state)
{
    (void)state;
    fl_federation f;
    fed_make(&f, 6, 60, 0.05, 3);
    fl_job_cfg c2 = cfg_of("ifca", false), c1 = c2;
    c2.rounds = c1.rounds = 30;
    c1.ifca_clusters = 1;
    fl_state s2, s1;
    fl_round_metrics m2 = {0}, m1 = {0};
    run(&c2, &f, &s2, &m2);
    run(&c1, &f, &s1, &m1);
    long even = m2.silo[0].cluster, odd = m2.silo[1].cluster;
    assert_true(even != odd);
    for (size_t k = 0; k < 6; k++)
        assert_int_equal(m2.silo[k].cluster, k % 2 == 0 ? even : odd);
    assert_true(mean_mse(&m2) < 0.1 * mean_mse(&m1));
    fl_round_metrics_free(&m2);
    fl_round_metrics_free(&m1);
    fl_state_free(&s2);
    fl_state_free(&s1);
    fl_federation_free(&f);
}

/* One private run of trend (vii) on 8 silos of fed_make(n = 1000, tau 0.05): 2 clusters, T = 100
 * rounds, B 16, lr 0.1, clip 2, delta 1e-5, selection epsilon 0.03 eps per selection round, every
 * silo's noise calibrated to eps with its selections included. Returns the final round's mean test
 * MSE of the silos' models; *switches counts the silo-rounds t >= 10 in which a silo's cluster
 * differs from its cluster of the round before (after the 10% schedule's last selection). */
#define T7_SILOS  8
#define T7_ROUNDS 100
static double trend_vii_run(const fl_federation *f, double eps, uint64_t select_rounds,
                            uint64_t seed, size_t *switches)
{
    fl_job_cfg c = cfg_of("ifca", false);
    c.rounds = T7_ROUNDS;
    c.batch_size = 16;
    c.seed = seed;
    c.clip = 2.0;
    c.ifca_clusters = 2;
    c.ifca_select_rounds = select_rounds;
    c.ifca_select_eps = 0.03 * eps;
    double z[T7_SILOS], e[T7_SILOS];
    size_t n[T7_SILOS];
    fl_accountant acct = {1e-5, ACCT_CONV_OPTIMAL, NULL, 0};
    const fl_accountant *ap[T7_SILOS];
    for (size_t k = 0; k < T7_SILOS; k++) {
        n[k] = f->silo[k].n_train;
        ap[k] = &acct;
    }
    dp_err err = {0};
    assert_int_equal(fl_calibrate_noise_many(&c, T7_SILOS, n, eps, ap, z, e, &err), DP_OK);
    c.noise_multiplier = z;
    fl_state s;
    fl_round_metrics m = {0};
    long prev[T7_SILOS];
    *switches = 0;
    assert_int_equal(fl_state_init(&c, f, &s, &err), DP_OK);
    while (s.round < c.rounds) {
        assert_int_equal(fl_round_run(&c, f, &s, NULL, 1, &m, &err), DP_OK);
        for (size_t k = 0; k < T7_SILOS; k++) {
            if (m.round >= 10 && m.silo[k].cluster != prev[k])
                (*switches)++;
            prev[k] = m.silo[k].cluster;
        }
    }
    double mse = mean_mse(&m);
    fl_round_metrics_free(&m);
    fl_state_free(&s);
    return mse;
}

/* Trend (vii) of Liu et al., NeurIPS 2022 (§5.3, Figs. 3 and 4), its utility half, on a
 * federation where IFCA's groups are easy to find (8 silos of about 1000 rows in two groups
 * +-theta, tau 0.05; 2 clusters, 100 rounds, record-level DP, delta 1e-5, every silo's DP-SGD
 * noise calibrated to the target with its selections at 0.03 eps each included):
 * 1. at eps = 0.5, "IFCA (10%)" (selection in rounds 0-9) beats selection in every round on every
 *    seed: the 100 selections leave the DP-SGD less of the budget (z 11.85 against 9.87 for 10),
 *    and the groups are found either way. Offline, seeds 1-20: every-round MSE / 10% MSE in
 *    [1.44, 1.70] (10% alone 0.045-0.25); asserted > 1.25 on seeds 1-4 (10% < 0.3: a silo in the
 *    wrong cluster costs about 2). Selecting in every round whatever select_rounds says gives a
 *    ratio of 1.00 (and fails the accounting tests above); so would not charging the selections.
 * 2. at eps = 0.25 (0.0075 per selection: Gumbel scale 2B/eps_sel = 267 B against score gaps of
 *    at most about n B = 1000 B), every-round selection collapses: its noisy selections keep
 *    moving silos between the clusters. Offline, seeds 1-20: 205-307 of the 720 silo-rounds of
 *    rounds 10-99 switch cluster (at eps = 0.5: 0-16); asserted >= 150 on seeds 1-2. With the
 *    noise scale 2B instead of 2B/eps_sel (tried) no silo switches and this fails.
 * At 200 rows a silo (40 rounds, eps 2) the 10% schedule froze a wrong early assignment on 8 seeds
 * of 10 (docs/REPRODUCTION.md, IFCA): the ordering needs groups that the first selections can
 * tell apart. About a second of CPU. */
static void trend_vii_ten_percent_beats_every_round_selection_at_small_eps(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        fl_federation f;
        fed_make(&f, T7_SILOS, 1000, 0.05, seed);
        size_t sw10, swall;
        double ten = trend_vii_run(&f, 0.5, T7_ROUNDS / 10, seed, &sw10);
        double all = trend_vii_run(&f, 0.5, T7_ROUNDS, seed, &swall);
        print_message("seed %llu eps 0.5: 10%% %.4f, every round %.4f (ratio %.2f; switches after "
                      "round 10: %zu, %zu)\n",
                      (unsigned long long)seed, ten, all, all / ten, sw10, swall);
        assert_int_equal(sw10, 0); /* frozen after its last selection */
        assert_true(ten < 0.3);    /* usable: the groups are found (a wrong silo costs ~2) */
        assert_true(all > 1.25 * ten);
        if (seed <= 2) {
            double col = trend_vii_run(&f, 0.25, T7_ROUNDS, seed, &swall);
            print_message("seed %llu eps 0.25: every round %.4f, switches after round 10: %zu\n",
                          (unsigned long long)seed, col, swall);
            assert_true(swall >= 150);
        }
        fl_federation_free(&f);
    }
}

static void the_warm_start_freezes_the_assignment_and_then_personalises(void **state)
{
    (void)state;
    fl_federation f;
    fed_make(&f, 6, 60, 0.3, 4);
    fl_job_cfg c = cfg_of("ifca", false);
    c.rounds = 20;
    c.ifca_warm_rounds = 8;
    c.lambda = 0.5;
    dp_err err = {0};
    fl_state s;
    fl_round_metrics m = {0};
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    long at_switch[6];
    while (s.round < c.rounds) {
        assert_int_equal(fl_round_run(&c, &f, &s, NULL, 1, &m, &err), DP_OK);
        for (size_t k = 0; k < 6; k++) {
            if (m.round == 7)
                at_switch[k] = m.silo[k].cluster;
            if (m.round > 7)
                assert_int_equal(m.silo[k].cluster, at_switch[k]);
            /* IFCA rounds: the silo's model is its cluster's; MR-MTL rounds: its own */
            const float *own = s.personal + k * P, *cl = s.extra + m.silo[k].cluster * P;
            if (m.round <= 7)
                assert_memory_equal(own, cl, P * sizeof(float));
            else
                assert_true(memcmp(own, cl, P * sizeof(float)) != 0);
        }
    }
    /* personalising beats the cluster models on the silos' own test rows (tau 0.3) */
    double pers = m.personal.pooled_test_metric;
    fl_job_cfg ci = c;
    ci.ifca_warm_rounds = c.rounds;
    fl_state si;
    fl_round_metrics mi = {0};
    run(&ci, &f, &si, &mi);
    assert_true(pers < mi.personal.pooled_test_metric);
    fl_round_metrics_free(&mi);
    fl_state_free(&si);
    fl_round_metrics_free(&m);
    fl_state_free(&s);
    fl_federation_free(&f);
}

static void bad_ifca_configurations_name_their_field(void **state)
{
    (void)state;
    fl_job_cfg c = cfg_of("ifca", false);
    dp_err err = {0};
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_OK);
    c.ifca_clusters = 0;
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "ifca.clusters");
    c = cfg_of("ifca", false);
    c.ifca_clusters = FL_MAX_IFCA_CLUSTERS + 1;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "ifca.clusters");
    c = cfg_of("ifca", false);
    c.ifca_select_rounds = 0;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "ifca.select_rounds");
    c = cfg_of("ifca", false);
    c.ifca_warm_rounds = 0;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "ifca.warm_rounds");
    c = cfg_of("ifca", false);
    c.ifca_select_eps = DP_NAN;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "ifca.selection_epsilon");
    c = cfg_of("ifca", false);
    c.ifca_loss_bound = 0;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "ifca.loss_bound");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_cluster_is_fedavg_bit_for_bit),
        cmocka_unit_test(noise_zero_picks_the_argmin_and_noise_samples_the_exponential_mechanism),
        cmocka_unit_test(the_selection_event_is_alpha_eps_squared_over_8_on_top_of_the_round),
        cmocka_unit_test(
            calibration_leaves_dpsgd_the_rest_and_refuses_what_selection_alone_exceeds),
        cmocka_unit_test(trend_vii_every_round_selection_is_infeasible_and_ten_percent_is_not),
        cmocka_unit_test(two_clusters_find_the_two_groups_and_beat_one),
        cmocka_unit_test(trend_vii_ten_percent_beats_every_round_selection_at_small_eps),
        cmocka_unit_test(the_warm_start_freezes_the_assignment_and_then_personalises),
        cmocka_unit_test(bad_ifca_configurations_name_their_field),
    };
    return cmocka_run_group_tests_name("fl_ifca", tests, NULL, NULL);
}
