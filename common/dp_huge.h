/*
 * dp_huge: large buffers on transparent huge pages (Linux).
 *
 * A buffer of 100 MB first touched in 4 kB pages costs 25,000 page faults, which under this
 * project's hypervisor took 335-353 ms against 10 ms in 2 MB pages (docs/BENCHMARKS.md, "End to
 * end"): the body of a 10^6-client request and its answer are that size. dp_huge_alloc(n) returns n
 * bytes (uninitialised) aligned on 2 MB and advised onto huge pages when n >= DP_HUGE_MIN, else
 * from dp_malloc; the advice is only advice (nothing changes where the kernel declines or on other
 * systems). Free with free(); realloc is allowed but loses the alignment (grow by a new
 * dp_huge_alloc and a copy instead). NULL when out of memory. Thread-safety: reentrant.
 */
#ifndef DP_COMMON_DP_HUGE_H
#define DP_COMMON_DP_HUGE_H

#include <stddef.h>

#define DP_HUGE_MIN ((size_t)8 << 20)

void *dp_huge_alloc(size_t n);

#endif
