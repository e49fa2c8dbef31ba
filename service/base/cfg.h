/*
 * cfg: dpsilod's configuration from flags and environment variables.
 *
 * Each setting has a flag and an environment variable; a flag wins over the variable, which wins
 * over the default:
 *
 *   --listen HOST:PORT   DPSILO_LISTEN     127.0.0.1:8080  (port 0 = pick a free port)
 *   --db PATH            DPSILO_DB         ./var/dpsilo.db
 *   --threads N          DPSILO_THREADS    number of online cores (1..CFG_MAX_THREADS)
 *   --max-body BYTES     DPSILO_MAX_BODY   1048576; an upper bound on every route's own body cap
 *   --max-upload BYTES   DPSILO_MAX_UPLOAD 268435456; the cap of data-set uploads (POST
 *                                          /v1/datasets), which --max-body does not bound
 *   --log-level LEVEL    DPSILO_LOG_LEVEL  info (debug, info, warn, error, off)
 *   --auth on|off        DPSILO_AUTH       on; off is refused unless HOST is a loopback address
 *   --admin-token-file P DPSILO_ADMIN_TOKEN_FILE  (none: <db dir>/admin.token, made at first start)
 *   --drain-timeout S    DPSILO_DRAIN_TIMEOUT     10; a stop waits this long for requests in flight
 *   --header-timeout S   DPSILO_HEADER_TIMEOUT    10; a new connection's request headers deadline
 *   --body-timeout S     DPSILO_BODY_TIMEOUT      10; a request body's grace (from its headers)
 *   --body-min-rate B    DPSILO_BODY_MIN_RATE     1024; after the grace, a body must have
 *                                                 arrived at B bytes/s on average (0 = fixed
 *                                                 deadline)
 *   --max-conns-per-ip N DPSILO_MAX_CONNS_PER_IP  256; connections per client address, 0 = no limit
 *
 * Heavy work (issue 10, "never starved"; service/base/compute.h):
 *   --compute-threads N       DPSILO_COMPUTE_THREADS       number of online cores (1..64)
 *   --compute-queue N         DPSILO_COMPUTE_QUEUE         64 waiting requests (1..65536);
 *                                                          full: 503
 *   --compute-timeout S       DPSILO_COMPUTE_TIMEOUT       120 (1..86400): a heavy request still
 *                                                          waiting is answered 503, a running one
 *                                                          is cancelled (nothing charged)
 *   --max-estimator-work N    DPSILO_MAX_ESTIMATOR_WORK    1e10 (clients x dims x components x
 *                                                          n_init x max_iter; more: 400)
 *   --max-estimator-cells N   DPSILO_MAX_ESTIMATOR_CELLS   4000000 (clients x (components + dims);
 *                                                          more: 413)
 * Training jobs (jobs/runner.h):
 *   --job-workers N           DPSILO_JOB_WORKERS           1 (0..64): jobs trained at once
 *   --job-threads N           DPSILO_JOB_THREADS           1 (1..64): threads one job's round uses
 *   --max-pld-points N        DPSILO_MAX_PLD_POINTS        4194304 (FFT length of one PLD
 *                                                          composition, 64..16777216)
 *
 * Flags take their value as the next argument or after '=' (--db=x). Parsing is strict: strtol with
 * an end pointer, ranges checked, unknown flags refused; the error names the flag or variable.
 *
 * Ownership: cfg_parse fills a caller-owned struct; all strings are copied into fixed buffers.
 * Thread-safety: a cfg is built once by main before any thread starts and is read-only afterwards
 * (the daemon's only global is a const cfg *).
 */
#ifndef DP_SERVICE_CFG_H
#define DP_SERVICE_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dp_err.h"

#define CFG_MAX_THREADS               64
#define CFG_MAX_JOB_WORKERS           64
#define CFG_MAX_BODY_LIMIT            (64u * 1024u * 1024u) /* --max-body may not exceed 64 MiB */
#define CFG_DEFAULT_MAX_BODY          (1024u * 1024u)
#define CFG_MAX_UPLOAD_LIMIT          ((size_t)4 << 30) /* --max-upload may not exceed 4 GiB */
#define CFG_DEFAULT_MAX_UPLOAD        ((size_t)256 << 20)
#define CFG_HOST_MAX                  64
#define CFG_PATH_MAX                  1024
#define CFG_MAX_DRAIN_S               3600
#define CFG_MAX_HEADER_S              3600
#define CFG_MAX_BODY_S                86400
#define CFG_MAX_BODY_RATE             1073741824
#define CFG_MAX_CONNS_PER_IP          1000000
#define CFG_MAX_COMPUTE_QUEUE         65536
#define CFG_DEFAULT_COMPUTE_QUEUE     64
#define CFG_DEFAULT_COMPUTE_TIMEOUT_S 120
#define CFG_MAX_COMPUTE_TIMEOUT_S     86400
#define CFG_DEFAULT_MAX_EST_WORK      1e10
#define CFG_DEFAULT_MAX_EST_CELLS     4e6
#define CFG_MAX_EST_LIMIT             1e15 /* largest cap either estimator flag accepts */
#define CFG_DEFAULT_MAX_PLD_POINTS    ((size_t)1 << 22) /* = ACCT_PLD_DEFAULT_MAX_GRID */
#define CFG_MIN_PLD_POINTS            64
#define CFG_MAX_PLD_POINTS            ((size_t)1 << 24) /* = ACCT_PLD_MAX_GRID */

typedef struct cfg {
    char host[CFG_HOST_MAX];    /* IPv4 literal to bind, e.g. "127.0.0.1" ("localhost" is mapped) */
    uint16_t port;              /* TCP port; 0 = ephemeral */
    char db_path[CFG_PATH_MAX]; /* SQLite file */
    unsigned threads;           /* MHD thread-pool size = SQLite pool size, 1..CFG_MAX_THREADS */
    size_t max_body_bytes;      /* global request-body cap, bytes, 1..CFG_MAX_BODY_LIMIT */
    size_t max_upload_bytes;    /* data-set upload cap, bytes, 1..CFG_MAX_UPLOAD_LIMIT */
    int log_level;              /* DP_LOG_* */
    bool auth_off;              /* --auth off: no bearer tokens (loopback only, issue #5) */
    char admin_token_file[CFG_PATH_MAX]; /* --admin-token-file; "" = <db dir>/admin.token */
    unsigned drain_timeout_s;            /* stop: wait for requests in flight, 0..CFG_MAX_DRAIN_S */
    unsigned header_timeout_s;           /* first request's headers deadline, 1..CFG_MAX_HEADER_S */
    unsigned body_timeout_s;             /* body grace from the headers, 1..CFG_MAX_BODY_S */
    unsigned body_min_rate;              /* body bytes/s after the grace, 0..CFG_MAX_BODY_RATE */
    unsigned max_conns_per_ip;           /* per client address; 0 = no limit */
    bool help;                           /* --help was given: print cfg_usage and exit 0 */
    bool version;                        /* --version was given: print version_line and exit 0 */
    /* heavy work (base/compute.h) */
    unsigned compute_threads;   /* compute pool threads, 1..CFG_MAX_THREADS */
    size_t compute_queue;       /* waiting tasks before 503, 1..CFG_MAX_COMPUTE_QUEUE */
    unsigned compute_timeout_s; /* a heavy task's deadline, 1..CFG_MAX_COMPUTE_TIMEOUT_S */
    double max_estimator_work;  /* cap on clients*dims*components*n_init*max_iter */
    double max_estimator_cells; /* cap on clients*(components + dims) (memory) */
    size_t max_pld_points;      /* FFT length cap of a PLD composition */
    /* training jobs (jobs/runner.h) */
    unsigned job_workers; /* 0..CFG_MAX_JOB_WORKERS */
    unsigned job_threads; /* 1..CFG_MAX_JOB_WORKERS */
} cfg;

/* Fills c with the defaults above (threads from the number of online cores). */
void cfg_defaults(cfg *c);

/* Lookup function for environment variables; returns a borrowed string or NULL. Tests pass their
 * own. */
typedef const char *(*cfg_getenv_fn)(const char *name);

/* Parses argv[1..argc-1] over the environment (getenv_fn may be NULL: no environment) on top of the
 * defaults. Returns DP_OK or DP_EINVAL with err->field naming the flag ("--threads") or variable
 * ("DPSILO_THREADS"). On error c holds unspecified (but valid) values. */
int cfg_parse(cfg *c, int argc, char *const argv[], cfg_getenv_fn getenv_fn, dp_err *err);

/* Parses "HOST:PORT" (HOST an IPv4 literal or "localhost"). Writes host and port. */
int cfg_parse_listen(const char *s, char *host, size_t host_len, uint16_t *port, dp_err *err);

/* The --help text (static storage). */
const char *cfg_usage(void);

#endif
