/*
 * slots.h -- the open-addressing table of rate-limit state that the memory
 * store and the shared-memory store both keep, one per locked segment.
 *
 * Each tracked (rule, key) is one 32-byte slot_entry: a 64-bit fingerprint
 * of the rule's state seed and the key's hash (the key bytes are not kept),
 * the algorithm's state, and an expiry in seconds since the store's epoch.
 * Home slots come from the low 32 bits of the fingerprint (multiply-shift,
 * so capacities need not be powers of two); collisions probe linearly;
 * entries are removed by shifting their run back, so no tombstones pile
 * up.  The functions here work on a caller's array of `cap` slots and keep
 * no count: the caller, who holds the segment's lock, keeps `used` (each
 * returns what it added or removed).  The layout of slot_entry is part of
 * the shm:// region's format (store_shm.c checks its size).
 */
#ifndef RL_SLOTS_H
#define RL_SLOTS_H

#include <stdint.h>

#include "algo.h"
#include "store.h"

typedef struct slot_entry {
    uint64_t fp;      /* 0 = empty slot                          */
    int64_t a, b;     /* algo_state                              */
    uint32_t c;
    uint32_t expires; /* seconds since the store's epoch         */
} slot_entry;

#define SLOTS_EVICT_WINDOW 16u /* slots from home an eviction looks at */

static inline uint32_t slots_home(uint64_t fp, uint32_t cap)
{
    return (uint32_t)(((uint64_t)(uint32_t)fp * cap) >> 32);
}

static inline int slots_dead(const slot_entry *e, uint32_t now_s)
{
    return e->expires < now_s;
}

/* The fingerprint of (rule shape, client key); never 0 (the empty mark). */
uint64_t slots_fingerprint(uint64_t state_seed, uint64_t key_hash);

/* fp's live entry, or NULL.  Expired entries count as absent.  The table
 * must have an empty slot (callers keep the load below 100 %). */
slot_entry *slots_find(slot_entry *s, uint32_t cap, uint64_t fp,
                       uint32_t now_s);

/* The slot to hold fp: its own (even if expired), else the first expired
 * slot on its path, else the empty slot ending the path; *is_new is 1 for
 * the empty one (the caller's `used` grows by one if it writes there). */
slot_entry *slots_for(slot_entry *s, uint32_t cap, uint64_t fp,
                      uint32_t now_s, int *is_new);

/* Remove the entry at slot i (the caller's `used` drops by one). */
void slots_delete_at(slot_entry *s, uint32_t cap, uint32_t i);

/* Remove fp's entry if there is one (live or expired); 1 if removed. */
int slots_drop(slot_entry *s, uint32_t cap, uint64_t fp);

/* Evict the entry that expires soonest among the SLOTS_EVICT_WINDOW slots
 * from fp's home on (or the next occupied one if all are empty); 1 if one
 * was evicted. */
int slots_evict_near(slot_entry *s, uint32_t cap, uint64_t fp);

/* Remove every expired entry in place; returns how many. */
uint32_t slots_purge(slot_entry *s, uint32_t cap, uint32_t now_s);

/* The state of op's client under its rule: its entry (fp); else, while
 * the rule's previous shapes may still hold one, the newest found there,
 * converted to the current shape as at the change (*from gets that
 * entry's fingerprint, to be dropped when the new state is written); else
 * when the newest replaced shape is a bucket, the least it may have held
 * (algo_convert_unknown); else fresh.  A client's entries of every shape share its segment.  Returns
 * fp's own live entry (where the new state goes, as long as nothing else
 * was written to the table since), or NULL. */
slot_entry *slots_load_state(slot_entry *s, uint32_t cap, const store_op *op,
                             uint64_t fp, uint64_t key_hash, int64_t now,
                             uint32_t now_s, algo_state *st, uint64_t *from);

/* The distinct segments of seg[0..n), ascending (the order to lock them
 * in, so two checks never deadlock), into segs; returns how many. */
size_t slots_lock_order(const uint32_t *seg, size_t n, uint32_t *segs);

#endif
