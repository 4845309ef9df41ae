/*
 * rcu.h -- one pointer that many threads read without locks while a writer
 * swaps it now and then: the limiter's current rule set.
 *
 * Readers announce themselves in a per-thread slot of reader counters for
 * the current epoch, re-check the epoch, then load the pointer.  The writer
 * (serialised by a mutex) stores the new pointer, advances the epoch and
 * waits until no reader of the old epoch is left; then the old object is
 * unreachable and the caller frees it.
 *
 * A thread counts in the slot it owns (metrics.h's per-thread slot), a
 * cache line no other thread writes, with a plain load and store; the
 * fence a reader needs between announcing itself and reading the epoch is
 * paid by the writer instead, with membarrier(2) (MEMBARRIER_CMD_PRIVATE_
 * EXPEDITED: every running thread of the process passes a full barrier),
 * so a read section costs no locked instruction.  Where the kernel refuses
 * membarrier, readers fence themselves (one locked instruction per read).
 * Threads beyond the owned slots share the last one with atomic adds, and
 * so do sections that may end on another thread (rcu_read_lock_any()).
 */
#ifndef RL_RCU_H
#define RL_RCU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "metrics.h"

#define RCU_SHARDS METRICS_SLOTS

typedef struct rcu {
    _Atomic(void *) ptr;
    _Atomic uint64_t epoch;
    int asym;               /* 1: the writer fences for the readers  */
    pthread_mutex_t writer;
    struct {
        _Atomic int64_t readers[2];
        char pad[64 - 2 * sizeof(int64_t)];
    } shard[RCU_SHARDS] __attribute__((aligned(64)));
} rcu;

typedef struct rcu_token {
    unsigned shard, parity;
} rcu_token;

int rcu_init(rcu *r, void *initial);
void rcu_destroy(rcu *r); /* returns nothing: the caller frees the pointer */

/* A read section, ended by rcu_read_unlock() on the same thread. */
void *rcu_read_lock(rcu *r, rcu_token *t);
/* A read section that may end on another thread (async requests). */
void *rcu_read_lock_any(rcu *r, rcu_token *t);
void rcu_read_unlock(rcu *r, rcu_token t);

/* Publish `next`; returns the previous pointer once no reader holds it. */
void *rcu_swap(rcu *r, void *next);

/* The current pointer, for the writer side only (under no read lock). */
void *rcu_peek(rcu *r);

#endif
