/*
 * test_accounting_event.c: event-tree allocation, validation (with field paths and limits),
 * cloning, open parameters, and clean failure under allocation-failure injection.
 */
#include <math.h>
#include <string.h>

#include "accounting/event.h"
#include "common/dp_alloc.h"
#include "tests/test_util.h"
#include "common/dp_math.h"

static acct_event *gauss(double s)
{
    acct_event *g = acct_event_alloc(ACCT_EV_GAUSSIAN);
    assert_non_null(g);
    g->noise_multiplier = s;
    return g;
}

static acct_event *wrap(acct_event_type t, acct_event *child)
{
    acct_event *e = acct_event_alloc(t);
    assert_non_null(e);
    e->child = child;
    if (t == ACCT_EV_POISSON)
        e->sampling_rate = 0.01;
    if (t == ACCT_EV_SELF_COMPOSED)
        e->count = 10;
    return e;
}

static void alloc_marks_parameters_open_and_free_accepts_null(void **state)
{
    (void)state;
    acct_event *g = acct_event_alloc(ACCT_EV_GAUSSIAN);
    assert_true(isnan(g->noise_multiplier));
    assert_null(g->child);
    assert_int_equal(acct_event_open_params(g), ACCT_OPEN_NOISE);
    dp_err err = {0};
    assert_int_equal(acct_event_check(g, true, &err), DP_OK);
    assert_int_equal(acct_event_check(g, false, &err), DP_EINVAL);
    assert_string_equal(err.field, "noise_multiplier");
    acct_event_free(g);
    acct_event_free(NULL);
    assert_string_equal(acct_event_type_name(ACCT_EV_SWOR), "sampled_without_replacement");
}

static void check_names_the_full_path_of_a_bad_field(void **state)
{
    (void)state;
    acct_event *p = wrap(ACCT_EV_POISSON, gauss(1.1));
    p->sampling_rate = 1.5;
    acct_event *root = wrap(ACCT_EV_SELF_COMPOSED, p);
    dp_err err = {0};
    assert_int_equal(acct_event_check(root, false, &err), DP_EINVAL);
    assert_string_equal(err.field, "event.sampling_rate");
    acct_event_free(root);

    acct_event *c = acct_event_alloc(ACCT_EV_COMPOSED);
    c->n_children = 3;
    c->children = dp_calloc(3, sizeof *c->children);
    c->children[0] = gauss(2.0);
    c->children[1] = acct_event_alloc(ACCT_EV_PURE);
    c->children[1]->epsilon = 0.5;
    c->children[2] = wrap(ACCT_EV_POISSON, gauss(-1.0));
    dp_err_clear(&err);
    assert_int_equal(acct_event_check(c, false, &err), DP_EINVAL);
    assert_string_equal(err.field, "events[2].event.noise_multiplier");
    c->children[2]->child->noise_multiplier = 0.7;
    dp_err_clear(&err);
    assert_int_equal(acct_event_check(c, false, &err), DP_OK);
    /* a missing child */
    acct_event_free(c->children[2]->child);
    c->children[2]->child = NULL;
    dp_err_clear(&err);
    assert_int_equal(acct_event_check(c, false, &err), DP_EINVAL);
    assert_string_equal(err.field, "events[2].event");
    acct_event_free(c);
}

static void check_rejects_each_domain_violation(void **state)
{
    (void)state;
    struct {
        acct_event_type t;
        const char *field;
    } cases[] = {
        {ACCT_EV_ZCDP, "rho"}, {ACCT_EV_PURE, "epsilon"}, {ACCT_EV_LAPLACE, "noise_multiplier"}};
    for (size_t i = 0; i < 3; i++) {
        acct_event *e = acct_event_alloc(cases[i].t);
        e->rho = -0.1;
        e->epsilon = DP_INF;
        e->noise_multiplier = 0.0;
        dp_err err = {0};
        assert_int_equal(acct_event_check(e, true, &err), DP_EINVAL);
        assert_string_equal(err.field, cases[i].field);
        acct_event_free(e);
    }
    acct_event *s = wrap(ACCT_EV_SWOR, gauss(1.0));
    s->source_size = 100;
    s->sample_size = 101;
    dp_err err = {0};
    assert_int_equal(acct_event_check(s, false, &err), DP_EINVAL);
    assert_string_equal(err.field, "sample_size");
    s->sample_size = 10;
    dp_err_clear(&err);
    assert_int_equal(acct_event_check(s, false, &err), DP_OK);
    acct_event_free(s);
    acct_event *sc = wrap(ACCT_EV_SELF_COMPOSED, gauss(1.0));
    sc->count = ACCT_EVENT_MAX_COUNT + 1;
    dp_err_clear(&err);
    assert_int_equal(acct_event_check(sc, false, &err), DP_EINVAL);
    assert_string_equal(err.field, "count");
    sc->count = ACCT_EVENT_MAX_COUNT;
    dp_err_clear(&err);
    assert_int_equal(acct_event_check(sc, false, &err), DP_OK);
    acct_event_free(sc);
    acct_event *rs = wrap(ACCT_EV_REPEAT_SELECT, gauss(1.0));
    rs->dist.kind = ACCT_TUNE_TRUNC_NEGBIN;
    rs->dist.eta = -1.0;
    rs->dist.gamma = 0.5;
    dp_err_clear(&err);
    assert_int_equal(acct_event_check(rs, false, &err), DP_EINVAL);
    assert_string_equal(err.field, "distribution.truncated_negative_binomial.eta");
    acct_event_free(rs);
}

static void check_enforces_depth_and_node_limits(void **state)
{
    (void)state;
    acct_event *e = gauss(1.0);
    for (int d = 1; d < ACCT_EVENT_MAX_DEPTH; d++)
        e = wrap(ACCT_EV_SELF_COMPOSED, e);
    dp_err err = {0};
    assert_int_equal(acct_event_check(e, false, &err), DP_OK); /* exactly 64 levels */
    e = wrap(ACCT_EV_SELF_COMPOSED, e);
    assert_int_equal(acct_event_check(e, false, &err), DP_EINVAL);
    assert_non_null(strstr(err.msg, "deeper"));
    acct_event_free(e);

    acct_event *c = acct_event_alloc(ACCT_EV_COMPOSED);
    c->n_children = ACCT_EVENT_MAX_NODES; /* + the root = one too many */
    c->children = dp_calloc(c->n_children, sizeof *c->children);
    for (size_t i = 0; i < c->n_children; i++)
        c->children[i] = gauss(3.0);
    dp_err_clear(&err);
    assert_int_equal(acct_event_check(c, false, &err), DP_EINVAL);
    assert_non_null(strstr(err.msg, "nodes"));
    acct_event_free(c);
}

static void clone_copies_deeply_and_fill_sets_open_values(void **state)
{
    (void)state;
    acct_event *c = acct_event_alloc(ACCT_EV_COMPOSED);
    c->n_children = 2;
    c->children = dp_calloc(2, sizeof *c->children);
    c->children[0] = wrap(ACCT_EV_SELF_COMPOSED, wrap(ACCT_EV_POISSON, gauss(DP_NAN)));
    c->children[1] = gauss(DP_NAN);
    assert_int_equal(acct_event_open_params(c), ACCT_OPEN_NOISE);
    acct_event *k = acct_event_clone(c);
    assert_non_null(k);
    assert_ptr_not_equal(k->children[0], c->children[0]);
    acct_event_fill_open(k, ACCT_OPEN_NOISE, 2.385);
    assert_close(k->children[0]->child->child->noise_multiplier, 2.385, 0, 0);
    assert_close(k->children[1]->noise_multiplier, 2.385, 0, 0);
    assert_true(isnan(c->children[1]->noise_multiplier)); /* original untouched */
    assert_int_equal(acct_event_open_params(k), 0);
    acct_event_free(k);
    c->children[0]->count_open = true;
    assert_int_equal(acct_event_open_params(c), ACCT_OPEN_NOISE | ACCT_OPEN_COUNT);
    acct_event_free(c);
}

static void clone_fails_cleanly_under_allocation_failure(void **state)
{
    (void)state;
    acct_event *c = acct_event_alloc(ACCT_EV_COMPOSED);
    c->n_children = 3;
    c->children = dp_calloc(3, sizeof *c->children);
    for (int i = 0; i < 3; i++)
        c->children[i] = wrap(ACCT_EV_POISSON, gauss(1.0 + i));
    for (long n = 1;; n++) {
        dp_alloc_fail_after(n);
        acct_event *k = acct_event_clone(c);
        dp_alloc_fail_after(0);
        if (k != NULL) {
            assert_true(n > 7); /* 1 root + 1 array + 6 nodes */
            acct_event_free(k);
            break;
        }
    }
    acct_event_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(alloc_marks_parameters_open_and_free_accepts_null),
        cmocka_unit_test(check_names_the_full_path_of_a_bad_field),
        cmocka_unit_test(check_rejects_each_domain_violation),
        cmocka_unit_test(check_enforces_depth_and_node_limits),
        cmocka_unit_test(clone_copies_deeply_and_fill_sets_open_values),
        cmocka_unit_test(clone_fails_cleanly_under_allocation_failure),
    };
    return cmocka_run_group_tests_name("accounting_event", tests, NULL, NULL);
}
