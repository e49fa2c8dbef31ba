/*
 * Unit tests for service/db/draws.c (the tuning_draws table) and service/db/bind.c (the sticky
 * named binder it uses): a draw is stored and read back field for field, optional columns are SQL
 * NULL, the insert (the body of a db/writer apply function, run through the ledger's writer as
 * dpsilod runs it) is committed with the writer's group and rolled back alone when the row is
 * refused, and the access
 * rule (the admin, the creator, or any token of the creator's silo; everyone else "not found")
 * holds. Silos and tokens are made through the ledger (tests/support/ledger_fixture.h) on a fresh
 * database file migrated by the daemon's own runner.
 */
#include "tests/support/test_util.h"

#include <stdlib.h>
#include <string.h>

#include "common/dp_math.h"
#include "common/dp_alloc.h"
#include "service/db/bind.h"
#include "service/db/draws.h"
#include "service/db/writer.h"
#include "tests/support/ledger_fixture.h"

typedef ledger_fixture_silo silo_tok;

static int setup(void **state)
{
    ledger_fixture *fx = calloc(1, sizeof *fx);
    if (fx == NULL || ledger_fixture_open(fx) != 0)
        return -1;
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    ledger_fixture *fx = *state;
    ledger_fixture_close(fx);
    free(fx);
    return 0;
}

/* A silo with its first token. */
static silo_tok make_silo(ledger_fixture *fx, const char *name)
{
    silo_tok s;
    assert_int_equal(ledger_fixture_make_silo(fx, name, 2.385, 1e-6, &s), 0);
    return s;
}

static draw_new a_draw(int64_t creator)
{
    draw_new d = {.created_at_ms = 1764201600123,
                  .request_id = "req-7",
                  .distribution = "{\"poisson\":{\"mean\":3.5}}",
                  .runs = 4,
                  .expected_runs = 3.5,
                  .prob_no_run = 0.030197383422318501,
                  .grid_size = 12,
                  .candidates = "[0,11,5,5]",
                  .label = "learning rate",
                  .creator_token_id = creator};
    return d;
}

/* A draws_insert as dpsilod runs it: the body of an apply function on the database's writer. */
typedef struct insert_arg {
    const draw_new *d;
    int64_t id;
} insert_arg;

static int insert_apply(sqlite3 *db, void *arg, dp_err *err)
{
    insert_arg *a = arg;
    return draws_insert(db, a->d, &a->id, "t", err);
}

/* Runs draws_insert through the ledger's writer; the code, *id the row's id. */
static int insert_rc(ledger_fixture *fx, const draw_new *d, int64_t *id, dp_err *e)
{
    insert_arg a = {d, 0};
    int rc = db_writer_run(ledger_writer(fx->l), insert_apply, &a, e);
    *id = a.id;
    return rc;
}

static int64_t insert(ledger_fixture *fx, const draw_new *d)
{
    int64_t id = 0;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(insert_rc(fx, d, &id, &e), DP_OK);
    assert_true(id > 0);
    return id;
}

/* 1 when who finds draw id, 0 when it is "not found"; fails the test on an error. */
static int sees(ledger_fixture *fx, int64_t id, draw_viewer who)
{
    draw_row r;
    bool found = true;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(draws_get(fx->conn, id, &who, &r, &found, "t", &e), DP_OK);
    if (!found)
        assert_null(r.distribution);
    draw_row_clear(&r);
    return found ? 1 : 0;
}

static int64_t count_rows(ledger_fixture *fx, const char *sql)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(fx->db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

static void a_draw_reads_back_field_for_field(void **state)
{
    ledger_fixture *fx = *state;
    silo_tok a = make_silo(fx, "a");
    draw_new d = a_draw(a.token_id);
    int64_t id = insert(fx, &d);
    draw_row r;
    bool found = false;
    dp_err e;
    dp_err_clear(&e);
    draw_viewer admin = {.admin = true};
    assert_int_equal(draws_get(fx->conn, id, &admin, &r, &found, "t", &e), DP_OK);
    assert_true(found);
    assert_int_equal(r.id, id);
    assert_int_equal(r.created_at_ms, 1764201600123);
    assert_string_equal(r.distribution, d.distribution);
    assert_int_equal(r.runs, 4);
    assert_true(r.expected_runs == 3.5); /* stored and read as the same double */
    assert_true(r.prob_no_run == d.prob_no_run);
    assert_int_equal(r.grid_size, 12);
    assert_string_equal(r.candidates, "[0,11,5,5]");
    assert_string_equal(r.label, "learning rate");
    draw_row_clear(&r);
    assert_null(r.distribution);
    draw_row_clear(NULL);
    /* the request id and the creator are on file (the audit), though a read does not return them */
    assert_int_equal(count_rows(fx, "SELECT count(*) FROM tuning_draws WHERE request_id = "
                                    "'req-7' AND creator_token_id IS NOT NULL"),
                     1);
}

static void absent_options_are_sql_null_and_read_back_as_none(void **state)
{
    ledger_fixture *fx = *state;
    draw_new d = a_draw(0);
    d.grid_size = 0;
    d.candidates = NULL;
    d.label = NULL;
    d.request_id = NULL;
    int64_t id = insert(fx, &d);
    assert_int_equal(count_rows(fx, "SELECT count(*) FROM tuning_draws WHERE grid_size IS NULL "
                                    "AND candidates IS NULL AND label IS NULL AND "
                                    "creator_token_id IS NULL AND request_id = '-'"),
                     1);
    draw_row r;
    bool found = false;
    dp_err e;
    dp_err_clear(&e);
    draw_viewer admin = {.admin = true};
    assert_int_equal(draws_get(fx->conn, id, &admin, &r, &found, "t", &e), DP_OK);
    assert_true(found);
    assert_int_equal(r.grid_size, 0);
    assert_null(r.candidates);
    assert_null(r.label);
    draw_row_clear(&r);
}

static void the_insert_commits_and_a_refused_row_is_rolled_back(void **state)
{
    ledger_fixture *fx = *state;
    draw_new d = a_draw(0);
    insert(fx, &d);
    assert_int_not_equal(sqlite3_get_autocommit(fx->db), 0); /* no transaction left open */
    dp_err e;
    dp_err_clear(&e);
    store_conn *other = store_conn_open_extra(fx->r.st, &e); /* another connection sees it */
    assert_non_null(other);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(store_conn_db(other), "SELECT count(*) FROM tuning_draws",
                                        -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int64(st, 0), 1);
    sqlite3_finalize(st);
    store_conn_close(other);

    d.runs = -1; /* CHECK (runs >= 0) */
    int64_t id = 0;
    assert_int_equal(insert_rc(fx, &d, &id, &e), DP_EINTERNAL);
    assert_string_equal(e.msg, "database error"); /* the SQLite detail is logged, not returned */
    assert_int_not_equal(sqlite3_get_autocommit(fx->db), 0);
    assert_int_equal(count_rows(fx, "SELECT count(*) FROM tuning_draws"), 1);
    /* the connection is usable afterwards */
    d.runs = 2;
    insert(fx, &d);
    assert_int_equal(count_rows(fx, "SELECT count(*) FROM tuning_draws"), 2);
}

static void the_admin_the_creator_and_its_silo_see_a_draw_and_nobody_else(void **state)
{
    ledger_fixture *fx = *state;
    silo_tok a = make_silo(fx, "a"), b = make_silo(fx, "b");
    draw_new d = a_draw(a.token_id);
    int64_t by_a = insert(fx, &d);
    d.creator_token_id = 0; /* made with --auth off: no creator */
    int64_t anonymous = insert(fx, &d);

    /* silo a rotates its token: the new token is another token of the creator's silo */
    char token2[LEDGER_TOKEN_BUF];
    int64_t a2_id = 0, n_revoked = 0;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_token_rotate(fx->l, a.silo_id, token2, &a2_id, &n_revoked, &e),
                     DP_OK);
    assert_int_equal(n_revoked, 1);

    draw_viewer admin = {.admin = true, .token_id = 1};
    draw_viewer creator = {.token_id = a.token_id, .silo_id = a.silo_id};
    draw_viewer same_silo = {.token_id = a2_id, .silo_id = a.silo_id};
    draw_viewer other_silo = {.token_id = b.token_id, .silo_id = b.silo_id};
    draw_viewer nobody = {0};
    assert_int_equal(sees(fx, by_a, admin), 1);
    assert_int_equal(sees(fx, by_a, creator), 1);
    assert_int_equal(sees(fx, by_a, same_silo), 1);
    assert_int_equal(sees(fx, by_a, other_silo), 0);
    assert_int_equal(sees(fx, by_a, nobody), 0);
    /* a draw without a creator belongs to no silo: only the admin reads it */
    assert_int_equal(sees(fx, anonymous, admin), 1);
    assert_int_equal(sees(fx, anonymous, creator), 0);
    assert_int_equal(sees(fx, anonymous, other_silo), 0);
    /* the admin's silo_id is ignored, and an id that does not exist is "not found" for everyone */
    draw_viewer admin_b = {.admin = true, .token_id = 1, .silo_id = b.silo_id};
    assert_int_equal(sees(fx, by_a, admin_b), 1);
    assert_int_equal(sees(fx, anonymous + 1000, admin), 0);
}

static void a_failed_copy_is_out_of_memory_and_leaves_nothing(void **state)
{
    ledger_fixture *fx = *state;
    draw_new d = a_draw(0);
    int64_t id = insert(fx, &d);
    draw_viewer admin = {.admin = true};
    for (long n = 1; n <= 3; n++) { /* distribution, candidates, label */
        draw_row r;
        bool found = true;
        dp_err e;
        dp_err_clear(&e);
        dp_alloc_fail_after_here(n); /* the fixture's ledger threads allocate too */
        int rc = draws_get(fx->conn, id, &admin, &r, &found, "t", &e);
        dp_alloc_fail_after_here(0);
        assert_int_equal(rc, DP_ENOMEM);
        assert_false(found);
        assert_null(r.distribution);
        assert_null(r.candidates);
        assert_null(r.label);
    }
}

static void the_binder_binds_by_name_and_keeps_the_first_failure(void **state)
{
    ledger_fixture *fx = *state;
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(fx->db,
                                        "SELECT :b || '/' || :a || '/' || coalesce(:n, 'null')", -1,
                                        &st, NULL),
                     SQLITE_OK);
    store_binder b = store_bind_begin(st);
    store_bind_i64(&b, ":a", 7); /* by name, whatever the position */
    store_bind_text(&b, ":b", "x");
    store_bind_text(&b, ":n", NULL);
    assert_int_equal(store_bind_step(&b), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "x/7/null");
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);

    b = store_bind_begin(st);
    store_bind_i64_or_null(&b, ":n", true, 3);
    store_bind_double(&b, ":nope", 2.385); /* no such parameter: an error, and it sticks */
    store_bind_text(&b, ":a", "later binds are skipped");
    assert_int_equal(b.rc, SQLITE_RANGE);
    assert_int_equal(store_bind_step(&b), SQLITE_RANGE); /* and the statement is not stepped */
    assert_null(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_draw_reads_back_field_for_field, setup, teardown),
        cmocka_unit_test_setup_teardown(absent_options_are_sql_null_and_read_back_as_none, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(the_insert_commits_and_a_refused_row_is_rolled_back, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            the_admin_the_creator_and_its_silo_see_a_draw_and_nobody_else, setup, teardown),
        cmocka_unit_test_setup_teardown(a_failed_copy_is_out_of_memory_and_leaves_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(the_binder_binds_by_name_and_keeps_the_first_failure, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
