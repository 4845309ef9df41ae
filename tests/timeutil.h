/*
 * timeutil.h -- the clock helpers every suite and harness that waits
 * for a condition uses: a monotonic millisecond clock, a sleep, and the
 * wall clock for suites that line their checks up with real windows.
 */
#ifndef RL_TIMEUTIL_H
#define RL_TIMEUTIL_H

#include <stdint.h>
#include <time.h>

/* Milliseconds on CLOCK_MONOTONIC. */
static inline int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds since the epoch on CLOCK_REALTIME. */
static inline int64_t real_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

#endif
