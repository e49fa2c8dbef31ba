/*
 * main.c: dpsilod start-up and shutdown.
 *
 * Order (STYLE.md 2.7):
 *   1. library settings that must precede every thread: gsl_set_error_handler_off() (GSL's default
 *      handler aborts the process), json_object_seed(0);
 *   2. configuration from flags and environment (cfg.h); --help prints the usage and exits 0, a bad
 * value exits 2 naming the flag or variable;
 *   3. block SIGTERM/SIGINT in this thread, so every thread created later inherits the mask and the
 *      signals can only be received here, with sigwait - no signal handler runs at all;
 *   4. open the database and apply migrations (exit 1 with a clear message on failure);
 *   5. start the HTTP server and print exactly one line to stdout:
 *          dpsilod listening on http://HOST:PORT
 *      (flushed at once; scripts parse it, and port 0 becomes the real port);
 *   6. sigwait; then stop in order: HTTP (requests in flight finish, up to MAIN_GRACE_MS), then the
 *      database (every connection closed, WAL checkpointed by SQLite on the last close).
 * Exit status: 0 after a clean stop, 1 when start-up fails, 2 for a usage error.
 */
#include <gsl/gsl_errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dp_log.h"
#include "service/auth.h"
#include "service/cfg.h"
#include "service/embedded.h"
#include "service/http.h"
#include "service/ledger.h"
#include "service/routes.h"
#include "service/store.h"
#include "service/version.h"

#define MAIN_GRACE_MS       10000 /* how long a stop waits for requests in flight */
#define MAIN_BOX_TEXT_WIDTH 76    /* the --auth off warning: 80-column box, "*  " text "*" */

static const char *env_lookup(const char *name)
{
    return getenv(name);
}

/* Access control at start (issue #5): register the admin token, or say loudly that there is none.
 * The token itself is never printed or logged, only the file that holds it. */
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
    char path[CFG_PATH_MAX + 32];
    bool generated = false;
    int64_t id = 0;
    int rc = auth_admin_token_prepare(c->admin_token_file, c->db_path, token, sizeof token, path,
                                      sizeof path, &generated, err);
    if (rc == DP_OK)
        rc = ledger_token_register_admin(led, token, &id, err);
    memset(token, 0, sizeof token);
    if (rc == DP_OK)
        dp_log(DP_LOG_INFO, NULL, "admin token %s %s (mode 0600)",
               generated ? "generated into" : "read from", path);
    return rc;
}

int main(int argc, char **argv)
{
    gsl_set_error_handler_off();
    json_object_seed(0);

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
    http_server *srv = http_server_start(&config, st, led, ROUTES, ROUTES_N, &err);
    if (srv == NULL) {
        fprintf(stderr, "dpsilod: %s\n", err.msg);
        ledger_free(led);
        store_free(st);
        return 1;
    }
    printf("dpsilod listening on http://%s:%u\n", config.host, (unsigned)http_server_port(srv));
    fflush(stdout);
    dp_log(DP_LOG_INFO, NULL, "started: db %s (schema %d), %u threads, max body %zu bytes",
           config.db_path, store_schema_version(st), config.threads, config.max_body_bytes);

    int sig = 0;
    while (sigwait(&sigs, &sig) != 0)
        ;
    dp_log(DP_LOG_INFO, NULL, "signal %d: stopping", sig);
    http_server_stop(srv, MAIN_GRACE_MS);
    ledger_free(led); /* finishes queued ledger ops, then closes its connection */
    store_free(st);
    dp_log(DP_LOG_INFO, NULL, "stopped cleanly");
    return 0;
}
