/*
 * bench_tuning.c: in-process time of a tuning cost (issue #4 goal: < 1 ms), for the events that
 * bench/tuning/dpa_time.py times in dp_accounting: a search over DP-SGD (q = 0.01, sigma = 1.1,
 * 1000 steps) with E[K] = 10 under geometric, logarithmic, TNB eta = 0.5 and Poisson distributions,
 * plus the same with a closed-form Gaussian run. Each sample is one acct_rdp_epsilon call at delta
 * = 1e-5 (default orders, continuous auxiliary and conversion orders): the whole price of the
 * search. Prints the median and minimum over BENCH_REPEATS (default 50) samples. Not part of make
 * test.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "accounting/event.h"
#include "accounting/rdp.h"
#include "accounting/tuning.h"
#include "common/dp_math.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static acct_event *search(acct_tuning_dist dist, int sgm)
{
    acct_event *base =
        sgm ? acct_event_self_composed(1000, acct_event_poisson(0.01, acct_event_gaussian(1.1)))
            : acct_event_gaussian(3.0);
    return acct_event_repeat_select(base, dist); /* NULL on allocation failure */
}

int main(void)
{
    const char *rep = getenv("BENCH_REPEATS");
    int n = rep ? atoi(rep) : 50;
    if (n < 1 || n > 100000)
        n = 50;
    const struct {
        const char *name;
        acct_tuning_dist d;
    } cases[] = {
        {"geometric mean 10", {ACCT_TUNE_TRUNC_NEGBIN, 0, 10.0, 1.0, DP_NAN}},
        {"logarithmic mean 10", {ACCT_TUNE_TRUNC_NEGBIN, 0, 10.0, 0.0, DP_NAN}},
        {"tnb eta 0.5 mean 10", {ACCT_TUNE_TRUNC_NEGBIN, 0, 10.0, 0.5, DP_NAN}},
        {"poisson mean 10", {ACCT_TUNE_POISSON, 0, 10.0, DP_NAN, DP_NAN}},
        {"fixed k 10", {ACCT_TUNE_FIXED, 10, DP_NAN, DP_NAN, DP_NAN}},
    };
    double *t = calloc((size_t)n, sizeof *t);
    if (t == NULL)
        return 1;
    for (int sgm = 1; sgm >= 0; sgm--) {
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            acct_event *ev = search(cases[c].d, sgm);
            if (ev == NULL)
                return 1;
            acct_rdp_answer a = {0};
            for (int i = 0; i < n; i++) {
                dp_err e;
                dp_err_clear(&e);
                double t0 = now_s();
                int rc = acct_rdp_epsilon(ev, ACCT_NB_ADD_REMOVE, 1e-5, ACCT_CONV_OPTIMAL, NULL, 0,
                                          &a, &e);
                t[i] = now_s() - t0;
                if (rc != DP_OK) {
                    fprintf(stderr, "%s: %s\n", cases[c].name, e.msg);
                    return 1;
                }
            }
            qsort(t, (size_t)n, sizeof *t, cmp_double);
            printf("dpsilo         %-6s %-22s eps=%.6f  median %8.3f ms  (min %.3f ms, %d runs)\n",
                   sgm ? "dpsgd" : "gauss", cases[c].name, a.value, 1e3 * t[n / 2], 1e3 * t[0], n);
            acct_event_free(ev);
        }
    }
    free(t);
    return 0;
}
