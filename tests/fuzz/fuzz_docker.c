/* libFuzzer: an engine's bytes, which a hostile or broken engine controls:
 * the multiplexed exec/log stream (dk_demux_feed), tar archives of
 * copy_files from a container (dk_untar_feed, extracting into a scratch
 * directory), and the base64 of X-Docker-Container-Path-Stat.  Nothing may
 * crash, and nothing may ever appear outside the scratch directory (its
 * sibling stays empty), whatever the archive says. */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/docker/api.h"
#include "backend/docker/tar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char base[] = "/tmp/cm-fuzz-docker-XXXXXX";
static char *scratch, *sibling;

static void emit(int stream, const char *p, size_t n, void *arg) {
        size_t *total = arg;
        if (stream != 1 && stream != 2)
                abort();
        *total += n;
        if (n && !p)
                abort();
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f) {
        (void)st, (void)flag, (void)f;
        return remove(p) < 0 ? -1 : 0;
}

/* In process (a shell per input made the fuzzer a hundred times slower). */
static void empty_dir(const char *path) {
        (void)nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        if (mkdir(path, 0700) < 0)
                abort();
}

static bool dir_empty(const char *path) {
        DIR *d = opendir(path);
        struct dirent *de;
        bool empty = true;
        if (!d)
                return false;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        empty = false;
        closedir(d);
        return empty;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        size_t total = 0, split = size ? data[0] % 97 + 1 : 1, n = 0;
        cm_copy_stats st;
        cm_err err = CM_ERR_INIT;
        dk_demux dm = {.emit = emit, .arg = &total};
        char *text;

        if (!scratch) {
                if (!mkdtemp(base))
                        abort();
                scratch = malloc(strlen(base) + 8);
                sibling = malloc(strlen(base) + 8);
                strcpy(scratch, base), strcat(scratch, "/in");
                strcpy(sibling, base), strcat(sibling, "/out");
                empty_dir(sibling);
        }
        /* the stream, fed in pieces of one size */
        for (size_t i = 0; i < size; i += split)
                dk_demux_feed(&dm, (const char *)data + i, size - i < split ? size - i : split);
        if (total > size)
                abort();

        empty_dir(scratch);
        int dir = open(scratch, O_PATH | O_DIRECTORY | O_CLOEXEC);
        dk_untar *u = dk_untar_new(dir, "top", 1 << 20);
        for (size_t i = 0; i < size; i += split)
                if (dk_untar_feed(u, (const char *)data + i, size - i < split ? size - i : split) < 0)
                        break;
        (void)dk_untar_end(u, &st, &err);
        dk_untar_free(u);
        close(dir);
        if (!dir_empty(sibling))
                abort(); /* an entry escaped */

        text = malloc(size + 1);
        memcpy(text, data, size);
        text[size] = 0;
        free(dk_base64_decode(text, &n));
        free(text);
        return 0;
}
