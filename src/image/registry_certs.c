/* A registry's own certificates, as Docker and Podman keep them: a
 * directory named after the registry's host[:port] in a certs.d directory,
 * holding `*.crt` (CA certificates, trusted for it on top of the system's)
 * and `NAME.cert` + `NAME.key` (a client certificate for registries that
 * ask for one).  The certs.d directories searched, first hit wins:
 * CONTAINER_MCP_REGISTRY_CERTS_D (a ':' list) when set, else
 * $XDG_CONFIG_HOME/containers/certs.d (~/.config/…; not for root),
 * /etc/containers/certs.d, /etc/docker/certs.d.
 *
 * These are the operator's files.  What an agent picks is only the
 * registry name, which the reference parser keeps to [A-Za-z0-9.-] and a
 * port (or a bracketed IPv6 address): it cannot climb out of certs.d. */
#include "image/registry_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/lazy.h"

#define CERT_FILE_MAX (1u << 20)
#define SYSTEM_CA_MAX (8u << 20)
#define SYSTEM_CA_DEFAULT "/etc/ssl/certs/ca-certificates.crt"

static bool dir_exists(const char *path) {
        struct stat st;
        return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool host_name_ok(const char *host) {
        return host[0] && host[0] != '.' && !strchr(host, '/') && strlen(host) < 256;
}

char *rg_certs_dir(const char *host) {
        const char *list = getenv("CONTAINER_MCP_REGISTRY_CERTS_D");
        cleanup_free char *user = NULL, *defaults = NULL;
        if (!host_name_ok(host))
                return NULL;
        if (!list) {
                const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
                if (geteuid() != 0 && xdg && xdg[0] == '/')
                        user = xasprintf("%s/containers/certs.d:", xdg);
                else if (geteuid() != 0 && home && home[0] == '/')
                        user = xasprintf("%s/.config/containers/certs.d:", home);
                list = defaults = xasprintf("%s/etc/containers/certs.d:/etc/docker/certs.d", user ? user : "");
        }
        for (const char *p = list; *p;) {
                size_t n = strcspn(p, ":");
                if (n && p[0] == '/') {
                        char *dir = xasprintf("%.*s/%s", (int)n, p, host);
                        if (dir_exists(dir))
                                return dir;
                        free(dir);
                }
                p += n + (p[n] == ':');
        }
        return NULL;
}

/* Append a file of at most `cap` bytes and a newline to *buf (kept
 * NUL-terminated).  `shown` names the directory in messages (NULL: `name`
 * is a whole path). */
static int slurp(int dir, const char *shown, const char *name, size_t cap, char **buf, size_t *len, cm_err *err) {
        cleanup_close int fd = openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        cleanup_free char *where = shown ? xasprintf("%s/%s", shown, name) : xstrdup(name);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return cm_err_sys(err, errno, "cannot read %s", where);
        if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > cap)
                return cm_err_set(err, EINVAL, "%s is not a certificate file (a regular file of at most %zu bytes)",
                                  where, (size_t)cap);
        *buf = xrealloc(*buf, *len + (size_t)st.st_size + 2);
        for (size_t got = 0; got < (size_t)st.st_size;) {
                ssize_t k = read(fd, *buf + *len, (size_t)st.st_size - got);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return cm_err_sys(err, k < 0 ? errno : EIO, "cannot read %s", where);
                got += (size_t)k, *len += (size_t)k;
        }
        (*buf)[(*len)++] = '\n';
        (*buf)[*len] = 0;
        return 0;
}

static bool ends_with(const char *s, const char *suffix) {
        size_t n = strlen(s), k = strlen(suffix);
        return n > k && strcmp(s + n - k, suffix) == 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

/* The system's CA bundle first: certs.d adds to it, as Docker and Podman
 * do (a CA blob replaces libcurl's bundle instead of joining it). */
static void system_cas(char **buf, size_t *len) {
        const char *path = SYSTEM_CA_DEFAULT;
        cm_err ignored = CM_ERR_INIT;
#if LIBCURL_VERSION_NUM >= 0x075400 /* 7.84: CURLINFO_CAINFO */
        CURL *h = curl_easy_init();
        char *built_in = NULL;
        if (h && curl_easy_getinfo(h, CURLINFO_CAINFO, &built_in) == CURLE_OK && built_in)
                path = built_in;
        (void)slurp(AT_FDCWD, NULL, path, SYSTEM_CA_MAX, buf, len, &ignored);
        if (h)
                curl_easy_cleanup(h);
#else
        (void)slurp(AT_FDCWD, NULL, path, SYSTEM_CA_MAX, buf, len, &ignored);
#endif
}

int rg_certs_load(rg_conn *c, cm_err *err) {
        const char *p = strstr(c->base, "://");
        cleanup_free char *host = NULL;
        cleanup_close int dir = -1;
        struct dirent **names = NULL;
        char *cas = NULL;
        size_t n_cas = 0, len = 0;
        int n, r = 0;

        p = p ? p + 3 : c->base;
        host = xstrndup(p, strcspn(p, "/"));
        if (!(c->certs_dir = rg_certs_dir(host)))
                return 0;
        if ((dir = open(c->certs_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
                return cm_err_sys(err, errno, "cannot open %s", c->certs_dir);
        if ((n = scandir(c->certs_dir, &names, NULL, by_name)) < 0)
                return cm_err_sys(err, errno, "cannot list %s", c->certs_dir);
        for (int i = 0; i < n && r == 0; i++) {
                const char *name = names[i]->d_name;
                if (ends_with(name, ".crt")) {
                        r = slurp(dir, c->certs_dir, name, CERT_FILE_MAX, &cas, &n_cas, err);
                } else if (ends_with(name, ".cert") || ends_with(name, ".key")) {
                        bool cert = ends_with(name, ".cert");
                        size_t stem = strlen(name) - (cert ? 5 : 4);
                        cleanup_free char *other = xasprintf("%.*s%s", (int)stem, name, cert ? ".key" : ".cert");
                        if (faccessat(dir, other, F_OK, 0) < 0)
                                r = cm_err_set(err, ENOENT,
                                               "%s/%s has no %s beside it: a client certificate needs both",
                                               c->certs_dir, name, other);
                        else if (cert && !c->client_cert) {
                                c->client_cert = xasprintf("%s/%s", c->certs_dir, name);
                                c->client_key = xasprintf("%s/%s", c->certs_dir, other);
                        }
                }
        }
        for (int i = 0; i < n; i++)
                free(names[i]);
        free(names);
        if (r == 0 && cas) {
                system_cas(&c->ca_blob, &len);
                c->ca_blob = xrealloc(c->ca_blob, len + n_cas + 1);
                memcpy(c->ca_blob + len, cas, n_cas + 1);
                c->ca_len = len + n_cas;
        }
        free(cas);
        return r;
}
