/*
 * test_service_util.h: the fixture for unit tests that call route handlers directly (no socket):
 * a database file in a fresh temporary directory (never :memory:, where WAL behaves differently),
 * migrated by the daemon's own runner (store_open with the embedded migrations), one borrowed pool
 * connection and default configuration, plus an http_req wired to them, as the HTTP layer would
 * build it. Header-only so that each test binary stays self-contained (one cmocka binary per
 * module). Memory: route_fixture_close releases what route_fixture_open acquired.
 */
#ifndef DP_TESTS_TEST_SERVICE_UTIL_H
#define DP_TESTS_TEST_SERVICE_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dp_err.h"
#include "service/api/routes.h"
#include "service/base/cfg.h"
#include "service/db/store.h"

typedef struct route_fixture {
    char dir[64];   /* mkdtemp directory */
    char path[128]; /* database file inside it */
    store *st;
    store_conn *db; /* borrowed from st */
    cfg c;          /* cfg_defaults */
    app app;        /* handed to handlers as rq.app: store and cfg set; tests add the rest */
} route_fixture;

/* tag names the temporary directory (/tmp/dpsilo-<tag>-XXXXXX). 0, or -1 on any failure. */
static inline int route_fixture_open(route_fixture *f, const char *tag)
{
    memset(f, 0, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/dpsilo-%s-XXXXXX", tag);
    if (mkdtemp(f->dir) == NULL)
        return -1;
    snprintf(f->path, sizeof f->path, "%s/t.db", f->dir);
    dp_err e;
    dp_err_clear(&e);
    f->st = store_open(f->path, 1, EMBED_MIGRATIONS, EMBED_MIGRATIONS_N, &e);
    if (f->st == NULL)
        return -1;
    f->db = store_conn_borrow(f->st, &e);
    cfg_defaults(&f->c);
    return f->db ? 0 : -1;
}

/* 0, or -1 when the temporary directory could not be removed. */
static inline int route_fixture_close(route_fixture *f)
{
    store_conn_return(f->st, f->db); /* both accept NULL */
    store_free(f->st);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A request to method path on the fixture's connection; everything else zero (no body). */
static inline http_req route_fixture_req(route_fixture *f, const char *method, const char *path)
{
    http_req rq;
    memset(&rq, 0, sizeof rq);
    rq.method = method;
    rq.path = path;
    rq.db = f->db;
    f->app.store = f->st;
    f->app.cfg = &f->c;
    rq.app = &f->app;
    rq.req_id = "test";
    return rq;
}

#endif
