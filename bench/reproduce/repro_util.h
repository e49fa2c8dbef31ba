/*
 * repro_util.h: small helpers shared by the parts of bench/reproduce (one binary): the process's
 * CPU time, the mean and sample standard deviation of a few seeds' figures, and a library error
 * printed with its field.
 */
#ifndef DP_BENCH_REPRODUCE_REPRO_UTIL_H
#define DP_BENCH_REPRODUCE_REPRO_UTIL_H

#include "common/dp_err.h"

/* CPU seconds of the process (all threads). */
double repro_cpu_s(void);

/* Mean of x[0..n-1], n >= 1. */
double repro_mean(const double *x, int n);

/* Sample standard deviation (n - 1 in the denominator); 0 when n < 2. */
double repro_sd(const double *x, int n);

/* Prints "<part>: message (field)" to stderr; returns e's code (DP_EINTERNAL if it has none). */
int repro_fail(const char *part, const dp_err *e);

#endif
