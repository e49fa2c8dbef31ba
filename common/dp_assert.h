/*
 * dp_assert: programmer invariants, checked in the sanitizer builds and compiled out of releases.
 *
 * DP_ASSERT(cond) states something the code relies on and no input can make false: a lock held, a
 * state-machine transition, a capacity (never on anything derived from input: those
 * are errors returned to the caller). Like SQLite's assert() on its invariants:
 *   - with DPSILO_ASSERT defined (`make asan` and `make tsan` define it), a false condition logs
 *     "assertion failed: <cond> (file:line, function)" through dp_log and aborts, so the sanitizer
 *     run stops at the broken invariant with a stack;
 *   - without it (the release build, `make`), the condition is not evaluated at all: it is only
 *     type-checked inside sizeof, so it costs nothing and may call functions that exist only for
 *     checking (e.g. a lock-held probe). Conditions must therefore have no side effects.
 * The choice is the release one because every condition here guards a bug, not an input: in a
 * release build the same bug would surface through the sanitizers and tests first, and an abort in
 * the daemon would drop every in-flight request instead of one.
 */
#ifndef DP_COMMON_DP_ASSERT_H
#define DP_COMMON_DP_ASSERT_H

/* Logs the failed assertion and aborts. Only DP_ASSERT calls it. */
_Noreturn void dp_assert_fail(const char *cond, const char *file, int line, const char *func);

#ifdef DPSILO_ASSERT
#define DP_ASSERT_ENABLED 1
#define DP_ASSERT(cond)   ((cond) ? (void)0 : dp_assert_fail(#cond, __FILE__, __LINE__, __func__))
#else
#define DP_ASSERT_ENABLED 0
#define DP_ASSERT(cond)   ((void)sizeof(!(cond)))
#endif

#endif
