/*
 * dp_log.c: see dp_log.h. Each line is formatted into a local buffer and written with one write(2)
 * to fd 2, so lines from different threads do not interleave (a single write of at most PIPE_BUF
 * bytes to a pipe is atomic, and a regular file's offset is updated under the kernel's per-file
 * lock), and there is no stdio lock for the HTTP threads to contend on (one access line is written
 * per request).
 *
 * Escaping: the message and the request id go through dp_log_escape, so bytes 0x00-0x1f and 0x7f
 * (newlines, ESC sequences that would drive a terminal, NUL) and the C1 controls (a byte 0x80-0x9f
 * outside a valid UTF-8 sequence, such as 0x9b, the one-byte CSI of some terminals, and the UTF-8
 * encodings of U+0080-U+009F) are written as \xHH and a
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

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF), or 0 when there is none. p[0] >= 0x80. */
static size_t utf8_len(const unsigned char *p)
{
    unsigned char lo = 0x80, hi = 0xbf;
    size_t n;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        n = 2;
    else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        n = 3;
        if (p[0] == 0xe0)
            lo = 0xa0;
        else if (p[0] == 0xed)
            hi = 0x9f;
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        n = 4;
        if (p[0] == 0xf0)
            lo = 0x90;
        else if (p[0] == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return n;
}

size_t dp_log_escape(const char *in, char *out, size_t out_len)
{
    static const char hex[] = "0123456789abcdef";
    size_t w = 0;
    if (out_len == 0)
        return 0;
    const unsigned char *p = (const unsigned char *)in;
    while (*p != '\0') {
        /* n bytes at p, escaped (C0, DEL, C1: a lone byte 0x80-0x9f or U+0080-U+009F) or not */
        size_t n = 1;
        int esc = *p < 0x20 || *p == 0x7f;
        if (*p >= 0x80) {
            size_t u = utf8_len(p);
            if (u > 0) {
                n = u;
                esc = u == 2 && p[0] == 0xc2 && p[1] <= 0x9f;
            } else {
                esc = *p <= 0x9f;
            }
        }
        size_t need = esc ? 4 * n : n;
        if (w + need >= out_len)
            break; /* truncate at a whole character or escape */
        for (size_t i = 0; i < n; i++) {
            if (esc) {
                out[w++] = '\\';
                out[w++] = 'x';
                out[w++] = hex[p[i] >> 4];
                out[w++] = hex[p[i] & 0xf];
            } else {
                out[w++] = (char)p[i];
            }
        }
        p += n;
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
