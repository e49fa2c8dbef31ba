/*
 * calibrate.c: bisection on the open parameter of an event tree. See calibrate.h for the contract.
 *
 * Each candidate is evaluated on a fresh clone of the tree with the open parameters filled in
 * (acct_event_fill_open), so the caller's tree is never modified. Noise and rate are bisected on a
 * log scale (geometric midpoints), the count on integers.
 */
#include "accounting/calibrate.h"

#include <math.h>

typedef struct calib {
    const acct_event *ev;
    unsigned kind;
    acct_eps_fn fn;
    void *ctx;
    int evals;
} calib;

static int eval_at(calib *c, double v, double *eps, dp_err *err)
{
    acct_event *t = acct_event_clone(c->ev);
    if (t == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    acct_event_fill_open(t, c->kind, v);
    c->evals++;
    int rc = c->fn(t, c->ctx, eps, err);
    acct_event_free(t);
    if (rc == DP_OK && isnan(*eps))
        return dp_err_set(err, DP_ENUMERIC, NULL, "accountant returned NaN");
    return rc;
}

/* One probe: 1 = meets the target, 0 = does not, -1 = error (in err). Only a computed epsilon above
 * the target is a miss. A probe the accountant cannot evaluate (e.g. a PLD grid too large at this
 * value_discretization, a count beyond what the accountant composes) is an error of the whole
 * calibration: counting it as a miss would silently return a value far from the optimum (the
 * bracket would close on the last value that could be evaluated). */
static int probe(calib *c, double v, double target, double *eps, dp_err *err)
{
    int rc = eval_at(c, v, eps, err);
    if (rc != DP_OK)
        return -1;
    return *eps <= target;
}

/* Bisection in log between a value that meets the target (meet, with epsilon e_meet) and one that
 * does not (fail), on either side of it: geometric midpoints until the two are within
 * ACCT_CALIB_RTOL, then the meeting end is the answer (conservative). Serves noise (meet above
 * fail) and rate (meet below fail); what names the parameter in the non-convergence error. */
static int bisect_log(calib *c, double target, double meet, double e_meet, double fail,
                      const char *what, acct_calib_result *out, dp_err *err)
{
    for (int i = 0; i < ACCT_CALIB_MAX_ITER; i++) {
        double lo = fmin(meet, fail), hi = fmax(meet, fail);
        if (hi / lo - 1.0 <= ACCT_CALIB_RTOL) {
            out->value = meet;
            out->epsilon = e_meet;
            return DP_OK;
        }
        double mid = sqrt(lo * hi), e;
        int m = probe(c, mid, target, &e, err);
        if (m < 0)
            return err->code;
        if (m) {
            meet = mid;
            e_meet = e;
        } else {
            fail = mid;
        }
    }
    return dp_err_set(err, DP_ENUMERIC, NULL, "%s calibration did not converge", what);
}

/* Smallest sigma meeting the target: bracket outwards from 1 by factors of 4, then bisect in log.
 */
static int solve_noise(calib *c, double target, acct_calib_result *out, dp_err *err)
{
    double e, e_hi = HUGE_VAL, lo, hi;
    int m = probe(c, 1.0, target, &e, err);
    if (m < 0)
        return err->code;
    if (m) {
        hi = 1.0;
        e_hi = e;
        for (lo = 0.25;; lo *= 0.25) {
            if (lo < ACCT_CALIB_SIGMA_MIN) { /* everything down to the floor meets it */
                out->value = hi;
                out->epsilon = e_hi;
                return DP_OK;
            }
            if ((m = probe(c, lo, target, &e, err)) < 0)
                return err->code;
            if (!m)
                break;
            hi = lo;
            e_hi = e;
        }
    } else {
        for (hi = 4.0;; hi *= 4.0) {
            if (hi > ACCT_CALIB_SIGMA_MAX) {
                return dp_err_set(err, DP_ENUMERIC, "target_epsilon",
                                  "no noise multiplier meets epsilon %g: even noise %g gives %g "
                                  "(the noise-free parts of the event or delta make it impossible)",
                                  target, hi / 4.0, e);
            }
            if ((m = probe(c, hi, target, &e, err)) < 0)
                return err->code;
            if (m) {
                e_hi = e;
                break;
            }
        }
        lo = hi / 4.0;
    }
    return bisect_log(c, target, hi, e_hi, lo, "noise", out, err); /* lo fails, hi meets */
}

/* Largest q meeting the target: 1 if it does, else bracket downwards by factors of 4. */
static int solve_rate(calib *c, double target, acct_calib_result *out, dp_err *err)
{
    double e, e_lo = HUGE_VAL, hi = 1.0, lo;
    int m = probe(c, 1.0, target, &e, err);
    if (m < 0)
        return err->code;
    if (m) {
        out->value = 1.0;
        out->epsilon = e;
        return DP_OK;
    }
    for (lo = 0.25;; lo *= 0.25) {
        if (lo < ACCT_CALIB_Q_MIN) {
            return dp_err_set(err, DP_ENUMERIC, "target_epsilon",
                              "no sampling rate meets epsilon %g: even rate %g gives %g", target,
                              lo * 4.0, e);
        }
        if ((m = probe(c, lo, target, &e, err)) < 0)
            return err->code;
        if (m) {
            e_lo = e;
            break;
        }
        hi = lo;
    }
    return bisect_log(c, target, lo, e_lo, hi, "sampling-rate", out, err); /* lo meets, hi fails */
}

/* Largest count meeting the target: doubling from 1, then integer bisection. */
static int solve_count(calib *c, double target, acct_calib_result *out, dp_err *err)
{
    double e, e_lo;
    int m = probe(c, 1.0, target, &e_lo, err);
    if (m < 0)
        return err->code;
    if (!m) {
        return dp_err_set(err, DP_ENUMERIC, "target_epsilon",
                          "no count meets epsilon %g: a single repetition gives %g", target, e_lo);
    }
    const double cmax = (double)ACCT_EVENT_MAX_COUNT;
    double lo = 1.0, hi = 2.0;
    for (;;) { /* grow until a failing count is found */
        if ((m = probe(c, hi, target, &e, err)) < 0)
            return err->code;
        if (!m)
            break;
        lo = hi;
        e_lo = e;
        if (hi >= cmax) {
            out->value = cmax;
            out->epsilon = e;
            return DP_OK;
        }
        hi = hi * 2.0 > cmax ? cmax : hi * 2.0;
    }
    while (hi - lo > 1.0) { /* lo meets, hi fails; both integers */
        double mid = floor((lo + hi) / 2.0);
        if ((m = probe(c, mid, target, &e, err)) < 0)
            return err->code;
        if (m) {
            lo = mid;
            e_lo = e;
        } else {
            hi = mid;
        }
    }
    out->value = lo;
    out->epsilon = e_lo;
    return DP_OK;
}

int acct_calibrate(const acct_event *ev, double target_eps, acct_eps_fn fn, void *ctx,
                   acct_calib_result *out, dp_err *err)
{
    int rc = acct_event_check(ev, true, err);
    if (rc != DP_OK)
        return rc;
    if (!isfinite(target_eps) || target_eps <= 0.0)
        return dp_err_set(err, DP_EINVAL, "target_epsilon",
                          "target_epsilon must be finite and > 0, got %g", target_eps);
    unsigned k = acct_event_open_params(ev);
    if (k != ACCT_OPEN_NOISE && k != ACCT_OPEN_RATE && k != ACCT_OPEN_COUNT)
        return dp_err_set(err, DP_EINVAL, "", /* the whole tree: its root */
                          k == 0 ? "the event has no open parameter (set a noise_multiplier, "
                                   "sampling_rate or count to null)"
                                 : "the event mixes open parameters of different kinds; leave "
                                   "exactly one kind open");
    calib c = {ev, k, fn, ctx, 0};
    out->kind = k;
    if (k == ACCT_OPEN_NOISE)
        rc = solve_noise(&c, target_eps, out, err);
    else if (k == ACCT_OPEN_RATE)
        rc = solve_rate(&c, target_eps, out, err);
    else
        rc = solve_count(&c, target_eps, out, err);
    out->evaluations = c.evals;
    return rc;
}

int acct_calib_rdp_eps(const acct_event *ev, void *ctx, double *eps, dp_err *err)
{
    acct_calib_rdp_ctx *c = ctx;
    acct_rdp_answer a;
    int rc = acct_rdp_epsilon(ev, c->nb, c->delta, c->conv, c->orders, c->n_orders, &a, err);
    if (rc == DP_OK) {
        *eps = a.value;
        c->last_order = a.optimal_order;
    }
    return rc;
}

int acct_calib_zcdp_eps(const acct_event *ev, void *ctx, double *eps, dp_err *err)
{
    acct_calib_zcdp_ctx *c = ctx;
    double rho;
    int rc = acct_zcdp_eval(ev, &rho, err);
    if (rc != DP_OK)
        return rc;
    return acct_zcdp_to_epsilon(rho, c->delta, c->conv, eps, NULL, err);
}
