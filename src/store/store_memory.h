/*
 * store_memory.h -- the in-process store: the embedded default, and
 * the local fallback when Redis is away.
 */
#ifndef RL_STORE_MEMORY_H
#define RL_STORE_MEMORY_H

#include "clock.h"
#include "store.h"

int store_memory_new(const store_options *opt, rl_store **out, char *err,
                     size_t errlen);

/* For tests and benchmarks: replace the clock; read the footprint. */
void store_memory_set_clock(rl_store *s, rl_clock_fn fn, void *arg);

typedef struct store_memory_stats {
    int64_t slots;      /* occupied slots, live or expired              */
    int64_t capacity;   /* slots allocated                              */
    int64_t bytes;      /* bytes allocated for slots and segments       */
    int64_t evictions;  /* live entries dropped because of the cap      */
    int64_t seg_max;    /* occupied slots of the fullest segment        */
    int64_t displacement; /* slots passed over finding every entry: a
                             look-up costs 1 + displacement / slots on
                             average                                    */
} store_memory_stats;

#define STORE_MEMORY_SEGMENTS 256 /* seg_max against slots / this */

void store_memory_stats_get(rl_store *s, store_memory_stats *st);

#endif
