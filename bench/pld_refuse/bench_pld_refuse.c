/*
 * bench/pld_refuse: CPU time until a PLD request over the work cap is refused (issue #10), before
 * and after the early estimate, measured side by side in one run. Body: 256 distinct
 * self_composed(1000, poisson_sampled(0.01, gaussian(1 + 0.001 i))), delta 1e-5, defaults (the
 * composed window, ~933k points, times 256 mechanisms is over 16 x 2^22).
 * "before": acct_pld_window_points with the actual window (every leaf PMF built and its Chernoff
 *           cuts searched: the work the late check in compose_dir did before refusing);
 * "after":  acct_pld_epsilon, refused by the estimate before any PMF is built.
 * Usage: build/bench/pld_refuse [repetitions]. Prints median CPU ms of each and the ratio.
 */
#include <gsl/gsl_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accounting/pld.h"

#define N_MECH 256

static double cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
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
    long reps = argc > 1 ? strtol(argv[1], NULL, 10) : 5;
    if (reps < 1 || reps > 100) {
        fprintf(stderr, "repetitions must be in [1, 100]\n");
        return 2;
    }
    static acct_event g[N_MECH], p[N_MECH], sc[N_MECH], root;
    static acct_event *kids[N_MECH];
    for (size_t i = 0; i < N_MECH; i++) {
        g[i].type = ACCT_EV_GAUSSIAN;
        g[i].noise_multiplier = 1.0 + 0.001 * (double)i;
        p[i].type = ACCT_EV_POISSON;
        p[i].sampling_rate = 0.01;
        p[i].child = &g[i];
        sc[i].type = ACCT_EV_SELF_COMPOSED;
        sc[i].count = 1000;
        sc[i].child = &p[i];
        kids[i] = &sc[i];
    }
    root.type = ACCT_EV_COMPOSED;
    root.children = kids;
    root.n_children = N_MECH;
    double before[100], after[100], est = 0, act = 0;
    for (long r = 0; r < reps; r++) {
        dp_err e;
        dp_err_clear(&e);
        double t0 = cpu_ms();
        if (acct_pld_window_points(&root, ACCT_NB_ADD_REMOVE, NULL, NULL, NULL, &act, &e) !=
            DP_OK) {
            fprintf(stderr, "window: %s\n", e.msg);
            return 1;
        }
        double t1 = cpu_ms();
        acct_pld_result res;
        dp_err_clear(&e);
        int rc = acct_pld_epsilon(&root, ACCT_NB_ADD_REMOVE, 1e-5, NULL, &res, &e);
        double t2 = cpu_ms();
        if (rc != DP_EINVAL) {
            fprintf(stderr, "expected a refusal, got %d\n", rc);
            return 1;
        }
        if (acct_pld_window_points(&root, ACCT_NB_ADD_REMOVE, NULL, &est, NULL, NULL, &e) != DP_OK)
            return 1;
        before[r] = t1 - t0;
        after[r] = t2 - t1;
    }
    qsort(before, (size_t)reps, sizeof(double), cmp_double);
    qsort(after, (size_t)reps, sizeof(double), cmp_double);
    double b = before[reps / 2], a = after[reps / 2];
    printf("window: estimate %.0f points, actual %.0f points\n", est, act);
    printf("before (PMFs built, late check): median cpu %.1f ms\n", b);
    printf("after (early estimate): median cpu %.1f ms\n", a);
    printf("ratio before/after: %.1fx\n", b / a);
    return 0;
}
