/* Image references as Docker parses them (see ref.h).  The grammar is that
 * of github.com/distribution/reference, written out by hand so each refusal
 * can say which part is wrong. */
#include "image/ref.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "util/cleanup.h"

#define HUB "docker.io"

static bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
static bool alnum(char c) { return isascii((unsigned char)c) && isalnum((unsigned char)c); }

/* [a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])? */
static bool domain_component_ok(const char *s, size_t n) {
        if (n == 0 || !alnum(s[0]) || !alnum(s[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!alnum(s[i]) && s[i] != '-')
                        return false;
        return true;
}

/* host[:port], host a dotted name or a bracketed IPv6 address. */
static bool domain_ok(const char *s, size_t n) {
        size_t host = n;
        const char *colon;
        if (n > 0 && s[0] == '[') {
                const char *close = memchr(s, ']', n);
                if (!close || close == s + 1)
                        return false;
                for (const char *p = s + 1; p < close; p++)
                        if (!isxdigit((unsigned char)*p) && *p != ':')
                                return false;
                host = (size_t)(close - s) + 1;
                if (host < n && s[host] != ':')
                        return false;
        } else {
                colon = memchr(s, ':', n);
                if (colon)
                        host = (size_t)(colon - s);
                for (size_t i = 0, start = 0; i <= host; i++) {
                        if (i == host || s[i] == '.') {
                                if (!domain_component_ok(s + start, i - start))
                                        return false;
                                start = i + 1;
                        }
                }
        }
        if (host < n) { /* ":port" */
                if (host + 1 == n)
                        return false;
                for (size_t i = host + 1; i < n; i++)
                        if (!isdigit((unsigned char)s[i]))
                                return false;
        }
        return true;
}

/* [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)* */
static bool path_component_ok(const char *s, size_t n) {
        size_t i = 0;
        while (i < n) {
                if (!lower_alnum(s[i]))
                        return false;
                while (i < n && lower_alnum(s[i]))
                        i++;
                if (i == n)
                        return true;
                if (s[i] == '.' || (s[i] == '_' && !(i + 1 < n && s[i + 1] == '_')))
                        i++;
                else if (s[i] == '_')
                        i += 2;
                else if (s[i] == '-')
                        while (i < n && s[i] == '-')
                                i++;
                else
                        return false;
                if (i == n)
                        return false; /* a separator must be followed */
        }
        return n > 0;
}

static bool path_ok(const char *s, size_t n) {
        for (size_t i = 0, start = 0; i <= n; i++) {
                if (i == n || s[i] == '/') {
                        if (!path_component_ok(s + start, i - start))
                                return false;
                        start = i + 1;
                }
        }
        return true;
}

/* [\w][\w.-]{0,127} */
static bool tag_ok(const char *s) {
        size_t n = strlen(s);
        if (n == 0 || n > CM_IMAGE_TAG_MAX || s[0] == '.' || s[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!alnum(s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-')
                        return false;
        return true;
}

int cm_image_digest_ok(const char *d) {
        if (!d || strncmp(d, "sha256:", 7) != 0 || strlen(d) != 7 + 64)
                return 0;
        for (const char *p = d + 7; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return 0;
        return 1;
}

static bool is_hex64(const char *s) {
        cleanup_free char *d = xasprintf("sha256:%s", s);
        return cm_image_digest_ok(d);
}

static int refuse(cm_err *err, const char *s, const char *why) {
        return cm_err_set(err, EINVAL, "invalid image reference \"%.300s\": %s", s, why);
}

/* Docker's splitDockerDomain: the first component is a registry when it
 * looks like a host, else the name is on Docker Hub. */
static void split_domain(const char *s, char **ret_domain, const char **ret_rest) {
        const char *slash = strchr(s, '/');
        bool hub = !slash;
        if (slash) {
                size_t n = (size_t)(slash - s);
                bool upper = false;
                for (size_t i = 0; i < n; i++)
                        upper |= s[i] >= 'A' && s[i] <= 'Z';
                hub = !memchr(s, '.', n) && !memchr(s, ':', n) && !(n == 9 && strncmp(s, "localhost", 9) == 0) &&
                      !upper;
        }
        if (hub) {
                *ret_domain = xstrdup(HUB);
                *ret_rest = s;
                return;
        }
        *ret_domain = xstrndup(s, (size_t)(slash - s));
        *ret_rest = slash + 1;
        if (strcmp(*ret_domain, "index.docker.io") == 0) {
                free(*ret_domain);
                *ret_domain = xstrdup(HUB);
        }
}

int cm_image_ref_parse(const char *s, cm_image_ref *ret, cm_err *err) {
        cleanup_free char *domain = NULL, *rest = NULL;
        const char *tail, *at, *colon, *slash;
        char *name_end;
        cm_image_ref r = {0};

        memset(ret, 0, sizeof *ret);
        if (!s || !*s)
                return refuse(err, "", "it is empty; give a name like alpine, alpine:3.20 or host:5000/repo:tag");
        if (strlen(s) > 1024)
                return cm_err_set(err, EINVAL, "invalid image reference: longer than 1024 characters");
        if (is_hex64(s))
                return refuse(err, s,
                              "a 64-digit hex string is an image id, not a name; use sha256:<hex> with the "
                              "repository, like name@sha256:<hex>");
        split_domain(s, &domain, &tail);
        if (strcmp(domain, HUB) == 0 && !strchr(tail, '/') && strchr(tail, '@') != tail)
                rest = xasprintf("library/%s", tail);
        else
                rest = xstrdup(tail);

        if ((at = strchr(rest, '@'))) {
                if (!cm_image_digest_ok(at + 1))
                        return refuse(err, s, "the digest after '@' must be sha256: and 64 lower-case hex digits");
                r.digest = xstrdup(at + 1);
                *(char *)at = 0;
        }
        slash = strrchr(rest, '/');
        colon = strrchr(rest, ':');
        if (colon && (!slash || colon > slash)) {
                *(char *)colon = 0;
                if (!tag_ok(colon + 1)) {
                        cm_image_ref_free(&r);
                        return refuse(err, s, "a tag is letters, digits, '_', '.' and '-' (not first), at most 128");
                }
                r.tag = xstrdup(colon + 1);
        }
        name_end = rest + strlen(rest);
        for (char *p = rest; p < name_end; p++)
                if (*p >= 'A' && *p <= 'Z') {
                        cm_image_ref_free(&r);
                        return refuse(err, s, "the repository name must be lower case");
                }
        if (!domain_ok(domain, strlen(domain)) || !path_ok(rest, strlen(rest))) {
                cm_image_ref_free(&r);
                return refuse(err, s,
                              "expected [host[:port]/]name[:tag][@sha256:digest], the name's parts lower-case "
                              "letters and digits separated by '.', '_', '__' or '-'");
        }
        if (strlen(domain) + 1 + strlen(rest) > CM_IMAGE_NAME_MAX) {
                cm_image_ref_free(&r);
                return refuse(err, s, "the repository name is longer than 255 characters");
        }
        if (!r.tag && !r.digest)
                r.tag = xstrdup("latest");
        r.domain = steal_pointer(&domain);
        r.path = steal_pointer(&rest);
        *ret = r;
        return 0;
}

void cm_image_ref_free(cm_image_ref *r) {
        free(r->domain), free(r->path), free(r->tag), free(r->digest);
        memset(r, 0, sizeof *r);
}

char *cm_image_ref_format(const cm_image_ref *r) {
        return xasprintf("%s/%s%s%s%s%s", r->domain, r->path, r->tag ? ":" : "", r->tag ? r->tag : "",
                         r->digest ? "@" : "", r->digest ? r->digest : "");
}

const char *cm_image_ref_reference(const cm_image_ref *r) { return r->digest ? r->digest : r->tag; }
