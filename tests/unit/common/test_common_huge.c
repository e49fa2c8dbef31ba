/*
 * Unit tests for common/dp_huge.c: a large block is 2 MB-aligned, writable end to end and freed by
 * free(); a small one comes from malloc.
 */
#include "tests/support/test_util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/dp_huge.h"

static void large_blocks_are_aligned_and_usable(void **state)
{
    (void)state;
    size_t n = DP_HUGE_MIN + 12345;
    unsigned char *p = dp_huge_alloc(n);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % ((uintptr_t)2 << 20), 0);
    memset(p, 0xa5, n);
    assert_int_equal(p[0], 0xa5);
    assert_int_equal(p[n - 1], 0xa5);
    unsigned char *q = realloc(p, 2 * n); /* allowed, as for malloc's blocks */
    assert_non_null(q);
    assert_int_equal(q[n - 1], 0xa5);
    free(q);
}

static void small_blocks_come_from_malloc(void **state)
{
    (void)state;
    char *p = dp_huge_alloc(100);
    assert_non_null(p);
    memset(p, 1, 100);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(large_blocks_are_aligned_and_usable),
        cmocka_unit_test(small_blocks_come_from_malloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
