/*
 * Unit tests for service/db/store.c: connection settings, the migration runner (order, idempotence,
 * gaps, refusal of newer or foreign schemas, rollback of a failing migration), start-up failures
 * with clear messages, and the connection pool. Every test uses a database file in a fresh
 * temporary directory (never :memory:, where WAL behaves differently).
 */
#include "tests/support/test_util.h"
#include "tests/support/tmpdb_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dp_alloc.h"
#include "service/db/store.h"

typedef tmpdb fixture;

static int setup(void **state)
{
    return tmpdb_open(state, "store");
}

static int teardown(void **state)
{
    return tmpdb_close(state);
}

#define MIG(name, sql)                                                                             \
    {                                                                                              \
        name, (const unsigned char *)(sql), sizeof(sql) - 1                                        \
    }

static const embed_file M1[] = {MIG("0001_a.sql", "CREATE TABLE a(x INTEGER);")};
static const embed_file M12[] = {MIG("0001_a.sql", "CREATE TABLE a(x INTEGER);"),
                                 MIG("0002_b.sql", "CREATE TABLE b(y INTEGER);")};
static const embed_file M14[] = {MIG("0001_a.sql", "CREATE TABLE a(x INTEGER);"),
                                 MIG("0004_d.sql", "CREATE TABLE d(y INTEGER);")};
static const embed_file M134[] = {MIG("0001_a.sql", "CREATE TABLE a(x INTEGER);"),
                                  MIG("0003_c.sql", "CREATE TABLE c(y INTEGER);"),
                                  MIG("0004_d.sql", "CREATE TABLE d(y INTEGER);")};
static const embed_file M13[] = {MIG("0001_a.sql", "CREATE TABLE a(x INTEGER);"),
                                 MIG("0003_c.sql", "CREATE TABLE c(y INTEGER);")};

static long long q_int(store_conn *c, const char *sql)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(store_conn_db(c), sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static void fresh_database_gets_settings_and_all_migrations(void **state)
{
    fixture *f = *state;
    dp_err e;
    dp_err_clear(&e);
    store *s = store_open(f->path, 2, EMBED_MIGRATIONS, EMBED_MIGRATIONS_N, &e);
    assert_non_null(s);
    assert_true(EMBED_MIGRATIONS_N >= 1);
    store_conn *c = store_conn_borrow(s, &e);
    assert_non_null(c);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(store_conn_db(c), "PRAGMA journal_mode", -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    assert_int_equal(q_int(c, "PRAGMA synchronous"), 2); /* FULL */
    assert_int_equal(q_int(c, "PRAGMA foreign_keys"), 1);
    assert_int_equal(q_int(c, "SELECT count(*) FROM schema_migrations"),
                     (long long)EMBED_MIGRATIONS_N);
    assert_int_equal(q_int(c, "PRAGMA user_version"), store_schema_version(s));
    assert_int_equal(q_int(c, "SELECT max(version) FROM schema_migrations"),
                     store_schema_version(s));
    assert_int_equal(q_int(c, "SELECT count(*) FROM instance"), 1);
    int64_t age = -1;
    assert_int_equal(store_check_health(s, c, 0, &age, &e), DP_OK);
    assert_int_equal(age, 0);
    store_conn_return(s, c);
    store_free(s);
}

static void reopening_applies_nothing_twice(void **state)
{
    fixture *f = *state;
    dp_err e;
    dp_err_clear(&e);
    store *s = store_open(f->path, 1, M12, 2, &e);
    assert_non_null(s);
    store_conn *c = store_conn_borrow(s, &e);
    long long t1 = q_int(c, "SELECT sum(applied_at_ms) FROM schema_migrations");
    assert_int_equal(sqlite3_exec(store_conn_db(c), "INSERT INTO a VALUES (42)", NULL, NULL, NULL),
                     SQLITE_OK);
    store_conn_return(s, c);
    store_free(s);
    s = store_open(f->path, 1, M12, 2, &e);
    assert_non_null(s);
    assert_int_equal(store_schema_version(s), 2);
    c = store_conn_borrow(s, &e);
    assert_int_equal(q_int(c, "SELECT count(*) FROM schema_migrations"), 2);
    assert_true(q_int(c, "SELECT sum(applied_at_ms) FROM schema_migrations") == t1);
    assert_int_equal(q_int(c, "SELECT x FROM a"), 42); /* data kept */
    store_conn_return(s, c);
    store_free(s);
}

static void gaps_are_tolerated_and_filled_later(void **state)
{
    fixture *f = *state;
    dp_err e;
    dp_err_clear(&e);
    store *s = store_open(f->path, 1, M14, 2, &e);
    assert_non_null(s);
    assert_int_equal(store_schema_version(s), 4);
    store_free(s);
    /* A later build knows the reserved 0003 too: it is applied now, the version stays 4. */
    s = store_open(f->path, 1, M134, 3, &e);
    assert_non_null(s);
    assert_int_equal(store_schema_version(s), 4);
    store_conn *c = store_conn_borrow(s, &e);
    assert_int_equal(q_int(c, "SELECT count(*) FROM schema_migrations"), 3);
    assert_int_equal(q_int(c, "SELECT count(*) FROM sqlite_schema WHERE name = 'c'"), 1);
    assert_int_equal(q_int(c, "PRAGMA user_version"), 4);
    store_conn_return(s, c);
    store_free(s);
}

static void newer_schema_is_refused_untouched(void **state)
{
    fixture *f = *state;
    dp_err e;
    dp_err_clear(&e);
    store *s = store_open(f->path, 1, M12, 2, &e);
    assert_non_null(s);
    store_free(s);
    s = store_open(f->path, 1, M1, 1, &e);
    assert_null(s);
    assert_int_equal(e.code, DP_EINTERNAL);
    assert_non_null(strstr(e.msg, "newer"));
    assert_non_null(strstr(e.msg, "version 2"));
    assert_non_null(strstr(e.msg, f->path));
    /* Still usable by the newer binary. */
    dp_err_clear(&e);
    s = store_open(f->path, 1, M12, 2, &e);
    assert_non_null(s);
    store_free(s);
}

static void foreign_migration_is_refused(void **state)
{
    fixture *f = *state;
    dp_err e;
    dp_err_clear(&e);
    store *s = store_open(f->path, 1, M12, 2, &e); /* has 0002 */
    assert_non_null(s);
    store_free(s);
    s = store_open(f->path, 1, M13, 2, &e); /* knows 0003 but not 0002 */
    assert_null(s);
    assert_non_null(strstr(e.msg, "0002"));
    assert_non_null(strstr(e.msg, "does not know"));
}

static void newer_user_version_alone_is_refused(void **state)
{
    fixture *f = *state;
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 77", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    dp_err e;
    dp_err_clear(&e);
    assert_null(store_open(f->path, 1, M12, 2, &e));
    assert_non_null(strstr(e.msg, "schema version 77"));
    /* Refused before anything was written: the runner's own table was not created. */
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT count(*) FROM sqlite_schema WHERE name = "
                                        "'schema_migrations'",
                                        -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static void failing_migration_is_rolled_back(void **state)
{
    fixture *f = *state;
    static const embed_file bad[] = {
        MIG("0001_a.sql", "CREATE TABLE a(x INTEGER);"),
        MIG("0002_bad.sql", "CREATE TABLE half(y INTEGER); SELEKT nonsense;")};
    dp_err e;
    dp_err_clear(&e);
    assert_null(store_open(f->path, 1, bad, 2, &e));
    assert_non_null(strstr(e.msg, "0002_bad.sql"));
    dp_err_clear(&e);
    store *s = store_open(f->path, 1, M1, 1, &e); /* 0001 was committed on its own */
    assert_non_null(s);
    store_conn *c = store_conn_borrow(s, &e);
    assert_int_equal(q_int(c, "SELECT count(*) FROM sqlite_schema WHERE name = 'half'"), 0);
    assert_int_equal(q_int(c, "SELECT count(*) FROM schema_migrations"), 1);
    store_conn_return(s, c);
    store_free(s);
}

static void invalid_migration_lists_are_refused(void **state)
{
    fixture *f = *state;
    static const embed_file unordered[] = {MIG("0002_b.sql", "SELECT 1;"),
                                           MIG("0001_a.sql", "SELECT 1;")};
    static const embed_file badname[] = {MIG("1_a.sql", "SELECT 1;")};
    static const embed_file zero[] = {MIG("0000_a.sql", "SELECT 1;")};
    dp_err e;
    dp_err_clear(&e);
    assert_null(store_open(f->path, 1, unordered, 2, &e));
    assert_non_null(strstr(e.msg, "ascending"));
    dp_err_clear(&e);
    assert_null(store_open(f->path, 1, badname, 1, &e));
    dp_err_clear(&e);
    assert_null(store_open(f->path, 1, zero, 1, &e));
}

static void unopenable_paths_fail_with_the_path_in_the_message(void **state)
{
    fixture *f = *state;
    dp_err e;
    char p[200];
    snprintf(p, sizeof p, "%s/no/such/dir/x.db", f->dir);
    dp_err_clear(&e);
    assert_null(store_open(p, 1, M1, 1, &e));
    assert_non_null(strstr(e.msg, p));
    assert_non_null(strstr(e.msg, "cannot open"));
    dp_err_clear(&e);
    assert_null(store_open(f->dir, 1, M1, 1, &e)); /* a directory */
    assert_non_null(strstr(e.msg, f->dir));
    FILE *g = fopen(f->path, "wb");
    assert_non_null(g);
    fputs("this is not an SQLite database, just text long enough to have a header..........", g);
    fclose(g);
    dp_err_clear(&e);
    assert_null(store_open(f->path, 1, M1, 1, &e));
    assert_non_null(strstr(e.msg, f->path));
}

static void read_only_file_is_refused(void **state)
{
    fixture *f = *state;
    if (geteuid() == 0)
        skip(); /* root writes through file modes; the integration test covers an unwritable path */
    dp_err e;
    dp_err_clear(&e);
    store *s = store_open(f->path, 1, M1, 1, &e);
    assert_non_null(s);
    store_free(s);
    assert_int_equal(chmod(f->path, 0444), 0);
    assert_null(store_open(f->path, 1, M1, 1, &e));
    assert_non_null(strstr(e.msg, "read-only"));
}

/* D15: the database, WAL and SHM files are created 0600 under a permissive umask. */
static void new_database_files_are_private(void **state)
{
    fixture *f = *state;
    mode_t old = umask(022);
    dp_err e;
    dp_err_clear(&e);
    store *s = store_open(f->path, 2, M12, 2, &e);
    umask(old);
    assert_non_null(s);
    const char *suffix[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        char p[200];
        snprintf(p, sizeof p, "%s%s", f->path, suffix[i]);
        struct stat sb;
        assert_int_equal(stat(p, &sb), 0);
        if ((sb.st_mode & 0777) != 0600)
            fail_msg("%s has mode %04o, want 0600", p, (unsigned)(sb.st_mode & 0777));
    }
    store_free(s);
}

/* Migration 0006 (issue 10) on a database that already holds runs: the silos each run charged are
 * recorded from its stored result, and runs stored afterwards are recorded by the trigger (until
 * 0008 replaced it by rows written with the run: tests/unit/service/db/test_service_runs.c). */
static void migration_0006_records_the_silos_of_existing_runs(void **state)
{
    fixture *f = *state;
    size_t n_old = 0, n_7 = 0;
    while (n_old < EMBED_MIGRATIONS_N && strncmp(EMBED_MIGRATIONS[n_old].name, "0006", 4) < 0)
        n_old++;
    while (n_7 < EMBED_MIGRATIONS_N && strncmp(EMBED_MIGRATIONS[n_7].name, "0008", 4) < 0)
        n_7++;
    assert_true(n_old < EMBED_MIGRATIONS_N);
    dp_err e;
    dp_err_clear(&e);
    store *s = store_open(f->path, 1, EMBED_MIGRATIONS, n_old, &e);
    assert_non_null(s);
    store_conn *c = store_conn_borrow(s, &e);
    assert_non_null(c);
    static const char *const ins =
        "INSERT INTO estimator_runs (kind, created_at_ms, request_id, status, private, n_clients, "
        "params, data, result) VALUES ('gaussian', 1, 'r', 'converged', 1, 2, '{}', NULL, "
        "'{\"privacy\":{\"charges\":[{\"silo_id\":4,\"charge_id\":1},{\"silo_id\":7}]}}'),"
        "('gaussian', 2, 'r', 'converged', 0, 2, '{}', NULL, '{\"privacy\":null}')";
    assert_int_equal(sqlite3_exec(store_conn_db(c), ins, NULL, NULL, NULL), SQLITE_OK);
    store_conn_return(s, c);
    store_free(s);
    s = store_open(f->path, 1, EMBED_MIGRATIONS, n_7, &e);
    assert_non_null(s);
    c = store_conn_borrow(s, &e);
    assert_non_null(c);
    static const char *const ins2 =
        "INSERT INTO estimator_runs (kind, created_at_ms, request_id, status, private, n_clients, "
        "params, data, result) VALUES ('beta', 3, 'r', 'converged', 1, 2, '{}', NULL, "
        "'{\"privacy\":{\"charges\":[{\"silo_id\":7}]}}')";
    assert_int_equal(sqlite3_exec(store_conn_db(c), ins2, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(
        sqlite3_prepare_v2(store_conn_db(c),
                           "SELECT group_concat(run_id || ':' || silo_id, ' ') FROM "
                           "(SELECT * FROM estimator_run_silos ORDER BY run_id, silo_id)",
                           -1, &st, NULL),
        SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "1:4 1:7 3:7");
    sqlite3_finalize(st);
    store_conn_return(s, c);
    store_free(s);
}

/* store_read_instance returns the row migration 0001 made; a missing or malformed row is an
 * internal error (500), never a garbled /v1/version. */
static void instance_is_read_and_a_bad_row_is_an_internal_error(void **state)
{
    fixture *f = *state;
    dp_err e;
    dp_err_clear(&e);
    store *s = store_open(f->path, 1, EMBED_MIGRATIONS, EMBED_MIGRATIONS_N, &e);
    assert_non_null(s);
    store_conn *c = store_conn_borrow(s, &e);
    assert_non_null(c);
    sqlite3 *db = store_conn_db(c);
    assert_int_equal(sqlite3_exec(db,
                                  "UPDATE instance SET instance_id = '0123456789abcdef', "
                                  "created_at_ms = 1764201600123",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    char id[STORE_INSTANCE_ID_LEN + 1];
    int64_t created = 0;
    assert_int_equal(store_read_instance(c, id, &created, "t", &e), DP_OK);
    assert_string_equal(id, "0123456789abcdef");
    assert_int_equal(created, 1764201600123);
    assert_int_equal(sqlite3_exec(db, "DELETE FROM instance", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(store_read_instance(c, id, &created, "t", &e), DP_EINTERNAL);
    assert_string_equal(e.msg, "database error");
    store_conn_return(s, c);
    store_free(s);
}

static void pool_lends_each_connection_once_and_cleans_returns(void **state)
{
    fixture *f = *state;
    dp_err e;
    dp_err_clear(&e);
    store *s = store_open(f->path, 3, M1, 1, &e);
    assert_non_null(s);
    store_conn *a = store_conn_borrow(s, &e);
    store_conn *b = store_conn_borrow(s, &e);
    store_conn *c = store_conn_borrow(s, &e);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    assert_true(a != b && b != c && a != c);
    /* A statement is prepared once per connection and cached by the literal's address. */
    static const char SQL[] = "SELECT count(*) FROM a";
    sqlite3_stmt *s1 = store_conn_prepare(a, SQL, &e);
    sqlite3_stmt *s2 = store_conn_prepare(a, SQL, &e);
    assert_non_null(s1);
    assert_ptr_equal(s1, s2);
    assert_int_equal(sqlite3_step(s1), SQLITE_ROW); /* left un-reset on purpose */
    /* Returned inside a write transaction: rolled back, so the next borrower starts clean. */
    assert_int_equal(store_begin(b, &e), DP_OK);
    assert_int_equal(sqlite3_exec(store_conn_db(b), "INSERT INTO a VALUES (1)", NULL, NULL, NULL),
                     SQLITE_OK);
    store_conn_return(s, b);
    store_conn_return(s, a);
    assert_int_equal(sqlite3_stmt_busy(s1), 0);
    store_conn *d = store_conn_borrow(s, &e);
    assert_non_null(d);
    assert_int_equal(sqlite3_get_autocommit(store_conn_db(d)), 1);
    assert_int_equal(q_int(d, "SELECT count(*) FROM a"), 0);
    store_conn_return(s, d);
    store_conn_return(s, c);
    /* A bad statement is an internal error, not a crash. */
    dp_err_clear(&e);
    d = store_conn_borrow(s, &e);
    static const char BAD[] = "SELEKT 1";
    assert_null(store_conn_prepare(d, BAD, &e));
    assert_int_equal(e.code, DP_EINTERNAL);
    store_conn_return(s, d);
    store_free(s);
}

static void allocation_failures_during_open_are_clean(void **state)
{
    fixture *f = *state;
    /* Failure injection: fail the Nth dp_alloc allocation for N = 1, 2, ... until open succeeds;
     * every failure must be a clean DP_ENOMEM (ASan checks that nothing leaks). */
    int succeeded = 0;
    for (long n = 1; n <= 50 && !succeeded; n++) {
        dp_err e;
        dp_err_clear(&e);
        dp_alloc_fail_after(n);
        store *s = store_open(f->path, 3, M12, 2, &e);
        dp_alloc_fail_after(0);
        if (s != NULL) {
            succeeded = 1;
            assert_int_equal(store_schema_version(s), 2);
            store_free(s);
        } else {
            assert_int_equal(e.code, DP_ENOMEM);
        }
    }
    assert_true(succeeded);
}

static void busy_maps_to_ebusy(void **state)
{
    (void)state;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(store_err(NULL, SQLITE_BUSY, "t", NULL, &e), DP_EBUSY);
    dp_err_clear(&e);
    assert_int_equal(store_err(NULL, SQLITE_BUSY_SNAPSHOT, "t", NULL, &e), DP_EBUSY);
    dp_err_clear(&e);
    assert_int_equal(store_err(NULL, SQLITE_CONSTRAINT_UNIQUE, "t", NULL, &e), DP_EINTERNAL);
    assert_null(strstr(e.msg, "UNIQUE")); /* no SQLite detail to clients */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(fresh_database_gets_settings_and_all_migrations, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(reopening_applies_nothing_twice, setup, teardown),
        cmocka_unit_test_setup_teardown(gaps_are_tolerated_and_filled_later, setup, teardown),
        cmocka_unit_test_setup_teardown(newer_schema_is_refused_untouched, setup, teardown),
        cmocka_unit_test_setup_teardown(foreign_migration_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(newer_user_version_alone_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(failing_migration_is_rolled_back, setup, teardown),
        cmocka_unit_test_setup_teardown(invalid_migration_lists_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(unopenable_paths_fail_with_the_path_in_the_message, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(read_only_file_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(new_database_files_are_private, setup, teardown),
        cmocka_unit_test_setup_teardown(migration_0006_records_the_silos_of_existing_runs, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(instance_is_read_and_a_bad_row_is_an_internal_error, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(pool_lends_each_connection_once_and_cleans_returns, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(allocation_failures_during_open_are_clean, setup, teardown),
        cmocka_unit_test(busy_maps_to_ebusy),
    };
    return cmocka_run_group_tests_name("service_store", tests, NULL, NULL);
}
