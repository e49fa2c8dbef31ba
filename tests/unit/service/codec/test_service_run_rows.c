/*
 * test_service_run_rows.c: the per-client rows writer (service/codec/run_rows.h): numbers read
 * back as the same double (random bit patterns over the whole range, and the fast path's edges),
 * the very text jansson writes for each of them, rows and their ids, and the stored layout read
 * back.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/dp_math.h"
#include "service/codec/run_rows.h"
#include "tests/support/test_util.h"

static uint64_t next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void round_trips(double x)
{
    char buf[RUN_ROWS_NUM_MAX];
    size_t n = run_rows_fmt_double(buf, x);
    assert_int_equal(n, strlen(buf));
    char *end = NULL;
    double y = strtod(buf, &end);
    if (memcmp(&x, &y, sizeof x) != 0 || *end != '\0')
        fail_msg("%.17g written as \"%s\" reads back as %.17g", x, buf, y);
    assert_true(strpbrk(buf, ".e") != NULL); /* reads as a real */
    /* the very text jansson writes for it, so that rows and the rest of an answer look alike */
    json_t *r = json_real(x);
    char *j = r ? json_dumps(r, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    if (j == NULL || strcmp(buf, j) != 0)
        fail_msg("%.17g written as \"%s\", jansson writes \"%s\"", x, buf, j ? j : "(null)");
    free(j);
    json_decref(r);
}

static void test_round_trip_random_bits(void **state)
{
    (void)state;
    uint64_t s = 20261127;
    for (int i = 0; i < 400000; i++) {
        uint64_t b = next(&s);
        double x;
        memcpy(&x, &b, sizeof x);
        if (isfinite(x))
            round_trips(x);
    }
}

static void test_round_trip_fast_range(void **state)
{
    (void)state;
    uint64_t s = 15;
    for (int i = 0; i < 400000; i++) {
        /* log-uniform over the fast path's range [1e-11, 1e43) and a little beyond */
        double u = (double)(next(&s) >> 11) / 9007199254740992.0;
        double x = pow(10.0, -12.0 + 56.0 * u) * (i % 2 ? -1.0 : 1.0);
        round_trips(x);
        round_trips(nextafter(x, 0.0));
        round_trips(nextafter(x, DP_INF));
    }
    const double edges[] = {1e-11,
                            1e43,
                            1e16,
                            1e17,
                            9.9999999999999995e16,
                            0.1,
                            0.3,
                            1.0,
                            100.0,
                            5e-5,
                            1e-4,
                            123456789012345678.0,
                            0.0,
                            -0.0,
                            2.2250738585072014e-308,
                            1.7976931348623157e308,
                            5e-324};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        round_trips(edges[i]);
        round_trips(nextafter(edges[i], 0.0));
        if (edges[i] < 1.7976931348623157e308)
            round_trips(nextafter(edges[i], DP_INF));
    }
}

static void test_forms(void **state)
{
    (void)state;
    char buf[RUN_ROWS_NUM_MAX];
    run_rows_fmt_double(buf, 3.0);
    assert_string_equal(buf, "3.0");
    run_rows_fmt_double(buf, -0.0);
    assert_string_equal(buf, "-0.0");
    run_rows_fmt_double(buf, 0.5);
    assert_string_equal(buf, "0.5");
    run_rows_fmt_double(buf, 1e20);
    assert_string_equal(buf, "1e20");
    run_rows_fmt_double(buf, 2.5e-7);
    assert_string_equal(buf, "2.4999999999999999e-7");
    run_rows_fmt_double(buf, 1e-100);
    assert_string_equal(buf, "1e-100");
    run_rows_fmt_double(buf, -1e300);
    assert_string_equal(buf, "-1.0000000000000001e300");
    run_rows_fmt_double(buf, 12345.0);
    assert_string_equal(buf, "12345.0");
    run_rows_fmt_double(buf, DP_NAN);
    assert_string_equal(buf, "null");
    run_rows_fmt_double(buf, -DP_INF);
    assert_string_equal(buf, "null");
}

/* Rows as JSON: the same values jansson reads, ids by index and as text, positions. */
static void test_rows(void **state)
{
    (void)state;
    run_rows r = {0};
    assert_int_equal(run_rows_add_field(&r, "posterior_mean", 2, true), 0);
    assert_int_equal(run_rows_add_field(&r, "shrinkage", 1, false), 0);
    assert_int_equal(run_rows_alloc(&r, 3, RUN_IDS_TEXT), 0);
    const char *ids[] = {"\"a\"", "7", "\"c\\\"d\""};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(run_rows_push_id(&r, i, ids[i], strlen(ids[i])), 0);
        r.vals[i * 3] = 0.1 * (double)(i + 1);
        r.vals[i * 3 + 1] = -1.0 / 3.0;
        r.vals[i * 3 + 2] = i == 2 ? DP_NAN : 0.25;
    }
    run_text t = {0};
    assert_int_equal(run_text_reserve(&t, 1), 0);
    t.s[t.len++] = '[';
    assert_int_equal(run_rows_write(&r, 0, 3, false, false, &t), 0);
    assert_int_equal(run_text_reserve(&t, 1), 0);
    t.s[t.len++] = ']';
    t.s[t.len] = '\0';
    json_error_t je;
    json_t *a = json_loads(t.s, 0, &je);
    assert_non_null(a);
    assert_int_equal(json_array_size(a), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(a, 0), "id")), "a");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(a, 1), "id")), 7);
    assert_string_equal(json_string_value(json_object_get(json_array_get(a, 2), "id")), "c\"d");
    json_t *pm = json_object_get(json_array_get(a, 1), "posterior_mean");
    assert_true(json_real_value(json_array_get(pm, 0)) == 0.2);
    assert_true(json_real_value(json_array_get(pm, 1)) == -1.0 / 3.0);
    assert_true(json_is_null(json_object_get(json_array_get(a, 2), "shrinkage")));
    json_decref(a);

    /* a page: positions and index ids count from the run's row base */
    t.len = 0;
    r.ids = RUN_IDS_INDEX;
    r.base = 40;
    assert_int_equal(run_rows_write(&r, 1, 2, false, true, &t), 0);
    assert_string_equal(t.s, "{\"position\":42,\"id\":41,\"posterior_mean\":[0.20000000000000001,"
                             "-0.33333333333333331],\"shrinkage\":0.25}");
    free(t.s);

    /* the layout read back */
    char *lt = run_rows_layout_text(&r);
    assert_non_null(lt);
    run_rows back = {0};
    assert_int_equal(run_rows_layout_parse(&back, lt, strlen(lt)), 0);
    assert_int_equal(back.n_fields, 2);
    assert_int_equal(back.w, 3);
    assert_int_equal(back.ids, RUN_IDS_INDEX);
    assert_string_equal(back.field[0].name, "posterior_mean");
    assert_true(back.field[0].vec && !back.field[1].vec);
    free(lt);
    assert_int_equal(run_rows_layout_parse(&back, "{\"version\":2}", 13), -1);
    assert_int_equal(
        run_rows_layout_parse(&back, "{\"version\":1,\"ids\":\"x\",\"fields\":[]}", 35), -1);
    run_rows_clear(&back);
    run_rows_clear(&r);
}

/* Rows of 5 clients x (2 + 1) values with text ids, made from seed. */
static void digest_rows(run_rows *r, unsigned seed)
{
    memset(r, 0, sizeof *r);
    assert_int_equal(run_rows_add_field(r, "posterior_mean", 2, true), 0);
    assert_int_equal(run_rows_add_field(r, "shrinkage", 1, false), 0);
    assert_int_equal(run_rows_alloc(r, 5, RUN_IDS_TEXT), 0);
    for (size_t i = 0; i < 5; i++) {
        char id[16];
        int n = snprintf(id, sizeof id, "\"c%zu\"", i);
        assert_int_equal(run_rows_push_id(r, i, id, (size_t)n), 0);
        for (size_t k = 0; k < 3; k++)
            r->vals[i * 3 + k] = (double)(seed + i * 3 + k) / 7.0;
    }
}

/* The rows' digest is a function of the rows' numbers alone: equal rows give equal digests, a
 * value's last bit, a value's sign or a field's name each change it, and an id does not. */
static void test_digest(void **state)
{
    (void)state;
    run_rows a, b;
    char da[17], db[17];
    digest_rows(&a, 1);
    digest_rows(&b, 1);
    run_rows_digest(&a, da);
    run_rows_digest(&b, db);
    assert_int_equal(strlen(da), 16);
    assert_string_equal(da, db);
    uint64_t w;
    memcpy(&w, &b.vals[13], sizeof w); /* the last row's second value, its last bit */
    w ^= 1;
    memcpy(&b.vals[13], &w, sizeof w);
    run_rows_digest(&b, db);
    assert_string_not_equal(da, db);
    b.vals[13] = a.vals[13];
    b.vals[0] = -b.vals[0];
    run_rows_digest(&b, db);
    assert_string_not_equal(da, db);
    b.vals[0] = a.vals[0];
    b.id_text[1] = 'x'; /* "c0" -> "x0": the ids are the request's, not in the digest */
    run_rows_digest(&b, db);
    assert_string_equal(da, db);
    b.field[1].name[0] = 'S';
    run_rows_digest(&b, db);
    assert_string_not_equal(da, db);
    run_rows_clear(&a);
    run_rows_clear(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_random_bits),
        cmocka_unit_test(test_round_trip_fast_range),
        cmocka_unit_test(test_forms),
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_digest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
