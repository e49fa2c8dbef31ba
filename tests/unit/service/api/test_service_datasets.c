/*
 * Unit tests for service/api/datasets.c through call_route: uploads (the summary, the refusals
 * with a bad cell's line and column), the list with the built-ins, access by token, delete.
 */
#include "tests/support/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/api/routes.h"
#include "tests/support/service_fixture.h"

typedef struct fx {
    service_fixture f; /* auth on */
    char admin[LEDGER_TOKEN_BUF];
    char ta[LEDGER_TOKEN_BUF], tb[LEDGER_TOKEN_BUF]; /* tokens of silos a and b */
    route_result out;
} fx;

static int call(fx *x, const char *method, const char *path, const char *body, const char *token)
{
    route_result_clear(&x->out);
    return call_route(&x->f, method, path, body, token, &x->out);
}

static int make_silo(fx *x, const char *name, char tok[LEDGER_TOKEN_BUF])
{
    char body[128];
    snprintf(body, sizeof body, "{\"name\":\"%s\",\"budget\":{\"epsilon\":2,\"delta\":1e-5}}",
             name);
    if (call(x, "POST", "/v1/silos", body, x->admin) != 201)
        return -1;
    snprintf(tok, LEDGER_TOKEN_BUF, "%s", json_string_value(json_object_get(x->out.body, "token")));
    return 0;
}

static int setup(void **state)
{
    fx *x = calloc(1, sizeof *x);
    if (x == NULL || service_fixture_open(&x->f, "datasets", false) != 0)
        return -1;
    dp_err e;
    dp_err_clear(&e);
    int64_t id;
    if (ledger_token_generate(x->admin, &e) != DP_OK ||
        ledger_token_register_admin(x->f.ledger, x->admin, &id, &e) != DP_OK ||
        make_silo(x, "a", x->ta) != 0 || make_silo(x, "b", x->tb) != 0)
        return -1;
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    fx *x = *state;
    route_result_clear(&x->out);
    service_fixture_close(&x->f);
    free(x);
    return 0;
}

static const char CSV[] = "hospital,age,dose,outcome\n"
                          "north,61,1.5,1\n"
                          "south,47,0.5,0\n"
                          "north,55,2,1\n"
                          "\"east, annex\",70,1,0\n"
                          "south,39,0.25,1\n";

static json_t *err_obj(fx *x)
{
    return json_object_get(x->out.body, "error");
}

static void upload_answers_what_the_parse_found(void **state)
{
    fx *x = *state;
    assert_int_equal(
        call(x, "POST", "/v1/datasets?label=outcome&silo=hospital&name=trial", CSV, x->ta), 201);
    json_t *b = x->out.body;
    int64_t id = json_integer_value(json_object_get(b, "id"));
    assert_true(id > 0);
    assert_int_equal(json_integer_value(json_object_get(b, "rows")), 5);
    assert_int_equal(json_integer_value(json_object_get(b, "columns")), 4);
    assert_int_equal(json_integer_value(json_object_get(b, "classes")), 2);
    assert_string_equal(json_string_value(json_object_get(b, "name")), "trial");
    assert_string_equal(json_string_value(json_object_get(b, "label")), "outcome");
    assert_string_equal(json_string_value(json_object_get(b, "silo")), "hospital");
    json_t *feat = json_object_get(b, "features");
    assert_int_equal(json_array_size(feat), 2);
    assert_string_equal(json_string_value(json_array_get(feat, 0)), "age");
    assert_string_equal(json_string_value(json_array_get(feat, 1)), "dose");
    json_t *silos = json_object_get(b, "silos");
    assert_int_equal(json_array_size(silos), 3); /* in order of first appearance */
    const char *names[] = {"north", "south", "east, annex"};
    const int rows[] = {2, 2, 1};
    for (size_t k = 0; k < 3; k++) {
        json_t *s = json_array_get(silos, k);
        assert_string_equal(json_string_value(json_object_get(s, "name")), names[k]);
        assert_int_equal(json_integer_value(json_object_get(s, "rows")), rows[k]);
    }
    assert_int_equal(json_integer_value(json_object_get(b, "bytes")), (json_int_t)strlen(CSV));
    assert_int_equal(strlen(json_string_value(json_object_get(b, "sha256"))), 64);

    /* Read back: the uploader, a token of its silo's... and the admin; not another silo. */
    char path[64];
    snprintf(path, sizeof path, "/v1/datasets/%lld", (long long)id);
    assert_int_equal(call(x, "GET", path, NULL, x->ta), 200);
    assert_int_equal(json_integer_value(json_object_get(x->out.body, "rows")), 5);
    assert_int_equal(call(x, "GET", path, NULL, x->admin), 200);
    assert_int_equal(call(x, "GET", path, NULL, x->tb), 404);
    assert_int_equal(call(x, "DELETE", path, NULL, x->tb), 404);

    /* The list: the built-ins first, then the uploads the caller may see. */
    assert_int_equal(call(x, "GET", "/v1/datasets", NULL, x->ta), 200);
    json_t *list = json_object_get(x->out.body, "datasets");
    bool fm = false, lin = false, low = false, up = false;
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *d = json_array_get(list, i);
        json_t *idv = json_object_get(d, "id");
        if (json_is_string(idv) && strcmp(json_string_value(idv), "fashion-mnist") == 0)
            fm = true;
        if (json_is_string(idv) && strcmp(json_string_value(idv), "synthetic-linreg") == 0)
            lin = json_array_size(json_object_get(d, "parameters")) > 0;
        if (json_is_string(idv) && strcmp(json_string_value(idv), "synthetic-lowrank") == 0)
            low = json_array_size(json_object_get(d, "parameters")) == 6;
        if (json_is_integer(idv) && json_integer_value(idv) == id)
            up = true;
    }
    assert_true(fm && lin && low && up);
    assert_int_equal(call(x, "GET", "/v1/datasets", NULL, x->tb), 200);
    list = json_object_get(x->out.body, "datasets");
    for (size_t i = 0; i < json_array_size(list); i++)
        assert_false(json_is_integer(json_object_get(json_array_get(list, i), "id")));

    /* Delete: gone for everyone. */
    assert_int_equal(call(x, "DELETE", path, NULL, x->ta), 200);
    assert_int_equal(call(x, "GET", path, NULL, x->admin), 404);
    assert_int_equal(call(x, "DELETE", path, NULL, x->ta), 404);
}

static void a_bad_cell_is_named_by_line_and_column(void **state)
{
    fx *x = *state;
    const char *bad = "silo,x1,x2,y\n"
                      "a,1,2,3\n"
                      "a,1,oops,3\n";
    assert_int_equal(call(x, "POST", "/v1/datasets?label=y&silo=silo", bad, x->ta), 400);
    json_t *e = err_obj(x);
    assert_int_equal(json_integer_value(json_object_get(e, "line")), 3);
    assert_int_equal(json_integer_value(json_object_get(e, "column")), 3);
    const char *msg = json_string_value(json_object_get(e, "message"));
    assert_non_null(strstr(msg, "line 3"));
    assert_non_null(strstr(msg, "x2"));
    /* nothing was stored */
    assert_int_equal(call(x, "GET", "/v1/datasets?after=0", NULL, x->admin), 200);
    json_t *list = json_object_get(x->out.body, "datasets");
    for (size_t i = 0; i < json_array_size(list); i++)
        assert_false(json_is_integer(json_object_get(json_array_get(list, i), "id")));
}

static void refusals_name_the_field(void **state)
{
    fx *x = *state;
    assert_int_equal(call(x, "POST", "/v1/datasets", CSV, x->ta), 400);
    assert_string_equal(x->out.err.field, "label");
    assert_int_equal(call(x, "POST", "/v1/datasets?label=nope", CSV, x->ta), 400);
    assert_string_equal(json_string_value(json_object_get(err_obj(x), "field")), "label");
    assert_int_equal(call(x, "POST", "/v1/datasets?label=outcome&silo=nope", CSV, x->ta), 400);
    assert_string_equal(json_string_value(json_object_get(err_obj(x), "field")), "silo");
    assert_int_equal(call(x, "POST", "/v1/datasets?label=outcome&silo=outcome", CSV, x->ta), 400);
    assert_string_equal(x->out.err.field, "silo");
    assert_int_equal(call(x, "POST", "/v1/datasets?label=outcome", "", x->ta), 400);
    assert_string_equal(x->out.err.field, "body");
    assert_int_equal(call(x, "POST", "/v1/datasets?label=outcome&colour=red", CSV, x->ta), 400);
    assert_string_equal(x->out.err.field, "colour");
    assert_int_equal(call(x, "GET", "/v1/datasets/abc", NULL, x->ta), 400);
    assert_int_equal(call(x, "GET", "/v1/datasets", NULL, NULL), 401);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(upload_answers_what_the_parse_found, setup, teardown),
        cmocka_unit_test_setup_teardown(a_bad_cell_is_named_by_line_and_column, setup, teardown),
        cmocka_unit_test_setup_teardown(refusals_name_the_field, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
