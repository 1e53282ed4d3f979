/* `container-mcp proxy`'s relay: newline-delimited JSON-RPC on stdio (what
 * an MCP client that launches a server speaks) to Streamable HTTP on the
 * daemon's Unix socket.
 *
 * - Each message from the client is one POST to /mcp; its replies (a JSON
 *   body, or the events of a streamed reply: progress, log messages, then
 *   the response) go to stdout as they come.  Requests run in their own
 *   threads, so a long tools/call never holds up a ping or a cancel;
 *   notifications and responses are sent in reading order.
 * - initialize's Mcp-Session-Id and protocol version go with every later
 *   request; right after it, a GET /mcp stream carries the server's own
 *   messages, opened with "Container-MCP-Session-Ends: with-stream" so the
 *   daemon ends the session when that stream's connection closes: a proxy
 *   killed by SIGKILL leaves no session (and no session sandbox) behind.
 * - EOF on stdin, or SIGTERM/SIGHUP/SIGINT: DELETE the session (its calls
 *   are cancelled, its sandbox removed), then return.  The daemon ending
 *   the session (a stop) ends the relay with an error.
 * - A request the daemon answers with an HTTP error, or that cannot reach
 *   it, gets a JSON-RPC error with its id, so the client never waits for a
 *   reply that cannot come. */
#ifndef CM_DAEMON_RELAY_H
#define CM_DAEMON_RELAY_H

#include "util/err.h"

typedef struct cm_relay_opts {
        const char *socket_path;
        const char *token; /* Authorization: Bearer, or NULL */
        int in_fd, out_fd;
} cm_relay_opts;

/* Returns 0 when the client went away or a signal came (the session
 * ended), -1 with err set when the daemon went away first. */
int cm_relay_run(const cm_relay_opts *o, cm_err *err);

#endif
