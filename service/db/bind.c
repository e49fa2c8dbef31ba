/*
 * db/bind.c: named binders with a sticky result code. Contract in db/bind.h.
 */
#include "service/db/bind.h"

#include <stdio.h>

#include "common/dp_err.h"

#include "common/dp_log.h"

store_binder store_bind_begin(sqlite3_stmt *st)
{
    return (store_binder){st, SQLITE_OK};
}

/* The index of name, or 0 with b->rc set (and logged) when the statement has no such parameter. */
static int param_index(store_binder *b, const char *name)
{
    if (b->rc != SQLITE_OK)
        return 0;
    int i = sqlite3_bind_parameter_index(b->st, name);
    if (i == 0) {
        dp_log(DP_LOG_ERROR, NULL, "sqlite: no parameter %s in \"%.120s\"", name,
               sqlite3_sql(b->st));
        b->rc = SQLITE_RANGE;
    }
    return i;
}

void store_bind_i64(store_binder *b, const char *name, int64_t v)
{
    int i = param_index(b, name);
    if (i > 0)
        b->rc = sqlite3_bind_int64(b->st, i, (sqlite3_int64)v);
}

void store_bind_double(store_binder *b, const char *name, double v)
{
    int i = param_index(b, name);
    if (i > 0)
        b->rc = sqlite3_bind_double(b->st, i, v);
}

void store_bind_text(store_binder *b, const char *name, const char *v)
{
    int i = param_index(b, name);
    if (i > 0)
        b->rc =
            v ? sqlite3_bind_text(b->st, i, v, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(b->st, i);
}

void store_bind_i64_or_null(store_binder *b, const char *name, bool present, int64_t v)
{
    int i = param_index(b, name);
    if (i > 0)
        b->rc =
            present ? sqlite3_bind_int64(b->st, i, (sqlite3_int64)v) : sqlite3_bind_null(b->st, i);
}

int store_bind_step(store_binder *b)
{
    return b->rc != SQLITE_OK ? b->rc : sqlite3_step(b->st);
}

int store_bind_page(store_binder *b, size_t page, int (*row)(sqlite3_stmt *st, void *arg),
                    void *arg, bool *more, int *sqlite_rc)
{
    *more = false;
    *sqlite_rc = SQLITE_OK;
    size_t n = 0;
    int s = store_bind_step(b);
    while (s == SQLITE_ROW) {
        if (n == page) {
            *more = true;
            return DP_OK;
        }
        if (row(b->st, arg) != 0)
            return DP_ENOMEM;
        n++;
        s = sqlite3_step(b->st);
    }
    if (s == SQLITE_DONE)
        return DP_OK;
    *sqlite_rc = s;
    return DP_EINTERNAL;
}

void store_bind_viewer(store_binder *b, const store_viewer *v)
{
    bool admin = v == NULL || v->admin;
    store_bind_i64(b, ":admin", admin ? 1 : 0);
    store_bind_i64(b, ":tok", v != NULL ? v->token_id : 0);
    store_bind_i64(b, ":silo", admin ? 0 : v->silo_id);
}

void store_col_copy(sqlite3_stmt *st, int i, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}
