/* SHA-256 after FIPS 180-4 §6.2, HMAC after RFC 2104.  The portable block
 * function, and on x86-64 CPUs with the SHA extensions (checked at run
 * time) the same rounds by sha256rnds2/msg1/msg2 after Intel's "New
 * Instructions Supporting the Secure Hash Algorithm on Intel Architecture
 * Processors" (2013): about 6x faster, which is most of what hashing image
 * layers costs (every blob and every layer's tar stream is hashed). */
#include "util/sha256.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_SHANI 1
#endif

bool cm_sha256_portable;

static const uint32_t K[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t ror(uint32_t x, unsigned n) { return (x >> n) | (x << (32 - n)); }

static void block(uint32_t h[8], const uint8_t p[64]) {
        uint32_t w[64], a, b, c, d, e, f, g, k;
        for (int i = 0; i < 16; i++)
                w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
                       p[4 * i + 3];
        for (int i = 16; i < 64; i++) {
                uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
                uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
                w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
        for (int i = 0; i < 64; i++) {
                uint32_t t1 = k + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
                uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
                k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
        }
        h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

#ifdef HAVE_SHANI
/* n blocks; the state kept as ABEF and CDGH, as the instructions want it. */
__attribute__((target("sha,sse4.1"))) static void blocks_shani(uint32_t h[8], const uint8_t *p, size_t n) {
        const __m128i mask = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
        __m128i s0, s1, t, msg, m[4];

        t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1);  /* CDAB */
        s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B); /* EFGH */
        s0 = _mm_alignr_epi8(t, s1, 8);                                        /* ABEF */
        s1 = _mm_blend_epi16(s1, t, 0xF0);                                     /* CDGH */
        for (; n > 0; n--, p += 64) {
                __m128i abef = s0, cdgh = s1;
                /* 16 groups of four rounds; the schedule runs three groups ahead */
                for (int i = 0; i < 16; i++) {
                        if (i < 4)
                                m[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), mask);
                        msg = _mm_add_epi32(m[i & 3], _mm_loadu_si128((const __m128i *)&K[4 * i]));
                        s1 = _mm_sha256rnds2_epu32(s1, s0, msg);
                        if (i >= 3 && i <= 14) {
                                t = _mm_alignr_epi8(m[i & 3], m[(i - 1) & 3], 4);
                                m[(i + 1) & 3] = _mm_add_epi32(m[(i + 1) & 3], t);
                                m[(i + 1) & 3] = _mm_sha256msg2_epu32(m[(i + 1) & 3], m[i & 3]);
                        }
                        msg = _mm_shuffle_epi32(msg, 0x0E);
                        s0 = _mm_sha256rnds2_epu32(s0, s1, msg);
                        if (i >= 1 && i <= 12)
                                m[(i - 1) & 3] = _mm_sha256msg1_epu32(m[(i - 1) & 3], m[i & 3]);
                }
                s0 = _mm_add_epi32(s0, abef);
                s1 = _mm_add_epi32(s1, cdgh);
        }
        t = _mm_shuffle_epi32(s0, 0x1B);   /* FEBA */
        s1 = _mm_shuffle_epi32(s1, 0xB1);  /* DCHG */
        s0 = _mm_blend_epi16(t, s1, 0xF0); /* DCBA */
        s1 = _mm_alignr_epi8(s1, t, 8);    /* HGFE */
        _mm_storeu_si128((__m128i *)&h[0], s0);
        _mm_storeu_si128((__m128i *)&h[4], s1);
}

static bool shani(void) {
        /* computed once; threads that race here all store the same */
        static int have = -1;
        int h = __atomic_load_n(&have, __ATOMIC_RELAXED);
        if (h < 0) {
                unsigned a, b, c, d;
                bool sha = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));
                bool sse41 = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 19));
                h = sha && sse41;
                __atomic_store_n(&have, h, __ATOMIC_RELAXED);
        }
        return h;
}
#endif

static void blocks(uint32_t h[8], const uint8_t *p, size_t n) {
#ifdef HAVE_SHANI
        if (!cm_sha256_portable && shani()) {
                blocks_shani(h, p, n);
                return;
        }
#endif
        for (; n > 0; n--, p += 64)
                block(h, p);
}

void cm_sha256_init(cm_sha256_ctx *c) {
        static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
        memcpy(c->h, iv, sizeof iv);
        c->len = 0;
        c->fill = 0;
}

void cm_sha256_update(cm_sha256_ctx *c, const void *data, size_t len) {
        const uint8_t *p = data;
        c->len += len;
        while (len > 0) {
                size_t n;
                if (c->fill == 0 && len >= 64) {
                        /* whole blocks straight from the input */
                        n = len / 64;
                        blocks(c->h, p, n);
                        p += 64 * n, len -= 64 * n;
                        continue;
                }
                n = 64 - c->fill < len ? 64 - c->fill : len;
                memcpy(c->buf + c->fill, p, n);
                c->fill += n, p += n, len -= n;
                if (c->fill == 64) {
                        blocks(c->h, c->buf, 1);
                        c->fill = 0;
                }
        }
}

void cm_sha256_final(cm_sha256_ctx *c, uint8_t ret[CM_SHA256_LEN]) {
        uint64_t bits = c->len * 8;
        uint8_t pad[72] = {0x80};
        size_t n = (c->fill < 56 ? 56 : 120) - c->fill;
        for (int i = 0; i < 8; i++)
                pad[n + i] = (uint8_t)(bits >> (56 - 8 * i));
        cm_sha256_update(c, pad, n + 8);
        for (int i = 0; i < 8; i++)
                for (int j = 0; j < 4; j++)
                        ret[4 * i + j] = (uint8_t)(c->h[i] >> (24 - 8 * j));
        memset(c, 0, sizeof *c);
}

void cm_sha256(const void *data, size_t len, uint8_t ret[CM_SHA256_LEN]) {
        cm_sha256_ctx c;
        cm_sha256_init(&c);
        cm_sha256_update(&c, data, len);
        cm_sha256_final(&c, ret);
}

void cm_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len, uint8_t ret[CM_SHA256_LEN]) {
        uint8_t k[64] = {0}, pad[64], inner[CM_SHA256_LEN];
        cm_sha256_ctx c;
        if (key_len > sizeof k)
                cm_sha256(key, key_len, k); /* RFC 2104: long keys are hashed first */
        else
                memcpy(k, key, key_len);
        for (int i = 0; i < 64; i++)
                pad[i] = k[i] ^ 0x36;
        cm_sha256_init(&c);
        cm_sha256_update(&c, pad, sizeof pad);
        cm_sha256_update(&c, data, len);
        cm_sha256_final(&c, inner);
        for (int i = 0; i < 64; i++)
                pad[i] = k[i] ^ 0x5c;
        cm_sha256_init(&c);
        cm_sha256_update(&c, pad, sizeof pad);
        cm_sha256_update(&c, inner, sizeof inner);
        cm_sha256_final(&c, ret);
        /* The key's traces on the stack are not left for a later reader. */
        memset(k, 0, sizeof k);
        memset(pad, 0, sizeof pad);
}

void cm_hex(const uint8_t *bytes, size_t n, char *ret) {
        static const char digits[] = "0123456789abcdef";
        for (size_t i = 0; i < n; i++) {
                ret[2 * i] = digits[bytes[i] >> 4];
                ret[2 * i + 1] = digits[bytes[i] & 15];
        }
        ret[2 * n] = 0;
}
