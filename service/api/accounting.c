/*
 * api/accounting.c: the stateless privacy calculators (issue #3).
 *
 *   POST /v1/accounting/epsilon    {"event", "delta", "accountant"?, "orders"?, "conversion"?,
 *                                   "neighboring"?}            -> epsilon and how it was computed
 *   POST /v1/accounting/delta      {"event", "epsilon", ...}   -> delta
 *   POST /v1/accounting/rdp        {"event", "orders"?, "delta"?, "neighboring"?} -> the RDP curve
 *   POST /v1/accounting/calibrate  {"event" with nulls, "target_epsilon", "delta", ...}
 *                                   -> noise_multiplier | count | sampling_rate, achieved epsilon
 *
 * accountant: "rdp" (default; accounting/rdp.h), "zcdp" (accounting/zcdp.h) or "pld"
 * (accounting/pld.h: the answer is the bracket [epsilon_lower, epsilon] with epsilon the
 * pessimistic bound; options "value_discretization" and "tail_mass_truncation" apply to pld only).
 * conversion: rdp: "optimal" (default) | "balle2020" | "mironov2017"; zcdp: "cks2020" (default) |
 * "bun_steinke2016". orders (rdp only): 1..4096 orders in (1, 1e5]; default: the documented grid.
 * order_search (rdp only): "grid" | "continuous"; default continuous on the default grid, grid
 * when orders are given (parse_order_search).
 * Every answer names the accountant, the conversion, the order search and optimal order, the
 * orders used and the neighbouring relation. Infinite values are written as null with a "reason".
 * Errors: 400 naming the field (codec/event_json.h lists the event rules), 422 when the target is
 * impossible (calibration) or a computation does not converge.
 *
 * The handlers only read the body and never touch the store, so cli/dpsilo-account calls them
 * directly with a stack http_req: the CLI and the daemon give byte-identical answers.
 */
#include <math.h>
#include <string.h>

#include "accounting/calibrate.h"
#include "accounting/pld.h"
#include "accounting/rdp.h"
#include "accounting/zcdp.h"
#include "common/dp_math.h"
#include "common/dp_alloc.h"
#include "service/base/cfg.h"
#include "service/codec/event_json.h"
#include "service/codec/json_util.h"
#include "service/http/offload.h"
#include "service/api/routes.h"

enum { ACC_RDP = 0, ACC_ZCDP, ACC_PLD, ACC_N };
static const char *const ACC_NAMES[ACC_N] = {"rdp", "zcdp", "pld"}; /* as sent and answered */

typedef struct acc_req {
    acct_event *ev; /* owned */
    acct_neighboring nb;
    int accountant;             /* ACC_* */
    acct_conversion conv;       /* rdp */
    acct_zcdp_conversion zconv; /* zcdp */
    double *orders;             /* owned copy of the request's orders, or NULL for the default */
    size_t n_orders;
    acct_pld_opts pld; /* pld options (defaults unless the request sets them) */
} acc_req;

static void acc_req_free(acc_req *r)
{
    acct_event_free(r->ev);
    dp_free(r->orders);
}

static int parse_orders(const json_t *body, acc_req *r, dp_err *err)
{
    const json_t *o = json_object_get(body, "orders");
    if (o == NULL || json_is_null(o))
        return DP_OK;
    if (r->accountant != ACC_RDP)
        return dp_err_set(err, DP_EINVAL, "orders", "orders apply to accountant \"rdp\" only");
    if (!json_is_array(o) || json_array_size(o) == 0)
        return dp_err_set(err, DP_EINVAL, "orders", "orders must be a non-empty array of numbers");
    size_t n = json_array_size(o);
    if (n > ACCT_RDP_MAX_ORDERS)
        return dp_err_set(err, DP_EINVAL, "orders", "at most %d orders are accepted",
                          ACCT_RDP_MAX_ORDERS);
    r->orders = dp_malloc(n * sizeof *r->orders);
    if (r->orders == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(o, i);
        if (!json_is_number(v)) {
            char f[32];
            snprintf(f, sizeof f, "orders[%zu]", i);
            return dp_err_set(err, DP_EINVAL, f, "each order must be a number, got %s",
                              json_util_type_name(v));
        }
        r->orders[i] = json_number_value(v);
    }
    r->n_orders = n;
    return acct_rdp_check_orders(r->orders, n, err);
}

/* "order_search" (rdp only; docs/ACCOUNTING.md "Orders"): "grid" converts at the orders used only,
 * "continuous" also refines the order between grid neighbours (conversion optimal). Default:
 * continuous with the default grid, but grid when the caller gives orders, so the optimal order is
 * always one of the orders the caller asked for unless they ask for the search. Grid search is the
 * optimal conversion restricted to the grid, i.e. balle2020 (rdp.h). Call after parse_orders. */
static int parse_order_search(const json_t *body, acc_req *r, dp_err *err)
{
    const char *os;
    int rc = json_util_opt_string(body, "order_search", NULL, &os, err);
    if (rc != DP_OK)
        return rc;
    if (os != NULL && r->accountant != ACC_RDP)
        return dp_err_set(err, DP_EINVAL, "order_search",
                          "order_search applies to accountant \"rdp\" only");
    if (os != NULL && strcmp(os, "grid") != 0 && strcmp(os, "continuous") != 0)
        return dp_err_set(err, DP_EINVAL, "order_search",
                          "order_search must be \"grid\" or \"continuous\"");
    bool continuous = os != NULL ? strcmp(os, "continuous") == 0
                                 : r->orders == NULL && r->conv == ACCT_CONV_OPTIMAL;
    if (continuous && r->conv != ACCT_CONV_OPTIMAL)
        return dp_err_set(err, DP_EINVAL, "order_search",
                          "order_search \"continuous\" needs conversion \"optimal\" (got \"%s\")",
                          acct_conversion_name(r->conv));
    if (!continuous && r->conv == ACCT_CONV_OPTIMAL)
        r->conv = ACCT_CONV_BALLE2020;
    return DP_OK;
}

/* Common request fields. allow_open: calibration. */
static int parse_common(const json_t *body, bool allow_open, acc_req *r, dp_err *err)
{
    memset(r, 0, sizeof *r);
    r->conv = ACCT_CONV_OPTIMAL;
    r->zconv = ACCT_ZCDP_CKS2020;
    const char *acc, *conv;
    int rc;
    if ((rc = json_util_opt_string(body, "accountant", "rdp", &acc, err)) != DP_OK)
        return rc;
    r->accountant = 0;
    while (r->accountant < ACC_N && strcmp(acc, ACC_NAMES[r->accountant]) != 0)
        r->accountant++;
    if (r->accountant == ACC_N)
        return dp_err_set(err, DP_EINVAL, "accountant",
                          "accountant must be \"rdp\", \"zcdp\" or \"pld\"");
    if ((rc = json_util_opt_string(body, "conversion", NULL, &conv, err)) != DP_OK)
        return rc;
    acct_pld_opts_default(&r->pld);
    static const char *const pld_keys[] = {"value_discretization", "tail_mass_truncation"};
    for (size_t i = 0; i < 2; i++)
        if (json_object_get(body, pld_keys[i]) != NULL && r->accountant != ACC_PLD)
            return dp_err_set(err, DP_EINVAL, pld_keys[i], "%s applies to accountant \"pld\" only",
                              pld_keys[i]);
    if (r->accountant == ACC_PLD) {
        if (conv != NULL)
            return dp_err_set(err, DP_EINVAL, "conversion",
                              "the pld accountant has no conversion (it computes delta(eps) "
                              "directly)");
        if ((rc = json_util_opt_number(body, "value_discretization", r->pld.value_discretization,
                                       &r->pld.value_discretization, err)) != DP_OK ||
            (rc = json_util_opt_number(body, "tail_mass_truncation", r->pld.tail_mass_truncation,
                                       &r->pld.tail_mass_truncation, err)) != DP_OK ||
            (rc = acct_pld_opts_check(&r->pld, err)) != DP_OK)
            return rc;
    }
    if (conv != NULL) {
        rc = r->accountant == ACC_RDP ? acct_conversion_parse(conv, &r->conv, err)
                                      : acct_zcdp_conversion_parse(conv, &r->zconv, err);
        if (rc != DP_OK)
            return rc;
    }
    if ((rc = event_json_neighboring(body, &r->nb, err)) != DP_OK ||
        (rc = parse_orders(body, r, err)) != DP_OK ||
        (rc = parse_order_search(body, r, err)) != DP_OK)
        return rc;
    return event_json_parse(json_object_get(body, "event"), allow_open, "event", &r->ev, err);
}

static int check_delta(double d, dp_err *err)
{
    if (d == 0.0) /* say why not: pure DP is what a user asking for delta 0 wants */
        return dp_err_set(err, DP_EINVAL, "delta",
                          "delta must be in (0, 1), got 0: the accountants convert at delta > 0 "
                          "only; pure events (pure, laplace) have delta 0 by themselves, and their "
                          "composition costs at most the sum of their epsilons");
    if (!(d > 0.0 && d < 1.0))
        return dp_err_set(err, DP_EINVAL, "delta", "delta must be in (0, 1), got %g", d);
    return DP_OK;
}

/* The orders used: the request's, or the default grid. Returns their number. */
static size_t orders_used(const acc_req *r, const double **ord)
{
    *ord = r->orders;
    return r->orders != NULL ? r->n_orders : acct_rdp_default_orders(ord);
}

/* Ends a handler: releases r, then answers 200 with o (stolen), or drops o and passes rc on. */
static int answer(http_resp *rs, acc_req *r, json_t *o, int rc, dp_err *err)
{
    acc_req_free(r);
    if (rc != DP_OK) {
        json_decref(o);
        return rc;
    }
    return http_resp_json(rs, 200, o, err);
}

/* "orders": the list used (request's or default). */
static int set_orders(json_t *o, const acc_req *r, dp_err *err)
{
    const double *ord;
    size_t n = orders_used(r, &ord);
    json_t *a = json_array();
    if (a == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (json_array_append_new(a, json_real(ord[i])) != 0) {
            json_decref(a);
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        }
    return json_util_set(o, "orders", a, err);
}

/* Members shared by every answer. */
static int set_method(json_t *o, const acc_req *r, const acct_rdp_answer *a, double zopt,
                      dp_err *err)
{
    int rc = json_util_set(o, "accountant", json_string(ACC_NAMES[r->accountant]), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "neighboring", json_string(event_json_neighboring_name(r->nb)), err);
    if (rc != DP_OK)
        return rc;
    if (r->accountant == ACC_PLD) {
        rc = json_util_set(o, "value_discretization", json_real(r->pld.value_discretization), err);
        if (rc == DP_OK)
            rc = json_util_set(o, "tail_mass_truncation", json_real(r->pld.tail_mass_truncation),
                               err);
        return rc;
    }
    if (r->accountant == ACC_ZCDP) {
        rc = json_util_set(o, "conversion", json_string(acct_zcdp_conversion_name(r->zconv)), err);
        if (rc == DP_OK)
            rc = json_util_set(o, "optimal_order", json_util_real(zopt), err);
        return rc;
    }
    if (a != NULL) {
        rc = json_util_set(o, "conversion", json_string(acct_conversion_name(a->conversion)), err);
        if (rc == DP_OK)
            rc = json_util_set(o, "order_search",
                               json_string(a->continuous ? "continuous" : "grid"), err);
        if (rc == DP_OK)
            rc = json_util_set(o, "optimal_order", json_util_real(a->optimal_order), err);
        if (rc == DP_OK && a->basic_composition) /* all-pure tree: the sum of its epsilons won */
            rc = json_util_set(o, "basic_composition", json_true(), err);
        if (rc != DP_OK)
            return rc;
    }
    return set_orders(o, r, err);
}

/* Value member, with a reason when it is not finite. */
static int set_value(json_t *o, const char *key, double v, const char *reason, dp_err *err)
{
    int rc = json_util_set(o, key, json_util_real(v), err);
    if (rc == DP_OK && !isfinite(v))
        rc = json_util_set(o, "reason", json_string(reason), err);
    return rc;
}

static int rho_of(const acc_req *r, double *rho, dp_err *err)
{
    if (r->nb != ACCT_NB_ADD_REMOVE && r->nb != ACCT_NB_REPLACE_ONE)
        return dp_err_set(err, DP_EINVAL, "neighboring", "unknown neighbouring relation");
    int rc = acct_zcdp_eval(r->ev, rho, err);
    if (rc != DP_OK && err->field[0] != '\0' && strncmp(err->field, "event", 5) != 0)
        dp_err_prefix_field(err, "event");
    return rc;
}

/* Whether an error field names a request member (not a node of the event tree). */
static bool is_request_field(const char *field)
{
    static const char *const request_fields[] = {"neighboring",
                                                 "delta",
                                                 "epsilon",
                                                 "conversion",
                                                 "value_discretization",
                                                 "tail_mass_truncation",
                                                 "leaf_tail_mass",
                                                 "max_grid_points"};
    if (strncmp(field, "orders", 6) == 0)
        return true;
    for (size_t i = 0; i < sizeof request_fields / sizeof request_fields[0]; i++)
        if (strcmp(field, request_fields[i]) == 0)
            return true;
    return false;
}

/* The library reports tree paths relative to the root node; the request calls the root "event". */
static int tree_err(int rc, dp_err *err)
{
    if (rc == DP_OK || err->code != DP_EINVAL || is_request_field(err->field))
        return rc;
    dp_err_prefix_field(err, "event");
    return rc;
}

/* An epsilon or delta query, parsed: computed by acc_run (on the compute pool for the PLD
 * accountant, inline for the cheap ones), answered by acc_render. */
typedef struct acc_job {
    acc_req r; /* owned */
    bool want_delta;
    double target;
    /* outcome */
    double value, zopt, rho;
    acct_rdp_answer a;
    acct_pld_result pr;
} acc_job;

static void acc_job_free(void *arg)
{
    acc_job *j = arg;
    acc_req_free(&j->r);
    dp_free(j);
}

static int acc_run(void *arg, const atomic_bool *cancel, dp_err *err)
{
    (void)cancel; /* one composition: not split */
    acc_job *j = arg;
    acc_req *r = &j->r;
    int rc;
    if (r->accountant == ACC_RDP) {
        rc = j->want_delta ? acct_rdp_delta(r->ev, r->nb, j->target, r->conv, r->orders,
                                            r->n_orders, &j->a, err)
                           : acct_rdp_epsilon(r->ev, r->nb, j->target, r->conv, r->orders,
                                              r->n_orders, &j->a, err);
        rc = tree_err(rc, err);
        j->value = j->a.value;
    } else if (r->accountant == ACC_PLD) {
        rc = j->want_delta ? acct_pld_delta(r->ev, r->nb, j->target, &r->pld, &j->pr, err)
                           : acct_pld_epsilon(r->ev, r->nb, j->target, &r->pld, &j->pr, err);
        rc = tree_err(rc, err);
        j->value = j->want_delta ? j->pr.delta_upper : j->pr.epsilon_upper;
    } else {
        rc = rho_of(r, &j->rho, err);
        if (rc == DP_OK)
            rc = j->want_delta
                     ? acct_zcdp_to_delta(j->rho, j->target, r->zconv, &j->value, &j->zopt, err)
                     : acct_zcdp_to_epsilon(j->rho, j->target, r->zconv, &j->value, &j->zopt, err);
    }
    return rc;
}

static int acc_render(void *arg, const http_req *rq, http_resp *rs, bool deferred, dp_err *err)
{
    (void)rq;
    (void)deferred;
    acc_job *j = arg;
    acc_req *r = &j->r;
    bool want_delta = j->want_delta;
    json_t *o = json_object();
    if (o == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    int rc = DP_OK;
    if (r->accountant == ACC_PLD) {
        const acct_pld_result *pr = &j->pr; /* the optimistic end of the bracket (pld.h) */
        rc = json_util_set(o, want_delta ? "delta_lower" : "epsilon_lower",
                           json_util_real(want_delta ? pr->delta_lower : pr->epsilon_lower), err);
        if (rc == DP_OK)
            rc = json_util_set(o, "grid_points", json_integer((json_int_t)pr->grid_points), err);
        if (rc == DP_OK)
            rc = json_util_set(o, "direction", json_string(pr->direction), err);
        if (rc == DP_OK)
            rc = json_util_set(o, "infinity_mass", json_util_real(pr->infinity_mass), err);
        if (rc == DP_OK)
            rc = json_util_set(o, "truncated_mass", json_util_real(pr->truncated_mass), err);
    } else if (r->accountant == ACC_ZCDP) {
        rc = json_util_set(o, "rho", json_real(j->rho), err);
    }
    if (rc == DP_OK)
        rc = set_value(o, want_delta ? "delta" : "epsilon", j->value,
                       "the privacy loss is unbounded at every order", err);
    if (rc == DP_OK)
        rc = json_util_set(o, want_delta ? "epsilon" : "delta", json_real(j->target), err);
    if (rc == DP_OK)
        rc = set_method(o, r, r->accountant == ACC_RDP ? &j->a : NULL, j->zopt, err);
    if (rc != DP_OK) {
        json_decref(o);
        return rc;
    }
    return http_resp_json(rs, 200, o, err);
}

/* Runs a parsed calculator task: on the compute pool for the PLD accountant (FFTs over grids of up
 * to --max-pld-points; issue 10), inline for RDP and zCDP (microseconds). t->arg is stolen. */
static int run_task(const http_req *rq, http_resp *rs, bool heavy, const compute_task *t,
                    dp_err *err)
{
    if (heavy)
        return compute_offload(rq, rs, t, err);
    int rc = t->run(t->arg, NULL, err);
    if (rc == DP_OK)
        rc = t->render(t->arg, rq, rs, false, err);
    t->free(t->arg);
    return rc;
}

/* The PLD grid cap of this daemon (--max-pld-points), checked before any PMF is built. */
static void pld_cap(const http_req *rq, acc_req *r)
{
    if (rq->app->cfg != NULL && rq->app->cfg->max_pld_points >= CFG_MIN_PLD_POINTS)
        r->pld.max_grid_points = rq->app->cfg->max_pld_points;
}

static int epsilon_or_delta(const http_req *rq, http_resp *rs, dp_err *err, bool want_delta)
{
    static const char *const keys[] = {"event",
                                       "delta",
                                       "epsilon",
                                       "accountant",
                                       "orders",
                                       "order_search",
                                       "conversion",
                                       "neighboring",
                                       "value_discretization",
                                       "tail_mass_truncation"};
    const json_t *body = rq->body;
    int rc = json_util_require_object(body, NULL, err);
    if (rc != DP_OK)
        return rc;
    if ((rc = json_util_check_keys(body, keys, sizeof keys / sizeof keys[0], err)) != DP_OK)
        return rc;
    if (json_object_get(body, want_delta ? "delta" : "epsilon") != NULL)
        return dp_err_set(err, DP_EINVAL, want_delta ? "delta" : "epsilon",
                          "this endpoint computes %s; give %s instead",
                          want_delta ? "delta" : "epsilon", want_delta ? "epsilon" : "delta");
    double target;
    if ((rc = json_util_req_number(body, want_delta ? "epsilon" : "delta", &target, err)) != DP_OK)
        return rc;
    if (!want_delta && (rc = check_delta(target, err)) != DP_OK)
        return rc;
    if (want_delta && !(target >= 0.0))
        return dp_err_set(err, DP_EINVAL, "epsilon", "epsilon must be >= 0, got %g", target);
    acc_job *j = dp_calloc(1, sizeof *j);
    if (j == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    if ((rc = parse_common(body, false, &j->r, err)) != DP_OK) {
        acc_job_free(j);
        return rc;
    }
    pld_cap(rq, &j->r);
    j->want_delta = want_delta;
    j->target = target;
    j->zopt = DP_NAN;
    compute_task t = {acc_run, acc_render, acc_job_free, j, COMPUTE_OPEN};
    return run_task(rq, rs, j->r.accountant == ACC_PLD, &t, err);
}

int route_accounting_epsilon(const http_req *rq, http_resp *rs, dp_err *err)
{
    return epsilon_or_delta(rq, rs, err, false);
}

int route_accounting_delta(const http_req *rq, http_resp *rs, dp_err *err)
{
    return epsilon_or_delta(rq, rs, err, true);
}

int route_accounting_rdp(const http_req *rq, http_resp *rs, dp_err *err)
{
    static const char *const keys[] = {"event",       "orders",     "delta",       "conversion",
                                       "neighboring", "accountant", "order_search"};
    const json_t *body = rq->body;
    int rc = json_util_require_object(body, NULL, err);
    if (rc != DP_OK || (rc = json_util_check_keys(body, keys, sizeof keys / sizeof keys[0], err)))
        return rc;
    const char *acc;
    if ((rc = json_util_opt_string(body, "accountant", "rdp", &acc, err)) != DP_OK)
        return rc;
    if (strcmp(acc, "rdp") != 0)
        return dp_err_set(err, DP_EINVAL, "accountant",
                          "/v1/accounting/rdp computes RDP curves: accountant must be \"rdp\"");
    double delta;
    if ((rc = json_util_opt_number(body, "delta", DP_NAN, &delta, err)) != DP_OK)
        return rc;
    if (!isnan(delta) && (rc = check_delta(delta, err)) != DP_OK)
        return rc;
    acc_req r;
    if ((rc = parse_common(body, false, &r, err)) != DP_OK) {
        acc_req_free(&r);
        return rc;
    }
    const double *ord;
    size_t n = orders_used(&r, &ord);
    double *curve = dp_malloc(n * sizeof *curve);
    json_t *o = json_object(), *arr = json_array();
    if (curve == NULL || o == NULL || arr == NULL)
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    if (rc == DP_OK)
        rc = tree_err(acct_rdp_eval(r.ev, r.nb, ord, n, curve, err), err);
    for (size_t i = 0; rc == DP_OK && i < n; i++)
        if (json_array_append_new(arr, json_util_real(curve[i])) != 0)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    if (rc == DP_OK) {
        rc = json_util_set(o, "rdp", arr, err);
        arr = NULL;
    }
    acct_rdp_answer a = {0};
    if (rc == DP_OK && !isnan(delta)) {
        rc = tree_err(acct_rdp_epsilon(r.ev, r.nb, delta, r.conv, r.orders, r.n_orders, &a, err),
                      err);
        if (rc == DP_OK)
            rc = set_value(o, "epsilon", a.value, "the RDP curve is infinite at every order", err);
        if (rc == DP_OK)
            rc = json_util_set(o, "delta", json_real(delta), err);
    }
    if (rc == DP_OK)
        rc = set_method(o, &r, isnan(delta) ? NULL : &a, DP_NAN, err);
    bool any_inf = false;
    for (size_t i = 0; rc == DP_OK && i < n; i++)
        any_inf = any_inf || !isfinite(curve[i]);
    if (rc == DP_OK && any_inf && json_object_get(o, "reason") == NULL)
        rc =
            json_util_set(o, "reason", json_string("rdp is null where the curve is infinite"), err);
    dp_free(curve);
    json_decref(arr);
    return answer(rs, &r, o, rc, err);
}

/* Calibration callback for the PLD accountant: the pessimistic epsilon. */
typedef struct pld_ctx {
    acct_neighboring nb;
    double delta;
    const acct_pld_opts *opts;
    acct_pld_ws *ws; /* FFT tables reused across the bisection */
} pld_ctx;

static int pld_eps(const acct_event *ev, void *p, double *eps, dp_err *err)
{
    pld_ctx *c = p;
    acct_pld_result r;
    int rc = acct_pld_epsilon_ws(ev, c->nb, c->delta, c->opts, c->ws, &r, err);
    if (rc == DP_OK)
        *eps = r.epsilon_upper;
    return rc;
}

/* A calibration, parsed: searched by cal_run (on the compute pool for the PLD accountant),
 * answered by cal_render. */
typedef struct cal_job {
    acc_req r; /* owned */
    double target, delta;
    acct_calib_result res;
    double last_order; /* rdp: the order of the last probe */
} cal_job;

static void cal_job_free(void *arg)
{
    cal_job *j = arg;
    acc_req_free(&j->r);
    dp_free(j);
}

static int cal_run(void *arg, const atomic_bool *cancel, dp_err *err)
{
    (void)cancel; /* a bounded search: not split */
    cal_job *j = arg;
    acc_req *r = &j->r;
    acct_calib_rdp_ctx rctx = {r->nb, j->delta, r->conv, r->orders, r->n_orders, DP_NAN};
    acct_calib_zcdp_ctx zctx = {j->delta, r->zconv};
    int rc;
    if (r->accountant == ACC_RDP) {
        rc = acct_calibrate(r->ev, j->target, acct_calib_rdp_eps, &rctx, &j->res, err);
        j->last_order = rctx.last_order;
    } else if (r->accountant == ACC_ZCDP) {
        rc = acct_calibrate(r->ev, j->target, acct_calib_zcdp_eps, &zctx, &j->res, err);
    } else {
        pld_ctx pctx = {r->nb, j->delta, &r->pld, acct_pld_ws_alloc()};
        if (pctx.ws == NULL)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        else
            rc = acct_calibrate(r->ev, j->target, pld_eps, &pctx, &j->res, err);
        acct_pld_ws_free(pctx.ws);
    }
    /* A probe the accountant could not evaluate is the calibration's error (calibrate.h): a grid
     * too fine stays a 400 naming value_discretization (the caller can coarsen it), any other
     * evaluation failure of a probe (e.g. a count beyond what pld composes) is 422. */
    if (rc != DP_OK && err->code == DP_EINVAL && strcmp(err->field, "target_epsilon") != 0) {
        bool tree_node = !is_request_field(err->field);
        tree_err(rc, err);
        if (tree_node && j->res.evaluations > 1) /* a failing first probe: the /epsilon status */
            err->code = DP_ENUMERIC;
    }
    return rc;
}

static int cal_render(void *arg, const http_req *rq, http_resp *rs, bool deferred, dp_err *err)
{
    (void)rq;
    (void)deferred;
    cal_job *j = arg;
    acc_req *r = &j->r;
    const acct_calib_result *res = &j->res;
    json_t *o = json_object();
    if (o == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    const char *key = res->kind == ACCT_OPEN_NOISE  ? "noise_multiplier"
                      : res->kind == ACCT_OPEN_RATE ? "sampling_rate"
                                                    : "count";
    int rc = json_util_set(o, key,
                           res->kind == ACCT_OPEN_COUNT ? json_integer((json_int_t)res->value)
                                                        : json_real(res->value),
                           err);
    if (rc == DP_OK)
        rc = json_util_set(o, "epsilon", json_real(res->epsilon), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "target_epsilon", json_real(j->target), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "delta", json_real(j->delta), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "evaluations", json_integer(res->evaluations), err);
    if (rc == DP_OK && r->accountant == ACC_RDP) {
        acct_rdp_answer a = {0, j->last_order,
                             r->conv == ACCT_CONV_MIRONOV2017 ? ACCT_CONV_MIRONOV2017
                                                              : ACCT_CONV_BALLE2020,
                             r->conv == ACCT_CONV_OPTIMAL, false};
        rc = set_method(o, r, &a, DP_NAN, err);
    } else if (rc == DP_OK) {
        rc = set_method(o, r, NULL, DP_NAN, err);
    }
    if (rc != DP_OK) {
        json_decref(o);
        return rc;
    }
    return http_resp_json(rs, 200, o, err);
}

int route_accounting_calibrate(const http_req *rq, http_resp *rs, dp_err *err)
{
    static const char *const keys[] = {"event",
                                       "target_epsilon",
                                       "delta",
                                       "accountant",
                                       "orders",
                                       "order_search",
                                       "conversion",
                                       "neighboring",
                                       "value_discretization",
                                       "tail_mass_truncation"};
    const json_t *body = rq->body;
    int rc = json_util_require_object(body, NULL, err);
    if (rc != DP_OK || (rc = json_util_check_keys(body, keys, sizeof keys / sizeof keys[0], err)))
        return rc;
    double target, delta;
    if ((rc = json_util_req_number(body, "target_epsilon", &target, err)) != DP_OK ||
        (rc = json_util_req_number(body, "delta", &delta, err)) != DP_OK ||
        (rc = check_delta(delta, err)) != DP_OK)
        return rc;
    if (!(target > 0.0))
        return dp_err_set(err, DP_EINVAL, "target_epsilon", "target_epsilon must be > 0, got %g",
                          target);
    cal_job *j = dp_calloc(1, sizeof *j);
    if (j == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    if ((rc = parse_common(body, true, &j->r, err)) != DP_OK) {
        cal_job_free(j);
        return rc;
    }
    pld_cap(rq, &j->r);
    j->target = target;
    j->delta = delta;
    j->last_order = DP_NAN;
    compute_task t = {cal_run, cal_render, cal_job_free, j, COMPUTE_OPEN};
    return run_task(rq, rs, j->r.accountant == ACC_PLD, &t, err);
}
