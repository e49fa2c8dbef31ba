/*
 * test_accounting_logmath.c: the log-space helpers (accounting/logmath.h) against values computed
 * by hand or in closed form, including the infinities and the cancellation-prone regions.
 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

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

/* The rule as first written: nextafter above a sum the TwoSum error says was rounded down. */
static double sum_up_reference(double a, double b)
{
    double s = a + b;
    if (!isfinite(s))
        return s;
    double bb = s - a;
    double e = (a - (s - bb)) + (b - bb);
    return e > 0 ? nextafter(s, DP_INF) : s;
}

static bool same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static void upward_sums_equal_nextafter_of_the_rounded_sum(void **state)
{
    (void)state;
    static const double edge[] = {0.0,
                                  -0.0,
                                  1.0,
                                  -1.0,
                                  0x1p-1074,
                                  -0x1p-1074,
                                  0x1p-1022,
                                  -0x1p-1022,
                                  DBL_MAX,
                                  -DBL_MAX,
                                  1e308,
                                  0.1,
                                  -0.1,
                                  1e-300,
                                  3.0,
                                  DP_INF,
                                  -DP_INF,
                                  DP_NAN,
                                  0x1.fffffffffffffp-1,
                                  0x1p53,
                                  -0x1p53,
                                  1e-17,
                                  -1e-17};
    const size_t ne = sizeof edge / sizeof edge[0];
    double acc[600], x[600], want[600];
    size_t n = 0;
    for (size_t i = 0; i < ne; i++)
        for (size_t j = 0; j < ne; j++) {
            assert_true(same_bits(dp_sum_up(edge[i], edge[j]), sum_up_reference(edge[i], edge[j])));
            if (n < 600 && !isnan(edge[i]) && !isnan(edge[j])) {
                acc[n] = edge[i];
                x[n] = edge[j];
                want[n] = sum_up_reference(edge[i], edge[j]);
                n++;
            }
        }
    dp_vec_sum_up(acc, x, n);
    for (size_t i = 0; i < n; i++)
        assert_true(same_bits(acc[i], want[i]));
    /* random operands of mixed signs and magnitudes, most sums inexact */
    uint64_t st = 0x9e3779b97f4a7c15u;
    size_t rounded_up = 0;
    for (int r = 0; r < 200; r++) {
        for (size_t i = 0; i < 500; i++) {
            double v[2];
            for (int k = 0; k < 2; k++) {
                st ^= st << 13;
                st ^= st >> 7;
                st ^= st << 17;
                double m = (double)(st >> 11) * 0x1p-53;
                int ex = (int)(st % 120) - 60;
                v[k] = ldexp(m, ex) * ((st >> 3) & 1 ? -1.0 : 1.0);
            }
            acc[i] = v[0];
            x[i] = v[1];
            want[i] = sum_up_reference(v[0], v[1]);
            assert_true(same_bits(dp_sum_up(v[0], v[1]), want[i]));
            rounded_up += want[i] != v[0] + v[1];
        }
        dp_vec_sum_up(acc, x, 500);
        for (size_t i = 0; i < 500; i++)
            assert_true(same_bits(acc[i], want[i]));
    }
    assert_true(rounded_up > 10000); /* the rounding branch was taken */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(log_add_matches_closed_form_and_handles_infinities),
        cmocka_unit_test(log_sub_is_exact_near_equal_arguments),
        cmocka_unit_test(log1mexp_and_logexpm1_switch_branches_accurately),
        cmocka_unit_test(logsumexp_and_streaming_accumulator_agree),
        cmocka_unit_test(probabilities_never_underflow_to_zero),
        cmocka_unit_test(upward_sums_equal_nextafter_of_the_rounded_sum),
    };
    return cmocka_run_group_tests_name("accounting_logmath", tests, NULL, NULL);
}
