/*
 * ledger_fixture.h: a ledger on a fresh database file in a temporary directory (STYLE.md 2.9: never
 * :memory:), with the ledger migration applied, plus a separate read connection like a pooled one.
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
#include "service/ledger.h"

typedef struct ledger_fixture {
    char dir[64];   /* mkdtemp directory */
    char path[128]; /* database file */
    ledger *l;
    sqlite3 *db;    /* read connection (as a handler's pooled one) */
} ledger_fixture;

static inline char *ledger_fixture_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) != NULL) {
        if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = '\0';
        }
    }
    fclose(f);
    return buf;
}

static inline int ledger_fixture_open(ledger_fixture *fx)
{
    memset(fx, 0, sizeof *fx);
    snprintf(fx->dir, sizeof fx->dir, "/tmp/dpsilo-ledger-XXXXXX");
    if (mkdtemp(fx->dir) == NULL)
        return -1;
    snprintf(fx->path, sizeof fx->path, "%s/db", fx->dir);
    char *sql = ledger_fixture_slurp("migrations/0003_ledger.sql");
    if (sql == NULL)
        return -1;
    sqlite3 *db = NULL;
    int rc = sqlite3_open(fx->path, &db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    free(sql);
    sqlite3_close(db);
    if (rc != SQLITE_OK)
        return -1;
    dp_err e;
    dp_err_clear(&e);
    fx->l = ledger_open(fx->path, &e);
    if (fx->l == NULL)
        return -1;
    if (sqlite3_open_v2(fx->path, &fx->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK)
        return -1;
    sqlite3_busy_timeout(fx->db, 5000);
    return 0;
}

static inline void ledger_fixture_close(ledger_fixture *fx)
{
    ledger_free(fx->l);
    sqlite3_close(fx->db);
    char p[160];
    const char *suffix[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s%s", fx->path, suffix[i]);
        unlink(p);
    }
    rmdir(fx->dir);
}

#endif
