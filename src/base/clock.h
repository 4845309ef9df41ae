/*
 * clock.h -- the memory store's clock: CLOCK_MONOTONIC plus one wall-clock
 * offset taken at start, in milliseconds since the Unix epoch.  Monotonic so
 * a wall-clock step (NTP, an operator) cannot refill buckets or reopen
 * windows; anchored to the epoch so reset times mean something to clients.
 */
#ifndef RL_CLOCK_H
#define RL_CLOCK_H

#include <stdint.h>

typedef int64_t (*rl_clock_fn)(void *arg);

typedef struct rl_clock {
    rl_clock_fn fn;      /* NULL: the real clock */
    void *arg;
    int64_t offset_ms;   /* wall - monotonic, at clock_init() */
} rl_clock;

void clock_init(rl_clock *c);
int64_t clock_now_ms(const rl_clock *c);

/* Plain readings, in ms: CLOCK_MONOTONIC (deadlines, intervals) and
 * CLOCK_REALTIME (times reported to people). */
int64_t clock_mono_ms(void);
int64_t clock_wall_ms(void);

/* CLOCK_MONOTONIC in ns: the deadlines of the Redis I/O layer. */
int64_t clock_mono_ns(void);

#endif
