/*
 * dp_huge.c: large buffers on transparent huge pages. See dp_huge.h.
 */
/* madvise(MADV_HUGEPAGE) is a Linux extension outside POSIX: defined before any header. */
#define _DEFAULT_SOURCE
#include "common/dp_huge.h"
#include "common/dp_alloc.h"

#include <stdlib.h>

#include <sys/mman.h>

#define HUGE_ALIGN ((size_t)2 << 20)

void *dp_huge_alloc(size_t n)
{
    if (n < DP_HUGE_MIN)
        return dp_malloc(n); /* counted by the allocation-failure hook like any other */
    void *p = NULL;
    if (posix_memalign(&p, HUGE_ALIGN, n) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, n, MADV_HUGEPAGE);
#endif
    return p;
}
