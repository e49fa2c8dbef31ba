/*
 * dp_rng: seeded random streams for every library that draws (estimators/ now, federated/ next).
 *
 * One 64-bit seed per run (or per training job) and a NAMED stream id per purpose give each purpose
 * its own gsl_rng_mt19937, seeded through SplitMix64 (Steele, Lea & Flood, "Fast splittable
 * pseudorandom number generators", OOPSLA 2014; the constants of Vigna's reference splitmix64.c).
 * A run with the same seed draws the same numbers on every machine and with any number of threads,
 * and adding a draw for one purpose never shifts the draws of another.
 *
 * Stream ids are a registry (dp_rng_stream below): a new purpose takes a new id, and an existing id
 * never changes meaning or value, because stored seeds must keep reproducing their runs (the
 * estimators' tests pin seeded outputs). Indexed streams (one per restart, round or client) are
 * dp_rng_stream_at(base, i) = base + i, each base owning the range up to the next one.
 *
 * Training jobs (federated/, to come) derive per-(silo, round) seeds from the job's seed with
 * dp_rng_derive, then pick the purpose with a stream id:
 *
 *     uint64_t s = dp_rng_derive(dp_rng_derive(job_seed, (uint64_t)silo_id), round);
 *     gsl_rng *noise = dp_rng_alloc(s, DP_RNG_STREAM_FL_DP_NOISE, err);
 *
 * so the noise of silo 3 in round 17 depends only on (job seed, 3, 17, purpose): a resumed job, or
 * one run with another number of workers, draws it again bit for bit.
 *
 * Threading: all functions are reentrant; a gsl_rng is owned by one thread at a time.
 * Randomness: simulation grade (PRNG floating-point noise, Mironov, CCS 2012), not a hardened
 * release mechanism.
 */
#ifndef DP_COMMON_DP_RNG_H
#define DP_COMMON_DP_RNG_H

#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "common/dp_err.h"

/* Stream ids (the values are part of the reproducibility contract: never renumber). */
typedef enum dp_rng_stream {
    DP_RNG_STREAM_DATA = 0,             /* simulated data in tests and benches */
    DP_RNG_STREAM_GAUSSIAN_NOISE = 1,   /* eb_gaussian: the clients' Gaussian randomizer */
    DP_RNG_STREAM_BETA_RESPONSES = 2,   /* eb_beta: randomized response of the clients' bits */
    DP_RNG_STREAM_MIXTURE_NOISE = 3,    /* eb_mixture: the clients' clipped Gaussian randomizer */
    DP_RNG_STREAM_GAUSSIAN_CENTRAL = 4, /* eb_gaussian: the service's noise on the central sums */
    DP_RNG_STREAM_BETA_CENTRAL = 5,     /* eb_beta: the service's noise on the central sums */
    /* 100 + r, r < 100: k-means++ start of EM restart r (eb_mixture; n_init <= 100) */
    DP_RNG_STREAM_MIXTURE_RESTART = 100,
    DP_RNG_STREAM_LINREG_INIT = 200, /* eb_linreg: k-means++ start of the prior's components */
    DP_RNG_STREAM_NM_DRAWS = 300,    /* eb_nm: posterior draws of the normal-means estimator */
    /* 1000..1999 reserved for training jobs (federated/), each with a seed from dp_rng_derive */
    DP_RNG_STREAM_FL_CLIENT_SAMPLING = 1000, /* which clients take part in a round */
    DP_RNG_STREAM_FL_DP_NOISE = 1001,        /* the Gaussian noise of a round's update */
    DP_RNG_STREAM_FL_MODEL_INIT = 1002,      /* the initial model */
    DP_RNG_STREAM_FL_SGD_SAMPLING = 1010,    /* fl_sgd_run: Poisson sampling of each step's rows */
    DP_RNG_STREAM_FL_SGD_NOISE = 1011        /* fl_sgd_run: the Gaussian noise of each step */
} dp_rng_stream;

/* The i-th stream of an indexed family: base + i (restart i, client i). The caller keeps i inside
 * its base's range (see dp_rng_stream). */
uint64_t dp_rng_stream_at(dp_rng_stream base, uint64_t i);

/* SplitMix64 step: advances *state by the golden-ratio increment and returns the next 64-bit
 * output (Steele, Lea & Flood 2014; Vigna's splitmix64.c). */
uint64_t dp_splitmix64(uint64_t *state);

/* A child seed of seed for label (a silo id, a round number): one SplitMix64 output of seed xor
 * the SplitMix64 hash of label. Deterministic; distinct labels give unrelated seeds. */
uint64_t dp_rng_derive(uint64_t seed, uint64_t label);

/* A gsl_rng_mt19937 for (seed, stream): seeded with SplitMix64(seed ^ stream * 0xd1b54a32d192ed03)
 * folded to an unsigned long (never 0, which GSL maps to its default seed). Returns NULL and sets
 * err (DP_ENOMEM) on allocation failure. Owned by caller: gsl_rng_free. */
gsl_rng *dp_rng_alloc(uint64_t seed, uint64_t stream, dp_err *err);

#endif
