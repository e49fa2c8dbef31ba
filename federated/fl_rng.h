/*
 * federated/fl_rng: the fast generator behind federated/'s per-step draws (batch sampling, DP
 * noise, model initialisation).
 *
 * xoshiro256++ (Blackman & Vigna, "Scrambled Linear Pseudorandom Number Generators", ACM TOMS
 * 47(4), 2021, Sec. 4 and 10.2): 256 bits of state, all 64 output bits of good quality, about a
 * nanosecond per output. DP-SGD draws one normal per parameter per step, so gsl_rng_mt19937 with
 * gsl_ran_gaussian (tens of nanoseconds a draw) would cost more than the gradient itself.
 *
 * Seeding follows common/dp_rng.h: the state is four SplitMix64 outputs of
 * seed ^ stream * 0xd1b54a32d192ed03, so (seed, stream id) names the stream and distinct streams
 * are unrelated; SplitMix64 never yields four zero words in a row, so the state is never all zero.
 *
 * Header-only (static inline) so that the hot loops inline it. An fl_rng belongs to one thread.
 * Randomness: simulation grade (PRNG floating-point noise, Mironov, CCS 2012).
 */
#ifndef DP_FEDERATED_FL_RNG_H
#define DP_FEDERATED_FL_RNG_H

#include <stdint.h>

#include "common/dp_rng.h"

typedef struct fl_rng {
    uint64_t s[4]; /* xoshiro256++ state, never all zero */
} fl_rng;

/* dp_splitmix64 inlined (the same arithmetic, so the same outputs): a DP-SGD step seeds a
 * generator per noise lane and derives a seed per step, and the calls cost more than the mixing. */
static inline uint64_t fl_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* dp_rng_derive inlined: the same value. */
static inline uint64_t fl_rng_derive(uint64_t seed, uint64_t label)
{
    uint64_t h = label;
    uint64_t st = seed ^ fl_splitmix64(&h);
    return fl_splitmix64(&st);
}

static inline void fl_rng_seed(fl_rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t st = seed ^ (stream * 0xd1b54a32d192ed03ULL);
    for (int k = 0; k < 4; k++)
        r->s[k] = fl_splitmix64(&st);
}

static inline uint64_t fl_rng_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* The next 64-bit output (xoshiro256++). */
static inline uint64_t fl_rng_next(fl_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = fl_rng_rotl(s[0] + s[3], 23) + s[0];
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = fl_rng_rotl(s[3], 45);
    return out;
}

/* A uniform double in (0, 1]: the top 53 bits plus one, times 2^-53 (never 0, so log() is finite).
 */
static inline double fl_rng_uniform_pos(fl_rng *r)
{
    return (double)((fl_rng_next(r) >> 11) + 1) * 0x1.0p-53;
}

#endif
