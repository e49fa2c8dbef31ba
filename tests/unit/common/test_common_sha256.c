/*
 * Unit tests for common/dp_sha256: NIST FIPS 180-4 example vectors (empty, "abc", the 448-bit
 * two-block message, one million 'a') and a message whose padding crosses a block boundary;
 * expected digests were produced by coreutils sha256sum (Debian 12). Streaming in odd-sized pieces
 * must equal the one-shot digest. Each test runs with the portable code and, where the CPU has
 * them, with the SHA extensions; random messages of every length up to 1,100 bytes and streamed
 * ones must give the same digest both ways.
 */
#include "tests/support/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dp_sha256.h"

static void hex_of(const char *msg, size_t len, char out[65])
{
    uint8_t d[DP_SHA256_DIGEST_BYTES];
    dp_sha256(msg, len, d);
    dp_sha256_hex(d, out);
}

/* state: the path to use ("portable" or "hw") */
static void pick(void **state)
{
    bool want = strcmp(*state, "hw") == 0;
    dp_sha256_use_hw(want);
    if (want && !dp_sha256_hw())
        print_message("(this CPU has no SHA extensions: the portable code again)\n");
}

static void nist_vectors_match(void **state)
{
    pick(state);
    char hx[65];
    hex_of("", 0, hx);
    assert_string_equal(hx, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hex_of("abc", 3, hx);
    assert_string_equal(hx, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    dp_sha256_ctx c; /* an empty update (data NULL) while a block is pending changes nothing */
    uint8_t d[DP_SHA256_DIGEST_BYTES];
    dp_sha256_init(&c);
    dp_sha256_update(&c, "ab", 2);
    dp_sha256_update(&c, NULL, 0);
    dp_sha256_update(&c, "c", 1);
    dp_sha256_final(&c, d);
    dp_sha256_hex(d, hx);
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
    pick(state);
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

static void digest(const uint8_t *m, size_t len, bool hw, uint8_t d[DP_SHA256_DIGEST_BYTES])
{
    dp_sha256_use_hw(hw);
    dp_sha256(m, len, d);
}

static void both_paths_agree_on_random_messages(void **state)
{
    (void)state;
    static uint8_t m[5000];
    uint64_t x = 20261128;
    for (size_t i = 0; i < sizeof m; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        m[i] = (uint8_t)(x >> 56);
    }
    uint8_t a[DP_SHA256_DIGEST_BYTES], b[DP_SHA256_DIGEST_BYTES];
    for (size_t len = 0; len <= 1100; len++) {
        digest(m + len % 7, len, false, a);
        digest(m + len % 7, len, true, b);
        if (memcmp(a, b, sizeof a) != 0)
            fail_msg("the two paths differ at length %zu", len);
    }
    /* streamed in pieces that leave every offset pending, against one-shot portable */
    digest(m, sizeof m, false, a);
    dp_sha256_use_hw(true);
    dp_sha256_ctx c;
    dp_sha256_init(&c);
    for (size_t off = 0, piece = 3; off < sizeof m; off += piece, piece = piece * 5 % 211 + 1)
        dp_sha256_update(&c, m + off, piece < sizeof m - off ? piece : sizeof m - off);
    dp_sha256_final(&c, b);
    assert_memory_equal(a, b, sizeof a);
}

int main(void)
{
    static char portable[] = "portable", hw[] = "hw";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(nist_vectors_match, portable),
        cmocka_unit_test_prestate(million_a_streamed_in_odd_pieces, portable),
        cmocka_unit_test_prestate(nist_vectors_match, hw),
        cmocka_unit_test_prestate(million_a_streamed_in_odd_pieces, hw),
        cmocka_unit_test(both_paths_agree_on_random_messages),
    };
    return cmocka_run_group_tests_name("common_sha256", tests, NULL, NULL);
}
