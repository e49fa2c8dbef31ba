/*
 * eb_central: mean squared error of the personalized Gaussian estimates under four models as the
 * number of clients m grows (issue #15; not part of `make test`; docs/ESTIMATORS.md "Central DP"
 * shows its table):
 *   no pooling     each client's own mean x_i (MSE s^2 = sigma_x^2 / n)
 *   EB             non-private empirical Bayes (maximum likelihood prior, Thm 1 posterior)
 *   local DP       each client's mean clipped and noised at (eps, delta) (Ozkara et al. 2023,
 *                  Thm 2; the service's local model: Gaussian channel, classic calibration, prior
 *                  projected onto the public bounds)
 *   central DP     clipped sums noised once by the service at (eps, delta) (eb_gaussian.h, the
 *                  noise multiplier calibrated by the accounting library's zCDP accountant)
 * Population: theta_i ~ N(0.3, 0.15^2), n_i = 22, sigma_x^2 = 0.25 (s^2 = 0.01136), public bounds
 * r = 1 and sigma_theta_bound = 0.5, delta = 1e-5. MSE over clients and repetitions (3*10^5 /
 * m of them, between 5 and 400, each with fresh data and noise from seeded streams), as a fraction
 * of s^2. Then, per model and eps, the smallest m of the grid at which pooling cuts the MSE by 5 %
 * or more (the EB_NO_POOLING_GAIN threshold).
 *
 * Then the same four models for the Beta-Bernoulli estimator (a second table, its rows marked
 * "beta" so that the Gaussian table above reads as before): p_i ~ Beta(2, 5), Z_i ~ Bin(14, p_i)
 * (the RT6 population of docs/REPRODUCTION.md); no pooling = Z_i/n; EB = beta-binomial maximum
 * likelihood; local DP = the two-bit randomized-response scheme at eps0 = eps (pure eps-LDP per
 * client, the service's default); central DP = eb_beta_central_fit with the noise multiplier of
 * the Gaussian table (the same release calibration at (eps, delta)). MSE as a fraction of no
 * pooling's expected MSE E p(1-p)/n = 0.012755 (EB's known-prior limit n/(S+n) = 0.667).
 *
 * Usage: eb_central [--seed S] [--reps N] [--csv]. Deterministic for a given seed.
 *   --reps N   at least N repetitions per (m, eps), N >= 2 (default 5, the floor above); more
 *              makes the large-m points precise (N = 200: about 11 s of CPU for the
 *              Gaussian table)
 *   --csv      instead of the tables, one CSV row per (estimator, model, eps, m) with the MSE / s^2
 *              and its standard error (the sd of the per-repetition MSEs over sqrt(reps));
 *              scripts/svgplot.py draws docs/img/eb-central-mse.svg from it (`make figures`)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_randist.h>

#include "accounting/calibrate.h"
#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "common/dp_rng.h"
#include "estimators/eb_beta.h"
#include "estimators/eb_gaussian.h"

#define MU      0.3
#define TAU     0.15
#define NOBS    22.0
#define SX2     0.25
#define R_PUB   1.0
#define STB     0.5
#define DELTA   1e-5
#define N_M     8
#define N_EPS   3
#define N_MODEL 4

static const size_t MS[N_M] = {30, 100, 300, 1000, 3000, 10000, 30000, 100000};
static const double EPS[N_EPS] = {0.5, 1.0, 2.0};
static const char *const NAMES[N_MODEL] = {"no pooling", "EB", "local DP", "central DP"};
static const char *const KEYS[N_MODEL] = {"no_pooling", "eb", "local_dp", "central_dp"};

static int fail(const dp_err *e)
{
    fprintf(stderr, "eb_central: %s (%s)\n", e->msg, e->field);
    return 1;
}

/* Adds one repetition's sum of squared errors e over m clients to model q's sums. */
static void add(double *acc, double *acc2, size_t q, double e, size_t m)
{
    acc[q] += e;
    acc2[q] += (e / (double)m) * (e / (double)m);
}

/* Sum of squared errors of post against theta over m clients. */
static double sse(const double *post, const double *th, size_t m)
{
    double s = 0.0;
    for (size_t i = 0; i < m; i++)
        s += (post[i] - th[i]) * (post[i] - th[i]);
    return s;
}

#define B_ALPHA  2.0
#define B_BETA   5.0
#define B_TRIALS 14.0

/* The Beta-Bernoulli table (see the top). z: the central noise multiplier per eps; th, zs, n, post:
 * scratch of MS[N_M - 1] entries each. */
static int beta_table(uint64_t seed, const double *z, double *th, double *zs, double *n,
                      double *post)
{
    dp_err e;
    dp_err_clear(&e);
    double s = B_ALPHA + B_BETA;
    double base = B_ALPHA * B_BETA / (B_TRIALS * s * (s + 1.0)); /* E p(1-p)/n */
    double mse[N_M][N_EPS][N_MODEL];
    printf("\nBeta-Bernoulli: MSE / E p(1-p)/n (= %.6f); p ~ Beta(%.0f, %.0f), n = %.0f, "
           "delta = %g; local DP = two-bit randomized response at eps0 = eps\n",
           base, B_ALPHA, B_BETA, B_TRIALS, DELTA);
    printf("| model | m | eps | reps | no pooling | EB | local DP | central DP |\n");
    printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (size_t a = 0; a < N_M; a++) {
        size_t m = MS[a];
        size_t reps = (size_t)(3e5 / (double)m);
        reps = reps < 5 ? 5 : reps > 400 ? 400 : reps;
        for (size_t k = 0; k < N_EPS; k++) {
            double acc[N_MODEL] = {0};
            for (size_t t = 0; t < reps; t++) {
                uint64_t sd =
                    dp_rng_derive(seed ^ 0xbe7aULL, (uint64_t)(a * 1000003 + k * 1009 + t));
                gsl_rng *rng = dp_rng_alloc(sd, DP_RNG_STREAM_DATA, &e);
                if (rng == NULL)
                    return fail(&e);
                for (size_t i = 0; i < m; i++) {
                    th[i] = gsl_ran_beta(rng, B_ALPHA, B_BETA);
                    n[i] = B_TRIALS;
                    zs[i] = (double)gsl_ran_binomial(rng, th[i], (unsigned)B_TRIALS);
                    post[i] = zs[i] / B_TRIALS;
                }
                gsl_rng_free(rng);
                acc[0] += sse(post, th, m);
                eb_beta_data b = {m, zs, n};
                eb_beta_prior p;
                eb_status st;
                if (eb_beta_fit_mle(&b, 1000, &p, &e) != DP_OK ||
                    eb_beta_posterior_prior(&b, &p, post, NULL, NULL, &e) != DP_OK)
                    return fail(&e);
                acc[1] += sse(post, th, m);
                if (eb_beta_private(&b, EB_BETA_PRIV_TWO_BIT, EB_BETA_PAPER, EPS[k], true, sd, post,
                                    NULL, NULL, NULL, NULL, NULL, &st, &e) != DP_OK)
                    return fail(&e);
                acc[2] += sse(post, th, m);
                eb_beta_central_opts co = {z[k], sd};
                eb_beta_central_info ci;
                if (eb_beta_central_fit(&b, &co, post, NULL, NULL, &p, NULL, &ci, &st, &e) != DP_OK)
                    return fail(&e);
                acc[3] += sse(post, th, m);
            }
            for (size_t q = 0; q < N_MODEL; q++)
                mse[a][k][q] = acc[q] / ((double)m * (double)reps) / base;
            printf("| beta | %zu | %.1f | %zu | %.3f | %.3f | %.3f | %.3f |\n", m, EPS[k], reps,
                   mse[a][k][0], mse[a][k][1], mse[a][k][2], mse[a][k][3]);
            fflush(stdout);
        }
    }
    printf("\nbeta: smallest m of the grid with MSE <= 0.95 of no pooling's:\n");
    for (size_t q = 1; q < N_MODEL; q++)
        for (size_t k = 0; k < N_EPS; k++) {
            size_t at = 0;
            for (size_t a = 0; a < N_M && at == 0; a++)
                if (mse[a][k][q] <= 0.95)
                    at = MS[a];
            if (q == 1 && k > 0)
                break;
            if (at)
                printf("  beta %-10s eps %.1f: m = %zu\n", NAMES[q], EPS[k], at);
            else
                printf("  beta %-10s eps %.1f: not within m <= %zu\n", NAMES[q], EPS[k],
                       MS[N_M - 1]);
        }
    return 0;
}

int main(int argc, char **argv)
{
    gsl_set_error_handler_off();
    uint64_t seed = 15;
    size_t min_reps = 5;
    int csv = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            long v = strtol(argv[++i], NULL, 10);
            if (v < 2 || v > 100000) {
                fprintf(stderr, "eb_central: --reps must be 2..100000\n");
                return 2;
            }
            min_reps = (size_t)v;
        } else if (strcmp(argv[i], "--csv") == 0)
            csv = 1;
        else {
            fprintf(stderr, "usage: eb_central [--seed S] [--reps N] [--csv]\n");
            return 2;
        }
    }
    dp_err e;
    dp_err_clear(&e);
    double z[N_EPS];
    for (size_t k = 0; k < N_EPS; k++) { /* central: z for (eps, delta), as the service does */
        acct_event *open = acct_event_gaussian(DP_NAN);
        acct_calib_zcdp_ctx zc = {DELTA, ACCT_ZCDP_CKS2020};
        acct_calib_result cr;
        int rc = acct_calibrate(open, EPS[k], acct_calib_zcdp_eps, &zc, &cr, &e);
        acct_event_free(open);
        if (rc != DP_OK)
            return fail(&e);
        z[k] = cr.value;
    }
    size_t mmax = MS[N_M - 1];
    double *th = dp_calloc(mmax, sizeof *th), *x = dp_calloc(mmax, sizeof *x);
    double *n = dp_calloc(mmax, sizeof *n), *msgs = dp_calloc(mmax, sizeof *msgs);
    double *post = dp_calloc(mmax, sizeof *post);
    if (!th || !x || !n || !msgs || !post)
        return 1;
    for (size_t i = 0; i < mmax; i++)
        n[i] = NOBS;
    double s2 = SX2 / NOBS;
    double mse[N_M][N_EPS][N_MODEL];
    if (csv)
        printf("estimator,model,eps,m,reps,mse,se\n");
    else {
        printf("MSE / s^2 (s^2 = %.5f); theta ~ N(%.2f, %.2f^2), n = %.0f, sigma_x^2 = %.2f, "
               "r = %.0f, sigma_theta_bound = %.1f, delta = %g\n",
               s2, MU, TAU, NOBS, SX2, R_PUB, STB, DELTA);
        printf("| m | eps | reps | no pooling | EB | local DP | central DP |\n");
        printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    }
    for (size_t a = 0; a < N_M; a++) {
        size_t m = MS[a];
        size_t reps = (size_t)(3e5 / (double)m);
        reps = reps > 400 ? 400 : reps;
        reps = reps < min_reps ? min_reps : reps;
        for (size_t k = 0; k < N_EPS; k++) {
            double acc[N_MODEL] = {0}, acc2[N_MODEL] = {0}; /* sums of SSE and of (SSE/m)^2 */
            for (size_t t = 0; t < reps; t++) {
                uint64_t s = dp_rng_derive(seed, (uint64_t)(a * 1000003 + k * 1009 + t));
                gsl_rng *rng = dp_rng_alloc(s, DP_RNG_STREAM_DATA, &e);
                if (rng == NULL)
                    return fail(&e);
                for (size_t i = 0; i < m; i++) {
                    th[i] = MU + gsl_ran_gaussian_ziggurat(rng, TAU);
                    x[i] = th[i] + gsl_ran_gaussian_ziggurat(rng, sqrt(s2));
                }
                gsl_rng_free(rng);
                eb_gauss_data g = {m, 1, x, n, SX2};
                eb_gauss_coord c;
                add(acc, acc2, 0, sse(x, th, m), m);
                /* non-private EB */
                if (eb_gauss_fit(&g, NULL, 0.0, EB_GAUSS_MLE, 1000, &c, &e) != DP_OK ||
                    eb_gauss_posterior(&g, &c, 0.0, post, NULL, NULL, &e) != DP_OK)
                    return fail(&e);
                add(acc, acc2, 1, sse(post, th, m), m);
                /* local DP: the service's local model */
                eb_gauss_private_opts po = {.channel = EB_CHANNEL_GAUSSIAN,
                                            .eps0 = EPS[k],
                                            .delta = DELTA,
                                            .cal = EB_CAL_CLASSIC,
                                            .r = R_PUB,
                                            .sigma_theta = STB,
                                            .b = DP_NAN,
                                            .range_mode = EB_RANGE_PAPER,
                                            .seed = s};
                eb_gauss_private_info pi;
                if (eb_gauss_privatize(&g, &po, msgs, &pi, &e) != DP_OK)
                    return fail(&e);
                eb_gauss_data sent = g;
                sent.x = msgs;
                double extra = pi.sigma_q * pi.sigma_q;
                if (eb_gauss_fit(&sent, NULL, extra, EB_GAUSS_MLE, 1000, &c, &e) != DP_OK)
                    return fail(&e);
                eb_gauss_project(&sent, extra, R_PUB, STB * STB, &c, NULL, NULL);
                double w; /* d = 1: Thm 2's weight and tau2-hat's noise, as the service */
                eb_gauss_ldp_weights(&sent, &c, extra, STB * STB, true, &w);
                if (eb_gauss_posterior(&g, &c, w, post, NULL, NULL, &e) != DP_OK)
                    return fail(&e);
                add(acc, acc2, 2, sse(post, th, m), m);
                /* central DP */
                double b;
                if (eb_range_b(R_PUB, STB, SX2, NOBS, m, EB_RANGE_PAPER, &b, &e) != DP_OK)
                    return fail(&e);
                eb_gauss_central_opts co = {b, z[k], R_PUB, STB * STB, s};
                eb_gauss_central_info ci;
                if (eb_gauss_central_fit(&g, NULL, &co, &c, &ci, &e) != DP_OK ||
                    eb_gauss_posterior(&g, &c, ci.weight_extra, post, NULL, NULL, &e) != DP_OK)
                    return fail(&e);
                add(acc, acc2, 3, sse(post, th, m), m);
            }
            for (size_t q = 0; q < N_MODEL; q++)
                mse[a][k][q] = acc[q] / ((double)m * (double)reps) / s2;
            if (csv) {
                for (size_t q = 0; q < N_MODEL; q++) {
                    double mean = acc[q] / ((double)m * (double)reps);
                    double var = (acc2[q] - (double)reps * mean * mean) / ((double)reps - 1.0);
                    double se = sqrt(var > 0.0 ? var / (double)reps : 0.0) / s2;
                    printf("gaussian,%s,%.1f,%zu,%zu,%.6f,%.6f\n", KEYS[q], EPS[k], m, reps,
                           mse[a][k][q], se);
                }
                fflush(stdout);
                continue;
            }
            printf("| %zu | %.1f | %zu | %.3f | %.3f | %.3f | %.3f |\n", m, EPS[k], reps,
                   mse[a][k][0], mse[a][k][1], mse[a][k][2], mse[a][k][3]);
            fflush(stdout);
        }
    }
    int rc = DP_OK;
    if (csv)
        goto done; /* the CSV holds the Gaussian rows only (the figure) */
    printf("\nsmallest m of the grid with MSE <= 0.95 s^2 (pooling pays 5 %% or more):\n");
    for (size_t q = 1; q < N_MODEL; q++)
        for (size_t k = 0; k < N_EPS; k++) {
            size_t at = 0;
            for (size_t a = 0; a < N_M && at == 0; a++)
                if (mse[a][k][q] <= 0.95)
                    at = MS[a];
            if (q == 1 && k > 0)
                break; /* EB does not depend on eps */
            if (at)
                printf("  %-10s eps %.1f: m = %zu\n", NAMES[q], EPS[k], at);
            else
                printf("  %-10s eps %.1f: not within m <= %zu\n", NAMES[q], EPS[k], mmax);
        }
    rc = beta_table(seed, z, th, x, n, post);
done:
    dp_free(th);
    dp_free(x);
    dp_free(n);
    dp_free(msgs);
    dp_free(post);
    return rc;
}
