/*
 * Unit tests for service/api/estimators.c through call_route (tests/support/service_fixture.h),
 * against a database in a temporary directory: a Gaussian run is stored and read back without its
 * raw data, a run that charges no silo is one operation of the database's writer (also without a
 * ledger; a closed writer is a clean 503), validation names the field, and every dp_alloc failure
 * on the way returns a clean error
 * (failure injection, calling the handlers directly without a ledger; ASan checks for leaks in
 * `make asan`).
 */
#include "tests/support/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>

#include "common/dp_alloc.h"
#include "service/api/routes.h"
#include "service/db/writer.h"
#include "tests/support/service_fixture.h"

typedef service_fixture fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    *state = f;
    /* auth off: these tests are about the estimators; access: test_service_auth.c */
    return f != NULL && service_fixture_open(f, "est", true) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    fixture *f = *state;
    int rc = service_fixture_close(f);
    free(f);
    return rc;
}

/* A request without a ledger (nor its writer: the run is written on the request's connection), for
 * calling a handler directly (the allocation-failure loop). */
static http_req req_for(fixture *f, const char *method, const char *path, json_t *body)
{
    f->r.app.ledger = NULL;
    f->r.app.writer = NULL;
    http_req rq = route_fixture_req(&f->r, method, path);
    rq.body = body;
    return rq;
}

static const char *GAUSS =
    "{\"clients\":[{\"id\":\"a\",\"mean\":0.31,\"n\":15},"
    "{\"id\":\"b\",\"mean\":0.12,\"n\":8},{\"id\":\"c\",\"mean\":0.55,\"n\":30},"
    "{\"id\":\"d\",\"mean\":-0.05,\"n\":4}],\"noise_variance\":0.25,"
    "\"privacy\":{\"epsilon0\":0.5,\"delta\":1e-5,\"r\":1,"
    "\"sigma_theta_bound\":0.1}}";

static void gaussian_run_is_stored_without_raw_data(void **state)
{
    fixture *f = *state;
    route_result r;
    assert_int_equal(call_route(f, "POST", "/v1/estimators/gaussian", GAUSS, NULL, &r), 201);
    assert_int_equal(r.rc, DP_OK);
    json_int_t id = json_integer_value(json_object_get(r.body, "run_id"));
    assert_true(id >= 1);
    assert_int_equal(json_array_size(json_object_get(r.body, "estimates")), 4);
    double rho = json_real_value(json_object_get(json_object_get(r.body, "privacy"), "rho"));
    /* classic calibration, 1-D: rho = eps0^2/(4 ln(2/delta)) (Ozkara et al. 2023, Thm 2) */
    assert_close(rho, 0.25 / (4 * log(2e5)), 1e-12, 0);
    route_result_clear(&r);

    char path[64];
    snprintf(path, sizeof path, "/v1/runs/%lld", (long long)id);
    assert_int_equal(call_route(f, "GET", path, NULL, NULL, &r), 200);
    assert_int_equal(r.rc, DP_OK);
    json_t *in = json_object_get(r.body, "inputs");
    assert_null(json_object_get(in, "clients"));
    assert_int_equal(json_integer_value(json_object_get(in, "n_clients")), 4);
    assert_non_null(json_object_get(in, "privacy"));
    route_result_clear(&r);
}

/* POST path with body_text is refused with DP_EINVAL naming field (and saying exactly msg, unless
 * msg is NULL). */
static void expect_einval(fixture *f, const char *path, const char *body_text, const char *field,
                          const char *msg)
{
    route_result r;
    assert_int_equal(call_route(f, "POST", path, body_text, NULL, &r), 400);
    assert_int_equal(r.rc, DP_EINVAL);
    assert_string_equal(r.err.field, field);
    if (msg != NULL)
        assert_string_equal(r.err.msg, msg);
    route_result_clear(&r);
}

static void bad_input_names_the_field(void **state)
{
    fixture *f = *state;
    const char *cases[][2] = {
        {"{\"clients\":[{\"mean\":0.1,\"n\":0.5},{\"mean\":0.2,\"n\":2}],\"noise_variance\":1}",
         "clients[0].n"},
        {"{\"clients\":[{\"mean\":0.1,\"n\":2}],\"noise_variance\":1}", "clients"},
        {"{\"clients\":[{\"mean\":0.1,\"n\":2},{\"mean\":[0.2],\"n\":2}],\"noise_variance\":1}",
         "clients[1].mean"},
        {"{\"clients\":[{\"mean\":0.1,\"n\":2},{\"mean\":0.2,\"n\":2}],\"noise_variance\":-1}",
         "noise_variance"},
        {"{\"clients\":[{\"mean\":0.1,\"n\":2},{\"mean\":0.2,\"n\":2}],\"noise_variance\":1,"
         "\"privacy\":{\"epsilon0\":1,\"delta\":1e-5}}",
         "privacy.r"},
        /* central DP (issue 15): local-only fields, missing bounds, the calibration's inputs */
        {"{\"clients\":[{\"mean\":0.1,\"n\":2},{\"mean\":0.2,\"n\":2}],\"noise_variance\":1,"
         "\"privacy\":{\"model\":\"central\",\"epsilon0\":1,\"epsilon\":1,\"delta\":1e-5,\"r\":1,"
         "\"b\":2}}",
         "privacy.epsilon0"},
        {"{\"clients\":[{\"mean\":0.1,\"n\":2},{\"mean\":0.2,\"n\":2}],\"noise_variance\":1,"
         "\"privacy\":{\"model\":\"central\",\"epsilon\":1,\"delta\":1e-5,\"b\":2}}",
         "privacy.r"},
        {"{\"clients\":[{\"mean\":0.1,\"n\":2},{\"mean\":0.2,\"n\":2}],\"noise_variance\":1,"
         "\"privacy\":{\"model\":\"central\",\"epsilon\":1,\"delta\":1e-5,\"r\":1}}",
         "privacy.sigma_theta_bound"},
        {"{\"clients\":[{\"mean\":0.1,\"n\":2},{\"mean\":0.2,\"n\":2}],\"noise_variance\":1,"
         "\"privacy\":{\"model\":\"central\",\"delta\":1e-5,\"r\":1,\"b\":2}}",
         "privacy.epsilon"},
        {"{\"clients\":[{\"mean\":0.1,\"n\":2},{\"mean\":0.2,\"n\":2}],\"noise_variance\":1,"
         "\"privacy\":{\"noise_multiplier\":2,\"epsilon0\":1,\"delta\":1e-5,\"r\":1,\"b\":2}}",
         "privacy.noise_multiplier"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_einval(f, "/v1/estimators/gaussian", cases[i][0], cases[i][1], NULL);
        /* Beta, central DP (issue 15): local-model fields, the calibration's inputs, the
         * estimator's options the central release cannot serve, trials < 2 */
#define BC "{\"clients\":[{\"successes\":1,\"trials\":4},{\"successes\":2,\"trials\":3}],"
    const char *beta_cases[][2] = {
        {BC "\"privacy\":{\"model\":\"central\",\"epsilon0\":1,\"epsilon\":1,\"delta\":1e-5}}",
         "privacy.epsilon0"},
        {BC "\"privacy\":{\"model\":\"central\",\"scheme\":\"two_bit\",\"epsilon\":1,"
            "\"delta\":1e-5}}",
         "privacy.scheme"},
        {BC "\"privacy\":{\"model\":\"central\",\"delta\":1e-5}}", "privacy.epsilon"},
        {BC "\"privacy\":{\"model\":\"central\",\"epsilon\":1,\"noise_multiplier\":2,"
            "\"delta\":1e-5}}",
         "privacy.noise_multiplier"},
        {BC "\"privacy\":{\"model\":\"central\",\"epsilon\":1}}", "privacy.delta"},
        {BC "\"privacy\":{\"model\":\"central\",\"epsilon\":1,\"delta\":2}}", "privacy.delta"},
        {BC "\"privacy\":{\"model\":\"central\",\"epsilon\":-1,\"delta\":1e-5}}",
         "privacy.epsilon"},
        {BC "\"privacy\":{\"model\":\"centre\",\"epsilon\":1,\"delta\":1e-5}}", "privacy.model"},
        {BC "\"method\":\"mle\",\"privacy\":{\"model\":\"central\",\"epsilon\":1,"
            "\"delta\":1e-5}}",
         "method"},
        {BC "\"variant\":\"paper\",\"privacy\":{\"model\":\"central\",\"epsilon\":1,"
            "\"delta\":1e-5}}",
         "variant"},
        {BC "\"leave_one_out\":true,\"privacy\":{\"model\":\"central\",\"epsilon\":1,"
            "\"delta\":1e-5}}",
         "leave_one_out"},
        {BC "\"privacy\":{\"epsilon0\":1,\"epsilon\":1}}", "privacy.epsilon"},
        {BC "\"privacy\":{\"epsilon0\":1,\"delta\":1e-5}}", "privacy.delta"},
        {"{\"clients\":[{\"successes\":1,\"trials\":4},{\"successes\":1,\"trials\":1}],"
         "\"privacy\":{\"model\":\"central\",\"epsilon\":1,\"delta\":1e-5}}",
         "clients[1].trials"},
    };
#undef BC
    for (size_t i = 0; i < sizeof beta_cases / sizeof beta_cases[0]; i++)
        expect_einval(f, "/v1/estimators/beta", beta_cases[i][0], beta_cases[i][1], NULL);
}

/* Posterior means and sds of a Gaussian answer (4 clients). */
static void gauss_post(fixture *f, const char *body, double *pm, double *psd, const char **src)
{
    route_result r;
    assert_int_equal(call_route(f, "POST", "/v1/estimators/gaussian", body, NULL, &r), 201);
    json_t *est = json_object_get(r.body, "estimates");
    assert_int_equal(json_array_size(est), 4);
    for (size_t i = 0; i < 4; i++) {
        pm[i] = json_real_value(json_object_get(json_array_get(est, i), "posterior_mean"));
        psd[i] = json_real_value(json_object_get(json_array_get(est, i), "posterior_sd"));
    }
    *src = json_string_value(json_object_get(r.body, "noise_variance_source"));
    *src = strcmp(*src, "standard_errors") == 0 ? "standard_errors" : "other";
    if (strcmp(*src, "standard_errors") == 0)
        assert_true(json_is_null(json_object_get(r.body, "noise_variance")));
    route_result_clear(&r);
}

/* Issue 15: the Gaussian route takes a standard error per client (se, ebnm's (x, s)) instead of n
 * and noise_variance, and a non-integer n (an effective sample size). se_i = sqrt(sigma_x^2/n_i)
 * gives the same answer as (n_i, sigma_x^2); mixing se and n, or se with noise_variance, is a 400
 * naming the field. */
static void gaussian_takes_se_and_non_integer_n(void **state)
{
    fixture *f = *state;
    const double n[] = {15.5, 8, 30, 4.25}, x[] = {0.31, 0.12, 0.55, -0.05};
    char by_n[512], by_se[512];
    int k1 = snprintf(by_n, sizeof by_n, "{\"clients\":["),
        k2 = snprintf(by_se, sizeof by_se, "{\"clients\":[");
    for (int i = 0; i < 4; i++) {
        k1 += snprintf(by_n + k1, sizeof by_n - (size_t)k1, "%s{\"mean\":%.17g,\"n\":%.17g}",
                       i ? "," : "", x[i], n[i]);
        k2 += snprintf(by_se + k2, sizeof by_se - (size_t)k2, "%s{\"mean\":%.17g,\"se\":%.17g}",
                       i ? "," : "", x[i], sqrt(0.25 / n[i]));
    }
    snprintf(by_n + k1, sizeof by_n - (size_t)k1, "],\"noise_variance\":0.25}");
    snprintf(by_se + k2, sizeof by_se - (size_t)k2, "]}");
    double pm1[4], sd1[4], pm2[4], sd2[4];
    const char *s1, *s2;
    gauss_post(f, by_n, pm1, sd1, &s1);
    gauss_post(f, by_se, pm2, sd2, &s2);
    assert_string_equal(s1, "other");
    assert_string_equal(s2, "standard_errors");
    for (int i = 0; i < 4; i++) {
        assert_close(pm2[i], pm1[i], 1e-9, 0);
        assert_close(sd2[i], sd1[i], 1e-9, 0);
    }
    const char *cases[][2] = {
        {"{\"clients\":[{\"mean\":0.1,\"se\":0.2},{\"mean\":0.2,\"n\":2}],\"noise_variance\":1}",
         "clients[1].se"},
        {"{\"clients\":[{\"mean\":0.1,\"n\":2},{\"mean\":0.2,\"se\":0.3}],\"noise_variance\":1}",
         "clients[1].n"},
        {"{\"clients\":[{\"mean\":0.1,\"se\":0.2},{\"mean\":0.2,\"se\":0.3}],\"noise_variance\":1}",
         "noise_variance"},
        {"{\"clients\":[{\"mean\":0.1,\"se\":-1},{\"mean\":0.2,\"se\":0.3}]}", "clients[0].se"},
        {"{\"clients\":[{\"mean\":0.1,\"se\":0.2,\"n\":3},{\"mean\":0.2,\"se\":0.3}]}",
         "clients[0].se"},
        {"{\"clients\":[{\"samples\":[1,2],\"se\":0.2},{\"mean\":0.2,\"se\":0.3}]}",
         "clients[0].samples"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_einval(f, "/v1/estimators/gaussian", cases[i][0], cases[i][1], NULL);
}

/* An unknown value of a string option is refused with 400 naming the field and listing the
 * allowed values, for every option of the three estimators. */
static void unknown_choices_list_the_allowed_values(void **state)
{
    fixture *f = *state;
#define G2 "{\"clients\":[{\"mean\":0.1,\"n\":2},{\"mean\":0.2,\"n\":2}],\"noise_variance\":1,"
#define B2 "{\"clients\":[{\"successes\":3,\"trials\":10},{\"successes\":7,\"trials\":12}],"
#define M4                                                                                         \
    "{\"clients\":[{\"mean\":-1,\"n\":5},{\"mean\":-0.8,\"n\":5},{\"mean\":1,\"n\":5},"            \
    "{\"mean\":1.1,\"n\":5}],\"noise_variance\":0.5,\"components\":2,"
    static const struct {
        const char *path;
        const char *body, *field, *msg;
    } cases[] = {
        {"/v1/estimators/gaussian", G2 "\"method\":\"x\"}", "method",
         "method must be \"mle\" or \"moments\" (got \"x\")"},
        {"/v1/estimators/gaussian", G2 "\"privacy\":{\"r\":1,\"b\":1,\"range\":\"x\"}}",
         "privacy.range", "range must be \"paper\" or \"safe\" (got \"x\")"},
        {"/v1/estimators/gaussian", G2 "\"privacy\":{\"r\":1,\"b\":1,\"calibration\":\"x\"}}",
         "privacy.calibration", "calibration must be \"classic\" or \"analytic\" (got \"x\")"},
        {"/v1/estimators/gaussian", G2 "\"privacy\":{\"r\":1,\"b\":1,\"mechanism\":\"x\"}}",
         "privacy.mechanism", "mechanism must be \"gaussian\" or \"quantize\" (got \"x\")"},
        {"/v1/estimators/beta", B2 "\"method\":\"x\"}", "method",
         "method must be \"mle\" or \"moments\" (got \"x\")"},
        {"/v1/estimators/beta", B2 "\"variant\":\"x\"}", "variant",
         "variant must be \"paper\", \"paper_no_minus1\" or \"unbiased\" (got \"x\")"},
        {"/v1/estimators/beta", B2 "\"privacy\":{\"epsilon0\":1,\"scheme\":\"x\"}}",
         "privacy.scheme", "scheme must be \"two_bit\" or \"paper_1bit\" (got \"x\")"},
        {"/v1/estimators/mixture", M4 "\"method\":\"x\"}", "method",
         "method must be \"em\" or \"altmin\" (got \"x\")"},
    };
#undef G2
#undef B2
#undef M4
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_einval(f, cases[i].path, cases[i].body, cases[i].field, cases[i].msg);
}

static void allocation_failures_are_clean_errors(void **state)
{
    fixture *f = *state;
    const char *bodies[] = {
        GAUSS,
        "{\"clients\":[{\"successes\":3,\"trials\":10},{\"successes\":7,\"trials\":12},"
        "{\"successes\":1,\"trials\":8}],\"privacy\":{\"epsilon0\":2}}",
        "{\"clients\":[{\"mean\":-1,\"n\":5},{\"mean\":-0.8,\"n\":5},{\"mean\":1,\"n\":5},"
        "{\"mean\":1.1,\"n\":5}],\"noise_variance\":0.5,\"components\":2}",
        "{\"clients\":[{\"mean\":0.31,\"n\":15},{\"mean\":0.12,\"n\":8},{\"mean\":0.55,\"n\":30}],"
        "\"noise_variance\":0.25,\"privacy\":{\"model\":\"central\",\"epsilon\":1,\"delta\":1e-5,"
        "\"r\":1,\"sigma_theta_bound\":0.5}}",
        "{\"clients\":[{\"successes\":3,\"trials\":10},{\"successes\":7,\"trials\":12},"
        "{\"successes\":1,\"trials\":8}],\"privacy\":{\"model\":\"central\",\"epsilon\":1,"
        "\"delta\":1e-5}}",
    };
    route_fn fns[] = {route_estimators_gaussian, route_estimators_beta, route_estimators_mixture,
                      route_estimators_gaussian, route_estimators_beta};
    for (size_t b = 0; b < sizeof bodies / sizeof bodies[0]; b++) {
        json_t *body = json_loads(bodies[b], 0, NULL);
        assert_non_null(body);
        int ok = 0;
        for (long nth = 1; nth < 400 && !ok; nth++) {
            http_req rq = req_for(f, "POST", "/v1/estimators/x", body);
            http_resp rs;
            memset(&rs, 0, sizeof rs);
            dp_err e;
            dp_err_clear(&e);
            dp_alloc_fail_after(nth);
            int rc = fns[b](&rq, &rs, &e);
            dp_alloc_fail_after(0);
            if (rc == DP_OK)
                ok = 1;
            else
                assert_true(rc == DP_ENOMEM);
            http_resp_clear(&rs);
        }
        assert_true(ok);
        json_decref(body);
    }
}

/* POSTs body_text to path and returns the handler's code; *e as it left it. */
static int call(fixture *f, const char *path, const char *body_text, dp_err *e)
{
    route_result r;
    call_route(f, "POST", path, body_text, NULL, &r);
    *e = r.err;
    int rc = r.rc;
    route_result_clear(&r);
    return rc;
}

/* D16: finite means whose fits overflow double precision are 422 numerical_failure naming the
 * cause in words (never "nan", never a field the client did not send); a huge epsilon0 gets an
 * answer (almost no noise) instead of "calibration bracket failed". */
static void numerical_limits_are_422_in_words(void **state)
{
    fixture *f = *state;
    const char *bad[][2] = {
        {"m", "{\"clients\":[{\"mean\":1e200,\"n\":1},{\"mean\":-1e200,\"n\":1},{\"mean\":1,"
              "\"n\":1},{\"mean\":2,\"n\":1}],\"noise_variance\":1,\"components\":2}"},
        {"m", "{\"clients\":[{\"mean\":1e308,\"n\":1},{\"mean\":-1e308,\"n\":1},{\"mean\":1,"
              "\"n\":1},{\"mean\":2,\"n\":1}],\"noise_variance\":1,\"components\":2}"},
        {"g", "{\"clients\":[{\"mean\":1e155,\"n\":1},{\"mean\":-1e155,\"n\":1},{\"mean\":1,"
              "\"n\":1}],\"noise_variance\":1}"},
        {"g", "{\"clients\":[{\"mean\":1e300,\"n\":1},{\"mean\":-1e300,\"n\":1},{\"mean\":1,"
              "\"n\":1}],\"noise_variance\":1}"},
    };
    dp_err e;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *path =
            bad[i][0][0] == 'm' ? "/v1/estimators/mixture" : "/v1/estimators/gaussian";
        assert_int_equal(call(f, path, bad[i][1], &e), DP_ENUMERIC);
        assert_string_equal(e.field, "clients");
        assert_null(strstr(e.msg, "nan"));
        assert_non_null(strstr(e.msg, "overflow double precision"));
    }
#define HUGE_EPS0                                                                                  \
    "{\"clients\":[{\"mean\":0.3,\"n\":5},{\"mean\":0.5,\"n\":5},{\"mean\":0.1,\"n\":5}],"         \
    "\"noise_variance\":1,\"privacy\":{\"epsilon0\":1e308,\"delta\":1e-5,\"r\":1,"                 \
    "\"sigma_theta_bound\":0.5%s}}"
    char body[400];
    for (int analytic = 0; analytic < 2; analytic++) {
        snprintf(body, sizeof body, HUGE_EPS0, analytic ? ",\"calibration\":\"analytic\"" : "");
        assert_int_equal(call(f, "/v1/estimators/gaussian", body, &e), DP_OK);
    }
}

/* Operations the fixture's writer (the ledger's) has run so far. */
static uint64_t writer_ops(fixture *f)
{
    uint64_t groups, ops;
    db_writer_stats(ledger_writer(f->ledger), &groups, &ops);
    return ops;
}

/* A run that charges no silo is still written by the database's writer, one operation per run:
 * with a ledger as the ledger's write-only operation (ledger_charge_batch_with, no charge), with
 * only the writer as an operation of its own; never in a transaction of the request's connection.
 */
static void a_run_without_a_charge_is_one_writer_operation(void **state)
{
    fixture *f = *state;
    uint64_t ops0 = writer_ops(f);
    route_result r;
    assert_int_equal(call_route(f, "POST", "/v1/estimators/gaussian", GAUSS, NULL, &r), 201);
    assert_int_equal(writer_ops(f) - ops0, 1);
    json_int_t first = json_integer_value(json_object_get(r.body, "run_id"));
    route_result_clear(&r);

    json_t *body = json_loads(GAUSS, 0, NULL);
    assert_non_null(body);
    f->r.app.ledger = NULL; /* the writer alone */
    f->r.app.writer = ledger_writer(f->ledger);
    http_req rq = route_fixture_req(&f->r, "POST", "/v1/estimators/gaussian");
    rq.body = body;
    http_resp rs;
    memset(&rs, 0, sizeof rs);
    dp_err e;
    dp_err_clear(&e);
    ops0 = writer_ops(f);
    assert_int_equal(http_handler_call(route_estimators_gaussian, &rq, &rs, &e), DP_OK);
    assert_int_equal(rs.status, 201);
    assert_int_equal(writer_ops(f) - ops0, 1);
    assert_int_not_equal(sqlite3_get_autocommit(store_conn_db(f->r.db)), 0);
    json_int_t second = json_integer_value(json_object_get(rs.body, "run_id"));
    assert_int_equal(second, first + 1);
    http_resp_clear(&rs);
    json_decref(body);

    char path[64];
    snprintf(path, sizeof path, "/v1/runs/%lld", (long long)second);
    assert_int_equal(call_route(f, "GET", path, NULL, NULL, &r), 200); /* committed, readable */
    route_result_clear(&r);

    /* a closed writer: a clean 503, and no run stored */
    f->r.app.ledger = NULL;
    db_writer_close(ledger_writer(f->ledger));
    rq = route_fixture_req(&f->r, "POST", "/v1/estimators/gaussian");
    body = json_loads(GAUSS, 0, NULL);
    rq.body = body;
    memset(&rs, 0, sizeof rs);
    dp_err_clear(&e);
    assert_int_equal(http_handler_call(route_estimators_gaussian, &rq, &rs, &e), DP_EBUSY);
    assert_int_equal(e.code, DP_EBUSY);
    http_resp_clear(&rs);
    json_decref(body);
    snprintf(path, sizeof path, "/v1/runs/%lld", (long long)second + 1);
    assert_int_equal(call_route(f, "GET", path, NULL, NULL, &r), 404);
    route_result_clear(&r);
}

int main(void)
{
    gsl_set_error_handler_off();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(gaussian_run_is_stored_without_raw_data, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_input_names_the_field, setup, teardown),
        cmocka_unit_test_setup_teardown(gaussian_takes_se_and_non_integer_n, setup, teardown),
        cmocka_unit_test_setup_teardown(unknown_choices_list_the_allowed_values, setup, teardown),
        cmocka_unit_test_setup_teardown(allocation_failures_are_clean_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(numerical_limits_are_422_in_words, setup, teardown),
        cmocka_unit_test_setup_teardown(a_run_without_a_charge_is_one_writer_operation, setup,
                                        teardown),
    };
    return cmocka_run_group_tests_name("service_estimators", tests, NULL, NULL);
}
