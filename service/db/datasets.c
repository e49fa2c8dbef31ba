/*
 * db/datasets.c: the datasets table. Contract in db/datasets.h.
 *
 * The writer operations prepare their statements per call (an upload is rare and large next to a
 * prepare); the reads use the pooled connection's statement cache.
 */
#include "service/db/datasets.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_log.h"
#include "service/db/bind.h"

/* The access rule of db/datasets.h; the row is aliased d, the viewer bound as :admin :tok :silo. */
#define DATASET_VISIBLE                                                                            \
    "(:admin = 1 OR d.creator_token_id = :tok OR EXISTS (SELECT 1 FROM tokens t WHERE t.id = "     \
    "d.creator_token_id AND t.silo_id = :silo))"

#define DATASET_COLS                                                                               \
    "d.id, d.name, d.created_at_ms, d.label_column, d.silo_column, d.n_rows, d.n_columns, "        \
    "d.n_features, d.n_classes, d.bytes, d.sha256, d.silos, d.features"

static int ds_fail(sqlite3 *db, int rc, const char *what, const char *req_id, dp_err *err)
{
    int prim = rc & 0xff;
    if (prim == SQLITE_BUSY || prim == SQLITE_LOCKED)
        return dp_err_set(err, DP_EBUSY, NULL, "the database is busy; retry shortly");
    if (prim == SQLITE_NOMEM)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    if (prim == SQLITE_FULL || prim == SQLITE_TOOBIG)
        return dp_err_set(err, DP_ETOOBIG, NULL, "the data set cannot be stored (%s)",
                          prim == SQLITE_FULL ? "disk full" : "too big for the database");
    dp_log(DP_LOG_ERROR, req_id, "datasets: %s: %s (rc %d)", what, sqlite3_errmsg(db), rc);
    return dp_err_set(err, DP_EINTERNAL, NULL, "internal error reading or storing data sets");
}

int datasets_insert_apply(sqlite3 *db, void *arg, dp_err *err)
{
    static const char INSERT[] =
        "INSERT INTO datasets (name, created_at_ms, request_id, creator_token_id, label_column, "
        "silo_column, n_rows, n_columns, n_features, n_classes, silos, features, bytes, sha256, "
        "csv) VALUES (:name, :t, :rid, nullif(:creator, 0), :label, :silo, :rows, :cols, :feat, "
        ":classes, :silos, :features, :bytes, :sha, zeroblob(:bytes))";
    dataset_insert_op *op = arg;
    const dataset_new *d = op->d;
    if (d->csv_len < 1 || d->csv_len > INT_MAX)
        return dp_err_set(err, DP_ETOOBIG, NULL,
                          "a data set of %zu bytes cannot be stored (at most %d)", d->csv_len,
                          INT_MAX);
    sqlite3_stmt *st = NULL;
    int s = sqlite3_prepare_v2(db, INSERT, -1, &st, NULL);
    if (s != SQLITE_OK)
        return ds_fail(db, s, "prepare insert", d->request_id, err);
    store_binder b = store_bind_begin(st);
    store_bind_text(&b, ":name", d->name);
    store_bind_i64(&b, ":t", d->created_at_ms);
    store_bind_text(&b, ":rid", d->request_id ? d->request_id : "-");
    store_bind_i64(&b, ":creator", d->creator_token_id);
    store_bind_text(&b, ":label", d->label_column);
    store_bind_text(&b, ":silo", d->silo_column);
    store_bind_i64(&b, ":rows", d->n_rows);
    store_bind_i64(&b, ":cols", d->n_columns);
    store_bind_i64(&b, ":feat", d->n_features);
    store_bind_i64(&b, ":classes", d->n_classes);
    store_bind_text(&b, ":silos", d->silos);
    store_bind_text(&b, ":features", d->features);
    store_bind_i64(&b, ":bytes", (int64_t)d->csv_len);
    store_bind_text(&b, ":sha", d->sha256);
    s = store_bind_step(&b);
    sqlite3_finalize(st);
    if (s != SQLITE_DONE)
        return ds_fail(db, s, "insert data set", d->request_id, err);
    op->id = (int64_t)sqlite3_last_insert_rowid(db);
    /* csv is the last column: the record above held it as zero bytes without allocating them. */
    sqlite3_blob *bh = NULL;
    s = sqlite3_blob_open(db, "main", "datasets", "csv", op->id, 1, &bh);
    if (s == SQLITE_OK)
        s = sqlite3_blob_write(bh, d->csv, (int)d->csv_len, 0);
    int sc = sqlite3_blob_close(bh);
    if (s == SQLITE_OK)
        s = sc;
    if (s != SQLITE_OK)
        return ds_fail(db, s, "write data set text", d->request_id, err);
    return DP_OK;
}

int datasets_delete_apply(sqlite3 *db, void *arg, dp_err *err)
{
    static const char DELETE[] = "DELETE FROM datasets AS d WHERE d.id = :id AND " DATASET_VISIBLE;
    dataset_delete_op *op = arg;
    op->found = false;
    sqlite3_stmt *st = NULL;
    int s = sqlite3_prepare_v2(db, DELETE, -1, &st, NULL);
    if (s != SQLITE_OK)
        return ds_fail(db, s, "prepare delete", NULL, err);
    store_binder b = store_bind_begin(st);
    store_bind_i64(&b, ":id", op->id);
    store_bind_viewer(&b, &op->who);
    s = store_bind_step(&b);
    sqlite3_finalize(st);
    if (s != SQLITE_DONE)
        return ds_fail(db, s, "delete data set", NULL, err);
    op->found = sqlite3_changes(db) > 0;
    return DP_OK;
}

void dataset_row_clear(dataset_row *r)
{
    if (r == NULL)
        return;
    dp_free(r->silos);
    dp_free(r->features);
    memset(r, 0, sizeof *r);
}

static char *col_dup(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return dp_strdup(t ? (const char *)t : "");
}

/* Fills r from a row of DATASET_COLS; -1 when out of memory (r cleared). */
static int read_row(sqlite3_stmt *st, dataset_row *r)
{
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    store_col_copy(st, 1, r->name, sizeof r->name);
    r->created_at_ms = sqlite3_column_int64(st, 2);
    store_col_copy(st, 3, r->label_column, sizeof r->label_column);
    store_col_copy(st, 4, r->silo_column, sizeof r->silo_column);
    r->n_rows = sqlite3_column_int64(st, 5);
    r->n_columns = sqlite3_column_int64(st, 6);
    r->n_features = sqlite3_column_int64(st, 7);
    r->n_classes = sqlite3_column_int64(st, 8);
    r->bytes = sqlite3_column_int64(st, 9);
    store_col_copy(st, 10, r->sha256, sizeof r->sha256);
    r->silos = col_dup(st, 11);
    r->features = col_dup(st, 12);
    if (r->silos == NULL || r->features == NULL) {
        dataset_row_clear(r);
        return -1;
    }
    return 0;
}

int datasets_get(store_conn *c, int64_t id, const dataset_viewer *who, dataset_row *out,
                 bool *found, const char *req_id, dp_err *err)
{
    static const char GET[] =
        "SELECT " DATASET_COLS " FROM datasets AS d WHERE d.id = :id AND " DATASET_VISIBLE;
    memset(out, 0, sizeof *out);
    *found = false;
    sqlite3_stmt *st = store_conn_prepare(c, GET, err);
    if (st == NULL)
        return err->code;
    store_binder b = store_bind_begin(st);
    store_bind_i64(&b, ":id", id);
    store_bind_viewer(&b, who);
    int s = store_bind_step(&b);
    int rc = DP_OK;
    if (s == SQLITE_ROW) {
        if (read_row(st, out) != 0)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        else
            *found = true;
    } else if (s != SQLITE_DONE) {
        rc = store_err(c, s, "read data set", req_id, err);
    }
    store_stmt_done(st);
    return rc;
}

typedef struct row_page {
    dataset_row *out;
    size_t n;
} row_page;

static int page_row(sqlite3_stmt *st, void *arg)
{
    row_page *p = arg;
    if (read_row(st, &p->out[p->n]) != 0)
        return -1;
    p->n++;
    return 0;
}

int datasets_list(store_conn *c, const dataset_viewer *who, int64_t after, size_t limit,
                  dataset_row *out, size_t *n, bool *more, const char *req_id, dp_err *err)
{
    static const char LIST[] = "SELECT " DATASET_COLS " FROM datasets AS d WHERE d.id > :after "
                               "AND " DATASET_VISIBLE " ORDER BY d.id LIMIT :lim";
    *n = 0;
    *more = false;
    sqlite3_stmt *st = store_conn_prepare(c, LIST, err);
    if (st == NULL)
        return err->code;
    store_binder b = store_bind_begin(st);
    store_bind_i64(&b, ":after", after);
    store_bind_i64(&b, ":lim", (int64_t)limit + 1);
    store_bind_viewer(&b, who);
    row_page pg = {out, 0};
    int src = SQLITE_OK;
    int rc = store_bind_page(&b, limit, page_row, &pg, more, &src);
    if (rc == DP_ENOMEM)
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    else if (rc != DP_OK)
        rc = store_err(c, src, "list data sets", req_id, err);
    store_stmt_done(st);
    if (rc != DP_OK)
        for (size_t i = 0; i < pg.n; i++)
            dataset_row_clear(&out[i]);
    *n = rc == DP_OK ? pg.n : 0;
    return rc;
}

int datasets_read_csv(sqlite3 *db, int64_t id, char **text, size_t *len, const char *req_id,
                      dp_err *err)
{
    *text = NULL;
    *len = 0;
    sqlite3_blob *bh = NULL;
    int s = sqlite3_blob_open(db, "main", "datasets", "csv", id, 0, &bh);
    if (s != SQLITE_OK) {
        sqlite3_blob_close(bh);
        if ((s & 0xff) == SQLITE_ERROR) /* no such row */
            return dp_err_set(err, DP_ENOTFOUND, "dataset", "data set %lld does not exist",
                              (long long)id);
        return ds_fail(db, s, "open data set text", req_id, err);
    }
    int n = sqlite3_blob_bytes(bh);
    char *buf = n >= 0 ? dp_malloc((size_t)n + 1) : NULL;
    if (buf == NULL) {
        sqlite3_blob_close(bh);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    s = sqlite3_blob_read(bh, buf, n, 0);
    sqlite3_blob_close(bh);
    if (s != SQLITE_OK) {
        dp_free(buf);
        return ds_fail(db, s, "read data set text", req_id, err);
    }
    buf[n] = '\0';
    *text = buf;
    *len = (size_t)n;
    return DP_OK;
}
