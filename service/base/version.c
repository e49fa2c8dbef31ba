/*
 * base/version.c: build and library versions (base/version.h). Library versions are the run-time
 * ones, so a binary linked against a different shared library reports what it really uses.
 */
#include "service/base/version.h"

#include <gsl/gsl_version.h>
#include <jansson.h>
#include <microhttpd.h>
#include <sqlite3.h>
#include <stdio.h>

#ifndef DPSILO_VERSION
#define DPSILO_VERSION "0.0.0"
#endif
#ifndef DPSILO_GIT_COMMIT
#define DPSILO_GIT_COMMIT "unknown"
#endif

void version_get(version_info *v)
{
    v->version = DPSILO_VERSION;
    v->git_commit = DPSILO_GIT_COMMIT;
    v->compiler = __VERSION__;
    v->microhttpd = MHD_get_version();
    v->jansson = jansson_version_str();
    v->sqlite = sqlite3_libversion();
    v->gsl = gsl_version;
}

void version_line(const char *program, char *buf, size_t len)
{
    version_info v;
    version_get(&v);
    snprintf(buf, len, "%s %s (git %s; libmicrohttpd %s, jansson %s, SQLite %s, GSL %s)", program,
             v.version, v.git_commit, v.microhttpd, v.jansson, v.sqlite, v.gsl);
}
