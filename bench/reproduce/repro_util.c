/*
 * repro_util.c: see repro_util.h.
 */
#include "bench/reproduce/repro_util.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

double repro_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double repro_mean(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    return s / n;
}

double repro_sd(const double *x, int n)
{
    if (n < 2)
        return 0;
    double m = repro_mean(x, n), s = 0;
    for (int i = 0; i < n; i++)
        s += (x[i] - m) * (x[i] - m);
    return sqrt(s / (n - 1));
}

int repro_fail(const char *part, const dp_err *e)
{
    fprintf(stderr, "%s: %s (%s)\n", part, e->msg, e->field);
    return e->code ? e->code : DP_EINTERNAL;
}
