/*
 * wordlock.c -- the contended half of wordlock.h: a bounded spin, then
 * sleeping on the word; and the release's wake.
 */
#include "wordlock.h"
#include "futex.h"

#include <stdint.h>

#define WORDLOCK_SPINS 100 /* looks at the word before sleeping */

void wordlock_lock_slow(wordlock *l)
{
    uint32_t c;

    for (int i = 0; i < WORDLOCK_SPINS; i++) {
        c = 0;
        if (atomic_load_explicit(&l->w, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(&l->w, &c, 1,
                                                  memory_order_acquire,
                                                  memory_order_relaxed))
            return;
        wordlock_relax();
    }
    /* Mark the word "someone may sleep" and sleep while it says so; a
     * thread that takes it this way leaves it 2, so its release wakes the
     * next sleeper (at worst one wake too many). */
    while (atomic_exchange_explicit(&l->w, 2, memory_order_acquire) != 0)
        futex_wait_until(&l->w, 2, INT64_MAX);
}

void wordlock_wake(wordlock *l)
{
    futex_wake_one(&l->w);
}
