/*
 * db/jobs.c: the SQL of training jobs. Contract in db/jobs.h.
 *
 * The writer operations prepare per call (the writer's connection has no statement cache; a job
 * writes a few rows a round); the reads use the pooled connection's cache.
 */
#include "service/db/jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_log.h"
#include "service/db/bind.h"

static const char *const STATUS[] = {"queued", "running",   "succeeded",
                                     "failed", "cancelled", "interrupted"};

const char *job_status_name(job_status s)
{
    return (unsigned)s < sizeof STATUS / sizeof STATUS[0] ? STATUS[s] : "?";
}

int job_status_parse(const char *s)
{
    for (size_t i = 0; s != NULL && i < sizeof STATUS / sizeof STATUS[0]; i++)
        if (strcmp(s, STATUS[i]) == 0)
            return (int)i;
    return -1;
}

/* The access rule; the job aliased j, the viewer bound as :admin :tok :silo. */
#define JOB_VISIBLE                                                                                \
    "(:admin = 1 OR j.creator_token_id = :tok OR EXISTS (SELECT 1 FROM tokens t WHERE t.id = "     \
    "j.creator_token_id AND t.silo_id = :silo) OR EXISTS (SELECT 1 FROM job_silos x WHERE "        \
    "x.job_id = j.id AND x.silo_id = :silo))"

#define JOB_COLS                                                                                   \
    "j.id, j.name, j.created_at_ms, j.started_at_ms, j.finished_at_ms, j.updated_at_ms, "          \
    "j.creator_token_id, j.algorithm, j.status, j.reason, j.rounds_total, j.rounds_done, "         \
    "j.dataset_id, j.cancel_requested, j.resume, j.spec, j.plan"

/* One statement on db: prepared, bound by bind(b, arg), stepped to the end. */
static int exec1(sqlite3 *db, const char *sql, void (*bind)(store_binder *b, const void *arg),
                 const void *arg, const char *what, dp_err *err)
{
    sqlite3_stmt *st = NULL;
    int s = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (s != SQLITE_OK) {
        sqlite3_finalize(st);
        return store_db_err(db, s, what, NULL, err);
    }
    store_binder b = store_bind_begin(st);
    if (bind != NULL)
        bind(&b, arg);
    s = store_bind_step(&b);
    while (s == SQLITE_ROW)
        s = sqlite3_step(st);
    sqlite3_finalize(st);
    return s == SQLITE_DONE ? DP_OK : store_db_err(db, s, what, NULL, err);
}

/* The event of a job's status change: {"status": ..., "reason": ...}. */
typedef struct status_event {
    int64_t job_id, now_ms;
    const char *status, *reason;
} status_event;

static void bind_status_event(store_binder *b, const void *arg)
{
    const status_event *e = arg;
    store_bind_i64(b, ":job", e->job_id);
    store_bind_i64(b, ":t", e->now_ms);
    store_bind_text(b, ":status", e->status);
    store_bind_text(b, ":reason", e->reason);
}

static int add_status_event(sqlite3 *db, int64_t job_id, int64_t now_ms, const char *status,
                            const char *reason, dp_err *err)
{
    static const char SQL[] =
        "INSERT INTO job_events (job_id, created_at_ms, type, data) VALUES (:job, :t, 'status', "
        "json_object('status', :status, 'reason', :reason))";
    status_event e = {job_id, now_ms, status, reason};
    return exec1(db, SQL, bind_status_event, &e, "insert job event", err);
}

/* ---- writer operations ---- */

typedef struct binding_row {
    int64_t job_id;
    const job_new_binding *bd;
} binding_row;

static void bind_binding_row(store_binder *b, const void *arg)
{
    const binding_row *r = arg;
    store_bind_i64(b, ":job", r->job_id);
    store_bind_i64(b, ":silo", r->bd->silo_id);
    store_bind_text(b, ":name", r->bd->name);
}

int jobs_insert_apply(sqlite3 *db, void *arg, dp_err *err)
{
    static const char INSERT[] =
        "INSERT INTO jobs (name, created_at_ms, request_id, creator_token_id, algorithm, spec, "
        "plan, dataset_id, status, rounds_total, resume, updated_at_ms) VALUES (:name, :t, :rid, "
        "nullif(:creator, 0), :algo, :spec, :plan, nullif(:ds, 0), 'queued', :rounds, :resume, "
        ":t)";
    static const char BIND[] =
        "INSERT INTO job_silos (job_id, silo_id, name) VALUES (:job, :silo, :name)";
    job_insert_op *op = arg;
    const job_new *j = op->j;
    sqlite3_stmt *st = NULL;
    int s = sqlite3_prepare_v2(db, INSERT, -1, &st, NULL);
    if (s != SQLITE_OK) {
        sqlite3_finalize(st);
        return store_db_err(db, s, "prepare job insert", j->request_id, err);
    }
    store_binder b = store_bind_begin(st);
    store_bind_text(&b, ":name", j->name);
    store_bind_i64(&b, ":t", j->created_at_ms);
    store_bind_text(&b, ":rid", j->request_id ? j->request_id : "-");
    store_bind_i64(&b, ":creator", j->creator_token_id);
    store_bind_text(&b, ":algo", j->algorithm);
    store_bind_text(&b, ":spec", j->spec);
    store_bind_text(&b, ":plan", j->plan);
    store_bind_i64(&b, ":ds", j->dataset_id);
    store_bind_i64(&b, ":rounds", j->rounds_total);
    store_bind_i64(&b, ":resume", j->resume ? 1 : 0);
    s = store_bind_step(&b);
    sqlite3_finalize(st);
    if (s != SQLITE_DONE)
        return store_db_err(db, s, "insert job", j->request_id, err);
    op->id = (int64_t)sqlite3_last_insert_rowid(db);
    for (size_t i = 0; i < j->n_bindings; i++) {
        binding_row r = {op->id, &j->bindings[i]};
        int rc = exec1(db, BIND, bind_binding_row, &r, "insert job silo", err);
        if (rc != DP_OK)
            return rc;
    }
    return add_status_event(db, op->id, j->created_at_ms, "queued", NULL, err);
}

int jobs_claim_apply(sqlite3 *db, void *arg, dp_err *err)
{
    static const char CLAIM[] =
        "UPDATE jobs SET status = 'running', started_at_ms = coalesce(started_at_ms, :t), "
        "updated_at_ms = :t WHERE id = (SELECT id FROM jobs WHERE status = 'queued' ORDER BY id "
        "LIMIT 1) RETURNING id";
    job_claim_op *op = arg;
    op->id = 0;
    sqlite3_stmt *st = NULL;
    int s = sqlite3_prepare_v2(db, CLAIM, -1, &st, NULL);
    if (s != SQLITE_OK) {
        sqlite3_finalize(st);
        return store_db_err(db, s, "prepare job claim", NULL, err);
    }
    store_binder b = store_bind_begin(st);
    store_bind_i64(&b, ":t", op->now_ms);
    s = store_bind_step(&b);
    if (s == SQLITE_ROW) {
        op->id = sqlite3_column_int64(st, 0);
        s = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    if (s != SQLITE_DONE)
        return store_db_err(db, s, "claim job", NULL, err);
    return op->id ? add_status_event(db, op->id, op->now_ms, "running", NULL, err) : DP_OK;
}

static void bind_finish(store_binder *b, const void *arg)
{
    const job_finish_op *op = arg;
    store_bind_i64(b, ":id", op->id);
    store_bind_text(b, ":status", job_status_name(op->status));
    store_bind_text(b, ":reason", op->reason);
    store_bind_i64(b, ":t", op->now_ms);
    store_bind_i64(b, ":final", op->status == JOB_QUEUED ? 0 : 1);
}

int jobs_finish_apply(sqlite3 *db, void *arg, dp_err *err)
{
    static const char FINISH[] =
        "UPDATE jobs SET status = :status, reason = :reason, updated_at_ms = :t, finished_at_ms = "
        "CASE WHEN :final = 1 THEN :t END WHERE id = :id AND status = 'running'";
    job_finish_op *op = arg;
    int rc = exec1(db, FINISH, bind_finish, op, "finish job", err);
    if (rc != DP_OK)
        return rc;
    if (sqlite3_changes(db) == 0)
        return DP_OK; /* not running (already ended): nothing to say */
    return add_status_event(db, op->id, op->now_ms, job_status_name(op->status), op->reason, err);
}

static void bind_id_time(store_binder *b, const void *arg)
{
    const job_cancel_op *op = arg;
    store_bind_i64(b, ":id", op->id);
    store_bind_i64(b, ":t", op->now_ms);
}

int jobs_cancel_apply(sqlite3 *db, void *arg, dp_err *err)
{
    static const char FIND[] = "SELECT j.status FROM jobs AS j WHERE j.id = :id AND " JOB_VISIBLE;
    static const char CANCEL_QUEUED[] =
        "UPDATE jobs SET status = 'cancelled', reason = 'cancelled before it started', "
        "updated_at_ms = :t, finished_at_ms = :t WHERE id = :id AND status = 'queued'";
    static const char CANCEL_RUNNING[] =
        "UPDATE jobs SET cancel_requested = 1, updated_at_ms = :t WHERE id = :id AND status = "
        "'running'";
    job_cancel_op *op = arg;
    op->found = false;
    sqlite3_stmt *st = NULL;
    int s = sqlite3_prepare_v2(db, FIND, -1, &st, NULL);
    if (s != SQLITE_OK) {
        sqlite3_finalize(st);
        return store_db_err(db, s, "prepare job cancel", NULL, err);
    }
    store_binder b = store_bind_begin(st);
    store_bind_i64(&b, ":id", op->id);
    store_bind_viewer(&b, &op->who);
    s = store_bind_step(&b);
    if (s == SQLITE_ROW) {
        op->found = true;
        op->was = (job_status)job_status_parse((const char *)sqlite3_column_text(st, 0));
        s = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    if (s != SQLITE_DONE)
        return store_db_err(db, s, "find job to cancel", NULL, err);
    if (!op->found)
        return DP_OK;
    if (op->was == JOB_QUEUED) {
        int rc = exec1(db, CANCEL_QUEUED, bind_id_time, op, "cancel queued job", err);
        return rc != DP_OK ? rc
                           : add_status_event(db, op->id, op->now_ms, "cancelled",
                                              "cancelled before it started", err);
    }
    if (op->was == JOB_RUNNING)
        return exec1(db, CANCEL_RUNNING, bind_id_time, op, "request job cancel", err);
    return DP_OK;
}

int jobs_recover_apply(sqlite3 *db, void *arg, dp_err *err)
{
    static const char RUNNING[] = "SELECT id, resume FROM jobs WHERE status = 'running'";
    static const char SET[] =
        "UPDATE jobs SET status = :status, reason = :reason, updated_at_ms = :t, finished_at_ms "
        "= CASE WHEN :final = 1 THEN :t END WHERE id = :id";
    job_recover_op *op = arg;
    op->requeued = op->interrupted = 0;
    sqlite3_stmt *st = NULL;
    int s = sqlite3_prepare_v2(db, RUNNING, -1, &st, NULL);
    if (s != SQLITE_OK) {
        sqlite3_finalize(st);
        return store_db_err(db, s, "prepare job recovery", NULL, err);
    }
    int rc = DP_OK;
    while (rc == DP_OK && (s = sqlite3_step(st)) == SQLITE_ROW) {
        job_finish_op f = {sqlite3_column_int64(st, 0), JOB_QUEUED, NULL, op->now_ms};
        if (sqlite3_column_int64(st, 1) != 0) {
            f.reason = "the daemon stopped while it ran; it resumes from its last checkpoint";
            op->requeued++;
        } else {
            f.status = JOB_INTERRUPTED;
            f.reason = "the daemon stopped while it ran, and the job asked not to resume";
            op->interrupted++;
        }
        rc = exec1(db, SET, bind_finish, &f, "recover job", err);
        if (rc == DP_OK)
            rc = add_status_event(db, f.id, op->now_ms, job_status_name(f.status), f.reason, err);
    }
    sqlite3_finalize(st);
    if (rc == DP_OK && s != SQLITE_DONE)
        rc = store_db_err(db, s, "list running jobs", NULL, err);
    return rc;
}

/* A round's three statements take growing sets of its fields (the binder refuses a name the
 * statement does not have). */
static void bind_round_done(store_binder *b, const void *arg)
{
    const job_round_new *r = arg;
    store_bind_i64(b, ":job", r->job_id);
    store_bind_i64(b, ":round", r->round);
    store_bind_i64(b, ":t", r->now_ms);
}

static void bind_round_event(store_binder *b, const void *arg)
{
    bind_round_done(b, arg);
    store_bind_double(b, ":wall", ((const job_round_new *)arg)->wall_ms);
}

static void bind_round(store_binder *b, const void *arg)
{
    bind_round_event(b, arg);
    store_bind_text(b, ":m", ((const job_round_new *)arg)->metrics);
}

int jobs_round_write(sqlite3 *db, const job_round_new *r, dp_err *err)
{
    static const char ROUND[] = "INSERT INTO job_rounds (job_id, round, created_at_ms, wall_ms, "
                                "metrics) VALUES (:job, :round, :t, :wall, :m)";
    static const char EVENT[] =
        "INSERT INTO job_events (job_id, created_at_ms, type, data) VALUES (:job, :t, 'round', "
        "json_object('round', :round, 'wall_ms', :wall))";
    static const char DONE[] =
        "UPDATE jobs SET rounds_done = :round, updated_at_ms = :t WHERE id = :job";
    static const char CKPT[] =
        "INSERT INTO job_checkpoints (job_id, round, state) VALUES (:job, :round, :state) ON "
        "CONFLICT (job_id) DO UPDATE SET round = excluded.round, state = excluded.state";
    int rc = exec1(db, ROUND, bind_round, r, "insert job round", err);
    if (rc == DP_OK)
        rc = exec1(db, EVENT, bind_round_event, r, "insert round event", err);
    if (rc == DP_OK)
        rc = exec1(db, DONE, bind_round_done, r, "advance job", err);
    if (rc != DP_OK || r->state == NULL)
        return rc;
    sqlite3_stmt *st = NULL;
    int s = sqlite3_prepare_v2(db, CKPT, -1, &st, NULL);
    if (s == SQLITE_OK) {
        store_binder b = store_bind_begin(st);
        store_bind_i64(&b, ":job", r->job_id);
        store_bind_i64(&b, ":round", r->round);
        if (b.rc == SQLITE_OK)
            b.rc = sqlite3_bind_blob64(st, sqlite3_bind_parameter_index(st, ":state"), r->state,
                                       r->state_len, SQLITE_STATIC);
        s = store_bind_step(&b);
    }
    sqlite3_finalize(st);
    return s == SQLITE_DONE ? DP_OK : store_db_err(db, s, "write checkpoint", NULL, err);
}

/* ---- reads ---- */

void job_row_clear(job_row *r)
{
    if (r == NULL)
        return;
    dp_free(r->spec);
    dp_free(r->plan);
    memset(r, 0, sizeof *r);
}

static int read_row(sqlite3_stmt *st, job_row *r)
{
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    store_col_copy(st, 1, r->name, sizeof r->name);
    r->created_at_ms = sqlite3_column_int64(st, 2);
    r->started_at_ms = sqlite3_column_int64(st, 3);
    r->finished_at_ms = sqlite3_column_int64(st, 4);
    r->updated_at_ms = sqlite3_column_int64(st, 5);
    r->creator_token_id = sqlite3_column_int64(st, 6);
    store_col_copy(st, 7, r->algorithm, sizeof r->algorithm);
    r->status = (job_status)job_status_parse((const char *)sqlite3_column_text(st, 8));
    store_col_copy(st, 9, r->reason, sizeof r->reason);
    r->rounds_total = sqlite3_column_int64(st, 10);
    r->rounds_done = sqlite3_column_int64(st, 11);
    r->dataset_id = sqlite3_column_int64(st, 12);
    r->cancel_requested = sqlite3_column_int64(st, 13) != 0;
    r->resume = sqlite3_column_int64(st, 14) != 0;
    const unsigned char *spec = sqlite3_column_text(st, 15);
    const unsigned char *plan = sqlite3_column_text(st, 16);
    r->spec = dp_strdup(spec ? (const char *)spec : "{}");
    r->plan = dp_strdup(plan ? (const char *)plan : "{}");
    if (r->spec == NULL || r->plan == NULL) {
        job_row_clear(r);
        return -1;
    }
    return 0;
}

int jobs_get(store_conn *c, int64_t id, const job_viewer *who, job_row *out, bool *found,
             const char *req_id, dp_err *err)
{
    static const char GET[] =
        "SELECT " JOB_COLS " FROM jobs AS j WHERE j.id = :id AND " JOB_VISIBLE;
    memset(out, 0, sizeof *out);
    *found = false;
    sqlite3_stmt *st = store_conn_prepare(c, GET, err);
    if (st == NULL)
        return err->code;
    store_binder b = store_bind_begin(st);
    store_bind_i64(&b, ":id", id);
    store_bind_viewer(&b, who);
    int s = store_bind_step(&b);
    int rc = DP_OK;
    if (s == SQLITE_ROW) {
        if (read_row(st, out) != 0)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        else
            *found = true;
    } else if (s != SQLITE_DONE) {
        rc = store_err(c, s, "read job", req_id, err);
    }
    store_stmt_done(st);
    return rc;
}

typedef struct row_page {
    job_row *out;
    size_t n;
} row_page;

static int page_row(sqlite3_stmt *st, void *arg)
{
    row_page *p = arg;
    if (read_row(st, &p->out[p->n]) != 0)
        return -1;
    p->n++;
    return 0;
}

/* The outcome of store_bind_page as a dp code with err set. */
static int page_outcome(store_conn *c, int rc, int src, const char *what, const char *req_id,
                        dp_err *err)
{
    if (rc == DP_ENOMEM)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    if (rc != DP_OK)
        return store_err(c, src, what, req_id, err);
    return DP_OK;
}

int jobs_list(store_conn *c, const job_viewer *who, int status, int64_t after, size_t limit,
              job_row *out, size_t *n, bool *more, const char *req_id, dp_err *err)
{
    static const char LIST[] =
        "SELECT " JOB_COLS " FROM jobs AS j WHERE j.id > :after AND (:status IS NULL OR j.status "
        "= :status) AND " JOB_VISIBLE " ORDER BY j.id LIMIT :lim";
    *n = 0;
    *more = false;
    sqlite3_stmt *st = store_conn_prepare(c, LIST, err);
    if (st == NULL)
        return err->code;
    store_binder b = store_bind_begin(st);
    store_bind_i64(&b, ":after", after);
    store_bind_text(&b, ":status", status >= 0 ? job_status_name((job_status)status) : NULL);
    store_bind_i64(&b, ":lim", (int64_t)limit + 1);
    store_bind_viewer(&b, who);
    row_page pg = {out, 0};
    int src = SQLITE_OK;
    int rc = store_bind_page(&b, limit, page_row, &pg, more, &src);
    rc = page_outcome(c, rc, src, "list jobs", req_id, err);
    store_stmt_done(st);
    if (rc != DP_OK)
        for (size_t i = 0; i < pg.n; i++)
            job_row_clear(&out[i]);
    *n = rc == DP_OK ? pg.n : 0;
    return rc;
}

int jobs_binding_name(store_conn *c, int64_t id, int64_t silo_id, char *name, size_t cap,
                      bool *found, const char *req_id, dp_err *err)
{
    static const char SQL[] = "SELECT name FROM job_silos WHERE job_id = :id AND silo_id = :silo";
    *found = false;
    name[0] = '\0';
    sqlite3_stmt *st = store_conn_prepare(c, SQL, err);
    if (st == NULL)
        return err->code;
    store_binder b = store_bind_begin(st);
    store_bind_i64(&b, ":id", id);
    store_bind_i64(&b, ":silo", silo_id);
    int s = store_bind_step(&b);
    int rc = DP_OK;
    if (s == SQLITE_ROW) {
        store_col_copy(st, 0, name, cap);
        *found = true;
    } else if (s != SQLITE_DONE) {
        rc = store_err(c, s, "read job silo", req_id, err);
    }
    store_stmt_done(st);
    return rc;
}

/* A page of a job's rows after `after` (sql binds :id, :after, :lim). */
static int list_after(store_conn *c, const char *sql, int64_t id, int64_t after, size_t limit,
                      int (*row)(sqlite3_stmt *st, void *arg), void *arg, bool *more,
                      const char *what, const char *req_id, dp_err *err)
{
    *more = false;
    sqlite3_stmt *st = store_conn_prepare(c, sql, err);
    if (st == NULL)
        return err->code;
    store_binder b = store_bind_begin(st);
    store_bind_i64(&b, ":id", id);
    store_bind_i64(&b, ":after", after);
    store_bind_i64(&b, ":lim", (int64_t)limit + 1);
    int src = SQLITE_OK;
    int rc = store_bind_page(&b, limit, row, arg, more, &src);
    rc = page_outcome(c, rc, src, what, req_id, err);
    store_stmt_done(st);
    return rc;
}

typedef struct round_cb {
    int (*fn)(void *arg, int64_t round, double wall_ms, const char *metrics);
    void *arg;
} round_cb;

static int round_row(sqlite3_stmt *st, void *arg)
{
    round_cb *r = arg;
    return r->fn(r->arg, sqlite3_column_int64(st, 0), sqlite3_column_double(st, 1),
                 (const char *)sqlite3_column_text(st, 2));
}

int jobs_rounds_list(store_conn *c, int64_t id, int64_t after, size_t limit,
                     int (*fn)(void *arg, int64_t round, double wall_ms, const char *metrics),
                     void *arg, bool *more, const char *req_id, dp_err *err)
{
    static const char SQL[] = "SELECT round, wall_ms, metrics FROM job_rounds WHERE job_id = :id "
                              "AND round > :after ORDER BY round LIMIT :lim";
    return list_after(c, SQL, id, after, limit, round_row, &(round_cb){fn, arg}, more,
                      "list job rounds", req_id, err);
}

typedef struct event_cb {
    int (*fn)(void *arg, int64_t event_id, int64_t at_ms, const char *type, const char *data);
    void *arg;
} event_cb;

static int event_row(sqlite3_stmt *st, void *arg)
{
    event_cb *e = arg;
    return e->fn(e->arg, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                 (const char *)sqlite3_column_text(st, 2),
                 (const char *)sqlite3_column_text(st, 3));
}

int jobs_events_list(store_conn *c, int64_t id, int64_t after, size_t limit,
                     int (*fn)(void *arg, int64_t event_id, int64_t at_ms, const char *type,
                               const char *data),
                     void *arg, bool *more, const char *req_id, dp_err *err)
{
    static const char SQL[] = "SELECT id, created_at_ms, type, data FROM job_events WHERE job_id "
                              "= :id AND id > :after ORDER BY id LIMIT :lim";
    return list_after(c, SQL, id, after, limit, event_row, &(event_cb){fn, arg}, more,
                      "list job events", req_id, err);
}

int jobs_checkpoint_read(store_conn *c, int64_t id, uint8_t **buf, size_t *len, int64_t *round,
                         const char *req_id, dp_err *err)
{
    static const char SQL[] = "SELECT round, state FROM job_checkpoints WHERE job_id = :id";
    sqlite3 *db = store_conn_db(c);
    *buf = NULL;
    *len = 0;
    *round = 0;
    sqlite3_stmt *st = NULL;
    int s = sqlite3_prepare_v2(db, SQL, -1, &st, NULL);
    if (s == SQLITE_OK) {
        store_binder b = store_bind_begin(st);
        store_bind_i64(&b, ":id", id);
        s = store_bind_step(&b);
    }
    int rc = DP_OK;
    if (s == SQLITE_ROW) {
        *round = sqlite3_column_int64(st, 0);
        const void *p = sqlite3_column_blob(st, 1);
        size_t n = (size_t)sqlite3_column_bytes(st, 1);
        *buf = n > 0 ? dp_malloc(n) : NULL;
        if (n > 0 && *buf == NULL) {
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        } else if (n > 0) {
            memcpy(*buf, p, n);
            *len = n;
        }
    } else if (s != SQLITE_DONE) {
        rc = store_db_err(db, s, "read checkpoint", req_id, err);
    }
    sqlite3_finalize(st);
    return rc;
}

int jobs_dataset_in_use(store_conn *c, int64_t dataset_id, bool *in_use, const char *req_id,
                        dp_err *err)
{
    static const char SQL[] = "SELECT EXISTS (SELECT 1 FROM jobs WHERE dataset_id = :ds AND "
                              "status IN ('queued', 'running'))";
    *in_use = false;
    sqlite3_stmt *st = store_conn_prepare(c, SQL, err);
    if (st == NULL)
        return err->code;
    store_binder b = store_bind_begin(st);
    store_bind_i64(&b, ":ds", dataset_id);
    int s = store_bind_step(&b);
    int rc = DP_OK;
    if (s == SQLITE_ROW)
        *in_use = sqlite3_column_int64(st, 0) != 0;
    else
        rc = store_err(c, s, "check data set use", req_id, err);
    store_stmt_done(st);
    return rc;
}

int jobs_cancel_requested(store_conn *c, int64_t id, bool *requested, dp_err *err)
{
    static const char SQL[] = "SELECT cancel_requested FROM jobs WHERE id = :id";
    sqlite3 *db = store_conn_db(c);
    *requested = false;
    sqlite3_stmt *st = NULL;
    int s = sqlite3_prepare_v2(db, SQL, -1, &st, NULL);
    if (s == SQLITE_OK) {
        store_binder b = store_bind_begin(st);
        store_bind_i64(&b, ":id", id);
        s = store_bind_step(&b);
    }
    int rc = DP_OK;
    if (s == SQLITE_ROW)
        *requested = sqlite3_column_int64(st, 0) != 0;
    else if (s != SQLITE_DONE)
        rc = store_db_err(db, s, "read cancel flag", NULL, err);
    sqlite3_finalize(st);
    return rc;
}
