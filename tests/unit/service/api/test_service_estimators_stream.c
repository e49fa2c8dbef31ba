/*
 * Unit tests for the estimator handlers on clients read as text spans
 * (service/codec/clients_json.h, what the dispatcher hands them for a body with a "clients" array)
 * against the same handlers on jansson's tree of the same body: the same answer, the same stored
 * run (inputs, outputs, the kept clients), the same 400 naming the same field, and the same
 * Idempotency-Key hash (a request stored from a tree is replayed, not refused as a conflict, when
 * it comes back as spans).
 */
#include "tests/support/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>

#include "service/codec/clients_json.h"
#include "service/api/routes.h"
#include "tests/support/service_util.h"

typedef route_fixture fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    *state = f;
    if (f == NULL || route_fixture_open(f, "eststream") != 0)
        return -1;
    f->c.auth_off = true;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    int rc = route_fixture_close(f);
    free(f);
    return rc;
}

/* One call of fn on text, parsed as a tree (spans false) or as spans. The answer's body (run_id
 * removed unless keep_id) goes to *out (NULL on error); the error to *e. */
static int call(fixture *f, route_fn fn, const char *text, bool spans, const char *key,
                bool keep_id, json_t **out, dp_err *e)
{
    size_t len = strlen(text);
    char *buf = malloc(len);
    assert_non_null(buf);
    memcpy(buf, text, len);
    json_error_t je;
    clients_json *cj = NULL;
    json_t *body = spans ? clients_json_load(buf, len, &cj, &je)
                         : json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    assert_non_null(body);
    if (spans && cj == NULL)
        fail_msg("the body did not use the spans: %s", text);
    if (cj == NULL)
        free(buf);
    http_req rq = route_fixture_req(f, "POST", "/v1/estimators/x");
    rq.body = body;
    rq.clients = cj;
    rq.idempotency_key = key;
    http_resp rs;
    memset(&rs, 0, sizeof rs);
    dp_err_clear(e);
    int rc = fn(&rq, &rs, e);
    *out = NULL;
    if (rc == DP_OK) {
        *out = json_incref(rs.body);
        if (!keep_id)
            json_object_del(*out, "run_id");
    }
    http_resp_clear(&rs);
    json_decref(body);
    clients_json_decref(cj);
    return rc;
}

/* The stored run id as GET /v1/runs/{id} shows it, without id and created_at. */
static json_t *stored(fixture *f, json_int_t id)
{
    char ids[32];
    snprintf(ids, sizeof ids, "%lld", (long long)id);
    http_param p = {"id", ids};
    http_req rq = route_fixture_req(f, "GET", "/v1/runs/x");
    rq.params = &p;
    rq.n_params = 1;
    http_resp rs;
    memset(&rs, 0, sizeof rs);
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(route_runs_get(&rq, &rs, &e), DP_OK);
    json_t *r = json_incref(rs.body);
    http_resp_clear(&rs);
    json_object_del(r, "id");
    json_object_del(r, "created_at");
    return r;
}

static void same_outcome(fixture *f, route_fn fn, const char *text)
{
    json_t *a = NULL, *b = NULL;
    dp_err ea, eb;
    int ra = call(f, fn, text, false, NULL, true, &a, &ea);
    int rb = call(f, fn, text, true, NULL, true, &b, &eb);
    assert_int_equal(ra, rb);
    assert_int_equal(ea.code, eb.code);
    assert_string_equal(ea.field, eb.field);
    assert_string_equal(ea.msg, eb.msg);
    if (ra == DP_OK) {
        json_t *sa = stored(f, json_integer_value(json_object_get(a, "run_id")));
        json_t *sb = stored(f, json_integer_value(json_object_get(b, "run_id")));
        if (!json_equal(sa, sb)) {
            char *x = json_dumps(sa, JSON_SORT_KEYS), *y = json_dumps(sb, JSON_SORT_KEYS);
            fail_msg("stored runs differ:\n%s\n%s", x, y);
        }
        json_decref(sa);
        json_decref(sb);
        json_object_del(a, "run_id");
        json_object_del(b, "run_id");
        if (!json_equal(a, b)) {
            char *x = json_dumps(a, JSON_SORT_KEYS), *y = json_dumps(b, JSON_SORT_KEYS);
            fail_msg("answers differ:\n%s\n%s", x, y);
        }
    }
    json_decref(a);
    json_decref(b);
}

static void valid_runs_answer_and_store_the_same(void **state)
{
    fixture *f = *state;
    same_outcome(f, route_estimators_gaussian,
                 "{\"clients\":[{\"id\":\"a\",\"mean\":0.31,\"n\":15},{\"id\":7,\"mean\":0.12,"
                 "\"n\":8},{\"mean\":0.55,\"n\":30},{\"id\":\"d\",\"mean\":-0.05,\"n\":4}],"
                 "\"noise_variance\":0.25,\"keep_data\":true,\"seed\":3}");
    same_outcome(f, route_estimators_gaussian,
                 "{\"noise_variance\":1,\"clients\":[{\"mean\":[0.1,0.2],\"n\":3},"
                 "{\"mean\":[0.4,-0.2],\"n\":5},{\"samples\":[[1,2],[3,4.5]]}]}");
    same_outcome(f, route_estimators_gaussian,
                 "{\"clients\":[{\"mean\":0.3,\"n\":5,\"within_variance\":0.2},"
                 "{\"mean\":0.1,\"n\":6,\"within_variance\":0.3}],\"keep_data\":false}");
    same_outcome(f, route_estimators_beta,
                 "{\"clients\":[{\"id\":\"x\",\"successes\":3,\"trials\":10},{\"successes\":5,"
                 "\"trials\":9},{\"samples\":[1,0,1,1]}],\"keep_data\":true}");
    same_outcome(f, route_estimators_mixture,
                 "{\"clients\":[{\"mean\":0.1,\"n\":5},{\"mean\":0.15,\"n\":5},{\"mean\":2.1,"
                 "\"n\":5},{\"mean\":2.3,\"n\":5},{\"id\":\"e\",\"mean\":2.2,\"n\":5}],"
                 "\"noise_variance\":0.1,\"components\":2,\"seed\":5,\"keep_data\":true}");
}

static void invalid_clients_are_the_same_400(void **state)
{
    fixture *f = *state;
    static const char *const G[] = {
        "{\"clients\":[{\"mean\":0.1,\"n\":2},{\"mean\":0.2,\"n\":2},{\"mean\":0.2,\"n\":2},"
        "{\"mean\":0.3,\"n\":-1}],\"noise_variance\":1}",
        "{\"clients\":[{\"mean\":0.1,\"n\":2}],\"noise_variance\":1}",
        "{\"clients\":[],\"noise_variance\":1}",
        "{\"clients\":[{\"mean\":0.1,\"n\":2},5],\"noise_variance\":1}",
        "{\"clients\":[{\"mean\":0.1,\"n\":2},{\"mean\":[0.2],\"n\":2}],\"noise_variance\":1}",
        "{\"clients\":[{\"mean\":0.1,\"n\":2},{\"mean\":0.2,\"n\":2,\"bogus\":1}]}",
        "{\"clients\":[{\"mean\":0.1,\"n\":2,\"id\":[1]},{\"mean\":0.2,\"n\":2}]}",
        "{\"clients\":[{\"mean\":0.1,\"n\":2,\"silo_id\":0},{\"mean\":0.2,\"n\":2}]}",
        "{\"clients\":[{\"mean\":0.1,\"n\":2,\"silo_id\":4},{\"mean\":0.2,\"n\":2}],"
        "\"noise_variance\":1}",
        "{\"clients\":[{\"mean\":0.1,\"n\":2},{\"mean\":0.2,\"n\":2}],\"noise_variance\":1,"
        "\"unknown\":1}",
    };
    for (size_t i = 0; i < sizeof G / sizeof G[0]; i++)
        same_outcome(f, route_estimators_gaussian, G[i]);
    same_outcome(f, route_estimators_beta,
                 "{\"clients\":[{\"successes\":3,\"trials\":10},{\"successes\":11,\"trials\":9}]}");
    same_outcome(f, route_estimators_mixture,
                 "{\"clients\":[{\"mean\":0.1,\"n\":5},{\"samples\":[1,2]}],\"components\":2}");
}

/* est_key hashes json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS): from spans it must be the same
 * text, or a retry after this change would be refused as another request under the same key. */
static void idempotency_hash_is_the_same_from_spans(void **state)
{
    fixture *f = *state;
    const char *text = "{\"seed\":9,\"clients\":[{\"id\":\"\\u00e9\",\"mean\":0.31,\"n\":15},"
                       "{\"mean\":0.12,\"n\":8}],\"noise_variance\":0.25,\"keep_data\":true}";
    json_t *a = NULL, *b = NULL;
    dp_err e;
    assert_int_equal(call(f, route_estimators_gaussian, text, false, "k-1", true, &a, &e), DP_OK);
    assert_int_equal(call(f, route_estimators_gaussian, text, true, "k-1", true, &b, &e), DP_OK);
    assert_int_equal(json_integer_value(json_object_get(a, "run_id")),
                     json_integer_value(json_object_get(b, "run_id")));
    assert_true(json_is_true(json_object_get(b, "replayed")));
    json_decref(b);
    /* and another request under the key is still a conflict */
    const char *other = "{\"seed\":9,\"clients\":[{\"id\":\"\\u00e9\",\"mean\":0.31,\"n\":15},"
                        "{\"mean\":0.13,\"n\":8}],\"noise_variance\":0.25,\"keep_data\":true}";
    assert_int_equal(call(f, route_estimators_gaussian, other, true, "k-1", true, &b, &e),
                     DP_ECONFLICT);
    json_decref(a);
}

int main(void)
{
    gsl_set_error_handler_off();
    json_object_seed(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(valid_runs_answer_and_store_the_same, setup, teardown),
        cmocka_unit_test_setup_teardown(invalid_clients_are_the_same_400, setup, teardown),
        cmocka_unit_test_setup_teardown(idempotency_hash_is_the_same_from_spans, setup, teardown),
    };
    return cmocka_run_group_tests_name("service_estimators_stream", tests, NULL, NULL);
}
