/*
 * White-box tests of the ledger's cost cache (service/ledger/curves.c, through ledger/internal.h):
 *   - exactness: over many random events (DP-SGD rounds, plain mechanisms, compositions, sampled
 *     without replacement, both relations), the cost a hit returns is bit for bit the cost computed
 *     with the cache off, and a clone of the tree (another allocation, the same event) hits; so is
 *     the event's JSON text written to the log (event_json_dumps's);
 *   - the key: it tells apart what changes the cost (a parameter's last bit, the relation, a count)
 *     and ignores what does not (fields the node's type does not use);
 *   - counting, least-recently-used eviction in a set, and that a full cache never answers with
 *     another event's curve;
 *   - end to end: the same charges on two silos, one with the cache on and one off, give
 *     bit-identical figures (including cost_eps, the event's own refined epsilon, also cached);
 *   - threads: several threads preparing charges on one ledger, and a small cache under churn,
 * never return a wrong curve (the concurrency part is meant for `make tsan` as well).
 */
#include "service/ledger/internal.h"
#include "service/base/embedded.h"

#include "tests/support/test_util.h"
#include "tests/support/ledger_fixture.h"
#include "common/dp_math.h"
#include "common/dp_alloc.h"

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

/* ---- random events (a fixed-seed generator: the same trees on every run) ---- */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static double rng_unit(uint64_t *s) /* in (0, 1) */
{
    return ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
}

static acct_event *random_leaf(uint64_t *s)
{
    switch (rng_next(s) % 4) {
        case 0:
            return acct_event_gaussian(0.5 + 4.0 * rng_unit(s));
        case 1:
            return acct_event_laplace(0.5 + 4.0 * rng_unit(s));
        case 2:
            return acct_event_pure(0.01 + rng_unit(s));
        default:
            return acct_event_zcdp(0.001 + 0.1 * rng_unit(s));
    }
}

static acct_event *dpsgd_round(uint64_t *s)
{
    double n = 300.0 + 3000.0 * rng_unit(s);
    return acct_event_self_composed(
        1 + rng_next(s) % 100,
        acct_event_poisson(32.0 / n, acct_event_gaussian(0.6 + 2.0 * rng_unit(s))));
}

static acct_event *random_event(uint64_t *s)
{
    switch (rng_next(s) % 6) {
        case 0:
        case 1:
            return dpsgd_round(s);
        case 2:
            return random_leaf(s);
        case 3: {
            acct_event *kids[3] = {random_leaf(s), dpsgd_round(s), random_leaf(s)};
            return acct_event_composed(kids, 3);
        }
        case 4:
            return acct_event_swor(1000 + rng_next(s) % 9000, 10 + rng_next(s) % 100,
                                   acct_event_gaussian(0.8 + 2.0 * rng_unit(s)));
        default:
            return acct_event_self_composed(1 + rng_next(s) % 1000, random_leaf(s));
    }
}

static bool has_type(const acct_event *ev, acct_event_type t)
{
    if (ev == NULL)
        return false;
    if (ev->type == t)
        return true;
    for (size_t i = 0; ev->type == ACCT_EV_COMPOSED && i < ev->n_children; i++)
        if (has_type(ev->children[i], t))
            return true;
    return ev->type != ACCT_EV_COMPOSED && has_type(ev->child, t);
}

/* lg_item_prepare of (ev, nb) into *it; returns its code. */
static int prepare(ledger *l, const acct_event *ev, acct_neighboring nb, op_item *it)
{
    ledger_charge_req req = {.silo_id = 1, .event = ev, .neighboring = nb};
    memset(it, 0, sizeof *it);
    dp_err e;
    dp_err_clear(&e);
    return lg_item_prepare(l, &req, "charge", it, &e);
}

static void item_clear(op_item *it)
{
    free(it->own_json); /* jansson's allocator: malloc */
    it->own_json = NULL;
}

static bool same_cost(const ledger *l, const op_item *a, const op_item *b)
{
    return memcmp(a->cost_rdp, b->cost_rdp, l->n_orders * sizeof(double)) == 0 &&
           memcmp(&a->cost_rho, &b->cost_rho, sizeof(double)) == 0;
}

static void cached_costs_are_bit_identical_to_fresh_ones(void **state)
{
    ledger_fixture *f = *state;
    ledger *l = f->l;
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    size_t n_ok = 0;
    for (int i = 0; i < 240; i++) {
        acct_event *ev = random_event(&seed);
        assert_non_null(ev);
        /* the relation the event is accounted under; now and then the other one, refused */
        acct_neighboring nb = rng_next(&seed) % 2 ? ACCT_NB_REPLACE_ONE : ACCT_NB_ADD_REMOVE;
        if (has_type(ev, ACCT_EV_POISSON) && rng_next(&seed) % 8 != 0)
            nb = ACCT_NB_ADD_REMOVE;
        if (has_type(ev, ACCT_EV_SWOR) && rng_next(&seed) % 8 != 0)
            nb = ACCT_NB_REPLACE_ONE;
        op_item fresh, miss, hit, clone_hit;
        ledger_curve_cache_enable(l, false);
        int rc0 = prepare(l, ev, nb, &fresh);
        ledger_curve_cache_enable(l, true);
        ledger_curve_stats s0, s1;
        ledger_curve_cache_stats(l, &s0);
        int rc1 = prepare(l, ev, nb, &miss);
        int rc2 = prepare(l, ev, nb, &hit);
        acct_event *twin = acct_event_clone(ev);
        assert_non_null(twin);
        int rc3 = prepare(l, twin, nb, &clone_hit);
        ledger_curve_cache_stats(l, &s1);
        assert_int_equal(rc0, rc1);
        assert_int_equal(rc0, rc2);
        assert_int_equal(rc0, rc3);
        if (rc0 == DP_OK) {
            n_ok++;
            assert_true(same_cost(l, &fresh, &miss));
            assert_true(same_cost(l, &fresh, &hit));
            assert_true(same_cost(l, &fresh, &clone_hit));
            /* one miss (the first), two hits (the same tree, its clone); seeds differ per event,
             * but two random events may coincide, then the first call hits as well */
            assert_int_equal(s1.hits + s1.misses - s0.hits - s0.misses, 3);
            assert_true(s1.hits - s0.hits >= 2);
            assert_true(hit.have_key);
            assert_memory_equal(hit.ev_key, miss.ev_key, DP_SHA256_DIGEST_BYTES);
            /* the log's text of the event: a hit's copy is event_json_dumps's text */
            char *text = event_json_dumps(ev);
            assert_non_null(text);
            assert_non_null(fresh.own_json);
            assert_string_equal(fresh.own_json, text);
            assert_string_equal(miss.own_json, text);
            assert_string_equal(hit.own_json, text);
            assert_string_equal(clone_hit.own_json, text);
            assert_true(hit.own_json != miss.own_json);
            free(text);
        } else { /* failures are never cached: every call computed and missed */
            assert_int_equal(s1.hits, s0.hits);
        }
        item_clear(&fresh);
        item_clear(&miss);
        item_clear(&hit);
        item_clear(&clone_hit);
        acct_event_free(twin);
        acct_event_free(ev);
    }
    assert_true(n_ok > 180); /* most events are valid: the loop compared real costs */
}

static void the_key_tells_apart_what_changes_the_cost(void **state)
{
    (void)state;
    uint8_t a[DP_SHA256_DIGEST_BYTES], b[DP_SHA256_DIGEST_BYTES];
    acct_event *x =
        acct_event_self_composed(17, acct_event_poisson(0.0123, acct_event_gaussian(1.1)));
    acct_event *y = acct_event_clone(x);
    assert_non_null(x);
    assert_non_null(y);
    lg_event_key(x, ACCT_NB_ADD_REMOVE, a);
    lg_event_key(y, ACCT_NB_ADD_REMOVE, b);
    assert_memory_equal(a, b, sizeof a);
    /* unused fields do not enter the key */
    y->rho = 42.0;
    y->child->epsilon = 3.0;
    y->child->child->sampling_rate = 0.5;
    lg_event_key(y, ACCT_NB_ADD_REMOVE, b);
    assert_memory_equal(a, b, sizeof a);
    /* the relation, a count, a rate's last bit, the noise's last bit */
    lg_event_key(x, ACCT_NB_REPLACE_ONE, b);
    assert_memory_not_equal(a, b, sizeof a);
    y->count = 18;
    lg_event_key(y, ACCT_NB_ADD_REMOVE, b);
    assert_memory_not_equal(a, b, sizeof a);
    y->count = 17;
    y->child->sampling_rate = nextafter(0.0123, 1.0);
    lg_event_key(y, ACCT_NB_ADD_REMOVE, b);
    assert_memory_not_equal(a, b, sizeof a);
    y->child->sampling_rate = 0.0123;
    y->child->child->noise_multiplier = nextafter(1.1, 0.0);
    lg_event_key(y, ACCT_NB_ADD_REMOVE, b);
    assert_memory_not_equal(a, b, sizeof a);
    /* the shape: composed(e) is not e */
    acct_event *kids[1] = {acct_event_clone(x)};
    acct_event *c = acct_event_composed(kids, 1);
    assert_non_null(c);
    lg_event_key(c, ACCT_NB_ADD_REMOVE, b);
    assert_memory_not_equal(a, b, sizeof a);
    acct_event_free(c);
    acct_event_free(y);
    acct_event_free(x);
}

static void key_of(uint32_t i, uint8_t *k)
{
    uint8_t seed[4] = {(uint8_t)i, (uint8_t)(i >> 8), (uint8_t)(i >> 16), (uint8_t)(i >> 24)};
    dp_sha256(seed, sizeof seed, k);
}

static void curve_of(uint32_t i, size_t n, double *v)
{
    for (size_t j = 0; j < n; j++)
        v[j] = (double)i + (double)j / 1024.0;
}

static void a_full_set_evicts_its_least_recently_used_entry(void **state)
{
    (void)state;
    enum { N = 5 };
    double v[N], got[N], rho;
    uint8_t k[6][DP_SHA256_DIGEST_BYTES];
    lg_curve_cache *c = lg_curve_cache_alloc(LG_CURVE_WAYS, N); /* one set: every key collides */
    assert_non_null(c);
    for (uint32_t i = 0; i < 6; i++)
        key_of(i, k[i]);
    for (uint32_t i = 0; i < LG_CURVE_WAYS; i++) {
        curve_of(i, N, v);
        lg_curve_cache_put(c, k[i], v, (double)i);
    }
    assert_true(lg_curve_cache_get(c, k[0], got, &rho)); /* 0 is now the most recent */
    curve_of(LG_CURVE_WAYS, N, v);
    lg_curve_cache_put(c, k[LG_CURVE_WAYS], v, 99.0); /* evicts 1, the least recently used */
    assert_false(lg_curve_cache_get(c, k[1], got, &rho));
    for (uint32_t i = 0; i <= LG_CURVE_WAYS; i++) {
        if (i == 1)
            continue;
        assert_true(lg_curve_cache_get(c, k[i], got, &rho));
        curve_of(i, N, v);
        assert_memory_equal(got, v, sizeof v);
        assert_true(rho == (i == LG_CURVE_WAYS ? 99.0 : (double)i));
    }
    /* putting a present key again changes nothing (another thread computed the same figures) */
    curve_of(1000, N, v);
    lg_curve_cache_put(c, k[0], v, -1.0);
    assert_true(lg_curve_cache_get(c, k[0], got, &rho));
    curve_of(0, N, v);
    assert_memory_equal(got, v, sizeof v);
    ledger_curve_stats s;
    lg_curve_cache_stats(c, &s);
    assert_int_equal(s.capacity, LG_CURVE_WAYS);
    assert_int_equal(s.entries, LG_CURVE_WAYS);
    assert_int_equal(s.evictions, 1);
    assert_int_equal(s.misses, 1);
    assert_int_equal(s.hits, 1 + LG_CURVE_WAYS + 1);
    /* off: misses without counting, drops puts, keeps what it holds */
    lg_curve_cache_enable(c, false);
    assert_false(lg_curve_cache_get(c, k[0], got, &rho));
    lg_curve_cache_put(c, k[1], v, 1.0);
    lg_curve_cache_enable(c, true);
    assert_false(lg_curve_cache_get(c, k[1], got, &rho));
    assert_true(lg_curve_cache_get(c, k[0], got, &rho));
    /* the refined figures of an entry, per (delta, conversion) */
    double e = 0;
    assert_false(lg_curve_cache_get_refined(c, k[0], 1e-5, ACCT_CONV_OPTIMAL, &e));
    lg_curve_cache_put_refined(c, k[0], 1e-5, ACCT_CONV_OPTIMAL, 0.75);
    lg_curve_cache_put_refined(c, k[0], 1e-6, ACCT_CONV_OPTIMAL, 0.875);
    lg_curve_cache_put_refined(c, k[1], 1e-5, ACCT_CONV_OPTIMAL, 9.0); /* absent: dropped */
    assert_true(lg_curve_cache_get_refined(c, k[0], 1e-5, ACCT_CONV_OPTIMAL, &e));
    assert_true(e == 0.75);
    assert_true(lg_curve_cache_get_refined(c, k[0], 1e-6, ACCT_CONV_OPTIMAL, &e));
    assert_true(e == 0.875);
    assert_false(lg_curve_cache_get_refined(c, k[0], 1e-5, ACCT_CONV_BALLE2020, &e));
    assert_false(lg_curve_cache_get_refined(c, k[1], 1e-5, ACCT_CONV_OPTIMAL, &e));
    /* an entry evicted and stored again starts without refined figures */
    for (uint32_t i = 10; i < 10 + LG_CURVE_WAYS; i++) { /* four new keys replace the whole set */
        uint8_t kn[DP_SHA256_DIGEST_BYTES];
        key_of(i, kn);
        curve_of(i, N, v);
        lg_curve_cache_put(c, kn, v, (double)i);
    }
    assert_false(lg_curve_cache_get(c, k[0], got, &rho));
    curve_of(0, N, v);
    lg_curve_cache_put(c, k[0], v, 0.0);
    assert_false(lg_curve_cache_get_refined(c, k[0], 1e-5, ACCT_CONV_OPTIMAL, &e));
    lg_curve_cache_free(c);
    lg_curve_cache_free(NULL);
}

static void a_small_cache_under_churn_answers_right_or_misses(void **state)
{
    (void)state;
    enum { N = 7, KEYS = 200 };
    lg_curve_cache *c = lg_curve_cache_alloc(16, N);
    assert_non_null(c);
    uint64_t seed = 12345;
    size_t hits = 0, puts = 0;
    for (int step = 0; step < 5000; step++) {
        uint32_t i = (uint32_t)(rng_next(&seed) % KEYS);
        uint8_t k[DP_SHA256_DIGEST_BYTES];
        double v[N], got[N], rho = -1;
        key_of(i, k);
        curve_of(i, N, v);
        if (lg_curve_cache_get(c, k, got, &rho)) {
            hits++;
            assert_memory_equal(got, v, sizeof v);
            assert_true(rho == (double)i);
        } else {
            lg_curve_cache_put(c, k, v, (double)i);
            puts++;
        }
    }
    ledger_curve_stats s;
    lg_curve_cache_stats(c, &s);
    assert_int_equal(s.hits, hits);
    assert_int_equal(s.misses, puts);
    assert_true(s.entries <= 16);
    assert_int_equal(s.evictions, puts - s.entries);
    assert_true(hits > 0 && s.evictions > 0);
    lg_curve_cache_free(c);
}

static ledger_budget opt_budget(void)
{
    ledger_budget b = {.kind = LEDGER_BUDGET_EPS_DELTA,
                       .accountant = LEDGER_ACCT_RDP,
                       .conversion = ACCT_CONV_OPTIMAL,
                       .epsilon = 1e6,
                       .delta = 1e-5,
                       .rho = DP_NAN};
    return b;
}

static bool same_dbl(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static void charges_with_and_without_the_cache_agree_bit_for_bit(void **state)
{
    ledger_fixture *f = *state;
    ledger *l = f->l;
    ledger_budget b = opt_budget();
    ledger_silo_view v;
    char tok[LEDGER_TOKEN_BUF];
    dp_err e;
    dp_err_clear(&e);
    int64_t silo[2][3];
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 3; k++) {
            char name[32];
            snprintf(name, sizeof name, "s%d-%d", s, k);
            assert_int_equal(ledger_silo_create(l, name, &b, &v, tok, &e), DP_OK);
            silo[s][k] = v.id;
        }
    uint64_t seed = 77;
    acct_event *ev[3];
    for (int k = 0; k < 3; k++)
        ev[k] = dpsgd_round(&seed);
    for (int round = 0; round < 4; round++) {
        ledger_charge_result out[2][3];
        for (int s = 0; s < 2; s++) { /* s = 0: the cache on, s = 1: off */
            ledger_curve_cache_enable(l, s == 0);
            ledger_charge_req reqs[3];
            for (int k = 0; k < 3; k++)
                reqs[k] = (ledger_charge_req){
                    .silo_id = silo[s][k], .event = ev[k], .neighboring = ACCT_NB_ADD_REMOVE};
            assert_int_equal(ledger_charge_batch(l, reqs, 3, false, out[s], &e), DP_OK);
        }
        for (int k = 0; k < 3; k++) {
            assert_true(same_dbl(out[0][k].cost_eps, out[1][k].cost_eps));
            assert_true(same_dbl(out[0][k].cost_rho, out[1][k].cost_rho));
            assert_true(same_dbl(out[0][k].would_be, out[1][k].would_be));
            assert_true(same_dbl(out[0][k].spent_eps_after, out[1][k].spent_eps_after));
            assert_true(same_dbl(out[0][k].remaining_after, out[1][k].remaining_after));
            assert_true(out[0][k].cost_eps > 0 && isfinite(out[0][k].cost_eps));
        }
    }
    /* the silos' stored sums agree too (the cost vectors were identical) */
    for (int k = 0; k < 3; k++) {
        ledger_silo_view a, c;
        assert_int_equal(ledger_silo_get(l, f->conn, silo[0][k], &a, &e), DP_OK);
        assert_int_equal(ledger_silo_get(l, f->conn, silo[1][k], &c, &e), DP_OK);
        assert_true(same_dbl(a.spent_eps, c.spent_eps));
        assert_int_equal(a.n_charges, 4);
    }
    /* Storage (migration 0012): with the cache on, each row names its event's curve, stored once
     * per event; with it off, rows hold the curve inline (as every row written before 0012). The
     * verification reads both the same way: consistent, and the rows' curves are the same bytes. */
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(f->db, "SELECT count(*) FROM charge_curves", -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int64(q, 0), 3);
    sqlite3_finalize(q);
    assert_int_equal(
        sqlite3_prepare_v2(f->db,
                           "SELECT length(a.cost_rdp), a.curve_key IS NULL, length(b.cost_rdp), "
                           "b.curve_key IS NULL, (SELECT cost_rdp FROM charge_curves WHERE "
                           "event_key = a.curve_key) = b.cost_rdp FROM charges AS a JOIN charges "
                           "AS b ON b.silo_id = :b AND b.seq = a.seq WHERE a.silo_id = :a",
                           -1, &q, NULL),
        SQLITE_OK);
    for (int k = 0; k < 3; k++) {
        size_t rows = 0;
        sqlite3_bind_int64(q, sqlite3_bind_parameter_index(q, ":a"), silo[0][k]);
        sqlite3_bind_int64(q, sqlite3_bind_parameter_index(q, ":b"), silo[1][k]);
        while (sqlite3_step(q) == SQLITE_ROW) {
            assert_int_equal(sqlite3_column_int64(q, 0), 0);
            assert_int_equal(sqlite3_column_int64(q, 1), 0);
            assert_int_equal(sqlite3_column_int64(q, 2), (int64_t)(l->n_orders * sizeof(double)));
            assert_int_equal(sqlite3_column_int64(q, 3), 1);
            assert_int_equal(sqlite3_column_int64(q, 4), 1);
            rows++;
        }
        assert_int_equal(rows, 4);
        sqlite3_reset(q);
        ledger_verify va, vb;
        assert_int_equal(ledger_silo_verify(l, f->conn, silo[0][k], &va, &e), DP_OK);
        assert_int_equal(ledger_silo_verify(l, f->conn, silo[1][k], &vb, &e), DP_OK);
        assert_true(va.consistent && vb.consistent);
        assert_int_equal(va.n_charges_log, 4);
        assert_true(same_dbl(va.max_abs_diff_rdp, vb.max_abs_diff_rdp));
        assert_true(same_dbl(va.spent_rho_log, vb.spent_rho_log));
    }
    sqlite3_finalize(q);
    ledger_curve_stats s;
    ledger_curve_cache_stats(l, &s);
    assert_true(s.enabled == false);
    assert_int_equal(s.misses, 3); /* the first round's three events */
    assert_int_equal(s.hits, 9);   /* the three later rounds */
    assert_int_equal(s.refined_hits, 9);
    assert_int_equal(s.entries, 3);
    for (int k = 0; k < 3; k++)
        acct_event_free(ev[k]);
}

/* ---- the would-be figure kept between a dry run and its charge (wb_memo) ---- */

/* Runs step `what` on set s's silos (A, B: roomy; C: a cap that refuses big). */
static int memo_step(ledger *l, const int64_t *id, int what, acct_event *const *ev,
                     ledger_charge_result *out)
{
    dp_err e;
    dp_err_clear(&e);
    ledger_charge_req r[3];
    for (int k = 0; k < 3; k++)
        r[k] = (ledger_charge_req){.silo_id = id[k < 2 ? k : 0],
                                   .event = ev[k < 2 ? k : 0],
                                   .neighboring = ACCT_NB_ADD_REMOVE};
    switch (what) {
        case 0: /* the round's dry run */
            return ledger_charge_batch(l, r, 2, true, out, &e);
        case 1: /* the round's charge */
            return ledger_charge_batch(l, r, 2, false, out, &e);
        case 2: /* another event charged to A in between */
            r[0].event = ev[2];
            return ledger_charge(l, &r[0], false, out, &e);
        case 3: /* a batch that rolls back: A admitted, then a refusal on C */
            r[1] = (ledger_charge_req){
                .silo_id = id[2], .event = ev[3], .neighboring = ACCT_NB_ADD_REMOVE};
            return ledger_charge_batch(l, r, 2, false, out, &e);
        case 4: { /* A's delta changed between a dry run and its charge */
            ledger_patch p = {.name = NULL, .epsilon = DP_NAN, .delta = 2e-5, .rho = DP_NAN};
            ledger_silo_view v;
            return ledger_silo_patch(l, id[0], &p, &v, &e);
        }
        default:
            return DP_EINTERNAL;
    }
}

static void a_dry_runs_figure_is_reused_only_for_the_same_log(void **state)
{
    ledger_fixture *f = *state;
    ledger *l = f->l;
    ledger_budget b = opt_budget(), small = opt_budget();
    small.epsilon = 1.0;
    ledger_silo_view v;
    char tok[LEDGER_TOKEN_BUF];
    dp_err e;
    dp_err_clear(&e);
    int64_t id[2][3];
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 3; k++) {
            char name[32];
            snprintf(name, sizeof name, "m%d-%d", s, k);
            assert_int_equal(ledger_silo_create(l, name, k < 2 ? &b : &small, &v, tok, &e), DP_OK);
            id[s][k] = v.id;
        }
    uint64_t seed = 91;
    acct_event *ev[4];
    for (int k = 0; k < 3; k++)
        ev[k] = dpsgd_round(&seed);
    ev[3] = acct_event_gaussian(0.5); /* far beyond C's cap */
    /* dry run, charge; dry run, another charge of A, charge (A's figure stale); the rolled-back
     * batch, dry run, charge; dry run, A's new delta, charge; dry run, charge */
    static const int steps[] = {0, 1, 0, 2, 1, 3, 0, 1, 0, 4, 1, 0, 1};
    const size_t n_steps = sizeof steps / sizeof steps[0];
    uint64_t hits[2];
    for (int s = 0; s < 2; s++) { /* s = 0: the cache (and the memo) on; s = 1: off */
        ledger_curve_cache_enable(l, s == 0);
        ledger_curve_stats st;
        ledger_curve_cache_stats(l, &st);
        uint64_t h0 = st.would_be_hits;
        for (size_t i = 0; i < n_steps; i++) {
            ledger_charge_result out[3];
            int rc = memo_step(l, id[s], steps[i], ev, out);
            assert_int_equal(rc, steps[i] == 3 ? DP_EBUDGET : DP_OK);
        }
        ledger_curve_cache_stats(l, &st);
        hits[s] = st.would_be_hits - h0;
    }
    /* the same steps, compared figure by figure: each set again from where it is */
    for (int round = 0; round < 2; round++)
        for (size_t i = 0; i < n_steps; i++) {
            ledger_charge_result out[2][3];
            memset(out, 0, sizeof out);
            for (int s = 0; s < 2; s++) {
                ledger_curve_cache_enable(l, s == 0);
                int rc = memo_step(l, id[s], steps[i] == 4 ? 0 : steps[i], ev, out[s]);
                assert_int_equal(rc, steps[i] == 3 ? DP_EBUDGET : DP_OK);
            }
            size_t n = steps[i] == 2 ? 1 : steps[i] == 3 ? 0 : 2;
            for (size_t k = 0; k < n; k++) {
                assert_true(same_dbl(out[0][k].would_be, out[1][k].would_be));
                assert_true(same_dbl(out[0][k].spent_eps_after, out[1][k].spent_eps_after));
                assert_true(same_dbl(out[0][k].remaining_after, out[1][k].remaining_after));
                assert_true(same_dbl(out[0][k].cost_eps, out[1][k].cost_eps));
                assert_true(isfinite(out[0][k].would_be) && out[0][k].would_be > 0);
            }
        }
    /* the stored rows agree bit for bit: eps_after of every charge */
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(f->db,
                                        "SELECT a.eps_after, b.eps_after, a.remaining_after, "
                                        "b.remaining_after FROM charges AS a JOIN charges AS b ON "
                                        "b.silo_id = :b AND b.seq = a.seq WHERE a.silo_id = :a",
                                        -1, &q, NULL),
                     SQLITE_OK);
    for (int k = 0; k < 2; k++) {
        size_t rows = 0;
        sqlite3_bind_int64(q, sqlite3_bind_parameter_index(q, ":a"), id[0][k]);
        sqlite3_bind_int64(q, sqlite3_bind_parameter_index(q, ":b"), id[1][k]);
        while (sqlite3_step(q) == SQLITE_ROW) {
            assert_true(same_dbl(sqlite3_column_double(q, 0), sqlite3_column_double(q, 1)));
            assert_true(same_dbl(sqlite3_column_double(q, 2), sqlite3_column_double(q, 3)));
            rows++;
        }
        assert_int_equal(rows, k == 0 ? 18 : 15);
        sqlite3_reset(q);
    }
    sqlite3_finalize(q);
    /* Hits, first pass (steps counted from 0): the charges after their dry runs at steps 1, 7 and
     * 12 (A and B); at step 4 B only (A was charged in between) and at step 10 B only (A's delta
     * changed). The dry run at 6 misses A: what the rolled-back batch computed was forgotten with
     * its rows. No hit without the cache. */
    assert_int_equal(hits[0], 8);
    assert_int_equal(hits[1], 0);
    for (int k = 0; k < 4; k++)
        acct_event_free(ev[k]);
}

/* ---- the committer's log trees, advanced in memory ---- */

/* The figures of a charge that depend on the silo's log (would_be, spent_eps_after,
 * remaining_after: the refinement composes the log's tree, and spent_eps_after is at least the
 * previous row's) are the same whether the committer advanced the silo's tree and remembered the
 * previous row's figures itself (lg_charge_append) or rebuilt both from SQL (a ledger reopened
 * before every charge). A batch refused after its first item was appended is rolled back: the
 * tree advanced by that item and its remembered figures must be forgotten; its event is larger
 * than the others, so a tree or a previous eps_after kept from it would show in the next charge.
 */
static void trees_advanced_in_memory_equal_trees_rebuilt_from_the_log(void **state)
{
    ledger_fixture *f = *state;
    ledger_budget b = opt_budget();
    ledger_budget small = b;
    small.epsilon = 1.0;
    ledger_silo_view v;
    char tok[LEDGER_TOKEN_BUF];
    dp_err e;
    dp_err_clear(&e);
    int64_t a_id, b_id, cap_id;
    assert_int_equal(ledger_silo_create(f->l, "kept", &b, &v, tok, &e), DP_OK);
    a_id = v.id;
    assert_int_equal(ledger_silo_create(f->l, "rebuilt", &b, &v, tok, &e), DP_OK);
    b_id = v.id;
    assert_int_equal(ledger_silo_create(f->l, "capped", &small, &v, tok, &e), DP_OK);
    cap_id = v.id;
    uint64_t seed = 91;
    acct_event *ev[3] = {
        dpsgd_round(&seed), dpsgd_round(&seed),
        acct_event_self_composed(400, acct_event_poisson(0.05, acct_event_gaussian(0.8)))};
    enum { N = 9 };
    ledger_charge_result kept[N], rebuilt[N];
    for (int pass = 0; pass < 2; pass++) {
        int64_t id = pass == 0 ? a_id : b_id;
        for (int i = 0; i < N; i++) {
            if (pass == 1) { /* a fresh committer: its trees and figures come from SQL */
                ledger_free(f->l);
                f->l = ledger_open(f->r.path, &e);
                assert_non_null(f->l);
            }
            if (i % 3 == 2) { /* appended, then rolled back with its batch */
                ledger_charge_req rq[2] = {
                    {.silo_id = id, .event = ev[2], .neighboring = ACCT_NB_ADD_REMOVE},
                    {.silo_id = cap_id, .event = ev[2], .neighboring = ACCT_NB_ADD_REMOVE}};
                ledger_charge_result out[2];
                assert_int_equal(ledger_charge_batch(f->l, rq, 2, false, out, &e), DP_EBUDGET);
            }
            ledger_charge_req rq = {
                .silo_id = id, .event = ev[i % 2], .neighboring = ACCT_NB_ADD_REMOVE};
            ledger_charge_result *out = pass == 0 ? &kept[i] : &rebuilt[i];
            assert_int_equal(ledger_charge(f->l, &rq, false, out, &e), DP_OK);
        }
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(kept[i].seq, i + 1);
        assert_int_equal(rebuilt[i].seq, i + 1);
        assert_true(same_dbl(kept[i].cost_eps, rebuilt[i].cost_eps));
        assert_true(same_dbl(kept[i].would_be, rebuilt[i].would_be));
        assert_true(same_dbl(kept[i].spent_eps_after, rebuilt[i].spent_eps_after));
        assert_true(same_dbl(kept[i].remaining_after, rebuilt[i].remaining_after));
        if (i > 0)
            assert_true(kept[i].spent_eps_after > kept[i - 1].spent_eps_after);
    }
    for (int k = 0; k < 3; k++)
        acct_event_free(ev[k]);
}

/* The per-order totals (migration 0013): stored as a checkpoint every LEDGER_TOTALS_EVERY rows of
 * a silo and completed from the log's rows after it. A silo charged by a committer that keeps its
 * totals in memory and a twin charged by a fresh committer before every charge (its totals read
 * from the checkpoint and the rows after it) give the same figures bit for bit across several
 * checkpoints, with a rolled-back batch now and then; the stored checkpoint is where the rule puts
 * it, and verification (the whole log summed again) finds both consistent. */
static void totals_from_the_checkpoint_equal_totals_kept_in_memory(void **state)
{
    ledger_fixture *f = *state;
    ledger_budget b = opt_budget();
    ledger_budget small = b;
    small.epsilon = 1.0;
    ledger_silo_view v;
    char tok[LEDGER_TOKEN_BUF];
    dp_err e;
    dp_err_clear(&e);
    int64_t ids[2], cap_id;
    assert_int_equal(ledger_silo_create(f->l, "in-memory", &b, &v, tok, &e), DP_OK);
    ids[0] = v.id;
    assert_int_equal(ledger_silo_create(f->l, "from-checkpoint", &b, &v, tok, &e), DP_OK);
    ids[1] = v.id;
    assert_int_equal(ledger_silo_create(f->l, "capped", &small, &v, tok, &e), DP_OK);
    cap_id = v.id;
    uint64_t seed = 17;
    acct_event *ev[4] = {
        dpsgd_round(&seed), dpsgd_round(&seed), acct_event_gaussian(3.7),
        acct_event_self_composed(400, acct_event_poisson(0.05, acct_event_gaussian(0.8)))};
    enum { N = 2 * LEDGER_TOTALS_EVERY + 5 };
    ledger_charge_result out[2][N];
    ledger_silo_view views[2][N];
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < N; i++) {
            if (pass == 1) { /* a fresh committer: the totals come from SQL */
                ledger_free(f->l);
                f->l = ledger_open(f->r.path, &e);
                assert_non_null(f->l);
            }
            if (i % 7 == 3) { /* appended, then rolled back with its batch */
                ledger_charge_req rq[2] = {
                    {.silo_id = ids[pass], .event = ev[3], .neighboring = ACCT_NB_ADD_REMOVE},
                    {.silo_id = cap_id, .event = ev[3], .neighboring = ACCT_NB_ADD_REMOVE}};
                ledger_charge_result o[2];
                assert_int_equal(ledger_charge_batch(f->l, rq, 2, false, o, &e), DP_EBUDGET);
            }
            ledger_charge_req rq = {
                .silo_id = ids[pass], .event = ev[i % 3], .neighboring = ACCT_NB_ADD_REMOVE};
            assert_int_equal(ledger_charge(f->l, &rq, false, &out[pass][i], &e), DP_OK);
            assert_int_equal(ledger_silo_get(f->l, f->conn, ids[pass], &views[pass][i], &e), DP_OK);
        }
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(out[1][i].seq, i + 1);
        assert_true(same_dbl(out[0][i].would_be, out[1][i].would_be));
        assert_true(same_dbl(out[0][i].spent_eps_after, out[1][i].spent_eps_after));
        assert_true(same_dbl(out[0][i].remaining_after, out[1][i].remaining_after));
        assert_true(same_dbl(views[0][i].spent_eps, views[1][i].spent_eps));
        assert_true(same_dbl(views[0][i].remaining, views[1][i].remaining));
    }
    sqlite3_stmt *q = NULL;
    assert_int_equal(
        sqlite3_prepare_v2(f->db, "SELECT seq FROM silo_totals WHERE silo_id = :s", -1, &q, NULL),
        SQLITE_OK);
    for (int k = 0; k < 2; k++) {
        sqlite3_bind_int64(q, 1, ids[k]);
        assert_int_equal(sqlite3_step(q), SQLITE_ROW);
        int64_t ck = sqlite3_column_int64(q, 0);
        sqlite3_reset(q);
        /* the newest multiple of the rule at or below N: rows after it are read from the log */
        assert_int_equal((ck + ids[k]) % LEDGER_TOTALS_EVERY, 0);
        assert_true(ck <= N && ck > N - LEDGER_TOTALS_EVERY && ck >= LEDGER_TOTALS_EVERY);
        ledger_verify vr;
        assert_int_equal(ledger_silo_verify(f->l, f->conn, ids[k], &vr, &e), DP_OK);
        assert_true(vr.consistent);
        assert_int_equal(vr.n_charges_log, N);
    }
    sqlite3_finalize(q);
    for (int k = 0; k < 4; k++)
        acct_event_free(ev[k]);
}

/* A database written before migration 0013 (the total in silos.spent_rdp) is upgraded by 0013 and
 * 0014: the checkpoint is the old total at the old n_charges, the same bytes; the old rows keep
 * their ids; the ledger reads the silo, verifies it, and charges it further across a checkpoint
 * (a retried key replayed, the same key with another request refused) with verification still
 * consistent. */
static void a_database_written_before_0013_is_upgraded(void **state)
{
    (void)state;
    char dir[64], path[128];
    snprintf(dir, sizeof dir, "/tmp/dpsilo-mig13-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t.db", dir);
    size_t n_old = 0;
    while (n_old < EMBED_MIGRATIONS_N && strncmp(EMBED_MIGRATIONS[n_old].name, "0013", 4) < 0)
        n_old++;
    assert_true(n_old < EMBED_MIGRATIONS_N);
    dp_err e;
    dp_err_clear(&e);
    store *st = store_open(path, 1, EMBED_MIGRATIONS, n_old, &e);
    assert_non_null(st);
    store_free(st);
    /* What the ledger wrote before 0013, by hand: the grid, a silo with three charges (inline
     * curves) and its total summed as the ledger summed it. */
    const double *orders = NULL;
    size_t n = acct_rdp_default_orders(&orders);
    double curve[3][LEDGER_MAX_ORDERS], total[LEDGER_MAX_ORDERS] = {0};
    for (size_t k = 0; k < 3; k++) {
        for (size_t i = 0; i < n; i++)
            curve[k][i] = 0.013 * (double)(k + 1) * orders[i] / (1.0 + 0.1 * (double)i);
        lg_vec_add_up(total, curve[k], n);
    }
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO ledger_orders (id, orders) VALUES (1, ?)",
                                        -1, &q, NULL),
                     SQLITE_OK);
    sqlite3_bind_blob(q, 1, orders, (int)(n * sizeof(double)), SQLITE_STATIC);
    assert_int_equal(sqlite3_step(q), SQLITE_DONE);
    sqlite3_finalize(q);
    assert_int_equal(
        sqlite3_prepare_v2(db,
                           "INSERT INTO silos (id, name, created_at, budget_kind, accountant, "
                           "conversion, epsilon, delta, n_charges, spent_rdp, spent_rho) VALUES "
                           "(5, 'old', 1, 'eps_delta', 'rdp', ?, 100, 1e-5, 3, ?, 0)",
                           -1, &q, NULL),
        SQLITE_OK);
    sqlite3_bind_text(q, 1, acct_conversion_name(ACCT_CONV_BALLE2020), -1, SQLITE_STATIC);
    sqlite3_bind_blob(q, 2, total, (int)(n * sizeof(double)), SQLITE_STATIC);
    assert_int_equal(sqlite3_step(q), SQLITE_DONE);
    sqlite3_finalize(q);
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "INSERT INTO charges (silo_id, created_at, request_hash, "
                                        "event, neighboring, cost_rdp, cost_rho, seq, rho_after) "
                                        "VALUES (5, 1, zeroblob(32), '{\"type\":\"gaussian\","
                                        "\"sigma\":9}', 'add_remove', ?, 0, ?, 0)",
                                        -1, &q, NULL),
                     SQLITE_OK);
    for (int k = 0; k < 3; k++) {
        sqlite3_bind_blob(q, 1, curve[k], (int)(n * sizeof(double)), SQLITE_STATIC);
        sqlite3_bind_int(q, 2, k + 1);
        assert_int_equal(sqlite3_step(q), SQLITE_DONE);
        sqlite3_reset(q);
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    /* The daemon's runner applies 0013 and later. */
    st = store_open(path, 1, EMBED_MIGRATIONS, EMBED_MIGRATIONS_N, &e);
    assert_non_null(st);
    store_conn *c = store_conn_borrow(st, &e);
    assert_non_null(c);
    assert_int_equal(sqlite3_prepare_v2(store_conn_db(c),
                                        "SELECT seq, spent_rdp FROM silo_totals WHERE silo_id = 5",
                                        -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int64(q, 0), 3);
    assert_int_equal(sqlite3_column_bytes(q, 1), (int)(n * sizeof(double)));
    assert_memory_equal(sqlite3_column_blob(q, 1), total, n * sizeof(double));
    sqlite3_finalize(q);
    ledger *l = ledger_open(path, &e);
    assert_non_null(l);
    ledger_verify vr;
    assert_int_equal(ledger_silo_verify(l, c, 5, &vr, &e), DP_OK);
    assert_true(vr.consistent);
    assert_int_equal(vr.n_charges_log, 3);
    acct_event *ev = acct_event_gaussian(40.0);
    for (int i = 0; i < LEDGER_TOTALS_EVERY + 2; i++) {
        /* keyed and keyless charges (migration 0014: the key's uniqueness is a partial index) */
        ledger_charge_req rq = {.silo_id = 5,
                                .event = ev,
                                .neighboring = ACCT_NB_ADD_REMOVE,
                                .idempotency_key = i == 1 || i == 3 ? "k" : NULL};
        ledger_charge_result r;
        assert_int_equal(ledger_charge(l, &rq, false, &r, &e), DP_OK);
        assert_int_equal(r.seq, i == 3 ? 5 : 4 + i - (i > 3)); /* i = 3: "k" again, replayed */
        assert_true(r.replayed == (i == 3));
        if (i == 3) {
            rq.event = acct_event_gaussian(41.0); /* the same key, another request */
            assert_int_equal(ledger_charge(l, &rq, false, &r, &e), DP_ECONFLICT);
            acct_event_free((acct_event *)rq.event);
        }
    }
    acct_event_free(ev);
    /* the rows written before keep their ids (0014 rebuilt the table) */
    assert_int_equal(sqlite3_prepare_v2(store_conn_db(c),
                                        "SELECT group_concat(id) FROM (SELECT id FROM charges "
                                        "WHERE silo_id = 5 AND seq <= 3 ORDER BY seq)",
                                        -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "1,2,3");
    sqlite3_finalize(q);
    assert_int_equal(ledger_silo_verify(l, c, 5, &vr, &e), DP_OK);
    assert_true(vr.consistent);
    assert_int_equal(vr.n_charges_log, LEDGER_TOTALS_EVERY + 4);
    ledger_free(l);
    store_conn_return(st, c);
    store_free(st);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* A tree rebuilt from the log lists its distinct events in text order (strcmp, SQLite's BINARY
 * collation: the order the GROUP BY event it replaced gave, which the rounded-up sums of the
 * refined figures depend on), whatever order they first appear in, with each one's count. */
static void a_rebuilt_tree_lists_its_events_in_text_order(void **state)
{
    ledger_fixture *f = *state;
    ledger_budget b = opt_budget();
    ledger_silo_view v;
    char tok[LEDGER_TOKEN_BUF];
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_create(f->l, "ordered", &b, &v, tok, &e), DP_OK);
    acct_event *ev[4] = {acct_event_zcdp(0.0017), acct_event_gaussian(7.3),
                         acct_event_self_composed(3, acct_event_laplace(12.5)),
                         acct_event_pure(0.25)};
    const int seq[] = {0, 2, 1, 3, 2, 0, 2};
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        ledger_charge_req rq = {
            .silo_id = v.id, .event = ev[seq[i]], .neighboring = ACCT_NB_ADD_REMOVE};
        ledger_charge_result out;
        assert_int_equal(ledger_charge(f->l, &rq, false, &out, &e), DP_OK);
    }
    log_tree t;
    memset(&t, 0, sizeof t);
    lg_log_tree_build(f->db, v.id, 7, &t);
    assert_true(t.usable);
    assert_int_equal(t.silo, v.id);
    assert_int_equal(t.n, 4);
    uint64_t total = 0;
    for (size_t i = 0; i < t.n; i++) {
        if (i > 0)
            assert_true(strcmp(t.text[i - 1], t.text[i]) < 0);
        total += t.node[i]->count;
    }
    assert_int_equal(total, 7);
    lg_log_tree_clear(&t);
    for (int k = 0; k < 4; k++)
        acct_event_free(ev[k]);
}

/* ---- active claims, summed in id order ---- */

/* A silo's held total sums its active claims in ascending id order (rounded-up sums, whose last
 * bits depend on the order), whether its index gives the claims in that order (one time-to-live,
 * made in turn) or in another (later claims expiring first: lg_held_load_st's sorted pass). Two
 * silos hold the same claims, made in the same order, one with one time-to-live and one with each
 * claim expiring before the previous one; more than LEDGER_REFINE_MAX_EVENTS of them, so that the
 * held figures are the grid conversions of those sums alone. Every figure that sums them (each
 * claim's reserved and would_be, a dry run's, the view's held_eps) is the same bits. */
static void held_claims_are_summed_in_id_order_whatever_their_expiry(void **state)
{
    ledger_fixture *f = *state;
    ledger_budget b = opt_budget();
    ledger_silo_view v;
    char tok[LEDGER_TOKEN_BUF];
    dp_err e;
    dp_err_clear(&e);
    int64_t silo[2];
    assert_int_equal(ledger_silo_create(f->l, "one-ttl", &b, &v, tok, &e), DP_OK);
    silo[0] = v.id;
    assert_int_equal(ledger_silo_create(f->l, "reversed", &b, &v, tok, &e), DP_OK);
    silo[1] = v.id;
    enum { K = LEDGER_REFINE_MAX_EVENTS + 3 };
    uint64_t seed = 4242;
    acct_event *ev[K];
    double fwd[LEDGER_MAX_ORDERS] = {0}, rev[LEDGER_MAX_ORDERS] = {0};
    op_item it[K];
    for (int k = 0; k < K; k++) {
        ev[k] = k % 3 == 2 ? random_leaf(&seed) : dpsgd_round(&seed);
        assert_int_equal(prepare(f->l, ev[k], ACCT_NB_ADD_REMOVE, &it[k]), DP_OK);
    }
    for (int k = 0; k < K; k++) {
        lg_vec_add_up(fwd, it[k].cost_rdp, f->l->n_orders);
        lg_vec_add_up(rev, it[K - 1 - k].cost_rdp, f->l->n_orders);
    }
    /* the order shows in these sums: otherwise this test could not tell */
    assert_true(memcmp(fwd, rev, f->l->n_orders * sizeof(double)) != 0);
    for (int k = 0; k < K; k++) {
        ledger_charge_result fig[2];
        for (int s = 0; s < 2; s++) {
            ledger_charge_req rq = {
                .silo_id = silo[s], .event = ev[k], .neighboring = ACCT_NB_ADD_REMOVE};
            ledger_claim_view cv;
            int64_t ttl_ms = s == 0 ? 600000 : 600000 - 5000 * (int64_t)k;
            assert_int_equal(ledger_claim_create(f->l, &rq, ttl_ms, &cv, &fig[s], &e), DP_OK);
        }
        assert_true(same_dbl(fig[0].would_be, fig[1].would_be));
        assert_true(same_dbl(fig[0].reserved, fig[1].reserved));
    }
    ledger_charge_result dry[2];
    ledger_silo_view view[2];
    for (int s = 0; s < 2; s++) {
        ledger_charge_req rq = {
            .silo_id = silo[s], .event = ev[0], .neighboring = ACCT_NB_ADD_REMOVE};
        assert_int_equal(ledger_charge(f->l, &rq, true, &dry[s], &e), DP_OK);
        assert_int_equal(ledger_silo_get(f->l, f->conn, silo[s], &view[s], &e), DP_OK);
        assert_int_equal(view[s].n_active_claims, K);
    }
    assert_true(same_dbl(dry[0].would_be, dry[1].would_be));
    assert_true(same_dbl(dry[0].reserved, dry[1].reserved));
    assert_true(same_dbl(view[0].held_eps, view[1].held_eps));
    assert_true(same_dbl(view[0].remaining, view[1].remaining));
    assert_true(view[0].held_eps > 0 && isfinite(view[0].held_eps));
    for (int k = 0; k < K; k++) {
        item_clear(&it[k]);
        acct_event_free(ev[k]);
    }
}

/* ---- what an allocation failure leaves behind ---- */

/* Figures computed for lack of memory are not kept as the log's or the event's: the committer's
 * log tree (a failed build used to stay "current" but unusable, so the silo's figures stayed on the
 * grid until its next charge), the event's refined cost in the cost cache, and the view's refined
 * figure. For N = 1, 2, ...: a fresh committer (no tree, no cache), a dry run and a read with the
 * Nth allocation failing (any answer), then the same without failure must give the figures of a
 * fresh committer that never failed, bit for bit. */
static void figures_after_an_allocation_failure_equal_figures_without(void **state)
{
    ledger_fixture *f = *state;
    ledger_budget b = opt_budget();
    ledger_silo_view v;
    char tok[LEDGER_TOKEN_BUF];
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_create(f->l, "failing", &b, &v, tok, &e), DP_OK);
    int64_t id = v.id;
    uint64_t seed = 5150;
    acct_event *ev[2] = {dpsgd_round(&seed), dpsgd_round(&seed)};
    for (int i = 0; i < 5; i++) {
        ledger_charge_req rq = {
            .silo_id = id, .event = ev[i % 2], .neighboring = ACCT_NB_ADD_REMOVE};
        ledger_charge_result out;
        assert_int_equal(ledger_charge(f->l, &rq, false, &out, &e), DP_OK);
    }
    ledger_charge_req rq = {.silo_id = id, .event = ev[0], .neighboring = ACCT_NB_ADD_REMOVE};
    ledger_charge_result ref, got;
    ledger_silo_view ref_v, got_v;
    for (long nth = 0;; nth++) { /* nth = 0: the reference */
        ledger_free(f->l);
        f->l = ledger_open(f->r.path, &e);
        assert_non_null(f->l);
        long before = dp_alloc_failures();
        if (nth > 0) {
            dp_alloc_fail_after(nth);
            (void)ledger_charge(f->l, &rq, true, &got, &e);
            (void)ledger_silo_get(f->l, f->conn, id, &got_v, &e);
            dp_alloc_fail_after(0);
        }
        bool injected = dp_alloc_failures() != before;
        dp_err_clear(&e);
        assert_int_equal(ledger_charge(f->l, &rq, true, nth == 0 ? &ref : &got, &e), DP_OK);
        assert_int_equal(ledger_silo_get(f->l, f->conn, id, nth == 0 ? &ref_v : &got_v, &e), DP_OK);
        if (nth == 0) {
            /* the refinement matters here: the figures are below the grid's */
            assert_true(ref.would_be > 0 && isfinite(ref.would_be));
            assert_true(!isnan(ref_v.spent_order) && ref_v.spent_order != floor(ref_v.spent_order));
            continue;
        }
        if (!same_dbl(ref.would_be, got.would_be) || !same_dbl(ref.cost_eps, got.cost_eps) ||
            !same_dbl(ref_v.spent_eps, got_v.spent_eps))
            fail_msg("allocation %ld failing: would_be %a (want %a), cost_eps %a (want %a), "
                     "spent_eps %a (want %a)",
                     nth, got.would_be, ref.would_be, got.cost_eps, ref.cost_eps, got_v.spent_eps,
                     ref_v.spent_eps);
        if (!injected)
            break;
        assert_true(nth < 100000);
    }
    acct_event_free(ev[0]);
    acct_event_free(ev[1]);
}

/* ---- threads ---- */

enum { TH_EVENTS = 24, TH_THREADS = 6, TH_ROUNDS = 3 };

typedef struct th_arg {
    ledger *l;
    acct_event *const *ev;
    const op_item *fresh; /* TH_EVENTS costs computed with the cache off */
    size_t first;
    int bad;
} th_arg;

static void *th_prepare(void *p)
{
    th_arg *a = p;
    for (size_t r = 0; r < TH_ROUNDS * TH_EVENTS; r++) {
        size_t i = (a->first + r * 5) % TH_EVENTS;
        op_item it;
        if (prepare(a->l, a->ev[i], ACCT_NB_ADD_REMOVE, &it) != DP_OK ||
            !same_cost(a->l, &it, &a->fresh[i]))
            a->bad++;
        item_clear(&it);
    }
    return NULL;
}

static void threads_share_the_cache_without_wrong_answers(void **state)
{
    ledger_fixture *f = *state;
    ledger *l = f->l;
    uint64_t seed = 4242;
    acct_event *ev[TH_EVENTS];
    static op_item fresh[TH_EVENTS];
    ledger_curve_cache_enable(l, false);
    for (size_t i = 0; i < TH_EVENTS; i++) {
        ev[i] = i % 2 ? dpsgd_round(&seed) : random_leaf(&seed);
        assert_int_equal(prepare(l, ev[i], ACCT_NB_ADD_REMOVE, &fresh[i]), DP_OK);
    }
    ledger_curve_cache_enable(l, true);
    pthread_t th[TH_THREADS];
    th_arg arg[TH_THREADS];
    for (size_t t = 0; t < TH_THREADS; t++) {
        arg[t] = (th_arg){.l = l, .ev = ev, .fresh = fresh, .first = t * 3};
        assert_int_equal(pthread_create(&th[t], NULL, th_prepare, &arg[t]), 0);
    }
    for (size_t t = 0; t < TH_THREADS; t++) {
        assert_int_equal(pthread_join(th[t], NULL), 0);
        assert_int_equal(arg[t].bad, 0);
    }
    ledger_curve_stats s;
    ledger_curve_cache_stats(l, &s);
    assert_int_equal(s.hits + s.misses, (uint64_t)TH_THREADS * TH_ROUNDS * TH_EVENTS);
    assert_true(s.misses >= TH_EVENTS); /* each event at least once; racing misses may add some */
    assert_int_equal(s.entries, TH_EVENTS);
    for (size_t i = 0; i < TH_EVENTS; i++) {
        item_clear(&fresh[i]);
        acct_event_free(ev[i]);
    }
}

typedef struct churn_arg {
    lg_curve_cache *c;
    uint64_t seed;
    int bad;
} churn_arg;

static void *th_churn(void *p)
{
    churn_arg *a = p;
    for (int step = 0; step < 3000; step++) {
        uint32_t i = (uint32_t)(rng_next(&a->seed) % 64);
        uint8_t k[DP_SHA256_DIGEST_BYTES];
        double v[9], got[9], rho;
        key_of(i, k);
        curve_of(i, 9, v);
        if (lg_curve_cache_get(a->c, k, got, &rho)) {
            if (memcmp(got, v, sizeof v) != 0 || rho != (double)i)
                a->bad++;
        } else {
            lg_curve_cache_put(a->c, k, v, (double)i);
        }
        if (step % 500 == 0)
            lg_curve_cache_put_refined(a->c, k, 1e-5, ACCT_CONV_OPTIMAL, (double)i);
    }
    return NULL;
}

static void threads_churning_a_small_cache_never_see_a_wrong_curve(void **state)
{
    (void)state;
    lg_curve_cache *c = lg_curve_cache_alloc(8, 9);
    assert_non_null(c);
    pthread_t th[4];
    churn_arg arg[4];
    for (size_t t = 0; t < 4; t++) {
        arg[t] = (churn_arg){.c = c, .seed = 1000 + t};
        assert_int_equal(pthread_create(&th[t], NULL, th_churn, &arg[t]), 0);
    }
    for (size_t t = 0; t < 4; t++) {
        assert_int_equal(pthread_join(th[t], NULL), 0);
        assert_int_equal(arg[t].bad, 0);
    }
    ledger_curve_stats s;
    lg_curve_cache_stats(c, &s);
    assert_int_equal(s.hits + s.misses, 4 * 3000);
    assert_true(s.entries <= 8);
    lg_curve_cache_free(c);
}

int main(void)
{
    dp_log_set_level(DP_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(cached_costs_are_bit_identical_to_fresh_ones, setup,
                                        teardown),
        cmocka_unit_test(the_key_tells_apart_what_changes_the_cost),
        cmocka_unit_test(a_full_set_evicts_its_least_recently_used_entry),
        cmocka_unit_test(a_small_cache_under_churn_answers_right_or_misses),
        cmocka_unit_test_setup_teardown(charges_with_and_without_the_cache_agree_bit_for_bit, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_dry_runs_figure_is_reused_only_for_the_same_log, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(trees_advanced_in_memory_equal_trees_rebuilt_from_the_log,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(totals_from_the_checkpoint_equal_totals_kept_in_memory,
                                        setup, teardown),
        cmocka_unit_test(a_database_written_before_0013_is_upgraded),
        cmocka_unit_test_setup_teardown(a_rebuilt_tree_lists_its_events_in_text_order, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(held_claims_are_summed_in_id_order_whatever_their_expiry,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(figures_after_an_allocation_failure_equal_figures_without,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(threads_share_the_cache_without_wrong_answers, setup,
                                        teardown),
        cmocka_unit_test(threads_churning_a_small_cache_never_see_a_wrong_curve),
    };
    return cmocka_run_group_tests_name("service_ledger_curves", tests, NULL, NULL);
}
