/*
 * db/writer: the one writer of the database. A thread with its own connection that runs the
 * operations of every client (the ledger, with the estimator runs it stores; tuning draws; job
 * state and per-round metrics next) in group commits, and a background checkpointer. In WAL mode
 * SQLite has one writer at a time: two threads that each BEGIN IMMEDIATE on their own would wait
 * out each other's transactions under the busy timeout and pay one fsync each; through this writer
 * they share a transaction and its fsync.
 *
 * OPERATIONS. A client fills a db_write_op it owns (on its stack or in its own heap struct: the
 * writer never allocates per op) with apply, done and arg, and submits it:
 *   - apply(db, arg, err) runs on the writer thread, on the writer's connection, inside a SAVEPOINT
 *     of its own within the group's BEGIN IMMEDIATE transaction. It returns DP_OK, or an error code
 *     with err set, and then everything it wrote is rolled back (ROLLBACK TO the savepoint) while
 *     the other operations of the group go on. It must be quick and may only use db (prepare, step,
 *     finalize, or statements it prepared on db_writer_db beforehand): no locks held across it by
 *     other threads, no I/O, no blocking, and no submit of its own.
 *   - done(arg, rc, err) is called exactly once, on the writer thread, after the group's COMMIT
 *     (rc DP_OK: committed, durable with synchronous=FULL) or after the group failed (rc and err
 * say why: every operation of a group whose COMMIT failed fails, including those whose apply had
 *     succeeded; nothing of it was recorded). So nothing is acknowledged before it is durable, and
 *     an acknowledged write survives a crash. err is valid only during the call. done must be quick
 *     (signal a waiter, resume a connection); it may submit again with db_writer_submit_again (an
 *     operation that must run once more, e.g. a ledger charge whose PLD figures were stale). After
 *     done returns the writer never touches the db_write_op: done may free it (once it has read
 *     err), and a waiter may return and pop the frame that held it.
 *
 * GROUPS. The thread detaches every queued operation (at most DB_WRITER_MAX_GROUP) and runs
 *     BEGIN IMMEDIATE
 *     for each op: SAVEPOINT; apply; on success RELEASE, else ROLLBACK TO and RELEASE
 *     COMMIT
 * then calls every done. Waiters of a group are woken together and submit again almost together;
 * a thread that started the next group on the first arrival would split them into ever smaller
 * groups. So when fewer operations are queued than half the previous group, it waits up to
 * DB_WRITER_GATHER_US for the queue to reach the previous group's size (the group-commit delay of
 * PostgreSQL's commit_delay). A lone client never waits: its previous group had one op.
 *
 * COMPOSITE OPERATIONS. Writes of several clients that must commit or fail together (a training
 * round's charge and its metrics) are ONE operation: its apply calls each part in turn on db,
 * inside the one savepoint, and fails as a whole when a part fails. The ledger offers its side of
 * this as ledger_charge_batch_with (ledger/ledger.h): the charge's operation runs the caller's
 * ledger_write_fn on the same db after every item was admitted, in the charge's savepoint, so the
 * round's metrics row commits with the charge or not at all. The ledger's operation is the one that
 * is submitted (not a wrapper of the caller's), because a PLD silo's charge may need a second run
 * (its done hands it to the ledger's PLD thread, which submits it again), which only the ledger
 * knows how to do; the caller's write must therefore be idempotent across runs (each run starts
 * from a rolled-back savepoint, so it is, if it only writes through db). A client that has no
 * ledger part (a tuning draw, job state) submits operations of its own to the same writer
 * (ledger_writer, handed to handlers as app->writer), most simply through the helpers below.
 *
 * CHECKPOINTS. With the default auto-checkpoint, every ~1000 WAL pages one COMMIT would also copy
 * the WAL into the database and fsync it, stalling the whole group (hundreds of ms). Instead a WAL
 * hook on the writer's connection (which replaces auto-checkpointing on it) wakes a checkpointer
 * thread with its own connection once the WAL holds DB_WRITER_CKPT_FRAMES frames; it runs PASSIVE
 * checkpoints, which never block the writer (SQLite WAL docs, "Checkpointing"). Durability is
 * unchanged: a transaction is durable once its WAL frames are synced, checkpointed or not.
 *
 * IDLE. A client may ask to be called when the writer has had nothing to do for idle_ms
 * (db_writer_set_idle): the ledger marks overdue claims expired there (by submitting an op).
 *
 * STOPPING. db_writer_close refuses new operations (DP_EBUSY); db_writer_submit_again still
 * accepts operations owed an answer (resubmitted by a done, or by a client thread that took one
 * over, before db_writer_stop). db_writer_stop runs every queued operation (also those submitted
 * again while it drains), then joins the threads; the connection stays open so that clients can
 * finalize their statements; db_writer_free closes it.
 *
 * ONE FUNCTION, COMMITTED. Most clients write one thing and want to know when it is on disk; they
 * need not build a db_write_op and a done of their own:
 *   - db_writer_run(w, apply, arg, err) submits apply and waits on the calling thread (a mutex and
 *     a condition variable on its stack) until the group's COMMIT: for threads that may block (the
 *     compute pool, tests). Never from the writer thread itself (inside an apply, done or idle
 *     hook): it would wait for itself, so it refuses (DP_EINTERNAL, logged).
 *   - db_writer_start(w, call, apply, arg, wake, wake_arg, err) submits and returns at once; wake
 *     is called exactly once, on the writer thread, after the COMMIT (or the failure), and then
 *     db_writer_call_result tells how it went: for HTTP handlers, whose MHD thread must not wait
 *     for a group commit (http/server.h, PENDING: wake is the dispatcher's resume).
 * Without a writer (a unit test that calls one handler without the ledger's threads; the daemon
 * always has one) db_writer_run_conn runs the same apply on a pooled connection in its own BEGIN
 * IMMEDIATE transaction.
 *
 * Connections come from store_db_open (db/store.h): one set-up for every connection of dpsilod.
 * Thread-safety: submit, submit_again, run, start, close and stats from any thread (run: any but
 * the writer's); open, stop and free from one thread; db_writer_db only before the first submit (to
 * prepare statements) or inside apply.
 */
#ifndef DP_SERVICE_DB_WRITER_H
#define DP_SERVICE_DB_WRITER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "common/dp_err.h"
#include "service/db/store.h"

/* Operations in one group commit. */
#define DB_WRITER_MAX_GROUP 1024
/* Longest wait (microseconds) for a group to fill up to the previous group's size. */
#define DB_WRITER_GATHER_US 500
/* WAL frames that trigger a background PASSIVE checkpoint. */
#define DB_WRITER_CKPT_FRAMES 1000

typedef struct db_writer db_writer;

typedef int (*db_write_apply_fn)(sqlite3 *db, void *arg, dp_err *err);
typedef void (*db_write_done_fn)(void *arg, int rc, const dp_err *err);

/* An operation: the client sets apply, done and arg; the rest belongs to the writer from submit
 * until done is called. */
typedef struct db_write_op {
    db_write_apply_fn apply;
    db_write_done_fn done;
    void *arg;
    /* the writer's */
    struct db_write_op *next; /* queue link, guarded by the writer's mutex */
    int rc;
    dp_err err;
} db_write_op;

/* Opens the writer's connection and the checkpointer's on path (an existing database, migrations
 * applied) and starts both threads. Owned by the caller; NULL with err on failure. */
db_writer *db_writer_open(const char *path, dp_err *err);

/* The writer's connection, to prepare statements before the first submit and to use inside apply.
 * Borrowed until db_writer_free. */
sqlite3 *db_writer_db(db_writer *w);

/* Queues op. DP_OK: done will be called exactly once (possibly before this returns). DP_EBUSY with
 * err set once the writer is closed: done will never be called. */
int db_writer_submit(db_writer *w, db_write_op *op, dp_err *err);
/* Queues an operation that is owed an answer; accepted also after db_writer_close, until the
 * writer thread has drained the queue and ended (inside db_writer_stop). Later it is refused
 * (DP_EBUSY, logged: a programming error; done will not be called), never left in the queue. */
int db_writer_submit_again(db_writer *w, db_write_op *op, dp_err *err);

/* Calls fn(db, arg) on the writer thread, outside any transaction, after every idle_ms without an
 * operation. Call before the first submit; fn NULL = none. fn may submit operations. */
void db_writer_set_idle(db_writer *w, int idle_ms, void (*fn)(sqlite3 *db, void *arg), void *arg);

/* Refuses new submissions (db_writer_submit fails with DP_EBUSY). Idempotent. */
void db_writer_close(db_writer *w);
/* Closes, runs every queued operation, and joins the writer and checkpointer threads. The
 * connection stays open (finalize statements prepared on it, then db_writer_free). Idempotent. */
void db_writer_stop(db_writer *w);
/* Stops if needed and closes both connections. NULL is a no-op. */
void db_writer_free(db_writer *w);

/* ---- one function, committed (ONE FUNCTION, COMMITTED above) ---- */

/* Runs apply(db, arg, err) as one operation and waits for the group's COMMIT. DP_OK: what apply
 * wrote is committed (durable). Otherwise the code with err set: apply's own error (what it wrote
 * was rolled back, the rest of the group committed), the group's failure (nothing of it was
 * recorded), DP_EBUSY once the writer is closed (apply never ran), or DP_EINTERNAL when called on
 * the writer thread. arg is borrowed for the call. */
int db_writer_run(db_writer *w, db_write_apply_fn apply, void *arg, dp_err *err);

/* A deferred run: caller-owned (on the heap, e.g. inside an http_pending), valid from
 * db_writer_start until wake was called (the writer never touches it afterwards). The fields are
 * the writer's. */
typedef struct db_writer_call {
    db_write_op op;          /* submitted to the writer */
    db_write_apply_fn apply; /* the client's, called with arg */
    void *arg;
    void (*wake)(void *wake_arg); /* called once after the COMMIT or the failure */
    void *wake_arg;
    atomic_bool finished; /* set (release) before wake: rc and err are final */
    int rc;               /* the outcome, as db_writer_run's */
    dp_err err;
} db_writer_call;

/* Queues apply(db, arg, err) and returns at once. DP_OK: wake(wake_arg) WILL be called exactly
 * once, on the writer thread (possibly before this returns), after the group's COMMIT or failure;
 * it must be quick (resume a connection, signal a waiter) and must never wait for the writer (no
 * db_writer_run: it runs on the writer thread). Then db_writer_call_result gives the outcome. Any
 * other code (DP_EBUSY once the writer is closed, with err set): nothing was queued and wake will
 * never be called. call and arg are borrowed until wake was called. */
int db_writer_start(db_writer *w, db_writer_call *call, db_write_apply_fn apply, void *arg,
                    void (*wake)(void *wake_arg), void *wake_arg, dp_err *err);
/* The outcome of a started call, once wake was called: DP_OK (committed) or the code with err set,
 * as db_writer_run. Before wake: DP_EINTERNAL (a programming error, logged). */
int db_writer_call_result(db_writer_call *call, dp_err *err);

/* apply(store_conn_db(c), arg, err) in its own BEGIN IMMEDIATE transaction on the pooled
 * connection c (borrowed; not inside a transaction): committed when apply returns DP_OK, rolled
 * back otherwise. Only for a process without a writer (unit tests that run one handler without the
 * ledger's threads): in dpsilod every write goes through db_writer. */
int db_writer_run_conn(store_conn *c, db_write_apply_fn apply, void *arg, dp_err *err);

/* Group commits since open and the operations they carried (a failed operation counts).
 * Thread-safe. */
void db_writer_stats(const db_writer *w, uint64_t *groups, uint64_t *ops);
/* Background checkpoints run so far (statistics and tests). Thread-safe. */
uint64_t db_writer_checkpoints(const db_writer *w);

#endif
