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
 * A step that fails is answered by the error of a part, moved to the body's coordinates, where
 * the scan allows it ("errors without a tree" below); any other sends the whole body to
 * json_loadb, whose answer (tree or error) is returned as is. The scanner is therefore allowed to
 * be stricter than JSON, never looser: a body it does not understand costs memory, never a
 * different answer.
 *
 * Memory: the body text (owned), 8 bytes per element (spans), a copy of the rest of the object
 * (small), and one element's tree at a time.
 */
#include "service/codec/clients_json.h"

#include <stdatomic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dp_math.h"
#include "service/codec/json_util.h"
#include "service/codec/run_rows.h"

/* One element: its text is body[off, off + len). */
typedef struct cj_span {
    uint32_t off;
    uint32_t len;
} cj_span;

/* A top-level array of numbers read without jansson (clients_json_load_numbers). */
typedef struct cj_nums {
    const char *key; /* the caller's key (static storage) */
    double *v;       /* n values, as jansson's json_number_value gives them; owned */
    uint8_t *is_int; /* n flags: written as an integer (jansson: a json_integer); owned */
    size_t n, cap;
    size_t open, close; /* the array's '[' and ']' in the body */
    bool read;          /* found and read (else the tree holds the key, if present) */
} cj_nums;

struct clients_json {
    atomic_size_t refs;                  /* references; the last decref frees */
    char *body;                          /* the whole body text, owned (stolen from the caller) */
    size_t body_len;                     /* bytes in body */
    cj_span *spans;                      /* n elements, in order; owned */
    size_t n;                            /* elements */
    size_t n_id;                         /* elements that are objects with an "id" member */
    size_t n_silo;                       /* elements that are objects with a "silo_id" member */
    bool has_clients;                    /* the clients array was read as spans (else n is 0) */
    cj_nums nums[CLIENTS_JSON_MAX_NUMS]; /* n_nums numeric arrays asked for */
    size_t n_nums;
    size_t n_read; /* how many of them were read */
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
    for (size_t k = 0; k < cj->n_nums; k++) {
        free(cj->nums[k].v);
        free(cj->nums[k].is_int);
    }
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

/* Where the scanner stopped, for an error answered without a tree (clients_json_load). */
typedef struct cj_scan {
    bool nums_failed;  /* a numeric array was not read: only the whole body answers */
    const char *open;  /* the clients array's '[' (NULL: not reached) */
    const char *close; /* its ']' (NULL: not reached) */
    const char *elem;  /* the start of the element whose end was not found (NULL: none) */
} cj_scan;

/* Reads the array whose '[' is at p into cj's spans; sc->close: its ']'. 0, or -1: not
 * understood (sc->elem set when an element's end was not found, at a nesting depth jansson reads
 * alike in place and alone). */
static int scan_array(clients_json *cj, const char *p, const char *end, cj_scan *sc)
{
    size_t cap = 0;
    p = skip_ws(p + 1, end);
    if (p < end && *p == ']') {
        sc->close = p;
        return 0;
    }
    for (;;) {
        size_t depth;
        const char *e = skip_value(p, end, &depth);
        if (e == NULL && depth <= CLIENTS_JSON_MAX_DEPTH && p < end)
            sc->elem = p;
        if (e == NULL || depth > CLIENTS_JSON_MAX_DEPTH ||
            push_span(cj, &cap, (size_t)(p - cj->body), (size_t)(e - p)) != 0)
            return -1;
        p = skip_ws(e, end);
        if (p >= end)
            return -1;
        if (*p == ']') {
            sc->close = p;
            return 0;
        }
        if (*p != ',')
            return -1;
        p = skip_ws(p + 1, end);
    }
}

static const char *flat_number(const char *p, const char *end, bool *is_int, size_t *digits,
                               bool *has_exp);

/* Appends one number to a. -1 when out of memory. */
static int push_num(cj_nums *a, double v, bool is_int)
{
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 1024;
        double *nv = realloc(a->v, nc * sizeof *nv);
        if (nv == NULL)
            return -1;
        a->v = nv;
        uint8_t *ni = realloc(a->is_int, nc);
        if (ni == NULL)
            return -1;
        a->is_int = ni;
        a->cap = nc;
    }
    a->v[a->n] = v;
    a->is_int[a->n++] = is_int;
    return 0;
}

/* Clinger's fast path (W. D. Clinger, "How to read floating point numbers accurately", PLDI 1990,
 * section 5): a decimal m x 10^e whose digits m fit in 2^53 and with |e| <= 22 is m times or
 * divided by 10^|e|, two doubles that are both exact, so the one IEEE operation rounds the exact
 * value correctly: strtod's answer, at a fraction of its cost. [p, q) is a JSON number token
 * (flat_number). true with *v, or false: not such a number (then strtod). An integer token gives
 * the integer (so "-0" is +0, as jansson's json_integer). */
static bool exact_number(const char *p, const char *q, bool is_int, double *v)
{
    static const double P10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    bool neg = *p == '-';
    uint64_t m = 0;
    int nd = 0, e = 0; /* significant digits in m; the decimal exponent */
    p += neg;
    for (; p < q && *p >= '0' && *p <= '9'; p++) {
        if (m == 0 && *p == '0')
            continue;
        if (++nd > 15)
            return false;
        m = m * 10 + (uint64_t)(*p - '0');
    }
    if (p < q && *p == '.')
        for (p++; p < q && *p >= '0' && *p <= '9'; p++) {
            e--;
            if (m == 0 && *p == '0')
                continue;
            if (++nd > 15)
                return false;
            m = m * 10 + (uint64_t)(*p - '0');
        }
    if (p < q) { /* 'e' or 'E', a sign, digits */
        bool eneg = *++p == '-';
        int x = 0;
        p += *p == '-' || *p == '+';
        for (; p < q; p++) {
            if (x > 1000)
                return false;
            x = x * 10 + (*p - '0');
        }
        e += eneg ? -x : x;
    }
    if (is_int) {
        *v = (double)(neg ? -(int64_t)m : (int64_t)m);
        return true;
    }
    double d = (double)m;
    if (m == 0)
        e = 0; /* 0 with any exponent is 0 */
    if (e < -22 || e > 22)
        return false;
    d = e < 0 ? d / P10[-e] : d * P10[e];
    *v = neg ? -d : d;
    return true;
}

/* Reads the array of numbers whose '[' is at p into a; returns just past its ']', or NULL when it
 * is anything else (an element that is not a JSON number token, an integer of more than 15 digits,
 * a real that overflows, out of memory): the whole body then goes to jansson. Each value is the
 * one jansson gives: the integer for an integer token (so "-0" is +0, a json_integer), strtod's
 * for a real token (jansson's jsonp_strtod, refusing only an overflow), by exact_number when it
 * can; the grammar is checked by flat_number first, so neither sees a '+', a hex prefix, "nan" or
 * "inf". */
static const char *scan_nums(cj_nums *a, const char *p, const char *end)
{
    p = skip_ws(p + 1, end);
    if (p < end && *p == ']')
        return p + 1;
    for (;;) {
        bool is_int, has_exp;
        size_t digits;
        const char *q = flat_number(p, end, &is_int, &digits, &has_exp);
        /* q < end: the token is followed by a byte of the body, where strtod and strtoll stop */
        if (q == NULL || q >= end || (is_int && digits > 15))
            return NULL;
        double v;
        if (!exact_number(p, q, is_int, &v)) {
            char *e;
            v = is_int ? (double)strtoll(p, &e, 10) : strtod(p, &e);
            if (e != q || !isfinite(v))
                return NULL;
        }
        if (push_num(a, v, is_int) != 0)
            return NULL;
        p = skip_ws(q, end);
        if (p >= end)
            return NULL;
        if (*p == ']')
            return p + 1;
        if (*p != ',')
            return NULL;
        p = skip_ws(p + 1, end);
    }
}

/* The numeric array asked for under the key whose text (quotes included) is k[0, kl), or NULL. */
static cj_nums *nums_for(clients_json *cj, const char *k, size_t kl)
{
    for (size_t i = 0; i < cj->n_nums; i++) {
        size_t l = strlen(cj->nums[i].key);
        if (kl == l + 2 && memcmp(k + 1, cj->nums[i].key, l) == 0)
            return &cj->nums[i];
    }
    return NULL;
}

/* The numeric array read for key, or NULL. */
static const cj_nums *nums_get(const clients_json *cj, const char *key)
{
    for (size_t k = 0; k < cj->n_nums; k++)
        if (cj->nums[k].read && strcmp(cj->nums[k].key, key) == 0)
            return &cj->nums[k];
    return NULL;
}

/* Finds the top-level "clients" array: sc->open at its '[', sc->close at its ']', and reads the
 * numeric arrays asked for. 0, or -1 when the body is not an object of the expected shape or has
 * neither (sc->nums_failed: a numeric array was there and not read). */
static int scan_body(clients_json *cj, cj_scan *sc)
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
        size_t kl = (size_t)(p - k);
        bool is_clients = kl == sizeof key - 1 && memcmp(k, key, sizeof key - 1) == 0;
        p = skip_ws(p, end);
        if (p >= end || *p != ':')
            return -1;
        p = skip_ws(p + 1, end);
        if (is_clients && found)
            return -1; /* a duplicate: json_loadb names it */
        cj_nums *a = nums_for(cj, k, kl);
        if (a != NULL && p < end && *p == '[') {
            const char *open = p;
            p = a->read ? NULL : scan_nums(a, p, end); /* twice: json_loadb names it */
            if (p == NULL) {
                sc->nums_failed = true;
                return -1;
            }
            a->read = true;
            cj->n_read++;
            a->open = (size_t)(open - cj->body);
            a->close = (size_t)(p - 1 - cj->body);
        } else if (is_clients && p < end && *p == '[') {
            found = true;
            cj->has_clients = true;
            sc->open = p;
            if (scan_array(cj, p, end, sc) != 0)
                return -1;
            p = sc->close + 1;
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
    /* neither a "clients" array nor a numeric array: the tree path */
    return sc->open != NULL || cj->n_read > 0 ? 0 : -1;
}

static bool flat_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* A JSON number token at p (< end): its end, or NULL when p holds no number by JSON's grammar. */
static const char *flat_number(const char *p, const char *end, bool *is_int, size_t *digits,
                               bool *has_exp)
{
    const char *q = p;
    *is_int = true;
    *has_exp = false;
    *digits = 0;
    if (q < end && *q == '-')
        q++;
    if (q >= end || *q < '0' || *q > '9')
        return NULL;
    if (*q == '0') {
        q++;
        *digits = 1;
    } else {
        while (q < end && *q >= '0' && *q <= '9') {
            q++;
            (*digits)++;
        }
    }
    if (q < end && *q == '.') {
        *is_int = false;
        q++;
        if (q >= end || *q < '0' || *q > '9')
            return NULL;
        while (q < end && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        *is_int = false;
        *has_exp = true;
        q++;
        if (q < end && (*q == '+' || *q == '-'))
            q++;
        if (q >= end || *q < '0' || *q > '9')
            return NULL;
        while (q < end && *q >= '0' && *q <= '9')
            q++;
    }
    return q;
}

/* clients_json_flat_get; values false: the syntax and the finiteness only (check_elements),
 * without converting a number that cannot overflow (no exponent, fewer than 64 characters). */
static int flat_read(const clients_json *cj, size_t i, clients_json_flat *out, bool values)
{
    const char *p = cj->body + cj->spans[i].off, *end = p + cj->spans[i].len;
    out->n = 0;
    while (p < end && flat_ws(*p))
        p++;
    if (p >= end || *p++ != '{')
        return -1;
    while (p < end && flat_ws(*p))
        p++;
    if (p < end && *p == '}')
        p++;
    else
        for (;;) {
            if (out->n == CLIENTS_JSON_FLAT_MAX || p >= end || *p++ != '"')
                return -1;
            const char *k = p;
            while (p < end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20 &&
                   (unsigned char)*p < 0x7f)
                p++;
            if (p >= end || *p != '"' || p == k)
                return -1;
            size_t kl = (size_t)(p - k);
            for (size_t j = 0; j < out->n; j++)
                if (out->m[j].key_len == kl && memcmp(out->m[j].key, k, kl) == 0)
                    return -1; /* a repeat: jansson refuses it */
            p++;
            while (p < end && flat_ws(*p))
                p++;
            if (p >= end || *p++ != ':')
                return -1;
            while (p < end && flat_ws(*p))
                p++;
            bool is_int = false, is_str = p < end && *p == '"';
            double v = DP_NAN;
            const char *t = p, *q;
            if (is_str) { /* a plain string: what jansson reads, byte for byte */
                q = ++t;
                while (q < end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20 &&
                       (unsigned char)*q < 0x7f)
                    q++;
                if (q >= end || *q != '"')
                    return -1;
            } else {
                bool has_exp;
                size_t digits;
                q = flat_number(p, end, &is_int, &digits, &has_exp);
                if (q == NULL || (is_int && digits > 18) || (size_t)(q - p) >= 64)
                    return -1;
                v = 0;
                if (values || has_exp) {
                    char num[64];
                    memcpy(num, p, (size_t)(q - p));
                    num[q - p] = '\0';
                    v = is_int ? (double)strtoll(num, NULL, 10) : strtod(num, NULL);
                    if (!isfinite(v))
                        return -1;
                }
            }
            out->m[out->n].key = k;
            out->m[out->n].key_len = kl;
            out->m[out->n].v = v;
            out->m[out->n].is_int = is_int;
            out->m[out->n].is_str = is_str;
            out->m[out->n].text = t;
            out->m[out->n].text_len = (size_t)(q - t);
            out->n++;
            p = is_str ? q + 1 : q;
            while (p < end && flat_ws(*p))
                p++;
            if (p < end && *p == ',') {
                p++;
                while (p < end && flat_ws(*p))
                    p++;
                continue;
            }
            if (p < end && *p == '}') {
                p++;
                break;
            }
            return -1;
        }
    while (p < end && flat_ws(*p))
        p++;
    return p == end ? 0 : -1;
}

int clients_json_flat_get(const clients_json *cj, size_t i, clients_json_flat *out)
{
    return flat_read(cj, i, out, true);
}

int clients_json_flat_peek(const clients_json *cj, size_t i, clients_json_flat *out)
{
    return flat_read(cj, i, out, false);
}

/* Parses every element on its own (jansson, or clients_json_flat_get for a flat object of numbers,
 * which jansson parses to the same values), counting the members clients_json_count_with reports.
 * Returns cj->n, or the index of the first element that does not parse. */
static size_t check_elements(clients_json *cj)
{
    for (size_t i = 0; i < cj->n; i++) {
        clients_json_flat f;
        if (flat_read(cj, i, &f, false) == 0) {
            for (size_t j = 0; j < f.n; j++) {
                cj->n_id += f.m[j].key_len == 2 && memcmp(f.m[j].key, "id", 2) == 0;
                cj->n_silo += f.m[j].key_len == 7 && memcmp(f.m[j].key, "silo_id", 7) == 0;
            }
            continue;
        }
        json_error_t je;
        json_t *e = json_util_loadb(cj->body + cj->spans[i].off, cj->spans[i].len,
                                    JSON_DECODE_ANY | CJ_LOAD_FLAGS, &je);
        if (e == NULL)
            return i;
        if (json_is_object(e)) {
            cj->n_id += json_object_get(e, "id") != NULL;
            cj->n_silo += json_object_get(e, "silo_id") != NULL;
        }
        json_decref(e);
    }
    return cj->n;
}

/* The object without the array: body with [open, close] replaced by "[]" (close NULL: the array's
 * text runs to the end of the body, and "]" ends the text). *head: bytes before the "[]". NULL when
 * out of memory. */
static char *rest_text(const clients_json *cj, const char *open, const char *close, size_t *len,
                       size_t *head)
{
    *head = (size_t)(open - cj->body);
    const char *after = close != NULL ? close + 1 : cj->body + cj->body_len;
    size_t tail = cj->body_len - (size_t)(after - cj->body);
    char *t = malloc(*head + 3 + tail);
    if (t == NULL)
        return NULL;
    memcpy(t, cj->body, *head);
    memcpy(t + *head, "[]", 2);
    if (close == NULL) {
        t[*head + 2] = '}';
        tail = 1;
    } else {
        memcpy(t + *head + 2, after, tail);
    }
    *len = *head + 2 + tail;
    return t;
}

/* The object without the array, parsed. NULL: not parsed (*jerr: jansson's error on that text). */
static json_t *load_rest(const clients_json *cj, const char *open, const char *close,
                         json_error_t *jerr, size_t *head)
{
    size_t len;
    char *t = rest_text(cj, open, close, &len, head);
    if (t == NULL)
        return NULL;
    json_t *rest = json_util_loadb(t, len, CJ_LOAD_FLAGS, jerr);
    free(t);
    if (rest != NULL && !json_is_object(rest)) {
        json_decref(rest);
        rest = NULL;
    }
    return rest;
}

/* The object without any of its arrays read here (the clients array, the numeric arrays): the
 * body with each replaced by "[]", parsed. NULL: not parsed, or out of memory. */
static json_t *load_rest_all(const clients_json *cj, const cj_scan *sc)
{
    size_t at[CLIENTS_JSON_MAX_NUMS + 1][2], n = 0, len = 0;
    if (sc->open != NULL && sc->close != NULL) {
        at[n][0] = (size_t)(sc->open - cj->body);
        at[n++][1] = (size_t)(sc->close - cj->body);
    }
    for (size_t k = 0; k < cj->n_nums; k++)
        if (cj->nums[k].read) {
            at[n][0] = cj->nums[k].open;
            at[n++][1] = cj->nums[k].close;
        }
    for (size_t i = 1; i < n; i++) /* in body order (insertion sort of at most a few) */
        for (size_t j = i; j > 0 && at[j][0] < at[j - 1][0]; j--) {
            size_t t0 = at[j][0], t1 = at[j][1];
            at[j][0] = at[j - 1][0];
            at[j][1] = at[j - 1][1];
            at[j - 1][0] = t0;
            at[j - 1][1] = t1;
        }
    char *t = malloc(cj->body_len + 1);
    if (t == NULL)
        return NULL;
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(t + len, cj->body + from, at[i][0] - from);
        len += at[i][0] - from;
        memcpy(t + len, "[]", 2);
        len += 2;
        from = at[i][1] + 1;
    }
    memcpy(t + len, cj->body + from, cj->body_len - from);
    len += cj->body_len - from;
    json_error_t je;
    json_t *rest = json_util_loadb(t, len, CJ_LOAD_FLAGS, &je);
    free(t);
    if (rest != NULL && !json_is_object(rest)) {
        json_decref(rest);
        rest = NULL;
    }
    return rest;
}

/* ---- errors without a tree (issue 10: a malformed body costs what a valid one costs)
 *
 * json_loadb reads a body front to back and stops at the first error. When the scanner has seen
 * the body's structure up to some point, the text before that point is known to parse, and the
 * error is found by parsing only a part, then moved to the body's coordinates:
 *   - the head (everything before the array's '['), parsed with "[]}" after it: an error there is
 *     json_loadb's, at the same place (the same bytes up to the '[');
 *   - an element that does not parse (or whose end the scanner did not find): with the head and
 *     every element before it parsing and the separators checked, json_loadb fails inside that
 *     element exactly as a parse of the body's text from the element's first byte to the end does
 *     (JSON_DECODE_ANY, JSON_DISABLE_EOF_CHECK): the same tokens from the same lexer state, and
 *     the same look-ahead, since the text after the element is there too;
 *   - the rest after the array, when every element parses: the text with the array replaced by
 *     "[]" fails at the same token.
 * jansson's line counts '\n' from 1, its column counts characters (bytes that start a UTF-8
 * sequence) from 0 since the last '\n', its position counts bytes; each is computed for the body
 * from its text. Any case this does not cover (no array reached, a bad separator, an element at the
 * end of the text, an outcome that contradicts the scan) is left to json_loadb on the whole body.
 */

/* jansson's line and column after reading s[0, n) from the start. */
static void text_coords(const char *s, size_t n, int *line, int *col)
{
    int l = 1, c = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char u = (unsigned char)s[i];
        if (u == '\n') {
            l++;
            c = 0;
        } else if (u < 0x80 || (u >= 0xC2 && u <= 0xF4)) { /* jansson's utf8_check_first */
            c++;
        }
    }
    *line = l;
    *col = c;
}

/* e, an error found in a text whose bytes from t0 on are the body's from b0 on (t0 bytes of the
 * text before it; tl, tc: the text's coordinates at t0), moved to the body's coordinates. */
static void move_error(const clients_json *cj, size_t b0, size_t t0, int tl, int tc,
                       json_error_t *e)
{
    int bl, bc;
    text_coords(cj->body, b0, &bl, &bc);
    e->column = e->line == tl ? bc + (e->column - tc) : e->column;
    e->line = bl + (e->line - tl);
    e->position = (int)(b0 + ((size_t)e->position - t0));
}

/* The head with "[]}" after it: 0 when it parses, 1 with *jerr set when it fails, -1 when out of
 * memory. */
static int head_error(const clients_json *cj, const char *open, json_error_t *jerr)
{
    size_t len, head;
    char *t = rest_text(cj, open, NULL, &len, &head);
    if (t == NULL)
        return -1;
    json_t *v = json_util_loadb(t, len, CJ_LOAD_FLAGS, jerr);
    free(t);
    json_decref(v);
    return v == NULL ? 1 : 0;
}

/* json_loadb's error for a body whose first failure is in the element starting at elem (the head
 * and the elements before it parse). 0 with *jerr set, or -1: not found this way. */
static int elem_error(const clients_json *cj, const char *open, const char *elem,
                      json_error_t *jerr)
{
    const char *end = cj->body + cj->body_len;
    if (skip_ws(elem, end) != elem || elem >= end)
        return -1;
    int h = head_error(cj, open, jerr);
    if (h != 0)
        return h == 1 ? 0 : -1;
    json_t *v = json_util_loadb(elem, (size_t)(end - elem),
                                JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK | CJ_LOAD_FLAGS, jerr);
    if (v != NULL) { /* the scan said otherwise: leave it to the whole body */
        json_decref(v);
        return -1;
    }
    move_error(cj, (size_t)(elem - cj->body), 0, 1, 0, jerr);
    return 0;
}

/* json_loadb's error for a body whose head and elements parse and whose rest does not. 0 with
 * *jerr set, or -1. */
static int rest_error(const clients_json *cj, const char *open, const char *close,
                      json_error_t *jerr)
{
    size_t head;
    json_t *rest = load_rest(cj, open, close, jerr, &head);
    if (rest != NULL) {
        json_decref(rest);
        return -1;
    }
    if (jerr->position < 0 || (size_t)jerr->position < head)
        return 0; /* in the head: the same bytes, the same place */
    if ((size_t)jerr->position < head + 2 || close == NULL)
        return -1;
    int tl, tc; /* the rest's text at head + 2: the body's head, then "[]" */
    text_coords(cj->body, head, &tl, &tc);
    tc += 2;
    move_error(cj, (size_t)(close + 1 - cj->body), head + 2, tl, tc, jerr);
    return 0;
}

/* After a scan (ok: it read the whole body) whose outcome is not a body to stream: json_loadb's
 * error found without a tree (0, *jerr set), or -1 (the whole body must be parsed). */
static int scan_error(clients_json *cj, const cj_scan *sc, bool ok, size_t bad, json_error_t *jerr)
{
    if (sc->open == NULL)
        return -1;
    if (bad < cj->n)
        return elem_error(cj, sc->open, cj->body + cj->spans[bad].off, jerr);
    if (!ok && sc->close == NULL)
        return sc->elem != NULL ? elem_error(cj, sc->open, sc->elem, jerr) : -1;
    return rest_error(cj, sc->open, sc->close, jerr);
}

json_t *clients_json_load(char *body, size_t len, clients_json **out, json_error_t *jerr)
{
    return clients_json_load_numbers(body, len, NULL, 0, out, jerr);
}

json_t *clients_json_load_numbers(char *body, size_t len, const char *const *num_keys,
                                  size_t n_keys, clients_json **out, json_error_t *jerr)
{
    *out = NULL;
    json_t *rest = NULL;
    clients_json *cj = NULL;
    if (body != NULL && len > 0 && len <= CLIENTS_JSON_MAX_BODY && memchr(body, '\0', len) == NULL)
        cj = calloc(1, sizeof *cj);
    if (cj != NULL) {
        cj_scan sc = {false, NULL, NULL, NULL};
        json_error_t je;
        size_t head;
        atomic_init(&cj->refs, 1);
        cj->body = body;
        cj->body_len = len;
        for (size_t k = 0; num_keys != NULL && k < n_keys && k < CLIENTS_JSON_MAX_NUMS; k++)
            cj->nums[cj->n_nums++].key = num_keys[k];
        bool ok = scan_body(cj, &sc) == 0;
        size_t bad = sc.open != NULL ? check_elements(cj) : 0;
        if (ok && bad == cj->n)
            rest = cj->n_read > 0 ? load_rest_all(cj, &sc)
                                  : load_rest(cj, sc.open, sc.close, &je, &head);
        if (rest != NULL) {
            if (!cj->has_clients) { /* numbers alone: the text is not read again */
                free(cj->body);
                cj->body = NULL;
                cj->body_len = 0;
            }
            *out = cj;
            return rest;
        }
        /* With numeric arrays read or refused, the errors found from parts (one array replaced)
         * do not apply: the whole body answers. */
        int found = cj->n_read > 0 || sc.nums_failed
                        ? -1
                        : scan_error(cj, &sc, ok, sc.open != NULL ? bad : 0, &je);
        cj->body = NULL; /* not stolen after all */
        cj_free(cj);
        if (found == 0) {
            if (jerr != NULL)
                *jerr = je;
            return NULL;
        }
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

const double *clients_json_numbers(const clients_json *cj, const char *key, size_t *n)
{
    const cj_nums *a = cj != NULL ? nums_get(cj, key) : NULL;
    *n = a != NULL ? a->n : 0;
    static const double none[1] = {0}; /* read and empty: not NULL */
    return a != NULL ? (a->v != NULL ? a->v : none) : NULL;
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

/* Key order of JSON_SORT_KEYS (see cmp_key below) on (text, length) pairs without NUL bytes. */
static int flat_key_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c != 0 ? c : (al > bl) - (al < bl);
}

/* A flat element (clients_json_flat_get) as json_dump_callback writes the tree jansson parses from
 * it: integers as json_integer (%lld of the token's value), reals as json_real (the rows writer's
 * text, jansson's for json_real: codec/run_rows.h), strings as their body text (printable ASCII
 * without escapes, which jansson writes unchanged), members in the body's order or sorted. 1: not
 * written (flags it does not cover, or a member too long for the buffer): ask jansson. Issue 15:
 * the Idempotency-Key hash dumps every client of a million-client body; through a tree each took
 * about 1 us. */
static int dump_flat(const clients_json_flat *f, size_t flags, json_dump_callback_t cb, void *data)
{
    if (flags & (JSON_ESCAPE_SLASH | JSON_EMBED | JSON_REAL_PRECISION(31)))
        return 1;
    const bool compact = (flags & JSON_COMPACT) != 0;
    size_t order[CLIENTS_JSON_FLAT_MAX];
    for (size_t j = 0; j < f->n; j++) { /* insertion sort: at most 8 keys, no repeats */
        size_t k = j;
        while ((flags & JSON_SORT_KEYS) && k > 0 &&
               flat_key_cmp(f->m[order[k - 1]].key, f->m[order[k - 1]].key_len, f->m[j].key,
                            f->m[j].key_len) > 0) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = j;
    }
    char buf[1024];
    size_t n = 0;
    buf[n++] = '{';
    for (size_t j = 0; j < f->n; j++) {
        const size_t m = order[j];
        const size_t kl = f->m[m].key_len, tl = f->m[m].text_len;
        if (kl + tl + RUN_ROWS_NUM_MAX + 8 > sizeof buf - n)
            return 1;
        if (j > 0) {
            buf[n++] = ',';
            if (!compact)
                buf[n++] = ' ';
        }
        buf[n++] = '"';
        memcpy(buf + n, f->m[m].key, kl);
        n += kl;
        buf[n++] = '"';
        buf[n++] = ':';
        if (!compact)
            buf[n++] = ' ';
        if (f->m[m].is_str) {
            buf[n++] = '"';
            memcpy(buf + n, f->m[m].text, tl);
            n += tl;
            buf[n++] = '"';
        } else if (f->m[m].is_int) { /* at most 18 digits: exact in a long long */
            char num[24];
            memcpy(num, f->m[m].text, tl);
            num[tl] = '\0';
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%lld", strtoll(num, NULL, 10));
        } else {
            n += run_rows_fmt_double(buf + n, f->m[m].v);
        }
    }
    buf[n++] = '}';
    return cb(buf, n, data) == 0 ? 0 : -1;
}

/* Writes the elements as the array json_dump_callback would. */
static int dump_array(const clients_json *cj, size_t flags, json_dump_callback_t cb, void *data)
{
    const char *sep = (flags & JSON_COMPACT) ? "," : ", ";
    if (cb("[", 1, data) != 0)
        return -1;
    for (size_t i = 0; i < cj->n; i++) {
        if (i > 0 && cb(sep, strlen(sep), data) != 0)
            return -1;
        clients_json_flat f;
        int rc = clients_json_flat_get(cj, i, &f) == 0 ? dump_flat(&f, flags, cb, data) : 1;
        if (rc == 1) { /* not flat, or not covered: jansson writes it */
            json_t *e = clients_json_get(cj, i);
            rc = e != NULL ? json_dump_callback(e, cb, data, flags | JSON_ENCODE_ANY) : -1;
            json_decref(e);
        }
        if (rc != 0)
            return -1;
    }
    return cb("]", 1, data);
}

/* Writes a numeric array as json_dump_callback writes the array jansson parsed: integers as
 * json_integer (%lld; an integer token has at most 15 digits, so its double is the exact integer),
 * reals with the rows writer, whose text is jansson's for json_real (codec/run_rows.h), in pieces
 * of a few kB. With JSON_REAL_PRECISION each value goes through jansson's own writer. */
static int dump_nums(const cj_nums *a, size_t flags, json_dump_callback_t cb, void *data)
{
    const char *sep = (flags & JSON_COMPACT) ? "," : ", ";
    const size_t sl = strlen(sep);
    if (cb("[", 1, data) != 0)
        return -1;
    if (flags & JSON_REAL_PRECISION(31)) {
        json_t *ji = json_integer(0), *jr = json_real(0.0);
        int rc = ji != NULL && jr != NULL ? 0 : -1;
        for (size_t i = 0; rc == 0 && i < a->n; i++) {
            if (i > 0)
                rc = cb(sep, sl, data);
            json_t *v = a->is_int[i] ? ji : jr;
            if (rc == 0)
                rc = a->is_int[i] ? json_integer_set(ji, (json_int_t)a->v[i])
                                  : json_real_set(jr, a->v[i]);
            if (rc == 0)
                rc = json_dump_callback(v, cb, data, flags | JSON_ENCODE_ANY);
        }
        json_decref(ji);
        json_decref(jr);
        return rc == 0 && cb("]", 1, data) == 0 ? 0 : -1;
    }
    char buf[4096];
    size_t n = 0;
    for (size_t i = 0; i < a->n; i++) {
        if (n + sl + RUN_ROWS_NUM_MAX > sizeof buf) {
            if (cb(buf, n, data) != 0)
                return -1;
            n = 0;
        }
        if (i > 0) {
            memcpy(buf + n, sep, sl);
            n += sl;
        }
        if (a->is_int[i])
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%lld", (long long)a->v[i]);
        else
            n += run_rows_fmt_double(buf + n, a->v[i]);
    }
    buf[n++] = ']';
    return cb(buf, n, data) == 0 ? 0 : -1;
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
        const cj_nums *a = nums_get(cj, keys[i]);
        if (rc == 0 && a != NULL)
            rc = dump_nums(a, flags, cb, data);
        else if (rc == 0 && cj->has_clients && strcmp(keys[i], "clients") == 0)
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
