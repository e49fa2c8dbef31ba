/*
 * test_accounting_logmath.c: the log-space helpers (accounting/logmath.h) against values computed
 * by hand or in closed form, including the infinities and the cancellation-prone regions.
 */
#include <math.h>

#include <gsl/gsl_math.h>

#include "accounting/logmath.h"
#include "tests/support/test_util.h"
#include "common/dp_math.h"

/* closed-form values: a few ulps */
#define TOL 4e-16

static void log_add_matches_closed_form_and_handles_infinities(void **state)
{
    (void)state;
    assert_close(dp_log_add(log(2.385), log(0.75)), log(3.135), TOL, 0);
    assert_close(dp_log_add(0.0, 0.0), M_LN2, TOL, 0);
    assert_close(dp_log_add(1000.0, 1000.0), 1000.0 + M_LN2, TOL, 0); /* no overflow */
    assert_close(dp_log_add(-1000.0, -1000.0), -1000.0 + M_LN2, TOL, 0);
    assert_close(dp_log_add(-HUGE_VAL, 3.5), 3.5, 0, 0);
    assert_true(dp_log_add(-HUGE_VAL, -HUGE_VAL) == -HUGE_VAL);
    assert_true(dp_log_add(HUGE_VAL, 2.0) == HUGE_VAL);
    assert_true(isnan(dp_log_add(DP_NAN, 2.0)));
    /* tiny second term: log(1 + 1e-20) = 1e-20 exactly representable to full precision */
    assert_close(dp_log_add(0.0, log(1e-20)), 1e-20, 1e-15, 0);
}

static void log_sub_is_exact_near_equal_arguments(void **state)
{
    (void)state;
    assert_close(dp_log_sub(log(3.135), log(0.75)), log(2.385), TOL, 0);
    /* log(e^1e-10 - 1) ~ log(1e-10): naive exp/log loses 6 digits here */
    assert_close(dp_log_sub(1e-10, 0.0), log(expm1(1e-10)), 1e-15, 0);
    assert_true(dp_log_sub(2.0, 2.0) == -HUGE_VAL);
    assert_true(isnan(dp_log_sub(1.0, 2.0)));
    assert_close(dp_log_sub(5.0, -HUGE_VAL), 5.0, 0, 0);
    assert_close(dp_log_sub(800.0, 799.0), 800.0 + log1p(-exp(-1.0)), TOL, 0);
}

static void log1mexp_and_logexpm1_switch_branches_accurately(void **state)
{
    (void)state;
    assert_close(dp_log1mexp(-1e-12), log(-expm1(-1e-12)), 1e-15, 0);
    assert_close(dp_log1mexp(-50.0), log1p(-exp(-50.0)), TOL, 0);
    assert_close(dp_log1mexp(-M_LN2), -M_LN2, TOL, 0);
    assert_true(dp_log1mexp(0.0) == -HUGE_VAL);
    assert_true(isnan(dp_log1mexp(0.1)));
    assert_close(dp_logexpm1(1e-300), log(1e-300), TOL, 0);
    assert_close(dp_logexpm1(2.385), log(expm1(2.385)), TOL, 0);
    assert_close(dp_logexpm1(700.0), 700.0, TOL, 0);
    assert_close(dp_logexpm1(1e6), 1e6, TOL, 0); /* exp would overflow */
    assert_true(dp_logexpm1(0.0) == -HUGE_VAL);
}

static void logsumexp_and_streaming_accumulator_agree(void **state)
{
    (void)state;
    double x[] = {-3.2, 710.0, 709.5, -HUGE_VAL, 12.0, 710.0};
    double want = 710.0 + log(2.0 + exp(-0.5) + exp(12.0 - 710.0) + exp(-3.2 - 710.0));
    assert_close(dp_logsumexp(x, 6), want, TOL, 0);
    dp_lse s;
    dp_lse_init(&s);
    assert_true(dp_lse_value(&s) == -HUGE_VAL);
    for (int i = 0; i < 6; i++)
        dp_lse_add(&s, x[i]);
    assert_close(dp_lse_value(&s), want, TOL, 0);
    assert_true(dp_logsumexp(x, 0) == -HUGE_VAL);
    double y[] = {1.0, HUGE_VAL};
    assert_true(dp_logsumexp(y, 2) == HUGE_VAL);
    double z[] = {1.0, DP_NAN};
    assert_true(isnan(dp_logsumexp(z, 2)));
    dp_lse_add(&s, HUGE_VAL);
    assert_true(dp_lse_value(&s) == HUGE_VAL);
}

static void probabilities_never_underflow_to_zero(void **state)
{
    (void)state;
    assert_true(dp_exp_prob_up(-1e6) > 0.0);
    assert_true(dp_exp_prob_up(-HUGE_VAL) == 0.0);
    assert_close(dp_exp_prob_up(log(1e-5)), 1e-5, 1e-15, 0);
    assert_close(dp_exp_prob_up(0.5), 1.0, 0, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(log_add_matches_closed_form_and_handles_infinities),
        cmocka_unit_test(log_sub_is_exact_near_equal_arguments),
        cmocka_unit_test(log1mexp_and_logexpm1_switch_branches_accurately),
        cmocka_unit_test(logsumexp_and_streaming_accumulator_agree),
        cmocka_unit_test(probabilities_never_underflow_to_zero),
    };
    return cmocka_run_group_tests_name("accounting_logmath", tests, NULL, NULL);
}
