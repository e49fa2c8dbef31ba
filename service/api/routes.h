/*
 * routes: the route table of dpsilod and the prototypes of every handler.
 *
 * The table itself (ROUTES) is in api/routes.c, with the instructions for adding an endpoint.
 * Handlers live in api/<feature>.c; declare each one here, in its feature's block, with the
 * signature of http/server.h: int route_x(const http_req *rq, http_resp *rs, dp_err *err);
 *
 * Thread-safety: ROUTES is constant and read by every HTTP thread. Handlers run on the HTTP
 * threads, many at once, each with its own request and response; whatever they share (the ledger,
 * the store's pool, the compute pool, the metrics) they reach through rq->app, whose subsystems
 * do their own locking. A handler that defers finishes on another HTTP thread (http/server.h).
 */
#ifndef DP_SERVICE_ROUTES_H
#define DP_SERVICE_ROUTES_H

#include <stddef.h>

#include "service/http/server.h"

/* The one route table and its length. */
extern const route ROUTES[];
extern const size_t ROUTES_N;

/* api/core.c: liveness, build information, the OpenAPI document, metrics, the echo diagnostic. */
int route_healthz(const http_req *rq, http_resp *rs, dp_err *err);
int route_version(const http_req *rq, http_resp *rs, dp_err *err);
int route_openapi(const http_req *rq, http_resp *rs, dp_err *err);
int route_metrics(const http_req *rq, http_resp *rs, dp_err *err);
int route_echo(const http_req *rq, http_resp *rs, dp_err *err);

/* api/accounting.c: stateless privacy calculators (issue #3). */
int route_accounting_epsilon(const http_req *rq, http_resp *rs, dp_err *err);
int route_accounting_delta(const http_req *rq, http_resp *rs, dp_err *err);
int route_accounting_rdp(const http_req *rq, http_resp *rs, dp_err *err);
int route_accounting_calibrate(const http_req *rq, http_resp *rs, dp_err *err);

/* api/estimators.c: empirical-Bayes estimators and their stored runs (issue #6). */
int route_estimators_gaussian(const http_req *rq, http_resp *rs, dp_err *err);
int route_estimators_beta(const http_req *rq, http_resp *rs, dp_err *err);
int route_estimators_mixture(const http_req *rq, http_resp *rs, dp_err *err);
int route_estimators_normal_means(const http_req *rq, http_resp *rs, dp_err *err);
int route_runs_get(const http_req *rq, http_resp *rs, dp_err *err);
int route_runs_list(const http_req *rq, http_resp *rs, dp_err *err);
int route_runs_clients(const http_req *rq, http_resp *rs, dp_err *err);

/* api/tuning.c: private hyperparameter tuning (issue #4, docs/TUNING.md). */
int route_tuning_cost(const http_req *rq, http_resp *rs, dp_err *err);
int route_tuning_plan(const http_req *rq, http_resp *rs, dp_err *err);
int route_tuning_draw(const http_req *rq, http_resp *rs, dp_err *err);
int route_tuning_draw_get(const http_req *rq, http_resp *rs, dp_err *err);

/* api/calculators.c: the papers' closed forms for planning a job (docs/TRAINING.md) */
int route_calculators_mrmtl(const http_req *rq, http_resp *rs, dp_err *err);
int route_calculators_fedhdp(const http_req *rq, http_resp *rs, dp_err *err);
int route_calculators_ppsgd(const http_req *rq, http_resp *rs, dp_err *err);

/* api/datasets.c: training data sets (docs/TRAINING.md) */
int route_datasets_list(const http_req *rq, http_resp *rs, dp_err *err);
int route_datasets_upload(const http_req *rq, http_resp *rs, dp_err *err);
int route_dataset_get(const http_req *rq, http_resp *rs, dp_err *err);
int route_dataset_delete(const http_req *rq, http_resp *rs, dp_err *err);

/* api/jobs.c: training jobs (docs/TRAINING.md) */
int route_jobs_submit(const http_req *rq, http_resp *rs, dp_err *err);
int route_jobs_plan(const http_req *rq, http_resp *rs, dp_err *err);
int route_jobs_list(const http_req *rq, http_resp *rs, dp_err *err);
int route_job_get(const http_req *rq, http_resp *rs, dp_err *err);
int route_job_cancel(const http_req *rq, http_resp *rs, dp_err *err);
int route_job_metrics(const http_req *rq, http_resp *rs, dp_err *err);
int route_job_events(const http_req *rq, http_resp *rs, dp_err *err);
int route_job_model(const http_req *rq, http_resp *rs, dp_err *err);

/* api/silos.c: silos, budgets, charges, claims (issue #5; access control in api/auth.h). */
int route_silos_create(const http_req *rq, http_resp *rs, dp_err *err);
int route_silos_list(const http_req *rq, http_resp *rs, dp_err *err);
int route_silo_get(const http_req *rq, http_resp *rs, dp_err *err);
int route_silo_patch(const http_req *rq, http_resp *rs, dp_err *err);
int route_silo_delete(const http_req *rq, http_resp *rs, dp_err *err);
int route_silo_charge(const http_req *rq, http_resp *rs, dp_err *err);
int route_silo_charges_list(const http_req *rq, http_resp *rs, dp_err *err);
int route_charges_batch(const http_req *rq, http_resp *rs, dp_err *err);
int route_silo_claim(const http_req *rq, http_resp *rs, dp_err *err);
int route_silo_claims_list(const http_req *rq, http_resp *rs, dp_err *err);
int route_claim_get(const http_req *rq, http_resp *rs, dp_err *err);
int route_claim_commit(const http_req *rq, http_resp *rs, dp_err *err);
int route_claim_abort(const http_req *rq, http_resp *rs, dp_err *err);
/* silo token rotation and revocation (issue 10, D2) */
int route_silo_token_rotate(const http_req *rq, http_resp *rs, dp_err *err);
int route_silo_token_revoke(const http_req *rq, http_resp *rs, dp_err *err);

#endif
