/* The image tools through the Engine API: list, pull, build, remove,
 * prune (backend.h), on Docker and on Podman's compatible API.
 *
 * Pull and build answer with a stream of JSON objects, one a line, for as
 * long as they work: read as it comes (dk_jsonl), each object turned into
 * progress, and an `error` in it into the call's error.  The build's
 * context goes up as a tar streamed from the host directory (dk_tarw)
 * through the context's .dockerignore (image/dockerignore.h). */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/docker/internal.h"
#include "backend/docker/tar.h"
#include "image/dockerignore.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/when.h"

#define DK_LINE_MAX (1u << 20)                      /* one object of a stream */
#define DK_CONTEXT_MAX_BYTES ((uint64_t)4 << 30)    /* a build context */
#define DK_OUTPUT_TAIL 480 /* bytes of a failed build's output in its error */

/* ---- newline-delimited JSON, as it streams in ----------------------------- */

typedef struct dk_jsonl {
        char *buf;
        size_t len;
        bool over;
        void (*object)(void *arg, const json_t *obj);
        void *arg;
} dk_jsonl;

static void jsonl_line(dk_jsonl *s, const char *p, size_t n) {
        cleanup_json json_t *j = NULL;
        while (n && (p[n - 1] == '\r' || p[n - 1] == ' '))
                n--;
        if (!n)
                return;
        j = json_loadb(p, n, 0, NULL);
        if (json_is_object(j))
                s->object(s->arg, j);
}

static size_t jsonl_write(char *p, size_t size, size_t n, void *arg) {
        dk_jsonl *s = arg;
        size_t len = size * n, i = 0;
        while (i < len) {
                const char *nl = memchr(p + i, '\n', len - i);
                size_t take = nl ? (size_t)(nl - (p + i)) : len - i;
                if (s->len + take > DK_LINE_MAX) {
                        s->over = true;
                        return 0;
                }
                if (nl && !s->len) {
                        jsonl_line(s, p + i, take);
                } else {
                        s->buf = xrealloc(s->buf, s->len + take + 1);
                        memcpy(s->buf + s->len, p + i, take);
                        s->len += take;
                        if (nl) {
                                jsonl_line(s, s->buf, s->len);
                                s->len = 0;
                        }
                }
                i += take + (nl ? 1 : 0);
        }
        return len;
}

static void jsonl_end(dk_jsonl *s) {
        if (s->len)
                jsonl_line(s, s->buf, s->len);
        free(s->buf);
        s->buf = NULL;
        s->len = 0;
}

/* The message of a stream's error object ({"error": ..., "errorDetail":
 * {"message": ...}}), or NULL. */
static const char *stream_error(const json_t *o) {
        const char *m = cm_json_str(json_object_get(o, "errorDetail"), "message");
        if (!m)
                m = cm_json_str(o, "error");
        /* an answer other than 200 has its message where dk_call finds it */
        return m ? m : cm_json_str(o, "message");
}

/* ---- what the engine says of an image ---------------------------------- */

static const char *hex_of(const char *id) { return id && strncmp(id, "sha256:", 7) == 0 ? id + 7 : id; }

/* The image ids the engine's containers use (all of them: an image under a
 * stopped container is in use too). */
static int used_images(docker *d, json_t **ret, cm_err *err) {
        return dk_call(&d->api, "GET", "/containers/json?all=1", NULL, ret, err);
}

static bool image_used(const json_t *containers, const char *id) {
        const json_t *c;
        size_t i;
        json_array_foreach(containers, i, c) {
                const char *cid = cm_json_str(c, "ImageID");
                if (cid && id && strcmp(hex_of(cid), hex_of(id)) == 0)
                        return true;
        }
        return false;
}

static int64_t created_of(const json_t *v) {
        int64_t ms = 0;
        cm_err err = CM_ERR_INIT;
        if (json_is_integer(v))
                return (int64_t)json_integer_value(v);
        if (json_is_string(v) && cm_parse_when(json_string_value(v), 0, &ms, &err) == 0)
                return ms / 1000;
        return 0;
}

/* From an entry of GET /images/json or from GET /images/X/json: the two
 * name the same fields alike but for Created (a number, a time string). */
static void info_of(const json_t *j, const json_t *containers, cm_image_info *ret) {
        const json_t *tags = json_object_get(j, "RepoTags"), *digests = json_object_get(j, "RepoDigests"), *v;
        const char *id = cm_json_str(j, "Id");
        size_t i;
        memset(ret, 0, sizeof *ret);
        ret->id = xstrdup(id ? id : "");
        if (strncmp(ret->id, "sha256:", 7) != 0 && *ret->id) { /* Podman's compat list gives bare hex */
                char *full = xasprintf("sha256:%s", ret->id);
                free(ret->id);
                ret->id = full;
        }
        ret->names = xcalloc(json_array_size(tags) + 1, sizeof *ret->names);
        json_array_foreach(tags, i, v) {
                const char *t = json_string_value(v);
                if (t && strcmp(t, "<none>:<none>") != 0)
                        ret->names[ret->n_names++] = xstrdup(t);
        }
        json_array_foreach(digests, i, v) {
                const char *at = json_string_value(v) ? strchr(json_string_value(v), '@') : NULL;
                if (at && !ret->digest)
                        ret->digest = xstrdup(at + 1);
        }
        ret->size = (uint64_t)json_integer_value(json_object_get(j, "Size"));
        ret->created = created_of(json_object_get(j, "Created"));
        ret->in_use = image_used(containers, ret->id);
}

int dk_image_list(cm_backend *b, cm_image_info **ret, size_t *ret_n, cm_err *err) {
        docker *d = dk_of(b);
        cleanup_json json_t *imgs = NULL, *ctrs = NULL;
        const json_t *j;
        size_t i, n = 0;
        cm_image_info *v;
        if (dk_call(&d->api, "GET", "/images/json", NULL, &imgs, err) < 0 || used_images(d, &ctrs, err) < 0)
                return -1;
        v = xcalloc(json_array_size(imgs) + 1, sizeof *v);
        json_array_foreach(imgs, i, j) {
                if (json_is_object(j))
                        info_of(j, ctrs, &v[n++]);
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

/* One image, by a name or id, as list reports it. */
static int image_inspect(docker *d, const char *ref, cm_image_info *ret, cm_err *err) {
        cleanup_free char *esc = dk_escape(ref), *path = xasprintf("/images/%s/json", esc);
        cleanup_json json_t *j = NULL, *ctrs = NULL;
        int r = dk_call(&d->api, "GET", path, NULL, &j, err);
        if (r == -ENOENT)
                return cm_err_set(err, ENOENT, "image %s is not present on the engine at %s", ref, d->api.where);
        if (r < 0 || used_images(d, &ctrs, err) < 0)
                return -1;
        info_of(j, ctrs, ret);
        return 0;
}

/* ---- pull ---------------------------------------------------------------- */

typedef struct pull_state {
        const cm_image_progress *progress;
        char *error;
} pull_state;

/* {"status":"Downloading","progressDetail":{"current":N,"total":M},"id":"ab12"} */
static void pull_object(void *arg, const json_t *o) {
        pull_state *s = arg;
        const json_t *det = json_object_get(o, "progressDetail");
        const char *e = stream_error(o), *status = cm_json_str(o, "status"), *id = cm_json_str(o, "id");
        if (e && !s->error)
                s->error = xstrdup(e);
        if (!e && status && s->progress) {
                char what[256];
                (void)snprintf(what, sizeof what, "%.80s %.120s", id ? id : "image", status);
                s->progress->fn(s->progress->arg, what, (uint64_t)json_integer_value(json_object_get(det, "current")),
                                (uint64_t)json_integer_value(json_object_get(det, "total")));
        }
}

/* The query of POST /images/create for a reference: fromImage and, when the
 * reference names neither a tag nor a digest, tag=latest (an empty tag
 * would pull every tag of the repository). */
static char *pull_query(const char *ref, const char *platform) {
        const char *slash = strrchr(ref, '/'), *colon = strrchr(ref, ':');
        bool tagged = strchr(ref, '@') || (colon && (!slash || colon > slash));
        cleanup_free char *esc = dk_escape(ref), *plat = platform ? dk_escape(platform) : NULL;
        return xasprintf("/images/create?fromImage=%s%s%s%s", esc, tagged ? "" : "&tag=latest",
                         plat ? "&platform=" : "", plat ? plat : "");
}

static int import_image(docker *d, const cm_pull_spec *spec, const cm_cancel *cancel, cm_image_info *ret,
                        cm_err *err);

int dk_image_pull(cm_backend *b, const cm_pull_spec *spec, const cm_cancel *cancel, cm_image_info *ret,
                  cm_err *err) {
        docker *d = dk_of(b);
        cleanup_free char *path = NULL;
        pull_state st = {.progress = spec->progress};
        dk_jsonl js = {.object = pull_object, .arg = &st};
        dk_resp resp;
        int r;

        memset(ret, 0, sizeof *ret);
        if (spec->import)
                return import_image(d, spec, cancel, ret, err);
        path = pull_query(spec->ref, spec->platform);
        dk_req req = {.method = "POST", .path = path, .timeout_ms = -1, .cancel = cancel, .write = jsonl_write,
                      .write_arg = &js};
        r = dk_request(&d->api, &req, &resp, err);
        jsonl_end(&js);
        if (r == 0 && js.over)
                r = cm_err_set(err, EIO, "the engine at %s sent a pull progress line over 1 MiB", d->api.where);
        else if (r == 0 && (st.error || resp.status != 200))
                r = cm_err_set(err, EIO, "pulling %s failed: %.600s; check the name and tag, that the engine can "
                               "reach the registry, and, for a private registry, the engine's login",
                               spec->ref, st.error ? st.error : "no message");
        dk_resp_clear(&resp);
        free(st.error);
        if (r < 0)
                return -1;
        return image_inspect(d, spec->ref, ret, err);
}

/* ---- import: a docker-save archive or a rootfs tar from the host --------- */

static size_t tarw_read(char *p, size_t size, size_t n, void *arg) {
        ssize_t k = dk_tarw_read(arg, p, size * n);
        return k < 0 ? CURL_READFUNC_ABORT : (size_t)k;
}

typedef struct file_src {
        int fd;
} file_src;

static size_t file_read(char *p, size_t size, size_t n, void *arg) {
        ssize_t k = read(((file_src *)arg)->fd, p, size * n);
        return k < 0 ? CURL_READFUNC_ABORT : (size_t)k;
}

/* Whether an uncompressed tar holds manifest.json at its top (docker save). */
static bool is_docker_save(int fd) {
        unsigned char h[512];
        bool found = false;
        for (int i = 0; i < 4096 && !found; i++) {
                unsigned long long size = 0;
                if (read(fd, h, sizeof h) != (ssize_t)sizeof h || !h[0])
                        break;
                if (memcmp(h + 257, "ustar", 5) != 0)
                        break;
                found = strcmp((char *)h, "manifest.json") == 0 || strcmp((char *)h, "./manifest.json") == 0;
                for (int k = 124; k < 135 && h[k] >= '0' && h[k] <= '7'; k++)
                        size = size * 8 + (unsigned)(h[k] - '0');
                if (lseek(fd, (off_t)((size + 511) / 512 * 512), SEEK_CUR) < 0)
                        break;
        }
        (void)lseek(fd, 0, SEEK_SET);
        return found;
}

static int open_host_file(const cm_host_path *hp, cm_err *err) {
        cleanup_close int root = open(hp->root, O_PATH | O_DIRECTORY | O_CLOEXEC), dir = -1;
        cleanup_free char *name = NULL;
        int fd;
        if (root < 0)
                return cm_err_sys(err, errno, "cannot open %s", hp->root);
        if (!*hp->rel)
                return cm_err_set(err, EISDIR, "import %s: give a tar file (docker save, or a root file system)",
                                  hp->root);
        if (cm_open_parent_at(root, hp->rel, false, &dir, &name, err) < 0)
                return -1;
        fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return cm_err_sys(err, errno, "cannot open %s/%s", hp->root, hp->rel);
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                (void)close(fd);
                return cm_err_set(err, EINVAL, "import %s/%s: the docker backend imports a tar file (docker save, "
                                  "or a root file system); an OCI layout directory: tar it first", hp->root, hp->rel);
        }
        (void)fcntl(fd, F_SETFL, 0);
        return fd;
}

typedef struct load_state {
        char *error, *loaded;
        const cm_image_progress *progress;
} load_state;

/* {"stream":"Loaded image: x:y\n"} or {"status":"sha256:…"} (an import). */
static void load_object(void *arg, const json_t *o) {
        load_state *s = arg;
        const char *e = stream_error(o), *stream = cm_json_str(o, "stream"), *status = cm_json_str(o, "status");
        const char *tag = NULL;
        if (e && !s->error)
                s->error = xstrdup(e);
        if (stream && (tag = strstr(stream, "Loaded image: ")))
                tag += strlen("Loaded image: ");
        else if (stream && (tag = strstr(stream, "Loaded image ID: ")))
                tag += strlen("Loaded image ID: ");
        else if (status && strncmp(status, "sha256:", 7) == 0)
                tag = status;
        if (tag && !s->loaded)
                s->loaded = xstrndup(tag, strcspn(tag, "\r\n"));
        if (s->progress && (stream || status))
                s->progress->fn(s->progress->arg, "importing", 0, 0);
}

/* POST /images/ID/tag: `ref` ("repo[:tag]") also names image `id`. */
static int tag_image(docker *d, const char *id, const char *ref, cm_err *err) {
        const char *slash = strrchr(ref, '/'), *colon = strrchr(ref, ':');
        bool tagged = colon && (!slash || colon > slash);
        cleanup_free char *repo = tagged ? xstrndup(ref, (size_t)(colon - ref)) : xstrdup(ref);
        cleanup_free char *eid = dk_escape(id), *erepo = dk_escape(repo), *etag = dk_escape(tagged ? colon + 1 : "latest");
        cleanup_free char *path = xasprintf("/images/%s/tag?repo=%s&tag=%s", eid, erepo, etag);
        return dk_call(&d->api, "POST", path, NULL, NULL, err) < 0 ? -1 : 0;
}

static int import_image(docker *d, const cm_pull_spec *spec, const cm_cancel *cancel, cm_image_info *ret,
                        cm_err *err) {
        cleanup_close int fd = open_host_file(spec->import, err);
        cleanup_free char *path = NULL, *esc = NULL;
        load_state st = {.progress = spec->progress};
        dk_jsonl js = {.object = load_object, .arg = &st};
        file_src src;
        dk_resp resp;
        bool save;
        int r;

        if (fd < 0)
                return -1;
        save = is_docker_save(fd);
        if (save) {
                path = xstrdup("/images/load?quiet=1");
        } else {
                esc = dk_escape(spec->ref ? spec->ref : "");
                path = xasprintf("/images/create?fromSrc=-%s%s", spec->ref ? "&repo=" : "", spec->ref ? esc : "");
        }
        src.fd = fd;
        dk_req req = {.method = "POST", .path = path, .timeout_ms = -1, .cancel = cancel, .write = jsonl_write,
                      .write_arg = &js, .read = file_read, .read_arg = &src, .content_type = "application/x-tar"};
        r = dk_request(&d->api, &req, &resp, err);
        jsonl_end(&js);
        if (r == 0 && (st.error || resp.status != 200))
                r = cm_err_set(err, EIO, "importing %s/%s failed: %.600s", spec->import->root, spec->import->rel,
                               st.error ? st.error : "no message");
        else if (r == 0 && !st.loaded)
                r = cm_err_set(err, EIO, "the engine at %s imported %s/%s but did not say as what", d->api.where,
                               spec->import->root, spec->import->rel);
        dk_resp_clear(&resp);
        if (r == 0 && save && spec->ref) /* the name asked for, on what was loaded */
                r = tag_image(d, st.loaded, spec->ref, err);
        if (r == 0)
                r = image_inspect(d, save && spec->ref ? spec->ref : st.loaded, ret, err);
        free(st.error);
        free(st.loaded);
        return r < 0 ? -1 : 0;
}

/* ---- build --------------------------------------------------------------- */

typedef struct build_state {
        const cm_image_progress *progress;
        char *error, *id;
        char tail[DK_OUTPUT_TAIL + 1]; /* the end of the output, for an error */
        size_t tail_len;
        unsigned step, steps;
} build_state;

static void tail_add(build_state *s, const char *p, size_t n) {
        if (n >= DK_OUTPUT_TAIL) {
                memcpy(s->tail, p + n - DK_OUTPUT_TAIL, DK_OUTPUT_TAIL);
                s->tail_len = DK_OUTPUT_TAIL;
        } else {
                size_t keep = s->tail_len + n > DK_OUTPUT_TAIL ? DK_OUTPUT_TAIL - n : s->tail_len;
                memmove(s->tail, s->tail + s->tail_len - keep, keep);
                memcpy(s->tail + keep, p, n);
                s->tail_len = keep + n;
        }
        s->tail[s->tail_len] = 0;
}

/* "Step 2/7 : RUN make" (Docker) or "STEP 2/7: RUN make" (Podman). */
static void build_step(build_state *s, const char *line) {
        unsigned n, m;
        int used = 0;
        char what[200];
        if ((sscanf(line, "Step %u/%u :%n", &n, &m, &used) != 2 && sscanf(line, "STEP %u/%u:%n", &n, &m, &used) != 2) ||
            !used)
                return;
        s->step = n, s->steps = m;
        (void)snprintf(what, sizeof what, "step %u/%u:%.*s", n, m, (int)strcspn(line + used, "\r\n"), line + used);
        if (s->progress)
                s->progress->fn(s->progress->arg, what, n, m);
}

static void build_object(void *arg, const json_t *o) {
        build_state *s = arg;
        const char *e = stream_error(o), *stream = cm_json_str(o, "stream");
        const char *id = cm_json_str(json_object_get(o, "aux"), "ID");
        if (e && !s->error)
                s->error = xstrdup(e);
        if (id) {
                free(s->id);
                s->id = xstrdup(id);
        }
        if (stream) {
                build_step(s, stream);
                tail_add(s, stream, strlen(stream));
        }
}

static enum dk_tar_verdict ignore_filter(void *arg, const char *name, bool is_dir) {
        const cm_dockerignore *d = arg;
        if (!cm_dockerignore_excluded(d, name))
                return DK_TAR_KEEP;
        return is_dir && cm_dockerignore_enter(d, name) ? DK_TAR_SKIP_ENTRY : DK_TAR_SKIP;
}

static char *build_query(const cm_build_spec *spec, const char *dockerfile) {
        cleanup_json json_t *args = json_object();
        cleanup_free char *df = dk_escape(dockerfile), *argtext = NULL, *eargs = NULL, *tag = NULL;
        for (size_t i = 0; i < spec->n_build_args; i++)
                (void)json_object_set_new(args, spec->build_args[i].key, json_string(spec->build_args[i].value));
        argtext = cm_json_dump(args);
        eargs = dk_escape(argtext);
        tag = spec->tag ? dk_escape(spec->tag) : NULL;
        return xasprintf("/build?dockerfile=%s&buildargs=%s&rm=1&forcerm=1%s%s", df, eargs, tag ? "&t=" : "",
                         tag ? tag : "");
}

static int build_result(docker *d, const cm_build_spec *spec, build_state *st, cm_err *err) {
        if (st->error) {
                /* The output before the error is where the reason is (a RUN's
                 * own messages). */
                if (!st->steps)
                        return cm_err_set(err, EIO, "the build failed before its first step: %.500s", st->error);
                return cm_err_set(err, EIO, "the build failed at step %u/%u: %.300s; its last output:\n%s",
                                  st->step, st->steps, st->error, st->tail);
        }
        if (!st->id && !spec->tag)
                return cm_err_set(err, EIO, "the engine at %s built the image but did not say its id (%s)",
                                  d->api.where, st->tail);
        return 0;
}

int dk_image_build(cm_backend *b, const cm_build_spec *spec, const cm_cancel *cancel, cm_image_info *ret,
                   cm_err *err) {
        docker *d = dk_of(b);
        const char *dockerfile = spec->dockerfile ? spec->dockerfile : "Dockerfile";
        cleanup_close int ctx = cm_build_context_open(spec->context, err);
        cleanup_free char *path = NULL;
        build_state st = {.progress = spec->progress};
        dk_jsonl js = {.object = build_object, .arg = &st};
        cm_dockerignore *ign = NULL;
        cm_copy_stats cs;
        dk_tarw *w;
        dk_resp resp;
        int r;

        memset(ret, 0, sizeof *ret);
        if (ctx < 0 || cm_dockerignore_read(ctx, dockerfile, &ign, err) < 0)
                return -1;
        path = build_query(spec, dockerfile);
        w = dk_tarw_new(ctx, ".", "", DK_CONTEXT_MAX_BYTES);
        dk_tarw_set_filter(w, ignore_filter, ign);
        dk_req req = {.method = "POST", .path = path, .timeout_ms = -1, .cancel = cancel, .write = jsonl_write,
                      .write_arg = &js, .read = tarw_read, .read_arg = w, .content_type = "application/x-tar"};
        r = dk_request(&d->api, &req, &resp, err);
        jsonl_end(&js);
        if (dk_tarw_end(w, &cs, err) < 0)
                r = -1;
        else if (r == 0 && resp.status != 200 && !st.error)
                r = cm_err_set(err, EIO, "the engine at %s refused the build (HTTP %ld)", d->api.where, resp.status);
        else if (r == 0)
                r = build_result(d, spec, &st, err);
        if (r == 0)
                r = image_inspect(d, st.id ? st.id : spec->tag, ret, err);
        dk_resp_clear(&resp);
        dk_tarw_free(w);
        cm_dockerignore_free(ign);
        free(st.error);
        free(st.id);
        return r < 0 ? -1 : 0;
}

/* ---- remove and prune ---------------------------------------------------- */

/* The container an engine's conflict message names ("... by running
 * container 0123abcd", Podman's "image used by 0123abcd..."). */
static char *conflict_container(const char *msg) {
        const char *p = msg;
        while (p && *p) {
                size_t n = strspn(p, "0123456789abcdef");
                if (n >= 12)
                        return xstrndup(p, n > 12 ? 12 : n);
                p += n ? n : 1;
        }
        return NULL;
}

int dk_image_remove(cm_backend *b, const char *ref, bool force, cm_err *err) {
        docker *d = dk_of(b);
        cleanup_free char *esc = dk_escape(ref), *path = xasprintf("/images/%s?force=%s", esc, force ? "1" : "0");
        dk_req req = {.method = "DELETE", .path = path};
        dk_resp resp;
        int r = dk_request(&d->api, &req, &resp, err);
        if (r < 0)
                return -1;
        if (resp.status == 404) {
                r = cm_err_set(err, ENOENT, "image %s is not present on the engine at %s: list_images shows what "
                               "is; pull_image first", ref, d->api.where);
        } else if (resp.status == 409) {
                cleanup_json json_t *j = resp.body ? json_loads(resp.body, 0, NULL) : NULL;
                const char *msg = cm_json_str(j, "message") ? cm_json_str(j, "message") : "";
                cleanup_free char *c = conflict_container(msg + (strstr(msg, "container") ? strstr(msg, "container") - msg : 0));
                r = cm_err_set(err, EBUSY, "image %s is used by container %s: stop and remove it first%s (%.300s)",
                               ref, c ? c : "(see list_containers)",
                               force ? "; force does not take an image from a running container" : ", or pass force",
                               msg);
        } else if (resp.status < 200 || resp.status > 299) {
                cleanup_free char *what = xasprintf("remove image %s", ref);
                r = dk_engine_error(&d->api, resp.status, resp.body, what, err);
        }
        dk_resp_clear(&resp);
        return r < 0 ? -1 : 0;
}

int dk_image_prune(cm_backend *b, bool all, cm_prune_result *ret, cm_err *err) {
        docker *d = dk_of(b);
        cleanup_json json_t *out = NULL;
        const json_t *e;
        size_t i;
        /* {"dangling":["false"]}: every unused image, not only untagged ones */
        const char *path = all ? "/images/prune?filters=%7B%22dangling%22%3A%5B%22false%22%5D%7D" : "/images/prune";
        memset(ret, 0, sizeof *ret);
        if (dk_call(&d->api, "POST", path, NULL, &out, err) < 0)
                return -1;
        ret->reclaimed = (uint64_t)json_integer_value(json_object_get(out, "SpaceReclaimed"));
        json_array_foreach(json_object_get(out, "ImagesDeleted"), i, e) {
                if (cm_json_str(e, "Deleted"))
                        ret->images++;
        }
        return 0;
}

/* ---- for the fuzzer ---------------------------------------------------- */

static void fuzz_progress(void *arg, const char *what, uint64_t done, uint64_t total) {
        (void)done, (void)total;
        *(size_t *)arg += strlen(what);
}

int dk_image_stream_parse(enum dk_stream_kind kind, const char *p, size_t n, size_t chunk, char **ret_error,
                          char **ret_id) {
        size_t count = 0;
        cm_image_progress prog = {fuzz_progress, &count};
        pull_state ps = {.progress = &prog};
        build_state bs = {.progress = &prog};
        load_state ls = {.progress = &prog};
        dk_jsonl js = {.object = kind == DK_STREAM_PULL ? pull_object : kind == DK_STREAM_BUILD ? build_object
                                                                                                 : load_object,
                       .arg = kind == DK_STREAM_PULL ? (void *)&ps : kind == DK_STREAM_BUILD ? (void *)&bs : (void *)&ls};
        for (size_t i = 0; i < n && !js.over; i += chunk ? chunk : n)
                if (jsonl_write((char *)p + i, 1, n - i < (chunk ? chunk : n) ? n - i : (chunk ? chunk : n), &js) == 0)
                        break;
        jsonl_end(&js);
        *ret_error = kind == DK_STREAM_PULL ? ps.error : kind == DK_STREAM_BUILD ? bs.error : ls.error;
        *ret_id = kind == DK_STREAM_BUILD ? bs.id : kind == DK_STREAM_LOAD ? ls.loaded : NULL;
        return js.over ? -1 : 0;
}
