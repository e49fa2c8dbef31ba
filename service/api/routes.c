/*
 * api/routes.c: THE route table of dpsilod (one dispatcher, one table; no switch on URLs).
 *
 * HOW TO ADD AN ENDPOINT
 * 1. Write the handler in service/api/<resource>.c (one file per resource, e.g. api/silos.c):
 *        int route_silo_get(const http_req *rq, http_resp *rs, dp_err *err)
 *    - rq->body is the parsed JSON object (borrowed; NULL if no body). Validate it with
 *      codec/json_util.h: json_util_check_keys first (unknown keys -> 400 naming the key), then
 *      json_util_req_* / json_util_opt_* per field; range checks return
 *      dp_err_set(err, DP_EINVAL, "field", "...").
 *    - http_req_param_id(rq, "id", &id, err) parses an integer id path parameter, and
 *      http_req_query_int(rq, "n", 20, 1, 100, &n, err) a query parameter (both strict, errors
 *      name the parameter); a list reads ?limit= and ?after= with http_req_page (the one
 *      pagination rule); http_req_param / http_req_query give the raw strings.
 *    - rq->db is a borrowed SQLite connection (db/store.h); rq->app the daemon's subsystems
 *      (service/app.h: cfg, store, ledger, compute pool, metrics). SQL belongs in service/db/ (one
 *      file per stored resource), which the handler calls with rq->db. Never keep a connection
 *      after returning. Heavy work goes to the compute pool (http/offload.h).
 *    - Reply with http_resp_json(rs, 200, obj, err), http_resp_created(rs, obj, err, "/v1/x/%lld",
 *      id) (201 + Location) or http_resp_accepted (202 + Location). Times go out as RFC 3339
 *      strings (json_util_time), non-finite doubles as null (json_util_real). On failure return
 *      the code dp_err_set returned: the dispatcher sends the error JSON (status from http/err.c).
 *    - Never call MHD: tests call the handler directly (tests/unit/service/api/).
 * 2. Declare it in service/api/routes.h in your feature's block.
 * 3. Add ONE row below: {method, pattern, handler, max body bytes, access, query}. access is
 *    ROUTE_OPEN (anyone: only calculators, probes and the API description; the router unit test
 * lists them and fails on a new open row), ROUTE_TOKEN or ROUTE_ADMIN (http/server.h route_access);
 * query is the space-separated list of query parameters the handler reads (NULL: none), any other
 * is a 400. Patterns are literal segments and {name} parameters; the first matching row wins, so
 * put literal rows before parameter rows that could shadow them ("/v1/jobs/stats" before
 * "/v1/jobs/{id}"). Max body 0 = no body allowed; the effective cap is min(this, --max-body);
 * larger bodies get 413.
 * 4. Describe it in openapi/openapi.json (path, parameters, body, every answer; docs/API.md "The
 *    OpenAPI document"): tests/integration/test_openapi.sh fails while the table and the document
 *    disagree.
 * 5. Add your migration (migrations/NNNN_*.sql, your reserved number) if you need tables, a unit
 *    test in tests/unit/service/api/test_service_<feature>.c and an integration test in
 *    tests/integration/test_<feature>.sh (source lib.sh there: start_daemon, req, expect_status,
 *    expect_json, stop_daemon).
 * The dispatcher (http/server.c) handles 404 (no pattern matches), 405 with Allow (the pattern
 * matches, the method does not), 413, malformed JSON (400 with line and column), request ids, the
 * access log and the metrics.
 */
#include "service/api/routes.h"

#define KIB 1024u
#define MIB (1024u * KIB)

const route ROUTES[] = {
    /* method, pattern, handler, max body bytes, access (route_access), query params */
    {"GET", "/healthz", route_healthz, 0, ROUTE_OPEN, "fresh", NULL},
    {"GET", "/v1/version", route_version, 0, ROUTE_OPEN, NULL, NULL},
    {"GET", "/v1/openapi.json", route_openapi, 0, ROUTE_OPEN, NULL, NULL},
    {"GET", "/metrics", route_metrics, 0, ROUTE_TOKEN, NULL, NULL},
    {"POST", "/v1/echo", route_echo, 4 * KIB, ROUTE_TOKEN, NULL, NULL},
    {"POST", "/v1/accounting/epsilon", route_accounting_epsilon, 8 * MIB, ROUTE_OPEN, NULL, NULL},
    {"POST", "/v1/accounting/delta", route_accounting_delta, 8 * MIB, ROUTE_OPEN, NULL, NULL},
    {"POST", "/v1/accounting/rdp", route_accounting_rdp, 8 * MIB, ROUTE_OPEN, NULL, NULL},
    {"POST", "/v1/accounting/calibrate", route_accounting_calibrate, 8 * MIB, ROUTE_OPEN, NULL,
     NULL},
    {"POST", "/v1/estimators/gaussian", route_estimators_gaussian, 64 * MIB, ROUTE_TOKEN, NULL,
     NULL},
    {"POST", "/v1/estimators/beta", route_estimators_beta, 64 * MIB, ROUTE_TOKEN, NULL, NULL},
    {"POST", "/v1/estimators/mixture", route_estimators_mixture, 64 * MIB, ROUTE_TOKEN, NULL, NULL},
    {"POST", "/v1/estimators/normal-means", route_estimators_normal_means, 64 * MIB, ROUTE_TOKEN,
     NULL, NULL},
    {"GET", "/v1/runs", route_runs_list, 0, ROUTE_TOKEN, "limit after", NULL},
    {"GET", "/v1/runs/{id}", route_runs_get, 0, ROUTE_TOKEN, NULL, NULL},
    {"GET", "/v1/runs/{id}/clients", route_runs_clients, 0, ROUTE_TOKEN, "limit after", NULL},
    {"POST", "/v1/tuning/cost", route_tuning_cost, 64 * KIB, ROUTE_OPEN, NULL, NULL},
    {"POST", "/v1/tuning/plan", route_tuning_plan, 16 * KIB, ROUTE_OPEN, NULL, NULL},
    {"POST", "/v1/tuning/draw", route_tuning_draw, 16 * KIB, ROUTE_TOKEN, NULL, NULL},
    {"GET", "/v1/tuning/draws/{id}", route_tuning_draw_get, 0, ROUTE_TOKEN, NULL, NULL},
    /* planning calculators: the papers' closed forms (api/calculators.c, issue #13) */
    {"POST", "/v1/calculators/mrmtl", route_calculators_mrmtl, 1 * MIB, ROUTE_OPEN, NULL, NULL},
    {"POST", "/v1/calculators/fedhdp", route_calculators_fedhdp, 64 * KIB, ROUTE_OPEN, NULL, NULL},
    {"POST", "/v1/calculators/ppsgd", route_calculators_ppsgd, 4 * KIB, ROUTE_OPEN, NULL, NULL},
    /* budgets (api/silos.c, issue #5) */
    {"POST", "/v1/silos", route_silos_create, 4 * KIB, ROUTE_ADMIN, NULL, NULL},
    {"GET", "/v1/silos", route_silos_list, 0, ROUTE_ADMIN, "limit after archived", NULL},
    {"GET", "/v1/silos/{id}", route_silo_get, 0, ROUTE_TOKEN, "verify", NULL},
    {"PATCH", "/v1/silos/{id}", route_silo_patch, 4 * KIB, ROUTE_ADMIN, NULL, NULL},
    {"DELETE", "/v1/silos/{id}", route_silo_delete, 0, ROUTE_ADMIN, NULL, NULL},
    {"POST", "/v1/silos/{id}/token", route_silo_token_rotate, 1 * KIB, ROUTE_TOKEN, NULL, NULL},
    {"DELETE", "/v1/silos/{id}/token", route_silo_token_revoke, 0, ROUTE_ADMIN, NULL, NULL},
    {"POST", "/v1/silos/{id}/charges", route_silo_charge, 64 * KIB, ROUTE_TOKEN, NULL, NULL},
    {"GET", "/v1/silos/{id}/charges", route_silo_charges_list, 0, ROUTE_TOKEN,
     "limit after job_id since until", NULL},
    {"POST", "/v1/charges", route_charges_batch, 1024 * KIB, ROUTE_TOKEN, NULL, NULL},
    {"POST", "/v1/silos/{id}/claims", route_silo_claim, 64 * KIB, ROUTE_TOKEN, NULL, NULL},
    {"GET", "/v1/silos/{id}/claims", route_silo_claims_list, 0, ROUTE_TOKEN, "limit after", NULL},
    {"GET", "/v1/claims/{id}", route_claim_get, 0, ROUTE_TOKEN, NULL, NULL},
    {"POST", "/v1/claims/{id}/commit", route_claim_commit, 1 * KIB, ROUTE_TOKEN, NULL, NULL},
    {"POST", "/v1/claims/{id}/abort", route_claim_abort, 1 * KIB, ROUTE_TOKEN, NULL, NULL},
    /* training data (api/datasets.c, issue #12); an upload's cap is --max-upload */
    {"GET", "/v1/datasets", route_datasets_list, 0, ROUTE_TOKEN, "limit after", NULL},
    {"POST", "/v1/datasets", route_datasets_upload, ROUTE_BODY_UPLOAD, ROUTE_TOKEN,
     "label silo name", "text/csv"},
    {"GET", "/v1/datasets/{id}", route_dataset_get, 0, ROUTE_TOKEN, NULL, NULL},
    {"DELETE", "/v1/datasets/{id}", route_dataset_delete, 0, ROUTE_TOKEN, NULL, NULL},
    /* training jobs (api/jobs.c, issue #12) */
    {"POST", "/v1/jobs", route_jobs_submit, 256 * KIB, ROUTE_TOKEN, NULL, NULL},
    {"POST", "/v1/jobs/plan", route_jobs_plan, 256 * KIB, ROUTE_TOKEN, NULL, NULL},
    {"GET", "/v1/jobs", route_jobs_list, 0, ROUTE_TOKEN, "limit after status", NULL},
    {"GET", "/v1/jobs/{id}", route_job_get, 0, ROUTE_TOKEN, NULL, NULL},
    {"POST", "/v1/jobs/{id}/cancel", route_job_cancel, 1 * KIB, ROUTE_TOKEN, NULL, NULL},
    {"GET", "/v1/jobs/{id}/metrics", route_job_metrics, 0, ROUTE_TOKEN, "limit after", NULL},
    {"GET", "/v1/jobs/{id}/events", route_job_events, 0, ROUTE_TOKEN, "after", NULL},
    {"GET", "/v1/jobs/{id}/model", route_job_model, 0, ROUTE_TOKEN, "silo", NULL},
};

const size_t ROUTES_N = sizeof ROUTES / sizeof ROUTES[0];
