/* Stop requests shared by every transport: a signal handler writes to a
 * pipe, which every poll() loop watches. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

#include "transport/transport.h"

static int stop_pipe[2] = {-1, -1};
static atomic_bool stopping;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void make_pipe(void) {
        if (pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
                abort();
}

int cm_stop_fd(void) {
        (void)pthread_once(&once, make_pipe);
        return stop_pipe[0];
}

void cm_request_stop(void) {
        /* Async-signal-safe: the pipe exists (main calls cm_stop_fd before
         * installing handlers), so only an atomic store and a write happen. */
        atomic_store(&stopping, true);
        if (stop_pipe[1] >= 0)
                (void)!write(stop_pipe[1], "x", 1);
}

bool cm_stop_requested(void) { return atomic_load(&stopping); }
