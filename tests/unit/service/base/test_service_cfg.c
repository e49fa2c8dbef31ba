/*
 * Unit tests for service/base/cfg.c: defaults, flags (both "--x v" and "--x=v"), environment
 * variables, flag precedence over the environment, and strict rejection naming the flag or
 * variable.
 */
#include "tests/support/test_util.h"

#include <string.h>

#include "common/dp_log.h"
#include "service/base/cfg.h"

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

static void stop_and_connection_limits(void **state)
{
    (void)state;
    cfg c;
    dp_err e;
    const char *argv0[] = {"dpsilod"};
    assert_int_equal(parse(&c, &e, NULL, 1, argv0), DP_OK);
    assert_int_equal(c.drain_timeout_s, 10);
    assert_int_equal(c.header_timeout_s, 10);
    assert_int_equal(c.body_timeout_s, 10);
    assert_int_equal(c.body_min_rate, 1024);
    assert_int_equal(c.max_conns_per_ip, 256);

    static const char *const env[] = {"DPSILO_DRAIN_TIMEOUT",
                                      "7",
                                      "DPSILO_HEADER_TIMEOUT",
                                      "3",
                                      "DPSILO_BODY_TIMEOUT",
                                      "45",
                                      "DPSILO_MAX_CONNS_PER_IP",
                                      "12",
                                      "DPSILO_BODY_MIN_RATE",
                                      "512",
                                      NULL};
    const char *argv[] = {"dpsilod", "--drain-timeout=0", "--max-conns-per-ip", "0"};
    assert_int_equal(parse(&c, &e, env, 4, argv), DP_OK);
    assert_int_equal(c.drain_timeout_s, 0); /* 0: stop without waiting */
    assert_int_equal(c.header_timeout_s, 3);
    assert_int_equal(c.body_timeout_s, 45);
    assert_int_equal(c.body_min_rate, 512);
    assert_int_equal(c.max_conns_per_ip, 0); /* 0: no limit */

    const char *bad1[] = {"dpsilod", "--header-timeout", "0"};
    assert_int_equal(parse(&c, &e, NULL, 3, bad1), DP_EINVAL);
    assert_string_equal(e.field, "--header-timeout");
    assert_non_null(strstr(e.msg, "1..3600 seconds"));
    const char *bad2[] = {"dpsilod", "--drain-timeout", "-1"};
    assert_int_equal(parse(&c, &e, NULL, 3, bad2), DP_EINVAL);
    assert_string_equal(e.field, "--drain-timeout");
    const char *bad3[] = {"dpsilod", "--body-timeout", "86401"};
    assert_int_equal(parse(&c, &e, NULL, 3, bad3), DP_EINVAL);
    assert_string_equal(e.field, "--body-timeout");
    const char *rate0[] = {"dpsilod", "--body-min-rate", "0"}; /* 0: a fixed deadline */
    assert_int_equal(parse(&c, &e, NULL, 3, rate0), DP_OK);
    assert_int_equal(c.body_min_rate, 0);
    const char *bad4[] = {"dpsilod", "--body-min-rate", "-5"};
    assert_int_equal(parse(&c, &e, NULL, 3, bad4), DP_EINVAL);
    assert_string_equal(e.field, "--body-min-rate");
    static const char *const env_bad[] = {"DPSILO_MAX_CONNS_PER_IP", "lots", NULL};
    assert_int_equal(parse(&c, &e, env_bad, 1, argv0), DP_EINVAL);
    assert_string_equal(e.field, "DPSILO_MAX_CONNS_PER_IP");
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

/* The compute pool and work caps (issue 10): defaults, e-notation for the caps, and refusals that
 * name the flag or the variable. */
static void compute_flags_parse_and_name_bad_values(void **state)
{
    (void)state;
    cfg c;
    dp_err e;
    const char *argv0[] = {"dpsilod", "--threads", "3"};
    assert_int_equal(parse(&c, &e, NULL, 3, argv0), DP_OK);
    assert_true(c.compute_threads >= 1); /* the cores, not --threads */
    assert_int_equal(c.compute_queue, CFG_DEFAULT_COMPUTE_QUEUE);
    assert_int_equal(c.compute_timeout_s, CFG_DEFAULT_COMPUTE_TIMEOUT_S);
    assert_true(c.max_estimator_work == CFG_DEFAULT_MAX_EST_WORK);
    assert_true(c.max_estimator_cells == CFG_DEFAULT_MAX_EST_CELLS);
    assert_int_equal(c.max_pld_points, CFG_DEFAULT_MAX_PLD_POINTS);
    const char *argv[] = {
        "dpsilod", "--compute-threads",     "3",    "--compute-queue=5",    "--max-estimator-work",
        "2.5e9",   "--max-estimator-cells", "1000", "--max-pld-points=4096"};
    assert_int_equal(parse(&c, &e, NULL, 9, argv), DP_OK);
    assert_int_equal(c.compute_threads, 3);
    assert_int_equal(c.compute_queue, 5);
    assert_true(c.max_estimator_work == 2.5e9);
    assert_true(c.max_estimator_cells == 1000);
    assert_int_equal(c.max_pld_points, 4096);
    const char *env[] = {"DPSILO_COMPUTE_QUEUE", "9", "DPSILO_COMPUTE_TIMEOUT", "30", NULL};
    const char *argv1[] = {"dpsilod"};
    assert_int_equal(parse(&c, &e, env, 1, argv1), DP_OK);
    assert_int_equal(c.compute_queue, 9);
    assert_int_equal(c.compute_timeout_s, 30);
    const char *argv2[] = {"dpsilod", "--compute-timeout", "7"};
    assert_int_equal(parse(&c, &e, env, 3, argv2), DP_OK); /* the flag wins */
    assert_int_equal(c.compute_timeout_s, 7);
    const struct {
        const char *flag, *val;
    } bad[] = {{"--compute-threads", "0"},       {"--compute-threads", "65"},
               {"--compute-queue", "0"},         {"--compute-queue", "x"},
               {"--compute-timeout", "0"},       {"--compute-timeout", "86401"},
               {"--max-estimator-work", "0"},    {"--max-estimator-work", "1.5"},
               {"--max-estimator-work", "1e16"}, {"--max-estimator-cells", "-1"},
               {"--max-estimator-cells", "nan"}, {"--max-pld-points", "63"},
               {"--max-pld-points", "16777217"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *a[] = {"dpsilod", bad[i].flag, bad[i].val};
        assert_int_equal(parse(&c, &e, NULL, 3, a), DP_EINVAL);
        assert_string_equal(e.field, bad[i].flag);
    }
    const char *u = cfg_usage();
    const char *must[] = {"--compute-threads",    "--compute-queue",       "--compute-timeout",
                          "--max-estimator-work", "--max-estimator-cells", "--max-pld-points"};
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
        cmocka_unit_test(stop_and_connection_limits),
        cmocka_unit_test(help_is_recognised),
        cmocka_unit_test(compute_flags_parse_and_name_bad_values),
        cmocka_unit_test(version_is_recognised),
    };
    return cmocka_run_group_tests_name("service_cfg", tests, NULL, NULL);
}
