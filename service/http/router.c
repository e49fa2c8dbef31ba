/*
 * http/router.c: route-table matching. Contract in http/router.h.
 *
 * A linear scan over the table: with tens of routes this is a few hundred byte compares, cheaper
 * than building and walking a trie, and it keeps "the first matching row wins" obvious.
 */
#include "service/http/router.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool method_matches(const char *route_method, const char *method)
{
    return strcmp(route_method, method) == 0 ||
           (strcmp(method, "HEAD") == 0 && strcmp(route_method, "GET") == 0);
}

/* Copies n bytes of s into m->buf at *used, NUL-terminated; returns the copy or NULL if full. */
static const char *buf_put(route_match *m, size_t *used, const char *s, size_t n)
{
    if (*used + n + 1 > sizeof m->buf)
        return NULL;
    char *d = m->buf + *used;
    memcpy(d, s, n);
    d[n] = '\0';
    *used += n + 1;
    return d;
}

/* True if path matches pat; when m is given, binds the parameters into it. */
static bool pattern_match(const char *pat, const char *path, route_match *m)
{
    const char *p = pat, *u = path;
    size_t n_params = 0, used = 0;
    if (*p != '/' || *u != '/')
        return false;
    while (*p != '\0' && *u != '\0') {
        if (*p != '/' || *u != '/')
            return false;
        p++;
        u++;
        const char *pe = strchr(p, '/');
        const char *ue = strchr(u, '/');
        if (pe == NULL)
            pe = p + strlen(p);
        if (ue == NULL)
            ue = u + strlen(u);
        size_t pl = (size_t)(pe - p), ul = (size_t)(ue - u);
        if (pl >= 3 && p[0] == '{' && p[pl - 1] == '}') {
            if (ul == 0)
                return false;
            if (m != NULL) {
                if (n_params == HTTP_MAX_PARAMS)
                    return false;
                const char *name = buf_put(m, &used, p + 1, pl - 2);
                const char *value = buf_put(m, &used, u, ul);
                if (name == NULL || value == NULL)
                    return false;
                m->params[n_params].name = name;
                m->params[n_params].value = value;
                n_params++;
            }
        } else if (pl != ul || memcmp(p, u, pl) != 0) {
            return false;
        }
        p = pe;
        u = ue;
    }
    if (*p != '\0' || *u != '\0')
        return false;
    if (m != NULL)
        m->n_params = n_params;
    return true;
}

static void allow_add(route_match *m, const char *method)
{
    /* Each method once, in table order. */
    size_t ml = strlen(method);
    const char *a = m->allow;
    while ((a = strstr(a, method)) != NULL) {
        bool start = a == m->allow || a[-1] == ' ';
        bool end = a[ml] == '\0' || a[ml] == ',';
        if (start && end)
            return;
        a += ml;
    }
    size_t len = strlen(m->allow);
    snprintf(m->allow + len, sizeof m->allow - len, "%s%s", len ? ", " : "", method);
}

int http_route_match(const route *routes, size_t n, const char *method, const char *path,
                     route_match *m)
{
    /* Not a full memset: buf is large and only written as far as needed. */
    m->route = NULL;
    m->index = 0;
    m->n_params = 0;
    m->allow[0] = '\0';
    if (path == NULL || method == NULL || strlen(path) >= HTTP_MAX_PATH)
        return HTTP_ROUTE_NOT_FOUND;
    bool path_seen = false;
    for (size_t i = 0; i < n; i++) {
        if (method_matches(routes[i].method, method)) {
            if (pattern_match(routes[i].pattern, path, m)) {
                m->route = &routes[i];
                m->index = i;
                m->allow[0] = '\0';
                return HTTP_ROUTE_FOUND;
            }
        } else if (pattern_match(routes[i].pattern, path, NULL)) {
            path_seen = true;
            allow_add(m, routes[i].method);
            if (strcmp(routes[i].method, "GET") == 0)
                allow_add(m, "HEAD");
        }
    }
    if (!path_seen)
        return HTTP_ROUTE_NOT_FOUND;
    return HTTP_ROUTE_BAD_METHOD;
}
