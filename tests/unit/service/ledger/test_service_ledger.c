/*
 * Unit tests for service/ledger: every ledger rule of issue #5 against a database in a temporary
 * file (never :memory:, where WAL behaves differently), with the real migrations applied.
 *
 * Expected privacy figures are computed independently of the ledger's cached sums: the k-th
 * admitted charge of a mechanism M must leave eps equal to acct_rdp_epsilon of self_composed(k, M)
 * on the same grid and conversion, and the cap is set half-way between eps(N) and eps(N+1) so
 * exactly N fit.
 */
#include "tests/support/test_util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "accounting/pld.h"
#include "accounting/rdp.h"
#include "common/dp_math.h"
#include "common/dp_log.h"
#include "common/dp_alloc.h"
#include "service/codec/event_json.h"
#include "service/ledger/ledger.h"
#include "tests/support/ledger_fixture.h"

typedef struct fx {
    ledger_fixture f;
} fx;

static int setup(void **state)
{
    fx *x = calloc(1, sizeof *x);
    if (x == NULL || ledger_fixture_open(&x->f) != 0)
        return -1;
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    fx *x = *state;
    ledger_fixture_close(&x->f);
    free(x);
    return 0;
}

static ledger_budget eps_budget(double eps, double delta)
{
    ledger_budget b = {.kind = LEDGER_BUDGET_EPS_DELTA,
                       .accountant = LEDGER_ACCT_RDP,
                       .conversion = ACCT_CONV_BALLE2020,
                       .epsilon = eps,
                       .delta = delta,
                       .rho = DP_NAN};
    return b;
}

/* A zCDP budget of rho (the other fields as a designated initializer leaves them). */
static ledger_budget rho_budget(double rho)
{
    ledger_budget b = {.kind = LEDGER_BUDGET_RHO,
                       .accountant = LEDGER_ACCT_ZCDP,
                       .conversion = ACCT_CONV_BALLE2020,
                       .rho = rho,
                       .delta = DP_NAN};
    return b;
}

static int64_t make_silo(fx *x, const char *name, ledger_budget b, char token[LEDGER_TOKEN_BUF])
{
    ledger_silo_view v;
    dp_err e;
    dp_err_clear(&e);
    char tok[LEDGER_TOKEN_BUF];
    assert_int_equal(ledger_silo_create(x->f.l, name, &b, &v, token ? token : tok, &e), DP_OK);
    return v.id;
}

static ledger_charge_req req_of(int64_t silo, const acct_event *ev, const char *json,
                                const char *key)
{
    ledger_charge_req r = {.silo_id = silo,
                           .event = ev,
                           .neighboring = ACCT_NB_ADD_REMOVE,
                           .event_json = json,
                           .idempotency_key = key};
    return r;
}

/* eps after k charges of ev, computed without the ledger. */
static double eps_after_k(const acct_event *ev, uint64_t k, double delta)
{
    acct_event *sc = acct_event_self_composed(k, acct_event_clone(ev));
    assert_non_null(sc);
    acct_rdp_answer a;
    dp_err e;
    dp_err_clear(&e);
    const double *orders;
    size_t n = acct_rdp_default_orders(&orders);
    assert_int_equal(
        acct_rdp_epsilon(sc, ACCT_NB_ADD_REMOVE, delta, ACCT_CONV_BALLE2020, orders, n, &a, &e),
        DP_OK);
    acct_event_free(sc);
    return a.value;
}

static void sum_up_never_rounds_down(void **state)
{
    (void)state;
    assert_true(ledger_sum_up(1.0, 2.0) == 3.0); /* exact sums stay exact */
    double tiny = ldexp(1.0, -60);
    assert_true(ledger_sum_up(1.0, tiny) == nextafter(1.0, 2.0)); /* 1 + 2^-60 rounds up */
    assert_true(ledger_sum_up(0.1, 0.2) == 0.1 + 0.2);            /* nearest is already above */
    assert_true(isinf(ledger_sum_up(DP_INF, 1.5)));
}

static void token_is_returned_once_and_resolves_to_its_silo(void **state)
{
    fx *x = *state;
    char t1[LEDGER_TOKEN_BUF], t2[LEDGER_TOKEN_BUF];
    int64_t a = make_silo(x, "hospital-a", eps_budget(3.0, 1e-5), t1);
    int64_t b = make_silo(x, "hospital-b", eps_budget(3.0, 1e-5), t2);
    assert_int_equal(strlen(t1), 68);
    assert_memory_equal(t1, "dps_", 4);
    assert_string_not_equal(t1, t2);
    ledger_principal p;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_token_lookup(x->f.conn, t1, &p, &e), DP_OK);
    assert_int_equal(p.role, LEDGER_ROLE_SILO);
    assert_int_equal(p.silo_id, a);
    assert_int_equal(ledger_token_lookup(x->f.conn, t2, &p, &e), DP_OK);
    assert_int_equal(p.silo_id, b);
    dp_err_clear(&e);
    assert_int_equal(ledger_token_lookup(x->f.conn, "dps_not-a-token", &p, &e), DP_EUNAUTH);
    /* Only the hash is stored: the token text appears nowhere in the database. */
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(x->f.db,
                                        "SELECT count(*) FROM tokens WHERE hash = :t OR "
                                        "CAST(hash AS TEXT) = :t",
                                        -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(st, 1, t1, -1, SQLITE_STATIC);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 0);
    sqlite3_finalize(st);
    /* The admin token registers idempotently and never collides with silos. */
    int64_t id1 = 0, id2 = 0;
    assert_int_equal(ledger_token_register_admin(x->f.l, "admin-token-2.385-abcdef", &id1, &e),
                     DP_OK);
    assert_int_equal(ledger_token_register_admin(x->f.l, "admin-token-2.385-abcdef", &id2, &e),
                     DP_OK);
    assert_true(id1 > 0 && id1 == id2);
    assert_int_equal(ledger_token_lookup(x->f.conn, "admin-token-2.385-abcdef", &p, &e), DP_OK);
    assert_int_equal(p.role, LEDGER_ROLE_ADMIN);
}

static void exactly_the_admissible_charges_are_accepted(void **state)
{
    fx *x = *state;
    acct_event *g = acct_event_gaussian(3.7);
    const double delta = 1e-6;
    const uint64_t N = 7;
    double e7 = eps_after_k(g, N, delta), e8 = eps_after_k(g, N + 1, delta);
    assert_true(e7 < e8);
    int64_t s = make_silo(x, "bank", eps_budget(0.5 * (e7 + e8), delta), NULL);
    ledger_charge_req r = req_of(s, g, "{\"noise_multiplier\":3.7,\"type\":\"gaussian\"}", NULL);
    size_t ok = 0, refused = 0;
    for (int i = 0; i < 10; i++) {
        ledger_charge_result res;
        dp_err e;
        dp_err_clear(&e);
        int rc = ledger_charge(x->f.l, &r, false, &res, &e);
        if (rc == DP_OK) {
            ok++;
            assert_int_equal(res.seq, (int64_t)ok);
            assert_close(res.spent_eps_after, eps_after_k(g, ok, delta), 1e-12, 0);
        } else {
            assert_int_equal(rc, DP_EBUDGET);
            assert_int_equal(res.status, DP_EBUDGET);
            refused++;
            assert_close(res.spent, e7, 1e-12, 0);
            assert_close(res.would_be, e8, 1e-12, 0);
            assert_true(res.would_be > res.budget);
            assert_close(res.requested, eps_after_k(g, 1, delta), 1e-12, 0);
            assert_int_equal(res.charge_id, 0);
        }
    }
    assert_int_equal(ok, N);
    assert_int_equal(refused, 3);
    ledger_silo_view v;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_get(x->f.l, x->f.conn, s, &v, &e), DP_OK);
    assert_int_equal(v.n_charges, (int64_t)N);
    assert_close(v.spent_eps, e7, 1e-12, 0);
    assert_close(v.remaining, v.budget.epsilon - e7, 1e-12, 1e-15);
    assert_true(v.spent_order > 1);
    ledger_verify ver;
    assert_int_equal(ledger_silo_verify(x->f.l, x->f.conn, s, &ver, &e), DP_OK);
    assert_true(ver.consistent);
    assert_int_equal(ver.n_charges_log, (int64_t)N);
    acct_event_free(g);
}

static void a_budget_of_zero_admits_nothing_and_an_exact_fit_is_admitted(void **state)
{
    fx *x = *state;
    acct_event *z = acct_event_zcdp(0.25);
    ledger_budget b = rho_budget(0.0);
    int64_t s0 = make_silo(x, "zero", b, NULL);
    b.rho = 0.75; /* 0.25 + 0.25 + 0.25 = 0.75 exactly in binary: the third charge fits exactly */
    int64_t s1 = make_silo(x, "exact", b, NULL);
    ledger_charge_result res;
    dp_err e;
    dp_err_clear(&e);
    ledger_charge_req r = req_of(s0, z, "{\"rho\":0.25,\"type\":\"zcdp\"}", NULL);
    assert_int_equal(ledger_charge(x->f.l, &r, false, &res, &e), DP_EBUDGET);
    r.silo_id = s1;
    for (int i = 0; i < 3; i++) {
        dp_err_clear(&e);
        assert_int_equal(ledger_charge(x->f.l, &r, false, &res, &e), DP_OK);
    }
    assert_close(res.spent_rho_after, 0.75, 0, 0);
    assert_close(res.remaining_after, 0.0, 0, 0);
    dp_err_clear(&e);
    assert_int_equal(ledger_charge(x->f.l, &r, false, &res, &e), DP_EBUDGET);
    assert_close(res.would_be, 1.0, 0, 0);
    assert_close(res.budget, 0.75, 0, 0);
    acct_event_free(z);
}

static void retries_with_one_key_charge_once(void **state)
{
    fx *x = *state;
    acct_event *g = acct_event_gaussian(2.385);
    int64_t s = make_silo(x, "clinic", eps_budget(10, 1e-5), NULL);
    ledger_charge_req r =
        req_of(s, g, "{\"noise_multiplier\":2.385,\"type\":\"gaussian\"}", "round-1");
    r.reason = "round 1 of job 9";
    r.job_id = 9;
    ledger_charge_result a, b;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_charge(x->f.l, &r, false, &a, &e), DP_OK);
    assert_false(a.replayed);
    assert_int_equal(ledger_charge(x->f.l, &r, false, &b, &e), DP_OK);
    assert_true(b.replayed);
    assert_int_equal(b.charge_id, a.charge_id);
    assert_int_equal(b.seq, a.seq);
    assert_int_equal(b.created_at_ms, a.created_at_ms);
    assert_close(b.spent_eps_after, a.spent_eps_after, 0, 0);
    assert_close(b.remaining_after, a.remaining_after, 0, 0);
    ledger_silo_view v;
    assert_int_equal(ledger_silo_get(x->f.l, x->f.conn, s, &v, &e), DP_OK);
    assert_int_equal(v.n_charges, 1);
    /* The same key with another body is a conflict, never a second charge. */
    g->noise_multiplier = 1.5;
    ledger_charge_req r2 =
        req_of(s, g, "{\"noise_multiplier\":1.5,\"type\":\"gaussian\"}", "round-1");
    dp_err_clear(&e);
    assert_int_equal(ledger_charge(x->f.l, &r2, false, &b, &e), DP_ECONFLICT);
    assert_string_equal(e.field, "idempotency_key");
    assert_int_equal(ledger_silo_get(x->f.l, x->f.conn, s, &v, &e), DP_OK);
    assert_int_equal(v.n_charges, 1);
    acct_event_free(g);
}

static void batch_is_all_or_nothing(void **state)
{
    fx *x = *state;
    acct_event *z = acct_event_zcdp(0.4);
    ledger_budget b = rho_budget(5.0);
    int64_t s[3];
    s[0] = make_silo(x, "a", b, NULL);
    b.rho = 0.5;
    s[1] = make_silo(x, "b", b, NULL);
    b.rho = 5.0;
    s[2] = make_silo(x, "c", b, NULL);
    const char *js = "{\"rho\":0.4,\"type\":\"zcdp\"}";
    ledger_charge_req r[3] = {req_of(s[0], z, js, "r1"), req_of(s[1], z, js, "r1"),
                              req_of(s[2], z, js, "r1")};
    ledger_charge_result out[3];
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_charge_batch(x->f.l, r, 3, false, out, &e), DP_OK); /* 0.4 each */
    for (int i = 0; i < 3; i++)
        assert_true(out[i].charge_id > 0);
    r[0].idempotency_key = r[1].idempotency_key = r[2].idempotency_key = "r2";
    dp_err_clear(&e);
    assert_int_equal(ledger_charge_batch(x->f.l, r, 3, false, out, &e),
                     DP_EBUDGET); /* b: 0.8 > 0.5 */
    assert_string_equal(e.field, "charges[1]");
    assert_int_equal(out[1].status, DP_EBUDGET);
    assert_close(out[1].would_be, ledger_sum_up(0.4, 0.4), 0, 0);
    for (int i = 0; i < 3; i++) {
        ledger_silo_view v;
        assert_int_equal(ledger_silo_get(x->f.l, x->f.conn, s[i], &v, &e), DP_OK);
        assert_int_equal(v.n_charges, 1); /* nobody was charged by the refused batch */
        assert_int_equal(out[i].charge_id, 0);
    }
    /* A silo twice in one batch, or a missing silo, is refused up front. */
    r[2].silo_id = s[0];
    dp_err_clear(&e);
    assert_int_equal(ledger_charge_batch(x->f.l, r, 3, false, out, &e), DP_EINVAL);
    assert_string_equal(e.field, "charges[2].silo_id");
    r[2].silo_id = 999999;
    r[1].silo_id = s[2];
    dp_err_clear(&e);
    assert_int_equal(ledger_charge_batch(x->f.l, r, 3, false, out, &e), DP_ENOTFOUND);
    assert_string_equal(e.field, "charges[2].silo_id");
    acct_event_free(z);
}

static void dry_run_writes_nothing(void **state)
{
    fx *x = *state;
    acct_event *g = acct_event_gaussian(4.0);
    int64_t s = make_silo(x, "d", eps_budget(2, 1e-5), NULL);
    ledger_charge_req r = req_of(s, g, "{\"noise_multiplier\":4,\"type\":\"gaussian\"}", "k");
    ledger_charge_result res;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_charge(x->f.l, &r, true, &res, &e), DP_OK);
    assert_true(res.dry_run);
    assert_int_equal(res.charge_id, 0);
    assert_close(res.spent_eps_after, eps_after_k(g, 1, 1e-5), 1e-12, 0);
    ledger_silo_view v;
    assert_int_equal(ledger_silo_get(x->f.l, x->f.conn, s, &v, &e), DP_OK);
    assert_int_equal(v.n_charges, 0);
    /* The key was not consumed: a real charge with it now lands. */
    assert_int_equal(ledger_charge(x->f.l, &r, false, &res, &e), DP_OK);
    assert_false(res.replayed);
    acct_event_free(g);
}

static void zcdp_silo_refuses_events_without_a_zcdp_bound(void **state)
{
    fx *x = *state;
    acct_event *p = acct_event_poisson(0.01, acct_event_gaussian(1.1));
    ledger_budget b = eps_budget(3, 1e-5);
    b.accountant = LEDGER_ACCT_ZCDP;
    int64_t s = make_silo(x, "z", b, NULL);
    ledger_charge_req r = req_of(s, p, "{}", NULL);
    ledger_charge_result res;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_charge(x->f.l, &r, false, &res, &e), DP_ENUMERIC);
    assert_string_equal(e.field, "event");
    /* An eps budget accounted by zCDP converts rho*alpha: a Gaussian of rho = 1/(2*4^2) costs the
     * same as the RDP Gaussian curve alpha/(2 sigma^2). */
    acct_event *g = acct_event_gaussian(4.0);
    r.event = g;
    dp_err_clear(&e);
    assert_int_equal(ledger_charge(x->f.l, &r, false, &res, &e), DP_OK);
    assert_close(res.spent_rho_after, 1.0 / 32, 1e-15, 0);
    assert_close(res.spent_eps_after, eps_after_k(g, 1, 1e-5), 1e-12, 0);
    acct_event_free(g);
    acct_event_free(p);
}

static void opted_out_silo_records_and_never_refuses(void **state)
{
    fx *x = *state;
    acct_event *pure = acct_event_pure(50.0);
    ledger_budget b = {.kind = LEDGER_BUDGET_NONE,
                       .accountant = LEDGER_ACCT_NONE,
                       .conversion = ACCT_CONV_BALLE2020,
                       .epsilon = DP_NAN,
                       .delta = DP_NAN,
                       .rho = DP_NAN};
    int64_t s = make_silo(x, "opt-out", b, NULL);
    ledger_charge_req r = req_of(s, pure, "{\"epsilon\":50,\"type\":\"pure\"}", NULL);
    for (int i = 0; i < 5; i++) {
        ledger_charge_result res;
        dp_err e;
        dp_err_clear(&e);
        assert_int_equal(ledger_charge(x->f.l, &r, false, &res, &e), DP_OK);
        assert_true(isnan(res.remaining_after));
    }
    ledger_silo_view v;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_get(x->f.l, x->f.conn, s, &v, &e), DP_OK);
    assert_int_equal(v.n_charges, 5);
    assert_true(isnan(v.spent_eps) && isnan(v.remaining));
    assert_close(v.spent_rho, 5 * 50.0 * 50.0 / 2, 1e-15, 0);
    acct_event_free(pure);
}

static void claims_hold_commit_abort_and_expire(void **state)
{
    fx *x = *state;
    acct_event *z = acct_event_zcdp(0.625); /* dyadic costs: the sums below are exact in binary */
    ledger_budget b = rho_budget(1.0);
    int64_t s = make_silo(x, "claims", b, NULL);
    const char *js = "{\"rho\":0.625,\"type\":\"zcdp\"}";
    ledger_charge_req r = req_of(s, z, js, NULL);
    ledger_claim_view c;
    ledger_charge_result fig, res;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_claim_create(x->f.l, &r, 60000, &c, &fig, &e), DP_OK);
    assert_int_equal(c.state, LEDGER_CLAIM_ACTIVE);
    /* Reserved budget counts as spent: 0.625 held + 0.625 > 1. */
    assert_int_equal(ledger_charge(x->f.l, &r, false, &res, &e), DP_EBUDGET);
    assert_close(res.reserved, 0.625, 0, 0);
    ledger_silo_view v;
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_get(x->f.l, x->f.conn, s, &v, &e), DP_OK);
    assert_int_equal(v.n_active_claims, 1);
    assert_close(v.held_rho, 0.625, 0, 0);
    assert_close(v.remaining, 0.375, 0, 0);
    /* Abort releases; a charge then fits. */
    assert_int_equal(ledger_claim_abort(x->f.l, c.id, 0, &c, &e), DP_OK);
    assert_int_equal(c.state, LEDGER_CLAIM_ABORTED);
    assert_int_equal(ledger_claim_commit(x->f.l, c.id, 0, 0, &c, &res, &e), DP_ECONFLICT);
    dp_err_clear(&e);
    assert_int_equal(ledger_charge(x->f.l, &r, false, &res, &e), DP_OK);
    /* A claim that does not fit is refused with figures. */
    z->rho = 0.25;
    ledger_claim_view c2;
    assert_int_equal(ledger_claim_create(x->f.l, &r, 60000, &c2, &fig, &e), DP_OK);
    assert_int_equal(ledger_claim_create(x->f.l, &r, 60000, &c, &fig, &e), DP_EBUDGET);
    assert_close(fig.would_be, 1.125, 0, 0);
    /* Commit spends: one more charge, with the claim's cost, and the claim's scope is enforced. */
    dp_err_clear(&e);
    assert_int_equal(ledger_claim_commit(x->f.l, c2.id, s + 1000, 0, &c, &res, &e), DP_EFORBIDDEN);
    dp_err_clear(&e);
    assert_int_equal(ledger_claim_commit(x->f.l, c2.id, s, 0, &c, &res, &e), DP_OK);
    assert_int_equal(c.state, LEDGER_CLAIM_COMMITTED);
    assert_int_equal(res.seq, 2);
    assert_close(res.spent_rho_after, 0.875, 0, 0);
    int64_t charge = res.charge_id;
    assert_int_equal(ledger_claim_commit(x->f.l, c2.id, s, 0, &c, &res, &e), DP_OK); /* replay */
    assert_true(c.replayed);
    assert_int_equal(res.charge_id, charge);
    assert_int_equal(ledger_claim_abort(x->f.l, c2.id, 0, &c, &e), DP_ECONFLICT);
    /* Expiry releases: a 1 ms claim stops counting once it has expired, and cannot be committed. */
    z->rho = 0.125;
    dp_err_clear(&e);
    assert_int_equal(ledger_claim_create(x->f.l, &r, 1, &c, &fig, &e), DP_OK);
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
    assert_int_equal(ledger_charge(x->f.l, &r, false, &res, &e),
                     DP_OK); /* 0.875 + 0.125 = 1 fits exactly */
    assert_true(
        isnan(res.reserved)); /* accepted with no active claim: not computed (ledger/ledger.h) */
    ledger_silo_view vv;
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_get(x->f.l, x->f.conn, s, &vv, &e), DP_OK);
    assert_int_equal(vv.n_active_claims, 0); /* the 1 ms claim no longer holds anything */
    assert_int_equal(ledger_claim_commit(x->f.l, c.id, 0, 0, &c2, &res, &e), DP_ECONFLICT);
    ledger_claim_view g;
    dp_err_clear(&e);
    assert_int_equal(ledger_claim_get(x->f.conn, c.id, &g, &e), DP_OK);
    assert_int_equal(g.state, LEDGER_CLAIM_EXPIRED);
    ledger_verify ver;
    assert_int_equal(ledger_silo_verify(x->f.l, x->f.conn, s, &ver, &e), DP_OK);
    assert_true(ver.consistent);
    assert_int_equal(ver.n_charges_log, 3);
    acct_event_free(z);
}

static void lowering_a_budget_below_spent_is_refused(void **state)
{
    fx *x = *state;
    acct_event *g = acct_event_gaussian(2.0);
    int64_t s = make_silo(x, "p", eps_budget(5, 1e-5), NULL);
    ledger_charge_req r = req_of(s, g, "{}", NULL);
    ledger_charge_result res;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_charge(x->f.l, &r, false, &res, &e), DP_OK);
    double spent = res.spent_eps_after;
    ledger_patch p = {.name = NULL, .epsilon = spent * 0.99, .delta = DP_NAN, .rho = DP_NAN};
    ledger_silo_view v;
    assert_int_equal(ledger_silo_patch(x->f.l, s, &p, &v, &e), DP_ECONFLICT);
    assert_string_equal(e.field, "budget.epsilon");
    p.epsilon = spent * 1.01;
    p.name = "renamed";
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_patch(x->f.l, s, &p, &v, &e), DP_OK);
    assert_string_equal(v.name, "renamed");
    assert_close(v.budget.epsilon, spent * 1.01, 0, 0);
    /* Tightening delta raises the spent epsilon: refused when it would exceed the cap. */
    ledger_patch p2 = {.name = NULL, .epsilon = DP_NAN, .delta = 1e-12, .rho = DP_NAN};
    assert_int_equal(ledger_silo_patch(x->f.l, s, &p2, &v, &e), DP_ECONFLICT);
    /* Raising works; the kind cannot change. */
    ledger_patch p3 = {.name = NULL, .epsilon = 8, .delta = DP_NAN, .rho = 1.0};
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_patch(x->f.l, s, &p3, &v, &e), DP_EINVAL);
    assert_string_equal(e.field, "budget.rho");
    p3.rho = DP_NAN;
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_patch(x->f.l, s, &p3, &v, &e), DP_OK);
    assert_close(v.remaining, 8 - spent, 1e-12, 0);
    acct_event_free(g);
}

static void archived_silo_keeps_its_log_and_takes_no_charges(void **state)
{
    fx *x = *state;
    acct_event *g = acct_event_gaussian(5.0);
    int64_t s = make_silo(x, "old", eps_budget(5, 1e-5), NULL);
    ledger_charge_req r = req_of(s, g, "{\"noise_multiplier\":5,\"type\":\"gaussian\"}", NULL);
    ledger_charge_result res;
    ledger_claim_view c;
    ledger_charge_req keyed = r;
    keyed.idempotency_key = "before-archive";
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_charge(x->f.l, &r, false, &res, &e), DP_OK);
    assert_int_equal(ledger_charge(x->f.l, &keyed, false, &res, &e), DP_OK);
    int64_t keyed_id = res.charge_id;
    assert_int_equal(ledger_claim_create(x->f.l, &r, 60000, &c, NULL, &e), DP_OK);
    ledger_claim_view kc;
    assert_int_equal(ledger_claim_create(x->f.l, &keyed, 60000, &kc, NULL, &e), DP_OK);
    ledger_silo_view v;
    assert_int_equal(ledger_silo_archive(x->f.l, s, &v, &e), DP_OK);
    assert_true(v.archived_at_ms > 0);
    assert_int_equal(v.n_active_claims, 0); /* its claims were released */
    assert_int_equal(ledger_silo_archive(x->f.l, s, &v, &e), DP_OK);
    assert_int_equal(ledger_charge(x->f.l, &r, false, &res, &e), DP_ECONFLICT);
    dp_err_clear(&e); /* a retry of a charge acknowledged before the archive: its first answer */
    assert_int_equal(ledger_charge(x->f.l, &keyed, false, &res, &e), DP_OK);
    assert_true(res.replayed);
    assert_int_equal(res.charge_id, keyed_id);
    ledger_claim_view kc2; /* a retried claim gets its claim back: aborted by the archive */
    assert_int_equal(ledger_claim_create(x->f.l, &keyed, 60000, &kc2, NULL, &e), DP_OK);
    assert_true(kc2.replayed);
    assert_int_equal(kc2.id, kc.id);
    assert_int_equal(kc2.state, LEDGER_CLAIM_ABORTED);
    dp_err_clear(&e);
    assert_int_equal(ledger_claim_commit(x->f.l, c.id, 0, 0, &c, &res, &e), DP_ECONFLICT);
    ledger_charge_row *rows = NULL;
    size_t n = 0;
    ledger_charge_filter f = {
        .after = 0, .limit = 10, .since_ms = INT64_MIN, .until_ms = INT64_MAX};
    dp_err_clear(&e);
    assert_int_equal(ledger_charges_list(x->f.conn, s, &f, &rows, &n, &e), DP_OK);
    assert_int_equal(n, 2);
    assert_string_equal(rows[0].event, "{\"noise_multiplier\":5,\"type\":\"gaussian\"}");
    ledger_charge_rows_free(rows, n);
    ledger_silo_view *vs = NULL;
    assert_int_equal(ledger_silo_list(x->f.l, x->f.conn, 0, 10, false, &vs, &n, &e), DP_OK);
    for (size_t i = 0; i < n; i++)
        assert_true(vs[i].id != s);
    ledger_views_free(vs);
    assert_int_equal(ledger_silo_list(x->f.l, x->f.conn, 0, 10, true, &vs, &n, &e), DP_OK);
    assert_int_equal(n, 1);
    ledger_views_free(vs);
    acct_event_free(g);
}

/* After a refused statement on db: the refusal came from the schema (extended code ext, e.g.
 * SQLITE_CONSTRAINT_TRIGGER for a RAISE(ABORT) trigger) with a message containing msg, and not from
 * some other error (a syntax error, a renamed column, a new NOT NULL column). */
static void assert_refused_by(sqlite3 *db, int ext, const char *msg)
{
    const char *got = sqlite3_errmsg(db);
    if (sqlite3_extended_errcode(db) != ext || strstr(got, msg) == NULL)
        fail_msg("refused with extended code %d \"%s\"; expected %d \"%s\"",
                 sqlite3_extended_errcode(db), got, ext, msg);
}

static void the_log_is_append_only(void **state)
{
    fx *x = *state;
    acct_event *g = acct_event_gaussian(5.0);
    int64_t s = make_silo(x, "log", eps_budget(5, 1e-5), NULL);
    ledger_charge_req r = req_of(s, g, "{}", NULL);
    ledger_charge_result res;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_charge(x->f.l, &r, false, &res, &e), DP_OK);
    assert_int_not_equal(sqlite3_exec(x->f.db, "UPDATE charges SET cost_rho = 0", NULL, NULL, NULL),
                         SQLITE_OK);
    assert_refused_by(x->f.db, SQLITE_CONSTRAINT_TRIGGER, "charges are append-only");
    assert_int_not_equal(sqlite3_exec(x->f.db, "DELETE FROM charges", NULL, NULL, NULL), SQLITE_OK);
    assert_refused_by(x->f.db, SQLITE_CONSTRAINT_TRIGGER, "charges are append-only");
    assert_int_not_equal(sqlite3_exec(x->f.db, "DELETE FROM silos", NULL, NULL, NULL), SQLITE_OK);
    assert_refused_by(x->f.db, SQLITE_CONSTRAINT_TRIGGER, "silos are archived, never deleted");
    /* A negative cost is refused by the schema itself. */
    assert_int_not_equal(
        sqlite3_exec(x->f.db,
                     "INSERT INTO charges (silo_id, created_at, request_hash, event, "
                     "neighboring, cost_rdp, cost_rho, seq, rho_after) VALUES (1, 0, "
                     "zeroblob(32), '{}', 'add_remove', x'00', -1, 99, 0)",
                     NULL, NULL, NULL),
        SQLITE_OK);
    assert_refused_by(x->f.db, SQLITE_CONSTRAINT_CHECK, "cost_rho >= 0");
    /* ... and by nothing else: the same row with a non-negative cost is accepted (inside a
     * transaction rolled back, so the log stays as the ledger wrote it). */
    assert_int_equal(sqlite3_exec(x->f.db, "SAVEPOINT probe", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_exec(x->f.db,
                                  "INSERT INTO charges (silo_id, created_at, request_hash, event, "
                                  "neighboring, cost_rdp, cost_rho, seq, rho_after) VALUES (1, 0, "
                                  "zeroblob(32), '{}', 'add_remove', x'00', 1, 99, 0)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_exec(x->f.db, "ROLLBACK TO probe; RELEASE probe", NULL, NULL, NULL),
                     SQLITE_OK);
    acct_event_free(g);
}

static void audit_log_filters_by_job_and_time_and_pages(void **state)
{
    fx *x = *state;
    acct_event *g = acct_event_gaussian(9.0);
    int64_t s = make_silo(x, "audit", eps_budget(50, 1e-5), NULL);
    int64_t t0 = 0;
    for (int i = 0; i < 6; i++) {
        ledger_charge_req r = req_of(s, g, "{}", NULL);
        r.job_id = i % 2 ? 7 : 8;
        r.actor_token_id = 0;
        r.reason = "epoch";
        ledger_charge_result res;
        dp_err e;
        dp_err_clear(&e);
        assert_int_equal(ledger_charge(x->f.l, &r, false, &res, &e), DP_OK);
        if (i == 3)
            t0 = res.created_at_ms;
    }
    ledger_charge_row *rows = NULL;
    size_t n = 0;
    dp_err e;
    dp_err_clear(&e);
    ledger_charge_filter f = {.after = 0, .limit = 4, .since_ms = INT64_MIN, .until_ms = INT64_MAX};
    assert_int_equal(ledger_charges_list(x->f.conn, s, &f, &rows, &n, &e), DP_OK);
    assert_int_equal(n, 4);
    int64_t last = rows[3].id;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(rows[i].seq, (int64_t)i + 1);
        assert_string_equal(rows[i].reason, "epoch");
        assert_true(rows[i].eps_after >= rows[i].cost_eps);
        if (i > 0)
            assert_true(rows[i].eps_after > rows[i - 1].eps_after);
    }
    ledger_charge_rows_free(rows, n);
    f.after = last;
    assert_int_equal(ledger_charges_list(x->f.conn, s, &f, &rows, &n, &e), DP_OK);
    assert_int_equal(n, 2);
    ledger_charge_rows_free(rows, n);
    f.after = 0;
    f.limit = 100;
    f.job_id = 7;
    assert_int_equal(ledger_charges_list(x->f.conn, s, &f, &rows, &n, &e), DP_OK);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(rows[i].job_id, 7);
    ledger_charge_rows_free(rows, n);
    f.job_id = 0;
    f.since_ms = t0;
    assert_int_equal(ledger_charges_list(x->f.conn, s, &f, &rows, &n, &e), DP_OK);
    assert_true(n >= 3);
    for (size_t i = 0; i < n; i++)
        assert_true(rows[i].created_at_ms >= t0);
    ledger_charge_rows_free(rows, n);
    acct_event_free(g);
}

/* eps_PLD (upper) of self_composed(k, ev), computed without the ledger. */
static double pld_after_k(const acct_event *ev, uint64_t k, double delta)
{
    acct_event *sc = acct_event_self_composed(k, acct_event_clone(ev));
    assert_non_null(sc);
    acct_pld_opts o;
    acct_pld_opts_default(&o);
    acct_pld_result r;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(acct_pld_epsilon(sc, ACCT_NB_ADD_REMOVE, delta, &o, &r, &e), DP_OK);
    acct_event_free(sc);
    return r.epsilon_upper;
}

static void pld_silo_admits_on_the_tighter_bound(void **state)
{
    fx *x = *state;
    /* One "epoch": 1000 steps of a Poisson-sampled Gaussian (q = 0.01, sigma = 1.1). */
    acct_event *epoch =
        acct_event_self_composed(1000, acct_event_poisson(0.01, acct_event_gaussian(1.1)));
    const char *js =
        "{\"count\":1000,\"event\":{\"event\":{\"noise_multiplier\":1.1,\"type\":\"gaussian\"},"
        "\"sampling_rate\":0.01,\"type\":\"poisson_sampled\"},\"type\":\"self_composed\"}";
    const double delta = 1e-5;
    double rdp3 = eps_after_k(epoch, 3, delta), pld3 = pld_after_k(epoch, 3, delta);
    double pld4 = pld_after_k(epoch, 4, delta);
    assert_true(pld3 < rdp3); /* PLD is the tighter accountant here */
    double cap = 0.5 * (pld3 + rdp3);
    assert_true(pld4 > cap);
    ledger_budget b = eps_budget(cap, delta);
    b.accountant = LEDGER_ACCT_PLD;
    int64_t s = make_silo(x, "pld", b, NULL);
    b.accountant = LEDGER_ACCT_RDP;
    int64_t r = make_silo(x, "rdp", b, NULL); /* the same cap accounted by RDP alone */
    ledger_charge_req q = req_of(s, epoch, js, NULL);
    ledger_charge_result res;
    dp_err e;
    for (uint64_t k = 1; k <= 3; k++) {
        dp_err_clear(&e);
        assert_int_equal(ledger_charge(x->f.l, &q, false, &res, &e), DP_OK);
        double want = fmin(eps_after_k(epoch, k, delta), pld_after_k(epoch, k, delta));
        assert_close(res.spent_eps_after, want, 1e-6, 0);
    }
    dp_err_clear(&e);
    assert_int_equal(ledger_charge(x->f.l, &q, false, &res, &e), DP_EBUDGET);
    assert_close(res.would_be, pld4, 1e-6, 0);
    /* The RDP silo refuses the third epoch that the PLD silo admitted. */
    q.silo_id = r;
    for (int k = 1; k <= 2; k++) {
        dp_err_clear(&e);
        assert_int_equal(ledger_charge(x->f.l, &q, false, &res, &e), DP_OK);
    }
    dp_err_clear(&e);
    assert_int_equal(ledger_charge(x->f.l, &q, false, &res, &e), DP_EBUDGET);
    assert_close(res.would_be, rdp3, 1e-12, 0);
    /* The view recomposes the log: spent = min(RDP, PLD) of three epochs; RDP sums stay verifiable.
     */
    ledger_silo_view v;
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_get(x->f.l, x->f.conn, s, &v, &e), DP_OK);
    assert_close(v.spent_eps, pld3, 1e-6, 0);
    assert_close(v.remaining, cap - v.spent_eps, 1e-9, 0);
    ledger_verify ver;
    assert_int_equal(ledger_silo_verify(x->f.l, x->f.conn, s, &ver, &e), DP_OK);
    assert_true(ver.consistent);
    acct_event_free(epoch);
}

static void c_callers_need_no_json(void **state)
{
    fx *x = *state;
    /* composed[self_composed(3, poisson_sampled(0.02, gaussian(1.3))), laplace(4.5)] from C only */
    acct_event *root = acct_event_composed(
        (acct_event *[]){
            acct_event_self_composed(3, acct_event_poisson(0.02, acct_event_gaussian(1.3))),
            acct_event_laplace(4.5)},
        2);
    assert_non_null(root);
    int64_t s = make_silo(x, "job", eps_budget(10, 1e-6), NULL);
    ledger_charge_req r = req_of(s, root, NULL, "round-1");
    ledger_charge_result res;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_charge_batch(x->f.l, &r, 1, false, &res, &e), DP_OK);
    assert_int_equal(ledger_charge_batch(x->f.l, &r, 1, false, &res, &e), DP_OK); /* a retry */
    assert_true(res.replayed);
    ledger_charge_row *rows = NULL;
    size_t n = 0;
    ledger_charge_filter f = {.limit = 10, .since_ms = INT64_MIN, .until_ms = INT64_MAX};
    assert_int_equal(ledger_charges_list(x->f.conn, s, &f, &rows, &n, &e), DP_OK);
    assert_int_equal(n, 1);
    assert_string_equal(
        rows[0].event,
        "{\"events\":[{\"count\":3,\"event\":{\"event\":{\"noise_multiplier\":1.3,"
        "\"type\":\"gaussian\"},\"sampling_rate\":0.02,\"type\":\"poisson_sampled\"},"
        "\"type\":\"self_composed\"},{\"noise_multiplier\":4.5,\"type\":\"laplace\"}],"
        "\"type\":\"composed\"}");
    /* ... and it parses back into a tree of the same cost. */
    json_t *j = json_loads(rows[0].event, 0, NULL);
    acct_event *back = NULL;
    assert_int_equal(event_json_parse(j, false, "event", &back, &e), DP_OK);
    json_decref(j);
    ledger_charge_rows_free(rows, n);
    const double *orders;
    size_t no = acct_rdp_default_orders(&orders);
    double a[256], b[256];
    assert_int_equal(acct_rdp_eval(root, ACCT_NB_ADD_REMOVE, orders, no, a, &e), DP_OK);
    assert_int_equal(acct_rdp_eval(back, ACCT_NB_ADD_REMOVE, orders, no, b, &e), DP_OK);
    for (size_t i = 0; i < no; i++)
        assert_close(b[i], a[i], 0, 0);
    acct_event_free(back);
    acct_event_free(root);
}

/* ---- concurrency: many threads, one silo that admits exactly N ---- */

typedef struct storm {
    ledger *l;
    int64_t silo;
    const acct_event *ev;
    int per_thread;
    int ok, refused, other;
} storm;

static void *storm_main(void *arg)
{
    storm *s = arg;
    for (int i = 0; i < s->per_thread; i++) {
        ledger_charge_req r = req_of(s->silo, s->ev, "{\"rho\":0.01,\"type\":\"zcdp\"}", NULL);
        ledger_charge_result res;
        dp_err e;
        dp_err_clear(&e);
        int rc = ledger_charge(s->l, &r, false, &res, &e);
        if (rc == DP_OK)
            s->ok++;
        else if (rc == DP_EBUDGET)
            s->refused++;
        else
            s->other++;
    }
    return NULL;
}

static void concurrent_charges_never_exceed_the_cap(void **state)
{
    fx *x = *state;
    acct_event *z = acct_event_zcdp(0.01);
    /* 137 charges of 0.01 sum to about 1.37; the cap 1.375 admits exactly 137 of the 1,600. */
    ledger_budget b = rho_budget(1.375);
    int64_t s = make_silo(x, "storm", b, NULL);
    enum { T = 32 };
    pthread_t th[T];
    storm st[T];
    for (int i = 0; i < T; i++) {
        st[i] = (storm){.l = x->f.l, .silo = s, .ev = z, .per_thread = 50};
        assert_int_equal(pthread_create(&th[i], NULL, storm_main, &st[i]), 0);
    }
    int ok = 0, refused = 0, other = 0;
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        ok += st[i].ok;
        refused += st[i].refused;
        other += st[i].other;
    }
    assert_int_equal(other, 0);
    assert_int_equal(ok, 137);
    assert_int_equal(refused, T * 50 - 137);
    ledger_verify v;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_verify(x->f.l, x->f.conn, s, &v, &e), DP_OK);
    assert_true(v.consistent);
    assert_int_equal(v.n_charges_log, 137);
    assert_true(v.spent_rho_log <= 1.375);
    acct_event_free(z);
}

static void bad_inputs_name_their_field(void **state)
{
    fx *x = *state;
    ledger_silo_view v;
    char tok[LEDGER_TOKEN_BUF];
    dp_err e;
    dp_err_clear(&e);
    ledger_budget b = eps_budget(-1, 1e-5);
    assert_int_equal(ledger_silo_create(x->f.l, "x", &b, &v, tok, &e), DP_EINVAL);
    assert_string_equal(e.field, "budget.epsilon");
    b = eps_budget(1, 1.0);
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_create(x->f.l, "x", &b, &v, tok, &e), DP_EINVAL);
    assert_string_equal(e.field, "budget.delta");
    b = eps_budget(1, 1e-5);
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_create(x->f.l, "", &b, &v, tok, &e), DP_EINVAL);
    assert_string_equal(e.field, "name");
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_get(x->f.l, x->f.conn, 4242, &v, &e), DP_ENOTFOUND);
    int64_t s = make_silo(x, "ok", b, NULL);
    acct_event *g = acct_event_gaussian(1.0);
    ledger_charge_req r = req_of(s, g, "{}", "");
    ledger_charge_result res;
    dp_err_clear(&e);
    assert_int_equal(ledger_charge(x->f.l, &r, false, &res, &e), DP_EINVAL);
    assert_string_equal(e.field, "idempotency_key");
    ledger_claim_view c;
    r.idempotency_key = NULL;
    dp_err_clear(&e);
    assert_int_equal(ledger_claim_create(x->f.l, &r, 0, &c, NULL, &e), DP_EINVAL);
    assert_string_equal(e.field, "timeout_ms");
    dp_err_clear(&e);
    assert_int_equal(ledger_claim_commit(x->f.l, 777, 0, 0, &c, &res, &e), DP_ENOTFOUND);
    acct_event_free(g);
}

int main(void)
{
    dp_log_set_level(DP_LOG_WARN); /* no start-up chatter from the store */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sum_up_never_rounds_down),
        cmocka_unit_test_setup_teardown(token_is_returned_once_and_resolves_to_its_silo, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(exactly_the_admissible_charges_are_accepted, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            a_budget_of_zero_admits_nothing_and_an_exact_fit_is_admitted, setup, teardown),
        cmocka_unit_test_setup_teardown(retries_with_one_key_charge_once, setup, teardown),
        cmocka_unit_test_setup_teardown(batch_is_all_or_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(dry_run_writes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(zcdp_silo_refuses_events_without_a_zcdp_bound, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(opted_out_silo_records_and_never_refuses, setup, teardown),
        cmocka_unit_test_setup_teardown(pld_silo_admits_on_the_tighter_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(c_callers_need_no_json, setup, teardown),
        cmocka_unit_test_setup_teardown(claims_hold_commit_abort_and_expire, setup, teardown),
        cmocka_unit_test_setup_teardown(lowering_a_budget_below_spent_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(archived_silo_keeps_its_log_and_takes_no_charges, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(the_log_is_append_only, setup, teardown),
        cmocka_unit_test_setup_teardown(audit_log_filters_by_job_and_time_and_pages, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(concurrent_charges_never_exceed_the_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_inputs_name_their_field, setup, teardown),
    };
    return cmocka_run_group_tests_name("service_ledger", tests, NULL, NULL);
}
