/* SHA-256 against the NIST FIPS 180-4 examples and HMAC-SHA256 against the
 * RFC 4231 test cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"
#include <stdlib.h>
#include <string.h>

#include "util/sha256.h"

static void hex_of(const void *data, size_t len, char ret[65]) {
        uint8_t d[CM_SHA256_LEN];
        cm_sha256(data, len, d);
        cm_hex(d, sizeof d, ret);
}

static void test_nist_vectors(void **state) {
        char h[65];
        (void)state;
        hex_of("abc", 3, h);
        assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        hex_of("", 0, h);
        assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
        hex_of(two, strlen(two), h);
        assert_string_equal(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
        const char *four = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmn"
                           "opqrsmnopqrstnopqrstu";
        hex_of(four, strlen(four), h);
        assert_string_equal(h, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

/* One million 'a' fed in uneven pieces: the buffering across blocks. */
static void test_million_a(void **state) {
        static char a[1000000];
        uint8_t d[CM_SHA256_LEN];
        char h[65];
        cm_sha256_ctx c;
        (void)state;
        memset(a, 'a', sizeof a);
        cm_sha256_init(&c);
        for (size_t off = 0, step = 1; off < sizeof a; off += step, step = step * 7 % 1000 + 1)
                cm_sha256_update(&c, a + off, off + step > sizeof a ? sizeof a - off : step);
        cm_sha256_final(&c, d);
        cm_hex(d, sizeof d, h);
        assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* Padding edges: 55, 56, 63, 64 and 65 bytes, against known digests. */
static void test_padding_edges(void **state) {
        static const struct {
                size_t n;
                const char *hex;
        } v[] = {
                {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
                {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
                {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
                {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
                {65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"},
        };
        char buf[65], h[65];
        (void)state;
        memset(buf, 'a', sizeof buf);
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
                hex_of(buf, v[i].n, h);
                assert_string_equal(h, v[i].hex);
        }
}

/* Where the CPU has the SHA extensions, the accelerated rounds and the
 * portable ones agree on every length (whole blocks from the input, the
 * buffered rest, pieces of every size); and the vectors hold for both. */
static void test_fast_and_portable_agree(void **state) {
        static uint8_t data[9000];
        uint32_t x = 12345;
        (void)state;
        for (size_t i = 0; i < sizeof data; i++) {
                x = x * 1103515245u + 12345u;
                data[i] = (uint8_t)(x >> 16);
        }
        for (size_t len = 0; len < sizeof data; len += len < 300 ? 1 : 997) {
                uint8_t a[CM_SHA256_LEN], b[CM_SHA256_LEN];
                cm_sha256_ctx c;
                cm_sha256_portable = false;
                cm_sha256_init(&c);
                for (size_t off = 0, step = 3; off < len; off += step, step = step * 5 % 211 + 1)
                        cm_sha256_update(&c, data + off, off + step > len ? len - off : step);
                cm_sha256_final(&c, a);
                cm_sha256_portable = true;
                cm_sha256(data, len, b);
                if (memcmp(a, b, sizeof a) != 0)
                        fail_msg("the two implementations differ at %zu bytes", len);
        }
        test_nist_vectors(state);
        test_padding_edges(state);
        cm_sha256_portable = false;
}

static void hmac_hex(const void *key, size_t klen, const void *data, size_t dlen, char ret[65]) {
        uint8_t d[CM_SHA256_LEN];
        cm_hmac_sha256(key, klen, data, dlen, d);
        cm_hex(d, sizeof d, ret);
}

static void test_rfc4231(void **state) {
        uint8_t key[131];
        char h[65];
        (void)state;
        memset(key, 0x0b, 20); /* case 1 */
        hmac_hex(key, 20, "Hi There", 8, h);
        assert_string_equal(h, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
        hmac_hex("Jefe", 4, "what do ya want for nothing?", 28, h); /* case 2 */
        assert_string_equal(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        uint8_t data[50];
        memset(key, 0xaa, 20); /* case 3 */
        memset(data, 0xdd, sizeof data);
        hmac_hex(key, 20, data, sizeof data, h);
        assert_string_equal(h, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
        memset(key, 0xaa, sizeof key); /* case 6: a key longer than a block is hashed first */
        const char *m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
        hmac_hex(key, 131, m6, strlen(m6), h);
        assert_string_equal(h, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_nist_vectors),
                cmocka_unit_test(test_million_a),
                cmocka_unit_test(test_padding_edges),
                cmocka_unit_test(test_rfc4231),
                cmocka_unit_test(test_fast_and_portable_agree),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
