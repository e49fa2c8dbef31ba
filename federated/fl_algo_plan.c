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
#include <stdlib.h>
#include <string.h>

#include "accounting/calibrate.h"
#include "accounting/logmath.h"
#include "common/dp_alloc.h"
#include "common/dp_math.h"

/* The round event of silo k with noise multiplier z (NAN: open, for calibration). */
static acct_event *round_event(const fl_algo_ops *a, const fl_job_cfg *cfg, size_t n_k, double z)
{
    if (!a->record_level && a->round_event != NULL)
        return a->round_event(cfg, z);
    if (!a->record_level)
        return acct_event_poisson(cfg->client_rate, acct_event_gaussian(z));
    size_t b = cfg->batch_size < n_k ? cfg->batch_size : n_k;
    uint64_t steps = (uint64_t)a->steps_factor * cfg->local_epochs * (uint64_t)(n_k / b);
    return acct_event_self_composed(
        steps, acct_event_poisson((double)b / (double)n_k, acct_event_gaussian(z)));
}

/* The selection rounds of cfg (0 without a private selection step). */
static uint64_t pick_rounds(const fl_algo_ops *a, const fl_job_cfg *cfg)
{
    return a->pick_rounds != NULL ? a->pick_rounds(cfg) : 0;
}

/* The event of a selection round: composed(round event at z, the pick event). */
static acct_event *pick_round_event(const fl_algo_ops *a, const fl_job_cfg *cfg, size_t n_k,
                                    double z)
{
    acct_event *parts[2] = {round_event(a, cfg, n_k, z), a->pick_event(cfg)};
    return acct_event_composed(parts, 2);
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
        p.noise_multiplier = a->silo_noise != NULL ? a->silo_noise(cfg, silo) : cfg->server_noise;
        p.steps_per_round = 1;
        p.is_private = p.noise_multiplier > 0 && (a->releases == NULL || a->releases(cfg));
    }
    p.steps_total = p.steps_per_round * cfg->rounds;
    p.select_epsilon = DP_NAN;
    if (p.is_private && a->record_level && (p.select_rounds = pick_rounds(a, cfg)) > 0) {
        if (!(isfinite(cfg->ifca_select_eps) && cfg->ifca_select_eps > 0))
            return dp_err_set(err, DP_EINVAL, "ifca.selection_epsilon",
                              "a private %s job's cluster selection must be private: "
                              "ifca.selection_epsilon must be finite and > 0",
                              a->name);
        p.select_epsilon = cfg->ifca_select_eps;
    }
    if (ev != NULL && p.is_private) {
        *ev = round_event(a, cfg, n_k, p.noise_multiplier);
        if (*ev == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    *out = p;
    return DP_OK;
}

int fl_plan_silo_select(const fl_job_cfg *cfg, const fl_silo_plan *plan, const acct_event *round_ev,
                        acct_event **select_event, dp_err *err)
{
    *select_event = NULL;
    const fl_algo_ops *a = fl_algo_find(cfg->algorithm);
    if (a == NULL)
        return dp_err_set(err, DP_EINVAL, "algorithm", "unknown algorithm");
    if (plan->select_rounds == 0)
        return DP_OK;
    if (round_ev == NULL || a->pick_event == NULL)
        return dp_err_set(err, DP_EINVAL, "round_event", "a selection round needs the round event");
    acct_event *parts[2] = {acct_event_clone(round_ev), a->pick_event(cfg)};
    *select_event = acct_event_composed(parts, 2);
    return *select_event != NULL ? DP_OK : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
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

/* fl_plan_epsilon's figure from a round curve on `orders` (any subset of the grid, n entries): the
 * rounds-fold upward sum bounded by grow * t * r (file comment), converted and minimised over
 * those orders. Every order's value is computed the same way whatever the subset, so the minimum
 * over a subset is never below the minimum over the whole grid. rounds >= 1. */
static int plan_eps_orders(const double *orders, const double *round_curve, const double *sel_curve,
                           size_t n, uint64_t rounds, uint64_t n_sel, const fl_accountant *acct,
                           double *eps, dp_err *err)
{
    double *curve = dp_calloc(n, sizeof(double));
    if (curve == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    double t = (double)rounds;
    double grow = dp_sum_up(1.0, 2.0 * t * DBL_EPSILON); /* exact operands: 2 t is an int */
    for (size_t i = 0; i < n; i++) {
        if (n_sel == 0) {
            curve[i] = isfinite(round_curve[i]) && round_curve[i] > 0
                           ? dp_mul_up(grow, dp_mul_up(t, round_curve[i]))
                           : round_curve[i];
            continue;
        }
        /* (t - s) x + s y, each product and the sum rounded upward, then the ledger's growth */
        double r = round_curve[i], y = sel_curve[i];
        if (!(isfinite(r) && isfinite(y))) {
            curve[i] = isnan(r) || isnan(y) ? DP_NAN : DP_INF;
            continue;
        }
        double part = dp_sum_up(dp_mul_up((double)(rounds - n_sel), r > 0 ? r : 0.0),
                                dp_mul_up((double)n_sel, y > 0 ? y : 0.0));
        curve[i] = part > 0 ? dp_mul_up(grow, part) : 0.0;
    }
    double opt;
    int rc = acct_rdp_to_epsilon(orders, curve, n, acct->delta, acct->conv, eps, &opt, err);
    dp_free(curve);
    return rc;
}

int fl_plan_epsilon_curve(const double *round_curve, size_t n_orders, uint64_t rounds,
                          const fl_accountant *acct, double *eps, dp_err *err)
{
    return fl_plan_epsilon_curves(round_curve, NULL, n_orders, rounds, 0, acct, eps, err);
}

int fl_plan_epsilon_curves(const double *round_curve, const double *select_curve, size_t n_orders,
                           uint64_t rounds, uint64_t n_sel, const fl_accountant *acct, double *eps,
                           dp_err *err)
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
    if (n_sel > rounds || (n_sel > 0 && select_curve == NULL))
        return dp_err_set(err, DP_EINVAL, "select_rounds",
                          "the selection rounds (%llu) must be covered by the rounds (%llu)",
                          (unsigned long long)n_sel, (unsigned long long)rounds);
    if (rounds == 0) {
        *eps = 0;
        return DP_OK;
    }
    return plan_eps_orders(orders, round_curve, select_curve, n, rounds, n_sel, acct, eps, err);
}

int fl_plan_epsilon(const acct_event *round_ev, uint64_t rounds, const fl_accountant *acct,
                    double *eps, dp_err *err)
{
    return fl_plan_epsilon_select(round_ev, NULL, rounds, 0, acct, eps, err);
}

int fl_plan_epsilon_select(const acct_event *round_ev, const acct_event *select_ev, uint64_t rounds,
                           uint64_t n_sel, const fl_accountant *acct, double *eps, dp_err *err)
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
    if (n_sel > 0 && select_ev == NULL)
        return dp_err_set(err, DP_EINVAL, "select_event", "selection rounds need their event");
    double *curve = NULL, *sel = NULL;
    size_t n_sel_orders = 0;
    int rc = fl_plan_round_curve(round_ev, acct, &curve, &n, err);
    if (rc == DP_OK && n_sel > 0)
        rc = fl_plan_round_curve(select_ev, acct, &sel, &n_sel_orders, err);
    if (rc == DP_OK)
        rc = fl_plan_epsilon_curves(curve, sel, n, rounds, n_sel, acct, eps, err);
    dp_free(sel);
    dp_free(curve);
    return rc;
}

/* ---- calibration ----
 * The search brackets the answer between two noise multipliers, each certified against
 * fl_plan_epsilon on the whole grid without evaluating the whole grid:
 *   FAILS: L(z) > target, L the grid minimum of the rounds-fold self-composition of the round event
 *          (acct_rdp_epsilon with the base conversion: its bound-pruned search returns the
 *          full-scan minimum evaluating a few orders). fl_plan_epsilon's curve is that
 *          composition's curve times grow >= 1 rounded upward, and the conversion is
 *          non-decreasing in the RDP, so fl_plan_epsilon(z) >= L(z) > target.
 *   MEETS: U(z) <= target, U fl_plan_epsilon's own per-order figure (plan_eps_orders) minimised
 *          over a window of grid orders around L's optimal order: a minimum over a subset of the
 *          grid, so fl_plan_epsilon(z) <= U(z) <= target. This is the safety property: the
 *          ledger's epsilon (<= fl_plan_epsilon) never exceeds the target.
 * The bracket [lo, hi] (lo fails, hi meets) is narrowed to relative ACCT_CALIB_RTOL by the
 * Illinois variant of regula falsi on log L against log z (nearly linear: far fewer probes than
 * bisection), then hi is certified by U, stepping up by a few multiples of the tolerance if U
 * (which carries fl_plan_epsilon's ~1e-13 relative rounding slack) misses; the minimal noise lies
 * in [lo, hi]. Should the window miss the minimum repeatedly, the plain bisection on
 * fl_plan_epsilon (acct_calibrate) decides. */
#define FL_CALIB_WINDOW  4  /* grid orders either side of L's optimal order in U */
#define FL_CALIB_CERTIFY 40 /* step-ups of hi before the plain bisection decides */

typedef struct calib_ctx {
    uint64_t rounds;
    uint64_t n_sel; /* selection rounds: ev is then composed(round event, pick event) */
    const fl_accountant *acct;
} calib_ctx;

static int calib_eps(const acct_event *ev, void *ctx, double *eps, dp_err *err)
{
    const calib_ctx *c = ctx;
    if (c->n_sel == 0)
        return fl_plan_epsilon(ev, c->rounds, c->acct, eps, err);
    return fl_plan_epsilon_select(ev->children[0], ev, c->rounds, c->n_sel, c->acct, eps, err);
}

/* One silo's calibration problem. */
typedef struct calib_job {
    const fl_algo_ops *a;
    const fl_job_cfg *cfg;
    size_t n_k;
    uint64_t n_sel; /* selection rounds (pick_rounds) */
    double target;
    const fl_accountant *acct;
    const double *sorted; /* the grid, ascending */
    size_t n;
    int evals; /* L and U evaluations (for the tests) */
} calib_job;

static int cmp_dbl(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* L(z) and the order attaining it (NAN when infinite). */
static int calib_lower(calib_job *j, double z, double *eps, double *order, dp_err *err)
{
    uint64_t t = j->cfg->rounds, s = j->n_sel;
    acct_event *tot = NULL;
    if (s == 0) {
        acct_event *ev = round_event(j->a, j->cfg, j->n_k, z);
        tot = ev != NULL ? acct_event_self_composed(t, ev) : NULL;
    } else {
        acct_event *parts[2] = {
            acct_event_self_composed(s, pick_round_event(j->a, j->cfg, j->n_k, z)),
            t > s ? acct_event_self_composed(t - s, round_event(j->a, j->cfg, j->n_k, z)) : NULL};
        tot = t > s ? acct_event_composed(parts, 2) : parts[0];
    }
    if (tot == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    acct_conversion base =
        j->acct->conv == ACCT_CONV_MIRONOV2017 ? ACCT_CONV_MIRONOV2017 : ACCT_CONV_BALLE2020;
    acct_rdp_answer ans;
    j->evals++;
    int rc =
        acct_rdp_epsilon(tot, ACCT_NB_ADD_REMOVE, j->acct->delta, base, j->sorted, j->n, &ans, err);
    acct_event_free(tot);
    if (rc != DP_OK)
        return rc;
    if (isnan(ans.value))
        return dp_err_set(err, DP_ENUMERIC, NULL, "accountant returned NaN");
    *eps = ans.value;
    *order = ans.optimal_order;
    return DP_OK;
}

/* U(z) on the window of the sorted grid around `order` (a grid order, or NAN: the whole grid). */
static int calib_upper(calib_job *j, double z, double order, double *eps, dp_err *err)
{
    size_t lo = 0, hi = j->n; /* [lo, hi) */
    if (!isnan(order)) {
        size_t c = 0;
        while (c + 1 < j->n && j->sorted[c] < order)
            c++;
        lo = c > FL_CALIB_WINDOW ? c - FL_CALIB_WINDOW : 0;
        hi = c + FL_CALIB_WINDOW + 1 < j->n ? c + FL_CALIB_WINDOW + 1 : j->n;
    }
    acct_event *ev = round_event(j->a, j->cfg, j->n_k, z);
    acct_event *sev = j->n_sel > 0 ? pick_round_event(j->a, j->cfg, j->n_k, z) : NULL;
    double *curve = dp_calloc(2 * (hi - lo), sizeof(double));
    int rc = DP_OK;
    if (ev == NULL || curve == NULL || (j->n_sel > 0 && sev == NULL))
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    j->evals++;
    if (rc == DP_OK)
        rc = acct_rdp_eval(ev, ACCT_NB_ADD_REMOVE, j->sorted + lo, hi - lo, curve, err);
    if (rc == DP_OK && sev != NULL)
        rc =
            acct_rdp_eval(sev, ACCT_NB_ADD_REMOVE, j->sorted + lo, hi - lo, curve + (hi - lo), err);
    if (rc == DP_OK)
        rc = plan_eps_orders(j->sorted + lo, curve, curve + (hi - lo), hi - lo, j->cfg->rounds,
                             j->n_sel, j->acct, eps, err);
    acct_event_free(sev);
    acct_event_free(ev);
    dp_free(curve);
    return rc;
}

/* log(eps / target) for the regula falsi (finite stand-ins at 0 and infinity). */
static double calib_f(double eps, double target)
{
    if (!(eps > 0))
        return -1e3;
    if (!isfinite(eps))
        return 1e3;
    return log(eps / target);
}

/* The smallest z (to ACCT_CALIB_RTOL) with fl_plan_epsilon(z) <= target, starting from guess
 * (> 0) whose bracket is widened by factors of step. *done = false: the window missed (the caller
 * falls back to the plain bisection). */
static int calib_search(calib_job *j, double guess, double step, double *z_out, double *eps_out,
                        bool *done, dp_err *err)
{
    const double target = j->target;
    double lo, hi, flo, fhi, e, ord, ord_hi = DP_NAN;
    int rc;
    *done = false;
    if ((rc = calib_lower(j, guess, &e, &ord, err)) != DP_OK)
        return rc;
    bool floor_hit = false;
    if (e <= target) {
        hi = guess;
        fhi = calib_f(e, target);
        ord_hi = ord;
        for (lo = hi / step;; lo /= step) {
            if (lo < ACCT_CALIB_SIGMA_MIN) { /* everything down to the floor meets it */
                floor_hit = true;
                lo = hi;
                flo = fhi;
                break;
            }
            if ((rc = calib_lower(j, lo, &e, &ord, err)) != DP_OK)
                return rc;
            if (e > target) {
                flo = calib_f(e, target);
                break;
            }
            hi = lo;
            fhi = calib_f(e, target);
            ord_hi = ord;
        }
    } else {
        lo = guess;
        flo = calib_f(e, target);
        for (hi = guess * step;; hi *= step) {
            if (hi > ACCT_CALIB_SIGMA_MAX) {
                return dp_err_set(err, DP_ENUMERIC, "target_epsilon",
                                  "no noise multiplier meets epsilon %g: even noise %g gives %g "
                                  "(the noise-free parts of the event or delta make it impossible)",
                                  target, hi / step, e);
            }
            if ((rc = calib_lower(j, hi, &e, &ord, err)) != DP_OK)
                return rc;
            if (e <= target) {
                fhi = calib_f(e, target);
                ord_hi = ord;
                break;
            }
            lo = hi;
            flo = calib_f(e, target);
        }
    }
    /* Illinois regula falsi in x = log z: lo fails, hi meets */
    double xl = log(lo), xh = log(hi), tol = log1p(ACCT_CALIB_RTOL);
    int side = 0;
    for (int it = 0; !floor_hit && xh - xl > tol; it++) {
        if (it >= ACCT_CALIB_MAX_ITER)
            return dp_err_set(err, DP_ENUMERIC, NULL, "noise calibration did not converge");
        double x = flo - fhi != 0 ? xh - fhi * (xh - xl) / (fhi - flo) : 0.5 * (xl + xh);
        double m = 0.25 * tol; /* keep the probe strictly inside, so the bracket shrinks */
        if (!(x > xl + m))
            x = xl + m;
        if (!(x < xh - m))
            x = xh - m;
        if ((rc = calib_lower(j, exp(x), &e, &ord, err)) != DP_OK)
            return rc;
        double fx = calib_f(e, target);
        if (e <= target) {
            xh = x;
            fhi = fx;
            ord_hi = ord;
            if (side == 1)
                flo *= 0.5;
            side = 1;
        } else {
            xl = x;
            flo = fx;
            if (side == -1)
                fhi *= 0.5;
            side = -1;
        }
    }
    /* certify hi with fl_plan_epsilon's own figures */
    double z = floor_hit ? hi : exp(xh);
    for (int k = 0; k < FL_CALIB_CERTIFY; k++) {
        if (k > 0) {
            z *= 1.0 + ACCT_CALIB_RTOL * (double)(1u << (k < 20 ? k : 20));
            if ((rc = calib_lower(j, z, &e, &ord_hi, err)) != DP_OK)
                return rc;
        }
        if ((rc = calib_upper(j, z, ord_hi, &e, err)) != DP_OK)
            return rc;
        if (e <= target) {
            *z_out = z;
            *eps_out = e;
            *done = true;
            return DP_OK;
        }
    }
    return DP_OK;
}

/* Checks shared by the single and the batch calibration; *a receives the algorithm. */
static int calib_check(const fl_job_cfg *cfg, double target_eps, const fl_algo_ops **a, dp_err *err)
{
    if (fl_job_cfg_check(cfg, NULL, err) != DP_OK)
        return err != NULL ? err->code : DP_EINVAL;
    *a = fl_algo_find(cfg->algorithm);
    if ((*a)->record_level && !(cfg->clip > 0))
        return dp_err_set(err, DP_EINVAL, "clip", "calibrating noise needs clip > 0");
    if (!(isfinite(target_eps) && target_eps > 0))
        return dp_err_set(err, DP_EINVAL, "epsilon", "epsilon must be finite and > 0 (got %g)",
                          target_eps);
    return DP_OK;
}

/* One silo: guess > 0 and step > 1 start the bracket (1 and 4 without a better guess). */
static int calibrate_one(const fl_algo_ops *a, const fl_job_cfg *cfg, size_t n_k, double target_eps,
                         const fl_accountant *acct, double guess, double step,
                         double *noise_multiplier, double *eps, dp_err *err)
{
    if (a->record_level && n_k < 1)
        return dp_err_set(err, DP_EINVAL, "n_train", "a silo needs >= 1 training row");
    if (a->releases != NULL && !a->releases(cfg)) { /* nothing released: no noise, no cost */
        *noise_multiplier = 0.0;
        *eps = 0.0;
        return DP_OK;
    }
    const double *orders;
    size_t n;
    if (accountant_check(acct, &orders, &n, err) != DP_OK)
        return err != NULL ? err->code : DP_EINVAL;
    double *sorted = dp_malloc(n * sizeof *sorted);
    if (sorted == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    memcpy(sorted, orders, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_dbl);
    uint64_t n_sel = a->record_level ? pick_rounds(a, cfg) : 0;
    if (n_sel > 0 && !(isfinite(cfg->ifca_select_eps) && cfg->ifca_select_eps > 0)) {
        dp_free(sorted);
        return dp_err_set(err, DP_EINVAL, "ifca.selection_epsilon",
                          "a private %s job's cluster selection must be private: "
                          "ifca.selection_epsilon must be finite and > 0",
                          a->name);
    }
    calib_job j = {a, cfg, n_k, n_sel, target_eps, acct, sorted, n, 0};
    bool done = false;
    int rc = calib_search(&j, guess, step, noise_multiplier, eps, &done, err);
    dp_free(sorted);
    if (rc != DP_OK || done)
        return rc;
    /* the window missed the minimum: the plain bisection on fl_plan_epsilon itself */
    acct_event *ev =
        n_sel > 0 ? pick_round_event(a, cfg, n_k, DP_NAN) : round_event(a, cfg, n_k, DP_NAN);
    if (ev == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    calib_ctx c = {cfg->rounds, n_sel, acct};
    acct_calib_result r;
    rc = acct_calibrate(ev, target_eps, calib_eps, &c, &r, err);
    acct_event_free(ev);
    if (rc != DP_OK)
        return rc;
    *noise_multiplier = r.value;
    *eps = r.epsilon;
    return DP_OK;
}

int fl_calibrate_noise(const fl_job_cfg *cfg, size_t n_k, double target_eps,
                       const fl_accountant *acct, double *noise_multiplier, double *eps,
                       dp_err *err)
{
    const fl_algo_ops *a;
    int rc = calib_check(cfg, target_eps, &a, err);
    if (rc != DP_OK)
        return rc;
    return calibrate_one(a, cfg, n_k, target_eps, acct, 1.0, 4.0, noise_multiplier, eps, err);
}

/* Silo order for the batch: by n_k (neighbours calibrate to neighbouring noise). */
typedef struct calib_key {
    size_t n_k;
    size_t k;
} calib_key;

static int cmp_key(const void *x, const void *y)
{
    const calib_key *a = x, *b = y;
    if (a->n_k != b->n_k)
        return (a->n_k > b->n_k) - (a->n_k < b->n_k);
    return (a->k > b->k) - (a->k < b->k);
}

static bool same_accountant(const fl_accountant *a, const fl_accountant *b)
{
    return a->delta == b->delta && a->conv == b->conv && a->n_orders == b->n_orders &&
           (a->orders == b->orders ||
            (a->orders != NULL && b->orders != NULL &&
             memcmp(a->orders, b->orders, a->n_orders * sizeof *a->orders) == 0));
}

int fl_calibrate_noise_many(const fl_job_cfg *cfg, size_t n_silos, const size_t *n_k,
                            double target_eps, const fl_accountant *const *acct,
                            double *noise_multiplier, double *eps, dp_err *err)
{
    const fl_algo_ops *a;
    int rc = calib_check(cfg, target_eps, &a, err);
    if (rc != DP_OK || n_silos == 0)
        return rc;
    calib_key *key = dp_malloc(n_silos * sizeof *key);
    if (key == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (size_t k = 0; k < n_silos; k++)
        key[k] = (calib_key){a->record_level ? n_k[k] : 0, k};
    qsort(key, n_silos, sizeof *key, cmp_key);
    double guess = 1.0, step = 4.0;
    for (size_t i = 0; i < n_silos && rc == DP_OK; i++) {
        size_t k = key[i].k;
        /* the same event and accountant as an earlier silo: the same answer */
        size_t same = n_silos;
        for (size_t p = i; p-- > 0 && key[p].n_k == key[i].n_k;)
            if (same_accountant(acct[key[p].k], acct[k])) {
                same = key[p].k;
                break;
            }
        if (same < n_silos) {
            noise_multiplier[k] = noise_multiplier[same];
            eps[k] = eps[same];
            continue;
        }
        rc = calibrate_one(a, cfg, n_k[k], target_eps, acct[k], guess, step, &noise_multiplier[k],
                           &eps[k], err);
        if (rc == DP_OK) {
            guess = noise_multiplier[k];
            step = 1.25;
        }
    }
    dp_free(key);
    return rc;
}
