/*
 * time: the daemon's one place for clocks and for RFC 3339 text.
 *
 * UNITS. Times are stored and passed as Unix milliseconds (int64_t, milliseconds since
 * 1970-01-01T00:00:00Z, names ending in _ms); they go out in JSON as RFC 3339 UTC text with
 * milliseconds, e.g. "2026-11-22T13:10:20.838Z", and come in as RFC 3339 text with any offset.
 * Durations and deadlines inside the process use the monotonic clock, which never jumps when the
 * wall clock is set.
 *
 * THREADS. Every function is thread-safe: none keeps state (gmtime_r, clock_gettime).
 */
#ifndef DP_SERVICE_TIME_H
#define DP_SERVICE_TIME_H

#include <stddef.h>
#include <stdint.h>

/* Size of a buffer that holds any text of time_format_rfc3339 with its NUL:
 * "YYYY-MM-DDTHH:MM:SS.mmmZ" is 24 characters. */
#define TIME_RFC3339_MAX 32

/* Wall-clock time (CLOCK_REALTIME) in Unix milliseconds, for timestamps that are stored. */
int64_t time_now_ms(void);

/* Monotonic time (CLOCK_MONOTONIC) in milliseconds since an unspecified start, for durations and
 * deadlines. Never compare it with time_now_ms. */
int64_t time_mono_ms(void);

/* Writes the RFC 3339 UTC time of unix_ms to buf as "YYYY-MM-DDTHH:MM:SS.mmmZ" (always three
 * fraction digits and "Z"). Times before 1970 are rounded down, so the millisecond part is never
 * negative. Returns the length written (24), or -1, leaving buf empty, when the year falls
 * outside 0..9999 (RFC 3339 has four-digit years) or size is below TIME_RFC3339_MAX. */
int time_format_rfc3339(int64_t unix_ms, char *buf, size_t size);

/* Reads an RFC 3339 time to Unix milliseconds. The accepted grammar, exactly (the API's answers
 * depend on it):
 *
 *   date   "YYYY-MM-DD"
 *   sep    "T", "t" or one space
 *   time   "HH:MM:SS"
 *   frac   optional: "." and one or more digits; digits after the third are dropped (truncated to
 *          the millisecond, never rounded)
 *   zone   "Z", "z", "+HH:MM" or "-HH:MM"
 *
 * and nothing after it. Date and time together are 19 characters, each number read by sscanf
 * "%Nd", so a field may be written with a sign ("-001" is the year -1). Month must be 1..12,
 * day 1..31, hour <= 23, minute <= 59, second <= 60 (a leap second counts as the first instant of
 * the next minute); the offset's hour <= 23 and minute <= 59. A day past the end of its month is
 * not refused and counts on into the next month (2026-02-30 is 2026-03-02).
 * Returns 0 and sets *out, or -1 (and leaves *out alone) on anything else, including NULL s. */
int time_parse_rfc3339(const char *s, int64_t *out);

#endif
