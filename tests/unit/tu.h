/* Small helpers the unit tests share. */
#ifndef CM_TU_H
#define CM_TU_H

#include <ftw.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>

#include "../tap.h"

static inline int tu_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void)st, (void)flag, (void)ftw;
        return remove(path) < 0 ? -1 : 0;
}

/* rm -rf without a shell; `keep_top` leaves `dir` itself (emptied). */
static inline void tu_rm_rf(const char *dir, int keep_top) {
        (void)nftw(dir, tu_rm_one, 16, FTW_DEPTH | FTW_PHYS);
        if (keep_top)
                (void)mkdir(dir, 0700);
}

/* Run a cmocka group in a fresh temp dir (template like "/tmp/cm-x-XXXXXX"),
 * removed afterwards. */
#define TU_RUN_IN_TMP(tmp, tests)                                                                                      \
        do {                                                                                                           \
                int tu_r;                                                                                              \
                if (!mkdtemp(tmp))                                                                                     \
                        return 1;                                                                                      \
                tu_r = cmocka_run_group_tests(tests, NULL, NULL);                                                      \
                tu_rm_rf(tmp, 0);                                                                                      \
                return tu_r;                                                                                           \
        } while (0)

#endif
