/*
 * rcu.c -- see rcu.h.  The proof of safety in three lines: a reader counts
 * itself in epoch e, then checks the epoch is still e, then loads the
 * pointer.  A writer stores the pointer, then moves the epoch to e+1, then
 * waits for epoch e's count to drain.  So a reader either saw e+1 (retries)
 * or is counted in e before the writer waits, and any pointer it loads after
 * its check is one the writer waits for or the new one.  Sequentially
 * consistent atomics throughout; reads are rare enough in cost not to care.
 */
#include "rcu.h"

#include <sched.h>
#include <time.h>

static _Atomic unsigned next_shard;
static _Thread_local unsigned my_shard = ~0u;

unsigned thread_shard(void)
{
    if (my_shard == ~0u)
        my_shard = atomic_fetch_add(&next_shard, 1) % RCU_SHARDS;
    return my_shard;
}

int rcu_init(rcu *r, void *initial)
{
    atomic_init(&r->ptr, initial);
    atomic_init(&r->epoch, 0);
    for (int i = 0; i < RCU_SHARDS; i++) {
        atomic_init(&r->shard[i].readers[0], 0);
        atomic_init(&r->shard[i].readers[1], 0);
    }
    return pthread_mutex_init(&r->writer, NULL);
}

void rcu_destroy(rcu *r)
{
    pthread_mutex_destroy(&r->writer);
}

void *rcu_read_lock(rcu *r, rcu_token *t)
{
    t->shard = thread_shard();
    for (;;) {
        uint64_t e = atomic_load(&r->epoch);
        t->parity = (unsigned)(e & 1);
        atomic_fetch_add(&r->shard[t->shard].readers[t->parity], 1);
        if (atomic_load(&r->epoch) == e)
            return atomic_load(&r->ptr);
        atomic_fetch_sub(&r->shard[t->shard].readers[t->parity], 1);
    }
}

void rcu_read_unlock(rcu *r, rcu_token t)
{
    atomic_fetch_sub(&r->shard[t.shard].readers[t.parity], 1);
}

static int64_t readers_of(rcu *r, unsigned parity)
{
    int64_t n = 0;

    for (int i = 0; i < RCU_SHARDS; i++)
        n += atomic_load(&r->shard[i].readers[parity]);
    return n;
}

/* The writer waits for the old epoch's readers: a few quick looks (a
 * reader's section is usually a few hundred ns), then sleeps that double
 * from 10 us to 1 ms.  Spinning on sched_yield() instead burns a core
 * for as long as a reader stays inside, which on a busy machine (a reader
 * preempted in its section) means milliseconds of CPU taken from the
 * request path, and keeps pulling the readers' counter lines away. */
#define WAIT_SPINS 16
#define WAIT_MIN_NS 10000L
#define WAIT_MAX_NS 1000000L

static void wait_readers(rcu *r, unsigned parity)
{
    long ns = WAIT_MIN_NS;

    for (int i = 0; readers_of(r, parity) != 0; i++) {
        if (i < WAIT_SPINS) {
            sched_yield();
            continue;
        }
        nanosleep(&(struct timespec){.tv_nsec = ns}, NULL);
        ns = ns * 2 > WAIT_MAX_NS ? WAIT_MAX_NS : ns * 2;
    }
}

void *rcu_swap(rcu *r, void *next)
{
    void *old;
    uint64_t e;

    pthread_mutex_lock(&r->writer);
    old = atomic_exchange(&r->ptr, next);
    e = atomic_fetch_add(&r->epoch, 1);
    wait_readers(r, (unsigned)(e & 1));
    pthread_mutex_unlock(&r->writer);
    return old;
}

void *rcu_peek(rcu *r)
{
    return atomic_load(&r->ptr);
}
