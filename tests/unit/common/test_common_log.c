/*
 * Unit tests for common/dp_log: control characters never reach the log raw (issue #10,
 * D17: a decoded URL with %1b[31m wrote an ESC sequence to stderr), lines stay whole, and the
 * escape cuts long text only at a whole character or escape.
 */
#include "tests/support/test_util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/dp_log.h"

static void escape_writes_every_control_character_as_hex(void **state)
{
    (void)state;
    char in[40];
    size_t k = 0;
    for (int ch = 1; ch < 0x20; ch++)
        in[k++] = (char)ch;
    in[k++] = 0x7f;
    in[k] = '\0';
    char out[256];
    size_t n = dp_log_escape(in, out, sizeof out);
    assert_int_equal(n, 32 * 4);
    assert_int_equal(strlen(out), n);
    assert_memory_equal(out, "\\x01\\x02\\x03", 12);
    assert_non_null(strstr(out, "\\x0a\\x0b\\x0c\\x0d"));
    assert_non_null(strstr(out, "\\x1b"));
    assert_string_equal(out + n - 8, "\\x1f\\x7f");
    for (size_t i = 0; i < n; i++)
        assert_true((unsigned char)out[i] >= 0x20 && (unsigned char)out[i] != 0x7f);
}

static void escape_keeps_printable_and_utf8_bytes(void **state)
{
    (void)state;
    char out[64];
    dp_log_escape("GET /v1/silos/\x1b[31mred \xc3\xa9", out, sizeof out);
    assert_string_equal(out, "GET /v1/silos/\\x1b[31mred \xc3\xa9");
}

static void escape_truncates_at_a_whole_escape(void **state)
{
    (void)state;
    char out[7]; /* room for "ab" and one escape would need 2 + 4 + NUL = 7 */
    assert_int_equal(dp_log_escape("ab\ncd", out, sizeof out), 6);
    assert_string_equal(out, "ab\\x0a");
    char small[5];
    assert_int_equal(dp_log_escape("a\x1b", small, sizeof small), 1);
    assert_string_equal(small, "a");
    char none[1];
    assert_int_equal(dp_log_escape("xyz", none, sizeof none), 0);
    assert_string_equal(none, "");
}

/* C1 controls (0x9b is a one-byte CSI on some terminals) are escaped, as lone bytes and as the
 * UTF-8 encodings of U+0080-U+009F; other UTF-8 characters, including ones whose continuation
 * bytes lie in 0x80-0x9f, are kept whole. */
static void escape_writes_c1_controls_as_hex(void **state)
{
    (void)state;
    char out[128];
    dp_log_escape("a\x9b"
                  "31m",
                  out, sizeof out); /* a lone C1 byte */
    assert_string_equal(out, "a\\x9b31m");
    dp_log_escape("\x80\x9f\xa0", out, sizeof out); /* lone 0x80, 0x9f escaped; 0xa0 is not C1 */
    assert_string_equal(out, "\\x80\\x9f\xa0");
    dp_log_escape("x\xc2\x9b"
                  "y\xc2\x80\xc2\x9f",
                  out, sizeof out); /* U+009B, U+0080, U+009F */
    assert_string_equal(out, "x\\xc2\\x9by\\xc2\\x80\\xc2\\x9f");
    /* U+00A0, U+00E9, U+20AC (E2 82 AC), U+1F600 (F0 9F 98 80): continuation bytes in 0x80-0x9f */
    dp_log_escape("\xc2\xa0\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", out, sizeof out);
    assert_string_equal(out, "\xc2\xa0\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    /* an overlong form and a truncated sequence are not UTF-8: their C1 bytes are escaped */
    dp_log_escape("\xc1\x9b\xe2\x82", out, sizeof out);
    assert_string_equal(out, "\xc1\\x9b\xe2\\x82");
    for (size_t i = 0; out[i] != '\0'; i++)
        assert_false((unsigned char)out[i] >= 0x80 && (unsigned char)out[i] <= 0x9f);
    /* a sequence is cut whole: "ab" + U+20AC needs 6 bytes */
    char five[5];
    assert_int_equal(dp_log_escape("ab\xe2\x82\xac", five, sizeof five), 2);
    assert_string_equal(five, "ab");
}

/* Captures what dp_log writes to fd 2 in a temporary file. */
static size_t capture(const char *req_id, const char *msg, char *buf, size_t len)
{
    char path[] = "/tmp/dpsilo-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fd, STDERR_FILENO) >= 0);
    dp_log(DP_LOG_WARN, req_id, "path %s end", msg);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    ssize_t n = pread(fd, buf, len - 1, 0);
    close(fd);
    assert_true(n > 0);
    buf[n] = '\0';
    return (size_t)n;
}

static void log_line_has_no_raw_control_characters(void **state)
{
    (void)state;
    dp_log_set_level(DP_LOG_DEBUG);
    char buf[4096];
    size_t n = capture("id\x1b", "/v1/silos/\x1b[31mred\r\nINFO forged\t\x7f", buf, sizeof buf);
    assert_int_equal(buf[n - 1], '\n');
    for (size_t i = 0; i + 1 < n; i++)
        assert_true((unsigned char)buf[i] >= 0x20 && (unsigned char)buf[i] != 0x7f);
    assert_non_null(
        strstr(buf, " id\\x1b path /v1/silos/\\x1b[31mred\\x0d\\x0aINFO forged\\x09\\x7f end\n"));
    assert_null(memchr(buf, '\n', n - 1)); /* one line */
}

static void long_line_is_cut_and_still_ends_with_newline(void **state)
{
    (void)state;
    dp_log_set_level(DP_LOG_DEBUG);
    static char big[1000];
    memset(big, '\x1b', sizeof big - 1); /* 999 control bytes: 3996 escaped, beyond the cap */
    big[sizeof big - 1] = '\0';
    static char buf[8192];
    size_t n = capture(NULL, big, buf, sizeof buf);
    assert_int_equal(buf[n - 1], '\n');
    assert_null(memchr(buf, '\n', n - 1));
    assert_null(memchr(buf, 0x1b, n));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(escape_writes_every_control_character_as_hex),
        cmocka_unit_test(escape_keeps_printable_and_utf8_bytes),
        cmocka_unit_test(escape_truncates_at_a_whole_escape),
        cmocka_unit_test(escape_writes_c1_controls_as_hex),
        cmocka_unit_test(log_line_has_no_raw_control_characters),
        cmocka_unit_test(long_line_is_cut_and_still_ends_with_newline),
    };
    return cmocka_run_group_tests_name("common_log", tests, NULL, NULL);
}
