/*
 * Unit tests for service/http/err.c: the code -> status table (docs/API.md, "Conventions") and the
 * error body shape, including that internal detail never reaches the client.
 */
#include "tests/support/test_util.h"

#include <string.h>

#include "service/http/err.h"

static void every_code_maps_to_its_status(void **state)
{
    (void)state;
    const struct {
        int code, status;
        const char *name;
    } want[] = {
        {DP_EINVAL, 400, "invalid_argument"},
        {DP_ENOTFOUND, 404, "not_found"},
        {DP_EBUDGET, 409, "budget_exhausted"},
        {DP_ECONFLICT, 409, "conflict"},
        {DP_ETOOBIG, 413, "payload_too_large"},
        {DP_ENUMERIC, 422, "numerical_failure"},
        {DP_EBUSY, 503, "busy"},
        {DP_ENOMEM, 503, "out_of_memory"},
        {DP_EINTERNAL, 500, "internal"},
        {DP_EUNAUTH, 401, "unauthenticated"},
        {DP_EFORBIDDEN, 403, "forbidden"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_int_equal(http_err_status(want[i].code), want[i].status);
        dp_err e;
        dp_err_clear(&e);
        dp_err_set(&e, want[i].code, NULL, "m");
        json_t *b = http_err_body(&e, "r1");
        assert_non_null(b);
        assert_string_equal(json_string_value(json_object_get(json_object_get(b, "error"), "code")),
                            want[i].name);
        json_decref(b);
    }
    assert_int_equal(http_err_status(9999), 500);
    assert_int_equal(http_err_status(DP_OK), 500);
}

static void body_has_the_design_shape(void **state)
{
    (void)state;
    dp_err e;
    dp_err_clear(&e);
    dp_err_set(&e, DP_EINVAL, "sampling_rate", "sampling_rate must be in [0, 1] (got %g)", 1.25);
    json_t *b = http_err_body(&e, "abc123");
    assert_non_null(b);
    assert_int_equal(json_object_size(b), 1);
    json_t *eo = json_object_get(b, "error");
    assert_true(json_is_object(eo));
    assert_int_equal(json_object_size(eo), 4);
    assert_string_equal(json_string_value(json_object_get(eo, "code")), "invalid_argument");
    assert_string_equal(json_string_value(json_object_get(eo, "message")),
                        "sampling_rate must be in [0, 1] (got 1.25)");
    assert_string_equal(json_string_value(json_object_get(eo, "field")), "sampling_rate");
    assert_string_equal(json_string_value(json_object_get(eo, "request_id")), "abc123");
    json_decref(b);
}

static void missing_field_is_null(void **state)
{
    (void)state;
    dp_err e;
    dp_err_clear(&e);
    dp_err_set(&e, DP_ENOTFOUND, NULL, "no silo 7");
    json_t *b = http_err_body(&e, NULL);
    json_t *eo = json_object_get(b, "error");
    assert_true(json_is_null(json_object_get(eo, "field")));
    assert_true(json_is_null(json_object_get(eo, "request_id")));
    json_decref(b);
}

static void internal_detail_is_not_sent(void **state)
{
    (void)state;
    dp_err e;
    dp_err_clear(&e);
    dp_err_set(&e, DP_EINTERNAL, "db", "sqlite: no such table ledger at /srv/secret/path");
    json_t *b = http_err_body(&e, "r9");
    const char *msg = json_string_value(json_object_get(json_object_get(b, "error"), "message"));
    assert_non_null(msg);
    assert_null(strstr(msg, "sqlite"));
    assert_null(strstr(msg, "/srv"));
    assert_true(json_is_null(json_object_get(json_object_get(b, "error"), "field")));
    json_decref(b);
}

static void invalid_utf8_in_message_still_builds_a_body(void **state)
{
    (void)state;
    dp_err e;
    dp_err_clear(&e);
    dp_err_set(&e, DP_EINVAL, "k", "unknown field \"%s\"", "ab\xc3"); /* truncated UTF-8 sequence */
    json_t *b = http_err_body(&e, "r");
    assert_non_null(b);
    const char *msg = json_string_value(json_object_get(json_object_get(b, "error"), "message"));
    assert_string_equal(msg, "unknown field \"ab?\"");
    json_decref(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_code_maps_to_its_status),
        cmocka_unit_test(body_has_the_design_shape),
        cmocka_unit_test(missing_field_is_null),
        cmocka_unit_test(internal_detail_is_not_sent),
        cmocka_unit_test(invalid_utf8_in_message_still_builds_a_body),
    };
    return cmocka_run_group_tests_name("service_http_err", tests, NULL, NULL);
}
