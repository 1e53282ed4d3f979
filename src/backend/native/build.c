/* build_image on the native runtime: a Dockerfile (src/image/dockerfile.h,
 * the subset it parses) run step by step into the image store.
 *
 * Each stage keeps what an image is: its layers (diff-ids and manifest
 * descriptors) and its config document, changed by each instruction.
 * Metadata instructions (ENV, ARG, WORKDIR, USER, CMD, ENTRYPOINT, LABEL,
 * EXPOSE, SHELL) only change the document.  A RUN runs in a sandbox on the
 * layers so far (container.c's native_build_run: no network, the server's
 * default limits), its overlay's upper dir on the host; what it changed
 * becomes a layer (image/build.c).  COPY and ADD write their layer
 * straight from the context, opened beneath it with no symlink followed
 * and filtered by its .dockerignore.
 *
 * The cache: every instruction folds its expanded text into a running
 * sha256 (the stage's key, from the base image's config digest); a RUN's
 * key is that, a COPY's also the sources' names, modes and bytes.  The
 * store maps a layer step's key to its layer (image/build.h), and the
 * times in the config come from the cache too, so an unchanged rebuild
 * makes the very same image.
 *
 * The whole build holds the store's gc.lock shared (no prune removes a
 * layer it is about to use) and the base images' in-use holds. */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "image/build.h"
#include "image/dockerfile.h"
#include "image/dockerignore.h"
#include "image/layer.h"
#include "policy/config.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/sha256.h"

#define RUN_OUTPUT_CAP (64 * 1024)
#define OUTPUT_TAIL 600 /* bytes of a failed RUN's output in its error */
#define MAX_STAGES 64
#define MAX_HOLDS 64       /* images a build reads (FROM, COPY --from) */
#define MAX_SOURCES 100000 /* files of one COPY */
#define WALK_DEPTH 256
#define NO_MANIFEST "sha256:0000000000000000000000000000000000000000000000000000000000000000"

/* What the sandbox's set-up writes into a RUN's root, not the command. */
static const char *const SETUP_PATHS[] = {"etc",       "etc/hosts", "etc/hostname", "etc/resolv.conf",
                                          "root",      "var",       "var/tmp",      "tmp",
                                          "workspace", "proc",      "sys",          "dev",
                                          NULL};

typedef struct stage {
        char *name;    /* AS name (lower case), or NULL */
        char **layers; /* diff-id hex, bottom first, NULL-terminated */
        size_t n_layers;
        json_t *descs; /* their manifest descriptors */
        uint64_t size;
        json_t *doc;  /* the image config document */
        bool cmd_set; /* CMD given in this stage (ENTRYPOINT keeps it) */
        json_t *args; /* ARGs declared in this stage: name -> value (string or null) */
        char key[65];
        int64_t created;
} stage;

typedef struct build {
        native *n;
        img_store *s;
        const cm_build_spec *spec;
        const cm_cancel *cancel;
        df_file df;
        int ctx; /* the context dir */
        cm_dockerignore *ign;
        json_t *meta; /* ARGs before the first FROM: name -> value */
        stage st[MAX_STAGES];
        size_t n_st;
        int holds[MAX_HOLDS];
        char held[MAX_HOLDS][72]; /* their manifests */
        size_t n_holds;
        size_t step, steps;
        const df_inst *in; /* the instruction at work, for errors */
} build;

/* ---- small helpers --------------------------------------------------------- */

static void stage_clear(stage *s) {
        for (size_t i = 0; i < s->n_layers; i++)
                free(s->layers[i]);
        free(s->layers);
        json_decref(s->descs);
        json_decref(s->doc);
        json_decref(s->args);
        free(s->name);
        *s = (stage){0};
}

static json_t *conf(stage *s) {
        json_t *c = json_object_get(s->doc, "config");
        if (!json_is_object(c)) {
                c = json_object();
                (void)json_object_set_new(s->doc, "config", c);
        }
        return c;
}

/* Fold text into the stage's key. */
static void fold(stage *s, const char *what, const char *text) {
        cm_sha256_ctx c;
        uint8_t d[CM_SHA256_LEN];
        cm_sha256_init(&c);
        cm_sha256_update(&c, s->key, strlen(s->key));
        cm_sha256_update(&c, "\n", 1);
        cm_sha256_update(&c, what, strlen(what));
        cm_sha256_update(&c, "\n", 1);
        cm_sha256_update(&c, text, strlen(text));
        cm_sha256_final(&c, d);
        cm_hex(d, sizeof d, s->key);
}

static void fold_json(stage *s, const char *what, const json_t *j) {
        cleanup_free char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        fold(s, what, text ? text : "");
}

/* "Dockerfile line N (INSTRUCTION): " in front of an error. */
static int step_error(build *b, cm_err *err) {
        if (b->in)
                cm_err_prefix(err, "Dockerfile line %u (%.80s%s)", b->in->line, b->in->text,
                              strlen(b->in->text) > 80 ? "..." : "");
        return -1;
}

static void progress(build *b, const char *text, bool cached) {
        cleanup_free char *what = NULL;
        if (!b->spec->progress || !b->spec->progress->fn)
                return;
        what = xasprintf("step %zu/%zu: %s%s", b->step, b->steps, text, cached ? " (cached)" : "");
        b->spec->progress->fn(b->spec->progress->arg, what, b->step, b->steps);
}

/* The environment as KEY=VALUE (the config's Env). */
static const char *env_get(stage *s, const char *name) {
        json_t *env = json_object_get(conf(s), "Env"), *v;
        size_t i, len = strlen(name);
        json_array_foreach(env, i, v) {
                const char *kv = json_string_value(v);
                if (kv && strncmp(kv, name, len) == 0 && kv[len] == '=')
                        return kv + len + 1;
        }
        return NULL;
}

static void env_set(stage *s, const char *name, const char *value) {
        json_t *env = json_object_get(conf(s), "Env"), *v;
        size_t i, len = strlen(name);
        if (!json_is_array(env)) {
                env = json_array();
                (void)json_object_set_new(conf(s), "Env", env);
        }
        json_array_foreach(env, i, v) {
                const char *kv = json_string_value(v);
                if (kv && strncmp(kv, name, len) == 0 && kv[len] == '=') {
                        (void)json_array_set_new(env, i, json_pack("s++", name, "=", value));
                        return;
                }
        }
        (void)json_array_append_new(env, json_pack("s++", name, "=", value));
}

typedef struct lookup {
        build *b;
        stage *s; /* NULL: FROM (only the meta ARGs) */
} lookup;

/* ENV wins over ARG, as with Docker. */
static const char *lookup_var(void *arg, const char *name) {
        lookup *l = arg;
        json_t *v;
        const char *e;
        if (!l->s)
                return json_string_value(json_object_get(l->b->meta, name));
        if ((e = env_get(l->s, name)))
                return e;
        v = json_object_get(l->s->args, name);
        return json_string_value(v);
}

static int word(build *b, stage *s, const char *raw, char **ret, cm_err *err) {
        lookup l = {b, s};
        return df_word(raw, b->df.escape, !b->in->json, lookup_var, &l, ret, err);
}

static char **strv_of(const json_t *a) {
        size_t i, n = json_array_size(a);
        json_t *v;
        char **out;
        if (!json_is_array(a))
                return NULL;
        out = xcalloc(n + 1, sizeof *out);
        json_array_foreach(a, i, v) out[i] = xstrdup(json_string_value(v) ? json_string_value(v) : "");
        return out;
}

static json_t *json_of_args(char *const *v, size_t n) {
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++)
                (void)json_array_append_new(a, json_string(v[i]));
        return a;
}

static void history(stage *s, const char *text, bool empty) {
        json_t *h = json_object_get(s->doc, "history");
        char iso[32];
        time_t t = (time_t)s->created;
        struct tm tm;
        if (!json_is_array(h)) {
                h = json_array();
                (void)json_object_set_new(s->doc, "history", h);
        }
        (void)strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
        (void)json_array_append_new(
                h, json_pack("{s:s, s:s, s:b}", "created", iso, "created_by", text, "empty_layer", empty));
}

static void add_layer(build *b, stage *s, const char *diffid, uint64_t bytes) {
        s->layers = xrealloc(s->layers, (s->n_layers + 2) * sizeof *s->layers);
        s->layers[s->n_layers++] = xstrdup(diffid);
        s->layers[s->n_layers] = NULL;
        (void)json_array_append_new(s->descs, img_build_layer_desc(b->s, diffid));
        s->size += bytes;
}

/* A layer step's result (diffid "": it changed nothing) on the stage,
 * made at `created`. */
static void step_result(build *b, stage *s, const df_inst *in, const char *diffid, uint64_t bytes, int64_t created) {
        s->created = created;
        if (diffid[0])
                add_layer(b, s, diffid, bytes);
        history(s, in->text, !diffid[0]);
}

/* A layer step the cache has (stage.key is its key): taken from there. */
static bool step_cached(build *b, stage *s, const df_inst *in) {
        char diff[65];
        int64_t created;
        if (!img_cache_get(b->s, s->key, diff, &created))
                return false;
        progress(b, in->text, true);
        step_result(b, s, in, diff, diff[0] ? img_layer_bytes(b->s, diff) : 0, created);
        return true;
}

/* A layer step just made: into the cache, then onto the stage. */
static void step_made(build *b, stage *s, const df_inst *in, const char *diffid, uint64_t bytes) {
        int64_t now = (int64_t)time(NULL);
        img_cache_put(b->s, s->key, diffid, now);
        step_result(b, s, in, diffid, bytes, now);
}

/* The stage's layer dirs, top first (what overlayfs and lookups want). */
static char **lowers(build *b, const stage *s) {
        char **v = xcalloc(s->n_layers + 1, sizeof *v);
        for (size_t i = 0; i < s->n_layers; i++)
                v[i] = img_layer_path(b->s, s->layers[s->n_layers - 1 - i]);
        return v;
}

/* An absolute path, cleaned ("a/../b" -> "/b"), relative ones against the
 * stage's WORKDIR. */
static char *abs_path(stage *s, const char *p) {
        const char *wd = json_string_value(json_object_get(conf(s), "WorkingDir"));
        cleanup_free char *joined = p[0] == '/' ? xstrdup(p) : xasprintf("%s/%s", wd && wd[0] ? wd : "", p);
        cleanup_free char *clean = img_path_clean(joined, NULL);
        return xasprintf("/%s", clean);
}

/* ---- FROM ------------------------------------------------------------------ */

/* A stored image by name, pulled first when the store has none and the
 * caller allows its registry (Docker's build pulls a missing base too). */
static int resolve_or_pull(build *b, const char *ref, img_entry *e, cm_err *err) {
        cm_pull_spec ps = {.ref = ref, .progress = b->spec->progress, .local_ok = b->spec->local_ok};
        cleanup_free char *what = NULL, *norm = NULL;

        if (img_resolve(b->s, ref, e, err) == 0)
                return 0;
        if (err->code != ENOENT || !b->spec->allow_pull || !(norm = img_name_normalize(ref)))
                return -1;
        *err = (cm_err)CM_ERR_INIT;
        if (b->spec->allow_pull(b->spec->allow_arg, ref, err) < 0)
                return -1;
        what = xasprintf("pulling %s", ref);
        progress(b, what, false);
        if (native_image_pull(&b->n->base, &ps, b->cancel, NULL, err) < 0) {
                cm_err_prefix(err, "%s is not in the image store, and pulling it failed", ref);
                return -1;
        }
        return img_resolve(b->s, ref, e, err);
}

/* A stored image the build reads: in use (images.c) until it ends. */
static void hold_image(build *b, const char *manifest) {
        int fd;
        for (size_t i = 0; i < b->n_holds; i++)
                if (strcmp(b->held[i], manifest) == 0)
                        return;
        if (b->n_holds == MAX_HOLDS || (fd = native_image_hold(b->n, manifest)) < 0)
                return;
        b->holds[b->n_holds] = fd;
        (void)snprintf(b->held[b->n_holds++], sizeof b->held[0], "%s", manifest);
}

/* A stage's start: its base's layers (copied), size, time and key. */
static void stage_layers(stage *s, char *const *layers, size_t n, uint64_t size, int64_t created, const char *key) {
        s->layers = xcalloc(n + 1, sizeof *s->layers);
        for (size_t i = 0; i < n; i++)
                s->layers[i] = xstrdup(layers[i]);
        s->n_layers = n;
        s->size = size;
        s->created = created;
        (void)snprintf(s->key, sizeof s->key, "%s", key);
}

static int stage_from_image(build *b, stage *s, const char *ref, cm_err *err) {
        img_entry e = {0};

        if (resolve_or_pull(b, ref, &e, err) < 0 || img_build_base(b->s, ref, &e, &s->doc, &s->descs, err) < 0)
                return -1;
        hold_image(b, e.manifest);
        stage_layers(s, e.layers, e.n_layers, e.size, e.created, e.config + 7);
        img_entry_clear(&e);
        return 0;
}

static int do_from(build *b, const df_inst *in, cm_err *err) {
        cleanup_free char *ref = NULL;
        lookup l = {b, NULL};
        stage *s;

        if (b->n_st == MAX_STAGES)
                return cm_err_set(err, E2BIG, "more than %d stages", MAX_STAGES);
        if (df_word(in->args[0], b->df.escape, true, lookup_var, &l, &ref, err) < 0)
                return -1;
        s = &b->st[b->n_st];
        *s = (stage){0};
        s->args = json_object();
        if (in->n_args > 1)
                s->name = xstrdup(in->args[1]);
        for (char *p = s->name; p && *p; p++)
                *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
        if (strcmp(ref, "scratch") == 0) {
                s->doc = json_pack("{s:s, s:s, s:{}}", "architecture", img_host_arch(), "os", "linux", "config");
                s->descs = json_array();
                s->layers = xcalloc(1, sizeof *s->layers);
                (void)snprintf(s->key, sizeof s->key, "%064d", 0);
        } else {
                const stage *from = NULL;
                for (size_t i = 0; i < b->n_st; i++)
                        if (b->st[i].name && strcasecmp(b->st[i].name, ref) == 0)
                                from = &b->st[i];
                if (from) {
                        s->doc = json_deep_copy(from->doc);
                        s->descs = json_deep_copy(from->descs);
                        stage_layers(s, from->layers, from->n_layers, from->size, from->created, from->key);
                } else if (stage_from_image(b, s, ref, err) < 0) {
                        stage_clear(s);
                        return -1;
                }
        }
        b->n_st++;
        fold(s, "FROM", ref);
        progress(b, in->text, false);
        return 0;
}

/* ---- the metadata instructions ---------------------------------------------- */

static json_t *command_of(build *b, stage *s, const df_inst *in) {
        json_t *shell = json_object_get(conf(s), "Shell");
        json_t *v;
        (void)b;
        if (in->json)
                return json_of_args(in->args, in->n_args);
        v = json_is_array(shell) && json_array_size(shell) ? json_deep_copy(shell)
                                                           : json_pack("[s, s]", "/bin/sh", "-c");
        (void)json_array_append_new(v, json_string(in->args[0]));
        return v;
}

/* An ARG declaration ("name" or "name=default"): --build-arg's value,
 * else its default expanded (s NULL: before the first FROM, with the
 * ARGs there), else, in a stage, what an ARG before the first FROM said. */
static int arg_value(build *b, stage *s, const char *decl, char **ret_name, char **ret_value, cm_err *err) {
        const char *eq = strchr(decl, '=');
        char *name = eq ? xstrndup(decl, (size_t)(eq - decl)) : xstrdup(decl), *def = NULL;
        const char *given = NULL;

        for (size_t k = 0; k < b->spec->n_build_args; k++)
                if (strcmp(b->spec->build_args[k].key, name) == 0)
                        given = b->spec->build_args[k].value;
        if (!given && eq && word(b, s, eq + 1, &def, err) < 0) {
                free(name);
                return -1;
        }
        if (!given && !def && s)
                given = json_string_value(json_object_get(b->meta, name));
        *ret_name = name;
        *ret_value = def ? def : xstrdup(given ? given : ""); /* def only without given */
        return 0;
}

static int do_meta(build *b, stage *s, const df_inst *in, cm_err *err) {
        json_t *c = conf(s);
        switch (in->cmd) {
        case DF_ENV:
        case DF_LABEL:
                for (size_t i = 0; i + 1 < in->n_args; i += 2) {
                        cleanup_free char *k = NULL, *v = NULL;
                        if (word(b, s, in->args[i], &k, err) < 0 || word(b, s, in->args[i + 1], &v, err) < 0)
                                return -1;
                        if (!k[0])
                                return cm_err_set(err, EINVAL, "a name may not be empty");
                        if (in->cmd == DF_ENV) {
                                if (strchr(k, '='))
                                        return cm_err_set(err, EINVAL, "\"%s\" is not a variable name", k);
                                env_set(s, k, v);
                        } else {
                                json_t *labels = json_object_get(c, "Labels");
                                if (!json_is_object(labels)) {
                                        labels = json_object();
                                        (void)json_object_set_new(c, "Labels", labels);
                                }
                                (void)json_object_set_new(labels, k, json_string(v));
                        }
                        /* with the instruction: ENV and LABEL of the same pair
                         * change a later RUN differently */
                        cleanup_json json_t *pair = json_pack("[s, s]", k, v);
                        fold_json(s, df_cmd_name(in->cmd), pair);
                }
                return 0;
        case DF_ARG:
                for (size_t i = 0; i < in->n_args; i++) {
                        cleanup_free char *name = NULL, *value = NULL;
                        if (arg_value(b, s, in->args[i], &name, &value, err) < 0)
                                return -1;
                        (void)json_object_set_new(s->args, name, json_string(value));
                        fold(s, "ARG", name);
                        fold(s, "=", value);
                }
                return 0;
        case DF_WORKDIR: {
                cleanup_free char *w = NULL, *abs = NULL;
                if (word(b, s, in->args[0], &w, err) < 0)
                        return -1;
                abs = abs_path(s, w);
                (void)json_object_set_new(c, "WorkingDir", json_string(abs));
                fold(s, "WORKDIR", abs);
                return 0;
        }
        case DF_USER: {
                cleanup_free char *u = NULL;
                if (word(b, s, in->args[0], &u, err) < 0)
                        return -1;
                (void)json_object_set_new(c, "User", json_string(u));
                fold(s, "USER", u);
                return 0;
        }
        case DF_CMD:
        case DF_ENTRYPOINT: {
                json_t *v = command_of(b, s, in);
                fold_json(s, df_cmd_name(in->cmd), v);
                if (in->cmd == DF_CMD) {
                        (void)json_object_set_new(c, "Cmd", v);
                        s->cmd_set = true;
                } else {
                        (void)json_object_set_new(c, "Entrypoint", v);
                        if (!s->cmd_set) /* Docker: a base image's CMD goes with a new ENTRYPOINT */
                                (void)json_object_del(c, "Cmd");
                }
                return 0;
        }
        case DF_EXPOSE: {
                json_t *ports = json_object_get(c, "ExposedPorts");
                if (!json_is_object(ports)) {
                        ports = json_object();
                        (void)json_object_set_new(c, "ExposedPorts", ports);
                }
                for (size_t i = 0; i < in->n_args; i++) {
                        cleanup_free char *p = NULL, *key = NULL;
                        char *end;
                        long port;
                        if (word(b, s, in->args[i], &p, err) < 0)
                                return -1;
                        key = strchr(p, '/') ? xstrdup(p) : xasprintf("%s/tcp", p);
                        port = strtol(key, &end, 10);
                        if (port < 1 || port > 65535 ||
                            (strcmp(end, "/tcp") != 0 && strcmp(end, "/udp") != 0 && strcmp(end, "/sctp") != 0))
                                return cm_err_set(err, EINVAL, "\"%s\" is not a port: use 8080, 8080/tcp or 53/udp", p);
                        (void)json_object_set_new(ports, key, json_object());
                        fold(s, "EXPOSE", key);
                }
                return 0;
        }
        case DF_SHELL: {
                json_t *v = json_of_args(in->args, in->n_args);
                fold_json(s, "SHELL", v);
                (void)json_object_set_new(c, "Shell", v);
                return 0;
        }
        default: return cm_err_set(err, EINVAL, "not a metadata instruction");
        }
}

/* ---- RUN ------------------------------------------------------------------- */

/* A directory the RUN needs (its WORKDIR) made in the upper dir when the
 * layers do not have it, with the owners the store gives root's files. */
static int ensure_dir(build *b, char *const *low, int upper, const char *path, cm_err *err) {
        cleanup_free char *copy = xstrdup(path + 1), *cur = xstrdup("");
        img_owner own = native_image_owner(b->n);
        char *save = NULL;

        for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                cleanup_free char *next = cur[0] ? xasprintf("%s/%s", cur, c) : xstrdup(c), *resolved = NULL;
                struct stat st;
                if (img_layers_lookup(low, next, true, &st, &resolved, NULL) == 0) {
                        if (!S_ISDIR(st.st_mode))
                                return cm_err_set(err, ENOTDIR, "WORKDIR %s: /%s is not a directory", path, next);
                        free(cur);
                        cur = steal_pointer(&resolved);
                        continue;
                }
                free(cur);
                cur = steal_pointer(&next);
                if (mkdirat(upper, cur, 0755) < 0 && errno != EEXIST)
                        return cm_err_sys(err, errno, "WORKDIR %s: cannot make /%s", path, cur);
                if (own.chown)
                        (void)fchownat(upper, cur, own.uid_base, own.gid_base, AT_SYMLINK_NOFOLLOW);
        }
        return 0;
}

static char *output_tail(const cm_exec_result *r) {
        cleanup_free char *all =
                xasprintf("%.*s%.*s", (int)r->out_len, r->out ? r->out : "", (int)r->err_len, r->err ? r->err : "");
        size_t len = strlen(all);
        const char *from = len > OUTPUT_TAIL ? all + len - OUTPUT_TAIL : all;
        return xstrdup(from);
}

static bool kernel_at_least(int major, int minor) {
        struct utsname u;
        int ma = 0, mi = 0;
        return uname(&u) == 0 && sscanf(u.release, "%d.%d", &ma, &mi) == 2 &&
               (ma > major || (ma == major && mi >= minor));
}

/* The sandbox's part: the RUN on the stage's layers, its changes in
 * upper; 0 when it exited 0. */
static int run_in_sandbox(build *b, stage *s, json_t *argv_json, const char *upper, cm_err *err) {
        native_image im = {0};
        cleanup_free cm_kv *env = NULL;
        cleanup_free char **argv = NULL;
        cm_exec_result res = {0};
        const char *key;
        json_t *v;
        size_t n_env = 0, i;
        const char *wd = json_string_value(json_object_get(conf(s), "WorkingDir"));
        const char *user = json_string_value(json_object_get(conf(s), "User"));
        int r;

        im.e.manifest = xstrdup(NO_MANIFEST);
        im.cfg.env = strv_of(json_object_get(conf(s), "Env"));
        if (user && user[0])
                im.cfg.user = xstrdup(user);
        im.lowers = lowers(b, s);
        /* the ARGs are the RUN's environment too, below ENV */
        env = xcalloc(json_object_size(s->args) + 1, sizeof *env);
        json_object_foreach(s->args, key, v) {
                if (!env_get(s, key))
                        env[n_env++] = (cm_kv){key, json_string_value(v)};
        }
        argv = xcalloc(json_array_size(argv_json) + 1, sizeof *argv);
        json_array_foreach(argv_json, i, v) argv[i] = (char *)json_string_value(v);
        cm_run_spec spec = {.image = "(build)",
                            .argv = argv,
                            .argc = json_array_size(argv_json),
                            .env = env,
                            .n_env = n_env,
                            .workdir = wd && wd[0] == '/' ? wd : "/",
                            .cpus = b->spec->cpus,
                            .memory_bytes = b->spec->memory_bytes,
                            .pids = b->spec->pids,
                            .output_cap = RUN_OUTPUT_CAP};
        r = native_build_run(b->n, &spec, &im, upper, b->cancel, &res, err);
        native_image_clear(&im);
        if (r < 0)
                return -1;
        if (res.exit_code != 0) {
                cleanup_free char *tail = output_tail(&res);
                r = cm_err_set(err, EIO, "the command exited with code %d%s; its output ends:\n%s", res.exit_code,
                               res.timed_out ? " (timed out)" : "", tail);
        }
        cm_exec_result_clear(&res);
        return r;
}

static int do_run(build *b, stage *s, const df_inst *in, cm_err *err) {
        cleanup_json json_t *argv = command_of(b, s, in);
        cleanup_free char *dir = NULL, *u = NULL, *w = NULL;
        cleanup_close int ufd = -1;
        char diff[65] = "";
        uint64_t bytes = 0;
        img_owner own = native_image_owner(b->n);
        img_tar *t = NULL;
        bool tmpfs = false;
        int r = -1;

        for (size_t i = 0; i < in->n_flags; i++)
                if (strcmp(in->flags[i].name, "network") == 0 && in->flags[i].value &&
                    strcmp(in->flags[i].value, "none") != 0 && strcmp(in->flags[i].value, "default") != 0)
                        return cm_err_set(err, EINVAL, "--network=%s: a native build's RUN has no network (none)",
                                          in->flags[i].value);
        fold_json(s, "RUN", argv);
        if (step_cached(b, s, in))
                return 0;
        progress(b, in->text, false);
        if (s->n_layers == 0)
                return cm_err_set(err, EINVAL,
                                  "there is nothing to run it in: the image has no layers yet (FROM scratch); COPY a "
                                  "program in first or start FROM an image with a shell");
        if (!b->n->overlay)
                return cm_err_set(err, ENOTSUP,
                                  "a RUN step needs overlayfs, which the native runtime cannot use here (%s); build "
                                  "this Dockerfile on Docker or Podman (a server with --backend docker)",
                                  b->n->overlay_why);
        if (!(dir = img_build_tmp(b->s, "run", err)))
                return -1;
        /* A root server keeps the changes in a tmpfs (a ceiling: the image
         * size cap, and the pages count against the RUN's memory limit);
         * before Linux 6.6 tmpfs has no user.* xattrs for opaque dirs. */
        if (own.chown && kernel_at_least(6, 6)) {
                cleanup_free char *opts =
                        xasprintf("size=%llu,mode=0755,uid=%u,gid=%u", (unsigned long long)img_store_max_size(b->s),
                                  (unsigned)own.uid_base, (unsigned)own.gid_base);
                tmpfs = mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) == 0;
        }
        u = xasprintf("%s/u", dir);
        w = xasprintf("%s/w", dir);
        if (mkdir(u, 0755) < 0 || mkdir(w, 0700) < 0 ||
            (own.chown && (chown(dir, own.uid_base, own.gid_base) < 0 || chown(u, own.uid_base, own.gid_base) < 0 ||
                           chown(w, own.uid_base, own.gid_base) < 0)) ||
            (ufd = open(u, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
                r = cm_err_sys(err, errno, "image store: cannot make the RUN's upper dir %s", u);
                goto out;
        }
        {
                const char *wd = json_string_value(json_object_get(conf(s), "WorkingDir"));
                char **low = lowers(b, s);
                r = wd && wd[0] == '/' && wd[1] ? ensure_dir(b, low, ufd, wd, err) : 0;
                cm_strv_free(low);
                if (r < 0)
                        goto out;
        }
        if ((r = run_in_sandbox(b, s, argv, dir, err)) < 0)
                goto out;
        if ((r = img_tar_new(b->s, &t, err)) < 0 || (r = img_tar_add_upper(t, ufd, SETUP_PATHS, err)) < 0)
                goto out;
        if (img_tar_entries(t) > 0 && (r = img_tar_commit(t, b->cancel, diff, &bytes, err)) < 0)
                goto out;
        step_made(b, s, in, diff, bytes);
        r = 0;
out:
        img_tar_free(t);
        if (tmpfs)
                (void)umount2(dir, MNT_DETACH);
        if (dir)
                img_build_tmp_remove(b->s, dir);
        return r;
}

/* ---- COPY and ADD ---------------------------------------------------------- */

typedef struct copy_job {
        build *b;
        stage *s;
        bool add;
        bool chown;
        uid_t uid;
        gid_t gid;
        bool chmod;
        mode_t mode;
        cm_sha256_ctx sha; /* the first pass: the sources' key */
        img_tar *t;        /* the second: the layer */
        size_t files;
        char **low;   /* the stage's layer dirs, top first */
        json_t *made; /* directories written: path -> true */
        img_owner own;
        char **src; /* COPY --from: the source's layer dirs, top first; NULL: the context */
} copy_job;

static uid_t unshift(const copy_job *j, unsigned id, bool is_uid) { return img_owner_unshift(&j->own, id, is_uid); }

static void hash_text(copy_job *j, char type, const char *path, unsigned mode, long long size) {
        char buf[64];
        int n = snprintf(buf, sizeof buf, "%c%o %lld", type, mode, size);
        cm_sha256_update(&j->sha, path, strlen(path) + 1);
        cm_sha256_update(&j->sha, buf, (size_t)n);
}

static mode_t mode_of(const copy_job *j, mode_t m) { return j->chmod ? j->mode : m & 07777; }

/* The directory dest (absolute) in the layer: each directory on its way
 * as the image has it (symlinks followed inside the image, attributes
 * kept), the missing ones made.  *ret: the resolved path (relative). */
static int dest_dir(copy_job *j, const char *dest, char **ret, cm_err *err) {
        cleanup_free char *copy = xstrdup(dest), *cur = xstrdup("");
        char *save = NULL;
        bool missing = false;

        for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                cleanup_free char *next = cur[0] ? xasprintf("%s/%s", cur, c) : xstrdup(c), *resolved = NULL;
                struct stat st = {.st_mode = S_IFDIR | 0755, .st_mtime = j->s->created};
                if (!missing && img_layers_lookup(j->low, next, true, &st, &resolved, NULL) == 0) {
                        if (!S_ISDIR(st.st_mode))
                                return cm_err_set(err, ENOTDIR, "%s: /%s is not a directory in the image", dest, next);
                        free(next);
                        next = steal_pointer(&resolved);
                        st.st_uid = unshift(j, st.st_uid, true);
                        st.st_gid = unshift(j, st.st_gid, false);
                } else
                        missing = true;
                free(cur);
                cur = steal_pointer(&next);
                if (j->t && !json_object_get(j->made, cur)) {
                        (void)json_object_set_new(j->made, cur, json_true());
                        if (img_tar_add_dir(j->t, cur, st.st_mode, st.st_uid, st.st_gid, (int64_t)st.st_mtime, err) < 0)
                                return -1;
                }
        }
        *ret = steal_pointer(&cur);
        return 0;
}

static char *join(const char *dir, const char *name) { return dir[0] ? xasprintf("%s/%s", dir, name) : xstrdup(name); }

/* One file of the context (the entry `name` of dir, as st says) at
 * target in the layer, or into the first pass's hash. */
static int copy_one(copy_job *j, int dir, const char *name, const struct stat *st, const char *ctxpath,
                    const char *target, cm_err *err);

static int copy_tree(copy_job *j, int dir, const char *ctxpath, const char *target, int depth, cm_err *err) {
        char **names;
        int r = 0;

        if (depth > WALK_DEPTH)
                return cm_err_set(err, ELOOP, "%s: nested too deep", ctxpath);
        names = img_list_dir(dir);
        for (char **p = names; *p && r == 0; p++) {
                cleanup_free char *cp = join(ctxpath, *p), *tp = join(target, *p);
                cleanup_close int sub = -1;
                struct stat st;
                bool keep;
                if (fstatat(dir, *p, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        r = cm_err_sys(err, errno, "%s", cp);
                        break;
                }
                /* a directory left out is still walked for its exceptions */
                keep = !cm_dockerignore_excluded(j->b->ign, cp);
                if (!keep && !(S_ISDIR(st.st_mode) && cm_dockerignore_enter(j->b->ign, cp)))
                        continue;
                if (keep && (r = copy_one(j, dir, *p, &st, cp, tp, err)) < 0)
                        break;
                if (S_ISDIR(st.st_mode)) {
                        sub = openat(dir, *p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        r = sub < 0 ? cm_err_sys(err, errno, "%s", cp) : copy_tree(j, sub, cp, tp, depth + 1, err);
                }
        }
        cm_strv_free(names);
        return r;
}

static int copy_one(copy_job *j, int dir, const char *name, const struct stat *st, const char *ctxpath,
                    const char *target, cm_err *err) {
        uid_t uid = j->chown ? j->uid : 0;
        gid_t gid = j->chown ? j->gid : 0;

        if (++j->files > MAX_SOURCES)
                return cm_err_set(err, E2BIG, "more than %d files", MAX_SOURCES);
        if (S_ISDIR(st->st_mode)) {
                if (!j->t) {
                        hash_text(j, 'd', ctxpath, st->st_mode & 07777, 0);
                        return 0;
                }
                (void)json_object_set_new(j->made, target, json_true());
                return img_tar_add_dir(j->t, target, mode_of(j, st->st_mode), uid, gid, (int64_t)st->st_mtime, err);
        }
        if (S_ISLNK(st->st_mode)) {
                char link[4096];
                ssize_t n = readlinkat(dir, name, link, sizeof link - 1);
                if (n < 0)
                        return cm_err_sys(err, errno, "%s", ctxpath);
                link[n] = 0;
                if (!j->t) {
                        hash_text(j, 'l', ctxpath, 0, 0);
                        cm_sha256_update(&j->sha, link, (size_t)n + 1);
                        return 0;
                }
                return img_tar_add_symlink(j->t, target, link, uid, gid, (int64_t)st->st_mtime, err);
        }
        if (S_ISREG(st->st_mode)) {
                cleanup_close int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
                struct stat now;
                if (fd < 0 || fstat(fd, &now) < 0)
                        return cm_err_sys(err, errno, "%s", ctxpath);
                if (!S_ISREG(now.st_mode))
                        return cm_err_set(err, EINVAL, "%s changed while the build read it", ctxpath);
                if (!j->t) {
                        char buf[64 * 1024];
                        ssize_t n;
                        hash_text(j, 'f', ctxpath, now.st_mode & 07777, (long long)now.st_size);
                        while ((n = read(fd, buf, sizeof buf)) > 0)
                                cm_sha256_update(&j->sha, buf, (size_t)n);
                        return n < 0 ? cm_err_sys(err, errno, "%s", ctxpath) : 0;
                }
                return img_tar_add_file(j->t, target, fd, &now, mode_of(j, now.st_mode), uid, gid, err);
        }
        return 0; /* sockets, fifos and devices are not copied */
}

typedef struct source {
        char *path; /* in the context, cleaned; --from: in the source, resolved */
        struct stat st;
        int layer; /* --from: the index in copy_job.src of its layer */
} source;

static bool has_glob(const char *p) { return strpbrk(p, "*?[") != NULL; }

/* A directory of the context (rel "": the context itself), opened anew:
 * its own offset, no symlink on the way. */
static int ctx_dir(build *b, const char *rel) {
        return rel[0] ? img_open_beneath(b->ctx, rel, O_RDONLY | O_DIRECTORY)
                      : openat(b->ctx, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* Whether the pattern's first components (as many as path has) match
 * path, and it has more: a walk goes into path. */
static bool prefix_match(const char *pattern, const char *path) {
        size_t k = 1;
        const char *end = pattern;
        for (const char *c = path; *c; c++)
                k += *c == '/';
        while (k-- > 0 && end)
                end = strchr(end + (end != pattern), '/');
        if (!end)
                return false;
        {
                cleanup_free char *head = xstrndup(pattern, (size_t)(end - pattern));
                return fnmatch(head, path, FNM_PATHNAME) == 0;
        }
}

/* Every path of the context a pattern matches (not left out), sorted. */
static int glob_walk(build *b, int dir, const char *prefix, const char *pattern, source **v, size_t *n, int depth,
                     cm_err *err) {
        char **names = img_list_dir(dir);
        int r = 0;

        for (char **e = names; *e && r == 0; e++) {
                cleanup_free char *p = join(prefix, *e);
                struct stat st;
                if (fstatat(dir, *e, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (fnmatch(pattern, p, FNM_PATHNAME) == 0 && !cm_dockerignore_excluded(b->ign, p)) {
                        if (*n >= MAX_SOURCES) {
                                r = cm_err_set(err, E2BIG, "the pattern matches more than %d files", MAX_SOURCES);
                                break;
                        }
                        *v = xrealloc(*v, (*n + 1) * sizeof **v);
                        (*v)[(*n)++] = (source){xstrdup(p), st, -1};
                }
                /* deeper only where the pattern has more components */
                if (S_ISDIR(st.st_mode) && depth < WALK_DEPTH && prefix_match(pattern, p)) {
                        cleanup_close int sub = openat(dir, *e, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0)
                                r = glob_walk(b, sub, p, pattern, v, n, depth + 1, err);
                }
        }
        cm_strv_free(names);
        return r;
}

static int cmp_source(const void *a, const void *b) {
        return strcmp(((const source *)a)->path, ((const source *)b)->path);
}

static void sources_free(source *v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i].path);
        free(v);
}

static bool is_url(const char *s) { return strncmp(s, "git@", 4) == 0 || strstr(s, "://") != NULL; }

/* One source named in the context (p cleaned, not a pattern). */
static int context_source(build *b, const char *raw, char *p, source *ret, cm_err *err) {
        struct stat st;
        const char *slash = strrchr(p, '/');
        cleanup_free char *parent = slash ? xstrndup(p, (size_t)(slash - p)) : xstrdup("");
        cleanup_close int dir = ctx_dir(b, parent);

        if (p[0] && (dir < 0 || fstatat(dir, slash ? slash + 1 : p, &st, AT_SYMLINK_NOFOLLOW) < 0))
                return cm_err_set(err, ENOENT,
                                  "\"%s\" is not in the build context (paths are relative to the context; a "
                                  "symlinked directory on the way is not followed)",
                                  raw);
        if (!p[0] && fstat(b->ctx, &st) < 0)
                return cm_err_sys(err, errno, "the build context");
        if (p[0] && cm_dockerignore_excluded(b->ign, p) && !(S_ISDIR(st.st_mode) && cm_dockerignore_enter(b->ign, p)))
                return cm_err_set(err, ENOENT, "\"%s\" is excluded by the context's .dockerignore", raw);
        *ret = (source){p, st, -1};
        return 0;
}

/* One source in the --from file system: resolved there. */
static int from_source_path(copy_job *j, const char *raw, const char *p, source *ret, cm_err *err) {
        struct stat st;
        char *resolved = NULL;
        int layer = 0;

        if (has_glob(raw))
                return cm_err_set(err, ENOTSUP,
                                  "%s: wildcards with --from are not supported by the native builder; name the files "
                                  "or their directory",
                                  raw);
        if (img_layers_lookup(j->src, p, true, &st, &resolved, &layer) < 0)
                return cm_err_set(err, ENOENT, "\"%s\" is not in the --from source", raw);
        *ret = (source){resolved, st, layer};
        return 0;
}

/* The sources an instruction names, in the context (globs matched there)
 * or, with --from, in that file system. */
static int find_sources(build *b, stage *s, const df_inst *in, copy_job *j, source **ret, size_t *ret_n, cm_err *err) {
        source *v = NULL;
        size_t n = 0;

        for (size_t i = 0; i + 1 < in->n_args; i++) {
                cleanup_free char *raw = NULL, *p = NULL;
                if (word(b, s, in->args[i], &raw, err) < 0)
                        goto fail;
                if (is_url(raw)) {
                        (void)cm_err_set(err, ENOTSUP,
                                         "%s: sources from URLs or git are not supported by the native builder: fetch "
                                         "them in a RUN step, or build on Docker or Podman",
                                         raw);
                        goto fail;
                }
                p = img_path_clean(raw, NULL); /* as Docker: ".." stops at the root */
                if (!j->src && has_glob(p)) {
                        size_t before = n;
                        if (glob_walk(b, b->ctx, "", p, &v, &n, 0, err) < 0)
                                goto fail;
                        if (n == before) {
                                (void)cm_err_set(err, ENOENT, "no file in the build context matches \"%s\"", raw);
                                goto fail;
                        }
                        qsort(v + before, n - before, sizeof *v, cmp_source);
                        continue;
                }
                if (n >= MAX_SOURCES) {
                        (void)cm_err_set(err, E2BIG, "more than %d sources", MAX_SOURCES);
                        goto fail;
                }
                v = xrealloc(v, (n + 1) * sizeof *v);
                if ((j->src ? from_source_path(j, raw, p, &v[n], err) : context_source(b, raw, p, &v[n], err)) < 0)
                        goto fail;
                if (!j->src)
                        p = NULL; /* the source has it */
                n++;
        }
        *ret = v;
        *ret_n = n;
        return 0;
fail:
        sources_free(v, n);
        return -1;
}

/* ---- COPY --from ------------------------------------------------------------ */

/* dir (relative, resolved) in the source's layer `layer`. */

/* A directory of the source as overlayfs shows it, written below target. */
static int copy_tree_from(copy_job *j, const char *path, const char *target, int depth, cm_err *err) {
        img_dirent *v;
        size_t n;
        int r = 0;

        if (depth > WALK_DEPTH)
                return cm_err_set(err, ELOOP, "%s: nested too deep", path);
        if (img_layers_list(j->src, path, &v, &n) < 0)
                return cm_err_set(err, ENOENT, "/%s is not a directory of the --from source", path);
        for (size_t i = 0; i < n && r == 0; i++) {
                cleanup_free char *sp = join(path, v[i].name), *tp = join(target, v[i].name);
                cleanup_close int dir = img_layer_opendir(j->src[v[i].layer], path);
                if (dir < 0) {
                        r = cm_err_sys(err, errno, "/%s in the --from source", sp);
                        break;
                }
                r = copy_one(j, dir, v[i].name, &v[i].st, sp, tp, err);
                if (r == 0 && S_ISDIR(v[i].st.st_mode))
                        r = copy_tree_from(j, sp, tp, depth + 1, err);
        }
        img_dirents_free(v, n);
        return r;
}

static int copy_from(copy_job *j, const source *src, bool into, const char *ddir, const char *dest, cm_err *err) {
        const char *p = src->path, *slash = strrchr(p, '/');
        const char *base = slash ? slash + 1 : p;
        cleanup_free char *parent = slash ? xstrndup(p, (size_t)(slash - p)) : xstrdup(""), *target = NULL;
        cleanup_close int dir = -1;

        if (!p[0] || S_ISDIR(src->st.st_mode))
                return copy_tree_from(j, p, ddir, 0, err);
        if ((dir = img_layer_opendir(j->src[src->layer], parent)) < 0)
                return cm_err_sys(err, errno, "/%s in the --from source", p);
        target = join(ddir, into ? base : strrchr(dest, '/') + 1);
        return copy_one(j, dir, base, &src->st, p, target, err);
}

/* The --from source: an earlier stage (by name or index) or a stored
 * image; its layer dirs and what its content is known by (the stage's
 * key, the image's config digest). */
static int from_source(build *b, const char *name, char ***ret_low, char ret_key[65], cm_err *err) {
        char *end;
        unsigned long idx = strtoul(name, &end, 10);
        img_entry e = {0};

        for (size_t i = 0; i + 1 < b->n_st; i++)
                if ((b->st[i].name && strcasecmp(b->st[i].name, name) == 0) || (name[0] && !*end && idx == i)) {
                        *ret_low = lowers(b, &b->st[i]);
                        memcpy(ret_key, b->st[i].key, 65);
                        return 0;
                }
        if (resolve_or_pull(b, name, &e, err) < 0) {
                cm_err_prefix(err, "--from=%s: no earlier stage has that name, and", name);
                return -1;
        }
        hold_image(b, e.manifest);
        *ret_low = xcalloc(e.n_layers + 1, sizeof **ret_low);
        for (size_t i = 0; i < e.n_layers; i++)
                (*ret_low)[i] = img_layer_path(b->s, e.layers[e.n_layers - 1 - i]);
        (void)snprintf(ret_key, 65, "%s", e.config + 7);
        img_entry_clear(&e);
        return 0;
}

/* The sources, hashed (j->t NULL) or written. */
static int copy_sources(copy_job *j, const source *v, size_t n, const char *dest, bool dir_dest, cm_err *err) {
        cleanup_free char *ddir = NULL;
        bool into = dir_dest;
        int r = 0;

        if (!into && n == 1 && !S_ISDIR(v[0].st.st_mode)) {
                struct stat st;
                into = img_layers_lookup(j->low, dest + 1, true, &st, NULL, NULL) == 0 && S_ISDIR(st.st_mode);
        } else
                into = true;
        if (j->t) {
                /* a file onto a new name: its parent is the directory */
                cleanup_free char *parent = NULL;
                if (!into) {
                        const char *slash = strrchr(dest, '/');
                        parent = xstrndup(dest, (size_t)(slash - dest));
                }
                if (dest_dir(j, into ? dest : parent[0] ? parent : "/", &ddir, err) < 0)
                        return -1;
        }
        for (size_t i = 0; i < n && r == 0; i++) {
                const char *p = v[i].path, *slash = strrchr(p, '/');
                const char *base = slash ? slash + 1 : p;
                cleanup_free char *parent = slash ? xstrndup(p, (size_t)(slash - p)) : xstrdup("");
                cleanup_close int dir = -1;
                cleanup_free char *target = NULL;

                if (j->src) {
                        r = copy_from(j, &v[i], into, ddir, dest, err);
                        continue;
                }
                if (!p[0] || S_ISDIR(v[i].st.st_mode)) {
                        /* a directory: its contents, not itself */
                        cleanup_close int d = ctx_dir(j->b, p);
                        if (d < 0)
                                return cm_err_sys(err, errno, "%s", p);
                        r = copy_tree(j, d, p, ddir ? ddir : "", 0, err);
                        continue;
                }
                dir = ctx_dir(j->b, parent);
                if (dir < 0)
                        return cm_err_sys(err, errno, "%s", p);
                if (!j->t) {
                        r = copy_one(j, dir, base, &v[i].st, p, "", err);
                        continue;
                }
                if (j->add && S_ISREG(v[i].st.st_mode)) {
                        cleanup_close int fd = openat(dir, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
                        bool plain = false;
                        if (fd < 0)
                                return cm_err_sys(err, errno, "%s", p);
                        r = img_tar_add_archive(j->t, fd, ddir, j->chown, j->chown ? j->uid : 0, j->chown ? j->gid : 0,
                                                &plain, err);
                        if (r == 0 || !plain)
                                continue;
                        r = 0;
                }
                if (into)
                        target = join(ddir, base);
                else {
                        const char *dslash = strrchr(dest, '/');
                        target = join(ddir, dslash + 1);
                }
                r = copy_one(j, dir, base, &v[i].st, p, target, err);
        }
        return r;
}

static int chown_ids(build *b, stage *s, const char *spec, uid_t *uid, gid_t *gid, cm_err *err) {
        native_image im = {0};
        int r;
        im.cfg.user = xstrdup(spec);
        im.lowers = lowers(b, s);
        r = native_image_user(&im, uid, gid, err);
        native_image_clear(&im);
        return r;
}

static int do_copy(build *b, stage *s, const df_inst *in, cm_err *err) {
        copy_job j = {.b = b, .s = s, .add = in->cmd == DF_ADD, .own = native_image_owner(b->n)};
        cleanup_free char *dest_raw = NULL, *dest = NULL, *chown = NULL, *chmod = NULL, *from = NULL;
        char from_key[65] = "";
        cleanup_json json_t *desc = NULL;
        source *v = NULL;
        size_t n = 0;
        char diff[65] = "", hex[65];
        uint8_t d[CM_SHA256_LEN];
        uint64_t bytes = 0;
        bool dir_dest;
        int r = -1;

        for (size_t i = 0; i < in->n_flags; i++) {
                const df_flag *f = &in->flags[i];
                if (strcmp(f->name, "from") == 0 && f->value && word(b, s, f->value, &from, err) < 0)
                        return -1;
                if (strcmp(f->name, "chown") == 0 && f->value && word(b, s, f->value, &chown, err) < 0)
                        return -1;
                if (strcmp(f->name, "chmod") == 0 && f->value && word(b, s, f->value, &chmod, err) < 0)
                        return -1;
                if (strcmp(f->name, "checksum") == 0)
                        return cm_err_set(err, ENOTSUP,
                                          "--checksum is for URLs, which the native builder does not fetch");
        }
        if (chmod) {
                char *end;
                unsigned long m = strtoul(chmod, &end, 8);
                if (!chmod[0] || *end || m > 07777)
                        return cm_err_set(err, EINVAL, "--chmod=%s: give an octal mode such as 0644", chmod);
                j.chmod = true;
                j.mode = (mode_t)m;
        }
        j.low = lowers(b, s);
        if (chown) {
                if (chown_ids(b, s, chown, &j.uid, &j.gid, err) < 0)
                        goto out;
                j.chown = true;
        }
        if (from && j.add) {
                r = cm_err_set(err, EINVAL, "ADD takes no --from (COPY does)");
                goto out;
        }
        if (from && from_source(b, from, &j.src, from_key, err) < 0)
                goto out;
        if (word(b, s, in->args[in->n_args - 1], &dest_raw, err) < 0 || find_sources(b, s, in, &j, &v, &n, err) < 0)
                goto out;
        dest = abs_path(s, dest_raw);
        /* as Docker: a trailing "/", or "." / "x/.", names a directory */
        dir_dest = dest_raw[strlen(dest_raw) - 1] == '/' || strcmp(dest_raw, ".") == 0 ||
                   (strlen(dest_raw) >= 2 && strcmp(dest_raw + strlen(dest_raw) - 2, "/.") == 0);
        if (n > 1 && !dir_dest) {
                r = cm_err_set(err, EINVAL,
                               "with more than one source the destination must be a directory ending "
                               "in /: \"%s/\"",
                               dest_raw);
                goto out;
        }
        /* the first pass: the key (a --from source is known by its own) */
        cm_sha256_init(&j.sha);
        if (from) {
                for (size_t i = 0; i < n; i++)
                        cm_sha256_update(&j.sha, v[i].path, strlen(v[i].path) + 1);
                cm_sha256_update(&j.sha, from_key, strlen(from_key));
        } else if (copy_sources(&j, v, n, dest, dir_dest, err) < 0)
                goto out;
        cm_sha256_final(&j.sha, d);
        cm_hex(d, sizeof d, hex);
        desc = json_pack("{s:s, s:s?, s:s?, s:s}", "dest", dest_raw, "chown", chown, "chmod", chmod, "sources", hex);
        fold_json(s, df_cmd_name(in->cmd), desc);
        if (step_cached(b, s, in)) {
                r = 0;
                goto out;
        }
        progress(b, in->text, false);
        j.files = 0;
        j.made = json_object();
        if (img_tar_new(b->s, &j.t, err) < 0 || copy_sources(&j, v, n, dest, dir_dest, err) < 0 ||
            img_tar_commit(j.t, b->cancel, diff, &bytes, err) < 0)
                goto out;
        step_made(b, s, in, diff, bytes);
        r = 0;
out:
        img_tar_free(j.t);
        json_decref(j.made);
        cm_strv_free(j.low);
        cm_strv_free(j.src);
        sources_free(v, n);
        return r;
}

/* ---- the build ----------------------------------------------------------------- */

static int read_dockerfile(build *b, const char *name, char **ret, size_t *ret_len, cm_err *err) {
        cleanup_close int fd = img_open_beneath(b->ctx, name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
        struct stat st;
        if (fd < 0)
                return cm_err_sys(err, errno,
                                  "the Dockerfile \"%s\" is not in the build context (no symlink is followed)", name);
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return cm_err_set(err, EINVAL, "the Dockerfile \"%s\" is not a regular file", name);
        if (st.st_size > DF_MAX_BYTES)
                return cm_err_set(err, EFBIG, "the Dockerfile \"%s\" is %lld bytes; at most %d", name,
                                  (long long)st.st_size, DF_MAX_BYTES);
        *ret = xmalloc((size_t)st.st_size + 1);
        *ret_len = 0;
        while (*ret_len < (size_t)st.st_size) {
                ssize_t k = read(fd, *ret + *ret_len, (size_t)st.st_size - *ret_len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return cm_err_sys(err, k < 0 ? errno : EIO, "cannot read the Dockerfile \"%s\"", name);
                *ret_len += (size_t)k;
        }
        (*ret)[*ret_len] = 0;
        return 0;
}

static int run_steps(build *b, cm_err *err) {
        for (size_t i = 0; i < b->df.n; i++) {
                const df_inst *in = &b->df.v[i];
                stage *s = b->n_st ? &b->st[b->n_st - 1] : NULL;
                int r;

                if (cm_cancelled(b->cancel))
                        return cm_err_set(err, ECANCELED, "the build was cancelled");
                b->in = in;
                b->step = i + 1;
                if (in->cmd == DF_FROM) {
                        r = do_from(b, in, err);
                } else if (!s) {
                        /* ARGs before the first FROM: for FROM lines only */
                        for (size_t k = 0; k < in->n_args; k++) {
                                cleanup_free char *name = NULL, *value = NULL;
                                if (arg_value(b, NULL, in->args[k], &name, &value, err) < 0)
                                        return step_error(b, err);
                                (void)json_object_set_new(b->meta, name, json_string(value));
                        }
                        progress(b, in->text, false);
                        r = 0;
                } else if (in->cmd == DF_RUN) {
                        r = do_run(b, s, in, err);
                } else if (in->cmd == DF_COPY || in->cmd == DF_ADD) {
                        r = do_copy(b, s, in, err);
                } else {
                        r = do_meta(b, s, in, err);
                        if (r == 0) {
                                history(s, in->text, true);
                                progress(b, in->text, false);
                        }
                }
                if (r < 0)
                        return step_error(b, err);
        }
        return 0;
}

int native_image_build(cm_backend *be, const cm_build_spec *spec, const cm_cancel *cancel, cm_image_info *ret,
                       cm_err *err) {
        native *n = (native *)be;
        const char *dfname = spec->dockerfile ? spec->dockerfile : "Dockerfile";
        build b = {.n = n, .spec = spec, .cancel = cancel, .ctx = -1};
        cleanup_free char *text = NULL;
        cleanup_close int gc = -1;
        img_entry e = {0};
        size_t len = 0;
        int r = -1;

        *ret = (cm_image_info){0};
        if (spec->tag) {
                cleanup_free char *norm = img_name_normalize(spec->tag);
                if (!norm)
                        return cm_err_set(err, EINVAL,
                                          "tag \"%s\" is not a valid image name; use e.g. myimage, myimage:1.0 or "
                                          "registry.example.com/team/myimage:1.0 (lower-case repository)",
                                          spec->tag);
        }
        if (native_store(n, &b.s, err) < 0)
                return -1;
        if ((b.ctx = cm_build_context_open(spec->context, err)) < 0)
                return -1;
        if (read_dockerfile(&b, dfname, &text, &len, err) < 0 || cm_dockerignore_read(b.ctx, dfname, &b.ign, err) < 0 ||
            df_parse(text, len, &b.df, err) < 0)
                goto out;
        gc = img_build_lock(b.s, err);
        if (gc < 0)
                goto out;
        b.meta = json_object();
        b.steps = b.df.n;
        if (run_steps(&b, err) < 0)
                goto out;
        {
                stage *s = &b.st[b.n_st - 1];
                r = img_build_publish(b.s, s->doc, s->descs, s->layers, s->n_layers, spec->tag, s->created, s->size, &e,
                                      err);
        }
        if (r == 0)
                native_image_info(&e, false, ret);
out:
        img_entry_clear(&e);
        for (size_t i = 0; i < b.n_st; i++)
                stage_clear(&b.st[i]);
        for (size_t i = 0; i < b.n_holds; i++)
                native_image_release(b.n, b.held[i], b.holds[i]);
        json_decref(b.meta);
        df_file_clear(&b.df);
        cm_dockerignore_free(b.ign);
        if (b.ctx >= 0)
                (void)close(b.ctx);
        return r;
}
