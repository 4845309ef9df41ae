/*
 * stats.h -- the limiter's counters behind rl_stats_get(): how checks were
 * decided.  Counted on the request path, so they are slotted per thread
 * as metrics.h's are: a thread counts in the slot it owns
 * (metrics_self()), one cache line no other thread writes, with a plain
 * load and store (no locked instruction: two of them per check cost the
 * memory store ~2 x 20 cycles and fenced its cache misses apart); threads
 * beyond the owned slots share the last one with atomic adds.  A read
 * sums the slots.
 */
#ifndef RL_STATS_H
#define RL_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "metrics.h"

enum stat_id {
    ST_CHECKS, ST_ALLOWED, ST_DENIED, ST_SOFT, ST_FAIL_OPEN, ST_FALLBACK,
    ST_FAIL_CLOSED, ST_STORE_ERRORS, ST_COUNT
};

typedef struct stats {
    struct {
        _Atomic uint64_t n[ST_COUNT];
    } __attribute__((aligned(64))) shard[METRICS_SLOTS];
} stats;

static inline void stats_add(stats *s, int id)
{
    unsigned slot = metrics_self()->slot;

    metrics_add(&s->shard[slot].n[id], slot, 1);
}

uint64_t stats_sum(const stats *s, int id);

#endif
