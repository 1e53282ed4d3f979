/* The image tools (issue 13): list_images, pull_image, build_image,
 * remove_image, prune_images, on whatever backend is active.
 *
 * What comes from the agent is checked here, before any backend sees it:
 * an image reference is a reference (no flag, no space, no control
 * character, a length cap), host paths are under the mount allowlist
 * (cm_policy_host_split), a Dockerfile stays inside its context.  The
 * backend's progress (per layer bytes, per build step) becomes MCP
 * progress notifications, which must only grow. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "tools/common.h"
#include "util/cleanup.h"
#include "util/clock.h"
#include "util/json.h"

#define REF_MAX 512
#define PROGRESS_EVERY_MS 200
#define PROGRESS_KEYS 64

/* ---- checking what the agent sent ----------------------------------------- */

/* Docker's references use letters, digits and . _ - / : @ only; anything
 * else (a space, a control character, a quote) is refused here rather
 * than by whatever reads it below, and a leading '-' can never become an
 * option of anything. */
static int check_ref(const char *what, const json_t *v, cm_err *err) {
        const char *s = json_string_value(v);
        size_t n = json_string_length(v);
        if (!s || n == 0 || n > REF_MAX)
                return cm_err_set(err, EINVAL,
                                  "%s: give an image reference of 1 to %d characters, e.g. "
                                  "busybox:latest",
                                  what, REF_MAX);
        if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= '0' && s[0] <= '9')))
                return cm_err_set(err, EINVAL,
                                  "%s \"%.80s\" must start with a letter or a digit (an image "
                                  "reference like busybox:latest or host:5000/repo:tag)",
                                  what, s);
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                          strchr("._-/:@", c) != NULL;
                if (!ok || !c)
                        return cm_err_set(err, EINVAL,
                                          "%s: character %zu (0x%02x) cannot be in an image reference; "
                                          "references use letters, digits and . _ - / : @ only",
                                          what, i + 1, c);
        }
        return 0;
}

/* The Dockerfile's path, relative to the context and inside it. */
static int check_dockerfile(const json_t *v, cm_err *err) {
        const char *s = json_string_value(v), *p;
        if (!v)
                return 0;
        if (strlen(s) != json_string_length(v) || s[0] == '/')
                goto bad;
        for (p = s; *p; p += strcspn(p, "/"), p += *p == '/') {
                size_t n = strcspn(p, "/");
                if (n == 2 && p[0] == '.' && p[1] == '.')
                        goto bad;
        }
        return 0;
bad:
        return cm_err_set(err, EINVAL,
                          "dockerfile \"%.200s\" must be a path inside the context, relative to it "
                          "(e.g. Dockerfile or docker/Dockerfile.dev): no leading /, no ..",
                          s);
}

/* ---- progress ------------------------------------------------------------- */

/* Each layer (or the build's steps) by the first word of the backend's
 * `what`; the notification's progress is the sum over them, sent when it
 * grew (MCP wants it to), at most every PROGRESS_EVERY_MS, and once at
 * the start whatever it is. */
typedef struct progress {
        mcp_call *call;
        struct {
                char key[96];
                uint64_t done, total;
        } keys[PROGRESS_KEYS];
        size_t n;
        double sent;
        int64_t last_ms;
        bool started;
        bool every; /* a build: each step is worth a notification */
} progress;

static void on_progress(void *arg, const char *what, uint64_t done, uint64_t total) {
        progress *p = arg;
        size_t klen = strcspn(what, " "), i;
        uint64_t sum = 0, sum_total = 0;
        int64_t now = cm_now_ms();
        char msg[320];
        for (i = 0; i < p->n; i++)
                if (strlen(p->keys[i].key) == klen && strncmp(p->keys[i].key, what, klen) == 0)
                        break;
        if (i == p->n && p->n < PROGRESS_KEYS) {
                (void)snprintf(p->keys[i].key, sizeof p->keys[i].key, "%.*s", (int)klen, what);
                p->n++;
        }
        if (i < p->n) {
                /* a layer's extraction starts its count again: keep the most */
                if (done > p->keys[i].done)
                        p->keys[i].done = done;
                if (total > p->keys[i].total)
                        p->keys[i].total = total;
        }
        for (i = 0; i < p->n; i++)
                sum += p->keys[i].done, sum_total += p->keys[i].total;
        if (p->started && ((double)sum <= p->sent || (!p->every && now - p->last_ms < PROGRESS_EVERY_MS)))
                return;
        p->started = true;
        p->sent = (double)sum;
        p->last_ms = now;
        if (total)
                (void)snprintf(msg, sizeof msg, "%.200s (%llu/%llu)", what, (unsigned long long)done,
                               (unsigned long long)total);
        else
                (void)snprintf(msg, sizeof msg, "%.200s", what);
        mcp_call_progress(p->call, (double)sum, sum_total >= sum ? (double)sum_total : 0, msg);
}

/* ---- results -------------------------------------------------------------- */

static json_t *image_json(const cm_image_info *i) {
        json_t *names = json_array();
        for (size_t k = 0; k < i->n_names; k++)
                (void)json_array_append_new(names, json_string(i->names[k]));
        return json_pack("{s:s, s:o, s:o, s:I, s:I, s:b}", "id", i->id ? i->id : "", "names", names, "digest",
                         i->digest ? json_string(i->digest) : json_null(), "size", (json_int_t)i->size, "created",
                         (json_int_t)i->created, "in_use", i->in_use);
}

static char *image_text(const char *verb, const cm_image_info *i) {
        return xasprintf("%s %s (%.19s, %.1f MB)", verb, i->n_names ? i->names[0] : "an untagged image",
                         i->id ? i->id : "?", (double)i->size / 1e6);
}

#define IMAGE_BACKEND(call, op, what, err) cm_tool_backend_op(call, offsetof(cm_backend_ops, op), what, err)

/* ---- the tools ------------------------------------------------------------ */

static int list_images(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        cm_backend *b = IMAGE_BACKEND(call, image_list, "list images yet", err);
        cm_image_info *v = NULL;
        size_t n = 0;
        json_t *arr;
        (void)args;
        if (!b || b->ops->image_list(b, &v, &n, err) < 0)
                return -1;
        arr = json_array();
        for (size_t i = 0; i < n; i++)
                (void)json_array_append_new(arr, image_json(&v[i]));
        *ret = json_pack("{s:o}", "images", arr);
        *ret_text = xasprintf("%zu image%s", n, n == 1 ? "" : "s");
        for (size_t i = 0; i < n; i++) {
                char *t =
                        xasprintf("%s\n%s  %.19s  %llu bytes%s", *ret_text, v[i].n_names ? v[i].names[0] : "<untagged>",
                                  v[i].id, (unsigned long long)v[i].size, v[i].in_use ? "  in use" : "");
                free(*ret_text);
                *ret_text = t;
        }
        cm_image_infos_free(v, n);
        return 0;
}

static int pull_image(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        const cm_config *cfg = cm_call_app(call)->cfg;
        const char *ref = cm_json_str(args, "image"), *imp = cm_json_str(args, "import");
        cleanup_free char *root = NULL, *rel = NULL, *named = NULL;
        progress pr = {.call = call};
        cm_image_progress prog = {on_progress, &pr};
        cm_cancel cancel = {mcp_call_cancel_fd(call)};
        cm_host_path host;
        cm_image_info info = {0};
        cm_backend *b;

        if (check_ref("image", json_object_get(args, "image"), err) < 0 ||
            cm_tool_writable(call, "pull_image", err) < 0)
                return -1;
        if (imp && cm_policy_host_split(cfg, imp, true, &root, &rel, err) < 0)
                return -1;
        if (!imp && cm_policy_registry(cfg, ref, err) < 0)
                return -1;
        if (!(b = IMAGE_BACKEND(call, image_pull, imp ? "import images yet" : "pull images yet", err)))
                return -1;
        host = (cm_host_path){root, rel};
        named = cm_policy_named_registries(cfg);
        cm_pull_spec spec = {.ref = ref,
                             .platform = cm_json_str(args, "platform"),
                             .import = imp ? &host : NULL,
                             .progress = &prog,
                             .local_ok = named};
        if (b->ops->image_pull(b, &spec, &cancel, &info, err) < 0)
                return -1;
        *ret = image_json(&info);
        *ret_text = image_text(imp ? "imported" : "pulled", &info);
        cm_image_info_clear(&info);
        return 0;
}

/* A base image a build pulls: the registry policy of pull_image. */
static int build_pull_allowed(void *arg, const char *ref, cm_err *err) { return cm_policy_registry(arg, ref, err); }

static int build_image(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        const cm_config *cfg = cm_call_app(call)->cfg;
        const json_t *tag = json_object_get(args, "tag");
        cleanup_free char *root = NULL, *rel = NULL, *named = NULL;
        cleanup_free cm_kv *bargs = NULL;
        size_t n_bargs = 0;
        progress pr = {.call = call, .every = true};
        cm_image_progress prog = {on_progress, &pr};
        cm_cancel cancel = {mcp_call_cancel_fd(call)};
        cm_image_info info = {0};
        cm_host_path host;
        cm_backend *b;

        if ((tag && check_ref("tag", tag, err) < 0) || check_dockerfile(json_object_get(args, "dockerfile"), err) < 0)
                return -1;
        if (cm_tool_env(json_object_get(args, "buildArgs"), &bargs, &n_bargs, err) < 0) {
                cm_err_prefix(err, "buildArgs (ARG names)");
                return -1;
        }
        if (cm_tool_writable(call, "build_image", err) < 0)
                return -1;
        if (n_bargs > 256)
                return cm_err_set(err, E2BIG, "buildArgs: %zu values; at most 256", n_bargs);
        if (cm_policy_host_split(cfg, cm_json_str(args, "context"), true, &root, &rel, err) < 0)
                return -1;
        if (!(b = IMAGE_BACKEND(call, image_build,
                                "build images yet (a server with --backend docker builds on Docker or Podman)", err)))
                return -1;
        host = (cm_host_path){root, rel};
        named = cm_policy_named_registries(cfg);
        cm_build_spec spec = {.context = &host,
                              .dockerfile = cm_json_str(args, "dockerfile"),
                              .tag = cm_json_str(args, "tag"),
                              .build_args = bargs,
                              .n_build_args = n_bargs,
                              .progress = &prog,
                              .allow_pull = build_pull_allowed,
                              .allow_arg = (void *)cfg,
                              .local_ok = named,
                              .cpus = cfg->default_cpus,
                              .memory_bytes = cfg->default_memory,
                              .pids = 512};
        if (b->ops->image_build(b, &spec, &cancel, &info, err) < 0)
                return -1;
        *ret = image_json(&info);
        *ret_text = image_text("built", &info);
        cm_image_info_clear(&info);
        return 0;
}

static int remove_image(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        const char *ref = cm_json_str(args, "image");
        bool force = json_is_true(json_object_get(args, "force"));
        cm_backend *b;
        if (check_ref("image", json_object_get(args, "image"), err) < 0 ||
            cm_tool_writable(call, "remove_image", err) < 0)
                return -1;
        if (!(b = IMAGE_BACKEND(call, image_remove, "remove images yet", err)) ||
            b->ops->image_remove(b, ref, force, err) < 0)
                return -1;
        *ret = json_pack("{s:s, s:b}", "image", ref, "removed", 1);
        *ret_text = xasprintf("removed image %s", ref);
        return 0;
}

static int prune_images(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        bool all = json_is_true(json_object_get(args, "all"));
        cm_prune_result pr = {0};
        cm_backend *b;
        if (cm_tool_writable(call, "prune_images", err) < 0)
                return -1;
        if (!(b = IMAGE_BACKEND(call, image_prune, "prune images yet", err)) ||
            b->ops->image_prune(b, all, &pr, err) < 0)
                return -1;
        *ret = json_pack("{s:I, s:I}", "reclaimed_bytes", (json_int_t)pr.reclaimed, "images_removed",
                         (json_int_t)pr.images);
        *ret_text = xasprintf("removed %zu image%s, reclaimed %llu bytes", pr.images, pr.images == 1 ? "" : "s",
                              (unsigned long long)pr.reclaimed);
        return 0;
}

/* Name, description and schemas of each: src/tools/defs/images.json. */
static const cm_tool_handler handlers[] = {
        {"list_images", list_images},   {"pull_image", pull_image},     {"build_image", build_image},
        {"remove_image", remove_image}, {"prune_images", prune_images},
};

const cm_tool_family cm_tools_images = {__FILE__, handlers, ARRAY_SIZE(handlers)};
