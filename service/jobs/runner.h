/*
 * jobs/runner: the pool of job workers (--job-workers) that trains queued jobs, round by round,
 * with every round's privacy spend charged through the ledger before the round's result is kept.
 *
 * A worker claims the oldest queued job (db/jobs.h), prepares it (jobs/prepare.h: the same
 * federation and plan the submission computed), restores its last checkpoint if it has one, and
 * runs its rounds. For each round:
 *   1. the cancel flag and the runner's stop are checked (between rounds only);
 *   2. a dry run asks the ledger whether every active bound silo can afford the round; a silo that
 *      cannot is stopped (on_budget_exhausted stop_silo) or ends the job (stop_job);
 *   3. the engine runs the round in memory (federated/fl_algo.h fl_round_run);
 *   4. ledger_charge_batch_with charges the round's event to every active bound silo AND, in the
 *      same transaction, writes the round's metrics, its event and the new checkpoint: the round
 *      exists (is in the metrics, can be resumed from) only if it was charged, and a charge is
 *      never lost. Should the charge be refused after all (another client spent in between), the
 *      round is discarded, the state restored, the policy applied, and the round run again.
 * So a silo's spent never exceeds its cap, the epsilon in the metrics is the ledger's, and an
 * update is never used without its charge.
 *
 * After a crash or restart, job_runner_start first requeues every job left running (it resumes
 * from its checkpoint) or marks it interrupted (spec "resume": false): no job stays running. A stop
 * (SIGTERM) ends each running job's current round, then requeues or interrupts it the same way.
 *
 * Workers are plain threads outside the compute pool and the HTTP threads: a job never takes a
 * thread an HTTP request needs. Each has its own read connection (store_conn_open_extra); writes
 * go through the database writer.
 *
 * Thread-safety: notify and event_seq/wait from any thread; start, stop and free from one.
 */
#ifndef DP_SERVICE_JOBS_RUNNER_H
#define DP_SERVICE_JOBS_RUNNER_H

#include <stdint.h>

#include "common/dp_err.h"
#include "service/db/writer.h"

struct store;
struct ledger;

#define JOB_MAX_WORKERS 64
#define JOB_MAX_THREADS 64

typedef struct job_runner job_runner;

typedef struct job_runner_cfg {
    unsigned workers;     /* jobs trained at once, 0..JOB_MAX_WORKERS (0: none, jobs stay queued) */
    unsigned job_threads; /* threads a job's round fans out to, 1..JOB_MAX_THREADS */
} job_runner_cfg;

/* Recovers the jobs left running, then starts the workers. NULL with err on failure. */
job_runner *job_runner_start(struct store *st, struct ledger *l, db_writer *w,
                             const job_runner_cfg *cfg, dp_err *err);
/* A job was queued or a cancel requested: wake an idle worker. NULL is a no-op. */
void job_runner_notify(job_runner *r);
/* Stops the workers after their current round (their jobs requeued or interrupted) and joins them.
 * Idempotent; NULL is a no-op. */
void job_runner_stop(job_runner *r);
void job_runner_free(job_runner *r);

/* A counter that grows with every round or status change a worker records, and whenever a job is
 * queued or a cancel requested (for server-sent events). */
uint64_t job_runner_event_seq(job_runner *r);

/* A watch for a deferred answer (GET /v1/jobs/{id}/events): wake(arg) is called exactly once,
 * from a runner thread, when the counter moves past seen, when timeout_ms passes, or when the
 * runner stops. The node is the caller's (inside its http_pending) and must stay valid until wake
 * was called. DP_OK: registered. DP_ECONFLICT: the counter is already past seen (or the runner is
 * stopping): nothing registered, wake will not be called; answer at once. */
typedef struct job_watch {
    void (*wake)(void *arg);
    void *arg;
    int64_t deadline_ms; /* the runner's */
    struct job_watch *next;
} job_watch;
int job_runner_watch(job_runner *r, job_watch *w, uint64_t seen, int timeout_ms,
                     void (*wake)(void *arg), void *arg);

#endif
