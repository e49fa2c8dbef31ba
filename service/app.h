/*
 * app.h: the application, as handlers and background work see it.
 *
 * One struct of borrowed pointers to the daemon's long-lived subsystems, built once by main.c and
 * handed to every handler as rq->app (http/server.h). A new subsystem (the training jobs, the event
 * hub) becomes one more field here instead of one more field in every request. Only opaque types
 * are declared, so that http/ can carry a `const app *` without including the ledger or the jobs.
 *
 * Lifetime: everything pointed to outlives the HTTP server and the compute pool; nothing here is
 * owned by the struct. Fields may be NULL where a caller has no such subsystem (a unit test that
 * calls one handler, the command-line tool); each handler says which fields it needs.
 */
#ifndef DPSILO_SERVICE_APP_H
#define DPSILO_SERVICE_APP_H

struct cfg;
struct store;
struct ledger;
struct db_writer;
struct compute_pool;
struct job_runner;
struct http_metrics;

typedef struct app {
    const struct cfg *cfg;        /* daemon configuration, read-only (base/cfg.h) */
    struct store *store;          /* the connection pool (db/store.h); queries use rq->db */
    struct ledger *ledger;        /* the budget ledger (ledger/ledger.h), thread-safe */
    struct db_writer *writer;     /* the database's one writer (db/writer.h), thread-safe: every
                                     write that is not a charge goes through it (the ledger's own,
                                     ledger_writer); NULL only without a ledger (unit tests, the
                                     command-line tool) */
    struct compute_pool *compute; /* the bounded pool for heavy work (base/compute.h) */
    struct http_metrics *metrics; /* the server's request metrics (http/metrics.h), for /metrics */
    struct job_runner *jobs;      /* the training-job workers (jobs/runner.h), thread-safe; NULL:
                                     none (jobs stay queued until a daemon with workers runs) */
} app;

#endif
