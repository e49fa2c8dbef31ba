/*
 * compute.c: the bounded compute pool and the handler-side offload. Contract in compute.h.
 *
 * DESIGN. One FIFO of heap-allocated nodes, a mutex and one condition variable (redis bio.c). A
 * worker sleeps on cv until a task is queued or the pool stops; it unlinks the head under the
 * mutex, releases it and runs the task. `queued` counts waiting tasks only: a task being run no
 * longer holds a place, so the bound is on the backlog, and at most n_threads tasks run at once.
 * compute_pool_free sets `stop` and broadcasts; workers drain the FIFO before they exit, so every
 * accepted task runs exactly once (its wake-up is owed to a suspended connection).
 *
 * Offload: a pending answer (http.h PENDING) wraps the compute_task. The pool thread runs
 * task.run, then calls the connection's wake-up; the dispatcher calls resume (task.render) on an
 * HTTP thread and release (task.free) once. The wake-up is the pool thread's last access to the
 * pending object before release, so no lock is needed: http.c orders resume and release after the
 * wake-up.
 */
#include "service/compute.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_log.h"

typedef struct compute_node {
    void (*fn)(void *arg);
    void *arg;
    struct compute_node *next; /* guarded by pool->mu */
} compute_node;

struct compute_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;         /* signalled when a task is queued or stop is set */
    compute_node *head, *tail; /* FIFO, guarded by mu */
    size_t queued;             /* tasks in the FIFO, guarded by mu */
    size_t running;            /* tasks being run, guarded by mu */
    size_t max_queued;         /* immutable */
    bool stop;                 /* guarded by mu */
    pthread_t threads[COMPUTE_MAX_THREADS];
    unsigned n_threads; /* started; immutable after alloc */
};

static void *worker_main(void *arg)
{
    compute_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->head == NULL && !p->stop)
            pthread_cond_wait(&p->cv, &p->mu);
        compute_node *n = p->head;
        if (n == NULL) /* stop, and nothing left to run */
            break;
        p->head = n->next;
        if (p->head == NULL)
            p->tail = NULL;
        p->queued--;
        p->running++;
        pthread_mutex_unlock(&p->mu);
        n->fn(n->arg);
        dp_free(n);
        pthread_mutex_lock(&p->mu);
        p->running--;
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

compute_pool *compute_pool_alloc(unsigned n_threads, size_t max_queued, dp_err *err)
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
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        dp_free(p);
        dp_err_set(err, DP_EINTERNAL, NULL, "cannot create the compute pool's mutex");
        return NULL;
    }
    if (pthread_cond_init(&p->cv, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        dp_free(p);
        dp_err_set(err, DP_EINTERNAL, NULL, "cannot create the compute pool's condition");
        return NULL;
    }
    p->max_queued = max_queued;
    for (unsigned i = 0; i < n_threads; i++) {
        if (pthread_create(&p->threads[i], NULL, worker_main, p) != 0) {
            dp_err_set(err, DP_EINTERNAL, NULL, "cannot start compute thread %u of %u", i + 1,
                       n_threads);
            compute_pool_free(p); /* joins the ones started */
            return NULL;
        }
        p->n_threads = i + 1;
    }
    return p;
}

void compute_pool_free(compute_pool *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    dp_free(p);
}

int compute_submit(compute_pool *p, void (*fn)(void *arg), void *arg, dp_err *err)
{
    compute_node *n = dp_calloc(1, sizeof *n);
    if (n == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    n->fn = fn;
    n->arg = arg;
    pthread_mutex_lock(&p->mu);
    bool full = p->queued >= p->max_queued, stop = p->stop;
    size_t waiting = p->queued;
    if (!full && !stop) {
        if (p->tail != NULL)
            p->tail->next = n;
        else
            p->head = n;
        p->tail = n;
        p->queued++;
        pthread_cond_signal(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    if (stop || full) {
        dp_free(n);
        if (stop)
            return dp_err_set(err, DP_EBUSY, NULL, "the server is stopping; retry elsewhere");
        return dp_err_set(err, DP_EBUSY, NULL,
                          "the compute queue is full (%zu requests waiting); retry shortly",
                          waiting);
    }
    return DP_OK;
}

void compute_pool_load(compute_pool *p, size_t *queued, size_t *running)
{
    pthread_mutex_lock(&p->mu);
    *queued = p->queued;
    *running = p->running;
    pthread_mutex_unlock(&p->mu);
}

/* ---- offload ------------------------------------------------------------------------------- */

typedef struct offload {
    http_pending base; /* first: the dispatcher's handle */
    compute_task task;
    void (*wake)(void *arg); /* copied from rq->defer */
    void *wake_arg;
    int rc;     /* task.run's result; written by the pool thread before wake */
    dp_err err; /* its error */
} offload;

static void offload_work(void *arg)
{
    offload *o = arg;
    dp_err_clear(&o->err);
    o->rc = o->task.run(o->task.arg, &o->err);
    o->wake(o->wake_arg); /* the last access to o on this thread */
}

static int offload_resume(http_pending *hp, const http_req *rq, http_resp *rs, dp_err *err)
{
    offload *o = (offload *)hp;
    if (o->rc != DP_OK) {
        if (o->err.code == DP_OK)
            dp_err_set(&o->err, o->rc, NULL, "the computation failed");
        *err = o->err;
        return o->rc;
    }
    return o->task.render(o->task.arg, rq, rs, true, err);
}

static void offload_release(http_pending *hp)
{
    offload *o = (offload *)hp;
    if (o->task.free != NULL)
        o->task.free(o->task.arg);
    dp_free(o);
}

int compute_offload(const http_req *rq, http_resp *rs, const compute_task *t, dp_err *err)
{
    if (rq->defer == NULL || rq->compute == NULL) {
        int rc = t->run(t->arg, err);
        if (rc == DP_OK)
            rc = t->render(t->arg, rq, rs, false, err);
        if (t->free != NULL)
            t->free(t->arg);
        return rc;
    }
    offload *o = dp_calloc(1, sizeof *o);
    if (o == NULL) {
        if (t->free != NULL)
            t->free(t->arg);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    o->base.resume = offload_resume;
    o->base.release = offload_release;
    o->task = *t;
    o->wake = rq->defer->wake;
    o->wake_arg = rq->defer->arg;
    int rc = compute_submit(rq->compute, offload_work, o, err);
    if (rc != DP_OK) { /* never queued: no wake-up is owed */
        offload_release(&o->base);
        return rc;
    }
    rs->pending = &o->base;
    return DP_OK;
}
