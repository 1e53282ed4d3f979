#include "policy/config.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/cmdline.h"
#include "policy/policy.h"
#include "util/cleanup.h"

const char *const cm_all_toolsets[] = {"containers", "images", "sandbox", "files", "codex", "web", "diagnostics", NULL};
const char *const cm_default_toolsets[] = {"containers", "images", "sandbox", "files", "codex", "web", NULL};

static char **strv_new(void) { return xcalloc(1, sizeof(char *)); }

static size_t strv_len(char *const *v) {
        size_t n = 0;
        while (v && v[n])
                n++;
        return n;
}

static void strv_push(char ***v, const char *s) {
        size_t n = strv_len(*v);
        *v = xrealloc(*v, (n + 2) * sizeof(char *));
        (*v)[n] = xstrdup(s);
        (*v)[n + 1] = NULL;
}

void cm_strv_free(char **v) {
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

char *cm_strv_join(char *const *v, const char *sep) {
        size_t len = 1;
        char *out;
        for (size_t i = 0; v && v[i]; i++)
                len += strlen(v[i]) + strlen(sep);
        out = xcalloc(1, len);
        for (size_t i = 0; v && v[i]; i++) {
                if (i)
                        strcat(out, sep);
                strcat(out, v[i]);
        }
        return out;
}

int cm_parse_bool(const char *s, bool *ret) {
        static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off"};
        for (size_t i = 0; s && i < ARRAY_SIZE(yes); i++) {
                if (strcasecmp(s, yes[i]) == 0)
                        return *ret = true, 0;
                if (strcasecmp(s, no[i]) == 0)
                        return *ret = false, 0;
        }
        return -EINVAL;
}

static int64_t unit_of(const char *u, const char **ret_end) {
        static const char units[] = "kmgt";
        const char *hit = *u ? strchr(units, tolower((unsigned char)*u)) : NULL;
        *ret_end = hit ? u + 1 : u;
        return hit ? (int64_t)1 << (10 * (hit - units + 1)) : 1;
}

/* Written out instead of strtod, which also reads hex, exponents, inf, nan
 * and a leading sign or space: a size is digits and an optional fraction. */
int cm_parse_size(const char *s, int64_t *ret) {
        const char *p = s, *end;
        int64_t whole = 0, mul, frac_bytes;
        double frac = 0, scale = 0.1;
        if (!s || !isdigit((unsigned char)*p))
                return -EINVAL;
        for (; isdigit((unsigned char)*p); p++) {
                if (whole > (INT64_MAX - (*p - '0')) / 10)
                        return -ERANGE;
                whole = whole * 10 + (*p - '0');
        }
        if (*p == '.') {
                if (!isdigit((unsigned char)*++p))
                        return -EINVAL;
                for (; isdigit((unsigned char)*p); p++, scale /= 10)
                        frac += (*p - '0') * scale;
        }
        mul = unit_of(p, &end);
        if (*end && strcasecmp(end, "b") != 0 && !(end > p && strcasecmp(end, "ib") == 0))
                return -EINVAL;
        if (whole > INT64_MAX / mul)
                return -ERANGE;
        frac_bytes = (int64_t)(frac * (double)mul);
        if (whole * mul > INT64_MAX - frac_bytes)
                return -ERANGE;
        *ret = whole * mul + frac_bytes;
        return 0;
}

void cm_format_size(int64_t bytes, char ret[32]) {
        static const char units[] = "kmgt";
        int u = -1;
        double v = (double)bytes;
        while (u < 3 && v >= 1024) {
                v /= 1024;
                u++;
        }
        if (u < 0)
                (void)snprintf(ret, 32, "%lld", (long long)bytes);
        else if (v == (double)(int64_t)v)
                (void)snprintf(ret, 32, "%lld%c", (long long)v, units[u]);
        else
                (void)snprintf(ret, 32, "%.1f%c", v, units[u]);
}

int64_t cm_host_memory(void) {
        long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
        return pages > 0 && size > 0 ? (int64_t)pages * size : INT64_MAX;
}

double cm_host_cpus(void) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        return n > 0 ? (double)n : 1;
}

/* Values from an env-file fill only what the environment leaves unset. */
static int load_env_file(const char *path, cm_err *err) {
        FILE *f = fopen(path, "re");
        char line[4096];
        unsigned lineno = 0;
        if (!f)
                return cm_err_sys(err, errno, "env-file %s", path);
        while (fgets(line, sizeof line, f)) {
                char *eq, *key = line, *val;
                lineno++;
                line[strcspn(line, "\r\n")] = 0;
                while (isspace((unsigned char)*key))
                        key++;
                if (!*key || *key == '#')
                        continue;
                if (strncmp(key, "export ", 7) == 0)
                        key += 7;
                eq = strchr(key, '=');
                if (!eq || strncmp(key, "CONTAINER_MCP_", 14) != 0) {
                        (void)fclose(f);
                        return cm_err_set(err, EINVAL, "env-file %s line %u: expected CONTAINER_MCP_NAME=value", path,
                                          lineno);
                }
                *eq = 0;
                val = eq + 1;
                if (*val == '"' && strlen(val) >= 2 && val[strlen(val) - 1] == '"') {
                        val[strlen(val) - 1] = 0;
                        val++;
                }
                (void)setenv(key, val, 0);
        }
        (void)fclose(f);
        return 0;
}

int cm_config_set_toolsets(cm_config *cfg, const char *list, cm_err *err) {
        cleanup_free char *copy = xstrdup(list);
        char **v = strv_new(), *save = NULL;
        for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
                bool known = strcmp(t, "all") == 0;
                for (size_t i = 0; !known && cm_all_toolsets[i]; i++)
                        known = strcmp(t, cm_all_toolsets[i]) == 0;
                if (!known) {
                        cleanup_free char *all = cm_strv_join((char *const *)cm_all_toolsets, ", ");
                        cm_strv_free(v);
                        return cm_err_set(err, EINVAL,
                                          "unknown toolset \"%s\" in CONTAINER_MCP_TOOLSETS; known: %s, all", t, all);
                }
                if (strcmp(t, "all") == 0)
                        for (size_t i = 0; cm_all_toolsets[i]; i++)
                                strv_push(&v, cm_all_toolsets[i]);
                else
                        strv_push(&v, t);
        }
        cm_strv_free(cfg->toolsets);
        cfg->toolsets = v;
        return 0;
}

bool cm_toolset_enabled(const cm_config *cfg, const char *family) {
        for (size_t i = 0; cfg->toolsets && cfg->toolsets[i]; i++)
                if (strcmp(cfg->toolsets[i], family) == 0)
                        return true;
        return false;
}

void cm_config_add_host(cm_config *cfg, const char *host) { strv_push(&cfg->allowed_hosts, host); }
void cm_config_add_origin(cm_config *cfg, const char *origin) { strv_push(&cfg->allowed_origins, origin); }
void cm_config_add_container(cm_config *cfg, const char *ref) { strv_push(&cfg->allowed_containers, ref); }

/* Docker's rule for names ([a-zA-Z0-9][a-zA-Z0-9_.-]*), which ids (hex)
 * meet too: nothing else can name a container, and a value that starts
 * with '-' could be read as an option wherever it is passed on. */
bool cm_config_container_ref_ok(const char *ref) {
        size_t n = ref ? strlen(ref) : 0;
        if (n == 0 || n > 128 || !isalnum((unsigned char)ref[0]))
                return false;
        for (size_t i = 1; i < n; i++)
                if (!isalnum((unsigned char)ref[i]) && !strchr("_.-", ref[i]))
                        return false;
        return true;
}

static char *default_state_dir(void) {
        const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
        if (getenv("CONTAINER_MCP_STATE_DIR"))
                return xstrdup(getenv("CONTAINER_MCP_STATE_DIR"));
        if (geteuid() == 0)
                return xstrdup("/var/lib/container-mcp");
        if (xdg && *xdg == '/')
                return xasprintf("%s/container-mcp", xdg);
        return xasprintf("%s/.local/state/container-mcp", home ? home : "/tmp");
}

static void mkdir_p(const char *path, mode_t mode) {
        cleanup_free char *p = xstrdup(path);
        for (char *s = p + 1; *s; s++)
                if (*s == '/') {
                        *s = 0;
                        (void)mkdir(p, 0755);
                        *s = '/';
                }
        (void)mkdir(p, mode);
}

int cm_config_set_runlog_dir(cm_config *cfg, const char *dir, const char *setting, cm_err *err) {
        struct stat st;
        char *real;
        mkdir_p(dir, 0700);
        real = realpath(dir, NULL);
        if (!real)
                return cm_err_sys(err, errno, "run log directory %s (%s) cannot be made; choose another", dir, setting);
        if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
                free(real);
                return cm_err_set(err, ENOTDIR, "run log directory %s (%s) is not a directory; choose another", dir,
                                  setting);
        }
        /* Records hold every command and its output: another user who may
         * write the directory could delete or replace them. */
        if (st.st_uid != geteuid() || (st.st_mode & 022)) {
                cm_err_set(err, EACCES,
                           "run log directory %s (%s) is %s; use a directory of the server's user that only it "
                           "may write (chmod go-w), or leave the setting out for the state dir's runlog/",
                           real, setting, st.st_uid != geteuid() ? "owned by another user" : "writable by others");
                free(real);
                return -EACCES;
        }
        free(cfg->runlog_dir);
        free(cfg->runlog_unusable);
        cfg->runlog_unusable = NULL;
        cfg->runlog_dir = real;
        return 0;
}

/* Canonical form of a path that must exist; NULL (err set) otherwise. */
static char *canonical(const char *var, const char *path, cm_err *err) {
        char *real = realpath(path, NULL);
        if (!real)
                cm_err_sys(err, errno, "%s entry %s", var, path);
        return real;
}

/* The launch directory is a default root only when it is not / or $HOME:
 * those would hand an agent the whole machine or every secret of the user.
 * Nor when it lies inside the state dir, which no sandbox may reach.  The
 * private scratch dir is the server's own (copies of images for wait runs),
 * so it is never a root. */
static int default_mounts(cm_config *cfg) {
        char cwd[PATH_MAX];
        const char *home = getenv("HOME");
        cleanup_free char *home_real = home ? realpath(home, NULL) : NULL;
        if (getcwd(cwd, sizeof cwd) && strcmp(cwd, "/") != 0 && !(home_real && strcmp(cwd, home_real) == 0) &&
            !(cfg->state_real && cm_path_under(cwd, cfg->state_real)))
                strv_push(&cfg->allowed_mounts, cwd);
        return 0;
}

/* A colon-separated list of directories: each canonical, never /, never
 * inside the state dir (a root that contains it is kept: paths in the state
 * dir are refused one by one, cm_policy_host_path). */
static int load_dirs(cm_config *cfg, const char *var, char ***v, cm_err *err) {
        cleanup_free char *copy = xstrdup(getenv(var));
        char *save = NULL;
        for (char *p = strtok_r(copy, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
                cleanup_free char *real = canonical(var, p, err);
                if (!real)
                        return -EINVAL;
                if (strcmp(real, "/") == 0)
                        return cm_err_set(err, EINVAL,
                                          "%s may not contain /: that would expose the whole host; list the "
                                          "directories agents need instead",
                                          var);
                if (cfg->state_real && cm_path_under(real, cfg->state_real))
                        return cm_err_set(err, EINVAL,
                                          "%s entry %s lies inside the state dir %s, which no sandbox may reach; "
                                          "list a directory outside it (or move the state dir with "
                                          "CONTAINER_MCP_STATE_DIR)",
                                          var, p, cfg->state_real);
                strv_push(v, real);
        }
        return 0;
}

static int load_mounts(cm_config *cfg, cm_err *err) {
        /* The state dir exists from here on, so its canonical form is known
         * and the policy can keep every sandbox out of it. */
        mkdir_p(cfg->state_dir, 0700); /* records, sockets, the token: the server's alone */
        (void)mkdir(cfg->scratch_dir, 0700);
        cfg->state_real = realpath(cfg->state_dir, NULL);
        if (getenv("CONTAINER_MCP_IMAGE_DIRS") && load_dirs(cfg, "CONTAINER_MCP_IMAGE_DIRS", &cfg->image_dirs, err) < 0)
                return -EINVAL;
        if (!getenv("CONTAINER_MCP_ALLOWED_MOUNTS"))
                return default_mounts(cfg);
        return load_dirs(cfg, "CONTAINER_MCP_ALLOWED_MOUNTS", &cfg->allowed_mounts, err);
}

static int env_bool(const char *name, bool *ret, cm_err *err) {
        const char *v = getenv(name);
        if (v && *v && cm_parse_bool(v, ret) < 0)
                return cm_err_set(err, EINVAL, "%s=%s: expected 1/true/yes/on or 0/false/no/off", name, v);
        return 0;
}

static int env_uint(const char *name, unsigned long min, unsigned long max, unsigned long *ret, cm_err *err) {
        const char *v = getenv(name);
        char *end;
        unsigned long n;
        if (!v || !*v)
                return 0;
        errno = 0;
        n = strtoul(v, &end, 10);
        if (errno || *end || *v == '-' || n < min || n > max)
                return cm_err_set(err, EINVAL, "%s=%s: expected a whole number from %lu to %lu", name, v, min, max);
        *ret = n;
        return 0;
}

/* The HTTP transport's session limits and long-call timing (issue 8). */
/* The settings that are a whole number in an unsigned field: one table. */
static int load_uints(cm_config *cfg, cm_err *err) {
        static const struct {
                const char *name;
                unsigned long min, max;
                size_t off;
        } v[] = {
                {"CONTAINER_MCP_MAX_CONTAINERS", 1, 100000, offsetof(cm_config, max_containers)},
                {"CONTAINER_MCP_PAGE_SIZE", 1, 10000, offsetof(cm_config, page_size)},
                {"CONTAINER_MCP_MIN_HOST_PORT", 1, 65535, offsetof(cm_config, min_host_port)},
                /* the HTTP transport's connections (issue 7, point 9) */
                {"CONTAINER_MCP_HTTP_TIMEOUT", 1, 86400, offsetof(cm_config, http_timeout_sec)},
                {"CONTAINER_MCP_HTTP_MAX_CONNECTIONS", 1, 65536, offsetof(cm_config, http_max_connections)},
                {"CONTAINER_MCP_HTTP_CLIENT_CONNECTIONS", 1, 65536, offsetof(cm_config, http_client_connections)},
                {"CONTAINER_MCP_HTTP_THREADS", 0, 32, offsetof(cm_config, http_threads)},
                /* its sessions and long calls (issue 8) */
                {"CONTAINER_MCP_HTTP_MAX_SESSIONS", 1, 1000000, offsetof(cm_config, http_max_sessions)},
                {"CONTAINER_MCP_HTTP_CREDENTIAL_SESSIONS", 1, 1000000, offsetof(cm_config, http_credential_sessions)},
                {"CONTAINER_MCP_HTTP_SESSION_IDLE", 1, 604800, offsetof(cm_config, http_session_idle_sec)},
                {"CONTAINER_MCP_HTTP_INIT_GRACE", 1, 86400, offsetof(cm_config, http_init_grace_sec)},
                /* well under the 300 s after which Node's fetch gives up on headers */
                {"CONTAINER_MCP_HTTP_STREAM_AFTER_MS", 1, 120000, offsetof(cm_config, http_stream_after_ms)},
                {"CONTAINER_MCP_HTTP_KEEPALIVE_MS", 10, 120000, offsetof(cm_config, http_keepalive_ms)},
                {"CONTAINER_MCP_HTTP_REPLAY_SEC", 1, 86400, offsetof(cm_config, http_replay_sec)},
                /* the session sandbox (issue 10) */
                {"CONTAINER_MCP_SANDBOX_TTL", 0, 604800, offsetof(cm_config, sandbox_ttl_sec)},
                {"CONTAINER_MCP_COMMAND_TIMEOUT_DEFAULT", 1, 86400, offsetof(cm_config, command_timeout_sec)},
                {"CONTAINER_MCP_COMMAND_TIMEOUT_MAX", 1, 86400, offsetof(cm_config, command_timeout_max_sec)},
                /* the file tools (issue 10); 1 GiB is the largest message */
                {"CONTAINER_MCP_FILE_MAX_SIZE_MB", 1, 1024, offsetof(cm_config, file_max_size_mb)},
        };
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
                unsigned *field = (unsigned *)((char *)cfg + v[i].off);
                unsigned long n = *field;
                if (env_uint(v[i].name, v[i].min, v[i].max, &n, err) < 0)
                        return -EINVAL;
                *field = (unsigned)n;
        }
        return 0;
}

static int load_numbers(cm_config *cfg, cm_err *err) {
        const char *v;
        unsigned long n;
        if ((v = getenv("CONTAINER_MCP_DEFAULT_CPUS")) && *v) {
                char *end;
                double c = strtod(v, &end);
                if (*end || !(c > 0) || c > 1024)
                        return cm_err_set(err, EINVAL, "CONTAINER_MCP_DEFAULT_CPUS=%s: expected a number like 2 or 0.5",
                                          v);
                cfg->default_cpus = c;
        }
        if ((v = getenv("CONTAINER_MCP_IMAGE_MAX_SIZE")) && *v &&
            (cm_parse_size(v, &cfg->image_max_size) < 0 || cfg->image_max_size < 1))
                return cm_err_set(err, EINVAL,
                                  "CONTAINER_MCP_IMAGE_MAX_SIZE=%s: expected a size in bytes with an optional k, m or "
                                  "g, like 8g or 500m",
                                  v);
        if ((v = getenv("CONTAINER_MCP_DEFAULT_MEMORY")) && *v && cm_parse_size(v, &cfg->default_memory) < 0)
                return cm_err_set(err, EINVAL, "CONTAINER_MCP_DEFAULT_MEMORY=%s: expected a size like 512m or 2g", v);
        n = (unsigned long)cfg->timeout_ms;
        if (env_uint("CONTAINER_MCP_TIMEOUT_MS", 1, 86400000, &n, err) < 0)
                return -EINVAL;
        cfg->timeout_ms = (int64_t)n;
        n = cfg->max_message_bytes;
        if (env_uint("CONTAINER_MCP_MAX_MESSAGE_BYTES", 1024, 1ul << 30, &n, err) < 0)
                return -EINVAL;
        cfg->max_message_bytes = n;
        /* Read by the native backend (ns_user.c); checked here too so a bad
         * base stops the server at start instead of leaving it without
         * its native backend. */
        n = 0;
        if (env_uint("CONTAINER_MCP_USERNS_BASE", 65536, 4294901759ul, &n, err) < 0)
                return -EINVAL;
        return load_uints(cfg, err);
}

/* The session sandbox's image, timeouts and Python's memory (issue 10).
 * The memory is a size like 256m; a bare number is MiB, as the seed's
 * PYTHON_MEMORY_LIMIT=256. */
static int load_sandbox(cm_config *cfg, cm_err *err) {
        const char *v;
        if ((v = getenv("CONTAINER_MCP_SANDBOX_IMAGE")) && *v) {
                free(cfg->sandbox_image);
                cfg->sandbox_image = xstrdup(v);
        }
        if ((v = getenv("CONTAINER_MCP_PYTHON_MEMORY")) && *v) {
                int64_t n;
                bool bare = strspn(v, "0123456789") == strlen(v);
                if (cm_parse_size(v, &n) < 0 || (bare && n > (INT64_MAX >> 20)) ||
                    (n = bare ? n << 20 : n) < (16 << 20))
                        return cm_err_set(err, EINVAL,
                                          "CONTAINER_MCP_PYTHON_MEMORY=%s: expected a size of at least 16m, like 256m "
                                          "or 1g (a bare number is MiB)",
                                          v);
                cfg->python_memory = n;
        }
        if (cfg->command_timeout_sec > cfg->command_timeout_max_sec)
                return cm_err_set(
                        err, EINVAL,
                        "CONTAINER_MCP_COMMAND_TIMEOUT_DEFAULT=%u is over CONTAINER_MCP_COMMAND_TIMEOUT_MAX=%u; "
                        "lower the default or raise the maximum",
                        cfg->command_timeout_sec, cfg->command_timeout_max_sec);
        return 0;
}

/* dexec and its run log (issue 11). */
static int load_codex(cm_config *cfg, cm_err *err) {
        const char *v;
        cleanup_free char *def = xasprintf("%s/runlog", cfg->state_dir);
        unsigned long n = cfg->dexec_preview_bytes;
        if ((v = getenv("CONTAINER_MCP_RUNLOG_MAX_BYTES")) && *v &&
            (cm_parse_size(v, &cfg->runlog_max_bytes) < 0 || cfg->runlog_max_bytes < 4096 ||
             cfg->runlog_max_bytes > (1ll << 30)))
                return cm_err_set(err, EINVAL,
                                  "CONTAINER_MCP_RUNLOG_MAX_BYTES=%s: expected a size from 4k to 1g, like 8m", v);
        if ((v = getenv("CONTAINER_MCP_RUNLOG_MAX_TOTAL")) && *v &&
            (cm_parse_size(v, &cfg->runlog_max_total) < 0 || cfg->runlog_max_total < (64 << 10)))
                return cm_err_set(err, EINVAL,
                                  "CONTAINER_MCP_RUNLOG_MAX_TOTAL=%s: expected a size of at least 64k, like 1g", v);
        if (env_uint("CONTAINER_MCP_DEXEC_PREVIEW_BYTES", 64, 1 << 20, &n, err) < 0)
                return -EINVAL;
        cfg->dexec_preview_bytes = (unsigned)n;
        v = getenv("CONTAINER_MCP_RUNLOG_DIR");
        if (v && *v)
                return cm_config_set_runlog_dir(cfg, v, "CONTAINER_MCP_RUNLOG_DIR", err);
        /* The default: a state dir that cannot hold it (the native runtime
         * is then unusable too) must not stop the server; dexec says why. */
        cm_err why = CM_ERR_INIT;
        if (cm_config_set_runlog_dir(cfg, def, "runlog/ of the state dir, CONTAINER_MCP_STATE_DIR", &why) < 0)
                cfg->runlog_unusable = xstrdup(why.msg);
        return 0;
}

static int load_env(cm_config *cfg, cm_err *err) {
        const char *v;
        if ((v = getenv("CONTAINER_MCP_TOOLSETS")) && *v && cm_config_set_toolsets(cfg, v, err) < 0)
                return -EINVAL;
        if ((v = getenv("CONTAINER_MCP_TOKEN")) && *v)
                cfg->token = xstrdup(v);
        if ((v = getenv("CONTAINER_MCP_AGENT_NAME")) && *v) {
                free(cfg->agent_name);
                cfg->agent_name = xstrdup(v);
        }
        if ((v = getenv("CONTAINER_MCP_BACKEND")) && *v)
                cfg->backend = xstrdup(v);
        if ((v = getenv("CONTAINER_MCP_ALLOWED_HOSTS")) && *v) {
                cleanup_free char *copy = xstrdup(v);
                char *save = NULL;
                for (char *h = strtok_r(copy, ", ", &save); h; h = strtok_r(NULL, ", ", &save))
                        cm_config_add_host(cfg, h);
        }
        if (env_bool("CONTAINER_MCP_READONLY", &cfg->readonly, err) < 0 ||
            env_bool("CONTAINER_MCP_ALLOW_NETWORK", &cfg->allow_network, err) < 0 ||
            env_bool("CONTAINER_MCP_ALLOW_UNMANAGED", &cfg->allow_unmanaged, err) < 0)
                return -EINVAL;
        return load_numbers(cfg, err);
}

/* A number of cpus: decimal digits with an optional fraction, in
 * [0.01, 1024] (what run_container accepts: a cgroup quota under 1 ms per
 * 100 ms is refused by the kernel; 1024 is the schema's maximum). */
static int parse_cpus(const char *v, double *ret) {
        char *end;
        double c;
        if (!isdigit((unsigned char)*v) || strspn(v, "0123456789.") != strlen(v))
                return -EINVAL;
        c = strtod(v, &end);
        if (*end || !(c >= 0.01) || c > 1024)
                return -EINVAL;
        *ret = c;
        return 0;
}

static int load_ceilings(cm_config *cfg, cm_err *err) {
        const char *v;
        char have[32];
        if ((v = getenv("CONTAINER_MCP_MAX_MEMORY")) && *v) {
                if (cm_parse_size(v, &cfg->max_memory) < 0 || cfg->max_memory < (4 << 20))
                        return cm_err_set(err, EINVAL,
                                          "CONTAINER_MCP_MAX_MEMORY=%s: expected a size of at least 4m, like 512m "
                                          "or 16g",
                                          v);
        }
        if ((v = getenv("CONTAINER_MCP_MAX_CPUS")) && *v && parse_cpus(v, &cfg->max_cpus) < 0)
                return cm_err_set(err, EINVAL,
                                  "CONTAINER_MCP_MAX_CPUS=%s: expected a number from 0.01 to 1024, like 4 or 0.5", v);
        /* A default the operator set above the ceiling is a contradiction to
         * report; the built-in default (2g, 2 cpus) just shrinks to fit a
         * small host. */
        cm_format_size(cfg->max_memory, have);
        if (cfg->default_memory > cfg->max_memory) {
                if ((v = getenv("CONTAINER_MCP_DEFAULT_MEMORY")) && *v)
                        return cm_err_set(err, EINVAL,
                                          "CONTAINER_MCP_DEFAULT_MEMORY=%s is over the ceiling of %s "
                                          "(CONTAINER_MCP_MAX_MEMORY); lower it or raise the ceiling",
                                          v, have);
                cfg->default_memory = cfg->max_memory;
        }
        if (cfg->default_cpus > cfg->max_cpus) {
                if ((v = getenv("CONTAINER_MCP_DEFAULT_CPUS")) && *v)
                        return cm_err_set(err, EINVAL,
                                          "CONTAINER_MCP_DEFAULT_CPUS=%s is over the ceiling of %g "
                                          "(CONTAINER_MCP_MAX_CPUS); lower it or raise the ceiling",
                                          v, cfg->max_cpus);
                cfg->default_cpus = cfg->max_cpus;
        }
        return 0;
}

static int load_sharing(cm_config *cfg, cm_err *err) {
        const char *v = getenv("CONTAINER_MCP_SHARED_CONTAINERS"), *a = getenv("CONTAINER_MCP_ALLOWED_CONTAINERS");
        if (env_bool("CONTAINER_MCP_SHARE_CONTAINERS", &cfg->share_containers, err) < 0)
                return -EINVAL;
        if (v && *v) {
                cleanup_free char *copy = xstrdup(v);
                char *save = NULL;
                for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
                        strv_push(&cfg->shared_containers, t);
        }
        if (a && *a) {
                cleanup_free char *copy = xstrdup(a);
                char *save = NULL;
                for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
                        if (!cm_config_container_ref_ok(t))
                                return cm_err_set(err, EINVAL,
                                                  "CONTAINER_MCP_ALLOWED_CONTAINERS: \"%s\" is not a container id or "
                                                  "name (letters, digits, then also _ . -; at most 128)",
                                                  t);
                        strv_push(&cfg->allowed_containers, t);
                }
        }
        return 0;
}

/* A registry as an image reference names it: host[:port], a [v6] literal. */
static bool registry_ok(const char *t) {
        size_t n = strlen(t);
        if (n == 0 || n > 255 || t[0] == '-' || t[0] == '.' || t[0] == ':')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)t[i]) && !strchr(".-:[]", t[i]))
                        return false;
        return true;
}

static int load_registries(cm_config *cfg, cm_err *err) {
        const char *v = getenv("CONTAINER_MCP_ALLOWED_REGISTRIES");
        if (v && *v) {
                cleanup_free char *copy = xstrdup(v);
                char *save = NULL;
                for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
                        if (!registry_ok(t))
                                return cm_err_set(
                                        err, EINVAL,
                                        "CONTAINER_MCP_ALLOWED_REGISTRIES: \"%s\" is not a registry: expected "
                                        "host or host:port, like docker.io or 127.0.0.1:5000",
                                        t);
                        strv_push(&cfg->allowed_registries, t);
                }
        }
        return 0;
}

/* Checked where they are used (the HTTP transport), which knows the form. */
static void load_origins(cm_config *cfg) {
        const char *v = getenv("CONTAINER_MCP_ALLOWED_ORIGINS");
        cfg->allowed_origins = strv_new();
        if (v && *v) {
                cleanup_free char *copy = xstrdup(v);
                char *save = NULL;
                for (char *o = strtok_r(copy, ", ", &save); o; o = strtok_r(NULL, ", ", &save))
                        cm_config_add_origin(cfg, o);
        }
}

/* "txt, .MD,json" -> {"txt", "md", "json"}: compared with a file name's
 * last extension, in lower case. */
static int load_extensions(cm_config *cfg, cm_err *err) {
        const char *v = getenv("CONTAINER_MCP_FILE_ALLOWED_EXTENSIONS");
        cleanup_free char *copy = NULL;
        char *save = NULL;
        if (!v || !*v)
                return 0;
        copy = xstrdup(v);
        cfg->file_allowed_extensions = strv_new();
        for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
                t += *t == '.';
                for (char *c = t; *c; c++) {
                        if (*c == '/' || *c == '.')
                                return cm_err_set(err, EINVAL,
                                                  "CONTAINER_MCP_FILE_ALLOWED_EXTENSIONS=%s: \"%s\" is not an "
                                                  "extension; list them like txt,md,json",
                                                  v, t);
                        *c = (char)tolower((unsigned char)*c);
                }
                if (*t)
                        strv_push(&cfg->file_allowed_extensions, t);
        }
        return 0;
}

/* Comma-separated command names; a bad one stops the server at start
 * rather than leaving a guard rail that does not do what it says. */
static int load_commands(cm_config *cfg, cm_err *err) {
        const char *v = getenv("CONTAINER_MCP_ALLOWED_COMMANDS");
        cleanup_free char *copy = NULL;
        char *save = NULL;
        if (!v || !*v)
                return 0;
        copy = xstrdup(v);
        cfg->allowed_commands = strv_new();
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                size_t len;
                t += strspn(t, " \t"); /* "ls, cat" as the other lists take it */
                for (len = strlen(t); len && (t[len - 1] == ' ' || t[len - 1] == '\t'); len--)
                        t[len - 1] = 0;
                if (cm_cmdline_name_ok(t, err) < 0)
                        return -EINVAL;
                strv_push(&cfg->allowed_commands, t);
        }
        cfg->n_allowed_commands = strv_len(cfg->allowed_commands);
        if (!cfg->n_allowed_commands || strstr(v, ",,") || *v == ',' || v[strlen(v) - 1] == ',')
                return cm_err_set(err, EINVAL,
                                  "CONTAINER_MCP_ALLOWED_COMMANDS=%s has an empty entry: list names separated by "
                                  "single commas, like ls,cat,grep",
                                  v);
        return 0;
}

int cm_config_load(cm_config *cfg, const char *env_file, cm_err *err) {
        memset(cfg, 0, sizeof *cfg);
        cfg->page_size = 100;
        cfg->max_message_bytes = 16u << 20;
        cfg->agent_name = xstrdup("agent");
        cfg->default_cpus = 2;
        cfg->default_memory = 2ll << 30;
        cfg->timeout_ms = 120000;
        cfg->max_containers = 10;
        cfg->http_timeout_sec = 30;
        cfg->http_max_connections = 4096;
        cfg->http_client_connections = 512;
        cfg->http_max_sessions = 1024;
        cfg->http_credential_sessions = 512;
        cfg->http_session_idle_sec = 3600;
        cfg->http_init_grace_sec = 30;
        cfg->http_stream_after_ms = 1000;
        cfg->http_keepalive_ms = 15000;
        cfg->http_replay_sec = 300;
        cfg->sandbox_image = xstrdup("host");
        cfg->sandbox_ttl_sec = 1800;
        cfg->command_timeout_sec = 30;
        cfg->command_timeout_max_sec = 120;
        cfg->python_memory = 256 << 20;
        cfg->file_max_size_mb = 10;
        cfg->runlog_max_bytes = 8ll << 20;
        cfg->runlog_max_total = 1ll << 30;
        cfg->dexec_preview_bytes = 4096;
        cfg->image_max_size = 8ll << 30;
        cfg->allowed_hosts = strv_new();
        cfg->allowed_mounts = strv_new();
        cfg->image_dirs = strv_new();
        cfg->min_host_port = 1024;
        cfg->toolsets = strv_new();
        cfg->shared_containers = strv_new();
        cfg->allowed_containers = strv_new();
        cfg->allowed_registries = strv_new();
        cfg->max_memory = cm_host_memory();
        cfg->max_cpus = cm_host_cpus();
        for (size_t i = 0; cm_default_toolsets[i]; i++)
                strv_push(&cfg->toolsets, cm_default_toolsets[i]);
        if (env_file && load_env_file(env_file, err) < 0)
                return -EINVAL;
        cfg->state_dir = default_state_dir();
        cfg->scratch_dir = xasprintf("%s/scratch", cfg->state_dir);
        if (load_env(cfg, err) < 0 || load_mounts(cfg, err) < 0 || load_sharing(cfg, err) < 0 ||
            load_ceilings(cfg, err) < 0 || load_sandbox(cfg, err) < 0 || load_extensions(cfg, err) < 0 ||
            load_codex(cfg, err) < 0 || load_registries(cfg, err) < 0)
                return -EINVAL;
        load_origins(cfg);
        if (load_commands(cfg, err) < 0)
                return -EINVAL;
        return 0;
}

void cm_config_free(cm_config *cfg) {
        cm_strv_free(cfg->toolsets);
        cm_strv_free(cfg->allowed_hosts);
        cm_strv_free(cfg->allowed_mounts);
        cm_strv_free(cfg->image_dirs);
        free(cfg->state_real);
        cm_strv_free(cfg->shared_containers);
        cm_strv_free(cfg->allowed_containers);
        cm_strv_free(cfg->allowed_registries);
        free(cfg->runlog_dir);
        free(cfg->runlog_unusable);
        free(cfg->token);
        free(cfg->scratch_dir);
        free(cfg->state_dir);
        free(cfg->agent_name);
        free(cfg->backend);
        free(cfg->sandbox_image);
        cm_strv_free(cfg->allowed_origins);
        cm_strv_free(cfg->file_allowed_extensions);
        cm_strv_free(cfg->allowed_commands);
        memset(cfg, 0, sizeof *cfg);
}

/* For the daemon's files (src/daemon/), which need no whole config. */
void cm_mkdir_p(const char *path, mode_t mode) { mkdir_p(path, mode); }
char *cm_config_default_state_dir(void) { return default_state_dir(); }
