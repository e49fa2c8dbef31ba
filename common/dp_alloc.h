/*
 * dp_alloc: the allocator every dpsilo library uses, with a test-only failure-injection hook.
 *
 * dp_malloc/dp_calloc/dp_realloc/dp_free behave like their libc counterparts (dp_calloc checks
 * n*size for overflow, dp_free(NULL) is a no-op) and never abort. Tests call dp_alloc_fail_after(N)
 * so that the Nth allocation from then on returns NULL (failure injection: every test repeats an
 * operation for N = 1, 2, ... and expects a clean error); N = 0 disables it. jansson can be routed
 * through these by the service (json_set_alloc_funcs).
 *
 * Thread-safety: the counters are C11 atomics; the hook is meant for single-threaded unit tests.
 */
#ifndef DP_COMMON_DP_ALLOC_H
#define DP_COMMON_DP_ALLOC_H

#include <stddef.h>

void *dp_malloc(size_t size);
void *dp_calloc(size_t n, size_t size);
/* Like realloc: on failure returns NULL and leaves p valid (never write p = dp_realloc(p, n)). */
void *dp_realloc(void *p, size_t size);
void dp_free(void *p);
/* Returns a dp_malloc'd copy of s (owned by caller), or NULL. */
char *dp_strdup(const char *s);

/* Test hook: the nth allocation from now fails (1 = the next one); 0 disables. The count is
 * process-wide: allocations of every thread (a ledger's writer thread too) move it. */
void dp_alloc_fail_after(long n);
/* The same, counting only the calling thread's allocations: for a test whose fixture runs other
 * threads that allocate at any moment (a ledger), so that which allocation fails is
 * deterministic. */
void dp_alloc_fail_after_here(long n);
/* Number of allocations failed on purpose since start (for tests). */
long dp_alloc_failures(void);
/* Between dp_alloc_exempt_begin and _end (nestable, per thread) the calling thread's allocations
 * neither count towards nor trigger the test countdown. Only for a library call that cannot
 * survive an allocation failure (jansson's parser: service/json_util.h json_util_loadb). With the
 * hook off (production) it costs a thread-local increment. */
void dp_alloc_exempt_begin(void);
void dp_alloc_exempt_end(void);

#endif
