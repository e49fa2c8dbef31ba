/*
 * base/compute.c: the bounded compute pool. Contract in base/compute.h; the handler side (a
 * pending HTTP answer around a task) is http/offload.c.
 *
 * DESIGN. Two FIFOs of heap-allocated nodes (one per class), a mutex and a condition variable
 * (redis bio.c). A worker sleeps on cv until it may take a task (take(): the TOKEN head, else the
 * OPEN head while fewer than open_max_running OPEN tasks run) or the pool stops; it unlinks the
 * node under the mutex, releases it and runs the task. `queued` counts waiting tasks only: a task
 * being run no longer holds a place, so the bound is on the backlog, and at most n_threads tasks
 * run at once. A watchdog thread sleeps until the nearest deadline (at most WATCHDOG_IDLE_MS),
 * drops the waiting tasks whose deadline passed and sets the cancel flag of running ones.
 * compute_pool_stop sets `stop`, drops every waiting task and flags every running one, so every
 * accepted task is run or dropped exactly once (either way its wake-up is owed to a suspended
 * connection).
 */
#include "service/base/compute.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/dp_alloc.h"
#include "common/dp_assert.h"
#include "common/dp_log.h"
#include "service/base/time.h"

#define N_CLASSES        2
#define WATCHDOG_IDLE_MS 1000 /* longest sleep of the watchdog when no deadline is near */

typedef struct compute_node {
    compute_run_fn run;
    compute_drop_fn drop;
    void *arg;
    compute_class cls;
    int64_t deadline_ms;       /* CLOCK_MONOTONIC; INT64_MAX: none */
    atomic_bool cancel;        /* set by the watchdog or compute_pool_stop; read by run */
    struct compute_node *next; /* guarded by pool->mu */
} compute_node;

typedef struct worker {
    struct compute_pool *pool;
    compute_node *current; /* the task being run, guarded by pool->mu */
} worker;

struct compute_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;  /* workers: a task was queued, an OPEN task finished, or stop */
    pthread_cond_t wcv; /* watchdog (CLOCK_MONOTONIC): stop */
    compute_node *head[N_CLASSES], *tail[N_CLASSES]; /* FIFOs, guarded by mu */
    size_t queued[N_CLASSES];                        /* guarded by mu */
    size_t running[N_CLASSES];                       /* guarded by mu */
    size_t max_queued, open_max_queued;              /* immutable */
    size_t open_max_running;                         /* immutable */
    unsigned timeout_ms;                             /* immutable */
    bool stop;                                       /* guarded by mu */
    pthread_t threads[COMPUTE_MAX_THREADS];
    worker workers[COMPUTE_MAX_THREADS];
    unsigned n_threads; /* started; immutable after alloc */
    pthread_t watchdog;
    bool watchdog_started;
};

static void push(compute_pool *p, compute_node *n)
{
    n->next = NULL;
    if (p->tail[n->cls] != NULL)
        p->tail[n->cls]->next = n;
    else
        p->head[n->cls] = n;
    p->tail[n->cls] = n;
    p->queued[n->cls]++;
    /* compute_submit pushes only below both caps (the bound on the backlog) */
    DP_ASSERT(p->queued[COMPUTE_OPEN] + p->queued[COMPUTE_TOKEN] <= p->max_queued);
    DP_ASSERT(p->queued[COMPUTE_OPEN] <= p->open_max_queued);
}

static compute_node *pop(compute_pool *p, compute_class cls)
{
    compute_node *n = p->head[cls];
    if (n == NULL)
        return NULL;
    DP_ASSERT(p->queued[cls] > 0); /* the count matches the list */
    p->head[cls] = n->next;
    if (p->head[cls] == NULL)
        p->tail[cls] = NULL;
    p->queued[cls]--;
    n->next = NULL;
    return n;
}

/* The next task a free thread takes: TOKEN first, OPEN while under its share of the threads. */
static compute_node *take(compute_pool *p)
{
    if (p->head[COMPUTE_TOKEN] != NULL)
        return pop(p, COMPUTE_TOKEN);
    if (p->head[COMPUTE_OPEN] != NULL && p->running[COMPUTE_OPEN] < p->open_max_running)
        return pop(p, COMPUTE_OPEN);
    return NULL;
}

/* Calls drop on every node of the list (next-linked) and frees them. Without the mutex. */
static void drop_all(compute_node *list, const dp_err *why)
{
    while (list != NULL) {
        compute_node *n = list;
        list = n->next;
        n->drop(n->arg, why);
        dp_free(n);
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    compute_pool *p = w->pool;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        compute_node *n = NULL;
        while (!p->stop && (n = take(p)) == NULL)
            pthread_cond_wait(&p->cv, &p->mu);
        if (n == NULL) /* stop: compute_pool_stop dropped what was waiting */
            break;
        p->running[n->cls]++;
        /* at most open_max_running OPEN tasks at once (take), and one task per thread */
        DP_ASSERT(p->running[COMPUTE_OPEN] <= p->open_max_running);
        DP_ASSERT(p->running[COMPUTE_OPEN] + p->running[COMPUTE_TOKEN] <= COMPUTE_MAX_THREADS);
        DP_ASSERT(w->current == NULL);
        w->current = n;
        pthread_mutex_unlock(&p->mu);
        n->run(n->arg, &n->cancel);
        pthread_mutex_lock(&p->mu);
        w->current = NULL;
        p->running[n->cls]--;
        if (n->cls == COMPUTE_OPEN) /* a waiting OPEN task may now have its share */
            pthread_cond_broadcast(&p->cv);
        dp_free(n);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* The deadlines: drops waiting tasks whose deadline passed (each FIFO is in deadline order, all
 * tasks having the same timeout, so only heads are looked at) and flags running ones. */
static void *watchdog_main(void *arg)
{
    compute_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        int64_t now = time_mono_ms(), next = now + WATCHDOG_IDLE_MS;
        compute_node *expired = NULL, **link = &expired;
        for (int c = 0; c < N_CLASSES; c++) {
            while (p->head[c] != NULL && p->head[c]->deadline_ms <= now) {
                *link = pop(p, (compute_class)c);
                link = &(*link)->next;
            }
            if (p->head[c] != NULL && p->head[c]->deadline_ms < next)
                next = p->head[c]->deadline_ms;
        }
        for (unsigned i = 0; i < p->n_threads; i++) {
            compute_node *n = p->workers[i].current;
            if (n == NULL || atomic_load(&n->cancel))
                continue;
            if (n->deadline_ms <= now)
                atomic_store(&n->cancel, true);
            else if (n->deadline_ms < next)
                next = n->deadline_ms;
        }
        if (expired != NULL) {
            pthread_mutex_unlock(&p->mu);
            dp_err why;
            dp_err_clear(&why);
            dp_err_set(&why, DP_EBUSY, NULL,
                       "timed out waiting for a compute thread (%u s, --compute-timeout); "
                       "nothing was computed or charged; retry later",
                       (p->timeout_ms + 999) / 1000);
            drop_all(expired, &why);
            pthread_mutex_lock(&p->mu);
            continue;
        }
        struct timespec ts = {.tv_sec = (time_t)(next / 1000),
                              .tv_nsec = (long)(next % 1000) * 1000000};
        pthread_cond_timedwait(&p->wcv, &p->mu, &ts);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

compute_pool *compute_pool_alloc(unsigned n_threads, size_t max_queued, unsigned timeout_ms,
                                 dp_err *err)
{
    if (n_threads < 1 || n_threads > COMPUTE_MAX_THREADS) {
        dp_err_set(err, DP_EINVAL, "compute_threads", "compute threads must be in 1..%d (got %u)",
                   COMPUTE_MAX_THREADS, n_threads);
        return NULL;
    }
    if (max_queued < 1 || max_queued > COMPUTE_MAX_QUEUE) {
        dp_err_set(err, DP_EINVAL, "compute_queue", "compute queue must be in 1..%d (got %zu)",
                   COMPUTE_MAX_QUEUE, max_queued);
        return NULL;
    }
    compute_pool *p = dp_calloc(1, sizeof *p);
    if (p == NULL) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    pthread_condattr_t ca;
    bool ca_ok = pthread_condattr_init(&ca) == 0;
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        if (ca_ok)
            pthread_condattr_destroy(&ca);
        dp_free(p);
        dp_err_set(err, DP_EINTERNAL, NULL, "cannot create the compute pool's mutex");
        return NULL;
    }
    if (!ca_ok || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&p->cv, NULL) != 0) {
        if (ca_ok)
            pthread_condattr_destroy(&ca);
        pthread_mutex_destroy(&p->mu);
        dp_free(p);
        dp_err_set(err, DP_EINTERNAL, NULL, "cannot create the compute pool's condition");
        return NULL;
    }
    if (pthread_cond_init(&p->wcv, &ca) != 0) {
        pthread_condattr_destroy(&ca);
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        dp_free(p);
        dp_err_set(err, DP_EINTERNAL, NULL, "cannot create the compute pool's condition");
        return NULL;
    }
    pthread_condattr_destroy(&ca);
    p->max_queued = max_queued;
    p->open_max_queued = max_queued / 2 > 0 ? max_queued / 2 : 1;
    p->open_max_running = n_threads / 2 > 0 ? n_threads / 2 : 1;
    p->timeout_ms = timeout_ms;
    for (unsigned i = 0; i < n_threads; i++) {
        p->workers[i].pool = p;
        if (pthread_create(&p->threads[i], NULL, worker_main, &p->workers[i]) != 0) {
            dp_err_set(err, DP_EINTERNAL, NULL, "cannot start compute thread %u of %u", i + 1,
                       n_threads);
            compute_pool_free(p); /* joins the ones started */
            return NULL;
        }
        p->n_threads = i + 1;
    }
    if (pthread_create(&p->watchdog, NULL, watchdog_main, p) != 0) {
        dp_err_set(err, DP_EINTERNAL, NULL, "cannot start the compute watchdog thread");
        compute_pool_free(p);
        return NULL;
    }
    p->watchdog_started = true;
    return p;
}

void compute_pool_stop(compute_pool *p)
{
    if (p == NULL)
        return;
    compute_node *waiting = NULL, **link = &waiting;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    for (int c = 0; c < N_CLASSES; c++)
        while (p->head[c] != NULL) {
            *link = pop(p, (compute_class)c);
            link = &(*link)->next;
        }
    for (unsigned i = 0; i < p->n_threads; i++)
        if (p->workers[i].current != NULL)
            atomic_store(&p->workers[i].current->cancel, true);
    pthread_cond_broadcast(&p->cv);
    pthread_cond_broadcast(&p->wcv);
    pthread_mutex_unlock(&p->mu);
    dp_err why;
    dp_err_clear(&why);
    dp_err_set(&why, DP_EBUSY, NULL,
               "the server is stopping; nothing was computed or charged; retry elsewhere");
    drop_all(waiting, &why);
}

void compute_pool_free(compute_pool *p)
{
    if (p == NULL)
        return;
    compute_pool_stop(p);
    for (unsigned i = 0; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    if (p->watchdog_started)
        pthread_join(p->watchdog, NULL);
    pthread_cond_destroy(&p->wcv);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    dp_free(p);
}

int compute_submit(compute_pool *p, compute_class cls, compute_run_fn run, compute_drop_fn drop,
                   void *arg, dp_err *err)
{
    if (cls != COMPUTE_OPEN && cls != COMPUTE_TOKEN)
        return dp_err_set(err, DP_EINTERNAL, NULL, "unknown compute class %d", (int)cls);
    compute_node *n = dp_calloc(1, sizeof *n);
    if (n == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    n->run = run;
    n->drop = drop;
    n->arg = arg;
    n->cls = cls;
    atomic_init(&n->cancel, false);
    n->deadline_ms = p->timeout_ms > 0 ? time_mono_ms() + p->timeout_ms : INT64_MAX;
    pthread_mutex_lock(&p->mu);
    size_t waiting = p->queued[COMPUTE_OPEN] + p->queued[COMPUTE_TOKEN];
    bool stop = p->stop, full = waiting >= p->max_queued,
         open_full = cls == COMPUTE_OPEN && p->queued[COMPUTE_OPEN] >= p->open_max_queued;
    size_t open_waiting = p->queued[COMPUTE_OPEN];
    if (!stop && !full && !open_full) {
        push(p, n);
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    if (stop || full || open_full) {
        dp_free(n);
        if (stop)
            return dp_err_set(err, DP_EBUSY, NULL, "the server is stopping; retry elsewhere");
        if (full)
            return dp_err_set(err, DP_EBUSY, NULL,
                              "the compute queue is full (%zu requests waiting); retry shortly",
                              waiting);
        return dp_err_set(err, DP_EBUSY, NULL,
                          "the compute queue is full for requests without a token (%zu of them "
                          "waiting); retry shortly",
                          open_waiting);
    }
    return DP_OK;
}

void compute_pool_load(compute_pool *p, size_t *queued, size_t *running)
{
    pthread_mutex_lock(&p->mu);
    *queued = p->queued[COMPUTE_OPEN] + p->queued[COMPUTE_TOKEN];
    *running = p->running[COMPUTE_OPEN] + p->running[COMPUTE_TOKEN];
    pthread_mutex_unlock(&p->mu);
}

void compute_pool_load_class(compute_pool *p, compute_class cls, size_t *queued, size_t *running)
{
    pthread_mutex_lock(&p->mu);
    *queued = p->queued[cls];
    *running = p->running[cls];
    pthread_mutex_unlock(&p->mu);
}

unsigned compute_pool_timeout_ms(const compute_pool *p)
{
    return p->timeout_ms;
}
