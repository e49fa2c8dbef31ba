/*
 * routes_tuning.c: the price of a private hyperparameter search (issue #4; docs/TUNING.md).
 *
 *   POST /v1/tuning/cost       epsilon of a search, of one run, and of running every grid value
 *   POST /v1/tuning/plan       noise multiplier per run so that the whole search meets (eps, delta)
 *   POST /v1/tuning/draw       draws the number of runs K (and, with grid_size, which candidate
 *                              each run uses) with the kernel CSPRNG and records the draw
 *   GET  /v1/tuning/draws/{id} reads a recorded draw back (audit)
 *
 * Accounting: the search is the event {"type": "repeat_and_select", "event": run, "distribution":
 * D} evaluated by the RDP accountant (accounting/rdp.h, which hands the node to
 * accounting/tuning.h: Papernot & Steinke 2022 Thm. 2 / Thm. 6 with continuous auxiliary orders)
 * and converted with the continuous-order conversion (ACCT_CONV_OPTIMAL). Runs whose leaves are all
 * pure also get the pure bound (Liu & Talwar 2019 / PS22), and the smaller figure is the headline.
 * Calibration uses accounting/calibrate.h on the same tree with the noise multiplier left open.
 *
 * Randomness: getrandom(2) (flags 0: blocks only until the kernel pool is initialised at boot, then
 * never), 64-bit words. K comes from inverting the CDF at a 53-bit uniform; candidate indices from
 * rejection sampling (acct_tuning_uniform_index), so neither has modulo bias. No seed is accepted
 * or returned: the privacy analysis needs K to be unpredictable to whoever sees the results.
 *
 * Storage: one append-only row per draw in tuning_draws (migrations/0002_tuning_draws.sql), written
 * in one IMMEDIATE transaction after the draw is made (nothing slow inside the transaction).
 */
#include "service/routes.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "accounting/tuning.h"
#include "common/dp_alloc.h"
#include "common/dp_log.h"
#include "accounting/calibrate.h"
#include "accounting/rdp.h"
#include "service/auth.h"
#include "service/compute.h"
#include "service/event_json.h"
#include "service/json_util.h"
#include "service/tuning_json.h"
#include "common/dp_math.h"

#define TUNING_MAX_GRID   1000000 /* grid_size cap (same as the run cap) */
#define TUNING_MAX_LISTED 10000   /* candidates are listed only for K up to this */
#define TUNING_MAX_LABEL  200     /* bytes */

/* ---- randomness
 * ---------------------------------------------------------------------------------- */

static int getrandom64(void *ctx, uint64_t *out)
{
    (void)ctx;
    unsigned char buf[8];
    size_t got = 0;
    int tries = 0;
    while (got < sizeof buf) {
        ssize_t n = getrandom(buf + got, sizeof buf - got, 0);
        if (n < 0) {
            if (errno == EINTR && ++tries < 100)
                continue;
            return -1;
        }
        got += (size_t)n;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < sizeof buf; i++)
        w = (w << 8) | buf[i];
    *out = w;
    return 0;
}

/* ---- helpers
 * ------------------------------------------------------------------------------------- */

static const char SQL_INSERT_DRAW[] =
    "INSERT INTO tuning_draws (created_at_ms, request_id, distribution, runs, expected_runs, "
    "prob_no_run, grid_size, candidates, label, creator_token_id) "
    "VALUES (:created, :req, :dist, :runs, :mean, :p0, :grid, :cand, :label, nullif(:creator, 0))";
/* Issue 10: a draw is read by the admin, the token that made it or another token of its silo;
 * anyone else gets 404, as for a draw that does not exist (docs/BUDGETS.md "Access control"). */
static const char SQL_GET_DRAW[] =
    "SELECT id, created_at_ms, distribution, runs, grid_size, candidates, label, expected_runs, "
    "prob_no_run FROM tuning_draws AS d WHERE id = :id AND (:admin = 1 OR d.creator_token_id = "
    ":tok OR EXISTS (SELECT 1 FROM tokens t WHERE t.id = d.creator_token_id AND t.silo_id = "
    ":silo))";

/* The response/row object of one draw (all arguments borrowed; a new reference or NULL). */
static json_t *draw_json(int64_t id, int64_t created_ms, json_t *dist, int64_t runs, int64_t grid,
                         json_t *candidates, const char *label, double expected, double p0)
{
    json_t *o = json_object();
    dp_err e;
    dp_err_clear(&e);
    if (o == NULL || json_util_set(o, "id", json_integer(id), &e) != DP_OK ||
        json_util_set(o, "created_at", json_util_time(created_ms), &e) != DP_OK ||
        json_util_set(o, "runs", json_integer(runs), &e) != DP_OK ||
        json_util_set(o, "distribution", json_incref(dist), &e) != DP_OK ||
        json_util_set(o, "expected_runs", json_util_real(expected), &e) != DP_OK ||
        json_util_set(o, "prob_no_run", json_util_real(p0), &e) != DP_OK ||
        json_util_set(o, "grid_size", grid > 0 ? json_integer(grid) : json_null(), &e) != DP_OK ||
        json_util_set(o, "candidates", candidates ? json_incref(candidates) : json_null(), &e) !=
            DP_OK ||
        json_util_set(o, "label", label ? json_string(label) : json_null(), &e) != DP_OK) {
        json_decref(o);
        return NULL;
    }
    if (grid > 0 && candidates == NULL &&
        json_util_set(o, "candidates_reason",
                      json_string("more runs than the listing cap; draw indices client-side"),
                      &e) != DP_OK) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- shared
 * ---------------------------------------------------------------------------------------- */

static const char *bound_name(const acct_tuning_dist *d)
{
    switch (d->kind) {
        case ACCT_TUNE_FIXED:
            return "composition (Mironov 2017, Prop. 1)";
        case ACCT_TUNE_POISSON:
            return "Papernot & Steinke 2022, Thm. 6";
        case ACCT_TUNE_TRUNC_NEGBIN:
            return "Papernot & Steinke 2022, Thm. 2";
    }
    return "unknown";
}

/* The "accounting" block of a cost or plan response (a new reference, NULL when out of memory). */
static json_t *accounting_json(const acct_tuning_dist *d, acct_conversion conv, double order,
                               acct_neighboring nb)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:o, s:s}", "accountant", "rdp", "bound", bound_name(d),
                     "auxiliary_orders", "continuous", "conversion", acct_conversion_name(conv),
                     "optimal_order", json_util_real(order), "neighboring",
                     event_json_neighboring_name(nb));
}

/* Sets key to eps (or null with key_reason when infinite). */
static int set_eps(json_t *o, const char *key, double eps, dp_err *err)
{
    if (json_util_set(o, key, json_util_real(eps), err) != DP_OK)
        return err->code;
    if (!isfinite(eps)) {
        char rk[64];
        snprintf(rk, sizeof rk, "%s_reason", key);
        return json_util_set(o, rk, json_string("infinite: no finite bound at this delta"), err);
    }
    return DP_OK;
}

static int read_delta(const json_t *body, double *delta, dp_err *err)
{
    int rc = json_util_req_number(body, "delta", delta, err);
    if (rc != DP_OK)
        return rc;
    if (!(*delta > 0.0 && *delta < 1.0))
        return dp_err_set(err, DP_EINVAL, "delta", "delta must be in (0, 1) (got %g)", *delta);
    return DP_OK;
}

static int read_grid(const json_t *body, int64_t *grid, dp_err *err)
{
    int rc = json_util_opt_int(body, "grid_size", 0, grid, err);
    if (rc != DP_OK)
        return rc;
    const json_t *v = json_object_get(body, "grid_size");
    if (v && !json_is_null(v) && (*grid < 1 || *grid > ACCT_TUNING_MAX_K))
        return dp_err_set(err, DP_EINVAL, "grid_size", "grid_size must be in [1, %d] (got %lld)",
                          ACCT_TUNING_MAX_K, (long long)*grid);
    return DP_OK;
}

/* epsilon of ev at delta (continuous conversion); *ans (if not NULL) gets the whole answer. */
static int eps_of(const acct_event *ev, acct_neighboring nb, double delta, double *eps,
                  acct_rdp_answer *ans, dp_err *err)
{
    acct_rdp_answer a;
    int rc = acct_rdp_epsilon(ev, nb, delta, ACCT_CONV_OPTIMAL, NULL, 0, &a, err);
    if (rc != DP_OK)
        return rc;
    *eps = a.value;
    if (ans)
        *ans = a;
    return DP_OK;
}

/* ---- POST /v1/tuning/cost
 * -------------------------------------------------------------------------- */

int route_tuning_cost(const http_req *rq, http_resp *rs, dp_err *err)
{
    static const char *const keys[] = {"event", "distribution", "delta", "grid_size",
                                       "neighboring"};
    acct_event *base = NULL, *search = NULL;
    json_t *o = NULL;
    int rc;
    if ((rc = json_util_require_object(rq->body, NULL, err)) != DP_OK ||
        (rc = json_util_check_keys(rq->body, keys, 5, err)) != DP_OK)
        return rc;
    acct_neighboring nb;
    acct_tuning_dist d;
    double delta;
    int64_t grid = 0;
    const json_t *jd = json_object_get(rq->body, "distribution");
    if (jd == NULL)
        return dp_err_set(err, DP_EINVAL, "distribution", "distribution is required");
    if ((rc = event_json_parse(json_object_get(rq->body, "event"), false, "event", &base, err)) !=
            DP_OK ||
        (rc = tuning_json_parse_dist(jd, false, &d, err)) != DP_OK ||
        (rc = read_delta(rq->body, &delta, err)) != DP_OK ||
        (rc = read_grid(rq->body, &grid, err)) != DP_OK ||
        (rc = event_json_neighboring(rq->body, &nb, err)) != DP_OK ||
        (rc = acct_tuning_dist_resolve(&d, &d, err)) != DP_OK)
        goto out;
    search = acct_event_alloc(ACCT_EV_REPEAT_SELECT);
    if (search == NULL) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    search->child = base; /* owned by search from here */
    base = NULL;
    search->dist = d;

    double eps_one, eps_search, eps_naive = DP_NAN;
    acct_rdp_answer ans;
    if ((rc = eps_of(search->child, nb, delta, &eps_one, NULL, err)) != DP_OK ||
        (rc = eps_of(search, nb, delta, &eps_search, &ans, err)) != DP_OK)
        goto out;
    if (grid > 0) {
        search->dist = (acct_tuning_dist){ACCT_TUNE_FIXED, (uint64_t)grid, DP_NAN, DP_NAN, DP_NAN};
        rc = eps_of(search, nb, delta, &eps_naive, NULL, err);
        search->dist = d;
        if (rc != DP_OK)
            goto out;
    }
    /* Pure runs: the pure bounds hold for every delta, so the smaller figure is reported. */
    bool is_pure = false;
    double pure_one = DP_NAN, pure_search = DP_NAN, pure_naive = DP_NAN;
    if ((rc = acct_tuning_event_pure_epsilon(search->child, nb, &is_pure, &pure_one, err)) != DP_OK)
        goto out;
    if (is_pure) {
        if ((rc = acct_tuning_pure_epsilon(&d, pure_one, &pure_search, err)) != DP_OK)
            goto out;
        pure_naive = (double)grid * pure_one;
    }
    double head_search = is_pure ? fmin(eps_search, pure_search) : eps_search;
    double head_one = is_pure ? fmin(eps_one, pure_one) : eps_one;
    double head_naive = (grid > 0 && is_pure) ? fmin(eps_naive, pure_naive) : eps_naive;

    o = json_object();
    json_t *acc = accounting_json(&d, ans.conversion, ans.optimal_order, nb);
    json_t *pure = NULL;
    if (is_pure)
        pure = json_pack("{s:o, s:o, s:o, s:s}", "epsilon_one_run", json_util_real(pure_one),
                         "epsilon", json_util_real(pure_search), "epsilon_naive",
                         grid > 0 ? json_util_real(pure_naive) : json_null(), "bound",
                         d.kind == ACCT_TUNE_TRUNC_NEGBIN
                             ? "(2 + eta) eps: Papernot & Steinke 2022 Thm. 2 as orders -> inf "
                               "(eta = 1: Liu & Talwar 2019, 3 eps)"
                             : (d.kind == ACCT_TUNE_POISSON
                                    ? "eps + mu tanh(eps/2): Papernot & Steinke 2022 Thm. 6 as "
                                      "orders -> inf"
                                    : "k eps: composition"));
    if (o == NULL) {
        json_decref(acc);
        json_decref(pure);
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    /* json_util_set steals its value even on failure, so acc and pure are owned by o from here. */
    if (json_util_set(o, "accounting", acc, err) != DP_OK ||
        json_util_set(o, "pure", is_pure ? pure : json_null(), err) != DP_OK ||
        set_eps(o, "epsilon", head_search, err) != DP_OK ||
        set_eps(o, "epsilon_one_run", head_one, err) != DP_OK ||
        (grid > 0 ? set_eps(o, "epsilon_naive", head_naive, err)
                  : (json_util_set(o, "epsilon_naive", json_null(), err) ||
                     json_util_set(o, "epsilon_naive_reason", json_string("grid_size not given"),
                                   err))) != DP_OK ||
        json_util_set(o, "naive_runs", grid > 0 ? json_integer(grid) : json_null(), err) != DP_OK ||
        json_util_set(o, "delta", json_real(delta), err) != DP_OK ||
        json_util_set(o, "expected_runs", json_util_real(acct_tuning_expected_runs(&d)), err) !=
            DP_OK ||
        json_util_set(o, "prob_no_run", json_util_real(acct_tuning_prob_zero(&d)), err) != DP_OK ||
        json_util_set(o, "distribution", tuning_json_dist(&d), err) != DP_OK ||
        json_util_set(o, "epsilon_rdp", json_util_real(eps_search), err) != DP_OK) {
        rc = err->code ? err->code : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    rc = http_resp_json(rs, 200, o, err);
    o = NULL;
out:
    json_decref(o);
    acct_event_free(base);
    acct_event_free(search);
    return rc;
}

/* ---- POST /v1/tuning/plan
 * -------------------------------------------------------------------------- */

/* One training run: steps x poisson_sampled(q, gaussian(open)); q = 1 drops the sampling node and
 * steps = 1 the composition. Owned by caller, NULL on allocation failure. */
static acct_event *training_run(double q, int64_t steps)
{
    acct_event *g = acct_event_alloc(ACCT_EV_GAUSSIAN), *top = g;
    if (g == NULL)
        return NULL;
    g->noise_multiplier = DP_NAN;
    if (q < 1.0) {
        acct_event *p = acct_event_alloc(ACCT_EV_POISSON);
        if (p == NULL) {
            acct_event_free(top);
            return NULL;
        }
        p->sampling_rate = q;
        p->child = top;
        top = p;
    }
    if (steps > 1) {
        acct_event *sc = acct_event_alloc(ACCT_EV_SELF_COMPOSED);
        if (sc == NULL) {
            acct_event_free(top);
            return NULL;
        }
        sc->count = (uint64_t)steps;
        sc->child = top;
        top = sc;
    }
    return top;
}

/* A tuning plan, parsed: three or four calibrations (plan_run, on the compute pool: issue 10),
 * then the answer (plan_render). */
typedef struct plan_job {
    double eps, delta;
    int64_t grid;
    double q;
    int64_t steps;
    acct_neighboring nb;
    acct_tuning_dist d;
    acct_event *search; /* owned */
    acct_calib_result tuned, untuned, naive;
    double tuned_order;
} plan_job;

static void plan_job_free(void *arg)
{
    plan_job *j = arg;
    acct_event_free(j->search);
    dp_free(j);
}

static int plan_run(void *arg, const atomic_bool *cancel, dp_err *err)
{
    (void)cancel; /* a few bounded calibrations: not split */
    plan_job *j = arg;
    acct_calib_rdp_ctx cctx = {j->nb, j->delta, ACCT_CONV_OPTIMAL, NULL, 0, DP_NAN};
    acct_event *search = j->search = acct_event_alloc(ACCT_EV_REPEAT_SELECT);
    if (search == NULL || (search->child = training_run(j->q, j->steps)) == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    search->dist = j->d;
    int rc = acct_calibrate(search, j->eps, acct_calib_rdp_eps, &cctx, &j->tuned, err);
    if (rc != DP_OK) {
        if (err && strcmp(err->field, "target_epsilon") == 0) /* this endpoint calls it epsilon */
            snprintf(err->field, sizeof err->field, "epsilon");
        return rc;
    }
    j->tuned_order = cctx.last_order;
    if ((rc = acct_calibrate(search->child, j->eps, acct_calib_rdp_eps, &cctx, &j->untuned, err)) !=
        DP_OK)
        return rc;
    if (j->grid > 0) {
        search->dist =
            (acct_tuning_dist){ACCT_TUNE_FIXED, (uint64_t)j->grid, DP_NAN, DP_NAN, DP_NAN};
        rc = acct_calibrate(search, j->eps, acct_calib_rdp_eps, &cctx, &j->naive, err);
        search->dist = j->d;
        if (rc != DP_OK && rc != DP_ENUMERIC)
            return rc;
        if (rc == DP_ENUMERIC) { /* naive search cannot meet the target at all: say so */
            dp_err_clear(err);
            j->naive.value = HUGE_VAL;
        }
    }
    return DP_OK;
}

static int plan_render(void *arg, const http_req *rq, http_resp *rs, bool deferred, dp_err *err)
{
    (void)rq;
    (void)deferred;
    plan_job *j = arg;
    const acct_tuning_dist d = j->d;
    const acct_calib_result tuned = j->tuned, untuned = j->untuned, naive = j->naive;
    const int64_t grid = j->grid;
    int rc;
    json_t *o = json_object();
    json_t *runs =
        json_pack("{s:o, s:o, s:o, s:s}", "expected", json_util_real(acct_tuning_expected_runs(&d)),
                  "prob_no_run", json_util_real(acct_tuning_prob_zero(&d)), "distribution",
                  tuning_json_dist(&d), "draw",
                  "POST /v1/tuning/draw with this distribution draws the number of runs");
    /* The bound used, as /v1/tuning/cost and the accounting endpoints report it (ACCT_CONV_OPTIMAL
     * is the Balle et al. 2020 bound at the continuous optimal order), not the request's "optimal".
     */
    json_t *acc = accounting_json(&d, ACCT_CONV_BALLE2020, j->tuned_order, j->nb);
    if (o == NULL) {
        json_decref(runs);
        json_decref(acc);
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    /* json_util_set steals its value even on failure: runs and acc belong to o from here. */
    if (json_util_set(o, "runs", runs, err) != DP_OK ||
        json_util_set(o, "accounting", acc, err) != DP_OK ||
        json_util_set(o, "noise_multiplier", json_util_real(tuned.value), err) != DP_OK ||
        json_util_set(o, "noise_multiplier_untuned", json_util_real(untuned.value), err) != DP_OK ||
        json_util_set(o, "price_of_tuning", json_util_real(tuned.value / untuned.value), err) !=
            DP_OK ||
        json_util_set(o, "noise_multiplier_naive",
                      grid > 0 ? json_util_real(naive.value) : json_null(), err) != DP_OK ||
        (grid > 0 && isinf(naive.value) &&
         json_util_set(o, "noise_multiplier_naive_reason",
                       json_string("no noise multiplier lets every grid value run within the "
                                   "target"),
                       err) != DP_OK) ||
        json_util_set(o, "naive_runs", grid > 0 ? json_integer(grid) : json_null(), err) != DP_OK ||
        json_util_set(o, "epsilon", json_util_real(tuned.epsilon), err) != DP_OK ||
        json_util_set(o, "delta", json_real(j->delta), err) != DP_OK ||
        json_util_set(o, "training",
                      json_pack("{s:f, s:I}", "sampling_rate", j->q, "steps", (json_int_t)j->steps),
                      err) != DP_OK) {
        rc = err->code ? err->code : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    rc = http_resp_json(rs, 200, o, err);
    o = NULL;
out:
    json_decref(o);
    return rc;
}

int route_tuning_plan(const http_req *rq, http_resp *rs, dp_err *err)
{
    static const char *const keys[] = {"epsilon",  "delta",        "grid_size",  "expected_runs",
                                       "training", "distribution", "neighboring"};
    static const char *const tkeys[] = {"sampling_rate", "steps"};
    int rc;
    if ((rc = json_util_require_object(rq->body, NULL, err)) != DP_OK ||
        (rc = json_util_check_keys(rq->body, keys, 7, err)) != DP_OK)
        return rc;
    double eps, delta, expected = DP_NAN, q;
    int64_t grid = 0, steps;
    acct_neighboring nb;
    acct_tuning_dist d;
    if ((rc = json_util_req_number(rq->body, "epsilon", &eps, err)) != DP_OK)
        return rc;
    if (!(eps > 0.0) || !isfinite(eps))
        return dp_err_set(err, DP_EINVAL, "epsilon", "epsilon must be finite and > 0 (got %g)",
                          eps);
    if ((rc = read_delta(rq->body, &delta, err)) != DP_OK ||
        (rc = read_grid(rq->body, &grid, err)) != DP_OK ||
        (rc = json_util_opt_number(rq->body, "expected_runs", DP_NAN, &expected, err)) != DP_OK ||
        (rc = event_json_neighboring(rq->body, &nb, err)) != DP_OK)
        return rc;
    if (!isnan(expected) && !(expected >= 1.0 && expected <= ACCT_TUNING_MAX_MEAN))
        return dp_err_set(err, DP_EINVAL, "expected_runs",
                          "expected_runs must be in [1, %g] (got %g)", ACCT_TUNING_MAX_MEAN,
                          expected);
    const json_t *tr = json_object_get(rq->body, "training");
    if (tr == NULL || !json_is_object(tr))
        return dp_err_set(err, DP_EINVAL, "training",
                          "training must be an object {\"sampling_rate\": q, \"steps\": n}");
    if ((rc = json_util_check_keys(tr, tkeys, 2, err)) != DP_OK ||
        (rc = json_util_req_number(tr, "sampling_rate", &q, err)) != DP_OK ||
        (rc = json_util_req_int(tr, "steps", &steps, err)) != DP_OK) {
        dp_err_prefix_field(err, "training");
        return rc;
    }
    if (!(q > 0.0 && q <= 1.0))
        return dp_err_set(err, DP_EINVAL, "training.sampling_rate",
                          "training.sampling_rate must be in (0, 1] (got %g)", q);
    if (steps < 1 || (uint64_t)steps > ACCT_EVENT_MAX_COUNT)
        return dp_err_set(err, DP_EINVAL, "training.steps",
                          "training.steps must be in [1, 10^12] (got %lld)", (long long)steps);
    const json_t *jd = json_object_get(rq->body, "distribution");
    if (jd == NULL)
        return dp_err_set(err, DP_EINVAL, "distribution", "distribution is required");
    if ((rc = tuning_json_parse_dist(jd, true, &d, err)) != DP_OK)
        return rc;
    /* The distribution's mean comes from the request when the distribution leaves it out. */
    if (d.kind != ACCT_TUNE_FIXED && isnan(d.mean) && isnan(d.gamma)) {
        double m = !isnan(expected) ? expected : (grid > 0 ? (double)grid : DP_NAN);
        if (isnan(m))
            return dp_err_set(err, DP_EINVAL, "expected_runs",
                              "give expected_runs or grid_size, or a mean in the distribution");
        d.mean = m;
    }
    if ((rc = acct_tuning_dist_resolve(&d, &d, err)) != DP_OK)
        return rc;

    plan_job *j = dp_calloc(1, sizeof *j);
    if (j == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    *j = (plan_job){eps,   delta, grid, q, steps, nb, d, NULL, {0}, {0}, {0, DP_NAN, DP_NAN, 0},
                    DP_NAN};
    compute_task t = {plan_run, plan_render, plan_job_free, j, COMPUTE_OPEN};
    return compute_offload(rq, rs, &t, err);
}

/* ---- POST /v1/tuning/draw
 * ------------------------------------------------------------------------ */

int route_tuning_draw(const http_req *rq, http_resp *rs, dp_err *err)
{
    static const char *const keys[] = {"distribution", "grid_size", "label"};
    json_t *dist_json = NULL, *cand = NULL, *body = NULL;
    char *dist_text = NULL, *cand_text = NULL;
    int rc;
    ledger_principal who; /* issue 10: a draw needs a valid token and records its creator */
    int64_t creator = 0;
    if ((rc = auth_resolve(rq, &who, err)) != DP_OK ||
        (rc = auth_creator_id(rq, &creator, err)) != DP_OK)
        return rc;
    if ((rc = json_util_require_object(rq->body, NULL, err)) != DP_OK ||
        (rc = json_util_check_keys(rq->body, keys, 3, err)) != DP_OK)
        return rc;
    const json_t *jd = json_object_get(rq->body, "distribution");
    if (jd == NULL)
        return dp_err_set(err, DP_EINVAL, "distribution", "distribution is required");
    acct_tuning_dist d;
    int64_t grid = 0;
    const char *label = NULL;
    if ((rc = tuning_json_parse_dist(jd, false, &d, err)) != DP_OK ||
        (rc = json_util_opt_int(rq->body, "grid_size", 0, &grid, err)) != DP_OK ||
        (rc = json_util_opt_string(rq->body, "label", NULL, &label, err)) != DP_OK)
        return rc;
    if (json_object_get(rq->body, "grid_size") &&
        !json_is_null(json_object_get(rq->body, "grid_size")) &&
        (grid < 1 || grid > TUNING_MAX_GRID))
        return dp_err_set(err, DP_EINVAL, "grid_size", "grid_size must be in [1, %d] (got %lld)",
                          TUNING_MAX_GRID, (long long)grid);
    if (label && strlen(label) > TUNING_MAX_LABEL)
        return dp_err_set(err, DP_EINVAL, "label", "label must be at most %d bytes",
                          TUNING_MAX_LABEL);
    if ((rc = acct_tuning_dist_resolve(&d, &d, err)) != DP_OK)
        return rc;

    uint64_t k = 0;
    if ((rc = acct_tuning_draw(&d, getrandom64, NULL, &k, err)) != DP_OK) {
        if (rc == DP_EINTERNAL)
            dp_log(DP_LOG_ERROR, rq->req_id, "tuning draw: random source failed (errno %d)", errno);
        return rc;
    }
    if (grid > 0 && k <= TUNING_MAX_LISTED) {
        cand = json_array();
        if (cand == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        for (uint64_t i = 0; i < k; i++) {
            uint64_t idx;
            if ((rc = acct_tuning_uniform_index((uint64_t)grid, getrandom64, NULL, &idx, err)) !=
                DP_OK)
                goto out;
            if (json_array_append_new(cand, json_integer((json_int_t)idx)) != 0) {
                rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
                goto out;
            }
        }
        cand_text = json_dumps(cand, JSON_COMPACT);
        if (cand_text == NULL) {
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
            goto out;
        }
    }
    dist_json = tuning_json_dist(&d);
    dist_text = dist_json ? json_dumps(dist_json, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (dist_text == NULL) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }

    /* Record, then answer: a draw the client sees is always on file. */
    int64_t now = store_now_ms();
    sqlite3_stmt *st = store_conn_prepare(rq->db, SQL_INSERT_DRAW, err);
    if (st == NULL) {
        rc = err->code;
        goto out;
    }
    if ((rc = store_begin(rq->db, err)) != DP_OK) {
        store_stmt_done(st);
        goto out;
    }
    int src = sqlite3_bind_int64(st, 1, now);
    if (src == SQLITE_OK)
        src = sqlite3_bind_text(st, 2, rq->req_id ? rq->req_id : "-", -1, SQLITE_TRANSIENT);
    if (src == SQLITE_OK)
        src = sqlite3_bind_text(st, 3, dist_text, -1, SQLITE_TRANSIENT);
    if (src == SQLITE_OK)
        src = sqlite3_bind_int64(st, 4, (sqlite3_int64)k);
    if (src == SQLITE_OK)
        src = sqlite3_bind_double(st, 5, acct_tuning_expected_runs(&d));
    if (src == SQLITE_OK)
        src = sqlite3_bind_double(st, 6, acct_tuning_prob_zero(&d));
    if (src == SQLITE_OK)
        src = grid > 0 ? sqlite3_bind_int64(st, 7, grid) : sqlite3_bind_null(st, 7);
    if (src == SQLITE_OK)
        src = cand_text ? sqlite3_bind_text(st, 8, cand_text, -1, SQLITE_TRANSIENT)
                        : sqlite3_bind_null(st, 8);
    if (src == SQLITE_OK)
        src = label ? sqlite3_bind_text(st, 9, label, -1, SQLITE_TRANSIENT)
                    : sqlite3_bind_null(st, 9);
    if (src == SQLITE_OK)
        src = sqlite3_bind_int64(st, 10, creator);
    if (src == SQLITE_OK)
        src = sqlite3_step(st);
    int64_t id = sqlite3_last_insert_rowid(store_conn_db(rq->db));
    store_stmt_done(st);
    if (src != SQLITE_DONE) {
        store_rollback(rq->db);
        rc = store_err(rq->db, src, "insert tuning draw", rq->req_id, err);
        goto out;
    }
    if ((rc = store_commit(rq->db, err)) != DP_OK) {
        store_rollback(rq->db);
        goto out;
    }
    body = draw_json(id, now, dist_json, (int64_t)k, grid, cand, label,
                     acct_tuning_expected_runs(&d), acct_tuning_prob_zero(&d));
    if (body == NULL) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    rc = http_resp_created(rs, body, err, "/v1/tuning/draws/%lld", (long long)id);
    body = NULL; /* stolen */
out:
    json_decref(body);
    json_decref(dist_json);
    json_decref(cand);
    free(
        dist_text); /* json_dumps uses jansson's allocator: malloc unless routed through dp_alloc */
    free(cand_text);
    return rc;
}

/* ---- GET /v1/tuning/draws/{id}
 * ------------------------------------------------------------------- */

int route_tuning_draw_get(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t id;
    ledger_principal who;
    int rc0 = auth_resolve(rq, &who, err);
    if (rc0 == DP_OK)
        rc0 = http_req_param_id(rq, "id", &id, err);
    if (rc0 != DP_OK)
        return rc0;
    sqlite3_stmt *st = store_conn_prepare(rq->db, SQL_GET_DRAW, err);
    if (st == NULL)
        return err->code;
    bool admin = who.role == LEDGER_ROLE_ADMIN;
    int src = sqlite3_bind_int64(st, 1, id);
    if (src == SQLITE_OK)
        src = sqlite3_bind_int(st, sqlite3_bind_parameter_index(st, ":admin"), admin ? 1 : 0);
    if (src == SQLITE_OK)
        src = sqlite3_bind_int64(st, sqlite3_bind_parameter_index(st, ":tok"), who.token_id);
    if (src == SQLITE_OK)
        src = sqlite3_bind_int64(st, sqlite3_bind_parameter_index(st, ":silo"),
                                 admin ? 0 : who.silo_id);
    if (src == SQLITE_OK)
        src = sqlite3_step(st);
    if (src == SQLITE_DONE) {
        store_stmt_done(st);
        return http_err_not_found(err, "id", "tuning draw", id);
    }
    if (src != SQLITE_ROW) {
        store_stmt_done(st);
        return store_err(rq->db, src, "read tuning draw", rq->req_id, err);
    }
    json_error_t je;
    const char *dtext = (const char *)sqlite3_column_text(st, 2);
    const char *ctext = (const char *)sqlite3_column_text(st, 5);
    const char *ltext = (const char *)sqlite3_column_text(st, 6);
    json_t *dist = dtext ? json_loads(dtext, 0, &je) : NULL;
    json_t *cand = ctext ? json_loads(ctext, 0, &je) : NULL;
    int64_t created = sqlite3_column_int64(st, 1), runs = sqlite3_column_int64(st, 3);
    int64_t grid = sqlite3_column_type(st, 4) == SQLITE_NULL ? 0 : sqlite3_column_int64(st, 4);
    double expected = sqlite3_column_double(st, 7), p0 = sqlite3_column_double(st, 8);
    char label[TUNING_MAX_LABEL + 1];
    if (ltext)
        snprintf(label, sizeof label, "%s", ltext);
    store_stmt_done(st);
    json_t *body = NULL;
    int rc = DP_OK;
    if (dist == NULL || (ctext && cand == NULL)) {
        dp_log(DP_LOG_ERROR, rq->req_id, "tuning draw %lld: stored JSON unreadable", (long long)id);
        rc = dp_err_set(err, DP_EINTERNAL, NULL, "stored draw is unreadable");
        goto out;
    }
    body = draw_json(id, created, dist, runs, grid, cand, ltext ? label : NULL, expected, p0);
    if (body == NULL) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    rc = http_resp_json(rs, 200, body, err);
out:
    json_decref(dist);
    json_decref(cand);
    return rc;
}
