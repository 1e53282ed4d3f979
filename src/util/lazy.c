#define CM_LAZY_IMPL
#include <curl/curl.h>
#include <microhttpd.h>

#include "util/lazy.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t lazy_lock = PTHREAD_MUTEX_INITIALIZER;

int cm_lazy_load(cm_lazy_lib *lib, cm_err *err) {
        void *h;
        (void)pthread_mutex_lock(&lazy_lock);
        if (lib->state == 0) {
                lib->state = -1;
                h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
                if (!h) {
                        (void)snprintf(lib->error, sizeof lib->error, "cannot load %s (%s); install the Debian package %s",
                                       lib->soname, dlerror(), lib->package);
                } else {
                        lib->state = 1;
                        for (unsigned i = 0; i < lib->n && lib->state == 1; i++) {
                                lib->slots[i] = dlsym(h, lib->names[i]);
                                if (!lib->slots[i]) {
                                        (void)snprintf(lib->error, sizeof lib->error,
                                                       "%s lacks %s; install a current %s", lib->soname,
                                                       lib->names[i], lib->package);
                                        lib->state = -1;
                                }
                        }
                        /* The handle stays open for the life of the process. */
                }
        }
        (void)pthread_mutex_unlock(&lazy_lock);
        if (lib->state < 0)
                return cm_err_set(err, ENOENT, "%s", lib->error);
        return 0;
}

cm_curl_api cm_curl;
static const char *const curl_names[] = {"curl_easy_init",    "curl_easy_setopt",   "curl_easy_perform",
                                         "curl_easy_getinfo", "curl_easy_cleanup",  "curl_easy_strerror",
                                         "curl_slist_append", "curl_slist_free_all", "curl_easy_send",
                                         "curl_easy_recv",    "curl_multi_init",    "curl_multi_add_handle",
                                         "curl_multi_remove_handle", "curl_multi_perform", "curl_multi_poll",
                                         "curl_multi_info_read", "curl_multi_cleanup"};
static cm_lazy_lib curl_lib = {"libcurl.so.4", "libcurl4", curl_names, (void **)&cm_curl,
                               sizeof curl_names / sizeof curl_names[0], 0, {0}};

int cm_curl_load(cm_err *err) { return cm_lazy_load(&curl_lib, err); }

cm_mhd_api cm_mhd;
static const char *const mhd_names[] = {
        "MHD_start_daemon",           "MHD_stop_daemon",         "MHD_create_response_from_buffer",
        "MHD_create_response_from_callback", "MHD_add_response_header", "MHD_destroy_response",
        "MHD_queue_response",         "MHD_lookup_connection_value", "MHD_get_connection_info",
        "MHD_suspend_connection",     "MHD_resume_connection"};
static cm_lazy_lib mhd_lib = {"libmicrohttpd.so.12", "libmicrohttpd12", mhd_names, (void **)&cm_mhd,
                              sizeof mhd_names / sizeof mhd_names[0], 0, {0}};

int cm_mhd_load(cm_err *err) { return cm_lazy_load(&mhd_lib, err); }

_Static_assert(sizeof(cm_curl_api) == sizeof curl_names / sizeof curl_names[0] * sizeof(void *),
               "cm_curl_api and curl_names must list the same functions");
_Static_assert(sizeof(cm_mhd_api) == sizeof mhd_names / sizeof mhd_names[0] * sizeof(void *),
               "cm_mhd_api and mhd_names must list the same functions");
