/*
 * db/datasets: uploaded training data sets (table datasets, migration 0009), the records of
 * POST /v1/datasets that GET /v1/datasets lists and training jobs read back.
 *
 * A row keeps the CSV text as uploaded and what its parse found (counts, columns, silos). The text
 * is the last column: datasets_insert_apply writes it in place (zeroblob + sqlite3_blob_write), and
 * datasets_read_csv reads it back through an incremental blob handle, so neither copies it inside
 * SQLite. The summary JSON texts (silos, features) are made and read by the api layer: this file
 * has no jansson.
 *
 * Who may see a data set (docs/TRAINING.md "Data sets"): the admin, the token that uploaded it, or
 * another token of that token's silo (one SQL clause, DATASET_VISIBLE in datasets.c). Anyone else
 * is told "not found", as for an id that does not exist.
 *
 * Writes run on the writer's connection (db/writer.h), inside its group transaction:
 * datasets_insert_apply and datasets_delete_apply are db_write_apply_fn bodies. Reads take a
 * pooled connection.
 * Errors: DP_OK, or DP_EBUSY, DP_ENOMEM, DP_EINTERNAL (the SQLite detail logged with req_id).
 * Thread-safety: as the connection given.
 */
#ifndef DP_SERVICE_DB_DATASETS_H
#define DP_SERVICE_DB_DATASETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "common/dp_err.h"
#include "service/db/bind.h"
#include "service/db/store.h"

#define DATASETS_NAME_MAX 129 /* bytes of a name, NUL included */
#define DATASETS_COL_MAX  257 /* bytes of a column name kept in the row, NUL included */

/* An upload to record (every pointer borrowed for the call). */
typedef struct dataset_new {
    const char *name;         /* 1..128 bytes */
    int64_t created_at_ms;    /* Unix milliseconds, UTC */
    const char *request_id;   /* "-" when none */
    int64_t creator_token_id; /* 0: none (--auth off) */
    const char *label_column;
    const char *silo_column; /* NULL: none */
    int64_t n_rows, n_columns, n_features, n_classes;
    const char *silos;    /* JSON text [{"name","rows"}] */
    const char *features; /* JSON text ["x1", ...] */
    const char *sha256;   /* 64 hex digits of the CSV */
    const char *csv;      /* the text, csv_len bytes */
    size_t csv_len;
} dataset_new;

/* The writer operation of an insert: arg is a dataset_insert_op. */
typedef struct dataset_insert_op {
    const dataset_new *d;
    int64_t id; /* out: the new row's id */
} dataset_insert_op;
int datasets_insert_apply(sqlite3 *db, void *arg, dp_err *err);

/* Who is looking. */
typedef store_viewer dataset_viewer;

/* The writer operation of a delete: arg is a dataset_delete_op. found tells whether a row the
 * viewer may see was deleted. */
typedef struct dataset_delete_op {
    int64_t id;
    dataset_viewer who;
    bool found; /* out */
} dataset_delete_op;
int datasets_delete_apply(sqlite3 *db, void *arg, dp_err *err);

/* A stored data set without its text. Strings owned: dataset_row_clear. */
typedef struct dataset_row {
    int64_t id;
    char name[DATASETS_NAME_MAX];
    int64_t created_at_ms;
    char label_column[DATASETS_COL_MAX];
    char silo_column[DATASETS_COL_MAX]; /* "" = none */
    int64_t n_rows, n_columns, n_features, n_classes, bytes;
    char sha256[65];
    char *silos;    /* JSON text, owned */
    char *features; /* JSON text, owned */
} dataset_row;
void dataset_row_clear(dataset_row *r);

/* Reads data set id as seen by who: DP_OK with *found (and *out filled), or an error. */
int datasets_get(store_conn *c, int64_t id, const dataset_viewer *who, dataset_row *out,
                 bool *found, const char *req_id, dp_err *err);

/* Lists the data sets who may see with id > after, by id, at most limit (<= 1000) rows into out
 * (an array of limit rows, each cleared by the caller); *n the count, *more whether any follows. */
int datasets_list(store_conn *c, const dataset_viewer *who, int64_t after, size_t limit,
                  dataset_row *out, size_t *n, bool *more, const char *req_id, dp_err *err);

/* The CSV text of data set id (no visibility check: the caller checked it with datasets_get) in a
 * malloc'd buffer of *len bytes plus a NUL. DP_ENOTFOUND when the row is gone. */
int datasets_read_csv(sqlite3 *db, int64_t id, char **text, size_t *len, const char *req_id,
                      dp_err *err);

#endif
