/*
 * eb_simd.c: the instruction set of the estimators' vector loops. See eb_simd.h.
 */
#include "estimators/eb_simd.h"

#include <stdatomic.h>
#include <stdlib.h>

static atomic_int simd_level = -1; /* -1 until decided; every thread decides the same */

static int simd_decide(void)
{
    int lv = EB_SIMD_BASE;
#if EB_X86_SIMD
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        lv = EB_SIMD_AVX512;
    else if (__builtin_cpu_supports("avx2"))
        lv = EB_SIMD_AVX2;
#endif
    const char *cap = getenv("DPSILO_EB_SIMD");
    if (cap != NULL && strcmp(cap, "base") == 0)
        lv = EB_SIMD_BASE;
    else if (cap != NULL && strcmp(cap, "avx2") == 0 && lv > EB_SIMD_AVX2)
        lv = EB_SIMD_AVX2;
    return lv;
}

int eb_simd_level(void)
{
    int lv = atomic_load_explicit(&simd_level, memory_order_relaxed);
    if (lv < 0) {
        lv = simd_decide();
        atomic_store_explicit(&simd_level, lv, memory_order_relaxed);
    }
    return lv;
}

void eb_simd_cap(int level)
{
    int lv = simd_decide();
    atomic_store_explicit(&simd_level, level < lv ? level : lv, memory_order_relaxed);
}

/* exp(x) = 2^k exp(r), k = round(x / log 2), r = x - k log 2 with log 2 in two parts (the first
 * with 32 significant bits, so k log2_hi is exact for |k| < 2^21; Cody & Waite, "Software Manual
 * for the Elementary Functions", 1980, ch. 6), |r| <= log(2) / 2, and exp(r) by its Taylor series
 * to degree 13 (remainder under 0.35^14 / 14! < 4e-18, far below one unit in the last place) in
 * Horner's form; 2^k is built in the exponent field (|x| <= 700 keeps k within the normal range).
 * k is rounded by adding and subtracting 1.5 * 2^52, whose low bits then hold it. */
static inline __attribute__((always_inline)) void exp_body(const double *x, double *y, size_t n)
{
    const eb_v8d inv_ln2 = EB_BC8(1.4426950408889634), ln2_hi = EB_BC8(6.93147180369123816490e-01),
                 ln2_lo = EB_BC8(1.90821492927058770002e-10), shift = EB_BC8(6755399441055744.0);
    static const double coef[14] = {1.0,
                                    1.0,
                                    1.0 / 2,
                                    1.0 / 6,
                                    1.0 / 24,
                                    1.0 / 120,
                                    1.0 / 720,
                                    1.0 / 5040,
                                    1.0 / 40320,
                                    1.0 / 362880,
                                    1.0 / 3628800,
                                    1.0 / 39916800,
                                    1.0 / 479001600,
                                    1.0 / 6227020800.0};
    const eb_v8l bias = {1023, 1023, 1023, 1023, 1023, 1023, 1023, 1023};
    for (size_t i = 0; i < n; i += EB_VL) {
        eb_v8d v, t, kd, r, p;
        EB_LD8(v, x + i);
        t = v * inv_ln2 + shift;
        kd = t - shift;
        r = (v - kd * ln2_hi) - kd * ln2_lo;
        p = EB_BC8(coef[13]);
        for (int c = 12; c >= 0; c--)
            p = p * r + EB_BC8(coef[c]);
        eb_v8l tb, sb;
        memcpy(&tb, &t, sizeof tb);
        eb_v8d sh;
        memcpy(&sb, &shift, sizeof sb);
        eb_v8l kb = ((tb - sb) + bias) << 52;
        memcpy(&sh, &kb, sizeof sh);
        p *= sh;
        EB_ST8(y + i, p);
    }
}

static void exp_base(const double *x, double *y, size_t n)
{
    exp_body(x, y, n);
}

#if EB_X86_SIMD
__attribute__((target("avx2"))) static void exp_avx2(const double *x, double *y, size_t n)
{
    exp_body(x, y, n);
}

__attribute__((target("avx512f"))) static void exp_avx512(const double *x, double *y, size_t n)
{
    exp_body(x, y, n);
}
#endif

void eb_exp_n(const double *x, double *y, size_t n)
{
#if EB_X86_SIMD
    int lv = eb_simd_level();
    if (lv == EB_SIMD_AVX512) {
        exp_avx512(x, y, n);
        return;
    }
    if (lv == EB_SIMD_AVX2) {
        exp_avx2(x, y, n);
        return;
    }
#endif
    exp_base(x, y, n);
}

/* x - x is 0 for a finite x and NaN otherwise; every comparison with NaN is false. */
static inline __attribute__((always_inline)) bool check_body(const double *x, const double *s,
                                                             size_t n)
{
    const eb_v8d zero = EB_BC8(0.0);
    eb_v8l ok = {-1, -1, -1, -1, -1, -1, -1, -1};
    size_t i = 0;
    for (; i + EB_VL <= n; i += EB_VL) {
        eb_v8d a, b;
        EB_LD8(a, x + i);
        EB_LD8(b, s + i);
        ok &= (a - a == zero) & (b - b == zero) & (b > zero);
    }
    bool all = true;
    for (int l = 0; l < EB_VL; l++)
        all = all && ok[l] != 0;
    for (; i < n; i++)
        all = all && x[i] - x[i] == 0.0 && s[i] - s[i] == 0.0 && s[i] > 0.0;
    return all;
}

static bool check_base(const double *x, const double *s, size_t n)
{
    return check_body(x, s, n);
}

#if EB_X86_SIMD
__attribute__((target("avx2"))) static bool check_avx2(const double *x, const double *s, size_t n)
{
    return check_body(x, s, n);
}

__attribute__((target("avx512f"))) static bool check_avx512(const double *x, const double *s,
                                                            size_t n)
{
    return check_body(x, s, n);
}
#endif

bool eb_finite_and_positive(const double *x, const double *s, size_t n)
{
#if EB_X86_SIMD
    int lv = eb_simd_level();
    if (lv == EB_SIMD_AVX512)
        return check_avx512(x, s, n);
    if (lv == EB_SIMD_AVX2)
        return check_avx2(x, s, n);
#endif
    return check_base(x, s, n);
}
