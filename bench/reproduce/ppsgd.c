/*
 * ppsgd.c: the "ppsgd" part of build/bench/reproduce: Bietti, Wei, Dudik, Langford & Wu,
 * "Personalization Improves Privacy-Accuracy Tradeoffs in Federated Learning", ICML 2022, §6.1,
 * Fig. 1a (synthetic personalised regression), run through the library's ppsgd algorithm
 * (federated/fl_algo_ppsgd.c) on the online generator of federated/fl_additive.h.
 *
 * Setting (the paper's, with its experiments' defaults): N = 1000 users, d = 100 (5 personal
 * coordinates, s = 0.1), 10 fresh samples per user per round, label noise 0.01, every user every
 * round (Q = N, q = 1), clip C = 10, T = 1000 rounds; noise multipliers sigma in {0, 10} (and
 * {1, 100} for the global and local ends, the paper's privacy floor); ratios r = alpha Q in
 * {0, 0.3, 1, 3, inf}; for each curve the step size is the pointwise best of a grid at every
 * reported round, as the paper's figures take it. Excess risk: fl_additive_excess_risk (the
 * paper's sum form, plus the intercept's b^2 that our linear model has).
 *
 * Environment (read by reproduce.c's main): REPRO_PPSGD_USERS (N, default 1000),
 * REPRO_PPSGD_ROUNDS (T, default 1000).
 * Prints one table per sigma (rows r, columns t) and the epsilon of each sigma after T rounds.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/dp_err.h"
#include "common/dp_math.h"
#include "federated/fl_additive.h"
#include "federated/fl_algo.h"

int part_ppsgd(int threads, int users, int rounds);

#define N_CHECK 8
static const uint64_t CHECK[N_CHECK] = {1, 10, 50, 100, 200, 300, 500, 1000};
static const double ETAS[] = {0.1, 0.2, 0.4, 0.7, 1.2};
#define N_ETAS (sizeof ETAS / sizeof ETAS[0])

/* One run: the excess risk after each round of CHECK (rounds <= T; NAN beyond T). */
static int run_one(const fl_additive *a, fl_federation *f, double ratio, double sigma, double eta,
                   uint64_t rounds, int threads, double *risk)
{
    fl_job_cfg c;
    fl_job_cfg_default(&c);
    c.algorithm = "ppsgd";
    c.model = (fl_model_spec){.type = FL_MODEL_LINEAR, .d_in = a->spec.dim};
    c.rounds = rounds;
    c.batch_size = a->spec.rows; /* every fresh sample of the round */
    c.lr = eta;
    c.seed = 7;
    c.ppsgd_ratio = ratio;
    c.client_rate = 1.0;
    c.update_clip = 10.0;
    c.server_noise = sigma;
    fl_state st;
    memset(&st, 0, sizeof st);
    dp_err e;
    dp_err_clear(&e);
    int rc = fl_state_init(&c, f, &st, &e);
    size_t next = 0;
    for (size_t i = 0; i < N_CHECK; i++)
        risk[i] = DP_NAN;
    for (uint64_t t = 0; rc == DP_OK && t < rounds; t++) {
        if ((rc = fl_additive_draw(a, t, f, &e)) != DP_OK ||
            (rc = fl_round_run(&c, f, &st, NULL, threads, NULL, &e)) != DP_OK)
            break;
        if (next < N_CHECK && t + 1 == CHECK[next]) {
            double r = fl_additive_excess_risk(a, st.personal);
            risk[next++] = isfinite(r) ? r : DP_INF; /* a diverged step size is never the best */
        }
    }
    if (rc != DP_OK)
        fprintf(stderr, "reproduce: ppsgd: %s (%s)\n", e.msg, e.field);
    fl_state_free(&st);
    return rc;
}

/* The pointwise best over the step-size grid. */
static int best_curve(const fl_additive *a, fl_federation *f, double ratio, double sigma,
                      uint64_t rounds, int threads, double *best)
{
    double risk[N_CHECK];
    for (size_t i = 0; i < N_CHECK; i++)
        best[i] = DP_INF;
    for (size_t k = 0; k < N_ETAS; k++) {
        int rc = run_one(a, f, ratio, sigma, ETAS[k], rounds, threads, risk);
        if (rc != DP_OK)
            return rc;
        for (size_t i = 0; i < N_CHECK; i++)
            if (risk[i] < best[i])
                best[i] = risk[i];
    }
    return DP_OK;
}

static double epsilon_of(double sigma, uint64_t rounds)
{
    if (sigma == 0)
        return DP_INF;
    fl_job_cfg c;
    fl_job_cfg_default(&c);
    c.algorithm = "ppsgd";
    c.model = (fl_model_spec){.type = FL_MODEL_LINEAR, .d_in = 1};
    c.rounds = rounds;
    c.batch_size = 1;
    c.lr = 0.1;
    c.client_rate = 1.0;
    c.update_clip = 10.0;
    c.server_noise = sigma;
    fl_silo_plan p;
    acct_event *ev = NULL;
    fl_accountant acct = {.delta = 1e-4, .conv = ACCT_CONV_BALLE2020};
    double eps = DP_NAN;
    dp_err e;
    dp_err_clear(&e);
    if (fl_plan_silo(&c, 0, 1, &p, &ev, &e) == DP_OK && ev != NULL)
        (void)fl_plan_epsilon(ev, rounds, &acct, &eps, &e);
    acct_event_free(ev);
    return eps;
}

int part_ppsgd(int threads, int users, int rounds_arg)
{
    uint64_t rounds = (uint64_t)rounds_arg;
    fl_additive_spec spec = fl_additive_paper_spec();
    spec.users = (size_t)users;
    fl_additive a;
    fl_federation f;
    dp_err e;
    dp_err_clear(&e);
    if (fl_additive_init(&spec, &a, &e) != DP_OK) {
        fprintf(stderr, "reproduce: ppsgd: %s (%s)\n", e.msg, e.field);
        return e.code;
    }
    if (fl_additive_federation(&a, &f, &e) != DP_OK) {
        fl_additive_free(&a);
        fprintf(stderr, "reproduce: ppsgd: %s\n", e.msg);
        return e.code;
    }
    float *zero = calloc(spec.users * (spec.dim + 1), sizeof(float));
    printf("== ppsgd: Bietti et al. 2022, Fig. 1a (N = %zu, d = %zu, s = %g, T = %llu, C = 10; "
           "step size the pointwise best of",
           spec.users, spec.dim, spec.s, (unsigned long long)rounds);
    for (size_t k = 0; k < N_ETAS; k++)
        printf(" %g", ETAS[k]);
    printf(")\ninitial excess risk %.4g\n", zero ? fl_additive_excess_risk(&a, zero) : DP_NAN);
    free(zero);
    static const double sigmas[] = {0, 10, 1, 100};
    static const double ratios[] = {0, 0.3, 1, 3, DP_INF};
    int rc = DP_OK;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t si = 0; si < 4 && rc == DP_OK; si++) {
        double sigma = sigmas[si];
        printf("\nsigma = %g (epsilon after %llu rounds at delta 1e-4: %.4g)\n", sigma,
               (unsigned long long)rounds, epsilon_of(sigma, rounds));
        printf("%-8s", "r \\ t");
        for (size_t i = 0; i < N_CHECK && CHECK[i] <= rounds; i++)
            printf(" %10llu", (unsigned long long)CHECK[i]);
        printf("\n");
        for (size_t ri = 0; ri < 5 && rc == DP_OK; ri++) {
            double r = ratios[ri];
            if (si >= 2 && r != 0 && !isinf(r))
                continue; /* sigma 1 and 100: the two ends only (the privacy floor) */
            double best[N_CHECK];
            rc = best_curve(&a, &f, r, sigma, rounds, threads, best);
            if (rc != DP_OK)
                break;
            printf("%-8g", r); /* inf prints as "inf" */
            for (size_t i = 0; i < N_CHECK && CHECK[i] <= rounds; i++)
                printf(" %10.4g", best[i]);
            printf("\n");
            fflush(stdout);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("\n(ppsgd part: %.1f s)\n",
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    fl_federation_free(&f);
    fl_additive_free(&a);
    return rc;
}
