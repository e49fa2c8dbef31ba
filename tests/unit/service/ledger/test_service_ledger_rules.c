/*
 * Unit tests for the ledger rules of issue #10 against the public C API (service/ledger/ledger.h),
 * on a database in a temporary file with the real migrations:
 *   - D8: a PLD silo can always be renamed and raised; a lower cap is checked with the admission
 *     rule, min(RDP, PLD), not the RDP bound alone;
 *   - D10: every audit row records the cumulative epsilon under the rule that admitted it (PLD
 *     claim commits included), never decreasing, never above the cap;
 *   - D11: a batch key reused with another set of silos or events is a conflict, never a partial
 *     replay; the same batch is replayed whole;
 *   - silo names are unique among active silos (409, field "name");
 *   - the ledger reports the calculator's epsilon for the same events (continuous order with
 *     conversion "optimal"; the sum of epsilons for pure events when tighter).
 * Each test fails on the code before the fix (the reproductions of the reliability report).
 */
#include "tests/support/test_util.h"

#include <stdlib.h>
#include <string.h>

#include "accounting/rdp.h"
#include "common/dp_math.h"
#include "common/dp_log.h"
#include "service/ledger/ledger.h"
#include "tests/support/ledger_fixture.h"

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

static int64_t make_silo(ledger_fixture *f, const char *name, ledger_budget b)
{
    ledger_silo_view v;
    char tok[LEDGER_TOKEN_BUF];
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_create(f->l, name, &b, &v, tok, &e), DP_OK);
    return v.id;
}

static ledger_budget pld_budget(double eps, double delta)
{
    ledger_budget b = {.kind = LEDGER_BUDGET_EPS_DELTA,
                       .accountant = LEDGER_ACCT_PLD,
                       .conversion = ACCT_CONV_BALLE2020,
                       .epsilon = eps,
                       .delta = delta,
                       .rho = DP_NAN};
    return b;
}

static ledger_budget rho_budget(double rho)
{
    ledger_budget b = {.kind = LEDGER_BUDGET_RHO,
                       .accountant = LEDGER_ACCT_ZCDP,
                       .conversion = ACCT_CONV_BALLE2020,
                       .rho = rho,
                       .delta = DP_NAN};
    return b;
}

static ledger_patch no_patch(void)
{
    ledger_patch p = {.name = NULL, .epsilon = DP_NAN, .delta = DP_NAN, .rho = DP_NAN};
    return p;
}

static const char GAUSS8[] = "{\"noise_multiplier\":8,\"type\":\"gaussian\"}";

/* Every row of silo's log (at most 1000), owned by the caller. */
static ledger_charge_row *log_of(ledger_fixture *f, int64_t silo, size_t *n)
{
    ledger_charge_row *rows = NULL;
    ledger_charge_filter fl = {
        .after = 0, .limit = LEDGER_LIST_MAX, .since_ms = INT64_MIN, .until_ms = INT64_MAX};
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_charges_list(f->conn, silo, &fl, &rows, n, &e), DP_OK);
    return rows;
}

/* D8: the reliability report's repro. Gaussian(8) charges fill a (3, 1e-5) PLD silo up to 2.995
 * (PLD), while the RDP bound of the same log is 3.2447. */
static void pld_silo_can_be_renamed_raised_and_lowered_by_the_admission_rule(void **state)
{
    ledger_fixture *f = *state;
    int64_t s = make_silo(f, "p", pld_budget(3.0, 1e-5));
    acct_event *g = acct_event_gaussian(8);
    assert_non_null(g);
    ledger_charge_req r = {.silo_id = s, .event = g, .event_json = GAUSS8};
    ledger_charge_result res;
    dp_err e;
    int n = 0;
    for (;; n++) {
        dp_err_clear(&e);
        int rc = ledger_charge(f->l, &r, false, &res, &e);
        if (rc == DP_EBUDGET)
            break;
        assert_int_equal(rc, DP_OK);
        assert_true(n < 100);
    }
    assert_int_equal(n, 33);
    ledger_silo_view v;
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_get(f->l, f->conn, s, &v, &e), DP_OK);
    assert_true(v.spent_eps < 3.0);
    /* A rename and a raise are always accepted. */
    ledger_patch p = no_patch();
    p.name = "renamed";
    assert_int_equal(ledger_silo_patch(f->l, s, &p, &v, &e), DP_OK);
    assert_string_equal(v.name, "renamed");
    p = no_patch();
    p.epsilon = 3.05;
    assert_int_equal(ledger_silo_patch(f->l, s, &p, &v, &e), DP_OK);
    assert_close(v.budget.epsilon, 3.05, 0, 0);
    /* Lowering back to 3 holds under min(RDP, PLD) = 2.995, although RDP alone says 3.24. */
    p.epsilon = 3.0;
    assert_int_equal(ledger_silo_patch(f->l, s, &p, &v, &e), DP_OK);
    assert_close(v.budget.epsilon, 3.0, 0, 0);
    /* Below what is spent: 409, cap unchanged. */
    p.epsilon = 2.9;
    assert_int_equal(ledger_silo_patch(f->l, s, &p, &v, &e), DP_ECONFLICT);
    assert_string_equal(e.field, "budget.epsilon");
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_get(f->l, f->conn, s, &v, &e), DP_OK);
    assert_close(v.budget.epsilon, 3.0, 0, 0);
    /* A stricter delta is checked too: at 1e-12 the log no longer fits 3. */
    p = no_patch();
    p.delta = 1e-12;
    assert_int_equal(ledger_silo_patch(f->l, s, &p, &v, &e), DP_ECONFLICT);
    acct_event_free(g);
}

/* D10: claims reserved and committed one by one on a PLD silo until refused. Before the fix the
 * commits wrote the RDP bound (3.0174 ... 3.2447 > 3). */
static void pld_claim_commits_record_the_admitting_figure(void **state)
{
    ledger_fixture *f = *state;
    const double cap = 3.0;
    int64_t s = make_silo(f, "p", pld_budget(cap, 1e-5));
    acct_event *g = acct_event_gaussian(8);
    assert_non_null(g);
    ledger_charge_req r = {.silo_id = s, .event = g, .event_json = GAUSS8};
    ledger_claim_view c;
    ledger_charge_result fig, res;
    dp_err e;
    int n = 0;
    for (;; n++) {
        dp_err_clear(&e);
        int rc = ledger_claim_create(f->l, &r, 60000, &c, &fig, &e);
        if (rc == DP_EBUDGET)
            break;
        assert_int_equal(rc, DP_OK);
        assert_int_equal(ledger_claim_commit(f->l, c.id, 0, 0, &c, &res, &e), DP_OK);
        assert_true(res.spent_eps_after <= cap);
        assert_true(n < 100);
    }
    assert_int_equal(n, 33);
    size_t nr = 0;
    ledger_charge_row *rows = log_of(f, s, &nr);
    assert_int_equal(nr, 33);
    for (size_t i = 0; i < nr; i++) {
        assert_true(rows[i].claim_id > 0);
        assert_true(rows[i].eps_after <= cap);
        if (i > 0)
            assert_true(rows[i].eps_after >= rows[i - 1].eps_after);
    }
    /* The last row says what the silo says. */
    ledger_silo_view v;
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_get(f->l, f->conn, s, &v, &e), DP_OK);
    assert_close(rows[nr - 1].eps_after, v.spent_eps, 1e-9, 0);
    ledger_charge_rows_free(rows, nr);
    acct_event_free(g);
}

/* D11: the report's repro (three rho silos, batch key BK), and the other ways to reuse a key. */
static void batch_key_reused_with_another_batch_is_a_conflict(void **state)
{
    ledger_fixture *f = *state;
    int64_t a = make_silo(f, "a", rho_budget(10)), b = make_silo(f, "b", rho_budget(10));
    int64_t c = make_silo(f, "c", rho_budget(10));
    acct_event *z = acct_event_zcdp(0.125);
    assert_non_null(z);
    const char *js = "{\"rho\":0.125,\"type\":\"zcdp\"}";
    ledger_charge_req r[2] = {
        {.silo_id = a, .event = z, .event_json = js, .idempotency_key = "BK"},
        {.silo_id = b, .event = z, .event_json = js, .idempotency_key = "BK"}};
    ledger_charge_result out[2];
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_charge_batch_keyed(f->l, r, 2, "BK", false, out, &e), DP_OK);
    assert_false(out[0].replayed || out[1].replayed);
    /* {a, c} under BK: 409 naming the key; c is not charged, a not replayed. */
    r[1].silo_id = c;
    assert_int_equal(ledger_charge_batch_keyed(f->l, r, 2, "BK", false, out, &e), DP_ECONFLICT);
    assert_string_equal(e.field, "idempotency_key");
    ledger_silo_view v;
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_get(f->l, f->conn, c, &v, &e), DP_OK);
    assert_int_equal(v.n_charges, 0);
    /* {c} alone, {a} alone (a subset) and {a, b} with another event: 409 as well. */
    r[0].silo_id = c;
    assert_int_equal(ledger_charge_batch_keyed(f->l, r, 1, "BK", false, out, &e), DP_ECONFLICT);
    r[0].silo_id = a;
    dp_err_clear(&e);
    assert_int_equal(ledger_charge_batch_keyed(f->l, r, 1, "BK", false, out, &e), DP_ECONFLICT);
    assert_string_equal(e.field, "idempotency_key");
    acct_event *z2 = acct_event_zcdp(0.25);
    assert_non_null(z2);
    r[1].silo_id = b;
    r[1].event = z2;
    r[1].event_json = "{\"rho\":0.25,\"type\":\"zcdp\"}";
    dp_err_clear(&e);
    assert_int_equal(ledger_charge_batch_keyed(f->l, r, 2, "BK", false, out, &e), DP_ECONFLICT);
    /* The same batch, in either order: replayed whole, nothing charged. */
    r[1].event = z;
    r[1].event_json = js;
    ledger_charge_req swapped[2] = {r[1], r[0]};
    for (int k = 0; k < 2; k++) {
        dp_err_clear(&e);
        assert_int_equal(ledger_charge_batch_keyed(f->l, k ? swapped : r, 2, "BK", false, out, &e),
                         DP_OK);
        assert_true(out[0].replayed && out[1].replayed);
    }
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_get(f->l, f->conn, a, &v, &e), DP_OK);
    assert_int_equal(v.n_charges, 1);
    /* Keys are scoped by the sender: another token may use "BK" for its own batch. */
    r[0].silo_id = c;
    r[0].actor_token_id = 0;
    int64_t tok = 0;
    assert_int_equal(ledger_token_register_admin(f->l, "another-admin-token-0123456789", &tok, &e),
                     DP_OK);
    r[0].actor_token_id = tok;
    assert_int_equal(ledger_charge_batch_keyed(f->l, r, 1, "BK", false, out, &e), DP_OK);
    assert_false(out[0].replayed);
    acct_event_free(z);
    acct_event_free(z2);
}

/* Duplicate silo names (newcomer report): 409 naming "name" on create and rename; the name of an
 * archived silo may be taken again. */
static void active_silo_names_are_unique(void **state)
{
    ledger_fixture *f = *state;
    int64_t a = make_silo(f, "hospital-h1", rho_budget(1));
    int64_t b = make_silo(f, "hospital-h2", rho_budget(1));
    ledger_budget bu = rho_budget(1);
    ledger_silo_view v;
    char tok[LEDGER_TOKEN_BUF];
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_create(f->l, "hospital-h1", &bu, &v, tok, &e), DP_ECONFLICT);
    assert_string_equal(e.field, "name");
    ledger_patch p = no_patch();
    p.name = "hospital-h1";
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_patch(f->l, b, &p, &v, &e), DP_ECONFLICT);
    assert_string_equal(e.field, "name");
    /* Renaming a silo to its own name is no conflict. */
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_patch(f->l, a, &p, &v, &e), DP_OK);
    assert_int_equal(ledger_silo_archive(f->l, a, &v, &e), DP_OK);
    int64_t a2 = make_silo(f, "hospital-h1", rho_budget(1));
    assert_true(a2 != a);
}

/* acct_rdp_epsilon of ev at delta with conversion conv on the default grid (the calculator). */
static double calc_eps(const acct_event *ev, double delta, acct_conversion conv)
{
    const double *orders;
    size_t n = acct_rdp_default_orders(&orders);
    acct_rdp_answer a;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(acct_rdp_epsilon(ev, ACCT_NB_ADD_REMOVE, delta, conv, orders, n, &a, &e),
                     DP_OK);
    return a.value;
}

static acct_event *times(uint64_t k, const acct_event *ev)
{
    acct_event *sc = acct_event_self_composed(k, acct_event_clone(ev));
    assert_non_null(sc);
    return sc;
}

/* Issue #10 / newcomer report 5(a): one DP-SGD epoch (1000 steps, q = 0.01, sigma = 1.1) at delta
 * 1e-5 was charged 1.711770 (grid order) while the calculator's default answers 1.711714
 * (continuous order). A silo with the calculator's conversion now reports the calculator's figure,
 * for one epoch and for two (the log composed as self_composed(2, epoch)), in the charge and in the
 * silo view; a silo that asks for the grid keeps the grid figure. */
static void ledger_and_calculator_agree_on_a_dp_sgd_epoch(void **state)
{
    ledger_fixture *f = *state;
    acct_event *epoch =
        acct_event_self_composed(1000, acct_event_poisson(0.01, acct_event_gaussian(1.1)));
    assert_non_null(epoch);
    const char *js =
        "{\"count\":1000,\"event\":{\"event\":{\"noise_multiplier\":1.1,\"type\":\"gaussian\"},"
        "\"sampling_rate\":0.01,\"type\":\"poisson_sampled\"},\"type\":\"self_composed\"}";
    const double delta = 1e-5;
    ledger_budget b = pld_budget(10.0, delta);
    b.accountant = LEDGER_ACCT_RDP;
    b.conversion = ACCT_CONV_OPTIMAL;
    int64_t s = make_silo(f, "optimal", b);
    b.conversion = ACCT_CONV_BALLE2020;
    int64_t g = make_silo(f, "grid", b);
    double one = calc_eps(epoch, delta, ACCT_CONV_OPTIMAL);
    double one_grid = calc_eps(epoch, delta, ACCT_CONV_BALLE2020);
    assert_true(one < one_grid); /* the continuous order is tighter here */
    ledger_charge_req r = {.silo_id = s, .event = epoch, .event_json = js};
    ledger_charge_result res;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_charge(f->l, &r, false, &res, &e), DP_OK);
    assert_close(res.cost_eps, one, 1e-13, 0);
    assert_close(res.spent_eps_after, one, 1e-13, 0);
    assert_int_equal(ledger_charge(f->l, &r, false, &res, &e), DP_OK);
    acct_event *two = times(2, epoch);
    double both = calc_eps(two, delta, ACCT_CONV_OPTIMAL);
    assert_close(res.spent_eps_after, both, 1e-13, 0);
    ledger_silo_view v;
    assert_int_equal(ledger_silo_get(f->l, f->conn, s, &v, &e), DP_OK);
    assert_close(v.spent_eps, both, 1e-13, 0);
    assert_close(v.remaining, 10.0 - both, 1e-12, 0);
    /* the grid silo reports the grid figure: never below the continuous one */
    r.silo_id = g;
    assert_int_equal(ledger_charge(f->l, &r, false, &res, &e), DP_OK);
    assert_close(res.spent_eps_after, one_grid, 1e-13, 0);
    acct_event_free(two);
    acct_event_free(epoch);
}

/* Issue #10: pure events compose to the sum of their epsilons when that is tighter than the RDP
 * conversion (before: 2 x pure(0.5) at delta 1e-9 was 1.0003 by the ledger, for exactly 1).
 * Admission uses the same figure: a cap of exactly 1 admits both halves. The calculator answers the
 * same. */
static void pure_events_compose_to_their_sum(void **state)
{
    ledger_fixture *f = *state;
    acct_event *p = acct_event_pure(0.5);
    assert_non_null(p);
    const double delta = 1e-9;
    ledger_budget b = pld_budget(1.0, delta);
    b.accountant = LEDGER_ACCT_RDP;
    b.conversion = ACCT_CONV_OPTIMAL;
    int64_t s = make_silo(f, "pure", b);
    ledger_charge_req r = {
        .silo_id = s, .event = p, .event_json = "{\"epsilon\":0.5,\"type\":\"pure\"}"};
    ledger_charge_result res;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_charge(f->l, &r, false, &res, &e), DP_OK);
    assert_true(res.spent_eps_after == 0.5);
    assert_int_equal(ledger_charge(f->l, &r, false, &res, &e), DP_OK);
    assert_true(res.spent_eps_after == 1.0);
    acct_event *two = times(2, p);
    assert_true(calc_eps(two, delta, ACCT_CONV_OPTIMAL) == 1.0);
    assert_true(calc_eps(two, delta, ACCT_CONV_BALLE2020) == 1.0);
    /* the silo is full: a third half is refused at would-be 1.5 */
    assert_int_equal(ledger_charge(f->l, &r, false, &res, &e), DP_EBUDGET);
    assert_true(res.would_be == 1.5);
    ledger_silo_view v;
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_get(f->l, f->conn, s, &v, &e), DP_OK);
    assert_true(v.spent_eps == 1.0);
    /* a PATCH lowering the cap back to exactly what is spent uses the same rule (grid: 1.0003) */
    ledger_patch pa = no_patch();
    pa.epsilon = 2.0;
    assert_int_equal(ledger_silo_patch(f->l, s, &pa, &v, &e), DP_OK);
    pa.epsilon = 1.0;
    assert_int_equal(ledger_silo_patch(f->l, s, &pa, &v, &e), DP_OK);
    pa.epsilon = 0.999;
    assert_int_equal(ledger_silo_patch(f->l, s, &pa, &v, &e), DP_ECONFLICT);
    acct_event_free(two);
    acct_event_free(p);
}

int main(void)
{
    dp_log_set_level(DP_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            pld_silo_can_be_renamed_raised_and_lowered_by_the_admission_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(pld_claim_commits_record_the_admitting_figure, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(batch_key_reused_with_another_batch_is_a_conflict, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(active_silo_names_are_unique, setup, teardown),
        cmocka_unit_test_setup_teardown(ledger_and_calculator_agree_on_a_dp_sgd_epoch, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(pure_events_compose_to_their_sum, setup, teardown),
    };
    return cmocka_run_group_tests_name("service_ledger_rules", tests, NULL, NULL);
}
