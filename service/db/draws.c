/*
 * db/draws.c: the tuning_draws table. Contract in db/draws.h.
 */
#include "service/db/draws.h"

#include <string.h>

#include "common/dp_alloc.h"
#include "service/db/bind.h"

static const char SQL_INSERT_DRAW[] =
    "INSERT INTO tuning_draws (created_at_ms, request_id, distribution, runs, expected_runs, "
    "prob_no_run, grid_size, candidates, label, creator_token_id) "
    "VALUES (:created, :req, :dist, :runs, :mean, :p0, :grid, :cand, :label, nullif(:creator, 0))";

/* The access rule of db/draws.h: the admin, the creator, or a token of the creator's silo. */
static const char SQL_GET_DRAW[] =
    "SELECT id, created_at_ms, distribution, runs, grid_size, candidates, label, expected_runs, "
    "prob_no_run FROM tuning_draws AS d WHERE id = :id AND (:admin = 1 OR d.creator_token_id = "
    ":tok OR EXISTS (SELECT 1 FROM tokens t WHERE t.id = d.creator_token_id AND t.silo_id = "
    ":silo))";

int draws_insert(sqlite3 *db, const draw_new *d, int64_t *id, const char *req_id, dp_err *err)
{
    /* Prepared per call: db is the writer's connection, which has no statement cache (a draw is one
     * row per request; the cost is negligible next to the group's fsync). */
    sqlite3_stmt *st = NULL;
    int src = sqlite3_prepare_v2(db, SQL_INSERT_DRAW, -1, &st, NULL);
    if (src != SQLITE_OK) {
        sqlite3_finalize(st);
        return store_db_err(db, src, "prepare tuning draw insert", req_id, err);
    }
    store_binder b = store_bind_begin(st);
    store_bind_i64(&b, ":created", d->created_at_ms);
    store_bind_text(&b, ":req", d->request_id ? d->request_id : "-");
    store_bind_text(&b, ":dist", d->distribution);
    store_bind_i64(&b, ":runs", d->runs);
    store_bind_double(&b, ":mean", d->expected_runs);
    store_bind_double(&b, ":p0", d->prob_no_run);
    store_bind_i64_or_null(&b, ":grid", d->grid_size > 0, d->grid_size);
    store_bind_text(&b, ":cand", d->candidates);
    store_bind_text(&b, ":label", d->label);
    store_bind_i64(&b, ":creator", d->creator_token_id);
    src = store_bind_step(&b);
    if (src == SQLITE_DONE)
        *id = sqlite3_last_insert_rowid(db);
    int rc = src == SQLITE_DONE ? DP_OK : store_db_err(db, src, "insert tuning draw", req_id, err);
    sqlite3_finalize(st);
    return rc;
}

/* A copy of column i's text (NULL for SQL NULL). Sets *oom when the copy fails. */
static char *column_dup(sqlite3_stmt *st, int i, bool *oom)
{
    const char *t = (const char *)sqlite3_column_text(st, i);
    if (t == NULL)
        return NULL;
    char *s = dp_strdup(t);
    if (s == NULL)
        *oom = true;
    return s;
}

int draws_get(store_conn *c, int64_t id, const draw_viewer *who, draw_row *out, bool *found,
              const char *req_id, dp_err *err)
{
    memset(out, 0, sizeof *out);
    *found = false;
    sqlite3_stmt *st = store_conn_prepare(c, SQL_GET_DRAW, err);
    if (st == NULL)
        return err->code;
    store_binder b = store_bind_begin(st);
    store_bind_i64(&b, ":id", id);
    store_bind_viewer(&b, who);
    int src = store_bind_step(&b);
    if (src == SQLITE_DONE) {
        store_stmt_done(st);
        return DP_OK;
    }
    if (src != SQLITE_ROW) {
        store_stmt_done(st);
        return store_err(c, src, "read tuning draw", req_id, err);
    }
    bool oom = false;
    out->id = sqlite3_column_int64(st, 0);
    out->created_at_ms = sqlite3_column_int64(st, 1);
    out->distribution = column_dup(st, 2, &oom);
    out->runs = sqlite3_column_int64(st, 3);
    out->grid_size = sqlite3_column_type(st, 4) == SQLITE_NULL ? 0 : sqlite3_column_int64(st, 4);
    out->candidates = column_dup(st, 5, &oom);
    out->label = column_dup(st, 6, &oom);
    out->expected_runs = sqlite3_column_double(st, 7);
    out->prob_no_run = sqlite3_column_double(st, 8);
    store_stmt_done(st);
    if (oom) {
        draw_row_clear(out);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    *found = true;
    return DP_OK;
}

void draw_row_clear(draw_row *r)
{
    if (r == NULL)
        return;
    dp_free(r->distribution);
    dp_free(r->candidates);
    dp_free(r->label);
    memset(r, 0, sizeof *r);
}
