/*
 * Unit tests for POST /v1/tuning/draw in service/api/tuning.c as a client of the database's writer
 * (service/db/writer.h): every draw is exactly one operation of the writer (its group commit, not a
 * transaction of a pooled connection); offered a deferred answer (http/server.h PENDING) the
 * handler defers, and the 201 is rendered only after the writer's COMMIT; without the offer it
 * waits on its own thread; a closed writer is a clean 503 with nothing recorded; and without a
 * writer at all (a unit test without the ledger's threads) the row is written on the request's
 * connection. The draw's answer and its read-back are the same object.
 *
 * Route calls by method and path go through tests/support/service_fixture.h call_route (which runs
 * the deferred path through http_handler_call, as the dispatcher does); the tests of the deferral
 * itself build the request by hand. The writer is held with a gate (an operation whose apply waits
 * until the test opens it), so that "not yet committed" is a state the test can look at.
 */
#include "tests/support/test_util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/api/routes.h"
#include "service/db/writer.h"
#include "tests/support/service_fixture.h"

static const char *DRAW =
    "{\"distribution\":{\"logarithmic\":{\"mean\":10}},\"grid_size\":10,\"label\":\"lr\"}";

static int setup(void **state)
{
    service_fixture *fx = calloc(1, sizeof *fx);
    *state = fx;
    /* auth off: these tests are about the write path; access: test_service_auth.c */
    return fx != NULL && service_fixture_open(fx, "tuning", true) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    service_fixture *fx = *state;
    int rc = service_fixture_close(fx);
    free(fx);
    return rc;
}

static db_writer *writer_of(service_fixture *fx)
{
    return ledger_writer(fx->ledger);
}

/* Operations the writer has run so far. */
static uint64_t writer_ops(service_fixture *fx)
{
    uint64_t groups, ops;
    db_writer_stats(writer_of(fx), &groups, &ops);
    return ops;
}

/* Rows in tuning_draws, read on the pooled connection (committed rows only). */
static int64_t draws_on_file(service_fixture *fx)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(store_conn_db(fx->r.db),
                                        "SELECT count(*) FROM tuning_draws", -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

/* A request to POST /v1/tuning/draw built by hand (body owned by the caller), with the app a
 * running daemon has (the ledger and its writer). */
static http_req draw_req_by_hand(service_fixture *fx, json_t *body)
{
    fx->r.app.ledger = fx->ledger;
    fx->r.app.writer = writer_of(fx);
    http_req rq = route_fixture_req(&fx->r, "POST", "/v1/tuning/draw");
    rq.body = body;
    return rq;
}

/* ---- the gate: holds the writer thread until opened */

typedef struct gate {
    db_write_op op;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool entered, open, finished;
} gate;

static int gate_apply(sqlite3 *db, void *arg, dp_err *err)
{
    (void)db;
    (void)err;
    gate *g = arg;
    pthread_mutex_lock(&g->mu);
    g->entered = true;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    return DP_OK;
}

static void gate_done(void *arg, int rc, const dp_err *err)
{
    (void)rc;
    (void)err;
    gate *g = arg;
    pthread_mutex_lock(&g->mu);
    g->finished = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void gate_hold(db_writer *w, gate *g)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->op = (db_write_op){.apply = gate_apply, .done = gate_done, .arg = g};
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(db_writer_submit(w, &g->op, &e), DP_OK);
    pthread_mutex_lock(&g->mu);
    while (!g->entered)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void gate_open_and_wait(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    while (!g->finished)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

/* ---- a wake-up recorder */

typedef struct waker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls; /* guarded by mu */
} waker;

static void waker_wake(void *arg)
{
    waker *w = arg;
    pthread_mutex_lock(&w->mu);
    w->calls++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static int waker_calls(waker *w)
{
    pthread_mutex_lock(&w->mu);
    int n = w->calls;
    pthread_mutex_unlock(&w->mu);
    return n;
}

static void waker_wait(waker *w)
{
    pthread_mutex_lock(&w->mu);
    while (w->calls < 1)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

/* ---- tests */

/* Each draw is one operation of the writer (and one row); the answer reads back unchanged. */
static void each_draw_is_one_writer_operation(void **state)
{
    service_fixture *fx = *state;
    int64_t rows0 = draws_on_file(fx);
    for (int i = 1; i <= 3; i++) {
        uint64_t ops0 = writer_ops(fx);
        route_result r;
        assert_int_equal(call_route(fx, "POST", "/v1/tuning/draw", DRAW, NULL, &r), 201);
        assert_int_equal(writer_ops(fx) - ops0, 1);
        assert_int_equal(draws_on_file(fx), rows0 + i);
        json_int_t id = json_integer_value(json_object_get(r.body, "id"));
        assert_true(id >= 1);
        char path[64];
        snprintf(path, sizeof path, "/v1/tuning/draws/%lld", (long long)id);
        route_result g;
        assert_int_equal(call_route(fx, "GET", path, NULL, NULL, &g), 200);
        assert_true(json_equal(g.body, r.body)); /* the answer is what is on file */
        route_result_clear(&g);
        route_result_clear(&r);
    }
}

/* Offered a deferred answer, the handler returns at once with a pending answer; while the writer
 * is held nothing is on file and the connection is not woken; after the COMMIT it is woken once and
 * the resumed answer is the 201 of the committed row. */
static void a_deferred_draw_is_answered_after_the_commit(void **state)
{
    service_fixture *fx = *state;
    json_t *body = json_loads(DRAW, 0, NULL);
    assert_non_null(body);
    http_req rq = draw_req_by_hand(fx, body);
    waker w = {.calls = 0};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    http_defer d = {waker_wake, &w};
    rq.defer = &d;
    int64_t rows0 = draws_on_file(fx);
    uint64_t ops0 = writer_ops(fx);
    gate g;
    gate_hold(writer_of(fx), &g);
    http_resp rs;
    memset(&rs, 0, sizeof rs);
    dp_err e;
    dp_err_clear(&e);
    int rc = route_tuning_draw(&rq, &rs, &e);
    http_pending *p = rs.pending;
    /* observed while the writer is held; asserted after the gate is open (a failed assertion must
     * not leave the writer held, or the teardown would wait for it forever) */
    bool answered = rs.body != NULL || rs.status != 0;
    int calls_held = waker_calls(&w);
    int64_t rows_held = draws_on_file(fx);
    gate_open_and_wait(&g);
    assert_int_equal(rc, DP_OK);
    assert_non_null(p);
    assert_false(answered);             /* nothing answered yet */
    assert_int_equal(calls_held, 0);    /* not woken before the COMMIT */
    assert_int_equal(rows_held, rows0); /* not committed: the writer was held */
    waker_wait(&w);
    assert_int_equal(draws_on_file(fx), rows0 + 1); /* woken after the COMMIT */
    rs.pending = NULL;
    rq.defer = NULL;
    assert_int_equal(p->resume(p, &rq, &rs, &e), DP_OK);
    p->release(p);
    assert_int_equal(rs.status, 201);
    json_int_t id = json_integer_value(json_object_get(rs.body, "id"));
    assert_true(id >= 1);
    assert_string_equal(json_string_value(json_object_get(rs.body, "label")), "lr");
    char loc[64];
    snprintf(loc, sizeof loc, "/v1/tuning/draws/%lld", (long long)id);
    assert_string_equal(rs.location, loc);
    assert_int_equal(writer_ops(fx) - ops0, 2); /* the gate and the draw */
    assert_int_equal(waker_calls(&w), 1);
    http_resp_clear(&rs);
    json_decref(body);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
}

/* Without the offer (rq->defer NULL) the handler waits for the writer on its own thread. */
static void without_defer_the_draw_waits_for_the_writer(void **state)
{
    service_fixture *fx = *state;
    json_t *body = json_loads(DRAW, 0, NULL);
    assert_non_null(body);
    http_req rq = draw_req_by_hand(fx, body);
    uint64_t ops0 = writer_ops(fx);
    int64_t rows0 = draws_on_file(fx);
    http_resp rs;
    memset(&rs, 0, sizeof rs);
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(route_tuning_draw(&rq, &rs, &e), DP_OK);
    assert_null(rs.pending);
    assert_int_equal(rs.status, 201);
    assert_int_equal(writer_ops(fx) - ops0, 1);
    assert_int_equal(draws_on_file(fx), rows0 + 1);
    http_resp_clear(&rs);
    json_decref(body);
}

/* A closed writer (the daemon stopping): a 503 JSON error, deferred or not, and no row. */
static void a_closed_writer_is_a_503_and_records_nothing(void **state)
{
    service_fixture *fx = *state;
    int64_t rows0 = draws_on_file(fx);
    db_writer_close(writer_of(fx));
    route_result r;
    assert_int_equal(call_route(fx, "POST", "/v1/tuning/draw", DRAW, NULL, &r), 503);
    assert_int_equal(r.rc, DP_EBUSY);
    const json_t *err = json_object_get(r.body, "error");
    assert_true(json_is_string(json_object_get(err, "code")));
    assert_string_equal(json_string_value(json_object_get(err, "message")),
                        "the database writer is shutting down");
    route_result_clear(&r);

    json_t *body = json_loads(DRAW, 0, NULL);
    http_req rq = draw_req_by_hand(fx, body); /* rq.defer NULL: the synchronous path */
    http_resp rs;
    memset(&rs, 0, sizeof rs);
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(route_tuning_draw(&rq, &rs, &e), DP_EBUSY);
    assert_int_equal(e.code, DP_EBUSY);
    assert_null(rs.pending);
    http_resp_clear(&rs);
    json_decref(body);
    assert_int_equal(draws_on_file(fx), rows0);
}

/* No writer at all (a handler test without the ledger's threads): the row is written on the
 * request's own connection, and the answer is the same. */
static void without_a_writer_the_request_connection_writes(void **state)
{
    service_fixture *fx = *state;
    json_t *body = json_loads(DRAW, 0, NULL);
    assert_non_null(body);
    http_req rq = draw_req_by_hand(fx, body);
    fx->r.app.ledger = NULL;
    fx->r.app.writer = NULL;
    uint64_t ops0 = writer_ops(fx);
    int64_t rows0 = draws_on_file(fx);
    http_resp rs;
    memset(&rs, 0, sizeof rs);
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(http_handler_call(route_tuning_draw, &rq, &rs, &e), DP_OK);
    assert_int_equal(rs.status, 201);
    assert_int_equal(writer_ops(fx), ops0); /* the writer was not involved */
    assert_int_equal(draws_on_file(fx), rows0 + 1);
    assert_int_not_equal(sqlite3_get_autocommit(store_conn_db(fx->r.db)), 0);
    http_resp_clear(&rs);
    json_decref(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(each_draw_is_one_writer_operation, setup, teardown),
        cmocka_unit_test_setup_teardown(a_deferred_draw_is_answered_after_the_commit, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(without_defer_the_draw_waits_for_the_writer, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_closed_writer_is_a_503_and_records_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(without_a_writer_the_request_connection_writes, setup,
                                        teardown),
    };
    return cmocka_run_group_tests_name("service_tuning", tests, NULL, NULL);
}
