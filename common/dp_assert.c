/*
 * dp_assert.c: the failure path of DP_ASSERT. See dp_assert.h.
 */
#include "common/dp_assert.h"

#include <stdlib.h>

#include "common/dp_log.h"

_Noreturn void dp_assert_fail(const char *cond, const char *file, int line, const char *func)
{
    dp_log(DP_LOG_ERROR, NULL, "assertion failed: %s (%s:%d, %s)", cond, file, line, func);
    abort();
}
