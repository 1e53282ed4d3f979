/* util/netaddr.c: which hosts and socket addresses are local (what an
 * agent's pull reaches only through a registry the operator named), at the
 * edges of every range, and the host lists the settings hold. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/netaddr.h"

static bool local(const char *ip) {
        struct sockaddr_in a4 = {.sin_family = AF_INET};
        struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
        bool by_addr, by_name = cm_host_local(ip);
        if (inet_pton(AF_INET, ip, &a4.sin_addr) == 1)
                by_addr = cm_sockaddr_local((struct sockaddr *)&a4);
        else {
                assert_int_equal(inet_pton(AF_INET6, ip, &a6.sin6_addr), 1);
                by_addr = cm_sockaddr_local((struct sockaddr *)&a6);
        }
        assert_true(by_addr == by_name); /* the literal and the address agree */
        return by_addr;
}

static void test_ranges(void **state) {
        static const char *const yes[] = {"0.0.0.0",
                                          "0.255.255.255",
                                          "10.0.0.1",
                                          "10.255.255.255",
                                          "100.64.0.0",
                                          "100.127.255.255",
                                          "127.0.0.1",
                                          "127.255.255.254",
                                          "169.254.169.254",
                                          "172.16.0.1",
                                          "172.31.255.255",
                                          "192.168.0.1",
                                          "192.168.255.255",
                                          "::",
                                          "::1",
                                          "fe80::1",
                                          "febf::1",
                                          "fc00::1",
                                          "fdff::1",
                                          "::ffff:127.0.0.1",
                                          "::ffff:10.1.2.3",
                                          "::127.0.0.1",
                                          "::2" /* v4-compatible 0.0.0.2 */};
        static const char *const no[] = {
                "1.0.0.0",     "9.255.255.255",   "11.0.0.0",        "100.63.255.255", "100.128.0.0", "126.255.255.255",
                "128.0.0.0",   "169.253.255.255", "169.255.0.0",     "172.15.255.255", "172.32.0.0",  "192.167.255.255",
                "192.169.0.0", "198.51.100.7",    "8.8.8.8",         "fec0::1",        "fbff::1",     "fe00::1",
                "2001:db8::1", "::ffff:8.8.8.8",  "64:ff9b::8.8.8.8"};
        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(yes); i++)
                if (!local(yes[i]))
                        fail_msg("%s is local", yes[i]);
        for (size_t i = 0; i < ARRAY_SIZE(no); i++)
                if (local(no[i]))
                        fail_msg("%s is not local", no[i]);
}

static void test_names(void **state) {
        struct sockaddr_un_like {
                sa_family_t family;
        } unix_like = {AF_UNIX};
        (void)state;
        assert_true(cm_host_local("localhost"));
        assert_true(cm_host_local("LOCALHOST"));
        assert_true(cm_host_local("reg.localhost"));
        assert_false(cm_host_local("localhost.example.com"));
        assert_false(cm_host_local("xlocalhost"));
        assert_false(cm_host_local("registry.example.com"));
        assert_false(cm_host_local("")); /* no name at all is not an address */
        /* a family that is not IP is never taken for a remote one */
        assert_true(cm_sockaddr_local((const struct sockaddr *)(const void *)&unix_like));
}

static void test_lists(void **state) {
        cleanup_free char *h = cm_host_of("[::1]:5000"), *h2 = cm_host_of("reg.lan:5000"), *h3 = cm_host_of("reg.lan");
        (void)state;
        assert_string_equal(h, "::1");
        assert_string_equal(h2, "reg.lan");
        assert_string_equal(h3, "reg.lan");
        assert_true(cm_host_listed("a.lan, reg.lan:5000", "reg.lan:5000"));
        assert_true(cm_host_listed("REG.LAN", "reg.lan:6000")); /* a bare host covers its ports */
        assert_false(cm_host_listed("reg.lan:5000", "reg.lan:6000"));
        assert_false(cm_host_listed("reg.lan", "reg.lan.evil.com"));
        assert_false(cm_host_listed("reg", "reg.lan"));
        assert_false(cm_host_listed("", "reg.lan"));
        assert_false(cm_host_listed(NULL, "reg.lan"));
        assert_false(cm_host_listed(",,", "reg.lan"));
}

/* Ranges, as Docker's insecure-registries takes them: an address literal
 * in one, at both edges; names never (not resolved); malformed ones are no
 * range at all. */
static void test_list_ranges(void **state) {
        (void)state;
        assert_true(cm_host_listed("reg.lan, 10.0.0.0/8", "10.0.0.0:5000"));
        assert_true(cm_host_listed("10.0.0.0/8", "10.255.255.255"));
        assert_false(cm_host_listed("10.0.0.0/8", "11.0.0.0:5000"));
        assert_false(cm_host_listed("10.0.0.0/8", "9.255.255.255:5000"));
        assert_true(cm_host_listed("192.168.4.0/23", "192.168.5.200:443"));
        assert_false(cm_host_listed("192.168.4.0/23", "192.168.6.1:443"));
        assert_true(cm_host_listed("198.51.100.7/32", "198.51.100.7:8443"));
        assert_false(cm_host_listed("198.51.100.7/32", "198.51.100.8:8443"));
        assert_true(cm_host_listed("0.0.0.0/0", "203.0.113.9"));
        assert_true(cm_host_listed("fd00::/8", "[fd12::1]:5000"));
        assert_false(cm_host_listed("fd00::/8", "[fe80::1]:5000"));
        assert_true(cm_host_listed("2001:db8::/126", "[2001:db8::3]"));
        assert_false(cm_host_listed("2001:db8::/126", "[2001:db8::4]"));
        assert_false(cm_host_listed("10.0.0.0/8", "[::ffff:10.0.0.1]:5000")); /* families apart */
        assert_false(cm_host_listed("10.0.0.0/8", "ten.lan:5000"));           /* a name, even one in it */
        assert_false(cm_host_listed("10.0.0.0/33", "10.0.0.1"));
        assert_false(cm_host_listed("10.0.0.0/", "10.0.0.1"));
        assert_false(cm_host_listed("10.0.0.0/8x", "10.0.0.1"));
        assert_false(cm_host_listed("10.0.0/8", "10.0.0.1"));
        assert_false(cm_host_listed("fd00::/129", "[fd00::1]"));
        assert_false(cm_host_listed("10.0.0.0/-1", "10.0.0.1"));
        assert_false(cm_host_listed("/8", "10.0.0.1"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ranges),
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_lists),
                cmocka_unit_test(test_list_ranges),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
