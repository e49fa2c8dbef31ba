/*
 * bench_nm: timings of the normal-means estimator (issue #15; not part of `make test`).
 *
 *   npmle, 10^6 observations, a 20-atom grid: the whole fit (mixsqp on rows regenerated every
 *     pass, as eb_nm does for evenly spaced atoms, + log-likelihood; the first of the runs also
 *     reported: the first fit of a process pays first touches) and the mixsqp solve alone on the
 *     same matrix built and stored (the stored-matrix path, as for uneven grids);
 *   normal_scale_mixture, 10^6 observations, ashr's default grid: the whole fit;
 *   the posterior pass (mean, sd, second moment, lfsr) of the npmle fit.
 * Data: theta_j from a three-point prior {-2 (0.2), 0 (0.6), 3 (0.2)} plus N(0, 0.3^2), s_j uniform
 * on [0.5, 1.5], x_j ~ N(theta_j, s_j^2), from dp_rng stream DP_RNG_STREAM_DATA of seed 15.
 *
 * Usage: bench_nm [--n N] [--reps R] [--dump DIR]
 *   --dump DIR writes DIR/nm.csv (x, s) and DIR/L.csv (the scaled 20-column likelihood matrix) and
 *   DIR/ours.txt (our log-likelihood and weights) for bench/normal_means/compare.R. Timings are the
 *   median of --reps runs (default 5): CPU time of this process (clock_gettime
 *   CLOCK_PROCESS_CPUTIME_ID) and wall clock.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_math.h>
#include <gsl/gsl_randist.h>

#include "common/dp_alloc.h"
#include "common/dp_rng.h"
#include "estimators/eb_mixsqp.h"
#include "estimators/eb_nm.h"

#define MAX_REP 51
#define K_GRID  20

static double cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static double wall_ms(void)
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
    fprintf(stderr, "bench_nm: %s (%s)\n", e->msg, e->field);
    exit(1);
}

int main(int argc, char **argv)
{
    size_t n = 1000000;
    int reps = 5;
    const char *dump = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--n") == 0 && i + 1 < argc)
            n = (size_t)strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--dump") == 0 && i + 1 < argc)
            dump = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--n N] [--reps R] [--dump DIR]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1 || reps > MAX_REP || n < 2) {
        fprintf(stderr, "bench_nm: --reps in 1..%d, --n >= 2\n", MAX_REP);
        return 2;
    }
    gsl_set_error_handler_off();
    dp_err e;
    dp_err_clear(&e);
    double *x = dp_calloc(n, sizeof *x), *s = dp_calloc(n, sizeof *s);
    gsl_rng *r = dp_rng_alloc(15, DP_RNG_STREAM_DATA, &e);
    if (!x || !s || !r)
        die(&e);
    for (size_t j = 0; j < n; j++) {
        double u = gsl_rng_uniform(r);
        double th = (u < 0.2 ? -2.0 : (u < 0.8 ? 0.0 : 3.0)) + 0.3 * gsl_ran_ugaussian(r);
        s[j] = 0.5 + gsl_rng_uniform(r);
        x[j] = th + s[j] * gsl_ran_ugaussian(r);
    }
    gsl_rng_free(r);
    eb_nm_data d = {n, x, s};
    double tc[MAX_REP], tw[MAX_REP];
    eb_nm_fit fit;

    /* npmle, 20 atoms, whole fit */
    eb_nm_opts o = eb_nm_opts_default(EB_NM_NPMLE);
    o.grid_size = K_GRID;
    for (int rep = 0; rep < reps; rep++) {
        double c0 = cpu_ms(), w0 = wall_ms();
        if (eb_nm_fit_prior(&d, &o, &fit, &e) != DP_OK)
            die(&e);
        tc[rep] = cpu_ms() - c0;
        tw[rep] = wall_ms() - w0;
        if (rep + 1 < reps)
            eb_nm_fit_free(&fit);
    }
    double first = tc[0];
    printf("npmle n=%zu k=%d whole fit: cpu %.1f ms, wall %.1f ms (median of %d; first run cpu "
           "%.1f ms); loglik %.10g, %u mixsqp iterations, status %s\n",
           n, K_GRID, median(tc, reps), median(tw, reps), reps, first, fit.loglik, fit.iterations,
           eb_status_name(fit.status));

    /* the same problem's matrix, mixsqp alone */
    double *L = dp_calloc(n * K_GRID, sizeof *L), *rowmax = dp_calloc(n, sizeof *rowmax);
    if (!L || !rowmax) {
        fprintf(stderr, "bench_nm: out of memory\n");
        return 1;
    }
    for (size_t j = 0; j < n; j++) {
        double mx = -HUGE_VAL;
        for (size_t c = 0; c < K_GRID; c++) {
            double z = x[j] - fit.mean[c], v = s[j] * s[j];
            L[j * K_GRID + c] = -0.5 * (log(2 * M_PI * v) + z * z / v);
            mx = fmax(mx, L[j * K_GRID + c]);
        }
        rowmax[j] = mx;
        for (size_t c = 0; c < K_GRID; c++)
            L[j * K_GRID + c] = exp(L[j * K_GRID + c] - mx);
    }
    double pi[K_GRID];
    eb_mixsqp_info info;
    eb_mixsqp_opts mo = eb_mixsqp_opts_default();
    for (int rep = 0; rep < reps; rep++) {
        double c0 = cpu_ms(), w0 = wall_ms();
        if (eb_mixsqp_solve(n, K_GRID, L, &mo, pi, &info, &e) != DP_OK)
            die(&e);
        tc[rep] = cpu_ms() - c0;
        tw[rep] = wall_ms() - w0;
    }
    double ll_solve = eb_mixsqp_loglik(n, K_GRID, L, rowmax, pi);
    printf("mixsqp alone n=%zu k=%d: cpu %.1f ms, wall %.1f ms (median of %d); %u iterations, %u "
           "active-set iterations, loglik %.10g, status %s\n",
           n, K_GRID, median(tc, reps), median(tw, reps), reps, info.iterations,
           info.active_iterations, ll_solve, eb_status_name(info.status));

    /* posterior pass */
    double *pm = dp_calloc(n, sizeof *pm), *psd = dp_calloc(n, sizeof *psd),
           *p2 = dp_calloc(n, sizeof *p2), *lf = dp_calloc(n, sizeof *lf);
    if (!pm || !psd || !p2 || !lf) {
        fprintf(stderr, "bench_nm: out of memory\n");
        return 1;
    }
    eb_nm_post post = {pm, psd, p2, lf, 0, NULL, 1, NULL};
    for (int rep = 0; rep < reps; rep++) {
        double c0 = cpu_ms(), w0 = wall_ms();
        if (eb_nm_posterior(&d, &fit, &post, &e) != DP_OK)
            die(&e);
        tc[rep] = cpu_ms() - c0;
        tw[rep] = wall_ms() - w0;
    }
    printf("posterior pass n=%zu k=%d: cpu %.1f ms, wall %.1f ms (median of %d)\n", n, K_GRID,
           median(tc, reps), median(tw, reps), reps);

    if (dump != NULL) {
        char path[512];
        snprintf(path, sizeof path, "%s/nm.csv", dump);
        FILE *f = fopen(path, "w");
        snprintf(path, sizeof path, "%s/ours.txt", dump);
        FILE *g = fopen(path, "w");
        if (f == NULL || g == NULL) {
            fprintf(stderr, "bench_nm: cannot write to %s\n", dump);
            return 1;
        }
        fprintf(f, "x,s\n");
        for (size_t j = 0; j < n; j++)
            fprintf(f, "%.17g,%.17g\n", x[j], s[j]);
        fclose(f);
        fprintf(g, "loglik %.17g\n", ll_solve);
        for (size_t c = 0; c < K_GRID; c++)
            fprintf(g, "atom%zu %.17g\nweight%zu %.17g\n", c, fit.mean[c], c, pi[c]);
        fclose(g);
    }
    eb_nm_fit_free(&fit);

    /* scale mixture, ashr's default grid */
    eb_nm_opts os = eb_nm_opts_default(EB_NM_SCALE_MIXTURE);
    for (int rep = 0; rep < reps; rep++) {
        double c0 = cpu_ms(), w0 = wall_ms();
        if (eb_nm_fit_prior(&d, &os, &fit, &e) != DP_OK)
            die(&e);
        tc[rep] = cpu_ms() - c0;
        tw[rep] = wall_ms() - w0;
        if (rep + 1 < reps)
            eb_nm_fit_free(&fit);
    }
    printf("normal_scale_mixture n=%zu k=%zu whole fit: cpu %.1f ms, wall %.1f ms (median of %d); "
           "loglik %.10g, %u mixsqp iterations, status %s\n",
           n, fit.k, median(tc, reps), median(tw, reps), reps, fit.loglik, fit.iterations,
           eb_status_name(fit.status));
    eb_nm_fit_free(&fit);
    dp_free(L);
    dp_free(rowmax);
    dp_free(pm);
    dp_free(psd);
    dp_free(p2);
    dp_free(lf);
    dp_free(x);
    dp_free(s);
    return 0;
}
