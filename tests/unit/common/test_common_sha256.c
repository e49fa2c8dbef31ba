/*
 * Unit tests for common/dp_sha256: NIST FIPS 180-4 example vectors (empty, "abc", the 448-bit
 * two-block message, one million 'a') and a message whose padding crosses a block boundary;
 * expected digests were produced by coreutils sha256sum (Debian 12). Streaming in odd-sized pieces
 * must equal the one-shot digest.
 */
#include "tests/support/test_util.h"

#include <string.h>

#include "common/dp_sha256.h"

static void hex_of(const char *msg, size_t len, char out[65])
{
    uint8_t d[DP_SHA256_DIGEST_BYTES];
    dp_sha256(msg, len, d);
    dp_sha256_hex(d, out);
}

static void nist_vectors_match(void **state)
{
    (void)state;
    char hx[65];
    hex_of("", 0, hx);
    assert_string_equal(hx, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hex_of("abc", 3, hx);
    assert_string_equal(hx, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m2 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex_of(m2, strlen(m2), hx);
    assert_string_equal(hx, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* 85 bytes: the length field does not fit after the 0x80 in the second block. */
    const char *m3 =
        "The quick brown fox jumps over the lazy dog, 2.385 times: 0123456789012345678901234";
    hex_of(m3, strlen(m3), hx);
    assert_string_equal(hx, "1f0b20af4090ab171cbd71b9ccde98fc41befd02344266ddb6e3c14193afdd83");
}

static void million_a_streamed_in_odd_pieces(void **state)
{
    (void)state;
    static char buf[1000];
    memset(buf, 'a', sizeof buf);
    dp_sha256_ctx c;
    dp_sha256_init(&c);
    size_t left = 1000000, piece = 1;
    while (left > 0) {
        size_t take = piece < left ? piece : left;
        if (take > sizeof buf)
            take = sizeof buf;
        dp_sha256_update(&c, buf, take);
        left -= take;
        piece = piece * 7 % 997 + 1; /* 1, 8, 57, ...: every offset within a block is exercised */
    }
    uint8_t d[DP_SHA256_DIGEST_BYTES];
    char hx[65];
    dp_sha256_final(&c, d);
    dp_sha256_hex(d, hx);
    assert_string_equal(hx, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nist_vectors_match),
        cmocka_unit_test(million_a_streamed_in_odd_pieces),
    };
    return cmocka_run_group_tests_name("common_sha256", tests, NULL, NULL);
}
