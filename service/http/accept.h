/*
 * http_accept: dpsilod's own listening socket and acceptor thread, in front of libmicrohttpd.
 *
 * Why: MHD 0.9.75 has only an idle timeout, reset by every byte, so 1,100 connections trickling
 * header bytes held every connection slot (slowloris); and closing MHD's own listening socket on a
 * thread pool (MHD_quiesce_daemon) races its workers and can abort the process. So MHD is started
 * with MHD_USE_NO_LISTEN_SOCKET and this module owns the listener: it accepts, holds each new
 * socket until the first request's header block is complete (peeking with MSG_PEEK, so MHD reads
 * every byte itself), and only then hands the socket to MHD (MHD_add_connection, via the handoff
 * callback). While a socket is held ("pending"):
 *   - a deadline (header_timeout_s from accept) ends it with a 408 JSON error;
 *   - a header block over HTTP_ACCEPT_HEADER_MAX bytes ends it with 431 (414 when the request line
 *     alone does not fit), an HTTP version other than 1.0/1.1 (or the HTTP/2 preface) with 505, a
 *     request line or header line that cannot be parsed, or a Content-Length that is not plain
 *     digits, with 400;
 *   - a client that closes is forgotten without a log line.
 * Every address may hold at most max_conns_per_ip connections, pending and served by MHD together
 * (http_acceptor_closed is told when MHD closes one); one more is answered 503 and closed. Pending
 * sockets are capped at max_pending and MHD's at max_handed (503 beyond either).
 *
 * These error answers are written here, in the documented JSON error shape, with a request id
 * (X-Request-Id and in the body), Connection: close, and an access-log line. Only the first
 * request of a connection passes through here: later requests on a kept-alive connection go to MHD
 * directly (docs/API.md lists what MHD itself answers; http/server.c applies the header deadline to
 * them, through cfg.tick).
 *
 * Threads: one acceptor thread (epoll). http_acceptor_closed is called from MHD's threads; the
 * per-address counts are guarded by a mutex that is never held across I/O or logging.
 */
#ifndef DP_SERVICE_HTTP_ACCEPT_H
#define DP_SERVICE_HTTP_ACCEPT_H

#include <stddef.h>
#include <stdint.h>

#include <netinet/in.h>

#include "common/dp_err.h"

#define HTTP_ACCEPT_HEADER_MAX 16384 /* request line + headers of a connection's first request */

typedef struct http_accept_cfg {
    const char *host;          /* IPv4 literal to bind */
    uint16_t port;             /* 0 = ephemeral */
    unsigned header_timeout_s; /* a pending socket's deadline, seconds (>= 1) */
    unsigned max_conns_per_ip; /* pending + handed, per client address (>= 1) */
    size_t max_pending;        /* sockets held at once (>= 1) */
    size_t max_handed;         /* sockets handed to MHD and not yet closed (>= 1) */
    /* Hands an accepted socket (non-blocking; ownership passes) to MHD. Returns 0 on success;
     * otherwise the socket has been closed by the callee (MHD_add_connection closes it). */
    int (*handoff)(void *arg, int fd, const struct sockaddr_in *peer);
    /* Writes a fresh request id (NUL-terminated, at most 64 characters) into out. */
    void (*next_req_id)(void *arg, char *out, size_t out_len);
    /* Told about every error answer written here (metrics); may be NULL. */
    void (*observe)(void *arg, int status, uint64_t us);
    /* Called about once a second on the acceptor thread (the server's own deadlines); may be NULL.
     */
    void (*tick)(void *arg);
    void *arg; /* passed to the callbacks */
} http_accept_cfg;

typedef struct http_acceptor http_acceptor;

/* Binds and listens on cfg->host:cfg->port (SO_REUSEADDR); does not accept yet. Returns an owned
 * acceptor or NULL with err (DP_EINTERNAL, field "listen", naming the address). cfg is copied. */
http_acceptor *http_acceptor_open(const http_accept_cfg *cfg, dp_err *err);

/* The bound port. */
uint16_t http_acceptor_port(const http_acceptor *a);

/* Starts the acceptor thread. DP_OK or an error (the acceptor stays valid; free it). */
int http_acceptor_run(http_acceptor *a, dp_err *err);

/* MHD has closed a connection that came from peer (call once per handed socket, from any thread).
 */
void http_acceptor_closed(http_acceptor *a, const struct sockaddr *peer);

/* Stops accepting: closes the listening socket and every pending socket, and joins the thread.
 * Sockets already handed to MHD are not touched. Idempotent; may be called without run. */
void http_acceptor_stop(http_acceptor *a);

/* Stops (if needed) and frees. NULL is a no-op. */
void http_acceptor_free(http_acceptor *a);

/* Counters for tests and logs. */
typedef struct http_accept_stats {
    uint64_t accepted;     /* sockets accepted */
    uint64_t handed;       /* handed to MHD */
    uint64_t timed_out;    /* 408 */
    uint64_t refused_ip;   /* 503: per-address limit */
    uint64_t refused_full; /* 503: pending or handed cap */
    uint64_t bad_request;  /* 400 / 414 / 431 / 505 */
    uint64_t closed_early; /* closed by the client while pending */
} http_accept_stats;
void http_acceptor_stats(http_acceptor *a, http_accept_stats *out);

/* The end of the first request's header block in buf[0..len): the offset just past the empty line
 * that ends it, 0 when it is not complete yet. Leading empty lines (RFC 9112 2.2) are skipped;
 * lines may end in CRLF or LF. Exposed for tests. */
size_t http_accept_header_end(const char *buf, size_t len);

/* Checks a complete header block (what http_accept_header_end found). Returns 0 when it may go to
 * MHD, or the HTTP status to answer (400, 505), with a client-safe sentence in msg. method and
 * path (NUL-terminated, cut to their sizes) receive the request line's parts for the log, "-" when
 * unknown. Exposed for tests. */
int http_accept_check_head(const char *buf, size_t len, char *msg, size_t msg_len, char *method,
                           size_t method_len, char *path, size_t path_len);

#endif
