/* Configuration: flags > environment > env-file > defaults.
 *
 * Every relaxation of the safe defaults is an explicit setting here; the
 * names are the seeds' own, with the CONTAINER_MCP_ prefix. */
#ifndef CM_CONFIG_H
#define CM_CONFIG_H

#include <stdbool.h>
#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

typedef struct cm_config {
        char **toolsets;          /* enabled families, NULL-terminated */
        unsigned page_size;       /* tools/list page size */
        size_t max_message_bytes; /* largest accepted message */
        char *token;              /* HTTP bearer token, or NULL */
        char **allowed_hosts;     /* extra Host/Origin names, NULL-terminated */
        char **allowed_mounts;    /* canonical host paths, NULL-terminated */
        char *scratch_dir;        /* private scratch dir (in allowed_mounts by default) */
        char *state_dir;
        char *agent_name;
        char *backend;            /* NULL: pick the first available */
        bool readonly;
        bool allow_network;
        bool allow_unmanaged;
        double default_cpus;
        int64_t default_memory;   /* bytes */
        int64_t timeout_ms;
        unsigned max_containers;
        char **image_dirs;        /* canonical roots of directory images, NULL-terminated */
        char *state_real;         /* the state dir, canonical (created at load) */
        unsigned min_host_port;   /* lowest host port a sandbox may publish */
        /* Sessions (issue 7): by default a session sees only its own
         * containers and these, by name or id; share_containers turns the
         * ownership check off for every session of the server. */
        bool share_containers;     /* CONTAINER_MCP_SHARE_CONTAINERS */
        char **shared_containers;  /* CONTAINER_MCP_SHARED_CONTAINERS, NULL-terminated */
        /* Ceilings on what a run may ask for (default: the host's). */
        int64_t max_memory;        /* bytes, CONTAINER_MCP_MAX_MEMORY */
        double max_cpus;           /* CONTAINER_MCP_MAX_CPUS */
        unsigned http_timeout_sec;        /* idle or stalled HTTP connections closed after this */
        unsigned http_max_connections;    /* HTTP connections at once, per listener */
        unsigned http_client_connections; /* HTTP connections at once from one address */
        char **allowed_origins;    /* CONTAINER_MCP_ALLOWED_ORIGINS: CORS origins, NULL-terminated */
        /* HTTP sessions and long calls (issue 8, points 1, 2, 6). */
        unsigned http_max_sessions;       /* CONTAINER_MCP_HTTP_MAX_SESSIONS */
        unsigned http_credential_sessions;/* CONTAINER_MCP_HTTP_CREDENTIAL_SESSIONS */
        unsigned http_session_idle_sec;   /* CONTAINER_MCP_HTTP_SESSION_IDLE */
        unsigned http_init_grace_sec;     /* CONTAINER_MCP_HTTP_INIT_GRACE */
        unsigned http_stream_after_ms;    /* CONTAINER_MCP_HTTP_STREAM_AFTER_MS */
        unsigned http_keepalive_ms;       /* CONTAINER_MCP_HTTP_KEEPALIVE_MS */
        unsigned http_replay_sec;         /* CONTAINER_MCP_HTTP_REPLAY_SEC */
        unsigned http_threads;            /* CONTAINER_MCP_HTTP_THREADS: pool threads per listener; 0: auto */
        /* The session sandbox and its tools (issue 10). */
        char *sandbox_image;              /* CONTAINER_MCP_SANDBOX_IMAGE, default "host" */
        unsigned sandbox_ttl_sec;         /* CONTAINER_MCP_SANDBOX_TTL: idle seconds; 0: the session's life */
        unsigned command_timeout_sec;     /* CONTAINER_MCP_COMMAND_TIMEOUT_DEFAULT */
        unsigned command_timeout_max_sec; /* CONTAINER_MCP_COMMAND_TIMEOUT_MAX */
        int64_t python_memory;            /* CONTAINER_MCP_PYTHON_MEMORY, bytes */
        /* The file tools (issue 10). */
        unsigned file_max_size_mb;        /* CONTAINER_MCP_FILE_MAX_SIZE_MB: caps reads and writes */
        char **file_allowed_extensions;   /* CONTAINER_MCP_FILE_ALLOWED_EXTENSIONS: lower case, no dot,
                                             NULL-terminated; NULL: every name */
        /* CONTAINER_MCP_ALLOWED_COMMANDS (issue 10): the command names
         * system_run_command lines may use (cm_cmdline_allowed), each checked
         * by cm_cmdline_name_ok; NULL-terminated, NULL when unset (no
         * restriction). */
        char **allowed_commands;
        size_t n_allowed_commands;
        /* The codex tools (issue 11): existing containers dexec, dpatch and
         * dinspect may touch, managed or not (--allow-container,
         * CONTAINER_MCP_ALLOWED_CONTAINERS: ids or names), NULL-terminated. */
        char **allowed_containers;
        /* CONTAINER_MCP_ALLOWED_REGISTRIES: the registries (host[:port]) an
         * agent's pull_image may use; empty: any but local addresses. */
        char **allowed_registries;
        /* dexec's run log (issue 11): the directory (canonical, created 0700
         * by cm_config_set_runlog_dir), the most output one record keeps,
         * and the size of the preview a result carries. */
        char *runlog_dir;          /* --runlog-dir, CONTAINER_MCP_RUNLOG_DIR; <state dir>/runlog */
        char *runlog_unusable;     /* why the default runlog_dir could not be made (it is then NULL) */
        int64_t runlog_max_bytes;  /* CONTAINER_MCP_RUNLOG_MAX_BYTES */
        int64_t runlog_max_total;  /* CONTAINER_MCP_RUNLOG_MAX_TOTAL: the directory's files together */
        unsigned dexec_preview_bytes; /* CONTAINER_MCP_DEXEC_PREVIEW_BYTES */
        /* Images (issue 13): the most a pulled layer, and a whole image, may
         * be (CONTAINER_MCP_IMAGE_MAX_SIZE, bytes; default 8g). */
        int64_t image_max_size;
} cm_config;

/* The tool families, in the order tools/list shows them. */
extern const char *const cm_all_toolsets[];
/* The families on when CONTAINER_MCP_TOOLSETS is not set. */
extern const char *const cm_default_toolsets[];

/* Defaults, then an env-file (when env_file is non-NULL; it never overrides
 * the environment), then the environment. */
int cm_config_load(cm_config *cfg, const char *env_file, cm_err *err);
void cm_config_free(cm_config *cfg);
/* The state dir the environment names (CONTAINER_MCP_STATE_DIR, else the
 * XDG/root default), without loading the rest: where the daemon's socket is
 * looked for.  Caller frees. */
char *cm_config_default_state_dir(void);
/* mkdir -p: the missing parents 0755, `path` itself `mode` (as the state
 * dir is made at load). */
void cm_mkdir_p(const char *path, mode_t mode);

/* Setters used by command-line flags (highest precedence). */
int cm_config_set_toolsets(cm_config *cfg, const char *list, cm_err *err);
void cm_config_add_host(cm_config *cfg, const char *host);
void cm_config_add_origin(cm_config *cfg, const char *origin);
void cm_config_add_container(cm_config *cfg, const char *ref);
/* An allowlist entry (--allow-container, CONTAINER_MCP_ALLOWED_CONTAINERS)
 * that can name a container: a Docker name or id. */
bool cm_config_container_ref_ok(const char *ref);
/* The run log's directory: created when missing (0700, parents too),
 * refused when it is not a directory of ours that only we may write;
 * stored canonical.  `setting` names where the value came from, for the
 * message. */
int cm_config_set_runlog_dir(cm_config *cfg, const char *dir, const char *setting, cm_err *err);

bool cm_toolset_enabled(const cm_config *cfg, const char *family);

/* "512m", "2g", "1.5G", "1048576" -> bytes.  Digits, an optional
 * fraction, an optional k/m/g/t unit (b or ib may follow); -ERANGE when the
 * value does not fit an int64_t, -EINVAL for anything else. */
int cm_parse_size(const char *s, int64_t *ret);
/* A size for people: "23.5g", "512m", "1000" (bytes below 1k). */
void cm_format_size(int64_t bytes, char ret[32]);
/* The host's physical memory in bytes and online cores (the default
 * ceilings). */
int64_t cm_host_memory(void);
double cm_host_cpus(void);
/* 1/true/yes/on and 0/false/no/off, any case. */
int cm_parse_bool(const char *s, bool *ret);

/* Join a NULL-terminated list with `sep` (caller frees). */
char *cm_strv_join(char *const *v, const char *sep);
void cm_strv_free(char **v);

#endif
