/*
 * base/cfg.c: flags and environment variables for dpsilod. See base/cfg.h for the table of
 * settings.
 *
 * Settings are applied in three layers: defaults, then the environment, then the command line, so a
 * flag always wins. Each value goes through one setter, so a flag and its variable are validated
 * the same way and an error can name whichever of the two supplied the bad value.
 */
#include "service/base/cfg.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/dp_log.h"

enum {
    OPT_LISTEN,
    OPT_DB,
    OPT_THREADS,
    OPT_MAX_BODY,
    OPT_MAX_UPLOAD,
    OPT_LOG_LEVEL,
    OPT_AUTH,
    OPT_ADMIN_TOKEN,
    OPT_DRAIN_TIMEOUT,
    OPT_HEADER_TIMEOUT,
    OPT_BODY_TIMEOUT,
    OPT_BODY_MIN_RATE,
    OPT_MAX_CONNS_PER_IP,
    /* heavy work (base/compute.h) */
    OPT_COMPUTE_THREADS,
    OPT_COMPUTE_QUEUE,
    OPT_COMPUTE_TIMEOUT,
    OPT_MAX_EST_WORK,
    OPT_MAX_EST_CELLS,
    OPT_MAX_PLD_POINTS,
    OPT_JOB_WORKERS,
    OPT_JOB_THREADS,
    OPT_N
};

static const struct {
    const char *flag; /* command-line name */
    const char *env;  /* environment variable */
} OPTS[OPT_N] = {
    [OPT_LISTEN] = {"--listen", "DPSILO_LISTEN"},
    [OPT_DB] = {"--db", "DPSILO_DB"},
    [OPT_THREADS] = {"--threads", "DPSILO_THREADS"},
    [OPT_MAX_BODY] = {"--max-body", "DPSILO_MAX_BODY"},
    [OPT_MAX_UPLOAD] = {"--max-upload", "DPSILO_MAX_UPLOAD"},
    [OPT_LOG_LEVEL] = {"--log-level", "DPSILO_LOG_LEVEL"},
    [OPT_AUTH] = {"--auth", "DPSILO_AUTH"},
    [OPT_ADMIN_TOKEN] = {"--admin-token-file", "DPSILO_ADMIN_TOKEN_FILE"},
    [OPT_DRAIN_TIMEOUT] = {"--drain-timeout", "DPSILO_DRAIN_TIMEOUT"},
    [OPT_HEADER_TIMEOUT] = {"--header-timeout", "DPSILO_HEADER_TIMEOUT"},
    [OPT_BODY_TIMEOUT] = {"--body-timeout", "DPSILO_BODY_TIMEOUT"},
    [OPT_BODY_MIN_RATE] = {"--body-min-rate", "DPSILO_BODY_MIN_RATE"},
    [OPT_MAX_CONNS_PER_IP] = {"--max-conns-per-ip", "DPSILO_MAX_CONNS_PER_IP"},
    /* heavy work (base/compute.h) */
    [OPT_COMPUTE_THREADS] = {"--compute-threads", "DPSILO_COMPUTE_THREADS"},
    [OPT_COMPUTE_QUEUE] = {"--compute-queue", "DPSILO_COMPUTE_QUEUE"},
    [OPT_COMPUTE_TIMEOUT] = {"--compute-timeout", "DPSILO_COMPUTE_TIMEOUT"},
    [OPT_MAX_EST_WORK] = {"--max-estimator-work", "DPSILO_MAX_ESTIMATOR_WORK"},
    [OPT_MAX_EST_CELLS] = {"--max-estimator-cells", "DPSILO_MAX_ESTIMATOR_CELLS"},
    [OPT_MAX_PLD_POINTS] = {"--max-pld-points", "DPSILO_MAX_PLD_POINTS"},
    [OPT_JOB_WORKERS] = {"--job-workers", "DPSILO_JOB_WORKERS"},
    [OPT_JOB_THREADS] = {"--job-threads", "DPSILO_JOB_THREADS"},
};

void cfg_defaults(cfg *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->host, sizeof c->host, "%s", "127.0.0.1");
    c->port = 8080;
    snprintf(c->db_path, sizeof c->db_path, "%s", "./var/dpsilo.db");
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    c->threads = n < 1 ? 1u : n > CFG_MAX_THREADS ? CFG_MAX_THREADS : (unsigned)n;
    c->max_body_bytes = CFG_DEFAULT_MAX_BODY;
    c->max_upload_bytes = CFG_DEFAULT_MAX_UPLOAD;
    c->log_level = DP_LOG_INFO;
    c->drain_timeout_s = 10;
    c->header_timeout_s = 10;
    c->body_timeout_s = 10;
    c->body_min_rate = 1024;
    c->max_conns_per_ip = 256;
    c->help = false;
    c->version = false;
    /* heavy work (base/compute.h) */
    c->compute_threads = c->threads;
    c->compute_queue = CFG_DEFAULT_COMPUTE_QUEUE;
    c->compute_timeout_s = CFG_DEFAULT_COMPUTE_TIMEOUT_S;
    c->max_estimator_work = CFG_DEFAULT_MAX_EST_WORK;
    c->max_estimator_cells = CFG_DEFAULT_MAX_EST_CELLS;
    c->max_pld_points = CFG_DEFAULT_MAX_PLD_POINTS;
    c->job_workers = 1;
    c->job_threads = 1;
}

/* A positive count written as an integer or in e-notation ("1e10"), at most hi. 0 on success. */
static int parse_count(const char *s, double hi, double *out)
{
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= 1) || !(v <= hi) || v != floor(v))
        return -1;
    *out = v;
    return 0;
}

/* Strict decimal parse into [lo, hi]. Returns 0 on success. */
static int parse_ulong(const char *s, unsigned long lo, unsigned long hi, unsigned long *out)
{
    if (s == NULL || *s < '0' || *s > '9')
        return -1; /* refuses "", "-1", " 1", "+1" */
    errno = 0;
    char *end = NULL;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int cfg_parse_listen(const char *s, char *host, size_t host_len, uint16_t *port, dp_err *err)
{
    const char *colon = s ? strrchr(s, ':') : NULL;
    if (colon == NULL || colon == s)
        return dp_err_set(err, DP_EINVAL, "listen",
                          "listen address must be HOST:PORT (got \"%.64s\")", s ? s : "");
    size_t hl = (size_t)(colon - s);
    char h[CFG_HOST_MAX];
    if (hl >= sizeof h)
        return dp_err_set(err, DP_EINVAL, "listen", "listen host is too long");
    memcpy(h, s, hl);
    h[hl] = '\0';
    if (strcmp(h, "localhost") == 0)
        snprintf(h, sizeof h, "%s", "127.0.0.1");
    struct in_addr a;
    if (inet_pton(AF_INET, h, &a) != 1)
        return dp_err_set(err, DP_EINVAL, "listen",
                          "listen host must be an IPv4 address or localhost (got \"%.64s\")", h);
    unsigned long p;
    if (parse_ulong(colon + 1, 0, 65535, &p) != 0)
        return dp_err_set(err, DP_EINVAL, "listen",
                          "listen port must be an integer in 0..65535 (got \"%.16s\")", colon + 1);
    if (strlen(h) >= host_len)
        return dp_err_set(err, DP_EINVAL, "listen", "listen host is too long");
    snprintf(host, host_len, "%s", h);
    *port = (uint16_t)p;
    return DP_OK;
}

/* An unsigned setting in [lo, hi]; the error names the flag or variable, the range and the unit. */
static int set_uint(unsigned *dst, const char *val, unsigned long lo, unsigned long hi,
                    const char *who, const char *unit, dp_err *err)
{
    unsigned long v;
    if (parse_ulong(val, lo, hi, &v) != 0)
        return dp_err_set(err, DP_EINVAL, who,
                          "%s must be an integer in %lu..%lu %s (got \"%.32s\")", who, lo, hi, unit,
                          val);
    *dst = (unsigned)v;
    return DP_OK;
}

/* Applies one setting; `who` names the flag or variable for error messages. */
static int set_opt(cfg *c, int opt, const char *val, const char *who, dp_err *err)
{
    unsigned long v;
    switch (opt) {
        case OPT_LISTEN: {
            dp_err e2;
            dp_err_clear(&e2);
            if (cfg_parse_listen(val, c->host, sizeof c->host, &c->port, &e2) != DP_OK)
                return dp_err_set(err, DP_EINVAL, who, "%s: %s", who, e2.msg);
            return DP_OK;
        }
        case OPT_DB:
            if (val[0] == '\0' || strlen(val) >= sizeof c->db_path)
                return dp_err_set(err, DP_EINVAL, who,
                                  "%s must be a non-empty path shorter than %zu bytes", who,
                                  sizeof c->db_path);
            snprintf(c->db_path, sizeof c->db_path, "%s", val);
            return DP_OK;
        case OPT_THREADS:
            if (parse_ulong(val, 1, CFG_MAX_THREADS, &v) != 0)
                return dp_err_set(err, DP_EINVAL, who,
                                  "%s must be an integer in 1..%d (got \"%.32s\")", who,
                                  CFG_MAX_THREADS, val);
            c->threads = (unsigned)v;
            return DP_OK;
        case OPT_MAX_BODY:
            if (parse_ulong(val, 1, CFG_MAX_BODY_LIMIT, &v) != 0)
                return dp_err_set(err, DP_EINVAL, who,
                                  "%s must be an integer in 1..%u bytes (got \"%.32s\")", who,
                                  CFG_MAX_BODY_LIMIT, val);
            c->max_body_bytes = (size_t)v;
            return DP_OK;
        case OPT_MAX_UPLOAD:
            if (parse_ulong(val, 1, CFG_MAX_UPLOAD_LIMIT, &v) != 0)
                return dp_err_set(err, DP_EINVAL, who,
                                  "%s must be an integer in 1..%zu bytes (got \"%.32s\")", who,
                                  CFG_MAX_UPLOAD_LIMIT, val);
            c->max_upload_bytes = (size_t)v;
            return DP_OK;
        case OPT_LOG_LEVEL: {
            int l = dp_log_level_parse(val);
            if (l < 0)
                return dp_err_set(err, DP_EINVAL, who,
                                  "%s must be one of debug, info, warn, error, off (got \"%.32s\")",
                                  who, val);
            c->log_level = l;
            return DP_OK;
        }
        case OPT_AUTH:
            if (strcmp(val, "on") != 0 && strcmp(val, "off") != 0)
                return dp_err_set(err, DP_EINVAL, who, "%s must be on or off (got \"%.32s\")", who,
                                  val);
            c->auth_off = strcmp(val, "off") == 0;
            return DP_OK;
        case OPT_ADMIN_TOKEN:
            if (val[0] == '\0' || strlen(val) >= sizeof c->admin_token_file)
                return dp_err_set(err, DP_EINVAL, who,
                                  "%s must be a non-empty path shorter than %zu bytes", who,
                                  sizeof c->admin_token_file);
            snprintf(c->admin_token_file, sizeof c->admin_token_file, "%s", val);
            return DP_OK;
        case OPT_JOB_WORKERS:
            return set_uint(&c->job_workers, val, 0, CFG_MAX_JOB_WORKERS, who, "workers", err);
        case OPT_JOB_THREADS:
            return set_uint(&c->job_threads, val, 1, CFG_MAX_JOB_WORKERS, who, "threads", err);
        case OPT_DRAIN_TIMEOUT:
            return set_uint(&c->drain_timeout_s, val, 0, CFG_MAX_DRAIN_S, who, "seconds", err);
        case OPT_HEADER_TIMEOUT:
            return set_uint(&c->header_timeout_s, val, 1, CFG_MAX_HEADER_S, who, "seconds", err);
        case OPT_BODY_TIMEOUT:
            return set_uint(&c->body_timeout_s, val, 1, CFG_MAX_BODY_S, who, "seconds", err);
        case OPT_BODY_MIN_RATE:
            return set_uint(&c->body_min_rate, val, 0, CFG_MAX_BODY_RATE, who, "bytes per second",
                            err);
        case OPT_MAX_CONNS_PER_IP:
            return set_uint(&c->max_conns_per_ip, val, 0, CFG_MAX_CONNS_PER_IP, who, "connections",
                            err);
        /* heavy work (base/compute.h) */
        case OPT_COMPUTE_THREADS:
            if (parse_ulong(val, 1, CFG_MAX_THREADS, &v) != 0)
                return dp_err_set(err, DP_EINVAL, who,
                                  "%s must be an integer in 1..%d (got \"%.32s\")", who,
                                  CFG_MAX_THREADS, val);
            c->compute_threads = (unsigned)v;
            return DP_OK;
        case OPT_COMPUTE_QUEUE:
            if (parse_ulong(val, 1, CFG_MAX_COMPUTE_QUEUE, &v) != 0)
                return dp_err_set(err, DP_EINVAL, who,
                                  "%s must be an integer in 1..%d (got \"%.32s\")", who,
                                  CFG_MAX_COMPUTE_QUEUE, val);
            c->compute_queue = (size_t)v;
            return DP_OK;
        case OPT_COMPUTE_TIMEOUT:
            return set_uint(&c->compute_timeout_s, val, 1, CFG_MAX_COMPUTE_TIMEOUT_S, who,
                            "seconds", err);
        case OPT_MAX_EST_WORK:
        case OPT_MAX_EST_CELLS: {
            double d;
            if (parse_count(val, CFG_MAX_EST_LIMIT, &d) != 0)
                return dp_err_set(err, DP_EINVAL, who,
                                  "%s must be a whole number in 1..%g, e.g. 1e10 (got \"%.32s\")",
                                  who, CFG_MAX_EST_LIMIT, val);
            if (opt == OPT_MAX_EST_WORK)
                c->max_estimator_work = d;
            else
                c->max_estimator_cells = d;
            return DP_OK;
        }
        case OPT_MAX_PLD_POINTS:
            if (parse_ulong(val, CFG_MIN_PLD_POINTS, CFG_MAX_PLD_POINTS, &v) != 0)
                return dp_err_set(err, DP_EINVAL, who,
                                  "%s must be an integer in %d..%zu (got \"%.32s\")", who,
                                  CFG_MIN_PLD_POINTS, CFG_MAX_PLD_POINTS, val);
            c->max_pld_points = (size_t)v;
            return DP_OK;
        default:
            return dp_err_set(err, DP_EINTERNAL, NULL, "unknown option index");
    }
}

int cfg_parse(cfg *c, int argc, char *const argv[], cfg_getenv_fn getenv_fn, dp_err *err)
{
    cfg_defaults(c);
    if (getenv_fn != NULL) {
        for (int o = 0; o < OPT_N; o++) {
            const char *v = getenv_fn(OPTS[o].env);
            if (v != NULL && set_opt(c, o, v, OPTS[o].env, err) != DP_OK)
                return err ? err->code : DP_EINVAL;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            c->help = true;
            continue;
        }
        if (strcmp(a, "--version") == 0) {
            c->version = true;
            continue;
        }
        int found = -1;
        const char *val = NULL;
        for (int o = 0; o < OPT_N && found < 0; o++) {
            size_t fl = strlen(OPTS[o].flag);
            if (strncmp(a, OPTS[o].flag, fl) != 0)
                continue;
            if (a[fl] == '\0') {
                if (i + 1 >= argc)
                    return dp_err_set(err, DP_EINVAL, OPTS[o].flag, "%s needs a value",
                                      OPTS[o].flag);
                found = o;
                val = argv[++i];
            } else if (a[fl] == '=') {
                found = o;
                val = a + fl + 1;
            }
        }
        if (found < 0)
            return dp_err_set(err, DP_EINVAL, "argv", "unknown argument \"%.64s\" (see --help)", a);
        if (set_opt(c, found, val, OPTS[found].flag, err) != DP_OK)
            return err ? err->code : DP_EINVAL;
    }
    /* Without tokens anyone who can connect may spend any budget: allowed only on loopback. */
    if (c->auth_off && strncmp(c->host, "127.", 4) != 0)
        return dp_err_set(
            err, DP_EINVAL, "--auth",
            "--auth off is allowed only when listening on a loopback address (127.x.x.x), "
            "not %s",
            c->host);
    return DP_OK;
}

const char *cfg_usage(void)
{
    return "usage: dpsilod [options]\n"
           "\n"
           "Differential-privacy accounting service (HTTP/JSON). Every option can also be set from "
           "the\n"
           "environment variable shown; a flag wins over the variable.\n"
           "\n"
           "  --listen HOST:PORT  address to bind (IPv4 or localhost); port 0 picks a free port\n"
           "                      [DPSILO_LISTEN, default 127.0.0.1:8080]\n"
           "  --db PATH           SQLite database file, created if missing\n"
           "                      [DPSILO_DB, default ./var/dpsilo.db]\n"
           "  --threads N         HTTP worker threads and database connections, 1..64\n"
           "                      [DPSILO_THREADS, default: number of cores]\n"
           "  --max-body BYTES    largest request body accepted by any route (routes may cap "
           "lower)\n"
           "                      [DPSILO_MAX_BODY, default 1048576]\n"
           "  --max-upload BYTES  largest data-set upload (POST /v1/datasets), not bounded by\n"
           "                      --max-body [DPSILO_MAX_UPLOAD, default 268435456]\n"
           "  --log-level LEVEL   debug, info, warn, error or off; access lines are info\n"
           "                      [DPSILO_LOG_LEVEL, default info]\n"
           "  --auth on|off       bearer tokens for silos and budgets; off only on loopback\n"
           "                      [DPSILO_AUTH, default on]\n"
           "  --admin-token-file PATH  file holding the admin token [DPSILO_ADMIN_TOKEN_FILE,\n"
           "                      default: <db dir>/admin.token, generated (mode 0600) if "
           "missing]\n"
           "  --drain-timeout SECONDS  on SIGTERM/SIGINT, how long to wait for requests in "
           "flight\n"
           "                      (new ones get 503) [DPSILO_DRAIN_TIMEOUT, default 10]\n"
           "  --header-timeout SECONDS  a new connection must send its request headers within "
           "this\n"
           "                      (else 408) [DPSILO_HEADER_TIMEOUT, default 10]\n"
           "  --body-timeout SECONDS  grace for a request body after its headers; then it must\n"
           "                      keep up --body-min-rate (else the connection is closed)\n"
           "                      [DPSILO_BODY_TIMEOUT, default 10]\n"
           "  --body-min-rate BYTES  a body must arrive at this many bytes/s on average after\n"
           "                      the grace, 0 = a fixed deadline [DPSILO_BODY_MIN_RATE, default "
           "1024]\n"
           "  --max-conns-per-ip N  connections one client address may hold, 0 = no limit\n"
           "                      [DPSILO_MAX_CONNS_PER_IP, default 256]\n"
           "  --compute-threads N threads running estimators, PLD and tuning plans, 1..64\n"
           "                      [DPSILO_COMPUTE_THREADS, default: number of cores]\n"
           "  --compute-queue N   requests waiting for a compute thread before 503, 1..65536\n"
           "                      [DPSILO_COMPUTE_QUEUE, default 64]\n"
           "  --compute-timeout SECONDS  a heavy request still waiting after this is answered\n"
           "                      503; a running one is cancelled, nothing charged, 1..86400\n"
           "                      [DPSILO_COMPUTE_TIMEOUT, default 120]\n"
           "  --max-estimator-work N  cap on clients x dims x components x n_init x max_iter\n"
           "                      [DPSILO_MAX_ESTIMATOR_WORK, default 1e10]\n"
           "  --max-estimator-cells N cap on clients x (components + dims), the result's size\n"
           "                      [DPSILO_MAX_ESTIMATOR_CELLS, default 4000000]\n"
           "  --max-pld-points N  FFT length cap of one PLD composition, 64..16777216\n"
           "                      [DPSILO_MAX_PLD_POINTS, default 4194304]\n"
           "  --job-workers N     training jobs run at once, 0..64 (0: jobs wait queued)\n"
           "                      [DPSILO_JOB_WORKERS, default 1]\n"
           "  --job-threads N     threads one job's round fans out to, 1..64\n"
           "                      [DPSILO_JOB_THREADS, default 1]\n"
           "  --help              show this text and exit\n"
           "  --version           show the version (and the libraries' versions) and exit\n"
           "\n"
           "On start it prints one line to stdout: dpsilod listening on http://HOST:PORT\n"
           "SIGTERM or SIGINT stops it: new requests get 503, requests in flight finish (up to\n"
           "--drain-timeout); a second SIGTERM or SIGINT exits at once (status 3).\n";
}
