/* Shared between the files of the MCP layer only. */
#ifndef CM_MCP_INTERNAL_H
#define CM_MCP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "mcp/mcp.h"

typedef struct reg_tool {
        const char *name; /* in listing */
        mcp_tool_fn handler;
        bool quick;
        json_t *input;   /* inputSchema, in listing */
        json_t *output;  /* outputSchema or NULL, in listing */
        json_t *listing; /* the tools/list entry, built once */
} reg_tool;

struct mcp_server {
        char *name, *version, *instructions;
        unsigned page_size;
        size_t max_message;
        void *userdata;
        reg_tool *tools;
        size_t n_tools;
};

/* How a call ends early.  The state leaves CALL_LIVE at most once. */
enum call_state {
        CALL_LIVE,
        CALL_CANCELLED, /* by the client, or its sink is gone: no reply */
        CALL_ABANDONED, /* by the server (shutdown, session dropped): an error reply */
};

struct mcp_call {
        mcp_session *session;
        json_t *id;             /* the request id */
        json_t *progress_token; /* or NULL */
        json_t *meta;           /* params._meta when an object, or NULL */
        mcp_sink *out;
        atomic_int state;       /* enum call_state */
        int abandon_code;       /* written before state becomes CALL_ABANDONED */
        char *abandon_msg;
        int cancel_fd;          /* eventfd, created on demand; -1 */
        struct mcp_call *next;
};

/* A message accepted in reading order: the tools/call requests it holds, in
 * message order, are registered with the session from the start. */
struct mcp_job {
        mcp_session *session;
        json_t *msg;
        mcp_sink *out;
        size_t n_calls, next_call; /* next_call: the next one handle() takes */
        mcp_call *calls[];
};

/* An object of a layer above, destroyed with the session. */
typedef struct mcp_attachment {
        const void *key;
        void *data;
        mcp_attach_destroy_fn destroy;
        struct mcp_attachment *next;
} mcp_attachment;

#define EARLY_CANCELS 32

enum session_state { SESSION_NEW, SESSION_INITIALIZING, SESSION_READY };

struct mcp_session {
        mcp_server *srv;
        atomic_int refs;
        pthread_mutex_t lock;
        char id[33];
        enum session_state state;
        char version[16];
        char *client_name;
        char *client_version;
        atomic_int log_level; /* index into log_levels */
        mcp_sink *notify;
        struct mcp_call *calls; /* in flight, under lock */
        /* Ids of the last EARLY_CANCELS cancels that named no call in flight
         * (a notification may overtake its request on another HTTP
         * connection): a call that begins with one of them is cancelled
         * before its tool runs.  Under lock; a ring, oldest overwritten. */
        json_t *early_cancels[EARLY_CANCELS];
        unsigned early_next;
        mcp_attachment *attached; /* under lock */
};

/* jsonrpc.c */
void mcp_send(mcp_sink *out, json_t *msg); /* steals msg */
void mcp_send_result(mcp_sink *out, const json_t *id, json_t *result); /* steals result */
int mcp_log_level_index(const char *name);
/* True when a string anywhere in `v` holds a NUL (\u0000). */
bool mcp_json_has_nul(const json_t *v);
extern const char *const mcp_log_levels[];

/* server.c: the methods that only need the server */
json_t *mcp_server_list_tools(mcp_server *srv, const json_t *params, int *ret_code, char **ret_msg);
const reg_tool *mcp_server_find_tool(mcp_server *srv, const char *name);
json_t *mcp_server_call_tool(mcp_server *srv, const reg_tool *t, mcp_call *call, json_t *args);

/* session.c */
/* Move a live call to `how` (CALL_CANCELLED or CALL_ABANDONED) and wake its
 * cancel fd; false when it had already left CALL_LIVE. */
bool mcp_call_mark(mcp_call *c, enum call_state how);

#endif
