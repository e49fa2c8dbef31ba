/*
 * json_text.h: growing text buffers and a seeded generator for the differential tests of the
 * JSON readers (test_service_clients_json.c, test_service_numbers_json.c): bodies are built as
 * text, loaded by jansson and by our reader, and compared.
 */
#ifndef DP_TESTS_JSON_TEXT_H
#define DP_TESTS_JSON_TEXT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/test_util.h"

/* A NUL-terminated growing text; {0} is empty. Free p with free(). */
typedef struct sbuf {
    char *p;
    size_t len, cap;
} sbuf;

/* Appends buf[0, size) to the sbuf data; 0, or -1 when out of memory (json_dump_callback's
 * callback type). */
static inline int sbuf_cb(const char *buf, size_t size, void *data)
{
    sbuf *b = data;
    if (b->len + size + 1 > b->cap) {
        size_t nc = (b->len + size + 1) * 2;
        char *np = realloc(b->p, nc);
        if (np == NULL)
            return -1;
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, buf, size);
    b->len += size;
    b->p[b->len] = '\0';
    return 0;
}

/* Appends s (the test fails when out of memory). */
static inline void put(sbuf *b, const char *s)
{
    assert_int_equal(sbuf_cb(s, strlen(s), b), 0);
}

/* The generator's state (splitmix64), set by each test for its seed. */
static uint64_t rng_state;

static inline uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Uniform in [0, n), n >= 1 (modulo bias is irrelevant here). */
static inline size_t below(size_t n)
{
    return (size_t)(rnd() % n);
}

/* Appends JSON whitespace, often none. */
static inline void ws(sbuf *b)
{
    static const char *const W[] = {"", "", "", " ", "\n", "\t", "\r\n  "};
    put(b, W[below(7)]);
}

#endif
