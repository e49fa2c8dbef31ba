/*
 * dp_log.c: see dp_log.h. Each line is formatted into a local buffer and written with one write(2)
 * to fd 2, so lines from different threads do not interleave (a single write of at most PIPE_BUF
 * bytes to a pipe is atomic, and a regular file's offset is updated under the kernel's per-file
 * lock), and there is no stdio lock for the HTTP threads to contend on (one access line is written
 * per request).
 *
 * Escaping: the message and the request id go through dp_log_escape, so bytes 0x00-0x1f and 0x7f
 * (newlines, ESC sequences that would drive a terminal, NUL) are written as \xHH and a
 * client-controlled string (a decoded URL, a header) can neither forge a line nor reach a terminal.
 */
#include "common/dp_log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int log_level = DP_LOG_INFO; /* written once before threads start */

int dp_log_level_parse(const char *s)
{
    static const char *names[] = {"debug", "info", "warn", "error", "off"};
    if (s == NULL)
        return -1;
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

void dp_log_set_level(int level)
{
    log_level = level;
}

int dp_log_get_level(void)
{
    return log_level;
}

size_t dp_log_escape(const char *in, char *out, size_t out_len)
{
    static const char hex[] = "0123456789abcdef";
    size_t w = 0;
    if (out_len == 0)
        return 0;
    for (const unsigned char *p = (const unsigned char *)in; *p != '\0'; p++) {
        int ctl = *p < 0x20 || *p == 0x7f;
        size_t need = ctl ? 4 : 1;
        if (w + need >= out_len)
            break; /* truncate at a whole character or escape */
        if (ctl) {
            out[w++] = '\\';
            out[w++] = 'x';
            out[w++] = hex[*p >> 4];
            out[w++] = hex[*p & 0xf];
        } else {
            out[w++] = (char)*p;
        }
    }
    out[w] = '\0';
    return w;
}

void dp_log(int level, const char *req_id, const char *fmt, ...)
{
    static const char *tags[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    if (level < log_level || level < DP_LOG_DEBUG || level > DP_LOG_ERROR)
        return;
    struct timespec ts;
    struct tm tm;
    char when[32] = "?";
    if (clock_gettime(CLOCK_REALTIME, &ts) == 0 && gmtime_r(&ts.tv_sec, &tm) != NULL) {
        size_t k = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
        if (k > 0)
            snprintf(when + k, sizeof when - k, ".%03ldZ", ts.tv_nsec / 1000000L);
    }
    char raw[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    if (n < 0)
        raw[0] = '\0';
    char msg[DP_LOG_ESCAPED_MAX];
    dp_log_escape(raw, msg, sizeof msg);
    char rid[80];
    dp_log_escape(req_id ? req_id : "-", rid, sizeof rid);
    char line[DP_LOG_ESCAPED_MAX + 176];
    n = snprintf(line, sizeof line, "%s %s [%lx] %s %s\n", when, tags[level],
                 (unsigned long)pthread_self(), rid, msg);
    if (n < 0)
        return;
    size_t len = (size_t)n;
    if (len >= sizeof line) {
        len = sizeof line - 1;
        line[len - 1] = '\n';
    }
    for (size_t off = 0; off < len;) {
        ssize_t w = write(STDERR_FILENO, line + off, len - off);
        if (w <= 0)
            return; /* nowhere to report a failing stderr */
        off += (size_t)w;
    }
}
