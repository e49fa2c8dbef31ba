/*
 * test_util.h: helpers shared by the cmocka unit tests.
 *
 * cmocka 1.1.5's assert_float_equal casts to float, which is useless for doubles, so
 * assert_close compares doubles with |a - e| <= atol + rtol * max(|a|, |e|) and prints both with
 * %.17g. Infinities compare equal only to the same infinity; NaN never compares equal.
 */
#ifndef DP_TESTS_TEST_UTIL_H
#define DP_TESTS_TEST_UTIL_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

static inline int test_close_enough(double a, double e, double rtol, double atol)
{
    if (isnan(a) || isnan(e))
        return 0;
    if (isinf(a) || isinf(e))
        return a == e;
    return fabs(a - e) <= atol + rtol * fmax(fabs(a), fabs(e));
}

#define assert_close(actual, expected, rtol, atol)                                                 \
    do {                                                                                           \
        double a_ = (actual), e_ = (expected);                                                     \
        if (!test_close_enough(a_, e_, (rtol), (atol)))                                            \
            fail_msg("%s = %.17g, expected %.17g (rtol %g, atol %g)", #actual, a_, e_,             \
                     (double)(rtol), (double)(atol));                                              \
    } while (0)

#endif
