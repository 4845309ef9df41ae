/*
 * breaker.c -- see breaker.h.  The state moves by compare-and-swap, so of
 * many threads arriving at a cooled-down open breaker exactly one wins the
 * probe; the others are refused as if it were still open.
 */
#include "breaker.h"

void breaker_init(breaker *b, int threshold, int64_t cooldown_ms)
{
    atomic_init(&b->state, BREAKER_CLOSED);
    atomic_init(&b->failures, 0);
    atomic_init(&b->opened_ms, 0);
    atomic_init(&b->opens, 0);
    atomic_init(&b->closes, 0);
    b->threshold = threshold;
    b->cooldown_ms = cooldown_ms;
}

int breaker_allow(breaker *b, int64_t now_ms)
{
    int st = atomic_load(&b->state), open = BREAKER_OPEN;

    if (st == BREAKER_CLOSED)
        return 1;
    if (st == BREAKER_HALF_OPEN) /* a probe is out: wait for its word */
        return 0;
    if (now_ms - atomic_load(&b->opened_ms) < b->cooldown_ms)
        return 0;
    return atomic_compare_exchange_strong(&b->state, &open, BREAKER_HALF_OPEN)
               ? 2 : 0;
}

void breaker_unprobe(breaker *b)
{
    int half = BREAKER_HALF_OPEN;

    atomic_compare_exchange_strong(&b->state, &half, BREAKER_OPEN);
}

static void trip(breaker *b, int from, int64_t now_ms)
{
    if (atomic_compare_exchange_strong(&b->state, &from, BREAKER_OPEN)) {
        atomic_store(&b->opened_ms, now_ms);
        atomic_fetch_add(&b->opens, 1);
    }
}

void breaker_done(breaker *b, int ok, int64_t now_ms)
{
    int st = atomic_load(&b->state);

    if (ok) {
        atomic_store(&b->failures, 0);
        if (st == BREAKER_HALF_OPEN &&
            atomic_compare_exchange_strong(&b->state, &st, BREAKER_CLOSED))
            atomic_fetch_add(&b->closes, 1);
        return;
    }
    if (st == BREAKER_HALF_OPEN) { /* the probe failed */
        trip(b, BREAKER_HALF_OPEN, now_ms);
        return;
    }
    if (st == BREAKER_CLOSED &&
        atomic_fetch_add(&b->failures, 1) + 1 >= b->threshold) {
        atomic_store(&b->failures, 0);
        trip(b, BREAKER_CLOSED, now_ms);
    }
}
