/*
 * stats.c -- see stats.h.  A read sums the shards; it is not a snapshot of
 * one instant, which counters need not be.
 */
#include "stats.h"

uint64_t stats_sum(const stats *s, int id)
{
    uint64_t n = 0;

    for (int i = 0; i < METRICS_SLOTS; i++)
        n += atomic_load_explicit(&s->shard[i].n[id], memory_order_relaxed);
    return n;
}
