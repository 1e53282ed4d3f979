/* `container-mcp fetch-image REF DIR [--platform P] [--timeout S]`: pull one
 * image from a registry into an OCI image layout (what `pull_image` does
 * before the store imports it), progress on stderr, the manifest digest on
 * stdout.  SIGINT or SIGTERM cancels: nothing half-written gets a name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "image/registry.h"
#include "policy/config.h"
#include "transport/transport.h"
#include "util/cleanup.h"

static void on_progress(void *arg, const char *what, uint64_t done, uint64_t total) {
        (void)arg;
        fprintf(stderr, "%s: %llu/%llu bytes\n", what, (unsigned long long)done, (unsigned long long)total);
}

static int usage(void) {
        printf("Usage: container-mcp fetch-image REF DIR [--platform OS/ARCH[/VARIANT]] [--timeout SECONDS]\n\n"
               "Pull the image REF (as Docker names it: alpine, host:5000/repo:tag, name@sha256:...)\n"
               "from its registry into DIR as an OCI image layout, for this machine's platform or\n"
               "--platform.  Every blob is checked against its digest and size; a second run into\n"
               "the same DIR fetches only what is missing.  Progress goes to stderr, the manifest's\n"
               "digest to stdout.  --timeout: seconds a registry may send nothing before the pull\n"
               "fails (default 30).  Credentials: CONTAINER_MCP_REGISTRY_AUTH or ~/.docker/config.json;\n"
               "size cap: CONTAINER_MCP_IMAGE_MAX_SIZE (see the README's Registries part).\n");
        return 0;
}

int cmd_fetch_image(int argc, char **argv) {
        const char *pos[2] = {NULL, NULL};
        cm_registry_opts o = {0};
        cm_image_progress progress = {on_progress, NULL};
        cm_image_ref ref;
        cm_config cfg;
        cm_err err = CM_ERR_INIT;
        cm_cancel cancel;
        cleanup_free char *digest = NULL;
        size_t npos = 0;
        int r;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
                        return usage();
                if (strcmp(argv[i], "--platform") == 0 && i + 1 < argc) {
                        o.platform = argv[++i];
                } else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
                        char *end;
                        long s = strtol(argv[++i], &end, 10);
                        if (*end || s < 1 || s > 3600)
                                return cmd_usage_error("fetch-image", "--timeout takes seconds from 1 to 3600");
                        o.stall_timeout_s = o.connect_timeout_s = (unsigned)s;
                } else if (strcmp(argv[i], "--") == 0) {
                        for (i++; i < argc && npos < 2; i++)
                                pos[npos++] = argv[i];
                        if (i < argc)
                                return cmd_usage_error("fetch-image", "too many arguments");
                } else if (argv[i][0] == '-') {
                        return cmd_usage_error("fetch-image", "unknown option \"%s\"", argv[i]);
                } else if (npos < 2) {
                        pos[npos++] = argv[i];
                } else {
                        return cmd_usage_error("fetch-image", "too many arguments");
                }
        }
        if (npos != 2)
                return cmd_usage_error("fetch-image", "expected an image reference and a directory");
        if (cm_config_load(&cfg, NULL, &err) < 0) {
                fprintf(stderr, "container-mcp fetch-image: %s\n", err.msg);
                cm_config_free(&cfg);
                return 1;
        }
        o.max_size = cfg.image_max_size;
        cm_config_free(&cfg);
        if (cm_image_ref_parse(pos[0], &ref, &err) < 0) {
                fprintf(stderr, "container-mcp fetch-image: %s\n", err.msg);
                return 2;
        }
        cancel.fd = cm_stop_fd();
        cmd_install_stop_signals();
        r = cm_registry_fetch(&ref, &o, pos[1], &progress, &cancel, &digest, &err);
        cm_image_ref_free(&ref);
        if (r < 0) {
                fprintf(stderr, "container-mcp fetch-image: %s\n", err.msg);
                return 1;
        }
        printf("%s\n", digest);
        return fflush(stdout) == 0 ? 0 : 1;
}
