/*
 * Unit tests for service/db/jobs.c: the job state machine as stored (queued -> running -> an end,
 * or back to queued), claims in submission order, cancel of a queued and of a running job, the
 * recovery at start (running jobs requeued or interrupted, never left running), a round's row,
 * event and checkpoint written together, the append-only rounds and events, and the access rule.
 * Writes go through the ledger's writer, as dpsilod runs them.
 */
#include "tests/support/test_util.h"

#include <stdlib.h>
#include <string.h>

#include "common/dp_math.h"
#include "service/db/jobs.h"
#include "service/db/writer.h"
#include "tests/support/ledger_fixture.h"

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

static int run(ledger_fixture *fx, db_write_apply_fn fn, void *arg)
{
    dp_err e;
    dp_err_clear(&e);
    int rc = db_writer_run(ledger_writer(fx->l), fn, arg, &e);
    if (rc != DP_OK)
        print_message("writer: %s\n", e.msg);
    return rc;
}

typedef ledger_fixture_silo silo_tok;

/* A silo with its first token. */
static silo_tok make_silo(ledger_fixture *fx, const char *name)
{
    silo_tok s;
    assert_int_equal(ledger_fixture_make_silo(fx, name, 1, 1e-6, &s), 0);
    return s;
}

static int64_t submit(ledger_fixture *fx, int64_t creator, bool resume, const job_new_binding *bd,
                      size_t n_bd)
{
    job_new j = {.name = "j",
                 .created_at_ms = 1000,
                 .request_id = "r",
                 .creator_token_id = creator,
                 .algorithm = "fedavg",
                 .spec = "{\"algorithm\":\"fedavg\"}",
                 .plan = "{\"silos\":[]}",
                 .rounds_total = 3,
                 .resume = resume,
                 .bindings = bd,
                 .n_bindings = n_bd};
    job_insert_op op = {&j, 0};
    assert_int_equal(run(fx, jobs_insert_apply, &op), DP_OK);
    assert_true(op.id > 0);
    return op.id;
}

static job_status status_of(ledger_fixture *fx, int64_t id)
{
    job_row r;
    bool found = false;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(jobs_get(fx->conn, id, NULL, &r, &found, "t", &e), DP_OK);
    assert_true(found);
    job_status s = r.status;
    job_row_clear(&r);
    return s;
}

static int64_t claim(ledger_fixture *fx)
{
    job_claim_op op = {2000, 0};
    assert_int_equal(run(fx, jobs_claim_apply, &op), DP_OK);
    return op.id;
}

static void claims_follow_submission_order_and_finish_once(void **state)
{
    ledger_fixture *fx = *state;
    int64_t a = submit(fx, 0, true, NULL, 0), b = submit(fx, 0, true, NULL, 0);
    assert_int_equal(status_of(fx, a), JOB_QUEUED);
    assert_int_equal(claim(fx), a);
    assert_int_equal(claim(fx), b);
    assert_int_equal(claim(fx), 0); /* nothing queued */
    assert_int_equal(status_of(fx, a), JOB_RUNNING);
    job_finish_op f = {a, JOB_SUCCEEDED, NULL, 3000};
    assert_int_equal(run(fx, jobs_finish_apply, &f), DP_OK);
    assert_int_equal(status_of(fx, a), JOB_SUCCEEDED);
    /* an ended job does not move again */
    job_finish_op g = {a, JOB_FAILED, "late", 4000};
    assert_int_equal(run(fx, jobs_finish_apply, &g), DP_OK);
    assert_int_equal(status_of(fx, a), JOB_SUCCEEDED);
    /* a stop requeues a running job; it is claimed again */
    job_finish_op q = {b, JOB_QUEUED, "stopping", 4000};
    assert_int_equal(run(fx, jobs_finish_apply, &q), DP_OK);
    assert_int_equal(status_of(fx, b), JOB_QUEUED);
    assert_int_equal(claim(fx), b);
}

static void cancel_ends_a_queued_job_and_flags_a_running_one(void **state)
{
    ledger_fixture *fx = *state;
    int64_t a = submit(fx, 0, true, NULL, 0), b = submit(fx, 0, true, NULL, 0);
    assert_int_equal(claim(fx), a);
    job_cancel_op c = {.id = b, .who = {true, 0, 0}, .now_ms = 5000};
    assert_int_equal(run(fx, jobs_cancel_apply, &c), DP_OK);
    assert_true(c.found);
    assert_int_equal(c.was, JOB_QUEUED);
    assert_int_equal(status_of(fx, b), JOB_CANCELLED);
    job_cancel_op d = {.id = a, .who = {true, 0, 0}, .now_ms = 5000};
    assert_int_equal(run(fx, jobs_cancel_apply, &d), DP_OK);
    assert_int_equal(d.was, JOB_RUNNING);
    assert_int_equal(status_of(fx, a), JOB_RUNNING); /* the runner ends it between rounds */
    bool req = false;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(jobs_cancel_requested(fx->conn, a, &req, &e), DP_OK);
    assert_true(req);
    job_cancel_op x = {.id = 999, .who = {true, 0, 0}, .now_ms = 5000};
    assert_int_equal(run(fx, jobs_cancel_apply, &x), DP_OK);
    assert_false(x.found);
}

static void recovery_never_leaves_a_job_running(void **state)
{
    ledger_fixture *fx = *state;
    int64_t a = submit(fx, 0, true, NULL, 0), b = submit(fx, 0, false, NULL, 0);
    int64_t c = submit(fx, 0, true, NULL, 0);
    assert_int_equal(claim(fx), a);
    assert_int_equal(claim(fx), b);
    job_recover_op r = {6000, 0, 0};
    assert_int_equal(run(fx, jobs_recover_apply, &r), DP_OK);
    assert_int_equal(r.requeued, 1);
    assert_int_equal(r.interrupted, 1);
    assert_int_equal(status_of(fx, a), JOB_QUEUED);
    assert_int_equal(status_of(fx, b), JOB_INTERRUPTED);
    assert_int_equal(status_of(fx, c), JOB_QUEUED);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(fx->db,
                                        "SELECT count(*) FROM jobs WHERE status = 'running'", -1,
                                        &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int64(st, 0), 0);
    sqlite3_finalize(st);
}

static int count_rows(void *arg, int64_t round, double wall_ms, const char *metrics)
{
    (void)wall_ms;
    (void)metrics;
    int64_t *n = arg;
    *n = *n * 10 + round;
    return 0;
}

static void a_round_writes_its_row_event_and_checkpoint_together(void **state)
{
    ledger_fixture *fx = *state;
    int64_t a = submit(fx, 0, true, NULL, 0);
    assert_int_equal(claim(fx), a);
    const uint8_t ck1[] = {1, 2, 3}, ck2[] = {4, 5};
    job_round_new r1 = {a, 1, 7000, 1.5, "{\"round\":1}", ck1, sizeof ck1};
    job_round_new r2 = {a, 2, 7001, 2.5, "{\"round\":2}", ck2, sizeof ck2};
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(jobs_round_write(fx->db, &r1, &e), DP_OK);
    assert_int_equal(jobs_round_write(fx->db, &r2, &e), DP_OK);
    /* the same round again is refused (primary key), and rounds are append-only */
    assert_int_not_equal(jobs_round_write(fx->db, &r2, &e), DP_OK);
    assert_int_equal(sqlite3_exec(fx->db, "UPDATE job_rounds SET wall_ms = 0", NULL, NULL, NULL) &
                         0xff,
                     SQLITE_CONSTRAINT);
    assert_int_equal(sqlite3_extended_errcode(fx->db), SQLITE_CONSTRAINT_TRIGGER);
    assert_int_equal(sqlite3_exec(fx->db, "DELETE FROM job_events", NULL, NULL, NULL) & 0xff,
                     SQLITE_CONSTRAINT);
    assert_int_equal(sqlite3_extended_errcode(fx->db), SQLITE_CONSTRAINT_TRIGGER);
    int64_t seen = 0;
    bool more = true;
    assert_int_equal(jobs_rounds_list(fx->conn, a, 0, 10, count_rows, &seen, &more, "t", &e),
                     DP_OK);
    assert_int_equal(seen, 12);
    assert_false(more);
    seen = 0;
    assert_int_equal(jobs_rounds_list(fx->conn, a, 0, 1, count_rows, &seen, &more, "t", &e), DP_OK);
    assert_int_equal(seen, 1);
    assert_true(more);
    uint8_t *buf = NULL;
    size_t len = 0;
    int64_t round = 0;
    assert_int_equal(jobs_checkpoint_read(fx->conn, a, &buf, &len, &round, "t", &e), DP_OK);
    assert_int_equal(round, 2);
    assert_int_equal(len, 2);
    assert_memory_equal(buf, ck2, 2);
    free(buf);
    job_row row;
    bool found = false;
    assert_int_equal(jobs_get(fx->conn, a, NULL, &row, &found, "t", &e), DP_OK);
    assert_int_equal(row.rounds_done, 2);
    job_row_clear(&row);
}

static void only_the_creator_its_silo_bound_silos_and_the_admin_see_a_job(void **state)
{
    ledger_fixture *fx = *state;
    silo_tok x = make_silo(fx, "x"), y = make_silo(fx, "y"), z = make_silo(fx, "z");
    job_new_binding bd = {y.silo_id, "north"};
    int64_t a = submit(fx, x.token_id, true, &bd, 1);
    dp_err e;
    dp_err_clear(&e);
    const job_viewer viewers[] = {{true, 0, 0},
                                  {false, x.token_id, x.silo_id},
                                  {false, y.token_id, y.silo_id},
                                  {false, z.token_id, z.silo_id}};
    const bool sees[] = {true, true, true, false};
    for (size_t i = 0; i < 4; i++) {
        job_row r;
        bool found = false;
        assert_int_equal(jobs_get(fx->conn, a, &viewers[i], &r, &found, "t", &e), DP_OK);
        assert_int_equal(found, sees[i]);
        job_row_clear(&r);
    }
    char name[64];
    bool found = false;
    assert_int_equal(jobs_binding_name(fx->conn, a, y.silo_id, name, sizeof name, &found, "t", &e),
                     DP_OK);
    assert_true(found);
    assert_string_equal(name, "north");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(claims_follow_submission_order_and_finish_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(cancel_ends_a_queued_job_and_flags_a_running_one, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(recovery_never_leaves_a_job_running, setup, teardown),
        cmocka_unit_test_setup_teardown(a_round_writes_its_row_event_and_checkpoint_together, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            only_the_creator_its_silo_bound_silos_and_the_admin_see_a_job, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
