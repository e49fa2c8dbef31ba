/*
 * compute: a bounded pool of threads for heavy work (estimator runs, PLD compositions, tuning
 * plans, and later training jobs), so that it never runs on the HTTP threads (issue 10, "never
 * starved").
 *
 * WHAT. N worker threads take tasks from one FIFO of at most max_queued waiting tasks. A task is a
 * function and its argument: compute_submit(pool, fn, arg). When the FIFO is full (or the pool is
 * stopping) the submission is refused with DP_EBUSY, which the HTTP layer answers 503 with
 * Retry-After: a full queue sheds load instead of piling up memory and latency.
 *
 * HANDLERS. compute_offload runs a handler's work on the pool with the deferred-answer mechanism of
 * http.h (PENDING): the handler parses and validates on its HTTP thread, then hands over a
 * compute_task; the pool thread runs task.run, wakes the connection, and task.render fills the
 * response on an HTTP thread. With rq->defer or rq->compute NULL (unit tests, callers without a
 * socket) the task runs inline, on the caller's thread.
 *
 * THREADS. The FIFO is guarded by the pool's mutex, held only to link and unlink tasks, never while
 * a task runs. A task runs on exactly one pool thread; what it reads must not be written by anyone
 * else until it has finished (the caller hands its inputs over). The design follows redis bio.c:
 * a FIFO, a mutex and a condition variable (STYLE.md 2.7).
 */
#ifndef DP_SERVICE_COMPUTE_H
#define DP_SERVICE_COMPUTE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/dp_err.h"
#include "service/http.h"

#define COMPUTE_MAX_THREADS 64    /* --compute-threads upper bound */
#define COMPUTE_MAX_QUEUE   65536 /* --compute-queue upper bound */

typedef struct compute_pool compute_pool;

/* Starts n_threads (1..COMPUTE_MAX_THREADS) workers over a FIFO of at most max_queued
 * (1..COMPUTE_MAX_QUEUE) waiting tasks. Owned by the caller (compute_pool_free). NULL with err on
 * failure (DP_EINVAL for a bad size, DP_ENOMEM, DP_EINTERNAL when a thread cannot start). */
compute_pool *compute_pool_alloc(unsigned n_threads, size_t max_queued, dp_err *err);

/* Stops taking tasks (later submissions: DP_EBUSY), runs every task already queued, joins the
 * workers and frees p. Call it after the HTTP server has stopped (no task may still need to wake a
 * connection). NULL is a no-op. */
void compute_pool_free(compute_pool *p);

/* Queues fn(arg) to run once on a pool thread. DP_OK: fn WILL be called exactly once (also during
 * compute_pool_free). DP_EBUSY with a message when max_queued tasks are already waiting or the pool
 * is stopping; DP_ENOMEM. On failure fn is never called and arg stays the caller's. Thread-safe. */
int compute_submit(compute_pool *p, void (*fn)(void *arg), void *arg, dp_err *err);

/* Tasks waiting and tasks running now (a snapshot, for /metrics and tests). Thread-safe. */
void compute_pool_load(compute_pool *p, size_t *queued, size_t *running);

/* ---- handler side --------------------------------------------------------------------------- */

/* A handler's work in two halves. run executes on a pool thread (or inline) and must not touch
 * rq, the database connection or anything an HTTP thread may change; it records its outcome in
 * arg. render executes afterwards on an HTTP thread with a fresh rq (same body, params and req_id;
 * a borrowed connection) and fills rs like a handler (it must not defer). deferred tells render
 * whether the answer goes to a socket (false: an inline call, e.g. a unit test). free releases arg;
 * it is called exactly once, whatever happened (also when the client has gone). */
typedef struct compute_task {
    int (*run)(void *arg, dp_err *err);
    int (*render)(void *arg, const http_req *rq, http_resp *rs, bool deferred, dp_err *err);
    void (*free)(void *arg);
    void *arg; /* stolen by compute_offload */
} compute_task;

/* Runs t for the handler of rq: on rq->compute when rq->defer and rq->compute are set (rs->pending
 * is set and DP_OK returned; the dispatcher answers when the task is done), inline otherwise
 * (run, then render, and the handler's return value is theirs). A full queue is DP_EBUSY (503 with
 * Retry-After). t->arg is stolen in every case: t->free is called exactly once. */
int compute_offload(const http_req *rq, http_resp *rs, const compute_task *t, dp_err *err);

#endif
