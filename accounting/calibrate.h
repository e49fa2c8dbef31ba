/*
 * calibrate.h: solving for the open parameter of an event tree so that it meets a target epsilon.
 *
 * A tree may leave open (event.h) noise multipliers (NAN), Poisson sampling rates (NAN) or
 * self_composed counts (count_open); all open parameters must be of ONE kind and share one value.
 * The solver needs an accountant as a callback (eps of a closed tree), so RDP, zCDP and PLD
 * calibrate the same way; acct_calib_rdp_eps / acct_calib_zcdp_eps are the built-in ones.
 *
 * Monotonicity used (and tested): eps decreases in the noise multiplier, increases in the count and
 * in the sampling rate. Conservative by construction (every approximation errs towards a larger
 * eps): bisection keeps a bracket whose "meets" end satisfies eps(value) <= target as computed by
 * the same callback, and that end is returned together with its eps; so recomputing with the same
 * accountant always meets the target.
 *   noise:  smallest sigma in [ACCT_CALIB_SIGMA_MIN, ACCT_CALIB_SIGMA_MAX], to relative
 *           ACCT_CALIB_RTOL
 *   count:  largest integer count in [1, 10^12], exact
 *   rate:   largest q in [ACCT_CALIB_Q_MIN, 1], to relative ACCT_CALIB_RTOL
 * Impossible targets (even sigma = ACCT_CALIB_SIGMA_MAX, count = 1 or q = ACCT_CALIB_Q_MIN exceed
 * it) give DP_ENUMERIC (HTTP 422) with the reason. Only an evaluated epsilon above the target is a
 * miss: an accountant error at any probe (e.g. a PLD grid too large for this value_discretization)
 * is returned as the calibration's error, never taken as a miss (that would silently return a
 * value far from the optimum).
 *
 * Thread-safety: reentrant if the callback is.
 */
#ifndef DP_ACCOUNTING_CALIBRATE_H
#define DP_ACCOUNTING_CALIBRATE_H

#include <stddef.h>

#include "accounting/event.h"
#include "accounting/rdp.h"
#include "accounting/zcdp.h"
#include "common/dp_err.h"

#define ACCT_CALIB_SIGMA_MIN 1e-3 /* below: answer is "any noise >= this works" (returned) */
#define ACCT_CALIB_SIGMA_MAX 1e7  /* above: treated as "no noise can meet the target" */
#define ACCT_CALIB_Q_MIN     1e-12
#define ACCT_CALIB_RTOL      1e-9 /* relative width of the final bracket for sigma and q */
#define ACCT_CALIB_MAX_ITER  200  /* bisection steps (log-scale bracket of 1e10 needs ~45) */

/* eps of a fully specified tree; return DP_OK or an error (filled in err). */
typedef int (*acct_eps_fn)(const acct_event *ev, void *ctx, double *eps, dp_err *err);

typedef struct acct_calib_result {
    unsigned kind;   /* ACCT_OPEN_NOISE, ACCT_OPEN_RATE or ACCT_OPEN_COUNT */
    double value;    /* noise multiplier, sampling rate, or count (an integer) */
    double epsilon;  /* eps achieved at value (<= target) by the same callback */
    int evaluations; /* accountant calls used */
} acct_calib_result;

/* Solves for the tree's open parameter. target_eps > 0 finite. The tree must pass
 * acct_event_check(ev, true) and have exactly one kind of open parameter (DP_EINVAL, field "" = the
 * root, otherwise). */
int acct_calibrate(const acct_event *ev, double target_eps, acct_eps_fn fn, void *ctx,
                   acct_calib_result *out, dp_err *err);

/* Built-in callbacks. */
typedef struct acct_calib_rdp_ctx {
    acct_neighboring nb;
    double delta;
    acct_conversion conv;
    const double *orders; /* NULL = default grid */
    size_t n_orders;
    double last_order; /* out: optimal order of the last evaluation */
} acct_calib_rdp_ctx;
int acct_calib_rdp_eps(const acct_event *ev, void *ctx, double *eps, dp_err *err);

typedef struct acct_calib_zcdp_ctx {
    double delta;
    acct_zcdp_conversion conv;
} acct_calib_zcdp_ctx;
int acct_calib_zcdp_eps(const acct_event *ev, void *ctx, double *eps, dp_err *err);

#endif
