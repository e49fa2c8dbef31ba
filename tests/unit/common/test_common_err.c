/*
 * Unit tests for common/: dp_err recording rules and the dp_alloc failure-injection hook.
 */
#include "tests/support/test_util.h"

#include <pthread.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_err.h"

static void first_error_wins(void **state)
{
    (void)state;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(dp_err_set(&e, DP_EINVAL, "sigma", "sigma must be > 0 (got %g)", -1.5),
                     DP_EINVAL);
    assert_int_equal(dp_err_set(&e, DP_EINTERNAL, "other", "later"), DP_EINTERNAL);
    assert_int_equal(e.code, DP_EINVAL);
    assert_string_equal(e.field, "sigma");
    assert_string_equal(e.msg, "sigma must be > 0 (got -1.5)");
}

static void null_err_is_allowed(void **state)
{
    (void)state;
    assert_int_equal(dp_err_set(NULL, DP_ENOMEM, NULL, "x"), DP_ENOMEM);
    dp_err_clear(NULL);
    dp_err_prefix_field(NULL, "a");
}

static void message_newlines_are_removed(void **state)
{
    (void)state;
    dp_err e;
    dp_err_clear(&e);
    dp_err_set(&e, DP_EINVAL, "f", "line1\nline2\r");
    assert_null(strchr(e.msg, '\n'));
    assert_null(strchr(e.msg, '\r'));
}

static void prefix_builds_field_paths(void **state)
{
    (void)state;
    dp_err e;
    dp_err_clear(&e);
    dp_err_set(&e, DP_EINVAL, "sampling_rate", "bad");
    dp_err_prefix_field(&e, "event");
    assert_string_equal(e.field, "event.sampling_rate");
    dp_err_prefix_field(&e, "events[2]");
    assert_string_equal(e.field, "events[2].event.sampling_rate");
    dp_err e2;
    dp_err_clear(&e2);
    dp_err_set(&e2, DP_EINVAL, "[3]", "bad");
    dp_err_prefix_field(&e2, "events");
    assert_string_equal(e2.field, "events[3]");
}

static void code_names_are_stable(void **state)
{
    (void)state;
    assert_string_equal(dp_err_code_name(DP_EINVAL), "invalid_argument");
    assert_string_equal(dp_err_code_name(DP_EBUDGET), "budget_exhausted");
    assert_string_equal(dp_err_code_name(DP_ENUMERIC), "numerical_failure");
    assert_string_equal(dp_err_code_name(12345), "internal");
}

static void alloc_hook_fails_the_nth_allocation(void **state)
{
    (void)state;
    dp_alloc_fail_after(2);
    void *a = dp_malloc(8);
    void *b = dp_malloc(8);
    void *c = dp_malloc(8);
    assert_non_null(a);
    assert_null(b);
    assert_non_null(c);
    dp_free(a);
    dp_free(c);
    dp_alloc_fail_after(0);
    assert_null(dp_calloc(SIZE_MAX / 2, 4)); /* overflow is refused, never wrapped */
}

static void *alloc_elsewhere(void *arg)
{
    (void)arg;
    for (int i = 0; i < 8; i++) /* another thread: never counted by _here */
        dp_free(dp_malloc(16));
    return NULL;
}

static void here_hook_counts_only_this_thread(void **state)
{
    (void)state;
    dp_alloc_fail_after_here(2);
    void *a = dp_malloc(8);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, alloc_elsewhere, NULL), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    void *b = dp_malloc(8); /* this thread's second: fails */
    void *c = dp_malloc(8); /* the hook is spent */
    dp_alloc_fail_after_here(0);
    assert_non_null(a);
    assert_null(b);
    assert_non_null(c);
    dp_free(a);
    dp_free(c);
}

static void prefix_index_names_the_element(void **state)
{
    (void)state;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(dp_err_prefix_index(&e, "groups", 1, DP_OK), DP_OK); /* no error: no-op */
    assert_string_equal(e.field, "");
    int rc = dp_err_set(&e, DP_EINVAL, "clients", "bad");
    assert_int_equal(dp_err_prefix_index(&e, "groups", 12, rc), DP_EINVAL);
    assert_string_equal(e.field, "groups[12].clients");
    dp_err_clear(&e);
    dp_err_set(&e, DP_EINVAL, NULL, "bad");
    dp_err_prefix_index(&e, "silos", 0, DP_EINVAL);
    assert_string_equal(e.field, "silos[0]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(prefix_index_names_the_element),
        cmocka_unit_test(first_error_wins),
        cmocka_unit_test(null_err_is_allowed),
        cmocka_unit_test(message_newlines_are_removed),
        cmocka_unit_test(prefix_builds_field_paths),
        cmocka_unit_test(code_names_are_stable),
        cmocka_unit_test(alloc_hook_fails_the_nth_allocation),
        cmocka_unit_test(here_hook_counts_only_this_thread),
    };
    return cmocka_run_group_tests_name("common", tests, NULL, NULL);
}
