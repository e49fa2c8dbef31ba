/*
 * http/offload.c: a compute task as a deferred answer (http/offload.h). The pending answer wraps
 * the task; the pool thread runs task.run, then calls the connection's wake-up; the dispatcher
 * calls resume (task.render) on an HTTP thread and release (task.free) once. The wake-up is the
 * pool thread's last access to the pending object before release, so no lock is needed:
 * http/server.c orders resume and release after the wake-up.
 */
#include "service/http/offload.h"

#include <stdatomic.h>

#include "common/dp_alloc.h"

typedef struct offload {
    http_pending base; /* first: the dispatcher's handle */
    compute_task task;
    void (*wake)(void *arg); /* copied from rq->defer */
    void *wake_arg;
    unsigned timeout_ms; /* the pool's, for the cancelled message */
    int rc;              /* task.run's result; written by the pool thread before wake */
    dp_err err;          /* its error */
} offload;

static void offload_work(void *arg, const atomic_bool *cancel)
{
    offload *o = arg;
    dp_err_clear(&o->err);
    o->rc = o->task.run(o->task.arg, cancel, &o->err);
    if (o->rc != DP_OK && atomic_load(cancel)) { /* stopped early: say why */
        dp_err_clear(&o->err);
        o->rc = dp_err_set(&o->err, DP_EBUSY, NULL,
                           "the computation was cancelled after the compute timeout (%u s, "
                           "--compute-timeout) or because the server is stopping; nothing was "
                           "charged; retry with less work",
                           (o->timeout_ms + 999) / 1000);
    }
    o->wake(o->wake_arg); /* the last access to o on this thread */
}

static void offload_drop(void *arg, const dp_err *why)
{
    offload *o = arg;
    o->err = *why;
    o->rc = why->code;
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
    compute_pool *pool = rq->app != NULL ? rq->app->compute : NULL;
    if (rq->defer == NULL || pool == NULL) {
        int rc = t->run(t->arg, NULL, err);
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
    o->timeout_ms = compute_pool_timeout_ms(pool);
    int rc = compute_submit(pool, t->cls, offload_work, offload_drop, o, err);
    if (rc != DP_OK) { /* never queued: no wake-up is owed */
        offload_release(&o->base);
        return rc;
    }
    rs->pending = &o->base;
    return DP_OK;
}
