/*
 * router: matching a method and path against the route table (http.h `route` rows).
 *
 * A pattern is split on '/'; a segment "{name}" matches any non-empty segment and binds it as a
 * path parameter, any other segment must match exactly (case-sensitive). No prefix matching, no
 * trailing-slash folding: "/healthz/" is not "/healthz". HEAD matches GET routes. The first
 * matching row wins.
 *
 * Outcomes: HTTP_ROUTE_FOUND (route and parameters filled), HTTP_ROUTE_NOT_FOUND (no pattern
 * matches the path: 404), HTTP_ROUTE_BAD_METHOD (some pattern matches the path with another method:
 * 405, and allow lists those methods, e.g. "GET, HEAD, POST").
 *
 * Thread-safety: pure function over its arguments.
 */
#ifndef DP_SERVICE_ROUTER_H
#define DP_SERVICE_ROUTER_H

#include <stddef.h>

#include "service/http.h"

enum { HTTP_ROUTE_FOUND = 0, HTTP_ROUTE_NOT_FOUND, HTTP_ROUTE_BAD_METHOD };

typedef struct route_match {
    const route *route;                 /* the matched row (FOUND) */
    size_t index;                       /* its index in the table */
    http_param params[HTTP_MAX_PARAMS]; /* names and values point into buf */
    size_t n_params;
    char buf[2 * HTTP_MAX_PATH]; /* parameter names and values, NUL-separated */
    char allow[64];              /* BAD_METHOD: the allowed methods */
} route_match;

/* Matches method + path (no query string) against routes[0..n-1]; fills m. */
int http_route_match(const route *routes, size_t n, const char *method, const char *path,
                     route_match *m);

#endif
