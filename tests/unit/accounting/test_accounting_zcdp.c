/*
 * test_accounting_zcdp.c: rho of trees and the zCDP -> (eps, delta) conversions.
 */
#include <math.h>

#include "accounting/zcdp.h"
#include "common/dp_alloc.h"
#include "tests/support/test_util.h"

static void rho_of_mechanisms_and_compositions(void **state)
{
    (void)state;
    acct_event *c = acct_event_composed((acct_event *[]){acct_event_gaussian(10.0), /* 1/200 */
                                                         acct_event_zcdp(0.0125),   /* 0.0125 */
                                                         acct_event_pure(0.1),      /* 0.005 */
                                                         acct_event_laplace(20.0)}, /* 1/800 */
                                        4);
    acct_event *s = acct_event_self_composed(1000, c);
    double rho;
    dp_err err = {0};
    assert_int_equal(acct_zcdp_eval(s, &rho, &err), DP_OK);
    assert_close(rho, 1000.0 * (0.005 + 0.0125 + 0.005 + 0.00125), 1e-14, 0);
    /* subsampling is refused with the node's path */
    c->children[1] = acct_event_poisson(0.1, c->children[1]);
    dp_err_clear(&err);
    assert_int_equal(acct_zcdp_eval(s, &rho, &err), DP_EINVAL);
    assert_string_equal(err.field, "event.events[1].type");
    acct_event_free(s);
}

static void bun_steinke_conversion_matches_its_closed_form(void **state)
{
    (void)state;
    /* Bun & Steinke 2016, Prop. 1.6 and 1.3: sigma 10, T 1000 -> rho 5, eps = rho + 2 sqrt(rho
     * log(1/delta)) = 18.57 at 1e-4; sigma 100 -> rho 0.05, eps 1.407. */
    double e, a;
    dp_err err = {0};
    assert_int_equal(acct_zcdp_to_epsilon(5.0, 1e-4, ACCT_ZCDP_BS2016, &e, &a, &err), DP_OK);
    assert_close(e, 5.0 + 2.0 * sqrt(5.0 * log(1e4)), 1e-15, 0);
    assert_close(e, 18.57, 0, 0.005);
    assert_int_equal(acct_zcdp_to_epsilon(0.05, 1e-4, ACCT_ZCDP_BS2016, &e, &a, &err), DP_OK);
    assert_close(e, 1.407, 0, 0.0005);
}

static void cks_is_tighter_and_delta_inverts_epsilon(void **state)
{
    (void)state;
    double rhos[] = {1e-6, 0.0123, 0.5, 5.0, 300.0}, deltas[] = {1e-12, 1e-5, 0.01};
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 3; j++) {
            double bs, cks, a, d;
            dp_err err = {0};
            assert_int_equal(
                acct_zcdp_to_epsilon(rhos[i], deltas[j], ACCT_ZCDP_BS2016, &bs, &a, &err), DP_OK);
            assert_int_equal(
                acct_zcdp_to_epsilon(rhos[i], deltas[j], ACCT_ZCDP_CKS2020, &cks, &a, &err), DP_OK);
            assert_true(cks <= bs && cks >= 0.0 && a > 1.0);
            if (cks ==
                0.0) /* (0, delta)-DP already: e.g. rho 1e-6, delta 0.01 (TV <= sqrt(rho/2)) */
                continue;
            assert_int_equal(acct_zcdp_to_delta(rhos[i], cks, ACCT_ZCDP_CKS2020, &d, &a, &err),
                             DP_OK);
            assert_close(d, deltas[j], 1e-8, 0);
            assert_int_equal(acct_zcdp_to_delta(rhos[i], bs, ACCT_ZCDP_BS2016, &d, &a, &err),
                             DP_OK);
            assert_close(d, deltas[j], 1e-10, 0);
        }
    double e;
    dp_err err = {0};
    assert_int_equal(acct_zcdp_to_epsilon(-1.0, 1e-5, ACCT_ZCDP_CKS2020, &e, NULL, &err),
                     DP_EINVAL);
    assert_string_equal(err.field, "rho");
    acct_zcdp_conversion c;
    dp_err_clear(&err);
    assert_int_equal(acct_zcdp_conversion_parse("cks2020", &c, &err), DP_OK);
    assert_int_equal(c, ACCT_ZCDP_CKS2020);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rho_of_mechanisms_and_compositions),
        cmocka_unit_test(bun_steinke_conversion_matches_its_closed_form),
        cmocka_unit_test(cks_is_tighter_and_delta_inverts_epsilon),
    };
    return cmocka_run_group_tests_name("accounting_zcdp", tests, NULL, NULL);
}
