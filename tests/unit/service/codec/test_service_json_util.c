/*
 * Unit tests for service/codec/json_util.c: required/optional readers by type, the field named in
 * every error, unknown-key rejection, and non-finite doubles written as null.
 */
#include "tests/support/test_util.h"

#include <math.h>
#include <string.h>

#include "common/dp_math.h"
#include "common/dp_alloc.h"
#include "service/codec/json_util.h"

static json_t *parse(const char *s)
{
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    if (j == NULL)
        fail_msg("bad test JSON %s: %s", s, je.text);
    return j;
}

static void numbers_accept_integers_and_reals(void **state)
{
    (void)state;
    json_t *o = parse("{\"a\": 1, \"b\": 2.385, \"c\": null, \"s\": \"x\"}");
    dp_err e;
    dp_err_clear(&e);
    double v = 0;
    assert_int_equal(json_util_req_number(o, "a", &v, &e), DP_OK);
    assert_close(v, 1.0, 0, 0);
    assert_int_equal(json_util_req_number(o, "b", &v, &e), DP_OK);
    assert_close(v, 2.385, 0, 0);
    assert_int_equal(json_util_opt_number(o, "c", 7.25, &v, &e), DP_OK); /* null = absent */
    assert_close(v, 7.25, 0, 0);
    assert_int_equal(json_util_opt_number(o, "zz", -3.5, &v, &e), DP_OK);
    assert_close(v, -3.5, 0, 0);
    assert_int_equal(e.code, DP_OK);
    assert_int_equal(json_util_req_number(o, "s", &v, &e), DP_EINVAL);
    assert_string_equal(e.field, "s");
    assert_string_equal(e.msg, "s must be a number (got string)");
    dp_err_clear(&e);
    assert_int_equal(json_util_req_number(o, "c", &v, &e), DP_EINVAL);
    assert_string_equal(e.field, "c");
    assert_string_equal(e.msg, "c is required");
    json_decref(o);
}

static void ints_refuse_reals(void **state)
{
    (void)state;
    json_t *o = parse("{\"n\": 9007199254740993, \"r\": 2.0, \"neg\": -4}");
    dp_err e;
    dp_err_clear(&e);
    int64_t n = 0;
    assert_int_equal(json_util_req_int(o, "n", &n, &e), DP_OK);
    assert_true(n == 9007199254740993LL); /* exact beyond 2^53 */
    assert_int_equal(json_util_opt_int(o, "neg", 0, &n, &e), DP_OK);
    assert_int_equal(n, -4);
    assert_int_equal(json_util_req_int(o, "r", &n, &e), DP_EINVAL);
    assert_string_equal(e.field, "r");
    assert_string_equal(e.msg, "r must be an integer (got real)");
    dp_err_clear(&e);
    assert_int_equal(json_util_req_int(o, "missing", &n, &e), DP_EINVAL);
    assert_string_equal(e.field, "missing");
    json_decref(o);
}

static void strings_and_bools(void **state)
{
    (void)state;
    json_t *o = parse("{\"name\": \"h\\u00e9pital\", \"t\": true, \"f\": false, \"one\": 1}");
    /* The parser refuses \u0000 (no JSON_ALLOW_NUL); a string built in C may still hold one. */
    assert_int_equal(json_object_set_new(o, "nul", json_stringn("a\0b", 3)), 0);
    dp_err e;
    dp_err_clear(&e);
    const char *s = NULL;
    bool b = false;
    assert_int_equal(json_util_req_string(o, "name", &s, &e), DP_OK);
    assert_string_equal(s, "h\xc3\xa9pital");
    assert_int_equal(json_util_opt_string(o, "x", "dflt", &s, &e), DP_OK);
    assert_string_equal(s, "dflt");
    assert_int_equal(json_util_req_bool(o, "t", &b, &e), DP_OK);
    assert_true(b);
    assert_int_equal(json_util_opt_bool(o, "f", true, &b, &e), DP_OK);
    assert_false(b);
    assert_int_equal(json_util_req_bool(o, "one", &b, &e), DP_EINVAL); /* 1 is not a boolean */
    assert_string_equal(e.field, "one");
    dp_err_clear(&e);
    assert_int_equal(json_util_req_string(o, "t", &s, &e), DP_EINVAL);
    assert_string_equal(e.msg, "t must be a string (got boolean)");
    dp_err_clear(&e);
    assert_int_equal(json_util_req_string(o, "nul", &s, &e), DP_EINVAL); /* embedded NUL */
    assert_string_equal(e.field, "nul");
    json_decref(o);
}

static void unknown_keys_are_named(void **state)
{
    (void)state;
    static const char *const allowed[] = {"sampling_rate", "noise_multiplier"};
    json_t *o = parse("{\"sampling_rate\": 0.01, \"noise_multiplier\": 1.1}");
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(json_util_check_keys(o, allowed, 2, &e), DP_OK);
    json_decref(o);
    o = parse("{\"sampling_rate\": 0.01, \"noise_multipler\": 1.1}");
    assert_int_equal(json_util_check_keys(o, allowed, 2, &e), DP_EINVAL);
    assert_string_equal(e.field, "noise_multipler");
    assert_string_equal(e.msg, "unknown field \"noise_multipler\"");
    json_decref(o);
}

static void non_objects_are_refused(void **state)
{
    (void)state;
    dp_err e;
    dp_err_clear(&e);
    double v;
    assert_int_equal(json_util_req_number(NULL, "a", &v, &e), DP_EINVAL);
    assert_string_equal(e.msg, "request body must be a JSON object (got nothing)");
    json_t *a = parse("[1]");
    dp_err_clear(&e);
    assert_int_equal(json_util_require_object(a, "event", &e), DP_EINVAL);
    assert_string_equal(e.field, "event");
    assert_string_equal(e.msg, "event must be a JSON object (got array)");
    json_decref(a);
}

static void nested_fields_get_their_path(void **state)
{
    (void)state;
    json_t *o = parse("{\"event\": {\"sampling_rate\": \"x\"}}");
    dp_err e;
    dp_err_clear(&e);
    double v;
    assert_int_equal(json_util_req_number(json_object_get(o, "event"), "sampling_rate", &v, &e),
                     DP_EINVAL);
    dp_err_prefix_field(&e, "event");
    assert_string_equal(e.field, "event.sampling_rate");
    json_decref(o);
}

static void non_finite_doubles_become_null(void **state)
{
    (void)state;
    json_t *x = json_util_real(DP_INF);
    assert_true(json_is_null(x));
    json_decref(x);
    x = json_util_real(DP_NAN);
    assert_true(json_is_null(x));
    json_decref(x);
    x = json_util_real(-DP_INF);
    assert_true(json_is_null(x));
    json_decref(x);
    x = json_util_real(0.1 + 0.2);
    assert_true(json_is_real(x));
    assert_true(json_real_value(x) == 0.1 + 0.2); /* exact: same double back */
    json_decref(x);
    json_t *o = json_object();
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(json_util_set(o, "eps", json_util_real(DP_INF), &e), DP_OK);
    char *s = json_dumps(o, JSON_COMPACT);
    assert_string_equal(s, "{\"eps\":null}");
    free(s);
    assert_int_equal(json_util_set(o, "bad", NULL, &e), DP_ENOMEM);
    json_decref(o);
}

static void doubles_round_trip_through_text(void **state)
{
    (void)state;
    /* json_dumps writes 17 significant digits, enough to round-trip every double. */
    const double xs[] = {0.1, 1.0 / 3.0, 2.385e-300, 1.7976931348623157e308, 5e-324, 123456.789};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        json_t *r = json_util_real(xs[i]);
        char *s = json_dumps(r, JSON_ENCODE_ANY);
        json_t *back = json_loads(s, JSON_DECODE_ANY, NULL);
        assert_non_null(back);
        if (json_number_value(back) != xs[i])
            fail_msg("%s did not round-trip %.17g", s, xs[i]);
        free(s);
        json_decref(r);
        json_decref(back);
    }
}

static void times_are_rfc3339_utc(void **state)
{
    (void)state;
    const struct {
        int64_t ms;
        const char *want;
    } cases[] = {
        {0, "1970-01-01T00:00:00.000Z"},
        {1795353020838LL, "2026-11-22T13:10:20.838Z"}, /* checked with python datetime */
        {951782400000LL, "2000-02-29T00:00:00.000Z"},  /* leap day */
        {-1, "1969-12-31T23:59:59.999Z"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *t = json_util_time(cases[i].ms);
        assert_non_null(t);
        assert_string_equal(json_string_value(t), cases[i].want);
        json_decref(t);
    }
    assert_null(json_util_time(INT64_MAX)); /* beyond year 9999 */
}

/* json_util_dumps under allocation failure: the text is complete or NULL, never corrupted.
 * jansson's json_dumps dropped the key of {"noise_multiplier":8,...} when the output buffer could
 * not grow (json_util.h), and the ledger stored the damaged text in its append-only log. */
static void dumps_is_complete_or_null_when_allocations_fail(void **state)
{
    (void)state;
    json_t *o = json_pack("{s:i, s:s, s:{s:s}}", "noise_multiplier", 8, "type", "gaussian",
                          "nested_object_key", "a_string_value_longer_than_sixteen", "x");
    assert_non_null(o);
    char *want = json_util_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    assert_non_null(want);
    assert_string_equal(want, "{\"nested_object_key\":{\"a_string_value_longer_than_sixteen\":"
                              "\"x\"},\"noise_multiplier\":8,\"type\":\"gaussian\"}");
    long nulls = 0, nth;
    for (nth = 1; nth < 1000; nth++) {
        long before = dp_alloc_failures();
        dp_alloc_fail_after(nth);
        char *t = json_util_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
        dp_alloc_fail_after(0);
        bool injected = dp_alloc_failures() != before;
        if (t != NULL)
            assert_string_equal(t, want);
        else
            nulls++;
        free(t);
        if (!injected)
            break;
    }
    assert_true(nth < 1000);
    assert_true(nulls > 0); /* the injection reached it */
    free(want);
    json_decref(o);
}

int main(void)
{
    json_set_alloc_funcs(dp_malloc, dp_free); /* so dp_alloc_fail_after reaches jansson */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dumps_is_complete_or_null_when_allocations_fail),
        cmocka_unit_test(numbers_accept_integers_and_reals),
        cmocka_unit_test(ints_refuse_reals),
        cmocka_unit_test(strings_and_bools),
        cmocka_unit_test(unknown_keys_are_named),
        cmocka_unit_test(non_objects_are_refused),
        cmocka_unit_test(nested_fields_get_their_path),
        cmocka_unit_test(non_finite_doubles_become_null),
        cmocka_unit_test(doubles_round_trip_through_text),
        cmocka_unit_test(times_are_rfc3339_utc),
    };
    return cmocka_run_group_tests_name("service_json_util", tests, NULL, NULL);
}
