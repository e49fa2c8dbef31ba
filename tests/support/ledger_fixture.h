/*
 * ledger_fixture.h: a ledger on a fresh database file in a temporary directory (never :memory:,
 * where WAL and several connections behave differently), migrated by the daemon's own runner
 * (store_open with the embedded migrations), plus a borrowed pool connection for reads, as a
 * handler has. Built on tests/test_service_util.h's route_fixture, which owns the directory, the
 * store and the connection. Header-only so that each test binary stays self-contained (one cmocka
 * binary per module).
 */
#ifndef DP_TESTS_LEDGER_FIXTURE_H
#define DP_TESTS_LEDGER_FIXTURE_H

#include <sqlite3.h>

#include "service/ledger/ledger.h"
#include "common/dp_math.h"
#include "tests/support/service_util.h"

typedef struct ledger_fixture {
    route_fixture r;  /* temporary directory, migrated store, borrowed connection, cfg */
    store_conn *conn; /* r.db: the read connection a handler borrows */
    ledger *l;
    sqlite3 *db; /* store_conn_db(conn) */
} ledger_fixture;

/* 0, or -1 on any failure. */
static inline int ledger_fixture_open(ledger_fixture *fx)
{
    memset(fx, 0, sizeof *fx);
    if (route_fixture_open(&fx->r, "ledger") != 0)
        return -1;
    fx->conn = fx->r.db;
    fx->db = store_conn_db(fx->conn);
    dp_err e;
    dp_err_clear(&e);
    fx->l = ledger_open(fx->r.path, &e);
    return fx->l == NULL ? -1 : 0;
}

/* A silo made through the ledger (an (epsilon, delta) budget, RDP, BALLE2020) and its first token:
 * the ids a test needs for the access rules. 0, or -1 on failure. */
typedef struct ledger_fixture_silo {
    int64_t silo_id;
    int64_t token_id;
    char token[LEDGER_TOKEN_BUF];
} ledger_fixture_silo;

static inline int ledger_fixture_make_silo(ledger_fixture *fx, const char *name, double epsilon,
                                           double delta, ledger_fixture_silo *out)
{
    ledger_budget b = {.kind = LEDGER_BUDGET_EPS_DELTA,
                       .accountant = LEDGER_ACCT_RDP,
                       .conversion = ACCT_CONV_BALLE2020,
                       .epsilon = epsilon,
                       .delta = delta,
                       .rho = DP_NAN};
    ledger_silo_view v;
    ledger_principal p;
    dp_err e;
    dp_err_clear(&e);
    if (ledger_silo_create(fx->l, name, &b, &v, out->token, &e) != DP_OK ||
        ledger_token_lookup(fx->conn, out->token, &p, &e) != DP_OK)
        return -1;
    out->silo_id = v.id;
    out->token_id = p.token_id;
    return 0;
}

/* Frees the ledger, then what route_fixture_open acquired (the directory goes with its files). */
static inline void ledger_fixture_close(ledger_fixture *fx)
{
    ledger_free(fx->l);
    route_fixture_close(&fx->r);
}

#endif
