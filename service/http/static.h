/*
 * http_static: the whitelist of static files served at / (the web/ directory, embedded at build
 * time by scripts/embed.sh).
 *
 * Safety argument: the whitelist is the table of embedded files. A URL path is only ever compared,
 * as a string, against "/" + the name of an embedded file (or "/" for index.html); it is never
 * joined to a directory, opened or resolved. So "..", "%2e%2e", "//", "\" and every other traversal
 * spelling can only produce a 404. Files whose extension has no content type in the table below are
 * not served at all.
 *
 *   .html text/html; charset=utf-8      .css  text/css; charset=utf-8
 *   .js   text/javascript; charset=utf-8 .json application/json
 *   .svg  image/svg+xml                 .png  image/png
 *   .ico  image/x-icon                  .txt  text/plain; charset=utf-8
 *
 * Thread-safety: read-only data.
 */
#ifndef DP_SERVICE_HTTP_STATIC_H
#define DP_SERVICE_HTTP_STATIC_H

#include <stdbool.h>
#include <stddef.h>

#include "service/base/embedded.h"

typedef struct http_static_file {
    const unsigned char *data; /* borrowed, static storage */
    size_t len;                /* bytes */
    const char *content_type;  /* static storage */
} http_static_file;

/* Looks path up in files[0..n-1] (pass EMBED_WEB, EMBED_WEB_N). true and *out filled if served. */
bool http_static_lookup(const embed_file *files, size_t n, const char *path, http_static_file *out);

/* Content type for a file name by its extension, or NULL when the type is not whitelisted. */
const char *http_static_content_type(const char *name);

#endif
