/*
 * logmath.h: the audited log-space helpers of dpsilo (sums of exponentials stay in log space).
 *
 * Privacy quantities span hundreds of orders of magnitude (an RDP moment A_alpha can be e^(10^6) or
 * 1 + 10^-27), so every sum of exponentials is formed in log space with these helpers and never as
 * exp() followed by log(). Conventions: -INFINITY is log(0); +INFINITY propagates; NaN in gives NaN
 * out.
 *
 * Thread-safety: pure functions, no state.
 */
#ifndef DP_ACCOUNTING_LOGMATH_H
#define DP_ACCOUNTING_LOGMATH_H

#include <stddef.h>

/* log(e^a + e^b), exact to a few ulps: max(a,b) + log1p(exp(-|a-b|)). */
double dp_log_add(double a, double b);

/* log(e^a - e^b) for a >= b. Returns -INFINITY when a == b and NaN when a < b (a caller bug: the
 * difference would be negative). Uses log(-expm1(b-a)) near a == b and log1p(-exp(b-a)) otherwise
 * (Maechler 2012, "Accurately computing log(1 - exp(-|a|))"). */
double dp_log_sub(double a, double b);

/* log(sum_i e^x[i]) over n values with one max-shift pass; -INFINITY for n == 0. */
double dp_logsumexp(const double *x, size_t n);

/* log(1 - e^x) for x <= 0 (Maechler 2012); -INFINITY at x == 0, NaN for x > 0. */
double dp_log1mexp(double x);

/* log(e^x - 1) for x >= 0: -INFINITY at 0, x + log1p(-e^-x) for large x. */
double dp_logexpm1(double x);

/* exp(l) for a log-probability l <= 0, rounded up to the smallest positive double when the true
 * value is positive (l > -inf) but underflows: a delta is never reported as 0 unless it is 0. */
double dp_exp_prob_up(double l);

/* a + b rounded upward: the exact sum when it is representable, else the next double above it
 * (Knuth's TwoSum gives the rounding error, TAOCP vol. 2, 4.2.2, Thm. B). Non-finite sums are
 * returned as they are. Every composed privacy loss is summed with it, in the calculators and in
 * the ledger alike, so a reported total is never below the exact sum of its terms. */
double dp_sum_up(double a, double b);

/* acc[i] = dp_sum_up(acc[i], x[i]) for i < n: the same doubles, in one loop. */
void dp_vec_sum_up(double *acc, const double *x, size_t n);

/* c * x rounded upward (c >= 0, x >= 0): the exact product when representable, else the next
 * double above it (the error term of fma). */
double dp_mul_up(double c, double x);

/* Streaming log-sum-exp accumulator: add terms one at a time without storing them. */
typedef struct dp_lse {
    double max; /* largest term seen so far (log scale); -INFINITY when empty */
    double sum; /* sum of exp(term - max) over the terms seen */
} dp_lse;

void dp_lse_init(dp_lse *s);
void dp_lse_add(dp_lse *s, double term);
/* log of the sum of the terms added; -INFINITY if none (or all were -INFINITY). */
double dp_lse_value(const dp_lse *s);

#endif
