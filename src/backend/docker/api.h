/* The Docker Engine API client: one HTTP exchange per call, through libcurl,
 * over a Unix socket or TCP (with TLS), each with a deadline.
 *
 * Where the engine is: CONTAINER_MCP_DOCKER_HOST or DOCKER_HOST (unix://PATH
 * or tcp://HOST:PORT; TLS with DOCKER_TLS_VERIFY or DOCKER_CERT_PATH, whose
 * ca.pem, cert.pem and key.pem are used, the peer always verified), else the
 * first socket of /var/run/docker.sock, /run/podman/podman.sock,
 * $XDG_RUNTIME_DIR/podman/podman.sock.  Paths get the negotiated /v1.NN
 * prefix.  Errors of the engine become messages that say what to do. */
#ifndef CM_DOCKER_API_H
#define CM_DOCKER_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend/backend.h"

#define DK_API_MIN_MINOR 41 /* 1.41: Docker 20.10, Podman 3's compat API */
#define DK_API_MAX_MINOR 45

typedef struct dk_api {
        char *socket;   /* unix socket path, or NULL for TCP */
        char *base;     /* "http://d" for a socket, "http(s)://host:port" */
        char *where;    /* how messages name the engine */
        char *cert_dir; /* TLS: ca.pem, cert.pem, key.pem; NULL: no TLS */
        char *problem;  /* why the settings cannot be used; NULL when they can */
        int minor;      /* negotiated 1.minor; 0 before negotiation */
        bool podman;
        char version[96];
        int64_t timeout_ms; /* of every exchange that is not a stream */
} dk_api;

/* Read the settings (never fails: a problem is kept for status()). */
void dk_api_init(dk_api *a);
void dk_api_free(dk_api *a);

/* GET /version, once: the engine's name and version, the API version. */
int dk_api_negotiate(dk_api *a, cm_err *err);

typedef size_t (*dk_write_fn)(char *p, size_t size, size_t n, void *arg);

typedef struct dk_req {
        const char *method;
        const char *path;       /* below the version prefix, query included */
        const json_t *json;     /* the body, or NULL */
        int64_t timeout_ms;     /* 0: the api's; < 0: none (a stream) */
        const cm_cancel *cancel;
        dk_write_fn write;      /* NULL: collect the body (capped) */
        void *write_arg;
        dk_write_fn read;       /* an upload body (a tar), or NULL */
        void *read_arg;
        const char *content_type;
        const char *want_header; /* keep this response header's value */
} dk_req;

typedef struct dk_resp {
        long status;
        char *body; /* collected when req.write is NULL; NUL-terminated */
        size_t len;
        bool cancelled;
        bool timed_out;
        char *header; /* req.want_header's value, or NULL */
} dk_resp;

void dk_resp_clear(dk_resp *r);

/* One exchange.  < 0 only when there was none (the engine unreachable,
 * dead or hung, the call cancelled); an HTTP error is a status in *ret. */
int dk_request(dk_api *a, const dk_req *req, dk_resp *ret, cm_err *err);

/* An exchange of JSON: 2xx gives the parsed body (NULL when empty) in
 * *ret (may be NULL); anything else becomes an error (dk_engine_error). */
int dk_call(dk_api *a, const char *method, const char *path, const json_t *body, json_t **ret, cm_err *err);

/* Turn an engine's error answer into a message: `what` says what we asked
 * ("create container", "start container abc"); -ENOENT for 404. */
int dk_engine_error(const dk_api *a, long status, const char *body, const char *what, cm_err *err);

/* Standard base64 (owned, NUL-terminated; NULL when invalid). */
char *dk_base64_decode(const char *s, size_t *ret_len);

/* Percent-encode for a query or a path segment (owned). */
char *dk_escape(const char *s);

/* The engine's multiplexed stream (exec and logs without a TTY): 8-byte
 * headers [stream, 0, 0, 0, size32be] before each frame. */
typedef struct dk_demux {
        unsigned char hdr[8];
        size_t hdr_len;
        size_t left;  /* bytes of the current frame still to come */
        int stream;   /* 1 stdout, 2 stderr */
        void (*emit)(int stream, const char *p, size_t n, void *arg);
        void *arg;
} dk_demux;

void dk_demux_feed(dk_demux *d, const char *p, size_t n);

#endif

/* A hijacked exchange (exec start): the request sent and the response head
 * read, then raw bytes both ways on the connection.  fd is for poll(2). */
typedef struct dk_conn {
        void *curl;
        int fd;
        bool tls;
        char *pending; /* stream bytes read with the head */
        size_t pending_len;
} dk_conn;

int dk_hijack(dk_api *a, const char *path, const json_t *body, dk_conn *ret, cm_err *err);
/* Non-blocking: bytes sent (0 when the socket is full), < 0 on error. */
ssize_t dk_conn_send(dk_conn *c, const char *p, size_t n);
/* Non-blocking: bytes read, 0 at the end, -EAGAIN when none yet. */
ssize_t dk_conn_recv(dk_conn *c, char *p, size_t n);
/* End of stdin: the engine closes the process's stdin (not over TLS,
 * which has no half-close). */
void dk_conn_close_write(dk_conn *c);
void dk_conn_close(dk_conn *c);
