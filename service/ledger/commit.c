/*
 * ledger/commit.c: the ledger as a client of db/writer (the committer): the apply and done of a
 * ledger_op, the PLD thread and its hand-off, the idle sweep of expired claims, and the blocking
 * submit of the public write calls.
 * The design is in ledger/ledger.c; the shared types in ledger/internal.h.
 */
#include "service/ledger/internal.h"

/* ---- committer: the ledger as a client of db/writer ---- */

/* The apply of every ledger op (db/writer.h): on the writer thread, in the op's savepoint. */
static int op_apply(sqlite3 *db, void *arg, dp_err *err)
{
    (void)db; /* l->db, on which l->st are prepared */
    ledger_op *op = arg;
    ledger *l = op->l;
    op->gen = ++l->tree_gen;
    int rc = lg_apply_op(l, op, time_now_ms(), err);
    if (rc != DP_OK)
        lg_log_trees_forget(l, op->gen); /* its rows are rolled back */
    return rc;
}

static bool claims_overdue(ledger *l, int64_t now)
{
    sqlite3_stmt *st = l->st[ST_CLAIMS_OVERDUE];
    bool any = false;
    if (lg_b_i64(st, ":now", now) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        any = sqlite3_column_int(st, 0) != 0;
    lg_st_done(st);
    return any;
}

void lg_pld_flags_clear(ledger_op *op)
{
    op->need_pld = false;
    for (size_t i = 0; i < op->n_items; i++)
        op->items[i].need_pld = false;
}

/* For DP_ASSERT: true when l->mu is held (by anyone: trylock cannot tell which thread, so it only
 * catches the lock missing while no other thread holds it). */
bool lg_mu_held(ledger *l)
{
    if (pthread_mutex_trylock(&l->mu) != 0)
        return true;
    pthread_mutex_unlock(&l->mu);
    return false;
}

/* Appends op to the PLD thread's FIFO; l->mu held. */
static void fifo_append(ledger_op **head, ledger_op **tail, ledger_op *op)
{
    op->next = NULL;
    if (*tail != NULL)
        (*tail)->next = op;
    else
        *head = op;
    *tail = op;
}

/* Queues op again (it is owed an answer: accepted also while stopping). */
static int resubmit(ledger *l, ledger_op *op, dp_err *err)
{
    return db_writer_submit_again(l->w, &op->wop, err);
}

/* An op whose PLD figures are stale goes to the PLD thread, which computes them and queues the op
 * again; its waiter (or its wake-up) waits meanwhile, so no HTTP thread composes PLDs. While
 * stopping, the RDP bound decides alone instead (conservative) and the op is queued at once.
 * l->mu held. */
static void pld_handoff(ledger *l, ledger_op *op)
{
    DP_ASSERT(lg_mu_held(l));
    DP_ASSERT(!op->done); /* an answered op is never queued again (its waiter may have freed it) */
    if (l->stop) {
        for (size_t k = 0; k < op->n_items; k++)
            if (op->items[k].need_pld)
                op->items[k].pld_give_up = true;
        lg_pld_flags_clear(op);
        resubmit(l, op, NULL); /* on the committer thread (op_done): the writer still runs */
        return;
    }
    fifo_append(&l->pld_head, &l->pld_tail, op);
    l->pld_busy++;
    pthread_cond_signal(&l->cv_pld);
}

static void op_done(void *arg, int rc, const dp_err *err);

/* The PLD thread: computes the figures of the items that need them, on its own snapshot
 * connections, then hands the op back to the committer. After LEDGER_PLD_RETRIES computations for
 * one op (its snapshots kept going stale), or once stopping, the RDP bound decides alone. */
void *lg_pld_main(void *arg)
{
    ledger *l = arg;
    for (;;) {
        pthread_mutex_lock(&l->mu);
        while (!l->stop && l->pld_head == NULL)
            pthread_cond_wait(&l->cv_pld, &l->mu);
        ledger_op *op = l->pld_head;
        if (op == NULL) { /* stopping with nothing left */
            pthread_mutex_unlock(&l->mu);
            break;
        }
        l->pld_head = op->next;
        if (l->pld_head == NULL)
            l->pld_tail = NULL;
        op->next = NULL;
        bool stop = l->stop;
        pthread_mutex_unlock(&l->mu);
        for (size_t k = 0; k < op->n_items; k++) {
            op_item *it = &op->items[k];
            if (!it->need_pld)
                continue;
            dp_err e;
            dp_err_clear(&e);
            if (stop || op->pld_attempts >= LEDGER_PLD_RETRIES ||
                lg_pld_prepare(l, it, &e) != DP_OK)
                it->pld_give_up = true; /* the RDP bound decides alone: conservative */
        }
        op->pld_attempts++;
        lg_pld_flags_clear(op);
        pthread_mutex_lock(&l->mu);
        l->pld_busy--;
        pthread_mutex_unlock(&l->mu);
        dp_err e;
        dp_err_clear(&e);
        if (resubmit(l, op, &e) != DP_OK) /* only after the writer stopped: never in ledger_free */
            op_done(op, e.code, &e);
    }
    return NULL;
}

/* The done of every ledger op (db/writer.h): on the writer thread, after the group's COMMIT or its
 * failure. An op whose PLD figures were stale is not done: it goes to the PLD thread (PLD SILOS)
 * and comes back. Otherwise it is marked done under l->mu (its waiter may return and pop it as soon
 * as the lock is released) and an asynchronous op's wake-up is called after that, without l->mu. */
static void op_done(void *arg, int rc, const dp_err *err)
{
    ledger_op *op = arg;
    ledger *l = op->l;
    if (rc != DP_OK)
        lg_log_trees_forget(l, op->gen); /* applied, but rolled back with its savepoint or group */
    pthread_mutex_lock(&l->mu);
    op->rc = rc;
    dp_err_clear(&op->err);
    if (rc != DP_OK)
        op->err = *err;
    if (op->need_pld) { /* not done: PLD figures first (PLD SILOS), then again */
        pld_handoff(l, op);
        pthread_mutex_unlock(&l->mu);
        return;
    }
    void (*wake)(void *) = op->wake;
    void *wake_arg = op->wake_arg;
    DP_ASSERT(!op->done); /* answered exactly once */
    op->done = true;
    pthread_cond_signal(&op->cv); /* op may vanish once the lock is released */
    pthread_mutex_unlock(&l->mu);
    if (wake != NULL) /* e.g. http/server.c resumes a suspended connection */
        wake(wake_arg);
}

static void sweep_done(void *arg, int rc, const dp_err *err)
{
    (void)err;
    ledger_op *op = arg;
    if (rc != DP_OK)
        lg_log_trees_forget(op->l, op->gen);
    op->l->sweep_queued = false;
}

/* The writer's idle hook (every LEDGER_SWEEP_MS without an op): marks overdue claims expired. */
void lg_idle_sweep(sqlite3 *db, void *arg)
{
    (void)db;
    ledger *l = arg;
    if (l->sweep_queued || !claims_overdue(l, time_now_ms()))
        return;
    l->sweep = (ledger_op){.kind = OP_SWEEP, .l = l};
    l->sweep.wop = (db_write_op){.apply = op_apply, .done = sweep_done, .arg = &l->sweep};
    l->sweep_queued = true;
    if (db_writer_submit(l->w, &l->sweep.wop, NULL) != DP_OK) /* closing */
        l->sweep_queued = false;
}

/* Queues op (its cv initialised, done false). Fails with DP_EBUSY once the ledger is stopping. */
int lg_enqueue(ledger *l, ledger_op *op)
{
    op->l = l;
    op->wop = (db_write_op){.apply = op_apply, .done = op_done, .arg = op};
    if (db_writer_submit(l->w, &op->wop, NULL) != DP_OK)
        return dp_err_set(&op->err, DP_EBUSY, NULL, "the ledger is shutting down");
    return DP_OK;
}

int lg_op_init(ledger_op *op)
{
    op->done = false;
    op->next = NULL;
    op->rc = DP_OK;
    dp_err_clear(&op->err);
    if (pthread_cond_init(&op->cv, NULL) != 0)
        return dp_err_set(&op->err, DP_ENOMEM, NULL, "out of resources");
    return DP_OK;
}

/* Waits until the committer has set op->done. */
void lg_op_wait(ledger *l, ledger_op *op)
{
    pthread_mutex_lock(&l->mu);
    while (!op->done)
        pthread_cond_wait(&op->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
}

/* Queues op and waits until the committer has committed (or refused) it. */
int lg_submit(ledger *l, ledger_op *op)
{
    op->wake = NULL;
    op->wake_arg = NULL;
    if (lg_op_init(op) != DP_OK)
        return op->rc = op->err.code;
    if (lg_enqueue(l, op) != DP_OK) {
        pthread_cond_destroy(&op->cv);
        return op->rc = op->err.code;
    }
    lg_op_wait(l, op);
    pthread_cond_destroy(&op->cv);
    return op->rc;
}

int lg_finish(ledger_op *op, dp_err *err)
{
    if (op->rc != DP_OK) {
        if (err != NULL && err->code == DP_OK)
            *err = op->err;
        if (op->err.code == DP_OK) /* defensive: never report failure without a message */
            return dp_err_set(err, op->rc, NULL, "internal ledger error");
    }
    return op->rc;
}
