/*
 * dp_sha256: SHA-256 (FIPS PUB 180-4, "Secure Hash Standard", 2015, section 6.2), written from the
 * standard for hashing bearer tokens (service/api/auth.c stores only token hashes, never tokens).
 *
 * Why here: GSL has no hash and linking a crypto library for one function is not worth a
 * dependency. SHA-256 of a 256-bit random token is a one-way lookup key, so a plain (unsalted,
 * fast) hash is the right tool; it is not a password hash.
 *
 * API: streaming (init/update/final) and one-shot. No allocation, no I/O, cannot fail.
 * On x86-64 CPUs with the SHA extensions (SHA-NI) the blocks are compressed with them, picked once
 * per process from CPUID: 5-6x faster (docs/BENCHMARKS.md); the digests are the same.
 * Thread-safety: a dp_sha256_ctx belongs to one thread; the only shared state is that choice (an
 * atomic, decided alike by every thread).
 */
#ifndef DP_COMMON_DP_SHA256_H
#define DP_COMMON_DP_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DP_SHA256_DIGEST_BYTES 32
#define DP_SHA256_HEX_CHARS    64 /* without the terminating NUL */

typedef struct dp_sha256_ctx {
    uint32_t h[8];     /* chaining state H(i) (FIPS 180-4 6.2.2) */
    uint64_t n_bytes;  /* message length so far, bytes */
    uint8_t block[64]; /* pending partial block */
    size_t n_block;    /* bytes used in block, < 64 */
} dp_sha256_ctx;

void dp_sha256_init(dp_sha256_ctx *c);
/* Appends len bytes of data (borrowed); data may be NULL when len is 0. */
void dp_sha256_update(dp_sha256_ctx *c, const void *data, size_t len);
/* Writes the 32-byte digest to out and wipes the context. */
void dp_sha256_final(dp_sha256_ctx *c, uint8_t out[DP_SHA256_DIGEST_BYTES]);

/* One-shot digest of len bytes. */
void dp_sha256(const void *data, size_t len, uint8_t out[DP_SHA256_DIGEST_BYTES]);
/* Whether blocks are compressed with the SHA extensions. */
bool dp_sha256_hw(void);
/* Tests: on = false makes every later digest use the portable code, on = true the SHA extensions
 * where the CPU has them. */
void dp_sha256_use_hw(bool on);

/* Lower-case hex of a digest into out (65 bytes including the NUL). */
void dp_sha256_hex(const uint8_t digest[DP_SHA256_DIGEST_BYTES], char out[DP_SHA256_HEX_CHARS + 1]);

#endif
