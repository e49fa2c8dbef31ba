/*
 * eb_common.h: shared pieces of the empirical-Bayes estimators library (estimators/).
 *
 * What lives here: the solver status every estimator reports (converged, stopped at max_iter,
 * boundary, unidentifiable), the seeded random-number streams used to simulate the clients' local
 * randomizers (SplitMix64 -> gsl_rng_mt19937: bit-identical on every machine), size caps, and small
 * numeric helpers (log-sum-exp).
 *
 * Status vs error: a function returns a dp_err code (DP_OK or DP_E*) for input it refuses and for
 * resource failures. A solver that ran on valid input returns DP_OK and reports how it ended in an
 * eb_status beside its result, so non-convergence, a variance estimated on the boundary (0) or data
 * that cannot identify the prior are always visible to the caller and never hidden (issue #6).
 *
 * Threading: everything is reentrant; an eb_rng is owned by one thread.
 * Randomness: simulation-grade (PRNG floating-point noise, Mironov 2012), not a hardened release
 * mechanism.
 */
#ifndef DP_ESTIMATORS_EB_COMMON_H
#define DP_ESTIMATORS_EB_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "common/dp_err.h"

#define EB_MAX_CLIENTS    10000000 /* more clients are refused (DP_EINVAL): bounds memory per call */
#define EB_MAX_DIM        4096     /* more coordinates per client are refused */
#define EB_MAX_COMPONENTS 64       /* mixture components */
#define EB_MAX_ITER_CAP   100000   /* largest max_iter a caller may ask for */

typedef enum eb_status {
    EB_STATUS_CONVERGED = 0,  /* solver met its tolerance (or closed form) */
    EB_STATUS_MAX_ITER,       /* stopped at max_iter before meeting its tolerance */
    EB_STATUS_BOUNDARY,       /* estimate on the boundary, e.g. prior variance 0 (full pooling) */
    EB_STATUS_UNIDENTIFIABLE, /* the data cannot identify the prior (e.g. all values equal) */
    EB_STATUS_DEGENERATE      /* a mixture component emptied or collapsed during the fit */
} eb_status;

/* Stable lower-case name ("converged", "max_iter", "boundary", "unidentifiable", "degenerate"). */
const char *eb_status_name(eb_status s);

/* Worse of two statuses (the one a caller should see): converged < boundary < degenerate <
 * unidentifiable < max_iter. */
eb_status eb_status_worst(eb_status a, eb_status b);

/* SplitMix64 (Steele, Lea & Flood 2014) step: advances *state and returns the next 64-bit output.
 */
uint64_t eb_splitmix64(uint64_t *state);

/* A gsl_rng_mt19937 seeded from SplitMix64(seed ^ stream): one independent stream per (run,
 * purpose). Returns NULL (and sets err, DP_ENOMEM) on allocation failure. Owned by caller:
 * gsl_rng_free. */
gsl_rng *eb_rng_alloc(uint64_t seed, uint64_t stream, dp_err *err);

/* log(sum_i exp(x[i])) for n >= 1, stable (max shift). */
double eb_logsumexp(const double *x, size_t n);

#endif
