/*
 * rcu.h -- one pointer that many threads read without locks while a writer
 * swaps it now and then: the limiter's current rule set.
 *
 * Readers announce themselves in a per-thread shard of reader counters for
 * the current epoch, re-check the epoch, then load the pointer.  The writer
 * (serialised by a mutex) stores the new pointer, advances the epoch and
 * waits until no reader of the old epoch is left; then the old object is
 * unreachable and the caller frees it.  Reads cost two uncontended atomic
 * adds on a cache line no other thread writes in the common case.
 */
#ifndef RL_RCU_H
#define RL_RCU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define RCU_SHARDS 32

typedef struct rcu {
    _Atomic(void *) ptr;
    _Atomic uint64_t epoch;
    pthread_mutex_t writer;
    struct {
        _Atomic int64_t readers[2];
        char pad[64 - 2 * sizeof(int64_t)];
    } shard[RCU_SHARDS] __attribute__((aligned(64)));
} rcu;

typedef struct rcu_token {
    unsigned shard, parity;
} rcu_token;

/* This thread's shard, 0..RCU_SHARDS-1, fixed on first use: threads spread
 * over shards so per-shard counters are rarely written by two threads. */
unsigned thread_shard(void);

int rcu_init(rcu *r, void *initial);
void rcu_destroy(rcu *r); /* returns nothing: the caller frees the pointer */

void *rcu_read_lock(rcu *r, rcu_token *t);
void rcu_read_unlock(rcu *r, rcu_token t);

/* Publish `next`; returns the previous pointer once no reader holds it. */
void *rcu_swap(rcu *r, void *next);

/* The current pointer, for the writer side only (under no read lock). */
void *rcu_peek(rcu *r);

#endif
