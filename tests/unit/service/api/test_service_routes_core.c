/*
 * Unit tests for service/api/core.c, calling the handlers directly (no socket) against a
 * database in a temporary directory: this is also the template for testing any route handler.
 */
#include "tests/support/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/http/metrics.h"
#include "service/api/routes.h"
#include "tests/support/service_util.h"

typedef struct fixture {
    route_fixture r;
    http_metrics *metrics;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    *state = f;
    if (f == NULL || route_fixture_open(&f->r, "routes") != 0)
        return -1;
    f->metrics = http_metrics_alloc(ROUTES, ROUTES_N, store_schema_version(f->r.st));
    return f->metrics ? 0 : -1;
}

static int teardown(void **state)
{
    fixture *f = *state;
    http_metrics_free(f->metrics);
    int rc = route_fixture_close(&f->r);
    free(f);
    return rc;
}

static http_req req_for(fixture *f, const char *method, const char *path)
{
    f->r.app.metrics = f->metrics;
    http_req rq = route_fixture_req(&f->r, method, path);
    return rq;
}

static void healthz_reads_the_database(void **state)
{
    fixture *f = *state;
    http_req rq = req_for(f, "GET", "/healthz");
    http_resp rs;
    memset(&rs, 0, sizeof rs);
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(route_healthz(&rq, &rs, &e), DP_OK);
    assert_int_equal(rs.status, 200);
    assert_string_equal(json_string_value(json_object_get(rs.body, "status")), "ok");
    assert_int_equal(json_integer_value(json_object_get(rs.body, "db_checked_ms_ago")),
                     0); /* first */
    assert_int_equal(json_integer_value(json_object_get(rs.body, "schema_version")),
                     store_schema_version(f->r.st));
    http_resp_clear(&rs);
    /* Break the table it reads: a fresh check must fail, and the failure invalidates the reuse
     * window, so a plain probe right after fails too. */
    assert_int_equal(
        sqlite3_exec(store_conn_db(f->r.db), "DROP TABLE schema_migrations", NULL, NULL, NULL),
        SQLITE_OK);
    http_param q[] = {{"fresh", "1"}};
    rq.query = q;
    rq.n_query = 1;
    dp_err_clear(&e);
    assert_int_not_equal(route_healthz(&rq, &rs, &e), DP_OK);
    assert_int_equal(e.code, DP_EINTERNAL);
    http_resp_clear(&rs);
    rq.query = NULL;
    rq.n_query = 0;
    dp_err_clear(&e);
    assert_int_not_equal(route_healthz(&rq, &rs, &e), DP_OK);
    http_resp_clear(&rs);
}

static void healthz_validates_fresh(void **state)
{
    fixture *f = *state;
    http_req rq = req_for(f, "GET", "/healthz");
    http_param q[] = {{"fresh", "yes"}};
    rq.query = q;
    rq.n_query = 1;
    http_resp rs;
    memset(&rs, 0, sizeof rs);
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(route_healthz(&rq, &rs, &e), DP_EINVAL);
    assert_string_equal(e.field, "fresh");
    http_resp_clear(&rs);
}

static void version_reports_build_libraries_and_instance(void **state)
{
    fixture *f = *state;
    http_req rq = req_for(f, "GET", "/v1/version");
    http_resp rs;
    memset(&rs, 0, sizeof rs);
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(route_version(&rq, &rs, &e), DP_OK);
    assert_non_null(json_string_value(json_object_get(rs.body, "version")));
    assert_non_null(json_string_value(json_object_get(rs.body, "git_commit")));
    json_t *libs = json_object_get(rs.body, "libraries");
    assert_string_equal(json_string_value(json_object_get(libs, "sqlite")), sqlite3_libversion());
    assert_string_equal(json_string_value(json_object_get(libs, "jansson")), jansson_version_str());
    assert_non_null(json_string_value(json_object_get(libs, "microhttpd")));
    assert_non_null(json_string_value(json_object_get(libs, "gsl")));
    const char *inst =
        json_string_value(json_object_get(json_object_get(rs.body, "database"), "instance_id"));
    assert_non_null(inst);
    assert_int_equal(strlen(inst), 16);
    http_resp_clear(&rs);
}

static void metrics_render_counts_and_histogram(void **state)
{
    fixture *f = *state;
    http_metrics_observe(f->metrics, 0, 200, 80);       /* le 0.0001 */
    http_metrics_observe(f->metrics, 0, 200, 300);      /* le 0.0005 */
    http_metrics_observe(f->metrics, 0, 503, 20000000); /* above every bound */
    http_metrics_observe(f->metrics, HTTP_METRICS_ROW_UNMATCHED(ROUTES_N), 404, 10);
    http_req rq = req_for(f, "GET", "/metrics");
    http_resp rs;
    memset(&rs, 0, sizeof rs);
    dp_err e;
    dp_err_clear(&e);
    /* auth on and no token: 401, only the calculators, /healthz and /v1/version are open */
    assert_int_equal(route_metrics(&rq, &rs, &e), DP_EUNAUTH);
    assert_null(rs.text);
    dp_err_clear(&e);
    f->r.c.auth_off = true;
    assert_int_equal(route_metrics(&rq, &rs, &e), DP_OK);
    assert_non_null(rs.text);
    assert_non_null(strstr(rs.content_type, "text/plain"));
    char want[256];
    snprintf(want, sizeof want,
             "dpsilo_http_requests_total{route=\"%s\",method=\"%s\",status=\"200\"} 2\n",
             ROUTES[0].pattern, ROUTES[0].method);
    assert_non_null(strstr(rs.text, want));
    snprintf(want, sizeof want,
             "dpsilo_http_requests_total{route=\"%s\",method=\"%s\",status=\"503\"} 1\n",
             ROUTES[0].pattern, ROUTES[0].method);
    assert_non_null(strstr(rs.text, want));
    assert_non_null(strstr(
        rs.text,
        "dpsilo_http_requests_total{route=\"unmatched\",method=\"any\",status=\"404\"} 1\n"));
    snprintf(
        want, sizeof want,
        "dpsilo_http_request_duration_seconds_bucket{route=\"%s\",method=\"%s\",le=\"0.0001\"} 1\n",
        ROUTES[0].pattern, ROUTES[0].method);
    assert_non_null(strstr(rs.text, want));
    snprintf(
        want, sizeof want,
        "dpsilo_http_request_duration_seconds_bucket{route=\"%s\",method=\"%s\",le=\"0.0005\"} 2\n",
        ROUTES[0].pattern, ROUTES[0].method);
    assert_non_null(strstr(rs.text, want));
    snprintf(
        want, sizeof want,
        "dpsilo_http_request_duration_seconds_bucket{route=\"%s\",method=\"%s\",le=\"10\"} 2\n",
        ROUTES[0].pattern, ROUTES[0].method);
    assert_non_null(strstr(rs.text, want));
    snprintf(
        want, sizeof want,
        "dpsilo_http_request_duration_seconds_bucket{route=\"%s\",method=\"%s\",le=\"+Inf\"} 3\n",
        ROUTES[0].pattern, ROUTES[0].method);
    assert_non_null(strstr(rs.text, want));
    snprintf(want, sizeof want,
             "dpsilo_http_request_duration_seconds_sum{route=\"%s\",method=\"%s\"} 20.000380\n",
             ROUTES[0].pattern, ROUTES[0].method);
    assert_non_null(strstr(rs.text, want));
    assert_non_null(strstr(rs.text, "# TYPE dpsilo_build_info gauge\n"));
    assert_non_null(strstr(rs.text, "dpsilo_build_info{version=\""));
    assert_int_equal(strlen(rs.text), rs.text_len);
    http_resp_clear(&rs);
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
        cmocka_unit_test_setup_teardown(metrics_render_counts_and_histogram, setup, teardown),
        cmocka_unit_test(response_helpers_set_status_and_location),
    };
    return cmocka_run_group_tests_name("service_routes_core", tests, NULL, NULL);
}
