/* network: true and published ports, through pasta or slirp4netns (run
 * once more with CONTAINER_MCP_NATIVE_NETSTACK=slirp4netns, the fallback).
 *
 * There is no internet here, so "outbound" is checked against a test host
 * this program makes itself: a network namespace joined to the host by a
 * veth pair, with a listener inside it.  The sandbox reaches it the way it
 * would reach any machine: both stacks give the sandbox 10.0.2.100 behind
 * gateway 10.0.2.2 and turn its connections into sockets of the host, which
 * routes them over the veth.  The host's loopback stays out of reach (pasta
 * --no-map-gw, slirp4netns --disable-host-loopback): a listener on
 * 127.0.0.1 is not reached, not even through the gateway address.  Skipped
 * as a whole when neither helper is installed, or, unprivileged, when
 * /dev/net/tun is not ours to open (stock Debian makes it 0666); the reach
 * tests skip when the test host cannot be made (not root, no iproute2). */
#include "nt.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>

static char host_addr[INET_ADDRSTRLEN]; /* the test host's address; "" when none could be made */
static int dns_fd = -1;                 /* the test host's DNS server (UDP 53) */
static bool dns_ready;                  /* it is this process's resolver (a private /etc/resolv.conf) */
static int stub_fd = -1;                /* a DNS server on 127.0.0.53:53, like systemd-resolved's stub */
#define DNS_ANSWER "192.0.2.44"         /* what it answers for every A query */
static char netns_name[32];
static int host_lfd = -1; /* the test host's listener */
static int test_host_port;

static int64_t mono_ms(void) {
        struct timespec ts;
        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A TCP listener on addr, port picked by the kernel. */
static int listen_on(const char *addr, int *ret_port) {
        struct sockaddr_in a = {.sin_family = AF_INET};
        socklen_t len = sizeof a;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        assert_int_equal(inet_pton(AF_INET, addr, &a.sin_addr), 1);
        assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
        assert_int_equal(listen(fd, 4), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
        *ret_port = ntohs(a.sin_port);
        return fd;
}

/* Run a python connect to addr:port in a sandbox; its output. */
static void try_connect(bool network, const char *addr, int port, cm_exec_result *r) {
        cleanup_free char *code = xasprintf("import socket\n"
                                            "s = socket.socket(); s.settimeout(5)\n"
                                            "try:\n"
                                            "    s.connect(('%s', %d)); print('CONNECTED')\n"
                                            "except OSError as e: print('FAILED', e)\n",
                                            addr, port);
        cm_run_spec spec = {.timeout_ms = 30000, .network = network};
        nt_py(code, &spec, r);
}

static bool pending_connection(int lfd) {
        struct pollfd p = {lfd, POLLIN, 0};
        return poll(&p, 1, 0) == 1;
}

/* Accept and drop what reached the test host: true when something did. */
static bool drain(int lfd) {
        bool any = false;
        while (pending_connection(lfd)) {
                int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                any = true;
                if (c >= 0)
                        (void)close(c);
        }
        return any;
}

/* (1) */
static void test_reaches_host_address(void **state) {
        cm_exec_result r;
        (void)state;
        if (!host_addr[0])
                skip_because("no test host to reach (it needs root: ip netns add, a veth pair)");
        (void)drain(host_lfd);
        try_connect(true, host_addr, test_host_port, &r);
        if (!strstr(r.out, "CONNECTED"))
                fail_msg("the sandbox did not reach %s:%d: %s %s", host_addr, test_host_port, r.out, r.err);
        assert_true(drain(host_lfd));
        cm_exec_result_clear(&r);
}

/* The host's loopback is out of reach with network too, directly and
 * through the gateway. */
static void test_host_loopback_unreachable(void **state) {
        cm_exec_result r;
        int port, lfd = listen_on("127.0.0.1", &port);
        (void)state;
        try_connect(true, "127.0.0.1", port, &r);
        assert_non_null(strstr(r.out, "FAILED"));
        cm_exec_result_clear(&r);
        try_connect(true, "10.0.2.2", port, &r);
        assert_non_null(strstr(r.out, "FAILED"));
        cm_exec_result_clear(&r);
        assert_false(pending_connection(lfd));
        (void)close(lfd);
}

/* (2) */
static void test_no_network_by_default(void **state) {
        cm_exec_result r;
        (void)state;
        if (!host_addr[0])
                skip_because("no test host to reach (it needs root: ip netns add, a veth pair)");
        (void)drain(host_lfd);
        try_connect(false, host_addr, test_host_port, &r);
        assert_non_null(strstr(r.out, "FAILED"));
        assert_false(drain(host_lfd));
        cm_exec_result_clear(&r);
}

/* DNS: the sandbox resolves through the helper's forwarder (10.0.2.3),
 * which asks the host's resolver; here that is the test host's server,
 * named in this process's private /etc/resolv.conf.  The sandbox cannot
 * reach the test host on port 53 itself: pasta/slirp4netns only forward. */
static void test_dns(void **state) {
        cm_run_spec spec = {.timeout_ms = 30000, .network = true};
        cm_exec_result r;
        (void)state;
        if (!dns_ready)
                skip_because("no private /etc/resolv.conf pointing at the test host's DNS server (needs root)");
        nt_py("import socket\n"
              "print(open('/etc/resolv.conf').read().split()[:2])\n"
              "print(socket.gethostbyname('anything.example'))\n",
              &spec, &r);
        if (!strstr(r.out, "['nameserver', '10.0.2.3']") || !strstr(r.out, DNS_ANSWER))
                fail_msg("no DNS through the helper: %s %s", r.out, r.err);
        cm_exec_result_clear(&r);
        /* without network, no answer */
        spec.network = false;
        nt_py("import socket\n"
              "try: print(socket.gethostbyname('anything.example'))\n"
              "except OSError as e: print('FAILED', e)\n",
              &spec, &r);
        assert_non_null(strstr(r.out, "FAILED"));
        cm_exec_result_clear(&r);
}

static void *serve_dns(void *arg);

/* Our private /etc/resolv.conf (a bind mount of an unlinked file). */
static void set_resolver(const char *addr) {
        FILE *f = fopen("/etc/resolv.conf", "we");
        assert_non_null(f);
        fprintf(f, "nameserver %s\noptions timeout:2\n", addr);
        assert_int_equal(fclose(f), 0);
}

/* A host whose resolver is a stub on its loopback (systemd-resolved's
 * 127.0.0.53): the sandbox still resolves, through the forwarder, though
 * the host's loopback is otherwise out of its reach. */
static void test_dns_loopback_stub(void **state) {
        cm_run_spec spec = {.timeout_ms = 30000, .network = true};
        cm_exec_result r;
        (void)state;
        if (!dns_ready || stub_fd < 0)
                skip_because("no private resolver, or 127.0.0.53:53 is taken (a real stub resolver there?)");
        set_resolver("127.0.0.53");
        nt_py("import socket\nprint(socket.gethostbyname('stub.example'))\n", &spec, &r);
        set_resolver(host_addr);
        if (!strstr(r.out, DNS_ANSWER))
                fail_msg("no DNS through a loopback stub resolver: %s %s", r.out, r.err);
        cm_exec_result_clear(&r);
}

/* Helpers (pasta, slirp4netns) and watchers alive now, as a set of pids. */
static size_t helpers(pid_t *v, size_t max) {
        DIR *d = opendir("/proc");
        struct dirent *de;
        size_t n = 0;
        assert_non_null(d);
        while ((de = readdir(d)) && n < max) {
                char path[300], buf[512], comm[64] = "", state = 0;
                FILE *f;
                if (de->d_name[0] < '0' || de->d_name[0] > '9')
                        continue;
                (void)snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
                if (!(f = fopen(path, "r")))
                        continue;
                if (fgets(buf, sizeof buf, f)) {
                        char *l = strchr(buf, '('), *rp = strrchr(buf, ')');
                        if (l && rp && rp > l) {
                                (void)snprintf(comm, sizeof comm, "%.*s", (int)(rp - l - 1), l + 1);
                                state = rp[2];
                        }
                }
                (void)fclose(f);
                if (state && state != 'Z' &&
                    (strncmp(comm, "pasta", 5) == 0 || strncmp(comm, "passt", 5) == 0 ||
                     strcmp(comm, "slirp4netns") == 0 || strcmp(comm, "cm-netwatch") == 0))
                        v[n++] = (pid_t)atoi(de->d_name);
        }
        (void)closedir(d);
        return n;
}

static bool in_set(pid_t p, const pid_t *v, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (v[i] == p)
                        return true;
        return false;
}

/* (4) for runs to completion: nothing new is left once run_wait returns. */
static void test_no_helper_after_run_wait(void **state) {
        pid_t before[256], after[256];
        size_t nb = helpers(before, 256), na;
        cm_exec_result r;
        (void)state;
        nt_py("print('ok')", &(cm_run_spec){.timeout_ms = 30000, .network = true}, &r);
        assert_string_equal(r.out, "ok\n");
        cm_exec_result_clear(&r);
        na = helpers(after, 256);
        for (size_t i = 0; i < na; i++)
                if (!in_set(after[i], before, nb))
                        fail_msg("helper process %d outlived its run", (int)after[i]);
}

/* GET / on 127.0.0.1:port; retried (the server in the sandbox may not be
 * listening yet) until a deadline. */
static bool http_get(int port, int64_t deadline) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        while (mono_ms() < deadline) {
                char buf[64] = "";
                size_t len = 0;
                ssize_t k;
                int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                struct pollfd p = {fd, POLLIN, 0};
                if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
                    write(fd, "GET / HTTP/1.0\r\n\r\n", 18) == 18)
                        while (len + 1 < sizeof buf && poll(&p, 1, 2000) == 1 &&
                               (k = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
                                len += (size_t)k;
                (void)close(fd);
                if (strncmp(buf, "HTTP/1.0 200", 12) == 0)
                        return true;
                /* back off a little before the next attempt */
                (void)poll(NULL, 0, 50);
        }
        return false;
}

static bool gone(pid_t pid) { return pid > 0 && kill(pid, 0) < 0 && errno == ESRCH; }

/* (3) and (4) for detached containers: a server in the sandbox answers on
 * the published host port; remove leaves no helper behind. */
/* The host's listening TCP sockets on `port` (/proc/net/tcp and tcp6):
 * at least one, every one bound to 127.0.0.1 (or ::ffff:127.0.0.1), none to
 * a wildcard or another address: a published port is never reachable from
 * other machines. */
static void assert_listening_on_loopback_only(int port) {
        static const char *const files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
        char line[512], local[64];
        unsigned lport, st;
        int seen = 0;

        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
                FILE *f = fopen(files[i], "re");
                if (!f)
                        continue;
                while (fgets(line, sizeof line, f)) {
                        char *colon;
                        if (sscanf(line, " %*u: %63s %*s %x", local, &st) != 2 || st != 0x0A)
                                continue;
                        colon = strrchr(local, ':');
                        if (!colon || sscanf(colon + 1, "%x", &lport) != 1 || (int)lport != port)
                                continue;
                        *colon = 0;
                        seen++;
                        if (strcmp(local, "0100007F") != 0 && strcmp(local, "0000000000000000FFFF00000100007F") != 0)
                                fail_msg("host port %d listens on %s (%s), not only on 127.0.0.1", port, local, files[i]);
                }
                (void)fclose(f);
        }
        if (!seen)
                fail_msg("no listening socket on host port %d", port);
}

static void test_published_port(void **state) {
        char *argv[] = {S("python3"), S("-m"), S("http.server"), S("8000"), NULL};
        cm_port ports[] = {{0, 8000, "tcp"}};
        cm_run_spec spec = {.image = "host", .argv = argv, .argc = 4, .network = true, .ports = ports, .n_ports = 1};
        cm_err err = CM_ERR_INIT;
        cleanup_free char *id = NULL;
        json_t *j, *p;
        pid_t helper, watcher;
        int host_port;
        (void)state;

        if (nt_b->ops->run(nt_b, &spec, &id, &err) < 0)
                fail_msg("run: %s", err.msg);
        j = nt_inspect(id);
        p = json_array_get(json_object_get(j, "ports"), 0);
        assert_non_null(p);
        host_port = (int)json_integer_value(json_object_get(p, "host_port"));
        assert_true(host_port > 0);
        assert_int_equal(json_integer_value(json_object_get(p, "container_port")), 8000);
        assert_string_equal(json_string_value(json_object_get(p, "host_ip")), "127.0.0.1");
        helper = (pid_t)json_integer_value(json_object_get(json_object_get(json_object_get(j, "net"), "helper"), "pid"));
        watcher = (pid_t)json_integer_value(
                json_object_get(json_object_get(json_object_get(j, "net"), "watcher"), "pid"));
        json_decref(j);
        assert_true(helper > 0 && !gone(helper));
        assert_true(watcher > 0 && !gone(watcher));

        if (!http_get(host_port, mono_ms() + 20000))
                fail_msg("no answer from the sandbox on 127.0.0.1:%d", host_port);
        /* the real socket, not what the record says: loopback only */
        assert_listening_on_loopback_only(host_port);

        assert_int_equal(nt_b->ops->remove(nt_b, id, true, &err), 0);
        assert_true(gone(helper));
        assert_true(gone(watcher));
}

/* The main process ends by itself: its helper goes with it (the watcher
 * sees the init exit), before anyone calls stop or remove. */
static void test_helper_dies_with_sandbox(void **state) {
        char *argv[] = {S("true"), NULL};
        cm_run_spec spec = {.image = "host", .argv = argv, .argc = 1, .network = true};
        cm_err err = CM_ERR_INIT;
        cleanup_free char *id = NULL;
        json_t *j;
        pid_t helper;
        int fd;
        struct pollfd p;
        (void)state;

        if (nt_b->ops->run(nt_b, &spec, &id, &err) < 0)
                fail_msg("run: %s", err.msg);
        j = nt_inspect(id);
        helper = (pid_t)json_integer_value(json_object_get(json_object_get(json_object_get(j, "net"), "helper"), "pid"));
        json_decref(j);
        assert_true(helper > 0);
        fd = (int)syscall(SYS_pidfd_open, helper, 0);
        if (fd >= 0) { /* else it is already gone */
                p = (struct pollfd){fd, POLLIN, 0};
                assert_int_equal(poll(&p, 1, 10000), 1);
                (void)close(fd);
        }
        assert_int_equal(nt_b->ops->remove(nt_b, id, true, &err), 0);
}

/* A status line's value from /proc/<pid>/status, or "" */
static void status_field(pid_t pid, const char *key, char *buf, size_t size) {
        cleanup_free char *path = xasprintf("/proc/%d/status", (int)pid);
        char line[256];
        FILE *f = fopen(path, "re");
        buf[0] = 0;
        while (f && fgets(line, sizeof line, f))
                if (strncmp(line, key, strlen(key)) == 0 && line[strlen(key)] == ':') {
                        (void)snprintf(buf, size, "%s", line + strlen(key) + 1 + strspn(line + strlen(key) + 1, " \t"));
                        buf[strcspn(buf, "\n")] = 0;
                }
        if (f)
                (void)fclose(f);
}

/* The user-mode stack runs on the host with the server's ids: it must be
 * confined (issue 7: slirp4netns ran as root with every capability and no
 * seccomp).  Both stacks: a seccomp filter, no_new_privs and a mount
 * namespace that is not the host's.  slirp4netns keeps no capability but
 * binding low ports; pasta, as root, keeps CAP_SYS_ADMIN too (its own
 * choice, to reach the sandbox's namespace; it cannot be asked to drop it). */
static void test_helper_confined(void **state) {
        char *argv[] = {S("sleep"), S("1000"), NULL};
        cm_run_spec spec = {.image = "host", .argv = argv, .argc = 2, .network = true};
        cm_err err = CM_ERR_INIT;
        cleanup_free char *id = NULL, *mnt = NULL, *self_mnt = NULL, *stack = NULL;
        char seccomp[32], capeff[32], nnp[32], link_a[64] = "", link_b[64] = "";
        unsigned long long caps, allowed = 1ull << 10; /* CAP_NET_BIND_SERVICE */
        json_t *j;
        pid_t helper;
        (void)state;

        if (nt_b->ops->run(nt_b, &spec, &id, &err) < 0)
                fail_msg("run: %s", err.msg);
        j = nt_inspect(id);
        helper = (pid_t)json_integer_value(json_object_get(json_object_get(json_object_get(j, "net"), "helper"), "pid"));
        stack = xstrdup(json_string_value(json_object_get(json_object_get(j, "net"), "stack")));
        json_decref(j);
        assert_true(helper > 0);
        if (strcmp(stack, "pasta") == 0)
                allowed |= 1ull << 21; /* CAP_SYS_ADMIN */
        /* The helper confines itself once its set-up is done, which may be
         * just after run returns: wait for it, up to a generous deadline. */
        for (int i = 0; i < 3000; i++) {
                status_field(helper, "Seccomp", seccomp, sizeof seccomp);
                status_field(helper, "CapEff", capeff, sizeof capeff);
                status_field(helper, "NoNewPrivs", nnp, sizeof nnp);
                caps = strtoull(capeff, NULL, 16);
                if (strcmp(seccomp, "2") == 0 && strcmp(nnp, "1") == 0 && !(caps & ~allowed))
                        break;
                (void)usleep(10000);
        }
        if (strcmp(seccomp, "2") != 0 || strcmp(nnp, "1") != 0 || (caps & ~allowed))
                fail_msg("the network helper %s (pid %d) runs with Seccomp: %s, NoNewPrivs: %s, CapEff: %s", stack,
                         (int)helper, seccomp, nnp, capeff);
        mnt = xasprintf("/proc/%d/ns/mnt", (int)helper);
        self_mnt = xasprintf("/proc/%d/ns/mnt", (int)getpid());
        /* unprivileged, pasta is not dumpable: its namespaces are hidden */
        assert_true(readlink(self_mnt, link_b, sizeof link_b - 1) > 0);
        if (readlink(mnt, link_a, sizeof link_a - 1) > 0 || errno != EACCES)
                assert_string_not_equal(link_a, link_b);
        assert_int_equal(nt_b->ops->remove(nt_b, id, true, &err), 0);
}

/* `ip` with fixed arguments, no shell; true when it exits 0. */
static bool ip(const char *const *args) {
        pid_t pid = fork();
        int st;
        if (pid == 0) {
                int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
                (void)dup2(null, 1);
                (void)dup2(null, 2);
                execvp("ip", (char *const *)args);
                _exit(127);
        }
        return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Listeners made inside the test host's namespace: setns() moves only this
 * thread, and a socket stays in the namespace it was made in. */
static void *listen_in_netns(void *arg) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53)};
        char path[64];
        int fd;
        (void)arg;
        (void)snprintf(path, sizeof path, "/run/netns/%s", netns_name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && setns(fd, CLONE_NEWNET) == 0) {
                host_lfd = listen_on(host_addr, &test_host_port);
                dns_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                if (inet_pton(AF_INET, host_addr, &a.sin_addr) != 1 || bind(dns_fd, (struct sockaddr *)&a, sizeof a) < 0)
                        dns_fd = -1;
        }
        if (fd >= 0)
                (void)close(fd);
        return NULL;
}

/* A DNS server of one answer: every A query gets DNS_ANSWER, anything else
 * an empty reply. */
static void *serve_dns(void *arg) {
        unsigned char q[512], out[600];
        int fd = (int)(intptr_t)arg;
        for (;;) {
                struct sockaddr_in from;
                socklen_t fl = sizeof from;
                ssize_t n = recvfrom(fd, q, sizeof q, 0, (struct sockaddr *)&from, &fl);
                size_t end = 12;
                if (n < 12)
                        continue;
                while (end < (size_t)n && q[end])
                        end += q[end] + 1u;
                end += 5; /* the root label, type, class */
                if (end > (size_t)n || q[5] != 1)
                        continue;
                bool a = q[end - 4] == 0 && q[end - 3] == 1;
                memcpy(out, q, end);
                out[2] = 0x81, out[3] = 0x80;                        /* response, recursion available */
                out[6] = 0, out[7] = a, out[8] = out[9] = out[10] = out[11] = 0; /* answers; none else */
                size_t len = end;
                if (a) {
                        const unsigned char rr[] = {0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 44};
                        memcpy(out + len, rr, sizeof rr);
                        len += sizeof rr;
                }
                (void)sendto(fd, out, len, 0, (struct sockaddr *)&from, fl);
        }
        return NULL;
}

/* This process (and so the helpers it starts) resolves through the test
 * host: /etc/resolv.conf replaced in a mount namespace of its own.  Once no
 * other thread runs: unshare(CLONE_NEWNS) needs an unshared fs struct. */
static void use_test_dns(void) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53)};
        char path[] = "/tmp/cmtest-resolv-XXXXXX", text[64];
        pthread_t t;
        int fd;
        if (dns_fd < 0 || unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return;
        fd = mkstemp(path);
        (void)snprintf(text, sizeof text, "nameserver %s\noptions timeout:2\n", host_addr);
        /* 0666: nobody (--unprivileged) reads and rewrites it; only our
         * mount namespace reaches it, through /etc/resolv.conf */
        if (fd < 0 || fchmod(fd, 0666) < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) ||
            mount(path, "/etc/resolv.conf", NULL, MS_BIND, NULL) < 0) {
                printf("note: cannot replace /etc/resolv.conf privately; the DNS test skips\n");
        } else if (pthread_create(&t, NULL, serve_dns, (void *)(intptr_t)dns_fd) == 0) {
                (void)pthread_detach(t);
                dns_ready = true;
        }
        /* port 53: bound now, while root */
        stub_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (inet_pton(AF_INET, "127.0.0.53", &a.sin_addr) != 1 || bind(stub_fd, (struct sockaddr *)&a, sizeof a) < 0 ||
            pthread_create(&t, NULL, serve_dns, (void *)(intptr_t)stub_fd) != 0) {
                printf("note: cannot serve DNS on 127.0.0.53:53 (%s; a real stub resolver there?): the stub test "
                       "skips\n",
                       strerror(errno));
                stub_fd = -1;
        } else
                (void)pthread_detach(t);
        if (fd >= 0)
                (void)close(fd);
        (void)unlink(path); /* the bind mount keeps it */
}

static void remove_test_host(void) {
        if (netns_name[0]) {
                const char *del[] = {"ip", "netns", "del", netns_name, NULL};
                (void)ip(del); /* takes the veth pair along */
        }
}

/* A child that stays root and removes the test host when we exit (its
 * pipe reads EOF, however we end). */
static void remove_test_host_later(void) {
        int p[2];
        char b;
        pid_t pid;
        if (pipe2(p, O_CLOEXEC) < 0 || (pid = fork()) < 0)
                return;
        if (pid == 0) {
                (void)close(p[1]);
                while (read(p[0], &b, 1) != 0 && errno == EINTR)
                        ;
                remove_test_host();
                _exit(0);
        }
        (void)close(p[0]); /* p[1] stays open until we exit */
}

/* Made before dropping privileges (--unprivileged): a namespace "cmtest-PID"
 * with 10.231.N.2/30, joined by veth to the host's 10.231.N.1/30. */
static void make_test_host(void) {
        char host_if[16], peer_if[16], host_cidr[32], peer_cidr[32];
        unsigned n = (unsigned)getpid() % 250 + 1;
        pthread_t t;
        if (geteuid() != 0)
                return;
        (void)snprintf(netns_name, sizeof netns_name, "cmtest-%d", (int)getpid());
        (void)snprintf(host_if, sizeof host_if, "cmh%d", (int)getpid() % 1000000);
        (void)snprintf(peer_if, sizeof peer_if, "cmp%d", (int)getpid() % 1000000);
        (void)snprintf(host_cidr, sizeof host_cidr, "10.231.%u.1/30", n);
        (void)snprintf(peer_cidr, sizeof peer_cidr, "10.231.%u.2/30", n);
        const char *steps[][12] = {
                {"ip", "netns", "add", netns_name, NULL},
                {"ip", "link", "add", host_if, "type", "veth", "peer", "name", peer_if, "netns", netns_name, NULL},
                {"ip", "addr", "add", host_cidr, "dev", host_if, NULL},
                {"ip", "link", "set", host_if, "up", NULL},
                {"ip", "-n", netns_name, "addr", "add", peer_cidr, "dev", peer_if, NULL},
                {"ip", "-n", netns_name, "link", "set", peer_if, "up", NULL},
                {"ip", "-n", netns_name, "link", "set", "lo", "up", NULL},
        };
        for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
                if (!ip(steps[i])) {
                        printf("note: cannot make the test host (%s %s %s failed); the reach tests skip\n",
                               steps[i][0], steps[i][1], steps[i][2]);
                        remove_test_host();
                        netns_name[0] = 0;
                        return;
                }
        (void)snprintf(host_addr, sizeof host_addr, "10.231.%u.2", n);
        if (pthread_create(&t, NULL, listen_in_netns, NULL) != 0 || pthread_join(t, NULL) != 0 || host_lfd < 0) {
                printf("note: cannot listen in the test host; the reach tests skip\n");
                host_addr[0] = 0;
        }
}

int main(int argc, char **argv) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_reaches_host_address),    cmocka_unit_test(test_host_loopback_unreachable),
                cmocka_unit_test(test_no_network_by_default),   cmocka_unit_test(test_no_helper_after_run_wait),
                cmocka_unit_test(test_published_port),          cmocka_unit_test(test_helper_dies_with_sandbox),
                cmocka_unit_test(test_helper_confined),
                cmocka_unit_test(test_dns),                     cmocka_unit_test(test_dns_loopback_stub),
        };
        cm_backend_status st;
        int r;

        /* As root, before --unprivileged drops to nobody, who could not
         * remove it: a root process of ours does, once we are gone. */
        make_test_host();
        use_test_dns();
        if (netns_name[0] && argc > 1 && strcmp(argv[1], "--unprivileged") == 0)
                remove_test_host_later();
        nt_setup(argc, argv);
        nt_b->ops->status(nt_b, &st);
        if (strstr(st.details, "\"network_stack\":\"none\"")) {
                nt_teardown();
                remove_test_host();
                skip_all_because("neither pasta nor slirp4netns is installed (apt-get install passt slirp4netns)");
        }
        if (geteuid() != 0 && access("/dev/net/tun", R_OK | W_OK) < 0) {
                int e = errno;
                nt_teardown();
                remove_test_host();
                skip_all_because("unprivileged, and /dev/net/tun is not ours to open (%s), which both helpers need",
                                 strerror(e));
        }
        printf("network stack: %s; test host for the reach tests: %s\n",
               strstr(st.details, "\"network_stack\":\"pasta\"") ? "pasta" : "slirp4netns",
               host_addr[0] ? host_addr : "(none)");
        r = cmocka_run_group_tests(tests, NULL, NULL);
        nt_teardown();
        remove_test_host();
        return r;
}
