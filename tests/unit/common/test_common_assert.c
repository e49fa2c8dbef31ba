/*
 * test_common_assert.c: DP_ASSERT (common/dp_assert.h) in the build it is compiled in.
 *
 * `make` builds it without DPSILO_ASSERT: the condition must not even be evaluated. `make asan` and
 * `make tsan` define DPSILO_ASSERT: a false condition must abort the process (checked in a forked
 * child, which must die of SIGABRT) and a true one must not. Each build checks its own mode, so
 * `make test` and `make asan` together cover both.
 */
#include "tests/support/test_util.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/dp_assert.h"
#include "common/dp_log.h"

static int evaluations;

/* External, not static: in the release build the only reference is inside sizeof, and clang
 * warns that a static function used only there is never emitted. */
int counted(int v);
int counted(int v)
{
    evaluations++;
    return v;
}

static void true_conditions_pass(void **state)
{
    (void)state;
    evaluations = 0;
    DP_ASSERT(counted(1));
    assert_int_equal(evaluations, DP_ASSERT_ENABLED ? 1 : 0);
}

static void false_conditions_abort_only_when_enabled(void **state)
{
    (void)state;
    evaluations = 0;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dp_log_set_level(DP_LOG_OFF);
        DP_ASSERT(counted(0));
        _exit(evaluations == 0 ? 0 : 3); /* released: reached without evaluating */
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (DP_ASSERT_ENABLED) {
        assert_true(WIFSIGNALED(st));
        assert_int_equal(WTERMSIG(st), SIGABRT);
    } else {
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
}

int main(void)
{
    printf("DP_ASSERT is %s in this build\n", DP_ASSERT_ENABLED ? "compiled in" : "compiled out");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(true_conditions_pass),
        cmocka_unit_test(false_conditions_abort_only_when_enabled),
    };
    return cmocka_run_group_tests_name("common_assert", tests, NULL, NULL);
}
