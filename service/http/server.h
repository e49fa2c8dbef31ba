/*
 * http: the HTTP layer of dpsilod - request/response types for route handlers, response helpers,
 * the route row type, and the server (libmicrohttpd 0.9.75 with a thread pool).
 *
 * A handler (service/routes_<feature>.c) has the signature
 *     int route_x(const http_req *rq, http_resp *rs, dp_err *err);
 * It reads rq, fills rs through the http_resp_* helpers, and returns DP_OK, or an error code with
 * err set (dp_err_set). It never calls MHD, so tests call it directly with an http_req they fill
 * themselves. On error the dispatcher discards rs and sends the error JSON that http/err.c builds
 * from err.
 *
 * The dispatcher (http/server.c) does everything common before the handler runs: route lookup (404,
 * 405 with Allow), the per-route body cap (413), JSON parsing (400 with line and column; the body
 * must be a JSON object), borrowing a database connection, the request id, the access log line and
 * the metrics.
 *
 * Thread-safety: the server runs handlers on MHD_OPTION_THREAD_POOL_SIZE threads; each request is
 * handled by one thread, and everything in http_req is valid for the duration of the handler call
 * only. A handler that waits on another thread should defer (PENDING below) rather than block: the
 * pool is small (one thread per core by default).
 */
#ifndef DP_SERVICE_HTTP_H
#define DP_SERVICE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/dp_err.h"
#include "service/app.h"
#include "service/db/store.h"
#include "service/http/router.h"

#define HTTP_MAX_QUERY    32 /* query parameters per request; more -> 400 */
#define HTTP_REQ_ID_MAX   65 /* request id + NUL */
#define HTTP_LOCATION_MAX 256

typedef struct http_metrics http_metrics;

/* ---- deferred answers (PENDING) ----
 * A handler whose answer waits on another thread (a ledger group commit, ledger_charge_start) need
 * not block its MHD thread. When rq->defer is non-NULL it may start that work so that
 * rq->defer->wake(rq->defer->arg) is called EXACTLY ONCE, from any thread, when the work is done;
 * store an owned http_pending in rs->pending and return DP_OK. The dispatcher then suspends the
 * connection (MHD_suspend_connection) and frees its thread; wake resumes it, and on an MHD thread
 * the dispatcher calls pending->resume with the same request (body, params, query, bearer, req_id;
 * rq->db is another borrowed connection and rq->defer is NULL), which fills rs and returns like a
 * handler (it must not defer again). pending->release is called once, after wake, in every case
 * (also when the client has gone and resume never ran). A handler that fails before deferring
 * answers as usual and never calls wake. With rq->defer NULL (unit tests) handlers answer
 * synchronously; http_handler_call runs the deferred path without a socket. */
typedef struct http_defer {
    void (*wake)(void *arg);
    void *arg;
} http_defer;

struct http_req;
struct http_resp;
typedef struct http_pending http_pending;
struct http_pending {
    int (*resume)(http_pending *p, const struct http_req *rq, struct http_resp *rs, dp_err *err);
    void (*release)(http_pending *p);
};

/* What a handler receives. Every pointer is borrowed and valid only during the handler call. */
typedef struct http_req {
    const char *method; /* "GET", "POST", ... (HEAD is routed as GET) */
    const char *path;   /* URL path, percent-decoded by MHD, without the query string */
    json_t *body;       /* parsed JSON body, always an object; NULL when the request had no body.
                           Borrowed: never decref it, copy what must outlive the call. */
    struct clients_json *clients; /* non-NULL: the body's top-level "clients" array was read as
                                     text spans (service/codec/clients_json.h), or a route's
                                     numeric arrays (normal-means' "x", "s") were read as doubles
                                     (clients_json_numbers); body then holds each of them as an
                                     empty array. Borrowed: clients_json_incref to keep it past
                                     the call. */
    const http_param
        *params; /* path parameters, e.g. {"id","42"} for /v1/silos/{id}; n_params of them */
    size_t n_params;
    const http_param
        *query; /* query-string parameters in the order sent (decoded); n_query of them */
    size_t n_query;
    store_conn *db;     /* a pooled SQLite connection borrowed for this request (db/store.h) */
    const app *app;     /* the daemon's subsystems (service/app.h), borrowed; never NULL when
                           the dispatcher calls (tests and the CLI fill the fields they use) */
    const char *req_id; /* this request's id (also sent as X-Request-Id); use it in dp_log */
    const char *bearer; /* the token of "Authorization: Bearer <token>", or NULL; resolve it with
                           api/auth.h, never log it */
    const http_defer *defer;     /* non-NULL: the handler may defer its answer (PENDING above) */
    const char *idempotency_key; /* the Idempotency-Key header as sent, or NULL */
    const char *last_event_id;   /* the Last-Event-ID header (server-sent events), or NULL */
    const char *raw; /* a raw_type route's body as received (not NUL-terminated), or NULL; raw_len
                        bytes. Borrowed, but valid until a deferred answer's wake-up, so a
                        compute task may read it (http/offload.h) */
    size_t raw_len;
} http_req;

/* A body written while it is sent (http_resp_stream): read fills buf with up to max bytes and
 * returns how many (> 0), 0 at the end, or -1 on failure (the connection is then closed, the
 * answer cut short). It is called on the connection's HTTP thread, one piece at a time as the
 * socket takes them, so a large answer is never held whole; free releases cls once the answer is
 * sent or the connection drops (also when it was never started). */
typedef struct http_stream {
    long (*read)(void *cls, char *buf, size_t max);
    void (*free)(void *cls);
    void *cls;
} http_stream;

/* What a handler fills. Use the helpers below rather than setting fields directly. */
typedef struct http_resp {
    int status;                       /* HTTP status; 200 if the handler leaves it 0 */
    json_t *body;                     /* owned reference; sent as application/json */
    char *text;                       /* owned (malloc) raw body instead of JSON, e.g. /metrics */
    size_t text_len;                  /* bytes in text */
    const char *content_type;         /* for text; static storage */
    char location[HTTP_LOCATION_MAX]; /* Location header when non-empty */
    http_pending *pending;            /* owned: a deferred answer (PENDING above); the dispatcher
                                         takes it, http_resp_clear leaves it alone */
    http_stream stream;               /* owned when stream.read is set: a body written as sent
                                         (chunked), with content_type */
} http_resp;

/* Decodes %HH escapes of s in place, except %00, which is left as the three characters, so the
 * result never holds an embedded NUL. Malformed escapes ("%4", "%zz") are kept literally. Returns
 * the new length. The server uses it for the path and the query string. */
size_t http_percent_decode(char *s);

/* Finds a path parameter by name; borrowed value or NULL. */
const char *http_req_param(const http_req *rq, const char *name);
/* Finds the first query parameter by name; borrowed value or NULL. */
const char *http_req_query(const http_req *rq, const char *name);

/* Ids in paths (docs/API.md "Conventions"), the same on every route:
 * - a malformed id is a 400 naming the parameter: `id must be a positive integer (got "abc")`;
 *   the dispatcher checks every {id} path parameter this way before the handler runs;
 * - an unknown one is a 404 with the message "<what> <id> does not exist" (http_err_not_found);
 *   on a route with an {id} parameter the dispatcher reports a 404 whose field is a plain name
 *   (the ledger's "silo_id", "claim_id") under the field "id", since the only resource such a
 *   route can miss is the one its path names. Ids in bodies keep their full field path
 *   ("clients[0].silo_id", "charges[1].silo_id") and the same wording. */
/* Path parameter `name` as a database id: plain decimal 1..INT64_MAX ("07", "+1", "1e3", ""
 * refused). DP_EINVAL naming the parameter otherwise. */
int http_req_param_id(const http_req *rq, const char *name, int64_t *out, dp_err *err);
/* The one wording of an unknown resource: DP_ENOTFOUND naming field, "<what> <id> does not
 * exist" (what: "silo", "run", "tuning draw", ...). Returns DP_ENOTFOUND. */
int http_err_not_found(dp_err *err, const char *field, const char *what, int64_t id);
/* Query parameter `name` as a decimal integer in [lo, hi] (e.g. ?limit= and ?after= for
 * pagination); absent -> *out = def. Malformed or out of range -> DP_EINVAL naming the parameter.
 */
int http_req_query_int(const http_req *rq, const char *name, int64_t def, int64_t lo, int64_t hi,
                       int64_t *out, dp_err *err);

/* Pagination, one rule for every list (docs/API.md "Conventions"): ?limit= page size, default
 * HTTP_PAGE_LIMIT_DEFAULT, 1..HTTP_PAGE_LIMIT_MAX; ?after= an exclusive cursor, the last id seen
 * (default 0: from the start). The answer holds the items in ascending id order and "next_after":
 * the last id of this page to pass as ?after=, or null when nothing follows it. */
#define HTTP_PAGE_LIMIT_DEFAULT 100
#define HTTP_PAGE_LIMIT_MAX     1000
/* Reads ?limit= and ?after=; a malformed or out-of-range one is DP_EINVAL naming it, worded the
 * same on every list. */
int http_req_page(const http_req *rq, int64_t *limit, int64_t *after, dp_err *err);

/* Reply JSON with any status. body is stolen (also on failure); NULL body -> DP_ENOMEM. */
int http_resp_json(http_resp *rs, int status, json_t *body, dp_err *err);
/* 201 Created with Location (printf-style, e.g. "/v1/silos/%lld"). body stolen. */
int http_resp_created(http_resp *rs, json_t *body, dp_err *err, const char *location_fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* 202 Accepted with Location (e.g. the job to poll). body stolen. */
int http_resp_accepted(http_resp *rs, json_t *body, dp_err *err, const char *location_fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Raw text body: text (malloc'd) is stolen; content_type must have static storage. */
int http_resp_text(http_resp *rs, int status, const char *content_type, char *text, size_t len,
                   dp_err *err);
/* A body written while it is sent (http_stream above), with Transfer-Encoding: chunked. st is
 * taken (also on failure: st.free is called); content_type must have static storage. */
int http_resp_stream(http_resp *rs, int status, const char *content_type, http_stream st,
                     dp_err *err);
/* Reads a stream answer (rs->stream) to its end into rs->text, for callers without a socket
 * (http_handler_call does it). DP_ENOMEM, or DP_EINTERNAL when the stream fails. */
int http_resp_drain(http_resp *rs, dp_err *err);
/* Releases what rs owns and zeroes it. */
void http_resp_clear(http_resp *rs);

/* Calls h like the dispatcher would, without a socket: offers it rq->defer, and when it defers,
 * waits on this thread for the wake-up, then runs pending->resume and pending->release. Returns
 * what the handler (or resume) returned; rs as they filled it. For tests and synchronous callers.
 */
int http_handler_call(route_fn h, const http_req *rq, http_resp *rs, dp_err *err);

typedef struct http_server http_server;

/* The access check of the dispatcher's early 401 (docs/API.md "Authentication"): given a request
 * with a bearer token and a borrowed connection, DP_OK when the token is valid, DP_EUNAUTH when it
 * is not, another code for a failure the handler will meet again. The policy lives in api/auth.h;
 * the server only calls it. */
typedef int (*http_authenticate_fn)(const http_req *rq, dp_err *err);

/* Listens on a->cfg->host:port (service/http/accept.h: header and body deadlines, the per-address
 * limit) and starts MHD with cfg->threads threads, serving routes[0..n_routes-1] (borrowed; must
 * outlive the server) and the embedded web/ files. a (borrowed; a->cfg and a->store required, the
 * rest may be NULL, and everything must outlive the server) is copied: every handler gets the copy
 * as rq->app, with metrics set to the server's own. authenticate (NULL: only the presence of a
 * token is checked before the handler runs) refuses a bad token before its body is read.
 * Returns an owned server or NULL with err (DP_EINTERNAL with an operator message, e.g. the port is
 * in use). */
http_server *http_server_start(const app *a, const route *routes, size_t n_routes,
                               http_authenticate_fn authenticate, dp_err *err);

/* The bound port (the real one when cfg->port was 0). */
uint16_t http_server_port(const http_server *srv);

/* Draining stop. New requests are answered 503 (code "shutting_down", Retry-After, Connection:
 * close) and every answer from here carries Connection: close; the listening socket and the
 * connections still sending headers are closed; requests in flight finish, up to drain_ms. Then
 * MHD is stopped (connections closed, threads joined; a handler still running is waited for, so
 * callers bound the whole call themselves) and srv is freed.
 * Returns 0 when every request finished, 1 when some were cut off at drain_ms, and -1 when a
 * deferred answer's wake-up was still owed at drain_ms: then MHD is left running and srv is not
 * freed (stopping MHD would free connections the wake-up still touches); the caller must end the
 * process without closing the ledger. NULL is a no-op (0). */
int http_server_stop(http_server *srv, unsigned drain_ms);

#endif
