/*
 * db/runs: the stored estimator runs (migrations 0004, 0006, 0007, 0008): insert a run with the
 * silos it charged, read one or a page of them for a caller, find a run by its Idempotency-Key.
 * The SQL of the runs lives here only; service/api/estimators.c builds the texts and answers.
 *
 * Visibility (docs/BUDGETS.md "Access control"): a run is readable by the admin, by the token that
 * created it or another token of the same silo (a rotated silo keeps its runs), and by the token of
 * a silo the run charged (estimator_run_silos). Anyone else reads nothing: runs_get reports "not
 * found" and runs_list skips the run, so ids do not leak. The list filters in SQL, so its pages are
 * full and its next_after exact.
 *
 * Texts: params, data and result are JSON texts written by the daemon from jansson dumps, valid by
 * construction; the schema checks params only (0008: parsing a run's result in SQLite cost several
 * times the request body). Who calls runs_insert guarantees the texts are JSON.
 *
 * Errors: SQLITE_BUSY/LOCKED -> DP_EBUSY; out of memory -> DP_ENOMEM; anything else DP_EINTERNAL
 * with the SQLite message logged under req_id (never in err).
 *
 * Thread-safety: every function uses only the connection it is given, on the calling thread.
 */
#ifndef DP_SERVICE_DB_RUNS_H
#define DP_SERVICE_DB_RUNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "common/dp_err.h"
#include "service/codec/run_rows.h"
#include "service/db/bind.h"
#include "service/db/store.h"

#define RUNS_KIND_MAX   16 /* bytes of a kind, NUL included ("gaussian", "beta", "mixture") */
#define RUNS_STATUS_MAX 32 /* bytes of a status, NUL included ("converged", "max_iter", ...) */

/* One run to store. Every pointer is borrowed for the call. */
typedef struct runs_new {
    const char *kind;            /* "gaussian", "beta" or "mixture" */
    int64_t created_at_ms;       /* Unix milliseconds, UTC */
    const char *request_id;      /* the request's id, "-" when none */
    const char *status;          /* the estimator's status name */
    bool priv;                   /* a private run */
    int64_t n_clients;           /* >= 1 */
    const char *params;          /* JSON text, NUL-terminated */
    const char *data;            /* JSON text of the clients, data_len bytes; NULL: not kept */
    size_t data_len;             /* bytes of data */
    const char *result;          /* JSON text, result_len bytes (no NUL needed) */
    size_t result_len;           /* bytes of result */
    const char *idempotency_key; /* the scoped key, NULL: none */
    const char *request_hash;    /* SHA-256 hex of the request with a key, else NULL */
    int64_t creator_token_id;    /* the creating token, 0: none (--auth off) */
    const int64_t *silos;        /* the silos the run charged (n_silos; repeats are ignored) */
    size_t n_silos;
    const run_rows *rows; /* the per-client results (estimator_run_clients, 0015); NULL: none */
} runs_new;

/* Inserts r and one estimator_run_silos row per charged silo, on db, inside the CALLER's
 * transaction: both or neither. It never begins or commits; it is the body of an apply function of
 * db/writer.h, on the writer's connection, in the savepoint of the silos' charge when the run
 * charges silos (ledger_charge_batch_with: the run commits with its charges) and in an operation of
 * its own otherwise (ledger_charge_batch_with with no charge, or db_writer_run without a ledger);
 * only a process without a writer (unit tests) runs it on a pooled connection
 * (db_writer_run_conn). *id gets the new run's id. The texts are bound without a copy, and the
 * result is written into the row's pages in place (stored as a BLOB of its UTF-8 text, migration
 * 0008), so SQLite never holds it whole: a run's result is the largest text the daemon stores. */
int runs_insert(sqlite3 *db, const runs_new *r, const char *req_id, int64_t *id, dp_err *err);

/* Who reads: the admin, or a token (its id) of a silo (its id; 0 for none). */
typedef store_viewer runs_viewer;

/* A stored run, as runs_get reads it. The texts are owned (malloc); release with runs_run_clear. */
typedef struct runs_run {
    int64_t id;
    char kind[RUNS_KIND_MAX];
    int64_t created_at_ms;
    char status[RUNS_STATUS_MAX];
    bool priv;
    int64_t n_clients;
    char *params; /* JSON text */
    char *data;   /* JSON text of the clients, NULL when they were not kept */
    char *result; /* JSON text */
} runs_run;

/* Frees the texts of r and zeroes it; NULL is a no-op. */
void runs_run_clear(runs_run *r);

/* Reads run id if v may see it: *found false (and *out zeroed) when it does not exist or v may not
 * read it. */
int runs_get(store_conn *c, int64_t id, const runs_viewer *v, const char *req_id, runs_run *out,
             bool *found, dp_err *err);

/* One line of the list. */
typedef struct runs_summary {
    int64_t id;
    char kind[RUNS_KIND_MAX];
    int64_t created_at_ms;
    char status[RUNS_STATUS_MAX];
    bool priv;
    int64_t n_clients;
} runs_summary;

/* The runs v may see with id > after, in id order: up to limit (>= 1) of them into out (room for
 * limit), *n of them; *more tells whether another follows. */
int runs_list(store_conn *c, const runs_viewer *v, int64_t after, size_t limit, const char *req_id,
              runs_summary *out, size_t *n, bool *more, dp_err *err);

/* Looks up the run stored with the scoped Idempotency-Key key, on db (a pooled connection's or the
 * ledger committer's). *found: 0 (none), 1 (the same request, its hash equals hash: *id and
 * *result, owned text, are set) or 2 (another request). */
int runs_find_key(sqlite3 *db, const char *key, const char *hash, const char *req_id, int *found,
                  int64_t *id, char **result, dp_err *err);

/* Whether run id exists and v may read it (runs_get's rule). */
int runs_visible(store_conn *c, int64_t id, const runs_viewer *v, const char *req_id, bool *found,
                 dp_err *err);

/* The per-client results of run id (0015), rows [from, from + count) of them (count is cut at the
 * end; SIZE_MAX: all), read from the stored blobs without reading the rest: out gets the layout,
 * m = the rows read, base = from, vals and the ids (owned; run_rows_clear). *found false when the
 * run stored none (a "summary" run, a run stored before 0015, or no such run); *total: the run's
 * rows. No visibility check: the caller made it (runs_get, runs_visible, runs_find_key). */
int runs_rows_get(sqlite3 *db, int64_t id, size_t from, size_t count, const char *req_id,
                  run_rows *out, size_t *total, bool *found, dp_err *err);

#endif
