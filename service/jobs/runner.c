/*
 * jobs/runner.c: job workers and the round loop. Contract in jobs/runner.h.
 */
#include "service/jobs/runner.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "common/dp_alloc.h"
#include "common/dp_log.h"
#include "common/dp_math.h"
#include "service/base/time.h"
#include "service/codec/json_util.h"
#include "service/db/jobs.h"
#include "service/jobs/prepare.h"
#include "service/jobs/round_json.h"
#include "service/ledger/ledger.h"

#define RUNNER_IDLE_POLL_MS 1000

struct job_runner {
    struct store *st;
    struct ledger *l;
    db_writer *w;
    job_runner_cfg cfg;
    pthread_t *threads;
    unsigned n_started;
    pthread_mutex_t mu;
    pthread_cond_t wake;   /* workers: a job may be queued */
    pthread_cond_t events; /* event waiters: the counter moved */
    bool stopping;         /* guarded by mu */
    bool stopped;
    uint64_t seq;       /* guarded by mu */
    job_watch *watches; /* guarded by mu: deferred event answers waiting for seq to move */
    pthread_t ticker;   /* fires watches whose deadline passed */
    bool ticker_started;
};

/* Calls the wake of every watch in list (outside the lock: a wake resumes a connection). */
static void fire(job_watch *list)
{
    while (list != NULL) {
        job_watch *next = list->next; /* the node may be freed once its wake returns */
        list->wake(list->arg);
        list = next;
    }
}

static void bump(job_runner *r)
{
    pthread_mutex_lock(&r->mu);
    r->seq++;
    job_watch *due = r->watches;
    r->watches = NULL;
    pthread_cond_broadcast(&r->events);
    pthread_mutex_unlock(&r->mu);
    fire(due);
}

static bool stopping(job_runner *r)
{
    pthread_mutex_lock(&r->mu);
    bool s = r->stopping;
    pthread_mutex_unlock(&r->mu);
    return s;
}

/* Ends job id (or requeues it). Logged when the write fails: the recovery at the next start puts
 * a job left running right. */
static void finish(job_runner *r, int64_t id, job_status status, const char *reason)
{
    dp_err e;
    dp_err_clear(&e);
    job_finish_op op = {id, status, reason, time_now_ms()};
    if (db_writer_run(r->w, jobs_finish_apply, &op, &e) != DP_OK)
        dp_log(DP_LOG_ERROR, NULL, "job %lld: could not record status %s: %s", (long long)id,
               job_status_name(status), e.msg);
    else
        dp_log(DP_LOG_INFO, NULL, "job %lld: %s%s%s", (long long)id, job_status_name(status),
               reason ? ": " : "", reason ? reason : "");
    bump(r);
}

/* ---- one job ---- */

typedef struct job_exec {
    job_runner *r;
    int64_t id;
    store_conn *c;
    job_prepared p;
    fl_state st;
    bool *active;       /* K */
    uint64_t *trained;  /* K: rounds each silo trained */
    uint64_t *charged;  /* K: rounds whose privacy event covers the silo: those it trained in for
                           record-level algorithms; for client-level ones (dp_fedavg, ppsgd,
                           fedhdp) every round it was trainable in, sampled or not (the sampling
                           is part of the event, fl_plan_silo), when it has an event (not an
                           opted-out fedhdp silo, not ppsgd with ratio 0) */
    double *eps;        /* K: epsilon so far (DP_NAN when not private) */
    double *ledger_eps; /* K: a bound silo's epsilon after its last charge (the ledger's; DP_NAN
                           before the first) */
    double **curve;     /* K: silo k's one-round RDP curve (NULL when not private) */
    double **sel_curve; /* K: ifca, the curve of silo k's selection rounds (NULL: none) */
    size_t *n_orders;   /* K: its length */
    /* the round's charge */
    ledger_charge_req *reqs; /* K */
    ledger_charge_result *res;
    size_t *req_silo; /* reqs[i] charges silo req_silo[i] */
    size_t n_reqs;
    char reason[64];
    char sel_reason[96]; /* ifca: the reason of a charge that includes the cluster selection */
} job_exec;

static void exec_free(job_exec *x)
{
    /* the per-silo arrays first: job_prepared_free zeroes the silo count they are sized by */
    for (size_t k = 0; x->curve != NULL && k < x->p.fed.n_silos; k++)
        dp_free(x->curve[k]);
    for (size_t k = 0; x->sel_curve != NULL && k < x->p.fed.n_silos; k++)
        dp_free(x->sel_curve[k]);
    dp_free(x->curve);
    dp_free(x->sel_curve);
    dp_free(x->n_orders);
    job_prepared_free(&x->p);
    fl_state_free(&x->st);
    dp_free(x->active);
    dp_free(x->trained);
    dp_free(x->charged);
    dp_free(x->eps);
    dp_free(x->ledger_eps);
    dp_free(x->reqs);
    dp_free(x->res);
    dp_free(x->req_silo);
}

/* The charges of the round for the active bound private silos. */
static void build_reqs(job_exec *x)
{
    x->n_reqs = 0;
    snprintf(x->reason, sizeof x->reason, "training job %lld, round %llu", (long long)x->id,
             (unsigned long long)x->st.round + 1);
    snprintf(x->sel_reason, sizeof x->sel_reason,
             "training job %lld, round %llu, with the private cluster selection", (long long)x->id,
             (unsigned long long)x->st.round + 1);
    for (size_t k = 0; k < x->p.fed.n_silos; k++) {
        const job_silo_plan *sp = &x->p.silo[k];
        if (!x->active[k] || sp->ledger_silo == 0 || sp->round_event == NULL)
            continue;
        ledger_charge_req *q = &x->reqs[x->n_reqs];
        memset(q, 0, sizeof *q);
        q->silo_id = sp->ledger_silo;
        /* ifca: the rounds t < select_rounds also charge the selection (fl_plan_silo_select) */
        bool sel = sp->select_event != NULL && x->st.round < sp->plan.select_rounds;
        q->event = sel ? sp->select_event : sp->round_event;
        q->neighboring = ACCT_NB_ADD_REMOVE;
        /* no idempotency key: a round's charge commits with its checkpoint, so a resumed job
         * never charges a round twice, and keys are the clients' to choose */
        q->reason = sel ? x->sel_reason : x->reason;
        q->job_id = x->id;
        x->req_silo[x->n_reqs++] = k;
    }
}

static size_t n_active(const job_exec *x)
{
    size_t n = 0;
    for (size_t k = 0; k < x->p.fed.n_silos; k++)
        n += x->active[k];
    return n;
}

/* A refusal (rc DP_EBUDGET, x->res filled): applies the policy to the refused silos. Returns true
 * when the job must stop (stop_job), with the reason in why. */
static bool apply_policy(job_exec *x, char *why, size_t cap)
{
    bool any = false;
    for (size_t i = 0; i < x->n_reqs; i++) {
        if (x->res[i].status != DP_EBUDGET)
            continue;
        size_t k = x->req_silo[i];
        any = true;
        if (x->p.spec.on_budget == JOB_BUDGET_STOP_SILO) {
            x->active[k] = false;
            dp_log(DP_LOG_INFO, NULL,
                   "job %lld: silo \"%s\" (ledger silo %lld) stops before round "
                   "%llu: its budget cannot afford another round",
                   (long long)x->id, x->p.fed.silo[k].name, (long long)x->p.silo[k].ledger_silo,
                   (unsigned long long)x->st.round + 1);
            continue;
        }
        snprintf(why, cap,
                 "stopped before round %llu: silo \"%s\" (ledger silo %lld) cannot afford it "
                 "(epsilon would be %.6g, budget %.6g; on_budget_exhausted %s)",
                 (unsigned long long)x->st.round + 1, x->p.fed.silo[k].name,
                 (long long)x->p.silo[k].ledger_silo, x->res[i].would_be, x->res[i].budget,
                 job_on_budget_name(x->p.spec.on_budget));
        return true;
    }
    if (!any) /* a batch refused without a named silo: stop the first as a fallback */
        x->active[x->req_silo[0]] = false;
    return false;
}

/* The write of a round, inside its charge's transaction. */
typedef struct round_write {
    job_exec *x;
    double *ledger_eps; /* K: x->ledger_eps with this round's charges */
    const fl_round_metrics *m;
    double clip;        /* fedhdp: the update clip the round used */
    const fl_state *st; /* the state after the round (adaped's psi, the priors) */
    double wall_ms;
    const uint8_t *ckpt;
    size_t ckpt_len;
} round_write;

static int write_round(sqlite3 *db, void *arg, const ledger_charge_result *out, size_t n,
                       dp_err *err)
{
    round_write *rw = arg;
    job_exec *x = rw->x;
    /* each run starts from the committed figures (the ledger may run this write twice) */
    memcpy(rw->ledger_eps, x->ledger_eps, x->p.fed.n_silos * sizeof *rw->ledger_eps);
    for (size_t i = 0; i < n && i < x->n_reqs; i++)
        rw->ledger_eps[x->req_silo[i]] = out[i].spent_eps_after;
    char *text = job_round_json(&x->p, rw->m, x->st.stopped, x->trained, x->charged, x->eps,
                                rw->ledger_eps, rw->clip, rw->st, rw->wall_ms);
    if (text == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    job_round_new r = {x->id,    (int64_t)x->st.round, time_now_ms(), rw->wall_ms, text,
                       rw->ckpt, rw->ckpt_len};
    int rc = jobs_round_write(db, &r, err);
    free(text);
    return rc;
}

/* The trained-round counts of a resumed job, from its last round's metrics. */
static int restore_counts(job_exec *x, dp_err *err);

static int load_state(job_exec *x, dp_err *err)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int64_t round = 0;
    int rc = jobs_checkpoint_read(x->c, x->id, &buf, &len, &round, NULL, err);
    if (rc != DP_OK)
        return rc;
    if (buf == NULL)
        return fl_state_init(&x->p.cfg, &x->p.fed, &x->st, err);
    rc = fl_state_deserialize(buf, len, &x->p.cfg, &x->p.fed, &x->st, err);
    dp_free(buf);
    if (rc == DP_OK)
        rc = restore_counts(x, err);
    return rc;
}

typedef struct counts_arg {
    job_exec *x;
    int bad;
} counts_arg;

static int counts_row(void *arg, int64_t round, double wall_ms, const char *metrics)
{
    (void)round;
    (void)wall_ms;
    counts_arg *a = arg;
    json_error_t je;
    json_t *m = json_util_loads(metrics, 0, &je);
    json_t *silos = json_object_get(m, "silos");
    if (json_array_size(silos) != a->x->p.fed.n_silos)
        a->bad = 1;
    for (size_t k = 0; !a->bad && k < a->x->p.fed.n_silos; k++) {
        json_t *s = json_array_get(silos, k);
        a->x->trained[k] = (uint64_t)json_integer_value(json_object_get(s, "rounds_trained"));
        json_t *c = json_object_get(s, "rounds_charged"); /* absent before issue 13: = trained */
        a->x->charged[k] = json_is_integer(c) ? (uint64_t)json_integer_value(c) : a->x->trained[k];
        json_t *e = json_object_get(s, "epsilon");
        a->x->eps[k] = json_is_number(e) ? json_number_value(e) : DP_NAN;
        if (a->x->p.silo[k].ledger_silo != 0 && a->x->charged[k] > 0)
            a->x->ledger_eps[k] = a->x->eps[k]; /* a bound silo's figure is the ledger's */
    }
    json_decref(m);
    return 0;
}

static int restore_counts(job_exec *x, dp_err *err)
{
    if (x->st.round == 0)
        return DP_OK;
    counts_arg a = {x, 0};
    bool more = false;
    int rc = jobs_rounds_list(x->c, x->id, (int64_t)x->st.round - 1, 1, counts_row, &a, &more, NULL,
                              err);
    if (rc == DP_OK && a.bad)
        rc = dp_err_set(err, DP_EINTERNAL, NULL, "the last round's metrics do not match the job");
    return rc;
}

/* Epsilon of silo k after `charged` rounds, as the accountant computes it (fl_plan_epsilon),
 * from its cached one-round curve. ifca: a silo's charged rounds are rounds 0 .. charged - 1 (a
 * record-level silo is charged the rounds it trains, and a stop is sticky), so the first
 * min(charged, select_rounds) of them carried the selection. */
static double accountant_eps(const job_exec *x, size_t k, uint64_t charged)
{
    const job_silo_plan *sp = &x->p.silo[k];
    if (sp->round_event == NULL || x->curve[k] == NULL)
        return DP_NAN;
    double e = DP_NAN;
    dp_err err;
    dp_err_clear(&err);
    uint64_t sel = x->sel_curve[k] == NULL            ? 0
                   : charged < sp->plan.select_rounds ? charged
                                                      : sp->plan.select_rounds;
    if (fl_plan_epsilon_curves(x->curve[k], x->sel_curve[k], x->n_orders[k], charged, sel,
                               &sp->acct, &e, &err) != DP_OK)
        return DP_NAN;
    return e;
}

/* Runs one round with its charge. DP_OK: the round is recorded. *stop set (with why) when the job
 * must end now (budget policy, every silo stopped). */
static int one_round(job_exec *x, fl_state *backup, bool *stop, char *why, size_t cap, dp_err *err)
{
    *stop = false;
    for (;;) {
        if (n_active(x) == 0) {
            snprintf(why, cap, "stopped before round %llu: no silo can afford another round",
                     (unsigned long long)x->st.round + 1);
            *stop = true;
            return DP_OK;
        }
        build_reqs(x);
        dp_err e;
        dp_err_clear(&e);
        int rc =
            x->n_reqs ? ledger_charge_batch(x->r->l, x->reqs, x->n_reqs, true, x->res, &e) : DP_OK;
        if (rc == DP_EBUDGET) {
            if (apply_policy(x, why, cap)) {
                *stop = true;
                return DP_OK;
            }
            continue;
        }
        if (rc != DP_OK) {
            *err = e;
            return rc;
        }
        /* keep the start-of-round state: a refused charge discards the round */
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        uint8_t *ckpt = NULL;
        size_t ckpt_len = 0;
        rc = fl_state_serialize(&x->st, &x->p.cfg, &ckpt, &ckpt_len, err);
        if (rc == DP_OK) {
            fl_state_free(backup);
            rc = fl_state_deserialize(ckpt, ckpt_len, &x->p.cfg, &x->p.fed, backup, err);
        }
        dp_free(ckpt);
        ckpt = NULL;
        fl_round_metrics m;
        memset(&m, 0, sizeof m);
        double clip = fl_hdp_clip(&x->p.cfg, &x->st); /* S^t, before the round moves it */
        if (rc == DP_OK)
            rc = fl_round_run(&x->p.cfg, &x->p.fed, &x->st, x->active, (int)x->r->cfg.job_threads,
                              &m, err);
        if (rc == DP_OK)
            rc = fl_state_serialize(&x->st, &x->p.cfg, &ckpt, &ckpt_len, err);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double wall = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
        if (rc != DP_OK) {
            fl_round_metrics_free(&m);
            dp_free(ckpt);
            return rc;
        }
        /* the counts and epsilons this round brings (written with the charge) */
        uint64_t *was = dp_calloc(2 * x->p.fed.n_silos, sizeof *was),
                 *ch_was = was + x->p.fed.n_silos;
        double *eps_was = dp_calloc(x->p.fed.n_silos, sizeof *eps_was);
        if (was == NULL || eps_was == NULL) {
            dp_free(was);
            dp_free(eps_was);
            fl_round_metrics_free(&m);
            dp_free(ckpt);
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        }
        bool client = fl_algo_client_level(x->p.spec.algorithm);
        for (size_t k = 0; k < x->p.fed.n_silos; k++) {
            was[k] = x->trained[k];
            ch_was[k] = x->charged[k];
            eps_was[k] = x->eps[k];
            if (m.silo[k].active)
                x->trained[k]++;
            /* the rule of build_reqs: client-level silos every trainable round with an event */
            if (client ? x->active[k] && x->p.silo[k].round_event != NULL : m.silo[k].active)
                x->charged[k]++;
            x->eps[k] = accountant_eps(x, k, x->charged[k]);
        }
        double *leps = dp_calloc(x->p.fed.n_silos, sizeof *leps);
        round_write rw = {x, leps, &m, clip, &x->st, wall, ckpt, ckpt_len};
        dp_err_clear(&e);
        rc = leps ? ledger_charge_batch_with(x->r->l, x->reqs, x->n_reqs, write_round, &rw, x->res,
                                             &e)
                  : dp_err_set(&e, DP_ENOMEM, NULL, "out of memory");
        if (rc == DP_OK)
            memcpy(x->ledger_eps, leps, x->p.fed.n_silos * sizeof *leps);
        dp_free(leps);
        fl_round_metrics_free(&m);
        dp_free(ckpt);
        if (rc == DP_OK) {
            dp_free(was);
            dp_free(eps_was);
            bump(x->r);
            return DP_OK;
        }
        /* not recorded: the round never happened */
        memcpy(x->trained, was, x->p.fed.n_silos * sizeof *was);
        memcpy(x->charged, ch_was, x->p.fed.n_silos * sizeof *ch_was);
        memcpy(x->eps, eps_was, x->p.fed.n_silos * sizeof *eps_was);
        dp_free(was);
        dp_free(eps_was);
        fl_state tmp = x->st;
        x->st = *backup;
        *backup = tmp;
        if (rc == DP_EBUDGET) { /* spent elsewhere since the dry run */
            if (apply_policy(x, why, cap)) {
                *stop = true;
                return DP_OK;
            }
            continue;
        }
        *err = e;
        return rc;
    }
}

static void run_job(job_runner *r, store_conn *c, int64_t id)
{
    job_exec x;
    memset(&x, 0, sizeof x);
    x.r = r;
    x.id = id;
    x.c = c;
    dp_err e;
    dp_err_clear(&e);
    job_row row;
    bool found = false;
    int rc = jobs_get(c, id, NULL, &row, &found, NULL, &e);
    if (rc != DP_OK || !found) {
        finish(r, id, JOB_FAILED, rc != DP_OK ? e.msg : "the job's row is gone");
        return;
    }
    json_error_t je;
    json_t *body = json_util_loads(row.spec, 0, &je);
    job_spec spec;
    rc = body ? job_spec_parse(body, &spec, &e)
              : dp_err_set(&e, DP_EINTERNAL, NULL, "the stored spec does not parse");
    json_decref(body);
    bool resume = row.resume;
    job_row_clear(&row);
    if (rc == DP_OK)
        rc = job_prepare(&spec, c, r->l, NULL, &x.p, NULL, &e);
    size_t K = rc == DP_OK ? x.p.fed.n_silos : 0;
    if (rc == DP_OK) {
        x.active = dp_calloc(K, sizeof *x.active);
        x.trained = dp_calloc(K, sizeof *x.trained);
        x.charged = dp_calloc(K, sizeof *x.charged);
        x.eps = dp_calloc(K, sizeof *x.eps);
        x.ledger_eps = dp_calloc(K, sizeof *x.ledger_eps);
        x.reqs = dp_calloc(K, sizeof *x.reqs);
        x.res = dp_calloc(K, sizeof *x.res);
        x.req_silo = dp_calloc(K, sizeof *x.req_silo);
        if (!x.active || !x.trained || !x.charged || !x.eps || !x.ledger_eps || !x.reqs || !x.res ||
            !x.req_silo)
            rc = dp_err_set(&e, DP_ENOMEM, NULL, "out of memory");
    }
    if (rc == DP_OK) {
        x.curve = dp_calloc(K, sizeof *x.curve);
        x.sel_curve = dp_calloc(K, sizeof *x.sel_curve);
        x.n_orders = dp_calloc(K, sizeof *x.n_orders);
        if (x.curve == NULL || x.sel_curve == NULL || x.n_orders == NULL)
            rc = dp_err_set(&e, DP_ENOMEM, NULL, "out of memory");
    }
    for (size_t k = 0; rc == DP_OK && k < K; k++) {
        x.eps[k] = x.p.silo[k].round_event ? 0 : DP_NAN;
        x.ledger_eps[k] = DP_NAN;
        if (x.p.silo[k].round_event != NULL)
            rc = fl_plan_round_curve(x.p.silo[k].round_event, &x.p.silo[k].acct, &x.curve[k],
                                     &x.n_orders[k], &e);
        size_t n_sel = 0;
        if (rc == DP_OK && x.p.silo[k].select_event != NULL)
            rc = fl_plan_round_curve(x.p.silo[k].select_event, &x.p.silo[k].acct, &x.sel_curve[k],
                                     &n_sel, &e);
    }
    if (rc == DP_OK)
        rc = load_state(&x, &e);
    /* a bound silo's epsilon is the ledger's: before its first charge in this job, what it had
     * spent already */
    for (size_t k = 0; rc == DP_OK && k < K; k++) {
        if (x.p.silo[k].ledger_silo == 0 || x.p.silo[k].round_event == NULL ||
            !isnan(x.ledger_eps[k]))
            continue;
        ledger_silo_view v;
        if (ledger_silo_get(r->l, c, x.p.silo[k].ledger_silo, &v, &e) == DP_OK)
            x.ledger_eps[k] = v.spent_eps;
        else
            dp_err_clear(&e); /* archived or gone: the figure comes with its next charge */
    }
    for (size_t k = 0; rc == DP_OK && k < K; k++)
        x.active[k] = !x.st.stopped[k];
    fl_state backup;
    memset(&backup, 0, sizeof backup);
    char why[512] = "";
    job_status end = JOB_SUCCEEDED;
    while (rc == DP_OK && x.st.round < x.p.cfg.rounds) {
        bool cancel = false;
        if ((rc = jobs_cancel_requested(c, id, &cancel, &e)) != DP_OK)
            break;
        if (cancel) {
            end = JOB_CANCELLED;
            snprintf(why, sizeof why, "cancelled after %llu of %llu rounds",
                     (unsigned long long)x.st.round, (unsigned long long)x.p.cfg.rounds);
            break;
        }
        if (stopping(r)) {
            end = resume ? JOB_QUEUED : JOB_INTERRUPTED;
            snprintf(why, sizeof why, "the daemon stopped after %llu of %llu rounds%s",
                     (unsigned long long)x.st.round, (unsigned long long)x.p.cfg.rounds,
                     resume ? "; it resumes from its last checkpoint" : "");
            break;
        }
        bool stop = false;
        rc = one_round(&x, &backup, &stop, why, sizeof why, &e);
        if (rc == DP_OK && stop) {
            if (x.st.round == 0) /* stopped before anything was trained: nothing to show */
                end = JOB_FAILED;
            break;
        }
    }
    fl_state_free(&backup);
    if (rc != DP_OK) {
        dp_log(DP_LOG_WARN, NULL, "job %lld failed: %s%s%s", (long long)id, e.msg,
               e.field[0] ? " (field " : "", e.field[0] ? e.field : "");
        if (e.field[0])
            snprintf(why, sizeof why, "%s: %s", e.field, e.msg);
        else
            snprintf(why, sizeof why, "%s", e.msg);
        end = JOB_FAILED;
    }
    exec_free(&x);
    finish(r, id, end, why[0] ? why : NULL);
}

/* ---- workers ---- */

static void *worker(void *arg)
{
    job_runner *r = arg;
    dp_err e;
    dp_err_clear(&e);
    store_conn *c = store_conn_open_extra(r->st, &e);
    if (c == NULL) {
        dp_log(DP_LOG_ERROR, NULL, "job worker: no database connection: %s", e.msg);
        return NULL;
    }
    while (!stopping(r)) {
        job_claim_op op = {time_now_ms(), 0};
        dp_err_clear(&e);
        if (db_writer_run(r->w, jobs_claim_apply, &op, &e) != DP_OK) {
            dp_log(DP_LOG_WARN, NULL, "job worker: claim failed: %s", e.msg);
            op.id = 0;
        }
        if (op.id != 0) {
            bump(r);
            run_job(r, c, op.id);
            continue;
        }
        pthread_mutex_lock(&r->mu);
        if (!r->stopping) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += RUNNER_IDLE_POLL_MS / 1000;
            pthread_cond_timedwait(&r->wake, &r->mu, &ts);
        }
        pthread_mutex_unlock(&r->mu);
    }
    store_conn_close(c);
    return NULL;
}

#define RUNNER_TICK_MS 100

static void *ticker(void *arg)
{
    job_runner *r = arg;
    pthread_mutex_lock(&r->mu);
    while (!r->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += RUNNER_TICK_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&r->events, &r->mu, &ts);
        int64_t now = time_mono_ms();
        job_watch *due = NULL, **pp = &r->watches;
        while (*pp != NULL) {
            job_watch *w = *pp;
            if (w->deadline_ms <= now) {
                *pp = w->next;
                w->next = due;
                due = w;
            } else {
                pp = &w->next;
            }
        }
        pthread_mutex_unlock(&r->mu);
        fire(due);
        pthread_mutex_lock(&r->mu);
    }
    job_watch *rest = r->watches; /* stopping: nobody waits any longer */
    r->watches = NULL;
    pthread_mutex_unlock(&r->mu);
    fire(rest);
    return NULL;
}

int job_runner_watch(job_runner *r, job_watch *w, uint64_t seen, int timeout_ms,
                     void (*wake)(void *arg), void *arg)
{
    if (r == NULL)
        return DP_ECONFLICT;
    w->wake = wake;
    w->arg = arg;
    w->deadline_ms = time_mono_ms() + timeout_ms;
    pthread_mutex_lock(&r->mu);
    int rc = DP_ECONFLICT;
    if (r->seq <= seen && !r->stopping && r->ticker_started) {
        w->next = r->watches;
        r->watches = w;
        rc = DP_OK;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

job_runner *job_runner_start(struct store *st, struct ledger *l, db_writer *w,
                             const job_runner_cfg *cfg, dp_err *err)
{
    job_recover_op rec = {time_now_ms(), 0, 0};
    if (db_writer_run(w, jobs_recover_apply, &rec, err) != DP_OK)
        return NULL;
    if (rec.requeued || rec.interrupted)
        dp_log(DP_LOG_INFO, NULL, "jobs left running by the last run: %d requeued, %d interrupted",
               rec.requeued, rec.interrupted);
    job_runner *r = dp_calloc(1, sizeof *r);
    if (r == NULL) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    r->st = st;
    r->l = l;
    r->w = w;
    r->cfg = *cfg;
    if (r->cfg.job_threads < 1)
        r->cfg.job_threads = 1;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->wake, NULL);
    pthread_cond_init(&r->events, NULL);
    r->threads = cfg->workers ? dp_calloc(cfg->workers, sizeof *r->threads) : NULL;
    if (cfg->workers && r->threads == NULL) {
        job_runner_free(r);
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    if (pthread_create(&r->ticker, NULL, ticker, r) != 0) {
        job_runner_free(r);
        dp_err_set(err, DP_EINTERNAL, NULL, "cannot start the job runner's ticker thread");
        return NULL;
    }
    r->ticker_started = true;
    for (unsigned i = 0; i < cfg->workers; i++) {
        if (pthread_create(&r->threads[i], NULL, worker, r) != 0) {
            job_runner_free(r);
            dp_err_set(err, DP_EINTERNAL, NULL, "cannot start job worker threads");
            return NULL;
        }
        r->n_started++;
    }
    return r;
}

void job_runner_notify(job_runner *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->mu);
    pthread_cond_broadcast(&r->wake);
    pthread_mutex_unlock(&r->mu);
    bump(r);
}

void job_runner_stop(job_runner *r)
{
    if (r == NULL || r->stopped)
        return;
    pthread_mutex_lock(&r->mu);
    r->stopping = true;
    pthread_cond_broadcast(&r->wake);
    pthread_cond_broadcast(&r->events);
    pthread_mutex_unlock(&r->mu);
    for (unsigned i = 0; i < r->n_started; i++)
        pthread_join(r->threads[i], NULL);
    if (r->ticker_started)
        pthread_join(r->ticker, NULL); /* it fires the watches left */
    r->stopped = true;
}

void job_runner_free(job_runner *r)
{
    if (r == NULL)
        return;
    job_runner_stop(r);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->wake);
    pthread_cond_destroy(&r->events);
    dp_free(r->threads);
    dp_free(r);
}

uint64_t job_runner_event_seq(job_runner *r)
{
    if (r == NULL)
        return 0;
    pthread_mutex_lock(&r->mu);
    uint64_t s = r->seq;
    pthread_mutex_unlock(&r->mu);
    return s;
}
