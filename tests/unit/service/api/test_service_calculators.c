/*
 * test_service_calculators.c: POST /v1/calculators/{mrmtl,fedhdp,ppsgd} through the route table:
 * open (no token with auth on), the answers carry the library's figures (checked here against the
 * papers' values; the arithmetic itself is tested in tests/unit/federated/test_fl_theory.c),
 * infinite optima go out as null with the word for them, and every bad input is a 400 naming the
 * field.
 */
#include "tests/support/test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "service/api/routes.h"
#include "tests/support/service_fixture.h"

static int setup(void **state)
{
    service_fixture *fx = calloc(1, sizeof *fx);
    *state = fx;
    /* auth on: the calculators must answer without a token */
    return fx != NULL && service_fixture_open(fx, "calculators", false) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    service_fixture *fx = *state;
    int rc = service_fixture_close(fx);
    free(fx);
    return rc;
}

static double num(const json_t *o, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    const json_t *v = o;
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k != NULL;
         k = strtok_r(NULL, ".", &save))
        v = json_is_array(v) ? json_array_get(v, (size_t)atoi(k)) : json_object_get(v, k);
    if (!json_is_number(v))
        fail_msg("%s is not a number in the answer", path);
    return json_number_value(v);
}

#define assert_near(x, ref, rel) assert_true(fabs((x) - (ref)) <= (rel)*fabs(ref))

/* POSTs body to path without a token; returns the status, *out owned by the caller. */
static int post(service_fixture *fx, const char *path, const char *body, route_result *out)
{
    return call_route(fx, "POST", path, body, NULL, out);
}

static void expect_400(service_fixture *fx, const char *path, const char *body, const char *field)
{
    route_result r;
    int st = post(fx, path, body, &r);
    if (st != 400 || strcmp(r.err.field, field) != 0)
        fail_msg("%s %s: status %d field \"%s\", expected 400 \"%s\" (%s)", path, body, st,
                 r.err.field, field, r.err.msg);
    route_result_clear(&r);
}

static void mrmtl_answers_open_with_the_papers_figures(void **state)
{
    service_fixture *fx = *state;
    route_result r;
    assert_int_equal(post(fx, "/v1/calculators/mrmtl",
                          "{\"silos\":20,\"n\":200,\"sigma\":0.4,\"tau\":0.08,"
                          "\"noise_multiplier\":14.567,\"clip\":1,\"lambda\":0}",
                          &r),
                     200);
    assert_near(num(r.body, "lambda_star"), 0.9539, 1e-4);
    assert_near(num(r.body, "mse.fedavg"), 6.385e-3, 1e-4);
    assert_near(num(r.body, "mse.mrmtl_star"), 3.274e-3, 2e-4);
    assert_near(num(r.body, "at_lambda.mse"), num(r.body, "mse.local"), 1e-12);
    assert_near(num(r.body, "sigma_dp"), 14.567, 1e-12);
    assert_string_equal(json_string_value(json_object_get(r.body, "best")), "mrmtl");
    route_result_clear(&r);
    /* tau = 0: lambda* is infinite, sent as null with best = fedavg */
    assert_int_equal(
        post(fx, "/v1/calculators/mrmtl", "{\"silos\":5,\"n\":10,\"sigma\":1,\"tau\":0}", &r), 200);
    assert_true(json_is_null(json_object_get(r.body, "lambda_star")));
    assert_string_equal(json_string_value(json_object_get(r.body, "best")), "fedavg");
    route_result_clear(&r);
    /* silos that differ */
    assert_int_equal(post(fx, "/v1/calculators/mrmtl",
                          "{\"tau\":0.08,\"silos\":[{\"n\":200,\"sigma\":0.4,\"sigma_dp\":14.567},"
                          "{\"n\":200,\"sigma\":0.4,\"noise_multiplier\":14.567,\"clip\":1}]}",
                          &r),
                     200);
    assert_int_equal(json_array_size(json_object_get(r.body, "silos")), 2);
    assert_near(num(r.body, "silos.0.lambda_star"), num(r.body, "silos.1.lambda_star"), 1e-12);
    route_result_clear(&r);
}

static void mrmtl_refuses_bad_input_naming_the_field(void **state)
{
    service_fixture *fx = *state;
    const char *p = "/v1/calculators/mrmtl";
    expect_400(fx, p, "{\"n\":200,\"sigma\":0.4,\"tau\":0.1}", "silos");
    expect_400(fx, p, "{\"silos\":\"x\",\"n\":200,\"sigma\":0.4,\"tau\":0.1}", "silos");
    expect_400(fx, p, "{\"silos\":1,\"n\":200,\"sigma\":0.4,\"tau\":0.1}", "silos");
    expect_400(fx, p, "{\"silos\":3,\"sigma\":0.4,\"tau\":0.1}", "n");
    expect_400(fx, p, "{\"silos\":3,\"n\":-1,\"sigma\":0.4,\"tau\":0.1}", "n");
    expect_400(fx, p, "{\"silos\":3,\"n\":9,\"sigma\":0.4,\"tau\":0.1,\"noise_multiplier\":2}",
               "clip");
    expect_400(fx, p,
               "{\"silos\":3,\"n\":9,\"sigma\":0.4,\"tau\":0.1,\"sigma_dp\":1,\"clip\":1,"
               "\"noise_multiplier\":1}",
               "sigma_dp");
    expect_400(fx, p, "{\"silos\":3,\"n\":9,\"sigma\":0.4,\"tau\":0.1,\"lambda\":-2}", "lambda");
    expect_400(fx, p, "{\"silos\":3,\"n\":9,\"sigma\":0.4,\"tau\":0.1,\"lamda\":2}", "lamda");
    expect_400(fx, p, "{\"tau\":0.1,\"silos\":[{\"n\":9,\"sigma\":1},{\"n\":0,\"sigma\":1}]}",
               "silos[1].n");
    expect_400(fx, p,
               "{\"tau\":0.1,\"silos\":[{\"n\":9,\"sigma\":1},{\"n\":9,\"sigma\":1,\"x\":1}]}",
               "silos[1].x");
    expect_400(fx, p, "{\"tau\":0.1,\"silos\":[{\"n\":9,\"sigma\":1}]}", "silos");
    expect_400(fx, p, "{\"silos\":[{\"n\":9,\"sigma\":1},{\"n\":9,\"sigma\":1}]}", "tau");
}

static void fedhdp_answers_per_group(void **state)
{
    service_fixture *fx = *state;
    route_result r;
    assert_int_equal(post(fx, "/v1/calculators/fedhdp",
                          "{\"alpha2\":1,\"tau2\":0.25,\"groups\":[{\"name\":\"opt-out\","
                          "\"clients\":5,\"per_client_noise\":0},{\"clients\":95,\"gamma2\":0.05}],"
                          "\"lambda\":[4,3.44928]}",
                          &r),
                     200);
    assert_near(num(r.body, "groups.1.r_star"), 0.208333, 2e-6);
    assert_near(num(r.body, "groups.1.per_client_noise"), 4.75, 1e-12);
    assert_near(num(r.body, "groups.0.lambda_star"), 4.0, 1e-9);
    assert_near(num(r.body, "groups.1.lambda_star"), 3.44928, 2e-6);
    assert_near(num(r.body, "groups.1.bayes_mse"), 0.231270, 3e-6);
    assert_near(num(r.body, "server_variance.optimal"), 0.0504202, 1e-6);
    assert_near(num(r.body, "server_variance.uniform"), 0.057625, 1e-6);
    assert_near(num(r.body, "groups.1.at.mse_without_own_noise"), 0.231270, 3e-6);
    assert_near(num(r.body, "groups.1.at.mse"), 0.231472, 3e-6);
    assert_true(json_is_null(json_object_get(json_object_get(r.body, "server_variance"), "at_r")));
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(r.body, "groups"), 0), "name")),
                        "opt-out");
    route_result_clear(&r);
    /* given weights: the server variance at them (r = 1: HDP-FedAvg) */
    assert_int_equal(post(fx, "/v1/calculators/fedhdp",
                          "{\"alpha2\":1,\"tau2\":0.25,\"groups\":[{\"clients\":5,"
                          "\"per_client_noise\":0},{\"clients\":95,\"gamma2\":0.05}],\"r\":[1,1]}",
                          &r),
                     200);
    assert_near(num(r.body, "server_variance.at_r"), 0.057625, 1e-6);
    route_result_clear(&r);
}

static void fedhdp_refuses_bad_input_naming_the_field(void **state)
{
    service_fixture *fx = *state;
    const char *p = "/v1/calculators/fedhdp";
    expect_400(fx, p, "{\"alpha2\":1,\"tau2\":0.1}", "groups");
    expect_400(fx, p, "{\"alpha2\":1,\"tau2\":0.1,\"groups\":[]}", "groups");
    expect_400(fx, p, "{\"tau2\":0.1,\"groups\":[{\"clients\":3,\"gamma2\":0}]}", "alpha2");
    expect_400(fx, p, "{\"alpha2\":1,\"tau2\":0.1,\"groups\":[{\"clients\":3}]}",
               "groups[0].per_client_noise");
    expect_400(fx, p,
               "{\"alpha2\":1,\"tau2\":0.1,\"groups\":[{\"clients\":3,\"gamma2\":1,"
               "\"per_client_noise\":1}]}",
               "groups[0].per_client_noise");
    expect_400(fx, p, "{\"alpha2\":1,\"tau2\":0.1,\"groups\":[{\"clients\":0,\"gamma2\":1}]}",
               "groups[0].clients");
    expect_400(fx, p, "{\"alpha2\":1,\"tau2\":0.1,\"groups\":[{\"clients\":2.5,\"gamma2\":1}]}",
               "groups[0].clients");
    expect_400(fx, p, "{\"alpha2\":1,\"tau2\":0.1,\"groups\":[{\"clients\":3,\"gamma2\":-1}]}",
               "groups[0].gamma2");
    expect_400(fx, p,
               "{\"alpha2\":1,\"tau2\":0.1,\"groups\":[{\"clients\":3,\"gamma2\":1}],\"r\":[1,2]}",
               "r");
    expect_400(
        fx, p,
        "{\"alpha2\":1,\"tau2\":0.1,\"groups\":[{\"clients\":3,\"gamma2\":1}],\"lambda\":[-1]}",
        "lambda");
    expect_400(fx, p,
               "{\"alpha2\":1,\"tau2\":0.1,\"groups\":[{\"clients\":3,\"gamma2\":1}],\"r\":[0]}",
               "r");
    expect_400(fx, p, "{\"alpha2\":1,\"tau2\":0.1,\"groups\":[{\"clients\":1,\"gamma2\":1}]}",
               "groups");
}

static void ppsgd_answers_the_threshold_and_the_bound(void **state)
{
    service_fixture *fx = *state;
    route_result r;
    assert_int_equal(post(fx, "/v1/calculators/ppsgd",
                          "{\"users\":1000,\"sigma\":1,\"epsilon\":10,\"delta\":1e-4,\"dim_w\":100,"
                          "\"grad_bound\":10,\"n\":100,\"smoothness\":2,\"v_norm2\":1}",
                          &r),
                     200);
    assert_near(num(r.body, "n_star"), 1085.0, 5e-4);
    assert_string_equal(json_string_value(json_object_get(r.body, "variance_favours")), "global");
    assert_near(num(r.body, "bound.alpha_0"), 0.380, 2e-3);
    assert_near(num(r.body, "bound.alpha_1_over_users"), 0.262, 2e-3);
    assert_near(num(r.body, "bound.alpha_inf"), 0.1715, 2e-3);
    assert_true(num(r.body, "bound.at_alpha_best") <= 0.1715 * (1 + 2e-3));
    route_result_clear(&r);
    /* only the threshold: no bound in the answer */
    assert_int_equal(post(fx, "/v1/calculators/ppsgd",
                          "{\"users\":100,\"sigma\":1,\"epsilon\":1,\"delta\":1e-5,\"dim_w\":10,"
                          "\"grad_bound\":1}",
                          &r),
                     200);
    assert_near(num(r.body, "n_star"), 85.99, 5e-4);
    assert_null(json_object_get(r.body, "bound"));
    route_result_clear(&r);
    /* n far past n*: local is best */
    assert_int_equal(post(fx, "/v1/calculators/ppsgd",
                          "{\"users\":1000,\"sigma\":1,\"epsilon\":1,\"delta\":1e-4,\"dim_w\":100,"
                          "\"grad_bound\":10,\"n\":100000,\"smoothness\":2,\"v_norm2\":1}",
                          &r),
                     200);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(r.body, "bound"), "best")), "local");
    route_result_clear(&r);
}

static void ppsgd_refuses_bad_input_naming_the_field(void **state)
{
    service_fixture *fx = *state;
    const char *p = "/v1/calculators/ppsgd";
    const char *base = "\"users\":100,\"sigma\":1,\"epsilon\":1,\"delta\":1e-5,\"dim_w\":10";
    char body[256];
    snprintf(body, sizeof body, "{%s}", base);
    expect_400(fx, p, body, "grad_bound");
    snprintf(body, sizeof body, "{%s,\"grad_bound\":0}", base);
    expect_400(fx, p, body, "grad_bound");
    snprintf(body, sizeof body, "{%s,\"grad_bound\":1,\"n\":10}", base);
    expect_400(fx, p, body, "smoothness");
    snprintf(body, sizeof body, "{%s,\"grad_bound\":1,\"n\":10,\"smoothness\":1,\"v_norm2\":-1}",
             base);
    expect_400(fx, p, body, "v_norm2");
    snprintf(body, sizeof body, "{%s,\"grad_bound\":1,\"G\":1}", base);
    expect_400(fx, p, body, "G");
    expect_400(
        fx, p,
        "{\"users\":1,\"sigma\":1,\"epsilon\":1,\"delta\":1e-5,\"dim_w\":10,\"grad_bound\":1}",
        "users");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(mrmtl_answers_open_with_the_papers_figures, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(mrmtl_refuses_bad_input_naming_the_field, setup, teardown),
        cmocka_unit_test_setup_teardown(fedhdp_answers_per_group, setup, teardown),
        cmocka_unit_test_setup_teardown(fedhdp_refuses_bad_input_naming_the_field, setup, teardown),
        cmocka_unit_test_setup_teardown(ppsgd_answers_the_threshold_and_the_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(ppsgd_refuses_bad_input_naming_the_field, setup, teardown),
    };
    return cmocka_run_group_tests_name("service_calculators", tests, NULL, NULL);
}
