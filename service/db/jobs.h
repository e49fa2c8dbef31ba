/*
 * db/jobs: training jobs, their rounds, events and checkpoints (migration 0010).
 *
 * Writes are db_write_apply_fn bodies for the database writer (db/writer.h), so each commits in
 * the writer's group transaction; jobs_round_write is called from inside the ledger's charge
 * operation (ledger_charge_batch_with), so that a round's metrics, event and checkpoint commit with
 * its charges or not at all. Reads take a pooled connection.
 *
 * Who may see a job (docs/TRAINING.md "Access"): the admin, the token that submitted it or another
 * token of that token's silo, and the tokens of the silos the job is bound to (job_silos). Anyone
 * else is told "not found".
 *
 * Errors: DP_OK, or DP_EBUSY, DP_ENOMEM, DP_EINTERNAL (the SQLite detail logged). Texts given are
 * JSON made by the caller; this file has no jansson.
 * Thread-safety: as the connection given.
 */
#ifndef DP_SERVICE_DB_JOBS_H
#define DP_SERVICE_DB_JOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "common/dp_err.h"
#include "service/db/bind.h"
#include "service/db/store.h"

#define JOBS_STATUS_MAX 16  /* "interrupted" + NUL fits */
#define JOBS_TEXT_MAX   256 /* bytes of a reason or name kept in a row, NUL included */

typedef enum job_status {
    JOB_QUEUED = 0,
    JOB_RUNNING,
    JOB_SUCCEEDED,
    JOB_FAILED,
    JOB_CANCELLED,
    JOB_INTERRUPTED
} job_status;

const char *job_status_name(job_status s);
/* -1 when unknown. */
int job_status_parse(const char *s);

typedef struct job_new_binding {
    int64_t silo_id;
    const char *name;
} job_new_binding;

/* A job to record (borrowed for the call). */
typedef struct job_new {
    const char *name; /* or NULL */
    int64_t created_at_ms;
    const char *request_id;
    int64_t creator_token_id; /* 0 = none */
    const char *algorithm;
    const char *spec;   /* JSON text */
    const char *plan;   /* JSON text */
    int64_t dataset_id; /* 0 = none */
    int64_t rounds_total;
    bool resume;
    const job_new_binding *bindings;
    size_t n_bindings;
} job_new;

typedef struct job_insert_op {
    const job_new *j;
    int64_t id; /* out */
} job_insert_op;
/* Inserts the job as queued with its bindings and a "status" event. */
int jobs_insert_apply(sqlite3 *db, void *arg, dp_err *err);

typedef struct job_claim_op {
    int64_t now_ms;
    int64_t id; /* out: the job now running, 0 = none queued */
} job_claim_op;
/* Moves the oldest queued job to running. */
int jobs_claim_apply(sqlite3 *db, void *arg, dp_err *err);

typedef struct job_finish_op {
    int64_t id;
    job_status status;  /* SUCCEEDED, FAILED, CANCELLED, INTERRUPTED, or QUEUED (to resume later) */
    const char *reason; /* or NULL */
    int64_t now_ms;
} job_finish_op;
/* Ends a running job with status (or requeues it), with an event. */
int jobs_finish_apply(sqlite3 *db, void *arg, dp_err *err);

/* Who is looking. */
typedef store_viewer job_viewer;

typedef struct job_cancel_op {
    int64_t id;
    job_viewer who;
    int64_t now_ms;
    bool found;     /* out: a job the viewer may see */
    job_status was; /* out: its status before */
} job_cancel_op;
/* A queued job is cancelled at once; a running one gets cancel_requested (the runner ends it
 * between rounds); a finished one is left alone. */
int jobs_cancel_apply(sqlite3 *db, void *arg, dp_err *err);

typedef struct job_recover_op {
    int64_t now_ms;
    int requeued, interrupted; /* out */
} job_recover_op;
/* At start: every running job is requeued (resume) or interrupted, with an event. */
int jobs_recover_apply(sqlite3 *db, void *arg, dp_err *err);

/* One finished round: its metrics row, its event, the checkpoint, rounds_done. Called on the
 * writer's connection inside the round's charge operation. */
typedef struct job_round_new {
    int64_t job_id;
    int64_t round; /* 1-based: rounds completed */
    int64_t now_ms;
    double wall_ms;
    const char *metrics;  /* JSON text */
    const uint8_t *state; /* checkpoint bytes */
    size_t state_len;
} job_round_new;
int jobs_round_write(sqlite3 *db, const job_round_new *r, dp_err *err);

/* A job as read. */
typedef struct job_row {
    int64_t id;
    char name[JOBS_TEXT_MAX];
    int64_t created_at_ms, started_at_ms, finished_at_ms, updated_at_ms; /* 0 = not yet */
    int64_t creator_token_id;
    char algorithm[32];
    job_status status;
    char reason[JOBS_TEXT_MAX];
    int64_t rounds_total, rounds_done, dataset_id;
    bool cancel_requested, resume;
    char *spec; /* JSON text, owned */
    char *plan; /* JSON text, owned */
} job_row;
void job_row_clear(job_row *r);

/* who NULL: no access check (the runner). */
int jobs_get(store_conn *c, int64_t id, const job_viewer *who, job_row *out, bool *found,
             const char *req_id, dp_err *err);
/* status < 0: any. Rows by id > after, at most limit; *more when more follow. */
int jobs_list(store_conn *c, const job_viewer *who, int status, int64_t after, size_t limit,
              job_row *out, size_t *n, bool *more, const char *req_id, dp_err *err);

/* The silo name of ledger silo silo_id bound to job id into name (cap bytes); *found. */
int jobs_binding_name(store_conn *c, int64_t id, int64_t silo_id, char *name, size_t cap,
                      bool *found, const char *req_id, dp_err *err);

/* Round rows with round > after, at most limit: calls fn(arg, round, wall_ms, metrics text) for
 * each in order; *more when more follow. fn returns 0 to go on, nonzero to stop with DP_ENOMEM. */
int jobs_rounds_list(store_conn *c, int64_t id, int64_t after, size_t limit,
                     int (*fn)(void *arg, int64_t round, double wall_ms, const char *metrics),
                     void *arg, bool *more, const char *req_id, dp_err *err);

/* Events with id > after, at most limit: fn(arg, event id, created_at_ms, type, data text). */
int jobs_events_list(store_conn *c, int64_t id, int64_t after, size_t limit,
                     int (*fn)(void *arg, int64_t event_id, int64_t at_ms, const char *type,
                               const char *data),
                     void *arg, bool *more, const char *req_id, dp_err *err);

/* The checkpoint of job id: a dp_malloc'd copy (*buf NULL, *len 0 when there is none). */
int jobs_checkpoint_read(store_conn *c, int64_t id, uint8_t **buf, size_t *len, int64_t *round,
                         const char *req_id, dp_err *err);

/* Whether a queued or running job uses uploaded data set dataset_id. */
int jobs_dataset_in_use(store_conn *c, int64_t dataset_id, bool *in_use, const char *req_id,
                        dp_err *err);

/* cancel_requested of job id (false when it does not exist). */
int jobs_cancel_requested(store_conn *c, int64_t id, bool *requested, dp_err *err);

#endif
