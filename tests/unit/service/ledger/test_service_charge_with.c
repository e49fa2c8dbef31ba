/*
 * Unit tests for ledger_charge_batch_with (issue 10, D7): a caller's write commits in the same
 * transaction as the silos' charges. A failing write leaves no charge; a succeeding one leaves
 * both; a refused charge never calls the write; n = 0 runs the write alone; a retried charge under
 * the same idempotency key is replayed to the write and charges nothing.
 */
#include "tests/support/test_util.h"

#include <string.h>

#include "accounting/event.h"
#include "tests/support/ledger_fixture.h"

typedef struct writer {
    int calls;
    int fail;      /* DP_OK or the code to fail with */
    bool replayed; /* out[0].replayed seen at the last call */
} writer;

static int write_row(sqlite3 *db, void *arg, const ledger_charge_result *out, size_t n, dp_err *err)
{
    writer *w = arg;
    w->calls++;
    w->replayed = n > 0 && out[0].replayed;
    if (w->fail != DP_OK)
        return dp_err_set(err, w->fail, "x", "the write failed");
    return sqlite3_exec(db,
                        "INSERT INTO estimator_runs (kind, created_at_ms, request_id, status, "
                        "private, n_clients, params, result) VALUES ('gaussian', 0, 't', "
                        "'converged', 1, 1, '{}', '{}')",
                        NULL, NULL, NULL) == SQLITE_OK
               ? DP_OK
               : dp_err_set(err, DP_EINTERNAL, NULL, "insert failed");
}

static int count(ledger_fixture *fx, const char *table)
{
    char sql[80];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
    sqlite3_stmt *st = NULL;
    int n = -1;
    if (sqlite3_prepare_v2(fx->db, sql, -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return n;
}

static void the_write_and_the_charge_commit_together(void **state)
{
    (void)state;
    ledger_fixture fx;
    assert_int_equal(ledger_fixture_open(&fx), 0);
    dp_err e;
    dp_err_clear(&e);
    ledger_budget b = {LEDGER_BUDGET_EPS_DELTA, LEDGER_ACCT_RDP, ACCT_CONV_BALLE2020, 3.0, 1e-5, 0};
    ledger_silo_view v;
    char tok[LEDGER_TOKEN_BUF];
    assert_int_equal(ledger_silo_create(fx.l, "s", &b, &v, tok, &e), DP_OK);
    acct_event *ev = acct_event_gaussian(4.0);
    ledger_charge_req rq = {v.id, ev, ACCT_NB_ADD_REMOVE, NULL, "k1", "run", 0, 0};
    ledger_charge_result res;
    /* a failing write: its error, and no charge */
    writer w = {0, DP_EBUSY, false};
    assert_int_equal(ledger_charge_batch_with(fx.l, &rq, 1, write_row, &w, &res, &e), DP_EBUSY);
    assert_int_equal(w.calls, 1);
    assert_int_equal(count(&fx, "charges"), 0);
    assert_int_equal(count(&fx, "estimator_runs"), 0);
    /* a succeeding write: both */
    w = (writer){0, DP_OK, false};
    dp_err_clear(&e);
    assert_int_equal(ledger_charge_batch_with(fx.l, &rq, 1, write_row, &w, &res, &e), DP_OK);
    assert_false(w.replayed);
    assert_true(res.charge_id > 0);
    assert_int_equal(count(&fx, "charges"), 1);
    assert_int_equal(count(&fx, "estimator_runs"), 1);
    /* the same key again: the charge replays (the write sees it) and nothing is charged */
    w = (writer){0, DP_ECONFLICT, false};
    dp_err_clear(&e);
    assert_int_equal(ledger_charge_batch_with(fx.l, &rq, 1, write_row, &w, &res, &e), DP_ECONFLICT);
    assert_true(w.replayed);
    assert_int_equal(count(&fx, "charges"), 1);
    /* a refused charge never reaches the write */
    acct_event *big = acct_event_gaussian(0.3);
    ledger_charge_req rq2 = {v.id, big, ACCT_NB_ADD_REMOVE, NULL, NULL, "run", 0, 0};
    w = (writer){0, DP_OK, false};
    dp_err_clear(&e);
    assert_int_equal(ledger_charge_batch_with(fx.l, &rq2, 1, write_row, &w, &res, &e), DP_EBUDGET);
    assert_int_equal(w.calls, 0);
    assert_int_equal(count(&fx, "estimator_runs"), 1);
    /* no silo: the write alone, through the committer */
    w = (writer){0, DP_OK, false};
    dp_err_clear(&e);
    assert_int_equal(ledger_charge_batch_with(fx.l, NULL, 0, write_row, &w, NULL, &e), DP_OK);
    assert_int_equal(w.calls, 1);
    assert_int_equal(count(&fx, "estimator_runs"), 2);
    assert_int_equal(count(&fx, "charges"), 1);
    acct_event_free(ev);
    acct_event_free(big);
    ledger_fixture_close(&fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_write_and_the_charge_commit_together),
    };
    return cmocka_run_group_tests_name("service_charge_with", tests, NULL, NULL);
}
