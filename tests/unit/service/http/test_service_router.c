/*
 * Unit tests for service/http/router.c: literal and parameter segments, 404 vs 405 with Allow, HEAD
 * as GET, first-match order, and the shapes of path that must never match (trailing slash, empty
 * segment).
 */
#include "tests/support/test_util.h"

#include <stdio.h>
#include <string.h>

#include "service/http/router.h"
#include "service/api/routes.h"

static int h_a(const http_req *rq, http_resp *rs, dp_err *err)
{
    (void)rq;
    (void)rs;
    (void)err;
    return DP_OK;
}

static const route T[] = {
    {"GET", "/healthz", h_a, 0, ROUTE_OPEN, NULL, NULL},
    {"GET", "/v1/silos", h_a, 0, ROUTE_OPEN, NULL, NULL},
    {"POST", "/v1/silos", h_a, 1024, ROUTE_OPEN, NULL, NULL},
    {"GET", "/v1/jobs/stats", h_a, 0, ROUTE_OPEN, NULL, NULL},
    {"GET", "/v1/jobs/{id}", h_a, 0, ROUTE_OPEN, NULL, NULL},
    {"DELETE", "/v1/jobs/{id}", h_a, 0, ROUTE_OPEN, NULL, NULL},
    {"POST", "/v1/silos/{silo}/charges/{charge}", h_a, 0, ROUTE_OPEN, NULL, NULL},
};
#define NT (sizeof T / sizeof T[0])

static void literal_route_matches_exactly(void **state)
{
    (void)state;
    route_match m;
    assert_int_equal(http_route_match(T, NT, "GET", "/healthz", &m), HTTP_ROUTE_FOUND);
    assert_int_equal(m.index, 0);
    assert_int_equal(m.n_params, 0);
    assert_int_equal(http_route_match(T, NT, "GET", "/healthz/", &m), HTTP_ROUTE_NOT_FOUND);
    assert_int_equal(http_route_match(T, NT, "GET", "/healthzz", &m), HTTP_ROUTE_NOT_FOUND);
    assert_int_equal(http_route_match(T, NT, "GET", "/Healthz", &m), HTTP_ROUTE_NOT_FOUND);
    assert_int_equal(http_route_match(T, NT, "GET", "//healthz", &m), HTTP_ROUTE_NOT_FOUND);
    assert_int_equal(http_route_match(T, NT, "GET", "healthz", &m), HTTP_ROUTE_NOT_FOUND);
    assert_int_equal(http_route_match(T, NT, "GET", "", &m), HTTP_ROUTE_NOT_FOUND);
}

static void parameters_are_bound_by_name(void **state)
{
    (void)state;
    route_match m;
    assert_int_equal(http_route_match(T, NT, "POST", "/v1/silos/h-7/charges/913", &m),
                     HTTP_ROUTE_FOUND);
    assert_int_equal(m.index, 6);
    assert_int_equal(m.n_params, 2);
    assert_string_equal(m.params[0].name, "silo");
    assert_string_equal(m.params[0].value, "h-7");
    assert_string_equal(m.params[1].name, "charge");
    assert_string_equal(m.params[1].value, "913");
    http_req rq;
    memset(&rq, 0, sizeof rq);
    rq.params = m.params;
    rq.n_params = m.n_params;
    assert_string_equal(http_req_param(&rq, "charge"), "913");
    assert_null(http_req_param(&rq, "nope"));
}

static void empty_parameter_segment_does_not_match(void **state)
{
    (void)state;
    route_match m;
    assert_int_equal(http_route_match(T, NT, "GET", "/v1/jobs/", &m), HTTP_ROUTE_NOT_FOUND);
    assert_int_equal(http_route_match(T, NT, "GET", "/v1/jobs//x", &m), HTTP_ROUTE_NOT_FOUND);
    assert_int_equal(http_route_match(T, NT, "POST", "/v1/silos//charges/1", &m),
                     HTTP_ROUTE_NOT_FOUND);
}

static void first_matching_row_wins(void **state)
{
    (void)state;
    route_match m;
    assert_int_equal(http_route_match(T, NT, "GET", "/v1/jobs/stats", &m), HTTP_ROUTE_FOUND);
    assert_int_equal(m.index, 3);
    assert_int_equal(http_route_match(T, NT, "GET", "/v1/jobs/41", &m), HTTP_ROUTE_FOUND);
    assert_int_equal(m.index, 4);
    assert_string_equal(m.params[0].value, "41");
}

static void wrong_method_gives_405_with_allow(void **state)
{
    (void)state;
    route_match m;
    assert_int_equal(http_route_match(T, NT, "PUT", "/v1/silos", &m), HTTP_ROUTE_BAD_METHOD);
    assert_string_equal(m.allow, "GET, HEAD, POST");
    assert_int_equal(http_route_match(T, NT, "POST", "/v1/jobs/5", &m), HTTP_ROUTE_BAD_METHOD);
    assert_string_equal(m.allow, "GET, HEAD, DELETE");
    assert_int_equal(http_route_match(T, NT, "POST", "/healthz", &m), HTTP_ROUTE_BAD_METHOD);
    assert_string_equal(m.allow, "GET, HEAD");
}

static void head_is_routed_as_get(void **state)
{
    (void)state;
    route_match m;
    assert_int_equal(http_route_match(T, NT, "HEAD", "/healthz", &m), HTTP_ROUTE_FOUND);
    assert_int_equal(m.index, 0);
}

static void overlong_path_is_not_found(void **state)
{
    (void)state;
    char p[HTTP_MAX_PATH + 10];
    memset(p, 'a', sizeof p - 1);
    p[0] = '/';
    p[sizeof p - 1] = '\0';
    route_match m;
    assert_int_equal(http_route_match(T, NT, "GET", p, &m), HTTP_ROUTE_NOT_FOUND);
}

static void real_table_has_core_routes_and_no_shadowed_rows(void **state)
{
    (void)state;
    route_match m;
    assert_int_equal(http_route_match(ROUTES, ROUTES_N, "GET", "/healthz", &m), HTTP_ROUTE_FOUND);
    assert_int_equal(http_route_match(ROUTES, ROUTES_N, "GET", "/v1/version", &m),
                     HTTP_ROUTE_FOUND);
    assert_int_equal(http_route_match(ROUTES, ROUTES_N, "GET", "/metrics", &m), HTTP_ROUTE_FOUND);
    assert_int_equal(http_route_match(ROUTES, ROUTES_N, "GET", "/v1/openapi.json", &m),
                     HTTP_ROUTE_FOUND);
    assert_int_equal(ROUTES[m.index].access, ROUTE_OPEN);
    /* Every row must be reachable: matching its own pattern (with parameters filled as "1") finds
     * it. */
    for (size_t i = 0; i < ROUTES_N; i++) {
        char path[HTTP_MAX_PATH];
        size_t k = 0;
        for (const char *p = ROUTES[i].pattern; *p && k < sizeof path - 2;) {
            if (*p == '{') {
                while (*p && *p != '}')
                    p++;
                if (*p)
                    p++;
                path[k++] = '1';
            } else {
                path[k++] = *p++;
            }
        }
        path[k] = '\0';
        assert_int_equal(http_route_match(ROUTES, ROUTES_N, ROUTES[i].method, path, &m),
                         HTTP_ROUTE_FOUND);
        if (m.index != i)
            fail_msg("route %s %s is shadowed by row %zu", ROUTES[i].method, ROUTES[i].pattern,
                     m.index);
        assert_non_null(ROUTES[i].handler);
    }
}

/* The access table (docs/API.md "Access", docs/BUDGETS.md "Access control"): only the calculators,
 * /healthz, /v1/version and /v1/openapi.json are open to anyone. A new row that is open, or has no
 * access level, fails here until this list and the docs say so. */
static void only_documented_routes_are_open(void **state)
{
    (void)state;
    static const char *const open_routes[] = {
        "GET /healthz",
        "GET /v1/version",
        "GET /v1/openapi.json",
        "POST /v1/accounting/epsilon",
        "POST /v1/accounting/delta",
        "POST /v1/accounting/rdp",
        "POST /v1/accounting/calibrate",
        "POST /v1/tuning/cost",
        "POST /v1/tuning/plan",
        "POST /v1/calculators/mrmtl",
        "POST /v1/calculators/fedhdp",
        "POST /v1/calculators/ppsgd",
    };
    size_t n_open = sizeof open_routes / sizeof open_routes[0], seen = 0;
    for (size_t i = 0; i < ROUTES_N; i++) {
        const route *r = &ROUTES[i];
        if (r->access != ROUTE_OPEN && r->access != ROUTE_TOKEN && r->access != ROUTE_ADMIN)
            fail_msg("route %s %s has no access level", r->method, r->pattern);
        char key[160];
        snprintf(key, sizeof key, "%s %s", r->method, r->pattern);
        bool listed = false;
        for (size_t k = 0; k < n_open; k++)
            listed = listed || strcmp(key, open_routes[k]) == 0;
        if (r->access == ROUTE_OPEN && !listed)
            fail_msg("route %s is open but not in the documented open list", key);
        if (listed && r->access != ROUTE_OPEN)
            fail_msg("route %s is documented as open but needs a token", key);
        seen += listed;
    }
    assert_int_equal(seen, n_open); /* every documented open route still exists */
}

static void query_allow_lists_are_words(void **state)
{
    (void)state;
    assert_true(http_query_allowed("limit after", "limit"));
    assert_true(http_query_allowed("limit after", "after"));
    assert_false(http_query_allowed("limit after", "lim"));
    assert_false(http_query_allowed("limit after", "limit after"));
    assert_false(http_query_allowed("limit after", ""));
    assert_false(http_query_allowed(NULL, "limit"));
    assert_false(http_query_allowed("limit", "page"));
}

static void percent_decoding_never_yields_nul(void **state)
{
    (void)state;
    const struct {
        const char *in, *out;
    } cases[] = {
        {"/a%2Fb", "/a/b"},
        {"/%2e%2e/x", "/../x"},
        {"/x%00.txt", "/x%00.txt"},
        {"/bad%zz%4", "/bad%zz%4"},
        {"/%41%62c", "/Abc"},
        {"", ""},
        {"%", "%"},
        {"a%20b", "a b"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[64];
        snprintf(buf, sizeof buf, "%s", cases[i].in);
        size_t n = http_percent_decode(buf);
        assert_string_equal(buf, cases[i].out);
        assert_int_equal(n, strlen(cases[i].out));
    }
}

static void ids_and_query_integers_are_strict(void **state)
{
    (void)state;
    http_param params[] = {{"id", "42"},
                           {"bad", "07"},
                           {"neg", "-3"},
                           {"big", "9223372036854775808"},
                           {"zero", "0"},
                           {"exp", "1e3"},
                           {"max", "9223372036854775807"}};
    http_param query[] = {{"limit", "50"}, {"after", "-1"}, {"junk", "5x"}, {"huge", "1000"}};
    http_req rq;
    memset(&rq, 0, sizeof rq);
    rq.params = params;
    rq.n_params = sizeof params / sizeof params[0];
    rq.query = query;
    rq.n_query = sizeof query / sizeof query[0];
    dp_err e;
    int64_t v = 0;
    dp_err_clear(&e);
    assert_int_equal(http_req_param_id(&rq, "id", &v, &e), DP_OK);
    assert_int_equal(v, 42);
    assert_int_equal(http_req_param_id(&rq, "max", &v, &e), DP_OK);
    assert_true(v == INT64_MAX);
    const char *bad[] = {"bad", "neg", "big", "zero", "exp", "missing"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dp_err_clear(&e);
        if (http_req_param_id(&rq, bad[i], &v, &e) != DP_EINVAL)
            fail_msg("id %s accepted", bad[i]);
        assert_string_equal(e.field, bad[i]);
    }
    dp_err_clear(&e);
    assert_int_equal(http_req_query_int(&rq, "limit", 20, 1, 100, &v, &e), DP_OK);
    assert_int_equal(v, 50);
    assert_int_equal(http_req_query_int(&rq, "absent", 20, 1, 100, &v, &e), DP_OK);
    assert_int_equal(v, 20);
    assert_int_equal(http_req_query_int(&rq, "after", 0, -5, 5, &v, &e), DP_OK);
    assert_int_equal(v, -1);
    assert_int_equal(http_req_query_int(&rq, "junk", 20, 1, 100, &v, &e), DP_EINVAL);
    assert_string_equal(e.field, "junk");
    dp_err_clear(&e);
    assert_int_equal(http_req_query_int(&rq, "huge", 20, 1, 100, &v, &e), DP_EINVAL);
    assert_string_equal(e.msg, "huge must be an integer in 1..100 (got \"1000\")");
}

/* One pagination rule (http_req_page): limit 1..HTTP_PAGE_LIMIT_MAX default
 * HTTP_PAGE_LIMIT_DEFAULT, after a non-negative id; the same refusal whatever the list. */
static void pagination_is_one_rule(void **state)
{
    (void)state;
    http_req rq;
    memset(&rq, 0, sizeof rq);
    dp_err e;
    dp_err_clear(&e);
    int64_t limit = 0, after = -1;
    assert_int_equal(http_req_page(&rq, &limit, &after, &e), DP_OK);
    assert_int_equal(limit, 100);
    assert_int_equal(after, 0);
    http_param ok[] = {{"limit", "1000"}, {"after", "41"}};
    rq.query = ok;
    rq.n_query = 2;
    assert_int_equal(http_req_page(&rq, &limit, &after, &e), DP_OK);
    assert_int_equal(limit, HTTP_PAGE_LIMIT_MAX);
    assert_int_equal(after, 41);
    const char *bad_limit[] = {"0", "1001", "+5", "05", "abc", ""};
    for (size_t i = 0; i < sizeof bad_limit / sizeof bad_limit[0]; i++) {
        http_param q[] = {{"limit", bad_limit[i]}};
        rq.query = q;
        rq.n_query = 1;
        dp_err_clear(&e);
        assert_int_equal(http_req_page(&rq, &limit, &after, &e), DP_EINVAL);
        assert_string_equal(e.field, "limit");
        char want[128];
        snprintf(want, sizeof want, "limit must be an integer in 1..1000 (got \"%s\")",
                 bad_limit[i]);
        assert_string_equal(e.msg, want);
    }
    const char *bad_after[] = {"-1", "01", "x", "9223372036854775808"};
    for (size_t i = 0; i < sizeof bad_after / sizeof bad_after[0]; i++) {
        http_param q[] = {{"after", bad_after[i]}};
        rq.query = q;
        rq.n_query = 1;
        dp_err_clear(&e);
        assert_int_equal(http_req_page(&rq, &limit, &after, &e), DP_EINVAL);
        assert_string_equal(e.field, "after");
    }
    dp_err_clear(&e);
    assert_int_equal(http_err_not_found(&e, "id", "tuning draw", 7), DP_ENOTFOUND);
    assert_string_equal(e.field, "id");
    assert_string_equal(e.msg, "tuning draw 7 does not exist");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(literal_route_matches_exactly),
        cmocka_unit_test(parameters_are_bound_by_name),
        cmocka_unit_test(empty_parameter_segment_does_not_match),
        cmocka_unit_test(first_matching_row_wins),
        cmocka_unit_test(wrong_method_gives_405_with_allow),
        cmocka_unit_test(head_is_routed_as_get),
        cmocka_unit_test(overlong_path_is_not_found),
        cmocka_unit_test(real_table_has_core_routes_and_no_shadowed_rows),
        cmocka_unit_test(only_documented_routes_are_open),
        cmocka_unit_test(query_allow_lists_are_words),
        cmocka_unit_test(percent_decoding_never_yields_nul),
        cmocka_unit_test(ids_and_query_integers_are_strict),
        cmocka_unit_test(pagination_is_one_rule),
    };
    return cmocka_run_group_tests_name("service_router", tests, NULL, NULL);
}
