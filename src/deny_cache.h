/*
 * deny_cache.h -- denials Redis gave, answered locally until they end.
 *
 * An abusive client keeps asking after Redis said "not before T"; until T
 * every answer is the same denial, so a limiter on a remote store keeps
 * the (client key, rule) pairs Redis denied and answers their requests
 * itself (RL_FLAG_CACHED).  A fixed table of slots allocated at start
 * (option deny_cache: its entries, 0: none), direct-mapped by a SipHash
 * fingerprint under a key random to the limiter, each slot a seqlock of
 * atomics: no allocation, no lock, a torn or lost entry is just a miss.
 * The fingerprint covers the rule's id and numbers (algorithm, limit,
 * burst, window), so a rule-set swap that changes a rule never serves a
 * denial made under its old numbers.
 */
#ifndef RL_DENY_CACHE_H
#define RL_DENY_CACHE_H

#include "algo.h"
#include "store.h"

#include <stddef.h>
#include <stdint.h>

typedef struct deny_cache deny_cache;

/* A table of about `entries` slots (rounded up to a power of two), or
 * NULL when out of memory. */
deny_cache *deny_cache_new(size_t entries);
void deny_cache_free(deny_cache *c);

/* Op's charge had the denial d from the store, whose clock read
 * now_store (epoch ms), at local monotonic time now_mono (ms): remember it
 * until now_mono + d->retry_ms, with the reset the store reports (never
 * before its retry: now_store + d->retry_ms).  Only denials of enforced
 * rules with a cost above 0 are kept. */
void deny_cache_put(deny_cache *c, const store_op *op,
                    const algo_decision *d, int64_t now_mono,
                    int64_t now_store);

/* Is op's charge denied by a live entry (one whose cost was no more than
 * op's)?  1 with *d the denial as the store would give it now (remaining
 * 0, retry_ms counted down to the end, the stored reset_ms); else 0. */
int deny_cache_get(deny_cache *c, const store_op *op, int64_t now_mono,
                   algo_decision *d);

#endif
