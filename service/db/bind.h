/*
 * db/bind: named parameter binding with a sticky result code, so that binding a statement is one
 * call per parameter instead of an `if (rc == SQLITE_OK) rc = sqlite3_bind_...` ladder.
 *
 *     store_binder b = store_bind_begin(st);
 *     store_bind_i64(&b, ":created", now);
 *     store_bind_text(&b, ":label", label);      (NULL binds SQL NULL)
 *     int src = store_bind_step(&b);             (the first failure, or sqlite3_step's code)
 *
 * Rules:
 *   - parameters are found by name (sqlite3_bind_parameter_index), so the SQL text and the code
 *     cannot drift apart as positional binds can; a name the statement does not have is an error
 *     (SQLITE_RANGE, logged with the name), not silently ignored;
 *   - the first failing bind wins (like dp_err): later binds are skipped, and store_bind_step
 *     returns that code without stepping;
 *   - text is copied (SQLITE_TRANSIENT), so the caller's buffers may go away after the bind.
 * The binder does not reset the statement: store_stmt_done (db/store.h) stays the caller's job,
 * after the columns have been read.
 *
 * Thread-safety: as the statement (one thread at a time, the connection's borrower).
 */
#ifndef DP_SERVICE_DB_BIND_H
#define DP_SERVICE_DB_BIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

typedef struct store_binder {
    sqlite3_stmt *st; /* borrowed */
    int rc;           /* SQLITE_OK, or the first failing bind's code */
} store_binder;

/* A binder for st (borrowed; must outlive the binder). */
store_binder store_bind_begin(sqlite3_stmt *st);

void store_bind_i64(store_binder *b, const char *name, int64_t v);
void store_bind_double(store_binder *b, const char *name, double v);
/* v NULL binds SQL NULL; otherwise the NUL-terminated text is copied. */
void store_bind_text(store_binder *b, const char *name, const char *v);
/* present ? v : SQL NULL (an optional integer column). */
void store_bind_i64_or_null(store_binder *b, const char *name, bool present, int64_t v);

/* The first bind failure, or else the result of sqlite3_step (SQLITE_ROW, SQLITE_DONE or an
 * error). May be called again to step to the next row (the binds are not repeated). */
int store_bind_step(store_binder *b);

/* Who reads a resource under the access rule of draws, runs, data sets and jobs (the admin, the
 * token that made it, a token of that token's silo, or of a silo bound to it), bound as :admin,
 * :tok and :silo (:silo 0 for the admin). NULL binds the admin: no access check. */
typedef struct store_viewer {
    bool admin;
    int64_t token_id;
    int64_t silo_id; /* ignored for the admin */
} store_viewer;
void store_bind_viewer(store_binder *b, const store_viewer *v);

/* Column i's text into dst (cap bytes, truncated, "" for NULL). */
void store_col_copy(sqlite3_stmt *st, int i, char *dst, size_t cap);

/* One page of a list whose statement asks for LIMIT page + 1 rows: steps through at most `page`
 * rows, calling row(st, arg) on each, and sets *more when another row follows. Returns DP_OK;
 * DP_ENOMEM when row returned nonzero (a copy that failed); or DP_EINTERNAL with *sqlite_rc the
 * failing bind's or step's code (for store_err). */
int store_bind_page(store_binder *b, size_t page, int (*row)(sqlite3_stmt *st, void *arg),
                    void *arg, bool *more, int *sqlite_rc);

#endif
