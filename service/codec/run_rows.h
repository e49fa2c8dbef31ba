/*
 * codec/run_rows.h: the per-client results of an estimator run as columns of doubles, and their
 * JSON rows written by hand (issue 15, "fast end to end").
 *
 * A run of m clients has the same fields in every row (posterior_mean, posterior_sd, ...), each a
 * number or a fixed-length array of numbers. The compute thread fills run_rows.vals, m rows of W =
 * sum of the widths doubles each (row-major), and the row texts are written from it without a
 * jansson value per number: the answer of the POST, GET /v1/runs/{id} and each page of
 * GET /v1/runs/{id}/clients use the same writer, so they show the same text for the same double.
 * Numbers are written with 17 significant digits (round-trip exact: strtod gives back the same
 * double) and a ".0" when they would read as integers, as jansson writes reals; a non-finite value
 * is null.
 *
 * Stored (service/db/runs.h, migrations/0015_run_clients.sql) as three values: the layout (JSON
 * text, run_rows_layout_text), the ids (NULL, or a blob of m + 1 little-endian uint32 offsets
 * followed by the ids' JSON texts) and vals (a blob of m * W little-endian IEEE doubles).
 *
 * Ownership: run_rows_clear frees what a run_rows holds. Thread-safety: none needed; a run_rows
 * belongs to one thread at a time.
 */
#ifndef DP_SERVICE_CODEC_RUN_ROWS_H
#define DP_SERVICE_CODEC_RUN_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RUN_ROWS_MAX_FIELDS 8
#define RUN_ROWS_NAME_MAX   32
#define RUN_ROWS_NUM_MAX    32 /* bytes of one written number, NUL included */

typedef enum {
    RUN_IDS_NONE = 0, /* rows have no "id" (normal-means: observations, not clients) */
    RUN_IDS_INDEX,    /* "id" is the row's 0-based index (no client sent an id) */
    RUN_IDS_TEXT      /* "id" is the client's own, as JSON text (ids, ids_off) */
} run_ids;

typedef struct run_field {
    char name[RUN_ROWS_NAME_MAX];
    size_t width; /* doubles in each row */
    bool vec;     /* written as an array (also when width is 1) */
} run_field;

typedef struct run_rows {
    size_t m;        /* rows */
    size_t base;     /* the run's index of row 0 (a page of a stored run; else 0) */
    size_t n_fields; /* <= RUN_ROWS_MAX_FIELDS */
    run_field field[RUN_ROWS_MAX_FIELDS];
    size_t w;      /* doubles per row: the sum of the widths */
    double *vals;  /* m * w, owned */
    run_ids ids;   /* how the rows' "id" is made */
    char *id_text; /* RUN_IDS_TEXT: the ids' JSON texts back to back, owned */
    size_t id_len, id_cap;
    uint32_t *id_off; /* RUN_IDS_TEXT: m + 1 offsets into id_text, owned */
} run_rows;

/* A growing text (malloc). failed is set when a reserve ran out of memory. */
typedef struct run_text {
    char *s;
    size_t len, cap;
    bool failed;
} run_text;

/* Room for extra more bytes and a NUL; -1 when out of memory (t->failed set). */
int run_text_reserve(run_text *t, size_t extra);
/* Appends n bytes of s, the text kept NUL-terminated; out of memory sets t->failed (sticky: later
 * appends do nothing), for the caller to check once at the end. */
void run_text_append(run_text *t, const char *s, size_t n);

/* Writes x as a JSON number (or null), NUL-terminated, into buf (RUN_ROWS_NUM_MAX bytes); returns
 * its length. The text is the one jansson writes for json_real(x): "%.17g", ".0" added to an
 * integer, the exponent without "+" and leading zeros (1e20, 2.5e-7). */
size_t run_rows_fmt_double(char *buf, double x);

/* Adds a field of width doubles (vec: an array). 0, or -1 when there are too many fields or the
 * name is too long. Fields are added before run_rows_alloc. */
int run_rows_add_field(run_rows *r, const char *name, size_t width, bool vec);

/* Allocates vals for m rows (and the id offsets when ids is RUN_IDS_TEXT). -1: out of memory or
 * too large. */
int run_rows_alloc(run_rows *r, size_t m, run_ids ids);

/* Appends the JSON text of row i's id (RUN_IDS_TEXT; rows in order, i = the rows added so far).
 * -1 when out of memory or past 4 GB of ids. */
int run_rows_push_id(run_rows *r, size_t i, const char *json, size_t len);

/* Appends rows [from, to) to t as JSON objects separated by commas (a comma first when comma);
 * with_position: each row starts with "position": its 1-based place in the run (base + i + 1).
 * -1 when out of memory. */
int run_rows_write(const run_rows *r, size_t from, size_t to, bool comma, bool with_position,
                   run_text *t);

/* A 64-bit digest of the rows: their count, the fields and every value's bits (FNV-1a over 64-bit
 * words, four lanes folded), written as 16 hex digits and a NUL into hex. The ids are left out:
 * they are the request's own, and the same ids may be held as text or as indexes. Not a
 * cryptographic hash: it tells whether two runs' rows are the same numbers (an Idempotency-Key
 * retry that computes them again), at a few ms for 10^6 rows of 3 numbers. */
void run_rows_digest(const run_rows *r, char hex[17]);

/* The layout as JSON text (owned, malloc), or NULL when out of memory. */
char *run_rows_layout_text(const run_rows *r);

/* Reads a stored layout (layout text of len bytes) into r's fields and ids (vals untouched).
 * -1 when it is not one run_rows_layout_text writes. */
int run_rows_layout_parse(run_rows *r, const char *layout, size_t len);

void run_rows_clear(run_rows *r);

#endif
