/*
 * clients_json.c: the streaming reader of a body's "clients" array (contract in clients_json.h).
 *
 * Design. The scanner below knows only JSON's structure: whitespace, the top-level object's
 * braces, colons and commas, strings (to find where they end, honouring backslash escapes), and
 * brackets (to find where a nested value ends). It never decides that a value is valid: jansson
 * does, on each element's exact span and on the rest of the object. The argument that the result
 * equals json_loadb(body, len, JSON_REJECT_DUPLICATES):
 *   - the body is '{' members '}' with the first member named (literally) "clients" holding
 *     '[' e1 ',' ... ',' en ']', whitespace only between tokens (checked by the scanner);
 *   - each ei parses on its own as one complete JSON value with the same flags (jansson), so in
 *     place the parser reads the same tokens and the same value, and stops where the span stops;
 *   - nesting: ei is at most CLIENTS_JSON_MAX_DEPTH deep, 2 more in place, far below jansson's
 * 2048;
 *   - the rest, the body with the array replaced by "[]", parses (jansson): every other member,
 *     their order, duplicates among them (including an escaped "clients"), trailing garbage.
 * Any step that fails sends the whole body to json_loadb, whose answer (tree or error) is returned
 * as is. The scanner is therefore allowed to be stricter than JSON, never looser: a body it does
 * not understand costs memory, never a different answer.
 *
 * Memory: the body text (owned), 8 bytes per element (spans), a copy of the rest of the object
 * (small), and one element's tree at a time.
 */
#include "service/codec/clients_json.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "service/codec/json_util.h"

/* One element: its text is body[off, off + len). */
typedef struct cj_span {
    uint32_t off;
    uint32_t len;
} cj_span;

struct clients_json {
    atomic_size_t refs; /* references; the last decref frees */
    char *body;         /* the whole body text, owned (stolen from the caller) */
    size_t body_len;    /* bytes in body */
    cj_span *spans;     /* n elements, in order; owned */
    size_t n;           /* elements */
    size_t n_id;        /* elements that are objects with an "id" member */
    size_t n_silo;      /* elements that are objects with a "silo_id" member */
};

#define CJ_LOAD_FLAGS JSON_REJECT_DUPLICATES

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && is_ws(*p))
        p++;
    return p;
}

/* p at '"': returns just past the closing quote, or NULL when the string does not end. */
static const char *skip_string(const char *p, const char *end)
{
    for (p++; p < end; p++) {
        if (*p == '\\') {
            if (++p >= end)
                return NULL;
        } else if (*p == '"') {
            return p + 1;
        }
    }
    return NULL;
}

/* Finds where the value starting at p ends (not whether it is valid). *depth: the deepest bracket
 * nesting inside it (0 for a scalar). NULL when the text ends first or a scalar is empty. */
static const char *skip_value(const char *p, const char *end, size_t *depth)
{
    *depth = 0;
    if (p >= end)
        return NULL;
    if (*p == '"')
        return skip_string(p, end);
    if (*p == '{' || *p == '[') {
        size_t d = 0;
        while (p < end) {
            char c = *p;
            if (c == '"') {
                p = skip_string(p, end);
                if (p == NULL)
                    return NULL;
                continue;
            }
            if (c == '{' || c == '[') {
                if (++d > *depth)
                    *depth = d;
            } else if (c == '}' || c == ']') {
                if (--d == 0)
                    return p + 1;
            }
            p++;
        }
        return NULL;
    }
    const char *s = p;
    while (p < end && !is_ws(*p) && *p != ',' && *p != ']' && *p != '}')
        p++;
    return p > s ? p : NULL;
}

static void cj_free(clients_json *cj)
{
    if (cj == NULL)
        return;
    free(cj->spans);
    free(cj->body);
    free(cj);
}

/* Appends one span, growing the array by doubling. -1 when out of memory. */
static int push_span(clients_json *cj, size_t *cap, size_t off, size_t len)
{
    if (cj->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        cj_span *ns = realloc(cj->spans, nc * sizeof *ns);
        if (ns == NULL)
            return -1;
        cj->spans = ns;
        *cap = nc;
    }
    cj->spans[cj->n++] = (cj_span){(uint32_t)off, (uint32_t)len};
    return 0;
}

/* Reads the array whose '[' is at p into cj's spans; *close: its ']'. 0, or -1: not understood. */
static int scan_array(clients_json *cj, const char *p, const char *end, const char **close)
{
    size_t cap = 0;
    p = skip_ws(p + 1, end);
    if (p < end && *p == ']') {
        *close = p;
        return 0;
    }
    for (;;) {
        size_t depth;
        const char *e = skip_value(p, end, &depth);
        if (e == NULL || depth > CLIENTS_JSON_MAX_DEPTH ||
            push_span(cj, &cap, (size_t)(p - cj->body), (size_t)(e - p)) != 0)
            return -1;
        p = skip_ws(e, end);
        if (p >= end)
            return -1;
        if (*p == ']') {
            *close = p;
            return 0;
        }
        if (*p != ',')
            return -1;
        p = skip_ws(p + 1, end);
    }
}

/* Finds the top-level "clients" array: *open at its '[', *close at its ']'. 0, or -1 when the body
 * is not an object of the expected shape or has no such array. */
static int scan_body(clients_json *cj, const char **open, const char **close)
{
    static const char key[] = "\"clients\"";
    const char *end = cj->body + cj->body_len;
    const char *p = skip_ws(cj->body, end);
    bool found = false;
    if (p >= end || *p != '{')
        return -1;
    p = skip_ws(p + 1, end);
    if (p < end && *p == '}')
        return -1; /* {}: nothing to stream */
    for (;;) {
        if (p >= end || *p != '"')
            return -1;
        const char *k = p;
        p = skip_string(p, end);
        if (p == NULL)
            return -1;
        bool is_clients = (size_t)(p - k) == sizeof key - 1 && memcmp(k, key, sizeof key - 1) == 0;
        p = skip_ws(p, end);
        if (p >= end || *p != ':')
            return -1;
        p = skip_ws(p + 1, end);
        if (is_clients && found)
            return -1; /* a duplicate: json_loadb names it */
        if (is_clients && p < end && *p == '[') {
            found = true;
            *open = p;
            if (scan_array(cj, p, end, close) != 0)
                return -1;
            p = *close + 1;
        } else {
            size_t depth;
            if (is_clients)
                found = true; /* not an array: the tree path reads it (small) */
            p = skip_value(p, end, &depth);
            if (p == NULL)
                return -1;
        }
        p = skip_ws(p, end);
        if (p >= end)
            return -1;
        if (*p == '}')
            break;
        if (*p != ',')
            return -1;
        p = skip_ws(p + 1, end);
    }
    if (skip_ws(p + 1, end) != end)
        return -1;
    return *open != NULL ? 0 : -1; /* no "clients" array: the tree path */
}

/* Parses every element on its own (jansson), counting the members clients_json_count_with reports.
 * 0, or -1 when one does not parse. */
static int check_elements(clients_json *cj)
{
    for (size_t i = 0; i < cj->n; i++) {
        json_error_t je;
        json_t *e = json_util_loadb(cj->body + cj->spans[i].off, cj->spans[i].len,
                                    JSON_DECODE_ANY | CJ_LOAD_FLAGS, &je);
        if (e == NULL)
            return -1;
        if (json_is_object(e)) {
            cj->n_id += json_object_get(e, "id") != NULL;
            cj->n_silo += json_object_get(e, "silo_id") != NULL;
        }
        json_decref(e);
    }
    return 0;
}

/* The object without the array: body with [open, close] replaced by "[]". NULL: not parsed. */
static json_t *load_rest(const clients_json *cj, const char *open, const char *close)
{
    size_t head = (size_t)(open - cj->body);
    size_t tail = cj->body_len - (size_t)(close + 1 - cj->body);
    char *t = malloc(head + 2 + tail);
    if (t == NULL)
        return NULL;
    memcpy(t, cj->body, head);
    memcpy(t + head, "[]", 2);
    memcpy(t + head + 2, close + 1, tail);
    json_error_t je;
    json_t *rest = json_util_loadb(t, head + 2 + tail, CJ_LOAD_FLAGS, &je);
    free(t);
    if (rest != NULL && !json_is_object(rest)) {
        json_decref(rest);
        rest = NULL;
    }
    return rest;
}

json_t *clients_json_load(char *body, size_t len, clients_json **out, json_error_t *jerr)
{
    *out = NULL;
    json_t *rest = NULL;
    clients_json *cj = NULL;
    if (body != NULL && len > 0 && len <= CLIENTS_JSON_MAX_BODY && memchr(body, '\0', len) == NULL)
        cj = calloc(1, sizeof *cj);
    if (cj != NULL) {
        const char *open = NULL, *close = NULL;
        atomic_init(&cj->refs, 1);
        cj->body = body;
        cj->body_len = len;
        if (scan_body(cj, &open, &close) == 0 && check_elements(cj) == 0)
            rest = load_rest(cj, open, close);
        if (rest != NULL) {
            *out = cj;
            return rest;
        }
        cj->body = NULL; /* not stolen after all */
        cj_free(cj);
    }
    return json_util_loadb(body, len, CJ_LOAD_FLAGS, jerr);
}

clients_json *clients_json_incref(clients_json *cj)
{
    if (cj != NULL)
        atomic_fetch_add(&cj->refs, 1);
    return cj;
}

void clients_json_decref(clients_json *cj)
{
    if (cj != NULL && atomic_fetch_sub(&cj->refs, 1) == 1)
        cj_free(cj);
}

size_t clients_json_count(const clients_json *cj)
{
    return cj->n;
}

size_t clients_json_count_with(const clients_json *cj, const char *key)
{
    if (strcmp(key, "id") == 0)
        return cj->n_id;
    if (strcmp(key, "silo_id") == 0)
        return cj->n_silo;
    return SIZE_MAX;
}

json_t *clients_json_get(const clients_json *cj, size_t i)
{
    json_error_t je;
    return json_util_loadb(cj->body + cj->spans[i].off, cj->spans[i].len,
                           JSON_DECODE_ANY | CJ_LOAD_FLAGS, &je);
}

/* Writes the elements as the array json_dump_callback would. */
static int dump_array(const clients_json *cj, size_t flags, json_dump_callback_t cb, void *data)
{
    const char *sep = (flags & JSON_COMPACT) ? "," : ", ";
    if (cb("[", 1, data) != 0)
        return -1;
    for (size_t i = 0; i < cj->n; i++) {
        json_t *e = clients_json_get(cj, i);
        int rc = e == NULL ? -1 : 0;
        if (rc == 0 && i > 0)
            rc = cb(sep, strlen(sep), data);
        if (rc == 0)
            rc = json_dump_callback(e, cb, data, flags | JSON_ENCODE_ANY);
        json_decref(e);
        if (rc != 0)
            return -1;
    }
    return cb("]", 1, data);
}

/* jansson's key order for JSON_SORT_KEYS (dump.c compare_keys: bytes, then length; keys have no
 * NUL byte, the loader refuses them). */
static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int clients_json_dump_body(const json_t *rest, const clients_json *cj, size_t flags,
                           json_dump_callback_t cb, void *data)
{
    if ((flags & JSON_MAX_INDENT) != 0 || !json_is_object(rest))
        return -1;
    const char *sep = (flags & JSON_COMPACT) ? "," : ", ";
    const char *colon = (flags & JSON_COMPACT) ? ":" : ": ";
    size_t n = json_object_size(rest), i = 0;
    const char **keys = calloc(n ? n : 1, sizeof *keys);
    if (keys == NULL)
        return -1;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)rest, k, v) keys[i++] = k;
    if (flags & JSON_SORT_KEYS)
        qsort(keys, n, sizeof *keys, cmp_key);
    int rc = cb("{", 1, data);
    for (i = 0; i < n && rc == 0; i++) {
        json_t *ks = json_string(keys[i]);
        rc = ks == NULL ? -1 : 0;
        if (rc == 0 && i > 0)
            rc = cb(sep, strlen(sep), data);
        if (rc == 0)
            rc = json_dump_callback(ks, cb, data, flags | JSON_ENCODE_ANY);
        json_decref(ks);
        if (rc == 0)
            rc = cb(colon, strlen(colon), data);
        if (rc == 0 && strcmp(keys[i], "clients") == 0)
            rc = dump_array(cj, flags, cb, data);
        else if (rc == 0)
            rc = json_dump_callback(json_object_get(rest, keys[i]), cb, data,
                                    flags | JSON_ENCODE_ANY);
    }
    free(keys);
    if (rc == 0)
        rc = cb("}", 1, data);
    return rc == 0 ? 0 : -1;
}

typedef struct grow_buf {
    char *p;
    size_t len, cap;
    bool failed;
} grow_buf;

static int grow_cb(const char *buf, size_t size, void *data)
{
    grow_buf *g = data;
    if (g->failed) /* sticky: jansson ignores a failed key write and goes on (json_util.h) */
        return -1;
    if (size >= g->cap - g->len) {
        size_t nc = g->cap ? g->cap : 4096;
        while (size >= nc - g->len)
            nc *= 2;
        char *np = realloc(g->p, nc);
        if (np == NULL) {
            g->failed = true;
            return -1;
        }
        g->p = np;
        g->cap = nc;
    }
    memcpy(g->p + g->len, buf, size);
    g->len += size;
    g->p[g->len] = '\0';
    return 0;
}

char *clients_json_dumps(const clients_json *cj, size_t flags)
{
    grow_buf g = {0};
    if ((flags & JSON_MAX_INDENT) != 0 || dump_array(cj, flags, grow_cb, &g) != 0 || g.failed) {
        free(g.p);
        return NULL;
    }
    return g.p;
}
