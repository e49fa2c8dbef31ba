/*
 * bench/pld: wall time of one PLD epsilon, the reference event: self_composed(10^4,
 * poisson_sampled(q = 0.01, gaussian(sigma = 1.1))), delta = 1e-5, add_remove, value_discretization
 * 1e-4 and tail mass 1e-15 (dp_accounting's PLDAccountant defaults, so both sides answer at the
 * same tolerance). run.sh runs dp_accounting's PLD on the same event beside it.
 *
 * Usage: build/bench/pld [repetitions] [value_discretization]
 * Prints one line per mode: "cold" (a fresh workspace per call, i.e. acct_pld_epsilon: what one
 * HTTP request pays) and "warm" (one reused acct_pld_ws: FFT tables and buffers kept, as in
 * sweeps), each with the median and minimum in ms, and the epsilon bracket.
 */
#include <gsl/gsl_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accounting/pld.h"

#define BENCH_MAX_REPS 1000

static double clock_ms(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    gsl_set_error_handler_off();
    long reps = argc > 1 ? strtol(argv[1], NULL, 10) : 15;
    double h = argc > 2 ? strtod(argv[2], NULL) : 1e-4;
    if (reps < 1 || reps > BENCH_MAX_REPS) {
        fprintf(stderr, "repetitions must be in [1, %d]\n", BENCH_MAX_REPS);
        return 2;
    }
    acct_event g, p, sc;
    memset(&g, 0, sizeof g);
    memset(&p, 0, sizeof p);
    memset(&sc, 0, sizeof sc);
    g.type = ACCT_EV_GAUSSIAN;
    g.noise_multiplier = 1.1;
    p.type = ACCT_EV_POISSON;
    p.sampling_rate = 0.01;
    p.child = &g;
    sc.type = ACCT_EV_SELF_COMPOSED;
    sc.count = 10000;
    sc.child = &p;
    acct_pld_opts o;
    acct_pld_opts_default(&o);
    o.value_discretization = h;
    acct_pld_ws *ws = acct_pld_ws_alloc();
    if (ws == NULL)
        return 1;
    static double t[2][BENCH_MAX_REPS], cpu[2][BENCH_MAX_REPS];
    acct_pld_result r;
    dp_err e;
    for (int mode = 0; mode < 2; mode++) {
        for (long i = 0; i < reps; i++) {
            dp_err_clear(&e);
            double t0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
            int rc =
                acct_pld_epsilon_ws(&sc, ACCT_NB_ADD_REMOVE, 1e-5, &o, mode ? ws : NULL, &r, &e);
            t[mode][i] = clock_ms(CLOCK_MONOTONIC) - t0;
            cpu[mode][i] = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
            if (rc != DP_OK) {
                fprintf(stderr, "pld failed: %s\n", e.msg);
                acct_pld_ws_free(ws);
                return 1;
            }
        }
        qsort(t[mode], (size_t)reps, sizeof(double), cmp_double);
        qsort(cpu[mode], (size_t)reps, sizeof(double), cmp_double);
        printf("dpsilo_pld %s median_ms %.3f min_ms %.3f cpu_median_ms %.3f eps_upper %.10f "
               "eps_lower %.10f grid_points %zu h %g\n",
               mode ? "warm" : "cold", t[mode][reps / 2], t[mode][0], cpu[mode][reps / 2],
               r.epsilon_upper, r.epsilon_lower, r.grid_points, h);
    }
    acct_pld_ws_free(ws);
    return 0;
}
