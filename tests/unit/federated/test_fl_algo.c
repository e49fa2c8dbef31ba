/*
 * test_fl_algo.c: the federated engine (federated/fl_algo.h) on small hand-made federations of
 * linear regression silos: convergence of non-private full-batch FedAvg to the pooled least
 * squares solution and of local training to each silo's own (both computed exactly with GSL in
 * double), MR-MTL's two limits (lambda = 0 is local bit for bit; a large lambda approaches the
 * pooled solution), finetune's two limits, bit-identical rounds for any number of threads,
 * checkpoint -> resume bit-identical (and corrupted checkpoints refused), stopped silos, the
 * metrics' aggregates, the privacy plan (steps, Ditto's 2x, the calibrated epsilon under the target
 * and within 1% of it, as the ledger sums it), DP-FedAvg's noise scale, clipping and sampling.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_randist.h>

#include "accounting/calibrate.h"
#include "accounting/logmath.h"
#include "accounting/zcdp.h"
#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "common/dp_rng.h"
#include "accounting/zcdp.h"
#include "federated/fl_algo.h"
#include "federated/fl_altmin.h"
#include "federated/fl_data.h"
#include "tests/support/test_util.h"

#define D       3 /* features */
#define P       (D + 1)
#define K_MAX   8
#define ALGOS_N 13

static const char *const ALGOS[ALGOS_N] = {
    "local",  "fedavg", "finetune",  "mrmtl", "ditto",  "dp_fedavg",     "ppsgd",
    "fedhdp", "adaped", "dp_adaped", "ifca",  "adamix", "gaussian_prior"};

/* The client-level algorithms: no record-level noise multiplier, a fixed denominator q K. */
static bool client_level(const char *algo)
{
    return strcmp(algo, "dp_fedavg") == 0 || strcmp(algo, "ppsgd") == 0 ||
           strcmp(algo, "fedhdp") == 0 || strcmp(algo, "adaped") == 0 ||
           strcmp(algo, "dp_adaped") == 0 || strcmp(algo, "adamix") == 0 ||
           strcmp(algo, "gaussian_prior") == 0;
}

/* fedhdp's groups in the shared configurations: a private group (z 0.7, r 0.3, lambda 0.5), a
 * stricter one (z 1.4, r 0.1, lambda 0.2) and an opted-out one (r 1, lambda 0.9); silo k in
 * group HDP_GROUP_OF[k]. */
static const fl_hdp_group_cfg HDP3[3] = {
    {false, 0.7, 0.3, 0.5}, {false, 1.4, 0.1, 0.2}, {true, 0.0, 1.0, 0.9}};
static const uint32_t HDP_GROUP_OF[K_MAX] = {0, 2, 1, 0, 2, 1, 0, 0};

/* ---- a hand-made federation ---- */

/* Silo k: x ~ N(0, I_D), y = w_k.x + b_k + 0.1 N(0, 1) with w_k = theta + tau N(0, I). */
static void fed_make(fl_federation *f, size_t k_n, const size_t *n_train, const size_t *n_test,
                     double tau, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    f->d = D;
    f->n_silos = k_n;
    f->silo = dp_calloc(k_n, sizeof(fl_silo_data));
    assert_non_null(f->silo);
    gsl_rng *r = dp_rng_alloc(seed, DP_RNG_STREAM_DATA, NULL);
    assert_non_null(r);
    double theta[P];
    for (size_t j = 0; j < P; j++)
        theta[j] = gsl_ran_gaussian(r, 1.0);
    for (size_t k = 0; k < k_n; k++) {
        fl_silo_data *s = &f->silo[k];
        double w[P];
        for (size_t j = 0; j < P; j++)
            w[j] = theta[j] + tau * gsl_ran_gaussian(r, 1.0);
        s->n_train = n_train[k];
        s->n_test = n_test[k];
        s->x_train = dp_calloc(s->n_train * D + 1, sizeof(float));
        s->y_train = dp_calloc(s->n_train + 1, sizeof(float));
        s->x_test = dp_calloc(s->n_test * D + 1, sizeof(float));
        s->y_test = dp_calloc(s->n_test + 1, sizeof(float));
        assert_true(s->x_train && s->y_train && s->x_test && s->y_test);
        for (size_t part = 0; part < 2; part++) {
            size_t n = part == 0 ? s->n_train : s->n_test;
            float *x = part == 0 ? s->x_train : s->x_test;
            float *y = part == 0 ? s->y_train : s->y_test;
            for (size_t i = 0; i < n; i++) {
                double v = w[D];
                for (size_t j = 0; j < D; j++) {
                    x[i * D + j] = (float)gsl_ran_gaussian(r, 1.0);
                    v += w[j] * (double)x[i * D + j];
                }
                y[i] = (float)(v + 0.1 * gsl_ran_gaussian(r, 1.0));
            }
        }
    }
    gsl_rng_free(r);
}

/* Least squares with intercept over the training rows of silos [k0, k1), in double with GSL:
 * beta = (w_1..w_D, b), the parameter layout of the linear model. */
static void least_squares(const fl_federation *f, size_t k0, size_t k1, double *beta)
{
    size_t n = 0;
    for (size_t k = k0; k < k1; k++)
        n += f->silo[k].n_train;
    gsl_matrix *x = gsl_matrix_alloc(n, P);
    gsl_vector *y = gsl_vector_alloc(n), *c = gsl_vector_alloc(P);
    gsl_matrix *cov = gsl_matrix_alloc(P, P);
    gsl_multifit_linear_workspace *ws = gsl_multifit_linear_alloc(n, P);
    assert_true(x && y && c && cov && ws);
    size_t row = 0;
    for (size_t k = k0; k < k1; k++)
        for (size_t i = 0; i < f->silo[k].n_train; i++, row++) {
            for (size_t j = 0; j < D; j++)
                gsl_matrix_set(x, row, j, (double)f->silo[k].x_train[i * D + j]);
            gsl_matrix_set(x, row, D, 1.0);
            gsl_vector_set(y, row, (double)f->silo[k].y_train[i]);
        }
    double chisq;
    assert_int_equal(gsl_multifit_linear(x, y, c, cov, &chisq, ws), GSL_SUCCESS);
    for (size_t j = 0; j < P; j++)
        beta[j] = gsl_vector_get(c, j);
    gsl_multifit_linear_free(ws);
    gsl_matrix_free(cov);
    gsl_vector_free(c);
    gsl_vector_free(y);
    gsl_matrix_free(x);
}

static double dist_to(const float *w, const double *beta)
{
    double s = 0;
    for (size_t j = 0; j < P; j++)
        s += ((double)w[j] - beta[j]) * ((double)w[j] - beta[j]);
    return sqrt(s);
}

static const size_t N_TRAIN3[3] = {20, 31, 26}, N_TEST3[3] = {7, 11, 9};

static fl_job_cfg base_cfg(const char *algo)
{
    fl_job_cfg c;
    fl_job_cfg_default(&c);
    c.algorithm = algo;
    c.model.type = FL_MODEL_LINEAR;
    c.model.d_in = D;
    c.rounds = 10;
    c.batch_size = 1000; /* full batch: q = 1, one step per round */
    c.lr = 0.3;
    c.seed = 20261127;
    return c;
}

/* The private configuration used by the determinism tests: Poisson batches, clipping, noise. */
static const double Z3[3] = {0.8, 1.1, 0.9};
static fl_job_cfg private_cfg(const char *algo)
{
    fl_job_cfg c = base_cfg(algo);
    c.rounds = 8;
    c.batch_size = 6;
    c.lr = 0.1;
    c.lambda = 0.5;
    c.clip = 1.0;
    c.noise_multiplier = client_level(algo) ? NULL : Z3;
    c.client_rate = 0.6;
    c.update_clip = 0.5;
    c.server_noise = 0.7;
    if (strcmp(algo, "fedhdp") == 0) {
        c.hdp_n_groups = 3;
        c.hdp_groups = HDP3;
        c.hdp_silo_group = HDP_GROUP_OF;
        c.hdp_adaptive = true; /* S^t in the state: the determinism tests cover it */
        c.hdp_clip_quantile = 0.5;
        c.hdp_clip_lr = 0.2;
        c.hdp_count_noise = 0.8;
    }
    c.ap_tau = 3;   /* adaped, dp_adaped */
    c.pr_steps = 3; /* adamix, gaussian_prior */
    c.ap_clip_psi = 0.2;
    if (strcmp(algo, "dp_adaped") == 0) /* Alg. 7 in the resume and threads tests */
        c.ap_unsampled_rounds = 2;
    c.ifca_clusters = 3; /* ifca: selection in rounds 0-3, MR-MTL from round 6 */
    c.ifca_select_rounds = 4;
    c.ifca_warm_rounds = 6;
    c.ifca_select_eps = 0.5;
    return c;
}

/* Runs rounds [state->round, until) with `threads` threads; metrics of the last round in *m. */
static void run_rounds(const fl_job_cfg *c, const fl_federation *f, fl_state *s, uint64_t until,
                       const bool *active, int threads, fl_round_metrics *m)
{
    dp_err err = {0};
    while (s->round < until) {
        int rc = fl_round_run(c, f, s, active, threads, m, &err);
        if (rc != DP_OK)
            fail_msg("round %llu: %s (%s)", (unsigned long long)s->round, err.msg, err.field);
    }
}

static void assert_states_equal(const fl_state *a, const fl_state *b)
{
    assert_int_equal(a->round, b->round);
    assert_int_equal(a->n_silos, b->n_silos);
    assert_int_equal(a->n_params, b->n_params);
    assert_memory_equal(a->global, b->global, a->n_params * sizeof(float));
    assert_memory_equal(a->personal, b->personal, a->n_silos * a->n_params * sizeof(float));
    assert_memory_equal(a->stopped, b->stopped, a->n_silos * sizeof(bool));
    assert_int_equal(a->n_extra, b->n_extra);
    if (a->n_extra > 0)
        assert_memory_equal(a->extra, b->extra, a->n_extra * sizeof(float));
}

/* ---- convergence ---- */

static void fedavg_full_batch_converges_to_the_pooled_least_squares_solution(void **state)
{
    (void)state;
    fl_federation f;
    fed_make(&f, 3, N_TRAIN3, N_TEST3, 1.0, 11);
    double pooled[P], own[P];
    least_squares(&f, 0, 3, pooled);
    fl_job_cfg c = base_cfg("fedavg");
    c.rounds = 1500;
    fl_state s;
    dp_err err = {0};
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    fl_round_metrics m = {0};
    run_rounds(&c, &f, &s, c.rounds, NULL, 1, &m);
    assert_true(dist_to(s.global, pooled) < 1e-4);
    for (size_t k = 0; k < 3; k++) { /* every silo holds the global model */
        assert_memory_equal(s.personal + k * P, s.global, P * sizeof(float));
        least_squares(&f, k, k + 1, own);
        assert_true(dist_to(s.global, own) > 0.1); /* heterogeneous: pooled != own */
    }
    assert_true(m.has_global);
    fl_round_metrics_free(&m);
    fl_state_free(&s);
    fl_federation_free(&f);
}

static void local_converges_to_each_silos_own_least_squares_solution(void **state)
{
    (void)state;
    fl_federation f;
    fed_make(&f, 3, N_TRAIN3, N_TEST3, 1.0, 12);
    fl_job_cfg c = base_cfg("local");
    c.rounds = 1500;
    fl_state s;
    dp_err err = {0};
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    fl_round_metrics m = {0};
    run_rounds(&c, &f, &s, c.rounds, NULL, 2, &m);
    for (size_t k = 0; k < 3; k++) {
        double own[P];
        least_squares(&f, k, k + 1, own);
        assert_true(dist_to(s.personal + k * P, own) < 1e-4);
    }
    /* local has no global model: it is absent from the metrics */
    assert_false(m.has_global);
    assert_true(isnan(m.global.pooled_test_metric) && isnan(m.silo[0].global.test_metric));
    assert_false(isnan(m.personal.pooled_test_metric));
    fl_round_metrics_free(&m);
    fl_state_free(&s);
    fl_federation_free(&f);
}

static void mrmtl_with_lambda_zero_is_local_training_bit_for_bit(void **state)
{
    (void)state;
    fl_federation f;
    fed_make(&f, 3, N_TRAIN3, N_TEST3, 1.0, 13);
    fl_job_cfg cm = private_cfg("mrmtl"), cl = private_cfg("local");
    cm.lambda = 0;
    fl_state sm, sl;
    dp_err err = {0};
    assert_int_equal(fl_state_init(&cm, &f, &sm, &err), DP_OK);
    assert_int_equal(fl_state_init(&cl, &f, &sl, &err), DP_OK);
    fl_round_metrics mm = {0}, ml = {0};
    run_rounds(&cm, &f, &sm, cm.rounds, NULL, 1, &mm);
    run_rounds(&cl, &f, &sl, cl.rounds, NULL, 1, &ml);
    assert_memory_equal(sm.personal, sl.personal, 3 * P * sizeof(float));
    for (size_t k = 0; k < 3; k++)
        assert_memory_equal(&mm.silo[k].personal, &ml.silo[k].personal, sizeof(fl_model_metrics));
    /* and the noise did move the models (a private run, not a trivial one) */
    float zero[P] = {0};
    assert_memory_not_equal(sl.personal, zero, sizeof zero);
    fl_round_metrics_free(&mm);
    fl_round_metrics_free(&ml);
    fl_state_free(&sm);
    fl_state_free(&sl);
    fl_federation_free(&f);
}

/* The distance of MR-MTL's global model to the pooled solution after many full-batch rounds. */
static double mrmtl_distance(const fl_federation *f, double lambda, const double *pooled)
{
    fl_job_cfg c = base_cfg("mrmtl");
    c.rounds = 4000;
    c.lr = 0.02;
    c.lambda = lambda;
    fl_state s;
    dp_err err = {0};
    assert_int_equal(fl_state_init(&c, f, &s, &err), DP_OK);
    run_rounds(&c, f, &s, c.rounds, NULL, 2, NULL);
    double d = dist_to(s.global, pooled);
    fl_state_free(&s);
    return d;
}

static void mrmtl_with_a_large_lambda_approaches_the_pooled_solution(void **state)
{
    (void)state;
    fl_federation f;
    fed_make(&f, 3, N_TRAIN3, N_TEST3, 1.0, 14);
    double pooled[P], worst_local = 0;
    least_squares(&f, 0, 3, pooled);
    for (size_t k = 0; k < 3; k++) {
        double own[P];
        least_squares(&f, k, k + 1, own);
        float w[P];
        for (size_t j = 0; j < P; j++)
            w[j] = (float)own[j];
        worst_local = fmax(worst_local, dist_to(w, pooled));
    }
    double d_small = mrmtl_distance(&f, 0.5, pooled);
    double d_large = mrmtl_distance(&f, 45.0, pooled); /* lr * lambda = 0.9 < 1 */
    assert_true(d_large < d_small);
    assert_true(d_large < 0.05 * worst_local);
    fl_federation_free(&f);
}

static void finetune_is_fedavg_with_frac_one_and_local_with_frac_zero(void **state)
{
    (void)state;
    fl_federation f;
    fed_make(&f, 3, N_TRAIN3, N_TEST3, 1.0, 15);
    const char *names[3] = {"finetune", "fedavg", "local"};
    fl_state s[3];
    dp_err err = {0};
    for (int frac = 1; frac >= 0; frac--) {
        for (int i = 0; i < 3; i++) {
            fl_job_cfg c = private_cfg(names[i]);
            c.finetune_frac = frac;
            assert_int_equal(fl_state_init(&c, &f, &s[i], &err), DP_OK);
            run_rounds(&c, &f, &s[i], c.rounds, NULL, 1, NULL);
        }
        const fl_state *want = frac == 1 ? &s[1] : &s[2];
        assert_memory_equal(s[0].personal, want->personal, 3 * P * sizeof(float));
        for (int i = 0; i < 3; i++)
            fl_state_free(&s[i]);
    }
    /* frac = 0.5 of 8 rounds: 4 fedavg rounds, then the personal models part from the global */
    fl_job_cfg c = private_cfg("finetune");
    assert_int_equal(fl_state_init(&c, &f, &s[0], &err), DP_OK);
    run_rounds(&c, &f, &s[0], 4, NULL, 1, NULL);
    assert_memory_equal(s[0].personal, s[0].global, P * sizeof(float));
    float g4[P];
    memcpy(g4, s[0].global, sizeof g4);
    run_rounds(&c, &f, &s[0], 8, NULL, 1, NULL);
    assert_memory_equal(s[0].global, g4, sizeof g4); /* frozen after the switch */
    assert_memory_not_equal(s[0].personal, s[0].global, P * sizeof(float));
    fl_state_free(&s[0]);
    fl_federation_free(&f);
}

/* ---- determinism ---- */

static void every_algorithm_gives_the_same_bytes_with_one_two_or_three_threads(void **state)
{
    (void)state;
    fl_federation f;
    const size_t ntr[5] = {13, 40, 9, 27, 18}, nte[5] = {3, 8, 2, 5, 4};
    fed_make(&f, 5, ntr, nte, 0.5, 16);
    const double z5[5] = {0.8, 1.1, 0.9, 1.3, 0.7};
    for (size_t a = 0; a < ALGOS_N; a++) {
        fl_job_cfg c = private_cfg(ALGOS[a]);
        if (c.noise_multiplier != NULL)
            c.noise_multiplier = z5;
        fl_state s[3];
        fl_round_metrics m[3] = {{0}};
        dp_err err = {0};
        for (int t = 0; t < 3; t++) {
            assert_int_equal(fl_state_init(&c, &f, &s[t], &err), DP_OK);
            run_rounds(&c, &f, &s[t], c.rounds, NULL, t + 1, &m[t]);
        }
        for (int t = 1; t < 3; t++) {
            assert_states_equal(&s[0], &s[t]);
            assert_memory_equal(m[0].silo, m[t].silo, 5 * sizeof(fl_silo_metrics));
            assert_memory_equal(&m[0].personal, &m[t].personal, sizeof(fl_agg_metrics));
        }
        for (int t = 0; t < 3; t++) {
            fl_round_metrics_free(&m[t]);
            fl_state_free(&s[t]);
        }
    }
    fl_federation_free(&f);
}

static void a_resumed_job_ends_bit_identically_to_an_uninterrupted_one(void **state)
{
    (void)state;
    fl_federation f;
    fed_make(&f, 3, N_TRAIN3, N_TEST3, 1.0, 17);
    for (size_t a = 0; a < ALGOS_N; a++) {
        fl_job_cfg c = private_cfg(ALGOS[a]);
        fl_state whole, half, resumed;
        dp_err err = {0};
        assert_int_equal(fl_state_init(&c, &f, &whole, &err), DP_OK);
        run_rounds(&c, &f, &whole, c.rounds, NULL, 1, NULL);
        assert_int_equal(fl_state_init(&c, &f, &half, &err), DP_OK);
        run_rounds(&c, &f, &half, 3, NULL, 2, NULL);
        uint8_t *buf = NULL;
        size_t len = 0;
        assert_int_equal(fl_state_serialize(&half, &c, &buf, &len, &err), DP_OK);
        fl_state_free(&half); /* the process "dies" */
        assert_int_equal(fl_state_deserialize(buf, len, &c, &f, &resumed, &err), DP_OK);
        assert_int_equal(resumed.round, 3);
        run_rounds(&c, &f, &resumed, c.rounds, NULL, 1, NULL);
        assert_states_equal(&whole, &resumed);
        /* a flipped byte, a truncation and another algorithm are refused */
        buf[len / 2] ^= 0x40;
        fl_state bad;
        dp_err e2 = {0};
        assert_int_equal(fl_state_deserialize(buf, len, &c, &f, &bad, &e2), DP_EINVAL);
        assert_string_equal(e2.field, "checkpoint");
        buf[len / 2] ^= 0x40;
        dp_err_clear(&e2);
        assert_int_equal(fl_state_deserialize(buf, len - 1, &c, &f, &bad, &e2), DP_EINVAL);
        fl_job_cfg other = private_cfg(ALGOS[(a + 1) % ALGOS_N]);
        dp_err_clear(&e2);
        assert_int_equal(fl_state_deserialize(buf, len, &other, &f, &bad, &e2), DP_EINVAL);
        dp_free(buf);
        fl_state_free(&resumed);
        fl_state_free(&whole);
    }
    fl_federation_free(&f);
}

/* ---- stopped silos ---- */

static void a_stopped_silo_contributes_nothing_and_stays_stopped(void **state)
{
    (void)state;
    fl_federation f3, f2;
    fed_make(&f3, 3, N_TRAIN3, N_TEST3, 1.0, 18);
    fed_make(&f2, 2, N_TRAIN3, N_TEST3, 1.0, 18); /* the same first two silos */
    for (size_t a = 1; a < ALGOS_N; a++) {
        if (client_level(ALGOS[a]))
            continue; /* their fixed denominator is checked in their own tests */
        fl_job_cfg c = private_cfg(ALGOS[a]);
        fl_state s3, s2;
        dp_err err = {0};
        assert_int_equal(fl_state_init(&c, &f3, &s3, &err), DP_OK);
        assert_int_equal(fl_state_init(&c, &f2, &s2, &err), DP_OK);
        const bool active[3] = {true, true, false};
        fl_round_metrics m = {0};
        run_rounds(&c, &f3, &s3, 1, active, 2, &m);
        assert_false(m.silo[2].active);
        assert_true(m.silo[0].active && m.silo[1].active);
        assert_int_equal(m.n_trained, 2);
        assert_false(isnan(m.silo[2].personal.test_metric)); /* still evaluated */
        run_rounds(&c, &f3, &s3, c.rounds, NULL, 2, &m);     /* sticky without `active` */
        assert_true(s3.stopped[2]);
        assert_false(m.silo[2].active);
        run_rounds(&c, &f2, &s2, c.rounds, NULL, 1, NULL);
        assert_memory_equal(s3.global, s2.global, P * sizeof(float));
        assert_memory_equal(s3.personal, s2.personal, 2 * P * sizeof(float));
        if (strcmp(ALGOS[a], "mrmtl") == 0 || strcmp(ALGOS[a], "ditto") == 0) {
            float init[P] = {0}; /* linear models start at zero and this one never trained */
            assert_memory_equal(s3.personal + 2 * P, init, sizeof init);
        }
        fl_round_metrics_free(&m);
        fl_state_free(&s3);
        fl_state_free(&s2);
    }
    fl_federation_free(&f3);
    fl_federation_free(&f2);
}

/* ---- metrics ---- */

static void aggregate_metrics_pool_the_silos_rows(void **state)
{
    (void)state;
    fl_federation f;
    fed_make(&f, 3, N_TRAIN3, N_TEST3, 1.0, 19);
    fl_job_cfg c = private_cfg("mrmtl");
    fl_state s;
    dp_err err = {0};
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    fl_round_metrics m = {0};
    run_rounds(&c, &f, &s, 2, NULL, 1, &m);
    assert_int_equal(m.round, 1);
    assert_true(m.regression && m.has_global);
    const fl_agg_metrics *ag[2] = {&m.personal, &m.global};
    for (int g = 0; g < 2; g++) {
        double num = 0, den = 0, tr = 0, trn = 0, sum = 0, lo = DP_INF, hi = -DP_INF;
        for (size_t k = 0; k < 3; k++) {
            const fl_model_metrics *mm = g == 0 ? &m.silo[k].personal : &m.silo[k].global;
            num += mm->test_metric * (double)m.silo[k].n_test;
            den += (double)m.silo[k].n_test;
            tr += mm->train_loss * (double)m.silo[k].n_train;
            trn += (double)m.silo[k].n_train;
            sum += mm->test_metric;
            lo = fmin(lo, mm->test_metric);
            hi = fmax(hi, mm->test_metric);
        }
        assert_close(ag[g]->pooled_test_metric, num / den, 1e-12, 0);
        assert_close(ag[g]->train_loss, tr / trn, 1e-12, 0);
        assert_close(ag[g]->mean_test_metric, sum / 3, 1e-12, 0);
        assert_close(ag[g]->worst_test_metric, hi, 0, 0); /* MSE: the largest is the worst */
        const fl_silo_metrics *w = &m.silo[ag[g]->worst_silo];
        assert_close(g == 0 ? w->personal.test_metric : w->global.test_metric, hi, 0, 0);
        assert_close(ag[g]->spread_test_metric, hi - lo, 0, 0);
        /* regression: the loss is half the squared error */
        assert_close(ag[g]->pooled_test_loss, 0.5 * ag[g]->pooled_test_metric, 1e-12, 0);
    }
    assert_int_equal(m.silo[1].n_train, N_TRAIN3[1]);
    assert_int_equal(m.silo[1].n_test, N_TEST3[1]);
    assert_false(isnan(m.silo[1].sgd_loss));
    fl_round_metrics_free(&m);
    /* a job that has run all its rounds refuses another */
    run_rounds(&c, &f, &s, c.rounds, NULL, 1, NULL);
    assert_int_equal(fl_round_run(&c, &f, &s, NULL, 1, NULL, &err), DP_EINVAL);
    fl_state_free(&s);
    fl_federation_free(&f);
}

/* ---- privacy plan ---- */

/* eps of `rounds` charges of ev as the ledger sums them: per-order upward sums, grid conversion. */
static double ledger_like_eps(const acct_event *ev, uint64_t rounds, double delta)
{
    const double *orders;
    size_t n = acct_rdp_default_orders(&orders);
    double one[512], sum[512] = {0};
    assert_true(n <= 512);
    dp_err err = {0};
    assert_int_equal(acct_rdp_eval(ev, ACCT_NB_ADD_REMOVE, orders, n, one, &err), DP_OK);
    for (uint64_t t = 0; t < rounds; t++)
        for (size_t i = 0; i < n; i++)
            sum[i] = dp_sum_up(sum[i], one[i]);
    double eps, opt;
    assert_int_equal(
        acct_rdp_to_epsilon(orders, sum, n, delta, ACCT_CONV_OPTIMAL, &eps, &opt, &err), DP_OK);
    return eps;
}

static void the_plan_counts_the_trainers_steps_and_ditto_doubles_them(void **state)
{
    (void)state;
    fl_job_cfg c = private_cfg("mrmtl");
    c.rounds = 40;
    c.batch_size = 32;
    c.local_epochs = 2;
    fl_silo_plan p;
    acct_event *ev = NULL;
    dp_err err = {0};
    assert_int_equal(fl_plan_silo(&c, 1, 1000, &p, &ev, &err), DP_OK);
    assert_true(p.record_level && p.is_private);
    assert_int_equal(p.batch, 32);
    assert_close(p.q, 0.032, 0, 0);
    assert_int_equal(p.steps_per_round, 2 * (1000 / 32));
    assert_int_equal(p.steps_total, 40 * 2 * 31);
    assert_close(p.noise_multiplier, Z3[1], 0, 0);
    assert_non_null(ev);
    assert_int_equal(ev->type, ACCT_EV_SELF_COMPOSED);
    assert_int_equal(ev->count, 62);
    assert_int_equal(ev->child->type, ACCT_EV_POISSON);
    assert_close(ev->child->sampling_rate, 0.032, 0, 0);
    assert_close(ev->child->child->noise_multiplier, Z3[1], 0, 0);
    acct_event_free(ev);
    c.algorithm = "ditto";
    assert_int_equal(fl_plan_silo(&c, 1, 1000, &p, &ev, &err), DP_OK);
    assert_int_equal(p.steps_per_round, 2 * 2 * 31);
    assert_int_equal(ev->count, 124);
    acct_event_free(ev);
    /* a silo smaller than the batch: B_k = n_k, q = 1, one step per epoch */
    assert_int_equal(fl_plan_silo(&c, 0, 20, &p, NULL, &err), DP_OK);
    assert_int_equal(p.batch, 20);
    assert_close(p.q, 1.0, 0, 0);
    assert_int_equal(p.steps_per_round, 2 * 2);
    /* non-private: no event */
    c.noise_multiplier = NULL;
    assert_int_equal(fl_plan_silo(&c, 0, 1000, &p, &ev, &err), DP_OK);
    assert_false(p.is_private);
    assert_null(ev);
    /* dp_fedavg: one Poisson-sampled Gaussian release of the silos per round */
    c = private_cfg("dp_fedavg");
    assert_int_equal(fl_plan_silo(&c, 0, 1000, &p, &ev, &err), DP_OK);
    assert_false(p.record_level);
    assert_int_equal(p.steps_per_round, 1);
    assert_int_equal(ev->type, ACCT_EV_POISSON);
    assert_close(ev->sampling_rate, 0.6, 0, 0);
    assert_close(ev->child->noise_multiplier, 0.7, 0, 0);
    acct_event_free(ev);
}

static void calibrated_noise_meets_the_target_within_one_percent(void **state)
{
    (void)state;
    const fl_accountant acct = {1e-5, ACCT_CONV_OPTIMAL, NULL, 0};
    const char *algos[3] = {"mrmtl", "ditto", "dp_fedavg"};
    double z_of[3] = {0};
    for (int a = 0; a < 3; a++) {
        for (int t = 0; t < 2; t++) {
            double target = t == 0 ? 1.0 : 4.0;
            fl_job_cfg c = private_cfg(algos[a]);
            c.rounds = 30;
            c.batch_size = 32;
            c.client_rate = 0.2;
            double z, eps;
            dp_err err = {0};
            assert_int_equal(fl_calibrate_noise(&c, 900, target, &acct, &z, &eps, &err), DP_OK);
            assert_true(eps <= target && eps >= 0.99 * target);
            if (t == 0)
                z_of[a] = z;
            /* the silo's round event at z, charged once per round as the ledger does */
            double zs[3] = {z, z, z};
            c.noise_multiplier = c.noise_multiplier != NULL ? zs : NULL;
            c.server_noise = z;
            fl_silo_plan p;
            acct_event *ev = NULL;
            assert_int_equal(fl_plan_silo(&c, 0, 900, &p, &ev, &err), DP_OK);
            double e_plan;
            assert_int_equal(fl_plan_epsilon(ev, c.rounds, &acct, &e_plan, &err), DP_OK);
            assert_close(e_plan, eps, 0, 0);
            double e_ledger = ledger_like_eps(ev, c.rounds, acct.delta);
            assert_true(e_ledger <= target && e_ledger >= 0.99 * target);
            acct_event *total = acct_event_self_composed(c.rounds, ev);
            acct_rdp_answer ans;
            assert_int_equal(acct_rdp_epsilon(total, ACCT_NB_ADD_REMOVE, acct.delta,
                                              ACCT_CONV_OPTIMAL, NULL, 0, &ans, &err),
                             DP_OK);
            assert_true(ans.value <= target && ans.value >= 0.99 * target);
            acct_event_free(total);
            /* tight: a little less noise misses the target */
            double zl[3] = {z * (1 - 1e-6), z * (1 - 1e-6), z * (1 - 1e-6)};
            c.noise_multiplier = c.noise_multiplier != NULL ? zl : NULL;
            c.server_noise = zl[0];
            assert_int_equal(fl_plan_silo(&c, 0, 900, &p, &ev, &err), DP_OK);
            assert_int_equal(fl_plan_epsilon(ev, c.rounds, &acct, &e_plan, &err), DP_OK);
            assert_true(e_plan > target);
            acct_event_free(ev);
        }
    }
    /* Ditto's doubled steps need more noise (about sqrt 2 more, Liu et al. 2022 §5) */
    assert_true(z_of[1] > 1.2 * z_of[0] && z_of[1] < 1.5 * z_of[0]);
    /* refused inputs: no target, no delta */
    fl_job_cfg c = private_cfg("mrmtl");
    double z, eps;
    dp_err err = {0};
    assert_int_equal(fl_calibrate_noise(&c, 900, 0, &acct, &z, &eps, &err), DP_EINVAL);
    assert_string_equal(err.field, "epsilon");
    const fl_accountant no_delta = {0, ACCT_CONV_OPTIMAL, NULL, 0};
    dp_err_clear(&err);
    assert_int_equal(fl_calibrate_noise(&c, 900, 1, &no_delta, &z, &eps, &err), DP_EINVAL);
    assert_string_equal(err.field, "delta");
}

/* The slow reference: plain bisection (acct_calibrate) on fl_plan_epsilon over the whole grid. */
typedef struct ref_ctx {
    uint64_t rounds;
    const fl_accountant *acct;
} ref_ctx;

static int ref_eps(const acct_event *ev, void *ctx, double *eps, dp_err *err)
{
    const ref_ctx *c = ctx;
    return fl_plan_epsilon(ev, c->rounds, c->acct, eps, err);
}

/* The reference's minimal z for silo size n_k (the bisection's meeting end, to 1e-9). */
static double ref_calibrate(const fl_job_cfg *c, size_t n_k, double target,
                            const fl_accountant *acct)
{
    fl_job_cfg open = *c;
    double zs[1] = {1.0};
    open.noise_multiplier = zs;
    fl_silo_plan p;
    acct_event *ev = NULL;
    dp_err err = {0};
    assert_int_equal(fl_plan_silo(&open, 0, n_k, &p, &ev, &err), DP_OK);
    /* open the noise multiplier: the Gaussian leaf under poisson (record level or dp_fedavg) */
    acct_event *leaf = ev->type == ACCT_EV_SELF_COMPOSED ? ev->child->child : ev->child;
    leaf->noise_multiplier = DP_NAN;
    ref_ctx rc = {c->rounds, acct};
    acct_calib_result r;
    assert_int_equal(acct_calibrate(ev, target, ref_eps, &rc, &r, &err), DP_OK);
    acct_event_free(ev);
    return r.value;
}

/* fl_plan_epsilon over the whole grid of silo n_k's job at noise z. */
static double plan_eps_at(const fl_job_cfg *c, size_t n_k, double z, const fl_accountant *acct)
{
    fl_job_cfg cz = *c;
    double zs[1] = {z};
    cz.noise_multiplier = cz.noise_multiplier != NULL ? zs : NULL;
    cz.server_noise = z;
    fl_silo_plan p;
    acct_event *ev = NULL;
    dp_err err = {0};
    assert_int_equal(fl_plan_silo(&cz, 0, n_k, &p, &ev, &err), DP_OK);
    double e;
    assert_int_equal(fl_plan_epsilon(ev, cz.rounds, acct, &e, &err), DP_OK);
    acct_event_free(ev);
    return e;
}

/* Random jobs (silo sizes with repeats, batch, rounds, epsilon, delta, conversion, a custom grid or
 * the default one, record level or dp_fedavg): the batch and the single calibration both return a
 * z whose whole-grid fl_plan_epsilon meets the target, with *eps between it and the target, that
 * is the reference bisection's minimal z to 1e-6 (the issue asks for 1%), and below which (by 1e-6)
 * the target is missed. */
static void batch_calibration_is_certified_on_the_whole_grid_and_minimal(void **state)
{
    (void)state;
    static const double custom[] = {1.5, 1.75, 2, 2.5, 3, 4, 5, 6, 8, 10, 12, 16, 20, 32, 64};
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 20261127);
    for (int cs = 0; cs < 24; cs++) {
        bool dpf = cs % 6 == 5;
        fl_job_cfg c = private_cfg(dpf ? "dp_fedavg" : (cs % 2 ? "mrmtl" : "ditto"));
        c.batch_size = 1 + gsl_rng_uniform_int(r, 64);
        c.rounds = 1 + gsl_rng_uniform_int(r, 300);
        c.local_epochs = 1 + gsl_rng_uniform_int(r, 2);
        c.client_rate = 0.05 + 0.9 * gsl_rng_uniform(r);
        double target = exp(log(0.3) + gsl_rng_uniform(r) * log(20.0 / 0.3));
        fl_accountant acct[2] = {
            {pow(10.0, -2.0 - 6.0 * gsl_rng_uniform(r)), ACCT_CONV_OPTIMAL, NULL, 0},
            {pow(10.0, -2.0 - 6.0 * gsl_rng_uniform(r)),
             cs % 3 == 0 ? ACCT_CONV_MIRONOV2017 : ACCT_CONV_BALLE2020, cs % 4 == 1 ? custom : NULL,
             cs % 4 == 1 ? sizeof custom / sizeof custom[0] : 0}};
        enum { KS = 6 };
        size_t n[KS];
        const fl_accountant *ap[KS];
        for (size_t k = 0; k < KS; k++) {
            n[k] = k == 3 ? n[1] : 1 + gsl_rng_uniform_int(r, 3000); /* silo 3 repeats silo 1 */
            ap[k] = &acct[k % 2 == 0 ? 0 : 1];
        }
        double z[KS], eps[KS];
        dp_err err = {0};
        int rc = fl_calibrate_noise_many(&c, KS, n, target, ap, z, eps, &err);
        assert_int_equal(rc, DP_OK);
        for (size_t k = 0; k < KS; k++) {
            double zr = ref_calibrate(&c, n[k], target, ap[k]);
            double z1, e1;
            assert_int_equal(fl_calibrate_noise(&c, n[k], target, ap[k], &z1, &e1, &err), DP_OK);
            double zz[2] = {z[k], z1}, ee[2] = {eps[k], e1};
            for (int v = 0; v < 2; v++) {
                double full = plan_eps_at(&c, n[k], zz[v], ap[k]);
                if (!(full <= target && full <= ee[v] && ee[v] <= target))
                    fail_msg("case %d silo %zu: z %.12g eps %.12g full %.12g target %.12g", cs, k,
                             zz[v], ee[v], full, target);
                if (!(fabs(zz[v] / zr - 1.0) <= 1e-6))
                    fail_msg("case %d silo %zu: z %.12g, reference %.12g", cs, k, zz[v], zr);
                if (zz[v] * (1 - 1e-6) >= ACCT_CALIB_SIGMA_MIN)
                    assert_true(plan_eps_at(&c, n[k], zz[v] * (1 - 1e-6), ap[k]) > target);
            }
        }
        assert_true(z[3] == z[1] || ap[3] != ap[1]);
    }
    gsl_rng_free(r);
    /* an impossible target is refused by both */
    fl_job_cfg c = private_cfg("mrmtl");
    const fl_accountant a = {1e-8, ACCT_CONV_OPTIMAL, NULL, 0};
    const fl_accountant *ap[2] = {&a, &a};
    size_t n[2] = {500, 900};
    double z[2], eps[2];
    dp_err err = {0};
    assert_int_equal(fl_calibrate_noise_many(&c, 2, n, 1e-4, ap, z, eps, &err), DP_ENUMERIC);
    dp_err_clear(&err);
    assert_int_equal(fl_calibrate_noise(&c, 900, 1e-4, &a, z, eps, &err), DP_ENUMERIC);
    dp_err_clear(&err);
    assert_int_equal(fl_calibrate_noise_many(&c, 2, n, -1, ap, z, eps, &err), DP_EINVAL);
    assert_string_equal(err.field, "epsilon");
}

/* ---- DP-FedAvg ---- */

/* A federation whose rows are all zero: every local update is exactly zero. */
static void fed_zero(fl_federation *f, size_t k_n, size_t d, size_t n_train)
{
    memset(f, 0, sizeof *f);
    f->d = d;
    f->n_silos = k_n;
    f->silo = dp_calloc(k_n, sizeof(fl_silo_data));
    assert_non_null(f->silo);
    for (size_t k = 0; k < k_n; k++) {
        f->silo[k].n_train = n_train;
        f->silo[k].n_test = 1;
        f->silo[k].x_train = dp_calloc(n_train * d, sizeof(float));
        f->silo[k].y_train = dp_calloc(n_train, sizeof(float));
        f->silo[k].x_test = dp_calloc(d, sizeof(float));
        f->silo[k].y_test = dp_calloc(1, sizeof(float));
        assert_true(f->silo[k].x_train && f->silo[k].y_train && f->silo[k].x_test &&
                    f->silo[k].y_test);
    }
}

static void dp_fedavg_adds_noise_of_std_z_s_over_q_k(void **state)
{
    (void)state;
    const size_t d = 3999, k_n = 5; /* q K = 2.5: never a count of sampled silos */
    fl_federation f;
    fed_zero(&f, k_n, d, 4);
    fl_job_cfg c = private_cfg("dp_fedavg");
    c.model.d_in = d;
    c.rounds = 1;
    c.client_rate = 0.5;
    c.server_noise = 2.0;
    c.update_clip = 0.5;
    c.server_lr = 1.0;
    fl_state s;
    dp_err err = {0};
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    run_rounds(&c, &f, &s, 1, NULL, 2, NULL);
    double sum = 0, sq = 0;
    for (size_t j = 0; j < d + 1; j++) {
        sum += (double)s.global[j];
        sq += (double)s.global[j] * (double)s.global[j];
    }
    double n = (double)(d + 1), mean = sum / n, sd = sqrt(sq / n - mean * mean);
    double want = 2.0 * 0.5 / (0.5 * (double)k_n); /* z S / (q K) = 0.4 */
    assert_true(fabs(sd / want - 1) < 0.05);       /* 4000 draws: the std's sd is ~1.1% */
    assert_true(fabs(mean) < 4 * want / sqrt(n));
    fl_state_free(&s);
    fl_federation_free(&f);
}

/* ---- ppsgd (Bietti et al., ICML 2022) ---- */

/* K silos holding the same n rows (y = v.x + b exactly): every silo's full-batch gradient is the
 * same, the homogeneous additive model of the paper's Lemma 4.6. */
static void fed_same(fl_federation *f, size_t k_n, size_t n, const double *v)
{
    const size_t ntr[K_MAX] = {n, n, n, n, n, n, n, n}, nte[K_MAX] = {1, 1, 1, 1, 1, 1, 1, 1};
    fed_make(f, k_n, ntr, nte, 0.0, 31);
    for (size_t k = 0; k < k_n; k++) {
        fl_silo_data *s = &f->silo[k];
        memcpy(s->x_train, f->silo[0].x_train, n * D * sizeof(float));
        for (size_t i = 0; i < n; i++) {
            double y = v[D];
            for (size_t j = 0; j < D; j++)
                y += v[j] * (double)s->x_train[i * D + j];
            s->y_train[i] = (float)y;
        }
    }
}

static fl_job_cfg ppsgd_cfg(double ratio)
{
    fl_job_cfg c = base_cfg("ppsgd");
    c.ppsgd_ratio = ratio;
    c.client_rate = 1.0;
    c.update_clip = 1e6; /* never binds */
    c.server_noise = 0.0;
    c.lr = 0.2;
    c.rounds = 400;
    return c;
}

static void ppsgd_converges_to_the_minimal_norm_split(void **state)
{
    (void)state;
    /* Bietti et al. 2022, Lemma 4.6 and its implicit bias: noise-free full-batch PPSGD from 0 on
     * the homogeneous additive model keeps w = r theta_i at every step and ends at w = r/(r+1) v,
     * theta_i = v/(r+1). */
    const double v[P] = {0.8, -1.2, 0.5, 0.3};
    fl_federation f;
    fed_same(&f, 3, 40, v);
    const double ratios[] = {3.0, 1.0, 0.25};
    for (size_t t = 0; t < 3; t++) {
        double r = ratios[t];
        fl_job_cfg c = ppsgd_cfg(r);
        fl_state s;
        dp_err err = {0};
        assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
        for (uint64_t round = 0; round < c.rounds; round++) {
            run_rounds(&c, &f, &s, round + 1, NULL, 1, NULL);
            for (size_t k = 0; k < 3; k++)
                for (size_t j = 0; j < P; j++) {
                    double th = (double)s.extra[k * P + j], w = (double)s.global[j];
                    assert_true(fabs(w - r * th) <= 1e-5 * (fabs(w) + 1e-3));
                    /* the personal model is w + theta_k */
                    assert_true(s.personal[k * P + j] == (float)(s.global[j] + s.extra[k * P + j]));
                }
        }
        for (size_t j = 0; j < P; j++) {
            assert_close((double)s.global[j], r / (r + 1) * v[j], 1e-3, 0);
            assert_close((double)s.extra[j], v[j] / (r + 1), 1e-3, 0);
        }
        fl_state_free(&s);
    }
    fl_federation_free(&f);
}

static void ppsgd_ends_keep_their_invariants(void **state)
{
    (void)state;
    fl_federation f;
    fed_make(&f, 3, N_TRAIN3, N_TEST3, 1.0, 32);
    fl_round_metrics m = {0};
    dp_err err = {0};
    /* r = 0: local learning only. w never moves (the linear model starts at 0), nothing is
     * released: no event and a calibration of 0 noise for epsilon 0 */
    fl_job_cfg c = private_cfg("ppsgd");
    c.ppsgd_ratio = 0.0;
    fl_state s;
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    run_rounds(&c, &f, &s, c.rounds, NULL, 2, &m);
    for (size_t j = 0; j < P; j++)
        assert_true(s.global[j] == 0.0f);
    double moved = 0;
    for (size_t j = 0; j < 3 * P; j++)
        moved += fabs((double)s.extra[j]);
    assert_true(moved > 0.1); /* the personal parameters learnt */
    fl_silo_plan plan;
    acct_event *ev = NULL;
    assert_int_equal(fl_plan_silo(&c, 0, 20, &plan, &ev, &err), DP_OK);
    assert_false(plan.is_private);
    assert_null(ev);
    double z = -1, eps = -1;
    fl_accountant acct = {.delta = 1e-5, .conv = ACCT_CONV_OPTIMAL};
    assert_int_equal(fl_calibrate_noise(&c, 20, 1.0, &acct, &z, &eps, &err), DP_OK);
    assert_true(z == 0.0 && eps == 0.0);
    fl_state_free(&s);
    /* r = inf: global learning only. theta_i stays 0 and every personal model is w */
    c.ppsgd_ratio = DP_INF;
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    run_rounds(&c, &f, &s, c.rounds, NULL, 2, &m);
    for (size_t j = 0; j < 3 * P; j++)
        assert_true(s.extra[j] == 0.0f);
    for (size_t k = 0; k < 3; k++)
        assert_memory_equal(s.personal + k * P, s.global, P * sizeof(float));
    assert_int_equal(fl_plan_silo(&c, 0, 20, &plan, &ev, &err), DP_OK);
    assert_true(plan.is_private && !plan.record_level);
    assert_non_null(ev); /* poisson(client_rate, gaussian(server_noise)) */
    acct_event_free(ev);
    fl_state_free(&s);
    fl_round_metrics_free(&m);
    fl_federation_free(&f);
}

static void ppsgd_steps_theta_unclipped_and_releases_the_clipped_mean(void **state)
{
    (void)state;
    /* One round by hand (Bietti et al. 2022, Alg. 3): full batches (batch_size >= n_k: every row),
     * q = 1, no noise, a clip that binds; theta_k = -eta_theta g_k with the unclipped mean gradient
     * at the start point, w = -eta_w mean_k clip(g_k). */
    fl_federation f;
    fed_make(&f, 3, N_TRAIN3, N_TEST3, 1.0, 33);
    fl_job_cfg c = ppsgd_cfg(0.5); /* eta_w = 0.5 lr, eta_theta = lr */
    c.rounds = 1;
    c.update_clip = 0.3;
    fl_state s;
    dp_err err = {0};
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    run_rounds(&c, &f, &s, 1, NULL, 1, NULL);
    fl_ws *ws = fl_ws_alloc(&c.model, 64, &err);
    assert_non_null(ws);
    float zero[P] = {0}, g[P];
    double want_w[P] = {0};
    for (size_t k = 0; k < 3; k++) {
        const fl_silo_data *sd = &f.silo[k];
        fl_model_grad_sum(&c.model, zero, sd->x_train, sd->y_train, sd->n_train, ws, g);
        double sq = 0;
        for (size_t j = 0; j < P; j++) {
            double gj = (double)g[j] / (double)sd->n_train;
            assert_close((double)s.extra[k * P + j], -c.lr * gj, 1e-6, 1e-6);
            sq += gj * gj;
        }
        double scale = sqrt(sq) > c.update_clip ? c.update_clip / sqrt(sq) : 1.0;
        assert_true(scale < 1.0); /* the clip binds */
        for (size_t j = 0; j < P; j++)
            want_w[j] -= 0.5 * c.lr * scale * (double)g[j] / (double)sd->n_train / 3.0;
    }
    for (size_t j = 0; j < P; j++)
        assert_close((double)s.global[j], want_w[j], 1e-6, 1e-6);
    fl_ws_free(ws);
    fl_state_free(&s);
    fl_federation_free(&f);
}

static void ppsgd_mode2_sums_minibatches_and_divides_by_q_m(void **state)
{
    (void)state;
    /* One round of Bietti et al. 2022, Alg. 2 by hand: two silos of 3 and 7 training rows with a
     * batch of 100, so m_1 = 3, m_2 = 7 (every row) and M = 10; q = 1, no noise, a clip that binds
     * on the larger SUM. g_k is the gradient SUM at 0; theta_k = -(eta/(qM)) g_k with Alg. 3's
     * eta/(qN) = eta_theta, i.e. -eta_theta (K/M) g_k; w = -eta_w (1/(qM)) sum_k clip_C(g_k). */
    fl_federation f;
    const size_t ntr[2] = {3, 7}, nte[2] = {2, 2};
    fed_make(&f, 2, ntr, nte, 1.0, 34);
    fl_job_cfg c = ppsgd_cfg(0.5); /* eta_w = 0.5 lr, eta_theta = lr */
    c.rounds = 1;
    c.batch_size = 100;
    c.ppsgd_mode = 2;
    fl_ws *ws = fl_ws_alloc(&c.model, 64, &(dp_err){0});
    assert_non_null(ws);
    float zero[P] = {0}, g[2][P];
    double norm[2];
    for (size_t k = 0; k < 2; k++) {
        const fl_silo_data *sd = &f.silo[k];
        fl_model_grad_sum(&c.model, zero, sd->x_train, sd->y_train, sd->n_train, ws, g[k]);
        double sq = 0;
        for (size_t j = 0; j < P; j++)
            sq += (double)g[k][j] * (double)g[k][j];
        norm[k] = sqrt(sq);
    }
    /* a clip between the two sums' norms: binds on one, not on the other */
    double lo = norm[0] < norm[1] ? norm[0] : norm[1], hi = norm[0] < norm[1] ? norm[1] : norm[0];
    assert_true(lo < hi);
    c.update_clip = 0.5 * (lo + hi);
    fl_state s;
    dp_err err = {0};
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_OK);
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    run_rounds(&c, &f, &s, 1, NULL, 1, NULL);
    const double big_m = 10.0;
    double want_w[P] = {0};
    for (size_t k = 0; k < 2; k++) {
        double scale = norm[k] > c.update_clip ? c.update_clip / norm[k] : 1.0;
        for (size_t j = 0; j < P; j++) {
            assert_close((double)s.extra[k * P + j], -c.lr * 2.0 / big_m * (double)g[k][j], 1e-6,
                         1e-6);
            want_w[j] -= 0.5 * c.lr * scale * (double)g[k][j] / big_m;
        }
    }
    for (size_t j = 0; j < P; j++) {
        assert_close((double)s.global[j], want_w[j], 1e-6, 1e-6);
        /* the personal model is w + theta_k */
        assert_true(s.personal[P + j] == (float)(s.global[j] + s.extra[P + j]));
    }
    fl_state_free(&s);
    /* mode 3 on the same case differs (means, divided by qN): the mode is read */
    c.ppsgd_mode = 3;
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    run_rounds(&c, &f, &s, 1, NULL, 1, NULL);
    assert_close((double)s.extra[0], -c.lr * (double)g[0][0] / 3.0, 1e-6, 1e-6);
    fl_state_free(&s);
    fl_ws_free(ws);
    fl_federation_free(&f);
}

static void ppsgd_mode1_is_mode3_with_every_user_and_one_sample(void **state)
{
    (void)state;
    /* Bietti et al. 2022: Alg. 1 is Alg. 3 with q = 1 and m = 1. Same bits over noisy rounds. */
    fl_federation f;
    fed_make(&f, 3, N_TRAIN3, N_TEST3, 1.0, 35);
    fl_job_cfg c = private_cfg("ppsgd");
    c.client_rate = 1.0;
    c.batch_size = 1;
    fl_state s1, s3;
    dp_err err = {0};
    c.ppsgd_mode = 1;
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_OK);
    assert_int_equal(fl_state_init(&c, &f, &s1, &err), DP_OK);
    run_rounds(&c, &f, &s1, c.rounds, NULL, 2, NULL);
    c.ppsgd_mode = 3;
    assert_int_equal(fl_state_init(&c, &f, &s3, &err), DP_OK);
    run_rounds(&c, &f, &s3, c.rounds, NULL, 2, NULL);
    assert_memory_equal(s1.global, s3.global, P * sizeof(float));
    assert_memory_equal(s1.extra, s3.extra, 3 * P * sizeof(float));
    assert_memory_equal(s1.personal, s3.personal, 3 * P * sizeof(float));
    double moved = 0;
    for (size_t j = 0; j < P; j++)
        moved += fabs((double)s1.global[j]);
    assert_true(moved > 0); /* w moved: the comparison is not of two untouched states */
    fl_state_free(&s1);
    fl_state_free(&s3);
    /* Alg. 1 refuses sampling and minibatches, naming the field; and modes outside 1..3 */
    c.ppsgd_mode = 1;
    c.client_rate = 0.5;
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "client_rate");
    c.client_rate = 1.0;
    c.batch_size = 2;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "batch_size");
    c.ppsgd_mode = 4;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "ppsgd_mode");
    fl_federation_free(&f);
}

static void ppsgd_modes_charge_the_same_epsilon(void **state)
{
    (void)state;
    /* Every mode releases one Poisson-subsampled Gaussian sum of clip_C contributions with noise
     * z C: an Alg. 2 job is charged what an Alg. 3 job is at the same z, q, T. */
    fl_accountant acct = {.delta = 1e-5, .conv = ACCT_CONV_OPTIMAL};
    double eps[2];
    for (unsigned mode = 2; mode <= 3; mode++) {
        fl_job_cfg c = private_cfg("ppsgd");
        c.ppsgd_mode = mode;
        fl_silo_plan plan;
        acct_event *ev = NULL;
        dp_err err = {0};
        assert_int_equal(fl_plan_silo(&c, 0, 20, &plan, &ev, &err), DP_OK);
        assert_true(plan.is_private && !plan.record_level);
        assert_non_null(ev);
        assert_int_equal(fl_plan_epsilon(ev, c.rounds, &acct, &eps[mode - 2], &err), DP_OK);
        acct_event_free(ev);
    }
    assert_true(eps[0] > 0 && isfinite(eps[0]));
    assert_true(eps[0] == eps[1]);
}

static void dp_fedavg_clips_each_silos_delta_and_samples_at_the_rate(void **state)
{
    (void)state;
    fl_federation f;
    const size_t ntr[1] = {30}, nte[1] = {5};
    fed_make(&f, 1, ntr, nte, 1.0, 20);
    fl_job_cfg c = private_cfg("dp_fedavg");
    c.rounds = 1;
    c.client_rate = 1.0;
    c.server_noise = 0;
    c.update_clip = 0.01; /* far below one full-batch step's delta */
    fl_state s;
    dp_err err = {0};
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    run_rounds(&c, &f, &s, 1, NULL, 1, NULL);
    double sq = 0;
    for (size_t j = 0; j < P; j++)
        sq += (double)s.global[j] * (double)s.global[j];
    assert_close(sqrt(sq), 0.01, 1e-6, 0); /* moved by exactly S (q = 1, K = 1, server_lr 1) */
    fl_state_free(&s);
    fl_federation_free(&f);
    /* sampling: 8 silos, rate 0.3, 200 rounds: the participation count is Binomial(1600, 0.3) */
    const size_t n8[K_MAX] = {5, 5, 5, 5, 5, 5, 5, 5}, t8[K_MAX] = {1, 1, 1, 1, 1, 1, 1, 1};
    fed_make(&f, K_MAX, n8, t8, 1.0, 21);
    c = private_cfg("dp_fedavg");
    c.rounds = 200;
    c.client_rate = 0.3;
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    fl_round_metrics m = {0};
    size_t taken = 0;
    while (s.round < c.rounds) {
        assert_int_equal(fl_round_run(&c, &f, &s, NULL, 2, &m, &err), DP_OK);
        taken += m.n_trained;
        for (size_t k = 0; k < K_MAX; k++)
            assert_true(m.silo[k].active == !isnan(m.silo[k].sgd_loss));
    }
    double mean = 1600 * 0.3, sd = sqrt(1600 * 0.3 * 0.7);
    assert_true(fabs((double)taken - mean) < 4 * sd);
    fl_round_metrics_free(&m);
    fl_state_free(&s);
    fl_federation_free(&f);
}

/* ---- FedHDP (Aldaghri, Mahdavifar & Beirami, Alg. 2) ---- */

static void fedhdp_with_one_group_releases_dp_fedavgs_global_model_bit_for_bit(void **state)
{
    (void)state;
    fl_federation f;
    const size_t ntr[5] = {13, 40, 9, 27, 18}, nte[5] = {3, 8, 2, 5, 4};
    fed_make(&f, 5, ntr, nte, 0.5, 41);
    fl_job_cfg d = private_cfg("dp_fedavg");
    fl_state sd;
    dp_err err = {0};
    assert_int_equal(fl_state_init(&d, &f, &sd, &err), DP_OK);
    run_rounds(&d, &f, &sd, d.rounds, NULL, 2, NULL);
    const double rs[2] = {1.0, 0.37}; /* with one group the weight is 1 whatever r */
    for (size_t i = 0; i < 2; i++) {
        const fl_hdp_group_cfg one = {false, d.server_noise, rs[i], 0.5};
        fl_job_cfg h = private_cfg("fedhdp");
        h.hdp_n_groups = 1;
        h.hdp_groups = &one;
        h.hdp_silo_group = NULL;
        h.hdp_adaptive = false;
        fl_state sh;
        assert_int_equal(fl_state_init(&h, &f, &sh, &err), DP_OK);
        run_rounds(&h, &f, &sh, h.rounds, NULL, 3, NULL);
        assert_memory_equal(sd.global, sh.global, P * sizeof(float));
        /* Ditto: the personal models are not the global one (dp_fedavg broadcasts it) */
        assert_memory_not_equal(sh.personal, sh.global, P * sizeof(float));
        fl_state_free(&sh);
    }
    fl_state_free(&sd);
    fl_federation_free(&f);
}

/* The std of one round's update on a federation of zero rows: only the groups' noise moves it. */
static double fedhdp_noise_std(const fl_hdp_group_cfg *g, const uint32_t *of, size_t d)
{
    fl_federation f;
    fed_zero(&f, 5, d, 4);
    fl_job_cfg c = private_cfg("fedhdp");
    c.model.d_in = d;
    c.rounds = 1;
    c.client_rate = 0.5;
    c.update_clip = 0.5;
    c.hdp_n_groups = 2;
    c.hdp_groups = g;
    c.hdp_silo_group = of;
    fl_state s;
    dp_err err = {0};
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    run_rounds(&c, &f, &s, 1, NULL, 2, NULL);
    double sq = 0;
    for (size_t j = 0; j < d + 1; j++)
        sq += (double)s.global[j] * (double)s.global[j];
    fl_state_free(&s);
    fl_federation_free(&f);
    return sqrt(sq / (double)(d + 1));
}

static void fedhdp_noises_each_group_mean_with_its_own_z_and_weights_it_by_r(void **state)
{
    (void)state;
    const size_t d = 3999;
    const uint32_t of[5] = {0, 0, 1, 1, 1}; /* K_p = 2 private, K_np = 3 opted out */
    /* r = 1: w_p = 2/5, the private mean's noise z S / (q K_p) = 2 * 0.5 / 1: std 0.4 */
    fl_hdp_group_cfg g[2] = {{false, 2.0, 1.0, 0.1}, {true, 0.0, 1.0, 0.1}};
    assert_true(fabs(fedhdp_noise_std(g, of, d) / 0.4 - 1) < 0.05); /* the std's sd ~1.1% */
    /* r = 0.25: w_p = 0.5 / (0.5 + 3) = 1/7 */
    g[0].r = 0.25;
    assert_true(fabs(fedhdp_noise_std(g, of, d) * 7.0 - 1) < 0.05);
    /* every silo opted out: no noise at all, the zero updates leave the model exactly at 0 */
    const uint32_t all_out[5] = {1, 1, 1, 1, 1};
    assert_true(fedhdp_noise_std(g, all_out, d) == 0.0);
    /* a private group with r = 0 releases nothing either */
    g[0].r = 0.0;
    assert_true(fedhdp_noise_std(g, of, d) == 0.0);
}

static void fedhdp_charges_each_silo_its_groups_event_and_opted_out_silos_nothing(void **state)
{
    (void)state;
    fl_job_cfg h = private_cfg("fedhdp"); /* HDP3: z 0.7, z 1.4, opted out */
    h.rounds = 50;
    h.hdp_adaptive = false;
    fl_accountant acct = {1e-5, ACCT_CONV_OPTIMAL, NULL, 0};
    dp_err err = {0};
    for (size_t k = 0; k < K_MAX; k++) {
        fl_silo_plan pl;
        acct_event *ev = NULL;
        assert_int_equal(fl_plan_silo(&h, k, 20, &pl, &ev, &err), DP_OK);
        size_t g = HDP_GROUP_OF[k];
        assert_false(pl.record_level);
        if (HDP3[g].opt_out) {
            assert_false(pl.is_private);
            assert_null(ev);
            continue;
        }
        assert_true(pl.is_private);
        assert_true(pl.noise_multiplier == HDP3[g].noise);
        assert_true(pl.q == h.client_rate);
        /* the epsilon the silo is charged is dp_fedavg's at its group's noise */
        fl_job_cfg d = private_cfg("dp_fedavg");
        d.rounds = h.rounds;
        d.server_noise = HDP3[g].noise;
        fl_silo_plan dpl;
        acct_event *dev = NULL;
        assert_int_equal(fl_plan_silo(&d, k, 20, &dpl, &dev, &err), DP_OK);
        double e_h, e_d;
        assert_int_equal(fl_plan_epsilon(ev, h.rounds, &acct, &e_h, &err), DP_OK);
        assert_int_equal(fl_plan_epsilon(dev, d.rounds, &acct, &e_d, &err), DP_OK);
        assert_true(e_h == e_d);
        assert_close(e_h, ledger_like_eps(ev, h.rounds, 1e-5), 1e-9, 0);
        acct_event_free(dev);
        acct_event_free(ev);
    }
    /* the stricter group pays less */
    fl_silo_plan p0, p1;
    acct_event *e0 = NULL, *e1 = NULL;
    assert_int_equal(fl_plan_silo(&h, 0, 20, &p0, &e0, &err), DP_OK);
    assert_int_equal(fl_plan_silo(&h, 2, 20, &p1, &e1, &err), DP_OK);
    double eps0, eps1;
    assert_int_equal(fl_plan_epsilon(e0, h.rounds, &acct, &eps0, &err), DP_OK);
    assert_int_equal(fl_plan_epsilon(e1, h.rounds, &acct, &eps1, &err), DP_OK);
    assert_true(eps1 < eps0);
    acct_event_free(e0);
    acct_event_free(e1);
    /* a group with r = 0 releases nothing: no event */
    fl_hdp_group_cfg g0[3] = {HDP3[0], HDP3[1], HDP3[2]};
    g0[0].r = 0;
    h.hdp_groups = g0;
    assert_int_equal(fl_plan_silo(&h, 0, 20, &p0, &e0, &err), DP_OK);
    assert_false(p0.is_private);
    assert_null(e0);
    /* adaptive clipping: the count is a second Gaussian on the same sample */
    h.hdp_groups = HDP3;
    h.hdp_adaptive = true;
    h.hdp_clip_quantile = 0.5;
    h.hdp_clip_lr = 0.2;
    h.hdp_count_noise = 2.0;
    assert_int_equal(fl_plan_silo(&h, 2, 20, &p1, &e1, &err), DP_OK);
    assert_close(p1.noise_multiplier, 1.0 / sqrt(1.0 / (1.4 * 1.4) + 1.0 / 4.0), 1e-15, 0);
    acct_event_free(e1);
    assert_int_equal(fl_plan_silo(&h, 1, 20, &p1, &e1, &err), DP_OK); /* opted out: still none */
    assert_null(e1);
}

/* One round of adaptive clipping on a federation whose every update is 0 (fed_zero) or of norm far
 * above S^0 (all clipped): with q = 1 and a negligible count noise b_bar is 1 or 0. */
static void fedhdp_adaptive_clip_follows_the_geometric_rule(void **state)
{
    (void)state;
    fl_hdp_group_cfg g[2] = {{false, 0.5, 1.0, 0.1}, {true, 0.0, 1.0, 0.1}};
    const uint32_t of[4] = {0, 1, 0, 1};
    fl_federation f;
    fed_zero(&f, 4, D, 10);
    fl_job_cfg c = private_cfg("fedhdp");
    c.rounds = 3;
    c.client_rate = 1.0;
    c.update_clip = 0.3;
    c.hdp_n_groups = 2;
    c.hdp_groups = g;
    c.hdp_silo_group = of;
    c.hdp_count_noise = 1e-9;
    fl_state s;
    dp_err err = {0};
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    assert_int_equal(s.n_extra, 1);
    assert_close(fl_hdp_clip(&c, &s), 0.3, 0, 0); /* S^0 before the first round */
    run_rounds(&c, &f, &s, 1, NULL, 2, NULL);
    double want = 0.3 * exp(-0.2 * (1.0 - 0.5)); /* every update unclipped: S shrinks */
    assert_close(fl_hdp_clip(&c, &s), want, 1e-6, 0);
    run_rounds(&c, &f, &s, 2, NULL, 2, NULL);
    assert_close(fl_hdp_clip(&c, &s), want * exp(-0.2 * 0.5), 1e-6, 0);
    fl_state_free(&s);
    fl_federation_free(&f);
    const size_t ntr[4] = {30, 30, 30, 30}, nte[4] = {5, 5, 5, 5};
    fed_make(&f, 4, ntr, nte, 1.0, 44);
    c.update_clip = 1e-6; /* far below every update's norm: all clipped, S grows */
    g[0].noise = 0.0;
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    run_rounds(&c, &f, &s, 1, NULL, 1, NULL);
    assert_close(fl_hdp_clip(&c, &s), 1e-6 * exp(0.2 * 0.5), 1e-6, 0);
    fl_state_free(&s);
    fl_federation_free(&f);
    /* not adaptive: no state, S stays update_clip */
    c.hdp_adaptive = false;
    fed_zero(&f, 4, D, 10);
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    assert_int_equal(s.n_extra, 0);
    run_rounds(&c, &f, &s, 1, NULL, 1, NULL);
    assert_close(fl_hdp_clip(&c, &s), 1e-6, 0, 0);
    fl_state_free(&s);
    fl_federation_free(&f);
}

static void fedhdp_group_with_r_zero_never_trains_and_keeps_the_global_model(void **state)
{
    (void)state;
    fl_federation f;
    const size_t ntr[5] = {13, 40, 9, 27, 18}, nte[5] = {3, 8, 2, 5, 4};
    fed_make(&f, 5, ntr, nte, 0.5, 43);
    const fl_hdp_group_cfg g[2] = {{false, 0.7, 0.0, 0.5}, {true, 0.0, 1.0, 0.5}};
    const uint32_t of[5] = {0, 1, 0, 1, 1};
    fl_job_cfg c = private_cfg("fedhdp");
    c.hdp_n_groups = 2;
    c.hdp_groups = g;
    c.hdp_silo_group = of;
    c.client_rate = 1.0;
    fl_state s;
    fl_round_metrics m = {0};
    dp_err err = {0};
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    float g0[P];
    memcpy(g0, s.global, sizeof g0);
    run_rounds(&c, &f, &s, c.rounds, NULL, 2, &m);
    assert_memory_not_equal(s.global, g0, sizeof g0); /* the opted-out silos trained it */
    for (size_t k = 0; k < 5; k++) {
        assert_true(m.silo[k].active == (of[k] == 1));
        if (of[k] == 0)
            assert_memory_equal(s.personal + k * P, s.global, P * sizeof(float));
        else
            assert_memory_not_equal(s.personal + k * P, s.global, P * sizeof(float));
    }
    fl_round_metrics_free(&m);
    fl_state_free(&s);
    fl_federation_free(&f);
}

/* The skewed experiment of Aldaghri, Mahdavifar & Beirami (§4, Tables 9 and 11), small: one class
 * per silo and every opted-out silo holding the same class. With r = 0 the server hears only them,
 * so the global model learns that one class and gets none of the private silos' rows right (the
 * paper's r = 0 rows: Acc_g about 1/10); r > 0 brings the private silos' classes back, and here a
 * larger r more (the skewed variant needs a larger r than the uniform one, Table 9). Synthetic
 * 5-class data (tau 0: one labelling rule), 20 silos x 30 rows, silos 0, 5, 10, 15 opted out,
 * softmax, q = 0.5, z = 1 on the private group, seeds 1-3. */
static double hdp_skewed_private_accuracy(uint64_t seed, double r)
{
    fl_synth_spec sp = {.silos = 1,
                        .dim = 8,
                        .n_min = 1500,
                        .n_max = 1500,
                        .tau = 0,
                        .noise = 0.1,
                        .classes = 5,
                        .seed = seed};
    fl_dataset ds = {0};
    dp_err err = {0};
    assert_int_equal(fl_synth_generate(&sp, &ds, &err), DP_OK);
    fl_partition_spec ps = {.kind = FL_PARTITION_CLASSES,
                            .silos = 20,
                            .classes_per_silo = 1,
                            .seed = seed,
                            .rows_per_silo = 30};
    uint32_t *assign = dp_calloc(ds.n, sizeof(uint32_t));
    assert_non_null(assign);
    size_t k_n = 0;
    fl_federation f;
    assert_int_equal(fl_partition(&ds, &ps, assign, &k_n, &err), DP_OK);
    assert_int_equal(fl_federate(&ds, assign, k_n, 0.2, seed, false, &f, &err), DP_OK);
    dp_free(assign);
    fl_dataset_free(&ds);
    const fl_hdp_group_cfg g[2] = {{true, 0.0, 1.0, 0.1}, {false, 1.0, r, 0.1}};
    uint32_t of[20];
    for (size_t k = 0; k < 20; k++)
        of[k] = k % 5 == 0 ? 0 : 1; /* silo k holds the class at ring position k mod 5 */
    fl_job_cfg c = base_cfg("fedhdp");
    c.model = (fl_model_spec){.type = FL_MODEL_SOFTMAX, .d_in = f.d, .n_classes = 5};
    c.rounds = 30;
    c.batch_size = 10;
    c.lr = 0.5;
    c.lambda = 0.1;
    c.seed = seed;
    c.client_rate = 0.5;
    c.update_clip = 1.0;
    c.hdp_n_groups = 2;
    c.hdp_groups = g;
    c.hdp_silo_group = of;
    fl_state s;
    fl_round_metrics m = {0};
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_OK);
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    run_rounds(&c, &f, &s, c.rounds, NULL, 1, &m);
    double hit = 0, n = 0;
    for (size_t k = 0; k < 20; k++)
        if (of[k] == 1) {
            hit += m.silo[k].global.test_metric * (double)m.silo[k].n_test;
            n += (double)m.silo[k].n_test;
        }
    fl_round_metrics_free(&m);
    fl_state_free(&s);
    fl_federation_free(&f);
    return hit / n;
}

static void fedhdp_skewed_opt_outs_collapse_at_r_zero_and_a_positive_r_recovers(void **state)
{
    (void)state;
    /* Seeds 1-8 gave r = 0: 0.021-0.104, r = 0.1: 0.396-0.604, r = 0.3: 0.562-0.750, and r = 0.3
     * above r = 0.1 by 0.125-0.271 on each seed (chance: 0.2). */
    for (uint64_t seed = 1; seed <= 3; seed++) {
        double a0 = hdp_skewed_private_accuracy(seed, 0.0);
        double a1 = hdp_skewed_private_accuracy(seed, 0.1);
        double a3 = hdp_skewed_private_accuracy(seed, 0.3);
        assert_true(a0 < 0.15);      /* collapsed onto the opted-out silos' class */
        assert_true(a1 > a0 + 0.25); /* the private silos' classes come back ... */
        assert_true(a3 > a1 + 0.05); /* ... the more, the larger r (in this range) */
    }
}

/* Sample variance of w[0..n) about 0 (the weights' noise walk is centred at 0). */
static double var0(const float *w, size_t n)
{
    double sq = 0;
    for (size_t j = 0; j < n; j++)
        sq += (double)w[j] * (double)w[j];
    return sq / (double)n;
}

/* On all-zero rows the weights' gradients are 0, so after a round each weight is the sum of
 * `steps` independent N(0, (lr z c / B)^2) noise draws: the variance counts the steps the trainer
 * ran, which must be the plan's (a block per local epoch of floor(n / B) steps; ditto 2 blocks). */
static void the_trainer_runs_exactly_the_steps_the_plan_charges(void **state)
{
    (void)state;
    const size_t d = 4000, n = 20;
    fl_federation f;
    fed_zero(&f, 1, d, n);
    const char *algos[3] = {"local", "mrmtl", "ditto"};
    for (int a = 0; a < 3; a++) {
        fl_job_cfg c = private_cfg(algos[a]);
        c.model.d_in = d;
        c.rounds = 1;
        c.batch_size = 6; /* floor(20 / 6) = 3 steps per epoch */
        c.local_epochs = 2;
        c.lr = 1.0;
        c.lambda = 0;
        c.clip = 1.0;
        const double z1[1] = {1.0};
        c.noise_multiplier = z1;
        fl_silo_plan plan;
        dp_err err = {0};
        assert_int_equal(fl_plan_silo(&c, 0, n, &plan, NULL, &err), DP_OK);
        fl_state s;
        assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
        run_rounds(&c, &f, &s, 1, NULL, 1, NULL);
        double per_step = 1.0 / 36.0; /* (lr z c / B)^2 */
        double blocks = strcmp(algos[a], "ditto") == 0 ? 2 : 1;
        double steps_personal = var0(s.personal, d) / per_step;
        assert_true(fabs(steps_personal / ((double)plan.steps_per_round / blocks) - 1) < 0.1);
        if (blocks == 2) { /* ditto's global block ran as many steps again */
            double steps_global = var0(s.global, d) / per_step;
            assert_true(fabs(steps_global / ((double)plan.steps_per_round / blocks) - 1) < 0.1);
        }
        assert_int_equal(plan.steps_per_round, (size_t)blocks * 2 * 3);
        fl_state_free(&s);
    }
    fl_federation_free(&f);
}

static void silos_and_rounds_draw_their_own_seeds(void **state)
{
    (void)state;
    /* two silos with the same rows: their private local models differ only by their draws */
    fl_federation f;
    const size_t ntr[2] = {24, 24}, nte[2] = {4, 4};
    fed_make(&f, 2, ntr, nte, 1.0, 23);
    memcpy(f.silo[1].x_train, f.silo[0].x_train, 24 * D * sizeof(float));
    memcpy(f.silo[1].y_train, f.silo[0].y_train, 24 * sizeof(float));
    fl_job_cfg c = private_cfg("local");
    const double z2[2] = {1.0, 1.0};
    c.noise_multiplier = z2;
    fl_state s, s2;
    dp_err err = {0};
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    run_rounds(&c, &f, &s, 1, NULL, 1, NULL);
    assert_memory_not_equal(s.personal, s.personal + P, P * sizeof(float));
    /* another job seed, other draws; the same seed, the same bytes */
    c.seed++;
    assert_int_equal(fl_state_init(&c, &f, &s2, &err), DP_OK);
    run_rounds(&c, &f, &s2, 1, NULL, 1, NULL);
    assert_memory_not_equal(s.personal, s2.personal, P * sizeof(float));
    fl_state_free(&s2);
    c.seed--;
    assert_int_equal(fl_state_init(&c, &f, &s2, &err), DP_OK);
    run_rounds(&c, &f, &s2, 1, NULL, 1, NULL);
    assert_memory_equal(s.personal, s2.personal, 2 * P * sizeof(float));
    fl_state_free(&s2);
    fl_state_free(&s);
    fl_federation_free(&f);
}

/* A synthetic classification federation from fl_data (natural silos, standardised features). */
static void synth_federation(fl_federation *f, size_t classes)
{
    fl_synth_spec sp = {.silos = 4,
                        .dim = 6,
                        .n_min = 30,
                        .n_max = 60,
                        .tau = 0.5,
                        .noise = 0.2,
                        .classes = classes,
                        .seed = 77};
    fl_dataset ds = {0};
    dp_err err = {0};
    assert_int_equal(fl_synth_generate(&sp, &ds, &err), DP_OK);
    fl_partition_spec ps = {.kind = FL_PARTITION_NATURAL, .seed = 78};
    uint32_t *assign = dp_calloc(ds.n, sizeof(uint32_t));
    assert_non_null(assign);
    size_t k_n = 0;
    assert_int_equal(fl_partition(&ds, &ps, assign, &k_n, &err), DP_OK);
    assert_int_equal(fl_federate(&ds, assign, k_n, 0.25, 79, true, f, &err), DP_OK);
    dp_free(assign);
    fl_dataset_free(&ds);
}

static void classifiers_report_accuracy_and_an_mlp_resumes_bit_identically(void **state)
{
    (void)state;
    fl_federation f;
    synth_federation(&f, 3);
    fl_job_cfg c = private_cfg("mrmtl");
    c.model.type = FL_MODEL_MLP;
    c.model.d_in = f.d;
    c.model.n_classes = f.n_classes;
    c.model.n_hidden = 1;
    c.model.hidden[0] = 8;
    const double z4[4] = {0.9, 1.0, 1.1, 1.2};
    c.noise_multiplier = z4;
    c.rounds = 6;
    fl_state whole, half, resumed;
    fl_round_metrics m1 = {0}, m2 = {0};
    dp_err err = {0};
    assert_int_equal(fl_state_init(&c, &f, &whole, &err), DP_OK);
    float zero[8] = {0};
    assert_memory_not_equal(whole.global, zero, sizeof zero); /* He-uniform initialisation */
    assert_memory_equal(whole.personal, whole.global, whole.n_params * sizeof(float));
    run_rounds(&c, &f, &whole, c.rounds, NULL, 1, &m1);
    assert_int_equal(fl_state_init(&c, &f, &half, &err), DP_OK);
    run_rounds(&c, &f, &half, 2, NULL, 2, NULL);
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(fl_state_serialize(&half, &c, &buf, &len, &err), DP_OK);
    assert_int_equal(fl_state_deserialize(buf, len, &c, &f, &resumed, &err), DP_OK);
    run_rounds(&c, &f, &resumed, c.rounds, NULL, 2, &m2);
    assert_states_equal(&whole, &resumed);
    assert_memory_equal(m1.silo, m2.silo, f.n_silos * sizeof(fl_silo_metrics));
    assert_false(m1.regression);
    double lo = DP_INF, hi = -DP_INF;
    for (size_t k = 0; k < f.n_silos; k++) {
        double a = m1.silo[k].personal.test_metric;
        assert_true(a >= 0 && a <= 1);
        double correct = a * (double)m1.silo[k].n_test; /* an accuracy counts rows */
        assert_close(correct, round(correct), 1e-9, 0);
        lo = fmin(lo, a);
        hi = fmax(hi, a);
    }
    assert_close(m1.personal.worst_test_metric, lo, 0, 0); /* accuracy: the smallest is worst */
    assert_close(m1.silo[m1.personal.worst_silo].personal.test_metric, lo, 0, 0);
    assert_close(m1.personal.spread_test_metric, hi - lo, 0, 0);
    dp_free(buf);
    fl_round_metrics_free(&m1);
    fl_round_metrics_free(&m2);
    fl_state_free(&half);
    fl_state_free(&resumed);
    fl_state_free(&whole);
    fl_federation_free(&f);
}

static void non_private_fedavg_learns_a_binary_classifier(void **state)
{
    (void)state;
    fl_federation f;
    synth_federation(&f, 2);
    fl_job_cfg c = base_cfg("fedavg");
    c.model.type = FL_MODEL_LOGISTIC;
    c.model.d_in = f.d;
    c.rounds = 60;
    c.batch_size = 16;
    c.lr = 0.5;
    fl_state s;
    fl_round_metrics first = {0}, last = {0};
    dp_err err = {0};
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    run_rounds(&c, &f, &s, 1, NULL, 2, &first);
    run_rounds(&c, &f, &s, c.rounds, NULL, 2, &last);
    /* the loss keeps falling after the first round, well below the zero model's log 2 */
    assert_true(last.global.train_loss < 0.9 * first.global.train_loss);
    assert_true(last.global.train_loss < 0.9 * log(2.0));
    /* and the global model beats the best constant prediction on the pooled test rows */
    double ones = 0, n_test = 0;
    for (size_t k = 0; k < f.n_silos; k++)
        for (size_t i = 0; i < f.silo[k].n_test; i++, n_test++)
            ones += f.silo[k].y_test[i] > 0.5f;
    double majority = fmax(ones, n_test - ones) / n_test;
    assert_true(last.global.pooled_test_metric > majority);
    fl_round_metrics_free(&first);
    fl_round_metrics_free(&last);
    fl_state_free(&s);
    fl_federation_free(&f);
}

/* Failure injection: every allocation of a round, a checkpoint and a plan fails in turn; each
 * attempt ends with DP_ENOMEM (or succeeds) and leaks nothing (the ASan build checks). */
static void every_allocation_failure_is_a_clean_enomem(void **state)
{
    (void)state;
    fl_federation f;
    fed_make(&f, 3, N_TRAIN3, N_TEST3, 1.0, 24);
    for (size_t a = 0; a < ALGOS_N; a++) {
        fl_job_cfg c = private_cfg(ALGOS[a]);
        bool done = false;
        for (long n = 1; !done && n < 1000; n++) {
            fl_state s = {0}, back = {0};
            fl_round_metrics m = {0};
            uint8_t *buf = NULL;
            size_t len = 0;
            acct_event *ev = NULL;
            fl_silo_plan plan;
            dp_err err = {0};
            dp_alloc_fail_after(n);
            int rc = fl_state_init(&c, &f, &s, &err);
            if (rc == DP_OK)
                rc = fl_round_run(&c, &f, &s, NULL, 1, &m, &err);
            if (rc == DP_OK)
                rc = fl_state_serialize(&s, &c, &buf, &len, &err);
            if (rc == DP_OK)
                rc = fl_state_deserialize(buf, len, &c, &f, &back, &err);
            if (rc == DP_OK)
                rc = fl_plan_silo(&c, 0, 100, &plan, &ev, &err);
            dp_alloc_fail_after(0);
            assert_true(rc == DP_OK || rc == DP_ENOMEM);
            done = rc == DP_OK;
            acct_event_free(ev);
            dp_free(buf);
            fl_round_metrics_free(&m);
            fl_state_free(&back);
            fl_state_free(&s);
        }
        assert_true(done);
    }
    fl_federation_free(&f);
}

/* ---- configuration ---- */

/* ---- AdaPeD (Ozkara, Acharya et al., Alg. 2 and Sec. 3.3) ---- */

/* psi held fixed (eta_3 = 0) at a huge value: the distillation term's weight 1 / (2 psi) is ~0, so
 * each personal model follows full-batch gradient descent on its own silo (tau steps a round),
 * computed here in double; the global model never moves (h ~ 0). */
static void adaped_with_fixed_huge_psi_is_local_gradient_descent(void **state)
{
    (void)state;
    fl_federation f;
    fed_make(&f, 3, N_TRAIN3, N_TEST3, 1.0, 31);
    fl_job_cfg c = base_cfg("adaped");
    c.rounds = 4;
    c.ap_tau = 5;
    c.lr = 0.1;
    c.ap_lr_psi = 0.0;
    c.ap_psi_init = 1e30;
    c.ap_psi_floor = 1e30;
    fl_state s;
    dp_err err = {0};
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    run_rounds(&c, &f, &s, c.rounds, NULL, 2, NULL);
    for (size_t k = 0; k < 3; k++) {
        const fl_silo_data *sd = &f.silo[k];
        double w[P] = {0};
        for (size_t step = 0; step < c.rounds * c.ap_tau; step++) {
            double g[P] = {0};
            for (size_t i = 0; i < sd->n_train; i++) {
                double r = w[D] - (double)sd->y_train[i];
                for (size_t j = 0; j < D; j++)
                    r += w[j] * (double)sd->x_train[i * D + j];
                for (size_t j = 0; j < D; j++)
                    g[j] += r * (double)sd->x_train[i * D + j];
                g[D] += r;
            }
            for (size_t j = 0; j < P; j++)
                w[j] -= c.lr * g[j] / (double)sd->n_train;
        }
        for (size_t j = 0; j < P; j++)
            assert_close((double)s.personal[k * P + j], w[j], 1e-4, 1e-5);
    }
    for (size_t j = 0; j < P; j++)
        assert_true(fabs((double)s.global[j]) < 1e-20);
    assert_true(fl_adaped_psi(&c, &s) == (double)1e30f);
    fl_state_free(&s);
    fl_federation_free(&f);
}

/* Alg. 7 (Ozkara, Acharya et al., App. H.2): an unsampled silo keeps training theta toward the mu,
 * psi it last received, for at most unsampled_rounds consecutive unsampled rounds; a silo never
 * sampled has received nothing and idles. With every silo sampled (client_rate 1) there is no
 * unsampled round and the run is Alg. 2's, bit for bit; with unsampled_rounds 0 unsampled silos
 * idle. Whether a silo was sampled is read from the round's metrics (active). */
static void adaped_alg7_unsampled_silos_train_up_to_the_cap(void **state)
{
    (void)state;
    enum { K = 4, T = 14 };
    static const size_t n_tr[K] = {12, 9, 15, 10}, n_te[K] = {4, 4, 4, 4};
    fl_federation f;
    fed_make(&f, K, n_tr, n_te, 1.0, 77);
    dp_err err = {0};
    for (int all = 0; all < 2; all++) {
        fl_job_cfg c = base_cfg("adaped");
        c.rounds = T;
        c.ap_tau = 2;
        c.lr = 0.1;
        c.client_rate = all ? 1.0 : 0.5;
        fl_state s2, s7;
        assert_int_equal(fl_state_init(&c, &f, &s2, &err), DP_OK);
        fl_job_cfg c7 = c;
        c7.ap_unsampled_rounds = 2;
        assert_int_equal(fl_state_init(&c7, &f, &s7, &err), DP_OK);
        bool ever[K] = {false};
        unsigned idle[K] = {0}, trained_idle = 0, capped = 0;
        float before[K * P];
        for (uint64_t t = 0; t < T; t++) {
            memcpy(before, s7.personal, sizeof before);
            fl_round_metrics m2 = {0}, m7 = {0};
            assert_int_equal(fl_round_run(&c, &f, &s2, NULL, 2, &m2, &err), DP_OK);
            assert_int_equal(fl_round_run(&c7, &f, &s7, NULL, 2, &m7, &err), DP_OK);
            for (size_t k = 0; k < K; k++) {
                bool took = m7.silo[k].active,
                     moved = memcmp(before + k * P, s7.personal + k * P, P * sizeof(float)) != 0;
                assert_true(took == m2.silo[k].active); /* the same server draws */
                if (took) {
                    ever[k] = true;
                    idle[k] = 0;
                    continue;
                }
                bool should = ever[k] && idle[k] < 2;
                assert_true(moved == should);
                trained_idle += should;
                capped += ever[k] && !should;
                idle[k] += should;
            }
            fl_round_metrics_free(&m2);
            fl_round_metrics_free(&m7);
        }
        if (all) { /* nothing unsampled: Alg. 7 is Alg. 2 */
            assert_memory_equal(s2.global, s7.global, P * sizeof(float));
            assert_memory_equal(s2.personal, s7.personal, K * P * sizeof(float));
            assert_true(trained_idle == 0);
        } else { /* the seed gives both cases: a trained unsampled round and a capped one */
            assert_true(trained_idle > 0);
            assert_true(capped > 0);
            assert_true(memcmp(s2.personal, s7.personal, K * P * sizeof(float)) != 0);
        }
        fl_state_free(&s2);
        fl_state_free(&s7);
    }
    fl_federation_free(&f);
}

/* One silo, one round of tau = 1, from theta = mu = 0 (linear models start at zero), by hand:
 *   theta^1 = -eta_1 grad f(0)                  (the KD gradient vanishes at theta = mu)
 *   h = grad_mu f_KD(theta^1, 0) / (2 psi) = -mean_i v_i (x_i, 1) / (2 psi),  v_i = theta^1.(x_i,
 * 1) mu^1 = -eta_2 h;  f_KD = mean_i (mu^1.(x_i,1) - v_i)^2 / 2 psi^1 = max(psi - eta_3 (1/(2 psi)
 * - c f_KD / (2 psi^2)), floor) and the server's psi is the one silo's. */
static void adaped_one_step_follows_alg2_by_hand(void **state)
{
    (void)state;
    fl_federation f;
    const size_t ntr[1] = {17}, nte[1] = {3};
    fed_make(&f, 1, ntr, nte, 1.0, 32);
    const fl_silo_data *sd = &f.silo[0];
    size_t n = sd->n_train;
    for (int variant = 0; variant < 2; variant++) {
        fl_job_cfg c = base_cfg("adaped");
        c.rounds = 1;
        c.ap_tau = 1;
        c.lr = 0.2;
        c.ap_lr_mu = 0.7;
        c.ap_psi_init = 1.3;
        c.ap_kd_psi = 5.0;
        c.ap_lr_psi = variant == 0 ? 0.05 : 100.0; /* 100: psi would fall below the floor */
        c.ap_psi_floor = 0.5;
        fl_state s;
        dp_err err = {0};
        assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
        run_rounds(&c, &f, &s, 1, NULL, 1, NULL);
        double th[P] = {0}, mu[P] = {0}, h[P] = {0}, psi = c.ap_psi_init;
        for (size_t i = 0; i < n; i++) { /* grad f(0) = mean_i -y_i (x_i, 1) */
            for (size_t j = 0; j < D; j++)
                th[j] += c.lr * (double)sd->y_train[i] * (double)sd->x_train[i * D + j] / n;
            th[D] += c.lr * (double)sd->y_train[i] / n;
        }
        double vx[32];
        assert_true(n <= 32);
        for (size_t i = 0; i < n; i++) {
            vx[i] = th[D];
            for (size_t j = 0; j < D; j++)
                vx[i] += th[j] * (double)sd->x_train[i * D + j];
            for (size_t j = 0; j < D; j++)
                h[j] -= vx[i] * (double)sd->x_train[i * D + j] / (2 * psi * n);
            h[D] -= vx[i] / (2 * psi * n);
        }
        for (size_t j = 0; j < P; j++)
            mu[j] = -c.ap_lr_mu * h[j];
        double kd = 0;
        for (size_t i = 0; i < n; i++) {
            double ux = mu[D];
            for (size_t j = 0; j < D; j++)
                ux += mu[j] * (double)sd->x_train[i * D + j];
            kd += 0.5 * (ux - vx[i]) * (ux - vx[i]) / n;
        }
        assert_true(kd > 1e-3); /* the psi step sees the distillation term */
        double k = 1 / (2 * psi) - c.ap_kd_psi * kd / (2 * psi * psi);
        double psi1 = fmax(psi - c.ap_lr_psi * k, c.ap_psi_floor);
        for (size_t j = 0; j < P; j++) {
            assert_close((double)s.personal[j], th[j], 1e-5, 1e-6);
            assert_close((double)s.global[j], mu[j], 1e-5, 1e-6);
        }
        assert_close(fl_adaped_psi(&c, &s), psi1, 1e-6, 0);
        if (variant == 1)
            assert_true(fl_adaped_psi(&c, &s) == 0.5);
        else
            assert_true(psi1 > 0.5 && psi1 != psi);
        fl_state_free(&s);
    }
    fl_federation_free(&f);
}

/* dp_adaped on silos whose rows are all zero: h = 0 and f_KD = 0, so the global model after one
 * round is -eta_2 times the mean over the K silos of tau noise draws each of std sigma_q1 =
 * z sqrt(2 tau) C_1: std eta_2 sigma_q1 sqrt(tau / K). Then with (almost) no noise f_KD stays 0
 * and psi's gradient 1/(2 psi) >= 1/7 is clipped to C_2 = 0.05 at each of the tau steps. */
static void dp_adaped_noises_each_clipped_step(void **state)
{
    (void)state;
    const size_t d = 3999, k_n = 4;
    fl_federation f;
    fed_zero(&f, k_n, d, 3);
    fl_job_cfg c = private_cfg("dp_adaped");
    c.model.d_in = d;
    c.rounds = 1;
    c.client_rate = 1.0;
    c.ap_tau = 3;
    c.ap_lr_mu = 0.5;
    c.update_clip = 0.4;
    c.server_noise = 0.9;
    c.ap_lr_psi = 1.0;
    c.ap_psi_init = 3.5;
    c.ap_psi_floor = 0.5;
    assert_close(fl_adaped_step_noise(&c), 0.9 * sqrt(6.0), 1e-15, 0);
    fl_state s;
    dp_err err = {0};
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    run_rounds(&c, &f, &s, 1, NULL, 2, NULL);
    double sum = 0, sq = 0, nn = (double)(d + 1);
    for (size_t j = 0; j < d + 1; j++) {
        sum += (double)s.global[j];
        sq += (double)s.global[j] * (double)s.global[j];
    }
    double mean = sum / nn, sd = sqrt(sq / nn - mean * mean);
    double want = 0.5 * (0.9 * sqrt(6.0) * 0.4) * sqrt(3.0 / (double)k_n);
    assert_true(fabs(sd / want - 1) < 0.05);
    assert_true(fabs(mean) < 4 * want / sqrt(nn));
    fl_state_free(&s);
    c.server_noise = 1e-12;
    c.ap_clip_psi = 0.05;
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    run_rounds(&c, &f, &s, 1, NULL, 2, NULL);
    assert_close(fl_adaped_psi(&c, &s), 3.5 - 3 * 0.05, 1e-6, 0);
    fl_state_free(&s);
    fl_federation_free(&f);
}

/* dp_adaped's charge: every trainable silo's round event is dp_fedavg's, poisson(q,
 * gaussian(server_noise)), its epsilon what the ledger sums; adaped has none. Thm. 5's closed form
 * (the paper_bound) on the check q = 1, T/tau = 300, K = 50, C/sigma = 1/3 for both: rho = 8. */
static void dp_adaped_charges_dp_fedavgs_event_and_reports_thm5(void **state)
{
    (void)state;
    fl_job_cfg c = private_cfg("dp_adaped");
    c.rounds = 40;
    c.client_rate = 0.3;
    c.server_noise = 0.8;
    fl_accountant acct = {1e-5, ACCT_CONV_OPTIMAL, NULL, 0};
    dp_err err = {0};
    for (size_t k = 0; k < 3; k++) {
        fl_silo_plan pl;
        acct_event *ev = NULL;
        assert_int_equal(fl_plan_silo(&c, k, 20, &pl, &ev, &err), DP_OK);
        assert_false(pl.record_level);
        assert_true(pl.is_private);
        assert_true(pl.noise_multiplier == 0.8);
        assert_true(pl.q == 0.3);
        double e_plan;
        assert_int_equal(fl_plan_epsilon(ev, c.rounds, &acct, &e_plan, &err), DP_OK);
        assert_close(e_plan, ledger_like_eps(ev, c.rounds, 1e-5), 1e-9, 0);
        fl_job_cfg d = private_cfg("dp_fedavg");
        d.rounds = c.rounds;
        d.client_rate = c.client_rate;
        d.server_noise = c.server_noise;
        fl_silo_plan dpl;
        acct_event *dev = NULL;
        assert_int_equal(fl_plan_silo(&d, k, 20, &dpl, &dev, &err), DP_OK);
        double e_d;
        assert_int_equal(fl_plan_epsilon(dev, d.rounds, &acct, &e_d, &err), DP_OK);
        assert_true(e_plan == e_d);
        acct_event_free(dev);
        acct_event_free(ev);
    }
    fl_job_cfg a = private_cfg("adaped");
    fl_silo_plan pl;
    acct_event *ev = NULL;
    assert_int_equal(fl_plan_silo(&a, 0, 20, &pl, &ev, &err), DP_OK);
    assert_false(pl.is_private);
    assert_null(ev);
    c.client_rate = 1.0;
    c.rounds = 300;
    c.ap_tau = 10;
    c.server_noise = 3.0 / sqrt(20.0); /* sigma_q / C = 3 */
    assert_close(fl_adaped_paper_rho(&c, 50), 8.0, 1e-12, 0);
    /* and its epsilon at delta 1e-5 by the paper's Lemma 1 (the CKS 2020 conversion the plan
     * reports), minimised over continuous orders: 25.9194 (an independent evaluation of the
     * formula on a fine grid) */
    double eps, opt;
    assert_int_equal(acct_zcdp_to_epsilon(8.0, 1e-5, ACCT_ZCDP_CKS2020, &eps, &opt, &err), DP_OK);
    assert_close(eps, 25.9194, 0, 1e-4);
}

/* RT10 (Ozkara, Acharya et al., §4 and App. K; no paper numbers, trends only) on synthetic
 * softmax data: 10 silos of 10-30 rows (half for test), 4 classes, heterogeneity tau 1. Full-batch
 * steps, lr 0.3, 10 local steps a round for every algorithm, 30 rounds. Claims checked on 3 seeds:
 * AdaPeD's personal models are at least as accurate as FedAvg's global model (pooled test
 * accuracy); without DP psi falls (the silos lean on the global model more); with DP (z = 1) the
 * noise entering the global model keeps psi above the non-private value. */
static void rt10_fed(fl_federation *f, uint64_t seed)
{
    fl_synth_spec sp = fl_adaped_rt10_spec(seed);
    fl_dataset ds = {0};
    dp_err err = {0};
    assert_int_equal(fl_synth_generate(&sp, &ds, &err), DP_OK);
    fl_partition_spec ps = {.kind = FL_PARTITION_NATURAL, .seed = seed + 1};
    uint32_t *assign = dp_calloc(ds.n, sizeof(uint32_t));
    assert_non_null(assign);
    size_t k_n = 0;
    assert_int_equal(fl_partition(&ds, &ps, assign, &k_n, &err), DP_OK);
    assert_int_equal(fl_federate(&ds, assign, k_n, 0.5, seed + 2, true, f, &err), DP_OK);
    dp_free(assign);
    fl_dataset_free(&ds);
}

/* Runs algo for `rounds`; returns the pooled test accuracy (personal models, or the global one for
 * fedavg) and psi after the last round in *psi. */
static double rt10_run(const char *algo, const fl_federation *f, uint64_t rounds, double z,
                       double *psi)
{
    fl_job_cfg c;
    fl_job_cfg_default(&c);
    c.algorithm = algo;
    c.model.type = FL_MODEL_SOFTMAX;
    c.model.d_in = f->d;
    c.model.n_classes = 4;
    c.rounds = rounds;
    c.batch_size = 100000; /* full batch */
    c.local_epochs = 10;   /* fedavg: 10 steps a round, as adaped's tau */
    c.lr = 0.3;
    c.seed = 5;
    c.ap_tau = 10;
    c.ap_lr_mu = 0.3;
    c.update_clip = 0.5;
    c.server_noise = z;
    fl_state s;
    dp_err err = {0};
    assert_int_equal(fl_state_init(&c, f, &s, &err), DP_OK);
    fl_round_metrics m = {0};
    run_rounds(&c, f, &s, c.rounds, NULL, 2, &m);
    double acc =
        strcmp(algo, "fedavg") == 0 ? m.global.pooled_test_metric : m.personal.pooled_test_metric;
    if (psi != NULL)
        *psi = fl_adaped_psi(&c, &s);
    fl_round_metrics_free(&m);
    fl_state_free(&s);
    return acc;
}

static void rt10_adaped_beats_fedavg_and_psi_follows_the_noise(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        fl_federation f;
        rt10_fed(&f, seed * 101);
        double psi_np, psi_dp;
        double a = rt10_run("adaped", &f, 30, 0, NULL);
        double fa = rt10_run("fedavg", &f, 30, 0, NULL);
        assert_true(a >= fa);
        rt10_run("adaped", &f, 60, 0, &psi_np);
        rt10_run("dp_adaped", &f, 60, 1.0, &psi_dp);
        assert_true(psi_np < 3.5);        /* psi^0 */
        assert_true(psi_dp > psi_np + 1); /* noise keeps the silos further from mu */
        fl_federation_free(&f);
    }
}

static void bad_configurations_are_refused_with_their_field(void **state)
{
    (void)state;
    fl_federation f;
    fed_make(&f, 3, N_TRAIN3, N_TEST3, 1.0, 22);
    dp_err err = {0};
    fl_job_cfg c = private_cfg("fedprox");
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "algorithm");
    c = private_cfg("mrmtl");
    c.lambda = -1;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "lambda");
    c = private_cfg("mrmtl");
    c.rounds = 0;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "rounds");
    c = private_cfg("mrmtl");
    c.model.d_in = D + 1;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "model.d_in");
    c = private_cfg("mrmtl");
    c.clip = 0; /* noise without clipping has no sensitivity */
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "noise_multiplier[0]");
    c = private_cfg("dp_fedavg");
    c.noise_multiplier = Z3; /* record-level noise in a client-level algorithm */
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "noise_multiplier");
    c = private_cfg("dp_fedavg");
    c.client_rate = 0;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "client_rate");
    c = private_cfg("adaped");
    c.model.type = FL_MODEL_SVM; /* no predictive distribution to distil */
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "model.type");
    c = private_cfg("adaped");
    c.ap_tau = 0;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "adaped.tau");
    c = private_cfg("adaped");
    c.ap_psi_init = 0.4; /* below the floor 0.5 */
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "adaped.psi_init");
    c = private_cfg("adaped");
    c.ap_lr_psi = -1;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "adaped.lr_psi");
    c = private_cfg("adaped");
    c.update_clip = 0; /* non-private adaped clips nothing: accepted */
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_OK);
    c.algorithm = "dp_adaped";
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "update_clip");
    c = private_cfg("dp_adaped");
    c.ap_clip_psi = 0;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "adaped.clip_psi");
    c = private_cfg("fedhdp");
    fl_hdp_group_cfg g[3] = {HDP3[0], HDP3[1], HDP3[2]};
    c.hdp_groups = g;
    g[2].noise = 0.5; /* an opted-out group with noise */
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "fedhdp.groups[2].noise_multiplier");
    g[2].noise = 0;
    g[0].r = g[1].r = g[2].r = 0; /* nobody trains */
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "fedhdp.groups");
    g[1].r = 0.5;
    const uint32_t out_of_range[3] = {0, 3, 0};
    c.hdp_silo_group = out_of_range;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "fedhdp.silo_group[1]");
    c.hdp_silo_group = HDP_GROUP_OF;
    c.hdp_count_noise = 0;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "fedhdp.adaptive_clip.count_noise");
    c.hdp_count_noise = 1;
    c.hdp_clip_quantile = 1;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, &f, &err), DP_EINVAL);
    assert_string_equal(err.field, "fedhdp.adaptive_clip.quantile");
    c.hdp_n_groups = 0;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "fedhdp.groups");
    c = private_cfg("fedavg");
    fl_state s;
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    dp_err_clear(&err);
    assert_int_equal(fl_round_run(&c, &f, &s, NULL, 0, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "threads");
    fl_state_free(&s);
    size_t n;
    const char *const *names = fl_algo_names(&n);
    assert_int_equal(n, ALGOS_N + 1);
    for (size_t i = 0; i < ALGOS_N; i++)
        assert_string_equal(names[i], ALGOS[i]);
    assert_string_equal(names[ALGOS_N], "altmin"); /* its own tests below */
    assert_false(fl_algo_has_global("local"));
    assert_true(fl_algo_has_global("mrmtl"));
    fl_federation_free(&f);
}

/* ---- altmin (Jain et al., NeurIPS 2021, Algs. 1-3; fl_algo_altmin.c) ---- */

/* 120 users of the low-rank regression (d = 8, k = 2), one silo each, a quarter of the rows for
 * testing, features as they are. */
static void altmin_fed(fl_lowrank *g, fl_federation *f)
{
    fl_lowrank_spec sp = {.users = 120, .m = 20, .d = 8, .k = 2, .sigma_f = 0.01, .seed = 9};
    fl_dataset ds;
    dp_err err = {0};
    assert_int_equal(fl_lowrank_init(&sp, g, &err), DP_OK);
    assert_int_equal(fl_lowrank_dataset(g, &ds, &err), DP_OK);
    assert_int_equal(fl_federate(&ds, ds.silo, ds.n_silos, 0.25, 3, false, f, &err), DP_OK);
    fl_dataset_free(&ds);
}

static fl_job_cfg altmin_cfg(bool spectral, double z)
{
    fl_job_cfg c;
    fl_job_cfg_default(&c);
    c.algorithm = "altmin";
    c.model.type = FL_MODEL_LINEAR;
    c.model.d_in = 8;
    c.rounds = 5;
    c.batch_size = 1;
    c.lr = 1;
    c.seed = 11;
    c.update_clip = 100; /* above every |y| and ||v (x) x||: no clipping */
    c.server_noise = z;
    c.altmin_rank = 2;
    c.altmin_spectral = spectral;
    return c;
}

static double altmin_dist(const fl_lowrank *g, const fl_state *s)
{
    double u[16];
    for (size_t i = 0; i < 16; i++)
        u[i] = (double)s->extra[i];
    return fl_lowrank_subspace_dist(g, u);
}

static void altmin_recovers_the_subspace_on_any_thread_count(void **state)
{
    (void)state;
    fl_lowrank g;
    fl_federation f;
    altmin_fed(&g, &f);
    for (int sp = 0; sp < 2; sp++) {
        fl_job_cfg c = altmin_cfg(sp == 1, 0.0);
        fl_state s[2];
        fl_round_metrics m[2] = {{0}};
        dp_err err = {0};
        for (int t = 0; t < 2; t++) {
            assert_int_equal(fl_state_init(&c, &f, &s[t], &err), DP_OK);
            assert_int_equal(s[t].n_extra, 16); /* U: d x k */
            run_rounds(&c, &f, &s[t], 1, NULL, t + 1, &m[t]);
        }
        double d1 = altmin_dist(&g, &s[0]), first = m[0].personal.pooled_test_metric;
        for (int t = 0; t < 2; t++)
            run_rounds(&c, &f, &s[t], c.rounds, NULL, t + 1, &m[t]);
        assert_memory_equal(s[0].extra, s[1].extra, 16 * sizeof(float));
        assert_memory_equal(s[0].personal, s[1].personal, 120 * 9 * sizeof(float));
        double d5 = altmin_dist(&g, &s[0]);
        if (sp == 1)
            assert_true(d1 < 0.6); /* Alg. 3 alone already points near span(U*) */
        assert_true(d5 < d1);
        assert_true(d5 < 0.02);
        /* the personalised models reach the label-noise floor sigma_F^2 = 1e-4 */
        assert_true(m[0].personal.pooled_test_metric < first);
        assert_true(m[0].personal.pooled_test_metric < 3e-4);
        assert_false(m[0].has_global);
        for (int t = 0; t < 2; t++) {
            fl_round_metrics_free(&m[t]);
            fl_state_free(&s[t]);
        }
    }
    fl_federation_free(&f);
    fl_lowrank_free(&g);
}

static void altmin_noise_is_applied_and_its_round_is_two_gaussians(void **state)
{
    (void)state;
    fl_lowrank g;
    fl_federation f;
    altmin_fed(&g, &f);
    dp_err err = {0};
    /* a spectral round 0 with much noise lands farther from U* than the noiseless one */
    fl_job_cfg c0 = altmin_cfg(true, 0.0), cz = altmin_cfg(true, 50.0);
    c0.update_clip = cz.update_clip = 1.0;
    fl_state s0, sz;
    assert_int_equal(fl_state_init(&c0, &f, &s0, &err), DP_OK);
    assert_int_equal(fl_state_init(&cz, &f, &sz, &err), DP_OK);
    run_rounds(&c0, &f, &s0, 1, NULL, 1, NULL);
    run_rounds(&cz, &f, &sz, 1, NULL, 1, NULL);
    assert_true(altmin_dist(&g, &sz) > 2 * altmin_dist(&g, &s0));
    fl_state_free(&s0);
    fl_state_free(&sz);
    /* the plan: one round = two Gaussian releases of multiplier z, rho = 1 / z^2 */
    fl_silo_plan p;
    acct_event *ev = NULL;
    double rho = 0;
    cz.server_noise = 3.0;
    assert_int_equal(fl_plan_silo(&cz, 0, 15, &p, &ev, &err), DP_OK);
    assert_true(p.is_private);
    assert_false(p.record_level);
    assert_non_null(ev);
    assert_int_equal(acct_zcdp_eval(ev, &rho, &err), DP_OK);
    assert_close(rho, 1.0 / 9.0, 1e-15, 0);
    acct_event_free(ev);
    /* no noise: no event */
    assert_int_equal(fl_plan_silo(&c0, 0, 15, &p, &ev, &err), DP_OK);
    assert_false(p.is_private);
    assert_null(ev);
    fl_federation_free(&f);
    fl_lowrank_free(&g);
}

static void altmin_resumes_bit_identically_and_honours_a_stopped_silo(void **state)
{
    (void)state;
    fl_lowrank g;
    fl_federation f;
    altmin_fed(&g, &f);
    fl_job_cfg c = altmin_cfg(true, 0.8);
    c.update_clip = 1.0;
    fl_state whole, half, resumed;
    dp_err err = {0};
    assert_int_equal(fl_state_init(&c, &f, &whole, &err), DP_OK);
    run_rounds(&c, &f, &whole, c.rounds, NULL, 2, NULL);
    assert_int_equal(fl_state_init(&c, &f, &half, &err), DP_OK);
    run_rounds(&c, &f, &half, 2, NULL, 1, NULL);
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(fl_state_serialize(&half, &c, &buf, &len, &err), DP_OK);
    fl_state_free(&half);
    assert_int_equal(fl_state_deserialize(buf, len, &c, &f, &resumed, &err), DP_OK);
    run_rounds(&c, &f, &resumed, c.rounds, NULL, 1, NULL);
    assert_memory_equal(whole.extra, resumed.extra, 16 * sizeof(float)); /* U */
    assert_states_equal(&whole, &resumed);
    dp_free(buf);
    fl_state_free(&resumed);
    /* silo 0 stopped from round 0: its statistics leave the sums, so U differs from the run with
     * it, and it still gets a personal model on the broadcast U (post-processing) */
    bool *active = calloc(f.n_silos, sizeof(bool));
    for (size_t k = 1; k < f.n_silos; k++)
        active[k] = true;
    fl_state st;
    assert_int_equal(fl_state_init(&c, &f, &st, &err), DP_OK);
    run_rounds(&c, &f, &st, c.rounds, active, 1, NULL);
    assert_true(st.stopped[0]);
    assert_memory_not_equal(st.extra, whole.extra, 16 * sizeof(float));
    float zero[9] = {0};
    assert_memory_not_equal(st.personal, zero, sizeof zero);
    free(active);
    fl_state_free(&st);
    fl_state_free(&whole);
    fl_federation_free(&f);
    fl_lowrank_free(&g);
}

static void altmin_configurations_are_refused_with_their_field(void **state)
{
    (void)state;
    dp_err err;
    fl_job_cfg c = altmin_cfg(false, 1.0);
    c.client_rate = 0.5;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "client_rate");
    c = altmin_cfg(false, 1.0);
    c.altmin_rank = 9; /* > d */
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "altmin.rank");
    c = altmin_cfg(false, 1.0);
    c.model.type = FL_MODEL_LOGISTIC;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "model.type");
    c = altmin_cfg(false, 1.0);
    c.update_clip = 0;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "update_clip");
}

int main(void)
{
    gsl_set_error_handler_off();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fedavg_full_batch_converges_to_the_pooled_least_squares_solution),
        cmocka_unit_test(local_converges_to_each_silos_own_least_squares_solution),
        cmocka_unit_test(mrmtl_with_lambda_zero_is_local_training_bit_for_bit),
        cmocka_unit_test(mrmtl_with_a_large_lambda_approaches_the_pooled_solution),
        cmocka_unit_test(finetune_is_fedavg_with_frac_one_and_local_with_frac_zero),
        cmocka_unit_test(every_algorithm_gives_the_same_bytes_with_one_two_or_three_threads),
        cmocka_unit_test(a_resumed_job_ends_bit_identically_to_an_uninterrupted_one),
        cmocka_unit_test(a_stopped_silo_contributes_nothing_and_stays_stopped),
        cmocka_unit_test(aggregate_metrics_pool_the_silos_rows),
        cmocka_unit_test(the_plan_counts_the_trainers_steps_and_ditto_doubles_them),
        cmocka_unit_test(calibrated_noise_meets_the_target_within_one_percent),
        cmocka_unit_test(batch_calibration_is_certified_on_the_whole_grid_and_minimal),
        cmocka_unit_test(dp_fedavg_adds_noise_of_std_z_s_over_q_k),
        cmocka_unit_test(dp_fedavg_clips_each_silos_delta_and_samples_at_the_rate),
        cmocka_unit_test(adaped_with_fixed_huge_psi_is_local_gradient_descent),
        cmocka_unit_test(adaped_one_step_follows_alg2_by_hand),
        cmocka_unit_test(adaped_alg7_unsampled_silos_train_up_to_the_cap),
        cmocka_unit_test(dp_adaped_noises_each_clipped_step),
        cmocka_unit_test(dp_adaped_charges_dp_fedavgs_event_and_reports_thm5),
        cmocka_unit_test(rt10_adaped_beats_fedavg_and_psi_follows_the_noise),
        cmocka_unit_test(ppsgd_converges_to_the_minimal_norm_split),
        cmocka_unit_test(ppsgd_ends_keep_their_invariants),
        cmocka_unit_test(ppsgd_steps_theta_unclipped_and_releases_the_clipped_mean),
        cmocka_unit_test(ppsgd_mode2_sums_minibatches_and_divides_by_q_m),
        cmocka_unit_test(ppsgd_mode1_is_mode3_with_every_user_and_one_sample),
        cmocka_unit_test(ppsgd_modes_charge_the_same_epsilon),
        cmocka_unit_test(fedhdp_with_one_group_releases_dp_fedavgs_global_model_bit_for_bit),
        cmocka_unit_test(fedhdp_noises_each_group_mean_with_its_own_z_and_weights_it_by_r),
        cmocka_unit_test(fedhdp_charges_each_silo_its_groups_event_and_opted_out_silos_nothing),
        cmocka_unit_test(fedhdp_group_with_r_zero_never_trains_and_keeps_the_global_model),
        cmocka_unit_test(fedhdp_skewed_opt_outs_collapse_at_r_zero_and_a_positive_r_recovers),
        cmocka_unit_test(fedhdp_adaptive_clip_follows_the_geometric_rule),
        cmocka_unit_test(the_trainer_runs_exactly_the_steps_the_plan_charges),
        cmocka_unit_test(silos_and_rounds_draw_their_own_seeds),
        cmocka_unit_test(classifiers_report_accuracy_and_an_mlp_resumes_bit_identically),
        cmocka_unit_test(non_private_fedavg_learns_a_binary_classifier),
        cmocka_unit_test(every_allocation_failure_is_a_clean_enomem),
        cmocka_unit_test(bad_configurations_are_refused_with_their_field),
        cmocka_unit_test(altmin_recovers_the_subspace_on_any_thread_count),
        cmocka_unit_test(altmin_noise_is_applied_and_its_round_is_two_gaussians),
        cmocka_unit_test(altmin_resumes_bit_identically_and_honours_a_stopped_silo),
        cmocka_unit_test(altmin_configurations_are_refused_with_their_field),
    };
    return cmocka_run_group_tests_name("fl_algo", tests, NULL, NULL);
}
