/*
 * bench_estimators: timings of the empirical-Bayes estimators (issue #6; not part of `make test`).
 *
 *   Gaussian EB, unknown prior, 10^6 clients (heteroscedastic n: ML by Brent on the profile score;
 *     equal n: closed form), plus the moment estimator and the posterior pass.
 *   Beta EB, 10^6 clients: beta-binomial ML (Newton over distinct (n, Z) pairs) + posterior, and
 *     the paper's leave-one-out moment estimator.
 *   3-component mixture EM, 10^5 clients, d = 1, equal n (the homoscedastic data run.sh also
 *     gives to R's mclust, model "V").
 *
 * Usage: bench_estimators [--dump DIR] [--reps N]
 *   --dump DIR writes DIR/gauss.csv (x, n; first 10^5 clients), DIR/beta.csv (z, n; first 10^5),
 *   DIR/mixture.csv (x) and DIR/ours.txt (our estimates on exactly those files) for
 *   bench/estimators/compare.R. Timings are the median of --reps runs (default 5), wall clock.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_randist.h>

#include "common/dp_alloc.h"
#include "estimators/eb_beta.h"
#include "estimators/eb_gaussian.h"
#include "estimators/eb_mixture.h"

#define M_BIG   1000000
#define M_MIX   100000
#define M_DUMP  100000
#define MAX_REP 51

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

static void die(const dp_err *e)
{
    fprintf(stderr, "bench_estimators: %s (%s)\n", e->msg, e->field);
    exit(1);
}

/* dir/name opened for writing, or NULL. */
static FILE *open_dump(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return fopen(path, "w");
}

int main(int argc, char **argv)
{
    const char *dump = NULL;
    int reps = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dump") == 0 && i + 1 < argc)
            dump = argv[++i];
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--dump DIR] [--reps N]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1 || reps > MAX_REP)
        reps = 5;
    gsl_set_error_handler_off();
    dp_err e;
    dp_err_clear(&e);
    gsl_rng *r = dp_rng_alloc(2026, DP_RNG_STREAM_DATA, &e);
    double t[MAX_REP];

    /* ---- Gaussian ---- */
    double *x = dp_calloc(M_BIG, sizeof(double)), *n = dp_calloc(M_BIG, sizeof(double));
    double *n_eq = dp_calloc(M_BIG, sizeof(double));
    double *pm = dp_calloc(M_BIG, sizeof(double)), *pv = dp_calloc(M_BIG, sizeof(double)),
           *sh = dp_calloc(M_BIG, sizeof(double));
    for (size_t i = 0; i < M_BIG; i++) {
        n[i] = (double)(5 + gsl_rng_uniform_int(r, 46));
        n_eq[i] = 15;
        double th = 0.3 + gsl_ran_gaussian_ziggurat(r, 0.1);
        x[i] = th + gsl_ran_gaussian_ziggurat(r, sqrt(0.25 / n[i]));
    }
    eb_gauss_data g = {M_BIG, 1, x, n, 0.25};
    eb_gauss_coord c;
    for (int k = 0; k < reps; k++) {
        double t0 = now_ms();
        if (eb_gauss_fit(&g, NULL, 0.0, EB_GAUSS_MLE, 200, &c, &e) != DP_OK ||
            eb_gauss_posterior(&g, &c, 0.0, pm, pv, sh, &e) != DP_OK)
            die(&e);
        t[k] = now_ms() - t0;
    }
    printf("gaussian_mle_hetero  m=%d  %8.1f ms  (mu %.6f tau2 %.6f, %u Brent iterations, %s)\n",
           M_BIG, median(t, reps), c.mu, c.tau2, c.iterations, eb_status_name(c.status));
    for (int k = 0; k < reps; k++) {
        double t0 = now_ms();
        if (eb_gauss_fit(&g, NULL, 0.0, EB_GAUSS_MOMENTS, 200, &c, &e) != DP_OK ||
            eb_gauss_posterior(&g, &c, 0.0, pm, pv, sh, &e) != DP_OK)
            die(&e);
        t[k] = now_ms() - t0;
    }
    printf("gaussian_moments     m=%d  %8.1f ms  (mu %.6f tau2 %.6f)\n", M_BIG, median(t, reps),
           c.mu, c.tau2);
    eb_gauss_data geq = {M_BIG, 1, x, n_eq, 0.25};
    for (int k = 0; k < reps; k++) {
        double t0 = now_ms();
        if (eb_gauss_fit(&geq, NULL, 0.0, EB_GAUSS_MLE, 200, &c, &e) != DP_OK ||
            eb_gauss_posterior(&geq, &c, 0.0, pm, pv, sh, &e) != DP_OK)
            die(&e);
        t[k] = now_ms() - t0;
    }
    printf("gaussian_mle_equal_n m=%d  %8.1f ms  (closed form)\n", M_BIG, median(t, reps));

    /* ---- Beta ---- */
    double *z = dp_calloc(M_BIG, sizeof(double)), *bn = dp_calloc(M_BIG, sizeof(double));
    for (size_t i = 0; i < M_BIG; i++) {
        double p = gsl_ran_beta(r, 2, 5);
        bn[i] = (double)(10 + gsl_rng_uniform_int(r, 21));
        z[i] = (double)gsl_ran_binomial(r, p, (unsigned)bn[i]);
    }
    eb_beta_data b = {M_BIG, z, bn};
    eb_beta_prior bp;
    for (int k = 0; k < reps; k++) {
        double t0 = now_ms();
        if (eb_beta_fit_mle(&b, 200, &bp, &e) != DP_OK ||
            eb_beta_posterior_prior(&b, &bp, pm, pv, sh, &e) != DP_OK)
            die(&e);
        t[k] = now_ms() - t0;
    }
    printf(
        "beta_mle             m=%d  %8.1f ms  (alpha %.5f beta %.5f, %u Newton iterations, %s)\n",
        M_BIG, median(t, reps), bp.alpha, bp.beta, bp.iterations, eb_status_name(bp.status));
    eb_beta_counts cnt;
    eb_status st;
    for (int k = 0; k < reps; k++) {
        double t0 = now_ms();
        if (eb_beta_posterior_moments(&b, EB_BETA_PAPER, true, pm, pv, sh, &cnt, &st, &e) != DP_OK)
            die(&e);
        t[k] = now_ms() - t0;
    }
    printf("beta_moments_loo     m=%d  %8.1f ms\n", M_BIG, median(t, reps));

    /* ---- mixture ---- */
    double *mx = dp_calloc(M_MIX, sizeof(double)), *mn = dp_calloc(M_MIX, sizeof(double));
    const double w[] = {0.3, 0.5, 0.2}, mu[] = {-3, 0, 2.5}, sd[] = {0.5, 0.3, 0.7};
    for (size_t i = 0; i < M_MIX; i++) {
        double u = gsl_rng_uniform(r);
        int l = u < w[0] ? 0 : (u < w[0] + w[1] ? 1 : 2);
        mn[i] = 10;
        mx[i] =
            mu[l] + gsl_ran_gaussian_ziggurat(r, sd[l]) + gsl_ran_gaussian_ziggurat(r, sqrt(0.1));
    }
    eb_gauss_data gm = {M_MIX, 1, mx, mn, 1.0};
    double fw[3], fmu[3], fvar[3];
    eb_mix_prior mp = {3, 1, fw, fmu, fvar};
    eb_mix_fit_info info;
    unsigned inits[] = {1, 3};
    for (int v = 0; v < 2; v++) {
        eb_mix_opts o = eb_mix_opts_default(3);
        o.n_init = inits[v];
        o.tol = 1e-8;
        for (int k = 0; k < reps; k++) {
            double t0 = now_ms();
            if (eb_mix_fit(&gm, 0.0, &o, &mp, &info, &e) != DP_OK)
                die(&e);
            t[k] = now_ms() - t0;
        }
        printf("mixture_em_k3 n_init=%u m=%d %8.1f ms  (loglik %.4f, %u iterations, %s; "
               "w %.4f %.4f %.4f mu %.4f %.4f %.4f var+s2 %.4f %.4f %.4f)\n",
               inits[v], M_MIX, median(t, reps), info.loglik, info.iterations,
               eb_status_name(info.status), fw[0], fw[1], fw[2], fmu[0], fmu[1], fmu[2],
               fvar[0] + 0.1, fvar[1] + 0.1, fvar[2] + 0.1);
    }

    if (dump != NULL) {
        FILE *f = open_dump(dump, "gauss.csv");
        if (f == NULL)
            return 1;
        fprintf(f, "x,n\n");
        for (size_t i = 0; i < M_DUMP; i++)
            fprintf(f, "%.17g,%.0f\n", x[i], n[i]);
        fclose(f);
        f = open_dump(dump, "beta.csv");
        if (f == NULL)
            return 1;
        fprintf(f, "z,n\n");
        for (size_t i = 0; i < M_DUMP; i++)
            fprintf(f, "%.0f,%.0f\n", z[i], bn[i]);
        fclose(f);
        f = open_dump(dump, "mixture.csv");
        if (f == NULL)
            return 1;
        fprintf(f, "x\n");
        for (size_t i = 0; i < M_MIX; i++)
            fprintf(f, "%.17g\n", mx[i]);
        fclose(f);
        /* our estimates on exactly the dumped subsets */
        eb_gauss_data gs = {M_DUMP, 1, x, n, 0.25};
        eb_beta_data bs = {M_DUMP, z, bn};
        if (eb_gauss_fit(&gs, NULL, 0.0, EB_GAUSS_MLE, 200, &c, &e) != DP_OK ||
            eb_beta_fit_mle(&bs, 200, &bp, &e) != DP_OK)
            die(&e);
        f = open_dump(dump, "ours.txt");
        if (f == NULL)
            return 1;
        fprintf(f, "gauss_mu %.12g\ngauss_tau2 %.12g\ngauss_loglik %.12g\n", c.mu, c.tau2,
                c.loglik);
        fprintf(f, "beta_alpha %.12g\nbeta_beta %.12g\nbeta_loglik %.12g\n", bp.alpha, bp.beta,
                bp.loglik);
        eb_mix_opts o = eb_mix_opts_default(3);
        o.n_init = 3;
        o.tol = 1e-8;
        if (eb_mix_fit(&gm, 0.0, &o, &mp, &info, &e) != DP_OK)
            die(&e);
        fprintf(f, "mix_loglik %.12g\n", info.loglik);
        fclose(f);
    }
    gsl_rng_free(r);
    dp_free(x);
    dp_free(n);
    dp_free(n_eq);
    dp_free(pm);
    dp_free(pv);
    dp_free(sh);
    dp_free(z);
    dp_free(bn);
    dp_free(mx);
    dp_free(mn);
    return 0;
}
