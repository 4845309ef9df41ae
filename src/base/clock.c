/*
 * clock.c -- see clock.h.  Tests replace the clock function to drive time
 * by hand; the library itself only ever uses the monotonic one.
 */
#include "clock.h"

#include <time.h>

static int64_t ms_of(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void clock_init(rl_clock *c)
{
    c->fn = NULL;
    c->arg = NULL;
    c->offset_ms = ms_of(CLOCK_REALTIME) - ms_of(CLOCK_MONOTONIC);
}

int64_t clock_now_ms(const rl_clock *c)
{
    if (c->fn)
        return c->fn(c->arg);
    return ms_of(CLOCK_MONOTONIC) + c->offset_ms;
}

int64_t clock_mono_ms(void)
{
    return ms_of(CLOCK_MONOTONIC);
}

int64_t clock_wall_ms(void)
{
    return ms_of(CLOCK_REALTIME);
}

int64_t clock_mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
