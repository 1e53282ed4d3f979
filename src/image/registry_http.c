/* HTTP for the registry client: the options every request carries, and
 * small GETs (manifests, tokens) collected in memory under a cap. */
#include "image/registry_int.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <pthread.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "util/cleanup.h"
#include "util/lazy.h"
#include "util/netaddr.h"

void rg_resp_free(rg_resp *r) {
        free(r->body), free(r->content_type), free(r->digest_header), free(r->challenge);
        memset(r, 0, sizeof *r);
}

void rg_conn_free(rg_conn *c) {
        free(c->base), free(c->host), free(c->repo), free(c->name), free(c->bearer);
        free(c->user), free(c->pass), free(c->cred_source);
        free(c->certs_dir), free(c->ca_blob), free(c->client_cert), free(c->client_key);
        memset(c, 0, sizeof *c);
}

/* "host:port" of a URL: after "://" up to the path. */
static size_t authority(const char *url, const char **ret) {
        const char *p = strstr(url, "://");
        *ret = p ? p + 3 : url;
        return strcspn(*ret, "/?#");
}

char *rg_url_host(const char *url) {
        const char *p;
        size_t n = authority(url, &p);
        return xstrndup(p, n);
}

bool rg_same_host(const char *url_a, const char *url_b) {
        const char *a, *b;
        size_t la = authority(url_a, &a), lb = authority(url_b, &b);
        return la > 0 && la == lb && strncasecmp(a, b, la) == 0;
}

/* The connect timeout: the caller's, else 15 s. */
static unsigned connect_s(const rg_conn *c) { return c->o && c->o->connect_timeout_s ? c->o->connect_timeout_s : 15; }

static size_t discard(char *p, size_t sz, size_t n, void *arg) {
        (void)p, (void)arg;
        return sz * n;
}

int rg_choose_scheme(rg_conn *c, const char *domain, cm_err *err) {
        cleanup_free char *url = xasprintf("https://%s/v2/", domain);
        unsigned connect = connect_s(c);
        struct curl_slist *hdrs = NULL;
        CURLcode rc;
        CURL *h;

        free(c->base);
        c->base = xasprintf("https://%s", domain);
        c->tls_unverified = true;
        c->probe_err[0] = 0;
        if (!(h = curl_easy_init()))
                return cm_err_set(err, ENOMEM, "libcurl failed to initialise");
        rg_easy_setup(c, h, url, &hdrs);
        /* A plain http server answers a TLS hello at once (400); one that
         * waits for more must not hold the pull for the usual timeouts. */
        (void)curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, (long)(connect < 5 ? connect : 5));
        (void)curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
        (void)curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
        (void)curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
        rc = curl_easy_perform(h);
        curl_easy_cleanup(h);
        curl_slist_free_all(hdrs);
        if (rc == CURLE_ABORTED_BY_CALLBACK)
                return cm_err_set(err, ECANCELED, "cancelled while asking %s whether it speaks https", domain);
        if (rc == CURLE_OK) /* any answer over TLS: https it is */
                return 0;
        (void)snprintf(c->probe_err, sizeof c->probe_err, "%s", curl_easy_strerror(rc));
        free(c->base);
        c->base = xasprintf("http://%s", domain);
        c->tls_unverified = false;
        c->refused[0] = 0; /* the http requests say it again if so */
        return 0;
}

bool rg_insecure(const char *domain) {
        cleanup_free char *host = cm_host_of(domain), *certs = rg_certs_dir(domain);
        struct in_addr a4;
        if (certs) /* the operator gave it certificates: it speaks TLS */
                return false;
        if (strcasecmp(host, "localhost") == 0 || strcmp(host, "::1") == 0)
                return true;
        if (inet_pton(AF_INET, host, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127)
                return true;
        return cm_host_listed(getenv("CONTAINER_MCP_INSECURE_REGISTRIES"), domain);
}

/* The proxies libcurl may connect to instead of a registry, from the
 * environment as libcurl reads it: the operator's, so never refused (where
 * such a proxy then connects is its own rules' business). */
#define PROXY_ADDRS_MAX 16
static struct sockaddr_storage proxy_addrs[PROXY_ADDRS_MAX];
static size_t n_proxy_addrs;
static pthread_once_t proxy_once = PTHREAD_ONCE_INIT;

static void proxy_resolve(void) {
        static const char *const vars[] = {"http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"};
        for (size_t i = 0; i < ARRAY_SIZE(vars); i++) {
                const char *v = getenv(vars[i]), *p, *at, *after;
                struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
                cleanup_free char *host = NULL, *port = NULL;
                if (!v || !*v)
                        continue;
                p = strstr(v, "://") ? strstr(v, "://") + 3 : v;
                at = strchr(p, '@');
                if (at && at < p + strcspn(p, "/"))
                        p = at + 1;
                if (*p == '[') {
                        host = xstrndup(p + 1, strcspn(p + 1, "]"));
                        after = p + 1 + strlen(host) + (p[1 + strlen(host)] == ']');
                } else {
                        host = xstrndup(p, strcspn(p, ":/"));
                        after = p + strlen(host);
                }
                /* libcurl's defaults: 443 for an https:// proxy, else 1080 */
                port = *after == ':' ? xstrndup(after + 1, strcspn(after + 1, "/"))
                                     : xstrdup(strncmp(v, "https://", 8) == 0 ? "443" : "1080");
                if (!*host || getaddrinfo(host, port, &hints, &res) != 0)
                        continue;
                for (struct addrinfo *r = res; r && n_proxy_addrs < PROXY_ADDRS_MAX; r = r->ai_next)
                        if (r->ai_addrlen <= sizeof proxy_addrs[0])
                                memcpy(&proxy_addrs[n_proxy_addrs++], r->ai_addr, r->ai_addrlen);
                freeaddrinfo(res);
        }
}

/* The address and the port of one of those proxies. */
static bool is_proxy(const struct sockaddr *sa) {
        (void)pthread_once(&proxy_once, proxy_resolve);
        for (size_t i = 0; i < n_proxy_addrs; i++) {
                const struct sockaddr *p = (const struct sockaddr *)&proxy_addrs[i];
                const struct sockaddr_in *p4 = (const void *)p, *s4 = (const void *)sa;
                const struct sockaddr_in6 *p6 = (const void *)p, *s6 = (const void *)sa;
                if (p->sa_family != sa->sa_family)
                        continue;
                if (sa->sa_family == AF_INET && p4->sin_addr.s_addr == s4->sin_addr.s_addr &&
                    p4->sin_port == s4->sin_port)
                        return true;
                if (sa->sa_family == AF_INET6 && memcmp(&p6->sin6_addr, &s6->sin6_addr, sizeof p6->sin6_addr) == 0 &&
                    p6->sin6_port == s6->sin6_port)
                        return true;
        }
        return false;
}

/* Every socket of an agent's pull: none to a local address unless the
 * operator named the registry or it is the operator's proxy (the first
 * address of a name is checked, and libcurl tries the next one the same
 * way). */
static curl_socket_t open_guarded(void *arg, curlsocktype purpose, struct curl_sockaddr *a) {
        rg_conn *c = arg;
        (void)purpose;
        if (cm_sockaddr_local(&a->addr) && !is_proxy(&a->addr)) {
                char ip[INET6_ADDRSTRLEN] = "?";
                const void *raw = a->family == AF_INET6
                                          ? (const void *)&((struct sockaddr_in6 *)(void *)&a->addr)->sin6_addr
                                          : (const void *)&((struct sockaddr_in *)(void *)&a->addr)->sin_addr;
                if (a->family == AF_INET || a->family == AF_INET6)
                        (void)inet_ntop(a->family, raw, ip, sizeof ip);
                (void)snprintf(c->refused, sizeof c->refused, "%s", ip);
                return CURL_SOCKET_BAD;
        }
        return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static int on_xfer(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
        (void)dt, (void)dn, (void)ut, (void)un;
        return cm_cancelled(arg) ? 1 : 0;
}

void rg_easy_setup(rg_conn *c, CURL *h, const char *url, struct curl_slist **hdrs) {
        unsigned connect = connect_s(c);
        unsigned stall = c->o && c->o->stall_timeout_s ? c->o->stall_timeout_s : 30;
        bool unverified;
        (void)curl_easy_setopt(h, CURLOPT_URL, url);
        (void)curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        (void)curl_easy_setopt(h, CURLOPT_USERAGENT, "container-mcp");
        (void)curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        /* Blobs may redirect to storage; never to file:, ftp: or the like.
         * libcurl sends neither our Authorization header nor user/password
         * to another host than the first. */
        (void)curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
        (void)curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
        (void)curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
        /* An insecure registry's own host only: a token realm elsewhere
         * (credentials go there) is checked as usual.  A redirect keeps
         * the handle's options; what comes back is checked by its digest. */
        unverified = c->tls_unverified && rg_same_host(url, c->base);
        (void)curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, unverified ? 0L : 1L);
        (void)curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, unverified ? 0L : 2L);
        if (c->ca_blob) {
                struct curl_blob cas = {.data = c->ca_blob, .len = c->ca_len, .flags = CURL_BLOB_NOCOPY};
                (void)curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &cas);
        }
        if (c->client_cert) {
                (void)curl_easy_setopt(h, CURLOPT_SSLCERT, c->client_cert);
                (void)curl_easy_setopt(h, CURLOPT_SSLKEY, c->client_key);
        }
        (void)curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, (long)connect);
        /* A registry that accepts and then says nothing, or stalls mid-blob:
         * less than a byte a second for `stall` seconds is a failure. */
        (void)curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
        (void)curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)stall);
        if (c->guard_local) {
                c->refused[0] = 0; /* a refusal is told by the transfer it stopped */
                (void)curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, open_guarded);
                (void)curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, c);
        }
        if (c->cancel && c->cancel->fd >= 0) {
                (void)curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
                (void)curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_xfer);
                (void)curl_easy_setopt(h, CURLOPT_XFERINFODATA, c->cancel);
        }
        if (c->bearer)
                *hdrs = curl_slist_append(*hdrs, c->bearer);
        else if (c->basic) {
                (void)curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
                (void)curl_easy_setopt(h, CURLOPT_USERNAME, c->user);
                (void)curl_easy_setopt(h, CURLOPT_PASSWORD, c->pass);
        }
        (void)curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
}

/* "host:port" of "https://host:port", in a static buffer (for messages). */
static const char *base_host(const char *base) {
        static __thread char host[256];
        const char *p;
        size_t n = authority(base, &p);
        (void)snprintf(host, sizeof host, "%.*s", (int)n, p);
        return host;
}

int rg_transport_error(rg_conn *c, CURLcode rc, long os_errno, const char *what, cm_err *err) {
        unsigned stall = c->o && c->o->stall_timeout_s ? c->o->stall_timeout_s : 30;
        if (c->refused[0] && (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST))
                return cm_err_set(err, EPERM,
                                  "fetching %s from %s needed a connection to the local address %s, which an agent's "
                                  "pull makes only to a registry the operator names in "
                                  "CONTAINER_MCP_ALLOWED_REGISTRIES (the name resolved there, or the registry "
                                  "redirected there); refused before connecting",
                                  what, c->base, c->refused);
        switch (rc) {
        case CURLE_ABORTED_BY_CALLBACK:
                return cm_err_set(err, ECANCELED, "cancelled while fetching %s from %s", what, c->base);
        case CURLE_OPERATION_TIMEDOUT:
                return cm_err_set(err, ETIMEDOUT,
                                  "the registry %s did not answer (%s) within %u s while sending %s; it is down or "
                                  "overloaded, retry later",
                                  c->base, curl_easy_strerror(rc), stall, what);
        case CURLE_UNSUPPORTED_PROTOCOL:
                return cm_err_set(err, EPERM, "the registry %s redirected %s to a scheme other than http(s); refused",
                                  c->base, what);
        case CURLE_COULDNT_CONNECT:
        case CURLE_COULDNT_RESOLVE_HOST:
                return cm_err_set(err, ECONNREFUSED, "cannot reach the registry %s (%s%s%s)", c->base,
                                  curl_easy_strerror(rc), os_errno ? ": " : "",
                                  os_errno ? strerror((int)os_errno) : "");
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CONNECT_ERROR:
                if (c->certs_dir)
                        return cm_err_set(err, EPERM,
                                          "TLS with the registry %s failed (%s) with the certificates of %s: its *.crt "
                                          "must hold the CA that signed the registry's certificate (for this name), "
                                          "and a registry that asks for a client certificate needs NAME.cert and "
                                          "NAME.key there",
                                          c->base, curl_easy_strerror(rc), c->certs_dir);
                return cm_err_set(err, EPERM,
                                  "TLS with the registry %s failed (%s); if it is a registry of your own, put its CA "
                                  "certificate in /etc/containers/certs.d/%s/ca.crt (or a directory "
                                  "CONTAINER_MCP_REGISTRY_CERTS_D names), or add its host to "
                                  "CONTAINER_MCP_INSECURE_REGISTRIES (https without certificate checks)",
                                  c->base, curl_easy_strerror(rc), base_host(c->base));
        case CURLE_SSL_CACERT_BADFILE:
                return cm_err_set(err, EINVAL, "the CA certificates of %s cannot be used (%s): each *.crt must be PEM",
                                  c->certs_dir ? c->certs_dir : "the system", curl_easy_strerror(rc));
        case CURLE_SSL_CERTPROBLEM:
                return cm_err_set(err, EINVAL,
                                  "the client certificate %s or its key cannot be used (%s): both must be PEM, the "
                                  "key unencrypted",
                                  c->client_cert ? c->client_cert : "(none)", curl_easy_strerror(rc));
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
                if (strncmp(c->base, "https://", 8) == 0 && !c->client_cert) {
                        cleanup_free char *dir = c->certs_dir
                                                         ? xstrdup(c->certs_dir)
                                                         : xasprintf("/etc/containers/certs.d/%s", base_host(c->base));
                        return cm_err_set(err, EIO,
                                          "fetching %s from the registry %s failed: %s (a registry that wants a "
                                          "client certificate ends the connection so: put NAME.cert and NAME.key in "
                                          "%s/)",
                                          what, c->base, curl_easy_strerror(rc), dir);
                }
                return cm_err_set(err, EIO, "fetching %s from the registry %s failed: %s", what, c->base,
                                  curl_easy_strerror(rc));
        default:
                return cm_err_set(err, EIO, "fetching %s from the registry %s failed: %s", what, c->base,
                                  curl_easy_strerror(rc));
        }
}

typedef struct collect {
        rg_resp *r;
        size_t cap;
        bool over;
} collect;

static size_t on_body(char *p, size_t sz, size_t n, void *arg) {
        collect *col = arg;
        size_t len = sz * n;
        if (col->r->len + len > col->cap) {
                col->over = true;
                return 0;
        }
        col->r->body = xrealloc(col->r->body, col->r->len + len + 1);
        memcpy(col->r->body + col->r->len, p, len);
        col->r->len += len;
        col->r->body[col->r->len] = 0;
        return len;
}

/* Header values we want; a later response (after a redirect) replaces
 * an earlier one's. */
static size_t on_header(char *p, size_t sz, size_t n, void *arg) {
        rg_resp *r = arg;
        size_t len = sz * n, vlen;
        static const struct {
                const char *name;
                size_t off;
        } want[] = {{"content-type:", offsetof(rg_resp, content_type)},
                    {"docker-content-digest:", offsetof(rg_resp, digest_header)},
                    {"www-authenticate:", offsetof(rg_resp, challenge)}};
        for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
                size_t k = strlen(want[i].name);
                char **slot = (char **)((char *)r + want[i].off);
                const char *v;
                if (len <= k || strncasecmp(p, want[i].name, k) != 0)
                        continue;
                v = p + k;
                vlen = len - k;
                while (vlen && (*v == ' ' || *v == '\t'))
                        v++, vlen--;
                while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' '))
                        vlen--;
                free(*slot);
                *slot = xstrndup(v, vlen < 4096 ? vlen : 4096);
        }
        return len;
}

int rg_get_url(rg_conn *c, const char *url, const char *accept, size_t cap, rg_resp *ret, const char *what,
               cm_err *err) {
        struct curl_slist *hdrs = NULL;
        collect col = {ret, cap, false};
        long os_errno = 0;
        CURLcode rc;
        CURL *h;

        rg_resp_free(ret);
        if (!(h = curl_easy_init()))
                return cm_err_set(err, ENOMEM, "libcurl failed to initialise");
        if (accept) {
                cleanup_free char *a = xasprintf("Accept: %s", accept);
                hdrs = curl_slist_append(hdrs, a);
        }
        rg_easy_setup(c, h, url, &hdrs);
        (void)curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        (void)curl_easy_setopt(h, CURLOPT_WRITEDATA, &col);
        (void)curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        (void)curl_easy_setopt(h, CURLOPT_HEADERDATA, ret);
        rc = curl_easy_perform(h);
        (void)curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &ret->status);
        (void)curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os_errno);
        curl_easy_cleanup(h);
        curl_slist_free_all(hdrs);
        if (col.over)
                return cm_err_set(err, EFBIG, "the registry %s sent more than %zu KiB for %s; refused", c->base,
                                  cap >> 10, what);
        if (rc != CURLE_OK)
                return rg_transport_error(c, rc, os_errno, what, err);
        return 0;
}

int rg_get(rg_conn *c, const char *path, const char *accept, size_t cap, rg_resp *ret, cm_err *err) {
        cleanup_free char *url = xasprintf("%s/v2/%s%s", c->base, c->repo, path);
        const char *what = path + 1;
        if (rg_get_url(c, url, accept, cap, ret, what, err) < 0)
                return -1;
        if (ret->status != 401)
                return 0;
        if (c->bearer || c->basic)
                return rg_refused(c, err); /* we already answered one challenge */
        if (rg_authenticate(c, ret->challenge, err) < 0)
                return -1;
        if (rg_get_url(c, url, accept, cap, ret, what, err) < 0)
                return -1;
        if (ret->status == 401)
                return rg_refused(c, err);
        return 0;
}
