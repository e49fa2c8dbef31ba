/*
 * test_accounting_event.c: event-tree allocation, the constructors (fields, ownership of children
 * on failure), validation (with field paths and limits), cloning, open parameters, and clean
 * failure under allocation-failure injection. Leaks on the failure paths are caught by `make asan`
 * (LSan).
 */
#include <math.h>
#include <string.h>

#include "accounting/event.h"
#include "common/dp_math.h"
#include "common/dp_alloc.h"
#include "tests/support/test_util.h"

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

static void constructors_set_their_parameters_and_own_their_children(void **state)
{
    (void)state;
    acct_event *k[4] = {acct_event_laplace(2.5), acct_event_zcdp(0.125), acct_event_pure(0.5),
                        acct_event_swor(1000, 10, acct_event_gaussian(1.5))};
    acct_tuning_dist geo = {ACCT_TUNE_TRUNC_NEGBIN, 0, 10.0, 1.0, 0.1};
    acct_event *root = acct_event_composed(
        (acct_event *[]){
            acct_event_self_composed(7, acct_event_poisson(0.01, acct_event_gaussian(DP_NAN))),
            acct_event_repeat_select(acct_event_composed(k, 4), geo)},
        2);
    assert_non_null(root);
    assert_int_equal(root->type, ACCT_EV_COMPOSED);
    assert_int_equal(root->n_children, 2);
    const acct_event *sc = root->children[0], *rs = root->children[1];
    assert_int_equal(sc->type, ACCT_EV_SELF_COMPOSED);
    assert_int_equal(sc->count, 7);
    assert_false(sc->count_open);
    assert_int_equal(sc->child->type, ACCT_EV_POISSON);
    assert_close(sc->child->sampling_rate, 0.01, 0.0, 0.0);
    assert_int_equal(sc->child->child->type, ACCT_EV_GAUSSIAN);
    assert_true(isnan(sc->child->child->noise_multiplier));
    assert_int_equal(rs->type, ACCT_EV_REPEAT_SELECT);
    assert_int_equal(rs->dist.kind, ACCT_TUNE_TRUNC_NEGBIN);
    assert_close(rs->dist.mean, 10.0, 0.0, 0.0);
    assert_close(rs->dist.eta, 1.0, 0.0, 0.0);
    assert_close(rs->dist.gamma, 0.1, 0.0, 0.0);
    const acct_event *c = rs->child;
    assert_int_equal(c->type, ACCT_EV_COMPOSED);
    assert_int_equal(c->n_children, 4);
    assert_true(c->children != k); /* the node has an array of its own */
    assert_int_equal(c->children[0]->type, ACCT_EV_LAPLACE);
    assert_close(c->children[0]->noise_multiplier, 2.5, 0.0, 0.0);
    assert_int_equal(c->children[1]->type, ACCT_EV_ZCDP);
    assert_close(c->children[1]->rho, 0.125, 0.0, 0.0);
    assert_int_equal(c->children[2]->type, ACCT_EV_PURE);
    assert_close(c->children[2]->epsilon, 0.5, 0.0, 0.0);
    assert_int_equal(c->children[3]->type, ACCT_EV_SWOR);
    assert_int_equal(c->children[3]->source_size, 1000);
    assert_int_equal(c->children[3]->sample_size, 10);
    assert_close(c->children[3]->child->noise_multiplier, 1.5, 0.0, 0.0);
    /* one open parameter (the noise), everything else in its domain */
    assert_int_equal(acct_event_open_params(root), ACCT_OPEN_NOISE);
    dp_err err = {0};
    assert_int_equal(acct_event_check(root, true, &err), DP_OK);
    acct_event_free(root);

    acct_event *empty = acct_event_composed(NULL, 0);
    assert_non_null(empty);
    assert_int_equal(empty->n_children, 0);
    assert_null(empty->children);
    acct_event_free(empty);
}

static void constructors_do_not_validate_the_check_does(void **state)
{
    (void)state;
    acct_event *p = acct_event_poisson(1.5, acct_event_gaussian(1.0));
    assert_non_null(p);
    dp_err err = {0};
    assert_int_equal(acct_event_check(p, false, &err), DP_EINVAL);
    assert_string_equal(err.field, "sampling_rate");
    acct_event_free(p);
}

static void a_null_child_fails_the_parent_and_frees_the_siblings(void **state)
{
    (void)state;
    assert_null(acct_event_poisson(0.1, NULL));
    assert_null(acct_event_swor(10, 1, NULL));
    assert_null(acct_event_self_composed(3, NULL));
    assert_null(acct_event_repeat_select(NULL, (acct_tuning_dist){ACCT_TUNE_FIXED, 2, 0, 0, 0}));
    /* the siblings of the NULL are freed (LSan under make asan would report them otherwise) */
    acct_event *kids[3] = {acct_event_gaussian(1.0), NULL, acct_event_pure(1.0)};
    assert_null(acct_event_composed(kids, 3));
    assert_null(acct_event_composed(NULL, 2));
}

/* The DP-SGD shape of the header's example, plus a composition around it, under allocation failure
 * at every allocation in turn: each attempt returns NULL with nothing leaked (make asan), until
 * the attempt with no failure returns the whole tree. */
static acct_event *nested_tree(void)
{
    return acct_event_composed(
        (acct_event *[]){
            acct_event_self_composed(100, acct_event_poisson(0.01, acct_event_gaussian(1.1))),
            acct_event_repeat_select(acct_event_swor(1000, 10, acct_event_laplace(2.0)),
                                     (acct_tuning_dist){ACCT_TUNE_POISSON, 0, 5.0, 0, 0}),
            acct_event_zcdp(0.5)},
        3);
}

static void nested_constructors_fail_cleanly_at_every_allocation(void **state)
{
    (void)state;
    long failed_before = dp_alloc_failures();
    long n;
    for (n = 1;; n++) {
        dp_alloc_fail_after(n);
        acct_event *t = nested_tree();
        dp_alloc_fail_after(0);
        if (t != NULL) {
            assert_int_equal(t->n_children, 3);
            assert_int_equal(t->children[0]->child->child->type, ACCT_EV_GAUSSIAN);
            dp_err err = {0};
            assert_int_equal(acct_event_check(t, false, &err), DP_OK);
            acct_event_free(t);
            break;
        }
    }
    assert_int_equal(n, 10); /* 8 nodes + 1 array allocated: failures at 1..9, success at 10 */
    assert_int_equal(dp_alloc_failures() - failed_before, 9);
}

static void check_names_the_full_path_of_a_bad_field(void **state)
{
    (void)state;
    acct_event *p = acct_event_poisson(0.01, acct_event_gaussian(1.1));
    p->sampling_rate = 1.5;
    acct_event *root = acct_event_self_composed(10, p);
    dp_err err = {0};
    assert_int_equal(acct_event_check(root, false, &err), DP_EINVAL);
    assert_string_equal(err.field, "event.sampling_rate");
    acct_event_free(root);

    acct_event *c = acct_event_alloc(ACCT_EV_COMPOSED);
    c->n_children = 3;
    c->children = dp_calloc(3, sizeof *c->children);
    c->children[0] = acct_event_gaussian(2.0);
    c->children[1] = acct_event_alloc(ACCT_EV_PURE);
    c->children[1]->epsilon = 0.5;
    c->children[2] = acct_event_poisson(0.01, acct_event_gaussian(-1.0));
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
    acct_event *s = acct_event_swor(100, 101, acct_event_gaussian(1.0));
    dp_err err = {0};
    assert_int_equal(acct_event_check(s, false, &err), DP_EINVAL);
    assert_string_equal(err.field, "sample_size");
    s->sample_size = 10;
    dp_err_clear(&err);
    assert_int_equal(acct_event_check(s, false, &err), DP_OK);
    acct_event_free(s);
    acct_event *sc = acct_event_self_composed(10, acct_event_gaussian(1.0));
    sc->count = ACCT_EVENT_MAX_COUNT + 1;
    dp_err_clear(&err);
    assert_int_equal(acct_event_check(sc, false, &err), DP_EINVAL);
    assert_string_equal(err.field, "count");
    sc->count = ACCT_EVENT_MAX_COUNT;
    dp_err_clear(&err);
    assert_int_equal(acct_event_check(sc, false, &err), DP_OK);
    acct_event_free(sc);
    acct_event *rs = acct_event_repeat_select(
        acct_event_gaussian(1.0), (acct_tuning_dist){ACCT_TUNE_TRUNC_NEGBIN, 0, DP_NAN, -1.0, 0.5});
    dp_err_clear(&err);
    assert_int_equal(acct_event_check(rs, false, &err), DP_EINVAL);
    assert_string_equal(err.field, "distribution.truncated_negative_binomial.eta");
    acct_event_free(rs);
}

static void check_enforces_depth_and_node_limits(void **state)
{
    (void)state;
    acct_event *e = acct_event_gaussian(1.0);
    for (int d = 1; d < ACCT_EVENT_MAX_DEPTH; d++)
        e = acct_event_self_composed(10, e);
    dp_err err = {0};
    assert_int_equal(acct_event_check(e, false, &err), DP_OK); /* exactly 64 levels */
    e = acct_event_self_composed(10, e);
    assert_int_equal(acct_event_check(e, false, &err), DP_EINVAL);
    assert_non_null(strstr(err.msg, "deeper"));
    acct_event_free(e);

    acct_event *c = acct_event_alloc(ACCT_EV_COMPOSED);
    c->n_children = ACCT_EVENT_MAX_NODES; /* + the root = one too many */
    c->children = dp_calloc(c->n_children, sizeof *c->children);
    for (size_t i = 0; i < c->n_children; i++)
        c->children[i] = acct_event_gaussian(3.0);
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
    c->children[0] =
        acct_event_self_composed(10, acct_event_poisson(0.01, acct_event_gaussian(DP_NAN)));
    c->children[1] = acct_event_gaussian(DP_NAN);
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
        c->children[i] = acct_event_poisson(0.01, acct_event_gaussian(1.0 + i));
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
        cmocka_unit_test(constructors_set_their_parameters_and_own_their_children),
        cmocka_unit_test(constructors_do_not_validate_the_check_does),
        cmocka_unit_test(a_null_child_fails_the_parent_and_frees_the_siblings),
        cmocka_unit_test(nested_constructors_fail_cleanly_at_every_allocation),
        cmocka_unit_test(check_names_the_full_path_of_a_bad_field),
        cmocka_unit_test(check_rejects_each_domain_violation),
        cmocka_unit_test(check_enforces_depth_and_node_limits),
        cmocka_unit_test(clone_copies_deeply_and_fill_sets_open_values),
        cmocka_unit_test(clone_fails_cleanly_under_allocation_failure),
    };
    return cmocka_run_group_tests_name("accounting_event", tests, NULL, NULL);
}
