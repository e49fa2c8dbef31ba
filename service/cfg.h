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
 *   --log-level LEVEL    DPSILO_LOG_LEVEL  info (debug, info, warn, error, off)
 *   --auth on|off        DPSILO_AUTH       on; off is refused unless HOST is a loopback address
 *   --admin-token-file P DPSILO_ADMIN_TOKEN_FILE  (none: <db dir>/admin.token, made at first start)
 *
 * Flags take their value as the next argument or after '=' (--db=x). Parsing is strict: strtol with
 * an end pointer, ranges checked, unknown flags refused; the error names the flag or variable.
 *
 * Ownership: cfg_parse fills a caller-owned struct; all strings are copied into fixed buffers.
 * Thread-safety: a cfg is built once by main before any thread starts and is read-only afterwards
 * (STYLE.md 2.7, the only global is a const cfg *).
 */
#ifndef DP_SERVICE_CFG_H
#define DP_SERVICE_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dp_err.h"

#define CFG_MAX_THREADS      64
#define CFG_MAX_BODY_LIMIT   (64u * 1024u * 1024u) /* --max-body may not exceed 64 MiB */
#define CFG_DEFAULT_MAX_BODY (1024u * 1024u)
#define CFG_HOST_MAX         64
#define CFG_PATH_MAX         1024

typedef struct cfg {
    char host[CFG_HOST_MAX];    /* IPv4 literal to bind, e.g. "127.0.0.1" ("localhost" is mapped) */
    uint16_t port;              /* TCP port; 0 = ephemeral */
    char db_path[CFG_PATH_MAX]; /* SQLite file */
    unsigned threads;           /* MHD thread-pool size = SQLite pool size, 1..CFG_MAX_THREADS */
    size_t max_body_bytes;      /* global request-body cap, bytes, 1..CFG_MAX_BODY_LIMIT */
    int log_level;              /* DP_LOG_* */
    bool auth_off;              /* --auth off: no bearer tokens (loopback only, issue #5) */
    char admin_token_file[CFG_PATH_MAX]; /* --admin-token-file; "" = <db dir>/admin.token */
    bool help;                           /* --help was given: print cfg_usage and exit 0 */
    bool version;                        /* --version was given: print version_line and exit 0 */
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
