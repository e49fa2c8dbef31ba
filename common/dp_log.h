/*
 * dp_log: levelled logging to stderr, for service/ only (libraries never print; STYLE.md 3).
 *
 * One line per call: RFC 3339 UTC time, level, thread id, request id (or "-"), message. Messages
 * are sanitised (no newlines), so a client-controlled string cannot forge a log line. The level is
 * set once at start-up, before threads exist.
 */
#ifndef DP_COMMON_DP_LOG_H
#define DP_COMMON_DP_LOG_H

enum { DP_LOG_DEBUG = 0, DP_LOG_INFO, DP_LOG_WARN, DP_LOG_ERROR, DP_LOG_OFF };

/* Parses "debug", "info", "warn", "error", "off"; returns -1 if unknown. */
int dp_log_level_parse(const char *s);
/* Set once at start-up, before any thread starts. */
void dp_log_set_level(int level);
int dp_log_get_level(void);

/* req_id may be NULL. */
void dp_log(int level, const char *req_id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
