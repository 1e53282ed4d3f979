/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104): the session owner label
 * is a keyed hash of the session id, and the image store will check layer
 * digests with the same code. */
#ifndef CM_SHA256_H
#define CM_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CM_SHA256_LEN 32

typedef struct cm_sha256 {
        uint32_t h[8];
        uint64_t len; /* bytes hashed so far */
        uint8_t buf[64];
        size_t fill;
} cm_sha256_ctx;

/* Tests: true makes every hash use the portable code even where the CPU
 * has the SHA extensions. */
extern bool cm_sha256_portable;

void cm_sha256_init(cm_sha256_ctx *c);
void cm_sha256_update(cm_sha256_ctx *c, const void *data, size_t len);
void cm_sha256_final(cm_sha256_ctx *c, uint8_t ret[CM_SHA256_LEN]);
void cm_sha256(const void *data, size_t len, uint8_t ret[CM_SHA256_LEN]);

void cm_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len, uint8_t ret[CM_SHA256_LEN]);

/* Lower-case hex of `n` bytes into `ret` (2n + 1 bytes, NUL-terminated). */
void cm_hex(const uint8_t *bytes, size_t n, char *ret);

#endif
