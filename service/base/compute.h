/*
 * compute: a bounded pool of threads for heavy work (estimator runs, PLD compositions, tuning
 * plans, and later training jobs), so that it never runs on the HTTP threads (issue 10, "never
 * starved").
 *
 * WHAT. N worker threads take tasks from two FIFOs (one per class, below) of at most max_queued
 * waiting tasks in all. A task is a function and its argument: compute_submit(pool, cls, run,
 * drop, arg). When the queue is full (or the pool is
 * stopping) the submission is refused with DP_EBUSY, which the HTTP layer answers 503 with
 * Retry-After: a full queue sheds load instead of piling up memory and latency.
 *
 * HANDLERS reach the pool through http/offload.h (compute_offload), which wraps a task in a
 * deferred HTTP answer. The pool itself knows nothing of HTTP, so training jobs can use it too.
 *
 * THREADS. The FIFOs are guarded by the pool's mutex, held only to link and unlink tasks, never
 * while a task runs. A task runs on exactly one pool thread; what it reads must not be written by
 * anyone else until it has finished (the caller hands its inputs over). The design follows redis
 * bio.c: a FIFO, a mutex and a condition variable.
 */
#ifndef DP_SERVICE_COMPUTE_H
#define DP_SERVICE_COMPUTE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/dp_err.h"

#define COMPUTE_MAX_THREADS 64    /* --compute-threads upper bound */
#define COMPUTE_MAX_QUEUE   65536 /* --compute-queue upper bound */

/* FAIRNESS. Every task has a class. OPEN: work anyone may ask for without a token (the PLD
 * accountant of the /v1/accounting/ calculators, tuning plans). TOKEN: work behind a token
 * (estimator runs, later training jobs). OPEN tasks run on at most max(1, n_threads / 2) threads at
 * once and hold at most max(1, max_queued / 2) of the waiting places (a full OPEN share is DP_EBUSY
 * even when places are left for TOKEN tasks); when a thread frees, a waiting TOKEN task is taken
 * before any OPEN one. Within a class the order is FIFO. So anonymous callers can never take every
 * thread or the whole queue. */
typedef enum compute_class { COMPUTE_OPEN = 0, COMPUTE_TOKEN = 1 } compute_class;

/* CANCELLATION. Every task has a deadline, timeout_ms after its submission (0: none), and an
 * atomic cancel flag the pool passes to run. A task still waiting at its deadline, or when the
 * pool stops, is never run: drop is called instead, with a DP_EBUSY reason ("timed out waiting for
 * a compute thread" or "the server is stopping"). A task running at its deadline, or when the pool
 * stops, finds its flag set: long loops poll it and give up early (the estimators' fits take it
 * through their options). */
typedef void (*compute_run_fn)(void *arg, const atomic_bool *cancel);
typedef void (*compute_drop_fn)(void *arg, const dp_err *why);

typedef struct compute_pool compute_pool;

/* Starts n_threads (1..COMPUTE_MAX_THREADS) workers over queues of at most max_queued
 * (1..COMPUTE_MAX_QUEUE) waiting tasks, and a watchdog thread for the deadlines of timeout_ms
 * (0: none). Owned by the caller (compute_pool_free). NULL with err on failure (DP_EINVAL for a
 * bad size, DP_ENOMEM, DP_EINTERNAL when a thread cannot start). */
compute_pool *compute_pool_alloc(unsigned n_threads, size_t max_queued, unsigned timeout_ms,
                                 dp_err *err);

/* Stops taking tasks (later submissions: DP_EBUSY), drops every waiting task (drop with "the
 * server is stopping") and sets the cancel flag of every running one. Returns at once; the
 * running tasks finish on their threads. Call it when the daemon starts to stop, before the HTTP
 * drain, so that suspended connections are answered quickly. Idempotent; NULL is a no-op. */
void compute_pool_stop(compute_pool *p);

/* compute_pool_stop, then joins the workers (the running tasks finish) and frees p. Call it after
 * the HTTP server has stopped. NULL is a no-op. */
void compute_pool_free(compute_pool *p);

/* Queues run(arg) in class cls. DP_OK: exactly one of run or drop WILL be called, once, on a pool
 * thread (drop may also be called from compute_pool_stop's caller). DP_EBUSY with a message when
 * the queue (or the OPEN share of it) is full or the pool is stopping; DP_ENOMEM. On failure
 * neither is called and arg stays the caller's. Thread-safe. */
int compute_submit(compute_pool *p, compute_class cls, compute_run_fn run, compute_drop_fn drop,
                   void *arg, dp_err *err);

/* Tasks waiting and tasks running now, all classes (a snapshot, for /metrics and tests). */
void compute_pool_load(compute_pool *p, size_t *queued, size_t *running);

/* The same for one class. Thread-safe. */
void compute_pool_load_class(compute_pool *p, compute_class cls, size_t *queued, size_t *running);

/* The deadline given to compute_pool_alloc, in ms (0: none). */
unsigned compute_pool_timeout_ms(const compute_pool *p);

#endif
