/*
 * dp_sha256.c: SHA-256 per FIPS PUB 180-4 (2015). Section numbers below refer to that standard.
 * Written from the specification; checked in tests/unit/test_common_sha256.c against the NIST
 * example vectors ("abc", the 448-bit message, one million 'a') and against coreutils sha256sum.
 */
#include "common/dp_sha256.h"

#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DP_SHA_X86 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define DP_SHA_X86 0
#endif

/* 4.2.2: the first 32 bits of the fractional parts of the cube roots of the first 64 primes. */
static const uint32_t K256[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u,
    0xab1c5ed5u, 0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu,
    0x9bdc06a7u, 0xc19bf174u, 0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu,
    0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau, 0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u,
    0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u, 0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu,
    0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u, 0xa2bfe8a1u, 0xa81a664bu,
    0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u, 0x19a4c116u,
    0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u,
    0xc67178f2u};

static uint32_t rotr(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32u - n));
}

/* 6.2.2: process one 512-bit block. */
static void compress_portable(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[64];
    for (size_t t = 0; t < 16; t++)
        w[t] = ((uint32_t)p[4 * t] << 24) | ((uint32_t)p[4 * t + 1] << 16) |
               ((uint32_t)p[4 * t + 2] << 8) | (uint32_t)p[4 * t + 3];
    for (size_t t = 16; t < 64; t++) {
        uint32_t s0 =
            rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);          /* sigma0 (4.6) */
        uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10); /* sigma1 (4.7) */
        w[t] = s1 + w[t - 7] + s0 + w[t - 16];
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (size_t t = 0; t < 64; t++) {
        uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25); /* Sigma1 (4.5) */
        uint32_t ch = (e & f) ^ (~e & g);                     /* Ch (4.2) */
        uint32_t t1 = hh + S1 + ch + K256[t] + w[t];
        uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22); /* Sigma0 (4.4) */
        uint32_t maj = (a & b) ^ (a & c) ^ (b & c);           /* Maj (4.3) */
        uint32_t t2 = S0 + maj;
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
}

#if DP_SHA_X86
/* The same 6.2.2 computation with the SHA extensions (Intel SHA-NI: SHA256RNDS2, SHA256MSG1,
 * SHA256MSG2; Intel 64 and IA-32 Architectures Software Developer's Manual, vol. 2). The state is
 * kept as the two registers those instructions take: ABEF (A in the highest lane) and CDGH. Two
 * SHA256RNDS2 make four rounds; after each pair the registers hold ABEF and CDGH again. The
 * schedule W_16..W_63 (4.6, 4.7 in 6.2.2 step 1) is built four words at a time: MSG1 adds
 * sigma0(W_{t-15}) to W_{t-16}, the add brings W_{t-7}, MSG2 adds sigma1(W_{t-2}), lane by lane
 * (so that W_{t+2} uses the W_t it has just made). n blocks of 64 bytes from p. */
__attribute__((target("sha,sse4.1,ssse3"))) static void compress_sha_ni(uint32_t h[8],
                                                                        const uint8_t *p, size_t n)
{
    /* bytes of each 32-bit word reversed: the message words are big-endian (3.1) */
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i abcd = _mm_loadu_si128((const __m128i *)&h[0]); /* lanes A B C D (lane 0 lowest) */
    __m128i efgh = _mm_loadu_si128((const __m128i *)&h[4]); /* lanes E F G H */
    __m128i badc = _mm_shuffle_epi32(abcd, 0xB1);           /* B A D C */
    __m128i hgfe = _mm_shuffle_epi32(efgh, 0x1B);           /* H G F E */
    __m128i s0 = _mm_alignr_epi8(badc, hgfe, 8);            /* F E B A: ABEF */
    __m128i s1 = _mm_blend_epi16(hgfe, badc, 0xF0);         /* H G D C: CDGH */
    for (; n > 0; n--, p += 64) {
        __m128i save0 = s0, save1 = s1, w[16];
        for (int i = 0; i < 16; i++) {
            if (i < 4)
                w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), bswap);
            else /* W_{4i..4i+3} */
                w[i] = _mm_sha256msg2_epu32(
                    _mm_add_epi32(_mm_sha256msg1_epu32(w[i - 4], w[i - 3]),
                                  _mm_alignr_epi8(w[i - 1], w[i - 2], 4)), /* W_{t-7} */
                    w[i - 1]);
            __m128i wk = _mm_add_epi32(w[i], _mm_loadu_si128((const __m128i *)&K256[4 * i]));
            s1 = _mm_sha256rnds2_epu32(s1, s0, wk); /* rounds 4i, 4i+1: s1 is ABEF now */
            s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(wk, 0x0E)); /* 4i+2, 4i+3 */
        }
        s0 = _mm_add_epi32(s0, save0);
        s1 = _mm_add_epi32(s1, save1);
    }
    __m128i abef = _mm_shuffle_epi32(s0, 0x1B); /* A B E F */
    __m128i cdgh = _mm_shuffle_epi32(s1, 0xB1); /* G H C D */
    abcd = _mm_blend_epi16(abef, cdgh, 0xF0);   /* A B C D */
    efgh = _mm_alignr_epi8(cdgh, abef, 8);      /* E F G H */
    _mm_storeu_si128((__m128i *)&h[0], abcd);
    _mm_storeu_si128((__m128i *)&h[4], efgh);
}

static bool cpu_has_sha_ni(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSSE3) || !(c & bit_SSE4_1))
        return false;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
}
#endif

/* 1: the SHA extensions, 0: the portable code, -1: not decided yet (every thread decides alike). */
static atomic_int use_hw = -1;

static bool hw(void)
{
    int v = atomic_load_explicit(&use_hw, memory_order_relaxed);
    if (v < 0) {
        int d = 0;
#if DP_SHA_X86
        d = cpu_has_sha_ni();
#endif
        /* only from "not decided": a dp_sha256_use_hw that came first keeps its choice */
        v = atomic_compare_exchange_strong_explicit(&use_hw, &v, d, memory_order_relaxed,
                                                    memory_order_relaxed)
                ? d
                : v;
    }
    return v == 1;
}

bool dp_sha256_hw(void)
{
    return hw();
}

void dp_sha256_use_hw(bool on)
{
    bool can = false;
#if DP_SHA_X86
    can = cpu_has_sha_ni();
#endif
    atomic_store_explicit(&use_hw, on && can, memory_order_relaxed);
}

/* n blocks of 64 bytes from p into h. */
static void compress(uint32_t h[8], const uint8_t *p, size_t n)
{
#if DP_SHA_X86
    if (hw()) {
        compress_sha_ni(h, p, n);
        return;
    }
#endif
    for (; n > 0; n--, p += 64)
        compress_portable(h, p);
}

void dp_sha256_init(dp_sha256_ctx *c)
{
    /* 5.3.3: initial hash value H(0). */
    static const uint32_t H0[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                                   0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
    memcpy(c->h, H0, sizeof H0);
    c->n_bytes = 0;
    c->n_block = 0;
}

void dp_sha256_update(dp_sha256_ctx *c, const void *data, size_t len)
{
    if (len == 0) /* data may be NULL */
        return;
    const uint8_t *p = data;
    c->n_bytes += len;
    if (c->n_block > 0) { /* complete the pending block first */
        size_t take = 64 - c->n_block;
        if (take > len)
            take = len;
        memcpy(c->block + c->n_block, p, take);
        c->n_block += take;
        p += take;
        len -= take;
        if (c->n_block < 64)
            return;
        compress(c->h, c->block, 1);
        c->n_block = 0;
    }
    if (len >= 64) { /* whole blocks straight from the input */
        compress(c->h, p, len / 64);
        p += len / 64 * 64;
        len %= 64;
    }
    if (len > 0) {
        memcpy(c->block, p, len);
        c->n_block = len;
    }
}

void dp_sha256_final(dp_sha256_ctx *c, uint8_t out[DP_SHA256_DIGEST_BYTES])
{
    /* 5.1.1: append 0x80, zero-pad to 56 mod 64, then the 64-bit big-endian bit length. */
    uint64_t bits = c->n_bytes * 8u;
    c->block[c->n_block++] = 0x80;
    if (c->n_block > 56) {
        memset(c->block + c->n_block, 0, 64 - c->n_block);
        compress(c->h, c->block, 1);
        c->n_block = 0;
    }
    memset(c->block + c->n_block, 0, 56 - c->n_block);
    for (size_t i = 0; i < 8; i++)
        c->block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
    compress(c->h, c->block, 1);
    for (size_t i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(c->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)c->h[i];
    }
    memset(c, 0, sizeof *c);
}

void dp_sha256(const void *data, size_t len, uint8_t out[DP_SHA256_DIGEST_BYTES])
{
    dp_sha256_ctx c;
    dp_sha256_init(&c);
    dp_sha256_update(&c, data, len);
    dp_sha256_final(&c, out);
}

void dp_sha256_hex(const uint8_t digest[DP_SHA256_DIGEST_BYTES], char out[DP_SHA256_HEX_CHARS + 1])
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < DP_SHA256_DIGEST_BYTES; i++) {
        out[2 * i] = hex[digest[i] >> 4];
        out[2 * i + 1] = hex[digest[i] & 15];
    }
    out[DP_SHA256_HEX_CHARS] = '\0';
}
