/*
 * wordlock.h -- a mutex in one 32-bit word, for the memory store's
 * segments: taking and releasing it free of contention is one locked
 * instruction each, inline (a pthread mutex cost ~60 instructions a check
 * in two calls).  The word is 0 (free), 1 (held) or 2 (held, and someone
 * may sleep on it).  A thread that finds it held spins a bounded while
 * (WORDLOCK_SPINS looks: a segment is held for a few hundred ns), then
 * sleeps on the word (futex.h) until woken; it never spins without bound.
 * The release wakes one sleeper when the word said 2 (Drepper, "Futexes
 * are tricky", mutex 3).  Not recursive; a caller that holds several
 * takes them in one order (store_memory.c: ascending segments).
 */
#ifndef RL_WORDLOCK_H
#define RL_WORDLOCK_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct wordlock {
    _Atomic uint32_t w;
} wordlock;

#define WORDLOCK_INIT {0}

/* A spinning waiter's pause between looks (also store_shm.c's). */
static inline void wordlock_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* The contended path: spin, then sleep (wordlock.c). */
void wordlock_lock_slow(wordlock *l);

/* Wake one sleeper (wordlock.c). */
void wordlock_wake(wordlock *l);

static inline void wordlock_lock(wordlock *l)
{
    uint32_t free_ = 0;

    if (__builtin_expect(!atomic_compare_exchange_strong_explicit(
                             &l->w, &free_, 1, memory_order_acquire,
                             memory_order_relaxed),
                         0))
        wordlock_lock_slow(l);
}

static inline void wordlock_unlock(wordlock *l)
{
    if (__builtin_expect(atomic_exchange_explicit(&l->w, 0,
                                                  memory_order_release) == 2,
                         0))
        wordlock_wake(l);
}

#endif
