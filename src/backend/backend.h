/* The one interface every container engine implements (DESIGN §3).
 *
 * A backend is a table of functions over plain C structs.  It knows nothing of
 * MCP: tools validate and apply policy, then call these.  Every fallible
 * operation returns < 0 and fills `err` with a message an agent can act on.
 * Operations that may take long take a `cm_cancel` so a cancelled tools/call
 * stops them. */
#ifndef CM_BACKEND_H
#define CM_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/copy.h"
#include "util/err.h"

/* Cancellation seen from below the MCP layer: an fd that turns readable when
 * the caller gives up (-1: never). */
typedef struct cm_cancel {
        int fd;
} cm_cancel;

bool cm_cancelled(const cm_cancel *c);

typedef struct cm_kv {
        const char *key;
        const char *value;
} cm_kv;

typedef struct cm_mount {
        const char *source; /* host path, canonicalised and allowed by policy */
        const char *target; /* absolute path in the container */
        bool readonly;
} cm_mount;

typedef struct cm_port {
        uint16_t host_port; /* on 127.0.0.1; 0 = pick one */
        uint16_t container_port;
        const char *protocol; /* "tcp" or "udp" */
} cm_port;

typedef struct cm_run_spec {
        const char *image;
        const char *name;      /* NULL: generated */
        char *const *argv;     /* NULL: the image's default */
        size_t argc;
        const cm_kv *env;
        size_t n_env;
        const char *workdir;
        const cm_kv *labels;
        size_t n_labels;
        double cpus;           /* 0: no limit */
        int64_t memory_bytes;  /* 0: no limit */
        int64_t pids;          /* 0: no limit */
        int64_t tmpfs_bytes;   /* size of /tmp; 0: backend default */
        int64_t timeout_ms;    /* for wait; 0: none */
        bool network;
        const cm_port *ports;
        size_t n_ports;
        const cm_mount *mounts;
        size_t n_mounts;
        bool readonly_rootfs;
        size_t output_cap;     /* bytes per stream for wait/exec; 0: 1 MiB */
} cm_run_spec;

/* Watching an exec while it runs (optional; cm_exec_spec.watch).  `output`
 * gets each piece of output as the backend reads it (stream 1: stdout, 2:
 * stderr; the order of the calls is the order it was read), and, with
 * stream 0 and len 0, a tick whenever `every_ms` passed since the last
 * tick, output or not, so a caller can report progress while a command is
 * silent.  Called one call at a time, from the thread that called exec or
 * from one of the backend's own (the native one reads output in a thread
 * of its own), never after exec returns.  A backend that calls it keeps no output itself: the result's
 * out and err are then empty and output_cap does not apply (the watcher
 * has every byte and keeps what it wants).  A backend that cannot watch
 * ignores it and fills out and err as usual. */
typedef struct cm_exec_watch {
        void (*output)(void *arg, int stream, const char *data, size_t len);
        void *arg;
        int64_t every_ms; /* 0: no ticks */
} cm_exec_watch;

typedef struct cm_exec_spec {
        char *const *argv;
        size_t argc;
        const cm_kv *env;
        size_t n_env;
        const char *workdir;
        const char *stdin_data;
        size_t stdin_len;
        int64_t timeout_ms;
        size_t output_cap;
        /* Optional: a warm process to serve this exec instead of starting
         * argv afresh.  Backends without one (and the native one when it
         * cannot use it) run argv; the result must be the same either way. */
        const struct cm_exec_warm *warm;
        const cm_exec_watch *watch; /* NULL: none */
} cm_exec_spec;

/* A warm process kept in a container, one per container and key, started
 * with argv on the first exec that names it.  It takes one request per
 * exec: the working directory and `args`, with the exec's stdin, stdout
 * and stderr, on the protocol of src/backend/native/zygote.c.  Everything
 * that runs there holds what an exec holds and nothing more. */
typedef struct cm_exec_warm {
        const char *key;
        char *const *argv; /* NULL-terminated */
        char *const *args; /* NULL-terminated: this exec's request */
} cm_exec_warm;

/* Result of run-to-completion and exec. */
typedef struct cm_exec_result {
        int exit_code;       /* 128+signal when killed by a signal */
        char *out;           /* owned, NUL-terminated */
        size_t out_len;
        char *err;
        size_t err_len;
        bool truncated;      /* some output was cut at the cap */
        bool timed_out;
        int64_t duration_ms;
} cm_exec_result;

void cm_exec_result_clear(cm_exec_result *r);

typedef struct cm_container_info {
        char *id;
        char *name;
        char *image;
        char *state;        /* created | running | exited | dead */
        int exit_code;
        int64_t created_at; /* unix seconds */
        cm_kv *labels;      /* owned strings */
        size_t n_labels;
} cm_container_info;

void cm_container_info_clear(cm_container_info *c);

typedef struct cm_stats {
        uint64_t cpu_usec;
        uint64_t memory_bytes;
        uint64_t memory_peak_bytes;
        uint64_t memory_limit_bytes;
        uint64_t pids;
        uint64_t io_read_bytes;
        uint64_t io_write_bytes;
        const char *source; /* static: where the figures come from ("cgroup v2", "/proc", ...) */
} cm_stats;

/* A host path that policy allowed: its allowed root (canonical) and the
 * path below it ("" for the root itself).  Backends open `root` and resolve
 * `rel` beneath it, so a symlink swapped in after the check cannot escape. */
typedef struct cm_host_path {
        const char *root;
        const char *rel;
} cm_host_path;

/* A file or directory in a container, as the file tools report it. */
typedef struct cm_file_entry {
        char *name;        /* the last component */
        char *path;        /* absolute, in the container */
        bool is_directory;
        uint64_t size;     /* bytes; 0 for a directory */
        double modified;   /* unix seconds, with the fraction */
} cm_file_entry;

void cm_file_entries_free(cm_file_entry *v, size_t n);

/* What file_read returns: the bytes (owned, NUL-terminated for
 * convenience) and the file's size and mtime. */
typedef struct cm_file_data {
        char *data;
        size_t len;
        uint64_t size;
        double modified;
} cm_file_data;

void cm_file_data_clear(cm_file_data *d);

/* file_list: what to list below `path`. */
typedef struct cm_file_query {
        const char *pattern; /* fnmatch(3) glob on each entry's name; NULL: all */
        bool recursive;
        size_t max_entries;  /* more is an error (E2BIG) that says so */
} cm_file_query;

/* Images (issue 13): what list_images, pull_image and build_image report. */
typedef struct cm_image_info {
        char *id;        /* "sha256:<hex>" of the image's config */
        char **names;    /* full references ("docker.io/library/busybox:latest"), owned */
        size_t n_names;
        char *digest;    /* "sha256:<hex>" of the manifest, or NULL */
        uint64_t size;   /* bytes on disk (unpacked), as the engine counts them */
        int64_t created; /* unix seconds; 0: unknown */
        bool in_use;     /* a container uses it */
} cm_image_info;

void cm_image_info_clear(cm_image_info *i);
void cm_image_infos_free(cm_image_info *v, size_t n);

/* Progress of a pull or a build, for MCP progress notifications: `what`
 * names the layer or step ("sha256:ab12… 3/5", "step 2/7: RUN make"),
 * done/total in bytes for a download (total 0: unknown) or in steps.  May
 * be called from any thread of the backend, one call at a time, never
 * after the operation returns. */
typedef struct cm_image_progress {
        void (*fn)(void *arg, const char *what, uint64_t done, uint64_t total);
        void *arg;
} cm_image_progress;

typedef struct cm_pull_spec {
        const char *ref;            /* a reference as Docker parses it */
        const char *platform;       /* "os/arch[/variant]"; NULL: the host's */
        const cm_host_path *import; /* instead of a registry: an archive or OCI layout; ref is then the name (optional) */
        const cm_image_progress *progress; /* NULL: none */
        /* An agent's pull: the registries that may be reached at a local
         * address (cm_policy_named_registries); NULL: the operator's own
         * pull, unguarded.  The native runtime checks every connection;
         * an engine pulls on its own. */
        const char *local_ok;
} cm_pull_spec;

typedef struct cm_build_spec {
        const cm_host_path *context; /* allowed by policy */
        const char *dockerfile;      /* relative to the context; NULL: "Dockerfile" */
        const char *tag;             /* NULL: untagged */
        const cm_kv *build_args;
        size_t n_build_args;
        const cm_image_progress *progress;
        /* A FROM (or COPY --from) image a native build does not have is
         * pulled when this says the registry is allowed (0; else -1 with
         * err); NULL: never pulled. */
        int (*allow_pull)(void *arg, const char *ref, cm_err *err);
        void *allow_arg;
        const char *local_ok; /* of those pulls, as cm_pull_spec's */
        /* RUN steps of a native build: the server's defaults */
        double cpus;
        int64_t memory_bytes;
        int64_t pids;
} cm_build_spec;

/* A build's context directory, opened beneath its allowed root (no
 * symlink followed on the way): an fd, or -1. */
int cm_build_context_open(const cm_host_path *hp, cm_err *err);

typedef struct cm_prune_result {
        uint64_t reclaimed; /* bytes */
        size_t images;      /* images removed */
} cm_prune_result;

/* What status() reports about one backend. */
typedef struct cm_backend_status {
        bool available;
        char version[128];
        char reason[512];   /* why not available */
        char fix[512];      /* what to do about it */
        char details[1024]; /* JSON object text with capabilities, or "" */
} cm_backend_status;

typedef struct cm_backend cm_backend;

typedef struct cm_backend_ops {
        const char *name;
        /* Fill *ret; never fails: unavailability is a status, not an error. */
        void (*status)(cm_backend *b, cm_backend_status *ret);
        /* Create and start; *ret_id is owned by the caller. */
        int (*run)(cm_backend *b, const cm_run_spec *spec, char **ret_id, cm_err *err);
        /* Create, start, wait for exit, collect output, remove. */
        int (*run_wait)(cm_backend *b, const cm_run_spec *spec, const cm_cancel *cancel, cm_exec_result *ret,
                        cm_err *err);
        int (*exec)(cm_backend *b, const char *id, const cm_exec_spec *spec, const cm_cancel *cancel,
                    cm_exec_result *ret, cm_err *err);
        int (*list)(cm_backend *b, bool all, cm_container_info **ret, size_t *ret_n, cm_err *err);
        /* One container by id or name, without listing them all (optional:
         * tools fall back to list).  -ENOENT when there is none. */
        int (*find)(cm_backend *b, const char *ref, cm_container_info *ret, cm_err *err);
        int (*inspect)(cm_backend *b, const char *id, char **ret_json, cm_err *err);
        /* dinspect's compact view of what a process in the container may do
         * (the fields of src/tools/defs/dinspect.json), read from the kernel
         * where the backend can; an engine's from its inspect document
         * through cm_dinspect_docker (backend/dinspect_docker.h).
         * Optional: without it dinspect maps what `inspect` returns when
         * that is the Engine API's own JSON. */
        int (*isolation)(cm_backend *b, const char *id, char **ret_json, cm_err *err);
        /* tail: the last N lines (0: all); since_ms: only what was written
         * from then on (unix ms, 0: all), to the second */
        int (*logs)(cm_backend *b, const char *id, size_t tail, int64_t since_ms, char **ret, size_t *ret_len,
                    cm_err *err);
        int (*stats)(cm_backend *b, const char *id, cm_stats *ret, cm_err *err);
        int (*stop)(cm_backend *b, const char *id, int grace_sec, cm_err *err);
        int (*remove)(cm_backend *b, const char *id, bool force, cm_err *err);
        /* Copy a file or tree, like `docker cp`: onto an existing directory
         * it lands inside it, else it takes the destination's name.
         * Container paths resolve inside the container's root. */
        int (*copy_in)(cm_backend *b, const char *id, const cm_host_path *src, const char *container_path,
                       cm_copy_stats *ret, cm_err *err);
        int (*copy_out)(cm_backend *b, const char *id, const char *container_path, const cm_host_path *dst,
                        cm_copy_stats *ret, cm_err *err);
        /* The file tools (issue 10).  `path` is absolute in the container and
         * resolves inside its root: `..` and symlinks cannot leave it, and
         * pseudo-filesystems (/proc, /sys, ...) are refused.  What is written
         * belongs to the sandbox's root, never the server's user.
         *
         * file_read: a regular file (a final symlink is followed, inside the
         * root); more than max_bytes is an error (EFBIG) that gives the
         * size, nothing read. */
        int (*file_read)(cm_backend *b, const char *id, const char *path, uint64_t max_bytes, cm_file_data *ret,
                         cm_err *err);
        /* Atomic: a temporary file in the same directory, then rename, so a
         * reader sees the old file or the new one.  The new file keeps the
         * mode of the one it replaces (0644 otherwise); missing parent
         * directories are created (0755).  A symlink at `path` is replaced,
         * not written through. */
        int (*file_write)(cm_backend *b, const char *id, const char *path, const char *data, size_t len,
                          cm_err *err);
        /* The entries of directory `path` (or of its whole tree), sorted by
         * path; symlinks are listed, never followed. */
        int (*file_list)(cm_backend *b, const char *id, const char *path, const cm_file_query *q,
                         cm_file_entry **ret, size_t *ret_n, cm_err *err);
        /* A file, a symlink or an empty directory. */
        int (*file_delete)(cm_backend *b, const char *id, const char *path, cm_err *err);
        /* rename(2) inside the container; onto an existing directory the
         * source moves inside it.  Across file systems: EXDEV. */
        int (*file_move)(cm_backend *b, const char *id, const char *src, const char *dst, cm_err *err);
        /* The image tools (optional: a backend without them says so).
         * image_remove refuses (EBUSY) an image a container uses unless
         * `force`; image_prune removes images no container uses and no name
         * points to (all unused ones with `all`), and their unshared layers. */
        int (*image_list)(cm_backend *b, cm_image_info **ret, size_t *ret_n, cm_err *err);
        int (*image_pull)(cm_backend *b, const cm_pull_spec *spec, const cm_cancel *cancel, cm_image_info *ret,
                          cm_err *err);
        int (*image_build)(cm_backend *b, const cm_build_spec *spec, const cm_cancel *cancel, cm_image_info *ret,
                           cm_err *err);
        int (*image_remove)(cm_backend *b, const char *ref, bool force, cm_err *err);
        int (*image_prune)(cm_backend *b, bool all, cm_prune_result *ret, cm_err *err);
        /* Start the engine's system service when it is stopped (optional:
         * Apple's `container system start`, for system_status's `start`).
         * *ret_started: it was stopped and is now started. */
        int (*service_start)(cm_backend *b, bool *ret_started, cm_err *err);
        void (*free)(cm_backend *b);
} cm_backend_ops;

struct cm_backend {
        const cm_backend_ops *ops;
        void *priv;
};

/* The registry: every backend compiled in, in order of preference. */
typedef struct cm_backend_entry {
        const char *name;
        const char *summary;
        /* Build the backend; never fails (an unavailable engine reports so in
         * status()). */
        cm_backend *(*open)(void);
        /* Used only when chosen (--backend, CONTAINER_MCP_BACKEND), never as
         * the first available: the apple backend off macOS. */
        bool only_when_chosen;
} cm_backend_entry;

extern const cm_backend_entry *const cm_backends[];

const cm_backend_entry *cm_backend_find(const char *name);

#endif
