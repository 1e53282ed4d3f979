/* State: one JSON record per container, so list, inspect, logs and remove
 * work after the server restarts, and a new server can find what a dead one
 * left behind.
 *
 *   <state dir>/containers/<id>/state.json   the record (written atomically)
 *   <state dir>/containers/<id>/log          main process output, capped
 *   <state dir>/containers/<id>/exit         exit code, written by the init
 *   <state dir>/containers/<id>/ctl          the init's control socket (exec)
 *   <state dir>/lock                         flock for name uniqueness
 *   <state dir>/etc, root                    the host image's /etc copy, and
 *                                            where new roots are built
 *
 * Runs to completion (and warm sandboxes) have no record: they die with
 * their server, and their cgroups sit under its srv-<pid>-<start> dir.
 *
 * The record holds the static facts; whether a container runs is derived
 * each time from its init (pid plus start time, so a reused pid is not
 * mistaken for it). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "backend/native/linux.h"
#include "util/cleanup.h"
#include "util/json.h"

static int mkdir_p(const char *path, mode_t mode) {
        cleanup_free char *p = xstrdup(path);
        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = 0;
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        if (mkdir(p, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

int state_dir_resolve(char **ret, cm_err *err) {
        const char *env = getenv("CONTAINER_MCP_STATE_DIR");
        const char *xdg = getenv("XDG_STATE_HOME");
        const char *home = getenv("HOME");
        cleanup_free char *dir = NULL;
        int r;

        if (env && env[0] == '/')
                dir = xstrdup(env);
        else if (xdg && xdg[0] == '/')
                dir = xasprintf("%s/container-mcp", xdg);
        else if (geteuid() == 0)
                dir = xstrdup("/var/lib/container-mcp");
        else if (home && home[0] == '/')
                dir = xasprintf("%s/.local/state/container-mcp", home);
        else
                return cm_err_set(err, ENOENT, "no state directory: set CONTAINER_MCP_STATE_DIR to an absolute path");
        r = mkdir_p(dir, 0700);
        if (r < 0)
                return cm_err_sys(err, -r, "cannot create the state directory %s (set CONTAINER_MCP_STATE_DIR)", dir);
        *ret = steal_pointer(&dir);
        return 0;
}

/* ---- JSON <-> record ---------------------------------------------------- */

static json_t *strv_json(char **v) {
        json_t *a;
        if (!v)
                return json_null();
        a = json_array();
        for (; *v; v++)
                (void)json_array_append_new(a, json_string(*v));
        return a;
}

static char **json_strv(const json_t *a) {
        char **v;
        size_t i;
        json_t *x;
        if (!json_is_array(a))
                return NULL;
        v = xcalloc(json_array_size(a) + 1, sizeof *v);
        json_array_foreach(a, i, x) v[i] = xstrdup(json_string_value(x) ? json_string_value(x) : "");
        return v;
}

static void strv_free(char **v) {
        for (char **p = v; p && *p; p++)
                free(*p);
        free(v);
}

/* "net": which helper runs for the sandbox (to kill it on every path);
 * "ports": what is published, with the host ports in effect. */
static json_t *net_json(const net_info *n) {
        return json_pack("{s:s, s:{s:i, s:I}, s:{s:i, s:I}}", "stack", net_stack_name(n->stack), "helper", "pid",
                         (int)n->helper.pid, "start", (json_int_t)n->helper.start, "watcher", "pid",
                         (int)n->watcher.pid, "start", (json_int_t)n->watcher.start);
}

static json_t *ports_json(const net_info *n) {
        json_t *a = json_array();
        for (size_t i = 0; i < n->n_ports; i++)
                (void)json_array_append_new(a, json_pack("{s:s, s:i, s:i, s:s}", "host_ip", "127.0.0.1", "host_port",
                                                         n->ports[i].host_port, "container_port",
                                                         n->ports[i].container_port, "protocol",
                                                         n->ports[i].udp ? "udp" : "tcp"));
        return a;
}

static void net_parse(const json_t *j, net_info *n) {
        const json_t *net = json_object_get(j, "net"), *ports = json_object_get(j, "ports"), *p;
        const char *stack = cm_json_str(net, "stack");
        size_t i;

        n->stack = !stack                              ? NET_NONE
                   : strcmp(stack, "pasta") == 0       ? NET_PASTA
                   : strcmp(stack, "slirp4netns") == 0 ? NET_SLIRP
                                                       : NET_NONE;
        n->helper.pid = (pid_t)json_integer_value(json_object_get(json_object_get(net, "helper"), "pid"));
        n->helper.start = (uint64_t)json_integer_value(json_object_get(json_object_get(net, "helper"), "start"));
        n->watcher.pid = (pid_t)json_integer_value(json_object_get(json_object_get(net, "watcher"), "pid"));
        n->watcher.start = (uint64_t)json_integer_value(json_object_get(json_object_get(net, "watcher"), "start"));
        json_array_foreach(ports, i, p) {
                const char *proto = cm_json_str(p, "protocol");
                if (i >= NET_MAX_PORTS)
                        break;
                n->ports[i] = (net_port){(uint16_t)json_integer_value(json_object_get(p, "host_port")),
                                         (uint16_t)json_integer_value(json_object_get(p, "container_port")),
                                         proto && strcmp(proto, "udp") == 0};
                n->n_ports = i + 1;
        }
}

static json_t *mounts_json(const nstate *s) {
        json_t *a = json_array();
        for (size_t i = 0; i < s->n_mounts; i++)
                (void)json_array_append_new(a, json_pack("{s:s, s:s, s:b}", "source", s->mounts[i].source, "target",
                                                         s->mounts[i].target, "readonly", s->mounts[i].readonly));
        return a;
}

static void mounts_parse(const json_t *a, nstate *s) {
        const json_t *m;
        size_t i;
        s->mounts = xcalloc(json_array_size(a) + 1, sizeof *s->mounts);
        json_array_foreach(a, i, m) {
                if (!cm_json_str(m, "source") || !cm_json_str(m, "target"))
                        continue;
                s->mounts[s->n_mounts++] =
                        (struct nmount){xstrdup(cm_json_str(m, "source")), xstrdup(cm_json_str(m, "target")),
                                        json_is_true(json_object_get(m, "readonly"))};
        }
}

static json_t *record_json(const nstate *s) {
        json_t *cg = json_object(), *dirs = json_object(), *labels = json_object(), *j;
        for (int c = 0; c < CG__N; c++)
                if (s->cg.dir[c])
                        (void)json_object_set_new(dirs, cg_ctrl_name(c), json_string(s->cg.dir[c]));
        (void)json_object_set_new(cg, "mode", json_string(cg_mode_name(s->cg.mode)));
        (void)json_object_set_new(cg, "dirs", dirs);
        for (size_t i = 0; i < s->n_labels; i++)
                (void)json_object_set_new(labels, s->labels[i].key, json_string(s->labels[i].value));
        j = json_pack("{s:s, s:s, s:s, s:I, s:{s:i, s:I}, s:{s:i, s:I}, s:b, s:b, s:b, s:b, s:o, "
                      "s:{s:I, s:f, s:I, s:I}, s:o, s:o, s:s, s:o, s:o, s:o}",
                      "id", s->id, "name", s->name, "image", s->image, "created_at", (json_int_t)s->created_at,
                      "server", "pid", (int)s->server_pid, "start", (json_int_t)s->server_start, "init", "pid",
                      (int)s->init_pid, "start", (json_int_t)s->init_start, "userns", s->userns, "ephemeral",
                      s->ephemeral, "network", s->network, "readonly_rootfs", s->readonly_rootfs, "cgroup", cg,
                      "limits", "memory_bytes", (json_int_t)s->limits.memory_bytes, "cpus", s->limits.cpus, "pids",
                      (json_int_t)s->limits.pids, "tmpfs_bytes", (json_int_t)s->tmpfs_bytes, "argv", strv_json(s->argv),
                      "env", strv_json(s->env), "workdir", s->workdir ? s->workdir : NATIVE_WORKDIR, "labels", labels,
                      "net", net_json(&s->net), "ports", ports_json(&s->net));
        if (j)
                (void)json_object_set_new(j, "mounts", mounts_json(s));
        if (j && s->image_id)
                (void)json_object_set_new(j, "image_id", json_string(s->image_id));
        if (j && s->exposed)
                (void)json_object_set_new(j, "exposed_ports", strv_json(s->exposed));
        if (j && s->set_ids)
                (void)json_object_set_new(j, "user",
                                          json_pack("{s:I, s:I, s:b}", "uid", (json_int_t)s->run_uid, "gid",
                                                    (json_int_t)s->run_gid, "nested", s->nest_ids));
        return j;
}

static int record_parse(const json_t *j, nstate *s) {
        json_t *dirs = json_object_get(json_object_get(j, "cgroup"), "dirs"), *lim = json_object_get(j, "limits");
        json_t *labels = json_object_get(j, "labels"), *v;
        const char *k, *mode = cm_json_str(json_object_get(j, "cgroup"), "mode");

        if (!cm_json_str(j, "id"))
                return -EINVAL;
        s->id = xstrdup(cm_json_str(j, "id"));
        s->name = xstrdup(cm_json_str(j, "name"));
        s->image = xstrdup(cm_json_str(j, "image"));
        s->image_id = cm_json_str(j, "image_id") ? xstrdup(cm_json_str(j, "image_id")) : NULL;
        s->exposed = json_is_array(json_object_get(j, "exposed_ports")) ? json_strv(json_object_get(j, "exposed_ports"))
                                                                        : NULL;
        if (json_is_object(json_object_get(j, "user"))) {
                s->set_ids = true;
                s->run_uid = (uid_t)json_integer_value(json_object_get(json_object_get(j, "user"), "uid"));
                s->run_gid = (gid_t)json_integer_value(json_object_get(json_object_get(j, "user"), "gid"));
                s->nest_ids = json_is_true(json_object_get(json_object_get(j, "user"), "nested"));
        }
        s->workdir = xstrdup(cm_json_str(j, "workdir") ? cm_json_str(j, "workdir") : NATIVE_WORKDIR);
        s->created_at = json_integer_value(json_object_get(j, "created_at"));
        s->server_pid = (pid_t)json_integer_value(json_object_get(json_object_get(j, "server"), "pid"));
        s->server_start = (uint64_t)json_integer_value(json_object_get(json_object_get(j, "server"), "start"));
        s->init_pid = (pid_t)json_integer_value(json_object_get(json_object_get(j, "init"), "pid"));
        s->init_start = (uint64_t)json_integer_value(json_object_get(json_object_get(j, "init"), "start"));
        s->userns = json_is_true(json_object_get(j, "userns"));
        s->ephemeral = json_is_true(json_object_get(j, "ephemeral"));
        s->network = json_is_true(json_object_get(j, "network"));
        s->readonly_rootfs = json_is_true(json_object_get(j, "readonly_rootfs"));
        net_parse(j, &s->net);
        s->cg.mode = mode && strcmp(mode, "v2") == 0 ? CG_V2 : mode && strcmp(mode, "v1") == 0 ? CG_V1 : CG_NONE;
        json_object_foreach(dirs, k, v) {
                int c = cg_ctrl_from_name(k);
                if (c >= 0 && json_string_value(v))
                        s->cg.dir[c] = xstrdup(json_string_value(v));
        }
        s->limits.memory_bytes = json_integer_value(json_object_get(lim, "memory_bytes"));
        s->limits.cpus = json_number_value(json_object_get(lim, "cpus"));
        s->limits.pids = json_integer_value(json_object_get(lim, "pids"));
        s->tmpfs_bytes = json_integer_value(json_object_get(lim, "tmpfs_bytes"));
        mounts_parse(json_object_get(j, "mounts"), s);
        s->argv = json_strv(json_object_get(j, "argv"));
        s->env = json_strv(json_object_get(j, "env"));
        s->labels = xcalloc(json_object_size(labels) + 1, sizeof *s->labels);
        json_object_foreach(labels, k, v) {
                s->labels[s->n_labels].key = xstrdup(k);
                s->labels[s->n_labels++].value = xstrdup(json_string_value(v) ? json_string_value(v) : "");
        }
        return 0;
}

void state_free(nstate *s) {
        free(s->id);
        free(s->name);
        free(s->image);
        free(s->image_id);
        for (char **p = s->exposed; p && *p; p++)
                free(*p);
        free(s->exposed);
        free(s->dir);
        free(s->workdir);
        cg_paths_free(&s->cg);
        strv_free(s->argv);
        strv_free(s->env);
        for (size_t i = 0; i < s->n_labels; i++) {
                free((char *)s->labels[i].key);
                free((char *)s->labels[i].value);
        }
        free(s->labels);
        for (size_t i = 0; i < s->n_mounts; i++) {
                free(s->mounts[i].source);
                free(s->mounts[i].target);
        }
        free(s->mounts);
        *s = (nstate){0};
}

/* ---- files -------------------------------------------------------------- */

int state_save(const nstate *s, cm_err *err) {
        cleanup_json json_t *j = record_json(s);
        cleanup_free char *tmp = xasprintf("%s/state.json.tmp", s->dir);
        cleanup_free char *path = xasprintf("%s/state.json", s->dir);

        if (!j)
                return cm_err_set(err, EINVAL, "state: cannot encode the record of %s", s->id);
        if (json_dump_file(j, tmp, JSON_COMPACT) < 0 || rename(tmp, path) < 0)
                return cm_err_sys(err, errno ? errno : EIO, "state: cannot write %s", path);
        return 0;
}

static void state_refresh(nstate *s);

/* The record's JSON, read whole: jansson's file loader takes a byte at a
 * time through stdio, and exec loads a record on every call. */
static json_t *load_record(const char *path) {
        char stack[8192];
        cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
        cleanup_free char *heap = NULL;
        char *buf = stack;
        size_t len = 0, cap = sizeof stack;
        ssize_t k;

        if (fd < 0)
                return NULL;
        while ((k = read(fd, buf + len, cap - len)) > 0) {
                len += (size_t)k;
                if (len == cap) {
                        if (cap >= ((size_t)1 << 24))
                                return NULL; /* no record is this big */
                        heap = buf == stack ? memcpy(xmalloc(cap * 2), stack, len) : xrealloc(heap, cap * 2);
                        buf = heap;
                        cap *= 2;
                }
        }
        return k < 0 ? NULL : json_loadb(buf, len, 0, NULL);
}

static int load_dir(const char *dir, nstate *ret) {
        cleanup_free char *path = xasprintf("%s/state.json", dir);
        cleanup_json json_t *j = load_record(path);
        nstate s = {0};

        if (!j)
                return -ENOENT;
        if (record_parse(j, &s) < 0) {
                state_free(&s);
                return -EINVAL;
        }
        s.dir = xstrdup(dir);
        state_refresh(&s);
        *ret = s;
        return 0;
}

static char *containers_dir(const native *n) { return xasprintf("%s/containers", n->state_dir); }

static void state_refresh(nstate *s) {
        cleanup_free char *exit_path = xasprintf("%s/exit", s->dir);
        char buf[32];

        /* Reap our own child if it ended, so it is not left a zombie. */
        if (s->init_pid > 0 && s->server_pid == getpid())
                (void)waitpid(s->init_pid, NULL, WNOHANG);
        if (s->net.watcher.pid > 0 && s->server_pid == getpid())
                (void)waitpid(s->net.watcher.pid, NULL, WNOHANG);
        s->exit_code = -1;
        if (init_alive(s)) {
                (void)snprintf(s->state, sizeof s->state, "running");
                return;
        }
        if (read_file(exit_path, buf, sizeof buf) > 0) {
                s->exit_code = atoi(buf);
                (void)snprintf(s->state, sizeof s->state, "exited");
                return;
        }
        (void)snprintf(s->state, sizeof s->state, s->init_pid > 0 ? "dead" : "created");
}

int state_list(const native *n, nstate **ret, size_t *ret_n, cm_err *err) {
        cleanup_free char *dir = containers_dir(n);
        DIR *d = opendir(dir);
        struct dirent *de;
        nstate *v = NULL;
        size_t len = 0, cap = 0;

        if (!d) {
                if (errno != ENOENT)
                        return cm_err_sys(err, errno, "state: cannot read %s", dir);
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        while ((de = readdir(d))) {
                cleanup_free char *sub = NULL;
                if (de->d_name[0] == '.')
                        continue;
                if (len == cap) {
                        cap = cap ? cap * 2 : 16;
                        v = xrealloc(v, cap * sizeof *v);
                }
                sub = xasprintf("%s/%s", dir, de->d_name);
                if (load_dir(sub, &v[len]) == 0)
                        len++;
        }
        (void)closedir(d);
        *ret = v;
        *ret_n = len;
        return 0;
}

static void list_free(nstate *v, size_t n) {
        for (size_t i = 0; i < n; i++)
                state_free(&v[i]);
        free(v);
}

/* By id, by name, or by a unique prefix of the id. */
int state_load(const native *n, const char *key, nstate *ret, cm_err *err) {
        cleanup_free char *cdir = containers_dir(n);
        nstate *v = NULL;
        size_t len = 0, hit = (size_t)-1, hits = 0;

        if (!key || !*key || strchr(key, '/') || key[0] == '.')
                return cm_err_set(err, EINVAL, "container id or name \"%s\" is not valid", key ? key : "");
        {
                cleanup_free char *dir = xasprintf("%s/%s", cdir, key);
                if (load_dir(dir, ret) == 0)
                        return 0;
        }
        if (state_list(n, &v, &len, err) < 0)
                return -1;
        for (size_t i = 0; i < len; i++)
                if (strcmp(v[i].name, key) == 0) {
                        hit = i;
                        hits = 1;
                        break;
                } else if (strncmp(v[i].id, key, strlen(key)) == 0) {
                        hit = i;
                        hits++;
                }
        if (hits == 1) {
                *ret = v[hit];
                v[hit] = (nstate){0};
                list_free(v, len);
                return 0;
        }
        list_free(v, len);
        if (hits > 1)
                return cm_err_set(err, EINVAL, "\"%s\" matches %zu containers; give more of the id", key, hits);
        return cm_err_set(err, ENOENT, "no container \"%s\"; list_containers shows the ones that exist", key);
}

int state_name_taken(const native *n, const char *name) {
        nstate *v = NULL;
        size_t len = 0;
        int taken = 0;
        if (state_list(n, &v, &len, NULL) < 0)
                return 0;
        for (size_t i = 0; i < len && !taken; i++)
                taken = strcmp(v[i].name, name) == 0;
        list_free(v, len);
        return taken;
}

void state_delete(const nstate *s) {
        static const char *const files[] = {"state.json", "state.json.tmp", "log", "log.idx", "exit", "ctl"};
        if (!s->dir)
                return;
        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
                cleanup_free char *p = xasprintf("%s/%s", s->dir, files[i]);
                (void)unlink(p);
        }
        {
                /* a directory image's copy (rootfs.c) */
                cleanup_free char *copy = xasprintf("%s/rootfs", s->dir);
                rootfs_remove(copy);
        }
        (void)rmdir(s->dir);
}

char *state_to_json(const nstate *s) {
        cleanup_json json_t *j = record_json(s);
        (void)json_object_set_new(j, "state", json_string(s->state));
        if (s->exit_code >= 0)
                (void)json_object_set_new(j, "exit_code", json_integer(s->exit_code));
        (void)json_object_set_new(j, "dir", json_string(s->dir));
        (void)json_object_set_new(j, "runtime", json_string("native"));
        return cm_json_dump(j);
}

/* ---- orphans ------------------------------------------------------------ */

/* SIGKILL an init (checked by start time) and wait, bounded, for it to go. */
void state_kill_init(const nstate *s) {
        int fd;
        struct pollfd p;
        if (!init_alive(s))
                return;
        fd = sys_pidfd_open(s->init_pid, 0);
        if (fd < 0)
                return;
        if (init_alive(s) && sys_pidfd_send_signal(fd, SIGKILL) == 0) {
                p = (struct pollfd){fd, POLLIN, 0};
                (void)poll(&p, 1, 2000);
        }
        if (s->server_pid == getpid())
                (void)waitpid(s->init_pid, NULL, WNOHANG);
        (void)close(fd);
}

/* The cgroups of a dead server's runs to completion, under srv-<pid>-<start>. */
static void reap_srv_dir(native *n, int c, const char *base, const char *name) {
        int pid = 0;
        unsigned long long start = 0;
        cleanup_free char *dir = NULL;
        DIR *d;
        struct dirent *de;

        if (sscanf(name, "srv-%d-%llu", &pid, &start) != 2 || (pid == n->self_pid && start == n->self_start) ||
            proc_alive(pid, start))
                return;
        dir = xasprintf("%s/%s", base, name);
        if ((d = opendir(dir))) {
                while ((de = readdir(d)))
                        if (de->d_type == DT_DIR && de->d_name[0] != '.') {
                                cg_paths p = {.mode = n->cg.mode};
                                p.dir[c] = xasprintf("%s/%s", dir, de->d_name);
                                (void)cg_destroy(&p);
                                cg_paths_free(&p);
                        }
                (void)closedir(d);
        }
        (void)rmdir(dir);
}

/* Whether container `id` has a record now.  The list the reaper took may be
 * older than a cgroup it finds: another server saves a record first, then
 * makes the cgroup, so a cgroup whose record is not in the list may be one
 * that server is starting right now. */
static bool has_record(const native *n, const char *id) {
        cleanup_free char *dir = xasprintf("%s/containers/%s", n->state_dir, id);
        struct stat st;
        return stat(dir, &st) == 0 || errno != ENOENT;
}

/* cgroup dirs with no record left: what a crash between the two leaks, and
 * the run-to-completion cgroups of dead servers. */
static void reap_cgroups(native *n, const nstate *v, size_t len) {
        for (int c = 0; c < CG__N; c++) {
                DIR *d;
                struct dirent *de;
                if (!n->cg.base[c] || !(d = opendir(n->cg.base[c])))
                        continue;
                while ((de = readdir(d))) {
                        bool known = false;
                        if (de->d_type != DT_DIR || de->d_name[0] == '.')
                                continue;
                        if (strncmp(de->d_name, "srv-", 4) == 0) {
                                reap_srv_dir(n, c, n->cg.base[c], de->d_name);
                                continue;
                        }
                        for (size_t i = 0; i < len && !known; i++)
                                known = strcmp(v[i].id, de->d_name) == 0;
                        if (!known && !has_record(n, de->d_name)) {
                                cg_paths p = {.mode = n->cg.mode};
                                p.dir[c] = xasprintf("%s/%s", n->cg.base[c], de->d_name);
                                (void)cg_destroy(&p);
                                cg_paths_free(&p);
                        }
                }
                (void)closedir(d);
        }
}

/* The srv- dirs of dead servers of other state dirs too: a srv- dir names
 * its server, so whose it was does not matter.  (A test run, say, whose
 * temporary state dir no server will open again.)  Their records are not
 * ours to touch, so nothing else is. */
static void reap_other_tags(native *n) {
        for (int c = 0; c < CG__N; c++) {
                cleanup_free char *parent = NULL;
                DIR *d, *t;
                struct dirent *de, *te;
                char *slash;

                if (!n->cg.base[c] || !(slash = strrchr(n->cg.base[c], '/')))
                        continue;
                parent = xstrndup(n->cg.base[c], (size_t)(slash - n->cg.base[c]));
                if (!(d = opendir(parent)))
                        continue;
                while ((de = readdir(d))) {
                        cleanup_free char *tag = NULL;
                        if (de->d_type != DT_DIR || de->d_name[0] == '.' || strcmp(de->d_name, slash + 1) == 0)
                                continue;
                        tag = xasprintf("%s/%s", parent, de->d_name);
                        if (!(t = opendir(tag)))
                                continue;
                        while ((te = readdir(t)))
                                if (te->d_type == DT_DIR && strncmp(te->d_name, "srv-", 4) == 0)
                                        reap_srv_dir(n, c, tag, te->d_name);
                        (void)closedir(t);
                        (void)rmdir(tag); /* when nothing is left in it */
                }
                (void)closedir(d);
        }
}

void state_reap_orphans(native *n) {
        nstate *v = NULL;
        size_t len = 0;

        if (state_list(n, &v, &len, NULL) < 0)
                return;
        for (size_t i = 0; i < len; i++) {
                nstate *s = &v[i];
                if (s->server_pid == n->self_pid && s->server_start == n->self_start)
                        continue;
                if (s->server_pid > 0 && proc_alive(s->server_pid, s->server_start))
                        continue; /* another live server's */
                if (n->adopt_orphans && !s->ephemeral && strcmp(s->state, "running") == 0) {
                        s->server_pid = n->self_pid;
                        s->server_start = n->self_start;
                        (void)state_save(s, NULL);
                        continue;
                }
                state_kill_init(s);
                net_stop(&s->net);
                (void)cg_destroy(&s->cg);
                state_delete(s);
                s->id[0] = 0; /* gone: its cgroups are no longer known */
        }
        reap_cgroups(n, v, len);
        if (n->cg.mode != CG_NONE) /* the base's parent is ours: <...>/container-mcp */
                reap_other_tags(n);
        list_free(v, len);
}
