/*
 * Unit tests for service/jobs/round_json.c: a round's metrics text is written directly, so these
 * check that it is the text jansson would print for it (parsed and printed again it is the same
 * bytes: numbers as json_real, strings escaped as jansson escapes them, members in order), that
 * names with quotes, backslashes, control characters and UTF-8 come back as they were, and the
 * rules of each figure: the ledger's epsilon for a bound silo, the job's for the others, null for
 * a silo without an event, for a non-finite figure and for the global model of a local job.
 */
#include "tests/support/test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/dp_math.h"
#include "service/jobs/round_json.h"

#define K 3

typedef struct fixture {
    job_prepared p;
    fl_silo_data silo_data[K];
    job_silo_plan plan[K];
    uint32_t group[K];
    fl_silo_metrics sm[K];
    fl_round_metrics m;
    bool stopped[K];
    uint64_t trained[K], charged[K];
    double eps[K], ledger_eps[K];
} fixture;

/* Three silos: 0 bound to ledger silo 7, 1 unbound, 2 without an event; fedhdp groups {0, 2} and
 * {1}, the second opted out. */
static void fixture_init(fixture *f, const char *algorithm, bool regression, bool has_global,
                         bool groups)
{
    static acct_event event; /* only its address is read */
    static char names[K][48] = {"plain", "quo\"te\\back\nline\x1b\x01 ctl\t\b\f\r\x1f\x7f|",
                                "\xc3\xbcnic/ode"};
    memset(f, 0, sizeof *f);
    for (size_t k = 0; k < K; k++) {
        f->silo_data[k].name = names[k];
        f->silo_data[k].n_train = 10 + k;
        f->silo_data[k].n_test = 3 + k;
        f->plan[k].round_event = k < 2 ? &event : NULL;
        f->plan[k].ledger_silo = k == 0 ? 7 : 0;
        f->group[k] = k == 1;
        f->sm[k].active = k != 1;
        f->sm[k].n_train = 10 + k;
        f->sm[k].n_test = 3 + k;
        f->sm[k].cluster = k == 2 ? 2 : -1;
        f->stopped[k] = k == 1;
        f->trained[k] = 4 - k;
        f->charged[k] = 5 - k;
    }
    /* numbers across the writer's paths: exponents, the smallest subnormal, -0, non-finite */
    f->sm[0].sgd_loss = 0.1;
    f->sm[0].personal =
        (fl_model_metrics){.test_metric = 2.5e-7, .test_loss = 1e20, .train_loss = 0.8125};
    f->sm[0].global =
        (fl_model_metrics){.test_metric = 1.0 / 3.0, .test_loss = -0.0, .train_loss = 12345.0};
    f->sm[1].sgd_loss = DP_NAN;
    f->sm[1].personal =
        (fl_model_metrics){.test_metric = 5e-324, .test_loss = DP_INF, .train_loss = 1e-100};
    f->sm[1].global = (fl_model_metrics){.test_metric = DP_NAN,
                                         .test_loss = 1.7976931348623157e308,
                                         .train_loss = 123456789012345678.0};
    f->sm[2].sgd_loss = 879509728804817.625; /* a tie at the 17th digit: printf's rounding */
    f->sm[2].personal = (fl_model_metrics){
        .test_metric = 0.30000000000000004, .test_loss = 2.0, .train_loss = 0.75};
    f->sm[2].global =
        (fl_model_metrics){.test_metric = -DP_INF, .test_loss = 1e-5, .train_loss = 0.5};
    f->eps[0] = 0.5;
    f->eps[1] = 1.25;
    f->eps[2] = DP_NAN;
    f->ledger_eps[0] = 0.75;
    f->ledger_eps[1] = f->ledger_eps[2] = DP_NAN;
    f->m = (fl_round_metrics){.round = 4,
                              .regression = regression,
                              .has_global = has_global,
                              .n_silos = K,
                              .n_trained = 2,
                              .silo = f->sm,
                              .global = {.pooled_test_metric = 0.25,
                                         .pooled_test_loss = 0.5,
                                         .train_loss = 0.125,
                                         .mean_test_metric = 0.375,
                                         .worst_test_metric = 0.0625,
                                         .spread_test_metric = 1e-9},
                              .personal = {.pooled_test_metric = 0.3,
                                           .pooled_test_loss = DP_NAN,
                                           .train_loss = 0.1,
                                           .mean_test_metric = 0.2,
                                           .worst_test_metric = 0.4,
                                           .worst_silo = 2,
                                           .spread_test_metric = 0.05}};
    f->p.fed.n_silos = K;
    f->p.fed.silo = f->silo_data;
    f->p.silo = f->plan;
    f->p.cfg.algorithm = algorithm;
    if (groups) {
        f->p.silo_group = f->group;
        f->p.spec.n_hdp_groups = 2;
        strcpy(f->p.spec.hdp_groups[0].name, "g \"one\"");
        strcpy(f->p.spec.hdp_groups[1].name, "two");
        f->p.spec.hdp[1].opt_out = true;
    }
}

/* The text, checked to be what jansson prints for its own parse; the parse (caller decrefs). */
static json_t *round_text(fixture *f, double clip, double wall_ms)
{
    char *text = job_round_json(&f->p, &f->m, f->stopped, f->trained, f->charged, f->eps,
                                f->ledger_eps, clip, NULL, wall_ms);
    assert_non_null(text);
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (j == NULL)
        fail_msg("not JSON (%s at %d): %s", je.text, je.position, text);
    char *again = json_dumps(j, JSON_COMPACT);
    assert_non_null(again);
    if (strcmp(text, again) != 0) {
        size_t i = 0;
        while (text[i] == again[i])
            i++;
        fail_msg("differs from jansson's print at byte %zu:\n  ours:    %.80s\n  jansson: %.80s", i,
                 text + (i > 20 ? i - 20 : 0), again + (i > 20 ? i - 20 : 0));
    }
    free(again);
    free(text);
    return j;
}

static const char *keys(json_t *o, char *buf, size_t cap)
{
    buf[0] = '\0';
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        (void)v;
        if (buf[0] != '\0')
            strncat(buf, ",", cap - strlen(buf) - 1);
        strncat(buf, k, cap - strlen(buf) - 1);
    }
    return buf;
}

/* v is the real x bit for bit (a real even when x is integral: "12345.0"), null when not finite */
static void same_number(json_t *v, double x)
{
    if (!isfinite(x)) {
        assert_true(json_is_null(v));
        return;
    }
    assert_true(json_is_real(v));
    double y = json_number_value(v);
    if (memcmp(&x, &y, sizeof x) != 0)
        fail_msg("%.17g came back as %.17g", x, y);
}

static void fedhdp_round_is_janssons_text(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f, "fedhdp", false, true, true);
    json_t *j = round_text(&f, 1.5, 0.77646800000000005);
    char b[512];
    assert_string_equal(keys(j, b, sizeof b),
                        "round,wall_ms,metric,silos_trained,global,personalized,silos,groups,clip");
    assert_int_equal(json_integer_value(json_object_get(j, "round")), 5);
    assert_string_equal(json_string_value(json_object_get(j, "metric")), "accuracy");
    same_number(json_object_get(j, "clip"), 1.5);
    json_t *g = json_object_get(j, "global");
    assert_string_equal(keys(g, b, sizeof b),
                        "test_accuracy,test_loss,train_loss,mean_test_accuracy,"
                        "worst_test_accuracy,spread_test_accuracy");
    same_number(json_object_get(g, "spread_test_accuracy"), 1e-9);
    same_number(json_object_get(json_object_get(j, "personalized"), "test_loss"), DP_NAN);
    json_t *silos = json_object_get(j, "silos");
    assert_int_equal(json_array_size(silos), K);
    for (size_t k = 0; k < K; k++) {
        json_t *s = json_array_get(silos, k);
        assert_string_equal(json_string_value(json_object_get(s, "silo")), f.silo_data[k].name);
        assert_string_equal(keys(s, b, sizeof b),
                            k == 2 ? "silo,silo_id,stopped,trained,rounds_trained,rounds_charged,"
                                     "n_train,n_test,epsilon,job_epsilon,test_accuracy,test_loss,"
                                     "train_loss,sgd_loss,cluster,group,global"
                                   : "silo,silo_id,stopped,trained,rounds_trained,rounds_charged,"
                                     "n_train,n_test,epsilon,job_epsilon,test_accuracy,test_loss,"
                                     "train_loss,sgd_loss,group,global");
        same_number(json_object_get(s, "test_accuracy"), f.sm[k].personal.test_metric);
        same_number(json_object_get(s, "test_loss"), f.sm[k].personal.test_loss);
        same_number(json_object_get(s, "train_loss"), f.sm[k].personal.train_loss);
        same_number(json_object_get(s, "sgd_loss"), f.sm[k].sgd_loss);
        json_t *sg = json_object_get(s, "global");
        same_number(json_object_get(sg, "test_accuracy"), f.sm[k].global.test_metric);
        same_number(json_object_get(sg, "test_loss"), f.sm[k].global.test_loss);
        same_number(json_object_get(sg, "train_loss"), f.sm[k].global.train_loss);
        assert_int_equal(json_integer_value(json_object_get(s, "rounds_charged")), 5 - (int)k);
        assert_int_equal(json_integer_value(json_object_get(s, "rounds_trained")), 4 - (int)k);
        assert_int_equal(json_integer_value(json_object_get(s, "n_train")), 10 + (int)k);
        assert_int_equal(json_integer_value(json_object_get(s, "n_test")), 3 + (int)k);
        assert_true(json_is_boolean(json_object_get(s, "stopped")));
        assert_int_equal(json_is_true(json_object_get(s, "stopped")), f.stopped[k]);
        assert_int_equal(json_is_true(json_object_get(s, "trained")), f.sm[k].active);
    }
    assert_int_equal(json_integer_value(json_object_get(j, "silos_trained")), 2);
    for (int which = 0; which < 2; which++) {
        const fl_agg_metrics *a = which ? &f.m.personal : &f.m.global;
        json_t *o = json_object_get(j, which ? "personalized" : "global");
        same_number(json_object_get(o, "test_accuracy"), a->pooled_test_metric);
        same_number(json_object_get(o, "test_loss"), a->pooled_test_loss);
        same_number(json_object_get(o, "train_loss"), a->train_loss);
        same_number(json_object_get(o, "mean_test_accuracy"), a->mean_test_metric);
        same_number(json_object_get(o, "worst_test_accuracy"), a->worst_test_metric);
        same_number(json_object_get(o, "spread_test_accuracy"), a->spread_test_metric);
    }
    /* the ledger's figure for the bound silo, the job's for the unbound one, none without event */
    same_number(json_object_get(json_array_get(silos, 0), "epsilon"), 0.75);
    same_number(json_object_get(json_array_get(silos, 0), "job_epsilon"), 0.5);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(silos, 0), "silo_id")), 7);
    same_number(json_object_get(json_array_get(silos, 1), "epsilon"), 1.25);
    assert_true(json_is_null(json_object_get(json_array_get(silos, 1), "silo_id")));
    assert_true(json_is_null(json_object_get(json_array_get(silos, 2), "epsilon")));
    assert_true(json_is_null(json_object_get(json_array_get(silos, 2), "job_epsilon")));
    assert_int_equal(json_integer_value(json_object_get(json_array_get(silos, 2), "cluster")), 2);
    /* groups: the largest job epsilon of silos with an event; the opted-out group not private */
    json_t *gs = json_object_get(j, "groups");
    assert_int_equal(json_array_size(gs), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(gs, 0), "name")),
                        "g \"one\"");
    same_number(json_object_get(json_array_get(gs, 0), "epsilon"), 0.5);
    assert_true(json_is_true(json_object_get(json_array_get(gs, 0), "private")));
    same_number(json_object_get(json_array_get(gs, 1), "epsilon"), 1.25);
    assert_true(json_is_false(json_object_get(json_array_get(gs, 1), "private")));
    assert_string_equal(json_string_value(json_object_get(json_array_get(silos, 1), "group")),
                        "two");
    json_decref(j);
}

static void local_regression_round_has_null_globals(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f, "local", true, false, false);
    json_t *j = round_text(&f, DP_NAN, 12.0);
    char b[512];
    assert_string_equal(keys(j, b, sizeof b),
                        "round,wall_ms,metric,silos_trained,global,personalized,silos");
    assert_true(json_is_null(json_object_get(j, "global")));
    assert_string_equal(json_string_value(json_object_get(j, "metric")), "mse");
    json_t *s0 = json_array_get(json_object_get(j, "silos"), 0);
    assert_true(json_is_null(json_object_get(s0, "global")));
    same_number(json_object_get(s0, "test_mse"), 2.5e-7);
    same_number(json_object_get(s0, "test_loss"), 1e20);
    same_number(json_object_get(j, "wall_ms"), 12.0);
    assert_true(json_is_real(json_object_get(j, "wall_ms"))); /* "12.0", as a real */
    assert_null(json_object_get(s0, "group"));
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fedhdp_round_is_janssons_text),
        cmocka_unit_test(local_regression_round_has_null_globals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
