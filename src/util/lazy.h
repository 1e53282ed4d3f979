/* Libraries loaded on first use.
 *
 * libcurl (and through it OpenSSL, Kerberos, LDAP, ...) and libmicrohttpd
 * (and GnuTLS) are only needed by some transports and backends.  Loading
 * them with dlopen() when first needed keeps a stdio server that never
 * talks to an engine or a registry small: about half the resident memory of
 * an idle server was these libraries' pages.
 *
 * Code that uses them includes this header after <curl/curl.h> or
 * <microhttpd.h>; the macros below turn each call into a call through the
 * table, which cm_curl_load()/cm_mhd_load() fill. */
#ifndef CM_LAZY_H
#define CM_LAZY_H

#include <stdbool.h>

#include "util/err.h"

/* Load a library and resolve `n` symbols into `slots` (function pointers,
 * in the order of `names`).  Thread-safe, idempotent: returns 0 once loaded,
 * else < 0 with err saying which library or symbol is missing and which
 * Debian package provides it. */
typedef struct cm_lazy_lib {
        const char *soname;  /* e.g. "libcurl.so.4" */
        const char *package; /* e.g. "libcurl4" */
        const char *const *names;
        void **slots;
        unsigned n;
        /* filled in */
        int state; /* 0 not tried, 1 loaded, -1 failed */
        char error[256];
} cm_lazy_lib;

int cm_lazy_load(cm_lazy_lib *lib, cm_err *err);

#ifdef CURLINC_CURL_H
typedef struct cm_curl_api {
        CURL *(*easy_init)(void);
        CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
        CURLcode (*easy_perform)(CURL *);
        CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
        void (*easy_cleanup)(CURL *);
        const char *(*easy_strerror)(CURLcode);
        struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
        void (*slist_free_all)(struct curl_slist *);
        CURLcode (*easy_send)(CURL *, const void *, size_t, size_t *);
        CURLcode (*easy_recv)(CURL *, void *, size_t, size_t *);
        /* the registry client's parallel downloads (src/image/registry_blob.c) */
        CURLM *(*multi_init)(void);
        CURLMcode (*multi_add_handle)(CURLM *, CURL *);
        CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
        CURLMcode (*multi_perform)(CURLM *, int *);
        CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd *, unsigned int, int, int *);
        CURLMsg *(*multi_info_read)(CURLM *, int *);
        CURLMcode (*multi_cleanup)(CURLM *);
} cm_curl_api;
extern cm_curl_api cm_curl;
int cm_curl_load(cm_err *err);
#ifndef CM_LAZY_IMPL
#define curl_easy_init cm_curl.easy_init
#undef curl_easy_setopt
#define curl_easy_setopt cm_curl.easy_setopt
#define curl_easy_perform cm_curl.easy_perform
#undef curl_easy_getinfo
#define curl_easy_getinfo cm_curl.easy_getinfo
#define curl_easy_cleanup cm_curl.easy_cleanup
#define curl_easy_strerror cm_curl.easy_strerror
#define curl_slist_append cm_curl.slist_append
#define curl_slist_free_all cm_curl.slist_free_all
#define curl_easy_send cm_curl.easy_send
#define curl_easy_recv cm_curl.easy_recv
#define curl_multi_init cm_curl.multi_init
#define curl_multi_add_handle cm_curl.multi_add_handle
#define curl_multi_remove_handle cm_curl.multi_remove_handle
#define curl_multi_perform cm_curl.multi_perform
#define curl_multi_poll cm_curl.multi_poll
#define curl_multi_info_read cm_curl.multi_info_read
#define curl_multi_cleanup cm_curl.multi_cleanup
#endif
#endif

#ifdef MHD_VERSION
typedef struct cm_mhd_api {
        struct MHD_Daemon *(*start_daemon)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
                                           MHD_AccessHandlerCallback, void *, ...);
        void (*stop_daemon)(struct MHD_Daemon *);
        struct MHD_Response *(*create_response_from_buffer)(size_t, void *, enum MHD_ResponseMemoryMode);
        struct MHD_Response *(*create_response_from_callback)(uint64_t, size_t, MHD_ContentReaderCallback, void *,
                                                              MHD_ContentReaderFreeCallback);
        enum MHD_Result (*add_response_header)(struct MHD_Response *, const char *, const char *);
        void (*destroy_response)(struct MHD_Response *);
        enum MHD_Result (*queue_response)(struct MHD_Connection *, unsigned int, struct MHD_Response *);
        const char *(*lookup_connection_value)(struct MHD_Connection *, enum MHD_ValueKind, const char *);
        const union MHD_ConnectionInfo *(*get_connection_info)(struct MHD_Connection *,
                                                               enum MHD_ConnectionInfoType, ...);
        void (*suspend_connection)(struct MHD_Connection *);
        void (*resume_connection)(struct MHD_Connection *);
} cm_mhd_api;
extern cm_mhd_api cm_mhd;
int cm_mhd_load(cm_err *err);
#ifndef CM_LAZY_IMPL
#define MHD_start_daemon cm_mhd.start_daemon
#define MHD_stop_daemon cm_mhd.stop_daemon
#define MHD_create_response_from_buffer cm_mhd.create_response_from_buffer
#define MHD_create_response_from_callback cm_mhd.create_response_from_callback
#define MHD_add_response_header cm_mhd.add_response_header
#define MHD_destroy_response cm_mhd.destroy_response
#define MHD_queue_response cm_mhd.queue_response
#define MHD_lookup_connection_value cm_mhd.lookup_connection_value
#define MHD_get_connection_info cm_mhd.get_connection_info
#define MHD_suspend_connection cm_mhd.suspend_connection
#define MHD_resume_connection cm_mhd.resume_connection
#endif
#endif

#endif
