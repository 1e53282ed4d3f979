/* Helpers shared by the native runtime's tests: a backend on a private state
 * dir, a one-call run-to-completion, and the whole-program skip (TAP
 * "1..0 # SKIP why", see tests/tap.h) when this machine cannot make
 * sandboxes (say, unprivileged user namespaces disabled). */
#ifndef CM_TEST_NATIVE_NT_H
#define CM_TEST_NATIVE_NT_H

#include "../tap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <jansson.h>

#include "backend/backend.h"
#include "backend/native/native.h"
#include "util/cleanup.h"

/* argv strings: the spec takes char *const *, literals are const */
#define S(x) ((char *)(x))

static char nt_state_dir[64];
static cm_backend *nt_b;

static inline void nt_rm_rf(const char *dir) {
        /* the state dir holds only our own small files and empty dirs */
        cleanup_free char *cmd = xasprintf("rm -rf -- '%s'", dir);
        if (strncmp(dir, "/tmp/cm-native-", 15) == 0)
                (void)!system(cmd);
}

/* A backend over a fresh state dir; skips the program when the runtime
 * cannot work here, saying why. */
static inline cm_backend *nt_open_fresh(void) {
        cm_backend_status st;
        cm_backend *b;

        if (!nt_state_dir[0]) {
                (void)snprintf(nt_state_dir, sizeof nt_state_dir, "/tmp/cm-native-XXXXXX");
                if (!mkdtemp(nt_state_dir)) {
                        perror("mkdtemp");
                        exit(1);
                }
                (void)setenv("CONTAINER_MCP_STATE_DIR", nt_state_dir, 1);
        }
        b = cm_native_open();
        b->ops->status(b, &st);
        if (!st.available) {
                cleanup_free char *why = xasprintf("the native runtime cannot run here: %s (fix: %s)", st.reason, st.fix);
                b->ops->free(b);
                nt_rm_rf(nt_state_dir);
                skip_all_because("%s", why);
        }
        return b;
}

/* "--unprivileged": as root, become nobody first, so one binary tests both
 * ways (the rootless path needs unprivileged user namespaces). */
static inline void nt_setup(int argc, char **argv) {
        if (argc > 1 && strcmp(argv[1], "--unprivileged") == 0 && geteuid() == 0) {
                if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0) {
                        skip_all_because("cannot become nobody: %s", strerror(errno));
                }
                (void)setenv("HOME", "/nonexistent", 1);
                (void)unsetenv("XDG_STATE_HOME");
        }
        nt_b = nt_open_fresh();
}

/* The host uid a sandbox's root is (status's userns_map): a root
 * server's range base, a rootless server's own uid. */
static inline unsigned long nt_uid_base(void) {
        cm_backend_status st;
        const char *p;
        nt_b->ops->status(nt_b, &st);
        p = strstr(st.details, "\"uid_base\":");
        if (!p)
                fail_msg("status has no userns_map: %s", st.details);
        return strtoul(p + 11, NULL, 10);
}

static inline void nt_teardown(void) {
        if (nt_b)
                nt_b->ops->free(nt_b);
        nt_b = NULL;
        nt_rm_rf(nt_state_dir);
}

static inline bool nt_cgroups(void) {
        cm_backend_status st;
        nt_b->ops->status(nt_b, &st);
        return !strstr(st.details, "\"cgroup\":\"none\"");
}

/* Run argv (NULL-terminated) to completion in a fresh "host" sandbox. */
static inline int nt_run_spec(cm_run_spec *spec, cm_exec_result *r, cm_err *err) {
        if (!spec->image)
                spec->image = "host";
        for (spec->argc = 0; spec->argv && spec->argv[spec->argc];)
                spec->argc++;
        return nt_b->ops->run_wait(nt_b, spec, NULL, r, err);
}

/* sh -c SCRIPT, asserting the run itself worked. */
static inline void nt_sh(const char *script, cm_exec_result *r) {
        char *argv[] = {S("/bin/sh"), S("-c"), S(script), NULL};
        cm_run_spec spec = {.argv = argv, .timeout_ms = 20000};
        cm_err err = CM_ERR_INIT;
        int rc = nt_run_spec(&spec, r, &err);
        if (rc < 0)
                fail_msg("run_wait of %s: %s", script, err.msg);
}

static inline void nt_py(const char *code, cm_run_spec *spec, cm_exec_result *r) {
        char *argv[] = {S("python3"), S("-c"), S(code), NULL};
        cm_run_spec def = {.timeout_ms = 20000};
        cm_err err = CM_ERR_INIT;
        if (!spec)
                spec = &def;
        spec->argv = argv;
        if (nt_run_spec(spec, r, &err) < 0)
                fail_msg("run_wait of python %s: %s", code, err.msg);
}

/* The container's inspect document, parsed. */
static inline json_t *nt_inspect(const char *id) {
        cm_err err = CM_ERR_INIT;
        char *text = NULL;
        json_t *j;
        if (nt_b->ops->inspect(nt_b, id, &text, &err) < 0)
                fail_msg("inspect %s: %s", id, err.msg);
        j = json_loads(text, 0, NULL);
        free(text);
        assert_non_null(j);
        return j;
}

static inline int nt_pidfd(pid_t pid) {
        int fd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (fd < 0)
                fail_msg("pidfd_open %d: %s", (int)pid, strerror(errno));
        return fd;
}

/* A sandbox's main process: its init's only child, by the host's /proc
 * (run returns once it has exec'd: sandbox.c, sync point #1). */
static inline pid_t nt_main_pid(pid_t init) {
        char path[64], buf[64];
        int fd;
        ssize_t n;
        (void)snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)init, (int)init);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        n = read(fd, buf, sizeof buf - 1);
        (void)close(fd);
        if (n <= 0)
                fail_msg("init %d has no main process", (int)init);
        buf[n] = 0;
        return (pid_t)atoi(buf);
}

#endif
