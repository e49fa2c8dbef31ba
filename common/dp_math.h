/*
 * dp_math: the double-precision infinity and NaN constants every dpsilo file uses.
 *
 * C99's INFINITY and NAN (<math.h>) have type float. Assigning one to a double, passing it where
 * a double is expected or comparing a double with it promotes float to double: clang 14 reports
 * that under -Wdouble-promotion (gcc 12 does not warn on constants) and -Werror makes it a build
 * failure. DP_INF and DP_NAN are the same values with type double, so the code builds without a
 * warning under both compilers. Use them instead of INFINITY and NAN in all code;
 * scripts/check-deps.sh rejects the float macros outside this header.
 *
 * Why an explicit cast of the C99 macros, and not one of the alternatives:
 *   - (double)INFINITY is exact (the float infinity converts to the double infinity) and
 *     (double)NAN is a quiet NaN. An explicit conversion is not a promotion, so
 *     -Wdouble-promotion is silent.
 *   - Both stay arithmetic constant expressions, so they may initialise objects of static
 *     storage duration (C11 6.6p7); nan("") may not.
 *   - __builtin_inf() and __builtin_nan("") are double-typed too, but they are GNU extensions;
 *     the casts are ISO C11 and behave the same under gcc and clang.
 *   - HUGE_VAL is a double, but it is an infinity only where the implementation has one
 *     (IEEE 754, as here), and C has no double-typed NaN macro at all.
 *
 * Test with isinf(), isnan() and isfinite(), never with == against DP_NAN (a NaN compares
 * unequal to itself).
 */
#ifndef DP_COMMON_DP_MATH_H
#define DP_COMMON_DP_MATH_H

#include <math.h>

/* +infinity as a double. Negate for -infinity: -DP_INF. */
#define DP_INF ((double)INFINITY)
/* A quiet NaN as a double: "not set", "not applicable" or an undefined result. */
#define DP_NAN ((double)NAN)

#endif
