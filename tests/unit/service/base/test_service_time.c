/*
 * Unit tests for service/base/time.c: RFC 3339 writing and reading in both directions (round trips,
 * leap years, offsets, fractional seconds, the exact grammar the API accepts, malformed text
 * refused) and the two clocks. Expected instants were computed with Python's datetime.
 */
#include "tests/support/test_util.h"

#include <string.h>

#include "service/base/time.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static void format_writes_utc_with_milliseconds(void **state)
{
    (void)state;
    const struct {
        int64_t ms;
        const char *want;
    } cases[] = {
        {0, "1970-01-01T00:00:00.000Z"},
        {1, "1970-01-01T00:00:00.001Z"},
        {-1, "1969-12-31T23:59:59.999Z"}, /* rounded down: the fraction is never negative */
        {-14182940000LL, "1969-07-20T20:17:40.000Z"},
        {951782400000LL, "2000-02-29T00:00:00.000Z"},   /* leap day of a year divisible by 400 */
        {-2203891200000LL, "1900-03-01T00:00:00.000Z"}, /* 1900 is not a leap year */
        {1709190296789LL, "2024-02-29T07:04:56.789Z"},
        {-62167219200000LL, "0000-01-01T00:00:00.000Z"},
        {253402300799999LL, "9999-12-31T23:59:59.999Z"},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        char buf[TIME_RFC3339_MAX];
        assert_int_equal(time_format_rfc3339(cases[i].ms, buf, sizeof buf), 24);
        assert_string_equal(buf, cases[i].want);
    }
}

static void format_refuses_years_outside_four_digits_and_short_buffers(void **state)
{
    (void)state;
    char buf[TIME_RFC3339_MAX] = "x";
    assert_int_equal(time_format_rfc3339(253402300800000LL, buf, sizeof buf), -1); /* 10000 */
    assert_string_equal(buf, "");
    assert_int_equal(time_format_rfc3339(-62167219200001LL, buf, sizeof buf), -1); /* year -1 */
    assert_int_equal(time_format_rfc3339(INT64_MAX, buf, sizeof buf), -1);
    assert_int_equal(time_format_rfc3339(0, buf, TIME_RFC3339_MAX - 1), -1);
    assert_int_equal(time_format_rfc3339(0, NULL, TIME_RFC3339_MAX), -1);
}

static int64_t parsed(const char *s)
{
    int64_t out = 42;
    if (time_parse_rfc3339(s, &out) != 0)
        fail_msg("\"%s\" was refused", s);
    return out;
}

static void parse_reads_offsets_fractions_and_leap_days(void **state)
{
    (void)state;
    assert_int_equal(parsed("1970-01-01T00:00:00Z"), 0);
    assert_int_equal(parsed("2000-02-29T00:00:00Z"), 951782400000LL);
    assert_int_equal(parsed("1900-03-01T00:00:00Z"), -2203891200000LL);
    assert_int_equal(parsed("0000-01-01T00:00:00Z"), -62167219200000LL);
    assert_int_equal(parsed("9999-12-31T23:59:59.999Z"), 253402300799999LL);
    /* offsets: the same instant written in three zones */
    assert_int_equal(parsed("2024-02-29T07:04:56.789Z"), 1709190296789LL);
    assert_int_equal(parsed("2024-02-29T12:34:56.789+05:30"), 1709190296789LL);
    assert_int_equal(parsed("2024-02-28T21:04:56.789-10:00"), 1709190296789LL);
    assert_int_equal(parsed("1970-01-01T00:00:00+23:59"), -(23 * 60 + 59) * 60 * 1000LL);
    /* fractions: one to three digits scale up, more are truncated, never rounded */
    assert_int_equal(parsed("1970-01-01T00:00:00.5Z"), 500);
    assert_int_equal(parsed("1970-01-01T00:00:00.05Z"), 50);
    assert_int_equal(parsed("1970-01-01T00:00:00.123Z"), 123);
    assert_int_equal(parsed("1970-01-01T00:00:00.123999999Z"), 123);
    /* the separators and zone letters RFC 3339 section 5.6 allows */
    assert_int_equal(parsed("1970-01-01t00:00:01z"), 1000);
    assert_int_equal(parsed("1970-01-01 00:00:01Z"), 1000);
    /* a leap second is the first instant of the next minute */
    assert_int_equal(parsed("2016-12-31T23:59:60Z"), 1483228800000LL);
}

/* Today's grammar, kept exactly so that the API's answers do not change: sscanf "%Nd" fields, no
 * day-of-month check. */
static void parse_keeps_the_lenient_corners_of_the_grammar(void **state)
{
    (void)state;
    assert_int_equal(parsed("2026-02-30T00:00:00Z"), 1772409600000LL); /* = 2026-03-02 */
    assert_int_equal(parsed("2025-12-31T23:00:00Z"), 1767222000000LL);
    assert_int_equal(parsed("2026-01-01T-1:00:00Z"), 1767222000000LL); /* signed hour field */
    int64_t out;
    assert_int_equal(time_parse_rfc3339("-001-01-01T00:00:00Z", &out), 0); /* the year -1 */
    assert_int_equal(out, -62167219200000LL - 365LL * 86400 * 1000);
}

static void parse_refuses_malformed_text_and_leaves_out_alone(void **state)
{
    (void)state;
    const char *bad[] = {
        "",
        "2026-11-22",
        "2026-11-22T13:00:00",      /* no zone */
        "2026-11-22T13:00Z",        /* no seconds */
        "2026-11-22T13:00:00.Z",    /* a point without digits */
        "2026-11-22T13:00:00,5Z",   /* comma fraction */
        "2026-11-22T13:00:00+0530", /* offset without colon */
        "2026-11-22T13:00:00+5:30",
        "2026-11-22T13:00:00+24:00",
        "2026-11-22T13:00:00+05:60",
        "2026-11-22T13:00:00Z ", /* trailing text */
        "2026-11-22T13:00:00ZZ",
        "2026-11-22X13:00:00Z", /* bad separator */
        "2026-11-22T13:00:00 UTC",
        "2026-1-22T13:00:00Z", /* short field */
        "26-11-22T13:00:00Z",
        "20260-11-22T13:00:00Z",
        "2026/11/22T13:00:00Z",
        "2026-00-22T13:00:00Z",
        "2026-13-22T13:00:00Z",
        "2026-11-00T13:00:00Z",
        "2026-11-32T13:00:00Z",
        "2026-11-22T24:00:00Z",
        "2026-11-22T13:60:00Z",
        "2026-11-22T13:00:61Z",
        "now",
    };
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        int64_t out = 42;
        if (time_parse_rfc3339(bad[i], &out) != -1)
            fail_msg("\"%s\" was accepted", bad[i]);
        assert_int_equal(out, 42);
    }
    int64_t out = 42;
    assert_int_equal(time_parse_rfc3339(NULL, &out), -1);
    assert_int_equal(out, 42);
}

static void format_and_parse_round_trip(void **state)
{
    (void)state;
    /* every millisecond value written can be read back, across leap and non-leap years, 0..9999 */
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    const int64_t lo = -62167219200000LL, span = 253402300799999LL - lo + 1;
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int64_t ms = lo + (int64_t)(x % (uint64_t)span);
        char buf[TIME_RFC3339_MAX];
        assert_int_equal(time_format_rfc3339(ms, buf, sizeof buf), 24);
        int64_t back = 0;
        assert_int_equal(time_parse_rfc3339(buf, &back), 0);
        if (back != ms)
            fail_msg("%lld -> %s -> %lld", (long long)ms, buf, (long long)back);
    }
    /* and text with an offset comes back in UTC */
    int64_t t = parsed("2024-02-29T23:30:00.250-01:00");
    char buf[TIME_RFC3339_MAX];
    assert_int_equal(time_format_rfc3339(t, buf, sizeof buf), 24);
    assert_string_equal(buf, "2024-03-01T00:30:00.250Z");
}

static void clocks_tick_in_milliseconds(void **state)
{
    (void)state;
    /* the wall clock is after this file was written (2026) and within four-digit years */
    int64_t now = time_now_ms();
    assert_true(now > parsed("2026-01-01T00:00:00Z"));
    assert_true(now < 253402300799999LL);
    /* the monotonic clock never goes back */
    int64_t a = time_mono_ms(), b = time_mono_ms();
    assert_true(a >= 0 && b >= a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(format_writes_utc_with_milliseconds),
        cmocka_unit_test(format_refuses_years_outside_four_digits_and_short_buffers),
        cmocka_unit_test(parse_reads_offsets_fractions_and_leap_days),
        cmocka_unit_test(parse_keeps_the_lenient_corners_of_the_grammar),
        cmocka_unit_test(parse_refuses_malformed_text_and_leaves_out_alone),
        cmocka_unit_test(format_and_parse_round_trip),
        cmocka_unit_test(clocks_tick_in_milliseconds),
    };
    return cmocka_run_group_tests_name("service_time", tests, NULL, NULL);
}
