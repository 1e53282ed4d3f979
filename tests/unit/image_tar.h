/* Tarballs made with libarchive for the image tests: a list of entries
 * written (plain, gzip or zstd) into a memfd. */
#ifndef CM_TEST_IMAGE_TAR_H
#define CM_TEST_IMAGE_TAR_H

#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

typedef struct tar_ent {
        const char *path;
        mode_t type; /* AE_IFREG, AE_IFDIR, AE_IFLNK, AE_IFCHR... */
        mode_t mode;
        const char *data;     /* a file's bytes; a symlink's target */
        const char *hardlink; /* a hard link's target */
        unsigned uid, gid;
        size_t zeros;         /* a file of this many zero bytes instead of data */
} tar_ent;

static la_ssize_t tar_write_cb(struct archive *a, void *arg, const void *buf, size_t len) {
        (void)a;
        return write(*(int *)arg, buf, len);
}

/* A memfd holding the archive, at offset 0; filter: NULL, "gzip" or "zstd". */
static inline int tar_make(const tar_ent *v, size_t n, const char *filter) {
        int fd;
        struct archive *a = archive_write_new();
        static char zero[65536];

        fd = memfd_create("tar", MFD_CLOEXEC);
        (void)archive_write_set_format_pax_restricted(a);
        (void)archive_write_set_bytes_in_last_block(a, 1); /* no zero padding after a zstd frame */
        if (filter && strcmp(filter, "gzip") == 0)
                (void)archive_write_add_filter_gzip(a);
        else if (filter && strcmp(filter, "zstd") == 0)
                (void)archive_write_add_filter_zstd(a);
        (void)archive_write_open(a, &fd, NULL, tar_write_cb, NULL);
        for (size_t i = 0; i < n; i++) {
                struct archive_entry *e = archive_entry_new();
                size_t size = v[i].zeros ? v[i].zeros : v[i].type == AE_IFREG && v[i].data ? strlen(v[i].data) : 0;
                archive_entry_set_pathname(e, v[i].path);
                archive_entry_set_filetype(e, v[i].type);
                archive_entry_set_perm(e, v[i].mode ? v[i].mode : 0644);
                archive_entry_set_uid(e, v[i].uid);
                archive_entry_set_gid(e, v[i].gid);
                if (v[i].hardlink) {
                        archive_entry_set_hardlink(e, v[i].hardlink);
                        size = 0;
                }
                if (v[i].type == AE_IFLNK)
                        archive_entry_set_symlink(e, v[i].data);
                if (v[i].type == AE_IFCHR)
                        archive_entry_set_rdev(e, makedev(1, 3));
                archive_entry_set_size(e, (la_int64_t)size);
                (void)archive_write_header(a, e);
                if (v[i].zeros)
                        for (size_t done = 0; done < v[i].zeros; done += sizeof zero)
                                (void)archive_write_data(a, zero,
                                                         v[i].zeros - done < sizeof zero ? v[i].zeros - done : sizeof zero);
                else if (size)
                        (void)archive_write_data(a, v[i].data, size);
                archive_entry_free(e);
        }
        (void)archive_write_close(a);
        (void)archive_write_free(a);
        (void)lseek(fd, 0, SEEK_SET);
        return fd;
}

#endif
