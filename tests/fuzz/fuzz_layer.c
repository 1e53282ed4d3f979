/* libFuzzer: arbitrary bytes as a layer (gzip, zstd or plain tar) unpacked
 * into a fresh directory, in the store's form and applied.  Nothing may
 * crash, and nothing may land outside the directory: it is unpacked below
 * a bait directory that must stay holding exactly that one child. */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/layer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int children(const char *dir) {
        DIR *d = opendir(dir);
        struct dirent *de;
        int n = 0;
        while (d && (de = readdir(d)))
                n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
        if (d)
                closedir(d);
        return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static char base[] = "/tmp/cm-fuzz-layer-XXXXXX";
        static bool made;
        char dst[64];
        int src, fd;

        if (!made && !mkdtemp(base))
                abort();
        made = true;
        (void)snprintf(dst, sizeof dst, "%s/d", base);
        src = memfd_create("layer", MFD_CLOEXEC);
        if (src < 0 || write(src, data, size) != (ssize_t)size)
                abort();
        for (int mode = UNPACK_LAYER; mode <= UNPACK_APPLY; mode++) {
                img_unpack_opts o = {(enum img_unpack_mode)mode, {0}, 8 << 20, NULL};
                img_unpack_result res;
                cm_err err = CM_ERR_INIT;
                (void)lseek(src, 0, SEEK_SET);
                if (mkdir(dst, 0700) < 0 || (fd = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
                        abort();
                if (img_unpack(src, fd, &o, &res, &err) < 0 && !err.msg[0])
                        abort(); /* every failure says why */
                (void)close(fd);
                if (children(base) != 1)
                        abort(); /* something escaped next to dst */
                fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                img_remove_at(fd, "d");
                (void)close(fd);
        }
        (void)close(src);
        return 0;
}
