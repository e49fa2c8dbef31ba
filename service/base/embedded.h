/*
 * embedded.h: files compiled into the daemon by scripts/embed.sh (generated build/gen/embedded.c).
 *
 * EMBED_MIGRATIONS holds migrations/NNNN_*.sql in ascending name order; EMBED_WEB holds the regular
 * files at the top level of web/. Each table has a {NULL, NULL, 0} sentinel after its N entries.
 * EMBED_OPENAPI is openapi/openapi.json, the OpenAPI 3.1 description of the API that
 * GET /v1/openapi.json serves (docs/API.md "The OpenAPI document").
 * Every data array is followed by one NUL byte that len does not count, so SQL can be handed to
 * sqlite3_exec.
 *
 * Why embed: the binary knows exactly which schema versions it can run (it refuses to start on a
 * newer schema), and the static file server needs no filesystem access at all, so no URL can reach
 * a file.
 *
 * Thread-safety: read-only data.
 */
#ifndef DP_SERVICE_EMBEDDED_H
#define DP_SERVICE_EMBEDDED_H

#include <stddef.h>

typedef struct embed_file {
    const char *name;          /* base name, e.g. "0001_init.sql" or "index.html" */
    const unsigned char *data; /* file bytes, NUL-terminated (terminator not in len) */
    size_t len;                /* bytes */
} embed_file;

extern const embed_file EMBED_MIGRATIONS[];
extern const size_t EMBED_MIGRATIONS_N;
extern const embed_file EMBED_WEB[];
extern const size_t EMBED_WEB_N;
extern const embed_file EMBED_OPENAPI;

#endif
