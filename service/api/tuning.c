/*
 * api/tuning.c: the price of a private hyperparameter search (issue #4; docs/TUNING.md).
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
 * Storage: one append-only row per draw in tuning_draws, through db/draws.h (which holds the SQL
 * and the rule of who may read a draw), written after the draw is made (nothing slow inside the
 * transaction) by the database's one writer (db/writer.h, app->writer) in its group commit; the 201
 * is sent only after that COMMIT. The HTTP thread does not wait for it: the answer is deferred
 * (http/server.h PENDING) and rendered when the writer wakes the connection. This file has no SQL.
 *
 * Shape: each handler is parse (request JSON -> a C struct), run (library calls), render (struct ->
 * response JSON), so that every piece is short and the library part never sees a json_t.
 */
#include "service/api/routes.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "accounting/tuning.h"
#include "common/dp_math.h"
#include "common/dp_alloc.h"
#include "common/dp_log.h"
#include "accounting/calibrate.h"
#include "accounting/rdp.h"
#include "service/api/auth.h"
#include "service/base/time.h"
#include "service/http/offload.h"
#include "service/codec/event_json.h"
#include "service/codec/json_util.h"
#include "service/codec/tuning_json.h"
#include "service/db/draws.h"
#include "service/db/writer.h"

#define TUNING_MAX_GRID   1000000 /* grid_size cap (same as the run cap) */
#define TUNING_MAX_LISTED 10000   /* candidates are listed only for K up to this */
#define TUNING_MAX_LABEL  200     /* bytes */

/* ---- randomness ---- */

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

/* ---- a draw as JSON (POST and GET answer with the same object) ---- */

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

/* ---- shared ---- */

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

/* ---- POST /v1/tuning/cost ---- */

/* A cost request, parsed. */
typedef struct cost_req {
    acct_event *search;  /* owned: repeat_and_select(run, d) */
    acct_tuning_dist d;  /* resolved */
    double delta;        /* in (0, 1) */
    int64_t grid;        /* grid_size; 0 = not given */
    acct_neighboring nb; /* neighbouring relation */
} cost_req;

/* What the accountant says about it. */
typedef struct cost_result {
    double eps_one, eps_search, eps_naive;    /* RDP bounds; eps_naive NAN without grid */
    acct_rdp_answer ans;                      /* of the search (conversion, optimal order) */
    bool is_pure;                             /* every leaf of the run is pure */
    double pure_one, pure_search, pure_naive; /* pure bounds (is_pure only) */
    double head_one, head_search, head_naive; /* the headline: the smaller figure */
} cost_result;

/* Fills q from the request body (q->search owned by q on success; NULL on failure). */
static int cost_parse(const json_t *body, cost_req *q, dp_err *err)
{
    static const char *const keys[] = {"event", "distribution", "delta", "grid_size",
                                       "neighboring"};
    acct_event *base = NULL;
    int rc;
    *q = (cost_req){0};
    if ((rc = json_util_require_object(body, NULL, err)) != DP_OK ||
        (rc = json_util_check_keys(body, keys, 5, err)) != DP_OK)
        return rc;
    const json_t *jd = json_object_get(body, "distribution");
    if (jd == NULL)
        return dp_err_set(err, DP_EINVAL, "distribution", "distribution is required");
    if ((rc = event_json_parse(json_object_get(body, "event"), false, "event", &base, err)) !=
            DP_OK ||
        (rc = tuning_json_parse_dist(jd, false, &q->d, err)) != DP_OK ||
        (rc = read_delta(body, &q->delta, err)) != DP_OK ||
        (rc = read_grid(body, &q->grid, err)) != DP_OK ||
        (rc = event_json_neighboring(body, &q->nb, err)) != DP_OK ||
        (rc = acct_tuning_dist_resolve(&q->d, &q->d, err)) != DP_OK) {
        acct_event_free(base);
        return rc;
    }
    q->search = acct_event_alloc(ACCT_EV_REPEAT_SELECT);
    if (q->search == NULL) {
        acct_event_free(base);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    q->search->child = base; /* owned by search from here */
    q->search->dist = q->d;
    return DP_OK;
}

/* The RDP figures of one run, of the search, and (with a grid) of running every grid value. */
static int cost_run_rdp(const cost_req *q, cost_result *r, dp_err *err)
{
    int rc;
    r->eps_naive = DP_NAN;
    if ((rc = eps_of(q->search->child, q->nb, q->delta, &r->eps_one, NULL, err)) != DP_OK ||
        (rc = eps_of(q->search, q->nb, q->delta, &r->eps_search, &r->ans, err)) != DP_OK)
        return rc;
    if (q->grid > 0) {
        q->search->dist =
            (acct_tuning_dist){ACCT_TUNE_FIXED, (uint64_t)q->grid, DP_NAN, DP_NAN, DP_NAN};
        rc = eps_of(q->search, q->nb, q->delta, &r->eps_naive, NULL, err);
        q->search->dist = q->d;
    }
    return rc;
}

static int cost_run(const cost_req *q, cost_result *r, dp_err *err)
{
    int rc = cost_run_rdp(q, r, err);
    if (rc != DP_OK)
        return rc;
    /* Pure runs: the pure bounds hold for every delta, so the smaller figure is reported. */
    r->is_pure = false;
    r->pure_one = r->pure_search = r->pure_naive = DP_NAN;
    if ((rc = acct_tuning_event_pure_epsilon(q->search->child, q->nb, &r->is_pure, &r->pure_one,
                                             err)) != DP_OK)
        return rc;
    if (r->is_pure) {
        if ((rc = acct_tuning_pure_epsilon(&q->d, r->pure_one, &r->pure_search, err)) != DP_OK)
            return rc;
        r->pure_naive = (double)q->grid * r->pure_one;
    }
    r->head_search = r->is_pure ? fmin(r->eps_search, r->pure_search) : r->eps_search;
    r->head_one = r->is_pure ? fmin(r->eps_one, r->pure_one) : r->eps_one;
    r->head_naive = (q->grid > 0 && r->is_pure) ? fmin(r->eps_naive, r->pure_naive) : r->eps_naive;
    return DP_OK;
}

static const char *pure_bound_name(const acct_tuning_dist *d)
{
    switch (d->kind) {
        case ACCT_TUNE_TRUNC_NEGBIN:
            return "(2 + eta) eps: Papernot & Steinke 2022 Thm. 2 as orders -> inf "
                   "(eta = 1: Liu & Talwar 2019, 3 eps)";
        case ACCT_TUNE_POISSON:
            return "eps + mu tanh(eps/2): Papernot & Steinke 2022 Thm. 6 as orders -> inf";
        case ACCT_TUNE_FIXED:
            break;
    }
    return "k eps: composition";
}

/* The "pure" block (a new reference; json null when the run is not pure; NULL when out of memory).
 */
static json_t *cost_pure_json(const cost_req *q, const cost_result *r)
{
    if (!r->is_pure)
        return json_null();
    return json_pack("{s:o, s:o, s:o, s:s}", "epsilon_one_run", json_util_real(r->pure_one),
                     "epsilon", json_util_real(r->pure_search), "epsilon_naive",
                     q->grid > 0 ? json_util_real(r->pure_naive) : json_null(), "bound",
                     pure_bound_name(&q->d));
}

/* epsilon_naive and its reason: the figure with a grid, else null and why. */
static int set_naive(json_t *o, const cost_req *q, const cost_result *r, dp_err *err)
{
    if (q->grid > 0)
        return set_eps(o, "epsilon_naive", r->head_naive, err);
    if (json_util_set(o, "epsilon_naive", json_null(), err) != DP_OK)
        return err->code;
    return json_util_set(o, "epsilon_naive_reason", json_string("grid_size not given"), err);
}

/* Sends the 200 answer (the key order is the API's). */
static int cost_render(const cost_req *q, const cost_result *r, http_resp *rs, dp_err *err)
{
    const acct_tuning_dist *d = &q->d;
    json_t *o = json_object();
    json_t *acc = accounting_json(d, r->ans.conversion, r->ans.optimal_order, q->nb);
    json_t *pure = cost_pure_json(q, r);
    /* All or none: the chain below stops at the first failed set, so a value created here and
     * not yet set would leak (the chaos test found pure leaking when acc was NULL). */
    if (o == NULL || acc == NULL || pure == NULL) {
        json_decref(o);
        json_decref(acc);
        json_decref(pure);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    /* json_util_set steals its value even on failure: both sets run (a short-circuit would leave
     * pure unowned when the first one fails), so acc and pure are owned by o from here. */
    int set_acc = json_util_set(o, "accounting", acc, err);
    int set_pure = json_util_set(o, "pure", pure, err);
    if (set_acc != DP_OK || set_pure != DP_OK ||
        set_eps(o, "epsilon", r->head_search, err) != DP_OK ||
        set_eps(o, "epsilon_one_run", r->head_one, err) != DP_OK ||
        set_naive(o, q, r, err) != DP_OK ||
        json_util_set(o, "naive_runs", q->grid > 0 ? json_integer(q->grid) : json_null(), err) !=
            DP_OK ||
        json_util_set(o, "delta", json_real(q->delta), err) != DP_OK ||
        json_util_set(o, "expected_runs", json_util_real(acct_tuning_expected_runs(d)), err) !=
            DP_OK ||
        json_util_set(o, "prob_no_run", json_util_real(acct_tuning_prob_zero(d)), err) != DP_OK ||
        json_util_set(o, "distribution", tuning_json_dist(d), err) != DP_OK ||
        json_util_set(o, "epsilon_rdp", json_util_real(r->eps_search), err) != DP_OK) {
        json_decref(o);
        return err->code ? err->code : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    return http_resp_json(rs, 200, o, err);
}

int route_tuning_cost(const http_req *rq, http_resp *rs, dp_err *err)
{
    cost_req q;
    cost_result r;
    int rc = cost_parse(rq->body, &q, err);
    if (rc == DP_OK)
        rc = cost_run(&q, &r, err);
    if (rc == DP_OK)
        rc = cost_render(&q, &r, rs, err);
    acct_event_free(q.search);
    return rc;
}

/* ---- POST /v1/tuning/plan ---- */

/* One training run: steps x poisson_sampled(q, gaussian(open)); q = 1 drops the sampling node and
 * steps = 1 the composition. Owned by caller, NULL on allocation failure. */
static acct_event *training_run(double q, int64_t steps)
{
    acct_event *top = acct_event_gaussian(DP_NAN); /* the constructors pass NULL up */
    if (q < 1.0)
        top = acct_event_poisson(q, top);
    if (steps > 1)
        top = acct_event_self_composed((uint64_t)steps, top);
    return top;
}

/* A plan request, parsed. */
typedef struct plan_req {
    double eps, delta;   /* the target */
    int64_t grid;        /* grid_size; 0 = not given */
    double q;            /* training.sampling_rate, in (0, 1] */
    int64_t steps;       /* training.steps, in [1, 10^12] */
    acct_neighboring nb; /* neighbouring relation */
    acct_tuning_dist d;  /* resolved (the mean filled in from the request when left out) */
} plan_req;

/* A tuning plan: the request, then three or four calibrations (plan_run, on the compute pool:
 * issue 10), then the answer (plan_render). */
typedef struct plan_job {
    plan_req req;
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

/* "training": {"sampling_rate": q, "steps": n}. */
static int plan_parse_training(const json_t *body, plan_req *p, dp_err *err)
{
    static const char *const tkeys[] = {"sampling_rate", "steps"};
    const json_t *tr = json_object_get(body, "training");
    int rc;
    if (tr == NULL || !json_is_object(tr))
        return dp_err_set(err, DP_EINVAL, "training",
                          "training must be an object {\"sampling_rate\": q, \"steps\": n}");
    if ((rc = json_util_check_keys(tr, tkeys, 2, err)) != DP_OK ||
        (rc = json_util_req_number(tr, "sampling_rate", &p->q, err)) != DP_OK ||
        (rc = json_util_req_int(tr, "steps", &p->steps, err)) != DP_OK) {
        dp_err_prefix_field(err, "training");
        return rc;
    }
    if (!(p->q > 0.0 && p->q <= 1.0))
        return dp_err_set(err, DP_EINVAL, "training.sampling_rate",
                          "training.sampling_rate must be in (0, 1] (got %g)", p->q);
    if (p->steps < 1 || (uint64_t)p->steps > ACCT_EVENT_MAX_COUNT)
        return dp_err_set(err, DP_EINVAL, "training.steps",
                          "training.steps must be in [1, 10^12] (got %lld)", (long long)p->steps);
    return DP_OK;
}

/* "distribution", whose mean comes from expected_runs or grid_size when it leaves it out. */
static int plan_parse_dist(const json_t *body, double expected, plan_req *p, dp_err *err)
{
    const json_t *jd = json_object_get(body, "distribution");
    int rc;
    if (jd == NULL)
        return dp_err_set(err, DP_EINVAL, "distribution", "distribution is required");
    if ((rc = tuning_json_parse_dist(jd, true, &p->d, err)) != DP_OK)
        return rc;
    if (p->d.kind != ACCT_TUNE_FIXED && isnan(p->d.mean) && isnan(p->d.gamma)) {
        double m = !isnan(expected) ? expected : (p->grid > 0 ? (double)p->grid : DP_NAN);
        if (isnan(m))
            return dp_err_set(err, DP_EINVAL, "expected_runs",
                              "give expected_runs or grid_size, or a mean in the distribution");
        p->d.mean = m;
    }
    return acct_tuning_dist_resolve(&p->d, &p->d, err);
}

static int plan_parse(const json_t *body, plan_req *p, dp_err *err)
{
    static const char *const keys[] = {"epsilon",  "delta",        "grid_size",  "expected_runs",
                                       "training", "distribution", "neighboring"};
    double expected = DP_NAN;
    int rc;
    *p = (plan_req){0};
    if ((rc = json_util_require_object(body, NULL, err)) != DP_OK ||
        (rc = json_util_check_keys(body, keys, 7, err)) != DP_OK ||
        (rc = json_util_req_number(body, "epsilon", &p->eps, err)) != DP_OK)
        return rc;
    if (!(p->eps > 0.0) || !isfinite(p->eps))
        return dp_err_set(err, DP_EINVAL, "epsilon", "epsilon must be finite and > 0 (got %g)",
                          p->eps);
    if ((rc = read_delta(body, &p->delta, err)) != DP_OK ||
        (rc = read_grid(body, &p->grid, err)) != DP_OK ||
        (rc = json_util_opt_number(body, "expected_runs", DP_NAN, &expected, err)) != DP_OK ||
        (rc = event_json_neighboring(body, &p->nb, err)) != DP_OK)
        return rc;
    if (!isnan(expected) && !(expected >= 1.0 && expected <= ACCT_TUNING_MAX_MEAN))
        return dp_err_set(err, DP_EINVAL, "expected_runs",
                          "expected_runs must be in [1, %g] (got %g)", ACCT_TUNING_MAX_MEAN,
                          expected);
    if ((rc = plan_parse_training(body, p, err)) != DP_OK)
        return rc;
    return plan_parse_dist(body, expected, p, err);
}

static int plan_run(void *arg, const atomic_bool *cancel, dp_err *err)
{
    (void)cancel; /* a few bounded calibrations: not split */
    plan_job *j = arg;
    const plan_req *p = &j->req;
    acct_calib_rdp_ctx cctx = {p->nb, p->delta, ACCT_CONV_OPTIMAL, NULL, 0, DP_NAN};
    acct_event *search = j->search = acct_event_alloc(ACCT_EV_REPEAT_SELECT);
    if (search == NULL || (search->child = training_run(p->q, p->steps)) == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    search->dist = p->d;
    int rc = acct_calibrate(search, p->eps, acct_calib_rdp_eps, &cctx, &j->tuned, err);
    if (rc != DP_OK) {
        if (err && strcmp(err->field, "target_epsilon") == 0) /* this endpoint calls it epsilon */
            snprintf(err->field, sizeof err->field, "epsilon");
        return rc;
    }
    j->tuned_order = cctx.last_order;
    if ((rc = acct_calibrate(search->child, p->eps, acct_calib_rdp_eps, &cctx, &j->untuned, err)) !=
        DP_OK)
        return rc;
    if (p->grid > 0) {
        search->dist =
            (acct_tuning_dist){ACCT_TUNE_FIXED, (uint64_t)p->grid, DP_NAN, DP_NAN, DP_NAN};
        rc = acct_calibrate(search, p->eps, acct_calib_rdp_eps, &cctx, &j->naive, err);
        search->dist = p->d;
        if (rc != DP_OK && rc != DP_ENUMERIC)
            return rc;
        if (rc == DP_ENUMERIC) { /* naive search cannot meet the target at all: say so */
            dp_err_clear(err);
            j->naive.value = HUGE_VAL;
        }
    }
    return DP_OK;
}

/* The "runs" block of a plan (a new reference, NULL when out of memory). */
static json_t *plan_runs_json(const acct_tuning_dist *d)
{
    return json_pack("{s:o, s:o, s:o, s:s}", "expected",
                     json_util_real(acct_tuning_expected_runs(d)), "prob_no_run",
                     json_util_real(acct_tuning_prob_zero(d)), "distribution", tuning_json_dist(d),
                     "draw",
                     "POST /v1/tuning/draw with this distribution draws the number of runs");
}

/* noise_multiplier_naive, its reason when no multiplier fits, and naive_runs. */
static int set_naive_plan(json_t *o, const plan_job *j, dp_err *err)
{
    const int64_t grid = j->req.grid;
    if (json_util_set(o, "noise_multiplier_naive",
                      grid > 0 ? json_util_real(j->naive.value) : json_null(), err) != DP_OK ||
        (grid > 0 && isinf(j->naive.value) &&
         json_util_set(o, "noise_multiplier_naive_reason",
                       json_string("no noise multiplier lets every grid value run within the "
                                   "target"),
                       err) != DP_OK))
        return err->code ? err->code : DP_ENOMEM;
    return json_util_set(o, "naive_runs", grid > 0 ? json_integer(grid) : json_null(), err);
}

static int plan_render(void *arg, const http_req *rq, http_resp *rs, bool deferred, dp_err *err)
{
    (void)rq;
    (void)deferred;
    const plan_job *j = arg;
    const plan_req *p = &j->req;
    json_t *o = json_object();
    json_t *runs = plan_runs_json(&p->d);
    /* The bound used, as /v1/tuning/cost and the accounting endpoints report it (ACCT_CONV_OPTIMAL
     * is the Balle et al. 2020 bound at the continuous optimal order), not the request's "optimal".
     */
    json_t *acc = accounting_json(&p->d, ACCT_CONV_BALLE2020, j->tuned_order, p->nb);
    /* All or none: the chain below stops at the first failed set, so acc would leak when runs
     * is NULL (found by test_service_chaos under LeakSanitizer). */
    if (o == NULL || runs == NULL || acc == NULL) {
        json_decref(o);
        json_decref(runs);
        json_decref(acc);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    /* json_util_set steals its value even on failure: both sets run (a short-circuit left acc
     * unowned when the first failed), so runs and acc belong to o from here. */
    int set_runs = json_util_set(o, "runs", runs, err);
    int set_acc = json_util_set(o, "accounting", acc, err);
    if (set_runs != DP_OK || set_acc != DP_OK ||
        json_util_set(o, "noise_multiplier", json_util_real(j->tuned.value), err) != DP_OK ||
        json_util_set(o, "noise_multiplier_untuned", json_util_real(j->untuned.value), err) !=
            DP_OK ||
        json_util_set(o, "price_of_tuning", json_util_real(j->tuned.value / j->untuned.value),
                      err) != DP_OK ||
        set_naive_plan(o, j, err) != DP_OK ||
        json_util_set(o, "epsilon", json_util_real(j->tuned.epsilon), err) != DP_OK ||
        json_util_set(o, "delta", json_real(p->delta), err) != DP_OK ||
        json_util_set(o, "training",
                      json_pack("{s:f, s:I}", "sampling_rate", p->q, "steps", (json_int_t)p->steps),
                      err) != DP_OK) {
        json_decref(o);
        return err->code ? err->code : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    return http_resp_json(rs, 200, o, err);
}

int route_tuning_plan(const http_req *rq, http_resp *rs, dp_err *err)
{
    plan_req p;
    int rc = plan_parse(rq->body, &p, err);
    if (rc != DP_OK)
        return rc;
    plan_job *j = dp_calloc(1, sizeof *j);
    if (j == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    *j = (plan_job){p, NULL, {0}, {0}, {0, DP_NAN, DP_NAN, 0}, DP_NAN};
    compute_task t = {plan_run, plan_render, plan_job_free, j, COMPUTE_OPEN};
    return compute_offload(rq, rs, &t, err);
}

/* ---- POST /v1/tuning/draw ---- */

/* A draw request, parsed (after the token check). */
typedef struct draw_req {
    acct_tuning_dist d; /* resolved */
    int64_t grid;       /* grid_size; 0 = not given */
    const char *label;  /* borrowed from the request body, or NULL */
    int64_t creator;    /* tokens.id of the caller; 0 = none */
} draw_req;

/* A draw made: K, the candidates, and the texts that are stored. Release with draw_made_clear. */
typedef struct draw_made {
    uint64_t k;         /* the number of runs drawn */
    json_t *cand;       /* owned: K grid indices, or NULL (no grid, or K over the listing cap) */
    char *cand_text;    /* owned (jansson's allocator): cand as compact JSON, or NULL */
    json_t *dist;       /* owned: the resolved distribution */
    char *dist_text;    /* owned (jansson's allocator): dist as canonical JSON */
    int64_t id;         /* tuning_draws.id, once recorded */
    int64_t created_ms; /* Unix milliseconds */
} draw_made;

static void draw_made_clear(draw_made *m)
{
    json_decref(m->cand);
    json_decref(m->dist);
    free(m->cand_text); /* json_util_dumps: dp_malloc, which free() releases */
    free(m->dist_text);
    *m = (draw_made){0};
}

static int draw_parse(const http_req *rq, draw_req *q, dp_err *err)
{
    static const char *const keys[] = {"distribution", "grid_size", "label"};
    const json_t *body = rq->body;
    ledger_principal who; /* issue 10: a draw needs a valid token and records its creator */
    int rc;
    *q = (draw_req){0};
    if ((rc = auth_resolve(rq, &who, err)) != DP_OK ||
        (rc = auth_creator_id(rq, &q->creator, err)) != DP_OK ||
        (rc = json_util_require_object(body, NULL, err)) != DP_OK ||
        (rc = json_util_check_keys(body, keys, 3, err)) != DP_OK)
        return rc;
    const json_t *jd = json_object_get(body, "distribution");
    if (jd == NULL)
        return dp_err_set(err, DP_EINVAL, "distribution", "distribution is required");
    if ((rc = tuning_json_parse_dist(jd, false, &q->d, err)) != DP_OK ||
        (rc = json_util_opt_int(body, "grid_size", 0, &q->grid, err)) != DP_OK ||
        (rc = json_util_opt_string(body, "label", NULL, &q->label, err)) != DP_OK)
        return rc;
    const json_t *jg = json_object_get(body, "grid_size");
    if (jg && !json_is_null(jg) && (q->grid < 1 || q->grid > TUNING_MAX_GRID))
        return dp_err_set(err, DP_EINVAL, "grid_size", "grid_size must be in [1, %d] (got %lld)",
                          TUNING_MAX_GRID, (long long)q->grid);
    if (q->label && strlen(q->label) > TUNING_MAX_LABEL)
        return dp_err_set(err, DP_EINVAL, "label", "label must be at most %d bytes",
                          TUNING_MAX_LABEL);
    return acct_tuning_dist_resolve(&q->d, &q->d, err);
}

/* K uniform indices into the grid (with K <= TUNING_MAX_LISTED), as m->cand and m->cand_text. */
static int draw_candidates(uint64_t grid, draw_made *m, dp_err *err)
{
    m->cand = json_array();
    if (m->cand == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (uint64_t i = 0; i < m->k; i++) {
        uint64_t idx;
        int rc = acct_tuning_uniform_index(grid, getrandom64, NULL, &idx, err);
        if (rc != DP_OK)
            return rc;
        if (json_array_append_new(m->cand, json_integer((json_int_t)idx)) != 0)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    m->cand_text = json_util_dumps(m->cand, JSON_COMPACT);
    if (m->cand_text == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    return DP_OK;
}

/* Draws K (and the candidates) with the kernel CSPRNG; fills m (cleared by the caller). */
static int draw_run(const draw_req *q, const char *req_id, draw_made *m, dp_err *err)
{
    int rc = acct_tuning_draw(&q->d, getrandom64, NULL, &m->k, err);
    if (rc != DP_OK) {
        if (rc == DP_EINTERNAL)
            dp_log(DP_LOG_ERROR, req_id, "tuning draw: random source failed (errno %d)", errno);
        return rc;
    }
    if (q->grid > 0 && m->k <= TUNING_MAX_LISTED &&
        (rc = draw_candidates((uint64_t)q->grid, m, err)) != DP_OK)
        return rc;
    m->dist = tuning_json_dist(&q->d);
    m->dist_text = m->dist ? json_util_dumps(m->dist, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (m->dist_text == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    return DP_OK;
}

/* Sends the 201 answer with the record's Location. */
static int draw_render(const draw_req *q, const draw_made *m, http_resp *rs, dp_err *err)
{
    json_t *body =
        draw_json(m->id, m->created_ms, m->dist, (int64_t)m->k, q->grid, m->cand, q->label,
                  acct_tuning_expected_runs(&q->d), acct_tuning_prob_zero(&q->d));
    if (body == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    return http_resp_created(rs, body, err, "/v1/tuning/draws/%lld", (long long)m->id);
}

/* A draw being recorded: the row the writer stores and what the answer needs. On the heap, since a
 * deferred answer outlives the handler call (http/server.h PENDING): q.label borrows from the
 * request body, which the dispatcher keeps until release. */
typedef struct draw_state {
    http_pending base; /* first: the dispatcher holds &base */
    draw_req q;
    draw_made m;
    draw_new row;                 /* what draws_insert stores; its texts borrow from m, q, req_id */
    char req_id[HTTP_REQ_ID_MAX]; /* the request's id, for the row and the writer's log lines */
    db_writer_call call;          /* while deferred */
} draw_state;

static void draw_state_free(draw_state *s)
{
    if (s == NULL)
        return;
    draw_made_clear(&s->m);
    dp_free(s);
}

/* The row of a draw made (s->m), stamped now. */
static void draw_row_fill(const http_req *rq, draw_state *s)
{
    snprintf(s->req_id, sizeof s->req_id, "%s", rq->req_id ? rq->req_id : "");
    s->m.created_ms = time_now_ms();
    s->row = (draw_new){.created_at_ms = s->m.created_ms,
                        .request_id = rq->req_id ? s->req_id : NULL,
                        .distribution = s->m.dist_text,
                        .runs = (int64_t)s->m.k,
                        .expected_runs = acct_tuning_expected_runs(&s->q.d),
                        .prob_no_run = acct_tuning_prob_zero(&s->q.d),
                        .grid_size = s->q.grid,
                        .candidates = s->m.cand_text,
                        .label = s->q.label,
                        .creator_token_id = s->q.creator};
}

/* db/writer.h apply: the draw's row, on the writer's connection, in its savepoint. */
static int draw_apply(sqlite3 *db, void *arg, dp_err *err)
{
    draw_state *s = arg;
    return draws_insert(db, &s->row, &s->m.id, s->req_id, err);
}

/* http_pending.resume: the writer has committed the row (or failed); answer. */
static int draw_resume(http_pending *p, const http_req *rq, http_resp *rs, dp_err *err)
{
    (void)rq;
    draw_state *s = (draw_state *)p;
    int rc = db_writer_call_result(&s->call, err);
    return rc == DP_OK ? draw_render(&s->q, &s->m, rs, err) : rc;
}

static void draw_release(http_pending *p)
{
    draw_state_free((draw_state *)p);
}

/* Records the draw (db/draws.h) through the database's writer and answers once it is committed: a
 * draw the client sees is always on file. Deferred when the dispatcher offers it (the MHD thread
 * does not wait for the group commit), otherwise on this thread. Without a writer (a unit test
 * without the ledger's threads) the row is written on the request's connection. Takes s. */
static int draw_record(const http_req *rq, http_resp *rs, draw_state *s, dp_err *err)
{
    draw_row_fill(rq, s);
    db_writer *w = rq->app->writer;
    int rc;
    if (w != NULL && rq->defer != NULL) {
        rc = db_writer_start(w, &s->call, draw_apply, s, rq->defer->wake, rq->defer->arg, err);
        if (rc == DP_OK) {
            s->base.resume = draw_resume;
            s->base.release = draw_release;
            rs->pending = &s->base;
            return DP_OK;
        }
    } else if (w != NULL) {
        rc = db_writer_run(w, draw_apply, s, err);
    } else {
        rc = db_writer_run_conn(rq->db, draw_apply, s, err);
    }
    if (rc == DP_OK)
        rc = draw_render(&s->q, &s->m, rs, err);
    draw_state_free(s);
    return rc;
}

int route_tuning_draw(const http_req *rq, http_resp *rs, dp_err *err)
{
    draw_state *s = dp_calloc(1, sizeof *s);
    if (s == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    int rc = draw_parse(rq, &s->q, err);
    if (rc == DP_OK)
        rc = draw_run(&s->q, rq->req_id, &s->m, err);
    if (rc != DP_OK) {
        draw_state_free(s);
        return rc;
    }
    return draw_record(rq, rs, s, err);
}

/* ---- GET /v1/tuning/draws/{id} ---- */

/* Sends the 200 answer for a stored draw (its JSON columns parsed back). */
static int draw_row_render(const http_req *rq, const draw_row *row, http_resp *rs, dp_err *err)
{
    json_error_t je;
    json_t *dist = row->distribution ? json_util_loads(row->distribution, 0, &je) : NULL;
    json_t *cand = row->candidates ? json_util_loads(row->candidates, 0, &je) : NULL;
    json_t *body = NULL;
    int rc;
    if (dist == NULL || (row->candidates && cand == NULL)) {
        dp_log(DP_LOG_ERROR, rq->req_id, "tuning draw %lld: stored JSON unreadable",
               (long long)row->id);
        rc = dp_err_set(err, DP_EINTERNAL, NULL, "stored draw is unreadable");
        goto out;
    }
    body = draw_json(row->id, row->created_at_ms, dist, row->runs, row->grid_size, cand, row->label,
                     row->expected_runs, row->prob_no_run);
    rc = body ? http_resp_json(rs, 200, body, err)
              : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
out:
    json_decref(dist);
    json_decref(cand);
    return rc;
}

int route_tuning_draw_get(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t id;
    draw_viewer viewer;
    int rc = auth_viewer(rq, &viewer, NULL, err);
    if (rc == DP_OK)
        rc = http_req_param_id(rq, "id", &id, err);
    if (rc != DP_OK)
        return rc;
    draw_row row;
    bool found = false;
    if ((rc = draws_get(rq->db, id, &viewer, &row, &found, rq->req_id, err)) != DP_OK)
        return rc;
    if (!found)
        return http_err_not_found(err, "id", "tuning draw", id);
    rc = draw_row_render(rq, &row, rs, err);
    draw_row_clear(&row);
    return rc;
}
