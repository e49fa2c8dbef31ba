/*
 * store: the SQLite database of dpsilod: opening, migrations and a pool of connections.
 *
 * One file, WAL mode, synchronous=FULL (a committed spend lost in a crash is budget that could be
 * spent twice), foreign keys on, a busy timeout of STORE_BUSY_TIMEOUT_MS, extended result codes.
 * store_open opens the file, applies the migrations the binary carries (migrations/NNNN_*.sql,
 * embedded at build time) and then opens a fixed pool of connections.
 *
 * Migrations: each file runs in its own BEGIN IMMEDIATE transaction together with an INSERT into
 * schema_migrations(version, name, applied_at_ms) and PRAGMA user_version = <highest applied>. The
 * runner creates schema_migrations itself, so it exists before 0001. Versions are the 4-digit
 * prefix and may have gaps (numbers are reserved per feature); any known version not yet applied is
 * applied, in ascending order. store_open refuses a database that has a version the binary does not
 * know (a newer schema, or a migration from another build): the message names the version, and no
 * migration is applied.
 *
 * Pool: HTTP handlers borrow one connection per request (store_conn_borrow / store_conn_return);
 * the pool is sized to the MHD thread pool, so a borrow waits only if a caller holds more than one.
 * A connection is used by one thread at a time; it caches prepared statements (store_conn_prepare).
 * Job workers open their own connections with store_conn_open_extra.
 *
 * Errors: SQLITE_BUSY/LOCKED after the timeout -> DP_EBUSY (503); other failures -> DP_EINTERNAL
 * with the SQLite detail logged (never sent to the client); store_open failures carry a message for
 * the operator naming the path and the cause.
 *
 * Thread-safety: store_open/store_free from the main thread only; store_conn_borrow/return are
 * thread-safe (guarded by the pool mutex, held only around the free list, never across SQLite).
 */
#ifndef DP_SERVICE_STORE_H
#define DP_SERVICE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "common/dp_err.h"
#include "service/base/embedded.h"

#define STORE_BUSY_TIMEOUT_MS 5000 /* sqlite3_busy_timeout; then DP_EBUSY */
#define STORE_BORROW_WAIT_MS  5000 /* wait for a free pooled connection; then DP_EBUSY */
#define STORE_STMT_CACHE      64   /* prepared statements cached per connection */
#define STORE_MAX_POOL        64

typedef struct store store;
typedef struct store_conn store_conn;

/* A migration is an embed_file: name "NNNN_description.sql" (version = NNNN, 1..9999), data = SQL
 * text, NUL-terminated. The binary's own list is EMBED_MIGRATIONS / EMBED_MIGRATIONS_N (ascending);
 * tests pass their own. A migration must not contain BEGIN/COMMIT: the runner owns the transaction.
 */

/* Opens path (created if missing), applies migs[0..n_migs-1] (in ascending version order), and
 * opens a pool of pool_size connections (1..STORE_MAX_POOL). Returns an owned store or NULL with
 * err set (DP_EINTERNAL with an operator message: cannot open, read-only, newer schema, failed
 * migration). */
store *store_open(const char *path, size_t pool_size, const embed_file *migs, size_t n_migs,
                  dp_err *err);

/* How store_db_open opens a file. */
typedef enum store_db_mode {
    STORE_DB_CREATE = 0, /* read-write, created if missing (store_open's first connection) */
    STORE_DB_WRITE,      /* read-write, must exist (the pool, the writer, the checkpointer) */
    STORE_DB_READ        /* read-only (snapshots for long reads, e.g. the ledger's PLD thread) */
} store_db_mode;

/* THE connection set-up of dpsilod: every connection to the database (the pool, db/writer's writer
 * and checkpointer, the ledger's PLD snapshots) is opened here, so all have the settings of
 * The one set-up: NOMUTEX (one thread at a time), extended result codes, a busy timeout of
 * STORE_BUSY_TIMEOUT_MS, foreign keys on, synchronous=FULL; a file opened for writing that SQLite
 * opens read-only is refused. Returns an owned handle (sqlite3_close) or NULL with an operator
 * message naming path (field "db"); the SQLite detail is in the message, never sent to a client. */
sqlite3 *store_db_open(const char *path, store_db_mode mode, dp_err *err);

/* Closes every connection (all must have been returned) and frees s. NULL is a no-op. */
void store_free(store *s);

/* Highest applied migration version, read at open. */
int store_schema_version(const store *s);

/* Borrows a pooled connection for one request. Returns a borrowed pointer (valid until
 * store_conn_return) or NULL with DP_EBUSY after STORE_BORROW_WAIT_MS. */
store_conn *store_conn_borrow(store *s, dp_err *err);
/* Returns a borrowed connection to the pool. Any open transaction is rolled back first. NULL is a
 * no-op. */
void store_conn_return(store *s, store_conn *c);

/* A private connection outside the pool (for a job worker thread). Owned by the caller; close it
 * with store_conn_close before store_free. NULL with err on failure. */
store_conn *store_conn_open_extra(store *s, dp_err *err);
void store_conn_close(store_conn *c);

/* The raw handle, for sqlite3_bind_* / sqlite3_column_*. Borrowed for as long as c is held. */
sqlite3 *store_conn_db(store_conn *c);

/* Returns a prepared statement for sql, which MUST be a string literal (static storage): the cache
 * is keyed by the pointer. Prepared once per connection with SQLITE_PREPARE_PERSISTENT. The
 * statement is borrowed: after use call store_stmt_done (reset + clear bindings). NULL with err on
 * failure. */
sqlite3_stmt *store_conn_prepare(store_conn *c, const char *sql, dp_err *err);
/* sqlite3_reset + sqlite3_clear_bindings; NULL is a no-op. */
void store_stmt_done(sqlite3_stmt *st);

/* Transactions (never nested): BEGIN IMMEDIATE, COMMIT, ROLLBACK. begin/commit return DP_OK,
 * DP_EBUSY or DP_EINTERNAL. rollback never fails visibly (it logs). */
int store_begin(store_conn *c, dp_err *err);
int store_commit(store_conn *c, dp_err *err);
void store_rollback(store_conn *c);

/* Maps a SQLite result code to a dp_err: BUSY/LOCKED -> DP_EBUSY, NOMEM -> DP_ENOMEM, anything else
 * -> DP_EINTERNAL. The SQLite message is logged with what (e.g. "insert silo") and req_id, never
 * put in err. Returns the dp code. */
int store_err(store_conn *c, int rc, const char *what, const char *req_id, dp_err *err);
/* store_err for a raw connection (db may be NULL: the message is then sqlite3_errstr(rc)), e.g. the
 * writer's inside an apply function (db/writer.h). */
int store_db_err(sqlite3 *db, int rc, const char *what, const char *req_id, dp_err *err);

/* GET /healthz. Runs a real read of the database on c (the highest row of schema_migrations,
 * through a cached statement) and checks it equals the version found at open - unless another check
 * succeeded less than max_age_ms ago (monotonic clock), in which case that result is reused. A
 * failed check is never reused. *age_ms receives how long ago the database was last verified (0 =
 * just now). max_age_ms 0 always reads. Returns DP_OK or an error. Thread-safe (the timestamp is
 * atomic). */
int store_check_health(store *s, store_conn *c, int64_t max_age_ms, int64_t *age_ms, dp_err *err);

/* The database's identity (table instance, made once by migration 0001): its 16-character random
 * id and when it was created (Unix milliseconds), for GET /v1/version. A missing or malformed row
 * is DP_EINTERNAL (logged with req_id as "read instance"), as is any SQLite failure. */
#define STORE_INSTANCE_ID_LEN 16
int store_read_instance(store_conn *c, char instance_id[STORE_INSTANCE_ID_LEN + 1],
                        int64_t *created_at_ms, const char *req_id, dp_err *err);

#endif
