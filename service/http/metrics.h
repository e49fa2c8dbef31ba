/*
 * metrics: request counters and latency histograms for GET /metrics (Prometheus text format 0.0.4).
 *
 * One row per route-table entry plus two: HTTP_METRICS_ROW_STATIC(n) for web/ files and
 * HTTP_METRICS_ROW_UNMATCHED(n) for everything that matched no route (404/405), so labels never
 * carry client-chosen text and the series count is bounded. Per row: a counter per HTTP status
 * (100..599), and a latency histogram (buckets in seconds, HTTP_METRICS_BUCKETS_S) with sum and
 * count.
 *
 * Series:
 *   dpsilo_http_requests_total{route,method,status}           counter
 *   dpsilo_http_request_duration_seconds{route,method,le}     histogram (+ _sum, _count)
 *   dpsilo_build_info{version,git_commit,microhttpd,jansson,sqlite,gsl} gauge = 1
 *   dpsilo_schema_version                                     gauge
 *   dpsilo_start_time_seconds                                 gauge (Unix time)
 *
 * Thread-safety: http_metrics_observe is lock-free (C11 relaxed atomics); render reads the counters
 * without stopping writers, so one scrape may see a request in the counter but not yet in the
 * histogram.
 */
#ifndef DP_SERVICE_METRICS_H
#define DP_SERVICE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "common/dp_err.h"
#include "service/http/router.h"

typedef struct http_metrics http_metrics;

#define HTTP_METRICS_ROW_STATIC(n)    (n)
#define HTTP_METRICS_ROW_UNMATCHED(n) ((n) + 1)

/* Allocates counters for routes[0..n-1] (borrowed; must outlive the metrics). NULL on OOM. */
http_metrics *http_metrics_alloc(const route *routes, size_t n, int schema_version);
void http_metrics_free(http_metrics *m);

/* Records one finished request. row is a route index or one of the two special rows; status outside
 * 100..599 is counted as 0-status "aborted" (the client went away before a response). */
void http_metrics_observe(http_metrics *m, size_t row, int status, uint64_t micros);

/* Renders the text exposition. Returns a malloc'd buffer (owned by caller, free()) with *len bytes,
 * or NULL with DP_ENOMEM. */
char *http_metrics_render(const http_metrics *m, size_t *len, dp_err *err);

/* Appends printf-formatted text to *text (*len bytes, malloc'd: http_metrics_render's answer),
 * which it grows and may move. DP_ENOMEM frees *text and sets it NULL. */
__attribute__((format(printf, 4, 5))) int http_metrics_appendf(char **text, size_t *len,
                                                               dp_err *err, const char *fmt, ...);

#endif
