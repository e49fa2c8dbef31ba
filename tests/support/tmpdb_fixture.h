/*
 * tmpdb_fixture.h: a fresh temporary directory and a database path inside it, for cmocka tests that
 * open a store themselves (tests/unit/service/db/). Setup and teardown in one place, so the tests
 * that need them say only which tag names their directory.
 *
 *     static int setup(void **state) { return tmpdb_open(state, "store"); }
 *     static int teardown(void **state) { return tmpdb_close(state); }
 *
 * *state is a tmpdb (owned by the fixture): dir is /tmp/dpsilo-<tag>-XXXXXX, path is dir/test.db
 * (not created: the test opens it). tmpdb_close removes the directory and everything in it.
 */
#ifndef DP_TESTS_SUPPORT_TMPDB_FIXTURE_H
#define DP_TESTS_SUPPORT_TMPDB_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

typedef struct tmpdb {
    char dir[64];
    char path[128];
} tmpdb;

static inline int tmpdb_open(void **state, const char *tag)
{
    tmpdb *f = calloc(1, sizeof *f);
    if (f == NULL)
        return -1;
    snprintf(f->dir, sizeof f->dir, "/tmp/dpsilo-%s-XXXXXX", tag);
    if (mkdtemp(f->dir) == NULL) {
        free(f);
        return -1;
    }
    snprintf(f->path, sizeof f->path, "%s/test.db", f->dir);
    *state = f;
    return 0;
}

static inline int tmpdb_close(void **state)
{
    tmpdb *f = *state;
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    int rc = system(cmd);
    free(f);
    return rc == 0 ? 0 : -1;
}

#endif
