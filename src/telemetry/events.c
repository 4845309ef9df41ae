/*
 * events.c -- the rejection events' ring (see events.h): a bounded
 * multi-producer single-consumer queue, with its lifecycle and counts.
 *
 * Each cell carries a sequence number.  A producer loads head, and the
 * cell at head is free for it when the cell's sequence equals head: it
 * claims it by advancing head with a compare-and-swap, copies the event in,
 * and publishes it by storing head + 1 into the sequence (release).  A
 * sequence below head means the sender has not yet taken the cell's
 * previous event: the ring is full, and the event is dropped and counted
 * in the thread's own counter slot (metrics.h).  The sender takes the cell
 * at tail once its sequence is tail + 1 (acquire), copies the event out
 * and frees the cell for the next lap by storing tail + size.  No
 * producer ever waits on another: a producer that claimed a cell and was
 * preempted before publishing only holds the sender at that cell.
 */
#include "events.h"
#include "dryrun_report.h"
#include "error.h"
#include "siphash.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The event's time: the coarse wall clock, a few ns (the precise one
 * costs as much as the rest of the push), at the kernel tick's
 * resolution (1 to 10 ms). */
static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void events_push(events *e, const char *rule_id, const char *key,
                 size_t key_len, int64_t cost, int would, int how)
{
    uint64_t pos;
    ev_cell *c;

    if (e->sample > 1 && metrics_self()->event_tick++ % e->sample != 0)
        return;
    pos = atomic_load_explicit(&e->head, memory_order_relaxed);
    for (;;) {
        c = &e->cells[pos & e->mask];
        uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        int64_t diff = (int64_t)(seq - pos);
        if (diff == 0 &&
            atomic_compare_exchange_weak_explicit(&e->head, &pos, pos + 1,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed))
            break;
        if (diff < 0) { /* the sender is a lap behind: full */
            unsigned slot = metrics_self()->slot;
            metrics_add(&e->full[slot].n, slot, 1);
            return;
        }
        if (diff > 0)
            pos = atomic_load_explicit(&e->head, memory_order_relaxed);
    }
    c->ev.ts_ms = wall_ms();
    c->ev.cost = cost;
    c->ev.how = (uint8_t)how;
    c->ev.would = (uint8_t)would;
    c->ev.key_len = (uint16_t)(e->key_mode == EV_KEY_NONE ? 0 : key_len);
    memcpy(c->ev.key, key, c->ev.key_len);
    strcpy(c->ev.rule_id, rule_id); /* a rule id: at most RL_RULE_ID_MAX */
    atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
}

int events_pop(events *e, event *out)
{
    ev_cell *c = &e->cells[e->tail & e->mask];

    if (atomic_load_explicit(&c->seq, memory_order_acquire) != e->tail + 1)
        return 0;
    *out = c->ev;
    atomic_store_explicit(&c->seq, e->tail + e->mask + 1,
                          memory_order_release);
    e->tail++;
    return 1;
}

void events_counts(const events *e, uint64_t *sent,
                   uint64_t dropped[EV_DROP_COUNT])
{
    *sent = atomic_load(&e->sent);
    for (int k = 0; k < EV_DROP_COUNT; k++)
        dropped[k] = atomic_load(&e->dropped[k]);
    for (int s = 0; s < METRICS_SLOTS; s++)
        dropped[EV_DROP_RING_FULL] += atomic_load_explicit(
            &e->full[s].n, memory_order_relaxed);
}

static void events_free(events *e)
{
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e->cells);
    free(e->stream);
    free(e);
}

static int ring_init(events *e, int64_t want)
{
    uint64_t size = 1;

    while (size < (uint64_t)want)
        size <<= 1;
    if (!(e->cells = calloc(size, sizeof *e->cells)))
        return RL_ENOMEM;
    for (uint64_t i = 0; i < size; i++)
        atomic_init(&e->cells[i].seq, i);
    e->mask = size - 1;
    return RL_OK;
}

int events_start(events **out, const events_opts *o)
{
    events *e = aligned_alloc(64, (sizeof *e + 63) / 64 * 64);
    pthread_condattr_t ca;
    char why[200];

    *out = NULL;
    if (!e)
        return rl_fail(NULL, RL_ENOMEM, "events: out of memory");
    memset(e, 0, sizeof *e);
    pthread_mutex_init(&e->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the sender's waits */
    pthread_cond_init(&e->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (redis_uri_parse(o->uri, &e->uri, why, sizeof why) != 0) {
        events_free(e);
        return rl_fail(NULL, RL_EOPTION, "events_redis: %s", why);
    }
    if (ring_init(e, o->ring) != RL_OK || !(e->stream = strdup(o->stream))) {
        events_free(e);
        return rl_fail(NULL, RL_ENOMEM, "events: out of memory for the ring");
    }
    e->maxlen = o->maxlen;
    e->timeout_ms = o->timeout_ms;
    e->key_mode = o->key_mode;
    e->sample = (uint32_t)o->sample;
    if (o->hash_key)
        memcpy(e->hash_key, o->hash_key, sizeof e->hash_key);
    else
        siphash_random_key(e->hash_key);
    dryrun_limiter_id(e->limiter_id, sizeof e->limiter_id);
    if (pthread_create(&e->thread, NULL, events_sender_main, e) != 0) {
        events_free(e);
        return rl_fail(NULL, RL_ENOMEM, "events: cannot start the thread");
    }
    *out = e;
    return RL_OK;
}

void events_stop(events *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->mu);
    e->stop = 1;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
    events_free(e);
}
