/*
 * ledger_fixture.h: a ledger on a fresh database file in a temporary directory (STYLE.md 2.9: never
 * :memory:), migrated by the daemon's own runner (store_open with the embedded migrations), plus a
 * borrowed pool connection for reads, as a handler has.
 * Header-only so that each test binary stays self-contained (one cmocka binary per module).
 */
#ifndef DP_TESTS_LEDGER_FIXTURE_H
#define DP_TESTS_LEDGER_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common/dp_err.h"
#include "service/embedded.h"
#include "service/ledger.h"
#include "service/store.h"

typedef struct ledger_fixture {
    char dir[64];   /* mkdtemp directory */
    char path[128]; /* database file */
    store *st;
    store_conn *conn; /* borrowed from st */
    ledger *l;
    sqlite3 *db; /* store_conn_db(conn): the read connection */
} ledger_fixture;

static inline int ledger_fixture_open(ledger_fixture *fx)
{
    memset(fx, 0, sizeof *fx);
    snprintf(fx->dir, sizeof fx->dir, "/tmp/dpsilo-ledger-XXXXXX");
    if (mkdtemp(fx->dir) == NULL)
        return -1;
    snprintf(fx->path, sizeof fx->path, "%s/db", fx->dir);
    dp_err e;
    dp_err_clear(&e);
    fx->st = store_open(fx->path, 1, EMBED_MIGRATIONS, EMBED_MIGRATIONS_N, &e);
    if (fx->st == NULL)
        return -1;
    fx->conn = store_conn_borrow(fx->st, &e);
    if (fx->conn == NULL)
        return -1;
    fx->db = store_conn_db(fx->conn);
    fx->l = ledger_open(fx->path, &e);
    return fx->l == NULL ? -1 : 0;
}

static inline void ledger_fixture_close(ledger_fixture *fx)
{
    ledger_free(fx->l);
    store_conn_return(fx->st, fx->conn);
    store_free(fx->st);
    char p[160];
    const char *suffix[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s%s", fx->path, suffix[i]);
        unlink(p);
    }
    rmdir(fx->dir);
}

#endif
