/*
 * clients_json: reads a request body whose top-level "clients" array may hold a million objects,
 * without building a jansson tree for that array (issue #10, "peak memory stays within a small
 * multiple of the body size").
 *
 * Why: jansson keeps every parsed object as a hash table plus one allocation per member, about 500
 * to 1,000 bytes for a client of 38 bytes of text; a 38 MB estimator body used to peak at 26-33
 * times its size. Here the body text itself is kept (it is already in memory), and the array is
 * reduced to two 32-bit numbers per element: where its text starts and how long it is. A handler
 * asks for one client at a time (clients_json_get), gets a small tree parsed from that span by
 * jansson, and drops it before the next.
 *
 * Exactness: the result and every error are those of
 *     json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr)
 * by construction, not by imitation. A small scanner only finds the structure (the top-level keys,
 * the span of each value, the commas of the clients array); jansson itself parses every element's
 * span (JSON_DECODE_ANY, same flags) and the rest of the object (the body with the array's text
 * replaced by "[]"). A malformed body is answered the same way: when the scan reached the array,
 * json_loadb's error is found by parsing only a part (the text before the array, the element that
 * fails, from its first byte on, or the object after the array) and moved to the body's line,
 * column and position, so its memory is bounded like a valid body's. Whenever the scanner meets
 * anything else it does not expect (no array reached, a bad separator between elements, an array
 * nesting deeper than CLIENTS_JSON_MAX_DEPTH, "clients" twice), the whole body is parsed by
 * json_loadb as before: the same tree, or the same error text, line and column. That fallback is
 * the old memory cost, paid only by bodies that are unusual (a key written with escapes,
 * "cl\u0069ents", is not recognised and takes the tree path too) or malformed in those ways.
 *
 * Numeric arrays (clients_json_load_numbers, issue 15): the same object also carries top-level
 * arrays of numbers a route asks for, read into doubles without a tree; their values are checked
 * against jansson's bit for bit in tests/unit/service/codec/test_service_numbers_json.c, and any
 * array it does not read sends the whole body to json_loadb.
 *
 * Ownership: a clients_json owns the body text it reads (clients_json_load steals it) and is
 * reference-counted, so a compute thread can keep it after the HTTP request that read it ended.
 * Trees returned by clients_json_get are new references owned by the caller.
 *
 * Thread-safety: the counts are atomic; everything else is read-only after load, so one
 * clients_json may be read from several threads (each gets its own trees).
 */
#ifndef DP_SERVICE_CODEC_CLIENTS_JSON_H
#define DP_SERVICE_CODEC_CLIENTS_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* Elements nesting deeper than this (an object inside a client counts 2) take the tree path:
 * jansson's own limit (2048 levels for the whole body) is then applied to the whole body. */
#define CLIENTS_JSON_MAX_DEPTH 64
/* Bodies longer than this take the tree path (the spans are 32-bit offsets). */
#define CLIENTS_JSON_MAX_BODY ((size_t)UINT32_MAX)

typedef struct clients_json clients_json;

/* Parses body (len bytes; the caller has refused NUL bytes, as http/server.c does) like
 * json_loadb(body, len, JSON_REJECT_DUPLICATES, jerr).
 *
 * Returns the tree, or NULL with *jerr filled exactly as json_loadb fills it (also for out of
 * memory, as jansson reports it). When the body is an object whose first "clients" member is an
 * array read as spans, *cj is set (owned by the caller, release with clients_json_decref), the
 * returned object holds "clients" as an empty array in its place, and body is stolen by *cj.
 * Otherwise *cj is NULL, the returned tree is json_loadb's, and body stays the caller's. */
json_t *clients_json_load(char *body, size_t len, clients_json **cj, json_error_t *jerr);

/* Numeric arrays (issue 15: a million observations of normal-means' "x" and "s" cost half a
 * second as jansson trees). At most this many keys per load. */
#define CLIENTS_JSON_MAX_NUMS 4

/* clients_json_load, and also each top-level member named (literally) by one of num_keys[0,
 * n_keys) (static strings) whose value is an array of JSON number tokens is read straight into
 * doubles, the values jansson's json_number_value would give (integer tokens of at most 15 digits;
 * a real that overflows is jansson's error): the returned object then holds that key as an empty
 * array, and *cj is set even when there is no "clients" array. Such an array that holds anything
 * else (a string, null, a nested value, a longer integer, a malformed number), a key read twice,
 * or a body that does not parse, sends the whole body to json_loadb: the tree and the error are
 * its own, so a handler that checks the tree's arrays reports them as before. */
json_t *clients_json_load_numbers(char *body, size_t len, const char *const *num_keys,
                                  size_t n_keys, clients_json **cj, json_error_t *jerr);
/* The numbers read for key (*n of them; not NULL when the array is empty), or NULL when key was not
 * read as numbers (absent, not an array, or not asked for: the tree holds it). cj NULL: NULL. */
const double *clients_json_numbers(const clients_json *cj, const char *key, size_t *n);

/* Takes one more reference; returns cj (NULL: no-op). */
clients_json *clients_json_incref(clients_json *cj);
/* Drops a reference; the last one frees the body text and the spans. NULL: no-op. */
void clients_json_decref(clients_json *cj);

/* Number of elements of the clients array. */
size_t clients_json_count(const clients_json *cj);
/* How many elements are objects with the member key (counted for "id" and "silo_id" at load, so a
 * handler can skip a pass when none has it); another key returns SIZE_MAX: unknown. */
size_t clients_json_count_with(const clients_json *cj, const char *key);
/* Element i (< count) as a new tree, owned by the caller; NULL only when out of memory. */
json_t *clients_json_get(const clients_json *cj, size_t i);

/* A client that is a flat object of numbers and plain strings (such as an "id"), read without
 * jansson (issue 15: a million clients parsed twice by jansson cost seconds). */
#define CLIENTS_JSON_FLAT_MAX 8
typedef struct clients_json_flat {
    size_t n; /* members */
    struct {
        const char *key; /* the key's text in the body (not NUL-terminated), no escapes */
        size_t key_len;
        double v;         /* the number, as jansson's json_number_value gives it (NAN: a string) */
        bool is_int;      /* written as an integer (jansson: a json_integer) */
        bool is_str;      /* a string: text holds its characters, between its quotes */
        const char *text; /* the value's text in the body: the number's token, or the string's
                             characters (text - 1 and text + text_len are its quotes) */
        size_t text_len;
    } m[CLIENTS_JSON_FLAT_MAX];
} clients_json_flat;

/* Element i (< count) as a flat object when it is one that jansson would parse to the same values:
 * '{' members '}' of up to CLIENTS_JSON_FLAT_MAX members, each key plain printable ASCII without
 * escapes and without repeats, each value a JSON number (an integer of at most 18 digits, or a
 * real whose value is finite) or a string of printable ASCII without escapes (its JSON text is
 * then the body's, as json_dumps writes it). 0 with *out set, or -1: anything else (then ask
 * clients_json_get). */
int clients_json_flat_get(const clients_json *cj, size_t i, clients_json_flat *out);
/* clients_json_flat_get without converting the numbers (each member's key, is_int, is_str and
 * text are set; v is not, unless the token has an exponent): for a pass that reads texts only. */
int clients_json_flat_peek(const clients_json *cj, size_t i, clients_json_flat *out);

/* Writes what json_dump_callback(whole, cb, data, flags) writes for the whole body, where whole is
 * rest (clients_json_load's tree) with its "clients" member holding the elements again. flags: only
 * JSON_COMPACT, JSON_SORT_KEYS, JSON_ENSURE_ASCII, JSON_ESCAPE_SLASH and JSON_REAL_PRECISION are
 * supported (no JSON_INDENT). Flat elements and numeric arrays are written without a jansson tree
 * (in jansson 2.14's text; with JSON_ESCAPE_SLASH or JSON_REAL_PRECISION jansson writes them).
 * Returns 0, or -1 (out of memory, or cb failed). */
int clients_json_dump_body(const json_t *rest, const clients_json *cj, size_t flags,
                           json_dump_callback_t cb, void *data);
/* json_dumps(array of the elements, flags) as a malloc'd string owned by the caller; same flags as
 * clients_json_dump_body. NULL when out of memory. */
char *clients_json_dumps(const clients_json *cj, size_t flags);

#endif
