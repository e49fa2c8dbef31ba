/*
 * http/static.c: static-file whitelist lookup. Contract and safety argument in http/static.h.
 */
#include "service/http/static.h"

#include <string.h>

static const struct {
    const char *ext;  /* including the dot */
    const char *type; /* Content-Type */
} TYPES[] = {
    {".html", "text/html; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".json", "application/json"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".ico", "image/x-icon"},
    {".txt", "text/plain; charset=utf-8"},
};

const char *http_static_content_type(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (dot == NULL || name[0] == '.')
        return NULL; /* no extension, or a dot-file */
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (strcmp(dot, TYPES[i].ext) == 0)
            return TYPES[i].type;
    return NULL;
}

bool http_static_lookup(const embed_file *files, size_t n, const char *path, http_static_file *out)
{
    if (path == NULL || path[0] != '/')
        return false;
    const char *want = path[1] == '\0' ? "index.html" : path + 1;
    for (size_t i = 0; i < n; i++) {
        if (files[i].name == NULL || strcmp(files[i].name, want) != 0)
            continue;
        const char *type = http_static_content_type(files[i].name);
        if (type == NULL)
            return false;
        out->data = files[i].data;
        out->len = files[i].len;
        out->content_type = type;
        return true;
    }
    return false;
}
