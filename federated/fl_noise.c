/*
 * federated/fl_noise.c: fl_gauss_fill, float normals fast enough that DP-SGD's noise (one normal
 * per parameter per step) costs little next to the gradient, with the same bits on every machine.
 *
 * Stream. Normals come in blocks of FL_ZIG_BLOCK = 16. Block b takes output b of each of eight
 * xoshiro256++ generators (Blackman & Vigna, "Scrambled Linear Pseudorandom Number Generators",
 * ACM TOMS 47(4), 2021, Sec. 4 and 10.2; federated/fl_rng.h). Their states are the outputs of one
 * SplitMix64 sequence started at seed ^ DP_RNG_STREAM_FL_SGD_NOISE * 0xd1b54a32d192ed03 (the
 * seeding of fl_rng_seed, continued): generator k takes outputs 4k + 1 .. 4k + 4. SplitMix64 is a
 * counter passed through a bijective mixer, so output i is computed directly, and four distinct
 * counters never all mix to zero; a fill seeds its generators with 32 mixes rather than nine
 * derivations and seedings (a DP-SGD step of a small model fills a few dozen normals, and the
 * seeding was most of its cost). Normal 2k of the block comes from the low 32 bits of generator
 * k's output, normal 2k + 1 from its high 32 bits. Eight 64-bit generators
 * side by side are one AVX-512 register per state word (two AVX2 registers, or eight scalars), so
 * every path steps the same eight generators and sees the same bits. The rare slow path (below)
 * draws from a ninth generator (outputs 33 .. 36 of the sequence, seeded only when a fill first
 * needs it), in increasing order of the normals that need it: the scalar path as it meets them, the
 * vector paths after the fast lanes of a block (AVX2) or of a run of up to 64 blocks (AVX-512,
 * which lists the slow lanes with vpcompressd rather than branching per block), in scalar code and
 * in increasing position, so the draws of that ninth generator are taken in the same order by every
 * path. A shorter fill is therefore a prefix of a longer one, and the scalar, AVX2 and AVX-512
 * paths give identical output (tests/unit/federated/test_fl_model checks this on sizes that are not
 * multiples of the block and on seeds that hit the slow path).
 *
 * Transform: the ziggurat of Marsaglia & Tsang ("The Ziggurat Method for Generating Random
 * Variables", J. Statistical Software 5(8), 2000, Sec. 2-3 and their RNOR), here with 512 layers
 * of equal area v = 2.456766351541357e-3 under exp(-x^2/2) and base layer edge
 * r = 3.852046150368391 (solved so that the recurrence below closes at the top layer, the same
 * computation that reproduces the paper's 128- and 256-layer constants). More layers make the
 * slow path rarer: the fast test fails for 1 - mean_i k[i] / 2^22 = 0.80% of the normals with 512
 * layers (1.5% with 256, 2.8% with 128), so about one block in eight has a slow lane. Each 32-bit
 * half is split into independent fields (9 bits layer index i, 1 bit sign, 22 bits magnitude m),
 * which avoids the correlation between the layer index and the value of the original RNOR (whose
 * index bits are also the value's low bits; Doornik, "An Improved Ziggurat Method to Generate
 * Normal Random Samples", 2005, Sec. 4). The fast path is |x| = m * w[i] when m < k[i]: integer
 * operations, two table look-ups (scalar loads in every path), one conversion of m < 2^22 to float
 * (exact) and one float multiply, each exactly rounded in IEEE single precision in every path. The
 * sign is set by flipping the float's sign bit, and the result is sigma * x in float. The rest go
 * through the wedge test or, in the base layer, Marsaglia's tail method (x = -log(U1) / r until 2 *
 * (-log U2) > x^2), with fresh draws of the ninth generator, so the output is exact in distribution
 * up to the magnitude grid (steps of x_i / 2^22 within layer i, under 1e-6) and float rounding,
 * with no truncated tail (a float Box-Muller fed 24-bit uniforms stops near 5.9 sigma).
 *
 * Speed (the AVX-512 path, one core of the AMD EPYC test machine): about 1.9 G normals/s against
 * 0.6 G for the former single-generator scalar loop. The table look-ups of a block's 16 lanes are
 * most of the cost (the generators and arithmetic alone run at ~5 G/s): sixteen scalar loads of
 * packed (k, w) pairs put together in registers beat the gather instructions (1.65 G with two
 * eight-lane gathers of the 64-bit pairs, about 1 G with a sixteen-lane gather from each table);
 * the slow lanes take about 13%.
 *
 * The tables are computed once per process in double (pthread_once) by the recurrence of
 * Marsaglia & Tsang's zigset: x_{i-1} = sqrt(-2 log(v / x_i + f(x_i))), f(x) = exp(-x^2 / 2).
 * The vector path is picked once per process from the CPU (__builtin_cpu_supports); the binary is
 * built for baseline x86-64 and the AVX2 / AVX-512 code is compiled with target attributes.
 * Deterministic by seed (given the same libm exp/log for the tables and slow paths).
 * Thread-safety: reentrant.
 */
#include "federated/fl_model.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "federated/fl_model_internal.h"
#include "federated/fl_rng.h"

#define ZIG_X86 FL_X86_SIMD

#define ZIG_LAYERS  512
#define ZIG_R       3.852046150368391
#define ZIG_V       2.456766351541357e-3
#define ZIG_M       4194304.0 /* 2^22: the magnitude field's range */
#define ZIG_GENS    8         /* generators of the fast path, two normals per output */
#define ZIG_IMASK   0x1ffu    /* layer index: bits 0-8 */
#define ZIG_SIGNBIT 0x200u    /* bit 9, moved to bit 31 of the float */

_Static_assert(FL_ZIG_BLOCK == 2 * ZIG_GENS, "a block is one output of each generator");

static _Alignas(64) uint32_t zig_k[ZIG_LAYERS];  /* fast-path bound on m for layer i */
static _Alignas(64) float zig_w[ZIG_LAYERS];     /* |x| = m * zig_w[i] */
static _Alignas(64) uint64_t zig_kw[ZIG_LAYERS]; /* k[i] | bits of w[i] << 32 */
static double zig_f[ZIG_LAYERS];                 /* f at the layer edges, zig_f[0] = 1 */
static pthread_once_t zig_once = PTHREAD_ONCE_INIT;

static int simd_level = FL_ZIG_SCALAR; /* set once (simd_once) */
static pthread_once_t simd_once = PTHREAD_ONCE_INIT;

static void simd_setup(void)
{
#if FL_X86_SIMD
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        simd_level = FL_ZIG_AVX512;
    else if (__builtin_cpu_supports("avx2"))
        simd_level = FL_ZIG_AVX2;
#endif
}

int fl_simd_level(void)
{
    (void)pthread_once(&simd_once, simd_setup);
    return simd_level;
}

static void zig_setup(void)
{
    double dn = ZIG_R, tn = dn;
    double q = ZIG_V / exp(-0.5 * dn * dn);
    zig_k[0] = (uint32_t)((dn / q) * ZIG_M);
    zig_k[1] = 0;
    zig_w[0] = (float)(q / ZIG_M);
    zig_w[ZIG_LAYERS - 1] = (float)(dn / ZIG_M);
    zig_f[0] = 1.0;
    zig_f[ZIG_LAYERS - 1] = exp(-0.5 * dn * dn);
    for (int i = ZIG_LAYERS - 2; i >= 1; i--) {
        dn = sqrt(-2.0 * log(ZIG_V / dn + exp(-0.5 * dn * dn)));
        zig_k[i + 1] = (uint32_t)((dn / tn) * ZIG_M);
        tn = dn;
        zig_f[i] = exp(-0.5 * dn * dn);
        zig_w[i] = (float)(dn / ZIG_M);
    }
    for (int i = 0; i < ZIG_LAYERS; i++) {
        uint32_t wb;
        memcpy(&wb, &zig_w[i], sizeof wb);
        zig_kw[i] = (uint64_t)zig_k[i] | (uint64_t)wb << 32;
    }
}

/* The generators of one fill: word w of fast generator g is s[w][g] (the layout of the vector
 * registers), aux the slow path's. */
typedef struct zig_state {
    _Alignas(64) uint64_t s[4][ZIG_GENS];
    fl_rng aux;
    uint64_t base; /* the SplitMix64 start */
    bool aux_ready;
} zig_state;

/* Output i (>= 1) of the SplitMix64 sequence started at base: fl_splitmix64's i-th call. */
static inline uint64_t zig_mix_at(uint64_t base, uint64_t i)
{
    uint64_t st = base + (i - 1) * 0x9e3779b97f4a7c15ULL;
    return fl_splitmix64(&st);
}

static void zig_seed(zig_state *st, uint64_t seed)
{
    st->base = seed ^ ((uint64_t)DP_RNG_STREAM_FL_SGD_NOISE * 0xd1b54a32d192ed03ULL);
    for (int g = 0; g < ZIG_GENS; g++)
        for (int w = 0; w < 4; w++)
            st->s[w][g] = zig_mix_at(st->base, (uint64_t)(4 * g + w + 1));
    st->aux_ready = false;
}

/* The ninth generator, seeded on first use. */
static fl_rng *zig_aux(zig_state *st)
{
    if (!st->aux_ready) {
        for (int w = 0; w < 4; w++)
            st->aux.s[w] = zig_mix_at(st->base, (uint64_t)(4 * ZIG_GENS + w + 1));
        st->aux_ready = true;
    }
    return &st->aux;
}

/* The rare path: m failed the fast test in layer i. Returns |x|, drawing from the ziggurat's
 * ninth generator r. Kept out of line so that the fast loops stay small. */
__attribute__((noinline)) static float zig_slow(fl_rng *r, uint32_t i, uint32_t m)
{
    for (;;) {
        if (i == 0) {
            double x, yv;
            do {
                x = -log(fl_rng_uniform_pos(r)) / ZIG_R;
                yv = -log(fl_rng_uniform_pos(r));
            } while (yv + yv < x * x);
            return (float)(ZIG_R + x);
        }
        double x = (double)m * (double)zig_w[i];
        double u = (double)(fl_rng_next(r) >> 11) * 0x1.0p-53;
        if (zig_f[i] + u * (zig_f[i - 1] - zig_f[i]) < exp(-0.5 * x * x))
            return (float)x;
        uint32_t h = (uint32_t)(fl_rng_next(r) >> 32);
        i = h & ZIG_IMASK;
        m = h >> 10;
        if (m < zig_k[i])
            return (float)m * zig_w[i];
    }
}

/* sigma * (+-|x|), the sign from bit 9 of h, set by flipping the float's sign bit rather than by
 * a branch (a branch on a random bit is mispredicted half the time). */
static inline float zig_signed(float s, float ax, uint32_t h)
{
    uint32_t bits;
    memcpy(&bits, &ax, sizeof bits);
    bits ^= (h & ZIG_SIGNBIT) << 22;
    memcpy(&ax, &bits, sizeof ax);
    return s * ax;
}

/* The normal of a slow lane with the 32 bits h. */
static float zig_fix(zig_state *st, float s, uint32_t h)
{
    return zig_signed(s, zig_slow(zig_aux(st), h & ZIG_IMASK, h >> 10), h);
}

/* One block into out[0..lim) (lim <= FL_ZIG_BLOCK), in scalar code: the reference of the vector
 * paths. The generators always advance a whole block. */
static void zig_block_scalar(zig_state *st, float s, float *out, size_t lim)
{
    uint32_t h[FL_ZIG_BLOCK];
    for (int g = 0; g < ZIG_GENS; g++) {
        uint64_t *s0 = &st->s[0][g], *s1 = &st->s[1][g], *s2 = &st->s[2][g], *s3 = &st->s[3][g];
        uint64_t o = fl_rng_rotl(*s0 + *s3, 23) + *s0, t = *s1 << 17;
        *s2 ^= *s0;
        *s3 ^= *s1;
        *s1 ^= *s2;
        *s0 ^= *s3;
        *s2 ^= t;
        *s3 = fl_rng_rotl(*s3, 45);
        h[2 * g] = (uint32_t)o;
        h[2 * g + 1] = (uint32_t)(o >> 32);
    }
    for (size_t j = 0; j < lim; j++) {
        uint32_t i = h[j] & ZIG_IMASK, m = h[j] >> 10;
        if (__builtin_expect(m < zig_k[i], 1))
            out[j] = zig_signed(s, (float)(int32_t)m * zig_w[i], h[j]);
        else
            out[j] = zig_fix(st, s, h[j]);
    }
}

static void zig_blocks_scalar(zig_state *st, float s, float *out, size_t nb)
{
    for (size_t b = 0; b < nb; b++)
        zig_block_scalar(st, s, out + b * FL_ZIG_BLOCK, FL_ZIG_BLOCK);
}

#if ZIG_X86

/* The slow lanes (bits of fail, lowest first) of a block whose 32-bit halves are h. */
static void zig_fix_lanes(zig_state *st, float s, float *out, const uint32_t *h, uint32_t fail)
{
    while (fail != 0) {
        int j = __builtin_ctz(fail);
        out[j] = zig_fix(st, s, h[j]);
        fail &= fail - 1;
    }
}

/* AVX2: generators 0-3 in the "a" registers (normals 0-7 of a block), 4-7 in the "b" ones. */
#define ROTL256(x, k) _mm256_or_si256(_mm256_slli_epi64((x), (k)), _mm256_srli_epi64((x), 64 - (k)))

__attribute__((target("avx2"))) static inline __m256i zig_next_avx2(__m256i *s0, __m256i *s1,
                                                                    __m256i *s2, __m256i *s3)
{
    __m256i o = _mm256_add_epi64(ROTL256(_mm256_add_epi64(*s0, *s3), 23), *s0);
    __m256i t = _mm256_slli_epi64(*s1, 17);
    *s2 = _mm256_xor_si256(*s2, *s0);
    *s3 = _mm256_xor_si256(*s3, *s1);
    *s1 = _mm256_xor_si256(*s1, *s2);
    *s0 = _mm256_xor_si256(*s0, *s3);
    *s2 = _mm256_xor_si256(*s2, t);
    *s3 = ROTL256(*s3, 45);
    return o;
}

/* Eight normals from the halves h: stored to out, the mask of the slow lanes returned. The table
 * entries are fetched by scalar loads (about 10% faster than vpgatherdd on the AMD test machine).
 */
__attribute__((target("avx2"))) static inline uint32_t zig_lanes_avx2(__m256i h, __m256 vs,
                                                                      float *out)
{
    __m256i idx = _mm256_and_si256(h, _mm256_set1_epi32(ZIG_IMASK));
    __m256i m = _mm256_srli_epi32(h, 10);
    __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(ZIG_SIGNBIT)), 22);
    _Alignas(32) uint32_t ix[8];
    _mm256_store_si256((__m256i *)ix, idx);
    __m256i k = _mm256_set_epi32((int)zig_k[ix[7]], (int)zig_k[ix[6]], (int)zig_k[ix[5]],
                                 (int)zig_k[ix[4]], (int)zig_k[ix[3]], (int)zig_k[ix[2]],
                                 (int)zig_k[ix[1]], (int)zig_k[ix[0]]);
    __m256 w = _mm256_set_ps(zig_w[ix[7]], zig_w[ix[6]], zig_w[ix[5]], zig_w[ix[4]], zig_w[ix[3]],
                             zig_w[ix[2]], zig_w[ix[1]], zig_w[ix[0]]);
    __m256 x = _mm256_mul_ps(_mm256_cvtepi32_ps(m), w);
    x = _mm256_castsi256_ps(_mm256_xor_si256(_mm256_castps_si256(x), sign));
    _mm256_storeu_ps(out, _mm256_mul_ps(vs, x));
    /* m and k are below 2^31, so the signed compare is the unsigned one */
    return (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(k, m))) ^ 0xffu;
}

__attribute__((target("avx2"))) static void zig_blocks_avx2(zig_state *st, float s, float *out,
                                                            size_t nb)
{
    __m256i a0 = _mm256_load_si256((const __m256i *)&st->s[0][0]);
    __m256i a1 = _mm256_load_si256((const __m256i *)&st->s[1][0]);
    __m256i a2 = _mm256_load_si256((const __m256i *)&st->s[2][0]);
    __m256i a3 = _mm256_load_si256((const __m256i *)&st->s[3][0]);
    __m256i b0 = _mm256_load_si256((const __m256i *)&st->s[0][4]);
    __m256i b1 = _mm256_load_si256((const __m256i *)&st->s[1][4]);
    __m256i b2 = _mm256_load_si256((const __m256i *)&st->s[2][4]);
    __m256i b3 = _mm256_load_si256((const __m256i *)&st->s[3][4]);
    __m256 vs = _mm256_set1_ps(s);
    for (size_t b = 0; b < nb; b++) {
        float *o = out + b * FL_ZIG_BLOCK;
        __m256i ha = zig_next_avx2(&a0, &a1, &a2, &a3);
        __m256i hb = zig_next_avx2(&b0, &b1, &b2, &b3);
        uint32_t fail = zig_lanes_avx2(ha, vs, o) | zig_lanes_avx2(hb, vs, o + 8) << 8;
        if (__builtin_expect(fail != 0, 0)) {
            _Alignas(32) uint32_t h[FL_ZIG_BLOCK];
            _mm256_store_si256((__m256i *)h, ha);
            _mm256_store_si256((__m256i *)(h + 8), hb);
            zig_fix_lanes(st, s, o, h, fail);
        }
    }
    _mm256_store_si256((__m256i *)&st->s[0][0], a0);
    _mm256_store_si256((__m256i *)&st->s[1][0], a1);
    _mm256_store_si256((__m256i *)&st->s[2][0], a2);
    _mm256_store_si256((__m256i *)&st->s[3][0], a3);
    _mm256_store_si256((__m256i *)&st->s[0][4], b0);
    _mm256_store_si256((__m256i *)&st->s[1][4], b1);
    _mm256_store_si256((__m256i *)&st->s[2][4], b2);
    _mm256_store_si256((__m256i *)&st->s[3][4], b3);
}

/* The packed (k, w) pairs of the 16 lanes of h: lanes 0-7 into *a, 8-15 into *b, by sixteen scalar
 * loads (faster than vpgatherdq here: 1.97 against 1.65 G normals/s for the whole fill). */
__attribute__((target("avx512f"))) static inline void zig_kw_avx512(__m512i h, __m512i *a,
                                                                    __m512i *b)
{
    _Alignas(64) uint64_t o[ZIG_GENS];
    _mm512_store_si512(o, h);
#define ZIG_LO(g) ((long long)zig_kw[o[g] & ZIG_IMASK])
#define ZIG_HI(g) ((long long)zig_kw[(o[g] >> 32) & ZIG_IMASK])
    *a = _mm512_set_epi64(ZIG_HI(3), ZIG_LO(3), ZIG_HI(2), ZIG_LO(2), ZIG_HI(1), ZIG_LO(1),
                          ZIG_HI(0), ZIG_LO(0));
    *b = _mm512_set_epi64(ZIG_HI(7), ZIG_LO(7), ZIG_HI(6), ZIG_LO(6), ZIG_HI(5), ZIG_LO(5),
                          ZIG_HI(4), ZIG_LO(4));
#undef ZIG_LO
#undef ZIG_HI
}

/* AVX-512: all eight generators in one register per state word, a block per step. The slow lanes
 * of up to ZIG_RUN blocks are listed (their halves h and positions, packed with vpcompressd: no
 * branch per block) and fixed up after those blocks, in increasing position. */
#define ZIG_RUN 64

__attribute__((target("avx512f"))) static void zig_blocks_avx512(zig_state *st, float s, float *out,
                                                                 size_t nb)
{
    __m512i s0 = _mm512_load_si512(&st->s[0][0]), s1 = _mm512_load_si512(&st->s[1][0]);
    __m512i s2 = _mm512_load_si512(&st->s[2][0]), s3 = _mm512_load_si512(&st->s[3][0]);
    const __m512i smask = _mm512_set1_epi32(ZIG_SIGNBIT);
    const __m512 vs = _mm512_set1_ps(s);
    const __m512i even =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const __m512i lane = _mm512_srli_epi32(even, 1), step = _mm512_set1_epi32(FL_ZIG_BLOCK);
    uint32_t slow_h[ZIG_RUN * FL_ZIG_BLOCK + FL_ZIG_BLOCK];
    uint32_t slow_at[ZIG_RUN * FL_ZIG_BLOCK + FL_ZIG_BLOCK];
    for (size_t b0 = 0; b0 < nb; b0 += ZIG_RUN) {
        size_t b1 = nb - b0 < ZIG_RUN ? nb : b0 + ZIG_RUN, n_slow = 0;
        float *o = out + b0 * FL_ZIG_BLOCK;
        __m512i at = lane;
        for (size_t b = b0; b < b1; b++, o += FL_ZIG_BLOCK, at = _mm512_add_epi32(at, step)) {
            __m512i h = _mm512_add_epi64(_mm512_rol_epi64(_mm512_add_epi64(s0, s3), 23), s0);
            __m512i t = _mm512_slli_epi64(s1, 17);
            s2 = _mm512_xor_si512(s2, s0);
            s3 = _mm512_xor_si512(s3, s1);
            s1 = _mm512_xor_si512(s1, s2);
            s0 = _mm512_xor_si512(s0, s3);
            s2 = _mm512_xor_si512(s2, t);
            s3 = _mm512_rol_epi64(s3, 45);
            __m512i m = _mm512_srli_epi32(h, 10);
            __m512i sign = _mm512_slli_epi32(_mm512_and_si512(h, smask), 22);
            __m512i kwa, kwb;
            zig_kw_avx512(h, &kwa, &kwb);
            __m512i k = _mm512_permutex2var_epi32(kwa, even, kwb);
            __m512 w = _mm512_castsi512_ps(_mm512_permutex2var_epi32(kwa, odd, kwb));
            __m512 x = _mm512_mul_ps(_mm512_cvtepi32_ps(m), w);
            x = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), sign));
            _mm512_storeu_ps(o, _mm512_mul_ps(vs, x));
            __mmask16 fail = _mm512_cmpge_epu32_mask(m, k);
            _mm512_storeu_si512(slow_h + n_slow, _mm512_maskz_compress_epi32(fail, h));
            _mm512_storeu_si512(slow_at + n_slow, _mm512_maskz_compress_epi32(fail, at));
            n_slow += (size_t)__builtin_popcount((unsigned)fail);
        }
        float *ob = out + b0 * FL_ZIG_BLOCK;
        for (size_t q = 0; q < n_slow; q++)
            ob[slow_at[q]] = zig_fix(st, s, slow_h[q]);
    }
    _mm512_store_si512(&st->s[0][0], s0);
    _mm512_store_si512(&st->s[1][0], s1);
    _mm512_store_si512(&st->s[2][0], s2);
    _mm512_store_si512(&st->s[3][0], s3);
}

#endif

int fl_gauss_fill_path(float *out, size_t n, double sigma, uint64_t seed, int path)
{
    (void)pthread_once(&zig_once, zig_setup);
    int best = fl_simd_level();
    if (path == FL_ZIG_BEST)
        path = best;
    if (path < FL_ZIG_SCALAR || path > best)
        return -1;
    zig_state st;
    zig_seed(&st, seed);
    float s = (float)sigma;
    size_t nb = n / FL_ZIG_BLOCK, r = n % FL_ZIG_BLOCK;
    switch (path) {
#if ZIG_X86
        case FL_ZIG_AVX512:
            zig_blocks_avx512(&st, s, out, nb);
            break;
        case FL_ZIG_AVX2:
            zig_blocks_avx2(&st, s, out, nb);
            break;
#endif
        default:
            zig_blocks_scalar(&st, s, out, nb);
            break;
    }
    if (r > 0)
        zig_block_scalar(&st, s, out + nb * FL_ZIG_BLOCK, r);
    return path;
}

void fl_gauss_fill(float *out, size_t n, double sigma, uint64_t seed)
{
    (void)fl_gauss_fill_path(out, n, sigma, seed, FL_ZIG_BEST);
}
