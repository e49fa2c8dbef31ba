/*
 * federated/fl_algo_plan.c: the privacy plan of a silo (its sampling rate, steps and the
 * accounting event of one round), the epsilon of a job as the ledger will compute it, and the
 * calibration of the noise multiplier to a target epsilon.
 *
 * The plan counts exactly what the trainer runs (fl_algo.c, fl_silo_sgd): in each of the T rounds
 * a silo that trains runs steps_factor * local_epochs * floor(n_k / B_k) steps of the Poisson
 * subsampled Gaussian at q_k = B_k / n_k (Mironov, Talwar & Zhang 2019), B_k = min(B, n_k). Liu et
 * al. ("On Privacy and Personalization in Cross-Silo Federated Learning", NeurIPS 2022, App. A)
 * count T + 1 rounds because their loops run T + 1 times; here both count T.
 *
 * THE LEDGER'S EPSILON. The service charges a silo once per round with the round's event; the
 * ledger adds the events' RDP curves on its order grid rounding upward (dp_sum_up) and converts
 * the sum at the silo's delta with the silo's conversion, taking the grid minimum or a smaller
 * continuous-order refinement of it. fl_plan_epsilon bounds that from above: the T-fold upward sum
 * of a term x is at most T x (1 + eps_mach)^(T-1) <= T x (1 + 2 T eps_mach) (each addition rounds
 * up by at most one ulp, a relative eps_mach = DBL_EPSILON; (1 + u)^n <= 1 + 2 n u while
 * n u <= 1/2, which T <= FL_MAX_ROUNDS guarantees), computed with upward products, then
 * converted on the grid. Calibrating against fl_plan_epsilon itself (acct_calibrate keeps the
 * bracket end that meets the target under the callback) therefore gives a noise multiplier whose
 * ledger epsilon never exceeds the target, and the slack is the grid's (the continuous order
 * refinement can only lower the ledger's figure) plus ~1e-11 relative.
 */
#include "federated/fl_algo.h"
#include "federated/fl_algo_impl.h"

#include <float.h>
#include <math.h>

#include "accounting/calibrate.h"
#include "accounting/logmath.h"
#include "common/dp_alloc.h"
#include "common/dp_math.h"

/* The round event of silo k with noise multiplier z (NAN: open, for calibration). */
static acct_event *round_event(const fl_algo_ops *a, const fl_job_cfg *cfg, size_t n_k, double z)
{
    if (!a->record_level)
        return acct_event_poisson(cfg->client_rate, acct_event_gaussian(z));
    size_t b = cfg->batch_size < n_k ? cfg->batch_size : n_k;
    uint64_t steps = (uint64_t)a->steps_factor * cfg->local_epochs * (uint64_t)(n_k / b);
    return acct_event_self_composed(
        steps, acct_event_poisson((double)b / (double)n_k, acct_event_gaussian(z)));
}

int fl_plan_silo(const fl_job_cfg *cfg, size_t silo, size_t n_k, fl_silo_plan *out, acct_event **ev,
                 dp_err *err)
{
    if (ev != NULL)
        *ev = NULL;
    if (fl_job_cfg_check(cfg, NULL, err) != DP_OK)
        return err != NULL ? err->code : DP_EINVAL;
    const fl_algo_ops *a = fl_algo_find(cfg->algorithm);
    if (n_k < 1)
        return dp_err_set(err, DP_EINVAL, "n_train", "a silo needs >= 1 training row");
    fl_silo_plan p = {0};
    p.record_level = a->record_level;
    if (a->record_level) {
        p.batch = cfg->batch_size < n_k ? cfg->batch_size : n_k;
        p.q = (double)p.batch / (double)n_k;
        p.steps_per_round = (uint64_t)a->steps_factor * cfg->local_epochs * (n_k / p.batch);
        p.noise_multiplier = cfg->noise_multiplier != NULL ? cfg->noise_multiplier[silo] : 0.0;
        if (!(isfinite(p.noise_multiplier) && p.noise_multiplier >= 0))
            return dp_err_set(err, DP_EINVAL, "noise_multiplier",
                              "noise_multiplier[%zu] must be finite and >= 0 (got %g)", silo,
                              p.noise_multiplier);
        p.is_private = p.noise_multiplier > 0 && cfg->clip > 0;
    } else {
        p.q = cfg->client_rate;
        p.noise_multiplier = cfg->server_noise;
        p.steps_per_round = 1;
        p.is_private = cfg->server_noise > 0;
    }
    p.steps_total = p.steps_per_round * cfg->rounds;
    if (ev != NULL && p.is_private) {
        *ev = round_event(a, cfg, n_k, p.noise_multiplier);
        if (*ev == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    *out = p;
    return DP_OK;
}

static int accountant_check(const fl_accountant *acct, const double **orders, size_t *n,
                            dp_err *err)
{
    if (!(acct->delta > 0 && acct->delta < 1))
        return dp_err_set(err, DP_EINVAL, "delta", "delta must be in (0, 1) (got %g)", acct->delta);
    if (acct->conv < ACCT_CONV_MIRONOV2017 || acct->conv > ACCT_CONV_OPTIMAL)
        return dp_err_set(err, DP_EINVAL, "conversion", "unknown conversion");
    if (acct->orders == NULL) {
        *n = acct_rdp_default_orders(orders);
        return DP_OK;
    }
    *orders = acct->orders;
    *n = acct->n_orders;
    return acct_rdp_check_orders(acct->orders, acct->n_orders, err);
}

int fl_plan_round_curve(const acct_event *round_ev, const fl_accountant *acct, double **curve,
                        size_t *n, dp_err *err)
{
    const double *orders = NULL;
    *curve = NULL;
    *n = 0;
    if (accountant_check(acct, &orders, n, err) != DP_OK)
        return err != NULL ? err->code : DP_EINVAL;
    if (round_ev == NULL)
        return dp_err_set(err, DP_EINVAL, "round_event", "a non-private round has no curve");
    *curve = dp_calloc(*n, sizeof(double));
    if (*curve == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    int rc = acct_rdp_eval(round_ev, ACCT_NB_ADD_REMOVE, orders, *n, *curve, err);
    if (rc != DP_OK) {
        dp_free(*curve);
        *curve = NULL;
    }
    return rc;
}

int fl_plan_epsilon_curve(const double *round_curve, size_t n_orders, uint64_t rounds,
                          const fl_accountant *acct, double *eps, dp_err *err)
{
    const double *orders = NULL;
    size_t n = 0;
    if (accountant_check(acct, &orders, &n, err) != DP_OK)
        return err != NULL ? err->code : DP_EINVAL;
    if (n != n_orders)
        return dp_err_set(err, DP_EINVAL, "orders", "the curve has %zu orders, the grid %zu",
                          n_orders, n);
    if (rounds > FL_MAX_ROUNDS)
        return dp_err_set(err, DP_EINVAL, "rounds", "rounds must be <= %d", FL_MAX_ROUNDS);
    if (rounds == 0) {
        *eps = 0;
        return DP_OK;
    }
    double *curve = dp_calloc(n, sizeof(double));
    if (curve == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    double t = (double)rounds;
    double grow = dp_sum_up(1.0, 2.0 * t * DBL_EPSILON); /* exact operands: 2 t is an int */
    for (size_t i = 0; i < n; i++)
        curve[i] = isfinite(round_curve[i]) && round_curve[i] > 0
                       ? dp_mul_up(grow, dp_mul_up(t, round_curve[i]))
                       : round_curve[i];
    double opt;
    int rc = acct_rdp_to_epsilon(orders, curve, n, acct->delta, acct->conv, eps, &opt, err);
    dp_free(curve);
    return rc;
}

int fl_plan_epsilon(const acct_event *round_ev, uint64_t rounds, const fl_accountant *acct,
                    double *eps, dp_err *err)
{
    const double *orders = NULL;
    size_t n = 0;
    if (accountant_check(acct, &orders, &n, err) != DP_OK)
        return err != NULL ? err->code : DP_EINVAL;
    if (rounds > FL_MAX_ROUNDS)
        return dp_err_set(err, DP_EINVAL, "rounds", "rounds must be <= %d", FL_MAX_ROUNDS);
    if (round_ev == NULL) { /* no noise: no guarantee */
        *eps = DP_INF;
        return DP_OK;
    }
    if (rounds == 0) {
        *eps = 0;
        return DP_OK;
    }
    double *curve = NULL;
    int rc = fl_plan_round_curve(round_ev, acct, &curve, &n, err);
    if (rc == DP_OK)
        rc = fl_plan_epsilon_curve(curve, n, rounds, acct, eps, err);
    dp_free(curve);
    return rc;
}

typedef struct calib_ctx {
    uint64_t rounds;
    const fl_accountant *acct;
} calib_ctx;

static int calib_eps(const acct_event *ev, void *ctx, double *eps, dp_err *err)
{
    const calib_ctx *c = ctx;
    return fl_plan_epsilon(ev, c->rounds, c->acct, eps, err);
}

int fl_calibrate_noise(const fl_job_cfg *cfg, size_t n_k, double target_eps,
                       const fl_accountant *acct, double *noise_multiplier, double *eps,
                       dp_err *err)
{
    if (fl_job_cfg_check(cfg, NULL, err) != DP_OK)
        return err != NULL ? err->code : DP_EINVAL;
    const fl_algo_ops *a = fl_algo_find(cfg->algorithm);
    if (a->record_level && n_k < 1)
        return dp_err_set(err, DP_EINVAL, "n_train", "a silo needs >= 1 training row");
    if (a->record_level && !(cfg->clip > 0))
        return dp_err_set(err, DP_EINVAL, "clip", "calibrating noise needs clip > 0");
    if (!(isfinite(target_eps) && target_eps > 0))
        return dp_err_set(err, DP_EINVAL, "epsilon", "epsilon must be finite and > 0 (got %g)",
                          target_eps);
    const double *orders;
    size_t n;
    if (accountant_check(acct, &orders, &n, err) != DP_OK)
        return err != NULL ? err->code : DP_EINVAL;
    acct_event *ev = round_event(a, cfg, n_k, DP_NAN);
    if (ev == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    calib_ctx c = {cfg->rounds, acct};
    acct_calib_result r;
    int rc = acct_calibrate(ev, target_eps, calib_eps, &c, &r, err);
    acct_event_free(ev);
    if (rc != DP_OK)
        return rc;
    *noise_multiplier = r.value;
    *eps = r.epsilon;
    return DP_OK;
}
