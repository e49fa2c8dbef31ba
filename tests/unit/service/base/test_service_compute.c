/*
 * Unit tests for service/base/compute.c (issue 10, "never starved"): the pool runs or drops every
 * accepted task exactly once, refuses with DP_EBUSY when its queue is full (the 503 with
 * Retry-After), drops what waits when it stops and flags what runs; OPEN tasks never take more than
 * their share of the threads and the queue, and TOKEN tasks go first; a deadline drops a waiting
 * task and flags a running one, whose offloaded answer is a 503 "cancelled"; compute_offload runs a
 * handler's task inline without a pool, through the deferred-answer mechanism with one
 * (http_handler_call), and frees the task exactly once on every path, including a refusal.
 */
#include "tests/support/test_util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "service/http/offload.h"
#include "service/http/err.h"

/* A gate the first task waits on, so that the queue fills behind it. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
    int entered;     /* blocking tasks that have started */
    bool saw_cancel; /* a blocking task found its cancel flag set once let through */
    atomic_int ran;
    atomic_int dropped;
    int drop_code;
    char drop_msg[DP_ERR_MSG_MAX];
    int order[16]; /* tags of the count tasks, in the order they ran */
    int n_order;
} gate;

static void gate_init(gate *g)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    atomic_init(&g->ran, 0);
    atomic_init(&g->dropped, 0);
}

static void gate_destroy(gate *g)
{
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

static void gate_wait_entered(gate *g, int n)
{
    pthread_mutex_lock(&g->mu);
    while (g->entered < n)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void gate_task(void *arg, const atomic_bool *cancel)
{
    gate *g = arg;
    pthread_mutex_lock(&g->mu);
    g->entered++;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    if (atomic_load(cancel))
        g->saw_cancel = true;
    pthread_mutex_unlock(&g->mu);
    atomic_fetch_add(&g->ran, 1);
}

static void count_task(void *arg, const atomic_bool *cancel)
{
    (void)cancel;
    gate *g = arg;
    atomic_fetch_add(&g->ran, 1);
}

static void record_drop(void *arg, const dp_err *why)
{
    gate *g = arg;
    pthread_mutex_lock(&g->mu);
    g->drop_code = why->code;
    snprintf(g->drop_msg, sizeof g->drop_msg, "%s", why->msg);
    atomic_fetch_add(&g->dropped, 1);
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* A count task with a tag, for ordering. */
typedef struct tagged {
    gate *g;
    int tag;
} tagged;

static void tagged_task(void *arg, const atomic_bool *cancel)
{
    (void)cancel;
    tagged *t = arg;
    pthread_mutex_lock(&t->g->mu);
    t->g->order[t->g->n_order++] = t->tag;
    pthread_mutex_unlock(&t->g->mu);
    atomic_fetch_add(&t->g->ran, 1);
}

static void tagged_drop(void *arg, const dp_err *why)
{
    record_drop(((tagged *)arg)->g, why);
}

static void full_queue_is_busy_and_free_drops_waiting_tasks(void **state)
{
    (void)state;
    gate g;
    gate_init(&g);
    dp_err e;
    dp_err_clear(&e);
    compute_pool *p = compute_pool_alloc(1, 2, 0, &e);
    assert_non_null(p);
    assert_int_equal(compute_submit(p, COMPUTE_TOKEN, gate_task, record_drop, &g, &e), DP_OK);
    gate_wait_entered(&g, 1); /* the only thread is now busy */
    assert_int_equal(compute_submit(p, COMPUTE_TOKEN, count_task, record_drop, &g, &e), DP_OK);
    assert_int_equal(compute_submit(p, COMPUTE_TOKEN, count_task, record_drop, &g, &e), DP_OK);
    size_t q, r;
    compute_pool_load(p, &q, &r);
    assert_int_equal(q, 2);
    assert_int_equal(r, 1);
    assert_int_equal(compute_submit(p, COMPUTE_TOKEN, count_task, record_drop, &g, &e), DP_EBUSY);
    assert_int_equal(http_err_status(e.code), 503);
    assert_non_null(strstr(e.msg, "queue is full"));
    /* stopping: the two waiting tasks are dropped (never run), the running one is flagged */
    compute_pool_stop(p);
    assert_int_equal(atomic_load(&g.dropped), 2);
    assert_int_equal(g.drop_code, DP_EBUSY);
    assert_non_null(strstr(g.drop_msg, "stopping"));
    dp_err_clear(&e);
    assert_int_equal(compute_submit(p, COMPUTE_TOKEN, count_task, record_drop, &g, &e), DP_EBUSY);
    gate_open(&g);
    compute_pool_free(p);
    assert_int_equal(atomic_load(&g.ran), 1);
    assert_true(g.saw_cancel);
    gate_destroy(&g);
}

/* Fairness: OPEN tasks hold at most max(1, threads/2) threads and max(1, queue/2) places. */
static void open_tasks_keep_to_their_share(void **state)
{
    (void)state;
    gate g;
    gate_init(&g);
    dp_err e;
    dp_err_clear(&e);
    compute_pool *p = compute_pool_alloc(2, 4, 0, &e);
    assert_non_null(p);
    assert_int_equal(compute_submit(p, COMPUTE_OPEN, gate_task, record_drop, &g, &e), DP_OK);
    gate_wait_entered(&g, 1);
    /* the second thread is idle, but OPEN already runs on its one thread: these wait */
    assert_int_equal(compute_submit(p, COMPUTE_OPEN, count_task, record_drop, &g, &e), DP_OK);
    assert_int_equal(compute_submit(p, COMPUTE_OPEN, count_task, record_drop, &g, &e), DP_OK);
    size_t q, r;
    compute_pool_load_class(p, COMPUTE_OPEN, &q, &r);
    assert_int_equal(q, 2);
    assert_int_equal(r, 1);
    /* the OPEN share of the queue (2 of 4) is full: 503, though two places are left */
    assert_int_equal(compute_submit(p, COMPUTE_OPEN, count_task, record_drop, &g, &e), DP_EBUSY);
    assert_int_equal(http_err_status(e.code), 503);
    assert_non_null(strstr(e.msg, "without a token"));
    /* a TOKEN task takes the idle thread at once */
    assert_int_equal(compute_submit(p, COMPUTE_TOKEN, gate_task, record_drop, &g, &e), DP_OK);
    gate_wait_entered(&g, 2);
    compute_pool_load_class(p, COMPUTE_TOKEN, &q, &r);
    assert_int_equal(r, 1);
    compute_pool_load_class(p, COMPUTE_OPEN, &q, &r);
    assert_int_equal(q, 2);
    assert_int_equal(r, 1);
    /* and TOKEN tasks may still queue in the rest */
    assert_int_equal(compute_submit(p, COMPUTE_TOKEN, count_task, record_drop, &g, &e), DP_OK);
    assert_int_equal(compute_submit(p, COMPUTE_TOKEN, count_task, record_drop, &g, &e), DP_OK);
    assert_int_equal(compute_submit(p, COMPUTE_TOKEN, count_task, record_drop, &g, &e), DP_EBUSY);
    gate_open(&g);
    /* wait for all six to run (gates, 2 OPEN, 2 TOKEN) before freeing, which would drop them */
    for (int i = 0; i < 100000 && atomic_load(&g.ran) < 6; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(atomic_load(&g.ran), 6);
    assert_int_equal(atomic_load(&g.dropped), 0);
    compute_pool_free(p);
    gate_destroy(&g);
}

/* A freed thread takes a waiting TOKEN task before OPEN tasks that waited longer. */
static void token_tasks_go_first(void **state)
{
    (void)state;
    gate g;
    gate_init(&g);
    dp_err e;
    dp_err_clear(&e);
    compute_pool *p = compute_pool_alloc(1, 8, 0, &e);
    assert_non_null(p);
    assert_int_equal(compute_submit(p, COMPUTE_TOKEN, gate_task, record_drop, &g, &e), DP_OK);
    gate_wait_entered(&g, 1);
    tagged t[4] = {{&g, 1}, {&g, 2}, {&g, 3}, {&g, 4}};
    compute_class cls[4] = {COMPUTE_OPEN, COMPUTE_OPEN, COMPUTE_TOKEN, COMPUTE_TOKEN};
    for (int i = 0; i < 4; i++)
        assert_int_equal(compute_submit(p, cls[i], tagged_task, tagged_drop, &t[i], &e), DP_OK);
    gate_open(&g);
    for (int i = 0; i < 100000 && atomic_load(&g.ran) < 5; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(atomic_load(&g.ran), 5);
    int want[4] = {3, 4, 1, 2};
    assert_int_equal(g.n_order, 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(g.order[i], want[i]);
    compute_pool_free(p);
    gate_destroy(&g);
}

/* The deadline: a task still waiting is dropped with a 503 (never run); the running one is
 * flagged. */
static void deadline_drops_waiting_and_flags_running(void **state)
{
    (void)state;
    gate g;
    gate_init(&g);
    dp_err e;
    dp_err_clear(&e);
    compute_pool *p = compute_pool_alloc(1, 4, 20, &e); /* 20 ms */
    assert_non_null(p);
    assert_int_equal(compute_pool_timeout_ms(p), 20);
    assert_int_equal(compute_submit(p, COMPUTE_TOKEN, gate_task, record_drop, &g, &e), DP_OK);
    gate_wait_entered(&g, 1);
    assert_int_equal(compute_submit(p, COMPUTE_TOKEN, count_task, record_drop, &g, &e), DP_OK);
    pthread_mutex_lock(&g.mu); /* the watchdog drops it (bounded by the test runner's timeout) */
    while (atomic_load(&g.dropped) < 1)
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    assert_int_equal(g.drop_code, DP_EBUSY);
    assert_int_equal(http_err_status(g.drop_code), 503);
    assert_non_null(strstr(g.drop_msg, "timed out waiting for a compute thread"));
    size_t q, r;
    compute_pool_load(p, &q, &r);
    assert_int_equal(q, 0);
    gate_open(&g); /* the running task's deadline passed before the waiting one's: flagged */
    compute_pool_free(p);
    assert_true(g.saw_cancel);
    assert_int_equal(atomic_load(&g.ran), 1); /* the dropped task never ran */
    gate_destroy(&g);
}

static void bad_sizes_are_refused(void **state)
{
    (void)state;
    dp_err e;
    dp_err_clear(&e);
    assert_null(compute_pool_alloc(0, 4, 0, &e));
    assert_int_equal(e.code, DP_EINVAL);
    dp_err_clear(&e);
    assert_null(compute_pool_alloc(2, 0, 0, &e));
    assert_int_equal(e.code, DP_EINVAL);
    compute_pool_free(NULL);
}

/* A task that records where its halves ran. */
typedef struct probe {
    pthread_t caller;
    bool ran_elsewhere;
    bool rendered, deferred;
    int frees;
    int fail;          /* run's result */
    bool until_cancel; /* run waits for its cancel flag */
    bool saw_cancel;
} probe;

static int probe_run(void *arg, const atomic_bool *cancel, dp_err *err)
{
    probe *pr = arg;
    pr->ran_elsewhere = !pthread_equal(pr->caller, pthread_self());
    if (pr->until_cancel) { /* a long loop that polls the flag (bounded: about 100 s) */
        for (int i = 0; i < 100000 && cancel != NULL && !atomic_load(cancel); i++) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        pr->saw_cancel = cancel != NULL && atomic_load(cancel);
        if (pr->saw_cancel)
            return dp_err_set(err, DP_EBUSY, NULL, "stopped early");
    }
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
    compute_task t = {probe_run, probe_render, probe_free, pr, COMPUTE_TOKEN};
    return compute_offload(rq, rs, &t, err);
}

static void offload_runs_inline_without_a_pool_and_on_it_with_one(void **state)
{
    (void)state;
    dp_err e;
    dp_err_clear(&e);
    compute_pool *p = compute_pool_alloc(2, 4, 0, &e);
    assert_non_null(p);
    for (int with_pool = 0; with_pool < 2; with_pool++) {
        probe pr = {.caller = pthread_self()};
        http_req rq;
        memset(&rq, 0, sizeof rq);
        rq.req_id = (const char *)&pr;
        app a = {.compute = with_pool ? p : NULL};
        rq.app = &a;
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
    gate g;
    gate_init(&g);
    dp_err e;
    dp_err_clear(&e);
    compute_pool *p = compute_pool_alloc(1, 1, 0, &e);
    assert_non_null(p);
    assert_int_equal(compute_submit(p, COMPUTE_TOKEN, gate_task, record_drop, &g, &e), DP_OK);
    gate_wait_entered(&g, 1);
    assert_int_equal(compute_submit(p, COMPUTE_TOKEN, count_task, record_drop, &g, &e),
                     DP_OK); /* the one waiting place */
    probe pr = {.caller = pthread_self()};
    http_req rq;
    memset(&rq, 0, sizeof rq);
    rq.req_id = (const char *)&pr;
    app a = {.compute = p};
    rq.app = &a;
    http_resp rs;
    memset(&rs, 0, sizeof rs);
    dp_err_clear(&e);
    assert_int_equal(http_handler_call(offload_handler, &rq, &rs, &e), DP_EBUSY);
    assert_false(pr.rendered);
    assert_int_equal(pr.frees, 1);
    http_resp_clear(&rs);
    gate_open(&g);
    compute_pool_free(p); /* the waiting task is dropped: the pool stops */
    assert_int_equal(atomic_load(&g.ran) + atomic_load(&g.dropped), 2);
    gate_destroy(&g);
}

/* An offloaded run past its deadline is cancelled: 503 "cancelled", render never runs, one free. */
static void offload_past_its_deadline_is_cancelled(void **state)
{
    (void)state;
    dp_err e;
    dp_err_clear(&e);
    compute_pool *p = compute_pool_alloc(1, 2, 20, &e);
    assert_non_null(p);
    probe pr = {.caller = pthread_self(), .until_cancel = true};
    http_req rq;
    memset(&rq, 0, sizeof rq);
    rq.req_id = (const char *)&pr;
    app a = {.compute = p};
    rq.app = &a;
    http_resp rs;
    memset(&rs, 0, sizeof rs);
    assert_int_equal(http_handler_call(offload_handler, &rq, &rs, &e), DP_EBUSY);
    assert_true(pr.saw_cancel);
    assert_non_null(strstr(e.msg, "cancelled"));
    assert_non_null(strstr(e.msg, "nothing was charged"));
    assert_false(pr.rendered);
    assert_int_equal(pr.frees, 1);
    http_resp_clear(&rs);
    compute_pool_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(full_queue_is_busy_and_free_drops_waiting_tasks),
        cmocka_unit_test(open_tasks_keep_to_their_share),
        cmocka_unit_test(token_tasks_go_first),
        cmocka_unit_test(deadline_drops_waiting_and_flags_running),
        cmocka_unit_test(bad_sizes_are_refused),
        cmocka_unit_test(offload_runs_inline_without_a_pool_and_on_it_with_one),
        cmocka_unit_test(offload_refused_by_a_full_queue_frees_the_task),
        cmocka_unit_test(offload_past_its_deadline_is_cancelled),
    };
    return cmocka_run_group_tests_name("service_compute", tests, NULL, NULL);
}
