/*
 * rcu.c -- see rcu.h.  The proof of safety in three lines: a reader counts
 * itself in epoch e, then checks the epoch is still e, then loads the
 * pointer.  A writer stores the pointer, then moves the epoch to e+1, then
 * waits for epoch e's count to drain.  So a reader either saw e+1 (retries)
 * or is counted in e before the writer waits, and any pointer it loads after
 * its check is one the writer waits for or the new one.
 *
 * "Counted before the writer waits" needs a full fence between the
 * reader's count and its epoch load, and one between the writer's epoch
 * store and its counter loads (a store-load pair each side).  Without
 * membarrier both are sequentially consistent atomics.  With it, the
 * reader's is only a compiler barrier and the writer's membarrier() runs a
 * full barrier on every thread of the process that is running: for each
 * reader, the barrier falls either after its count (which the writer then
 * sees) or before its epoch load (which then sees e+1) -- the asymmetric
 * fence of liburcu's membarrier flavour.  A reader's end of section is a
 * release store, so its reads of the old object happen before the
 * writer's acquire load that sees the count drop.
 */
#include "rcu.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__) && __has_include(<linux/membarrier.h>)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#define RCU_MEMBARRIER 1
#endif

/* membarrier(2), or -1 with ENOSYS where there is none. */
static int membar(int cmd)
{
#ifdef RCU_MEMBARRIER
    return (int)syscall(SYS_membarrier, cmd, 0, 0);
#else
    (void)cmd;
    errno = ENOSYS;
    return -1;
#endif
}

/* Register this process for the expedited private membarrier (idempotent,
 * so done per rcu: a process forked after another rcu_init() is a new
 * registration); 1 if readers may skip their fence. */
static int asym_register(void)
{
#ifdef RCU_MEMBARRIER
    int cmds = membar(MEMBARRIER_CMD_QUERY);

    return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
           membar(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
#else
    return 0;
#endif
}

/* The writer's half of the asymmetric fence.  The process may have been
 * forked since rcu_init() (a child is not registered): register and try
 * again; the global command (no registration, slower) is the last resort,
 * and without any, nothing would keep readers safe. */
static void fence_readers(void)
{
#ifdef RCU_MEMBARRIER
    if (membar(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
        return;
    if (membar(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
        membar(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
        return;
    if (membar(MEMBARRIER_CMD_GLOBAL) == 0)
        return;
#endif
    abort(); /* unreachable: asym is set only where membarrier works */
}

int rcu_init(rcu *r, void *initial)
{
    r->asym = asym_register();
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

/* A section counted with atomic adds, fenced by the reader itself. */
static void *read_lock_fenced(rcu *r, rcu_token *t)
{
    for (;;) {
        uint64_t e = atomic_load(&r->epoch);
        t->parity = (unsigned)(e & 1);
        atomic_fetch_add(&r->shard[t->shard].readers[t->parity], 1);
        if (atomic_load(&r->epoch) == e)
            return atomic_load(&r->ptr);
        atomic_fetch_sub(&r->shard[t->shard].readers[t->parity], 1);
    }
}

/* Plain load and store on this thread's own counter (only this thread
 * writes it). */
static void own_add(_Atomic int64_t *c, int64_t v, memory_order mo)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
                          mo);
}

void *rcu_read_lock(rcu *r, rcu_token *t)
{
    t->shard = metrics_self()->slot;
    if (!r->asym || t->shard == METRICS_SHARED)
        return read_lock_fenced(r, t);
    for (;;) {
        uint64_t e = atomic_load_explicit(&r->epoch, memory_order_relaxed);
        _Atomic int64_t *c = &r->shard[t->shard].readers[e & 1];
        t->parity = (unsigned)(e & 1);
        own_add(c, 1, memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst); /* + the writer's */
        /* Acquire: an epoch past e comes with the pointer stored before
         * it (this section then holds the new set, which no one waits
         * for). */
        if (atomic_load_explicit(&r->epoch, memory_order_acquire) == e)
            return atomic_load_explicit(&r->ptr, memory_order_acquire);
        own_add(c, -1, memory_order_release);
    }
}

void *rcu_read_lock_any(rcu *r, rcu_token *t)
{
    t->shard = METRICS_SHARED;
    return read_lock_fenced(r, t);
}

void rcu_read_unlock(rcu *r, rcu_token t)
{
    _Atomic int64_t *c = &r->shard[t.shard].readers[t.parity];

    if (r->asym && t.shard != METRICS_SHARED)
        own_add(c, -1, memory_order_release);
    else
        atomic_fetch_sub(c, 1);
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
    if (r->asym)
        fence_readers();
    wait_readers(r, (unsigned)(e & 1));
    pthread_mutex_unlock(&r->writer);
    return old;
}

void *rcu_peek(rcu *r)
{
    return atomic_load(&r->ptr);
}
