/* The argv of each `container` command, exactly as the first seed verified
 * them against the real CLI (container 1.0.0, macOS 26).  Apple's CLI parses
 * with swift-argument-parser: an option's value that starts with '-' is
 * read as an option, and the first word after the image (run) or the
 * container id (exec) is where known options stop being recognised.  `exec`
 * takes no `--` terminator (it would become the executable), so no value of
 * an agent may start with '-' in those places: refused here, before any
 * spawn. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/apple/internal.h"
#include "util/cleanup.h"

void apple_argv_add(apple_argv *a, const char *s) {
        if (a->n + 2 > a->cap) {
                a->cap = a->cap ? a->cap * 2 : 16;
                a->v = xrealloc(a->v, a->cap * sizeof *a->v);
        }
        a->v[a->n++] = xstrdup(s);
        a->v[a->n] = NULL;
}

void apple_argv_addf(apple_argv *a, const char *fmt, ...) {
        va_list ap, again;
        int n;
        char *s;
        va_start(ap, fmt);
        va_copy(again, ap);
        n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        s = xmalloc((size_t)(n < 0 ? 0 : n) + 1);
        (void)vsnprintf(s, (size_t)(n < 0 ? 0 : n) + 1, fmt, again);
        va_end(again);
        apple_argv_add(a, s);
        free(s);
}

void apple_argv_free(apple_argv *a) {
        for (size_t i = 0; i < a->n; i++)
                free(a->v[i]);
        free(a->v);
        *a = (apple_argv){0};
}

/* A value that would reach the CLI as one of its own flags. */
static int dash(const char *what, const char *value, cm_err *err) {
        return cm_err_set(err, EINVAL,
                          "%s \"%s\" starts with '-', which Apple's container CLI would take as one of its own "
                          "options (it has no `--` terminator there); refused before running it: give a value that "
                          "does not start with '-'%s",
                          what, value,
                          strcmp(what, "command[0]") == 0 ? " (e.g. the program's path, or [\"sh\", \"-c\", ...])"
                                                          : "");
}

/* `--flag value`, the value never read as a flag. */
static int opt(apple_argv *a, const char *flag, const char *what, const char *value, cm_err *err) {
        if (value[0] == '-')
                return dash(what, value, err);
        apple_argv_add(a, flag);
        apple_argv_add(a, value);
        return 0;
}

static int kv_opt(apple_argv *a, const char *flag, const char *what, const cm_kv *kv, cm_err *err) {
        cleanup_free char *v = xasprintf("%s=%s", kv->key, kv->value ? kv->value : "");
        if (!kv->key[0] || strchr(kv->key, '='))
                return cm_err_set(err, EINVAL, "%s \"%s\": a name must be non-empty and hold no '='", what, kv->key);
        return opt(a, flag, what, v, err);
}

static int env_opts(apple_argv *a, const cm_kv *env, size_t n, cm_err *err) {
        for (size_t i = 0; i < n; i++)
                if (kv_opt(a, "--env", "env", &env[i], err) < 0)
                        return -EINVAL;
        return 0;
}

/* The words of the command: the first must not look like a flag. */
static int command_words(apple_argv *a, char *const *argv, size_t argc, cm_err *err) {
        if (argc > 0 && argv[0][0] == '-')
                return dash("command[0]", argv[0], err);
        for (size_t i = 0; i < argc; i++)
                apple_argv_add(a, argv[i]);
        return 0;
}

/* `--volume SRC:DST[:ro]`: the CLI splits on ':'. */
static int volume_opts(apple_argv *a, const cm_mount *m, size_t n, cm_err *err) {
        for (size_t i = 0; i < n; i++) {
                if (strchr(m[i].source, ':') || strchr(m[i].target, ':'))
                        return cm_err_set(err, EINVAL,
                                          "mounts[%zu]: \"%s\" -> \"%s\" holds ':', which Apple's --volume syntax "
                                          "(source:target[:ro]) cannot carry; rename the directory or mount its parent",
                                          i, m[i].source, m[i].target);
                if (m[i].source[0] != '/' || m[i].target[0] != '/')
                        return cm_err_set(err, EINVAL, "mounts[%zu]: source and target must be absolute paths", i);
                apple_argv_add(a, "--volume");
                apple_argv_addf(a, "%s:%s%s", m[i].source, m[i].target, m[i].readonly ? ":ro" : "");
        }
        return 0;
}

static void port_opts(apple_argv *a, const cm_port *p, size_t n) {
        for (size_t i = 0; i < n; i++) {
                apple_argv_add(a, "--publish");
                apple_argv_addf(a, "127.0.0.1:%u:%u/%s", p[i].host_port, p[i].container_port,
                                p[i].protocol ? p[i].protocol : "tcp");
        }
}

/* Apple's VMs get whole CPUs and memory in MiB: round up, never below
 * what was asked. */
static void limit_opts(apple_argv *a, const cm_run_spec *s) {
        if (s->cpus > 0) {
                long long whole = (long long)s->cpus;
                whole += (double)whole < s->cpus;
                apple_argv_add(a, "--cpus");
                apple_argv_addf(a, "%lld", whole < 1 ? 1 : whole);
        }
        if (s->memory_bytes > 0) {
                apple_argv_add(a, "--memory");
                apple_argv_addf(a, "%lldM", (long long)((s->memory_bytes + (1 << 20) - 1) >> 20));
        }
}

static int run_options(apple_argv *a, const cm_run_spec *s, const char *name, bool detach, cm_err *err) {
        apple_argv_add(a, "run");
        /* A wait run is removed by the CLI when it ends (the seed's --rm). */
        apple_argv_add(a, detach ? "-d" : "--rm");
        if (name && opt(a, "--name", "name", name, err) < 0)
                return -EINVAL;
        for (size_t i = 0; i < s->n_labels; i++)
                if (kv_opt(a, "--label", "label", &s->labels[i], err) < 0)
                        return -EINVAL;
        /* Default-deny: no network unless the policy allowed it. */
        if (!s->network) {
                apple_argv_add(a, "--network");
                apple_argv_add(a, "none");
        }
        limit_opts(a, s);
        if (env_opts(a, s->env, s->n_env, err) < 0 || (s->workdir && opt(a, "--workdir", "workdir", s->workdir, err) < 0))
                return -EINVAL;
        if (volume_opts(a, s->mounts, s->n_mounts, err) < 0)
                return -EINVAL;
        port_opts(a, s->ports, s->n_ports);
        if (s->readonly_rootfs)
                apple_argv_add(a, "--read-only");
        return 0;
}

int apple_run_argv(const char *cli, const cm_run_spec *s, const char *name, bool detach, apple_argv *ret,
                   cm_err *err) {
        apple_argv a = {0};
        apple_argv_add(&a, cli);
        if (run_options(&a, s, name, detach, err) < 0 || (s->image[0] == '-' && dash("image", s->image, err) < 0))
                goto fail;
        apple_argv_add(&a, s->image);
        if (command_words(&a, s->argv, s->argc, err) < 0)
                goto fail;
        *ret = a;
        return 0;
fail:
        apple_argv_free(&a);
        return -EINVAL;
}

int apple_exec_argv(const char *cli, const char *id, const cm_exec_spec *s, apple_argv *ret, cm_err *err) {
        apple_argv a = {0};
        apple_argv_add(&a, cli);
        apple_argv_add(&a, "exec");
        if (s->stdin_data)
                apple_argv_add(&a, "--interactive");
        if (env_opts(&a, s->env, s->n_env, err) < 0 || (s->workdir && opt(&a, "--workdir", "workdir", s->workdir, err) < 0))
                goto fail;
        if (id[0] == '-' && dash("container", id, err) < 0)
                goto fail;
        apple_argv_add(&a, id);
        /* No `--` here: Apple's exec would run `--` itself. */
        if (s->argc == 0 && cm_err_set(err, EINVAL, "command: give at least the program to run") < 0)
                goto fail;
        if (command_words(&a, s->argv, s->argc, err) < 0)
                goto fail;
        *ret = a;
        return 0;
fail:
        apple_argv_free(&a);
        return -EINVAL;
}

int apple_cp_argv(const char *cli, const char *id, const char *host_path, const char *container_path, bool to_container,
                  apple_argv *ret, cm_err *err) {
        apple_argv a = {0};
        /* `container cp` splits each side on ':' (ID:PATH or a local path). */
        if (strchr(host_path, ':') || strchr(container_path, ':') || strchr(id, ':'))
                return cm_err_set(err, EINVAL,
                                  "copy_files: \"%s\" or \"%s\" holds ':', which Apple's `container cp` reads as "
                                  "CONTAINER:PATH; rename it or copy its parent directory",
                                  host_path, container_path);
        if (host_path[0] != '/' || container_path[0] != '/')
                return cm_err_set(err, EINVAL, "copy_files: both paths must be absolute");
        if (id[0] == '-')
                return dash("container", id, err);
        apple_argv_add(&a, cli);
        apple_argv_add(&a, "cp");
        if (to_container) {
                apple_argv_add(&a, host_path);
                apple_argv_addf(&a, "%s:%s", id, container_path);
        } else {
                apple_argv_addf(&a, "%s:%s", id, container_path);
                apple_argv_add(&a, host_path);
        }
        *ret = a;
        return 0;
}

int apple_id_argv(const char *cli, const char *verb, const char *const *flags, const char *id, apple_argv *ret,
                  cm_err *err) {
        apple_argv a = {0};
        if (id[0] == '-')
                return dash("container", id, err);
        apple_argv_add(&a, cli);
        apple_argv_add(&a, verb);
        for (size_t i = 0; flags && flags[i]; i++)
                apple_argv_add(&a, flags[i]);
        apple_argv_add(&a, id);
        *ret = a;
        return 0;
}
