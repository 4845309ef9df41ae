/*
 * breaker.c -- see breaker.h.  The state moves by compare-and-swap, so of
 * many threads arriving at a cooled-down open breaker exactly one wins the
 * probe; the others are refused as if it were still open.  Of many
 * threads failing in the same time slice exactly one counts its failure
 * (a compare-and-swap on the slice's start).
 */
#include "breaker.h"

#define NO_RUN INT64_MIN

/* The wait open after a closed breaker opens: the first step, never
 * shorter than a slice nor longer than the cooldown. */
static int64_t first_wait(const breaker *b)
{
    int64_t w = b->slice_ms > BREAKER_FIRST_OPEN_MS ? b->slice_ms
                                                    : BREAKER_FIRST_OPEN_MS;

    return w < b->cooldown_ms ? w : b->cooldown_ms;
}

void breaker_init(breaker *b, int threshold, int64_t cooldown_ms,
                  int64_t timeout_ms)
{
    atomic_init(&b->state, BREAKER_CLOSED);
    atomic_init(&b->failures, 0);
    atomic_init(&b->counted_ms, NO_RUN);
    atomic_init(&b->opened_ms, 0);
    atomic_init(&b->retried, 0);
    atomic_init(&b->opens, 0);
    atomic_init(&b->closes, 0);
    b->threshold = threshold;
    b->cooldown_ms = cooldown_ms;
    b->slice_ms = timeout_ms > BREAKER_SLICE_MS ? timeout_ms : BREAKER_SLICE_MS;
    atomic_init(&b->wait_ms, first_wait(b));
    atomic_init(&b->run_ms, 0);
    atomic_init(&b->outage_ms, 0);
}

int breaker_allow(breaker *b, int64_t now_ms)
{
    int st = atomic_load(&b->state), open = BREAKER_OPEN;

    if (st == BREAKER_CLOSED)
        return 1;
    if (st == BREAKER_HALF_OPEN) /* a probe is out: wait for its word */
        return 0;
    if (now_ms - atomic_load(&b->opened_ms) < atomic_load(&b->wait_ms))
        return 0;
    return atomic_compare_exchange_strong(&b->state, &open, BREAKER_HALF_OPEN)
               ? 2 : 0;
}

void breaker_cool_now(breaker *b, int64_t now_ms)
{
    if (atomic_load(&b->state) == BREAKER_OPEN)
        atomic_store(&b->opened_ms, now_ms - atomic_load(&b->wait_ms));
}

void breaker_unprobe(breaker *b)
{
    int half = BREAKER_HALF_OPEN;

    atomic_compare_exchange_strong(&b->state, &half, BREAKER_OPEN);
}

/* Open it from `from`; 1 if this call did.  From closed: the first,
 * shortest wait; from a failed probe: twice the last, up to the cooldown. */
static int trip(breaker *b, int from, int64_t now_ms)
{
    int64_t w = atomic_load(&b->wait_ms);

    if (!atomic_compare_exchange_strong(&b->state, &from, BREAKER_OPEN))
        return 0;
    if (from == BREAKER_CLOSED) {
        w = first_wait(b);
        atomic_store(&b->outage_ms, now_ms);
    } else {
        w = w > b->cooldown_ms / 2 ? b->cooldown_ms : 2 * w;
    }
    atomic_store(&b->wait_ms, w);
    atomic_store(&b->opened_ms, now_ms);
    if (from == BREAKER_CLOSED) /* an outage, not another failed probe */
        atomic_fetch_add(&b->opens, 1);
    return 1;
}

/* The probe failed: the first time in this wait, the next call probes
 * again at once (still open, still cooled down); the second, another
 * wait, twice as long. */
static void probe_failed(breaker *b, int64_t now_ms)
{
    if (!atomic_exchange(&b->retried, 1)) {
        breaker_unprobe(b);
        return;
    }
    atomic_store(&b->retried, 0);
    trip(b, BREAKER_HALF_OPEN, now_ms);
}

/* A failure while closed: counted unless the slice it falls in already
 * holds one; the threshold-th distinct failure in a run opens it. */
static int closed_failed(breaker *b, int64_t now_ms)
{
    int64_t last = atomic_load(&b->counted_ms);

    if (last != NO_RUN && now_ms - last < b->slice_ms)
        return BREAKER_SAME; /* the same event */
    if (!atomic_compare_exchange_strong(&b->counted_ms, &last, now_ms))
        return BREAKER_SAME; /* another thread counted this slice */
    if (last == NO_RUN)
        atomic_store(&b->run_ms, now_ms);
    if (atomic_fetch_add(&b->failures, 1) + 1 >= b->threshold) {
        atomic_store(&b->failures, 0);
        atomic_store(&b->counted_ms, NO_RUN);
        atomic_store(&b->retried, 0);
        return trip(b, BREAKER_CLOSED, now_ms) ? BREAKER_OPENED
                                               : BREAKER_SAME;
    }
    return BREAKER_SAME;
}

int breaker_done(breaker *b, int ok, int probe, int64_t now_ms)
{
    int st = atomic_load(&b->state);

    if (ok) {
        if (atomic_load(&b->counted_ms) != NO_RUN) {
            atomic_store(&b->failures, 0);
            atomic_store(&b->counted_ms, NO_RUN);
        }
        if (st == BREAKER_HALF_OPEN &&
            atomic_compare_exchange_strong(&b->state, &st, BREAKER_CLOSED)) {
            atomic_store(&b->retried, 0);
            atomic_fetch_add(&b->closes, 1);
            return BREAKER_CLOSED_AGAIN;
        }
        return BREAKER_SAME;
    }
    if (probe)
        probe_failed(b, now_ms);
    else if (st == BREAKER_CLOSED)
        return closed_failed(b, now_ms);
    return BREAKER_SAME;
}
