/*
 * service_fixture.h: call any route of dpsilod by method and path, without a socket.
 *
 * A service_fixture is tests/support/service_util.h's route_fixture (a migrated database file in a
 * temporary directory, one borrowed pool connection, default configuration) plus the budget ledger,
 * its writer (app.writer, the database's one writer, as main.c sets it) and the metrics a running
 * daemon has. call_route(fx, method, path, body, token, &out) does what
 * the dispatcher (service/http/server.c final_call, run_handler, send_result) does between the
 * parsed request and the bytes on the wire: match the route table (404/405), split and check the
 * query string (400 naming the parameter), parse the body (400; an upload route's body is handed
 * over as text, http_req.raw), refuse a missing token on a
 * non-open route when auth is on (401), check a path {id} (400), run the handler through
 * http_handler_call (which waits for a deferred answer, as the suspended connection would), and
 * turn the outcome into a status and a JSON body (the error body of http/err.c for an error).
 * It does not reproduce the HTTP framing: body caps, headers (it reports the Content-Type a text
 * answer would carry, out->content_type).
 *
 * The early 401: like the dispatcher, call_route answers 401 itself for a missing token on a
 * non-open route (out->rc stays DP_OK: the handler was not reached). A test of the handler's own
 * refusal, the second line of defence behind that check, sets fx->handler_checks_token: the
 * missing token then reaches the handler, whose answer (out->rc DP_EUNAUTH) is the one returned.
 *
 * Failure injection: with fx->fail_nth > 0, dp_alloc_fail_after(fx->fail_nth) is armed just before
 * the handler runs and disarmed just after, so only the handler's own allocations (and whatever
 * else is routed through dp_alloc, e.g. jansson or SQLite when a test installs dp_alloc-based
 * allocators) can fail; the fixture's own parsing and error body never do.
 *
 * Header-only so that each test binary stays self-contained (one cmocka binary per module).
 * Memory: route_result_clear releases what call_route put in *out; service_fixture_close what
 * service_fixture_open acquired. Not thread-safe: one test thread per fixture.
 *
 * Route tests go through call_route (tests/unit/service/api/test_service_routes_core.c is the
 * template). A test calls a handler directly only when it is about a mechanism call_route does
 * not show: the deferred answer itself (test_service_charge_defer.c), the clients-span path
 * (test_service_estimators_stream.c), an allocation-failure loop without a ledger's threads, or
 * the auth helpers themselves (the handler's own token check: fx->handler_checks_token above).
 */
#ifndef DP_TESTS_SUPPORT_SERVICE_FIXTURE_H
#define DP_TESTS_SUPPORT_SERVICE_FIXTURE_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/dp_alloc.h"
#include "common/dp_err.h"
#include "service/http/err.h"
#include "service/ledger/ledger.h"
#include "service/http/metrics.h"
#include "service/http/router.h"
#include "service/api/routes.h"
#include "tests/support/service_util.h"

typedef struct service_fixture {
    route_fixture r;       /* temporary directory, migrated store, borrowed connection, cfg */
    struct ledger *ledger; /* the budget ledger on r.path (its own connection and threads) */
    http_metrics *metrics; /* for GET /metrics */
    long fail_nth;         /* > 0: the nth allocation inside the handler fails (dp_alloc hook) */
    bool handler_checks_token; /* true: no early 401 for a missing token (see the top) */
} service_fixture;

typedef struct route_result {
    int status;      /* HTTP status the dispatcher would send */
    json_t *body;    /* owned: the JSON answer or error body (also parsed from a JSON answer the
                        handler wrote as text); NULL for another text answer or 204 */
    char *text;      /* owned (free): a raw answer (GET /metrics); NULL otherwise */
    size_t text_len; /* bytes in text */
    const char *content_type; /* the text's type (static storage); NULL for JSON */
    int rc;                   /* the handler's return code (DP_OK when it was not reached) */
    dp_err err;               /* the error behind an error status; code DP_OK otherwise */
} route_result;

/* tag names the temporary directory. auth_off: --auth off (no tokens needed). 0, or -1. */
static inline int service_fixture_open(service_fixture *fx, const char *tag, bool auth_off)
{
    memset(fx, 0, sizeof *fx);
    if (route_fixture_open(&fx->r, tag) != 0)
        return -1;
    fx->r.c.auth_off = auth_off;
    dp_err e;
    dp_err_clear(&e);
    fx->ledger = ledger_open(fx->r.path, &e);
    fx->metrics = http_metrics_alloc(ROUTES, ROUTES_N, store_schema_version(fx->r.st));
    return fx->ledger != NULL && fx->metrics != NULL ? 0 : -1;
}

/* 0, or -1 when the temporary directory could not be removed. */
static inline int service_fixture_close(service_fixture *fx)
{
    http_metrics_free(fx->metrics);
    ledger_free(fx->ledger);
    return route_fixture_close(&fx->r);
}

static inline void route_result_clear(route_result *out)
{
    json_decref(out->body);
    free(out->text);
    memset(out, 0, sizeof *out);
}

/* Fills out with the error e (the dispatcher's send_error). Returns out->status. */
static inline int service_fixture_error(route_result *out, const dp_err *e)
{
    out->err = *e;
    out->status = http_err_status(e->code);
    out->body = http_err_body(e, "test");
    return out->status;
}

/* Calls method path ("/v1/runs?limit=2": the query string is split off) with body (JSON text, or
 * NULL for none) and token (the bearer token, or NULL). Returns out->status; out is owned by the
 * caller (route_result_clear). */
static inline int call_route(service_fixture *fx, const char *method, const char *path,
                             const char *body, const char *token, route_result *out)
{
    memset(out, 0, sizeof *out);
    dp_err e;
    dp_err_clear(&e);
    char pathbuf[HTTP_MAX_PATH];
    if (strlen(path) >= sizeof pathbuf) {
        dp_err_set(&e, DP_ENOTFOUND, NULL, "path too long");
        return service_fixture_error(out, &e);
    }
    strcpy(pathbuf, path);
    http_param query[HTTP_MAX_QUERY];
    size_t n_query = 0;
    char *qs = strchr(pathbuf, '?');
    if (qs != NULL) {
        *qs++ = '\0';
        for (char *save = NULL, *kv = strtok_r(qs, "&", &save); kv != NULL;
             kv = strtok_r(NULL, "&", &save)) {
            if (n_query == HTTP_MAX_QUERY) {
                dp_err_set(&e, DP_EINVAL, NULL, "too many query parameters");
                return service_fixture_error(out, &e);
            }
            char *eq = strchr(kv, '=');
            if (eq != NULL)
                *eq++ = '\0';
            query[n_query].name = kv;
            query[n_query++].value = eq != NULL ? eq : "";
        }
    }
    route_match m;
    int found = http_route_match(ROUTES, ROUTES_N, method, pathbuf, &m);
    if (found != HTTP_ROUTE_FOUND) {
        out->status = found == HTTP_ROUTE_BAD_METHOD ? 405 : 404;
        out->body =
            http_err_body_raw(found == HTTP_ROUTE_BAD_METHOD ? "method_not_allowed" : "not_found",
                              "no such route", NULL, "test");
        return out->status;
    }
    for (size_t i = 0; i < n_query; i++)
        if (!http_query_allowed(m.route->query, query[i].name)) {
            dp_err_set(&e, DP_EINVAL, query[i].name, "unknown query parameter");
            return service_fixture_error(out, &e);
        }
    json_t *jbody = NULL;
    bool raw = m.route->raw_type != NULL; /* an upload: the body goes to the handler unparsed */
    if (body != NULL && !raw) {
        json_error_t je;
        jbody = json_loads(body, JSON_REJECT_DUPLICATES, &je);
        if (!json_is_object(jbody)) {
            json_decref(jbody);
            dp_err_set(&e, DP_EINVAL, NULL, "malformed JSON body: %s", je.text);
            return service_fixture_error(out, &e);
        }
    }
    if (m.route->access != ROUTE_OPEN && !fx->r.c.auth_off && token == NULL &&
        !fx->handler_checks_token) {
        json_decref(jbody);
        dp_err_set(&e, DP_EUNAUTH, NULL, "this endpoint needs a bearer token");
        return service_fixture_error(out, &e);
    }
    fx->r.app.metrics = fx->metrics;
    fx->r.app.ledger = fx->ledger;
    fx->r.app.writer = fx->ledger != NULL ? ledger_writer(fx->ledger) : NULL; /* as main.c */
    http_req rq = route_fixture_req(&fx->r, method, pathbuf);
    rq.body = jbody;
    rq.raw = raw ? body : NULL;
    rq.raw_len = raw && body != NULL ? strlen(body) : 0;
    rq.params = m.params;
    rq.n_params = m.n_params;
    rq.query = n_query ? query : NULL;
    rq.n_query = n_query;
    rq.bearer = token;
    int64_t id;
    if (http_req_param(&rq, "id") != NULL && http_req_param_id(&rq, "id", &id, &e) != DP_OK) {
        json_decref(jbody);
        return service_fixture_error(out, &e);
    }
    http_resp rs;
    memset(&rs, 0, sizeof rs);
    if (fx->fail_nth > 0)
        dp_alloc_fail_after(fx->fail_nth);
    int rc = http_handler_call(m.route->handler, &rq, &rs, &e);
    dp_alloc_fail_after(0);
    out->rc = rc;
    json_decref(jbody);
    if (rc != DP_OK || e.code != DP_OK) { /* send_result */
        if (e.code == DP_OK)
            dp_err_set(&e, rc, NULL, "handler failed without a message (code %d)", rc);
        http_resp_clear(&rs);
        return service_fixture_error(out, &e);
    }
    out->status = rs.status ? rs.status : 200;
    out->body = rs.body;
    rs.body = NULL;
    out->text = rs.text;
    out->text_len = rs.text_len;
    out->content_type = rs.text != NULL ? rs.content_type : NULL;
    rs.text = NULL;
    http_resp_clear(&rs);
    /* a JSON answer the handler wrote as text (a job, a metrics page): its tree too, for the
     * tests that read fields; a text that does not parse is a handler's bug */
    if (out->body == NULL && out->text != NULL && out->content_type != NULL &&
        strcmp(out->content_type, "application/json") == 0) {
        json_error_t je;
        out->body = json_loadb(out->text, out->text_len, 0, &je);
        if (out->body == NULL) {
            dp_err_set(&e, DP_EINTERNAL, NULL, "the handler's JSON text does not parse: %s",
                       je.text);
            return service_fixture_error(out, &e);
        }
    }
    if (out->body == NULL && out->text == NULL && out->status != 204) {
        dp_err_set(&e, DP_EINTERNAL, NULL, "handler returned no body");
        return service_fixture_error(out, &e);
    }
    return out->status;
}

#endif
