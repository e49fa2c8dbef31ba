/*
 * api/core.c: GET /healthz, GET /v1/version, GET /v1/openapi.json, GET /metrics.
 *
 * /healthz is honest and cheap: it runs one real read of the database on the request's pooled
 * connection (a cached prepared statement over schema_migrations, see store_check_health), so a
 * deleted, locked or corrupted database turns it into 503/500, while a healthy call costs a few
 * microseconds and no write.
 *
 * /metrics and /v1/echo need a valid token (admin or silo) when auth is on: only the calculators,
 * /healthz and /v1/version are open to anyone (api/routes.c access column).
 *
 * GET /v1/openapi.json sends openapi/openapi.json, compiled into the binary
 * (service/base/embedded.h) byte for byte, so the document a client reads is the one in the
 * repository the binary was built from; tests/integration/test_openapi.sh checks it against the
 * route table and the docs' examples.
 *
 * POST /v1/echo is a diagnostic: it runs the whole request path (body cap, JSON parsing, strict
 * field validation, JSON reply) without touching any feature, so clients can check their plumbing
 * and the integration tests and bench/http can exercise the dispatcher on its own.
 */
#include "service/api/routes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/api/auth.h"
#include "service/codec/json_util.h"
#include "service/base/compute.h"
#include "service/ledger/ledger.h"
#include "service/http/metrics.h"
#include "service/base/version.h"
#include "service/base/embedded.h"
#include "common/dp_alloc.h"

#define HEALTH_MAX_AGE_MS 250 /* probes within this window reuse the last successful DB read */

int route_healthz(const http_req *rq, http_resp *rs, dp_err *err)
{
    const char *fresh = http_req_query(rq, "fresh");
    if (fresh != NULL && strcmp(fresh, "1") != 0 && strcmp(fresh, "0") != 0)
        return dp_err_set(err, DP_EINVAL, "fresh", "fresh must be 0 or 1 (got \"%.16s\")", fresh);
    int64_t max_age = fresh != NULL && fresh[0] == '1' ? 0 : HEALTH_MAX_AGE_MS;
    int64_t age_ms = 0;
    if (store_check_health(rq->app->store, rq->db, max_age, &age_ms, err) != DP_OK)
        return err->code;
    json_t *o = json_object();
    if (o == NULL || json_util_set(o, "status", json_string("ok"), err) != DP_OK ||
        json_util_set(o, "db", json_string("ok"), err) != DP_OK ||
        json_util_set(o, "db_checked_ms_ago", json_integer(age_ms), err) != DP_OK ||
        json_util_set(o, "schema_version", json_integer(store_schema_version(rq->app->store)),
                      err) != DP_OK) {
        json_decref(o);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    return http_resp_json(rs, 200, o, err);
}

int route_version(const http_req *rq, http_resp *rs, dp_err *err)
{
    version_info v;
    version_get(&v);
    char instance_id[STORE_INSTANCE_ID_LEN + 1];
    int64_t created_ms;
    if (store_read_instance(rq->db, instance_id, &created_ms, rq->req_id, err) != DP_OK)
        return err->code;
    json_t *inst = json_pack("{s:s, s:o}", "instance_id", instance_id, "created_at",
                             json_util_time(created_ms));
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:{s:s, s:s, s:s, s:s}, s:i, s:o*}", "version", v.version,
                  "git_commit", v.git_commit, "compiler", v.compiler, "libraries", "microhttpd",
                  v.microhttpd, "jansson", v.jansson, "sqlite", v.sqlite, "gsl", v.gsl,
                  "schema_version", store_schema_version(rq->app->store), "database", inst);
    if (o == NULL || inst == NULL) {
        json_decref(o);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    return http_resp_json(rs, 200, o, err);
}

int route_openapi(const http_req *rq, http_resp *rs, dp_err *err)
{
    (void)rq;
    char *text = dp_malloc(EMBED_OPENAPI.len); /* http_resp_text takes a malloc'd body */
    if (text == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    memcpy(text, EMBED_OPENAPI.data, EMBED_OPENAPI.len);
    return http_resp_text(rs, 200, "application/json", text, EMBED_OPENAPI.len, err);
}

int route_metrics(const http_req *rq, http_resp *rs, dp_err *err)
{
    ledger_principal who;
    if (auth_resolve(rq, &who, err) != DP_OK) /* any valid token (http/server.h route_access) */
        return err->code;
    size_t len = 0;
    char *text = http_metrics_render(rq->app->metrics, &len, err);
    if (text == NULL)
        return err->code;
    if (rq->app->ledger != NULL) { /* the budget ledger's group commits (service/ledger/ledger.h) */
        uint64_t groups = 0, ops = 0;
        ledger_stats(rq->app->ledger, &groups, &ops);
        ledger_curve_stats cs;
        ledger_curve_cache_stats(rq->app->ledger, &cs);
        if (http_metrics_appendf(
                &text, &len, err,
                "# HELP dpsilo_ledger_group_commits_total Ledger write transactions "
                "committed (one fsync each).\n"
                "# TYPE dpsilo_ledger_group_commits_total counter\n"
                "dpsilo_ledger_group_commits_total %llu\n"
                "# HELP dpsilo_ledger_ops_total Ledger writes (charges, claims, silo "
                "changes) carried by those commits.\n"
                "# TYPE dpsilo_ledger_ops_total counter\n"
                "dpsilo_ledger_ops_total %llu\n"
                "# HELP dpsilo_ledger_curve_cache_hits_total Charges whose event's RDP "
                "curve came from the ledger's cost cache.\n"
                "# TYPE dpsilo_ledger_curve_cache_hits_total counter\n"
                "dpsilo_ledger_curve_cache_hits_total %llu\n"
                "# HELP dpsilo_ledger_curve_cache_misses_total Charges whose event's RDP "
                "curve was computed (then cached).\n"
                "# TYPE dpsilo_ledger_curve_cache_misses_total counter\n"
                "dpsilo_ledger_curve_cache_misses_total %llu\n"
                "# HELP dpsilo_ledger_curve_cache_evictions_total Cached curves replaced "
                "by another event's.\n"
                "# TYPE dpsilo_ledger_curve_cache_evictions_total counter\n"
                "dpsilo_ledger_curve_cache_evictions_total %llu\n"
                "# HELP dpsilo_ledger_curve_cache_entries Distinct events cached.\n"
                "# TYPE dpsilo_ledger_curve_cache_entries gauge\n"
                "dpsilo_ledger_curve_cache_entries %zu\n"
                "# HELP dpsilo_ledger_would_be_reused_total Charges whose would-be epsilon "
                "came from their dry run on the same log.\n"
                "# TYPE dpsilo_ledger_would_be_reused_total counter\n"
                "dpsilo_ledger_would_be_reused_total %llu\n",
                (unsigned long long)groups, (unsigned long long)ops, (unsigned long long)cs.hits,
                (unsigned long long)cs.misses, (unsigned long long)cs.evictions, cs.entries,
                (unsigned long long)cs.would_be_hits) != DP_OK)
            return err->code;
    }
    if (rq->app->compute != NULL) { /* the heavy-work pool (service/base/compute.h) */
        size_t queued = 0, running = 0;
        compute_pool_load(rq->app->compute, &queued, &running);
        if (http_metrics_appendf(&text, &len, err,
                                 "# HELP dpsilo_compute_queued Heavy requests (estimator runs, "
                                 "uploads, job plans, PLD, tuning plans) waiting for a compute "
                                 "thread.\n"
                                 "# TYPE dpsilo_compute_queued gauge\n"
                                 "dpsilo_compute_queued %zu\n"
                                 "# HELP dpsilo_compute_running Heavy requests running on a "
                                 "compute thread.\n"
                                 "# TYPE dpsilo_compute_running gauge\n"
                                 "dpsilo_compute_running %zu\n",
                                 queued, running) != DP_OK)
            return err->code;
    }
    return http_resp_text(rs, 200, "text/plain; version=0.0.4; charset=utf-8", text, len, err);
}

#define ECHO_MESSAGE_MAX 1024 /* bytes */
#define ECHO_COUNT_MAX   16

int route_echo(const http_req *rq, http_resp *rs, dp_err *err)
{
    static const char *const keys[] = {"message", "count"};
    const char *msg = NULL;
    int64_t count = 1;
    ledger_principal who;
    if (auth_resolve(rq, &who, err) != DP_OK || /* any valid token (http/server.h route_access) */
        json_util_check_keys(rq->body, keys, 2, err) != DP_OK ||
        json_util_req_string(rq->body, "message", &msg, err) != DP_OK ||
        json_util_opt_int(rq->body, "count", 1, &count, err) != DP_OK)
        return err->code;
    if (strlen(msg) > ECHO_MESSAGE_MAX)
        return dp_err_set(err, DP_EINVAL, "message", "message must be at most %d bytes (got %zu)",
                          ECHO_MESSAGE_MAX, strlen(msg));
    if (count < 1 || count > ECHO_COUNT_MAX)
        return dp_err_set(err, DP_EINVAL, "count", "count must be in 1..%d (got %lld)",
                          ECHO_COUNT_MAX, (long long)count);
    json_t *o = json_pack("{s:s, s:I, s:s}", "message", msg, "count", (json_int_t)count,
                          "request_id", rq->req_id);
    return http_resp_json(rs, 200, o, err);
}
