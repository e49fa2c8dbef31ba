/*
 * main.c: dpsilod start-up and shutdown.
 *
 * Order (every thread is started here, after the settings it depends on):
 *   1. library settings that must precede every thread: gsl_set_error_handler_off() (GSL's default
 *      handler aborts the process), json_object_seed(0), json_set_alloc_funcs(dp_malloc, dp_free)
 *      (one allocator: text from jansson and from dp_alloc is released the same way, and the
 *      failure-injection tests reach jansson as they would here);
 *   2. configuration from flags and environment (base/cfg.h); --help prints the usage and exits
 *      0, a bad value exits 2 naming the flag or variable;
 *   3. block SIGTERM/SIGINT in this thread, so every thread created later inherits the mask; once
 *      every thread is started, this thread installs a handler that only writes the signal's
 *      number to a pipe (the self-pipe trick) and unblocks them. A thread a library started before
 *      main (OpenBLAS's pthread build starts its workers from a constructor, with no signal
 *      blocked) may then take the signal too: its handler runs there, harmlessly, and this thread
 *      reads the pipe. (With sigwait alone, a signal delivered to such a thread killed the
 *      process: default action.)
 *   4. open the database and apply migrations (exit 1 with a clear message on failure);
 *   5. start the HTTP server and print exactly one line to stdout:
 *          dpsilod listening on http://HOST:PORT
 *      (flushed at once; scripts parse it, and port 0 becomes the real port);
 *   6. wait on the pipe; then the drain, on a thread of its own: HTTP (new requests get 503 with
 *      Connection: close, requests in flight finish, up to --drain-timeout), then the ledger and
 *      the database (every connection closed, WAL checkpointed by SQLite on the last close).
 *      Meanwhile this thread keeps waiting for signals: a second SIGTERM or SIGINT ends the process
 *      at once with _exit(MAIN_EXIT_FORCED), and so does a drain still running MAIN_CLOSE_GRACE_S
 *      after the drain timeout (a handler that never returns). Nothing acknowledged is lost that
 *      way: an answer is sent only after its COMMIT, and SQLite rolls back what was not committed.
 * Exit status: 0 after a stop (also when requests were cut off at the drain timeout), 1 when
 * start-up fails, 2 for a usage error, 3 when the stop was forced (second signal, or the drain
 * could not finish).
 */
#include <gsl/gsl_errno.h>
#include <jansson.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/dp_alloc.h"
#include "common/dp_log.h"
#include "service/api/auth.h"
#include "service/app.h"
#include "service/base/cfg.h"
#include "service/base/compute.h"
#include "service/base/embedded.h"
#include "service/http/server.h"
#include "service/jobs/runner.h"
#include "service/ledger/ledger.h"
#include "service/api/routes.h"
#include "service/db/store.h"
#include "service/base/version.h"

#define MAIN_CLOSE_GRACE_S  5  /* after the drain timeout, how long closing may take */
#define MAIN_EXIT_FORCED    3  /* exit status of a forced stop */
#define MAIN_SIGWAIT_MS     50 /* the drain's progress is checked this often */
#define MAIN_BOX_TEXT_WIDTH 76 /* the --auth off warning: 80-column box, "*  " text "*" */

static const char *env_lookup(const char *name)
{
    return getenv(name);
}

/* Access control at start (issue #5, issue 10): install the admin token - the one in the file is
 * registered and every other admin token revoked, so changing the file and restarting rotates it -
 * or say loudly that there is none. The token itself is never printed or logged, only the file
 * that holds it and its real mode. */
static int start_auth(const cfg *c, ledger *led, dp_err *err)
{
    if (c->auth_off) {
        /* Every text line is padded to the same width as the border (a host longer than the
         * field only pushes its own line's right edge out). */
        char who[128];
        snprintf(who, sizeof who,
                 "Anyone who can connect to %s may create silos and spend budgets.", c->host);
        const char *lines[] = {
            "WARNING: dpsilod is running with --auth off: there is NO ACCESS "
            "CONTROL.",
            who, "This is allowed only on a loopback address, for local development."};
        const char *border = "****************************************"
                             "****************************************";
        fprintf(stderr, "\n%s\n", border);
        for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
            fprintf(stderr, "*  %-*s*\n", MAIN_BOX_TEXT_WIDTH, lines[i]);
        fprintf(stderr, "%s\n\n", border);
        dp_log(DP_LOG_WARN, NULL, "AUTH IS OFF: no bearer tokens are checked (loopback only)");
        return DP_OK;
    }
    char token[AUTH_TOKEN_MAX + 1];
    auth_token_file tf;
    int64_t id = 0, n_revoked = 0;
    int rc =
        auth_admin_token_prepare(c->admin_token_file, c->db_path, token, sizeof token, &tf, err);
    if (rc == DP_OK)
        rc = ledger_token_install_admin(led, token, &id, &n_revoked, err);
    memset(token, 0, sizeof token);
    if (rc != DP_OK)
        return rc;
    /* The real mode (D12): a file readable by group or others leaks the token, though it is not
     * refused (only writable ones are). */
    dp_log((tf.mode & 044) != 0 ? DP_LOG_WARN : DP_LOG_INFO, NULL,
           "admin token %s %s (mode %04o%s)", tf.generated ? "generated into" : "read from",
           tf.path, tf.mode,
           (tf.mode & 044) != 0 ? ", readable by group or others: chmod 600 it" : "");
    if (n_revoked > 0)
        dp_log(DP_LOG_INFO, NULL, "admin token rotated: %lld earlier admin token%s revoked",
               (long long)n_revoked, n_revoked == 1 ? "" : "s");
    return DP_OK;
}

/* The drain (step 6), run on its own thread so that this one can still take a second signal. */
typedef struct drain {
    http_server *srv;
    job_runner *jobs;
    compute_pool *pool;
    ledger *led;
    store *st;
    unsigned drain_ms;
    int http_rc;     /* http_server_stop's result */
    atomic_int done; /* 1 once the thread has finished */
} drain;

static void *drain_main(void *arg)
{
    drain *d = arg;
    compute_pool_stop(d->pool); /* waiting heavy work is answered 503, running work cancelled */
    job_runner_stop(d->jobs);   /* each running job ends its round and is requeued */
    d->http_rc = http_server_stop(d->srv, d->drain_ms);
    if (d->http_rc >= 0) { /* -1: MHD still runs; the process ends without closing anything */
        compute_pool_free(d->pool); /* after the server: no task owes a connection a wake-up */
        job_runner_free(d->jobs);
        ledger_free(d->led); /* finishes queued ledger ops, then closes its connection */
        store_free(d->st);
    }
    atomic_store(&d->done, 1);
    return NULL;
}

/* The self-pipe of SIGTERM/SIGINT (step 3): the handler writes the signal's number, this thread
 * reads it. */
static int stop_pipe[2] = {-1, -1};

static void on_stop_signal(int sig)
{
    int saved = errno;
    unsigned char c = (unsigned char)sig;
    ssize_t w = write(stop_pipe[1], &c, 1); /* async-signal-safe; a full pipe drops a repeat */
    (void)w;
    errno = saved;
}

/* Installs the handler and unblocks the signals in this thread. 0, or -1. */
static int stop_signals_install(const sigset_t *sigs)
{
    if (pipe(stop_pipe) != 0)
        return -1;
    for (int i = 0; i < 2; i++)
        if (fcntl(stop_pipe[i], F_SETFD, FD_CLOEXEC) != 0)
            return -1;
    if (fcntl(stop_pipe[1], F_SETFL, O_NONBLOCK) != 0)
        return -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0)
        return -1;
    return pthread_sigmask(SIG_UNBLOCK, sigs, NULL) == 0 ? 0 : -1;
}

/* The next stop signal's number, or 0 when timeout_ms (-1: none) passes first. */
static int stop_signal_wait(int timeout_ms)
{
    struct pollfd p = {.fd = stop_pipe[0], .events = POLLIN, .revents = 0};
    int r = poll(&p, 1, timeout_ms);
    unsigned char c = 0;
    if (r > 0 && read(stop_pipe[0], &c, 1) == 1)
        return c;
    return 0;
}

static int64_t mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec;
}

int main(int argc, char **argv)
{
    gsl_set_error_handler_off();
    json_object_seed(0);
    json_set_alloc_funcs(dp_malloc, dp_free);

    static cfg config; /* immutable after parsing; the only configuration object */
    dp_err err;
    dp_err_clear(&err);
    if (cfg_parse(&config, argc, argv, env_lookup, &err) != DP_OK) {
        fprintf(stderr, "dpsilod: %s\n%s", err.msg, "try: dpsilod --help\n");
        return 2;
    }
    if (config.help) {
        fputs(cfg_usage(), stdout);
        return 0;
    }
    if (config.version) {
        char line[256];
        version_line("dpsilod", line, sizeof line);
        puts(line);
        return 0;
    }
    dp_log_set_level(config.log_level);

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    if (pthread_sigmask(SIG_BLOCK, &sigs, NULL) != 0) {
        fprintf(stderr, "dpsilod: cannot block signals\n");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN); /* a client closing early must not kill the daemon */

    store *st =
        store_open(config.db_path, config.threads, EMBED_MIGRATIONS, EMBED_MIGRATIONS_N, &err);
    if (st == NULL) {
        dp_log(DP_LOG_ERROR, NULL, "start-up failed: %s", err.msg);
        fprintf(stderr, "dpsilod: %s\n", err.msg);
        return 1;
    }
    /* The budget ledger (issue #5): its committer thread owns the ledger's write connection. */
    ledger *led = ledger_open(config.db_path, &err);
    if (led == NULL || start_auth(&config, led, &err) != DP_OK) {
        dp_log(DP_LOG_ERROR, NULL, "start-up failed: %s", err.msg);
        fprintf(stderr, "dpsilod: %s\n", err.msg);
        ledger_free(led);
        store_free(st);
        return 1;
    }
    /* Heavy work (estimators, PLD, tuning plans) runs here, off the HTTP threads (base/compute.h).
     */
    compute_pool *pool = compute_pool_alloc(config.compute_threads, config.compute_queue,
                                            config.compute_timeout_s * 1000u, &err);
    /* What every handler borrows (service/app.h); the server adds its metrics. */
    /* The writer is the ledger's (it owns it, its idle hook and its stop order): handlers write
     * through it too, so that the database has one writer (db/writer.h). */
    /* Training jobs (jobs/runner.h): jobs left running by a crash are requeued first. */
    job_runner_cfg jc = {config.job_workers, config.job_threads};
    job_runner *jobs =
        pool == NULL ? NULL : job_runner_start(st, led, ledger_writer(led), &jc, &err);
    const app the_app = {.cfg = &config,
                         .store = st,
                         .ledger = led,
                         .writer = ledger_writer(led),
                         .compute = pool,
                         .jobs = jobs};
    http_server *srv = jobs == NULL
                           ? NULL
                           : http_server_start(&the_app, ROUTES, ROUTES_N, auth_authenticate, &err);
    if (srv == NULL) {
        fprintf(stderr, "dpsilod: %s\n", err.msg);
        job_runner_free(jobs);
        compute_pool_free(pool);
        ledger_free(led);
        store_free(st);
        return 1;
    }
    printf("dpsilod listening on http://%s:%u\n", config.host, (unsigned)http_server_port(srv));
    fflush(stdout);
    dp_log(DP_LOG_INFO, NULL, "started: db %s (schema %d), %u threads, max body %zu bytes",
           config.db_path, store_schema_version(st), config.threads, config.max_body_bytes);
    dp_log(DP_LOG_INFO, NULL,
           "compute pool: %u threads, queue %zu; job workers: %u (%u threads each)",
           config.compute_threads, config.compute_queue, config.job_workers, config.job_threads);

    if (stop_signals_install(&sigs) != 0) {
        dp_log(DP_LOG_ERROR, NULL, "cannot install the stop-signal handler (errno %d)", errno);
        _exit(1);
    }
    int sig = 0;
    while ((sig = stop_signal_wait(-1)) == 0)
        ;
    dp_log(DP_LOG_INFO, NULL,
           "signal %d: draining (new requests get 503, up to %u s for requests in flight; a "
           "second signal exits at once)",
           sig, config.drain_timeout_s);
    drain d = {.srv = srv,
               .jobs = jobs,
               .pool = pool,
               .led = led,
               .st = st,
               .drain_ms = config.drain_timeout_s * 1000u};
    atomic_init(&d.done, 0);
    pthread_t th;
    if (pthread_create(&th, NULL, drain_main, &d) != 0) {
        drain_main(&d); /* no thread: drain here, without the second-signal exit */
    } else {
        int64_t give_up = mono_s() + (int64_t)config.drain_timeout_s + MAIN_CLOSE_GRACE_S;
        while (!atomic_load(&d.done)) {
            int s2 = stop_signal_wait(MAIN_SIGWAIT_MS);
            if (s2 > 0) {
                dp_log(DP_LOG_WARN, NULL,
                       "signal %d during the drain: exiting now (what was acknowledged is "
                       "committed; requests in flight are dropped)",
                       s2);
                _exit(MAIN_EXIT_FORCED);
            }
            if (mono_s() > give_up) {
                dp_log(DP_LOG_ERROR, NULL,
                       "the stop did not finish %d s after the drain timeout: exiting now",
                       MAIN_CLOSE_GRACE_S);
                _exit(MAIN_EXIT_FORCED);
            }
        }
        pthread_join(th, NULL);
    }
    if (d.http_rc < 0) {
        dp_log(DP_LOG_WARN, NULL, "exiting without closing the ledger (answers still owed)");
        _exit(MAIN_EXIT_FORCED);
    }
    if (d.http_rc > 0)
        dp_log(DP_LOG_INFO, NULL,
               "stopped; requests still in flight at the drain timeout were "
               "cut off");
    else
        dp_log(DP_LOG_INFO, NULL, "stopped cleanly");
    return 0;
}
