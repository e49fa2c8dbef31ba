/*
 * http/accept.c: the listening socket, the pending sockets and the per-address counts. Contract and
 * reasons in http/accept.h.
 *
 * DESIGN
 * One thread waits in epoll_wait on the listening socket, a wake-up pipe (stop) and every pending
 * socket (edge-triggered: one event per arrival of new bytes, since the bytes stay queued). On each
 * arrival the socket is peeked (recv MSG_PEEK, at most HTTP_ACCEPT_HEADER_MAX bytes) and scanned
 * for the empty line that ends the header block; complete -> checked -> handed to MHD, which then
 * reads those same bytes. Pending sockets sit in a list in accept order, which is also deadline
 * order (one timeout for all), so expiring is popping the head; epoll_wait's timeout is the head's
 * deadline.
 *
 * Slots: a fixed array of max_pending entries with a free list; epoll's data carries the slot
 * index and a generation number, so an event can never be taken for a later socket in the same
 * slot.
 *
 * Per-address counts: an open-addressing table (linear probing, deletion by backward shift) of
 * IPv4 address -> connections (pending + handed to MHD), sized to twice the most connections that
 * can exist at once, so it never fills. Guarded by mu (the acceptor and MHD's threads, through
 * http_acceptor_closed); nothing else is done while mu is held.
 *
 * Error answers are best effort: written with one non-blocking sendmsg, then the write side is
 * shut, what the client has already sent is read and dropped (so that closing does not reset the
 * connection before the client has read the answer), and the socket is closed.
 */
#include "service/http/accept.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/dp_alloc.h"
#include "common/dp_log.h"
#include "service/codec/json_util.h"
#include "service/http/err.h"

#define ACCEPT_BACKLOG     1024
#define ACCEPT_EVENTS      64
#define ACCEPT_PAUSE_MS    100     /* out of file descriptors: stop accepting for this long */
#define ACCEPT_DRAIN_BYTES 65536   /* read and dropped before closing an answered socket */
#define ACCEPT_WARN_PER_S  5       /* warnings logged per second at most; the rest are counted */
#define ACCEPT_TICK_US     1000000 /* cfg.tick period */
#define EV_LISTEN          0u
#define EV_WAKE            1u
#define EV_PEND            2u /* + slot index */
#define NONE               SIZE_MAX

typedef struct pend {
    int fd;                  /* -1 when the slot is free */
    uint32_t gen;            /* bumped each time the slot is reused */
    struct sockaddr_in peer; /* client address */
    int64_t t0_us;           /* accept time, CLOCK_MONOTONIC microseconds */
    int64_t deadline_us;     /* t0_us + header timeout */
    size_t prev, next;       /* accept-order list (in use) or free list (next only) */
} pend;

typedef struct ip_slot {
    uint32_t addr;  /* network byte order */
    uint32_t count; /* 0 = empty slot */
} ip_slot;

struct http_acceptor {
    http_accept_cfg cfg;
    int lfd;       /* listening socket, -1 once closed */
    int ep;        /* epoll */
    int wake[2];   /* pipe: a byte in wake[1] stops the thread */
    uint16_t port; /* bound port */
    pthread_t thread;
    bool running; /* thread started and not joined (main thread only) */
    pend *pend;   /* max_pending slots (acceptor thread only after run) */
    size_t free_head;
    size_t head, tail; /* pending sockets in accept order */
    size_t n_pending;
    bool paused; /* accept paused (out of fds) until resume_us */
    int64_t resume_us;
    int64_t next_tick_us;   /* next cfg.tick call */
    int64_t warn_window_us; /* rate limit of warnings (acceptor thread) */
    unsigned warn_in_window;
    uint64_t warn_suppressed;
    char *buf; /* peek buffer, HTTP_ACCEPT_HEADER_MAX + 1 bytes */
    pthread_mutex_t mu;
    ip_slot *ips;       /* guarded by mu */
    size_t ip_mask;     /* table size - 1 (a power of two) */
    size_t handed_open; /* guarded by mu: handed to MHD, not yet closed */
    _Atomic uint64_t st_accepted, st_handed, st_timed_out, st_refused_ip, st_refused_full,
        st_bad_request, st_closed_early;
};

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

__attribute__((format(printf, 2, 3))) static void warn_limited(http_acceptor *a, const char *fmt,
                                                               ...)
{
    int64_t t = now_us();
    if (t - a->warn_window_us >= 1000000) {
        if (a->warn_suppressed > 0)
            dp_log(DP_LOG_WARN, NULL, "http: %llu similar warning(s) not logged",
                   (unsigned long long)a->warn_suppressed);
        a->warn_window_us = t;
        a->warn_in_window = 0;
        a->warn_suppressed = 0;
    }
    if (a->warn_in_window >= ACCEPT_WARN_PER_S) {
        a->warn_suppressed++;
        return;
    }
    a->warn_in_window++;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    dp_log(DP_LOG_WARN, NULL, "%s", msg);
}

/* ---- per-address counts (mu held) ---- */

static size_t ip_home(const http_acceptor *a, uint32_t addr)
{
    uint32_t x = addr;
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return (size_t)x & a->ip_mask;
}

static size_t ip_find(const http_acceptor *a, uint32_t addr)
{
    size_t i = ip_home(a, addr);
    while (a->ips[i].count != 0 && a->ips[i].addr != addr)
        i = (i + 1) & a->ip_mask;
    return i;
}

static void ip_remove_at(http_acceptor *a, size_t i)
{
    size_t j = i;
    for (;;) {
        j = (j + 1) & a->ip_mask;
        if (a->ips[j].count == 0)
            break;
        size_t k = ip_home(a, a->ips[j].addr);
        /* entry j may move to i unless its home lies cyclically in (i, j] */
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays)
            continue;
        a->ips[i] = a->ips[j];
        i = j;
    }
    a->ips[i].count = 0;
    a->ips[i].addr = 0;
}

static void ip_dec(http_acceptor *a, uint32_t addr)
{
    size_t i = ip_find(a, addr);
    if (a->ips[i].count == 0)
        return; /* not counted: nothing to do */
    if (--a->ips[i].count == 0)
        ip_remove_at(a, i);
}

void http_acceptor_closed(http_acceptor *a, const struct sockaddr *peer)
{
    if (a == NULL || peer == NULL || peer->sa_family != AF_INET)
        return;
    uint32_t addr = ((const struct sockaddr_in *)(const void *)peer)->sin_addr.s_addr;
    pthread_mutex_lock(&a->mu);
    ip_dec(a, addr);
    if (a->handed_open > 0)
        a->handed_open--;
    pthread_mutex_unlock(&a->mu);
}

/* ---- parsing the first request's head ---- */

size_t http_accept_header_end(const char *buf, size_t len)
{
    size_t i = 0;
    while (i < len && (buf[i] == '\r' || buf[i] == '\n'))
        i++;
    for (size_t k = i; k < len; k++) {
        if (buf[k] != '\n')
            continue;
        if (k + 1 < len && buf[k + 1] == '\n')
            return k + 2;
        if (k + 2 < len && buf[k + 1] == '\r' && buf[k + 2] == '\n')
            return k + 3;
    }
    return 0;
}

static bool is_tchar(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

static void copy_cut(char *dst, size_t dst_len, const char *src, size_t n)
{
    if (dst_len == 0)
        return;
    if (n >= dst_len)
        n = dst_len - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Trims optional whitespace (SP, HT) at both ends of [*s, *s + *n). */
static void trim_ows(const char **s, size_t *n)
{
    while (*n > 0 && (**s == ' ' || **s == '\t')) {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
        (*n)--;
}

int http_accept_check_head(const char *buf, size_t len, char *msg, size_t msg_len, char *method,
                           size_t method_len, char *path, size_t path_len)
{
    copy_cut(method, method_len, "-", 1);
    copy_cut(path, path_len, "-", 1);
    size_t i = 0;
    while (i < len && (buf[i] == '\r' || buf[i] == '\n'))
        i++;
    const char *line = buf + i;
    const char *nl = memchr(line, '\n', len - i);
    if (nl == NULL) {
        snprintf(msg, msg_len, "the request line is not complete");
        return 400;
    }
    size_t ll = (size_t)(nl - line);
    if (ll > 0 && line[ll - 1] == '\r')
        ll--;
    const char *sp1 = memchr(line, ' ', ll);
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', ll - (size_t)(sp1 + 1 - line)) : NULL;
    if (sp1 != NULL) {
        copy_cut(method, method_len, line, (size_t)(sp1 - line));
        const char *pe = sp2 ? sp2 : line + ll;
        copy_cut(path, path_len, sp1 + 1, (size_t)(pe - sp1 - 1));
    }
    if (sp1 == NULL || sp2 == NULL || sp1 == line || sp2 == sp1 + 1 ||
        memchr(sp2 + 1, ' ', ll - (size_t)(sp2 + 1 - line)) != NULL) {
        snprintf(msg, msg_len,
                 "malformed request line: expected METHOD SP TARGET SP HTTP/1.1 (HTTP/0.9 is not "
                 "supported)");
        return 400;
    }
    for (const char *p = line; p < sp1; p++)
        if (!is_tchar(*p)) {
            snprintf(msg, msg_len, "malformed request line: the method is not a token");
            return 400;
        }
    const char *ver = sp2 + 1;
    size_t vl = ll - (size_t)(ver - line);
    if (vl >= 5 && memcmp(ver, "HTTP/", 5) == 0) {
        if (!(vl == 8 && (memcmp(ver, "HTTP/1.1", 8) == 0 || memcmp(ver, "HTTP/1.0", 8) == 0))) {
            snprintf(msg, msg_len, "HTTP version %.*s is not supported; use HTTP/1.1",
                     (int)(vl > 16 ? 16 : vl), ver);
            return 505;
        }
    } else {
        snprintf(msg, msg_len, "malformed request line: the protocol must be HTTP/1.1");
        return 400;
    }
    /* header lines, up to the empty line */
    size_t pos = (size_t)(nl + 1 - buf);
    for (unsigned n = 1; pos < len; n++) {
        const char *h = buf + pos;
        const char *e = memchr(h, '\n', len - pos);
        if (e == NULL)
            break;
        size_t hl = (size_t)(e - h);
        pos += hl + 1;
        if (hl > 0 && h[hl - 1] == '\r')
            hl--;
        if (hl == 0)
            break; /* the end of the block */
        if (h[0] == ' ' || h[0] == '\t') {
            /* Obsolete line folding (RFC 9112 5.2): MHD would append the line to the previous
             * value ("Content-Length: 36" + " 0"), which a proxy may read otherwise. */
            snprintf(msg, msg_len,
                     "malformed header line %u: obsolete line folding (a line starting with a "
                     "space or tab) is not accepted",
                     n);
            return 400;
        }
        const char *colon = memchr(h, ':', hl);
        if (colon == NULL || colon == h) {
            snprintf(msg, msg_len, "malformed header line %u: expected NAME: VALUE", n);
            return 400;
        }
        for (const char *p = h; p < colon; p++)
            if (!is_tchar(*p)) {
                snprintf(msg, msg_len,
                         "malformed header line %u: the name is not a token (no space before the "
                         "colon)",
                         n);
                return 400;
            }
        size_t nlen = (size_t)(colon - h);
        const char *v = colon + 1;
        size_t vlen = hl - nlen - 1;
        trim_ows(&v, &vlen);
        if (nlen == 14 && strncasecmp(h, "Content-Length", 14) == 0) {
            bool ok = vlen >= 1 && vlen <= 18;
            for (size_t k = 0; ok && k < vlen; k++)
                ok = v[k] >= '0' && v[k] <= '9';
            if (!ok) {
                snprintf(msg, msg_len,
                         "Content-Length must be a decimal number of bytes (at most 18 digits)");
                return 400;
            }
        } else if (nlen == 17 && strncasecmp(h, "Transfer-Encoding", 17) == 0) {
            if (!(vlen == 7 && strncasecmp(v, "chunked", 7) == 0)) {
                snprintf(msg, msg_len, "Transfer-Encoding %.*s is not supported (only chunked)",
                         (int)(vlen > 32 ? 32 : vlen), v);
                return 501;
            }
        }
    }
    return 0;
}

/* ---- sockets ---- */

static const char *reason(int status)
{
    switch (status) {
        case 400:
            return "Bad Request";
        case 408:
            return "Request Timeout";
        case 414:
            return "URI Too Long";
        case 431:
            return "Request Header Fields Too Large";
        case 501:
            return "Not Implemented";
        case 503:
            return "Service Unavailable";
        case 505:
            return "HTTP Version Not Supported";
        default:
            return "Error";
    }
}

static const char *code_name(int status)
{
    switch (status) {
        case 408:
            return "request_timeout";
        case 414:
            return "uri_too_long";
        case 431:
            return "header_fields_too_large";
        case 501:
            return "not_implemented";
        case 503:
            return "unavailable";
        case 505:
            return "http_version_not_supported";
        default:
            return "invalid_argument";
    }
}

/* Writes the JSON error answer (best effort), logs the access line, closes fd. */
static void answer_close(http_acceptor *a, int fd, int status, const char *msg, const char *method,
                         const char *path, int64_t t0_us)
{
    char rid[80];
    a->cfg.next_req_id(a->cfg.arg, rid, sizeof rid);
    json_t *b = http_err_body_raw(code_name(status), msg, NULL, rid);
    char *js = b ? json_util_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    if (js != NULL) {
        char head[512];
        int n = snprintf(head, sizeof head,
                         "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                         "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
                         "X-Request-Id: %s\r\nConnection: close\r\n%sContent-Length: %zu\r\n\r\n",
                         status, reason(status), rid, status == 503 ? "Retry-After: 1\r\n" : "",
                         strlen(js));
        if (n > 0 && (size_t)n < sizeof head) {
            struct iovec iov[2] = {{head, (size_t)n}, {js, strlen(js)}};
            struct msghdr mh;
            memset(&mh, 0, sizeof mh);
            mh.msg_iov = iov;
            mh.msg_iovlen = 2;
            (void)sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        free(js);
    }
    shutdown(fd, SHUT_WR);
    char sink[4096];
    for (size_t got = 0; got < ACCEPT_DRAIN_BYTES;) {
        ssize_t r = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    int64_t us = now_us() - t0_us;
    if (us < 0)
        us = 0;
    dp_log(DP_LOG_INFO, rid, "%s %s %d %lldus", method, path, status, (long long)us);
    if (a->cfg.observe != NULL)
        a->cfg.observe(a->cfg.arg, status, (uint64_t)us);
}

static void list_unlink(http_acceptor *a, size_t i)
{
    pend *p = &a->pend[i];
    if (p->prev != NONE)
        a->pend[p->prev].next = p->next;
    else
        a->head = p->next;
    if (p->next != NONE)
        a->pend[p->next].prev = p->prev;
    else
        a->tail = p->prev;
}

/* Forgets slot i: out of epoll (closing does that too, but the fd may be handed on), off the list,
 * onto the free list. Does not close the fd. */
static void pend_release(http_acceptor *a, size_t i)
{
    pend *p = &a->pend[i];
    epoll_ctl(a->ep, EPOLL_CTL_DEL, p->fd, NULL);
    list_unlink(a, i);
    p->fd = -1;
    p->next = a->free_head;
    a->free_head = i;
    a->n_pending--;
}

/* Ends pending slot i: answers status (0 = close silently) and drops its count. */
static void pend_end(http_acceptor *a, size_t i, int status, const char *msg, const char *method,
                     const char *path)
{
    pend *p = &a->pend[i];
    int fd = p->fd;
    uint32_t addr = p->peer.sin_addr.s_addr;
    int64_t t0 = p->t0_us;
    pend_release(a, i);
    pthread_mutex_lock(&a->mu);
    ip_dec(a, addr);
    pthread_mutex_unlock(&a->mu);
    if (status == 0)
        close(fd);
    else
        answer_close(a, fd, status, msg, method, path, t0);
}

static void pend_handoff(http_acceptor *a, size_t i)
{
    pend *p = &a->pend[i];
    int fd = p->fd;
    struct sockaddr_in peer = p->peer;
    pthread_mutex_lock(&a->mu);
    bool room = a->handed_open < a->cfg.max_handed;
    if (room)
        a->handed_open++;
    pthread_mutex_unlock(&a->mu);
    if (!room) {
        atomic_fetch_add(&a->st_refused_full, 1);
        pend_end(a, i, 503, "the server is at its connection limit; retry shortly", "-", "-");
        return;
    }
    pend_release(a, i);
    atomic_fetch_add(&a->st_handed, 1);
    if (a->cfg.handoff(a->cfg.arg, fd, &peer) != 0) { /* fd closed by MHD */
        http_acceptor_closed(a, (const struct sockaddr *)&peer);
        warn_limited(a, "http: could not hand a connection to the HTTP server (%s)",
                     strerror(errno));
    }
}

static void pend_readable(http_acceptor *a, size_t i)
{
    pend *p = &a->pend[i];
    ssize_t n = recv(p->fd, a->buf, HTTP_ACCEPT_HEADER_MAX, MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) { /* closed by the client, or reset */
        atomic_fetch_add(&a->st_closed_early, 1);
        pend_end(a, i, 0, NULL, NULL, NULL);
        return;
    }
    size_t len = (size_t)n;
    char method[16], path[256], msg[200];
    size_t end = http_accept_header_end(a->buf, len);
    if (end == 0) {
        if (len < HTTP_ACCEPT_HEADER_MAX)
            return; /* wait for more */
        atomic_fetch_add(&a->st_bad_request, 1);
        http_accept_check_head(a->buf, len, msg, sizeof msg, method, sizeof method, path,
                               sizeof path);
        if (memchr(a->buf, '\n', len) == NULL) {
            snprintf(msg, sizeof msg, "the request line is longer than %d bytes",
                     HTTP_ACCEPT_HEADER_MAX);
            pend_end(a, i, 414, msg, method, path);
        } else {
            snprintf(msg, sizeof msg, "the request headers are longer than %d bytes",
                     HTTP_ACCEPT_HEADER_MAX);
            pend_end(a, i, 431, msg, method, path);
        }
        return;
    }
    int status = http_accept_check_head(a->buf, end, msg, sizeof msg, method, sizeof method, path,
                                        sizeof path);
    if (status != 0) {
        atomic_fetch_add(&a->st_bad_request, 1);
        pend_end(a, i, status, msg, method, path);
        return;
    }
    pend_handoff(a, i);
}

static void set_listen_events(http_acceptor *a, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.u64 = EV_LISTEN};
    epoll_ctl(a->ep, EPOLL_CTL_MOD, a->lfd, &ev);
}

static void accept_all(http_acceptor *a)
{
    for (;;) {
        struct sockaddr_in peer;
        socklen_t pl = sizeof peer;
        int fd = accept(a->lfd, (struct sockaddr *)&peer, &pl);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                warn_limited(a, "http: accept: %s; pausing new connections for %d ms",
                             strerror(errno), ACCEPT_PAUSE_MS);
                a->paused = true;
                a->resume_us = now_us() + (int64_t)ACCEPT_PAUSE_MS * 1000;
                set_listen_events(a, 0);
                return;
            }
            warn_limited(a, "http: accept: %s", strerror(errno));
            return;
        }
        int64_t t0 = now_us();
        atomic_fetch_add(&a->st_accepted, 1);
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0 ||
            fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 || peer.sin_family != AF_INET) {
            close(fd);
            continue;
        }
        uint32_t addr = peer.sin_addr.s_addr;
        int refuse = 0; /* 1: per address, 2: full */
        pthread_mutex_lock(&a->mu);
        size_t k = ip_find(a, addr);
        if (a->n_pending >= a->cfg.max_pending)
            refuse = 2;
        else if (a->cfg.max_conns_per_ip > 0 && a->ips[k].count >= a->cfg.max_conns_per_ip)
            refuse = 1;
        else {
            a->ips[k].addr = addr;
            a->ips[k].count++;
        }
        pthread_mutex_unlock(&a->mu);
        if (refuse != 0) {
            char msg[160];
            if (refuse == 1) {
                atomic_fetch_add(&a->st_refused_ip, 1);
                snprintf(msg, sizeof msg,
                         "too many connections from this address (at most %u); retry shortly",
                         a->cfg.max_conns_per_ip);
            } else {
                atomic_fetch_add(&a->st_refused_full, 1);
                snprintf(msg, sizeof msg, "the server is at its connection limit; retry shortly");
            }
            answer_close(a, fd, 503, msg, "-", "-", t0);
            continue;
        }
        size_t i = a->free_head;
        pend *p = &a->pend[i];
        a->free_head = p->next;
        p->fd = fd;
        p->gen++;
        p->peer = peer;
        p->t0_us = t0;
        p->deadline_us = t0 + (int64_t)a->cfg.header_timeout_s * 1000000;
        p->next = NONE;
        p->prev = a->tail;
        if (a->tail != NONE)
            a->pend[a->tail].next = i;
        else
            a->head = i;
        a->tail = i;
        a->n_pending++;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET,
                                 .data.u64 = ((uint64_t)p->gen << 32) | (EV_PEND + i)};
        if (epoll_ctl(a->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
            warn_limited(a, "http: epoll_ctl: %s", strerror(errno));
            pend_end(a, i, 0, NULL, NULL, NULL);
        }
    }
}

static void expire(http_acceptor *a, int64_t t)
{
    while (a->head != NONE && a->pend[a->head].deadline_us <= t) {
        size_t i = a->head;
        atomic_fetch_add(&a->st_timed_out, 1);
        char msg[160];
        snprintf(msg, sizeof msg, "the request headers did not arrive within %u s",
                 a->cfg.header_timeout_s);
        /* what has arrived may name the method and path, for the log */
        char method[16] = "-", path[256] = "-", m2[8];
        ssize_t n = recv(a->pend[i].fd, a->buf, HTTP_ACCEPT_HEADER_MAX, MSG_PEEK | MSG_DONTWAIT);
        if (n > 0 && memchr(a->buf, '\n', (size_t)n) != NULL)
            http_accept_check_head(a->buf, (size_t)n, m2, sizeof m2, method, sizeof method, path,
                                   sizeof path);
        pend_end(a, i, 408, msg, method, path);
    }
}

static void *acceptor_main(void *arg)
{
    http_acceptor *a = arg;
    struct epoll_event evs[ACCEPT_EVENTS];
    for (;;) {
        int64_t t = now_us();
        int timeout = -1;
        if (a->head != NONE) {
            int64_t ms = (a->pend[a->head].deadline_us - t + 999) / 1000;
            timeout = ms < 0 ? 0 : ms > 60000 ? 60000 : (int)ms;
        }
        if (a->paused) {
            int64_t ms = (a->resume_us - t + 999) / 1000;
            int pm = ms < 0 ? 0 : (int)ms;
            if (timeout < 0 || pm < timeout)
                timeout = pm;
        }
        if (a->cfg.tick != NULL) {
            int64_t ms = (a->next_tick_us - t + 999) / 1000;
            int tm = ms < 0 ? 0 : (int)ms;
            if (timeout < 0 || tm < timeout)
                timeout = tm;
        }
        int n = epoll_wait(a->ep, evs, ACCEPT_EVENTS, timeout);
        if (n < 0 && errno != EINTR) {
            dp_log(DP_LOG_ERROR, NULL, "http: epoll_wait: %s; the acceptor stops", strerror(errno));
            return NULL;
        }
        for (int k = 0; k < n; k++) {
            uint64_t d = evs[k].data.u64;
            uint32_t id = (uint32_t)d;
            if (id == EV_WAKE)
                return NULL;
            if (id == EV_LISTEN) {
                if (!a->paused)
                    accept_all(a);
                continue;
            }
            size_t i = id - EV_PEND;
            if (i >= a->cfg.max_pending || a->pend[i].fd < 0 ||
                a->pend[i].gen != (uint32_t)(d >> 32))
                continue;
            pend_readable(a, i);
        }
        t = now_us();
        expire(a, t);
        if (a->paused && t >= a->resume_us) {
            a->paused = false;
            set_listen_events(a, EPOLLIN);
        }
        if (a->cfg.tick != NULL && t >= a->next_tick_us) {
            a->next_tick_us = t + ACCEPT_TICK_US;
            a->cfg.tick(a->cfg.arg);
        }
    }
}

/* ---- lifecycle ---- */

http_acceptor *http_acceptor_open(const http_accept_cfg *cfg, dp_err *err)
{
    http_acceptor *a = dp_calloc(1, sizeof *a);
    if (a == NULL) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    a->cfg = *cfg;
    a->lfd = a->ep = a->wake[0] = a->wake[1] = -1;
    a->head = a->tail = NONE;
    if (pthread_mutex_init(&a->mu, NULL) != 0) {
        dp_free(a);
        dp_err_set(err, DP_ENOMEM, NULL, "out of resources");
        return NULL;
    }
    size_t most = cfg->max_pending + cfg->max_handed, cap = 16;
    while (cap < 2 * most)
        cap *= 2;
    a->ips = dp_calloc(cap, sizeof *a->ips);
    a->ip_mask = cap - 1;
    a->pend = dp_calloc(cfg->max_pending, sizeof *a->pend);
    a->buf = malloc(HTTP_ACCEPT_HEADER_MAX + 1);
    if (a->ips == NULL || a->pend == NULL || a->buf == NULL) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < cfg->max_pending; i++) {
        a->pend[i].fd = -1;
        a->pend[i].next = i + 1 < cfg->max_pending ? i + 1 : NONE;
    }
    a->free_head = 0;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(cfg->port);
    if (inet_pton(AF_INET, cfg->host, &sa.sin_addr) != 1) {
        dp_err_set(err, DP_EINVAL, "listen", "cannot bind: %s is not an IPv4 address", cfg->host);
        goto fail;
    }
    int one = 1;
    a->lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (a->lfd < 0 || fcntl(a->lfd, F_SETFD, FD_CLOEXEC) != 0 ||
        fcntl(a->lfd, F_SETFL, O_NONBLOCK) != 0 ||
        setsockopt(a->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(a->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(a->lfd, ACCEPT_BACKLOG) != 0) {
        dp_err_set(err, DP_EINTERNAL, "listen",
                   "cannot listen on %s:%u (in use, or not permitted): %s", cfg->host,
                   (unsigned)cfg->port, strerror(errno));
        goto fail;
    }
    struct sockaddr_in bound;
    socklen_t bl = sizeof bound;
    if (getsockname(a->lfd, (struct sockaddr *)&bound, &bl) != 0) {
        dp_err_set(err, DP_EINTERNAL, "listen", "getsockname: %s", strerror(errno));
        goto fail;
    }
    a->port = ntohs(bound.sin_port);
    a->ep = epoll_create1(EPOLL_CLOEXEC);
    if (a->ep < 0 || pipe(a->wake) != 0) {
        dp_err_set(err, DP_EINTERNAL, NULL, "cannot create the acceptor's epoll set: %s",
                   strerror(errno));
        goto fail;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EV_LISTEN};
    struct epoll_event ew = {.events = EPOLLIN, .data.u64 = EV_WAKE};
    if (epoll_ctl(a->ep, EPOLL_CTL_ADD, a->lfd, &ev) != 0 ||
        epoll_ctl(a->ep, EPOLL_CTL_ADD, a->wake[0], &ew) != 0) {
        dp_err_set(err, DP_EINTERNAL, NULL, "epoll_ctl: %s", strerror(errno));
        goto fail;
    }
    return a;
fail:
    http_acceptor_free(a);
    return NULL;
}

uint16_t http_acceptor_port(const http_acceptor *a)
{
    return a->port;
}

int http_acceptor_run(http_acceptor *a, dp_err *err)
{
    if (pthread_create(&a->thread, NULL, acceptor_main, a) != 0)
        return dp_err_set(err, DP_EINTERNAL, NULL, "cannot start the acceptor thread");
    a->running = true;
    return DP_OK;
}

void http_acceptor_stop(http_acceptor *a)
{
    if (a == NULL)
        return;
    if (a->running) {
        char b = 's';
        while (write(a->wake[1], &b, 1) < 0 && errno == EINTR)
            ;
        pthread_join(a->thread, NULL);
        a->running = false;
    }
    if (a->lfd >= 0) {
        close(a->lfd); /* from here new clients are refused by the kernel */
        a->lfd = -1;
    }
    while (a->pend != NULL && a->head != NONE)
        pend_end(a, a->head, 0, NULL, NULL, NULL);
}

void http_acceptor_free(http_acceptor *a)
{
    if (a == NULL)
        return;
    http_acceptor_stop(a);
    if (a->ep >= 0)
        close(a->ep);
    if (a->wake[0] >= 0)
        close(a->wake[0]);
    if (a->wake[1] >= 0)
        close(a->wake[1]);
    free(a->buf);
    dp_free(a->pend);
    dp_free(a->ips);
    pthread_mutex_destroy(&a->mu);
    dp_free(a);
}

void http_acceptor_stats(http_acceptor *a, http_accept_stats *out)
{
    out->accepted = atomic_load(&a->st_accepted);
    out->handed = atomic_load(&a->st_handed);
    out->timed_out = atomic_load(&a->st_timed_out);
    out->refused_ip = atomic_load(&a->st_refused_ip);
    out->refused_full = atomic_load(&a->st_refused_full);
    out->bad_request = atomic_load(&a->st_bad_request);
    out->closed_early = atomic_load(&a->st_closed_early);
}
