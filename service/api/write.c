/*
 * api/write.c: a handler's write through the writer, deferred. Contract in api/write.h.
 */
#include "service/api/write.h"

#include "common/dp_alloc.h"
#include "service/app.h"

typedef struct api_write_state {
    http_pending base; /* first: the dispatcher holds &base */
    db_writer_call call;
    void *arg;
    void (*free_arg)(void *arg);
    api_write_finish_fn finish;
} api_write_state;

static int write_resume(http_pending *p, const http_req *rq, http_resp *rs, dp_err *err)
{
    api_write_state *s = (api_write_state *)p;
    dp_err we;
    dp_err_clear(&we);
    int rc = db_writer_call_result(&s->call, &we);
    return s->finish(rq, rs, s->arg, rc, &we, err);
}

static void write_release(http_pending *p)
{
    api_write_state *s = (api_write_state *)p;
    if (s->free_arg != NULL)
        s->free_arg(s->arg);
    dp_free(s);
}

int api_write(const http_req *rq, http_resp *rs, db_write_apply_fn apply, void *arg,
              void (*free_arg)(void *arg), api_write_finish_fn finish, dp_err *err)
{
    db_writer *w = rq->app != NULL ? rq->app->writer : NULL;
    if (w == NULL) {
        if (free_arg != NULL)
            free_arg(arg);
        return dp_err_set(err, DP_EINTERNAL, NULL, "no database writer");
    }
    if (rq->defer != NULL) {
        api_write_state *s = dp_calloc(1, sizeof *s);
        if (s == NULL) {
            if (free_arg != NULL)
                free_arg(arg);
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        }
        s->arg = arg;
        s->free_arg = free_arg;
        s->finish = finish;
        int rc = db_writer_start(w, &s->call, apply, arg, rq->defer->wake, rq->defer->arg, err);
        if (rc != DP_OK) {
            write_release(&s->base);
            return rc;
        }
        s->base.resume = write_resume;
        s->base.release = write_release;
        rs->pending = &s->base;
        return DP_OK;
    }
    dp_err we;
    dp_err_clear(&we);
    int wrc = db_writer_run(w, apply, arg, &we);
    int rc = finish(rq, rs, arg, wrc, &we, err);
    if (free_arg != NULL)
        free_arg(arg);
    return rc;
}
