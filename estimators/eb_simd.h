/*
 * eb_simd.h: eight-double vectors for the estimators' hot loops (the mixture solver's pass and the
 * even npmle grid's rows), written once with the GCC/Clang vector extension and compiled three
 * times: for AVX-512, for AVX2 and for the x86-64 baseline (the build's own target), the copy
 * picked once per process from the CPU (eb_simd_level). Every operation is lane-wise IEEE
 * arithmetic with no contraction into fused multiply-adds (GCC's -std=c11 default; Clang is told by
 * the pragma below), so the three copies give the same bits on every machine.
 *
 * Vectors are moved in and out of memory with memcpy (EB_LD8 / EB_ST8: unaligned loads and stores)
 * and never passed by value between functions, whose calling convention would then depend on the
 * instruction set.
 */
#ifndef DP_ESTIMATORS_EB_SIMD_H
#define DP_ESTIMATORS_EB_SIMD_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define EB_VL 8 /* doubles per vector */

typedef double eb_v8d __attribute__((vector_size(EB_VL * sizeof(double))));
typedef long long eb_v8l __attribute__((vector_size(EB_VL * sizeof(long long))));

#define EB_LD8(v, p) memcpy(&(v), (p), sizeof(eb_v8d))
#define EB_ST8(p, v) memcpy((p), &(v), sizeof(eb_v8d))
#define EB_BC8(a)    ((eb_v8d){(a), (a), (a), (a), (a), (a), (a), (a)})

/* x86-64 with gcc or clang: the AVX2 and AVX-512 copies exist (target attributes). */
#if defined(__x86_64__) && defined(__GNUC__)
#define EB_X86_SIMD 1
#else
#define EB_X86_SIMD 0
#endif

enum { EB_SIMD_BASE = 0, EB_SIMD_AVX2 = 1, EB_SIMD_AVX512 = 2 };

/* The copy to run on this CPU (EB_SIMD_*), decided once per process; thread-safe. The environment
 * variable DPSILO_EB_SIMD=base|avx2 caps it (tests run every copy on one machine). */
int eb_simd_level(void);

/* Tests: from now on the copy run is at most level (EB_SIMD_*), process-wide; a level above the
 * CPU's is ignored. Not for use while other threads run the kernels. */
void eb_simd_cap(int level);

/* y[i] = exp(x[i]) for i < n (n a multiple of EB_VL), every |x[i]| <= 700: the vector copy of
 * this CPU, within 2 units in the last place of the exact value (tests: eb_exp_n_is_accurate),
 * the same bits on every copy. x and y may be the same array. */
void eb_exp_n(const double *x, double *y, size_t n);

/* Whether every x[i] is finite and every s[i] finite and > 0 (i < n): eight at a time. */
bool eb_finite_and_positive(const double *x, const double *s, size_t n);

#endif
