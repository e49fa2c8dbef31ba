/*
 * dp_alloc.c: libc allocation with a failure-injection countdown for tests. See dp_alloc.h.
 */
#include "common/dp_alloc.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static atomic_long fail_countdown; /* 0 = off; else the allocation that reaches 0 fails */
static atomic_long failures;       /* how many allocations were failed on purpose */
static _Thread_local int exempt;   /* > 0: this thread is inside dp_alloc_exempt_begin/_end */
static _Thread_local long here_countdown; /* dp_alloc_fail_after_here: this thread's count */

static int should_fail(void)
{
    if (exempt > 0)
        return 0;
    if (here_countdown > 0 && --here_countdown == 0) {
        atomic_fetch_add(&failures, 1);
        return 1;
    }
    long c = atomic_load(&fail_countdown);
    while (c > 0) {
        if (atomic_compare_exchange_weak(&fail_countdown, &c, c - 1)) {
            if (c == 1) {
                atomic_fetch_add(&failures, 1);
                return 1;
            }
            return 0;
        }
    }
    return 0;
}

void *dp_malloc(size_t size)
{
    if (should_fail())
        return NULL;
    return malloc(size ? size : 1);
}

void *dp_calloc(size_t n, size_t size)
{
    if (size != 0 && n > SIZE_MAX / size)
        return NULL;
    if (should_fail())
        return NULL;
    return calloc(n ? n : 1, size ? size : 1);
}

void *dp_realloc(void *p, size_t size)
{
    if (should_fail())
        return NULL;
    return realloc(p, size ? size : 1);
}

void dp_free(void *p)
{
    free(p);
}

char *dp_strdup(const char *s)
{
    if (s == NULL)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = dp_malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

void dp_alloc_fail_after(long n)
{
    atomic_store(&fail_countdown, n > 0 ? n : 0);
}

void dp_alloc_fail_after_here(long n)
{
    here_countdown = n > 0 ? n : 0;
}

long dp_alloc_failures(void)
{
    return atomic_load(&failures);
}

void dp_alloc_exempt_begin(void)
{
    exempt++;
}

void dp_alloc_exempt_end(void)
{
    if (exempt > 0)
        exempt--;
}
