/* The event log of one request stream: what makes a Streamable HTTP
 * response resumable (MCP 2025-11-25, Transports, "Resumability and
 * Redelivery").
 *
 * A worker that runs a request writes its messages to the log's sink, never
 * to a connection: the log keeps every event (bounded) and passes it on to
 * the connection reading it at the moment, its reader, if any.  A hang-up
 * only detaches the reader (disconnection is not cancellation: the call
 * runs on); a GET /mcp with Last-Event-ID attaches a new reader, which first
 * gets every kept event after that id, the final response included, then
 * what comes next.
 *
 * Event ids are "r<stream>-<seq>": <stream> unique in the process (so in
 * the session), <seq> counting the events of that stream from 1.  Event 0
 * is the priming event (an id and empty data) sent as soon as the stream
 * opens, so a client that loses the connection before the first message
 * still has an id to resume from. */
#ifndef CM_HTTP_LOG_H
#define CM_HTTP_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcp/mcp.h"
#include "transport/http_sse.h"

typedef struct http_log http_log;

/* A new log with one reference. */
http_log *http_log_new(void);
void http_log_ref(http_log *g);
void http_log_unref(http_log *g);

/* The sink the worker writes to; ref/unref act on the log. */
mcp_sink *http_log_sink(http_log *g);
uint64_t http_log_stream(http_log *g);

/* Parse "r<stream>-<seq>".  False when `id` is not of that form. */
bool http_log_parse_id(const char *id, uint64_t *ret_stream, uint64_t *ret_seq);

/* Make `q` the reader: it gets every kept event after `after` (-1: the
 * priming event and all), then the events to come; once the log is finished
 * and all is written, q ends.  A previous reader is ended. */
void http_log_attach(http_log *g, cm_sse *q, int64_t after);
/* Undo http_log_attach when `q` is still the reader (its connection closed). */
void http_log_detach(http_log *g, cm_sse *q);

/* No more events: the reader ends once it has written what is queued. */
void http_log_finish(http_log *g);

/* The bytes every log of the process keeps: past a budget the sessions
 * forget their ended logs at once instead of after the replay time. */
size_t http_log_total_bytes(void);

/* A response (or error) was logged. */
bool http_log_responded(http_log *g);
/* Finished, with nothing kept after seq `after`: the client has it all. */
bool http_log_done_after(http_log *g, int64_t after);
/* Finished, and when (monotonic ms); false while running. */
bool http_log_finished_at(http_log *g, int64_t *ret_ms);

#endif
