/*
 * stats.h -- the limiter's counters behind rl_stats_get(): how checks were
 * decided.  Counted on the request path, so they are sharded per thread
 * (one cache line per shard, see thread_shard()) and summed on read.
 */
#ifndef RL_STATS_H
#define RL_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "rcu.h"

enum stat_id {
    ST_CHECKS, ST_ALLOWED, ST_DENIED, ST_SOFT, ST_FAIL_OPEN, ST_FALLBACK,
    ST_FAIL_CLOSED, ST_STORE_ERRORS, ST_COUNT
};

typedef struct stats {
    struct {
        _Atomic uint64_t n[ST_COUNT];
    } __attribute__((aligned(64))) shard[RCU_SHARDS];
} stats;

static inline void stats_add(stats *s, int id)
{
    atomic_fetch_add_explicit(&s->shard[thread_shard()].n[id], 1,
                              memory_order_relaxed);
}

uint64_t stats_sum(const stats *s, int id);

#endif
