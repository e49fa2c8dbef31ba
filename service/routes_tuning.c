/*
 * routes_tuning.c: the price of a private hyperparameter search (issue #4; docs/TUNING.md).
 *
 *   POST /v1/tuning/draw        draws the number of runs K (and, with grid_size, which candidate
 *                               each run uses) with the kernel CSPRNG and records the draw
 *   GET  /v1/tuning/draws/{id}  reads a recorded draw back (audit)
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
#include <time.h>

#include "accounting/tuning.h"
#include "common/dp_alloc.h"
#include "common/dp_log.h"
#include "service/json_util.h"
#include "service/tuning_json.h"

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

/* RFC 3339 UTC with milliseconds, e.g. 2026-11-22T13:04:10.123Z. */
static json_t *rfc3339(int64_t ms)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    char buf[40];
    if (gmtime_r(&s, &tm) == NULL)
        return NULL;
    size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    if (n == 0)
        return NULL;
    snprintf(buf + n, sizeof buf - n, ".%03dZ", (int)(ms % 1000));
    return json_string(buf);
}

static const char SQL_INSERT_DRAW[] =
    "INSERT INTO tuning_draws (created_at_ms, request_id, distribution, runs, expected_runs, "
    "prob_no_run, grid_size, candidates, label) "
    "VALUES (:created, :req, :dist, :runs, :mean, :p0, :grid, :cand, :label)";
static const char SQL_GET_DRAW[] =
    "SELECT id, created_at_ms, distribution, runs, grid_size, candidates, label, expected_runs, "
    "prob_no_run FROM tuning_draws WHERE id = :id";

/* The response/row object of one draw (all arguments borrowed; a new reference or NULL). */
static json_t *draw_json(int64_t id, int64_t created_ms, json_t *dist, int64_t runs, int64_t grid,
                         json_t *candidates, const char *label, double expected, double p0)
{
    json_t *o = json_object();
    dp_err e;
    dp_err_clear(&e);
    if (o == NULL || json_util_set(o, "id", json_integer(id), &e) != DP_OK ||
        json_util_set(o, "created_at", rfc3339(created_ms), &e) != DP_OK ||
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

/* ---- POST /v1/tuning/draw
 * ------------------------------------------------------------------------ */

int route_tuning_draw(const http_req *rq, http_resp *rs, dp_err *err)
{
    static const char *const keys[] = {"distribution", "grid_size", "label"};
    json_t *dist_json = NULL, *cand = NULL, *body = NULL;
    char *dist_text = NULL, *cand_text = NULL;
    int rc;
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
    const char *sid = http_req_param(rq, "id");
    char *end = NULL;
    errno = 0;
    long long id = sid ? strtoll(sid, &end, 10) : 0;
    if (sid == NULL || end == sid || *end != '\0' || errno != 0 || id < 1)
        return dp_err_set(err, DP_EINVAL, "id", "id must be a positive integer");
    sqlite3_stmt *st = store_conn_prepare(rq->db, SQL_GET_DRAW, err);
    if (st == NULL)
        return err->code;
    int src = sqlite3_bind_int64(st, 1, id);
    if (src == SQLITE_OK)
        src = sqlite3_step(st);
    if (src == SQLITE_DONE) {
        store_stmt_done(st);
        return dp_err_set(err, DP_ENOTFOUND, "id", "no tuning draw %lld", id);
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
        dp_log(DP_LOG_ERROR, rq->req_id, "tuning draw %lld: stored JSON unreadable", id);
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
