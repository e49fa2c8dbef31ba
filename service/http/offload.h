/*
 * offload: a handler's heavy work on the compute pool (base/compute.h), answered through the
 * dispatcher's deferred answers (http/server.h PENDING). The handler parses and validates on its
 * HTTP thread, then hands over a compute_task; a pool thread runs task.run and wakes the
 * connection, and task.render fills the response on an HTTP thread. With rq->defer or
 * rq->app->compute NULL (unit tests, callers without a socket) the task runs inline, on the
 * caller's thread.
 */
#ifndef DP_SERVICE_HTTP_OFFLOAD_H
#define DP_SERVICE_HTTP_OFFLOAD_H

#include <stdatomic.h>
#include <stdbool.h>

#include "common/dp_err.h"
#include "service/base/compute.h"
#include "service/http/server.h"

/* ---- handler side --------------------------------------------------------------------------- */

/* A handler's work in two halves. run executes on a pool thread (or inline, with cancel NULL);
 * cancel, when not NULL, is set once the task's deadline passes or the pool stops, and run should
 * poll it in long loops (then its error is replaced by a 503 saying the run was cancelled). run
 * must not touch rq, the database connection or anything an HTTP thread may change; it records its
 * outcome in arg. render executes afterwards on an HTTP thread with a fresh rq (same body, params
 * and req_id; a borrowed connection) and fills rs like a handler (it must not defer). deferred
 * tells render whether the answer goes to a socket (false: an inline call, e.g. a unit test). free
 * releases arg; it is called exactly once, whatever happened (also when the client has gone). */
typedef struct compute_task {
    int (*run)(void *arg, const atomic_bool *cancel, dp_err *err);
    int (*render)(void *arg, const http_req *rq, http_resp *rs, bool deferred, dp_err *err);
    void (*free)(void *arg);
    void *arg;         /* stolen by compute_offload */
    compute_class cls; /* OPEN (anyone may call) or TOKEN */
} compute_task;

/* Runs t for the handler of rq: on rq->app->compute when rq->defer and rq->app->compute are set
 * (rs->pending is set and DP_OK returned; the dispatcher answers when the task is done), inline
 * otherwise (run, then render, and the handler's return value is theirs). A full queue is DP_EBUSY
 * (503 with Retry-After). t->arg is stolen in every case: t->free is called exactly once. */
int compute_offload(const http_req *rq, http_resp *rs, const compute_task *t, dp_err *err);

#endif
