/*
 * api/write: one database write for a handler, without blocking its HTTP thread on the group
 * commit (db/writer.h). With rq->defer the write is started (db_writer_start) and the answer
 * deferred (http/server.h PENDING): the dispatcher resumes the connection when the writer has
 * committed, and finish answers on an HTTP thread. Without it (unit tests) the write runs here
 * (db_writer_run) and finish answers at once.
 *
 * arg is the apply's argument and finish's; it is owned by api_write from the call on (free_arg is
 * called exactly once, also when the call fails) and must outlive the write, so it lives on the
 * heap. finish(rq, rs, arg, rc, werr, err): rc and werr are the write's outcome (DP_OK: committed);
 * it fills rs like a handler (and must not defer).
 */
#ifndef DP_SERVICE_API_WRITE_H
#define DP_SERVICE_API_WRITE_H

#include "common/dp_err.h"
#include "service/db/writer.h"
#include "service/http/server.h"

typedef int (*api_write_finish_fn)(const http_req *rq, http_resp *rs, void *arg, int rc,
                                   const dp_err *werr, dp_err *err);

int api_write(const http_req *rq, http_resp *rs, db_write_apply_fn apply, void *arg,
              void (*free_arg)(void *arg), api_write_finish_fn finish, dp_err *err);

#endif
