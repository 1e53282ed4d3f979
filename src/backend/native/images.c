/* The native backend's images: the store of src/image/ under the state
 * dir, its operations (list, import, remove, prune), and a stored image
 * resolved for a run (its layers and the config a run honours).
 *
 * Which containers use an image comes from the state records: each
 * records the manifest digest of its stored image ("image_id"). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "backend/native/linux.h"
#include "image/layer.h"
#include "policy/config.h"
#include "util/cleanup.h"

bool native_image_is_stored(const char *image) {
        return image && image[0] && image[0] != '/' && image[0] != '.' && strcmp(image, "host") != 0;
}

static uint64_t max_size(void) {
        const char *v = getenv("CONTAINER_MCP_IMAGE_MAX_SIZE");
        int64_t n = 0;
        return v && *v && cm_parse_size(v, &n) == 0 && n > 0 ? (uint64_t)n : 0;
}

img_owner native_image_owner(const native *n) { return (img_owner){!n->rootless, n->map_uid, n->map_gid}; }

int native_store(native *n, img_store **ret, cm_err *err) {
        int r = 0;
        (void)pthread_mutex_lock(&n->lock);
        if (!n->store) {
                img_owner own = native_image_owner(n);
                if (!n->state_dir)
                        r = cm_err_set(err, ENOTSUP, "the native runtime is not usable here: %s; %s", n->reason,
                                       n->fix);
                else
                        r = img_store_open(n->state_dir, &own, max_size(), &n->store, err);
        }
        (void)pthread_mutex_unlock(&n->lock);
        *ret = n->store;
        return r;
}

/* ---- in use ---------------------------------------------------------------- */

/* Runs to completion have no record: each holds <store>/inuse/<hex>.lock
 * shared for its whole run (in this server or another on the same state
 * dir), and removal finds it held.  The files stay: one unlinked while a
 * run waits to lock it would hide that run from the next check. */
static char *hold_path(img_store *s, const char *manifest) {
        return xasprintf("%s/inuse/%s.lock", img_store_dir(s), manifest + 7);
}

/* Our own holds, counted: what this process holds is known without the
 * lock file (see held()). */
struct native_hold {
        char manifest[72];
        unsigned count;
};

static void count_hold(native *n, const char *manifest, int delta) {
        (void)pthread_mutex_lock(&n->hold_lock);
        size_t i = 0;
        while (i < n->n_holds && strcmp(n->holds[i].manifest, manifest) != 0)
                i++;
        if (i == n->n_holds && delta > 0) {
                n->holds = xrealloc(n->holds, (n->n_holds + 1) * sizeof *n->holds);
                (void)snprintf(n->holds[i].manifest, sizeof n->holds[i].manifest, "%s", manifest);
                n->holds[n->n_holds++].count = 0;
        }
        if (i < n->n_holds) {
                n->holds[i].count += (unsigned)delta;
                if (n->holds[i].count == 0)
                        n->holds[i] = n->holds[--n->n_holds];
        }
        (void)pthread_mutex_unlock(&n->hold_lock);
}

static bool held_here(native *n, const char *manifest) {
        bool r = false;
        (void)pthread_mutex_lock(&n->hold_lock);
        for (size_t i = 0; i < n->n_holds && !r; i++)
                r = strcmp(n->holds[i].manifest, manifest) == 0;
        (void)pthread_mutex_unlock(&n->hold_lock);
        return r;
}

int native_image_hold(native *n, const char *manifest) {
        img_store *s;
        cm_err err = CM_ERR_INIT;
        cleanup_free char *dir = NULL, *path = NULL;
        int fd;

        if (native_store(n, &s, &err) < 0 || strlen(manifest) >= sizeof((struct native_hold){0}.manifest))
                return -1;
        dir = xasprintf("%s/inuse", img_store_dir(s));
        (void)mkdir(dir, 0700);
        path = hold_path(s, manifest);
        fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 && flock(fd, LOCK_SH) < 0) {
                (void)close(fd);
                return -1;
        }
        if (fd >= 0)
                count_hold(n, manifest, +1);
        return fd;
}

void native_image_release(native *n, const char *manifest, int fd) {
        if (fd < 0)
                return;
        count_hold(n, manifest, -1);
        (void)close(fd);
}

/* Whether a run or build holds the image: ours by the count; another
 * server's by its shared flock, asked as img_flock_settled does (a hold
 * of ours that just ended can linger in a process we cloned; a hold of
 * another server lasts its whole run). */
static bool held(native *n, const char *manifest) {
        img_store *s;
        cm_err err = CM_ERR_INIT;
        cleanup_free char *path = NULL;
        cleanup_close int fd = -1;

        if (held_here(n, manifest))
                return true;
        if (native_store(n, &s, &err) < 0)
                return false;
        path = hold_path(s, manifest);
        if ((fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)) < 0)
                return false;
        if (img_flock_settled(fd, LOCK_EX) == 0) {
                (void)flock(fd, LOCK_UN);
                return false;
        }
        return errno == EWOULDBLOCK;
}

static bool in_use(void *arg, const char *manifest, char **ret_container) {
        native *n = arg;
        nstate *v = NULL;
        size_t nv = 0;
        cm_err e = CM_ERR_INIT;
        bool used = false;

        if (held(n, manifest)) {
                if (ret_container)
                        *ret_container = xstrdup("(a run_container with wait, still running)");
                return true;
        }
        if (state_list(n, &v, &nv, &e) < 0)
                return true; /* cannot tell: keep it */
        for (size_t i = 0; i < nv; i++) {
                if (!used && v[i].image_id && strcmp(v[i].image_id, manifest) == 0) {
                        used = true;
                        if (ret_container)
                                *ret_container = xstrdup(v[i].name);
                }
                state_free(&v[i]);
        }
        free(v);
        return used;
}

void native_image_info(const img_entry *e, bool used, cm_image_info *ret) {
        *ret = (cm_image_info){0};
        ret->id = xstrdup(e->config);
        ret->digest = xstrdup(e->manifest);
        ret->names = xcalloc(e->n_names + 1, sizeof *ret->names);
        for (size_t i = 0; i < e->n_names; i++)
                ret->names[i] = xstrdup(e->names[i]);
        ret->n_names = e->n_names;
        ret->size = e->size;
        ret->created = e->created;
        ret->in_use = used;
}

/* ---- the backend's operations ------------------------------------------------ */

int native_image_list(cm_backend *b, cm_image_info **ret, size_t *ret_n, cm_err *err) {
        native *n = (native *)b;
        img_store *s;
        img_entry *v;
        size_t nv;

        if (native_store(n, &s, err) < 0 || img_list(s, &v, &nv, err) < 0)
                return -1;
        *ret = xcalloc(nv + 1, sizeof **ret);
        for (size_t i = 0; i < nv; i++)
                native_image_info(&v[i], in_use(n, v[i].manifest, NULL), &(*ret)[i]);
        *ret_n = nv;
        img_entries_free(v, nv);
        return 0;
}

/* From a registry (src/image/pull.c): fetch, then import. */
static int pull(native *n, img_store *s, const cm_pull_spec *spec, const cm_cancel *cancel, cm_image_info *ret,
                cm_err *err) {
        cm_registry_opts o = {.platform = spec->platform, .local_ok = spec->local_ok};
        cm_image_ref ref;
        img_entry e = {0};
        int r;

        (void)n;
        if (cm_image_ref_parse(spec->ref, &ref, err) < 0)
                return -1;
        r = img_pull(s, &ref, &o, spec->progress, cancel, &e, err);
        cm_image_ref_free(&ref);
        if (r == 0 && ret)
                native_image_info(&e, false, ret);
        img_entry_clear(&e);
        return r;
}

int native_image_pull(cm_backend *b, const cm_pull_spec *spec, const cm_cancel *cancel, cm_image_info *ret,
                      cm_err *err) {
        native *n = (native *)b;
        img_store *s;
        img_entry e = {0};
        cleanup_close int root = -1;
        int r;

        if (native_store(n, &s, err) < 0)
                return -1;
        if (!spec->import)
                return pull(n, s, spec, cancel, ret, err);
        /* the allowed root as policy canonicalised it, no symlink on the way;
         * everything below it is opened beneath it (import.c) */
        root = sys_openat2(
                AT_FDCWD, spec->import->root,
                &(struct cm_open_how){.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS});
        if (root < 0 && errno == ENOSYS)
                root = open(spec->import->root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0)
                return cm_err_sys(err, errno, "import: cannot open %s", spec->import->root);
        r = img_import_at(s, root, spec->import->rel, spec->ref && spec->ref[0] ? spec->ref : NULL, spec->progress,
                          cancel, &e, err);
        if (r == 0 && ret)
                native_image_info(&e, false, ret);
        img_entry_clear(&e);
        return r;
}

int native_image_remove(cm_backend *b, const char *ref, bool force, cm_err *err) {
        native *n = (native *)b;
        img_store *s;
        if (native_store(n, &s, err) < 0)
                return -1;
        pool_forget_images(n); /* before the layers can go */
        return img_remove(s, ref, force, in_use, n, err);
}

int native_image_prune(cm_backend *b, bool all, cm_prune_result *ret, cm_err *err) {
        native *n = (native *)b;
        img_store *s;
        *ret = (cm_prune_result){0};
        if (native_store(n, &s, err) < 0)
                return -1;
        pool_forget_images(n);
        return img_prune(s, all, in_use, n, &ret->reclaimed, &ret->images, err);
}

/* ---- a run ------------------------------------------------------------------ */

void native_image_clear(native_image *im) {
        img_entry_clear(&im->e);
        img_config_clear(&im->cfg);
        for (char **p = im->lowers; p && *p; p++)
                free(*p);
        free(im->lowers);
        *im = (native_image){0};
}

int native_image_resolve(native *n, const char *ref, native_image *ret, cm_err *err) {
        img_store *s;

        *ret = (native_image){0};
        if (native_store(n, &s, err) < 0 || img_resolve(s, ref, &ret->e, err) < 0)
                return -1;
        if (ret->e.n_layers == 0) {
                native_image_clear(ret);
                return cm_err_set(err, EINVAL, "image \"%s\" has no layers: nothing to run", ref);
        }
        if (img_config_load(s, &ret->e, &ret->cfg, err) < 0) {
                native_image_clear(ret);
                return -1;
        }
        /* overlayfs wants the top layer first */
        ret->lowers = xcalloc(ret->e.n_layers + 1, sizeof *ret->lowers);
        for (size_t i = 0; i < ret->e.n_layers; i++)
                ret->lowers[i] = img_layer_path(s, ret->e.layers[ret->e.n_layers - 1 - i]);
        return 0;
}

int native_image_copy(native *n, const native_image *im, const char *dst, cm_err *err) {
        img_store *s;
        img_owner own = native_image_owner(n);
        const char *slash = strrchr(dst, '/');
        cleanup_free char *parent = xstrndup(dst, (size_t)(slash - dst));

        if (native_store(n, &s, err) < 0)
                return -1;
        if (strstr(parent, "/scratch/srv-")) {
                cleanup_free char *scratch = xstrndup(parent, (size_t)(strrchr(parent, '/') - parent));
                (void)mkdir(scratch, 0700);
                (void)mkdir(parent, 0700);
        }
        if (img_apply_layers(s, &im->e, dst, &own, NULL, err) < 0) {
                rootfs_remove(dst);
                cm_err_prefix(err, "copying the image's layers for the container's root (overlayfs is not in use)");
                return -1;
        }
        return 0;
}

/* ---- the image's user ----------------------------------------------------------- */

/* The image's own file (etc/passwd, etc/group): the top layer that has
 * it, unless a whiteout above hid it; read beneath the layer, no symlink
 * followed.  NULL: none. */
static char *image_file(const native_image *im, const char *rel) {
        for (char **l = im->lowers; l && *l; l++) {
                cleanup_close int dir = open(*l, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd = -1;
                struct stat st;
                char *buf;
                ssize_t got;
                if (dir < 0)
                        continue;
                fd = img_open_beneath(dir, rel, O_RDONLY | O_NONBLOCK);
                if (fd < 0 || fstat(fd, &st) < 0)
                        continue;
                if (!S_ISREG(st.st_mode) || st.st_size > (1 << 20))
                        return NULL; /* a whiteout, or not a file we read */
                buf = xmalloc((size_t)st.st_size + 1);
                got = read(fd, buf, (size_t)st.st_size);
                buf[got > 0 ? got : 0] = 0;
                return buf;
        }
        return NULL;
}

static bool number(const char *s, unsigned *ret) {
        char *end;
        unsigned long v;
        if (!*s || strspn(s, "0123456789") != strlen(s))
                return false;
        v = strtoul(s, &end, 10);
        *ret = (unsigned)v;
        return v < USERNS_SIZE;
}

/* name's line in a passwd or group file: field 2 (the id) and, for
 * passwd, field 3 (the primary group). */
static bool lookup(const char *text, const char *name, unsigned *ret_id, unsigned *ret_gid) {
        size_t len = strlen(name);
        for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                unsigned id = 0, gid = 0;
                if (strncmp(line, name, len) != 0 || line[len] != ':')
                        continue;
                if (sscanf(line + len, ":%*[^:]:%u:%u", &id, &gid) < 1 || id >= USERNS_SIZE)
                        return false;
                *ret_id = id;
                if (ret_gid)
                        *ret_gid = gid < USERNS_SIZE ? gid : 0;
                return true;
        }
        return false;
}

int native_image_user(const native_image *im, uid_t *ret_uid, gid_t *ret_gid, cm_err *err) {
        cleanup_free char *spec = xstrdup(im->cfg.user), *passwd = NULL, *group = NULL;
        char *colon = strchr(spec, ':');
        const char *grp = colon ? colon + 1 : NULL;
        unsigned uid = 0, gid = 0;

        if (colon)
                *colon = 0;
        if (!number(spec, &uid)) {
                passwd = image_file(im, "etc/passwd");
                if (!passwd || !lookup(passwd, spec, &uid, &gid))
                        return cm_err_set(err, ENOENT,
                                          "the image's User \"%s\" is not in its /etc/passwd (or has an id past %u); "
                                          "fix the image, or run a command that does not need it",
                                          im->cfg.user, USERNS_SIZE - 1);
        } else if (!grp) {
                /* a bare uid: its group from passwd when the image names it */
                passwd = image_file(im, "etc/passwd");
                gid = uid;
                if (passwd) {
                        char key[16];
                        (void)snprintf(key, sizeof key, ":%u:", uid);
                        for (const char *line = passwd; line && *line;
                             line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                                const char *x = strchr(line, ':');
                                unsigned u, g;
                                if (x && sscanf(x, ":%*[^:]:%u:%u", &u, &g) == 2 && u == uid && g < USERNS_SIZE) {
                                        gid = g;
                                        break;
                                }
                        }
                }
        }
        if (grp && grp[0] && !number(grp, &gid)) {
                group = image_file(im, "etc/group");
                if (!group || !lookup(group, grp, &gid, NULL))
                        return cm_err_set(err, ENOENT, "the image's User \"%s\": group \"%s\" is not in its /etc/group",
                                          im->cfg.user, grp);
        }
        *ret_uid = (uid_t)uid;
        *ret_gid = (gid_t)gid;
        return 0;
}
