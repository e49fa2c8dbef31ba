/*
 * Unit tests for service/db/runs.c (the stored estimator runs) and migration 0008 (runs_lean): a
 * database created at schema 7 with runs in it keeps every row, its charged silos and their
 * visibility after 0008, and runs become append-only; runs_insert writes a run's silo rows itself
 * (no trigger parses the result any more), runs_list pages by visibility, runs_find_key tells a
 * retry from a reuse. Every test uses a database file in a fresh temporary directory.
 */
#include "tests/support/test_util.h"
#include "tests/support/tmpdb_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "service/db/runs.h"
#include "service/db/store.h"

typedef tmpdb fixture;

static int setup(void **state)
{
    return tmpdb_open(state, "runs");
}

static int teardown(void **state)
{
    return tmpdb_close(state);
}

/* The number of built-in migrations below version prefix (e.g. "0008"). */
static size_t migrations_before(const char *prefix)
{
    size_t n = 0;
    while (n < EMBED_MIGRATIONS_N && strncmp(EMBED_MIGRATIONS[n].name, prefix, 4) < 0)
        n++;
    return n;
}

static void exec_ok(store_conn *c, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(store_conn_db(c), sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        fail_msg("%s: %s", sql, msg ? msg : "?");
}

/* The first column of the first row of sql as text (copied into buf). */
static const char *q_text(store_conn *c, const char *sql, char *buf, size_t cap)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(store_conn_db(c), sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    const unsigned char *t = sqlite3_column_text(st, 0);
    snprintf(buf, cap, "%s", t ? (const char *)t : "(null)");
    sqlite3_finalize(st);
    return buf;
}

static const char SNAPSHOT[] =
    "SELECT group_concat(x, '|') FROM (SELECT quote(id) || quote(kind) || quote(created_at_ms) || "
    "quote(request_id) || quote(status) || quote(private) || quote(n_clients) || quote(params) || "
    "quote(data) || quote(result) || quote(creator_token_id) || quote(idempotency_key) || "
    "quote(request_hash) AS x FROM estimator_runs ORDER BY id)";
static const char SILOS[] = "SELECT group_concat(run_id || ':' || silo_id, ' ') FROM "
                            "(SELECT * FROM estimator_run_silos ORDER BY run_id, silo_id)";
static const char HASH_A[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const char HASH_B[] = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

static bool visible(store_conn *c, int64_t id, bool admin, int64_t tok, int64_t silo)
{
    runs_viewer v = {admin, tok, silo};
    runs_run r;
    bool found = true;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(runs_get(c, id, &v, "t", &r, &found, &e), DP_OK);
    runs_run_clear(&r);
    return found;
}

/* A database at schema 7 with two runs (one charged silos 4 and 7 and has a creator and a key, one
 * kept its data) migrates with every column of every row intact, the silo rows and the visibility
 * they give, the indexes, and append-only triggers on both tables. */
static void migration_0008_keeps_runs_and_makes_them_append_only(void **state)
{
    fixture *f = *state;
    size_t n_7 = migrations_before("0008");
    assert_true(n_7 < EMBED_MIGRATIONS_N);
    dp_err e;
    dp_err_clear(&e);
    store *s = store_open(f->path, 1, EMBED_MIGRATIONS, n_7, &e);
    assert_non_null(s);
    assert_int_equal(store_schema_version(s), 7);
    store_conn *c = store_conn_borrow(s, &e);
    assert_non_null(c);
    exec_ok(c, "INSERT INTO tokens (id, hash, role, silo_id, created_at) VALUES "
               "(5, zeroblob(32), 'admin', NULL, 0)");
    exec_ok(c, "INSERT INTO estimator_runs (kind, created_at_ms, request_id, status, private, "
               "n_clients, params, data, result, creator_token_id, idempotency_key, request_hash) "
               "VALUES ('gaussian', 1, 'r1', 'converged', 1, 2, '{\"seed\":3}', NULL, "
               "'{\"privacy\":{\"charges\":[{\"silo_id\":4,\"charge_id\":1},{\"silo_id\":7}]}}', "
               "5, 'a:k1', 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'),"
               "('beta', 2, 'r2', 'max_iter', 0, 1, '{}', '[{\"mean\":0.5}]', "
               "'{\"privacy\":null}', NULL, NULL, NULL)");
    char before[1024], after[1024], buf[256];
    q_text(c, SNAPSHOT, before, sizeof before);
    assert_string_equal(q_text(c, SILOS, buf, sizeof buf), "1:4 1:7");
    store_conn_return(s, c);
    store_free(s);

    s = store_open(f->path, 1, EMBED_MIGRATIONS, EMBED_MIGRATIONS_N, &e);
    assert_non_null(s);
    assert_true(store_schema_version(s) >= 8);
    c = store_conn_borrow(s, &e);
    assert_non_null(c);
    assert_string_equal(q_text(c, SNAPSHOT, after, sizeof after), before);
    assert_string_equal(q_text(c, SILOS, buf, sizeof buf), "1:4 1:7");
    assert_string_equal(q_text(c, "SELECT count(*) FROM pragma_foreign_key_check", buf, sizeof buf),
                        "0");
    assert_string_equal(q_text(c,
                               "SELECT group_concat(name, ' ') FROM (SELECT name FROM "
                               "sqlite_schema WHERE tbl_name IN ('estimator_runs', "
                               "'estimator_run_silos') AND type IN ('index', 'trigger') AND "
                               "name NOT LIKE 'sqlite_%' ORDER BY name)",
                               buf, sizeof buf),
                        "estimator_run_silos_no_delete estimator_run_silos_no_update "
                        "estimator_run_silos_silo estimator_runs_creator "
                        "estimator_runs_idempotency_key estimator_runs_no_delete "
                        "estimator_runs_no_update");
    /* visibility: the charged silo 7 and the creator token 5 see run 1; silo 9 does not */
    assert_true(visible(c, 1, false, 99, 7));
    assert_true(visible(c, 1, false, 5, 0));
    assert_false(visible(c, 1, false, 98, 9));
    assert_false(visible(c, 2, false, 5, 0));
    assert_true(visible(c, 2, true, 1, 0));
    runs_viewer adm = {true, 1, 0};
    runs_run r;
    bool found = false;
    assert_int_equal(runs_get(c, 2, &adm, "t", &r, &found, &e), DP_OK);
    assert_true(found);
    assert_string_equal(r.kind, "beta");
    assert_string_equal(r.status, "max_iter");
    assert_string_equal(r.data, "[{\"mean\":0.5}]");
    assert_string_equal(r.result, "{\"privacy\":null}");
    assert_false(r.priv);
    runs_run_clear(&r);
    /* the key survives: the same request is found, another one is a conflict */
    int fk = 0;
    int64_t id = 0;
    char *res = NULL;
    assert_int_equal(runs_find_key(store_conn_db(c), "a:k1", HASH_A, "t", &fk, &id, &res, &e),
                     DP_OK);
    assert_int_equal(fk, 1);
    assert_int_equal(id, 1);
    assert_non_null(strstr(res, "\"silo_id\":7"));
    free(res);
    assert_int_equal(runs_find_key(store_conn_db(c), "a:k1", HASH_B, "t", &fk, &id, &res, &e),
                     DP_OK);
    assert_int_equal(fk, 2);
    assert_int_equal(runs_find_key(store_conn_db(c), "a:k2", HASH_A, "t", &fk, &id, &res, &e),
                     DP_OK);
    assert_int_equal(fk, 0);
    /* append-only, and the params check is kept */
    sqlite3 *db = store_conn_db(c);
    assert_int_equal(0xff & sqlite3_exec(db, "UPDATE estimator_runs SET status = 'x'", 0, 0, 0),
                     SQLITE_CONSTRAINT);
    assert_int_equal(0xff & sqlite3_exec(db, "DELETE FROM estimator_runs WHERE id = 2", 0, 0, 0),
                     SQLITE_CONSTRAINT);
    assert_int_equal(0xff & sqlite3_exec(db, "UPDATE estimator_run_silos SET silo_id = 9", 0, 0, 0),
                     SQLITE_CONSTRAINT);
    assert_int_equal(0xff & sqlite3_exec(db, "DELETE FROM estimator_run_silos", 0, 0, 0),
                     SQLITE_CONSTRAINT);
    assert_int_equal(
        0xff & sqlite3_exec(db,
                            "INSERT INTO estimator_runs (kind, created_at_ms, request_id, "
                            "status, private, n_clients, params, result) VALUES "
                            "('beta', 3, 'r', 'converged', 0, 1, 'not json', '{}')",
                            0, 0, 0),
        SQLITE_CONSTRAINT);
    assert_string_equal(q_text(c, SNAPSHOT, after, sizeof after), before);
    store_conn_return(s, c);
    store_free(s);
}

/* runs_insert stores the row and its silos in the caller's transaction (a rollback leaves
 * neither); a result naming silos no longer records them by itself (0006's trigger is gone); the
 * list pages through what a viewer may see. */
static void insert_writes_silo_rows_and_list_pages_by_visibility(void **state)
{
    fixture *f = *state;
    dp_err e;
    dp_err_clear(&e);
    store *s = store_open(f->path, 1, EMBED_MIGRATIONS, EMBED_MIGRATIONS_N, &e);
    assert_non_null(s);
    store_conn *c = store_conn_borrow(s, &e);
    assert_non_null(c);
    sqlite3 *db = store_conn_db(c);
    static const char RESULT[] = "{\"privacy\":{\"charges\":[{\"silo_id\":3}]}}xxxx";
    const int64_t silos_a[] = {3, 4, 3};
    const int64_t silos_b[] = {4};
    runs_new a = {"gaussian",        10,   "r",  "converged", true,    2, "{}", NULL, 0, RESULT,
                  sizeof RESULT - 5, NULL, NULL, 0,           silos_a, 3, NULL};
    runs_new b = a;
    b.silos = silos_b;
    b.n_silos = 1;
    b.idempotency_key = "s4:k";
    b.request_hash = HASH_B;
    runs_new plain = a;
    plain.silos = NULL;
    plain.n_silos = 0;
    plain.data = "[1,2]xx";
    plain.data_len = 5;
    int64_t id = 0;
    /* rolled back: nothing stays */
    assert_int_equal(store_begin(c, &e), DP_OK);
    assert_int_equal(runs_insert(db, &a, "t", &id, &e), DP_OK);
    store_rollback(c);
    char buf[256];
    assert_string_equal(q_text(c, "SELECT count(*) FROM estimator_runs", buf, sizeof buf), "0");
    assert_string_equal(q_text(c, "SELECT count(*) FROM estimator_run_silos", buf, sizeof buf),
                        "0");
    assert_int_equal(store_begin(c, &e), DP_OK);
    int64_t ids[4];
    assert_int_equal(runs_insert(db, &a, "t", &ids[0], &e), DP_OK);
    assert_int_equal(runs_insert(db, &plain, "t", &ids[1], &e), DP_OK);
    assert_int_equal(runs_insert(db, &b, "t", &ids[2], &e), DP_OK);
    assert_int_equal(runs_insert(db, &plain, "t", &ids[3], &e), DP_OK);
    assert_int_equal(store_commit(c, &e), DP_OK);
    char want[160];
    snprintf(want, sizeof want, "%lld:3 %lld:4 %lld:4", (long long)ids[0], (long long)ids[0],
             (long long)ids[2]);
    assert_string_equal(q_text(c, SILOS, buf, sizeof buf), want);
    /* texts are stored by length, as given */
    snprintf(want, sizeof want, "SELECT result || data FROM estimator_runs WHERE id = %lld",
             (long long)ids[1]);
    assert_string_equal(q_text(c, want, buf, sizeof buf),
                        "{\"privacy\":{\"charges\":[{\"silo_id\":3}]}}[1,2]");
    /* the result is written into the row in place: a BLOB of its text (0008) */
    snprintf(want, sizeof want,
             "SELECT typeof(result) || ' ' || CAST(result AS TEXT) FROM "
             "estimator_runs WHERE id = %lld",
             (long long)ids[0]);
    assert_string_equal(q_text(c, want, buf, sizeof buf),
                        "blob {\"privacy\":{\"charges\":[{\"silo_id\":3}]}}");
    /* the same key again is refused by the unique index */
    assert_int_equal(store_begin(c, &e), DP_OK);
    dp_err_clear(&e);
    assert_int_equal(runs_insert(db, &b, "t", &id, &e), DP_EINTERNAL);
    store_rollback(c);
    /* silo 4 sees runs 1 and 3; pages of one */
    runs_viewer v4 = {false, 50, 4};
    runs_summary page[2];
    size_t n = 0;
    bool more = false;
    assert_int_equal(runs_list(c, &v4, 0, 1, "t", page, &n, &more, &e), DP_OK);
    assert_int_equal(n, 1);
    assert_true(more);
    assert_int_equal(page[0].id, ids[0]);
    assert_string_equal(page[0].kind, "gaussian");
    assert_string_equal(page[0].status, "converged");
    assert_true(page[0].priv);
    assert_int_equal(page[0].n_clients, 2);
    assert_int_equal(runs_list(c, &v4, page[0].id, 1, "t", page, &n, &more, &e), DP_OK);
    assert_int_equal(n, 1);
    assert_int_equal(page[0].id, ids[2]);
    assert_false(more);
    runs_viewer v3 = {false, 51, 3};
    assert_int_equal(runs_list(c, &v3, 0, 2, "t", page, &n, &more, &e), DP_OK);
    assert_int_equal(n, 1);
    assert_false(more);
    runs_viewer adm = {true, 1, 0};
    assert_int_equal(runs_list(c, &adm, ids[0], 2, "t", page, &n, &more, &e), DP_OK);
    assert_int_equal(n, 2);
    assert_true(more);
    /* a result naming silos, stored without its silo list, records none (no trigger) */
    assert_int_equal(store_begin(c, &e), DP_OK);
    assert_int_equal(runs_insert(db, &plain, "t", &id, &e), DP_OK);
    assert_int_equal(store_commit(c, &e), DP_OK);
    assert_false(visible(c, id, false, 52, 3));
    store_conn_return(s, c);
    store_free(s);
}

/* The per-client results (0012): stored as columns beside the run, read back whole or a page at a
 * time (the blobs read from an offset), ids as their texts; none for a run stored without them;
 * append-only like the runs. */
static void rows_are_stored_beside_the_run_and_read_by_page(void **state)
{
    fixture *f = *state;
    dp_err e;
    dp_err_clear(&e);
    store *s = store_open(f->path, 1, EMBED_MIGRATIONS, EMBED_MIGRATIONS_N, &e);
    assert_non_null(s);
    store_conn *c = store_conn_borrow(s, &e);
    assert_non_null(c);
    sqlite3 *db = store_conn_db(c);
    run_rows r = {0};
    assert_int_equal(run_rows_add_field(&r, "posterior_mean", 1, false), 0);
    assert_int_equal(run_rows_add_field(&r, "draws", 2, true), 0);
    enum { M = 5 };
    assert_int_equal(run_rows_alloc(&r, M, RUN_IDS_TEXT), 0);
    for (size_t i = 0; i < M; i++) {
        char id[16];
        int n = snprintf(id, sizeof id, "\"c%zu\"", i * 11);
        assert_int_equal(run_rows_push_id(&r, i, id, (size_t)n), 0);
        for (size_t k = 0; k < 3; k++)
            r.vals[i * 3 + k] = (double)i + 0.125 * (double)k;
    }
    static const char RESULT[] = "{\"estimates\":[]}";
    runs_new a = {"beta", 10, "r",    "converged",       false, M,    "{}",
                  NULL,   0,  RESULT, sizeof RESULT - 1, NULL,  NULL, 0,
                  NULL,   0,  &r};
    runs_new plain = a;
    plain.rows = NULL;
    int64_t id = 0, id_plain = 0;
    assert_int_equal(store_begin(c, &e), DP_OK);
    assert_int_equal(runs_insert(db, &a, "t", &id, &e), DP_OK);
    assert_int_equal(runs_insert(db, &plain, "t", &id_plain, &e), DP_OK);
    assert_int_equal(store_commit(c, &e), DP_OK);
    run_rows back;
    size_t total = 0;
    bool found = false;
    assert_int_equal(runs_rows_get(db, id, 1, 3, "t", &back, &total, &found, &e), DP_OK);
    assert_true(found);
    assert_int_equal(total, M);
    assert_int_equal(back.m, 3);
    assert_int_equal(back.base, 1);
    assert_int_equal(back.w, 3);
    assert_int_equal(back.ids, RUN_IDS_TEXT);
    assert_memory_equal(back.vals, r.vals + 3, 9 * sizeof(double));
    run_text t = {0};
    assert_int_equal(run_rows_write(&back, 2, 3, false, true, &t), 0);
    assert_string_equal(t.s, "{\"position\":4,\"id\":\"c33\",\"posterior_mean\":3.0,"
                             "\"draws\":[3.125,3.25]}");
    free(t.s);
    run_rows_clear(&back);
    /* past the end: found, no rows; a run without them: not found */
    assert_int_equal(runs_rows_get(db, id, 9, 3, "t", &back, &total, &found, &e), DP_OK);
    assert_true(found);
    assert_int_equal(back.m, 0);
    run_rows_clear(&back);
    assert_int_equal(runs_rows_get(db, id_plain, 0, SIZE_MAX, "t", &back, &total, &found, &e),
                     DP_OK);
    assert_false(found);
    /* append-only */
    char *msg = NULL;
    assert_int_not_equal(sqlite3_exec(db, "DELETE FROM estimator_run_clients", NULL, NULL, &msg),
                         SQLITE_OK);
    sqlite3_free(msg);
    run_rows_clear(&r);
    store_conn_return(s, c);
    store_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(migration_0008_keeps_runs_and_makes_them_append_only, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(insert_writes_silo_rows_and_list_pages_by_visibility, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(rows_are_stored_beside_the_run_and_read_by_page, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
