/*
 * eb_common.h: shared pieces of the empirical-Bayes estimators library (estimators/).
 *
 * What lives here: the solver status every estimator reports (converged, stopped at max_iter,
 * boundary, unidentifiable, degenerate, no_pooling_gain), size caps, and small numeric helpers
 * (log-sum-exp). The seeded streams that simulate the clients' local randomizers are
 * common/dp_rng.h's, one named stream id per purpose (DP_RNG_STREAM_GAUSSIAN_NOISE, ...).
 *
 * Status vs error: a function returns a dp_err code (DP_OK or DP_E*) for input it refuses and for
 * resource failures. A solver that ran on valid input returns DP_OK and reports how it ended in an
 * eb_status beside its result, so non-convergence, a variance estimated on the boundary (0) or data
 * that cannot identify the prior are always visible to the caller and never hidden (issue #6).
 *
 * Threading: everything is reentrant.
 */
#ifndef DP_ESTIMATORS_EB_COMMON_H
#define DP_ESTIMATORS_EB_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "common/dp_err.h"
#include "common/dp_rng.h"

#define EB_MAX_CLIENTS    10000000 /* more clients are refused (DP_EINVAL): bounds memory per call */
#define EB_MAX_DIM        4096     /* more coordinates per client are refused */
#define EB_MAX_COMPONENTS 64       /* mixture components */
#define EB_MAX_ITER_CAP   100000   /* largest max_iter a caller may ask for */

typedef enum eb_status {
    EB_STATUS_CONVERGED = 0,  /* solver met its tolerance (or closed form) */
    EB_STATUS_MAX_ITER,       /* stopped at max_iter before meeting its tolerance */
    EB_STATUS_BOUNDARY,       /* estimate on the boundary, e.g. prior variance 0 (full pooling) */
    EB_STATUS_UNIDENTIFIABLE, /* the data cannot identify the prior (e.g. all values equal) */
    EB_STATUS_DEGENERATE,     /* a mixture component emptied or collapsed during the fit */
    EB_STATUS_NO_POOLING_GAIN /* private fit: the prior moves no client measurably (every
                                 shrinkage < EB_NO_POOLING_GAIN): the answers are the local ones */
} eb_status;

/* A private fit whose largest shrinkage is below this is reported as EB_STATUS_NO_POOLING_GAIN.
 * With the MSE-optimal weight a (Thm 1 / Thm 2 of Ozkara et al. 2023; the Beta analogue in
 * eb_beta.h), a client's expected squared error relative to its own estimate is a = 1 -
 * shrinkage, so this says: pooling was predicted to cut no client's error by 5% or more. */
#define EB_NO_POOLING_GAIN 0.05

/* Stable lower-case name ("converged", "max_iter", "boundary", "unidentifiable", "degenerate",
 * "no_pooling_gain"). */
const char *eb_status_name(eb_status s);

/* Worse of two statuses (the one a caller should see): converged < boundary < no_pooling_gain <
 * degenerate < unidentifiable < max_iter. */
eb_status eb_status_worst(eb_status a, eb_status b);

/* Largest of n shrinkage values (0 for n = 0; NaNs are skipped). */
double eb_max_shrinkage(const double *shrinkage, size_t n);

/* log(sum_i exp(x[i])) for n >= 1, stable (max shift). */
double eb_logsumexp(const double *x, size_t n);

#endif
