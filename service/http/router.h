/*
 * router: the route table's row type (`route`: pattern, handler, body cap, access, query
 * allow-list) and matching a method and path against the table.
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
#include <stdint.h>

#include "common/dp_err.h"

#define HTTP_MAX_PARAMS 8    /* path parameters per pattern */
#define HTTP_MAX_PATH   1024 /* longer paths -> 404 (no route is that long) */

struct http_req;
struct http_resp;

/* A name/value pair; both borrowed (valid for the handler call). */
typedef struct http_param {
    const char *name;
    const char *value;
} http_param;

/* A handler. Returns DP_OK or the code set in err. */
typedef int (*route_fn)(const struct http_req *rq, struct http_resp *rs, dp_err *err);

/* Who may call a route: the access table (docs/API.md "Access"). With auth on, the dispatcher
 * answers 401 to a request without a bearer token on every route that is not ROUTE_OPEN, before
 * the handler runs; the handler then resolves the token and decides (api/auth.h): ROUTE_ADMIN
 * routes take only the admin token, ROUTE_TOKEN routes any valid token, each handler narrowing
 * further to what that token may see (a silo, the runs it made or that charged its silo). */
typedef enum route_access {
    ROUTE_OPEN = 1, /* anyone: calculators, /healthz, /v1/version, /v1/openapi.json */
    ROUTE_TOKEN,    /* any valid token (admin or silo) */
    ROUTE_ADMIN     /* the admin token only */
} route_access;

/* One row of the route table (service/api/routes.c). */
typedef struct route {
    const char *method;  /* "GET", "POST", "PUT", "DELETE", "PATCH" */
    const char *pattern; /* "/v1/silos/{id}/charges": literal segments and {name} parameters */
    route_fn handler;
    size_t max_body_bytes; /* body cap for this route (also capped by --max-body); 0 = no body
                              allowed */
    route_access access;   /* who may call it; 0 (unset) is refused by the dispatcher as 500 */
    const char *query;     /* the query parameters it accepts, space-separated ("limit after");
                              NULL: none. Any other parameter is a 400 naming it. */
    const char *raw_type;  /* NULL: the body is a JSON object (http_req.body). Else the media type
                              the body must be sent as ("text/csv"; any other Content-Type is a
                              400 naming it), handed over unparsed (http_req.raw) */
} route;

/* max_body_bytes of an upload route: its cap is --max-upload (cfg.max_upload_bytes), which
 * --max-body does not bound. */
#define ROUTE_BODY_UPLOAD SIZE_MAX

/* True when name is one of the space-separated words of list (NULL: none). */
int http_query_allowed(const char *list, const char *name);

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
