/*
 * test_service_event_json.c: the event JSON parser: structure of parsed trees, field paths of
 * errors, open parameters only when allowed, and clean failure under allocation-failure injection.
 */
#include <math.h>
#include <string.h>

#include <jansson.h>

#include "common/dp_alloc.h"
#include "service/codec/event_json.h"
#include "tests/support/test_util.h"

static json_t *load(const char *s)
{
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    if (j == NULL)
        fail_msg("bad test JSON: %s", je.text);
    return j;
}

static const char *TREE =
    "{\"type\":\"composed\",\"events\":["
    "{\"type\":\"self_composed\",\"count\":1000000000000,\"event\":{\"type\":\"poisson_sampled\","
    "\"sampling_rate\":0.01,\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":1.1}}},"
    "{\"type\":\"sampled_without_replacement\",\"source_size\":60000,\"sample_size\":256,"
    "\"event\":{\"type\":\"laplace\",\"noise_multiplier\":2}},"
    "{\"type\":\"zcdp\",\"rho\":0.25},{\"type\":\"pure\",\"epsilon\":0}]}";

static void parses_every_node_type(void **state)
{
    (void)state;
    json_t *j = load(TREE);
    acct_event *ev;
    dp_err err = {0};
    assert_int_equal(event_json_parse(j, false, "event", &ev, &err), DP_OK);
    assert_int_equal(ev->type, ACCT_EV_COMPOSED);
    assert_int_equal(ev->n_children, 4);
    assert_int_equal(ev->children[0]->count, 1000000000000ULL);
    assert_close(ev->children[0]->child->sampling_rate, 0.01, 0, 0);
    assert_close(ev->children[0]->child->child->noise_multiplier, 1.1, 0, 0);
    assert_int_equal(ev->children[1]->type, ACCT_EV_SWOR);
    assert_int_equal(ev->children[1]->sample_size, 256);
    assert_int_equal(ev->children[1]->child->type, ACCT_EV_LAPLACE);
    assert_close(ev->children[2]->rho, 0.25, 0, 0);
    assert_close(ev->children[3]->epsilon, 0.0, 0, 0);
    acct_event_free(ev);
    json_decref(j);
}

static void errors_name_the_full_path(void **state)
{
    (void)state;
    struct {
        const char *json, *field;
    } cases[] = {
        {"{\"type\":\"composed\",\"events\":[{\"type\":\"pure\",\"epsilon\":1},"
         "{\"type\":\"self_composed\",\"count\":3,\"event\":{\"type\":\"poisson_sampled\","
         "\"sampling_rate\":-1,\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":1}}}]}",
         "event.events[1].event.sampling_rate"},
        {"{\"type\":\"self_composed\",\"count\":3.0,\"event\":{\"type\":\"pure\",\"epsilon\":1}}",
         "event.count"},
        {"{\"type\":\"self_composed\",\"count\":0,\"event\":{\"type\":\"pure\",\"epsilon\":1}}",
         "event.count"},
        {"{\"type\":\"self_composed\",\"count\":2}", "event.event"},
        {"{\"type\":\"warp\"}", "event.type"},
        {"{\"type\":\"gaussian\",\"noise_multiplier\":1,\"extra\":true}", "event.extra"},
        {"{\"type\":\"gaussian\",\"noise_multiplier\":null}", "event.noise_multiplier"},
        {"{\"type\":\"composed\",\"events\":{}}", "event.events"},
        {"{\"type\":\"composed\",\"events\":[3]}", "event.events[0]"},
        {"{\"type\":\"sampled_without_replacement\",\"source_size\":10,\"sample_size\":11,"
         "\"event\":{\"type\":\"pure\",\"epsilon\":1}}",
         "event.sample_size"},
        {"{\"type\":\"zcdp\",\"rho\":\"big\"}", "event.rho"},
        {"{\"type\":\"repeat_and_select\",\"event\":{\"type\":\"pure\",\"epsilon\":1}}",
         "event.distribution"},
        {"{\"type\":\"repeat_and_select\",\"distribution\":{\"poisson\":{\"mean\":0.5}},"
         "\"event\":{\"type\":\"pure\",\"epsilon\":1}}",
         "event.distribution.poisson.mean"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *j = load(cases[i].json);
        acct_event *ev = (acct_event *)&ev;
        dp_err err = {0};
        assert_int_equal(event_json_parse(j, false, "event", &ev, &err), DP_EINVAL);
        assert_null(ev);
        if (strcmp(err.field, cases[i].field) != 0)
            fail_msg("case %zu: field \"%s\", want \"%s\" (%s)", i, err.field, cases[i].field,
                     err.msg);
        json_decref(j);
    }
}

static void nulls_are_open_parameters_only_when_allowed(void **state)
{
    (void)state;
    json_t *j = load("{\"type\":\"self_composed\",\"count\":null,\"event\":{\"type\":"
                     "\"poisson_sampled\",\"sampling_rate\":0.5,\"event\":{\"type\":\"gaussian\","
                     "\"noise_multiplier\":2}}}");
    acct_event *ev;
    dp_err err = {0};
    assert_int_equal(event_json_parse(j, false, "event", &ev, &err), DP_EINVAL);
    assert_string_equal(err.field, "event.count");
    dp_err_clear(&err);
    assert_int_equal(event_json_parse(j, true, "event", &ev, &err), DP_OK);
    assert_true(ev->count_open);
    assert_int_equal(acct_event_open_params(ev), ACCT_OPEN_COUNT);
    acct_event_free(ev);
    json_decref(j);
    acct_neighboring nb;
    json_t *b = load("{\"neighboring\":\"replace_one\"}");
    assert_int_equal(event_json_neighboring(b, &nb, &err), DP_OK);
    assert_int_equal(nb, ACCT_NB_REPLACE_ONE);
    json_decref(b);
    b = load("{\"neighboring\":\"swap\"}");
    assert_int_equal(event_json_neighboring(b, &nb, &err), DP_EINVAL);
    assert_string_equal(err.field, "neighboring");
    json_decref(b);
}

/* The encoder is the parser's inverse: a text with reals written as reals parses and dumps back to
 * what jansson dumps for the text itself (compact, sorted keys), and a tree built with the
 * constructors dumps to the text a client would send for it (what the ledger stores and hashes). */
static void dumps_inverts_parse_byte_for_byte(void **state)
{
    (void)state;
    static const char *const TEXTS[] = {
        "{\"type\":\"composed\",\"events\":[{\"type\":\"self_composed\",\"count\":1000000000000,"
        "\"event\":{\"type\":\"poisson_sampled\",\"sampling_rate\":0.01,\"event\":{\"type\":"
        "\"gaussian\",\"noise_multiplier\":1.1}}},{\"type\":\"sampled_without_replacement\","
        "\"source_size\":60000,\"sample_size\":256,\"event\":{\"type\":\"laplace\","
        "\"noise_multiplier\":2.0}},{\"type\":\"zcdp\",\"rho\":0.25},{\"type\":\"pure\","
        "\"epsilon\":0.0}]}",
        "{\"count\":2,\"event\":{\"epsilon\":0.35,\"type\":\"pure\"},\"type\":\"self_composed\"}",
    };
    for (size_t i = 0; i < sizeof TEXTS / sizeof TEXTS[0]; i++) {
        json_t *j = load(TEXTS[i]);
        char *want = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        acct_event *ev;
        dp_err err = {0};
        assert_int_equal(event_json_parse(j, false, "event", &ev, &err), DP_OK);
        char *text = event_json_dumps(ev);
        assert_non_null(text);
        assert_string_equal(text, want);
        free(text);
        free(want);
        acct_event_free(ev);
        json_decref(j);
    }
    /* an estimator's per-coordinate Gaussian charge for a silo of 3 clients, built in C */
    acct_event *ev =
        acct_event_self_composed(3, acct_event_self_composed(4, acct_event_gaussian(0.5)));
    char *text = event_json_dumps(ev);
    assert_string_equal(text, "{\"count\":3,\"event\":{\"count\":4,\"event\":{\"noise_multiplier\":"
                              "0.5,\"type\":\"gaussian\"},\"type\":\"self_composed\"},\"type\":"
                              "\"self_composed\"}");
    free(text);
    /* an open count has no JSON */
    ev->count_open = true;
    assert_null(event_json_dumps(ev));
    acct_event_free(ev);
}

static void allocation_failures_are_clean(void **state)
{
    (void)state;
    json_t *j = load(TREE);
    for (long n = 1;; n++) {
        acct_event *ev;
        dp_err err = {0};
        dp_alloc_fail_after(n);
        int rc = event_json_parse(j, false, "event", &ev, &err);
        dp_alloc_fail_after(0);
        if (rc == DP_OK) {
            acct_event_free(ev);
            break;
        }
        assert_int_equal(rc, DP_ENOMEM);
        assert_null(ev);
    }
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_every_node_type),
        cmocka_unit_test(errors_name_the_full_path),
        cmocka_unit_test(nulls_are_open_parameters_only_when_allowed),
        cmocka_unit_test(dumps_inverts_parse_byte_for_byte),
        cmocka_unit_test(allocation_failures_are_clean),
    };
    return cmocka_run_group_tests_name("service_event_json", tests, NULL, NULL);
}
