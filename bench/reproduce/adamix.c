/*
 * adamix.c: the "adamix" part of build/bench/reproduce (`make reproduce PART=adamix`): reproduction
 * targets RT8 and RT7 of Ozkara, Acharya et al., "A Statistical Framework for Personalized
 * Federated Learning and Estimation: Theory, Algorithms, and Privacy" (ICLR 2023), run through the
 * library's gaussian_prior and adamix job types (federated/fl_algo_adamix.c).
 *
 * RT8 (App. K, "personalized linear regression", Gaussian prior; fl_prior_rt8_spec): m silos of n
 * = 10 rows, d in {50, 100}, mu_j ~ N(0, 0.1^2), sigma_theta^2 = 0.01, x ~ N(0, 0.05 I), noise
 * variance 0.05. Printed: the parameter error (1/m) sum_k ||theta_hat_k - theta_k||^2 (intercept
 * excluded) of local min-norm least squares (estimators/eb_linreg_minnorm), one pooled
 * least-squares model for every silo (the "FedAvg" limit), the Bayes posterior mean with the true
 * prior (Thm. 7: one E-step of gaussian_prior em at the true mu and variances), gaussian_prior gd
 * (Alg. 4) with lr_var 1 and 0.1, gd with the variances held at the truth (lr_var 0), and
 * gaussian_prior em, after T rounds from mu = 0 and unit variances, with the variances learnt.
 * RT7 (Table 3, AdaMix; fl_prior_rt7_spec): m = 1000 silos, d = 50, n in {10, 20, 30}, theta ~
 * 1/2 N(1_d, 0.001 I) + 1/2 N(-1_d, 0.001 I), x ~ N(0, I), noise variance 0.1 (known). Printed:
 * the same error for local min-norm and adamix (k = 2, 20 gradient steps a round at lr 1, 3 EM
 * iterations a round, variance floor 1e-4) after 30 and 100 rounds.
 *
 * Environment (read by reproduce.c's main): REPRO_ADAMIX_SILOS (RT8's m, default 2000),
 * REPRO_ADAMIX_ROUNDS (RT8's T, default 150). Prints tables; a few minutes on one core.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_linalg.h>

#include "common/dp_alloc.h"
#include "common/dp_err.h"
#include "estimators/eb_linreg.h"
#include "federated/fl_algo.h"
#include "federated/fl_data.h"
#include "bench/reproduce/repro_util.h"

int part_adamix(int silos, int rounds, int threads);

/* (1/m) sum_k ||w_k[0..d) - theta_k||^2 over personal rows of p floats. */
static double param_err(const float *w, size_t p, const double *theta, size_t m, size_t d)
{
    double s = 0.0;
    for (size_t k = 0; k < m; k++)
        for (size_t j = 0; j < d; j++) {
            double e = (double)w[k * p + j] - theta[k * d + j];
            s += e * e;
        }
    return s / (double)m;
}

/* Local min-norm least squares per silo (no intercept: the data have none). */
static int local_err(const fl_federation *f, const double *theta, double *out, dp_err *err)
{
    size_t d = f->d, n_max = 0;
    for (size_t k = 0; k < f->n_silos; k++)
        n_max = f->silo[k].n_train > n_max ? f->silo[k].n_train : n_max;
    double *x = dp_calloc(n_max * d + n_max + d, sizeof(double));
    if (x == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    double *y = x + n_max * d, *th = y + n_max, s = 0.0;
    int rc = DP_OK;
    for (size_t k = 0; k < f->n_silos && rc == DP_OK; k++) {
        const fl_silo_data *sd = &f->silo[k];
        for (size_t i = 0; i < sd->n_train * d; i++)
            x[i] = (double)sd->x_train[i];
        for (size_t i = 0; i < sd->n_train; i++)
            y[i] = (double)sd->y_train[i];
        rc = eb_linreg_minnorm(sd->n_train, d, x, y, th, err);
        for (size_t j = 0; j < d; j++)
            s += (th[j] - theta[k * d + j]) * (th[j] - theta[k * d + j]);
    }
    dp_free(x);
    *out = s / (double)f->n_silos;
    return rc;
}

/* One least-squares model on every silo's rows pooled (normal equations in double). */
static int pooled_err(const fl_federation *f, const double *theta, double *out, dp_err *err)
{
    size_t d = f->d;
    gsl_matrix *a = gsl_matrix_calloc(d, d);
    gsl_vector *b = gsl_vector_calloc(d), *w = gsl_vector_alloc(d);
    if (a == NULL || b == NULL || w == NULL) {
        gsl_matrix_free(a);
        gsl_vector_free(b);
        gsl_vector_free(w);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    for (size_t k = 0; k < f->n_silos; k++) {
        const fl_silo_data *sd = &f->silo[k];
        for (size_t i = 0; i < sd->n_train; i++) {
            const float *xi = sd->x_train + i * d;
            for (size_t u = 0; u < d; u++) {
                b->data[u] += (double)xi[u] * (double)sd->y_train[i];
                for (size_t v = 0; v < d; v++)
                    a->data[u * d + v] += (double)xi[u] * (double)xi[v];
            }
        }
    }
    int rc = DP_OK;
    if (gsl_linalg_cholesky_decomp1(a) != 0 || gsl_linalg_cholesky_solve(a, b, w) != 0)
        rc = dp_err_set(err, DP_ENUMERIC, NULL, "pooled least squares failed");
    double s = 0.0;
    for (size_t k = 0; rc == DP_OK && k < f->n_silos; k++)
        for (size_t j = 0; j < d; j++)
            s += (w->data[j] - theta[k * d + j]) * (w->data[j] - theta[k * d + j]);
    *out = s / (double)f->n_silos;
    gsl_matrix_free(a);
    gsl_vector_free(b);
    gsl_vector_free(w);
    return rc;
}

static fl_job_cfg base_cfg(const char *algo, const fl_federation *f, uint64_t rounds)
{
    fl_job_cfg c;
    fl_job_cfg_default(&c);
    c.algorithm = algo;
    c.model.type = FL_MODEL_LINEAR;
    c.model.d_in = f->d;
    c.rounds = rounds;
    c.batch_size = 1;
    c.lr = 1.0;
    c.seed = 7;
    return c;
}

/* Runs c from state s (already initialised) to c->rounds; prints the error every `every` rounds
 * (0: only at the end) into *final. */
static int run_to_end(const fl_job_cfg *c, const fl_federation *f, fl_state *s, const double *theta,
                      int threads, double *final, dp_err *err)
{
    int rc = DP_OK;
    while (rc == DP_OK && s->round < c->rounds)
        rc = fl_round_run(c, f, s, NULL, threads, NULL, err);
    if (rc == DP_OK)
        *final = param_err(s->personal, s->n_params, theta, f->n_silos, f->d);
    return rc;
}

/* RT8 at dimension d. */
static int rt8(size_t m, size_t d, uint64_t rounds, int threads, dp_err *err)
{
    fl_prior_synth sp = fl_prior_rt8_spec(m, d, 1000 + d);
    fl_federation f;
    double *theta = dp_calloc(m * d, sizeof(double));
    if (theta == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    int rc = fl_prior_synth_generate(&sp, &f, theta, err);
    if (rc != DP_OK) {
        dp_free(theta);
        return rc;
    }
    double e_loc = 0, e_pool = 0, e_bayes = 0, e_gd = 0, e_em = 0, e_slow = 0, e_known = 0;
    double st_gd = 0, sx_gd = 0, st_em = 0, sx_em = 0, st_slow = 0, sx_slow = 0;
    rc = local_err(&f, theta, &e_loc, err);
    if (rc == DP_OK)
        rc = pooled_err(&f, theta, &e_pool, err);
    /* the Bayes posterior mean at the true prior: one exact E-step from the true (mu, variances) */
    fl_prior_synth mu_only = sp;
    mu_only.silos = 1;
    mu_only.sigma_theta2 = 0.0; /* the first silo's theta is then mu itself */
    fl_federation fm;
    double *mu = dp_calloc(d, sizeof(double));
    if (rc == DP_OK && mu == NULL)
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    if (rc == DP_OK)
        rc = fl_prior_synth_generate(&mu_only, &fm, mu, err);
    if (rc == DP_OK)
        fl_federation_free(&fm);
    fl_job_cfg ce = base_cfg("gaussian_prior", &f, 1);
    ce.pr_variant = FL_GP_EM;
    ce.pr_sigma_theta2 = sp.sigma_theta2;
    ce.pr_sigma_x2 = sp.noise_var;
    fl_state s = {0};
    if (rc == DP_OK)
        rc = fl_state_init(&ce, &f, &s, err);
    if (rc == DP_OK) {
        for (size_t j = 0; j < d; j++)
            s.global[j] = (float)mu[j];
        rc = run_to_end(&ce, &f, &s, theta, threads, &e_bayes, err);
    }
    fl_state_free(&s);
    /* gd with the variances held at the truth (lr_var = 0): Alg. 4 without its collapse */
    fl_job_cfg ck = base_cfg("gaussian_prior", &f, rounds);
    ck.pr_sigma_theta2 = sp.sigma_theta2;
    ck.pr_sigma_x2 = sp.noise_var;
    ck.pr_lr_var = 0.0;
    if (rc == DP_OK)
        rc = fl_state_init(&ck, &f, &s, err);
    if (rc == DP_OK)
        rc = run_to_end(&ck, &f, &s, theta, threads, &e_known, err);
    fl_state_free(&s);
    /* gaussian_prior gd (lr_var 1 and 0.1) and em from mu = 0, sigma_theta^2 = sigma_x^2 = 1 */
    for (int v = 0; rc == DP_OK && v < 3; v++) {
        fl_job_cfg c = base_cfg("gaussian_prior", &f, rounds);
        c.pr_variant = v == 2 ? FL_GP_EM : FL_GP_GD;
        c.pr_lr_var = v == 1 ? 0.1 : 1.0;
        c.pr_var_floor = 1e-8;
        double *e = v == 0 ? &e_gd : v == 1 ? &e_slow : &e_em;
        double *st = v == 0 ? &st_gd : v == 1 ? &st_slow : &st_em;
        double *sx = v == 0 ? &sx_gd : v == 1 ? &sx_slow : &sx_em;
        rc = fl_state_init(&c, &f, &s, err);
        if (rc == DP_OK)
            rc = run_to_end(&c, &f, &s, theta, threads, e, err);
        if (rc == DP_OK)
            fl_gp_variances(&c, &s, st, sx);
        fl_state_free(&s);
    }
    if (rc == DP_OK)
        printf("| %zu | %zu | %.3f | %.3f | %.3f | %.3f (s_theta %.2g, s_x %.3g) | %.3f (s_theta "
               "%.2g, s_x %.3g) | %.3f | %.3f (s_theta %.4f, s_x %.4f) |\n",
               d, m, e_loc, e_pool, e_bayes, e_gd, st_gd, sx_gd, e_slow, st_slow, sx_slow, e_known,
               e_em, st_em, sx_em);
    dp_free(mu);
    fl_federation_free(&f);
    dp_free(theta);
    return rc;
}

/* RT7 at n rows per silo. */
static int rt7(size_t n, int threads, dp_err *err)
{
    fl_prior_synth sp = fl_prior_rt7_spec(1000, n, 2000 + n);
    fl_federation f;
    size_t m = sp.silos, d = sp.dim;
    double *theta = dp_calloc(m * d, sizeof(double));
    if (theta == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    int rc = fl_prior_synth_generate(&sp, &f, theta, err);
    if (rc != DP_OK) {
        dp_free(theta);
        return rc;
    }
    double e_loc = 0, e30 = 0, e100 = 0;
    rc = local_err(&f, theta, &e_loc, err);
    fl_job_cfg c = base_cfg("adamix", &f, 100);
    c.pr_components = 2;
    c.pr_steps = 20;
    c.pr_em_iters = 3;
    c.pr_noise_var = sp.noise_var;
    fl_state s = {0};
    if (rc == DP_OK)
        rc = fl_state_init(&c, &f, &s, err);
    if (rc == DP_OK) {
        fl_job_cfg c30 = c;
        c30.rounds = 30;
        rc = run_to_end(&c30, &f, &s, theta, threads, &e30, err);
    }
    if (rc == DP_OK)
        rc = run_to_end(&c, &f, &s, theta, threads, &e100, err);
    double w[2], var[2], mu[2 * 51];
    if (rc == DP_OK && fl_adamix_mixture(&c, &s, w, var, mu) == DP_OK)
        printf("| %zu | %.2f | %.4f | %.4f | %.2f / %.2f | %.2g / %.2g | %.3f / %.3f |\n", n, e_loc,
               e30, e100, w[0], w[1], var[0], var[1], mu[0], mu[51]);
    fl_state_free(&s);
    fl_federation_free(&f);
    dp_free(theta);
    return rc;
}

int part_adamix(int silos, int rounds, int threads)
{
    double t0 = repro_cpu_s();
    dp_err err = {0};
    int rc = DP_OK;
    printf(
        "RT8, Gaussian-prior linear regression (App. K): parameter error (1/m) sum ||theta_hat - "
        "theta||^2 after %d rounds\n",
        rounds);
    printf(
        "| d | m | local min-norm | pooled LS | Bayes, true prior | gd (Alg. 4), lr_var 1 | gd, "
        "lr_var "
        "0.1 | gd, variances known | em |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- "
        "|\n");
    for (size_t d = 50; rc == DP_OK && d <= 100; d += 50)
        rc = rt8((size_t)silos, d, (uint64_t)rounds, threads, &err);
    if (rc == DP_OK) {
        printf(
            "\nRT7, AdaMix (Table 3): parameter error, 1000 silos, d = 50; adamix k = 2, 20 steps "
            "a round, 3 EM iterations a round\n");
        printf(
            "| n | local min-norm | adamix, 30 rounds | adamix, 100 rounds | weights | variances "
            "| first coordinate of the means |\n| --- | --- | --- | --- | --- | --- | --- |\n");
    }
    double t1 = repro_cpu_s();
    for (size_t n = 10; rc == DP_OK && n <= 30; n += 10)
        rc = rt7(n, threads, &err);
    if (rc == DP_OK)
        printf("\nCPU time: RT8 %.1f s, RT7 %.1f s\n", t1 - t0, repro_cpu_s() - t1);
    if (rc != DP_OK)
        fprintf(stderr, "adamix: %s\n", err.msg);
    return rc;
}
