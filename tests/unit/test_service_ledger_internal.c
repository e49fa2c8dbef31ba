/*
 * White-box tests of service/ledger.c (the file is included, as h2o's unit tests do, to reach its
 * static functions): races that cannot be forced through the public API.
 *
 * Regression: a PLD figure computed on a snapshot at delta d must not be used after a PATCH changed
 * the silo's delta; before the fix the committer compared only n_charges and the highest claim id,
 * so a stricter delta could admit on a figure that under-states the loss.
 */
#include "service/ledger.c"

#include "tests/test_util.h"
#include "tests/unit/ledger_fixture.h"

static int setup(void **state)
{
    ledger_fixture *f = calloc(1, sizeof *f);
    if (f == NULL || ledger_fixture_open(f) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    ledger_fixture_close(*state);
    free(*state);
    return 0;
}

static void pld_snapshot_at_another_delta_is_stale(void **state)
{
    ledger_fixture *f = *state;
    dp_err e;
    dp_err_clear(&e);
    ledger_budget b = {.kind = LEDGER_BUDGET_EPS_DELTA,
                       .accountant = LEDGER_ACCT_PLD,
                       .conversion = ACCT_CONV_BALLE2020,
                       .epsilon = 4.0,
                       .delta = 1e-5,
                       .rho = (double)NAN};
    ledger_silo_view v;
    char tok[LEDGER_TOKEN_BUF];
    assert_int_equal(ledger_silo_create(f->l, "p", &b, &v, tok, &e), DP_OK);
    acct_event *g = acct_event_alloc(ACCT_EV_GAUSSIAN);
    g->noise_multiplier = 2.385;
    ledger_charge_req req = {.silo_id = v.id, .event = g, .event_json = "{}"};
    ledger_charge_result res;
    op_item *it = calloc(1, sizeof *it);
    assert_non_null(it);
    it->res = &res;
    assert_int_equal(item_prepare(f->l, &req, "charge", it, &e), DP_OK);
    assert_int_equal(pld_prepare(f->l, it, &e), DP_OK); /* snapshot at delta 1e-5 */
    assert_true(it->pld_ready);
    ledger_patch p = {.name = NULL, .epsilon = (double)NAN, .delta = 1e-8, .rho = (double)NAN};
    assert_int_equal(ledger_silo_patch(f->l, v.id, &p, &v, &e), DP_OK);
    ledger_op op = {.kind = OP_CHARGE, .items = it, .n_items = 1};
    submit(f->l, &op);
    assert_true(op.need_pld); /* the figure at 1e-5 was refused, nothing written */
    assert_int_equal(op.rc, DP_EBUSY);
    ledger_silo_view now;
    assert_int_equal(ledger_silo_get(f->l, f->conn, v.id, &now, &e), DP_OK);
    assert_int_equal(now.n_charges, 0);
    /* The normal path recomputes at the new delta and charges. */
    dp_err_clear(&e);
    assert_int_equal(ledger_charge(f->l, &req, false, &res, &e), DP_OK);
    acct_pld_opts o;
    acct_pld_opts_default(&o);
    acct_pld_result r;
    assert_int_equal(acct_pld_epsilon(g, ACCT_NB_ADD_REMOVE, 1e-8, &o, &r, &e), DP_OK);
    assert_true(res.spent_eps_after <= r.epsilon_upper * (1 + 1e-9));
    free(it->own_json);
    free(it);
    acct_event_free(g);
}

int main(void)
{
    dp_log_set_level(DP_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(pld_snapshot_at_another_delta_is_stale, setup, teardown),
    };
    return cmocka_run_group_tests_name("service_ledger_internal", tests, NULL, NULL);
}
