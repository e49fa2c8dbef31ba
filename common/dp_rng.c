/*
 * dp_rng.c: SplitMix64, seed derivation and the seeded mt19937 streams. See dp_rng.h.
 *
 * The seeding formula is the one estimators/ used before it moved here (eb_rng_alloc): changing a
 * constant would change every stored run's draws, and the unit tests pin the first outputs.
 */
#include "common/dp_rng.h"

uint64_t dp_rng_stream_at(dp_rng_stream base, uint64_t i)
{
    return (uint64_t)base + i;
}

uint64_t dp_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t dp_rng_derive(uint64_t seed, uint64_t label)
{
    uint64_t h = label;
    uint64_t st = seed ^ dp_splitmix64(&h);
    return dp_splitmix64(&st);
}

gsl_rng *dp_rng_alloc(uint64_t seed, uint64_t stream, dp_err *err)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (r == NULL) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory allocating a random stream");
        return NULL;
    }
    uint64_t st = seed ^ (stream * 0xd1b54a32d192ed03ULL);
    uint64_t s = dp_splitmix64(&st);
    /* mt19937 takes an unsigned long seed; 0 is mapped by GSL to its default seed, so avoid it. */
    unsigned long ul = (unsigned long)(s ^ (s >> 32));
    gsl_rng_set(r, ul ? ul : 1UL);
    return r;
}
