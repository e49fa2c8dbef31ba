/*
 * test_fl_adamix.c: the adamix and gaussian_prior job types (federated/fl_algo_adamix.c; Ozkara,
 * Acharya et al., ICLR 2023, Alg. 1, Alg. 4 and Alg. 5): the curvature bound against closed-form
 * eigenvalues; EM never decreasing the mixture likelihood; AdaMix with one component taking the
 * Gaussian-prior learner's step bit for bit; the Gaussian-prior learner with a huge prior variance
 * being local training (gradient descent for gd, least squares for em); the em variant's bytes
 * whatever the thread count and across a resume; and small-scale RT8 (App. K) and RT7 (Table 3)
 * reproductions. The engine-wide invariants (threads, resume, allocation failures) of both job
 * types in their gd form run in test_fl_algo.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_randist.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "common/dp_rng.h"
#include "federated/fl_algo.h"
#include "federated/fl_algo_impl.h"
#include "federated/fl_data.h"
#include "tests/support/test_util.h"

static fl_job_cfg cfg_of(const char *algo, size_t d, uint64_t rounds)
{
    fl_job_cfg c;
    fl_job_cfg_default(&c);
    c.algorithm = algo;
    c.model.type = FL_MODEL_LINEAR;
    c.model.d_in = d;
    c.rounds = rounds;
    c.batch_size = 1;
    c.lr = 1.0;
    c.seed = 11;
    return c;
}

static void run(const fl_job_cfg *c, const fl_federation *f, fl_state *s, uint64_t until,
                int threads)
{
    dp_err err = {0};
    while (s->round < until)
        assert_int_equal(fl_round_run(c, f, s, NULL, threads, NULL, &err), DP_OK);
}

static double param_err(const fl_state *s, const double *theta, size_t d)
{
    double e = 0.0;
    for (size_t k = 0; k < s->n_silos; k++)
        for (size_t j = 0; j < d; j++) {
            double v = (double)s->personal[k * s->n_params + j] - theta[k * d + j];
            e += v * v;
        }
    return e / (double)s->n_silos;
}

static void assert_full_states_equal(const fl_state *a, const fl_state *b)
{
    assert_int_equal(a->round, b->round);
    assert_int_equal(a->n_extra, b->n_extra);
    assert_memory_equal(a->global, b->global, a->n_params * sizeof(float));
    assert_memory_equal(a->personal, b->personal, a->n_silos * a->n_params * sizeof(float));
    assert_memory_equal(a->extra, b->extra, a->n_extra * sizeof(float));
}

/* Xt = [x, 1]: x = (1, 2) gives Xt^T Xt = [[5, 3], [3, 2]] (the n <= P path, through Xt Xt^T),
 * x = (1, 2, 3) gives [[14, 6], [6, 3]] (the P x P path). */
static void gram_lmax_is_the_largest_eigenvalue(void **state)
{
    (void)state;
    const float x2[2] = {1, 2}, x3[3] = {1, 2, 3};
    double l = 0.0;
    dp_err err = {0};
    assert_int_equal(fl_pr_gram_lmax(x2, 2, 1, &l, &err), DP_OK);
    assert_close(l, (7.0 + sqrt(45.0)) / 2.0, 1e-12, 0);
    assert_int_equal(fl_pr_gram_lmax(x3, 3, 1, &l, &err), DP_OK);
    assert_close(l, (17.0 + sqrt(265.0)) / 2.0, 1e-12, 0);
}

/* Points from two spherical clusters in 4 dimensions; 25 EM steps from a poor start: the
 * log-likelihood before each step never exceeds the one after it, and the fit finds the clusters.
 */
static void em_never_decreases_the_mixture_likelihood(void **state)
{
    (void)state;
    enum { M = 300, PD = 4, K = 3 };
    double *x = malloc(M * PD * sizeof(double)), *resp = malloc(M * K * sizeof(double));
    assert_true(x != NULL && resp != NULL);
    gsl_rng *r = dp_rng_alloc(5, DP_RNG_STREAM_DATA, NULL);
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < PD; j++)
            x[i * PD + j] = (i % 3 == 0 ? -2.0 : 1.5) + 0.3 * gsl_ran_gaussian(r, 1.0);
    gsl_rng_free(r);
    double w[K] = {0.2, 0.3, 0.5}, var[K] = {4.0, 0.01, 1.0}, mu[K * PD], lr[K];
    for (size_t l = 0; l < K; l++)
        for (size_t j = 0; j < PD; j++)
            mu[l * PD + j] = x[(l * 7) * PD + j];
    double prev = -DP_INF;
    for (int it = 0; it < 25; it++) {
        double before = fl_gmm_loglik(x, M, PD, K, w, mu, var, lr);
        double ll = fl_gmm_em_step(x, M, PD, K, 1e-6, w, mu, var, resp);
        assert_close(ll, before, 1e-12, 0);
        assert_true(ll >= prev - 1e-9 * fabs(ll));
        prev = ll;
    }
    assert_true(fl_gmm_loglik(x, M, PD, K, w, mu, var, lr) >= prev);
    /* the mixture's mean over components reproduces the data's overall mean */
    double mean = 0.0, fit = 0.0;
    for (size_t i = 0; i < M; i++)
        mean += x[i * PD] / M;
    for (size_t l = 0; l < K; l++)
        fit += w[l] * mu[l * PD];
    assert_close(fit, mean, 1e-9, 1e-12);
    free(resp);
    free(x);
}

/* AdaMix with one component: its prior gradient is (theta - mu) / v, and a round from a fitted
 * N(mu, v I) gives each silo the personal model gaussian_prior's gd round gives from (mu, v) with
 * sigma_x^2 = AdaMix's noise variance, bit for bit. */
static void one_component_adamix_is_the_gaussian_prior_learner(void **state)
{
    (void)state;
    enum { D = 6, P = D + 1 };
    double th[P], mu[P], g[P], resp[1], w1[1] = {1.0}, v1[1] = {0.37};
    for (size_t j = 0; j < P; j++) {
        th[j] = 0.3 * (double)j - 0.71;
        mu[j] = 0.11 * (double)(j * j) - 0.2;
    }
    fl_adamix_prior_grad(th, P, 1, w1, mu, v1, resp, g);
    assert_true(resp[0] == 1.0);
    for (size_t j = 0; j < P; j++)
        assert_true(g[j] == (th[j] - mu[j]) / v1[0]);

    fl_prior_synth sp = fl_prior_rt8_spec(7, D, 3);
    fl_federation f;
    dp_err err = {0};
    assert_int_equal(fl_prior_synth_generate(&sp, &f, NULL, &err), DP_OK);
    fl_job_cfg ca = cfg_of("adamix", D, 3), cg = cfg_of("gaussian_prior", D, 3);
    ca.pr_components = 1;
    ca.pr_steps = cg.pr_steps = 4;
    ca.lr = cg.lr = 0.8;
    ca.pr_noise_var = cg.pr_sigma_x2 = (double)0.05f; /* as the state keeps it */
    cg.pr_sigma_theta2 = 0.37;
    fl_state sa, sg;
    assert_int_equal(fl_state_init(&ca, &f, &sa, &err), DP_OK);
    assert_int_equal(fl_state_init(&cg, &f, &sg, &err), DP_OK);
    run(&ca, &f, &sa, 1, 1); /* round 0 fits the mixture; then set it to N(mu, 0.37 I) */
    run(&cg, &f, &sg, 1, 1);
    memcpy(sg.personal, sa.personal, f.n_silos * P * sizeof(float));
    sa.extra[1] = 1.0f;
    sa.extra[2] = 0.37f;
    for (size_t j = 0; j < P; j++)
        sa.extra[3 + j] = sg.global[j] = (float)mu[j];
    sg.extra[0] = 0.37f;
    sg.extra[1] = 0.05f;
    run(&ca, &f, &sa, 2, 2);
    run(&cg, &f, &sg, 2, 1);
    assert_memory_equal(sa.personal, sg.personal, f.n_silos * P * sizeof(float));
    /* and the server's fits agree: EM's one-component mean is the mean of the models */
    double wf[1], vf[1], mf[P];
    assert_int_equal(fl_adamix_mixture(&ca, &sa, wf, vf, mf), DP_OK);
    for (size_t j = 0; j < P; j++) {
        double m = 0.0;
        for (size_t k = 0; k < f.n_silos; k++)
            m += (double)sa.personal[k * P + j] / (double)f.n_silos;
        assert_close(mf[j], m, 1e-6, 1e-7);
    }
    fl_state_free(&sa);
    fl_state_free(&sg);
    fl_federation_free(&f);
}

/* sigma_theta^2 = 1e30 held fixed (lr_var = 0, lr_mu = 0): gd's personal models follow full-batch
 * gradient descent on sum (y - f)^2 / (2 sigma_x^2) with step lr / (lambda_max / sigma_x^2),
 * computed here in double; em's first round is each silo's least-squares fit. */
static void a_huge_prior_variance_is_local_training(void **state)
{
    (void)state;
    enum { D = 4, P = D + 1, K = 3, N = 12 };
    fl_prior_synth sp = fl_prior_rt8_spec(K, D, 9);
    sp.n_train = N;
    fl_federation f;
    dp_err err = {0};
    assert_int_equal(fl_prior_synth_generate(&sp, &f, NULL, &err), DP_OK);
    fl_job_cfg c = cfg_of("gaussian_prior", D, 5);
    c.pr_sigma_theta2 = 1e30;
    c.pr_sigma_x2 = 0.5;
    c.pr_lr_var = 0.0;
    c.pr_lr_mu = 0.0;
    c.pr_steps = 3;
    c.lr = 0.9;
    fl_state s;
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    run(&c, &f, &s, c.rounds, 2);
    for (size_t k = 0; k < K; k++) {
        const fl_silo_data *sd = &f.silo[k];
        double lmax = 0.0, w[P] = {0};
        assert_int_equal(fl_pr_gram_lmax(sd->x_train, N, D, &lmax, &err), DP_OK);
        double eta = 0.9 / (lmax / 0.5 + 1e-30);
        for (int t = 0; t < 15; t++) {
            double g[P] = {0};
            for (size_t i = 0; i < N; i++) {
                double fx = w[D];
                for (size_t j = 0; j < D; j++)
                    fx += w[j] * (double)sd->x_train[i * D + j];
                double r = fx - (double)sd->y_train[i];
                for (size_t j = 0; j < D; j++)
                    g[j] += r * (double)sd->x_train[i * D + j];
                g[D] += r;
            }
            for (size_t j = 0; j < P; j++)
                w[j] -= eta * g[j] / 0.5;
        }
        for (size_t j = 0; j < P; j++)
            assert_close((double)s.personal[k * P + j], w[j], 1e-4, 1e-5);
    }
    fl_state_free(&s);
    /* em, sigma_theta^2 = 1e12: the posterior mean is the least-squares solution */
    c.pr_variant = FL_GP_EM;
    c.pr_sigma_theta2 = 1e12;
    c.rounds = 1;
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    run(&c, &f, &s, 1, 1);
    for (size_t k = 0; k < K; k++) {
        const fl_silo_data *sd = &f.silo[k];
        gsl_matrix *a = gsl_matrix_calloc(P, P);
        gsl_vector *b = gsl_vector_calloc(P), *w = gsl_vector_alloc(P);
        for (size_t i = 0; i < N; i++)
            for (size_t u = 0; u < P; u++) {
                double xu = u < D ? (double)sd->x_train[i * D + u] : 1.0;
                b->data[u] += xu * (double)sd->y_train[i];
                for (size_t v = 0; v < P; v++)
                    a->data[u * P + v] += xu * (v < D ? (double)sd->x_train[i * D + v] : 1.0);
            }
        assert_int_equal(gsl_linalg_cholesky_decomp1(a), 0);
        assert_int_equal(gsl_linalg_cholesky_solve(a, b, w), 0);
        for (size_t j = 0; j < P; j++)
            assert_close((double)s.personal[k * P + j], w->data[j], 1e-4, 1e-5);
        gsl_matrix_free(a);
        gsl_vector_free(b);
        gsl_vector_free(w);
    }
    fl_state_free(&s);
    fl_federation_free(&f);
}

/* gaussian_prior em and adamix: the same bytes (models, prior, mixture) with 1 or 3 threads, and a
 * job resumed from a checkpoint ends where the uninterrupted one ends. */
static void em_and_adamix_are_deterministic_and_resume_bit_identically(void **state)
{
    (void)state;
    enum { D = 5 };
    fl_prior_synth sp = fl_prior_rt7_spec(9, 8, 4);
    sp.dim = D;
    fl_federation f;
    dp_err err = {0};
    assert_int_equal(fl_prior_synth_generate(&sp, &f, NULL, &err), DP_OK);
    for (int a = 0; a < 2; a++) {
        fl_job_cfg c = cfg_of(a == 0 ? "gaussian_prior" : "adamix", D, 6);
        c.pr_variant = FL_GP_EM;
        c.pr_steps = 5;
        fl_state one, three, half, back;
        assert_int_equal(fl_state_init(&c, &f, &one, &err), DP_OK);
        assert_int_equal(fl_state_init(&c, &f, &three, &err), DP_OK);
        assert_int_equal(fl_state_init(&c, &f, &half, &err), DP_OK);
        run(&c, &f, &one, c.rounds, 1);
        run(&c, &f, &three, c.rounds, 3);
        assert_full_states_equal(&one, &three);
        run(&c, &f, &half, 3, 2);
        uint8_t *buf = NULL;
        size_t len = 0;
        assert_int_equal(fl_state_serialize(&half, &c, &buf, &len, &err), DP_OK);
        assert_int_equal(fl_state_deserialize(buf, len, &c, &f, &back, &err), DP_OK);
        run(&c, &f, &back, c.rounds, 1);
        assert_full_states_equal(&one, &back);
        dp_free(buf);
        fl_state_free(&one);
        fl_state_free(&three);
        fl_state_free(&half);
        fl_state_free(&back);
    }
    fl_federation_free(&f);
}

/* RT8 at a small scale (App. K's generator, 400 silos of 10 rows, d = 10): em's personal models
 * come within 10% of the Bayes posterior mean at the true prior (one em round from the truth) and
 * beat one pooled model; gd, the joint MAP of Alg. 4, collapses sigma_theta^2 to the floor. */
static void rt8_small_em_approaches_bayes_and_gd_collapses(void **state)
{
    (void)state;
    enum { D = 10, M = 400 };
    fl_prior_synth sp = fl_prior_rt8_spec(M, D, 21);
    double *theta = malloc(M * D * sizeof(double)), mu[D];
    assert_non_null(theta);
    fl_federation f;
    dp_err err = {0};
    assert_int_equal(fl_prior_synth_generate(&sp, &f, theta, &err), DP_OK);
    for (size_t j = 0; j < D; j++) { /* mu by moments of the true models (M = 400: close) */
        mu[j] = 0.0;
        for (size_t k = 0; k < M; k++)
            mu[j] += theta[k * D + j] / M;
    }
    fl_job_cfg c = cfg_of("gaussian_prior", D, 1);
    c.pr_variant = FL_GP_EM;
    c.pr_sigma_theta2 = 0.01;
    c.pr_sigma_x2 = 0.05;
    fl_state s;
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    for (size_t j = 0; j < D; j++)
        s.global[j] = (float)mu[j];
    run(&c, &f, &s, 1, 1);
    double bayes = param_err(&s, theta, D);
    fl_state_free(&s);
    c = cfg_of("gaussian_prior", D, 60);
    c.pr_variant = FL_GP_EM;
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    run(&c, &f, &s, c.rounds, 2);
    double em = param_err(&s, theta, D), pooled = 0.0;
    for (size_t k = 0; k < M; k++) /* the prior mean as everyone's model */
        for (size_t j = 0; j < D; j++)
            pooled += pow((double)s.global[j] - theta[k * D + j], 2) / M;
    assert_true(em < 1.1 * bayes);
    assert_true(em < pooled);
    double st, sx;
    fl_gp_variances(&c, &s, &st, &sx);
    assert_true(st > 0.005 && st < 0.03); /* truth 0.01 */
    fl_state_free(&s);
    c = cfg_of("gaussian_prior", D, 5);
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    run(&c, &f, &s, c.rounds, 2);
    fl_gp_variances(&c, &s, &st, &sx);
    assert_true(st == (double)(float)c.pr_var_floor);
    fl_state_free(&s);
    fl_federation_free(&f);
    free(theta);
}

/* RT7 at a small scale (Table 3's generator, 200 silos, n = 20, d = 50): local min-norm's error is
 * about (d - n)/d ||mu||^2 = 30; AdaMix with 2 components, 20 steps and 3 EM iterations a round
 * finds the two components (means near +-1, equal weights) and brings the error below 1 in 40
 * rounds. */
static void rt7_small_adamix_finds_both_components(void **state)
{
    (void)state;
    enum { M = 200, D = 50 };
    fl_prior_synth sp = fl_prior_rt7_spec(M, 20, 31);
    double *theta = malloc(M * D * sizeof(double));
    assert_non_null(theta);
    fl_federation f;
    dp_err err = {0};
    assert_int_equal(fl_prior_synth_generate(&sp, &f, theta, &err), DP_OK);
    fl_job_cfg c = cfg_of("adamix", D, 40);
    c.pr_steps = 20;
    c.pr_noise_var = 0.1;
    fl_state s;
    assert_int_equal(fl_state_init(&c, &f, &s, &err), DP_OK);
    run(&c, &f, &s, 1, 2);
    double first = param_err(&s, theta, D);
    run(&c, &f, &s, c.rounds, 2);
    double last = param_err(&s, theta, D);
    assert_true(first > 10.0);
    assert_true(last < 1.0);
    double w[2], var[2], mu[2 * (D + 1)];
    assert_int_equal(fl_adamix_mixture(&c, &s, w, var, mu), DP_OK);
    assert_true(fabs(w[0] - 0.5) < 0.15 && fabs(w[1] - 0.5) < 0.15);
    double m0 = 0.0, m1 = 0.0;
    for (size_t j = 0; j < D; j++) {
        m0 += mu[j] / D;
        m1 += mu[D + 1 + j] / D;
    }
    assert_true(fabs(fabs(m0) - 1.0) < 0.1 && fabs(fabs(m1) - 1.0) < 0.1 && m0 * m1 < 0);
    fl_state_free(&s);
    fl_federation_free(&f);
    free(theta);
}

static void bad_configurations_are_refused_with_their_field(void **state)
{
    (void)state;
    dp_err err = {0};
    fl_job_cfg c = cfg_of("adamix", 3, 2);
    c.pr_components = 0;
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "adamix.components");
    c = cfg_of("adamix", 3, 2);
    c.pr_em_iters = 0;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "adamix.em_iters");
    c = cfg_of("adamix", 3, 2);
    c.pr_noise_var = 0;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "adamix.noise_var");
    c = cfg_of("adamix", 3, 2);
    c.lr = 2.5;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "lr");
    c = cfg_of("gaussian_prior", 3, 2);
    c.pr_steps = 0;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "gaussian_prior.steps");
    c = cfg_of("gaussian_prior", 3, 2);
    c.model.type = FL_MODEL_LOGISTIC;
    c.pr_variant = FL_GP_EM;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "gaussian_prior.variant");
    c = cfg_of("gaussian_prior", 3, 2);
    c.model.type = FL_MODEL_SOFTMAX;
    c.model.n_classes = 3;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "model.type");
    c = cfg_of("gaussian_prior", 3, 2);
    c.pr_sigma_theta2 = -1;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "gaussian_prior.sigma_theta2");
    c = cfg_of("gaussian_prior", 3, 2);
    c.pr_lr_var = 1.5;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "gaussian_prior.lr_var");
    c = cfg_of("gaussian_prior", 3, 2);
    c.pr_var_floor = 0;
    dp_err_clear(&err);
    assert_int_equal(fl_job_cfg_check(&c, NULL, &err), DP_EINVAL);
    assert_string_equal(err.field, "gaussian_prior.var_floor");
    /* neither is private: no event, nothing to calibrate */
    c = cfg_of("adamix", 3, 2);
    fl_silo_plan plan;
    acct_event *ev = NULL;
    dp_err_clear(&err);
    assert_int_equal(fl_plan_silo(&c, 0, 10, &plan, &ev, &err), DP_OK);
    assert_false(plan.is_private);
    assert_null(ev);
}

int main(void)
{
    gsl_set_error_handler_off();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gram_lmax_is_the_largest_eigenvalue),
        cmocka_unit_test(em_never_decreases_the_mixture_likelihood),
        cmocka_unit_test(one_component_adamix_is_the_gaussian_prior_learner),
        cmocka_unit_test(a_huge_prior_variance_is_local_training),
        cmocka_unit_test(em_and_adamix_are_deterministic_and_resume_bit_identically),
        cmocka_unit_test(rt8_small_em_approaches_bayes_and_gd_collapses),
        cmocka_unit_test(rt7_small_adamix_finds_both_components),
        cmocka_unit_test(bad_configurations_are_refused_with_their_field),
    };
    return cmocka_run_group_tests_name("fl_adamix", tests, NULL, NULL);
}
