/*
 * db/draws: the stored tuning draws (table tuning_draws, migrations 0002 and 0006), the records of
 * POST /v1/tuning/draw that GET /v1/tuning/draws/{id} reads back for an audit (docs/TUNING.md).
 *
 * Rows are append-only (triggers refuse UPDATE and DELETE): this file only inserts and reads. The
 * JSON columns (distribution, candidates) are stored and returned as text; turning them into JSON
 * values is the caller's business (the api layer), so this file has no jansson.
 *
 * Who may read a draw (docs/BUDGETS.md "Access control"): the admin, the token that made it, or
 * another token of that token's silo. Anyone else is told "not found", exactly as for an id that
 * does not exist, so ids of other silos' draws cannot be probed. The rule is one SQL WHERE clause
 * (SQL_GET_DRAW in draws.c), evaluated by draws_get.
 *
 * Writing: draws_insert is the body of an apply function of db/writer.h. It writes on the
 * connection it is given, inside the caller's transaction, and never begins or commits: in dpsilod
 * that is the writer's connection, in the savepoint of the operation within the group's BEGIN
 * IMMEDIATE, so a draw is committed by the one writer of the database (and acknowledged only after
 * that COMMIT, db_writer_run / db_writer_start) instead of competing for WAL's write lock from a
 * pooled connection. Reads (draws_get) use the request's pooled connection.
 *
 * Errors: DP_OK, or a dp_err from db/store.h (DP_EBUSY, DP_ENOMEM, DP_EINTERNAL "database error"
 * with the SQLite detail logged with req_id, never put in err). A draw that is missing or hidden is
 * not an error: draws_get returns DP_OK with *found false, and the caller words the 404.
 *
 * Thread-safety: as the connection (one thread at a time: the writer thread for draws_insert, the
 * borrower of a pooled connection for draws_get).
 */
#ifndef DP_SERVICE_DB_DRAWS_H
#define DP_SERVICE_DB_DRAWS_H

#include <stdbool.h>
#include <stdint.h>

#include <sqlite3.h>

#include "common/dp_err.h"
#include "service/db/bind.h"
#include "service/db/store.h"

/* A draw to record. Every pointer is borrowed for the duration of draws_insert. */
typedef struct draw_new {
    int64_t created_at_ms;    /* Unix milliseconds, UTC */
    const char *request_id;   /* X-Request-Id of the POST; NULL is stored as "-" */
    const char *distribution; /* the resolved distribution as canonical JSON text (required) */
    int64_t runs;             /* K, the number of runs drawn (>= 0) */
    double expected_runs;     /* E[K] */
    double prob_no_run;       /* P(K = 0) */
    int64_t grid_size;        /* number of candidates; 0 = none (stored as NULL) */
    const char *candidates;   /* JSON array text of K grid indices, or NULL */
    const char *label;        /* client label, or NULL */
    int64_t creator_token_id; /* tokens.id of the creator; 0 = none (--auth off; stored as NULL) */
} draw_new;

/* A draw read back. The strings are owned by the struct: release with draw_row_clear. */
typedef struct draw_row {
    int64_t id;
    int64_t created_at_ms; /* Unix milliseconds, UTC */
    char *distribution;    /* JSON text; never NULL after a successful draws_get */
    int64_t runs;
    double expected_runs;
    double prob_no_run;
    int64_t grid_size; /* 0 = none */
    char *candidates;  /* JSON array text, or NULL */
    char *label;       /* or NULL */
} draw_row;

/* Who is reading: the access rule above. */
typedef store_viewer draw_viewer; /* the admin (or --auth off) sees every draw */

/* Inserts d on db, inside the CALLER's transaction (an apply function's, db/writer.h: the row is
 * committed with the writer's group, or rolled back with the operation's savepoint when this or a
 * later part of the operation fails), and sets *id to the new row's id. Nothing is committed here:
 * the caller answers the client only once the writer reports the COMMIT (a draw the client is shown
 * is always on file). db is borrowed; d and its texts for the call. */
int draws_insert(sqlite3 *db, const draw_new *d, int64_t *id, const char *req_id, dp_err *err);

/* Reads draw id as seen by who. DP_OK with *found true and *out filled (owned strings), or DP_OK
 * with *found false (no such draw, or one who may not see; *out zeroed), or an error (*out
 * zeroed). */
int draws_get(store_conn *c, int64_t id, const draw_viewer *who, draw_row *out, bool *found,
              const char *req_id, dp_err *err);

/* Frees the strings of r and zeroes it. NULL is a no-op. */
void draw_row_clear(draw_row *r);

#endif
