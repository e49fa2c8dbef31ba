/*
 * Unit tests for service/compute.c (issue 10, "never starved"): the pool runs every accepted task
 * exactly once, refuses with DP_EBUSY when its queue is full (the 503 with Retry-After), and drains
 * its queue when freed; compute_offload runs a handler's task inline without a pool, through the
 * deferred-answer mechanism with one (http_handler_call), and frees the task exactly once on every
 * path, including a refusal.
 */
#include "tests/test_util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "service/compute.h"
#include "service/http_err.h"

/* A gate the first task waits on, so that the queue fills behind it. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
    bool entered; /* the blocking task has started */
    atomic_int ran;
} gate;

static void gate_task(void *arg)
{
    gate *g = arg;
    pthread_mutex_lock(&g->mu);
    g->entered = true;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    atomic_fetch_add(&g->ran, 1);
}

static void count_task(void *arg)
{
    gate *g = arg;
    atomic_fetch_add(&g->ran, 1);
}

static void full_queue_is_busy_and_free_drains_it(void **state)
{
    (void)state;
    gate g = {.open = false, .entered = false};
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    atomic_init(&g.ran, 0);
    dp_err e;
    dp_err_clear(&e);
    compute_pool *p = compute_pool_alloc(1, 2, &e);
    assert_non_null(p);
    assert_int_equal(compute_submit(p, gate_task, &g, &e), DP_OK);
    pthread_mutex_lock(&g.mu);
    while (!g.entered) /* the only thread is now busy */
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    assert_int_equal(compute_submit(p, count_task, &g, &e), DP_OK);
    assert_int_equal(compute_submit(p, count_task, &g, &e), DP_OK);
    size_t q, r;
    compute_pool_load(p, &q, &r);
    assert_int_equal(q, 2);
    assert_int_equal(r, 1);
    assert_int_equal(compute_submit(p, count_task, &g, &e), DP_EBUSY);
    assert_int_equal(http_err_status(e.code), 503);
    assert_non_null(strstr(e.msg, "queue is full"));
    pthread_mutex_lock(&g.mu);
    g.open = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    compute_pool_free(p); /* runs the two queued tasks before returning */
    assert_int_equal(atomic_load(&g.ran), 3);
    pthread_cond_destroy(&g.cv);
    pthread_mutex_destroy(&g.mu);
}

static void bad_sizes_are_refused(void **state)
{
    (void)state;
    dp_err e;
    dp_err_clear(&e);
    assert_null(compute_pool_alloc(0, 4, &e));
    assert_int_equal(e.code, DP_EINVAL);
    dp_err_clear(&e);
    assert_null(compute_pool_alloc(2, 0, &e));
    assert_int_equal(e.code, DP_EINVAL);
    compute_pool_free(NULL);
}

/* A task that records where its halves ran. */
typedef struct probe {
    pthread_t caller;
    bool ran_elsewhere;
    bool rendered, deferred;
    int frees;
    int fail; /* run's result */
} probe;

static int probe_run(void *arg, dp_err *err)
{
    probe *pr = arg;
    pr->ran_elsewhere = !pthread_equal(pr->caller, pthread_self());
    if (pr->fail != DP_OK)
        return dp_err_set(err, pr->fail, "x", "the run failed");
    return DP_OK;
}

static int probe_render(void *arg, const http_req *rq, http_resp *rs, bool deferred, dp_err *err)
{
    (void)rq;
    probe *pr = arg;
    pr->rendered = true;
    pr->deferred = deferred;
    return http_resp_json(rs, 200, json_pack("{s:b}", "deferred", deferred), err);
}

static void probe_free(void *arg)
{
    ((probe *)arg)->frees++;
}

static int offload_handler(const http_req *rq, http_resp *rs, dp_err *err)
{
    probe *pr = (probe *)rq->req_id; /* the test's probe rides in req_id */
    compute_task t = {probe_run, probe_render, probe_free, pr};
    return compute_offload(rq, rs, &t, err);
}

static void offload_runs_inline_without_a_pool_and_on_it_with_one(void **state)
{
    (void)state;
    dp_err e;
    dp_err_clear(&e);
    compute_pool *p = compute_pool_alloc(2, 4, &e);
    assert_non_null(p);
    for (int with_pool = 0; with_pool < 2; with_pool++) {
        probe pr = {.caller = pthread_self()};
        http_req rq;
        memset(&rq, 0, sizeof rq);
        rq.req_id = (const char *)&pr;
        rq.compute = with_pool ? p : NULL;
        http_resp rs;
        memset(&rs, 0, sizeof rs);
        dp_err_clear(&e);
        assert_int_equal(http_handler_call(offload_handler, &rq, &rs, &e), DP_OK);
        assert_int_equal(rs.status, 200);
        assert_true(pr.rendered);
        assert_int_equal(pr.deferred, with_pool == 1);
        assert_int_equal(pr.ran_elsewhere, with_pool == 1);
        assert_int_equal(pr.frees, 1);
        http_resp_clear(&rs);
        /* a failing run: its error is the answer, render never runs, free once */
        probe bad = {.caller = pthread_self(), .fail = DP_ENUMERIC};
        rq.req_id = (const char *)&bad;
        dp_err_clear(&e);
        assert_int_equal(http_handler_call(offload_handler, &rq, &rs, &e), DP_ENUMERIC);
        assert_string_equal(e.field, "x");
        assert_false(bad.rendered);
        assert_int_equal(bad.frees, 1);
        http_resp_clear(&rs);
    }
    compute_pool_free(p);
}

static void offload_refused_by_a_full_queue_frees_the_task(void **state)
{
    (void)state;
    gate g = {.open = false, .entered = false};
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    atomic_init(&g.ran, 0);
    dp_err e;
    dp_err_clear(&e);
    compute_pool *p = compute_pool_alloc(1, 1, &e);
    assert_non_null(p);
    assert_int_equal(compute_submit(p, gate_task, &g, &e), DP_OK);
    pthread_mutex_lock(&g.mu);
    while (!g.entered)
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    assert_int_equal(compute_submit(p, count_task, &g, &e), DP_OK); /* the one waiting place */
    probe pr = {.caller = pthread_self()};
    http_req rq;
    memset(&rq, 0, sizeof rq);
    rq.req_id = (const char *)&pr;
    rq.compute = p;
    http_resp rs;
    memset(&rs, 0, sizeof rs);
    dp_err_clear(&e);
    assert_int_equal(http_handler_call(offload_handler, &rq, &rs, &e), DP_EBUSY);
    assert_false(pr.rendered);
    assert_int_equal(pr.frees, 1);
    http_resp_clear(&rs);
    pthread_mutex_lock(&g.mu);
    g.open = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    compute_pool_free(p);
    assert_int_equal(atomic_load(&g.ran), 2);
    pthread_cond_destroy(&g.cv);
    pthread_mutex_destroy(&g.mu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(full_queue_is_busy_and_free_drains_it),
        cmocka_unit_test(bad_sizes_are_refused),
        cmocka_unit_test(offload_runs_inline_without_a_pool_and_on_it_with_one),
        cmocka_unit_test(offload_refused_by_a_full_queue_frees_the_task),
    };
    return cmocka_run_group_tests_name("service_compute", tests, NULL, NULL);
}
