/* What the docker backend's files share. */
#ifndef CM_DOCKER_INTERNAL_H
#define CM_DOCKER_INTERNAL_H

#include <pthread.h>
#include <sys/types.h>

#include "backend/backend.h"
#include "backend/docker/api.h"

/* The label that ties a container to the server that made it
 * (host/boot id/pid/start time), for reaping a crashed server's orphans. */
#define DK_LABEL_SERVER "dev.container-mcp.server"
#define DK_LABEL_MANAGED "dev.container-mcp.managed"

typedef struct docker {
        cm_backend base;
        dk_api api;
        char server_tag[256];
        pthread_mutex_t lock; /* engine facts below, and reaping once */
        bool checked;         /* the engine's isolation was looked at */
        bool userns;          /* containers get a user namespace */
        bool rootless;
        bool reaped;
} docker;

static inline docker *dk_of(cm_backend *b) { return (docker *)b; }

/* docker.c: the start time of a process (clock ticks since boot), 0 when
 * there is none. */
unsigned long long dk_proc_start(pid_t pid);

/* run.c */
int dk_run(cm_backend *b, const cm_run_spec *spec, char **ret_id, cm_err *err);
int dk_run_wait(cm_backend *b, const cm_run_spec *spec, const cm_cancel *cancel, cm_exec_result *ret, cm_err *err);
/* Whether containers on this engine get a user namespace; refuses when they
 * would not (root in them would be root on the host). */
int dk_check_isolation(docker *d, cm_err *err);

/* exec.c */
int dk_exec(cm_backend *b, const char *id, const cm_exec_spec *spec, const cm_cancel *cancel, cm_exec_result *ret,
            cm_err *err);

/* files.c */
int dk_file_read(cm_backend *b, const char *id, const char *path, uint64_t max_bytes, cm_file_data *ret,
                 cm_err *err);
int dk_file_write(cm_backend *b, const char *id, const char *path, const char *data, size_t len, cm_err *err);
int dk_file_list(cm_backend *b, const char *id, const char *path, const cm_file_query *q, cm_file_entry **ret,
                 size_t *ret_n, cm_err *err);
int dk_file_delete(cm_backend *b, const char *id, const char *path, cm_err *err);
int dk_file_move(cm_backend *b, const char *id, const char *src, const char *dst, cm_err *err);

/* archive.c */
int dk_copy_in(cm_backend *b, const char *id, const cm_host_path *src, const char *container_path,
               cm_copy_stats *ret, cm_err *err);
int dk_copy_out(cm_backend *b, const char *id, const char *container_path, const cm_host_path *dst,
                cm_copy_stats *ret, cm_err *err);

/* manage.c */
int dk_list(cm_backend *b, bool all, cm_container_info **ret, size_t *ret_n, cm_err *err);
int dk_find(cm_backend *b, const char *ref, cm_container_info *ret, cm_err *err);
int dk_inspect(cm_backend *b, const char *id, char **ret_json, cm_err *err);
int dk_isolation(cm_backend *b, const char *id, char **ret_json, cm_err *err);
int dk_logs(cm_backend *b, const char *id, size_t tail, int64_t since_ms, char **ret, size_t *ret_len, cm_err *err);
int dk_stats(cm_backend *b, const char *id, cm_stats *ret, cm_err *err);
int dk_stop(cm_backend *b, const char *id, int grace_sec, cm_err *err);
int dk_remove(cm_backend *b, const char *id, bool force, cm_err *err);
/* Remove managed containers whose server (DK_LABEL_SERVER) is gone. */
void dk_reap_orphans(docker *d);

/* images.c */
int dk_image_list(cm_backend *b, cm_image_info **ret, size_t *ret_n, cm_err *err);
int dk_image_pull(cm_backend *b, const cm_pull_spec *spec, const cm_cancel *cancel, cm_image_info *ret,
                  cm_err *err);
int dk_image_build(cm_backend *b, const cm_build_spec *spec, const cm_cancel *cancel, cm_image_info *ret,
                   cm_err *err);
int dk_image_remove(cm_backend *b, const char *ref, bool force, cm_err *err);
int dk_image_prune(cm_backend *b, bool all, cm_prune_result *ret, cm_err *err);
/* The parsers of a pull's, a build's or a load's stream, on bytes given in
 * pieces of `chunk` (for tests/fuzz/fuzz_docker_stream.c): the stream's
 * error and the id it named (owned, or NULL); < 0 when a line passed the
 * cap. */
enum dk_stream_kind { DK_STREAM_PULL, DK_STREAM_BUILD, DK_STREAM_LOAD };
int dk_image_stream_parse(enum dk_stream_kind kind, const char *p, size_t n, size_t chunk, char **ret_error,
                          char **ret_id);

/* Output kept up to a cap per stream (exec, run_wait, logs). */
typedef struct dk_out {
        char *buf[3]; /* [1] stdout, [2] stderr */
        size_t len[3];
        size_t cap;
        bool truncated;
} dk_out;

void dk_out_emit(int stream, const char *p, size_t n, void *arg);
/* Move the buffers into an exec result (NUL-terminated, never NULL). */
void dk_out_to_result(dk_out *o, cm_exec_result *r);
/* The logs of a container, demultiplexed, into o. */
int dk_fetch_logs(docker *d, const char *id, const char *query, dk_out *o, cm_err *err);

#endif
