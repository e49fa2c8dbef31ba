/*
 * api/estimators_run.h: the run machinery of api/estimators.c (checks on the HTTP thread, the
 * estimator on a compute thread, the run stored, 201 with its Location) for estimator routes kept
 * in files of their own (api/normal_means.c).
 *
 * A route calls est_start with its kind and compute function. The compute function runs on a
 * compute thread with the job: it reads the request body (est_job_body, borrowed for the job's
 * life), fills the per-client results (est_rows_begin, "estimates"; only when est_rows_wanted),
 * then est_finish with
 * the rest of the result, which must hold the placeholder "estimates": [] where the rows go. The
 * run is stored with its params (the body without "clients", "x" and "s") and answered as
 * docs/ESTIMATORS.md describes. No privacy, no silo charged: a run of this kind is public data
 * the caller already holds ("privacy": null).
 */
#ifndef DP_SERVICE_API_ESTIMATORS_RUN_H
#define DP_SERVICE_API_ESTIMATORS_RUN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "common/dp_err.h"
#include "estimators/eb_common.h"
#include "service/api/routes.h"
#include "service/base/cfg.h"

typedef struct est_job est_job;
typedef int (*est_compute_fn)(est_job *j, dp_err *err);

/* POST /v1/estimators/<kind> (kind: static string, stored with the run). */
int est_start(const http_req *rq, http_resp *rs, const char *kind, est_compute_fn compute,
              dp_err *err);

/* The request body (borrowed, valid for the job's life). */
const json_t *est_job_body(const est_job *j);
/* The body's arrays read without a tree (service/codec/clients_json.h), borrowed for the job's
 * life; NULL when the body came as a tree alone. */
const struct clients_json *est_job_arrays(const est_job *j);

/* The daemon's configuration (caps), or NULL in unit tests. Borrowed. */
const cfg *est_job_cfg(const est_job *j);

/* The compute pool's cancel flag of this run (NULL when run inline), for the fit to poll: set at
 * the --compute-timeout deadline or when the daemon stops. A compute function that sees it returns
 * a DP_EBUSY error (the pool answers 503 "cancelled", nothing stored). Borrowed. */
const atomic_bool *est_job_cancel(const est_job *j);

/* Whether per-client rows are made: false when the request asked for "results": "summary" without
 * "keep_results": true (no row answered nor stored). */
bool est_rows_wanted(const est_job *j);

/* Starts the per-client results ("estimates"): n_fields fields (names, widths in doubles, vec:
 * written as arrays) for m rows without ids. *vals: m rows of *w doubles each (the widths' sum),
 * in field order, for the caller to fill; owned by the job, written into the answer and stored
 * as columns (codec/run_rows.h) by est_finish. */
int est_rows_begin(est_job *j, const char *const *names, const size_t *widths, const bool *vec,
                   size_t n_fields, size_t m, double **vals, size_t *w, dp_err *err);

/* Completes result (stolen; holds "estimates": []) with log_likelihood, iterations, status,
 * status_reason (reason, borrowed; NULL: nothing to add), converged and privacy (null), stores
 * the run of m observations and sets the answer. */
int est_finish(est_job *j, size_t m, json_t *result, double loglik, unsigned iterations,
               eb_status status, const char *reason, dp_err *err);

#endif
