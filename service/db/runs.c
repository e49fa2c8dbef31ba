/*
 * db/runs.c: the SQL of the stored estimator runs. Contract in db/runs.h.
 *
 * runs_insert and runs_find_key take a raw connection: they also run on the ledger committer's
 * connection, inside its transaction, so they prepare their statements per call (a run is inserted
 * once per request; the cost is negligible next to the run). runs_get and runs_list run on a pooled
 * connection and use its statement cache.
 */
#include "service/db/runs.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_log.h"
#include "service/db/bind.h"

/* The one visibility rule of the read and the list; the run is aliased r, the viewer bound by
 * bind_viewer. */
#define RUN_VISIBLE                                                                                \
    "(:admin = 1 OR r.creator_token_id = :tok OR EXISTS (SELECT 1 FROM tokens t WHERE t.id = "     \
    "r.creator_token_id AND t.silo_id = :silo) OR EXISTS (SELECT 1 FROM estimator_run_silos x "    \
    "WHERE x.run_id = r.id AND x.silo_id = :silo))"

static int runs_fail(sqlite3 *db, int rc, const char *what, const char *req_id, dp_err *err)
{
    int prim = rc & 0xff;
    if (prim == SQLITE_BUSY || prim == SQLITE_LOCKED)
        return dp_err_set(err, DP_EBUSY, NULL, "the database is busy; retry shortly");
    if (prim == SQLITE_NOMEM)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    dp_log(DP_LOG_ERROR, req_id, "runs: %s: %s (rc %d)", what, sqlite3_errmsg(db), rc);
    return dp_err_set(err, DP_EINTERNAL, NULL, "internal error reading or storing runs");
}

static int bind_text(sqlite3_stmt *st, const char *name, const char *v, size_t len)
{
    int i = sqlite3_bind_parameter_index(st, name);
    return v ? sqlite3_bind_text64(st, i, v, len, SQLITE_STATIC, SQLITE_UTF8)
             : sqlite3_bind_null(st, i);
}

static int bind_str(sqlite3_stmt *st, const char *name, const char *v)
{
    return bind_text(st, name, v, v ? strlen(v) : 0);
}

static int bind_i64(sqlite3_stmt *st, const char *name, int64_t v)
{
    return sqlite3_bind_int64(st, sqlite3_bind_parameter_index(st, name), v);
}

static int bind_viewer(sqlite3_stmt *st, const runs_viewer *v)
{
    int s = sqlite3_bind_int(st, sqlite3_bind_parameter_index(st, ":admin"), v->admin ? 1 : 0);
    if (s == SQLITE_OK)
        s = bind_i64(st, ":tok", v->token_id);
    if (s == SQLITE_OK)
        s = bind_i64(st, ":silo", v->admin ? 0 : v->silo_id);
    return s;
}

/* Column i as an owned copy (NULL column: *out NULL). -1 when out of memory. */
static int col_dup(sqlite3_stmt *st, int i, char **out)
{
    *out = NULL;
    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return 0;
    const unsigned char *t = sqlite3_column_text(st, i);
    if (t == NULL)
        return -1;
    size_t n = (size_t)sqlite3_column_bytes(st, i);
    *out = malloc(n + 1);
    if (*out == NULL)
        return -1;
    memcpy(*out, t, n);
    (*out)[n] = '\0';
    return 0;
}

/* Writes n bytes at off of column col of run_id's row in estimator_run_clients, in place. */
static int blob_put(sqlite3 *db, const char *col, int64_t run_id, const void *p, size_t n, int off)
{
    sqlite3_blob *bh = NULL;
    int s = sqlite3_blob_open(db, "main", "estimator_run_clients", col, run_id, 1, &bh);
    if (s == SQLITE_OK)
        s = sqlite3_blob_write(bh, p, (int)n, off);
    int sc = sqlite3_blob_close(bh);
    return s == SQLITE_OK ? sc : s;
}

/* The run's per-client results (0015): the row with zeroblobs, then the bytes written in place
 * (doubles and offsets as this machine holds them: little-endian on the platforms we build for). */
static int rows_insert(sqlite3 *db, int64_t run_id, const run_rows *r)
{
    static const char SQL[] = "INSERT INTO estimator_run_clients (run_id, n_rows, layout, ids, "
                              "vals) VALUES (:run, :n, :layout, CASE WHEN :idlen > 0 THEN "
                              "zeroblob(:idlen) END, zeroblob(:vlen))";
    size_t vlen = r->m * r->w * sizeof(double);
    size_t offlen = r->ids == RUN_IDS_TEXT ? (r->m + 1) * sizeof(uint32_t) : 0;
    size_t idlen = r->ids == RUN_IDS_TEXT ? offlen + r->id_len : 0;
    if (r->m == 0 || vlen > INT_MAX || idlen > INT_MAX)
        return SQLITE_TOOBIG;
    char *layout = run_rows_layout_text(r);
    if (layout == NULL)
        return SQLITE_NOMEM;
    sqlite3_stmt *st = NULL;
    int s = sqlite3_prepare_v2(db, SQL, -1, &st, NULL);
    if (s == SQLITE_OK)
        s = bind_i64(st, ":run", run_id);
    if (s == SQLITE_OK)
        s = bind_i64(st, ":n", (int64_t)r->m);
    if (s == SQLITE_OK)
        s = bind_str(st, ":layout", layout);
    if (s == SQLITE_OK)
        s = bind_i64(st, ":idlen", (int64_t)idlen);
    if (s == SQLITE_OK)
        s = bind_i64(st, ":vlen", (int64_t)vlen);
    if (s == SQLITE_OK)
        s = sqlite3_step(st);
    sqlite3_finalize(st);
    free(layout);
    if (s != SQLITE_DONE)
        return s;
    s = blob_put(db, "vals", run_id, r->vals, vlen, 0);
    if (s == SQLITE_OK && idlen > 0)
        s = blob_put(db, "ids", run_id, r->id_off, offlen, 0);
    if (s == SQLITE_OK && idlen > 0 && r->id_len > 0)
        s = blob_put(db, "ids", run_id, r->id_text, r->id_len, (int)offlen);
    return s;
}

int runs_insert(sqlite3 *db, const runs_new *r, const char *req_id, int64_t *id, dp_err *err)
{
    static const char INSERT[] =
        "INSERT INTO estimator_runs (kind, created_at_ms, request_id, status, private, n_clients, "
        "params, data, result, idempotency_key, request_hash, creator_token_id) VALUES (:kind, :t, "
        ":rid, :st, :priv, :n, :p, :d, zeroblob(:rlen), :k, :h, nullif(:creator, 0))";
    static const char SILO[] =
        "INSERT OR IGNORE INTO estimator_run_silos (run_id, silo_id) VALUES (:run, :silo)";
    if (r->result_len < 2 || r->result_len > INT_MAX)
        return dp_err_set(err, DP_ETOOBIG, NULL, "the run's result of %zu bytes cannot be stored",
                          r->result_len);
    sqlite3_stmt *st = NULL;
    int s = sqlite3_prepare_v2(db, INSERT, -1, &st, NULL);
    if (s == SQLITE_OK)
        s = bind_str(st, ":kind", r->kind);
    if (s == SQLITE_OK)
        s = bind_i64(st, ":t", r->created_at_ms);
    if (s == SQLITE_OK)
        s = bind_str(st, ":rid", r->request_id ? r->request_id : "-");
    if (s == SQLITE_OK)
        s = bind_str(st, ":st", r->status);
    if (s == SQLITE_OK)
        s = bind_i64(st, ":priv", r->priv ? 1 : 0);
    if (s == SQLITE_OK)
        s = bind_i64(st, ":n", r->n_clients);
    if (s == SQLITE_OK)
        s = bind_str(st, ":p", r->params);
    if (s == SQLITE_OK)
        s = bind_text(st, ":d", r->data, r->data_len);
    if (s == SQLITE_OK)
        s = bind_i64(st, ":rlen", (int64_t)r->result_len);
    if (s == SQLITE_OK)
        s = bind_str(st, ":k", r->idempotency_key);
    if (s == SQLITE_OK)
        s = bind_str(st, ":h", r->idempotency_key ? r->request_hash : NULL);
    if (s == SQLITE_OK)
        s = bind_i64(st, ":creator", r->creator_token_id);
    if (s == SQLITE_OK)
        s = sqlite3_step(st);
    sqlite3_finalize(st);
    st = NULL;
    if (s != SQLITE_DONE)
        return runs_fail(db, s, "insert estimator run", req_id, err);
    *id = (int64_t)sqlite3_last_insert_rowid(db);
    /* The result is the table's last column: the record above held it as n zero bytes without
     * allocating them; the text goes straight into the row's pages. */
    sqlite3_blob *bh = NULL;
    s = sqlite3_blob_open(db, "main", "estimator_runs", "result", *id, 1, &bh);
    if (s == SQLITE_OK)
        s = sqlite3_blob_write(bh, r->result, (int)r->result_len, 0);
    int sc = sqlite3_blob_close(bh);
    if (s == SQLITE_OK)
        s = sc;
    if (s != SQLITE_OK)
        return runs_fail(db, s, "write estimator run result", req_id, err);
    if (r->rows != NULL && (s = rows_insert(db, *id, r->rows)) != SQLITE_OK)
        return s == SQLITE_TOOBIG ? dp_err_set(err, DP_ETOOBIG, NULL,
                                               "the run's per-client results are too "
                                               "large to store; ask for \"results\": "
                                               "\"summary\"")
                                  : runs_fail(db, s, "insert estimator run clients", req_id, err);
    if (r->n_silos == 0)
        return DP_OK;
    s = sqlite3_prepare_v2(db, SILO, -1, &st, NULL);
    for (size_t i = 0; i < r->n_silos && s == SQLITE_OK; i++) {
        s = bind_i64(st, ":run", *id);
        if (s == SQLITE_OK)
            s = bind_i64(st, ":silo", r->silos[i]);
        if (s == SQLITE_OK)
            s = sqlite3_step(st);
        if (s == SQLITE_DONE)
            s = sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    return s == SQLITE_OK ? DP_OK : runs_fail(db, s, "insert estimator run silos", req_id, err);
}

void runs_run_clear(runs_run *r)
{
    if (r == NULL)
        return;
    free(r->params);
    free(r->data);
    free(r->result);
    memset(r, 0, sizeof *r);
}

int runs_get(store_conn *c, int64_t id, const runs_viewer *v, const char *req_id, runs_run *out,
             bool *found, dp_err *err)
{
    static const char SQL[] =
        "SELECT kind, created_at_ms, status, private, n_clients, params, data, "
        "result FROM estimator_runs AS r WHERE id = :id AND " RUN_VISIBLE;
    memset(out, 0, sizeof *out);
    *found = false;
    sqlite3_stmt *st = store_conn_prepare(c, SQL, err);
    if (st == NULL)
        return err->code;
    int rc = DP_OK;
    int s = bind_viewer(st, v);
    if (s == SQLITE_OK)
        s = bind_i64(st, ":id", id);
    if (s == SQLITE_OK)
        s = sqlite3_step(st);
    if (s == SQLITE_ROW) {
        out->id = id;
        store_col_copy(st, 0, out->kind, sizeof out->kind);
        out->created_at_ms = sqlite3_column_int64(st, 1);
        store_col_copy(st, 2, out->status, sizeof out->status);
        out->priv = sqlite3_column_int(st, 3) != 0;
        out->n_clients = sqlite3_column_int64(st, 4);
        if (col_dup(st, 5, &out->params) != 0 || col_dup(st, 6, &out->data) != 0 ||
            col_dup(st, 7, &out->result) != 0 || out->params == NULL || out->result == NULL) {
            runs_run_clear(out);
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        } else {
            *found = true;
        }
    } else if (s != SQLITE_DONE) {
        rc = store_err(c, s, "select estimator run", req_id, err);
    }
    store_stmt_done(st);
    return rc;
}

int runs_list(store_conn *c, const runs_viewer *v, int64_t after, size_t limit, const char *req_id,
              runs_summary *out, size_t *n, bool *more, dp_err *err)
{
    static const char SQL[] =
        "SELECT id, kind, created_at_ms, status, private, n_clients FROM "
        "estimator_runs AS r WHERE id > :after AND " RUN_VISIBLE " ORDER BY id LIMIT :lim";
    *n = 0;
    *more = false;
    sqlite3_stmt *st = store_conn_prepare(c, SQL, err);
    if (st == NULL)
        return err->code;
    int s = bind_viewer(st, v);
    if (s == SQLITE_OK)
        s = bind_i64(st, ":after", after);
    if (s == SQLITE_OK)
        s = bind_i64(st, ":lim", (int64_t)limit + 1);
    if (s == SQLITE_OK)
        s = SQLITE_ROW;
    while (s == SQLITE_ROW && (s = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == limit) {
            *more = true;
            continue;
        }
        runs_summary *r = &out[(*n)++];
        r->id = sqlite3_column_int64(st, 0);
        store_col_copy(st, 1, r->kind, sizeof r->kind);
        r->created_at_ms = sqlite3_column_int64(st, 2);
        store_col_copy(st, 3, r->status, sizeof r->status);
        r->priv = sqlite3_column_int(st, 4) != 0;
        r->n_clients = sqlite3_column_int64(st, 5);
    }
    int rc = s == SQLITE_DONE ? DP_OK : store_err(c, s, "list estimator runs", req_id, err);
    store_stmt_done(st);
    return rc;
}

int runs_find_key(sqlite3 *db, const char *key, const char *hash, const char *req_id, int *found,
                  int64_t *id, char **result, dp_err *err)
{
    static const char SQL[] =
        "SELECT id, request_hash, result FROM estimator_runs WHERE idempotency_key = :k";
    sqlite3_stmt *st = NULL;
    *found = 0;
    *result = NULL;
    int rc = DP_OK;
    int s = sqlite3_prepare_v2(db, SQL, -1, &st, NULL);
    if (s == SQLITE_OK)
        s = bind_str(st, ":k", key);
    if (s == SQLITE_OK)
        s = sqlite3_step(st);
    if (s == SQLITE_ROW) {
        const char *h = (const char *)sqlite3_column_text(st, 1);
        if (h == NULL || hash == NULL || strcmp(h, hash) != 0) {
            *found = 2;
        } else if (col_dup(st, 2, result) != 0 || *result == NULL) {
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        } else {
            *found = 1;
            *id = sqlite3_column_int64(st, 0);
        }
    } else if (s != SQLITE_DONE) {
        rc = runs_fail(db, s, "look up an Idempotency-Key", req_id, err);
    }
    sqlite3_finalize(st);
    return rc;
}

int runs_visible(store_conn *c, int64_t id, const runs_viewer *v, const char *req_id, bool *found,
                 dp_err *err)
{
    static const char SQL[] = "SELECT 1 FROM estimator_runs AS r WHERE id = :id AND " RUN_VISIBLE;
    *found = false;
    sqlite3_stmt *st = store_conn_prepare(c, SQL, err);
    if (st == NULL)
        return err->code;
    int s = bind_viewer(st, v);
    if (s == SQLITE_OK)
        s = bind_i64(st, ":id", id);
    if (s == SQLITE_OK)
        s = sqlite3_step(st);
    int rc = DP_OK;
    if (s == SQLITE_ROW)
        *found = true;
    else if (s != SQLITE_DONE)
        rc = store_err(c, s, "select estimator run", req_id, err);
    store_stmt_done(st);
    return rc;
}

/* Reads n bytes at off of column col of run_id's row in estimator_run_clients. */
static int blob_get(sqlite3 *db, const char *col, int64_t run_id, void *p, size_t n, size_t off)
{
    if (n == 0)
        return SQLITE_OK;
    if (n > INT_MAX || off > INT_MAX)
        return SQLITE_TOOBIG;
    sqlite3_blob *bh = NULL;
    int s = sqlite3_blob_open(db, "main", "estimator_run_clients", col, run_id, 0, &bh);
    if (s == SQLITE_OK && (size_t)sqlite3_blob_bytes(bh) < off + n)
        s = SQLITE_CORRUPT;
    if (s == SQLITE_OK)
        s = sqlite3_blob_read(bh, p, (int)n, (int)off);
    int sc = sqlite3_blob_close(bh);
    return s == SQLITE_OK ? sc : s;
}

int runs_rows_get(sqlite3 *db, int64_t id, size_t from, size_t count, const char *req_id,
                  run_rows *out, size_t *total, bool *found, dp_err *err)
{
    static const char SQL[] = "SELECT n_rows, layout FROM estimator_run_clients WHERE run_id = :id";
    memset(out, 0, sizeof *out);
    *found = false;
    *total = 0;
    sqlite3_stmt *st = NULL;
    int s = sqlite3_prepare_v2(db, SQL, -1, &st, NULL);
    if (s == SQLITE_OK)
        s = bind_i64(st, ":id", id);
    if (s == SQLITE_OK)
        s = sqlite3_step(st);
    int bad = 0;
    if (s == SQLITE_ROW) {
        int64_t n = sqlite3_column_int64(st, 0);
        const char *layout = (const char *)sqlite3_column_text(st, 1);
        if (n < 1 || layout == NULL ||
            run_rows_layout_parse(out, layout, (size_t)sqlite3_column_bytes(st, 1)) != 0)
            bad = 1;
        *total = (size_t)n;
    }
    sqlite3_finalize(st);
    if (s == SQLITE_DONE)
        return DP_OK;
    if (s != SQLITE_ROW)
        return runs_fail(db, s, "select estimator run clients", req_id, err);
    if (bad) {
        run_rows_clear(out);
        dp_log(DP_LOG_ERROR, req_id, "runs: run %lld has an unreadable per-client layout",
               (long long)id);
        return dp_err_set(err, DP_EINTERNAL, NULL, "stored run is unreadable");
    }
    *found = true;
    size_t lo = from < *total ? from : *total;
    size_t n = count < *total - lo ? count : *total - lo;
    run_ids ids = out->ids;
    if (n == 0) {
        out->base = lo;
        return DP_OK;
    }
    if (run_rows_alloc(out, n, ids) != 0) {
        run_rows_clear(out);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    out->base = lo;
    size_t row = out->w * sizeof(double);
    s = blob_get(db, "vals", id, out->vals, n * row, lo * row);
    if (s == SQLITE_OK && ids == RUN_IDS_TEXT) {
        s = blob_get(db, "ids", id, out->id_off, (n + 1) * sizeof(uint32_t), lo * sizeof(uint32_t));
        uint32_t first = out->id_off[0], last = out->id_off[n];
        size_t text_at = (*total + 1) * sizeof(uint32_t) + first;
        if (s == SQLITE_OK && last < first)
            s = SQLITE_CORRUPT;
        if (s == SQLITE_OK && (out->id_text = dp_malloc((size_t)(last - first) + 1)) == NULL)
            s = SQLITE_NOMEM;
        if (s == SQLITE_OK)
            s = blob_get(db, "ids", id, out->id_text, last - first, text_at);
        for (size_t i = 0; s == SQLITE_OK && i <= n; i++)
            out->id_off[i] -= first;
        out->id_len = out->id_cap = last - first;
    }
    if (s != SQLITE_OK) {
        run_rows_clear(out);
        *found = false;
        if (s == SQLITE_NOMEM)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        dp_log(DP_LOG_ERROR, req_id, "runs: run %lld per-client results: %s (rc %d)", (long long)id,
               sqlite3_errstr(s), s);
        return dp_err_set(err, DP_EINTERNAL, NULL, "stored run is unreadable");
    }
    return DP_OK;
}
