/* Image names: a minimal Docker-style normaliser, behind the one function
 * the registry client's reference parser (src/image/ref.c) replaces. */
#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#include "image/internal.h"
#include "util/cleanup.h"

static bool repo_ok(const char *p, size_t n) {
        if (n == 0 || n > 255)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!(islower((unsigned char)p[i]) || isdigit((unsigned char)p[i]) || strchr("._-/", p[i])))
                        return false;
        return p[0] != '/' && p[n - 1] != '/' && !strstr(p, "//");
}

static bool tag_ok(const char *t) {
        size_t n = strlen(t);
        if (n == 0 || n > 128 || t[0] == '.' || t[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)t[i]) && !strchr("_.-", t[i]))
                        return false;
        return true;
}

char *img_name_normalize(const char *name) {
        cleanup_free char *copy = NULL;
        char *at, *slash, *colon, *domain = NULL, *rest;
        const char *tag = "latest";
        cleanup_free char *digest = NULL;

        if (!name || !name[0] || strlen(name) > 512 || name[0] == '-' || name[0] == '/')
                return NULL;
        copy = xstrdup(name);
        if ((at = strchr(copy, '@'))) {
                if (!img_digest_valid(at + 1))
                        return NULL;
                digest = xstrdup(at + 1);
                *at = 0;
                tag = NULL;
        }
        slash = strchr(copy, '/');
        if (slash && (memchr(copy, '.', (size_t)(slash - copy)) || memchr(copy, ':', (size_t)(slash - copy)) ||
                      strncmp(copy, "localhost/", 10) == 0)) {
                *slash = 0;
                domain = copy;
                rest = slash + 1;
        } else
                rest = copy;
        /* a tag is after the last ':' that follows the last '/' */
        colon = strrchr(rest, ':');
        if (colon && !strchr(colon, '/')) {
                *colon = 0;
                if (digest || !tag_ok(colon + 1))
                        return NULL;
                tag = colon + 1;
        }
        if (!repo_ok(rest, strlen(rest)))
                return NULL;
        if (domain)
                for (char *p = domain; *p; p++)
                        if (!isalnum((unsigned char)*p) && !strchr(".-:", *p))
                                return NULL;
        if (!domain || strcmp(domain, "docker.io") == 0 || strcmp(domain, "index.docker.io") == 0) {
                bool library = !strchr(rest, '/');
                if (library && strlen(rest) + strlen("library/") > 255)
                        return NULL; /* the full path must be a valid repository too */
                return digest ? xasprintf("docker.io/%s%s@%s", library ? "library/" : "", rest, digest)
                              : xasprintf("docker.io/%s%s:%s", library ? "library/" : "", rest, tag);
        }
        return digest ? xasprintf("%s/%s@%s", domain, rest, digest) : xasprintf("%s/%s:%s", domain, rest, tag);
}

