/*
 * version: what this binary is - its version, git commit, compiler, and the versions of the
 * libraries it is linked against (read at run time from each library where it can tell us). Used by
 * GET /v1/version, the build-info metric and the --version of both binaries.
 *
 * Thread-safety: pure; all strings have static storage.
 */
#ifndef DP_SERVICE_VERSION_H
#define DP_SERVICE_VERSION_H

#include <stddef.h>

typedef struct version_info {
    const char *version;    /* VERSION file, e.g. "0.1.0" */
    const char *git_commit; /* short commit the binary was built from, or "unknown" */
    const char *compiler;   /* __VERSION__ */
    const char *microhttpd; /* MHD_get_version() */
    const char *jansson;    /* jansson_version_str() */
    const char *sqlite;     /* sqlite3_libversion() */
    const char *gsl;        /* gsl_version */
} version_info;

void version_get(version_info *v);

/* The --version line of a program of this build into buf (always NUL-terminated, truncated to
 * len), e.g. "dpsilod 0.1.0 (git 858c01c6547e; libmicrohttpd 0.9.75, jansson 2.14, SQLite 3.40.1,
 * GSL 2.7.1)". */
void version_line(const char *program, char *buf, size_t len);

#endif
