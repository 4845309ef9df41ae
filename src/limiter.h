/*
 * limiter.h -- the limiter handle, for the library's own files and tests.
 */
#ifndef RL_LIMITER_H
#define RL_LIMITER_H

#include <pthread.h>

#include "metrics.h"
#include "rcu.h"
#include "ratelimit.h"
#include "rules_load.h"
#include "ruleset.h"
#include "stats.h"
#include "store.h"

struct rl_limiter {
    rcu rules;                 /* the current rl_ruleset, read lock-free */
    pthread_mutex_t load_lock; /* serialises rule loads                  */
    rl_store *store;
    rl_store *fallback;        /* memory store for rules in mode fallback,
                                  when a remote store fails; else NULL   */
    metrics_conf mconf;        /* options metrics, near_limit_pct: read
                                  by every check, beside store           */
    _Atomic int64_t fleet_size; /* the fallback allows limit / fleet_size;
                                   counted by heartbeats with "auto"     */
    stats counts;              /* behind rl_stats_get()                  */
    metrics_hist *latency;     /* behind rl_metrics_write(): checks' time;
                                  NULL with metrics off (metrics.h)      */
    struct events *events;     /* rejection events (events.h), or NULL   */
    struct deny_cache *deny;   /* Redis's denials kept (deny_cache.h), or
                                  NULL: option deny_cache 0, memory store */
    struct lease_table *lease; /* rules' leases (lease.h), or NULL:
                                  option lease_entries 0, a store
                                  without give_back                   */
    rules_state rstate;        /* behind rl_rules_status_get()           */
    struct rules_source *source; /* option rules_source's thread, or NULL */
    uint64_t layout_key[2];    /* option hash_key, parsed                */
    int keyed_layout;          /* 1: hash_key is set                     */
    const char *log_refused;   /* why the store cannot keep a
                                  sliding_log rule's log; NULL: it can   */
    rl_log_fn *log_fn;         /* what the library says on its own;
                                  NULL: silent                           */
    void *log_arg;
};

/* Tests reach the store to drive its clock. */
rl_store *limiter_store(rl_limiter *lim);

#endif
