/* run (detached), run to completion, exec. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend/apple/internal.h"
#include "util/cleanup.h"

#define DEFAULT_OUTPUT_CAP (1u << 20)
/* `run` may pull the image first: the seed gave pulls and wait runs 600 s. */
#define PULL_FACTOR 5

/* A name for a wait run, so a timeout or a cancel can remove it. */
static char *wait_name(void) {
        unsigned char b[8] = {0};
        cleanup_close int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        char *s = xmalloc(3 + 2 * sizeof b + 1);
        if (fd < 0 || read(fd, b, sizeof b) != (ssize_t)sizeof b)
                for (size_t i = 0; i < sizeof b; i++) /* no urandom: unique enough within this process */
                        b[i] = (unsigned char)(((uintptr_t)s >> (i * 4)) ^ (unsigned)getpid() ^ i);
        memcpy(s, "cm-", 3);
        for (size_t i = 0; i < sizeof b; i++)
                (void)snprintf(s + 3 + 2 * i, 3, "%02x", b[i]);
        return s;
}

/* The id `container run -d` prints: its last non-empty line. */
static char *printed_id(char *out) {
        char *line = NULL, *save = NULL;
        for (char *t = strtok_r(out, "\r\n", &save); t; t = strtok_r(NULL, "\r\n", &save))
                if (t[strspn(t, " \t")])
                        line = t;
        return line ? xstrdup(line + strspn(line, " \t")) : NULL;
}

/* A free port on 127.0.0.1 for hostPort 0: Apple's --publish needs one.
 * The kernel picks it; another process may take it before the VM binds,
 * and then `container run` fails and says so. */
static int free_port(int type, uint16_t *ret, cm_err *err) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof sa;
        cleanup_close int fd = socket(AF_INET, type, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
            getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
                return cm_err_sys(err, errno, "cannot find a free port on 127.0.0.1 for hostPort 0");
        *ret = ntohs(sa.sin_port);
        return 0;
}

int apple_run(cm_backend *b, const cm_run_spec *spec, char **ret_id, cm_err *err) {
        apple *a = (apple *)b;
        cleanup_free char *cli = apple_find_cli(err);
        cleanup_free cm_port *ports = spec->n_ports ? xcalloc(spec->n_ports, sizeof *ports) : NULL;
        cm_run_spec s = *spec;
        apple_argv argv = {0};
        cm_exec_result r = {0};
        int ret = -1;
        for (size_t i = 0; i < spec->n_ports; i++) {
                ports[i] = spec->ports[i];
                if (!ports[i].host_port &&
                    free_port(ports[i].protocol && strcmp(ports[i].protocol, "udp") == 0 ? SOCK_DGRAM : SOCK_STREAM,
                              &ports[i].host_port, err) < 0)
                        return -1;
        }
        s.ports = ports;
        if (!cli || apple_run_argv(cli, &s, spec->name, true, &argv, err) < 0)
                return -1;
        if (apple_run_cli(a, &argv, "run", 1 << 16, NULL, a->timeout_ms * (PULL_FACTOR - 1), &r, err) == 0) {
                *ret_id = printed_id(r.out);
                ret = *ret_id ? 0 : cm_err_set(err, EPROTO, "`container run -d` printed no container id");
        }
        cm_exec_result_clear(&r);
        apple_argv_free(&argv);
        return ret;
}

int apple_run_wait(cm_backend *b, const cm_run_spec *spec, const cm_cancel *cancel, cm_exec_result *ret, cm_err *err) {
        apple *a = (apple *)b;
        cleanup_free char *cli = apple_find_cli(err), *name = spec->name ? xstrdup(spec->name) : wait_name();
        apple_argv argv = {0};
        cm_spawn_io io = {NULL, 0, spec->timeout_ms, cancel, spec->output_cap ? spec->output_cap : DEFAULT_OUTPUT_CAP};
        cm_err ignored = CM_ERR_INIT;
        int r;
        if (!cli || apple_run_argv(cli, spec, name, false, &argv, err) < 0)
                return -1;
        r = cm_spawn(argv.v, &io, ret, err);
        apple_argv_free(&argv);
        /* Killing the CLI may leave the VM: remove it (--rm did not run). */
        if (r < 0 || ret->timed_out)
                (void)apple_id_command(a, "delete", (const char *const[]){"--force", NULL}, name, 0, &ignored);
        return r;
}

int apple_exec(cm_backend *b, const char *id, const cm_exec_spec *spec, const cm_cancel *cancel, cm_exec_result *ret,
               cm_err *err) {
        cleanup_free char *cli = apple_find_cli(err);
        apple_argv argv = {0};
        cm_spawn_io io = {spec->stdin_data, spec->stdin_len, spec->timeout_ms, cancel,
                       spec->output_cap ? spec->output_cap : DEFAULT_OUTPUT_CAP};
        int r;
        (void)b;
        if (!cli || apple_exec_argv(cli, id, spec, &argv, err) < 0)
                return -1;
        r = cm_spawn(argv.v, &io, ret, err);
        apple_argv_free(&argv);
        return r;
}
