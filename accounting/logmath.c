/*
 * logmath.c: log-space helpers. See logmath.h for the contract.
 *
 * References: M. Maechler (2012), "Accurately computing log(1 - exp(-|a|))", Rmpfr vignette, for
 * the switch at -ln 2 between log(-expm1(x)) and log1p(-exp(x)).
 */
#include "accounting/logmath.h"
#include "common/dp_math.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <gsl/gsl_math.h>

double dp_log_add(double a, double b)
{
    if (isnan(a) || isnan(b))
        return DP_NAN;
    double hi = a > b ? a : b, lo = a > b ? b : a;
    if (hi == -HUGE_VAL)
        return -HUGE_VAL;
    if (hi == HUGE_VAL)
        return HUGE_VAL;
    return hi + log1p(exp(lo - hi));
}

double dp_log1mexp(double x)
{
    if (isnan(x) || x > 0.0)
        return DP_NAN;
    if (x == 0.0)
        return -HUGE_VAL;
    return x > -M_LN2 ? log(-expm1(x)) : log1p(-exp(x));
}

double dp_log_sub(double a, double b)
{
    if (isnan(a) || isnan(b) || a < b)
        return DP_NAN;
    if (b == -HUGE_VAL)
        return a;
    if (a == b)
        return -HUGE_VAL;
    if (a == HUGE_VAL)
        return HUGE_VAL;
    return a + dp_log1mexp(b - a);
}

double dp_logexpm1(double x)
{
    if (isnan(x) || x < 0.0)
        return DP_NAN;
    if (x == 0.0)
        return -HUGE_VAL;
    if (x > 36.0) /* e^-x < DBL_EPSILON^2: log1p(-e^-x) is below half an ulp of x beyond here */
        return x + log1p(-exp(-x));
    return log(expm1(x));
}

double dp_logsumexp(const double *x, size_t n)
{
    double m = -HUGE_VAL;
    for (size_t i = 0; i < n; i++) {
        if (isnan(x[i]))
            return DP_NAN;
        if (x[i] > m)
            m = x[i];
    }
    if (m == -HUGE_VAL || m == HUGE_VAL)
        return m;
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += exp(x[i] - m);
    return m + log(s);
}

double dp_exp_prob_up(double l)
{
    if (isnan(l))
        return l;
    if (l >= 0.0)
        return 1.0;
    double v = exp(l);
    return (v == 0.0 && l > -HUGE_VAL) ? DBL_TRUE_MIN : v;
}

void dp_lse_init(dp_lse *s)
{
    s->max = -HUGE_VAL;
    s->sum = 0.0;
}

void dp_lse_add(dp_lse *s, double term)
{
    if (isnan(term) || isnan(s->max)) {
        s->max = DP_NAN;
        return;
    }
    if (term == -HUGE_VAL)
        return;
    if (term == HUGE_VAL || s->max == HUGE_VAL) {
        s->max = HUGE_VAL;
        s->sum = 1.0;
        return;
    }
    if (term > s->max) {
        s->sum = s->sum * exp(s->max - term) + 1.0;
        s->max = term;
    } else {
        s->sum += exp(term - s->max);
    }
}

double dp_lse_value(const dp_lse *s)
{
    if (isnan(s->max))
        return DP_NAN;
    if (s->max == -HUGE_VAL || s->max == HUGE_VAL)
        return s->max;
    return s->max + log(s->sum);
}

/* dp_sum_up, for it and dp_vec_sum_up's loop. nextafter(s, +inf) of a finite s is the next
 * representation: its bits plus one above zero, minus one below (IEEE 754 orders the magnitudes
 * of one sign as their bits), and the smallest subnormal at zero (which a + b never rounds to: a
 * sum that small is exact, so e is 0 there). The same doubles as nextafter, without a call per
 * element. */
static double sum_up(double a, double b)
{
    double s = a + b;
    if (!isfinite(s))
        return s;
    double bb = s - a;
    double e = (a - (s - bb)) + (b - bb);
    if (!(e > 0))
        return s;
    if (s == 0)
        return DBL_TRUE_MIN;
    uint64_t u;
    memcpy(&u, &s, sizeof u);
    u = s > 0 ? u + 1 : u - 1;
    memcpy(&s, &u, sizeof s);
    return s;
}

double dp_sum_up(double a, double b)
{
    return sum_up(a, b);
}

void dp_vec_sum_up(double *acc, const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        acc[i] = sum_up(acc[i], x[i]);
}

double dp_mul_up(double c, double x)
{
    double p = c * x;
    if (!isfinite(p))
        return p;
    return fma(c, x, -p) > 0 ? nextafter(p, DP_INF) : p;
}
