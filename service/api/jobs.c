/*
 * api/jobs.c: federated training jobs (docs/TRAINING.md).
 *
 *   POST /v1/jobs                 submit: the spec checked whole (400 naming the field), the job
 *                                 planned (data, silos, each silo's noise), the bound silos'
 *                                 budgets checked (409 naming the silo under "refuse"), stored as
 *                                 queued; 202 with the job
 *   POST /v1/jobs/plan            a dry run of the submission: the same checks and plan, each bound
 *                                 silo's budget checked (under every policy); 200 with the plan,
 *                                 nothing stored or charged
 *   GET  /v1/jobs                 the jobs the caller may see (?status=&after=&limit=)
 *   GET  /v1/jobs/{id}            one job, with its plan and progress
 *   POST /v1/jobs/{id}/cancel     queued: cancelled at once; running: after the current round
 *   GET  /v1/jobs/{id}/metrics    per-round metrics (?after=ROUND&limit=N, next_after)
 *   GET  /v1/jobs/{id}/events     the job's events (status changes, rounds) as server-sent events
 *                                 from Last-Event-ID (or ?after=); the stream ends with the job
 *   GET  /v1/jobs/{id}/model      the global model, or ?silo=NAME a silo's personalised model
 *                                 (that silo's own token or the admin only)
 *
 * Planning reads the data and calibrates every silo's noise: it runs on the compute pool
 * (http/offload.h), never on an HTTP thread.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "federated/fl_algo.h"
#include "service/api/auth.h"
#include "service/api/routes.h"
#include "service/api/write.h"
#include "service/app.h"
#include "service/base/time.h"
#include "service/codec/event_json.h"
#include "service/codec/job_spec.h"
#include "service/codec/json_util.h"
#include "service/codec/run_rows.h"
#include "service/db/datasets.h"
#include "service/db/jobs.h"
#include "service/db/writer.h"
#include "service/http/err.h"
#include "service/http/offload.h"
#include "service/jobs/prepare.h"
#include "service/jobs/runner.h"
#include "service/ledger/ledger.h"

#define JOBS_PAGE_MAX   200
#define ROUNDS_PAGE_MAX 1000
#define EVENTS_PAGE_MAX 1000
/* How long an EventSource waits before it asks again (each answer holds the events so far). */
#define JOBS_SSE_RETRY_MS 1000
/* How long an events answer waits for something new before it answers empty (a long poll). */
#define JOBS_SSE_WAIT_MS 15000

/* ---- a job as JSON ---- */

static json_t *time_or_null(int64_t ms)
{
    return ms > 0 ? json_util_time(ms) : json_null();
}

/* Appends a job as JSON to t (out of memory: t->failed): its members from the row, then "spec"
 * and "plan" spliced as stored. Both are compact jansson prints (the body as POST /v1/jobs stored
 * it, job_plan_json), so the text is what printing the parsed tree gave, without parsing the
 * 139-silo plan of a School job on every poll (~2 ms a job). */
static void job_text(const job_row *r, run_text *t)
{
    json_t *head = json_pack(
        "{s:I, s:o, s:s, s:s, s:o, s:b, s:I, s:I, s:f, s:o, s:o, s:o, s:o}", "id",
        (json_int_t)r->id, "name", r->name[0] ? json_string(r->name) : json_null(), "algorithm",
        r->algorithm, "status", job_status_name(r->status), "reason",
        r->reason[0] ? json_string(r->reason) : json_null(), "cancel_requested",
        r->cancel_requested, "rounds", (json_int_t)r->rounds_total, "rounds_done",
        (json_int_t)r->rounds_done, "progress", (double)r->rounds_done / (double)r->rounds_total,
        "created_at", json_util_time(r->created_at_ms), "started_at",
        time_or_null(r->started_at_ms), "finished_at", time_or_null(r->finished_at_ms),
        "updated_at", json_util_time(r->updated_at_ms));
    char *h = head != NULL ? json_util_dumps(head, JSON_COMPACT) : NULL;
    json_decref(head);
    if (h == NULL) {
        t->failed = true;
        return;
    }
    run_text_append(t, h, strlen(h) - 1); /* without its closing '}' */
    dp_free(h);
    static const char SPEC[] = ",\"spec\":", PLAN[] = ",\"plan\":";
    run_text_append(t, SPEC, sizeof SPEC - 1);
    run_text_append(t, r->spec, strlen(r->spec));
    run_text_append(t, PLAN, sizeof PLAN - 1);
    run_text_append(t, r->plan, strlen(r->plan));
    run_text_append(t, "}", 1);
}

/* Answers t's text (application/json) with status, or out of memory when t failed; frees t. */
static int text_answer(run_text *t, http_resp *rs, int status, dp_err *err)
{
    if (t->failed || t->s == NULL) {
        free(t->s);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    return http_resp_text(rs, status, "application/json", t->s, t->len, err);
}

/* Answers a job (job_text) with status. */
static int job_answer(const job_row *r, http_resp *rs, int status, dp_err *err)
{
    run_text t = {0};
    job_text(r, &t);
    return text_answer(&t, rs, status, err);
}

/* ---- POST /v1/jobs ---- */

/* One bound silo's budget check: a dry run of the job's whole planned spend on its ledger silo. */
typedef struct silo_check {
    size_t k;                 /* the silo's index in the plan */
    bool affordable;          /* the ledger would admit the spend now */
    ledger_charge_result res; /* requested, would_be and budget in the silo's unit */
} silo_check;

typedef struct submit {
    job_spec spec; /* parsed on the HTTP thread; moved into prep by the run */
    job_prepared prep;
    char *spec_text; /* the body as stored */
    char req_id[64];
    int64_t creator;
    ledger_principal who;
    struct ledger *l;
    db_writer *w;
    struct store *st;
    job_runner *runner;
    bool dry_run; /* POST /v1/jobs/plan: plan and check, store nothing */
    /* out */
    silo_check *checks; /* budget_check: one per bound silo, n_checks of them */
    size_t n_checks;
    int64_t id;
    int refused_rc; /* DP_EBUDGET: 409 with details */
    dp_err refused;
    ledger_charge_result refusal; /* the refused silo's figures */
    char refused_silo[JOB_NAME_MAX];
    job_row row;
} submit;

static void submit_free(void *arg)
{
    submit *s = arg;
    if (s == NULL)
        return;
    job_spec_clear(&s->spec);
    job_prepared_free(&s->prep);
    free(s->spec_text);
    dp_free(s->checks);
    job_row_clear(&s->row);
    dp_free(s);
}

/* Checks every bound silo's whole planned spend (rounds x one round's event) against its budget,
 * one dry run per silo (nothing is written), into s->checks. A refusal is a result, not an error;
 * errors are the ledger's other answers (a silo archived meanwhile, a numerical failure). */
/* Silo sp's whole planned spend: its round event every round, but with ifca the first
 * select_rounds rounds carry the selection too (their event is sp->select_event,
 * fl_plan_silo_select). NULL when out of memory (the constructors free what they were given). */
static acct_event *planned_event(const job_prepared *p, const job_silo_plan *sp)
{
    uint64_t ns = sp->select_event != NULL ? sp->plan.select_rounds : 0, t = p->cfg.rounds;
    acct_event *c = acct_event_clone(sp->round_event);
    if (ns == 0)
        return c ? acct_event_self_composed(t, c) : NULL;
    acct_event *sel = acct_event_self_composed(ns, acct_event_clone(sp->select_event));
    if (t <= ns) {
        acct_event_free(c);
        return sel;
    }
    acct_event *parts[2] = {sel, acct_event_self_composed(t - ns, c)};
    return acct_event_composed(parts, 2);
}

static int budget_check(submit *s, dp_err *err)
{
    job_prepared *p = &s->prep;
    size_t K = p->fed.n_silos;
    s->n_checks = 0;
    s->checks = K > 0 ? dp_calloc(K, sizeof *s->checks) : NULL;
    if (K > 0 && s->checks == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (size_t k = 0; k < K; k++) {
        const job_silo_plan *sp = &p->silo[k];
        if (sp->ledger_silo == 0 || sp->round_event == NULL)
            continue;
        acct_event *ev = planned_event(p, sp);
        if (ev == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        ledger_charge_req req = {.silo_id = sp->ledger_silo,
                                 .event = ev,
                                 .neighboring = ACCT_NB_ADD_REMOVE,
                                 .reason = "training job admission (dry run)",
                                 .actor_token_id = s->who.token_id};
        silo_check *ck = &s->checks[s->n_checks];
        dp_err e;
        dp_err_clear(&e);
        int rc = ledger_charge(s->l, &req, true, &ck->res, &e);
        acct_event_free(ev);
        if (rc != DP_OK && rc != DP_EBUDGET) {
            *err = e;
            return rc;
        }
        ck->k = k;
        ck->affordable = rc == DP_OK;
        s->n_checks++;
    }
    return DP_OK;
}

/* Under "refuse": the job is refused (409 naming the first silo, in plan order, that cannot afford
 * its whole planned spend) unless every bound silo can. Fills s->refused*; the error is the
 * submission's answer, and the dry run's "refusal". */
static int admit(submit *s, dp_err *err)
{
    job_prepared *p = &s->prep;
    if (p->spec.on_budget != JOB_BUDGET_REFUSE || p->spec.n_bindings == 0)
        return DP_OK;
    if (s->checks == NULL && budget_check(s, err) != DP_OK)
        return err->code;
    for (size_t i = 0; i < s->n_checks; i++) {
        const silo_check *ck = &s->checks[i];
        if (ck->affordable)
            continue;
        size_t k = ck->k;
        s->refused_rc = DP_EBUDGET;
        s->refusal = ck->res;
        snprintf(s->refused_silo, sizeof s->refused_silo, "%s", p->fed.silo[k].name);
        char f[DP_ERR_FIELD_MAX];
        snprintf(f, sizeof f, "silos.%.41s", p->fed.silo[k].name);
        dp_err_set(&s->refused, DP_EBUDGET, f,
                   "silo \"%s\" (ledger silo %lld) cannot afford the job: its epsilon would "
                   "be %.6g against a budget of %.6g; nothing was charged (lower the "
                   "rounds or the target, or submit with on_budget_exhausted stop_silo)",
                   p->fed.silo[k].name, (long long)p->silo[k].ledger_silo, ck->res.would_be,
                   ck->res.budget);
        break;
    }
    return DP_OK;
}

static int submit_run(void *arg, const atomic_bool *cancel, dp_err *err)
{
    (void)cancel;
    submit *s = arg;
    dp_err_clear(err);
    store_conn *c = store_conn_open_extra(s->st, err);
    if (c == NULL)
        return err->code;
    dataset_viewer dv = {s->who.role == LEDGER_ROLE_ADMIN, s->who.token_id, s->who.silo_id};
    int rc = job_prepare(&s->spec, c, s->l, &dv, &s->prep, s->req_id, err);
    if (rc == DP_OK && s->dry_run && s->prep.spec.n_bindings > 0)
        rc = budget_check(s, err); /* every policy: the plan shows each bound silo's check */
    if (rc == DP_OK)
        rc = admit(s, err);
    if (rc != DP_OK || s->refused_rc != DP_OK || s->dry_run) {
        store_conn_close(c);
        return rc;
    }
    char *plan = job_plan_json(&s->prep);
    job_new_binding *bd =
        s->prep.spec.n_bindings ? dp_calloc(s->prep.spec.n_bindings, sizeof *bd) : NULL;
    if (plan == NULL || (s->prep.spec.n_bindings && bd == NULL)) {
        free(plan);
        store_conn_close(c);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    for (size_t i = 0; i < s->prep.spec.n_bindings; i++)
        bd[i] = (job_new_binding){s->prep.spec.bindings[i].silo_id, s->prep.spec.bindings[i].name};
    job_new j = {s->prep.spec.name[0] ? s->prep.spec.name : NULL,
                 time_now_ms(),
                 s->req_id,
                 s->creator,
                 s->prep.spec.algorithm,
                 s->spec_text,
                 plan,
                 s->prep.dataset_id,
                 s->prep.spec.rounds,
                 s->prep.spec.resume,
                 bd,
                 s->prep.spec.n_bindings};
    job_insert_op op = {&j, 0};
    rc = db_writer_run(s->w, jobs_insert_apply, &op, err);
    free(plan);
    dp_free(bd);
    if (rc == DP_OK) {
        s->id = op.id;
        bool found = false;
        rc = jobs_get(c, op.id, NULL, &s->row, &found, s->req_id, err);
        if (rc == DP_OK && !found)
            rc = dp_err_set(err, DP_EINTERNAL, NULL, "the job just stored is gone");
        job_runner_notify(s->runner);
    }
    store_conn_close(c);
    return rc;
}

/* The refusal of s (the 409's body, with its details); NULL when out of memory. */
static json_t *refusal_json(const submit *s, const http_req *rq)
{
    json_t *body = http_err_body(&s->refused, rq->req_id);
    json_t *inner = body ? json_object_get(body, "error") : NULL;
    json_t *d = json_pack(
        "{s:s, s:I, s:o, s:o, s:o}", "silo", s->refused_silo, "silo_id",
        (json_int_t)s->refusal.silo_id, "would_be", json_util_real(s->refusal.would_be), "budget",
        json_util_real(s->refusal.budget), "requested", json_util_real(s->refusal.requested));
    if (inner == NULL || d == NULL || json_object_set_new(inner, "details", d) != 0) {
        json_decref(body);
        return NULL;
    }
    return body;
}

/* POST /v1/jobs/plan's answer: the plan POST /v1/jobs would store, each bound silo's budget check
 * and the submission's refusal (or null). */
static int plan_render(submit *s, const http_req *rq, http_resp *rs, dp_err *err)
{
    char *text = job_plan_json(&s->prep);
    json_error_t je;
    json_t *plan = text ? json_util_loads(text, 0, &je) : NULL;
    free(text);
    json_t *checks = json_array();
    json_t *refusal = s->refused_rc != DP_OK ? refusal_json(s, rq) : json_null();
    int rc = plan && checks && refusal ? DP_OK : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; rc == DP_OK && i < s->n_checks; i++) {
        const silo_check *ck = &s->checks[i];
        const job_silo_plan *sp = &s->prep.silo[ck->k];
        json_t *c = json_pack("{s:s, s:I, s:o, s:s, s:o, s:o, s:o, s:b}", "silo",
                              s->prep.fed.silo[ck->k].name, "silo_id", (json_int_t)sp->ledger_silo,
                              "planned_epsilon", json_util_real(sp->planned_eps), "unit",
                              ck->res.kind == LEDGER_BUDGET_RHO ? "rho" : "epsilon", "requested",
                              json_util_real(ck->res.requested), "would_be",
                              json_util_real(ck->res.would_be), "budget",
                              json_util_real(ck->res.budget), "affordable", ck->affordable);
        if (c == NULL || json_array_append_new(checks, c) != 0)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    json_t *o = NULL;
    if (rc == DP_OK) {
        o = json_pack("{s:O, s:s, s:I, s:b, s:O, s:O}", "plan", plan, "on_budget_exhausted",
                      job_on_budget_name(s->prep.spec.on_budget), "rounds",
                      (json_int_t)s->prep.spec.rounds, "admitted", s->refused_rc == DP_OK,
                      "budget_checks", checks, "refusal", refusal);
        if (o == NULL)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    json_decref(plan);
    json_decref(checks);
    json_decref(refusal);
    return rc == DP_OK ? http_resp_json(rs, 200, o, err) : rc;
}

static int submit_render(void *arg, const http_req *rq, http_resp *rs, bool deferred, dp_err *err)
{
    (void)deferred;
    submit *s = arg;
    if (s->dry_run)
        return plan_render(s, rq, rs, err);
    if (s->refused_rc != DP_OK) {
        json_t *body = refusal_json(s, rq);
        return body ? http_resp_json(rs, 409, body, err)
                    : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    int rc = job_answer(&s->row, rs, 202, err);
    if (rc == DP_OK)
        snprintf(rs->location, sizeof rs->location, "/v1/jobs/%lld", (long long)s->id);
    return rc;
}

/* A silo token may bind only its own silo: binding spends the budget. */
static int check_bindings(const job_spec *spec, const ledger_principal *who, dp_err *err)
{
    if (who->role == LEDGER_ROLE_ADMIN || who->role == LEDGER_ROLE_NONE)
        return DP_OK;
    for (size_t i = 0; i < spec->n_bindings; i++)
        if (spec->bindings[i].silo_id != who->silo_id) {
            char f[DP_ERR_FIELD_MAX];
            snprintf(f, sizeof f, "silos.%.41s", spec->bindings[i].name);
            return dp_err_set(err, DP_EFORBIDDEN, f,
                              "%s: a silo's token may bind only its own silo (%lld), not ledger "
                              "silo %lld; the admin may bind any",
                              f, (long long)who->silo_id, (long long)spec->bindings[i].silo_id);
        }
    return DP_OK;
}

/* POST /v1/jobs and POST /v1/jobs/plan: the same intake (parse, access, bindings) and the same
 * planning on the compute pool; the dry run stops before anything is stored. */
static int submit_start(const http_req *rq, http_resp *rs, bool dry_run, dp_err *err)
{
    const app *a = rq->app;
    if (a == NULL || a->writer == NULL || a->store == NULL)
        return dp_err_set(err, DP_EINTERNAL, NULL, "no database to store the job");
    submit *s = dp_calloc(1, sizeof *s);
    if (s == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    int rc = json_util_require_object(rq->body, "body", err);
    if (rc == DP_OK)
        rc = job_spec_parse(rq->body, &s->spec, err);
    if (rc == DP_OK)
        rc = auth_resolve(rq, &s->who, err);
    if (rc == DP_OK)
        rc = check_bindings(&s->spec, &s->who, err);
    if (rc == DP_OK)
        rc = auth_creator_id(rq, &s->creator, err);
    if (rc == DP_OK && s->spec.n_bindings > 0 && a->ledger == NULL)
        rc = dp_err_set(err, DP_EINTERNAL, NULL, "no ledger to bind the silos to");
    if (rc == DP_OK && (s->spec_text = json_util_dumps(rq->body, JSON_COMPACT)) == NULL)
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    if (rc != DP_OK) {
        submit_free(s);
        return rc;
    }
    snprintf(s->req_id, sizeof s->req_id, "%s", rq->req_id ? rq->req_id : "-");
    s->l = a->ledger;
    s->w = a->writer;
    s->st = a->store;
    s->runner = a->jobs;
    s->dry_run = dry_run;
    compute_task t = {submit_run, submit_render, submit_free, s, COMPUTE_TOKEN};
    return compute_offload(rq, rs, &t, err);
}

int route_jobs_submit(const http_req *rq, http_resp *rs, dp_err *err)
{
    return submit_start(rq, rs, false, err);
}

int route_jobs_plan(const http_req *rq, http_resp *rs, dp_err *err)
{
    return submit_start(rq, rs, true, err);
}

/* ---- GET /v1/jobs, GET /v1/jobs/{id} ---- */

int route_jobs_list(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t limit, after;
    job_viewer v;
    if (http_req_page(rq, &limit, &after, err) != DP_OK || auth_viewer(rq, &v, NULL, err) != DP_OK)
        return err->code;
    if (limit > JOBS_PAGE_MAX)
        limit = JOBS_PAGE_MAX;
    int status = -1;
    const char *sv = http_req_query(rq, "status");
    if (sv != NULL && (status = job_status_parse(sv)) < 0)
        return dp_err_set(err, DP_EINVAL, "status",
                          "status must be queued, running, succeeded, failed, cancelled or "
                          "interrupted (got \"%.32s\")",
                          sv);
    job_row *page = dp_calloc((size_t)limit, sizeof *page);
    if (page == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    size_t n = 0;
    bool more = false;
    int rc = jobs_list(rq->db, &v, status, after, (size_t)limit, page, &n, &more, rq->req_id, err);
    /* {"jobs": [...], "next_after": ...}, as json_util_page makes it, the jobs as job_text */
    run_text t = {0};
    run_text_append(&t, "{\"jobs\":[", 9);
    for (size_t i = 0; rc == DP_OK && i < n; i++) {
        if (i > 0)
            run_text_append(&t, ",", 1);
        job_text(&page[i], &t);
    }
    int64_t last = n > 0 ? page[n - 1].id : 0;
    for (size_t i = 0; i < n; i++)
        job_row_clear(&page[i]);
    dp_free(page);
    if (rc != DP_OK) {
        free(t.s);
        return rc;
    }
    char tail[64];
    int tl = more ? snprintf(tail, sizeof tail, "],\"next_after\":%lld}", (long long)last)
                  : snprintf(tail, sizeof tail, "],\"next_after\":null}");
    run_text_append(&t, tail, (size_t)tl);
    return text_answer(&t, rs, 200, err);
}

/* The job of the path as the caller may see it (404 otherwise). */
static int path_job(const http_req *rq, job_row *row, job_viewer *v, ledger_principal *who,
                    dp_err *err)
{
    int64_t id;
    bool found = false;
    if (http_req_param_id(rq, "id", &id, err) != DP_OK || auth_viewer(rq, v, who, err) != DP_OK ||
        jobs_get(rq->db, id, v, row, &found, rq->req_id, err) != DP_OK)
        return err->code;
    if (!found)
        return http_err_not_found(err, "id", "job", id);
    return DP_OK;
}

int route_job_get(const http_req *rq, http_resp *rs, dp_err *err)
{
    job_row row;
    job_viewer v;
    if (path_job(rq, &row, &v, NULL, err) != DP_OK)
        return err->code;
    int rc = job_answer(&row, rs, 200, err);
    job_row_clear(&row);
    return rc;
}

/* ---- POST /v1/jobs/{id}/cancel ---- */

static int cancel_finish(const http_req *rq, http_resp *rs, void *arg, int rc, const dp_err *werr,
                         dp_err *err)
{
    job_cancel_op *op = arg;
    if (rc != DP_OK) {
        *err = *werr;
        return rc;
    }
    if (!op->found)
        return http_err_not_found(err, "id", "job", op->id);
    if (op->was != JOB_QUEUED && op->was != JOB_RUNNING)
        return dp_err_set(err, DP_ECONFLICT, "id", "job %lld has already ended (%s)",
                          (long long)op->id, job_status_name(op->was));
    job_runner_notify(rq->app->jobs);
    job_row row;
    bool found = false;
    if (jobs_get(rq->db, op->id, &op->who, &row, &found, rq->req_id, err) != DP_OK)
        return err->code;
    int out =
        found ? job_answer(&row, rs, 202, err) : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    job_row_clear(&row);
    return out;
}

int route_job_cancel(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t id;
    job_viewer who;
    if (http_req_param_id(rq, "id", &id, err) != DP_OK || auth_viewer(rq, &who, NULL, err) != DP_OK)
        return err->code;
    job_cancel_op *op = dp_calloc(1, sizeof *op);
    if (op == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    op->id = id;
    op->who = who;
    op->now_ms = time_now_ms();
    /* the MHD thread does not wait for the group commit (api/write.h) */
    return api_write(rq, rs, jobs_cancel_apply, op, dp_free, cancel_finish, err);
}

/* ---- GET /v1/jobs/{id}/metrics ----
 * The answer is the stored rounds' texts spliced into the page: each is the compact JSON that
 * job_round_json wrote (jobs/round_json.h), so parsing it into a tree and printing it again gave
 * the same bytes, and took ~2 ms a round of a 139-silo job (0.4 s for a 200-round page). */

typedef struct rounds_page {
    run_text t;
    size_t n;
    int64_t last; /* the last round listed */
} rounds_page;

static int add_round(void *arg, int64_t round, double wall_ms, const char *metrics)
{
    (void)wall_ms;
    rounds_page *p = arg;
    if (metrics == NULL)
        return 1;
    if (p->n++ > 0)
        run_text_append(&p->t, ",", 1);
    run_text_append(&p->t, metrics, strlen(metrics));
    p->last = round;
    return p->t.failed;
}

int route_job_metrics(const http_req *rq, http_resp *rs, dp_err *err)
{
    job_row row;
    job_viewer v;
    int64_t limit, after;
    if (http_req_page(rq, &limit, &after, err) != DP_OK ||
        path_job(rq, &row, &v, NULL, err) != DP_OK)
        return err->code;
    if (limit > ROUNDS_PAGE_MAX)
        limit = ROUNDS_PAGE_MAX;
    /* the members in the order the tree gave them: rounds, next_after, job_id, status,
     * rounds_total, rounds_done */
    rounds_page p = {.last = after};
    bool more = false;
    run_text_append(&p.t, "{\"rounds\":[", 11);
    int rc = jobs_rounds_list(rq->db, row.id, after, (size_t)limit, add_round, &p, &more,
                              rq->req_id, err);
    if (rc == DP_OK) {
        char tail[256], next[24];
        if (more)
            snprintf(next, sizeof next, "%lld", (long long)p.last);
        else
            memcpy(next, "null", 5);
        int n = snprintf(tail, sizeof tail,
                         "],\"next_after\":%s,\"job_id\":%lld,\"status\":\"%s\",\"rounds_total\":"
                         "%lld,\"rounds_done\":%lld}",
                         next, (long long)row.id, job_status_name(row.status),
                         (long long)row.rounds_total, (long long)row.rounds_done);
        run_text_append(&p.t, tail, (size_t)n); /* < 256: two names and four integers */
    }
    job_row_clear(&row);
    if (rc != DP_OK) {
        free(p.t.s);
        return rc;
    }
    return text_answer(&p.t, rs, 200, err);
}

/* ---- GET /v1/jobs/{id}/model ---- */

/* The engine's configuration and silo count of a stored job, from its spec and plan: enough to read
 * its checkpoint without its data. */
static int stored_cfg(const job_row *row, json_t *plan, job_spec *spec, fl_job_cfg *jcfg,
                      size_t *n_silos, dp_err *err)
{
    json_t *m = json_object_get(plan, "model");
    json_error_t je;
    json_t *body = json_util_loads(row->spec, 0, &je);
    dp_err e;
    dp_err_clear(&e);
    int rc = body != NULL ? job_spec_parse(body, spec, &e) : DP_EINTERNAL;
    json_decref(body);
    if (rc != DP_OK || !json_is_object(m))
        return dp_err_set(err, DP_EINTERNAL, NULL, "job %lld's stored spec or plan is unreadable",
                          (long long)row->id);
    spec->model.d_in = (size_t)json_integer_value(json_object_get(m, "d_in"));
    spec->model.n_classes = (size_t)json_integer_value(json_object_get(m, "n_classes"));
    job_cfg_fill(spec, NULL, jcfg);
    *n_silos = json_array_size(json_object_get(plan, "silos"));
    return DP_OK;
}

/* The plan's silo entry named name, or NULL. */
static json_t *plan_silo(json_t *plan, const char *name, size_t *index)
{
    json_t *silos = json_object_get(plan, "silos");
    for (size_t k = 0; k < json_array_size(silos); k++) {
        json_t *s = json_array_get(silos, k);
        if (strcmp(json_string_value(json_object_get(s, "name")), name) == 0) {
            *index = k;
            return s;
        }
    }
    return NULL;
}

static json_t *floats_json(const float *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a != NULL && i < n; i++)
        if (json_array_append_new(a, json_real((double)v[i])) != 0) {
            json_decref(a);
            a = NULL;
        }
    return a;
}

int route_job_model(const http_req *rq, http_resp *rs, dp_err *err)
{
    job_row row;
    job_viewer v;
    ledger_principal who;
    if (path_job(rq, &row, &v, &who, err) != DP_OK)
        return err->code;
    const char *silo = http_req_query(rq, "silo");
    json_error_t je;
    json_t *plan = json_util_loads(row.plan, 0, &je);
    fl_job_cfg jcfg;
    job_spec spec;
    memset(&spec, 0, sizeof spec);
    size_t K = 0, k = 0;
    int rc = plan ? stored_cfg(&row, plan, &spec, &jcfg, &K, err)
                  : dp_err_set(err, DP_EINTERNAL, NULL, "job %lld's plan is unreadable",
                               (long long)row.id);
    if (rc == DP_OK && silo != NULL) {
        json_t *ps = plan_silo(plan, silo, &k);
        json_t *sid = ps ? json_object_get(ps, "silo_id") : NULL;
        if (ps == NULL)
            rc = dp_err_set(err, DP_EINVAL, "silo", "job %lld has no silo named \"%.64s\"",
                            (long long)row.id, silo);
        else if (who.role != LEDGER_ROLE_ADMIN &&
                 !(rq->app && rq->app->cfg && rq->app->cfg->auth_off) &&
                 !(who.role == LEDGER_ROLE_SILO && json_is_integer(sid) &&
                   json_integer_value(sid) == who.silo_id))
            rc = dp_err_set(err, DP_EFORBIDDEN, "silo",
                            "a silo's personalised model is that silo's data: only the token of "
                            "the ledger silo it is bound to, or the admin, may read it");
    }
    if (rc == DP_OK && silo == NULL && !fl_algo_has_global(row.algorithm))
        rc = dp_err_set(err, DP_EINVAL, "silo",
                        "a %s job has no global model: ask for a silo's model with ?silo=NAME",
                        row.algorithm);
    uint8_t *buf = NULL;
    size_t len = 0;
    int64_t round = 0;
    if (rc == DP_OK)
        rc = jobs_checkpoint_read(rq->db, row.id, &buf, &len, &round, rq->req_id, err);
    if (rc == DP_OK && buf == NULL)
        rc = dp_err_set(err, DP_ENOTFOUND, "id", "job %lld has no model yet (no round finished)",
                        (long long)row.id);
    fl_state st;
    memset(&st, 0, sizeof st);
    fl_federation shape = {jcfg.model.d_in, jcfg.model.n_classes, K, NULL};
    if (rc == DP_OK)
        rc = fl_state_deserialize(buf, len, &jcfg, &shape, &st, err);
    dp_free(buf);
    json_t *o = NULL;
    if (rc == DP_OK) {
        const float *w = silo ? st.personal + k * st.n_params : st.global;
        o = json_pack("{s:I, s:I, s:o, s:o, s:s, s:o}", "job_id", (json_int_t)row.id, "round",
                      (json_int_t)st.round, "silo", silo ? json_string(silo) : json_null(), "model",
                      json_deep_copy(json_object_get(plan, "model")), "layout",
                      "for each dense layer in order: W (out x in, row-major), then b (out)",
                      "params", floats_json(w, st.n_params));
        if (o == NULL)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    fl_state_free(&st);
    job_spec_clear(&spec);
    json_decref(plan);
    job_row_clear(&row);
    return rc == DP_OK ? http_resp_json(rs, 200, o, err) : rc;
}

/* ---- GET /v1/jobs/{id}/events ---- */

typedef struct sse_buf {
    char *s;
    size_t len, cap;
    int64_t last;
    bool ended;
} sse_buf;

static int sse_add(sse_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int sse_add(sse_buf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return -1;
        if (b->s != NULL && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return 0;
        }
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
        char *ns = realloc(b->s, cap);
        if (ns == NULL)
            return -1;
        b->s = ns;
        b->cap = cap;
    }
}

static int add_event(void *arg, int64_t id, int64_t at_ms, const char *type, const char *data)
{
    sse_buf *b = arg;
    (void)at_ms;
    b->last = id;
    if (strcmp(type, "status") == 0 &&
        (strstr(data, "\"succeeded\"") || strstr(data, "\"failed\"") ||
         strstr(data, "\"cancelled\"") || strstr(data, "\"interrupted\"")))
        b->ended = true;
    return sse_add(b, "id: %lld\nevent: %s\ndata: %s\n\n", (long long)id, type, data);
}

/* Where the stream resumes: ?after= or Last-Event-ID (0: from the start). */
static int events_after(const http_req *rq, int64_t *after, dp_err *err)
{
    *after = 0;
    const char *from = http_req_query(rq, "after");
    const char *field = "after";
    if (from == NULL) {
        from = rq->last_event_id;
        field = "Last-Event-ID";
    }
    if (from == NULL)
        return DP_OK;
    char *end = NULL;
    long long x = strtoll(from, &end, 10);
    if (end == from || *end != '\0' || x < 0)
        return dp_err_set(err, DP_EINVAL, field,
                          "the event id to resume after must be a non-negative integer");
    *after = x;
    return DP_OK;
}

/* A deferred events answer: waiting for the runner's counter to move. */
typedef struct events_wait {
    http_pending base; /* first: the dispatcher holds &base */
    job_watch watch;
} events_wait;

static int events_answer(const http_req *rq, http_resp *rs, bool may_wait, dp_err *err);

static int events_resume(http_pending *p, const http_req *rq, http_resp *rs, dp_err *err)
{
    (void)p;
    return events_answer(rq, rs, false, err);
}

static void events_release(http_pending *p)
{
    dp_free(p);
}

/* The events of the path's job after the resume point. With nothing new for a job still queued
 * or running, and may_wait, the answer is deferred until the runner records something (or
 * JOBS_SSE_WAIT_MS pass): a long poll, so that an EventSource sees a round as soon as it is
 * recorded. */
static int events_answer(const http_req *rq, http_resp *rs, bool may_wait, dp_err *err)
{
    job_row row;
    job_viewer v;
    int64_t after;
    if (events_after(rq, &after, err) != DP_OK || path_job(rq, &row, &v, NULL, err) != DP_OK)
        return err->code;
    job_runner *runner = rq->app ? rq->app->jobs : NULL;
    uint64_t seq = job_runner_event_seq(runner); /* before the read: a later record wakes us */
    bool final = row.status != JOB_QUEUED && row.status != JOB_RUNNING;
    sse_buf b = {0};
    bool more = false;
    int rc = sse_add(&b, "retry: %d\n\n", JOBS_SSE_RETRY_MS) == 0
                 ? jobs_events_list(rq->db, row.id, after, EVENTS_PAGE_MAX, add_event, &b, &more,
                                    rq->req_id, err)
                 : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    job_row_clear(&row);
    if (rc != DP_OK) {
        free(b.s);
        return rc;
    }
    if (b.last == 0 && final && after > 0) { /* ended, and nothing new: stop the EventSource */
        free(b.s);
        rs->status = 204;
        return DP_OK;
    }
    if (b.last == 0 && !final && may_wait && rq->defer != NULL && runner != NULL) {
        events_wait *w = dp_calloc(1, sizeof *w);
        if (w != NULL && job_runner_watch(runner, &w->watch, seq, JOBS_SSE_WAIT_MS, rq->defer->wake,
                                          rq->defer->arg) == DP_OK) {
            free(b.s);
            w->base.resume = events_resume;
            w->base.release = events_release;
            rs->pending = &w->base;
            return DP_OK;
        }
        dp_free(w); /* moved already (or out of memory): answer now, the client asks again */
    }
    if (b.ended && !more && sse_add(&b, "event: end\ndata: {}\n\n") != 0) {
        free(b.s);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    return http_resp_text(rs, 200, "text/event-stream", b.s, b.len, err);
}

int route_job_events(const http_req *rq, http_resp *rs, dp_err *err)
{
    return events_answer(rq, rs, true, err);
}
