/*
 * api/silos.c: the HTTP face of the per-silo budget ledger (issue #5; docs/BUDGETS.md).
 *
 *   POST   /v1/silos                admin   create; answers the silo and its token (shown once)
 *   GET    /v1/silos                admin   ?limit=&after=&archived=true
 *   GET    /v1/silos/{id}           silo    ?verify=true recomputes the totals from the log
 *   PATCH  /v1/silos/{id}           admin   name, budget.epsilon / budget.delta / budget.rho
 *   DELETE /v1/silos/{id}           admin   archive (the log stays readable)
 *   POST   /v1/silos/{id}/charges   silo    one charge: event, idempotency_key, dry_run, reason,
 *                                           job_id
 *   GET    /v1/silos/{id}/charges   silo    audit log: ?limit=&after=&since=&until=&job_id=
 *   POST   /v1/charges              admin*  batch over several silos, all or nothing
 *   POST   /v1/silos/{id}/claims    silo    reserve (timeout_ms)
 *   GET    /v1/silos/{id}/claims    silo    its open claims (?limit=&after=)
 *   GET    /v1/claims/{id}          silo    a claim
 *   POST   /v1/claims/{id}/commit   silo    spend a reservation
 *   POST   /v1/claims/{id}/abort    silo    release it
 * "silo" = the admin token or that silo's token; *a silo token may batch-charge only itself.
 *
 * Every handler parses and validates its input into ledger/ledger.h structs, calls the ledger
 * (which does the transaction) and writes JSON. Non-finite figures are JSON null with a
 * "..._reason" beside them (docs/API.md, "Conventions"). A 409 budget_exhausted carries
 * error.details with the spent, reserved, requested, would-be and budget figures in the silo's
 * unit.
 *
 * Thread-safety: handlers run on MHD pool threads; everything they touch is per request except the
 * ledger, which is thread-safe.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accounting/event.h"
#include "common/dp_math.h"
#include "common/dp_alloc.h"
#include "service/api/auth.h"
#include "service/codec/event_json.h"
#include "service/http/err.h"
#include "service/codec/json_util.h"
#include "service/ledger/ledger.h"
#include "service/api/routes.h"
#include "service/base/time.h"

#define LEDGER_DEFAULT_CLAIM_MS 600000 /* claim timeout when timeout_ms is absent: 10 minutes */

/* ---- small parsers ---- */

/* ?limit= and ?after= by the one pagination rule of every list (http/server.h http_req_page). */
_Static_assert(HTTP_PAGE_LIMIT_MAX <= LEDGER_LIST_MAX, "a page must fit the ledger's list cap");
static int query_limit(const http_req *rq, size_t *limit, int64_t *after, dp_err *err)
{
    int64_t v;
    if (http_req_page(rq, &v, after, err) != DP_OK)
        return err->code;
    *limit = (size_t)v;
    return DP_OK;
}

static int query_bool(const http_req *rq, const char *name, bool *out, dp_err *err)
{
    const char *v = http_req_query(rq, name);
    *out = false;
    if (v == NULL || strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
        return DP_OK;
    if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0) {
        *out = true;
        return DP_OK;
    }
    return dp_err_set(err, DP_EINVAL, name, "%s must be true or false", name);
}

/* An RFC 3339 time (grammar in base/time.h) to Unix milliseconds; 400 naming field otherwise. */
static int parse_time(const char *s, const char *field, int64_t *out, dp_err *err)
{
    if (time_parse_rfc3339(s, out) == 0)
        return DP_OK;
    return dp_err_set(err, DP_EINVAL, field,
                      "%s must be an RFC 3339 time such as 2026-11-22T13:00:00Z (got \"%.40s\")",
                      field, s ? s : "");
}

/* Unix milliseconds to RFC 3339 UTC with milliseconds; null for 0 (never set) and before. */
static json_t *time_json(int64_t ms)
{
    char buf[TIME_RFC3339_MAX];
    if (ms <= 0 || time_format_rfc3339(ms, buf, sizeof buf) < 0)
        return json_null();
    return json_string(buf);
}

/* ---- JSON writers ---- */

/* Sets key to x (null when not finite) and, when x is not finite, key_reason to why. */
static int set_figure(json_t *o, const char *key, double x, const char *why_nan, dp_err *err)
{
    if (json_util_set(o, key, json_util_real(x), err) != DP_OK)
        return err->code;
    if (isfinite(x))
        return DP_OK;
    char rk[64];
    snprintf(rk, sizeof rk, "%s_reason", key);
    const char *why = isnan(x) ? why_nan
                      : strstr(key, "rho") != NULL
                          ? "unbounded: some charge has no finite zCDP bound "
                            "(e.g. a Poisson-sampled mechanism)"
                          : "unbounded: the privacy loss has no finite bound";
    return json_util_set(o, rk, json_string(why), err);
}

/* Sets key to an object {"epsilon", "rho"} of the two figures, each as set_figure writes it. */
static int set_eps_rho(json_t *o, const char *key, double eps, double rho, const char *why_nan,
                       dp_err *err)
{
    json_t *p = json_object();
    int rc = p ? set_figure(p, "epsilon", eps, why_nan, err)
               : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    if (rc == DP_OK)
        rc = set_figure(p, "rho", rho, why_nan, err);
    if (rc != DP_OK) {
        json_decref(p);
        return rc;
    }
    return json_util_set(o, key, p, err);
}

static const char *NO_DELTA = "not applicable: the budget has no delta";
static const char *NOT_PRIVATE = "not applicable: the silo opted out of differential privacy";
static const char *RESERVED_UNKNOWN =
    "unknown: the spent total is already unbounded, so the active claims' share cannot be told";

static json_t *budget_json(const ledger_budget *b, dp_err *err)
{
    json_t *o = json_object();
    int rc = o ? DP_OK : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    if (rc == DP_OK && b->kind == LEDGER_BUDGET_NONE) {
        rc = json_util_set(o, "private", json_false(), err);
    } else if (rc == DP_OK) {
        if (b->kind == LEDGER_BUDGET_EPS_DELTA)
            rc = json_util_set(o, "epsilon", json_real(b->epsilon), err);
        else
            rc = json_util_set(o, "rho", json_real(b->rho), err);
        if (rc == DP_OK && !isnan(b->delta))
            rc = json_util_set(o, "delta", json_real(b->delta), err);
        if (rc == DP_OK)
            rc = json_util_set(o, "accountant", json_string(ledger_accountant_name(b->accountant)),
                               err);
        if (rc == DP_OK && b->accountant != LEDGER_ACCT_ZCDP)
            rc = json_util_set(o, "conversion", json_string(acct_conversion_name(b->conversion)),
                               err);
    }
    if (rc != DP_OK) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static const char *how_computed(const ledger_budget *b)
{
    switch (b->accountant) {
        case LEDGER_ACCT_RDP:
            return "sum of per-order RDP curves on the order grid, converted at delta (conversion "
                   "optimal: refined on a continuous order as the calculator does); all-pure logs "
                   "also bounded by the sum of their epsilons (basic composition)";
        case LEDGER_ACCT_ZCDP:
            return "sum of zCDP rho; epsilon from the RDP curve rho*alpha on the order grid "
                   "(Bun & Steinke 2016, Def. 1.1)";
        case LEDGER_ACCT_PLD:
            return "min of two upper bounds: the PLD accountant on the silo's whole log (identical "
                   "events grouped) and the sum of per-order RDP curves converted at delta";
        case LEDGER_ACCT_NONE:
            return "opted out of differential privacy: spends are recorded, never refused";
    }
    return "";
}

static json_t *silo_json(const ledger *l, const ledger_silo_view *v, dp_err *err)
{
    json_t *o = json_object(), *spent = json_object(), *res = json_object(), *acc = json_object();
    int rc = o && spent && res && acc ? DP_OK : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    const ledger_budget *b = &v->budget;
    const char *why = b->kind == LEDGER_BUDGET_NONE ? NOT_PRIVATE : NO_DELTA;
    size_t n_orders = 0;
    ledger_orders(l, &n_orders);
    if (rc == DP_OK)
        rc = json_util_set(o, "id", json_integer(v->id), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "name", json_string(v->name), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "created_at", time_json(v->created_at_ms), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "archived", json_boolean(v->archived_at_ms != 0), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "archived_at", time_json(v->archived_at_ms), err);
    if (rc == DP_OK) {
        json_t *bj = budget_json(b, err);
        rc = bj ? json_util_set(o, "budget", bj, err) : err->code;
    }
    /* spent */
    if (rc == DP_OK)
        rc = set_figure(spent, "epsilon", v->spent_eps, why, err);
    if (rc == DP_OK && !isnan(b->delta))
        rc = json_util_set(spent, "delta", json_real(b->delta), err);
    if (rc == DP_OK)
        rc = set_figure(spent, "rho", v->spent_rho, why, err);
    if (rc == DP_OK && isfinite(v->spent_order) && v->n_charges > 0)
        rc = json_util_set(spent, "optimal_order", json_real(v->spent_order), err);
    if (rc == DP_OK) {
        rc = json_util_set(o, "spent", spent, err);
        spent = NULL;
    }
    /* reserved by active claims: the difference they make to the totals */
    /* No active claim reserves nothing (held - spent would be inf - inf = NaN once the spent total
     * is unbounded, e.g. after a Poisson-sampled charge). With claims, a NaN difference of two
     * unbounded totals says so rather than blaming a missing delta. */
    double r_eps = v->held_eps - v->spent_eps, r_rho = v->held_rho - v->spent_rho;
    if (b->kind != LEDGER_BUDGET_NONE && v->n_active_claims == 0) {
        r_eps =
            isnan(v->spent_eps) ? v->spent_eps : 0.0; /* NaN spent: not applicable, same reason */
        r_rho = isnan(v->spent_rho) ? v->spent_rho : 0.0;
    }
    const char *why_eps = isnan(v->spent_eps) ? why : RESERVED_UNKNOWN;
    const char *why_rho = isnan(v->spent_rho) ? why : RESERVED_UNKNOWN;
    if (rc == DP_OK)
        rc = set_figure(res, "epsilon", isfinite(r_eps) && r_eps < 0 ? 0 : r_eps, why_eps, err);
    if (rc == DP_OK)
        rc = set_figure(res, "rho", isfinite(r_rho) && r_rho < 0 ? 0 : r_rho, why_rho, err);
    if (rc == DP_OK)
        rc = json_util_set(res, "active_claims", json_integer(v->n_active_claims), err);
    if (rc == DP_OK) {
        rc = json_util_set(o, "reserved", res, err);
        res = NULL;
    }
    /* remaining, in the budget's unit */
    if (rc == DP_OK) {
        if (b->kind == LEDGER_BUDGET_NONE) {
            rc = json_util_set(o, "remaining", json_null(), err);
            if (rc == DP_OK)
                rc = json_util_set(o, "remaining_reason", json_string(NOT_PRIVATE), err);
        } else {
            json_t *rem = json_object();
            rc = rem ? DP_OK : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
            if (rc == DP_OK)
                rc = set_figure(rem, b->kind == LEDGER_BUDGET_RHO ? "rho" : "epsilon", v->remaining,
                                why, err);
            if (rc == DP_OK)
                rc = json_util_set(o, "remaining", rem, err);
            else
                json_decref(rem);
        }
    }
    if (rc == DP_OK)
        rc = json_util_set(o, "n_charges", json_integer(v->n_charges), err);
    if (rc == DP_OK)
        rc = json_util_set(acc, "accountant", json_string(ledger_accountant_name(b->accountant)),
                           err);
    if (rc == DP_OK && b->kind != LEDGER_BUDGET_NONE)
        rc = json_util_set(acc, "conversion",
                           json_string(b->accountant == LEDGER_ACCT_ZCDP
                                           ? "balle2020 on the curve rho*alpha"
                                           : acct_conversion_name(b->conversion)),
                           err);
    if (rc == DP_OK)
        rc = json_util_set(acc, "orders", json_integer((json_int_t)n_orders), err);
    if (rc == DP_OK)
        rc = json_util_set(acc, "method", json_string(how_computed(b)), err);
    if (rc == DP_OK)
        rc = json_util_set(acc, "neighboring", json_string("per charge (default add_remove)"), err);
    if (rc == DP_OK) {
        rc = json_util_set(o, "accounting", acc, err);
        acc = NULL;
    }
    json_decref(spent);
    json_decref(res);
    json_decref(acc);
    if (rc != DP_OK) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Figures of an admission in the silo's unit. */
static json_t *figures_json(const ledger_charge_result *r, dp_err *err)
{
    json_t *o = json_object();
    int rc = o ? DP_OK : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    const char *why = r->kind == LEDGER_BUDGET_NONE ? NOT_PRIVATE : NO_DELTA;
    if (rc == DP_OK)
        rc = json_util_set(o, "silo_id", json_integer(r->silo_id), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "unit", json_string(r->kind == LEDGER_BUDGET_RHO ? "rho" : "epsilon"),
                           err);
    if (rc == DP_OK)
        rc = set_figure(o, "spent", r->spent, why, err);
    if (rc == DP_OK)
        rc = set_figure(o, "reserved", r->reserved, why, err);
    if (rc == DP_OK)
        rc = set_figure(o, "requested", r->requested, why, err);
    if (rc == DP_OK)
        rc = set_figure(o, "would_be", r->would_be, why, err);
    if (rc == DP_OK)
        rc = set_figure(o, "budget", r->budget, why, err);
    if (rc != DP_OK) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* One charge's answer: the charge and the silo's totals after it. */
static json_t *charge_json(const ledger_charge_req *q, const ledger_charge_result *r, dp_err *err)
{
    json_t *o = json_object(), *tot = json_object();
    int rc = o && tot ? DP_OK : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    const char *why = r->kind == LEDGER_BUDGET_NONE ? NOT_PRIVATE : NO_DELTA;
    if (rc == DP_OK)
        rc = json_util_set(o, "id", r->charge_id ? json_integer(r->charge_id) : json_null(), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "silo_id", json_integer(r->silo_id), err);
    if (rc == DP_OK && !r->dry_run)
        rc = json_util_set(o, "seq", json_integer(r->seq), err);
    if (rc == DP_OK && !r->dry_run)
        rc = json_util_set(o, "created_at", time_json(r->created_at_ms), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "idempotency_key",
                           q->idempotency_key ? json_string(q->idempotency_key) : json_null(), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "job_id", q->job_id ? json_integer(q->job_id) : json_null(), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "dry_run", json_boolean(r->dry_run), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "replayed", json_boolean(r->replayed), err);
    if (rc == DP_OK)
        rc = set_eps_rho(o, "cost", r->cost_eps, r->cost_rho, why, err);
    if (rc == DP_OK)
        rc = set_figure(tot, "spent_epsilon", r->spent_eps_after, why, err);
    if (rc == DP_OK)
        rc = set_figure(tot, "spent_rho", r->spent_rho_after, why, err);
    if (rc == DP_OK)
        rc = set_figure(tot, r->kind == LEDGER_BUDGET_RHO ? "remaining_rho" : "remaining_epsilon",
                        r->remaining_after, why, err);
    if (rc == DP_OK) {
        rc = json_util_set(o, "totals_after", tot, err);
        tot = NULL;
    }
    json_decref(tot);
    if (rc != DP_OK) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* A 409 budget_exhausted (or other refusal) with figures: the standard error body plus details. */
static int reply_refusal(const http_req *rq, http_resp *rs, const dp_err *e, json_t *details,
                         dp_err *err)
{
    json_t *body = http_err_body(e, rq->req_id);
    if (body == NULL) {
        json_decref(details);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    json_t *inner = json_object_get(body, "error");
    if (inner == NULL || json_util_set(inner, "details", details, err) != DP_OK) {
        json_decref(body);
        return err->code ? err->code : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    return http_resp_json(rs, http_err_status(e->code), body, err);
}

/* ---- request parsing ---- */

/* The parts of a charge/claim body common to every form. Strings are borrowed from the body; event
 * and event_json are owned (free with charge_input_clear). */
typedef struct charge_input {
    ledger_charge_req req;
    acct_event *event;
    char *event_json;
} charge_input;

static void charge_input_clear(charge_input *c)
{
    acct_event_free(c->event);
    free(c->event_json); /* json_util_dumps: dp_malloc, which free() releases */
    memset(c, 0, sizeof *c);
}

/* Reads event, neighboring, idempotency_key, reason and job_id from obj (keys already checked). */
static int charge_input_parse(const json_t *obj, int64_t silo_id, const ledger_principal *who,
                              charge_input *c, dp_err *err)
{
    memset(c, 0, sizeof *c);
    const json_t *ev = json_object_get(obj, "event");
    if (ev == NULL || json_is_null(ev))
        return dp_err_set(err, DP_EINVAL, "event", "event is required");
    if (event_json_parse(ev, false, "event", &c->event, err) != DP_OK)
        return err->code;
    c->event_json = json_util_dumps(ev, JSON_COMPACT | JSON_SORT_KEYS);
    if (c->event_json == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    if (event_json_neighboring(obj, &c->req.neighboring, err) != DP_OK)
        return err->code;
    if (json_util_opt_string(obj, "idempotency_key", NULL, &c->req.idempotency_key, err) != DP_OK ||
        json_util_opt_string(obj, "reason", NULL, &c->req.reason, err) != DP_OK ||
        json_util_opt_int(obj, "job_id", 0, &c->req.job_id, err) != DP_OK)
        return err->code;
    if (c->req.job_id < 0 || (json_object_get(obj, "job_id") &&
                              !json_is_null(json_object_get(obj, "job_id")) && c->req.job_id == 0))
        return dp_err_set(err, DP_EINVAL, "job_id", "job_id must be a positive integer");
    c->req.silo_id = silo_id;
    c->req.event = c->event;
    c->req.event_json = c->event_json;
    c->req.actor_token_id = who->token_id;
    return DP_OK;
}

static int path_id(const http_req *rq, int64_t *id, dp_err *err)
{
    return http_req_param_id(rq, "id", id, err);
}

static ledger *the_ledger(const http_req *rq, dp_err *err)
{
    if (rq->app->ledger == NULL)
        dp_err_set(err, DP_EINTERNAL, NULL, "the ledger is not available");
    return rq->app->ledger;
}

/* ---- silos ---- */

static int parse_budget(const json_t *bj, ledger_budget *b, dp_err *err)
{
    if (json_util_require_object(bj, "budget", err) != DP_OK)
        return err->code;
    static const char *const keys[] = {"epsilon",    "delta",      "rho",
                                       "accountant", "conversion", "private"};
    if (json_util_check_keys(bj, keys, sizeof keys / sizeof keys[0], err) != DP_OK) {
        dp_err_prefix_field(err, "budget");
        return err->code;
    }
    memset(b, 0, sizeof *b);
    b->conversion = ACCT_CONV_OPTIMAL; /* as the calculators' default (issue #10) */
    b->epsilon = b->delta = b->rho = DP_NAN;
    bool priv = true;
    const char *acct = NULL, *conv = NULL;
    int rc = json_util_opt_bool(bj, "private", true, &priv, err);
    if (rc == DP_OK)
        rc = json_util_opt_number(bj, "epsilon", DP_NAN, &b->epsilon, err);
    if (rc == DP_OK)
        rc = json_util_opt_number(bj, "delta", DP_NAN, &b->delta, err);
    if (rc == DP_OK)
        rc = json_util_opt_number(bj, "rho", DP_NAN, &b->rho, err);
    if (rc == DP_OK)
        rc = json_util_opt_string(bj, "accountant", NULL, &acct, err);
    if (rc == DP_OK)
        rc = json_util_opt_string(bj, "conversion", NULL, &conv, err);
    if (rc != DP_OK) {
        dp_err_prefix_field(err, "budget");
        return err->code;
    }
    if (!priv) {
        if (!isnan(b->epsilon) || !isnan(b->delta) || !isnan(b->rho) || acct || conv)
            return dp_err_set(
                err, DP_EINVAL, "budget.private",
                "a silo with \"private\": false has no epsilon, delta, rho or accountant");
        b->kind = LEDGER_BUDGET_NONE;
        b->accountant = LEDGER_ACCT_NONE;
        return DP_OK;
    }
    if (!isnan(b->rho)) {
        if (!isnan(b->epsilon))
            return dp_err_set(err, DP_EINVAL, "budget.rho",
                              "give either epsilon (with delta) or rho");
        b->kind = LEDGER_BUDGET_RHO;
        b->accountant = LEDGER_ACCT_ZCDP;
        if (acct != NULL && strcmp(acct, "zcdp") != 0)
            return dp_err_set(err, DP_EINVAL, "budget.accountant",
                              "a rho budget is accounted by \"zcdp\"");
    } else if (!isnan(b->epsilon)) {
        b->kind = LEDGER_BUDGET_EPS_DELTA;
        b->accountant = LEDGER_ACCT_RDP;
        if (isnan(b->delta))
            return dp_err_set(err, DP_EINVAL, "budget.delta",
                              "budget.delta is required with epsilon");
        if (acct != NULL && ledger_accountant_parse(acct, &b->accountant, err) != DP_OK)
            return err->code;
    } else {
        return dp_err_set(
            err, DP_EINVAL, "budget",
            "budget must be {\"epsilon\", \"delta\"}, {\"rho\"} or {\"private\": false}");
    }
    if (conv != NULL) {
        acct_conversion cv;
        if (acct_conversion_parse(conv, &cv, err) != DP_OK) {
            dp_err_prefix_field(err, "budget");
            return err->code;
        }
        b->conversion = cv;
    }
    return ledger_budget_check(b, err);
}

int route_silos_create(const http_req *rq, http_resp *rs, dp_err *err)
{
    ledger_principal who;
    ledger *l = the_ledger(rq, err);
    if (l == NULL || auth_require_admin(rq, &who, err) != DP_OK)
        return err->code;
    if (json_util_require_object(rq->body, "body", err) != DP_OK)
        return err->code;
    static const char *const keys[] = {"name", "budget"};
    if (json_util_check_keys(rq->body, keys, 2, err) != DP_OK)
        return err->code;
    const char *name = NULL;
    if (json_util_req_string(rq->body, "name", &name, err) != DP_OK)
        return err->code;
    const json_t *bj = json_object_get(rq->body, "budget");
    if (bj == NULL)
        return dp_err_set(err, DP_EINVAL, "budget", "budget is required");
    ledger_budget b;
    if (parse_budget(bj, &b, err) != DP_OK)
        return err->code;
    ledger_silo_view v;
    char token[LEDGER_TOKEN_BUF];
    if (ledger_silo_create(l, name, &b, &v, token, err) != DP_OK)
        return err->code;
    json_t *o = silo_json(l, &v, err);
    int rc = o ? json_util_set(o, "token", json_string(token), err) : err->code;
    if (rc == DP_OK)
        rc = json_util_set(o, "token_note",
                           json_string("shown once: store it now; only its hash is kept"), err);
    memset(token, 0, sizeof token);
    if (rc != DP_OK) {
        json_decref(o);
        return rc;
    }
    return http_resp_created(rs, o, err, "/v1/silos/%lld", (long long)v.id);
}

int route_silos_list(const http_req *rq, http_resp *rs, dp_err *err)
{
    ledger_principal who;
    ledger *l = the_ledger(rq, err);
    if (l == NULL || auth_require_admin(rq, &who, err) != DP_OK)
        return err->code;
    size_t limit = 0;
    int64_t after;
    bool archived;
    if (query_limit(rq, &limit, &after, err) != DP_OK || query_bool(rq, "archived", &archived, err))
        return err->code;
    ledger_silo_view *v = NULL, *more = NULL;
    size_t n = 0, n_more = 0;
    if (ledger_silo_list(l, rq->db, after, limit, archived, &v, &n, err) != DP_OK)
        return err->code;
    /* a full page: is anything after it? (next_after is null at the end, API.md) */
    if (n == limit &&
        ledger_silo_list(l, rq->db, v[n - 1].id, 1, archived, &more, &n_more, err) != DP_OK) {
        ledger_views_free(v);
        return err->code;
    }
    ledger_views_free(more);
    json_t *arr = json_array(), *o = json_object();
    int rc = arr && o ? DP_OK : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; rc == DP_OK && i < n; i++) {
        json_t *s = silo_json(l, &v[i], err);
        rc = s && json_array_append_new(arr, s) == 0
                 ? DP_OK
                 : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    if (rc == DP_OK) {
        rc = json_util_set(o, "silos", arr, err);
        arr = NULL;
    }
    if (rc == DP_OK)
        rc = json_util_set(o, "next_after", n_more > 0 ? json_integer(v[n - 1].id) : json_null(),
                           err);
    ledger_views_free(v);
    json_decref(arr);
    if (rc != DP_OK) {
        json_decref(o);
        return rc;
    }
    return http_resp_json(rs, 200, o, err);
}

int route_silo_get(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t id;
    ledger_principal who;
    bool verify;
    ledger *l = the_ledger(rq, err);
    if (l == NULL || path_id(rq, &id, err) != DP_OK ||
        auth_require_silo(rq, id, &who, err) != DP_OK ||
        query_bool(rq, "verify", &verify, err) != DP_OK)
        return err->code;
    ledger_silo_view v;
    if (ledger_silo_get(l, rq->db, id, &v, err) != DP_OK)
        return err->code;
    json_t *o = silo_json(l, &v, err);
    if (o == NULL)
        return err->code;
    int rc = DP_OK;
    if (verify) {
        ledger_verify ver;
        json_t *vj = json_object();
        rc = vj ? ledger_silo_verify(l, rq->db, id, &ver, err)
                : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        if (rc == DP_OK)
            rc = json_util_set(vj, "consistent", json_boolean(ver.consistent), err);
        if (rc == DP_OK)
            rc = json_util_set(vj, "n_charges_log", json_integer(ver.n_charges_log), err);
        if (rc == DP_OK)
            rc = json_util_set(vj, "n_charges_cached", json_integer(ver.n_charges_cached), err);
        if (rc == DP_OK)
            rc = json_util_set(vj, "spent_rho_log", json_util_real(ver.spent_rho_log), err);
        if (rc == DP_OK)
            rc = json_util_set(vj, "max_abs_diff_rdp", json_util_real(ver.max_abs_diff_rdp), err);
        if (rc == DP_OK) {
            rc = json_util_set(o, "verification", vj, err);
            vj = NULL;
        }
        json_decref(vj);
    }
    if (rc != DP_OK) {
        json_decref(o);
        return rc;
    }
    return http_resp_json(rs, 200, o, err);
}

int route_silo_patch(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t id;
    ledger_principal who;
    ledger *l = the_ledger(rq, err);
    if (l == NULL || path_id(rq, &id, err) != DP_OK || auth_require_admin(rq, &who, err) != DP_OK)
        return err->code;
    if (json_util_require_object(rq->body, "body", err) != DP_OK)
        return err->code;
    static const char *const keys[] = {"name", "budget"};
    if (json_util_check_keys(rq->body, keys, 2, err) != DP_OK)
        return err->code;
    ledger_patch p = {.name = NULL, .epsilon = DP_NAN, .delta = DP_NAN, .rho = DP_NAN};
    if (json_util_opt_string(rq->body, "name", NULL, &p.name, err) != DP_OK)
        return err->code;
    const json_t *bj = json_object_get(rq->body, "budget");
    if (bj != NULL && !json_is_null(bj)) {
        if (json_util_require_object(bj, "budget", err) != DP_OK)
            return err->code;
        static const char *const bkeys[] = {"epsilon", "delta", "rho"};
        if (json_util_check_keys(bj, bkeys, 3, err) != DP_OK ||
            json_util_opt_number(bj, "epsilon", DP_NAN, &p.epsilon, err) != DP_OK ||
            json_util_opt_number(bj, "delta", DP_NAN, &p.delta, err) != DP_OK ||
            json_util_opt_number(bj, "rho", DP_NAN, &p.rho, err) != DP_OK) {
            dp_err_prefix_field(err, "budget");
            return err->code;
        }
    }
    ledger_silo_view v;
    if (ledger_silo_patch(l, id, &p, &v, err) != DP_OK)
        return err->code;
    json_t *o = silo_json(l, &v, err);
    return o ? http_resp_json(rs, 200, o, err) : err->code;
}

int route_silo_delete(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t id;
    ledger_principal who;
    ledger *l = the_ledger(rq, err);
    if (l == NULL || path_id(rq, &id, err) != DP_OK || auth_require_admin(rq, &who, err) != DP_OK)
        return err->code;
    ledger_silo_view v;
    if (ledger_silo_archive(l, id, &v, err) != DP_OK)
        return err->code;
    json_t *o = silo_json(l, &v, err);
    return o ? http_resp_json(rs, 200, o, err) : err->code;
}

/* ---- silo tokens (issue 10, D2) ----
 * POST issues a new token for the silo (the admin, or the silo's own token) and revokes the old
 * one(s) in the same transaction: the old token answers 401 from the moment this returns. The
 * token is shown once; the body is empty or {}. DELETE (admin) revokes the silo's tokens without
 * issuing one; the silo keeps its budget and log, and POST gives it a token again. */
int route_silo_token_rotate(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t id, token_id = 0, n_revoked = 0;
    ledger_principal who;
    ledger *l = the_ledger(rq, err);
    if (l == NULL || path_id(rq, &id, err) != DP_OK ||
        auth_require_silo(rq, id, &who, err) != DP_OK)
        return err->code;
    if (rq->body != NULL && json_object_size(rq->body) != 0) /* none, or {} */
        return dp_err_set(err, DP_EINVAL, json_object_iter_key(json_object_iter(rq->body)),
                          "token rotation takes no body fields");
    char token[LEDGER_TOKEN_BUF];
    if (ledger_silo_token_rotate(l, id, token, &token_id, &n_revoked, err) != DP_OK)
        return err->code;
    json_t *o = json_pack("{s:I, s:I, s:s, s:s, s:I}", "silo_id", (json_int_t)id, "token_id",
                          (json_int_t)token_id, "token", token, "token_note",
                          "shown once: store it now; only its hash is kept. The previous token "
                          "no longer works",
                          "revoked", (json_int_t)n_revoked);
    memset(token, 0, sizeof token);
    if (o == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    return http_resp_json(rs, 200, o, err);
}

int route_silo_token_revoke(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t id, n_revoked = 0;
    ledger_principal who;
    ledger *l = the_ledger(rq, err);
    if (l == NULL || path_id(rq, &id, err) != DP_OK || auth_require_admin(rq, &who, err) != DP_OK)
        return err->code;
    if (ledger_silo_token_revoke(l, id, &n_revoked, err) != DP_OK)
        return err->code;
    json_t *o =
        json_pack("{s:I, s:I}", "silo_id", (json_int_t)id, "revoked", (json_int_t)n_revoked);
    return o ? http_resp_json(rs, 200, o, err) : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
}

/* ---- charges ---- */

static const char *const CHARGE_KEYS[] = {"event",   "neighboring", "idempotency_key",
                                          "dry_run", "reason",      "job_id"};

/* A charge in progress: what its answer needs. The strings of reqs borrow from the request body,
 * which the dispatcher keeps alive while the answer is deferred (http/server.h PENDING). */
typedef struct charge_state {
    http_pending base;     /* first: the dispatcher holds &base */
    bool batch;            /* POST /v1/charges (answer {"charges": [...]}) */
    const char *batch_key; /* its "idempotency_key" (borrowed from the body), or NULL */
    bool dry;
    int64_t silo_id; /* single charge: the path's silo */
    size_t n;
    charge_input *in;          /* n, owned */
    ledger_charge_req *reqs;   /* n */
    ledger_charge_result *res; /* n */
    ledger_pending *lp;        /* while deferred */
} charge_state;

static charge_state *charge_state_alloc(size_t n, dp_err *err)
{
    charge_state *s = dp_calloc(1, sizeof *s);
    if (s != NULL) {
        s->n = n;
        s->in = dp_calloc(n, sizeof *s->in);
        s->reqs = dp_calloc(n, sizeof *s->reqs);
        s->res = dp_calloc(n, sizeof *s->res);
    }
    if (s == NULL || s->in == NULL || s->reqs == NULL || s->res == NULL) {
        if (s != NULL) {
            dp_free(s->in);
            dp_free(s->reqs);
            dp_free(s->res);
            dp_free(s);
        }
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    return s;
}

static void charge_state_free(charge_state *s)
{
    if (s == NULL)
        return;
    ledger_pending_free(s->lp);
    for (size_t i = 0; i < s->n; i++)
        charge_input_clear(&s->in[i]);
    dp_free(s->in);
    dp_free(s->reqs);
    dp_free(s->res);
    dp_free(s);
}

/* The answer to a charge whose ledger call returned rc (message in e). */
static int charge_reply(const http_req *rq, http_resp *rs, const charge_state *s, int rc,
                        const dp_err *e, dp_err *err)
{
    if (rc == DP_EBUDGET) {
        size_t bad = 0;
        while (s->batch && bad < s->n && s->res[bad].status != DP_EBUDGET)
            bad++;
        if (bad >= s->n)
            bad = 0;
        json_t *d = figures_json(&s->res[bad], err);
        if (d != NULL && s->batch &&
            json_util_set(d, "index", json_integer((json_int_t)bad), err) != DP_OK) {
            json_decref(d);
            d = NULL;
        }
        return d != NULL ? reply_refusal(rq, rs, e, d, err) : err->code;
    }
    if (rc != DP_OK) {
        *err = *e;
        return rc;
    }
    if (!s->batch) {
        json_t *o = charge_json(&s->reqs[0], &s->res[0], err);
        rc = o ? http_resp_json(rs, s->dry ? 200 : 201, o, err) : err->code;
        if (rc == DP_OK && !s->dry && s->res[0].charge_id > 0)
            snprintf(rs->location, sizeof rs->location, "/v1/silos/%lld/charges?after=%lld&limit=1",
                     (long long)s->silo_id, (long long)(s->res[0].charge_id - 1));
        return rc;
    }
    json_t *o = json_object(), *a = json_array();
    rc = o && a ? DP_OK : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; rc == DP_OK && i < s->n; i++) {
        json_t *c = charge_json(&s->reqs[i], &s->res[i], err);
        rc = c && json_array_append_new(a, c) == 0
                 ? DP_OK
                 : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    if (rc == DP_OK) {
        rc = json_util_set(o, "charges", a, err);
        a = NULL;
    }
    json_decref(a);
    if (rc == DP_OK)
        rc = http_resp_json(rs, s->dry ? 200 : 201, o, err);
    else
        json_decref(o);
    return rc;
}

/* http_pending.resume: the group has committed (or refused); collect and answer. */
static int charge_resume(http_pending *p, const http_req *rq, http_resp *rs, dp_err *err)
{
    charge_state *s = (charge_state *)p;
    dp_err e;
    dp_err_clear(&e);
    int rc = ledger_pending_finish(s->lp, &e);
    s->lp = NULL;
    return charge_reply(rq, rs, s, rc, &e, err);
}

static void charge_release(http_pending *p)
{
    charge_state_free((charge_state *)p);
}

/* Charges s->reqs (parsed) and answers: deferred when the dispatcher offers it (the MHD thread does
 * not wait for the group commit), otherwise on this thread. Takes s. */
static int charge_run(const http_req *rq, http_resp *rs, ledger *l, charge_state *s, dp_err *err)
{
    dp_err e;
    dp_err_clear(&e);
    int rc;
    if (rq->defer != NULL) {
        rc = ledger_charge_start(l, s->reqs, s->n, s->batch_key, s->dry, s->batch, s->res,
                                 rq->defer->wake, rq->defer->arg, &s->lp, &e);
        if (rc == DP_OK) {
            s->base.resume = charge_resume;
            s->base.release = charge_release;
            rs->pending = &s->base;
            return DP_OK;
        }
    } else if (s->batch) {
        rc = ledger_charge_batch_keyed(l, s->reqs, s->n, s->batch_key, s->dry, s->res, &e);
    } else {
        rc = ledger_charge(l, &s->reqs[0], s->dry, s->res, &e);
    }
    rc = charge_reply(rq, rs, s, rc, &e, err);
    charge_state_free(s);
    return rc;
}

int route_silo_charge(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t id;
    ledger_principal who;
    ledger *l = the_ledger(rq, err);
    if (l == NULL || path_id(rq, &id, err) != DP_OK ||
        auth_require_silo(rq, id, &who, err) != DP_OK)
        return err->code;
    if (json_util_require_object(rq->body, "body", err) != DP_OK ||
        json_util_check_keys(rq->body, CHARGE_KEYS, sizeof CHARGE_KEYS / sizeof CHARGE_KEYS[0],
                             err))
        return err->code;
    bool dry = false;
    if (json_util_opt_bool(rq->body, "dry_run", false, &dry, err) != DP_OK)
        return err->code;
    charge_state *s = charge_state_alloc(1, err);
    if (s == NULL)
        return err->code;
    s->dry = dry;
    s->silo_id = id;
    int rc = charge_input_parse(rq->body, id, &who, &s->in[0], err);
    if (rc != DP_OK) {
        charge_state_free(s);
        return rc;
    }
    s->reqs[0] = s->in[0].req;
    return charge_run(rq, rs, l, s, err);
}

int route_charges_batch(const http_req *rq, http_resp *rs, dp_err *err)
{
    ledger_principal who;
    ledger *l = the_ledger(rq, err);
    if (l == NULL || auth_resolve(rq, &who, err) != DP_OK)
        return err->code;
    if (json_util_require_object(rq->body, "body", err) != DP_OK)
        return err->code;
    static const char *const keys[] = {"charges", "idempotency_key", "dry_run", "reason", "job_id"};
    if (json_util_check_keys(rq->body, keys, sizeof keys / sizeof keys[0], err) != DP_OK)
        return err->code;
    const json_t *arr = json_object_get(rq->body, "charges");
    if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) > LEDGER_MAX_BATCH)
        return dp_err_set(err, DP_EINVAL, "charges", "charges must be an array of 1 to %d charges",
                          LEDGER_MAX_BATCH);
    bool dry = false;
    const char *key = NULL, *reason = NULL;
    int64_t job = 0;
    if (json_util_opt_bool(rq->body, "dry_run", false, &dry, err) != DP_OK ||
        json_util_opt_string(rq->body, "idempotency_key", NULL, &key, err) != DP_OK ||
        json_util_opt_string(rq->body, "reason", NULL, &reason, err) != DP_OK ||
        json_util_opt_int(rq->body, "job_id", 0, &job, err) != DP_OK)
        return err->code;
    size_t n = json_array_size(arr);
    charge_state *s = charge_state_alloc(n, err);
    if (s == NULL)
        return err->code;
    s->batch = true;
    s->batch_key = key; /* the whole batch is recorded under it (D11) */
    s->dry = dry;
    int rc = DP_OK;
    static const char *const item_keys[] = {"silo_id",         "event",  "neighboring",
                                            "idempotency_key", "reason", "job_id"};
    for (size_t i = 0; rc == DP_OK && i < n; i++) {
        const json_t *it = json_array_get(arr, i);
        char f[32];
        snprintf(f, sizeof f, "charges[%zu]", i);
        int64_t silo = 0;
        rc = json_util_require_object(it, f, err);
        if (rc == DP_OK)
            rc = json_util_check_keys(it, item_keys, sizeof item_keys / sizeof item_keys[0], err);
        if (rc == DP_OK)
            rc = json_util_req_int(it, "silo_id", &silo, err);
        if (rc == DP_OK && silo <= 0)
            rc = dp_err_set(err, DP_EINVAL, "silo_id", "silo_id must be a positive integer");
        /* A silo token may only charge its own silo. */
        if (rc == DP_OK && who.role != LEDGER_ROLE_ADMIN && who.silo_id != silo)
            rc = dp_err_set(err, DP_EFORBIDDEN, NULL, "this token may not act on silo %lld",
                            (long long)silo);
        if (rc == DP_OK)
            rc = charge_input_parse(it, silo, &who, &s->in[i], err);
        if (rc != DP_OK) {
            if (err->code != DP_EFORBIDDEN)
                dp_err_prefix_field(err, f);
            break;
        }
        s->reqs[i] = s->in[i].req;
        if (s->reqs[i].idempotency_key == NULL)
            s->reqs[i].idempotency_key = key;
        if (s->reqs[i].reason == NULL)
            s->reqs[i].reason = reason;
        if (s->reqs[i].job_id == 0)
            s->reqs[i].job_id = job;
    }
    if (rc != DP_OK) {
        charge_state_free(s);
        return rc;
    }
    return charge_run(rq, rs, l, s, err);
}

int route_silo_charges_list(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t id;
    ledger_principal who;
    ledger *l = the_ledger(rq, err);
    if (l == NULL || path_id(rq, &id, err) != DP_OK ||
        auth_require_silo(rq, id, &who, err) != DP_OK)
        return err->code;
    ledger_charge_filter f = {.since_ms = INT64_MIN, .until_ms = INT64_MAX};
    if (query_limit(rq, &f.limit, &f.after, err) != DP_OK)
        return err->code;
    const char *since = http_req_query(rq, "since"), *until = http_req_query(rq, "until");
    if ((since && parse_time(since, "since", &f.since_ms, err) != DP_OK) ||
        (until && parse_time(until, "until", &f.until_ms, err) != DP_OK) ||
        http_req_query_int(rq, "job_id", 0, 1, INT64_MAX, &f.job_id, err) != DP_OK)
        return err->code;
    /* 404 for a silo that does not exist (an empty log is a real answer only for a real silo). */
    ledger_silo_view v;
    if (ledger_silo_get(l, rq->db, id, &v, err) != DP_OK)
        return err->code;
    ledger_charge_row *rows = NULL, *more = NULL;
    size_t n = 0, n_more = 0;
    if (ledger_charges_list(rq->db, id, &f, &rows, &n, err) != DP_OK)
        return err->code;
    ledger_charge_filter fm = f; /* a full page: is anything after it? */
    fm.after = n > 0 ? rows[n - 1].id : f.after;
    fm.limit = 1;
    if (n == f.limit && ledger_charges_list(rq->db, id, &fm, &more, &n_more, err) != DP_OK) {
        ledger_charge_rows_free(rows, n);
        return err->code;
    }
    ledger_charge_rows_free(more, n_more);
    const char *why = v.budget.kind == LEDGER_BUDGET_NONE ? NOT_PRIVATE : NO_DELTA;
    json_t *o = json_object(), *arr = json_array();
    int rc = o && arr ? DP_OK : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; rc == DP_OK && i < n; i++) {
        const ledger_charge_row *r = &rows[i];
        json_t *c = json_object();
        json_error_t jerr;
        json_t *ev = r->event ? json_util_loads(r->event, 0, &jerr) : NULL;
        rc = c && ev ? DP_OK : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        if (rc == DP_OK)
            rc = json_util_set(c, "id", json_integer(r->id), err);
        if (rc == DP_OK)
            rc = json_util_set(c, "seq", json_integer(r->seq), err);
        if (rc == DP_OK)
            rc = json_util_set(c, "time", time_json(r->created_at_ms), err);
        if (rc == DP_OK)
            rc = json_util_set(c, "actor_token_id",
                               r->actor_token_id ? json_integer(r->actor_token_id) : json_null(),
                               err);
        if (rc == DP_OK)
            rc = json_util_set(c, "job_id", r->job_id ? json_integer(r->job_id) : json_null(), err);
        if (rc == DP_OK)
            rc = json_util_set(c, "claim_id", r->claim_id ? json_integer(r->claim_id) : json_null(),
                               err);
        if (rc == DP_OK)
            rc = json_util_set(c, "idempotency_key",
                               r->idempotency_key ? json_string(r->idempotency_key) : json_null(),
                               err);
        if (rc == DP_OK)
            rc = json_util_set(c, "reason", r->reason ? json_string(r->reason) : json_null(), err);
        if (rc == DP_OK) {
            rc = json_util_set(c, "event", ev, err);
            ev = NULL;
        }
        if (rc == DP_OK)
            rc = json_util_set(c, "neighboring", json_string(r->neighboring), err);
        if (rc == DP_OK)
            rc = set_eps_rho(c, "cost", r->cost_eps, r->cost_rho, why, err);
        if (rc == DP_OK)
            rc = set_eps_rho(c, "cumulative_after", r->eps_after, r->rho_after, why, err);
        if (rc == DP_OK) {
            rc = json_array_append_new(arr, c) == 0
                     ? DP_OK
                     : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
            c = NULL;
        }
        json_decref(c);
        json_decref(ev);
    }
    if (rc == DP_OK) {
        rc = json_util_set(o, "charges", arr, err);
        arr = NULL;
    }
    if (rc == DP_OK)
        rc = json_util_set(o, "next_after", n_more > 0 ? json_integer(rows[n - 1].id) : json_null(),
                           err);
    ledger_charge_rows_free(rows, n);
    json_decref(arr);
    if (rc != DP_OK) {
        json_decref(o);
        return rc;
    }
    return http_resp_json(rs, 200, o, err);
}

/* ---- claims ---- */

static json_t *claim_json(const ledger_claim_view *c, dp_err *err)
{
    json_t *o = json_object(), *cost = json_object();
    int rc = o && cost ? DP_OK : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    if (rc == DP_OK)
        rc = json_util_set(o, "id", json_integer(c->id), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "silo_id", json_integer(c->silo_id), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "state", json_string(ledger_claim_state_name(c->state)), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "created_at", time_json(c->created_at_ms), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "expires_at", time_json(c->expires_at_ms), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "closed_at", time_json(c->closed_at_ms), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "charge_id", c->charge_id ? json_integer(c->charge_id) : json_null(),
                           err);
    if (rc == DP_OK)
        rc = json_util_set(o, "job_id", c->job_id ? json_integer(c->job_id) : json_null(), err);
    if (rc == DP_OK)
        rc = json_util_set(o, "replayed", json_boolean(c->replayed), err);
    if (rc == DP_OK && !isnan(c->cost_eps))
        rc = set_figure(cost, "epsilon", c->cost_eps, NO_DELTA, err);
    if (rc == DP_OK)
        rc = set_figure(cost, "rho", c->cost_rho, NO_DELTA, err);
    if (rc == DP_OK) {
        rc = json_util_set(o, "cost", cost, err);
        cost = NULL;
    }
    json_decref(cost);
    if (rc != DP_OK) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int route_silo_claim(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t id;
    ledger_principal who;
    ledger *l = the_ledger(rq, err);
    if (l == NULL || path_id(rq, &id, err) != DP_OK ||
        auth_require_silo(rq, id, &who, err) != DP_OK)
        return err->code;
    static const char *const keys[] = {"event",  "neighboring", "idempotency_key",
                                       "reason", "job_id",      "timeout_ms"};
    if (json_util_require_object(rq->body, "body", err) != DP_OK ||
        json_util_check_keys(rq->body, keys, sizeof keys / sizeof keys[0], err) != DP_OK)
        return err->code;
    int64_t timeout = LEDGER_DEFAULT_CLAIM_MS;
    if (json_util_opt_int(rq->body, "timeout_ms", LEDGER_DEFAULT_CLAIM_MS, &timeout, err) != DP_OK)
        return err->code;
    charge_input in;
    int rc = charge_input_parse(rq->body, id, &who, &in, err);
    if (rc == DP_OK) {
        ledger_claim_view c;
        ledger_charge_result fig;
        dp_err e;
        dp_err_clear(&e);
        rc = ledger_claim_create(l, &in.req, timeout, &c, &fig, &e);
        if (rc == DP_EBUDGET) {
            json_t *d = figures_json(&fig, err);
            rc = d ? reply_refusal(rq, rs, &e, d, err) : err->code;
        } else if (rc != DP_OK) {
            *err = e;
        } else {
            json_t *o = claim_json(&c, err);
            rc = o ? http_resp_created(rs, o, err, "/v1/claims/%lld", (long long)c.id) : err->code;
        }
    }
    charge_input_clear(&in);
    return rc;
}

/* GET /v1/silos/{id}/claims: the open claims, paginated like the charge log, readable by whoever
 * may read the log. */
int route_silo_claims_list(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t id = 0, after = 0;
    size_t limit = 0;
    ledger_principal who;
    ledger *l = the_ledger(rq, err);
    if (l == NULL || path_id(rq, &id, err) != DP_OK ||
        auth_require_silo(rq, id, &who, err) != DP_OK ||
        query_limit(rq, &limit, &after, err) != DP_OK)
        return err->code;
    ledger_silo_view v; /* 404 for a silo that does not exist; its budget gives each claim's eps */
    if (ledger_silo_get(l, rq->db, id, &v, err) != DP_OK)
        return err->code;
    ledger_claim_view *rows = NULL;
    size_t n = 0;
    bool more = false;
    if (ledger_claims_list(l, rq->db, id, &v.budget, after, limit, &rows, &n, &more, err) != DP_OK)
        return err->code;
    json_t *arr = json_array();
    int rc = arr ? DP_OK : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; rc == DP_OK && i < n; i++) {
        json_t *c = claim_json(&rows[i], err);
        rc = c == NULL ? err->code
             : json_array_append_new(arr, c) != 0
                 ? dp_err_set(err, DP_ENOMEM, NULL, "out of memory")
                 : DP_OK;
    }
    int64_t last = n > 0 ? rows[n - 1].id : 0;
    dp_free(rows);
    if (rc != DP_OK) {
        json_decref(arr);
        return rc;
    }
    json_t *o = json_util_page("claims", arr, more, last);
    return o ? http_resp_json(rs, 200, o, err) : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
}

/* The claim's silo decides who may touch it: the admin or that silo's token. */
static int claim_scope(const http_req *rq, int64_t claim_id, ledger_principal *who, int64_t *scope,
                       dp_err *err)
{
    if (auth_resolve(rq, who, err) != DP_OK)
        return err->code;
    *scope = who->role == LEDGER_ROLE_ADMIN ? 0 : who->silo_id;
    (void)claim_id;
    return DP_OK;
}

int route_claim_get(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t id = 0, scope = 0;
    ledger_principal who;
    if (path_id(rq, &id, err) != DP_OK || claim_scope(rq, id, &who, &scope, err) != DP_OK)
        return err->code;
    ledger_claim_view c;
    if (ledger_claim_get(rq->db, id, &c, err) != DP_OK)
        return err->code;
    if (scope != 0 && c.silo_id != scope)
        return dp_err_set(err, DP_EFORBIDDEN, NULL, "this token may not act on claim %lld",
                          (long long)id);
    json_t *o = claim_json(&c, err);
    return o ? http_resp_json(rs, 200, o, err) : err->code;
}

/* The common start of a claim's commit and abort: the ledger, the claim id from the path, the
 * caller's scope, and an empty body (verb names the action in the 400). NULL with err set on any
 * refusal. */
static ledger *claim_action_start(const http_req *rq, const char *verb, int64_t *id,
                                  ledger_principal *who, int64_t *scope, dp_err *err)
{
    ledger *l = the_ledger(rq, err);
    if (l == NULL || path_id(rq, id, err) != DP_OK ||
        claim_scope(rq, *id, who, scope, err) != DP_OK)
        return NULL;
    if (rq->body != NULL && json_object_size(rq->body) != 0) {
        dp_err_set(err, DP_EINVAL, json_object_iter_key(json_object_iter(rq->body)),
                   "%s takes no body fields", verb);
        return NULL;
    }
    return l;
}

int route_claim_commit(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t id = 0, scope = 0;
    ledger_principal who;
    ledger *l = claim_action_start(rq, "commit", &id, &who, &scope, err);
    if (l == NULL)
        return err->code;
    ledger_claim_view c;
    ledger_charge_result res;
    if (ledger_claim_commit(l, id, scope, who.token_id, &c, &res, err) != DP_OK)
        return err->code;
    json_t *o = claim_json(&c, err);
    ledger_charge_req q = {.silo_id = c.silo_id, .job_id = c.job_id};
    json_t *cj = o ? charge_json(&q, &res, err) : NULL;
    int rc = cj ? json_util_set(o, "charge", cj, err) : err->code;
    if (rc != DP_OK) {
        json_decref(o);
        return rc;
    }
    return http_resp_json(rs, 200, o, err);
}

int route_claim_abort(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t id = 0, scope = 0;
    ledger_principal who;
    ledger *l = claim_action_start(rq, "abort", &id, &who, &scope, err);
    if (l == NULL)
        return err->code;
    ledger_claim_view c;
    if (ledger_claim_abort(l, id, scope, &c, err) != DP_OK)
        return err->code;
    json_t *o = claim_json(&c, err);
    return o ? http_resp_json(rs, 200, o, err) : err->code;
}
