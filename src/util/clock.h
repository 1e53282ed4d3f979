/* The one monotonic clock every deadline and idle timer reads. */
#ifndef CM_CLOCK_H
#define CM_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Milliseconds of CLOCK_MONOTONIC: for intervals, never wall time. */
static inline int64_t cm_now_ms(void) {
        struct timespec ts;
        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
