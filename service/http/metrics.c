/*
 * http/metrics.c: lock-free request counters and the Prometheus text rendering. Contract in
 * http/metrics.h.
 *
 * Memory: per row 500 status counters + 17 buckets + sum + count of 8 bytes, about 4 KiB; with a
 * few dozen routes the whole table is well under 1 MiB and allocated once at start.
 */
#include "service/http/metrics.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/base/version.h"

#define STATUS_MIN 100
#define STATUS_N   500 /* 100..599 */

/* Upper bounds of the latency buckets, in microseconds (rendered in seconds). */
static const uint64_t BUCKETS_US[] = {100,     250,     500,     1000,    2500,   5000,
                                      10000,   25000,   50000,   100000,  250000, 500000,
                                      1000000, 2500000, 5000000, 10000000};
#define N_BUCKETS (sizeof BUCKETS_US / sizeof BUCKETS_US[0])

typedef struct metrics_row {
    atomic_uint_fast64_t status[STATUS_N];      /* requests per status 100..599 */
    atomic_uint_fast64_t aborted;               /* ended with no response */
    atomic_uint_fast64_t bucket[N_BUCKETS + 1]; /* non-cumulative; last = above every bound */
    atomic_uint_fast64_t sum_us;
    atomic_uint_fast64_t count;
} metrics_row;

struct http_metrics {
    const route *routes; /* borrowed table */
    size_t n_routes;
    int schema_version;   /* for dpsilo_schema_version */
    int64_t start_time_s; /* Unix seconds */
    metrics_row *rows;    /* n_routes + 2 */
};

http_metrics *http_metrics_alloc(const route *routes, size_t n, int schema_version)
{
    http_metrics *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    m->rows =
        calloc(n + 2, sizeof *m->rows); /* zero bytes are valid zeroed atomics on our targets */
    if (m->rows == NULL) {
        free(m);
        return NULL;
    }
    for (size_t r = 0; r < n + 2; r++) {
        for (size_t i = 0; i < STATUS_N; i++)
            atomic_init(&m->rows[r].status[i], 0);
        for (size_t i = 0; i <= N_BUCKETS; i++)
            atomic_init(&m->rows[r].bucket[i], 0);
        atomic_init(&m->rows[r].aborted, 0);
        atomic_init(&m->rows[r].sum_us, 0);
        atomic_init(&m->rows[r].count, 0);
    }
    m->routes = routes;
    m->n_routes = n;
    m->schema_version = schema_version;
    m->start_time_s = (int64_t)time(NULL);
    return m;
}

void http_metrics_free(http_metrics *m)
{
    if (m == NULL)
        return;
    free(m->rows);
    free(m);
}

void http_metrics_observe(http_metrics *m, size_t row, int status, uint64_t micros)
{
    if (m == NULL || row >= m->n_routes + 2)
        return;
    metrics_row *r = &m->rows[row];
    if (status >= STATUS_MIN && status < STATUS_MIN + STATUS_N)
        atomic_fetch_add_explicit(&r->status[status - STATUS_MIN], 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&r->aborted, 1, memory_order_relaxed);
    size_t b = 0;
    while (b < N_BUCKETS && micros > BUCKETS_US[b])
        b++;
    atomic_fetch_add_explicit(&r->bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->sum_us, micros, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->count, 1, memory_order_relaxed);
}

/* A growing text buffer; on any failure it is freed and marked failed. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    int failed;
} sbuf;

__attribute__((format(printf, 2, 0))) static void sb_vprintf(sbuf *b, const char *fmt, va_list args)
{
    if (b->failed)
        return;
    for (;;) {
        va_list ap;
        va_copy(ap, args);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t ncap = b->cap * 2 + (size_t)n + 1;
        char *np = realloc(b->p, ncap);
        if (np == NULL) {
            b->failed = 1;
            return;
        }
        b->p = np;
        b->cap = ncap;
    }
}

__attribute__((format(printf, 2, 3))) static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(b, fmt, ap);
    va_end(ap);
}

int http_metrics_appendf(char **text, size_t *len, dp_err *err, const char *fmt, ...)
{
    sbuf b = {*text, *len, *len, 0}; /* no spare room known: the first write grows it */
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&b, fmt, ap);
    va_end(ap);
    if (b.failed) {
        free(b.p);
        *text = NULL;
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    *text = b.p;
    *len = b.len;
    return DP_OK;
}

/* Label values for a row: the route's pattern and method, or the special names. */
static void row_labels(const http_metrics *m, size_t row, const char **route_l,
                       const char **method_l)
{
    if (row < m->n_routes) {
        *route_l = m->routes[row].pattern;
        *method_l = m->routes[row].method;
    } else if (row == HTTP_METRICS_ROW_STATIC(m->n_routes)) {
        *route_l = "static";
        *method_l = "GET";
    } else {
        *route_l = "unmatched";
        *method_l = "any";
    }
}

char *http_metrics_render(const http_metrics *m, size_t *len, dp_err *err)
{
    sbuf b = {malloc(16384), 0, 16384, 0};
    if (b.p == NULL) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    size_t n_rows = m->n_routes + 2;
    const char *rl, *ml;

    sb_printf(
        &b, "# HELP dpsilo_http_requests_total HTTP requests by route pattern, method and status.\n"
            "# TYPE dpsilo_http_requests_total counter\n");
    for (size_t r = 0; r < n_rows; r++) {
        row_labels(m, r, &rl, &ml);
        const metrics_row *x = &m->rows[r];
        for (size_t i = 0; i < STATUS_N; i++) {
            uint64_t v = atomic_load_explicit(&x->status[i], memory_order_relaxed);
            if (v != 0)
                sb_printf(
                    &b,
                    "dpsilo_http_requests_total{route=\"%s\",method=\"%s\",status=\"%zu\"} %llu\n",
                    rl, ml, i + STATUS_MIN, (unsigned long long)v);
        }
        uint64_t ab = atomic_load_explicit(&x->aborted, memory_order_relaxed);
        if (ab != 0)
            sb_printf(
                &b,
                "dpsilo_http_requests_total{route=\"%s\",method=\"%s\",status=\"aborted\"} %llu\n",
                rl, ml, (unsigned long long)ab);
    }

    sb_printf(
        &b,
        "# HELP dpsilo_http_request_duration_seconds Time from request headers to response sent.\n"
        "# TYPE dpsilo_http_request_duration_seconds histogram\n");
    for (size_t r = 0; r < n_rows; r++) {
        const metrics_row *x = &m->rows[r];
        uint64_t count = atomic_load_explicit(&x->count, memory_order_relaxed);
        if (count == 0)
            continue;
        row_labels(m, r, &rl, &ml);
        uint64_t cum = 0;
        for (size_t i = 0; i < N_BUCKETS; i++) {
            cum += atomic_load_explicit(&x->bucket[i], memory_order_relaxed);
            sb_printf(&b,
                      "dpsilo_http_request_duration_seconds_bucket{route=\"%s\",method=\"%s\",le="
                      "\"%g\"} %llu\n",
                      rl, ml, (double)BUCKETS_US[i] / 1e6, (unsigned long long)cum);
        }
        cum += atomic_load_explicit(&x->bucket[N_BUCKETS], memory_order_relaxed);
        sb_printf(&b,
                  "dpsilo_http_request_duration_seconds_bucket{route=\"%s\",method=\"%s\",le=\"+"
                  "Inf\"} %llu\n",
                  rl, ml, (unsigned long long)cum);
        sb_printf(&b, "dpsilo_http_request_duration_seconds_sum{route=\"%s\",method=\"%s\"} %.6f\n",
                  rl, ml, (double)atomic_load_explicit(&x->sum_us, memory_order_relaxed) / 1e6);
        /* _count equals the +Inf bucket by definition; use the same sum so a scrape is
         * self-consistent. */
        sb_printf(&b,
                  "dpsilo_http_request_duration_seconds_count{route=\"%s\",method=\"%s\"} %llu\n",
                  rl, ml, (unsigned long long)cum);
    }

    version_info v;
    version_get(&v);
    sb_printf(&b,
              "# HELP dpsilo_build_info Build and linked-library versions (value is always 1).\n"
              "# TYPE dpsilo_build_info gauge\n"
              "dpsilo_build_info{version=\"%s\",git_commit=\"%s\",microhttpd=\"%s\",jansson=\"%s\","
              "sqlite=\"%s\",gsl=\"%s\"} 1\n",
              v.version, v.git_commit, v.microhttpd, v.jansson, v.sqlite, v.gsl);
    sb_printf(&b,
              "# HELP dpsilo_schema_version Highest database migration applied.\n"
              "# TYPE dpsilo_schema_version gauge\n"
              "dpsilo_schema_version %d\n",
              m->schema_version);
    sb_printf(&b,
              "# HELP dpsilo_start_time_seconds Unix time the daemon started.\n"
              "# TYPE dpsilo_start_time_seconds gauge\n"
              "dpsilo_start_time_seconds %lld\n",
              (long long)m->start_time_s);
    if (b.failed) {
        free(b.p);
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    *len = b.len;
    return b.p;
}
