/*
 * events.h -- rejection events: each charge a rule denied, or would have
 * denied in mode "log", as an entry of a Redis Stream (options
 * events_redis, events_stream, events_maxlen, events_ring, events_key),
 * for abuse dashboards.
 *
 * The request path hands an event to a bounded lock-free ring (events.c:
 * a multi-producer single-consumer queue of fixed cells, Vyukov's
 * sequence-numbered design): one compare-and-swap to claim a cell, a
 * copy, one release store; no allocation, no lock, no system call.  A
 * full ring drops the event and counts it.  One background thread per
 * limiter (events_sender.c) drains the ring and XADDs the events in
 * pipelined batches over a connection of its own, each step under a
 * timeout; while Redis is away it drops what it drains, counted, and
 * reconnects with a backoff.  The key is copied raw into the ring and
 * hashed (keyed SipHash) or left out by the thread, off the request path.
 */
#ifndef RL_EVENTS_H
#define RL_EVENTS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "metrics.h"
#include "ratelimit.h"
#include "redis_uri.h"

/* How a denial was decided: by the store, or, the store having failed,
 * by the local fallback or failure mode closed, or by the deny cache
 * repeating a denial of the store's (deny_cache.h). */
enum { EV_STORE, EV_FALLBACK, EV_CLOSED, EV_CACHE };
/* events_key: the key as is, hashed (SipHash-1-3 under hash_key, else a
 * key random to this limiter), or left out. */
enum { EV_KEY_PLAIN, EV_KEY_HASHED, EV_KEY_NONE };

typedef struct event {
    int64_t ts_ms;                  /* coarse wall clock, epoch ms     */
    int64_t cost;
    uint8_t how;                    /* EV_*                            */
    uint8_t would;                  /* 1: mode log (would-deny)        */
    uint16_t key_len;
    char rule_id[RL_RULE_ID_MAX + 1];
    char key[RL_KEY_MAX + 1];       /* not NUL-terminated: key_len     */
} event;

typedef struct ev_cell {
    _Atomic uint64_t seq;
    event ev;
} ev_cell;

/* Why events were lost (metrics: ratelimit_events_dropped_total). */
enum { EV_DROP_RING_FULL, EV_DROP_REDIS_AWAY, EV_DROP_REJECTED,
       EV_DROP_COUNT };

typedef struct events_opts {
    const char *uri;                /* redis:// or unix://             */
    const char *stream;             /* the stream's key                */
    int64_t maxlen;                 /* XADD MAXLEN ~                   */
    int64_t ring;                   /* cells (rounded up to 2^k)       */
    int key_mode;                   /* EV_KEY_*                        */
    int64_t sample;                 /* 1 denial in this many, per thread */
    const uint64_t *hash_key;       /* NULL: a random one              */
    int64_t timeout_ms;             /* connect and each reply          */
} events_opts;

typedef struct events {
    _Alignas(64) _Atomic uint64_t head;  /* producers' next cell       */
    _Alignas(64) uint64_t tail;          /* the sender's next cell      */
    ev_cell *cells;
    uint64_t mask;
    struct {
        _Atomic uint64_t n;
    } __attribute__((aligned(64))) full[METRICS_SLOTS]; /* ring full   */
    _Atomic uint64_t sent, dropped[EV_DROP_COUNT]; /* the sender's     */
    /* the sender's configuration and state (events_sender.c) */
    redis_uri uri;
    char *stream;
    int64_t maxlen, timeout_ms;
    uint32_t sample;                /* events_sample                   */
    int key_mode;
    uint64_t hash_key[2];
    char limiter_id[128];
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
} events;

/* Start the ring and its thread.  RL_OK, or RL_ENOMEM / RL_EOPTION with
 * rl_fail() done. */
int events_start(events **out, const events_opts *o);

/* Stop the thread (what the ring holds is sent first, within the
 * timeouts) and free everything.  NULL: nothing. */
void events_stop(events *e);

/* Request path: queue one event (or, with events_sample N, one denial
 * in N of this thread's); a full ring drops it (counted). */
void events_push(events *e, const char *rule_id, const char *key,
                 size_t key_len, int64_t cost, int would, int how);

/* The sender's side of the ring: the next event into *out; 0 if empty. */
int events_pop(events *e, event *out);

/* The counts behind the metrics: sent, and dropped by reason. */
void events_counts(const events *e, uint64_t *sent,
                   uint64_t dropped[EV_DROP_COUNT]);

/* The sender thread's body (events_sender.c). */
void *events_sender_main(void *arg);

#endif
