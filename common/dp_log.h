/*
 * dp_log: levelled logging to stderr, for service/ only (libraries never print: errors come back in
 * a dp_err).
 *
 * One line per call: RFC 3339 UTC time, level, thread id, request id (or "-"), message. Messages
 * are sanitised: every control character (0x00-0x1f, 0x7f) is written as \xHH, so a
 * client-controlled string can neither forge a log line nor send escape sequences to a terminal.
 * The level is set once at start-up, before threads exist.
 */
#ifndef DP_COMMON_DP_LOG_H
#define DP_COMMON_DP_LOG_H

#include <stddef.h>

#define DP_LOG_ESCAPED_MAX 2048 /* a message is cut to this many bytes once escaped */

enum { DP_LOG_DEBUG = 0, DP_LOG_INFO, DP_LOG_WARN, DP_LOG_ERROR, DP_LOG_OFF };

/* Parses "debug", "info", "warn", "error", "off"; returns -1 if unknown. */
int dp_log_level_parse(const char *s);
/* Set once at start-up, before any thread starts. */
void dp_log_set_level(int level);
int dp_log_get_level(void);

/* Copies in to out (out_len bytes, NUL-terminated) with every byte below 0x20 and 0x7f written as
 * the four characters \xHH (lower-case hex), and the C1 controls too: a byte 0x80-0x9f that is not
 * part of a valid UTF-8 sequence, and both bytes of the UTF-8 encoding of U+0080-U+009F (C2 80 to
 * C2 9F). Other bytes are copied as they are. Stops early, at a whole character or escape, when out
 * is full. Returns the length written. */
size_t dp_log_escape(const char *in, char *out, size_t out_len);

/* req_id may be NULL. */
void dp_log(int level, const char *req_id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
