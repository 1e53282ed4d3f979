/* The Docker Engine API client (api.h). */
#include "backend/docker/api.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <strings.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "util/cleanup.h"
#include "util/clock.h"
#include "util/json.h"
#include "util/lazy.h"

#define DK_CONNECT_MS 5000L
#define DK_BODY_CAP (16u << 20) /* lists and inspect documents are far smaller */

static bool is_socket(const char *path) {
        struct stat st;
        return path && stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* HOST:PORT names a loopback address: exactly localhost, 127.x.y.z or
 * [::1] before the port ("localhost.example.com" is not). */
static bool loopback_host(const char *hostport) {
        size_t n = strcspn(hostport, ":");
        unsigned a, b, c, d;
        char tail;
        if (strncmp(hostport, "[::1]", 5) == 0)
                return hostport[5] == ':' || !hostport[5];
        if (n == 9 && strncmp(hostport, "localhost", 9) == 0)
                return true;
        cleanup_free char *host = xstrndup(hostport, n);
        return sscanf(host, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b < 256 && c < 256 && d < 256;
}

/* tcp://HOST:PORT: TLS when DOCKER_TLS_VERIFY or DOCKER_CERT_PATH is set,
 * the docker CLI's settings.  Plain HTTP only to a loopback address: the
 * engine's API is root on its machine, not to be sent across a network in
 * clear. */
static void init_tcp(dk_api *a, const char *var, const char *url) {
        const char *hostport = url + 6, *verify = getenv("DOCKER_TLS_VERIFY"), *certs = getenv("DOCKER_CERT_PATH");
        const char *home = getenv("HOME");
        bool tls = (verify && *verify) || (certs && *certs);

        a->where = xasprintf("%s", url);
        if (!*hostport || strchr(hostport, '/')) {
                a->problem = xasprintf("%s=%s is not tcp://HOST:PORT; set it to the engine's address", var, url);
                return;
        }
        if (tls) {
                a->cert_dir = certs && *certs ? xstrdup(certs) : xasprintf("%s/.docker", home ? home : "");
                a->base = xasprintf("https://%s", hostport);
        } else if (loopback_host(hostport)) {
                a->base = xasprintf("http://%s", hostport);
        } else {
                a->problem = xasprintf("%s=%s without TLS would send the engine's API (root on that machine) "
                                       "across the network in clear; set DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH "
                                       "(ca.pem, cert.pem, key.pem)",
                                       var, url);
        }
}

void dk_api_init(dk_api *a) {
        const char *var = "CONTAINER_MCP_DOCKER_HOST", *env = getenv(var);
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        cleanup_free char *user = xdg ? xasprintf("%s/podman/podman.sock", xdg) : NULL;
        const char *candidates[] = {"/var/run/docker.sock", "/run/podman/podman.sock", user};

        memset(a, 0, sizeof *a);
        a->timeout_ms = 30000;
        if (!env || !*env)
                env = getenv(var = "DOCKER_HOST");
        if (env && *env) {
                if (strncmp(env, "unix://", 7) == 0 && env[7] == '/')
                        a->socket = xstrdup(env + 7);
                else if (strncmp(env, "tcp://", 6) == 0)
                        return init_tcp(a, var, env);
                else
                        a->problem = xasprintf("%s=%s is neither unix:///PATH nor tcp://HOST:PORT; set one of those",
                                               var, env);
        }
        for (size_t i = 0; !a->socket && !a->problem && i < ARRAY_SIZE(candidates); i++)
                if (is_socket(candidates[i]))
                        a->socket = xstrdup(candidates[i]);
        if (a->socket) {
                a->base = xstrdup("http://d");
                a->where = xstrdup(a->socket);
        } else if (!a->problem) {
                a->problem = xstrdup("no Docker or Podman API socket found (DOCKER_HOST unset, and none of "
                                     "/var/run/docker.sock, /run/podman/podman.sock, "
                                     "$XDG_RUNTIME_DIR/podman/podman.sock exists)");
        }
}

void dk_api_free(dk_api *a) {
        free(a->socket);
        free(a->base);
        free(a->where);
        free(a->cert_dir);
        free(a->problem);
        memset(a, 0, sizeof *a);
}

void dk_resp_clear(dk_resp *r) {
        free(r->body);
        free(r->header);
        memset(r, 0, sizeof *r);
}

typedef struct collector {
        dk_resp *resp;
        bool over;
} collector;

static size_t collect(char *p, size_t size, size_t n, void *arg) {
        collector *c = arg;
        dk_resp *r = c->resp;
        size_t add = size * n;
        if (r->len + add > DK_BODY_CAP) {
                c->over = true;
                return 0;
        }
        r->body = xrealloc(r->body, r->len + add + 1);
        memcpy(r->body + r->len, p, add);
        r->len += add;
        r->body[r->len] = 0;
        return add;
}

typedef struct header_want {
        const char *name;
        dk_resp *resp;
} header_want;

static size_t on_header(char *p, size_t size, size_t n, void *arg) {
        header_want *h = arg;
        size_t len = size * n, k = strlen(h->name);
        if (len > k + 1 && strncasecmp(p, h->name, k) == 0 && p[k] == ':' && !h->resp->header) {
                const char *v = p + k + 1;
                size_t vlen = len - k - 1;
                while (vlen && (*v == ' ' || *v == '\t'))
                        v++, vlen--;
                while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' '))
                        vlen--;
                h->resp->header = xstrndup(v, vlen);
        }
        return len;
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
        (void)dt, (void)dn, (void)ut, (void)un;
        return cm_cancelled(arg) ? 1 : 0;
}

/* What libcurl's failure means for the person running the server. */
static int transport_error(const dk_api *a, const dk_req *req, CURLcode rc, long os_errno, cm_err *err) {
        const char *what = req->path;
        if (rc == CURLE_ABORTED_BY_CALLBACK)
                return cm_err_set(err, ECANCELED, "cancelled while the engine worked on %s %s", req->method, what);
        if (rc == CURLE_OPERATION_TIMEDOUT)
                return cm_err_set(err, ETIMEDOUT,
                                  "the engine at %s did not answer %s %s within %lld ms: it is hung or overloaded; "
                                  "check it (docker info) and restart it",
                                  a->where, req->method, what,
                                  (long long)(req->timeout_ms > 0 ? req->timeout_ms : a->timeout_ms));
        if (rc == CURLE_COULDNT_CONNECT && os_errno == EACCES)
                return cm_err_set(err, EACCES,
                                  "permission denied on %s: add the server's user to the docker group, or point "
                                  "DOCKER_HOST at rootless Podman's socket (unix://$XDG_RUNTIME_DIR/podman/"
                                  "podman.sock)",
                                  a->where);
        if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_SSL_CERTPROBLEM ||
            rc == CURLE_SSL_CACERT_BADFILE)
                return cm_err_set(err, EACCES,
                                  "TLS with the engine at %s failed (%s): DOCKER_CERT_PATH (%s) must hold ca.pem, the "
                                  "CA that signed the engine's certificate, and cert.pem and key.pem, a client "
                                  "certificate the engine trusts",
                                  a->where, curl_easy_strerror(rc), a->cert_dir ? a->cert_dir : "unset");
        if (rc == CURLE_COULDNT_CONNECT)
                return cm_err_set(err, ECONNREFUSED,
                                  "no engine answers at %s (%s): start it (dockerd, or `podman system service "
                                  "--time=0 unix://PATH`) or set DOCKER_HOST to where it listens",
                                  a->where, os_errno ? strerror((int)os_errno) : curl_easy_strerror(rc));
        return cm_err_set(err, EIO, "the engine at %s broke off %s %s (%s): is it still running? check it and retry",
                          a->where, req->method, what, curl_easy_strerror(rc));
}

static void set_tls(const dk_api *a, CURL *c) {
        cleanup_free char *ca = xasprintf("%s/ca.pem", a->cert_dir);
        cleanup_free char *cert = xasprintf("%s/cert.pem", a->cert_dir);
        cleanup_free char *key = xasprintf("%s/key.pem", a->cert_dir);
        /* libcurl copies string options */
        (void)curl_easy_setopt(c, CURLOPT_CAINFO, ca);
        (void)curl_easy_setopt(c, CURLOPT_SSLCERT, cert);
        (void)curl_easy_setopt(c, CURLOPT_SSLKEY, key);
        (void)curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
        (void)curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
}

static void set_options(const dk_api *a, CURL *c, const dk_req *req, const char *url, struct curl_slist *hdrs) {
        int64_t timeout = req->timeout_ms ? req->timeout_ms : a->timeout_ms;
        (void)curl_easy_setopt(c, CURLOPT_URL, url);
        if (a->socket)
                (void)curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, a->socket);
        if (a->cert_dir)
                set_tls(a, c);
        (void)curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
        (void)curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
        (void)curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        (void)curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, DK_CONNECT_MS);
        if (timeout > 0)
                (void)curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)timeout);
        if (req->cancel && req->cancel->fd >= 0) {
                (void)curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
                (void)curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
                (void)curl_easy_setopt(c, CURLOPT_XFERINFODATA, req->cancel);
        }
}

static int request_once(dk_api *a, const dk_req *req, dk_resp *ret, cm_err *err);

/* Podman now and then cannot remove a container that stopped a moment ago:
 * its cleanup process still holds the container's /dev/shm ("unlinkat
 * .../userdata/shm: device or resource busy", HTTP 500; seen in CI7 and
 * CI11, on container and on forced image removal).  A DELETE that gets that
 * answer is made again a few times, ~1.5 s in all, as one would run
 * `podman rm` again. */
int dk_request(dk_api *a, const dk_req *req, dk_resp *ret, cm_err *err) {
        for (unsigned ms = 50;; ms *= 2) {
                int r = request_once(a, req, ret, err);
                if (r < 0 || ret->status != 500 || strcmp(req->method, "DELETE") != 0 || !ret->body ||
                    !strstr(ret->body, "device or resource busy") || ms > 800)
                        return r;
                dk_resp_clear(ret);
                (void)usleep(ms * 1000);
        }
}

static int request_once(dk_api *a, const dk_req *req, dk_resp *ret, cm_err *err) {
        cleanup_free char *url = NULL, *body = NULL;
        struct curl_slist *hdrs = NULL;
        collector col = {ret, false};
        header_want hw = {req->want_header, ret};
        long os_errno = 0;
        CURLcode rc;
        CURL *c;

        memset(ret, 0, sizeof *ret);
        if (a->problem)
                return cm_err_set(err, ENOENT, "%s", a->problem);
        if (cm_curl_load(err) < 0)
                return -1;
        if (a->minor == 0 && strcmp(req->path, "/version") != 0 && dk_api_negotiate(a, err) < 0)
                return -1;
        if (a->minor)
                url = xasprintf("%s/v1.%d%s", a->base, a->minor, req->path);
        else
                url = xasprintf("%s%s", a->base, req->path);
        if (!(c = curl_easy_init()))
                return cm_err_set(err, ENOMEM, "libcurl failed to initialise");
        hdrs = curl_slist_append(hdrs, "Expect:"); /* no 100-continue round trip */
        if (req->json) {
                body = cm_json_dump(req->json);
                hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
                (void)curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        } else if (req->read) {
                cleanup_free char *ct = xasprintf("Content-Type: %s", req->content_type);
                hdrs = curl_slist_append(hdrs, ct);
                hdrs = curl_slist_append(hdrs, "Transfer-Encoding: chunked");
                (void)curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
                (void)curl_easy_setopt(c, CURLOPT_READFUNCTION, req->read);
                (void)curl_easy_setopt(c, CURLOPT_READDATA, req->read_arg);
        }
        set_options(a, c, req, url, hdrs);
        if (strcmp(req->method, "HEAD") == 0)
                (void)curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        if (req->want_header) {
                (void)curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
                (void)curl_easy_setopt(c, CURLOPT_HEADERDATA, &hw);
        }
        (void)curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, req->write ? req->write : collect);
        (void)curl_easy_setopt(c, CURLOPT_WRITEDATA, req->write ? req->write_arg : (void *)&col);
        rc = curl_easy_perform(c);
        (void)curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &ret->status);
        (void)curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &os_errno);
        curl_easy_cleanup(c);
        curl_slist_free_all(hdrs);
        if (col.over || (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && req->write && ret->status))) {
                /* no half answers to callers: only the flags stay */
                free(ret->body), free(ret->header);
                ret->body = ret->header = NULL;
                ret->len = 0;
        }
        if (col.over)
                return cm_err_set(err, EFBIG, "the engine's answer to %s %s passed %u MiB; refused", req->method,
                                  req->path, DK_BODY_CAP >> 20);
        /* A writer that stops the transfer on purpose (a cap) keeps what came. */
        if (rc == CURLE_WRITE_ERROR && req->write && ret->status)
                return 0;
        if (rc != CURLE_OK) {
                ret->cancelled = rc == CURLE_ABORTED_BY_CALLBACK;
                ret->timed_out = rc == CURLE_OPERATION_TIMEDOUT;
                return transport_error(a, req, rc, os_errno, err);
        }
        return 0;
}

int dk_engine_error(const dk_api *a, long status, const char *body, const char *what, cm_err *err) {
        cleanup_json json_t *j = body ? json_loads(body, 0, NULL) : NULL;
        const char *msg = cm_json_str(j, "message");
        int code = status == 404 ? ENOENT : status == 409 ? EEXIST : status == 401 || status == 403 ? EACCES : EIO;
        if (!msg)
                msg = body && *body ? body : "no message";
        cm_err_set(err, code, "the engine at %s refused to %s: %.600s (HTTP %ld)", a->where, what, msg, status);
        return -code;
}

int dk_call(dk_api *a, const char *method, const char *path, const json_t *body, json_t **ret, cm_err *err) {
        dk_req req = {.method = method, .path = path, .json = body};
        dk_resp resp;
        int r;
        if (dk_request(a, &req, &resp, err) < 0)
                return -1;
        if (resp.status < 200 || resp.status > 299) {
                cleanup_free char *what = xasprintf("answer %s %s", method, path);
                r = dk_engine_error(a, resp.status, resp.body, what, err);
                dk_resp_clear(&resp);
                return r;
        }
        if (ret)
                *ret = resp.len ? json_loadb(resp.body, resp.len, 0, NULL) : NULL;
        if (ret && resp.len && !*ret) {
                dk_resp_clear(&resp);
                return cm_err_set(err, EIO, "the engine at %s answered %s %s with something not JSON", a->where, method,
                                  path);
        }
        dk_resp_clear(&resp);
        return 0;
}

/* "1.41" -> 41; 0 when not 1.x */
static int api_minor(const char *v) {
        char *end;
        long m;
        if (!v || strncmp(v, "1.", 2) != 0)
                return 0;
        m = strtol(v + 2, &end, 10);
        return *end || m <= 0 || m > 1000 ? 0 : (int)m;
}

int dk_api_negotiate(dk_api *a, cm_err *err) {
        cleanup_json json_t *v = NULL;
        const json_t *comp;
        int minor;
        if (a->minor)
                return 0;
        if (dk_call(a, "GET", "/version", NULL, &v, err) < 0)
                return -1;
        minor = api_minor(cm_json_str(v, "ApiVersion"));
        if (minor < DK_API_MIN_MINOR)
                return cm_err_set(err, ENOTSUP,
                                  "the engine at %s speaks API %s; container-mcp needs 1.%d or later (Docker 20.10, "
                                  "Podman 3): upgrade the engine",
                                  a->where, cm_json_str(v, "ApiVersion") ? cm_json_str(v, "ApiVersion") : "?",
                                  DK_API_MIN_MINOR);
        comp = json_array_get(json_object_get(v, "Components"), 0);
        a->podman = cm_json_str(comp, "Name") && strstr(cm_json_str(comp, "Name"), "Podman");
        (void)snprintf(a->version, sizeof a->version, "%s %s (API 1.%d)", a->podman ? "Podman" : "Docker",
                       cm_json_str(v, "Version") ? cm_json_str(v, "Version") : "?",
                       minor > DK_API_MAX_MINOR ? DK_API_MAX_MINOR : minor);
        a->minor = minor > DK_API_MAX_MINOR ? DK_API_MAX_MINOR : minor;
        return 0;
}

char *dk_base64_decode(const char *s, size_t *ret_len) {
        static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        size_t n = strlen(s), j = 0;
        unsigned acc = 0;
        int bits = 0;
        char *out = xmalloc(n * 3 / 4 + 4);
        for (size_t i = 0; i < n && s[i] != '='; i++) {
                const char *c = strchr(tab, s[i]);
                if (!c || !s[i]) {
                        free(out);
                        return NULL;
                }
                acc = acc << 6 | (unsigned)(c - tab);
                if ((bits += 6) >= 8) {
                        bits -= 8;
                        out[j++] = (char)(acc >> bits & 0xff);
                }
        }
        out[j] = 0;
        *ret_len = j;
        return out;
}

char *dk_escape(const char *s) {
        static const char hex[] = "0123456789ABCDEF";
        size_t n = strlen(s), j = 0;
        char *out = xmalloc(3 * n + 1);
        for (size_t i = 0; i < n; i++) {
                unsigned char ch = (unsigned char)s[i];
                if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
                    ch == '_' || ch == '.' || ch == '~') {
                        out[j++] = (char)ch;
                } else {
                        out[j++] = '%';
                        out[j++] = hex[ch >> 4];
                        out[j++] = hex[ch & 15];
                }
        }
        out[j] = 0;
        return out;
}

void dk_demux_feed(dk_demux *d, const char *p, size_t n) {
        while (n > 0) {
                if (d->left == 0) {
                        size_t take = 8 - d->hdr_len < n ? 8 - d->hdr_len : n;
                        memcpy(d->hdr + d->hdr_len, p, take);
                        d->hdr_len += take, p += take, n -= take;
                        if (d->hdr_len < 8)
                                return;
                        d->hdr_len = 0;
                        d->stream = d->hdr[0] == 2 ? 2 : 1;
                        d->left = (size_t)d->hdr[4] << 24 | (size_t)d->hdr[5] << 16 | (size_t)d->hdr[6] << 8 |
                                  (size_t)d->hdr[7];
                        continue;
                }
                size_t take = d->left < n ? d->left : n;
                d->emit(d->stream, p, take, d->arg);
                d->left -= take, p += take, n -= take;
        }
}

/* ---- hijacked connections ------------------------------------------------- */

static int wait_fd(int fd, short events, int64_t deadline) {
        struct pollfd p = {fd, events, 0};
        int64_t left = deadline - cm_now_ms();
        if (left <= 0)
                return 0;
        return poll(&p, 1, (int)left);
}

static int send_all(dk_conn *c, const char *p, size_t n, int64_t deadline) {
        while (n > 0) {
                ssize_t k = dk_conn_send(c, p, n);
                if (k < 0)
                        return -1;
                p += k, n -= (size_t)k;
                if (n && wait_fd(c->fd, POLLOUT, deadline) <= 0)
                        return -1;
        }
        return 0;
}

/* Read up to the end of the response head; what follows it is stream. */
static int read_head(dk_api *a, dk_conn *c, long *ret_status, char **ret_head, int64_t deadline, cm_err *err) {
        size_t len = 0, cap = 4096;
        char *buf = xmalloc(cap + 1), *end;
        while (!(buf[len] = 0, end = strstr(buf, "\r\n\r\n"))) {
                ssize_t k;
                if (len == cap) {
                        free(buf);
                        return cm_err_set(err, EIO, "the engine at %s sent an oversized response head", a->where);
                }
                k = dk_conn_recv(c, buf + len, cap - len);
                if (k == -EAGAIN) {
                        if (wait_fd(c->fd, POLLIN, deadline) <= 0) {
                                free(buf);
                                return cm_err_set(err, ETIMEDOUT,
                                                  "the engine at %s did not answer an exec start within %lld ms: it "
                                                  "is hung or overloaded; check it and restart it",
                                                  a->where, (long long)a->timeout_ms);
                        }
                        continue;
                }
                if (k <= 0) {
                        free(buf);
                        return cm_err_set(err, EIO,
                                          "the engine at %s closed the connection of an exec start: is it "
                                          "still running?",
                                          a->where);
                }
                len += (size_t)k;
        }
        end += 4;
        c->pending_len = len - (size_t)(end - buf);
        c->pending = xmalloc(c->pending_len + 1);
        memcpy(c->pending, end, c->pending_len);
        *end = 0;
        if (sscanf(buf, "HTTP/1.%*d %ld", ret_status) != 1)
                *ret_status = 0;
        *ret_head = buf;
        return 0;
}

int dk_hijack(dk_api *a, const char *path, const json_t *body, dk_conn *ret, cm_err *err) {
        cleanup_free char *text = cm_json_dump(body), *head = NULL, *req = NULL, *resp = NULL;
        int64_t deadline = cm_now_ms() + a->timeout_ms;
        curl_socket_t fd = CURL_SOCKET_BAD;
        long status = 0;
        CURLcode rc;
        CURL *c;

        memset(ret, 0, sizeof *ret);
        ret->fd = -1;
        if (a->problem)
                return cm_err_set(err, ENOENT, "%s", a->problem);
        if (cm_curl_load(err) < 0 || (a->minor == 0 && dk_api_negotiate(a, err) < 0))
                return -1;
        if (!(c = curl_easy_init()))
                return cm_err_set(err, ENOMEM, "libcurl failed to initialise");
        ret->curl = c;
        ret->tls = a->cert_dir != NULL;
        (void)curl_easy_setopt(c, CURLOPT_URL, a->base);
        if (a->socket)
                (void)curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, a->socket);
        if (a->cert_dir)
                set_tls(a, c);
        (void)curl_easy_setopt(c, CURLOPT_CONNECT_ONLY, 1L);
        (void)curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        (void)curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, DK_CONNECT_MS);
        if ((rc = curl_easy_perform(c)) != CURLE_OK) {
                long os_errno = 0;
                dk_req r = {.method = "POST", .path = path};
                (void)curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &os_errno);
                dk_conn_close(ret);
                return transport_error(a, &r, rc, os_errno, err);
        }
        (void)curl_easy_getinfo(c, CURLINFO_ACTIVESOCKET, &fd);
        ret->fd = (int)fd;
        req = xasprintf("POST /v1.%d%s HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\n"
                        "Connection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: %zu\r\n\r\n%s",
                        a->minor, path, strlen(text), text);
        if (send_all(ret, req, strlen(req), deadline) < 0 || read_head(a, ret, &status, &resp, deadline, err) < 0) {
                if (!err->code)
                        cm_err_set(err, EIO, "the engine at %s broke off an exec start", a->where);
                dk_conn_close(ret);
                return -1;
        }
        if (status != 101 && status != 200) {
                const char *body_text = strstr(resp, "\r\n\r\n");
                int r;
                /* the error's JSON body follows the head */
                head = xasprintf("%s%s", body_text ? body_text + 4 : "", ret->pending ? ret->pending : "");
                r = dk_engine_error(a, status, head, "start the exec", err);
                dk_conn_close(ret);
                return r;
        }
        return 0;
}

ssize_t dk_conn_send(dk_conn *c, const char *p, size_t n) {
        size_t sent = 0;
        CURLcode rc = curl_easy_send(c->curl, p, n, &sent);
        if (rc == CURLE_AGAIN)
                return 0;
        return rc == CURLE_OK ? (ssize_t)sent : -EIO;
}

ssize_t dk_conn_recv(dk_conn *c, char *p, size_t n) {
        size_t got = 0;
        CURLcode rc;
        if (c->pending_len) {
                got = c->pending_len < n ? c->pending_len : n;
                memcpy(p, c->pending, got);
                memmove(c->pending, c->pending + got, c->pending_len - got);
                c->pending_len -= got;
                return (ssize_t)got;
        }
        rc = curl_easy_recv(c->curl, p, n, &got);
        if (rc == CURLE_AGAIN)
                return -EAGAIN;
        return rc == CURLE_OK ? (ssize_t)got : -EIO;
}

void dk_conn_close_write(dk_conn *c) {
        if (!c->tls && c->fd >= 0)
                (void)shutdown(c->fd, SHUT_WR);
}

void dk_conn_close(dk_conn *c) {
        if (c->curl)
                curl_easy_cleanup(c->curl);
        free(c->pending);
        memset(c, 0, sizeof *c);
        c->fd = -1;
}
