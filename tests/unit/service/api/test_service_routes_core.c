/*
 * Unit tests for service/api/core.c, through call_route (tests/support/service_fixture.h): the
 * route is looked up in the real table and called the way the dispatcher calls it, without a
 * socket, against a database in a temporary directory. This is also the template for testing any
 * route handler: "call this route, check this answer".
 */
#include "tests/support/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/api/routes.h"
#include "service/http/metrics.h"
#include "tests/support/service_fixture.h"

static int setup(void **state)
{
    service_fixture *f = calloc(1, sizeof *f);
    *state = f;
    return f != NULL && service_fixture_open(f, "routes", false) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    service_fixture *f = *state;
    int rc = service_fixture_close(f);
    free(f);
    return rc;
}

static void healthz_reads_the_database(void **state)
{
    service_fixture *f = *state;
    route_result r;
    assert_int_equal(call_route(f, "GET", "/healthz", NULL, NULL, &r), 200);
    assert_int_equal(r.rc, DP_OK);
    assert_string_equal(json_string_value(json_object_get(r.body, "status")), "ok");
    assert_int_equal(json_integer_value(json_object_get(r.body, "db_checked_ms_ago")),
                     0); /* first */
    assert_int_equal(json_integer_value(json_object_get(r.body, "schema_version")),
                     store_schema_version(f->r.st));
    route_result_clear(&r);
    /* Break the table it reads: a fresh check must fail, and the failure invalidates the reuse
     * window, so a plain probe right after fails too. */
    assert_int_equal(
        sqlite3_exec(store_conn_db(f->r.db), "DROP TABLE schema_migrations", NULL, NULL, NULL),
        SQLITE_OK);
    assert_int_equal(call_route(f, "GET", "/healthz?fresh=1", NULL, NULL, &r), 500);
    assert_int_not_equal(r.rc, DP_OK);
    assert_int_equal(r.err.code, DP_EINTERNAL);
    route_result_clear(&r);
    assert_int_not_equal(call_route(f, "GET", "/healthz", NULL, NULL, &r), 200);
    assert_int_not_equal(r.rc, DP_OK);
    route_result_clear(&r);
}

static void healthz_validates_fresh(void **state)
{
    service_fixture *f = *state;
    route_result r;
    assert_int_equal(call_route(f, "GET", "/healthz?fresh=yes", NULL, NULL, &r), 400);
    assert_int_equal(r.rc, DP_EINVAL);
    assert_string_equal(r.err.field, "fresh");
    route_result_clear(&r);
}

static void version_reports_build_libraries_and_instance(void **state)
{
    service_fixture *f = *state;
    route_result r;
    assert_int_equal(call_route(f, "GET", "/v1/version", NULL, NULL, &r), 200);
    assert_int_equal(r.rc, DP_OK);
    assert_non_null(json_string_value(json_object_get(r.body, "version")));
    assert_non_null(json_string_value(json_object_get(r.body, "git_commit")));
    json_t *libs = json_object_get(r.body, "libraries");
    assert_string_equal(json_string_value(json_object_get(libs, "sqlite")), sqlite3_libversion());
    assert_string_equal(json_string_value(json_object_get(libs, "jansson")), jansson_version_str());
    assert_non_null(json_string_value(json_object_get(libs, "microhttpd")));
    assert_non_null(json_string_value(json_object_get(libs, "gsl")));
    const char *inst =
        json_string_value(json_object_get(json_object_get(r.body, "database"), "instance_id"));
    assert_non_null(inst);
    assert_int_equal(strlen(inst), 16);
    route_result_clear(&r);
}

/* The handler itself refuses a caller without a token, behind the dispatcher's early 401
 * (fx->handler_checks_token lets the missing token reach it). */
static void metrics_handler_refuses_without_a_token(void **state)
{
    service_fixture *f = *state;
    route_result r;
    assert_int_equal(call_route(f, "GET", "/metrics", NULL, NULL, &r), 401);
    assert_int_equal(r.rc, DP_OK); /* the early 401: the handler was not reached */
    route_result_clear(&r);
    f->handler_checks_token = true;
    assert_int_equal(call_route(f, "GET", "/metrics", NULL, NULL, &r), 401);
    assert_int_equal(r.rc, DP_EUNAUTH);
    assert_null(r.text);
    route_result_clear(&r);
}

static void metrics_render_counts_and_histogram(void **state)
{
    service_fixture *f = *state;
    http_metrics_observe(f->metrics, 0, 200, 80);       /* le 0.0001 */
    http_metrics_observe(f->metrics, 0, 200, 300);      /* le 0.0005 */
    http_metrics_observe(f->metrics, 0, 503, 20000000); /* above every bound */
    http_metrics_observe(f->metrics, HTTP_METRICS_ROW_UNMATCHED(ROUTES_N), 404, 10);
    f->r.c.auth_off = true;
    route_result r;
    assert_int_equal(call_route(f, "GET", "/metrics", NULL, NULL, &r), 200);
    assert_int_equal(r.rc, DP_OK);
    assert_non_null(r.text);
    assert_non_null(strstr(r.content_type, "text/plain"));
    const char *t = r.text;
    char want[256];
    snprintf(want, sizeof want,
             "dpsilo_http_requests_total{route=\"%s\",method=\"%s\",status=\"200\"} 2\n",
             ROUTES[0].pattern, ROUTES[0].method);
    assert_non_null(strstr(t, want));
    snprintf(want, sizeof want,
             "dpsilo_http_requests_total{route=\"%s\",method=\"%s\",status=\"503\"} 1\n",
             ROUTES[0].pattern, ROUTES[0].method);
    assert_non_null(strstr(t, want));
    assert_non_null(strstr(
        t, "dpsilo_http_requests_total{route=\"unmatched\",method=\"any\",status=\"404\"} 1\n"));
    static const char *const BUCKETS[][2] = {
        {"0.0001", "1"}, {"0.0005", "2"}, {"10", "2"}, {"+Inf", "3"}};
    for (size_t i = 0; i < sizeof BUCKETS / sizeof BUCKETS[0]; i++) {
        snprintf(want, sizeof want,
                 "dpsilo_http_request_duration_seconds_bucket{route=\"%s\",method=\"%s\","
                 "le=\"%s\"} %s\n",
                 ROUTES[0].pattern, ROUTES[0].method, BUCKETS[i][0], BUCKETS[i][1]);
        assert_non_null(strstr(t, want));
    }
    snprintf(want, sizeof want,
             "dpsilo_http_request_duration_seconds_sum{route=\"%s\",method=\"%s\"} 20.000380\n",
             ROUTES[0].pattern, ROUTES[0].method);
    assert_non_null(strstr(t, want));
    assert_non_null(strstr(t, "# TYPE dpsilo_build_info gauge\n"));
    assert_non_null(strstr(t, "dpsilo_build_info{version=\""));
    assert_int_equal(strlen(t), r.text_len);
    route_result_clear(&r);
}

static void response_helpers_set_status_and_location(void **state)
{
    (void)state;
    http_resp rs;
    memset(&rs, 0, sizeof rs);
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(http_resp_created(&rs, json_object(), &e, "/v1/silos/%lld", 42LL), DP_OK);
    assert_int_equal(rs.status, 201);
    assert_string_equal(rs.location, "/v1/silos/42");
    http_resp_clear(&rs);
    assert_int_equal(http_resp_accepted(&rs, json_object(), &e, "/v1/jobs/%d", 7), DP_OK);
    assert_int_equal(rs.status, 202);
    assert_string_equal(rs.location, "/v1/jobs/7");
    http_resp_clear(&rs);
    assert_int_equal(http_resp_json(&rs, 200, NULL, &e), DP_ENOMEM); /* a failed constructor */
    http_resp_clear(&rs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(healthz_reads_the_database, setup, teardown),
        cmocka_unit_test_setup_teardown(healthz_validates_fresh, setup, teardown),
        cmocka_unit_test_setup_teardown(version_reports_build_libraries_and_instance, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(metrics_handler_refuses_without_a_token, setup, teardown),
        cmocka_unit_test_setup_teardown(metrics_render_counts_and_histogram, setup, teardown),
        cmocka_unit_test(response_helpers_set_status_and_location),
    };
    return cmocka_run_group_tests_name("service_routes_core", tests, NULL, NULL);
}
