/*
 * Unit tests for service/http_accept: finding the end of a first request's header block, and the
 * checks made before a socket is handed to libmicrohttpd (issue #10, D14: these requests
 * used to get MHD's HTML errors).
 */
#include "tests/support/test_util.h"

#include <string.h>

#include "service/http/accept.h"

static size_t end_of(const char *s)
{
    return http_accept_header_end(s, strlen(s));
}

static void header_end_needs_the_empty_line(void **state)
{
    (void)state;
    assert_int_equal(end_of("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), 27);
    assert_int_equal(end_of("GET / HTTP/1.1\r\nHost: x\r\n\r\n{\"a\":1}"), 27);
    assert_int_equal(end_of("GET / HTTP/1.1\nHost: x\n\n"), 24);
    assert_int_equal(end_of("GET / HTTP/1.1\r\n\r\n"), 18);
    assert_int_equal(end_of("GET / HTTP/1.1\r\nHost: x\r\n"), 0);
    assert_int_equal(end_of("GET / HTTP/1.1\r\nHost: x\r\n\r"), 0);
    assert_int_equal(end_of("GET / HTTP/1.1\r\nX-Slow: aaaa"), 0);
    assert_int_equal(end_of(""), 0);
    /* leading empty lines are not the end of the block */
    assert_int_equal(end_of("\r\n\r\n"), 0);
    assert_int_equal(end_of("\r\nGET / HTTP/1.1\r\n\r\n"), 20);
}

static int check(const char *head, char *msg, char *method, char *path)
{
    return http_accept_check_head(head, strlen(head), msg, 200, method, 16, path, 64);
}

static void good_heads_pass(void **state)
{
    (void)state;
    char msg[200], method[16], path[64];
    assert_int_equal(check("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", msg, method, path), 0);
    assert_string_equal(method, "GET");
    assert_string_equal(path, "/healthz");
    assert_int_equal(
        check("POST /v1/echo HTTP/1.0\r\nContent-Length:  16 \r\n\r\n", msg, method, path), 0);
    assert_int_equal(
        check("POST /v1/echo HTTP/1.1\r\ntransfer-encoding: Chunked\r\n\r\n", msg, method, path),
        0);
}

/* Obsolete line folding (RFC 9112 5.2) is refused: MHD 0.9.75 appended the continuation to the
 * previous header's name, so "Content-Length: 35\r\n 0" lost its Content-Length and the body was
 * served as a second request. */
static void obs_fold_refused(void **state)
{
    (void)state;
    char msg[200], method[16], path[64];
    assert_int_equal(check("GET / HTTP/1.1\r\nX-A: b\r\n  folded\r\n\r\n", msg, method, path), 400);
    assert_non_null(strstr(msg, "folding"));
    assert_int_equal(
        check("POST /v1/echo HTTP/1.1\r\nContent-Length: 35\r\n 0\r\n\r\n", msg, method, path),
        400);
    assert_int_equal(
        check("POST /v1/echo HTTP/1.1\r\nContent-Length: 35\r\n\t0\r\n\r\n", msg, method, path),
        400);
}

static void bad_request_lines(void **state)
{
    (void)state;
    char msg[200], method[16], path[64];
    assert_int_equal(check("GET /healthz\r\n\r\n", msg, method, path), 400);
    assert_non_null(strstr(msg, "HTTP/0.9"));
    assert_string_equal(path, "/healthz"); /* still named in the log */
    assert_int_equal(check("GET  / HTTP/1.1\r\n\r\n", msg, method, path), 400);
    assert_int_equal(check("GET / HTTP/1.1 extra\r\n\r\n", msg, method, path), 400);
    assert_int_equal(check("G(T / HTTP/1.1\r\n\r\n", msg, method, path), 400);
    assert_int_equal(check("GET / FTP/1.1\r\n\r\n", msg, method, path), 400);
    assert_int_equal(check("GET / HTTP/2.0\r\n\r\n", msg, method, path), 505);
    assert_non_null(strstr(msg, "HTTP/2.0"));
    assert_int_equal(check("PRI * HTTP/2.0\r\n\r\n", msg, method, path), 505);
    assert_string_equal(method, "PRI");
    assert_int_equal(check("GET / HTTP/1.10\r\n\r\n", msg, method, path), 505);
}

static void bad_header_lines(void **state)
{
    (void)state;
    char msg[200], method[16], path[64];
    assert_int_equal(check("GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", msg, method, path), 400);
    assert_non_null(strstr(msg, "line 2"));
    assert_int_equal(check("GET / HTTP/1.1\r\n: empty\r\n\r\n", msg, method, path), 400);
    assert_int_equal(check("GET / HTTP/1.1\r\nHost : x\r\n\r\n", msg, method, path), 400);
}

static void content_length_and_transfer_encoding(void **state)
{
    (void)state;
    char msg[200], method[16], path[64];
    const char *bad_lengths[] = {"+16", "-1", "0x10", "1 6", "", "1234567890123456789", "16,16"};
    for (size_t i = 0; i < sizeof bad_lengths / sizeof bad_lengths[0]; i++) {
        char head[128];
        snprintf(head, sizeof head, "POST / HTTP/1.1\r\nContent-Length: %s\r\n\r\n",
                 bad_lengths[i]);
        assert_int_equal(check(head, msg, method, path), 400);
        assert_non_null(strstr(msg, "Content-Length"));
    }
    assert_int_equal(
        check("POST / HTTP/1.1\r\nContent-Length: 123456789012345678\r\n\r\n", msg, method, path),
        0);
    assert_int_equal(check("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", msg, method, path),
                     501);
    assert_int_equal(
        check("POST / HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n", msg, method, path),
        501);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(header_end_needs_the_empty_line),
        cmocka_unit_test(good_heads_pass),
        cmocka_unit_test(obs_fold_refused),
        cmocka_unit_test(bad_request_lines),
        cmocka_unit_test(bad_header_lines),
        cmocka_unit_test(content_length_and_transfer_encoding),
    };
    return cmocka_run_group_tests_name("service_http_accept", tests, NULL, NULL);
}
