/*
 * White-box tests of service/ledger/ (its internal functions, through ledger/internal.h): races
 * that cannot be forced through the public API.
 *
 * Regression: a PLD figure computed on a snapshot at delta d must not be used after a PATCH changed
 * the silo's delta; before the fix the committer compared only n_charges and the highest claim id,
 * so a stricter delta could lg_admit on a figure that under-states the loss.
 *
 * Regression (issue #10, D9): PLD figures are computed by the ledger's PLD thread before a deferred
 * charge is woken, never on the thread that resumes it (an HTTP worker).
 */
#include "service/ledger/internal.h"

#include "tests/support/test_util.h"
#include "tests/support/ledger_fixture.h"
#include "common/dp_math.h"

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
                       .rho = DP_NAN};
    ledger_silo_view v;
    char tok[LEDGER_TOKEN_BUF];
    assert_int_equal(ledger_silo_create(f->l, "p", &b, &v, tok, &e), DP_OK);
    acct_event *g = acct_event_gaussian(2.385);
    ledger_charge_req req = {.silo_id = v.id,
                             .event = g,
                             .event_json = "{\"noise_multiplier\":2.385,\"type\":\"gaussian\"}"};
    ledger_charge_result res;
    op_item *it = calloc(1, sizeof *it);
    assert_non_null(it);
    it->res = &res;
    assert_int_equal(lg_item_prepare(f->l, &req, "charge", it, &e), DP_OK);
    assert_int_equal(lg_pld_prepare(f->l, it, &e), DP_OK); /* snapshot at delta 1e-5 */
    assert_true(it->pld_ready);
    ledger_patch p = {.name = NULL, .epsilon = DP_NAN, .delta = 1e-8, .rho = DP_NAN};
    assert_int_equal(ledger_silo_patch(f->l, v.id, &p, &v, &e), DP_OK);
    ledger_op op = {.kind = OP_CHARGE, .items = it, .n_items = 1};
    lg_submit(f->l, &op);
    /* The figure at 1e-5 was refused; the PLD thread recomputed it at 1e-8 and the op charged. */
    assert_int_equal(op.rc, DP_OK);
    assert_true(op.pld_attempts >= 1);
    assert_true(it->snap_delta == 1e-8);
    ledger_silo_view now;
    assert_int_equal(ledger_silo_get(f->l, f->conn, v.id, &now, &e), DP_OK);
    assert_int_equal(now.n_charges, 1);
    /* The normal path computes at the new delta and charges. */
    dp_err_clear(&e);
    assert_int_equal(ledger_charge(f->l, &req, false, &res, &e), DP_OK);
    acct_pld_opts o;
    acct_pld_opts_default(&o);
    acct_pld_result r;
    acct_event *two = acct_event_self_composed(2, acct_event_clone(g)); /* both charges */
    assert_non_null(two);
    assert_int_equal(acct_pld_epsilon(two, ACCT_NB_ADD_REMOVE, 1e-8, &o, &r, &e), DP_OK);
    assert_true(res.spent_eps_after <= r.epsilon_upper * (1 + 1e-9));
    acct_event_free(two);
    free(it->own_json);
    free(it);
    acct_event_free(g);
}

typedef struct wake_rec {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool woken;
    pthread_t by; /* the thread that called wake */
} wake_rec;

static void wake_rec_wake(void *arg)
{
    wake_rec *w = arg;
    pthread_mutex_lock(&w->mu);
    w->woken = true;
    w->by = pthread_self();
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* D9: a deferred charge of a PLD silo is woken only once its PLD figures were computed off the
 * caller's thread (by the ledger's PLD thread) and the op committed: ledger_pending_finish, which
 * the HTTP thread runs on resume, has nothing left to compute. Before the fix the committer woke
 * the caller with need_pld set and the resume recomposed the silo's log on the HTTP thread. */
static void pld_charges_are_composed_off_the_caller_thread(void **state)
{
    ledger_fixture *f = *state;
    dp_err e;
    dp_err_clear(&e);
    ledger_budget b = {.kind = LEDGER_BUDGET_EPS_DELTA,
                       .accountant = LEDGER_ACCT_PLD,
                       .conversion = ACCT_CONV_BALLE2020,
                       .epsilon = 4.0,
                       .delta = 1e-5,
                       .rho = DP_NAN};
    ledger_silo_view v;
    char tok[LEDGER_TOKEN_BUF];
    assert_int_equal(ledger_silo_create(f->l, "p", &b, &v, tok, &e), DP_OK);
    acct_event *g = acct_event_gaussian(8);
    ledger_charge_req req = {.silo_id = v.id,
                             .event = g,
                             .event_json = "{\"noise_multiplier\":8,\"type\":\"gaussian\"}"};
    for (int k = 0; k < 3; k++) {
        wake_rec w = {.woken = false};
        pthread_mutex_init(&w.mu, NULL);
        pthread_cond_init(&w.cv, NULL);
        ledger_charge_result res;
        ledger_pending *p = NULL;
        assert_int_equal(
            ledger_charge_start(f->l, &req, 1, NULL, false, false, &res, wake_rec_wake, &w, &p, &e),
            DP_OK);
        pthread_mutex_lock(&w.mu);
        while (!w.woken)
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        assert_false(pthread_equal(w.by, pthread_self()));
        /* woken: the op is done, with PLD figures, and nothing is left for the caller */
        assert_true(p->op.done);
        assert_false(p->op.need_pld);
        assert_true(p->items[0].pld_ready);
        assert_true(p->op.pld_attempts >= 1);
        assert_int_equal(ledger_pending_finish(p, &e), DP_OK);
        assert_int_equal(res.seq, k + 1);
        pthread_cond_destroy(&w.cv);
        pthread_mutex_destroy(&w.mu);
    }
    acct_event_free(g);
}

/* The committer's idle sweep (lg_idle_sweep, db/writer's idle hook): with no op at all, an overdue
 * claim's row becomes 'expired' in the database (reads would compute it anyway; the sweep makes the
 * stored state true). Before the writer extraction the committer ran the sweep itself. */
static void idle_sweep_marks_overdue_claims_expired(void **state)
{
    ledger_fixture *f = *state;
    dp_err e;
    dp_err_clear(&e);
    ledger_budget b = {.kind = LEDGER_BUDGET_EPS_DELTA,
                       .accountant = LEDGER_ACCT_RDP,
                       .conversion = ACCT_CONV_BALLE2020,
                       .epsilon = 4.0,
                       .delta = 1e-5,
                       .rho = DP_NAN};
    ledger_silo_view v;
    char tok[LEDGER_TOKEN_BUF];
    assert_int_equal(ledger_silo_create(f->l, "sweep", &b, &v, tok, &e), DP_OK);
    acct_event *g = acct_event_alloc(ACCT_EV_GAUSSIAN);
    g->noise_multiplier = 8;
    ledger_charge_req req = {.silo_id = v.id, .event = g};
    ledger_claim_view c;
    assert_int_equal(ledger_claim_create(f->l, &req, 1, &c, NULL, &e), DP_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(
        sqlite3_prepare_v2(f->db, "SELECT state FROM claims WHERE id = ?", -1, &st, NULL),
        SQLITE_OK);
    assert_int_equal(sqlite3_bind_int64(st, 1, c.id), SQLITE_OK);
    char seen[16] = "";
    /* The sweep runs after LEDGER_SWEEP_MS without an op: wait for it (bounded; not a timing
     * assertion). */
    for (int i = 0; i < 1000 && strcmp(seen, "expired") != 0; i++) {
        if (sqlite3_step(st) == SQLITE_ROW)
            snprintf(seen, sizeof seen, "%s", (const char *)sqlite3_column_text(st, 0));
        sqlite3_reset(st);
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    sqlite3_finalize(st);
    assert_string_equal(seen, "expired");
    acct_event_free(g);
}

int main(void)
{
    dp_log_set_level(DP_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(pld_snapshot_at_another_delta_is_stale, setup, teardown),
        cmocka_unit_test_setup_teardown(pld_charges_are_composed_off_the_caller_thread, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(idle_sweep_marks_overdue_claims_expired, setup, teardown),
    };
    return cmocka_run_group_tests_name("service_ledger_internal", tests, NULL, NULL);
}
