/*
 * db/writer.c: the group-committing writer thread and the background checkpointer. Contract and
 * design in db/writer.h; this comment covers the implementation.
 *
 * The queue is a singly linked FIFO of the clients' own db_write_ops, guarded by mu (as redis
 * bio.c); mu is never held across SQLite or a client callback. The writer thread
 * (writer_main) detaches up to DB_WRITER_MAX_GROUP ops, runs them in one transaction (run_group),
 * and then calls each op's done without mu: a done may submit again, which takes mu. The thread
 * stays until stopping is set and the queue is empty, so an op submitted again by a done while
 * draining still runs. The statements BEGIN/COMMIT/ROLLBACK/SAVEPOINT/RELEASE/ROLLBACK TO are
 * prepared once on the writer's connection.
 *
 * LOCKS. mu guards head, tail, n_queued, closed, stopping, exited, joined, ckpt_wanted and the idle
 * hook; it is never held across SQLite or a callback. The writer thread sets exited under mu when
 * it leaves its loop with an empty queue, so an operation is either queued before that (and runs)
 * or refused: none is left in the queue unanswered.
 */
#include "service/db/writer.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/dp_alloc.h"
#include "common/dp_assert.h"
#include "common/dp_log.h"
#include "service/db/store.h"

enum {
    WST_BEGIN = 0,
    WST_COMMIT,
    WST_ROLLBACK,
    WST_SAVEPOINT,
    WST_RELEASE,
    WST_ROLLBACK_TO,
    WST_N
};

static const char *const WSQL[WST_N] = {
    [WST_BEGIN] = "BEGIN IMMEDIATE",       [WST_COMMIT] = "COMMIT",
    [WST_ROLLBACK] = "ROLLBACK",           [WST_SAVEPOINT] = "SAVEPOINT db_write_op",
    [WST_RELEASE] = "RELEASE db_write_op", [WST_ROLLBACK_TO] = "ROLLBACK TO db_write_op",
};

struct db_writer {
    sqlite3 *db;              /* the write connection: writer thread only (after open) */
    sqlite3_stmt *st[WST_N];  /* prepared on db; writer thread only */
    sqlite3 *ck_db;           /* the checkpointer's connection: checkpointer thread only */
    pthread_mutex_t mu;       /* see LOCKS */
    pthread_cond_t cv_work;   /* signalled when an op is queued or stopping is set */
    pthread_cond_t cv_ckpt;   /* signalled when a checkpoint is wanted or stopping is set */
    db_write_op *head, *tail; /* FIFO, guarded by mu */
    size_t n_queued;          /* ops in the FIFO, guarded by mu */
    size_t last_group;        /* size of the previous group; writer thread only */
    bool closed;              /* db_writer_submit refused; guarded by mu */
    bool stopping;            /* drain and exit; guarded by mu */
    bool exited;              /* the writer thread has left its loop; guarded by mu */
    bool ckpt_wanted;         /* guarded by mu */
    int idle_ms;              /* idle hook period (0 = none); guarded by mu */
    void (*idle_fn)(sqlite3 *db, void *arg);
    void *idle_arg;
    pthread_t thread, ck_thread;
    bool thread_started, ck_started, joined;
    atomic_ullong n_groups; /* group commits so far (statistics) */
    atomic_ullong n_ops;    /* ops they carried */
    atomic_ullong n_ckpt;   /* background checkpoints run */
};

/* SQLite failure on the write connection: log the detail, give the client a generic error. */
static int write_fail(db_writer *w, int rc, const char *what, dp_err *err)
{
    dp_log(DP_LOG_ERROR, NULL, "writer: %s: %s (%d)", what, sqlite3_errmsg(w->db), rc);
    int code = (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED ? DP_EBUSY
               : (rc & 0xff) == SQLITE_NOMEM                              ? DP_ENOMEM
                                                                          : DP_EINTERNAL;
    return dp_err_set(err, code, NULL,
                      code == DP_EBUSY ? "the database is busy; retry later"
                                       : "internal database error");
}

static int exec_st(db_writer *w, int which, dp_err *err)
{
    int rc = sqlite3_step(w->st[which]);
    sqlite3_reset(w->st[which]);
    return rc == SQLITE_DONE ? DP_OK : write_fail(w, rc, WSQL[which], err);
}

/* Runs ops[0..n-1] in one transaction; sets each op's rc and err. */
static void run_group(db_writer *w, db_write_op **ops, size_t n)
{
    DP_ASSERT(n >= 1 && n <= DB_WRITER_MAX_GROUP); /* a group is at most DB_WRITER_MAX_GROUP ops */
    dp_err gerr;
    dp_err_clear(&gerr);
    if (exec_st(w, WST_BEGIN, &gerr) != DP_OK) {
        for (size_t i = 0; i < n; i++) {
            ops[i]->rc = gerr.code;
            ops[i]->err = gerr;
        }
        return;
    }
    bool txn_lost = false;
    for (size_t i = 0; i < n; i++) {
        db_write_op *op = ops[i];
        dp_err_clear(&op->err);
        dp_err serr;
        dp_err_clear(&serr);
        if (txn_lost || exec_st(w, WST_SAVEPOINT, &serr) != DP_OK) {
            op->rc = dp_err_set(&op->err, DP_EINTERNAL, NULL, "internal database error");
            continue;
        }
        op->rc = op->apply(w->db, op->arg, &op->err);
        if (op->rc != DP_OK) {
            if (op->err.code == DP_OK) /* never a failure without a message */
                dp_err_set(&op->err, op->rc, NULL, "internal database error");
            if (sqlite3_get_autocommit(w->db)) { /* SQLite rolled the whole transaction back */
                txn_lost = true;
                continue;
            }
            dp_err_clear(&serr);
            if (exec_st(w, WST_ROLLBACK_TO, &serr) != DP_OK)
                txn_lost = true;
        }
        dp_err_clear(&serr);
        if (!txn_lost && exec_st(w, WST_RELEASE, &serr) != DP_OK)
            txn_lost = true;
    }
    if (!txn_lost) {
        if (exec_st(w, WST_COMMIT, &gerr) == DP_OK) {
            atomic_fetch_add(&w->n_groups, 1);
            atomic_fetch_add(&w->n_ops, n);
            return;
        }
    } else {
        dp_err_set(&gerr, DP_EINTERNAL, NULL, "internal database error");
    }
    if (!sqlite3_get_autocommit(w->db)) {
        int rrc = sqlite3_step(w->st[WST_ROLLBACK]);
        sqlite3_reset(w->st[WST_ROLLBACK]);
        if (rrc != SQLITE_DONE)
            dp_log(DP_LOG_ERROR, NULL, "writer: ROLLBACK failed (%d)", rrc);
    }
    /* Nothing of this group was recorded: every op fails, including those that had succeeded. */
    for (size_t i = 0; i < n; i++)
        if (ops[i]->rc == DP_OK || txn_lost) {
            dp_err_clear(&ops[i]->err);
            ops[i]->rc = gerr.code;
            ops[i]->err = gerr;
        }
}

/* WAL hook of the writer's connection: runs on the writer thread after each COMMIT, without mu
 * held. It only flags the checkpointer. */
static int wal_hook(void *arg, sqlite3 *db, const char *name, int n_frames)
{
    (void)db;
    (void)name;
    db_writer *w = arg;
    if (n_frames >= DB_WRITER_CKPT_FRAMES) {
        pthread_mutex_lock(&w->mu);
        if (!w->ckpt_wanted) {
            w->ckpt_wanted = true;
            pthread_cond_signal(&w->cv_ckpt);
        }
        pthread_mutex_unlock(&w->mu);
    }
    return SQLITE_OK;
}

static void *checkpointer_main(void *arg)
{
    db_writer *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        while (!w->stopping && !w->ckpt_wanted)
            pthread_cond_wait(&w->cv_ckpt, &w->mu);
        bool stop = w->stopping;
        w->ckpt_wanted = false;
        pthread_mutex_unlock(&w->mu);
        if (stop)
            break;
        int n_log = 0, n_ckpt = 0;
        int rc =
            sqlite3_wal_checkpoint_v2(w->ck_db, NULL, SQLITE_CHECKPOINT_PASSIVE, &n_log, &n_ckpt);
        if (rc != SQLITE_OK && (rc & 0xff) != SQLITE_BUSY)
            dp_log(DP_LOG_WARN, NULL, "writer: background checkpoint: %s (%d)",
                   sqlite3_errmsg(w->ck_db), rc);
        atomic_fetch_add(&w->n_ckpt, 1);
    }
    return NULL;
}

static struct timespec deadline_after_us(long us)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += us / 1000000;
    t.tv_nsec += (us % 1000000) * 1000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

static void *writer_main(void *arg)
{
    db_writer *w = arg;
    db_write_op **batch = dp_calloc(DB_WRITER_MAX_GROUP, sizeof *batch);
    db_write_op *single[1];
    size_t cap = batch != NULL ? DB_WRITER_MAX_GROUP : 1;
    db_write_op **ops = batch != NULL ? batch : single;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        bool idle = false;
        while (w->head == NULL && !w->stopping) {
            if (w->idle_fn == NULL) {
                pthread_cond_wait(&w->cv_work, &w->mu);
                continue;
            }
            struct timespec until = deadline_after_us((long)w->idle_ms * 1000L);
            if (pthread_cond_timedwait(&w->cv_work, &w->mu, &until) == ETIMEDOUT &&
                w->head == NULL && !w->stopping) {
                idle = true;
                break;
            }
        }
        if (idle) {
            void (*fn)(sqlite3 *, void *) = w->idle_fn;
            void *fn_arg = w->idle_arg;
            pthread_mutex_unlock(&w->mu);
            fn(w->db, fn_arg);
            continue;
        }
        if (w->head == NULL) { /* stopping, and nothing left */
            w->exited = true;  /* from now on nothing queued would run: refuse it */
            pthread_mutex_unlock(&w->mu);
            break;
        }
        if (!w->stopping && w->n_queued < w->last_group / 2) {
            struct timespec until = deadline_after_us(DB_WRITER_GATHER_US);
            while (!w->stopping && w->n_queued < w->last_group &&
                   pthread_cond_timedwait(&w->cv_work, &w->mu, &until) == 0)
                ;
        }
        size_t n = 0;
        while (w->head != NULL && n < cap) {
            db_write_op *op = w->head;
            w->head = op->next;
            if (w->head == NULL)
                w->tail = NULL;
            op->next = NULL;
            w->n_queued--;
            ops[n++] = op;
        }
        pthread_mutex_unlock(&w->mu);
        w->last_group = n;
        run_group(w, ops, n);
        /* After the COMMIT (or the group's failure): each done once; op may vanish after it. */
        for (size_t i = 0; i < n; i++) {
            db_write_op *op = ops[i];
            op->done(op->arg, op->rc, &op->err);
        }
    }
    dp_free(batch);
    return NULL;
}

static int push(db_writer *w, db_write_op *op, bool again, dp_err *err)
{
    if (op == NULL || op->apply == NULL || op->done == NULL)
        return dp_err_set(err, DP_EINTERNAL, NULL, "internal error: incomplete write operation");
    pthread_mutex_lock(&w->mu);
    if (again ? w->exited : w->closed) {
        pthread_mutex_unlock(&w->mu);
        if (again)
            dp_log(DP_LOG_ERROR, NULL, "writer: an operation was submitted after the stop");
        return dp_err_set(err, DP_EBUSY, NULL, "the database writer is shutting down");
    }
    op->next = NULL;
    op->rc = DP_OK;
    dp_err_clear(&op->err);
    if (w->tail != NULL)
        w->tail->next = op;
    else
        w->head = op;
    w->tail = op;
    w->n_queued++;
    pthread_cond_signal(&w->cv_work);
    pthread_mutex_unlock(&w->mu);
    return DP_OK;
}

int db_writer_submit(db_writer *w, db_write_op *op, dp_err *err)
{
    return push(w, op, false, err);
}

int db_writer_submit_again(db_writer *w, db_write_op *op, dp_err *err)
{
    return push(w, op, true, err);
}

void db_writer_set_idle(db_writer *w, int idle_ms, void (*fn)(sqlite3 *db, void *arg), void *arg)
{
    pthread_mutex_lock(&w->mu);
    w->idle_ms = idle_ms > 0 ? idle_ms : 1000;
    w->idle_fn = fn;
    w->idle_arg = arg;
    pthread_cond_signal(&w->cv_work); /* the thread re-reads the hook */
    pthread_mutex_unlock(&w->mu);
}

sqlite3 *db_writer_db(db_writer *w)
{
    return w->db;
}

void db_writer_close(db_writer *w)
{
    pthread_mutex_lock(&w->mu);
    w->closed = true;
    pthread_mutex_unlock(&w->mu);
}

void db_writer_stop(db_writer *w)
{
    pthread_mutex_lock(&w->mu);
    w->closed = true;
    w->stopping = true;
    bool joined = w->joined;
    pthread_cond_signal(&w->cv_work);
    pthread_cond_signal(&w->cv_ckpt);
    pthread_mutex_unlock(&w->mu);
    if (joined)
        return;
    if (w->thread_started) /* runs every queued op first */
        pthread_join(w->thread, NULL);
    if (w->ck_started)
        pthread_join(w->ck_thread, NULL);
    pthread_mutex_lock(&w->mu);
    w->joined = true;
    pthread_mutex_unlock(&w->mu);
}

void db_writer_free(db_writer *w)
{
    if (w == NULL)
        return;
    db_writer_stop(w);
    for (int i = 0; i < WST_N; i++)
        sqlite3_finalize(w->st[i]);
    if (w->db != NULL)
        sqlite3_wal_hook(w->db, NULL, NULL);
    sqlite3_close(w->db);
    sqlite3_close(w->ck_db);
    pthread_cond_destroy(&w->cv_ckpt);
    pthread_cond_destroy(&w->cv_work);
    pthread_mutex_destroy(&w->mu);
    dp_free(w);
}

db_writer *db_writer_open(const char *path, dp_err *err)
{
    db_writer *w = dp_calloc(1, sizeof *w);
    if (w == NULL) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    if (pthread_mutex_init(&w->mu, NULL) != 0) {
        dp_free(w);
        dp_err_set(err, DP_ENOMEM, NULL, "out of resources");
        return NULL;
    }
    if (pthread_cond_init(&w->cv_work, NULL) != 0) {
        pthread_mutex_destroy(&w->mu);
        dp_free(w);
        dp_err_set(err, DP_ENOMEM, NULL, "out of resources");
        return NULL;
    }
    if (pthread_cond_init(&w->cv_ckpt, NULL) != 0) {
        pthread_cond_destroy(&w->cv_work);
        pthread_mutex_destroy(&w->mu);
        dp_free(w);
        dp_err_set(err, DP_ENOMEM, NULL, "out of resources");
        return NULL;
    }
    atomic_init(&w->n_groups, 0);
    atomic_init(&w->n_ops, 0);
    atomic_init(&w->n_ckpt, 0);
    /* From here db_writer_free undoes whatever was done. */
    if ((w->db = store_db_open(path, STORE_DB_WRITE, err)) == NULL ||
        (w->ck_db = store_db_open(path, STORE_DB_WRITE, err)) == NULL)
        goto fail;
    /* temp_store = MEMORY keeps the statement journal of each op's savepoint (the prior content
     * of every page the op changes, for a ROLLBACK TO) in memory: past 64 KiB SQLite spilled it to
     * a temporary file, one pwrite per page changed, which one round of a training job (a charge
     * per silo: a leaf of each per-silo index of charges and the silo's row, hundreds of pages)
     * always exceeded. It does not change what a COMMIT makes durable. (A larger page cache was
     * tried and measured slower: its growth costs page faults that the rereads it saves do not.)
     * It also keeps sorts in memory, where SQLite's sorter makes one allocation per row (on disk
     * it fills one growing buffer): statements on this connection do not ORDER BY or GROUP BY a
     * set of rows that grows without bound (the ledger sums a silo's active claims and rebuilds
     * its log tree without them: service/ledger/admit.c lg_held_load_st, lg_log_tree_build). */
    if (sqlite3_exec(w->db, "PRAGMA temp_store = MEMORY", NULL, NULL, NULL) != SQLITE_OK)
        dp_log(DP_LOG_WARN, NULL, "writer: temp_store: %s", sqlite3_errmsg(w->db));
    for (int i = 0; i < WST_N; i++) {
        int rc = sqlite3_prepare_v3(w->db, WSQL[i], -1, SQLITE_PREPARE_PERSISTENT, &w->st[i], NULL);
        if (rc != SQLITE_OK) {
            write_fail(w, rc, WSQL[i], err);
            goto fail;
        }
    }
    sqlite3_wal_hook(w->db, wal_hook, w); /* replaces auto-checkpointing on the write connection */
    if (pthread_create(&w->ck_thread, NULL, checkpointer_main, w) != 0) {
        dp_err_set(err, DP_ENOMEM, NULL, "cannot start the checkpointer");
        goto fail;
    }
    w->ck_started = true;
    if (pthread_create(&w->thread, NULL, writer_main, w) != 0) {
        dp_err_set(err, DP_ENOMEM, NULL, "cannot start the database writer");
        goto fail;
    }
    w->thread_started = true;
    return w;
fail:
    db_writer_free(w);
    return NULL;
}

/* ---- one function, committed ----
 *
 * A db_write_op has one arg for apply and done; these helpers need theirs for done (the waiter, the
 * call), so the op's apply is a trampoline that calls the client's apply with the client's arg. */

/* db_writer_run's waiter, on the caller's stack. */
typedef struct run_wait {
    db_write_op op;          /* arg = this waiter */
    db_write_apply_fn apply; /* the client's */
    void *arg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done; /* guarded by mu */
    int rc;    /* the outcome; written before done, under mu */
    dp_err err;
} run_wait;

static int run_apply(sqlite3 *db, void *arg, dp_err *err)
{
    run_wait *r = arg;
    return r->apply(db, r->arg, err);
}

/* Writer thread, after the COMMIT: records the outcome and wakes the waiter. The signal is sent
 * with mu held, so the waiter (which needs mu to see done) cannot return and pop its frame before
 * this function has stopped touching it. */
static void run_done(void *arg, int rc, const dp_err *err)
{
    run_wait *r = arg;
    pthread_mutex_lock(&r->mu);
    r->rc = rc;
    if (rc != DP_OK && err != NULL)
        r->err = *err;
    r->done = true;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static bool on_writer_thread(const db_writer *w)
{
    return w->thread_started && pthread_equal(pthread_self(), w->thread);
}

int db_writer_run(db_writer *w, db_write_apply_fn apply, void *arg, dp_err *err)
{
    if (apply == NULL)
        return dp_err_set(err, DP_EINTERNAL, NULL, "internal error: incomplete write operation");
    if (on_writer_thread(w)) {
        dp_log(DP_LOG_ERROR, NULL, "writer: db_writer_run called on the writer thread");
        return dp_err_set(err, DP_EINTERNAL, NULL, "internal error: a write waited for itself");
    }
    run_wait r = {.op = {.apply = run_apply, .done = run_done}, .apply = apply, .arg = arg};
    r.op.arg = &r;
    dp_err_clear(&r.err);
    if (pthread_mutex_init(&r.mu, NULL) != 0)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of resources");
    if (pthread_cond_init(&r.cv, NULL) != 0) {
        pthread_mutex_destroy(&r.mu);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of resources");
    }
    int rc = db_writer_submit(w, &r.op, err);
    if (rc == DP_OK) {
        pthread_mutex_lock(&r.mu);
        while (!r.done)
            pthread_cond_wait(&r.cv, &r.mu);
        rc = r.rc;
        pthread_mutex_unlock(&r.mu);
        if (rc != DP_OK) {
            if (r.err.code == DP_OK) /* never a failure without a message */
                dp_err_set(&r.err, rc, NULL, "internal database error");
            dp_err_set(err, r.err.code, r.err.field[0] ? r.err.field : NULL, "%s", r.err.msg);
        }
    }
    pthread_cond_destroy(&r.cv);
    pthread_mutex_destroy(&r.mu);
    return rc;
}

static int call_apply(sqlite3 *db, void *arg, dp_err *err)
{
    db_writer_call *c = arg;
    return c->apply(db, c->arg, err);
}

/* Writer thread, after the COMMIT: records the outcome, publishes it (release), then wakes the
 * client. After wake the call may be freed at any moment: nothing touches it past that call. */
static void call_done(void *arg, int rc, const dp_err *err)
{
    db_writer_call *c = arg;
    void (*wake)(void *) = c->wake;
    void *wake_arg = c->wake_arg;
    c->rc = rc;
    dp_err_clear(&c->err);
    if (rc != DP_OK) {
        if (err != NULL)
            c->err = *err;
        if (c->err.code == DP_OK)
            dp_err_set(&c->err, rc, NULL, "internal database error");
    }
    atomic_store_explicit(&c->finished, true, memory_order_release);
    wake(wake_arg);
}

int db_writer_start(db_writer *w, db_writer_call *call, db_write_apply_fn apply, void *arg,
                    void (*wake)(void *wake_arg), void *wake_arg, dp_err *err)
{
    if (call == NULL || apply == NULL || wake == NULL)
        return dp_err_set(err, DP_EINTERNAL, NULL, "internal error: incomplete write operation");
    call->op = (db_write_op){.apply = call_apply, .done = call_done, .arg = call};
    call->apply = apply;
    call->arg = arg;
    call->wake = wake;
    call->wake_arg = wake_arg;
    call->rc = DP_OK;
    dp_err_clear(&call->err);
    atomic_init(&call->finished, false);
    return db_writer_submit(w, &call->op, err); /* from DP_OK on, wake may come at any time */
}

int db_writer_call_result(db_writer_call *call, dp_err *err)
{
    if (!atomic_load_explicit(&call->finished, memory_order_acquire)) {
        dp_log(DP_LOG_ERROR, NULL, "writer: a call's result was read before its wake-up");
        return dp_err_set(err, DP_EINTERNAL, NULL, "internal error: the write has not finished");
    }
    if (call->rc == DP_OK)
        return DP_OK;
    dp_err_set(err, call->err.code, call->err.field[0] ? call->err.field : NULL, "%s",
               call->err.msg);
    return call->rc;
}

int db_writer_run_conn(store_conn *c, db_write_apply_fn apply, void *arg, dp_err *err)
{
    if (c == NULL || apply == NULL)
        return dp_err_set(err, DP_EINTERNAL, NULL, "internal error: no connection to write on");
    int rc = store_begin(c, err);
    if (rc != DP_OK)
        return rc;
    rc = apply(store_conn_db(c), arg, err);
    if (rc != DP_OK) {
        if (err != NULL && err->code == DP_OK)
            dp_err_set(err, rc, NULL, "internal database error");
        store_rollback(c);
        return rc;
    }
    return store_commit(c, err); /* rolls back itself on failure */
}

void db_writer_stats(const db_writer *w, uint64_t *groups, uint64_t *ops)
{
    *groups = atomic_load(&((db_writer *)w)->n_groups);
    *ops = atomic_load(&((db_writer *)w)->n_ops);
}

uint64_t db_writer_checkpoints(const db_writer *w)
{
    return atomic_load(&((db_writer *)w)->n_ckpt);
}
