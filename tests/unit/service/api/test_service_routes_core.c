/*
 * Unit tests for service/api/core.c, calling each route by method and path (no socket) through
 * tests/support/service_fixture.h call_route, against a database in a temporary directory: this is
 * also the template for testing any route handler ("call this route, check this answer").
 */
#include "tests/support/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/http/metrics.h"
#include "service/api/routes.h"
#include "tests/support/service_fixture.h"

typedef struct fixture {
    service_fixture s; /* auth on, no token given: only the open routes answer */
    route_result out;  /* the last answer; cleared by the next call and by teardown */
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    *state = f;
    return f == NULL ? -1 : service_fixture_open(&f->s, "routes", false);
}

static int teardown(void **state)
{
    fixture *f = *state;
    route_result_clear(&f->out);
    int rc = service_fixture_close(&f->s);
    free(f);
    return rc;
}

/* GET path without a token; returns the status, the answer is in f->out. */
static int get(fixture *f, const char *path)
{
    route_result_clear(&f->out);
    return call_route(&f->s, "GET", path, NULL, NULL, &f->out);
}

static void healthz_reads_the_database(void **state)
{
    fixture *f = *state;
    assert_int_equal(get(f, "/healthz"), 200);
    json_t *b = f->out.body;
    assert_string_equal(json_string_value(json_object_get(b, "status")), "ok");
    assert_int_equal(json_integer_value(json_object_get(b, "db_checked_ms_ago")), 0); /* first */
    assert_int_equal(json_integer_value(json_object_get(b, "schema_version")),
                     store_schema_version(f->s.r.st));
    /* Break the table it reads: a fresh check must fail, and the failure invalidates the reuse
     * window, so a plain probe right after fails too. */
    assert_int_equal(
        sqlite3_exec(store_conn_db(f->s.r.db), "DROP TABLE schema_migrations", NULL, NULL, NULL),
        SQLITE_OK);
    assert_int_equal(get(f, "/healthz?fresh=1"), 500);
    assert_int_equal(f->out.err.code, DP_EINTERNAL);
    assert_int_not_equal(get(f, "/healthz"), 200);
}

static void healthz_validates_fresh(void **state)
{
    fixture *f = *state;
    assert_int_equal(get(f, "/healthz?fresh=yes"), 400);
    assert_int_equal(f->out.err.code, DP_EINVAL);
    assert_string_equal(f->out.err.field, "fresh");
}

static void version_reports_build_libraries_and_instance(void **state)
{
    fixture *f = *state;
    assert_int_equal(get(f, "/v1/version"), 200);
    json_t *b = f->out.body;
    assert_non_null(json_string_value(json_object_get(b, "version")));
    assert_non_null(json_string_value(json_object_get(b, "git_commit")));
    json_t *libs = json_object_get(b, "libraries");
    assert_string_equal(json_string_value(json_object_get(libs, "sqlite")), sqlite3_libversion());
    assert_string_equal(json_string_value(json_object_get(libs, "jansson")), jansson_version_str());
    assert_non_null(json_string_value(json_object_get(libs, "microhttpd")));
    assert_non_null(json_string_value(json_object_get(libs, "gsl")));
    const char *inst =
        json_string_value(json_object_get(json_object_get(b, "database"), "instance_id"));
    assert_non_null(inst);
    assert_int_equal(strlen(inst), 16);
}

static void metrics_render_counts_and_histogram(void **state)
{
    fixture *f = *state;
    http_metrics *m = f->s.metrics;
    http_metrics_observe(m, 0, 200, 80);       /* le 0.0001 */
    http_metrics_observe(m, 0, 200, 300);      /* le 0.0005 */
    http_metrics_observe(m, 0, 503, 20000000); /* above every bound */
    http_metrics_observe(m, HTTP_METRICS_ROW_UNMATCHED(ROUTES_N), 404, 10);
    /* auth on and no token: 401, only the calculators, /healthz and /v1/version are open; the
     * handler's own refusal, not the dispatcher's early one */
    f->s.handler_checks_token = true;
    assert_int_equal(get(f, "/metrics"), 401);
    assert_int_equal(f->out.rc, DP_EUNAUTH);
    assert_null(f->out.text);
    f->s.r.c.auth_off = true;
    assert_int_equal(get(f, "/metrics"), 200);
    const char *text = f->out.text;
    assert_non_null(text);
    assert_non_null(strstr(f->out.content_type, "text/plain"));
    char want[256];
    snprintf(want, sizeof want,
             "dpsilo_http_requests_total{route=\"%s\",method=\"%s\",status=\"200\"} 2\n",
             ROUTES[0].pattern, ROUTES[0].method);
    assert_non_null(strstr(text, want));
    snprintf(want, sizeof want,
             "dpsilo_http_requests_total{route=\"%s\",method=\"%s\",status=\"503\"} 1\n",
             ROUTES[0].pattern, ROUTES[0].method);
    assert_non_null(strstr(text, want));
    assert_non_null(strstr(
        text, "dpsilo_http_requests_total{route=\"unmatched\",method=\"any\",status=\"404\"} 1\n"));
    snprintf(
        want, sizeof want,
        "dpsilo_http_request_duration_seconds_bucket{route=\"%s\",method=\"%s\",le=\"0.0001\"} 1\n",
        ROUTES[0].pattern, ROUTES[0].method);
    assert_non_null(strstr(text, want));
    snprintf(
        want, sizeof want,
        "dpsilo_http_request_duration_seconds_bucket{route=\"%s\",method=\"%s\",le=\"0.0005\"} 2\n",
        ROUTES[0].pattern, ROUTES[0].method);
    assert_non_null(strstr(text, want));
    snprintf(
        want, sizeof want,
        "dpsilo_http_request_duration_seconds_bucket{route=\"%s\",method=\"%s\",le=\"10\"} 2\n",
        ROUTES[0].pattern, ROUTES[0].method);
    assert_non_null(strstr(text, want));
    snprintf(
        want, sizeof want,
        "dpsilo_http_request_duration_seconds_bucket{route=\"%s\",method=\"%s\",le=\"+Inf\"} 3\n",
        ROUTES[0].pattern, ROUTES[0].method);
    assert_non_null(strstr(text, want));
    snprintf(want, sizeof want,
             "dpsilo_http_request_duration_seconds_sum{route=\"%s\",method=\"%s\"} 20.000380\n",
             ROUTES[0].pattern, ROUTES[0].method);
    assert_non_null(strstr(text, want));
    assert_non_null(strstr(text, "# TYPE dpsilo_build_info gauge\n"));
    assert_non_null(strstr(text, "dpsilo_build_info{version=\""));
    assert_int_equal(strlen(text), f->out.text_len);
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
