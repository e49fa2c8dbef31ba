/* Clocks and RFC 3339 text. Contract in time.h. */
#include "service/base/time.h"

#include <stdio.h>
#include <time.h>

int64_t time_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t time_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int time_format_rfc3339(int64_t unix_ms, char *buf, size_t size)
{
    if (buf == NULL || size < TIME_RFC3339_MAX)
        return -1;
    buf[0] = '\0';
    /* floor division, so times before 1970 get a non-negative millisecond part */
    int64_t sec = unix_ms / 1000, ms = unix_ms % 1000;
    if (ms < 0) {
        ms += 1000;
        sec -= 1;
    }
    time_t t = (time_t)sec;
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL || tm.tm_year + 1900 < 0 || tm.tm_year + 1900 > 9999)
        return -1;
    int n = snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)ms);
    if (n < 0 || (size_t)n >= size) {
        buf[0] = '\0';
        return -1;
    }
    return n;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant, "chrono-compatible low-level
 * date algorithms", days_from_civil). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

int time_parse_rfc3339(const char *s, int64_t *out)
{
    int y, mo, d, h, mi, sec, n = 0;
    if (s == NULL ||
        sscanf(s, "%4d-%2d-%2d%*1[Tt ]%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 ||
        n != 19 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
        return -1;
    const char *p = s + n;
    int64_t ms = 0;
    if (*p == '.') {
        p++;
        int digits = 0;
        while (*p >= '0' && *p <= '9') {
            if (digits < 3)
                ms = ms * 10 + (*p - '0');
            digits++;
            p++;
        }
        if (digits == 0)
            return -1;
        for (; digits < 3; digits++)
            ms *= 10;
    }
    int64_t off_min = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om, k = 0;
        if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &k) != 2 || k != 5 || oh > 23 || om > 59)
            return -1;
        off_min = (oh * 60 + om) * (*p == '+' ? 1 : -1);
        p += 6;
    } else {
        return -1;
    }
    if (*p != '\0')
        return -1;
    int64_t days = days_from_civil(y, mo, d);
    *out = ((days * 86400 + h * 3600 + mi * 60 + sec) - off_min * 60) * 1000 + ms;
    return 0;
}
