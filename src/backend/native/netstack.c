/* network: true — a user-mode network stack for the sandbox's own network
 * namespace, never the host's.
 *
 * pasta (preferred) or slirp4netns runs on the host side as our helper: it
 * owns a tap device in the sandbox's namespace and turns the sandbox's
 * packets into ordinary sockets of the server's user.  Both give the
 * sandbox the same view: address 10.0.2.100/24, gateway 10.0.2.2, and no
 * way to the host's loopback (pasta --no-map-gw, slirp4netns
 * --disable-host-loopback); the host is reachable only on its other
 * addresses, as any machine on its network would reach it.  Published
 * ports listen on the host's 127.0.0.1 only.
 *
 * DNS: the sandbox's resolv.conf names 10.0.2.3, which the helper forwards
 * to the host's own resolver (pasta --dns-forward; slirp4netns does it
 * built in).  The host's resolv.conf often names a stub on its loopback
 * (systemd-resolved's 127.0.0.53), which the sandbox could never reach. 
 *
 * Order, with the child's side in sandbox.c (after lo is up, before the
 * main process):
 *   #2  child -> parent: fds of its user (when mapped) and network
 *       namespaces, over a socketpair (the parent may not open a
 *       non-dumpable init's /proc/<pid>/ns when rootless).
 *       parent: start the helper on them, wait for it to be ready, forward
 *       the ports.
 *   #3  parent -> child: 'g', and the main process starts with the network
 *       already up.  A hang-up instead fails the step.
 *
 * Lifetime: the helper is the child of a small watcher (a fork of ours that
 * never execs) which holds a pidfd of the sandbox's init: when the init
 * exits, however, the watcher kills the helper, reaps it and exits; the
 * helper has PR_SET_PDEATHSIG(SIGKILL) should the watcher die first.  Both
 * are recorded (pid and start time) so stop, remove and orphan reaping
 * kill them too, and a run to completion waits for them before it returns. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "backend/native/linux.h"
#include "util/cleanup.h"

#define NET_READY_MS 10000 /* the helper's set-up, bounded */
#define NET_ADDR "10.0.2.100"
#define NET_GW "10.0.2.2"
#define NET_DNS "10.0.2.3" /* pasta --dns-forward; slirp4netns's built-in */

const char *net_stack_name(enum net_stack s) {
        return s == NET_PASTA ? "pasta" : s == NET_SLIRP ? "slirp4netns" : "none";
}

/* ---- planning (parent) -------------------------------------------------- */

/* A free port on 127.0.0.1 for "host_port: 0".  The kernel picks it; the
 * helper binds it a moment later (a race with another binder shows up as
 * the helper failing to start, with its message). */
static int pick_port(bool udp, uint16_t *ret, cm_err *err) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof a;
        cleanup_close int fd = socket(AF_INET, (udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC, 0);

        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || getsockname(fd, (struct sockaddr *)&a, &len) < 0)
                return cm_err_sys(err, errno, "cannot pick a free port on 127.0.0.1");
        *ret = ntohs(a.sin_port);
        return 0;
}

int net_plan(const native *n, const cm_run_spec *spec, net_info *ret, cm_err *err) {
        *ret = (net_info){0};
        if (spec->n_ports > 0 && !spec->network)
                return cm_err_set(err, EINVAL, "published ports need network: true; add it, or drop ports");
        if (!spec->network)
                return 0;
        if (n->net_stack == NET_NONE)
                return cm_err_set(err, ENOTSUP,
                                  "network: true needs pasta or slirp4netns on the host (Debian packages passt "
                                  "and slirp4netns), and neither is installed; install one, or run without "
                                  "network");
        if (n->rootless && access("/dev/net/tun", R_OK | W_OK) < 0)
                return cm_err_sys(err, errno,
                                  "network: true as an unprivileged user needs /dev/net/tun readable and "
                                  "writable by it (%s opens it in the sandbox's namespace); chmod 0666 "
                                  "/dev/net/tun, or run without network",
                                  net_stack_name(n->net_stack));
        if (spec->n_ports > NET_MAX_PORTS)
                return cm_err_set(err, EINVAL, "at most %d published ports", NET_MAX_PORTS);
        ret->stack = n->net_stack;
        for (size_t i = 0; i < spec->n_ports; i++) {
                const cm_port *p = &spec->ports[i];
                net_port *q = &ret->ports[i];
                const char *proto = p->protocol ? p->protocol : "tcp";
                if (strcmp(proto, "tcp") != 0 && strcmp(proto, "udp") != 0)
                        return cm_err_set(err, EINVAL, "ports[%zu].protocol \"%s\": give tcp or udp", i, proto);
                if (p->container_port == 0)
                        return cm_err_set(err, EINVAL, "ports[%zu].containerPort: give a port from 1 to 65535", i);
                q->udp = proto[0] == 'u';
                q->container_port = p->container_port;
                q->host_port = p->host_port;
                if (q->host_port == 0 && pick_port(q->udp, &q->host_port, err) < 0)
                        return -1;
                for (size_t j = 0; j < i; j++)
                        if (ret->ports[j].host_port == q->host_port && ret->ports[j].udp == q->udp)
                                return cm_err_set(err, EINVAL, "ports[%zu]: host port %u/%s is published twice", i,
                                                  q->host_port, proto);
                ret->n_ports = i + 1;
        }
        return 0;
}

/* The sandbox's /etc/resolv.conf: the host's search domains and options,
 * and with a network the helper's forwarder as the only nameserver
 * (without one, the host's nameservers, which it cannot reach anyway). */
char *net_resolv_conf(bool network) {
        FILE *f = fopen("/etc/resolv.conf", "re");
        cleanup_free char *line = NULL;
        size_t cap = 0, len = 0, size = 4096;
        char *text = xmalloc(size);

        text[0] = 0;
        if (network)
                len += (size_t)snprintf(text, size, "nameserver %s\n", NET_DNS);
        while (f && getline(&line, &cap, f) > 0) {
                size_t n = strlen(line);
                bool ns = strncmp(line, "nameserver", 10) == 0 && (line[10] == ' ' || line[10] == '\t');
                if ((ns && network) ||
                    !(ns || strncmp(line, "search", 6) == 0 || strncmp(line, "domain", 6) == 0 ||
                      strncmp(line, "options", 7) == 0) ||
                    len + n + 2 > size)
                        continue;
                memcpy(text + len, line, n);
                len += n;
                if (text[len - 1] != '\n')
                        text[len++] = '\n';
                text[len] = 0;
        }
        if (f)
                (void)fclose(f);
        return text;
}

/* ---- the helper's command line ------------------------------------------ */

typedef struct argv_buf {
        char *v[24 + 2 * NET_MAX_PORTS];
        size_t n;
} argv_buf;

static void arg(argv_buf *a, char *s) {
        if (a->n + 1 < ARRAY_SIZE(a->v))
                a->v[a->n++] = s;
        a->v[a->n] = NULL;
}

static void argv_free(argv_buf *a) {
        for (size_t i = 0; i < a->n; i++)
                free(a->v[i]);
        a->n = 0;
}

/* Only numbers we formatted ourselves reach the helper's argv: nothing an
 * agent sent can become a flag. */
static void build_argv(const native *n, const net_info *info, int userns_fd, int netns_fd, int ready_fd,
                       const char *sock, argv_buf *a) {
        arg(a, xstrdup(n->net_path));
        if (info->stack == NET_PASTA) {
                char *tcp = NULL, *udp = NULL;
                arg(a, xstrdup("--foreground"));
                arg(a, xstrdup("--quiet"));
                arg(a, xstrdup("--config-net"));
                arg(a, xstrdup("--ipv4-only"));
                arg(a, xstrdup("--address"));
                arg(a, xstrdup(NET_ADDR));
                arg(a, xstrdup("--netmask"));
                arg(a, xstrdup("24"));
                arg(a, xstrdup("--gateway"));
                arg(a, xstrdup(NET_GW));
                arg(a, xstrdup("--no-map-gw"));
                arg(a, xstrdup("--dns-forward"));
                arg(a, xstrdup(NET_DNS));
                if (!n->rootless) /* else pasta drops to nobody, who may not enter our namespace */
                        arg(a, xstrdup("--runas=0:0"));
                if (userns_fd >= 0)
                        arg(a, xasprintf("--userns=/proc/self/fd/%d", userns_fd));
                arg(a, xasprintf("--netns=/proc/self/fd/%d", netns_fd));
                /* pasta writes its pid file once it is set up: our ready
                 * signal, through a pipe. */
                arg(a, xasprintf("--pid=/proc/self/fd/%d", ready_fd));
                for (size_t i = 0; i < info->n_ports; i++) {
                        char **s = info->ports[i].udp ? &udp : &tcp;
                        char *t = xasprintf("%s%s127.0.0.1/%u:%u", *s ? *s : "", *s ? "," : "",
                                            info->ports[i].host_port, info->ports[i].container_port);
                        free(*s);
                        *s = t;
                }
                arg(a, xstrdup("--tcp-ports"));
                arg(a, tcp ? tcp : xstrdup("none"));
                arg(a, xstrdup("--udp-ports"));
                arg(a, udp ? udp : xstrdup("none"));
                arg(a, xstrdup("--tcp-ns"));
                arg(a, xstrdup("none"));
                arg(a, xstrdup("--udp-ns"));
                arg(a, xstrdup("none"));
        } else {
                /* Its own mount namespace with nothing of the host's files,
                 * every capability but NET_BIND_SERVICE dropped (as root),
                 * and a syscall filter: pasta confines itself the same way
                 * unasked. */
                arg(a, xstrdup("--enable-sandbox"));
                arg(a, xstrdup("--enable-seccomp"));
                arg(a, xstrdup("--configure"));
                arg(a, xstrdup("--mtu=65520"));
                arg(a, xstrdup("--disable-host-loopback"));
                arg(a, xasprintf("--ready-fd=%d", ready_fd));
                arg(a, xasprintf("--api-socket=%s", sock));
                arg(a, xstrdup("--netns-type=path"));
                if (userns_fd >= 0)
                        arg(a, xasprintf("--userns-path=/proc/self/fd/%d", userns_fd));
                arg(a, xasprintf("/proc/self/fd/%d", netns_fd));
                arg(a, xstrdup("tap0"));
        }
}

/* ---- the watcher -------------------------------------------------------- */

/* Runs in a fork of the (multi-threaded) server: syscalls only.  Starts the
 * helper, reports both pids on info_fd, then waits for the init or the
 * helper to end. */
static __attribute__((noreturn)) void watcher(char *const *argv, const int *keep, size_t n_keep, int log_fd,
                                              int info_fd, int init_pidfd) {
        static char path_env[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
        char *const envp[] = {path_env, NULL};
        int fds[SB_MAX_FDS];
        size_t m = 0;
        pid_t self = getpid(), helper;
        int hfd;
        struct pollfd p[2];

        sb_reset_signals();
        (void)sigprocmask(SIG_SETMASK, &(sigset_t){0}, NULL);
        (void)setsid(); /* no terminal signals meant for the server */
        (void)prctl(PR_SET_NAME, "cm-netwatch", 0, 0, 0);
        for (size_t i = 0; i < n_keep; i++)
                fds[m++] = keep[i];
        fds[m++] = log_fd;
        fds[m++] = info_fd;
        fds[m++] = init_pidfd;
        sb_close_fds_except(fds, m);
        helper = vfork();
        if (helper == 0) {
                (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
                if (getppid() != self)
                        _exit(127);
                /* the helper finds its fds by the numbers in its argv */
                for (size_t i = 0; i < n_keep; i++)
                        (void)fcntl(keep[i], F_SETFD, 0);
                if (dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0)
                        _exit(127);
                (void)close(0);
                (void)open("/dev/null", O_RDONLY); /* fd 0 */
                (void)execve(argv[0], argv, envp);
                _exit(127);
        }
        {
                int32_t msg[2] = {(int32_t)self, (int32_t)helper};
                (void)write_all(info_fd, msg, sizeof msg);
        }
        for (size_t i = 0; i < n_keep; i++)
                (void)close(keep[i]);
        (void)close(log_fd);
        (void)close(info_fd);
        if (helper < 0)
                _exit(1);
        hfd = sys_pidfd_open(helper, 0);
        p[0] = (struct pollfd){init_pidfd, POLLIN, 0};
        p[1] = (struct pollfd){hfd, POLLIN, 0};
        while (hfd >= 0 && poll(p, 2, -1) < 0 && errno == EINTR)
                ;
        (void)kill(helper, SIGKILL); /* still our child: its pid is not reused */
        (void)waitpid(helper, NULL, 0);
        _exit(0);
}

/* ---- start (parent) ----------------------------------------------------- */

/* #2: the child's namespaces.  0 with the fds, or 1 when the child hung up
 * (it failed a step before; its message is on err_fd). */
static int recv_ns(int sync_fd, int *ret_userns, int *ret_netns, cm_err *err) {
        char byte, cbuf[CMSG_SPACE(2 * sizeof(int))];
        struct iovec iov = {&byte, 1};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
        struct cmsghdr *cm;
        int fds[2] = {-1, -1};
        size_t nfd = 0;
        ssize_t k;

        do
                k = recvmsg(sync_fd, &mh, MSG_CMSG_CLOEXEC);
        while (k < 0 && errno == EINTR);
        if (k == 0)
                return 1;
        if (k < 0)
                return cm_err_sys(err, errno, "network: no namespaces from the sandbox");
        cm = CMSG_FIRSTHDR(&mh);
        if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                memcpy(fds, CMSG_DATA(cm), (nfd > 2 ? 2 : nfd) * sizeof(int));
        }
        if (nfd == 2) {
                *ret_userns = fds[0];
                *ret_netns = fds[1];
        } else if (nfd == 1) {
                *ret_netns = fds[0];
        } else {
                for (size_t i = 0; i < 2; i++)
                        if (fds[i] >= 0)
                                (void)close(fds[i]);
                return cm_err_set(err, EPROTO, "network: bad namespace message from the sandbox");
        }
        return 0;
}

/* The helper's own words when it failed (its stdout and stderr go to a
 * memfd), trimmed to one line. */
static void helper_said(int log_fd, char *buf, size_t size) {
        ssize_t k = pread(log_fd, buf, size - 1, 0);
        buf[k > 0 ? k : 0] = 0;
        /* pasta without a syslog says so on every line; keep the rest */
        for (char *p; (p = strstr(buf, "Failed to send "));) {
                char *nl = strchr(p, '\n');
                char *rest = nl ? nl + 1 : p + strlen(p);
                memmove(p, rest, strlen(rest) + 1);
        }
        for (char *p = buf; *p; p++)
                if (*p == '\n')
                        *p = *(p + 1) ? ' ' : 0;
}

/* Wait, bounded, for the helper's ready line (pasta: its pid; slirp4netns:
 * "1").  EOF: it exited first. */
static int wait_ready(int fd, int64_t deadline) {
        char buf[32];
        struct pollfd p = {fd, POLLIN, 0};
        for (;;) {
                int64_t left = deadline - cm_now_ms();
                int r = poll(&p, 1, left > 0 ? (int)left : 0);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return -ETIMEDOUT;
                ssize_t k = read(fd, buf, sizeof buf);
                if (k < 0 && errno == EINTR)
                        continue;
                return k > 0 ? 0 : -EPIPE;
        }
}

/* slirp4netns: one API request per connection, a JSON reply. */
static int slirp_hostfwd(const char *sock, const net_port *p, int64_t deadline, cm_err *err) {
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        cleanup_close int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        char req[256], rep[512];
        size_t len = 0;
        ssize_t k;
        struct pollfd pf;

        (void)snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
                return cm_err_sys(err, errno, "network: cannot reach the slirp4netns API");
        (void)snprintf(req, sizeof req,
                       "{\"execute\":\"add_hostfwd\",\"arguments\":{\"proto\":\"%s\",\"host_addr\":\"127.0.0.1\","
                       "\"host_port\":%u,\"guest_port\":%u}}",
                       p->udp ? "udp" : "tcp", p->host_port, p->container_port);
        if (write_all(fd, req, strlen(req)) < 0)
                return cm_err_sys(err, errno, "network: slirp4netns API");
        (void)shutdown(fd, SHUT_WR);
        pf = (struct pollfd){fd, POLLIN, 0};
        while (len + 1 < sizeof rep) {
                int64_t left = deadline - cm_now_ms();
                if (poll(&pf, 1, left > 0 ? (int)left : 0) <= 0)
                        break;
                k = read(fd, rep + len, sizeof rep - 1 - len);
                if (k <= 0)
                        break;
                len += (size_t)k;
        }
        rep[len] = 0;
        if (!strstr(rep, "\"return\""))
                return cm_err_set(err, EADDRINUSE, "network: cannot publish 127.0.0.1:%u -> %u/%s: slirp4netns said %s",
                                  p->host_port, p->container_port, p->udp ? "udp" : "tcp", len ? rep : "nothing");
        return 0;
}

int net_start(native *n, int sync_fd, int init_pidfd, const char *tag, net_info *info, cm_err *err) {
        cleanup_close int userns = -1, netns = -1, log_fd = -1;
        cleanup_free char *sock = NULL;
        int ready[2] = {-1, -1}, inf[2] = {-1, -1};
        int64_t deadline = cm_now_ms() + NET_READY_MS;
        argv_buf a = {.n = 0};
        int32_t pids[2] = {0, 0};
        pid_t pid;
        int r;

        r = recv_ns(sync_fd, &userns, &netns, err);
        if (r != 0)
                return r < 0 ? -1 : 0; /* 0: the child's own error follows on err_fd */
        log_fd = memfd_create("cm-net-log", MFD_CLOEXEC);
        if (log_fd < 0 || pipe2(ready, O_CLOEXEC) < 0 || pipe2(inf, O_CLOEXEC) < 0) {
                r = cm_err_sys(err, errno, "network: pipe");
                goto out;
        }
        if (info->stack == NET_SLIRP) {
                sock = xasprintf("%s/net-%s.sock", n->state_dir, tag);
                (void)unlink(sock);
        }
        build_argv(n, info, userns, netns, ready[1], sock, &a);
        /* A bare fork (no atfork handlers: the child only makes syscalls). */
        pid = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, 0);
        if (pid < 0) {
                r = cm_err_sys(err, errno, "network: cannot start %s", net_stack_name(info->stack));
                goto out;
        }
        if (pid == 0)
                watcher(a.v, (int[]){userns, netns, ready[1]}, 3, log_fd, inf[1], init_pidfd);
        (void)close(ready[1]);
        (void)close(inf[1]);
        ready[1] = inf[1] = -1;
        if (read(inf[0], pids, sizeof pids) != (ssize_t)sizeof pids || pids[1] <= 0) {
                (void)waitpid(pid, NULL, 0);
                r = cm_err_set(err, ECHILD, "network: cannot start %s", n->net_path);
                goto out;
        }
        info->watcher = (net_proc){pid, proc_start_time(pid)};
        info->helper = (net_proc){pids[1], proc_start_time(pids[1])};
        r = wait_ready(ready[0], deadline);
        if (r < 0) {
                char said[512];
                helper_said(log_fd, said, sizeof said);
                r = cm_err_set(err, -r == ETIMEDOUT ? ETIMEDOUT : EIO, "network: %s did not come up%s: %s",
                               net_stack_name(info->stack), -r == ETIMEDOUT ? " in time" : "",
                               said[0] ? said : "it exited without a word");
                net_stop(info);
                goto out;
        }
        for (size_t i = 0; info->stack == NET_SLIRP && i < info->n_ports; i++)
                if ((r = slirp_hostfwd(sock, &info->ports[i], deadline, err)) < 0) {
                        net_stop(info);
                        goto out;
                }
        /* #3: go */
        if (write_all(sync_fd, "g", 1) < 0) {
                r = 0; /* the child is gone; its error, if any, is on err_fd */
                goto out;
        }
        r = 0;
out:
        if (sock)
                (void)unlink(sock); /* the ports are set; nobody else may talk to it */
        for (int i = 0; i < 2; i++) {
                if (ready[i] >= 0)
                        (void)close(ready[i]);
                if (inf[i] >= 0)
                        (void)close(inf[i]);
        }
        argv_free(&a);
        return r;
}

/* ---- stop --------------------------------------------------------------- */

static void kill_wait(const net_proc *p) {
        int fd;
        struct pollfd pf;
        if (p->pid <= 0 || !proc_alive(p->pid, p->start))
                return;
        fd = sys_pidfd_open(p->pid, 0);
        if (fd < 0)
                return;
        if (proc_alive(p->pid, p->start) && sys_pidfd_send_signal(fd, SIGKILL) == 0) {
                pf = (struct pollfd){fd, POLLIN, 0};
                (void)poll(&pf, 1, 2000);
        }
        (void)close(fd);
}

void net_stop(const net_info *info) {
        if (info->stack == NET_NONE)
                return;
        /* The helper first: the watcher reaps it, then goes itself. */
        kill_wait(&info->helper);
        kill_wait(&info->watcher);
        if (info->watcher.pid > 0)
                (void)waitpid(info->watcher.pid, NULL, WNOHANG); /* ours, unless adopted */
}

/* ---- the child's side (#2, #3) ------------------------------------------ */

int net_handoff(int sync_fd, bool userns, sb_err *e) {
        int fds[2], nfd = 0;
        char byte = 'n', cbuf[CMSG_SPACE(2 * sizeof(int))];
        struct iovec iov = {&byte, 1};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
        struct cmsghdr *cm;
        ssize_t k;

        memset(cbuf, 0, sizeof cbuf);
        if (userns && (fds[nfd++] = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC)) < 0)
                return sb_fail(e, SB_STEP_NETWORK, errno, "open /proc/self/ns/user");
        if ((fds[nfd++] = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
                return sb_fail(e, SB_STEP_NETWORK, errno, "open /proc/self/ns/net");
        mh.msg_controllen = CMSG_SPACE((size_t)nfd * sizeof(int));
        cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN((size_t)nfd * sizeof(int));
        memcpy(CMSG_DATA(cm), fds, (size_t)nfd * sizeof(int));
        do /* #2 */
                k = sendmsg(sync_fd, &mh, MSG_NOSIGNAL);
        while (k < 0 && errno == EINTR);
        for (int i = 0; i < nfd; i++)
                (void)close(fds[i]);
        if (k < 0)
                return sb_fail(e, SB_STEP_NETWORK, errno, "send the namespaces to the server");
        do /* #3 */
                k = read(sync_fd, &byte, 1);
        while (k < 0 && errno == EINTR);
        if (k != 1 || byte != 'g')
                return sb_fail(e, SB_STEP_NETWORK, k < 0 ? errno : ECONNABORTED, "the network helper did not start");
        (void)close(sync_fd);
        return 0;
}
