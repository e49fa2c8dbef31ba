/*
 * http/server.c: the libmicrohttpd server, the dispatcher and the response helpers. Contract in
 * http/server.h.
 *
 * DESIGN
 * MHD (0.9.75) calls on_access several times per request, and a response may be queued only on
 * the first or the last call:
 *   1. headers only, *req_cls == NULL: allocate the request context, assign the request id,
 *      match the route. 404/405 and a Content-Length above the cap are answered at once (MHD
 *      then discards the body and closes the connection).
 *   2. once per body chunk: append up to the cap; beyond it, mark too_big and drop the bytes.
 *      No reply may be queued here. A body slower than --body-min-rate after the --body-timeout
 *      grace (body_too_slow) drops the connection here, and from on_tick when no byte comes.
 *   3. size 0: the body is complete: 413 if too_big, else parse JSON (400 with line/column),
 *      borrow a database connection, run the handler and queue its response.
 * on_completed runs however the request ends (response sent, client gone, shutdown): it records
 * the metrics, writes the access-log line and frees the context. It is the only place a context
 * is freed.
 *
 * URL decoding: MHD_OPTION_UNESCAPE_CALLBACK uses http_percent_decode, which never decodes %00, so
 * a path or query value can never be cut short by an embedded NUL ("/index.html%00.txt" stays as
 * sent).
 *
 * Request ids: the client's X-Request-Id when it is 1..64 characters of [A-Za-z0-9._-], otherwise
 * "<8 hex boot nonce><hex counter>", unique within a run and unlikely to repeat across runs.
 *
 * Deferred answers (http/server.h PENDING; MHD_ALLOW_SUSPEND_RESUME): a ledger charge must wait for
 * its group's COMMIT (an fsync). Blocking the MHD thread meanwhile capped the requests that can
 * share a group at --threads (2 by default). Instead the handler queues its op and returns a
 * pending answer; the dispatcher suspends the connection and the thread serves others. The ledger's
 * committer calls on_wake after COMMIT, which resumes the connection (allowed from any thread);
 * MHD calls on_access again and run_handler queues the answer. The race between suspending (MHD
 * thread) and waking (committer) is settled by c->defer_state: STARTED -> SUSPENDED by the
 * dispatcher after MHD_suspend_connection (compare-and-swap), anything -> WOKEN by on_wake, which
 * resumes only a connection it saw SUSPENDED; if WOKEN came first the dispatcher answers at once
 * (or resumes the connection it has just suspended). MHD never times out or completes a
 * suspended connection, so a context with a pending answer lives until after its wake-up.
 *
 * Connections (http/accept.h): dpsilod owns the listening socket. Its acceptor thread holds each
 * new connection until the first request's headers are complete (deadline, per-address limit,
 * early JSON errors) and then gives it to MHD with MHD_add_connection; MHD runs with
 * MHD_USE_NO_LISTEN_SOCKET. MHD tells us when a connection closes (on_connection), which releases
 * its address's count. Framing that a proxy could read differently (duplicate Content-Length,
 * Content-Length with Transfer-Encoding, two Authorization headers) is refused on the first call.
 *
 * Stop (http_server_stop): `stopping` is set first: from then on a new request is answered 503
 * shutting_down with Connection: close on its first call, every answer carries Connection: close,
 * and no handler is offered a deferral. Then the acceptor closes the listening socket and the
 * connections still sending headers, and we wait for the requests in flight (contexts allocated
 * and not completed) and the owed wake-ups (`deferring`), both up to the drain timeout; then
 * MHD_stop_daemon closes the rest and joins the pool. MHD never had a listening socket, so
 * nothing is taken out of its workers' epoll sets: MHD_quiesce_daemon did that on a thread pool
 * without a lock and could abort the process (issue #10, D1). If a wake-up is still owed at
 * the deadline MHD is left running (it would free a connection the wake-up resumes) and the caller
 * ends the process.
 *
 * Threads: on_access/on_completed/on_connection run on MHD pool threads, on_wake on the ledger's
 * committer, the acceptor callbacks on the acceptor thread; the server struct is read-only after
 * start except next_req_id, in_flight, deferring, stopping and the MHD log rate limit (atomics).
 * A context belongs to one connection, hence one thread.
 */
#include "service/http/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/dp_alloc.h"
#include "common/dp_huge.h"
#include "common/dp_assert.h"
#include "common/dp_log.h"
#include "service/base/cfg.h"
#include "service/base/embedded.h"
#include "service/base/time.h"
#include "service/codec/clients_json.h"
#include "service/codec/json_util.h"
#include "service/http/accept.h"
#include "service/http/bearer.h"
#include "service/http/err.h"
#include "service/http/metrics.h"
#include "service/http/router.h"
#include "service/http/static.h"

#define HTTP_CONNECTION_TIMEOUT_S 30    /* idle keep-alive connections are closed after this */
#define HTTP_CONNECTION_LIMIT     8192  /* connections served by MHD at once, at most */
#define HTTP_PENDING_LIMIT        16384 /* connections held by the acceptor at once, at most */
#define HTTP_FD_RESERVE           64    /* descriptors kept for the database, logs, pipes */
#define HTTP_FD_PER_THREAD        4     /* SQLite file, WAL, SHM per pooled connection, + 1 */
#define HTTP_BODY_INITIAL         1024  /* first body buffer; doubles up to the route cap */
#define HTTP_STOP_LOG_MS          5000  /* a stop that waits says so this often */
#define HTTP_MHD_LOG_PER_S        10    /* MHD's own messages logged per second at most */

/* A connection MHD serves, for the header deadline of its later requests (DESIGN: connections). */
typedef struct conn_rec {
    int fd;                     /* MHD's socket; valid while the record is on the list */
    atomic_llong since_ms;      /* CLOCK_MONOTONIC ms when it began waiting for a request */
    atomic_bool waiting;        /* no request in progress: the next one's headers are awaited */
    atomic_bool in_body;        /* a request's body is awaited (its headers are complete) */
    atomic_llong body_since_ms; /* CLOCK_MONOTONIC ms when that request's headers were complete */
    atomic_llong body_bytes;    /* body bytes received so far */
    atomic_bool body_dropped;   /* on_tick shut it down for a slow body: the access line says 408 */
    struct conn_rec *prev;      /* guarded by the server's conns_mu */
    struct conn_rec *next;      /* guarded by the server's conns_mu */
} conn_rec;

struct http_server {
    struct MHD_Daemon *d;
    http_acceptor *acc; /* owned: the listening socket and the sockets still sending headers */
    const cfg *cfg;     /* borrowed, read-only */
    store *store;       /* borrowed */
    app app;            /* handed to handlers as rq->app: the caller's, with metrics ours */
    http_authenticate_fn authenticate; /* the early 401's token check; may be NULL */
    const route *routes;               /* borrowed table */
    size_t n_routes;
    http_metrics *metrics;         /* owned */
    uint16_t port;                 /* bound port */
    unsigned boot_nonce;           /* request-id prefix */
    atomic_uint_fast64_t next_req; /* request-id counter */
    atomic_long in_flight;         /* contexts alive */
    atomic_long deferring; /* owed wake-ups: handlers offered rq->defer (only before `stopping`)
                              whose wake-up has not run */
    atomic_bool stopping;  /* http_server_stop began: new requests get 503, no new deferrals */
    atomic_llong mhd_log_window; /* on_mhd_log's rate limit: the current second, */
    atomic_long mhd_log_count;   /* lines in it, */
    atomic_long mhd_log_dropped; /* and lines left out since the last one logged */
    pthread_mutex_t conns_mu;    /* guards the conns list (not the records' atomics) */
    conn_rec *conns;             /* connections MHD serves */
};

/* A context's deferred-answer state (DESIGN: deferred answers). */
enum { DEFER_NONE, DEFER_STARTED, DEFER_SUSPENDED, DEFER_WOKEN };

enum {
    KIND_ROUTE,      /* a row of the route table */
    KIND_STATIC,     /* a web/ file */
    KIND_NOT_FOUND,  /* 404 pending (sent on the final call) */
    KIND_BAD_METHOD, /* 405 pending, with allow */
    KIND_REPLIED     /* a response is already queued */
};

typedef struct http_ctx {
    http_server *srv;
    struct timespec t0; /* CLOCK_MONOTONIC at first call */
    char req_id[HTTP_REQ_ID_MAX];
    char method[16];
    char path[HTTP_MAX_PATH]; /* copy of the URL path (truncated for the log if longer) */
    int kind;                 /* KIND_* */
    route_match m;            /* KIND_ROUTE */
    http_static_file file;    /* KIND_STATIC */
    const char *allow;        /* KIND_BAD_METHOD: Allow header value (static or in m) */
    size_t metrics_row;
    size_t cap;      /* body cap, bytes */
    size_t declared; /* the body's Content-Length, 0 when none (at most cap) */
    char *body;      /* owned */
    size_t len, alloc;
    unsigned long long body_seen; /* body bytes received, stored or not (the minimum rate) */
    int too_big;
    int status; /* status queued, 0 until then */
    http_param query[HTTP_MAX_QUERY];
    size_t n_query;
    int query_overflow;
    /* deferred answer */
    struct MHD_Connection *conn; /* for wake's MHD_resume_connection */
    http_pending *pending;       /* owned, released in ctx_free */
    json_t *body_json;           /* the parsed body, kept for pending->resume; owned */
    clients_json *clients;       /* its "clients" array as spans, or NULL; owned reference */
    http_defer defer;            /* {on_wake, this context} */
    atomic_int defer_state;      /* DEFER_* */
} http_ctx;

/* ---- response helpers (handler side) ---- */

const char *http_req_param(const http_req *rq, const char *name)
{
    for (size_t i = 0; i < rq->n_params; i++)
        if (strcmp(rq->params[i].name, name) == 0)
            return rq->params[i].value;
    return NULL;
}

const char *http_req_query(const http_req *rq, const char *name)
{
    for (size_t i = 0; i < rq->n_query; i++)
        if (strcmp(rq->query[i].name, name) == 0)
            return rq->query[i].value;
    return NULL;
}

/* Strict decimal parse: optional '-' only when allow_neg, digits, no leading zeros, fits int64. */
static int parse_i64(const char *s, int allow_neg, int64_t *out)
{
    if (s == NULL || *s == '\0')
        return -1;
    const char *p = s;
    if (*p == '-' && allow_neg)
        p++;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] != '\0'))
        return -1;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9')
            return -1;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = (int64_t)v;
    return 0;
}

int http_req_param_id(const http_req *rq, const char *name, int64_t *out, dp_err *err)
{
    const char *v = http_req_param(rq, name);
    int64_t id;
    if (v == NULL || parse_i64(v, 0, &id) != 0 || id < 1)
        return dp_err_set(err, DP_EINVAL, name, "%s must be a positive integer (got \"%.32s\")",
                          name, v ? v : "");
    *out = id;
    return DP_OK;
}

int http_req_page(const http_req *rq, int64_t *limit, int64_t *after, dp_err *err)
{
    if (http_req_query_int(rq, "limit", HTTP_PAGE_LIMIT_DEFAULT, 1, HTTP_PAGE_LIMIT_MAX, limit,
                           err) != DP_OK)
        return err->code;
    const char *v = http_req_query(rq, "after");
    *after = 0;
    if (v != NULL && parse_i64(v, 0, after) != 0)
        return dp_err_set(err, DP_EINVAL, "after",
                          "after must be the last id of the previous page, an integer >= 0 (got "
                          "\"%.32s\")",
                          v);
    return DP_OK;
}

int http_err_not_found(dp_err *err, const char *field, const char *what, int64_t id)
{
    return dp_err_set(err, DP_ENOTFOUND, field, "%s %lld does not exist", what, (long long)id);
}

int http_req_query_int(const http_req *rq, const char *name, int64_t def, int64_t lo, int64_t hi,
                       int64_t *out, dp_err *err)
{
    const char *v = http_req_query(rq, name);
    if (v == NULL) {
        *out = def;
        return DP_OK;
    }
    int64_t x;
    if (parse_i64(v, 1, &x) != 0 || x < lo || x > hi)
        return dp_err_set(err, DP_EINVAL, name,
                          "%s must be an integer in %lld..%lld (got \"%.32s\")", name,
                          (long long)lo, (long long)hi, v);
    *out = x;
    return DP_OK;
}

/* Releases what a stream answer holds (st->free, when it has one). */
static void stream_release(const http_stream *st)
{
    if (st->free != NULL)
        st->free(st->cls);
}

void http_resp_clear(http_resp *rs)
{
    json_decref(rs->body);
    free(rs->text);
    if (rs->stream.read != NULL)
        stream_release(&rs->stream);
    memset(rs, 0, sizeof *rs);
}

int http_resp_stream(http_resp *rs, int status, const char *content_type, http_stream st,
                     dp_err *err)
{
    if (st.read == NULL) {
        stream_release(&st);
        return dp_err_set(err, DP_EINTERNAL, NULL, "a stream answer without a reader");
    }
    if (rs->stream.read != NULL)
        stream_release(&rs->stream);
    rs->stream = st;
    rs->content_type = content_type;
    rs->status = status;
    return DP_OK;
}

int http_resp_drain(http_resp *rs, dp_err *err)
{
    if (rs->stream.read == NULL)
        return DP_OK;
    http_stream st = rs->stream;
    rs->stream = (http_stream){0};
    size_t len = 0, cap = 0;
    char *t = NULL;
    int rc = DP_OK;
    for (;;) {
        if (cap - len < 65536 + 1) {
            size_t nc = cap ? 2 * cap : 1 << 17;
            char *g = realloc(t, nc);
            if (g == NULL) {
                rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
                break;
            }
            t = g;
            cap = nc;
        }
        long n = st.read(st.cls, t + len, 65536);
        if (n < 0) {
            rc = dp_err_set(err, DP_EINTERNAL, NULL, "the answer's stream failed");
            break;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    stream_release(&st);
    if (rc != DP_OK) {
        free(t);
        return rc;
    }
    t[len] = '\0';
    free(rs->text);
    rs->text = t;
    rs->text_len = len;
    return DP_OK;
}

int http_resp_json(http_resp *rs, int status, json_t *body, dp_err *err)
{
    if (body == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    json_decref(rs->body);
    rs->body = body;
    rs->status = status;
    return DP_OK;
}

__attribute__((format(printf, 2, 0))) static int set_location(http_resp *rs, const char *fmt,
                                                              va_list ap)
{
    int n = vsnprintf(rs->location, sizeof rs->location, fmt, ap);
    return n >= 0 && (size_t)n < sizeof rs->location ? 0 : -1;
}

int http_resp_created(http_resp *rs, json_t *body, dp_err *err, const char *location_fmt, ...)
{
    if (http_resp_json(rs, 201, body, err) != DP_OK)
        return err ? err->code : DP_ENOMEM;
    va_list ap;
    va_start(ap, location_fmt);
    int bad = set_location(rs, location_fmt, ap);
    va_end(ap);
    return bad ? dp_err_set(err, DP_EINTERNAL, NULL, "Location header too long") : DP_OK;
}

int http_resp_accepted(http_resp *rs, json_t *body, dp_err *err, const char *location_fmt, ...)
{
    if (http_resp_json(rs, 202, body, err) != DP_OK)
        return err ? err->code : DP_ENOMEM;
    va_list ap;
    va_start(ap, location_fmt);
    int bad = set_location(rs, location_fmt, ap);
    va_end(ap);
    return bad ? dp_err_set(err, DP_EINTERNAL, NULL, "Location header too long") : DP_OK;
}

int http_resp_text(http_resp *rs, int status, const char *content_type, char *text, size_t len,
                   dp_err *err)
{
    if (text == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    free(rs->text);
    rs->text = text;
    rs->text_len = len;
    rs->content_type = content_type;
    rs->status = status;
    return DP_OK;
}

/* ---- sending (MHD side) ---- */

typedef struct reply_headers {
    const char *content_type; /* required */
    const char *location;     /* optional */
    const char *allow;        /* optional (405) */
    int retry_after;          /* 503 busy: add Retry-After: 1 */
    int cacheable;            /* static files: no-cache instead of no-store */
    int close;                /* Connection: close (also every answer once the server stops) */
} reply_headers;

/* Queues response r (destroyed here) with the headers of h. */
static enum MHD_Result queue_reply(http_ctx *c, struct MHD_Connection *conn, int status,
                                   struct MHD_Response *r, const reply_headers *h)
{
    int ok = MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, h->content_type) == MHD_YES &&
             MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL,
                                     h->cacheable ? "no-cache" : "no-store") == MHD_YES &&
             MHD_add_response_header(r, "X-Content-Type-Options", "nosniff") == MHD_YES &&
             MHD_add_response_header(r, "X-Request-Id", c->req_id) == MHD_YES;
    if (ok && h->location != NULL && h->location[0] != '\0')
        ok = MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, h->location) == MHD_YES;
    if (ok && h->allow != NULL)
        ok = MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, h->allow) == MHD_YES;
    if (ok && h->retry_after)
        ok = MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1") == MHD_YES;
    /* MHD closes the connection after a response carrying Connection: close */
    if (ok && (h->close || atomic_load(&c->srv->stopping)))
        ok = MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close") == MHD_YES;
    enum MHD_Result res = MHD_NO;
    if (ok)
        res = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    if (res == MHD_YES)
        c->status = status;
    return res;
}

/* Queues a response. buf is freed by MHD (MUST_FREE, allocated with malloc) or persistent. */
static enum MHD_Result send_reply(http_ctx *c, struct MHD_Connection *conn, int status, void *buf,
                                  size_t len, enum MHD_ResponseMemoryMode mode,
                                  const reply_headers *h)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, buf, mode);
    if (r == NULL) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(buf);
        return MHD_NO;
    }
    return queue_reply(c, conn, status, r, h);
}

/* MHD's reader of a stream answer (http_stream). */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    http_stream *st = cls;
    long n = st->read(st->cls, buf, max);
    if (n < 0)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : (ssize_t)n;
}

static void stream_free(void *cls)
{
    stream_release(cls);
    dp_free(cls);
}

/* Queues a stream answer (taken: released by MHD once sent, or here on failure), chunked. */
static enum MHD_Result send_stream(http_ctx *c, struct MHD_Connection *conn, int status,
                                   http_stream st, const reply_headers *h)
{
    http_stream *own = dp_malloc(sizeof *own);
    if (own == NULL) {
        stream_release(&st);
        return MHD_NO;
    }
    *own = st;
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1 << 16, stream_read, own, stream_free);
    if (r == NULL) {
        stream_free(own);
        return MHD_NO;
    }
    return queue_reply(c, conn, status, r, h);
}

/* Sends body (stolen) as compact JSON. */
static enum MHD_Result send_json(http_ctx *c, struct MHD_Connection *conn, int status, json_t *body,
                                 const reply_headers *extra)
{
    char *buf = body ? json_util_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (buf == NULL)
        return MHD_NO; /* out of memory: drop the connection rather than lie */
    reply_headers h = {0};
    if (extra != NULL)
        h = *extra;
    h.content_type = "application/json";
    return send_reply(c, conn, status, buf, strlen(buf), MHD_RESPMEM_MUST_FREE, &h);
}

/* Sends the error JSON for e. line/col > 0 add the JSON parse position. */
static enum MHD_Result send_error(http_ctx *c, struct MHD_Connection *conn, const dp_err *e,
                                  int line, int col)
{
    int status = http_err_status(e->code);
    if (status == 500)
        dp_log(DP_LOG_ERROR, c->req_id, "internal error: %s (field %s)", e->msg,
               e->field[0] ? e->field : "-");
    json_t *body = http_err_body(e, c->req_id);
    if (body != NULL && line > 0) {
        json_t *eo = json_object_get(body, "error");
        if (json_object_set_new(eo, "line", json_integer(line)) != 0 ||
            json_object_set_new(eo, "column", json_integer(col)) != 0) {
            json_decref(body);
            body = NULL;
        }
    }
    reply_headers h = {0};
    h.retry_after = e->code == DP_EBUSY;
    return send_json(c, conn, status, body, &h);
}

static enum MHD_Result send_405(http_ctx *c, struct MHD_Connection *conn, const char *allow)
{
    char msg[128];
    snprintf(msg, sizeof msg, "method %s is not allowed here; allowed: %s", c->method, allow);
    reply_headers h = {0};
    h.allow = allow;
    return send_json(c, conn, 405, http_err_body_raw("method_not_allowed", msg, NULL, c->req_id),
                     &h);
}

/* ---- request context ---- */

static int valid_req_id(const char *s)
{
    size_t n = 0;
    for (; s[n] != '\0'; n++) {
        char ch = s[n];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '.' || ch == '_' || ch == '-';
        if (!ok || n >= HTTP_REQ_ID_MAX - 1)
            return 0;
    }
    return n > 0;
}

/* The connection's record (on_connection), or NULL. */
static conn_rec *conn_record(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci != NULL ? ci->socket_context : NULL;
}

static void new_req_id(http_server *srv, char *out, size_t out_len)
{
    snprintf(
        out, out_len, "%08x%08llx", srv->boot_nonce,
        (unsigned long long)atomic_fetch_add_explicit(&srv->next_req, 1, memory_order_relaxed));
}

static http_ctx *ctx_alloc(http_server *srv, struct MHD_Connection *conn, const char *url,
                           const char *method)
{
    http_ctx *c = malloc(sizeof *c);
    if (c == NULL)
        return NULL;
    /* Field by field, no memset: the buffers are written by snprintf and the router. */
    c->kind = KIND_NOT_FOUND;
    c->allow = NULL;
    c->metrics_row = 0;
    c->cap = 0;
    c->declared = 0;
    c->body = NULL;
    c->len = c->alloc = 0;
    c->body_seen = 0;
    c->too_big = 0;
    c->status = 0;
    c->n_query = 0;
    c->query_overflow = 0;
    c->conn = conn;
    c->pending = NULL;
    c->body_json = NULL;
    c->clients = NULL;
    c->defer.wake = NULL;
    c->defer.arg = NULL;
    atomic_init(&c->defer_state, DEFER_NONE);
    c->srv = srv;
    clock_gettime(CLOCK_MONOTONIC, &c->t0);
    const char *rid = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");
    if (rid != NULL && valid_req_id(rid))
        snprintf(c->req_id, sizeof c->req_id, "%s", rid);
    else
        new_req_id(srv, c->req_id, sizeof c->req_id);
    snprintf(c->method, sizeof c->method, "%s", method ? method : "?");
    snprintf(c->path, sizeof c->path, "%s", url ? url : "");
    return c;
}

static void ctx_free(http_ctx *c)
{
    if (c == NULL)
        return;
    if (c->pending != NULL) /* only after wake: a suspended connection is never completed */
        c->pending->release(c->pending);
    json_decref(c->body_json);
    clients_json_decref(c->clients);
    free(c->body);
    free(c);
}

static void ctx_append(http_ctx *c, const char *data, size_t n)
{
    if (c->too_big)
        return;
    if (n > c->cap - c->len) {
        c->too_big = 1;
        free(c->body);
        c->body = NULL;
        c->len = c->alloc = 0;
        return;
    }
    if (c->body == NULL && c->declared >= DP_HUGE_MIN && c->declared <= c->cap) {
        /* the first bytes of a large announced body: room for all of it at once on huge pages
         * (common/dp_huge.h), not grown by doubling in 4 kB pages (a 10^6-client body is 20-60
         * MB); pages are only touched as the bytes arrive */
        c->body = dp_huge_alloc(c->declared + 1);
        c->alloc = c->body != NULL ? c->declared + 1 : 0;
    }
    if (c->len + n > c->alloc) {
        size_t na = c->alloc ? c->alloc : HTTP_BODY_INITIAL;
        while (na < c->len + n)
            na = na > c->cap / 2 ? c->cap : na * 2;
        char *nb = realloc(c->body, na);
        if (nb == NULL) {
            /* Treat like an oversized body: the request cannot be held. */
            c->too_big = 2;
            free(c->body);
            c->body = NULL;
            c->len = c->alloc = 0;
            return;
        }
        c->body = nb;
        c->alloc = na;
    }
    memcpy(c->body + c->len, data, n);
    c->len += n;
}

static enum MHD_Result collect_query(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    http_ctx *c = cls;
    if (c->n_query == HTTP_MAX_QUERY) {
        c->query_overflow = 1;
        return MHD_NO;
    }
    c->query[c->n_query].name = key;
    c->query[c->n_query].value = value ? value : "";
    c->n_query++;
    return MHD_YES;
}

/* ---- dispatcher ---- */

int http_query_allowed(const char *list, const char *name)
{
    size_t n = strlen(name);
    if (list == NULL || n == 0)
        return 0;
    for (const char *p = list; *p != '\0';) {
        while (*p == ' ')
            p++;
        size_t w = strcspn(p, " ");
        if (w == n && memcmp(p, name, n) == 0)
            return 1;
        p += w;
    }
    return 0;
}

static int srv_auth_off(const http_server *srv)
{
    return srv->cfg->auth_off;
}

/* Sends the pending 404 or 405. */
static enum MHD_Result reply_unrouted(http_ctx *c, struct MHD_Connection *conn)
{
    int kind = c->kind;
    c->kind = KIND_REPLIED;
    if (kind == KIND_BAD_METHOD)
        return send_405(c, conn, c->allow);
    dp_err e;
    dp_err_clear(&e);
    dp_err_set(&e, DP_ENOTFOUND, NULL, "no resource at this path");
    return send_error(c, conn, &e, 0, 0);
}

/* True when the request announces a body (Content-Length > 0 or any Transfer-Encoding). *declared
 * receives the Content-Length (0 when absent or unparsable). */
static int announces_body(struct MHD_Connection *conn, unsigned long long *declared)
{
    *declared = 0;
    const char *cl =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl != NULL) {
        char *end = NULL;
        errno = 0;
        unsigned long long n = strtoull(cl, &end, 10);
        if (errno == 0 && end != cl && *end == '\0')
            *declared = n;
    }
    return *declared > 0 || MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                        MHD_HTTP_HEADER_TRANSFER_ENCODING) != NULL;
}

/* The 413 for a body over c->cap (declared: its announced size, 0 when unknown). It says what to
 * do: when the daemon-wide --max-body is what caps this route, how far the route itself goes. */
static void too_big(const http_ctx *c, unsigned long long declared, dp_err *e)
{
    char size[48] = "";
    if (declared > 0)
        snprintf(size, sizeof size, " of %llu bytes", declared);
    size_t route_cap = c->kind == KIND_ROUTE ? c->m.route->max_body_bytes : c->cap;
    if (route_cap == ROUTE_BODY_UPLOAD)
        dp_err_set(e, DP_ETOOBIG, NULL,
                   "request body%s exceeds the upload limit of %zu bytes set by --max-upload "
                   "(or DPSILO_MAX_UPLOAD)",
                   size, c->cap);
    else if (route_cap > c->cap)
        dp_err_set(e, DP_ETOOBIG, NULL,
                   "request body%s exceeds the limit of %zu bytes set by --max-body; this route "
                   "takes up to %zu bytes: start dpsilod with a larger --max-body (or "
                   "DPSILO_MAX_BODY)",
                   size, c->cap, route_cap);
    else if (c->cap == 0)
        dp_err_set(e, DP_ETOOBIG, NULL, "%s %s takes no request body", c->method,
                   c->kind == KIND_ROUTE ? c->m.route->pattern : c->path);
    else
        dp_err_set(e, DP_ETOOBIG, NULL, "request body%s exceeds the limit of %s %s, %zu bytes",
                   size, c->method, c->m.route->pattern, c->cap);
}

/* 404/405 are answered at once when a body is coming (MHD then discards it and closes the
 * connection), but on the final call when there is none: a reply queued on the first call makes MHD
 * close the connection, which would end keep-alive for every bodiless 404. */
static enum MHD_Result first_call(http_ctx *c, struct MHD_Connection *conn)
{
    http_server *srv = c->srv;
    unsigned long long declared = 0;
    int has_body = announces_body(conn, &declared);
    int rc = strlen(c->path) >= HTTP_MAX_PATH - 1
                 ? HTTP_ROUTE_NOT_FOUND
                 : http_route_match(srv->routes, srv->n_routes, c->method, c->path, &c->m);
    c->cap = 0;
    if (rc == HTTP_ROUTE_FOUND) {
        c->kind = KIND_ROUTE;
        c->metrics_row = c->m.index;
        if (c->m.route->max_body_bytes == ROUTE_BODY_UPLOAD)
            c->cap = srv->cfg->max_upload_bytes;
        else
            c->cap = c->m.route->max_body_bytes < srv->cfg->max_body_bytes
                         ? c->m.route->max_body_bytes
                         : srv->cfg->max_body_bytes;
    } else {
        c->metrics_row = HTTP_METRICS_ROW_UNMATCHED(srv->n_routes);
        int is_get = strcmp(c->method, "GET") == 0 || strcmp(c->method, "HEAD") == 0;
        if (rc == HTTP_ROUTE_NOT_FOUND &&
            http_static_lookup(EMBED_WEB, EMBED_WEB_N, c->path, &c->file)) {
            if (is_get) {
                c->kind = KIND_STATIC;
                c->metrics_row = HTTP_METRICS_ROW_STATIC(srv->n_routes);
            } else {
                c->kind = KIND_BAD_METHOD;
                c->allow = "GET, HEAD";
            }
        } else if (rc == HTTP_ROUTE_BAD_METHOD) {
            c->kind = KIND_BAD_METHOD;
            c->allow = c->m.allow;
        } else {
            c->kind = KIND_NOT_FOUND;
        }
        if (c->kind != KIND_STATIC && has_body)
            return reply_unrouted(c, conn);
    }
    if (declared > c->cap) {
        dp_err e;
        dp_err_clear(&e);
        too_big(c, declared, &e);
        c->kind = KIND_REPLIED;
        return send_error(c, conn, &e, 0, 0);
    }
    c->declared = (size_t)declared;
    return MHD_YES;
}

/* docs/API.md "Authentication": with auth on, a request with a body to a route that needs a token
 * is refused 401 on its first call (headers only) when it has no bearer or one that does not
 * resolve, before a byte of its body is stored; MHD then discards the body and closes the
 * connection. Bodiless requests keep the check of final_call (and their keep-alive). A database
 * that cannot be borrowed now leaves the decision to final_call. */
static enum MHD_Result early_auth(http_ctx *c, struct MHD_Connection *conn)
{
    http_server *srv = c->srv;
    unsigned long long declared;
    if (c->kind != KIND_ROUTE || c->m.route->access == ROUTE_OPEN || srv_auth_off(srv) ||
        !announces_body(conn, &declared))
        return MHD_YES;
    dp_err e;
    dp_err_clear(&e);
    http_req rq = {
        .app = &srv->app,
        .req_id = c->req_id,
        .bearer = http_bearer_from_header(
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION)),
    };
    int rc = DP_OK;
    if (rq.bearer == NULL) {
        rc = dp_err_set(&e, DP_EUNAUTH, NULL,
                        "this endpoint needs a bearer token (Authorization: Bearer <token>)");
    } else if (srv->authenticate != NULL) {
        dp_err be;
        dp_err_clear(&be);
        rq.db = store_conn_borrow(srv->store, &be);
        if (rq.db == NULL)
            return MHD_YES;
        rc = srv->authenticate(&rq, &e);
        store_conn_return(srv->store, rq.db);
    }
    if (rc != DP_EUNAUTH)
        return MHD_YES; /* resolved, or a database error that final_call will meet and report */
    c->kind = KIND_REPLIED;
    reply_headers h = {0};
    h.close = 1;
    return send_json(c, conn, http_err_status(e.code), http_err_body(&e, c->req_id), &h);
}

/* Wake-up of a deferred answer (http/server.h PENDING): called exactly once, from any thread (the
 * ledger committer). Resumes the connection if the dispatcher has suspended it; if not yet, the
 * dispatcher sees DEFER_WOKEN and answers without suspending. Reads the context only before the
 * exchange: once DEFER_WOKEN is visible, the context may be completed and freed. The server
 * outlives every owed wake-up (http_server_stop waits for `deferring` to reach 0). */
static void on_wake(void *arg)
{
    http_ctx *c = arg;
    http_server *srv = c->srv;
    struct MHD_Connection *conn = c->conn;
    int prev = atomic_exchange(&c->defer_state, DEFER_WOKEN);
    /* exactly one wake-up per deferral, and only after one was offered */
    DP_ASSERT(prev == DEFER_STARTED || prev == DEFER_SUSPENDED);
    if (prev == DEFER_SUSPENDED)
        MHD_resume_connection(conn);
    atomic_fetch_sub(&srv->deferring, 1);
}

/* The matched route's {id} path parameter, or NULL when its pattern has none. */
static const char *path_id_param(const http_ctx *c)
{
    for (size_t i = 0; i < c->m.n_params; i++)
        if (strcmp(c->m.params[i].name, "id") == 0)
            return c->m.params[i].value;
    return NULL;
}

/* Sends what a handler (or a deferred answer's resume) produced. */
static enum MHD_Result send_result(http_ctx *c, struct MHD_Connection *conn, int rc, http_resp *rs,
                                   dp_err *e)
{
    if (rc != DP_OK || e->code != DP_OK) {
        if (e->code == DP_OK)
            dp_err_set(e, rc, NULL, "handler failed without a message (code %d)", rc);
        /* http/server.h "Ids in paths": the resource a route with an {id} misses is the path's. */
        if (e->code == DP_ENOTFOUND && path_id_param(c) != NULL && strpbrk(e->field, ".[") == NULL)
            snprintf(e->field, sizeof e->field, "id");
        http_resp_clear(rs);
        return send_error(c, conn, e, 0, 0);
    }
    int status = rs->status ? rs->status : 200;
    reply_headers h = {0};
    h.location = rs->location;
    if (rs->text != NULL) {
        h.content_type = rs->content_type ? rs->content_type : "text/plain; charset=utf-8";
        char *t = rs->text;
        size_t tl = rs->text_len;
        rs->text = NULL;
        enum MHD_Result r = send_reply(c, conn, status, t, tl, MHD_RESPMEM_MUST_FREE, &h);
        http_resp_clear(rs);
        return r;
    }
    if (rs->stream.read != NULL) {
        h.content_type = rs->content_type ? rs->content_type : "application/json";
        http_stream st = rs->stream;
        rs->stream = (http_stream){0};
        enum MHD_Result r = send_stream(c, conn, status, st, &h);
        http_resp_clear(rs);
        return r;
    }
    if (rs->body != NULL) {
        json_t *b = rs->body;
        rs->body = NULL;
        return send_json(c, conn, status, b, &h);
    }
    if (status == 204) {
        h.content_type = "application/json";
        return send_reply(c, conn, 204, NULL, 0, MHD_RESPMEM_PERSISTENT, &h);
    }
    dp_err_set(e, DP_EINTERNAL, NULL, "handler for %s returned no body", c->m.route->pattern);
    return send_error(c, conn, e, 0, 0);
}

/* Runs the route's handler (pending == NULL) or a deferred answer's resume on c->body_json, and
 * queues the answer; or, when the handler defers, suspends the connection. Only on the final call
 * (the whole body has been received), so no response is ever queued while upload data is being
 * delivered. */
static enum MHD_Result run_handler(http_ctx *c, struct MHD_Connection *conn, http_pending *pending)
{
    http_server *srv = c->srv;
    dp_err e;
    dp_err_clear(&e);
    store_conn *db = store_conn_borrow(srv->store, &e);
    if (db == NULL) {
        if (pending != NULL) { /* the ledger's answer is dropped; the client gets the error */
            pending->release(pending);
            c->pending = NULL;
        }
        return send_error(c, conn, &e, 0, 0);
    }
    http_req rq = {
        .method = c->method,
        .path = c->path,
        .body = c->body_json,
        .clients = c->clients,
        .raw = c->m.route->raw_type != NULL ? c->body : NULL,
        .raw_len = c->m.route->raw_type != NULL ? c->len : 0,
        .params = c->m.params,
        .n_params = c->m.n_params,
        .query = c->query,
        .n_query = c->n_query,
        .db = db,
        .app = &srv->app,
        .req_id = c->req_id,
        .bearer = http_bearer_from_header(
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION)),
        .idempotency_key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Idempotency-Key"),
        .last_event_id = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Last-Event-ID"),
    };
    http_resp rs;
    memset(&rs, 0, sizeof rs);
    int rc;
    if (pending != NULL) {
        rc = pending->resume(pending, &rq, &rs, &e);
        pending->release(pending);
        c->pending = NULL;
        if (rs.pending != NULL) { /* resume may not defer again */
            rs.pending->release(rs.pending);
            rs.pending = NULL;
            if (rc == DP_OK)
                rc = dp_err_set(&e, DP_EINTERNAL, NULL, "a deferred answer deferred again");
        }
    } else {
        /* A deferral is offered only before `stopping`. The possible wake-up is counted before
         * `stopping` is checked again (http_server_stop sets `stopping` before reading the count):
         * either the stop sees this count, or this call sees `stopping` and takes the count back.
         * So once the stop has read 0, the count never rises again. */
        bool offered = false;
        if (!atomic_load(&srv->stopping)) {
            atomic_fetch_add(&srv->deferring, 1);
            if (atomic_load(&srv->stopping))
                atomic_fetch_sub(&srv->deferring, 1);
            else
                offered = true;
        }
        if (offered) {
            c->conn = conn;
            c->defer.wake = on_wake;
            c->defer.arg = c;
            DP_ASSERT(atomic_load(&c->defer_state) == DEFER_NONE); /* NONE -> STARTED only */
            atomic_store(&c->defer_state, DEFER_STARTED);
            rq.defer = &c->defer;
        }
        rc = c->m.route->handler(&rq, &rs, &e);
        if (rs.pending == NULL) {
            /* no pending answer: the handler must not have used the wake-up it was offered */
            DP_ASSERT(!offered || atomic_load(&c->defer_state) == DEFER_STARTED);
            if (offered)
                atomic_fetch_sub(&srv->deferring, 1); /* no wake-up is owed */
            atomic_store(&c->defer_state, DEFER_NONE);
        } else if (rq.defer == NULL) { /* contract breach: no wake-up will come; answer now */
            rs.pending->release(rs.pending);
            rs.pending = NULL;
            http_resp_clear(&rs);
            rc = dp_err_set(&e, DP_EINTERNAL, NULL, "a handler deferred without being offered to");
        }
        /* A deferring handler's return code is ignored: its answer is resume's. */
    }
    store_conn_return(srv->store, db);
    if (rs.pending != NULL) {
        c->pending = rs.pending;
        rs.pending = NULL;
        http_resp_clear(&rs);
        if (atomic_load(&c->defer_state) == DEFER_WOKEN) /* done already: answer at once */
            return run_handler(c, conn, c->pending);
        MHD_suspend_connection(conn);
        int expect = DEFER_STARTED;
        if (!atomic_compare_exchange_strong(&c->defer_state, &expect, DEFER_SUSPENDED)) {
            DP_ASSERT(expect == DEFER_WOKEN); /* STARTED -> SUSPENDED or -> WOKEN, nothing else */
            MHD_resume_connection(conn);      /* woken in between: on_wake did not resume it */
        }
        return MHD_YES; /* MHD calls on_access again (upload_data_size 0) once resumed */
    }
    return send_result(c, conn, rc, &rs, &e);
}

/* The top-level arrays of numbers a route reads straight from the body text, without a jansson
 * tree (service/codec/clients_json.h clients_json_load_numbers; issue 15: normal-means' million
 * observations). Two keys or NULL. The handler finds them with clients_json_numbers and reads the
 * tree as usual when they are not there (the body then took the tree path whole). */
static const char *const *num_arrays(const route *rt)
{
    static const char *const nm[] = {"x", "s"};
    return strcmp(rt->pattern, "/v1/estimators/normal-means") == 0 ? nm : NULL;
}

/* True when the request's Content-Type is media type want (case-insensitive, parameters such as
 * "; charset=utf-8" ignored). */
static bool content_type_is(struct MHD_Connection *conn, const char *want)
{
    const char *ct =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (ct == NULL)
        return false;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    size_t n = strlen(want);
    if (strncasecmp(ct, want, n) != 0)
        return false;
    ct += n;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    return *ct == '\0' || *ct == ';';
}

static enum MHD_Result final_call(http_ctx *c, struct MHD_Connection *conn)
{
    dp_err e;
    dp_err_clear(&e);
    if (c->too_big) {
        if (c->too_big == 2)
            dp_err_set(&e, DP_ENOMEM, NULL, "out of memory reading the request body");
        else
            too_big(c, 0, &e);
        return send_error(c, conn, &e, 0, 0);
    }
    if (c->kind == KIND_NOT_FOUND || c->kind == KIND_BAD_METHOD)
        return reply_unrouted(c, conn);
    if (c->kind == KIND_STATIC) {
        reply_headers h = {0};
        h.content_type = c->file.content_type;
        h.cacheable = 1;
        return send_reply(c, conn, 200, (void *)c->file.data, c->file.len, MHD_RESPMEM_PERSISTENT,
                          &h);
    }

    json_t *body = NULL;
    const route *raw_rt = c->m.route->raw_type != NULL ? c->m.route : NULL;
    if (raw_rt != NULL && !content_type_is(conn, raw_rt->raw_type)) {
        dp_err_set(&e, DP_EINVAL, "Content-Type", "%s %s takes a %s body (Content-Type: %s)",
                   raw_rt->method, raw_rt->pattern, raw_rt->raw_type, raw_rt->raw_type);
        return send_error(c, conn, &e, 0, 0);
    }
    if (c->len > 0 && raw_rt == NULL) {
        /* A NUL byte is never valid JSON text (inside strings it must be escaped), but jansson
         * 2.14 takes one right after a number as the end of the input and accepts the truncated
         * object ({"count": 2<NUL>} parsed as {"count": 2}): refuse it here. */
        const char *nul = memchr(c->body, '\0', c->len);
        if (nul != NULL) {
            int line = 1, col = 1;
            for (const char *q = c->body; q < nul; q++) {
                if (*q == '\n') {
                    line++;
                    col = 1;
                } else {
                    col++;
                }
            }
            dp_err_set(&e, DP_EINVAL, NULL,
                       "malformed JSON at line %d, column %d: NUL byte (U+0000) in the body", line,
                       col);
            return send_error(c, conn, &e, line, col);
        }
        json_error_t jerr;
        /* json_loadb(body, len, JSON_REJECT_DUPLICATES) in its answers, without a tree for a
         * "clients" array (issue 10: estimator bodies of a million clients); the text then moves
         * to c->clients. */
        body = clients_json_load_numbers(c->body, c->len, num_arrays(c->m.route), 2, &c->clients,
                                         &jerr);
        if (c->clients != NULL) {
            c->body = NULL;
            c->len = c->alloc = 0;
        }
        if (body == NULL) {
            dp_err_set(&e, DP_EINVAL, NULL, "malformed JSON at line %d, column %d: %s", jerr.line,
                       jerr.column, jerr.text);
            return send_error(c, conn, &e, jerr.line > 0 ? jerr.line : 1,
                              jerr.column > 0 ? jerr.column : 1);
        }
        if (!json_is_object(body)) {
            json_decref(body);
            dp_err_set(&e, DP_EINVAL, NULL, "request body must be a JSON object");
            return send_error(c, conn, &e, 0, 0);
        }
    }
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, collect_query, c);
    if (c->query_overflow) {
        json_decref(body);
        dp_err_set(&e, DP_EINVAL, "query", "at most %d query parameters are accepted",
                   HTTP_MAX_QUERY);
        return send_error(c, conn, &e, 0, 0);
    }
    c->body_json = body; /* owned by the context from here (kept while an answer is deferred) */
    const route *rt = c->m.route;
    for (size_t i = 0; i < c->n_query; i++)
        if (!http_query_allowed(rt->query, c->query[i].name)) {
            dp_err_set(&e, DP_EINVAL, c->query[i].name,
                       "unknown query parameter \"%.64s\"; %s %s accepts %s", c->query[i].name,
                       rt->method, rt->pattern, rt->query ? rt->query : "none");
            return send_error(c, conn, &e, 0, 0);
        }
    /* The access table is the truth (http/server.h route_access): a row without an access level is
     * our bug, and no route but an open one runs without a token when auth is on. */
    if (rt->access != ROUTE_OPEN && rt->access != ROUTE_TOKEN && rt->access != ROUTE_ADMIN) {
        dp_err_set(&e, DP_EINTERNAL, NULL, "route %s %s has no access level", rt->method,
                   rt->pattern);
        return send_error(c, conn, &e, 0, 0);
    }
    if (rt->access != ROUTE_OPEN && !srv_auth_off(c->srv) &&
        http_bearer_from_header(MHD_lookup_connection_value(
            conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION)) == NULL) {
        dp_err_set(&e, DP_EUNAUTH, NULL,
                   "this endpoint needs a bearer token (Authorization: Bearer <token>)");
        return send_error(c, conn, &e, 0, 0);
    }
    /* http/server.h "Ids in paths": a malformed {id} is the same 400 on every route. */
    if (path_id_param(c) != NULL) {
        http_req idrq = {.params = c->m.params, .n_params = c->m.n_params};
        int64_t id;
        if (http_req_param_id(&idrq, "id", &id, &e) != DP_OK)
            return send_error(c, conn, &e, 0, 0);
    }
    return run_handler(c, conn, NULL);
}

/* Answers at once with a JSON error and closes the connection (MHD discards any body). */
static enum MHD_Result reply_refused(http_ctx *c, struct MHD_Connection *conn, int status,
                                     const char *code, const char *msg)
{
    c->kind = KIND_REPLIED;
    reply_headers h = {0};
    h.close = 1;
    h.retry_after = status == 503;
    return send_json(c, conn, status, http_err_body_raw(code, msg, NULL, c->req_id), &h);
}

/* RFC 9110 5.6.2 token characters */
#define HTTP_TCHARS "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

typedef struct header_counts {
    unsigned content_length;    /* Content-Length headers */
    const char *first_length;   /* the first one's value (borrowed from MHD) */
    bool lengths_differ;        /* a later one differs from the first */
    unsigned transfer_encoding; /* Transfer-Encoding headers */
    bool folded;                /* a header name that shows an obs-fold line (count_header) */
    bool length_not_digits;     /* a Content-Length value that is not plain digits */
    bool encoding_not_chunked;  /* a Transfer-Encoding value other than "chunked" */
    unsigned authorization;     /* Authorization headers */
} header_counts;

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    (void)kind;
    header_counts *h = cls;
    if (key == NULL)
        return MHD_YES;
    /* MHD 0.9.75 appends an obs-fold continuation line to the previous header's NAME
     * ("Content-Length: 35\r\n 0" arrives as "Content-Length0: 35"), which would hide the
     * framing header and leave the body to be read as the next request. */
    if ((strncasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH, 14) == 0 && key[14] != '\0') ||
        (strncasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING, 17) == 0 && key[17] != '\0') ||
        strspn(key, HTTP_TCHARS) != strlen(key))
        h->folded = true;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        size_t n = value != NULL ? strlen(value) : 0;
        if (n == 0 || strspn(value, "0123456789") != n)
            h->length_not_digits = true;
        if (h->content_length++ == 0)
            h->first_length = value ? value : "";
        else if (strcmp(h->first_length, value ? value : "") != 0)
            h->lengths_differ = true;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        h->transfer_encoding++;
        if (value == NULL || strcasecmp(value, "chunked") != 0)
            h->encoding_not_chunked = true;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0) {
        h->authorization++;
    }
    return MHD_YES;
}

/* Request framing that a proxy in front could read differently (RFC 9112 6.3; issue #10,
 * D13): differing Content-Length headers, a Content-Length that is not plain digits or a
 * Transfer-Encoding other than "chunked" (MHD 0.9.75 folds an obs-fold continuation line into the
 * value: "36" + " 0" is "36 0"), Content-Length with Transfer-Encoding, and more than one
 * Authorization header (a proxy keeping the last would authorize another principal). True with a
 * client-safe sentence in why. */
static bool framing_error(struct MHD_Connection *conn, char *why, size_t why_len)
{
    header_counts h = {0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, count_header, &h);
    if (h.lengths_differ)
        snprintf(why, why_len, "the request has Content-Length headers with different values");
    else if (h.folded)
        snprintf(why, why_len,
                 "obsolete line folding (a header line starting with a space or tab) is not "
                 "accepted");
    else if (h.length_not_digits)
        snprintf(why, why_len,
                 "Content-Length must be a decimal number of bytes (no sign, no space, no folded "
                 "line)");
    else if (h.encoding_not_chunked)
        snprintf(why, why_len, "Transfer-Encoding must be exactly \"chunked\" (no folded line)");
    else if (h.content_length > 0 && h.transfer_encoding > 0)
        snprintf(why, why_len, "the request has both Content-Length and Transfer-Encoding");
    else if (h.authorization > 1)
        snprintf(why, why_len, "the request has more than one Authorization header");
    else
        return false;
    return true;
}

/* The body's minimum rate (docs/API.md "Connections"): a body that has received `bytes` bytes
 * `elapsed_ms` after its request's headers is too slow once elapsed_ms > --body-timeout +
 * bytes / --body-min-rate (a grace, then min_rate bytes a second on average); min_rate 0 leaves a
 * fixed deadline of --body-timeout. */
static bool body_too_slow(const cfg *cf, int64_t elapsed_ms, long long bytes)
{
    int64_t allowed = (int64_t)cf->body_timeout_s * 1000;
    if (cf->body_min_rate > 0 && bytes >= (long long)cf->body_min_rate * 86400LL * 365)
        return false; /* a year's worth at the rate (and no overflow below) */
    if (cf->body_min_rate > 0)
        allowed += (int64_t)(bytes / (long long)cf->body_min_rate) * 1000 +
                   (int64_t)(bytes % (long long)cf->body_min_rate) * 1000 / cf->body_min_rate;
    return elapsed_ms > allowed;
}

static int64_t ctx_age_ms(const http_ctx *c)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)(t.tv_sec - c->t0.tv_sec) * 1000 + (t.tv_nsec - c->t0.tv_nsec) / 1000000;
}

/* Marks the connection as awaiting (or no longer awaiting) this request's body, for on_tick. */
static void body_watch(http_ctx *c, struct MHD_Connection *conn, bool on)
{
    conn_rec *rec = conn_record(conn);
    if (rec == NULL)
        return;
    if (on) {
        atomic_store(&rec->body_bytes, 0);
        atomic_store(&rec->body_since_ms, time_mono_ms() - ctx_age_ms(c));
    }
    atomic_store(&rec->in_body, on);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **req_cls)
{
    (void)version;
    http_server *srv = cls;
    http_ctx *c = *req_cls;
    if (c == NULL) {
        c = ctx_alloc(srv, conn, url, method);
        if (c == NULL)
            return MHD_NO;
        atomic_fetch_add(&srv->in_flight, 1);
        *req_cls = c;
        conn_rec *rec = conn_record(conn);
        if (rec != NULL)
            atomic_store(&rec->waiting, false);
        if (atomic_load(&srv->stopping)) /* a new request during a stop: 503 and close */
            return reply_refused(c, conn, 503, "shutting_down",
                                 "the server is shutting down; retry on a new connection");
        char why[160];
        if (framing_error(conn, why, sizeof why))
            return reply_refused(c, conn, 400, "invalid_argument", why);
        enum MHD_Result r = first_call(c, conn);
        if (r == MHD_YES)
            r = early_auth(c, conn);
        unsigned long long declared;
        if (r == MHD_YES && (c->kind == KIND_ROUTE || c->kind == KIND_STATIC) &&
            announces_body(conn, &declared))
            body_watch(c, conn, true);
        return r;
    }
    if (*upload_data_size != 0) {
        c->body_seen += *upload_data_size;
        conn_rec *rec = conn_record(conn);
        if (rec != NULL)
            atomic_store(&rec->body_bytes, (long long)c->body_seen);
        if (body_too_slow(srv->cfg, ctx_age_ms(c), (long long)c->body_seen)) {
            /* No reply may be queued while upload data is being delivered: drop the connection.
             * The access line records 408. */
            c->status = 408;
            dp_log(DP_LOG_DEBUG, c->req_id,
                   "request body slower than %u bytes/s after %u s (%llu bytes): closing",
                   srv->cfg->body_min_rate, srv->cfg->body_timeout_s,
                   (unsigned long long)c->body_seen);
            return MHD_NO;
        }
        if (c->kind == KIND_ROUTE || c->kind == KIND_STATIC)
            ctx_append(c, upload_data, *upload_data_size); /* static: cap 0, so too_big */
        *upload_data_size = 0;
        return MHD_YES;
    }
    body_watch(c, conn, false); /* the body is complete */
    if (c->kind == KIND_REPLIED || c->status != 0)
        return MHD_YES;
    if (c->pending != NULL) /* resumed after a deferred answer's wake-up */
        return run_handler(c, conn, c->pending);
    return final_call(c, conn);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    http_server *srv = cls;
    http_ctx *c = *req_cls;
    if (c == NULL)
        return;
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    int64_t us =
        (int64_t)(t1.tv_sec - c->t0.tv_sec) * 1000000 + (t1.tv_nsec - c->t0.tv_nsec) / 1000;
    if (us < 0)
        us = 0;
    conn_rec *rec = conn_record(conn);
    if (rec != NULL && atomic_exchange(&rec->body_dropped, false) && c->status == 0)
        c->status = 408; /* on_tick dropped its slow body */
    http_metrics_observe(srv->metrics, c->metrics_row, c->status, (uint64_t)us);
    dp_log(DP_LOG_INFO, c->req_id, "%s %s %d %lldus", c->method, c->path, c->status, (long long)us);
    if (rec != NULL) { /* a kept-alive connection now waits for its next request */
        atomic_store(&rec->in_body, false);
        atomic_store(&rec->since_ms, time_mono_ms());
        atomic_store(&rec->waiting, true);
    }
    ctx_free(c);
    *req_cls = NULL;
    atomic_fetch_sub(&srv->in_flight, 1);
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

size_t http_percent_decode(char *s)
{
    char *w = s;
    for (const char *r = s; *r != '\0';) {
        int hi, lo;
        if (r[0] == '%' && (hi = hexval(r[1])) >= 0 && (lo = hexval(r[2])) >= 0 && (hi | lo) != 0) {
            *w++ = (char)(hi * 16 + lo);
            r += 3;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
}

static size_t on_unescape(void *cls, struct MHD_Connection *conn, char *s)
{
    (void)cls;
    (void)conn;
    return http_percent_decode(s);
}

/* MHD's own messages (a client closing mid-request, a malformed request MHD refused itself) are
 * logged at most HTTP_MHD_LOG_PER_S a second, so a flood of attacker connections cannot flood the
 * log; the number left out is logged with the next line that gets through. */
__attribute__((format(printf, 2, 0))) static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    http_server *srv = cls;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    long long sec = (long long)t.tv_sec;
    long long win = atomic_load(&srv->mhd_log_window);
    if (win != sec && atomic_compare_exchange_strong(&srv->mhd_log_window, &win, sec))
        atomic_store(&srv->mhd_log_count, 0);
    if (atomic_fetch_add(&srv->mhd_log_count, 1) >= HTTP_MHD_LOG_PER_S) {
        atomic_fetch_add(&srv->mhd_log_dropped, 1);
        return;
    }
    char msg[512];
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    if (n < 0)
        return;
    for (size_t k = strlen(msg); k > 0 && (msg[k - 1] == '\n' || msg[k - 1] == '\r');)
        msg[--k] = '\0'; /* MHD ends its messages with a newline */
    long dropped = atomic_exchange(&srv->mhd_log_dropped, 0);
    if (dropped > 0)
        dp_log(DP_LOG_WARN, NULL, "microhttpd: %s (%ld similar message(s) not logged)", msg,
               dropped);
    else
        dp_log(DP_LOG_WARN, NULL, "microhttpd: %s", msg);
}

/* ---- server lifecycle ---- */

static unsigned boot_nonce(void)
{
    unsigned v = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f != NULL) {
        if (fread(&v, sizeof v, 1, f) != 1)
            v = 0;
        fclose(f);
    }
    if (v == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = (unsigned)ts.tv_nsec ^ ((unsigned)getpid() << 16);
    }
    return v;
}

/* MHD tells us when a connection it serves closes: its address count drops (http/accept.h). */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    http_server *srv = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fi =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        conn_rec *rec = fi != NULL ? malloc(sizeof *rec) : NULL;
        if (rec == NULL)
            return; /* no header deadline for its later requests; nothing else depends on it */
        rec->fd = fi->connect_fd;
        atomic_init(&rec->since_ms, time_mono_ms());
        atomic_init(&rec->waiting, true);
        atomic_init(&rec->in_body, false);
        atomic_init(&rec->body_since_ms, 0);
        atomic_init(&rec->body_bytes, 0);
        atomic_init(&rec->body_dropped, false);
        rec->prev = NULL;
        pthread_mutex_lock(&srv->conns_mu);
        rec->next = srv->conns;
        if (srv->conns != NULL)
            srv->conns->prev = rec;
        srv->conns = rec;
        pthread_mutex_unlock(&srv->conns_mu);
        *socket_context = rec;
        return;
    }
    if (code != MHD_CONNECTION_NOTIFY_CLOSED)
        return;
    conn_rec *rec = *socket_context;
    if (rec != NULL) { /* MHD closes the socket after this call: off the list first */
        pthread_mutex_lock(&srv->conns_mu);
        if (rec->prev != NULL)
            rec->prev->next = rec->next;
        else
            srv->conns = rec->next;
        if (rec->next != NULL)
            rec->next->prev = rec->prev;
        pthread_mutex_unlock(&srv->conns_mu);
        free(rec);
        *socket_context = NULL;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    http_acceptor_closed(srv->acc, ci != NULL ? ci->client_addr : NULL);
}

/* Once a second (acceptor thread): a connection MHD serves that has been waiting longer than
 * --header-timeout for a complete request (idle after an answer, or trickling the next request's
 * headers), or whose request body is too slow (body_too_slow), is shut down; MHD then sees the end
 * of the stream and closes it. The list lock keeps
 * each fd open while it is used: MHD takes a record off the list before closing its socket. */
static void on_tick(void *arg)
{
    http_server *srv = arg;
    int64_t now = time_mono_ms();
    int64_t limit = now - (int64_t)srv->cfg->header_timeout_s * 1000;
    unsigned closed = 0, slow = 0;
    pthread_mutex_lock(&srv->conns_mu);
    for (conn_rec *r = srv->conns; r != NULL; r = r->next) {
        if (atomic_load(&r->waiting) && atomic_load(&r->since_ms) < limit) {
            atomic_store(&r->waiting, false); /* once */
            shutdown(r->fd, SHUT_RDWR);
            closed++;
        } else if (atomic_load(&r->in_body) &&
                   body_too_slow(srv->cfg, now - atomic_load(&r->body_since_ms),
                                 atomic_load(&r->body_bytes))) {
            atomic_store(&r->in_body, false); /* once; a silent client is dropped too */
            atomic_store(&r->body_dropped, true);
            shutdown(r->fd, SHUT_RDWR);
            slow++;
        }
    }
    pthread_mutex_unlock(&srv->conns_mu);
    if (closed > 0)
        dp_log(DP_LOG_DEBUG, NULL,
               "http: closed %u kept-alive connection(s) without a complete request in %u s",
               closed, srv->cfg->header_timeout_s);
    if (slow > 0)
        dp_log(DP_LOG_DEBUG, NULL,
               "http: closed %u connection(s) whose request body was slower than %u bytes/s "
               "after %u s",
               slow, srv->cfg->body_min_rate, srv->cfg->body_timeout_s);
}

/* The acceptor's callbacks. */
static int acc_handoff(void *arg, int fd, const struct sockaddr_in *peer)
{
    http_server *srv = arg;
    return MHD_add_connection(srv->d, fd, (const struct sockaddr *)peer, sizeof *peer) == MHD_YES
               ? 0
               : -1;
}

static void acc_req_id(void *arg, char *out, size_t out_len)
{
    new_req_id(arg, out, out_len);
}

static void acc_observe(void *arg, int status, uint64_t us)
{
    http_server *srv = arg;
    http_metrics_observe(srv->metrics, HTTP_METRICS_ROW_UNMATCHED(srv->n_routes), status, us);
}

/* Raises the soft RLIMIT_NOFILE to the hard one and sizes the connection caps from it: MHD serves
 * at most HTTP_CONNECTION_LIMIT (or half the descriptors left after the reserve), the acceptor
 * holds the rest, up to HTTP_PENDING_LIMIT. */
static void size_connections(unsigned threads, size_t *max_handed, size_t *max_pending,
                             unsigned long *nofile)
{
    struct rlimit rl;
    unsigned long n = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        if (rl.rlim_cur < rl.rlim_max) {
            rlim_t old = rl.rlim_cur;
            rl.rlim_cur = rl.rlim_max;
            if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
                rl.rlim_cur = old;
        }
        n = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 1048576 ? 1048576
                                                                  : (unsigned long)rl.rlim_cur;
    }
    *nofile = n;
    unsigned long reserve = HTTP_FD_RESERVE + (unsigned long)HTTP_FD_PER_THREAD * (threads + 2);
    unsigned long budget = n > reserve + 32 ? n - reserve : 32;
    unsigned long handed = budget / 2 < HTTP_CONNECTION_LIMIT ? budget / 2 : HTTP_CONNECTION_LIMIT;
    unsigned long pending =
        budget - handed < HTTP_PENDING_LIMIT ? budget - handed : HTTP_PENDING_LIMIT;
    *max_handed = handed < 16 ? 16 : handed;
    *max_pending = pending < 16 ? 16 : pending;
}

http_server *http_server_start(const app *a, const route *routes, size_t n_routes,
                               http_authenticate_fn authenticate, dp_err *err)
{
    const cfg *c = a->cfg;
    store *st = a->store;
    http_server *srv = dp_calloc(1, sizeof *srv);
    if (srv == NULL) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    srv->cfg = c;
    srv->store = st;
    srv->app = *a;
    srv->authenticate = authenticate;
    srv->routes = routes;
    srv->n_routes = n_routes;
    srv->boot_nonce = boot_nonce();
    atomic_init(&srv->next_req, 1);
    atomic_init(&srv->in_flight, 0);
    atomic_init(&srv->deferring, 0);
    atomic_init(&srv->stopping, false);
    atomic_init(&srv->mhd_log_window, 0);
    atomic_init(&srv->mhd_log_count, 0);
    atomic_init(&srv->mhd_log_dropped, 0);
    if (pthread_mutex_init(&srv->conns_mu, NULL) != 0) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of resources");
        dp_free(srv);
        return NULL;
    }
    srv->metrics = http_metrics_alloc(routes, n_routes, store_schema_version(st));
    srv->app.metrics = srv->metrics;
    if (srv->metrics == NULL) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        pthread_mutex_destroy(&srv->conns_mu);
        dp_free(srv);
        return NULL;
    }
    size_t max_handed, max_pending;
    unsigned long nofile;
    size_connections(c->threads, &max_handed, &max_pending, &nofile);
    http_accept_cfg ac = {
        .host = c->host,
        .port = c->port,
        .header_timeout_s = c->header_timeout_s,
        .max_conns_per_ip = c->max_conns_per_ip,
        .max_pending = max_pending,
        .max_handed = max_handed,
        .handoff = acc_handoff,
        .next_req_id = acc_req_id,
        .observe = acc_observe,
        .tick = on_tick,
        .arg = srv,
    };
    /* The listening socket is ours (http/accept.h): MHD gets connections whose request headers
     * are complete, through MHD_add_connection (which needs MHD_USE_ITC with internal threads),
     * and never has a listening socket of its own, so a stop never asks MHD to take one out of
     * its workers' epoll sets (MHD_quiesce_daemon races the workers there and can abort). */
    srv->acc = http_acceptor_open(&ac, err);
    if (srv->acc == NULL)
        goto fail;
    /* MHD_ALLOW_SUSPEND_RESUME: deferred answers (DESIGN above). The acceptor keeps MHD's
     * connections within max_handed; MHD's own limit is twice that, because MHD splits it among
     * its workers and a connection a worker refuses later would be closed without the
     * NOTIFY_CONNECTION that releases its address's count. */
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG |
                         MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_NO_LISTEN_SOCKET;
    /* clang-format off */
    srv->d = MHD_start_daemon(
        flags, 0, NULL,                                        /* */
        NULL, on_access, srv,                                  /* */
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, srv,           /* first, so it gets all */
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)c->threads, /* */
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)HTTP_CONNECTION_TIMEOUT_S,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)(2 * max_handed),       /* see below */
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,                    /* */
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,                  /* */
        MHD_OPTION_UNESCAPE_CALLBACK, on_unescape, NULL,                   /* */
        MHD_OPTION_END);
    /* clang-format on */
    if (srv->d == NULL) {
        dp_err_set(err, DP_EINTERNAL, "listen", "cannot start the HTTP server on %s:%u", c->host,
                   (unsigned)c->port);
        goto fail;
    }
    if (http_acceptor_run(srv->acc, err) != DP_OK) {
        MHD_stop_daemon(srv->d);
        goto fail;
    }
    srv->port = http_acceptor_port(srv->acc);
    dp_log(DP_LOG_INFO, NULL,
           "http: up to %zu connections served and %zu waiting for their headers (open-files "
           "limit %lu), %u per address (0 = no limit); header deadline %u s, body %u s + %u "
           "bytes/s",
           max_handed, max_pending, nofile, c->max_conns_per_ip, c->header_timeout_s,
           c->body_timeout_s, c->body_min_rate);
    return srv;
fail:
    http_acceptor_free(srv->acc);
    http_metrics_free(srv->metrics);
    pthread_mutex_destroy(&srv->conns_mu);
    dp_free(srv);
    return NULL;
}

uint16_t http_server_port(const http_server *srv)
{
    return srv->port;
}

int http_server_stop(http_server *srv, unsigned drain_ms)
{
    if (srv == NULL)
        return 0;
    /* 1. New requests get 503 + Connection: close, answers in flight carry Connection: close, and
     * no handler is offered a deferral any more (run_handler). */
    atomic_store(&srv->stopping, true);
    /* 2. Our listening socket and the connections still sending headers are closed: no new
     * connection reaches MHD. MHD has no listening socket, so nothing is removed from its epoll
     * sets (no MHD_quiesce_daemon: issue #10, D1). */
    http_acceptor_stop(srv->acc);
    /* 3. Requests in flight finish, and every owed wake-up (which calls MHD_resume_connection)
     * runs: MHD must not be stopped with a suspended connection, nor before a wake-up that would
     * touch it. Both waits end at the drain deadline. */
    int64_t deadline = time_mono_ms() + (int64_t)drain_ms;
    struct timespec nap = {0, 10 * 1000000L};
    int64_t next_note = time_mono_ms() + HTTP_STOP_LOG_MS;
    while ((atomic_load(&srv->in_flight) > 0 || atomic_load(&srv->deferring) > 0) &&
           time_mono_ms() < deadline) {
        nanosleep(&nap, NULL);
        if (time_mono_ms() >= next_note) {
            dp_log(DP_LOG_INFO, NULL, "http: draining: %ld request(s) in flight",
                   (long)atomic_load(&srv->in_flight));
            next_note += HTTP_STOP_LOG_MS;
        }
    }
    long owed = atomic_load(&srv->deferring);
    long left = atomic_load(&srv->in_flight);
    if (owed > 0) {
        dp_log(DP_LOG_WARN, NULL,
               "http: %ld deferred answer(s) still owed after the drain timeout (%u ms); leaving "
               "the HTTP server running for the process exit",
               owed, drain_ms);
        return -1;
    }
    if (left > 0)
        dp_log(DP_LOG_WARN, NULL,
               "http: %ld request(s) still in flight after the drain timeout (%u ms) are cut off",
               left, drain_ms);
    /* 4. Closes every connection and joins the pool (a handler still running is waited for:
     * main bounds the whole stop). */
    MHD_stop_daemon(srv->d);
    http_acceptor_free(srv->acc);
    http_metrics_free(srv->metrics);
    pthread_mutex_destroy(&srv->conns_mu);
    dp_free(srv);
    return left > 0 ? 1 : 0;
}

/* ---- http_handler_call: the deferred path without a socket ---- */

typedef struct call_waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool woken; /* guarded by mu */
} call_waiter;

static void call_wake(void *arg)
{
    call_waiter *w = arg;
    pthread_mutex_lock(&w->mu);
    w->woken = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

int http_handler_call(route_fn h, const http_req *rq, http_resp *rs, dp_err *err)
{
    call_waiter w = {.woken = false};
    if (pthread_mutex_init(&w.mu, NULL) != 0)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of resources");
    if (pthread_cond_init(&w.cv, NULL) != 0) {
        pthread_mutex_destroy(&w.mu);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of resources");
    }
    http_defer d = {call_wake, &w};
    http_req r = *rq;
    r.defer = &d;
    int rc = h(&r, rs, err);
    http_pending *p = rs->pending;
    if (p != NULL) {
        rs->pending = NULL;
        pthread_mutex_lock(&w.mu);
        while (!w.woken)
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        http_resp_clear(rs);
        r.defer = NULL;
        rc = p->resume(p, &r, rs, err);
        p->release(p);
    }
    if (rc == DP_OK && rs->stream.read != NULL) /* no socket: the whole answer, as text */
        rc = http_resp_drain(rs, err);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    return rc;
}
