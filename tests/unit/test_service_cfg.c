/*
 * Unit tests for service/cfg.c: defaults, flags (both "--x v" and "--x=v"), environment variables,
 * flag precedence over the environment, and strict rejection naming the flag or variable.
 */
#include "tests/test_util.h"

#include <string.h>

#include "common/dp_log.h"
#include "service/cfg.h"

/* A fake environment for the tests. */
static const char *const *fake_env;
static const char *fake_getenv(const char *name)
{
    for (const char *const *p = fake_env; p && p[0]; p += 2)
        if (strcmp(p[0], name) == 0)
            return p[1];
    return NULL;
}

static int parse(cfg *c, dp_err *e, const char *const *env, int argc, const char **argv)
{
    fake_env = env;
    dp_err_clear(e);
    return cfg_parse(c, argc, (char *const *)argv, fake_getenv, e);
}

static void defaults_without_arguments(void **state)
{
    (void)state;
    cfg c;
    dp_err e;
    const char *argv[] = {"dpsilod"};
    assert_int_equal(parse(&c, &e, NULL, 1, argv), DP_OK);
    assert_string_equal(c.host, "127.0.0.1");
    assert_int_equal(c.port, 8080);
    assert_string_equal(c.db_path, "./var/dpsilo.db");
    assert_true(c.threads >= 1 && c.threads <= CFG_MAX_THREADS);
    assert_int_equal(c.max_body_bytes, CFG_DEFAULT_MAX_BODY);
    assert_int_equal(c.log_level, DP_LOG_INFO);
    assert_false(c.help);
}

static void flags_in_both_spellings(void **state)
{
    (void)state;
    cfg c;
    dp_err e;
    const char *argv[] = {"dpsilod",         "--listen",    "localhost:0",
                          "--db=/tmp/x.db",  "--threads",   "3",
                          "--max-body=4096", "--log-level", "warn"};
    assert_int_equal(parse(&c, &e, NULL, 9, argv), DP_OK);
    assert_string_equal(c.host, "127.0.0.1");
    assert_int_equal(c.port, 0);
    assert_string_equal(c.db_path, "/tmp/x.db");
    assert_int_equal(c.threads, 3);
    assert_int_equal(c.max_body_bytes, 4096);
    assert_int_equal(c.log_level, DP_LOG_WARN);
}

static void environment_applies_and_flags_win(void **state)
{
    (void)state;
    cfg c;
    dp_err e;
    static const char *const env[] = {
        "DPSILO_LISTEN",   "0.0.0.0:9001", "DPSILO_THREADS",   "5",     "DPSILO_DB", "/env.db",
        "DPSILO_MAX_BODY", "777",          "DPSILO_LOG_LEVEL", "debug", NULL};
    const char *argv[] = {"dpsilod", "--threads", "2"};
    assert_int_equal(parse(&c, &e, env, 3, argv), DP_OK);
    assert_string_equal(c.host, "0.0.0.0");
    assert_int_equal(c.port, 9001);
    assert_int_equal(c.threads, 2); /* flag beats DPSILO_THREADS=5 */
    assert_string_equal(c.db_path, "/env.db");
    assert_int_equal(c.max_body_bytes, 777);
    assert_int_equal(c.log_level, DP_LOG_DEBUG);
}

static void bad_values_name_their_source(void **state)
{
    (void)state;
    cfg c;
    dp_err e;
    const struct {
        const char *flag, *value;
    } bad[] = {
        {"--threads", "0"},
        {"--threads", "65"},
        {"--threads", "2x"},
        {"--threads", "-1"},
        {"--threads", ""},
        {"--max-body", "0"},
        {"--max-body", "1e6"},
        {"--listen", "127.0.0.1"},
        {"--listen", "1.2.3:80"},
        {"--listen", "h:99999"},
        {"--listen", ":80"},
        {"--log-level", "loud"},
        {"--db", ""},
        {"--max-body", "67108865"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *argv[] = {"dpsilod", bad[i].flag, bad[i].value};
        if (parse(&c, &e, NULL, 3, argv) != DP_EINVAL)
            fail_msg("%s %s was accepted", bad[i].flag, bad[i].value);
        assert_string_equal(e.field, bad[i].flag);
    }
    static const char *const env[] = {"DPSILO_THREADS", "many", NULL};
    const char *argv[] = {"dpsilod"};
    assert_int_equal(parse(&c, &e, env, 1, argv), DP_EINVAL);
    assert_string_equal(e.field, "DPSILO_THREADS");
}

static void unknown_and_incomplete_arguments_are_refused(void **state)
{
    (void)state;
    cfg c;
    dp_err e;
    const char *a1[] = {"dpsilod", "--port", "1"};
    assert_int_equal(parse(&c, &e, NULL, 3, a1), DP_EINVAL);
    assert_non_null(strstr(e.msg, "--port"));
    const char *a2[] = {"dpsilod", "--db"};
    assert_int_equal(parse(&c, &e, NULL, 2, a2), DP_EINVAL);
    assert_string_equal(e.field, "--db");
    const char *a3[] = {"dpsilod", "--dbx=1"};
    assert_int_equal(parse(&c, &e, NULL, 2, a3), DP_EINVAL);
}

static void help_is_recognised(void **state)
{
    (void)state;
    cfg c;
    dp_err e;
    const char *argv[] = {"dpsilod", "--help"};
    assert_int_equal(parse(&c, &e, NULL, 2, argv), DP_OK);
    assert_true(c.help);
    const char *u = cfg_usage();
    const char *must[] = {
        "--listen",      "--db",      "--threads",      "--max-body",      "--log-level",
        "DPSILO_LISTEN", "DPSILO_DB", "DPSILO_THREADS", "DPSILO_MAX_BODY", "DPSILO_LOG_LEVEL"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        if (strstr(u, must[i]) == NULL)
            fail_msg("--help does not mention %s", must[i]);
}

/* Regression (newcomer report): `dpsilod --version` was "unknown argument". */
static void version_is_recognised(void **state)
{
    (void)state;
    cfg c;
    dp_err e;
    const char *argv[] = {"dpsilod", "--version"};
    assert_int_equal(parse(&c, &e, NULL, 2, argv), DP_OK);
    assert_true(c.version);
    assert_false(c.help);
    assert_non_null(strstr(cfg_usage(), "--version"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_without_arguments),
        cmocka_unit_test(flags_in_both_spellings),
        cmocka_unit_test(environment_applies_and_flags_win),
        cmocka_unit_test(bad_values_name_their_source),
        cmocka_unit_test(unknown_and_incomplete_arguments_are_refused),
        cmocka_unit_test(help_is_recognised),
        cmocka_unit_test(version_is_recognised),
    };
    return cmocka_run_group_tests_name("service_cfg", tests, NULL, NULL);
}
