/*
 * db/store.c: SQLite open, migration runner and connection pool. Contract in db/store.h.
 *
 * DESIGN
 * Open sequence (store_open):
 *   1. open the first connection (READWRITE|CREATE|NOMUTEX), apply the per-connection
 *      settings and make sure the file is writable (sqlite3_db_readonly): a read-only file is
 *      refused at start, not at the first spend;
 *   2. PRAGMA journal_mode=WAL (persistent in the file; it cannot run inside a transaction, so
 *      it is set here rather than in 0001);
 *   3. run the migrations on that connection;
 *   4. that connection becomes pool slot 0 and the other slots are opened.
 * The pool is a LIFO free list of slots guarded by mu; a borrower waits on cv with a deadline. The
 * lock is held only while the list is touched, never across a SQLite call (no lock is held over
 * slow work).
 *
 * Statement cache: keyed by the address of the SQL literal, a linear scan of at most
 * STORE_STMT_CACHE entries (a few pointer compares; a hash would cost more at this size).
 */
#include "service/db/store.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/dp_alloc.h"
#include "common/dp_log.h"
#include "service/base/time.h"

struct store_conn {
    sqlite3 *db; /* owned; used by one thread at a time (the borrower) */
    struct {
        const char *sql;  /* key: address of a string literal */
        sqlite3_stmt *st; /* owned, prepared with SQLITE_PREPARE_PERSISTENT */
    } cache[STORE_STMT_CACHE];
    size_t n_cache; /* used cache entries */
};

struct store {
    char *path;             /* owned copy, for messages */
    int schema_version;     /* highest applied migration, set at open */
    size_t n_conns;         /* pool size */
    store_conn *conns;      /* owned array of n_conns */
    store_conn **free_list; /* owned array; guarded by mu */
    size_t n_free;          /* guarded by mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int_fast64_t
        health_ok_ms; /* CLOCK_MONOTONIC ms of the last successful health read; 0 = never */
};

int store_err(store_conn *c, int rc, const char *what, const char *req_id, dp_err *err)
{
    return store_db_err(c ? c->db : NULL, rc, what, req_id, err);
}

int store_db_err(sqlite3 *db, int rc, const char *what, const char *req_id, dp_err *err)
{
    int prim = rc & 0xff;
    dp_log(DP_LOG_ERROR, req_id, "sqlite: %s: %s (rc %d)", what ? what : "?",
           db ? sqlite3_errmsg(db) : sqlite3_errstr(rc), rc);
    if (prim == SQLITE_BUSY || prim == SQLITE_LOCKED)
        return dp_err_set(err, DP_EBUSY, NULL, "the database is busy; retry shortly");
    if (prim == SQLITE_NOMEM)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    return dp_err_set(err, DP_EINTERNAL, NULL, "database error");
}

sqlite3 *store_db_open(const char *path, store_db_mode mode, dp_err *err)
{
    int flags = SQLITE_OPEN_NOMUTEX |
                (mode == STORE_DB_READ     ? SQLITE_OPEN_READONLY
                 : mode == STORE_DB_CREATE ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
                                           : SQLITE_OPEN_READWRITE);
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, flags, NULL);
    if (rc != SQLITE_OK) {
        dp_err_set(err, DP_EINTERNAL, "db", "cannot open database %s: %s", path,
                   db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        goto fail;
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, STORE_BUSY_TIMEOUT_MS);
    if (mode != STORE_DB_READ && sqlite3_db_readonly(db, "main") != 0) {
        dp_err_set(err, DP_EINTERNAL, "db", "database %s is read-only: dpsilod needs to write it",
                   path);
        goto fail;
    }
    char *msg = NULL;
    rc = sqlite3_exec(db, "PRAGMA foreign_keys=ON; PRAGMA synchronous=FULL;", NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        dp_err_set(err, DP_EINTERNAL, "db", "cannot use database %s: %s", path,
                   msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        goto fail;
    }
    return db;
fail:
    sqlite3_close(db);
    return NULL;
}

/* Opens one pool connection (store_db_open); operator-facing messages on failure. */
static int conn_init(store_conn *c, const char *path, store_db_mode mode, dp_err *err)
{
    memset(c, 0, sizeof *c);
    c->db = store_db_open(path, mode, err);
    return c->db != NULL ? DP_OK : err ? err->code : DP_EINTERNAL;
}

static void conn_fini(store_conn *c)
{
    if (c == NULL || c->db == NULL)
        return;
    for (size_t i = 0; i < c->n_cache; i++)
        sqlite3_finalize(c->cache[i].st);
    c->n_cache = 0;
    int rc = sqlite3_close(c->db);
    if (rc != SQLITE_OK)
        dp_log(DP_LOG_ERROR, NULL, "sqlite: close: %s", sqlite3_errstr(rc));
    c->db = NULL;
}

/* Runs a one-row query returning text into buf. */
static int query_text(sqlite3 *db, const char *sql, char *buf, size_t len)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            const unsigned char *t = sqlite3_column_text(st, 0);
            snprintf(buf, len, "%s", t ? (const char *)t : "");
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(st);
    return rc;
}

/* Version of a migration file name "NNNN_x.sql", or -1. */
static int migration_version(const char *name)
{
    if (name == NULL)
        return -1;
    int v = 0;
    for (int i = 0; i < 4; i++) {
        if (name[i] < '0' || name[i] > '9')
            return -1;
        v = v * 10 + (name[i] - '0');
    }
    size_t n = strlen(name);
    if (name[4] != '_' || n < 10 || strcmp(name + n - 4, ".sql") != 0 || v < 1)
        return -1;
    return v;
}

/* Applies one migration in its own IMMEDIATE transaction. Skips it if another process applied it in
 * the meantime (checked inside the transaction). */
static int migration_apply(sqlite3 *db, const embed_file *m, int version, int user_version,
                           const char *path, dp_err *err)
{
    char *msg = NULL;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        goto fail;
    rc =
        sqlite3_prepare_v2(db, "SELECT 1 FROM schema_migrations WHERE version = :v", -1, &st, NULL);
    if (rc != SQLITE_OK || (rc = sqlite3_bind_int(st, 1, version)) != SQLITE_OK)
        goto fail;
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    st = NULL;
    if (rc == SQLITE_ROW) { /* applied concurrently by another process */
        rc = sqlite3_exec(db, "COMMIT", NULL, NULL, &msg);
        if (rc != SQLITE_OK)
            goto fail;
        return DP_OK;
    }
    if (rc != SQLITE_DONE)
        goto fail;
    rc = sqlite3_exec(db, (const char *)m->data, NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        goto fail;
    rc = sqlite3_prepare_v2(
        db, "INSERT INTO schema_migrations(version, name, applied_at_ms) VALUES (:v, :n, :t)", -1,
        &st, NULL);
    if (rc != SQLITE_OK || (rc = sqlite3_bind_int(st, 1, version)) != SQLITE_OK ||
        (rc = sqlite3_bind_text(st, 2, m->name, -1, SQLITE_STATIC)) != SQLITE_OK ||
        (rc = sqlite3_bind_int64(st, 3, time_now_ms())) != SQLITE_OK)
        goto fail;
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    st = NULL;
    if (rc != SQLITE_DONE)
        goto fail;
    /* PRAGMA takes no bound parameters; the value is an int computed here, not input. */
    char pragma[48];
    snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", user_version);
    rc = sqlite3_exec(db, pragma, NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        goto fail;
    rc = sqlite3_exec(db, "COMMIT", NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        goto fail;
    dp_log(DP_LOG_INFO, NULL, "store: applied migration %s to %s", m->name, path);
    return DP_OK;
fail:
    dp_err_set(err, DP_EINTERNAL, "db", "migration %s failed on %s: %s", m->name, path,
               msg ? msg : sqlite3_errmsg(db));
    sqlite3_free(msg);
    sqlite3_finalize(st);
    if (!sqlite3_get_autocommit(db))
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return DP_EINTERNAL;
}

/* Applies every known migration not yet recorded; refuses unknown recorded versions. */
static int migrate(sqlite3 *db, const embed_file *migs, size_t n, const char *path,
                   int *out_version, dp_err *err)
{
    int max_known = 0;
    for (size_t i = 0; i < n; i++) {
        int v = migration_version(migs[i].name);
        if (v < 0 || v <= max_known || migs[i].data == NULL)
            return dp_err_set(err, DP_EINTERNAL, "db",
                              "built-in migration list is invalid at \"%s\" (names must be "
                              "NNNN_x.sql, ascending)",
                              migs[i].name ? migs[i].name : "(null)");
        max_known = v;
    }
    char uv[32];
    if (query_text(db, "PRAGMA user_version", uv, sizeof uv) != SQLITE_OK)
        return dp_err_set(err, DP_EINTERNAL, "db", "cannot read user_version of %s: %s", path,
                          sqlite3_errmsg(db));
    long user_version = strtol(uv, NULL, 10);
    if (user_version > max_known)
        return dp_err_set(err, DP_EINTERNAL, "db",
                          "database %s has schema version %ld, newer than this dpsilod knows (%d); "
                          "run a newer dpsilod",
                          path, user_version, max_known);

    char *msg = NULL;
    int rc = sqlite3_exec(db,
                          "CREATE TABLE IF NOT EXISTS schema_migrations ("
                          " version INTEGER PRIMARY KEY CHECK (version BETWEEN 1 AND 9999),"
                          " name TEXT NOT NULL,"
                          " applied_at_ms INTEGER NOT NULL)",
                          NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        dp_err_set(err, DP_EINTERNAL, "db", "cannot write database %s: %s", path,
                   msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return DP_EINTERNAL;
    }
    /* Recorded versions: each must be one this binary knows. */
    bool applied[10000] = {false};
    int max_applied = 0;
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(db, "SELECT version FROM schema_migrations ORDER BY version", -1, &st,
                            NULL);
    if (rc != SQLITE_OK)
        return dp_err_set(err, DP_EINTERNAL, "db", "cannot read schema_migrations of %s: %s", path,
                          sqlite3_errmsg(db));
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int v = sqlite3_column_int(st, 0);
        bool known = false;
        for (size_t i = 0; i < n && !known; i++)
            known = migration_version(migs[i].name) == v;
        if (!known) {
            sqlite3_finalize(st);
            if (v > max_known)
                return dp_err_set(
                    err, DP_EINTERNAL, "db",
                    "database %s has schema version %d, newer than this dpsilod knows (%d); "
                    "run a newer dpsilod",
                    path, v, max_known);
            return dp_err_set(err, DP_EINTERNAL, "db",
                              "database %s has migration %04d, which this dpsilod does not know; "
                              "it was written by a different build",
                              path, v);
        }
        applied[v] = true;
        if (v > max_applied)
            max_applied = v;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return dp_err_set(err, DP_EINTERNAL, "db", "cannot read schema_migrations of %s: %s", path,
                          sqlite3_errmsg(db));

    for (size_t i = 0; i < n; i++) {
        int v = migration_version(migs[i].name);
        if (applied[v])
            continue;
        int uv_new = v > max_applied ? v : max_applied;
        if (migration_apply(db, &migs[i], v, uv_new, path, err) != DP_OK)
            return DP_EINTERNAL;
        max_applied = uv_new;
    }
    *out_version = max_applied;
    return DP_OK;
}

/* D15: the database holds the audit log, token hashes and estimator runs (raw client data with
 * keep_data), so a new database file is created here with mode 0600, whatever the umask, before
 * SQLite opens it. SQLite creates the -wal and -shm files with the mode of the database file
 * (os_unix.c, findCreateFileMode), so they are 0600 too. An existing file keeps its mode (the
 * operator may have chosen it); a warning names it when group or others can read it. Any other
 * failure is left to sqlite3_open_v2, whose message names the path. ":memory:" and URI names are
 * left to SQLite. */
static void create_private(const char *path)
{
    if (path[0] == '\0' || strcmp(path, ":memory:") == 0 || strncmp(path, "file:", 5) == 0)
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
    if (fd >= 0) {
        if (fchmod(fd, 0600) != 0) /* the umask may have removed a bit of 0600 */
            dp_log(DP_LOG_WARN, NULL, "cannot chmod 600 the new database %s: %s", path,
                   strerror(errno));
        close(fd);
        return;
    }
    struct stat sb;
    if (errno == EEXIST && stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && (sb.st_mode & 0077) != 0)
        dp_log(DP_LOG_WARN, NULL,
               "database %s has mode %04o: group or others can read it (chmod 600 it and its -wal "
               "and -shm files)",
               path, (unsigned)(sb.st_mode & 07777));
}

store *store_open(const char *path, size_t pool_size, const embed_file *migs, size_t n_migs,
                  dp_err *err)
{
    if (path == NULL || pool_size < 1 || pool_size > STORE_MAX_POOL) {
        dp_err_set(err, DP_EINTERNAL, "db", "store_open: pool size must be 1..%d", STORE_MAX_POOL);
        return NULL;
    }
    store *s = dp_calloc(1, sizeof *s);
    if (s == NULL)
        goto oom;
    s->path = dp_strdup(path);
    s->conns = dp_calloc(pool_size, sizeof *s->conns);
    s->free_list = dp_calloc(pool_size, sizeof *s->free_list);
    if (s->path == NULL || s->conns == NULL || s->free_list == NULL)
        goto oom;
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        dp_err_set(err, DP_EINTERNAL, NULL, "store_open: pthread_mutex_init failed");
        dp_free(s->path);
        dp_free(s->conns);
        dp_free(s->free_list);
        dp_free(s);
        return NULL;
    }
    if (pthread_cond_init(&s->cv, NULL) != 0) {
        dp_err_set(err, DP_EINTERNAL, NULL, "store_open: pthread_cond_init failed");
        pthread_mutex_destroy(&s->mu);
        dp_free(s->path);
        dp_free(s->conns);
        dp_free(s->free_list);
        dp_free(s);
        return NULL;
    }
    create_private(path);
    if (conn_init(&s->conns[0], path, STORE_DB_CREATE, err) != DP_OK)
        goto fail;
    s->n_conns = 1;
    char mode[16];
    int rc = query_text(s->conns[0].db, "PRAGMA journal_mode=WAL", mode, sizeof mode);
    if (rc != SQLITE_OK) {
        dp_err_set(err, DP_EINTERNAL, "db", "cannot use database %s: %s", path,
                   sqlite3_errmsg(s->conns[0].db));
        goto fail;
    }
    if (strcmp(mode, "wal") != 0) {
        dp_err_set(err, DP_EINTERNAL, "db", "database %s refused WAL mode (journal_mode is %s)",
                   path, mode);
        goto fail;
    }
    if (migrate(s->conns[0].db, migs, n_migs, path, &s->schema_version, err) != DP_OK)
        goto fail;
    for (size_t i = 1; i < pool_size; i++) {
        if (conn_init(&s->conns[i], path, STORE_DB_WRITE, err) != DP_OK)
            goto fail;
        s->n_conns = i + 1;
    }
    atomic_init(&s->health_ok_ms, 0);
    for (size_t i = 0; i < pool_size; i++)
        s->free_list[i] = &s->conns[i];
    s->n_free = pool_size;
    return s;
oom:
    dp_err_set(err, DP_ENOMEM, NULL, "out of memory opening the database");
    if (s != NULL) {
        dp_free(s->path);
        dp_free(s->conns);
        dp_free(s->free_list);
        dp_free(s);
    }
    return NULL;
fail:
    s->n_free = s->n_conns; /* nothing was borrowed yet */
    store_free(s);
    return NULL;
}

void store_free(store *s)
{
    if (s == NULL)
        return;
    if (s->n_free != s->n_conns)
        dp_log(DP_LOG_ERROR, NULL, "store: closing with %zu connection(s) still borrowed",
               s->n_conns - s->n_free);
    for (size_t i = 0; i < s->n_conns; i++)
        conn_fini(&s->conns[i]);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    dp_free(s->free_list);
    dp_free(s->conns);
    dp_free(s->path);
    dp_free(s);
}

int store_schema_version(const store *s)
{
    return s->schema_version;
}

store_conn *store_conn_borrow(store *s, dp_err *err)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += STORE_BORROW_WAIT_MS / 1000;
    deadline.tv_nsec += (long)(STORE_BORROW_WAIT_MS % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    store_conn *c = NULL;
    if (pthread_mutex_lock(&s->mu) != 0) {
        dp_err_set(err, DP_EINTERNAL, NULL, "internal error");
        return NULL;
    }
    while (s->n_free == 0) {
        int rc = pthread_cond_timedwait(&s->cv, &s->mu, &deadline);
        if (rc == ETIMEDOUT && s->n_free == 0)
            break;
    }
    if (s->n_free > 0)
        c = s->free_list[--s->n_free];
    pthread_mutex_unlock(&s->mu);
    if (c == NULL)
        dp_err_set(err, DP_EBUSY, NULL,
                   "no database connection became free in time; retry shortly");
    return c;
}

void store_conn_return(store *s, store_conn *c)
{
    if (c == NULL)
        return;
    /* Leave the connection clean for the next borrower: no open transaction, no running statement.
     */
    if (!sqlite3_get_autocommit(c->db)) {
        dp_log(DP_LOG_WARN, NULL, "store: connection returned inside a transaction; rolling back");
        sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    }
    for (size_t i = 0; i < c->n_cache; i++)
        if (sqlite3_stmt_busy(c->cache[i].st)) {
            dp_log(DP_LOG_WARN, NULL, "store: statement returned without reset: %.80s",
                   c->cache[i].sql);
            sqlite3_reset(c->cache[i].st);
        }
    pthread_mutex_lock(&s->mu);
    s->free_list[s->n_free++] = c;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

store_conn *store_conn_open_extra(store *s, dp_err *err)
{
    store_conn *c = dp_calloc(1, sizeof *c);
    if (c == NULL) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    if (conn_init(c, s->path, STORE_DB_WRITE, err) != DP_OK) {
        dp_free(c);
        return NULL;
    }
    return c;
}

void store_conn_close(store_conn *c)
{
    if (c == NULL)
        return;
    conn_fini(c);
    dp_free(c);
}

sqlite3 *store_conn_db(store_conn *c)
{
    return c->db;
}

sqlite3_stmt *store_conn_prepare(store_conn *c, const char *sql, dp_err *err)
{
    for (size_t i = 0; i < c->n_cache; i++)
        if (c->cache[i].sql == sql)
            return c->cache[i].st;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
    if (rc != SQLITE_OK) {
        dp_log(DP_LOG_ERROR, NULL, "sqlite: prepare \"%.120s\": %s", sql, sqlite3_errmsg(c->db));
        sqlite3_finalize(st);
        dp_err_set(err, DP_EINTERNAL, NULL, "database error");
        return NULL;
    }
    if (c->n_cache < STORE_STMT_CACHE) {
        c->cache[c->n_cache].sql = sql;
        c->cache[c->n_cache].st = st;
        c->n_cache++;
        return st;
    }
    /* Cache full: a programming error (more distinct statements than STORE_STMT_CACHE). */
    dp_log(DP_LOG_ERROR, NULL, "store: statement cache full (%d); raise STORE_STMT_CACHE",
           STORE_STMT_CACHE);
    sqlite3_finalize(st);
    dp_err_set(err, DP_EINTERNAL, NULL, "database error");
    return NULL;
}

void store_stmt_done(sqlite3_stmt *st)
{
    if (st == NULL)
        return;
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
}

static int exec_simple(store_conn *c, const char *sql, dp_err *err)
{
    int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return store_err(c, rc, sql, NULL, err);
    return DP_OK;
}

int store_begin(store_conn *c, dp_err *err)
{
    return exec_simple(c, "BEGIN IMMEDIATE", err);
}

int store_commit(store_conn *c, dp_err *err)
{
    int rc = exec_simple(c, "COMMIT", err);
    if (rc != DP_OK)
        store_rollback(c);
    return rc;
}

void store_rollback(store_conn *c)
{
    if (c == NULL || sqlite3_get_autocommit(c->db))
        return;
    int rc = sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        dp_log(DP_LOG_ERROR, NULL, "sqlite: ROLLBACK: %s", sqlite3_errmsg(c->db));
}

static const char SQL_HEALTH[] = "SELECT max(version) FROM schema_migrations";

int store_check_health(store *s, store_conn *c, int64_t max_age_ms, int64_t *age_ms, dp_err *err)
{
    int64_t now = time_mono_ms();
    int64_t last = atomic_load_explicit(&s->health_ok_ms, memory_order_relaxed);
    if (max_age_ms > 0 && last > 0 && now - last < max_age_ms) {
        *age_ms = now - last;
        return DP_OK;
    }
    sqlite3_stmt *st = store_conn_prepare(c, SQL_HEALTH, err);
    if (st == NULL) {
        atomic_store_explicit(&s->health_ok_ms, 0, memory_order_relaxed);
        return err ? err->code : DP_EINTERNAL;
    }
    int rc = sqlite3_step(st);
    int v = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
    store_stmt_done(st);
    if (rc != SQLITE_ROW) {
        atomic_store_explicit(&s->health_ok_ms, 0,
                              memory_order_relaxed); /* never reuse after a failure */
        return store_err(c, rc, "health check", NULL, err);
    }
    if (v != s->schema_version) {
        atomic_store_explicit(&s->health_ok_ms, 0, memory_order_relaxed);
        dp_log(DP_LOG_ERROR, NULL, "store: schema version changed under us: %d, opened at %d", v,
               s->schema_version);
        return dp_err_set(err, DP_EINTERNAL, NULL, "database schema changed while running");
    }
    atomic_store_explicit(&s->health_ok_ms, now, memory_order_relaxed);
    *age_ms = 0;
    return DP_OK;
}

static const char SQL_INSTANCE[] = "SELECT instance_id, created_at_ms FROM instance WHERE id = 1";

int store_read_instance(store_conn *c, char instance_id[STORE_INSTANCE_ID_LEN + 1],
                        int64_t *created_at_ms, const char *req_id, dp_err *err)
{
    sqlite3_stmt *st = store_conn_prepare(c, SQL_INSTANCE, err);
    if (st == NULL)
        return err->code;
    int rc = sqlite3_step(st);
    const char *id = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
    if (rc == SQLITE_DONE ||
        (rc == SQLITE_ROW && (id == NULL || strlen(id) != STORE_INSTANCE_ID_LEN)))
        rc = SQLITE_CORRUPT; /* migration 0001 inserts exactly one row with a 16-character id */
    if (rc != SQLITE_ROW) {
        store_stmt_done(st);
        return store_err(c, rc, "read instance", req_id, err);
    }
    memcpy(instance_id, id, STORE_INSTANCE_ID_LEN + 1);
    *created_at_ms = sqlite3_column_int64(st, 1);
    store_stmt_done(st);
    return DP_OK;
}
