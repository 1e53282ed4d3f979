/* `container-mcp image pull|import|build|list|rm|prune` (and `container-mcp pull`):
 * the native image store from the command line, through the native backend's own image operations
 * (so "in use" and the owners of unpacked files are the server's). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/native/native.h"
#include "cmd/cmd.h"
#include "policy/config.h"
#include "transport/transport.h"
#include "util/cleanup.h"
#include "util/log.h"

static void usage(FILE *f) {
        fprintf(f, "Usage: container-mcp image COMMAND\n\n"
                   "The native runtime's image store (under the state dir: CONTAINER_MCP_STATE_DIR).\n\n"
                   "  pull REF [--platform OS/ARCH[/VARIANT]]\n"
                   "                          pull REF (alpine, host:5000/repo:tag, name@sha256:...) from its\n"
                   "                          registry for this machine's platform or --platform; a pull\n"
                   "                          that stops (Ctrl-C, a lost connection) resumes when run again\n"
                   "  import FILE|DIR [NAME]  import an OCI image layout (directory or tar), a docker/podman\n"
                   "                          save archive, or a root file system tarball (.tar, .tar.gz,\n"
                   "                          .tar.zst), under NAME (e.g. busybox, myimage:1.0)\n"
                   "  build DIR [-t NAME] [-f DOCKERFILE] [--build-arg K=V]...\n"
                   "                          build the Dockerfile of the context DIR (the README's\n"
                   "                          native builder part says which instructions)\n"
                   "  list                    the images: names, id, size, created, in use\n"
                   "  rm NAME [--force]       remove an image (refused while a container uses it,\n"
                   "                          unless --force: then it goes when the container does)\n"
                   "  prune [--all]           remove unnamed unused images (--all: every unused one)\n"
                   "                          and every layer no image needs; prints the bytes reclaimed\n\n"
                   "CONTAINER_MCP_IMAGE_MAX_SIZE caps one image's size (default 8g). Registry credentials:\n"
                   "CONTAINER_MCP_REGISTRY_AUTH or ~/.docker/config.json (see the README's Registries part).\n");
}

static void human(uint64_t bytes, char ret[32]) {
        static const char *const units[] = {"B", "KB", "MB", "GB", "TB"};
        double v = (double)bytes;
        size_t u = 0;
        while (v >= 1000 && u + 1 < sizeof units / sizeof units[0]) {
                v /= 1000;
                u++;
        }
        (void)snprintf(ret, 32, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

static void progress(void *arg, const char *what, uint64_t done, uint64_t total) {
        (void)arg;
        if (total)
                fprintf(stderr, "%s (%" PRIu64 "/%" PRIu64 ")\n", what, done, total);
        else if (done == 0)
                fprintf(stderr, "%s\n", what);
}

static void print_image(const char *what, const cm_image_info *info) {
        char size[32];
        human(info->size, size);
        printf("%s %s (%s, id %.19s)\n", what, info->n_names ? info->names[0] : "(no name)", size, info->id);
        for (size_t i = 1; i < info->n_names; i++)
                printf("  also named %s\n", info->names[i]);
}

static int do_pull(cm_backend *b, int argc, char **argv, cm_err *err) {
        cm_image_progress prog = {progress, NULL};
        cm_cancel cancel = {cm_stop_fd()};
        cm_image_info info = {0};
        const char *ref = NULL, *platform = NULL;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--platform") == 0 && i + 1 < argc)
                        platform = argv[++i];
                else if (!ref && argv[i][0] != '-')
                        ref = argv[i];
                else
                        return cmd_usage_error("image", "pull takes REF and an optional --platform OS/ARCH");
        }
        if (!ref)
                return cmd_usage_error("image", "pull needs an image reference, like busybox or host:5000/repo:tag");
        /* Ctrl-C stops the pull; the next one resumes it */
        cmd_install_stop_signals();
        cm_pull_spec spec = {.ref = ref, .platform = platform, .progress = &prog};
        if (b->ops->image_pull(b, &spec, &cancel, &info, err) < 0)
                return -1;
        print_image("pulled", &info);
        cm_image_info_clear(&info);
        return 0;
}

static int do_import(cm_backend *b, int argc, char **argv, cm_err *err) {
        cleanup_free char *real = NULL, *root = NULL;
        const char *rel;
        char *slash;
        cm_image_progress prog = {progress, NULL};
        cm_host_path hp;
        cm_pull_spec spec = {0};
        cm_image_info info = {0};

        if (argc < 2 || argc > 3)
                return cmd_usage_error("image", "import takes FILE|DIR and an optional NAME");
        real = realpath(argv[1], NULL);
        if (!real)
                return cm_err_sys(err, errno, "%s", argv[1]);
        slash = strrchr(real, '/');
        root = slash == real ? xstrdup("/") : xstrndup(real, (size_t)(slash - real));
        rel = slash + 1;
        hp = (cm_host_path){root, rel};
        spec = (cm_pull_spec){.ref = argc == 3 ? argv[2] : NULL, .import = &hp, .progress = &prog};
        if (b->ops->image_pull(b, &spec, NULL, &info, err) < 0)
                return -1;
        print_image("imported", &info);
        cm_image_info_clear(&info);
        return 0;
}

static int do_list(cm_backend *b, cm_err *err) {
        cm_image_info *v = NULL;
        size_t n = 0;

        if (b->ops->image_list(b, &v, &n, err) < 0)
                return -1;
        printf("%-50s  %-12s  %-10s  %-19s  %s\n", "NAME", "ID", "SIZE", "CREATED", "IN USE");
        for (size_t i = 0; i < n; i++) {
                char size[32], when[32] = "-";
                time_t t = (time_t)v[i].created;
                struct tm tm;
                human(v[i].size, size);
                if (t > 0)
                        (void)strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", gmtime_r(&t, &tm));
                for (size_t k = 0; k < (v[i].n_names ? v[i].n_names : 1); k++)
                        printf("%-50s  %-12.12s  %-10s  %-19s  %s\n", v[i].n_names ? v[i].names[k] : "<none>",
                               v[i].id + 7, size, when, v[i].in_use ? "yes" : "no");
        }
        cm_image_infos_free(v, n);
        return 0;
}

static int do_rm(cm_backend *b, int argc, char **argv, cm_err *err) {
        bool force = false;
        const char *name = NULL;
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--force") == 0 || strcmp(argv[i], "-f") == 0)
                        force = true;
                else if (!name && argv[i][0] != '-')
                        name = argv[i];
                else
                        return cmd_usage_error("image", "rm takes NAME and an optional --force");
        }
        if (!name)
                return cmd_usage_error("image", "rm needs the NAME of an image");
        if (b->ops->image_remove(b, name, force, err) < 0)
                return -1;
        printf("removed %s\n", name);
        return 0;
}

static int do_prune(cm_backend *b, int argc, char **argv, cm_err *err) {
        cm_prune_result r;
        char size[32];
        bool all = argc == 2 && strcmp(argv[1], "--all") == 0;
        if (argc > 2 || (argc == 2 && !all))
                return cmd_usage_error("image", "prune takes only --all");
        if (b->ops->image_prune(b, all, &r, err) < 0)
                return -1;
        human(r.reclaimed, size);
        printf("removed %zu image(s), reclaimed %s (%" PRIu64 " bytes)\n", r.images, size, r.reclaimed);
        return 0;
}

/* The command line is the operator's: any registry. */
static int any_registry(void *arg, const char *ref, cm_err *err) {
        (void)arg, (void)ref, (void)err;
        return 0;
}

static int do_build(cm_backend *b, int argc, char **argv, cm_err *err) {
        cleanup_free char *real = NULL, *root = NULL;
        cleanup_free cm_kv *args = xcalloc((size_t)argc, sizeof *args);
        const char *dir = NULL, *tag = NULL, *file = NULL;
        size_t n_args = 0;
        char *slash;
        cm_image_progress prog = {progress, NULL};
        cm_cancel cancel = {cm_stop_fd()};
        cm_image_info info = {0};
        cm_host_path hp;

        for (int i = 1; i < argc; i++) {
                if ((strcmp(argv[i], "-t") == 0 || strcmp(argv[i], "--tag") == 0) && i + 1 < argc)
                        tag = argv[++i];
                else if ((strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--file") == 0) && i + 1 < argc)
                        file = argv[++i];
                else if (strcmp(argv[i], "--build-arg") == 0 && i + 1 < argc && strchr(argv[i + 1], '=')) {
                        char *kv = argv[++i], *eq = strchr(kv, '=');
                        *eq = 0;
                        args[n_args++] = (cm_kv){kv, eq + 1};
                } else if (!dir && argv[i][0] != '-')
                        dir = argv[i];
                else
                        return cmd_usage_error("image", "build takes DIR, -t NAME, -f DOCKERFILE, --build-arg K=V");
        }
        if (!dir)
                return cmd_usage_error("image", "build needs the context directory");
        real = realpath(dir, NULL);
        if (!real)
                return cm_err_sys(err, errno, "%s", dir);
        slash = strrchr(real, '/');
        root = slash == real ? xstrdup("/") : xstrndup(real, (size_t)(slash - real));
        hp = (cm_host_path){root, slash + 1};
        cmd_install_stop_signals();
        cm_build_spec spec = {.context = &hp,
                              .dockerfile = file,
                              .tag = tag,
                              .build_args = args,
                              .n_build_args = n_args,
                              .progress = &prog,
                              .allow_pull = any_registry,
                              .pids = 512};
        if (b->ops->image_build(b, &spec, &cancel, &info, err) < 0)
                return -1;
        print_image("built", &info);
        cm_image_info_clear(&info);
        return 0;
}

int cmd_image(int argc, char **argv) {
        cm_config cfg;
        cm_err err = CM_ERR_INIT;
        cm_backend *b;
        const char *sub = argc > 1 ? argv[1] : NULL;
        int r;

        if (!sub || strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
                usage(sub ? stdout : stderr);
                return sub ? 0 : 2;
        }
        if (strcmp(sub, "pull") && strcmp(sub, "import") && strcmp(sub, "list") && strcmp(sub, "ls") &&
            strcmp(sub, "rm") && strcmp(sub, "prune") && strcmp(sub, "build"))
                return cmd_usage_error("image", "unknown command \"%s\"", sub);
        /* the settings are checked as the server checks them */
        if (cm_config_load(&cfg, NULL, &err) < 0) {
                log_error("%s", err.msg);
                cm_config_free(&cfg);
                return 1;
        }
        cm_config_free(&cfg);
        b = cm_native_open();
        if (strcmp(sub, "pull") == 0)
                r = do_pull(b, argc - 1, argv + 1, &err);
        else if (strcmp(sub, "import") == 0)
                r = do_import(b, argc - 1, argv + 1, &err);
        else if (strcmp(sub, "build") == 0)
                r = do_build(b, argc - 1, argv + 1, &err);
        else if (strcmp(sub, "list") == 0 || strcmp(sub, "ls") == 0)
                r = argc == 2 ? do_list(b, &err) : cmd_usage_error("image", "list takes no arguments");
        else if (strcmp(sub, "rm") == 0)
                r = do_rm(b, argc - 1, argv + 1, &err);
        else
                r = do_prune(b, argc - 1, argv + 1, &err);
        b->ops->free(b);
        if (r == 2)
                return 2;
        if (r < 0) {
                fprintf(stderr, "container-mcp image %s: %s\n", sub, err.msg);
                return 1;
        }
        return 0;
}

/* `container-mcp pull REF` is `container-mcp image pull REF`. */
int cmd_pull(int argc, char **argv) {
        cleanup_free char **v = xcalloc((size_t)argc + 2, sizeof *v);
        v[0] = (char *)"image";
        v[1] = (char *)"pull";
        for (int i = 1; i < argc; i++)
                v[i + 1] = argv[i];
        if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
                usage(stdout);
                return 0;
        }
        return cmd_image(argc + 1, v);
}
