/*
 * Unit tests for deferred charge answers (http/server.h PENDING, ledger_charge_start), without a
 * socket: a charge handler offered rq->defer really defers (rs->pending set, its wake-up called
 * once after the commit) and its resumed answer is the synchronous one (201, 409 budget_exhausted
 * with figures, batch); input errors are answered at once without deferring; many asynchronous
 * charges started from ONE thread all complete and are all in the log (no thread waits per charge);
 * a PLD silo (whose figures are computed on the finishing thread) answers through the same path.
 *
 * Set-up and the answers through the deferred path are route calls by method and path
 * (tests/support/service_fixture.h call_route, which runs the handler through http_handler_call,
 * the deferred path without a socket); the two tests that drive rq->defer and the pending answer
 * themselves build their request by hand (req_init).
 */
#include "tests/support/test_util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/base/cfg.h"
#include "service/api/routes.h"
#include "tests/support/service_fixture.h"

typedef struct fx {
    service_fixture f; /* f.r.c: default configuration, auth off */
    route_result out;  /* the last answer of call; cleared by the next call and by teardown */
} fx;

static int setup(void **state)
{
    fx *x = calloc(1, sizeof *x);
    if (x == NULL || service_fixture_open(&x->f, "defer", true) != 0)
        return -1;
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    fx *x = *state;
    route_result_clear(&x->out);
    service_fixture_close(&x->f);
    free(x);
    return 0;
}

/* POST path with body (auth off: no token); returns the status, the answer is in x->out. */
static int post(fx *x, const char *path, const char *body)
{
    route_result_clear(&x->out);
    return call_route(&x->f, "POST", path, body, NULL, &x->out);
}

/* A wake-up recorder: counts calls, lets the test wait for the first. */
typedef struct waker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls; /* guarded by mu */
} waker;

static void waker_init(waker *w)
{
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->calls = 0;
}

static void waker_wake(void *arg)
{
    waker *w = arg;
    pthread_mutex_lock(&w->mu);
    w->calls++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static int waker_wait(waker *w, int calls)
{
    pthread_mutex_lock(&w->mu);
    while (w->calls < calls)
        pthread_cond_wait(&w->cv, &w->mu);
    int n = w->calls;
    pthread_mutex_unlock(&w->mu);
    return n;
}

static void waker_destroy(waker *w)
{
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
}

static void req_init(fx *x, http_req *rq, http_param *p, const char *id, json_t *body)
{
    *rq = route_fixture_req(&x->f.r, "POST", "/test");
    p->name = "id";
    p->value = id;
    rq->body = body;
    rq->params = id ? p : NULL;
    rq->n_params = id ? 1 : 0;
    x->f.r.app.ledger = x->f.ledger;
}

/* Creates an (eps, delta) silo with the given cap; returns its id. */
static int64_t silo(fx *x, double eps, const char *accountant)
{
    static int n_silos; /* silo names are unique among active silos */
    char b[200];
    snprintf(b, sizeof b,
             "{\"name\":\"s%d\",\"budget\":{\"epsilon\":%.17g,\"delta\":1e-5,\"accountant\":"
             "\"%s\"}}",
             ++n_silos, eps, accountant);
    assert_int_equal(post(x, "/v1/silos", b), 201);
    int64_t id = json_integer_value(json_object_get(x->out.body, "id"));
    assert_true(id > 0);
    return id;
}

static const char *CHARGE = "{\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":2}}";

static void offered_defer_the_handler_defers_and_resumes_with_the_answer(void **state)
{
    fx *x = *state;
    int64_t id = silo(x, 100, "rdp");
    char ids[24];
    snprintf(ids, sizeof ids, "%lld", (long long)id);
    json_t *body = json_loads(CHARGE, 0, NULL);
    http_req rq;
    http_param p;
    req_init(x, &rq, &p, ids, body);
    waker w;
    waker_init(&w);
    http_defer d = {waker_wake, &w};
    rq.defer = &d;
    http_resp rs;
    memset(&rs, 0, sizeof rs);
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(route_silo_charge(&rq, &rs, &e), DP_OK);
    assert_non_null(rs.pending); /* deferred: nothing answered yet */
    assert_null(rs.body);
    http_pending *pend = rs.pending;
    rs.pending = NULL;
    assert_int_equal(waker_wait(&w, 1), 1);
    rq.defer = NULL;
    assert_int_equal(pend->resume(pend, &rq, &rs, &e), DP_OK);
    pend->release(pend);
    assert_int_equal(rs.status, 201);
    assert_int_equal(json_integer_value(json_object_get(rs.body, "seq")), 1);
    assert_non_null(strstr(rs.location, "/charges?after="));
    http_resp_clear(&rs);
    assert_int_equal(w.calls, 1); /* exactly once */
    waker_destroy(&w);
    json_decref(body);
}

static void deferred_refusal_and_batch_answers_match_the_synchronous_ones(void **state)
{
    fx *x = *state;
    int64_t a = silo(x, 1, "rdp"), b = silo(x, 100, "rdp");
    char charges_a[64];
    snprintf(charges_a, sizeof charges_a, "/v1/silos/%lld/charges", (long long)a);
    /* sigma = 0.5 costs far more than eps = 1: 409 with the figures, nothing charged */
    const char *big = "{\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":0.5}}";
    assert_int_equal(post(x, charges_a, big), 409);
    assert_int_equal(x->out.rc, DP_OK); /* the handler's own answer, not an error return */
    json_t *err = json_object_get(x->out.body, "error");
    assert_string_equal(json_string_value(json_object_get(err, "code")), "budget_exhausted");
    json_t *det = json_object_get(err, "details");
    assert_non_null(det);
    assert_true(json_real_value(json_object_get(det, "would_be")) > 1.0);
    assert_null(json_object_get(det, "index"));
    /* the same refusal in a batch names the index of the refused silo */
    char batch[400];
    snprintf(
        batch, sizeof batch,
        "{\"charges\":[{\"silo_id\":%lld,\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":"
        "4}},{\"silo_id\":%lld,\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":0.5}}]}",
        (long long)b, (long long)a);
    assert_int_equal(post(x, "/v1/charges", batch), 409);
    assert_int_equal(x->out.rc, DP_OK);
    det = json_object_get(json_object_get(x->out.body, "error"), "details");
    assert_int_equal(json_integer_value(json_object_get(det, "index")), 1);
    /* an admitted batch: 201 with both charges, and the all-or-nothing refusal wrote nothing */
    snprintf(
        batch, sizeof batch,
        "{\"charges\":[{\"silo_id\":%lld,\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":"
        "4}},{\"silo_id\":%lld,\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":50}}]}",
        (long long)b, (long long)a);
    assert_int_equal(post(x, "/v1/charges", batch), 201);
    json_t *arr = json_object_get(x->out.body, "charges");
    assert_int_equal(json_array_size(arr), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(arr, 0), "seq")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(arr, 1), "seq")), 1);
}

static void input_errors_are_answered_at_once_without_deferring(void **state)
{
    fx *x = *state;
    int64_t a = silo(x, 10, "rdp");
    char ida[24];
    snprintf(ida, sizeof ida, "%lld", (long long)a);
    waker w;
    waker_init(&w);
    http_defer d = {waker_wake, &w};
    const char *bad[] = {"{\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":-1}}",
                         "{\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":2},\"x\":1}",
                         "{\"reason\":\"no event\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *body = json_loads(bad[i], 0, NULL);
        http_req rq;
        http_param p;
        req_init(x, &rq, &p, ida, body);
        rq.defer = &d;
        http_resp rs;
        memset(&rs, 0, sizeof rs);
        dp_err e;
        dp_err_clear(&e);
        assert_int_equal(route_silo_charge(&rq, &rs, &e), DP_EINVAL);
        assert_null(rs.pending);
        http_resp_clear(&rs);
        json_decref(body);
    }
    /* an unknown silo is found by the committer: deferred, then 404 */
    assert_int_equal(post(x, "/v1/silos/999/charges", CHARGE), 404);
    assert_int_equal(x->out.rc, DP_ENOTFOUND);
    assert_int_equal(w.calls, 0); /* never woken for an answer given at once */
    waker_destroy(&w);
}

#define N_ASYNC 64

static void many_async_charges_from_one_thread_all_commit(void **state)
{
    fx *x = *state;
    int64_t id = silo(x, 1e9, "rdp");
    acct_event ev = {.type = ACCT_EV_GAUSSIAN, .noise_multiplier = 1000};
    ledger_charge_req req = {.silo_id = id, .event = &ev};
    ledger_charge_result res[N_ASYNC];
    ledger_pending *pend[N_ASYNC];
    waker w;
    waker_init(&w);
    for (int i = 0; i < N_ASYNC; i++) {
        dp_err e;
        dp_err_clear(&e);
        assert_int_equal(ledger_charge_start(x->f.ledger, &req, 1, NULL, false, false, &res[i],
                                             waker_wake, &w, &pend[i], &e),
                         DP_OK);
        assert_non_null(pend[i]);
    }
    assert_int_equal(waker_wait(&w, N_ASYNC), N_ASYNC);
    bool seen[N_ASYNC + 1] = {false};
    for (int i = N_ASYNC - 1; i >= 0; i--) { /* any order */
        dp_err e;
        dp_err_clear(&e);
        assert_int_equal(ledger_pending_finish(pend[i], &e), DP_OK);
        assert_true(res[i].seq >= 1 && res[i].seq <= N_ASYNC);
        assert_false(seen[res[i].seq]); /* every charge its own place in the log */
        seen[res[i].seq] = true;
    }
    ledger_verify v;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_verify(x->f.ledger, x->f.r.db, id, &v, &e), DP_OK);
    assert_true(v.consistent);
    assert_int_equal(v.n_charges_log, N_ASYNC);
    /* an answer may also be dropped (the client has gone): the charge stays committed */
    assert_int_equal(ledger_charge_start(x->f.ledger, &req, 1, NULL, false, false, &res[0],
                                         waker_wake, &w, &pend[0], &e),
                     DP_OK);
    assert_int_equal(waker_wait(&w, N_ASYNC + 1), N_ASYNC + 1);
    ledger_pending_free(pend[0]);
    assert_int_equal(ledger_silo_verify(x->f.ledger, x->f.r.db, id, &v, &e), DP_OK);
    assert_int_equal(v.n_charges_log, N_ASYNC + 1);
    waker_destroy(&w);
}

static void pld_silo_answers_through_the_deferred_path(void **state)
{
    fx *x = *state;
    int64_t id = silo(x, 10, "pld");
    char charges[64];
    snprintf(charges, sizeof charges, "/v1/silos/%lld/charges", (long long)id);
    for (int i = 1; i <= 3; i++) {
        assert_int_equal(post(x, charges, CHARGE), 201);
        assert_int_equal(json_integer_value(json_object_get(x->out.body, "seq")), i);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            offered_defer_the_handler_defers_and_resumes_with_the_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(
            deferred_refusal_and_batch_answers_match_the_synchronous_ones, setup, teardown),
        cmocka_unit_test_setup_teardown(input_errors_are_answered_at_once_without_deferring, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(many_async_charges_from_one_thread_all_commit, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(pld_silo_answers_through_the_deferred_path, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
