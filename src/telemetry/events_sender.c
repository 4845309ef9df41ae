/*
 * events_sender.c -- the rejection events' thread (see events.h): drain
 * the ring, XADD the events to the stream in pipelined batches over a
 * connection of its own, and count what was sent and what was lost.
 *
 * One entry per event:
 *   XADD <stream> MAXLEN ~ <maxlen> * rule <id> key <key> ts <ms>
 *        cost <n> decided store|fallback|closed mode enforce|log
 *        limiter <limiter id>
 * (no key field with events_key=none; with "hashed", 16 hex digits of
 * SipHash-1-3 under hash_key, or under a key random to this limiter).
 * Every field is a bulk string of its own, so no rule id or key can break
 * an entry.  The connection is a blocking hiredis one (redis_link.h) whose
 * connect and every reply wait at most timeout_ms; a batch whose
 * connection fails is dropped (counted "redis_away"), and so is what the
 * ring yields until the next connect attempt, which backs off from 100 ms
 * to 2 s: the ring keeps being drained, so the request path never finds
 * it full because Redis is away.  An error reply drops its event
 * ("rejected": a wrong type at the stream's key, say).
 */
#include "events.h"
#include "clock.h"
#include "redis_link.h"
#include "siphash.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EV_BATCH 256          /* events in one pipelined write       */
#define EV_IDLE_MS 2          /* the ring was empty: look again in   */
#define EV_BACKOFF_MIN_MS 100 /* reconnect tries, doubling up to ... */
#define EV_BACKOFF_MAX_MS 2000
/* XADD's arguments for one event: XADD stream MAXLEN ~ n * (6), then
 * 7 fields and their values (rule key ts cost decided mode limiter). */
#define EV_ARGS (6 + 2 * 7)

static const char *const how_names[] = {"store", "fallback", "closed",
                                        "cache"};

typedef struct sender {
    events *e;
    rlink link;
    int up;
    int64_t next_try_ms, backoff_ms;
    event batch[EV_BATCH];
} sender;

static int handshake(rlink *l, const redis_uri *u)
{
    redisReply *r = NULL;

    if (u->password[0] && u->user[0])
        r = rlink_command(l, "AUTH %s %s", u->user, u->password);
    else if (u->password[0])
        r = rlink_command(l, "AUTH %s", u->password);
    if (u->password[0] && (!r || r->type == REDIS_REPLY_ERROR)) {
        freeReplyObject(r);
        return -1;
    }
    freeReplyObject(r);
    r = NULL;
    if (u->db && (!(r = rlink_command(l, "SELECT %d", u->db)) ||
                  r->type == REDIS_REPLY_ERROR)) {
        freeReplyObject(r);
        return -1;
    }
    freeReplyObject(r);
    return 0;
}

/* Connected, or not yet due for a try, or the try failed (backed off). */
static int ensure_up(sender *s)
{
    char err[256];
    int64_t now = clock_mono_ms();

    if (s->up || now < s->next_try_ms)
        return s->up;
    if (rlink_open(&s->link, &s->e->uri, NULL, NULL, s->e->timeout_ms, err,
                   sizeof err) == 0) {
        if (handshake(&s->link, &s->e->uri) == 0) {
            s->up = 1;
            s->backoff_ms = 0;
            return 1;
        }
        rlink_close(&s->link);
    }
    s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : EV_BACKOFF_MIN_MS;
    if (s->backoff_ms > EV_BACKOFF_MAX_MS)
        s->backoff_ms = EV_BACKOFF_MAX_MS;
    s->next_try_ms = now + s->backoff_ms;
    return 0;
}

static void down(sender *s)
{
    rlink_close(&s->link);
    s->up = 0;
    s->next_try_ms = 0; /* the next batch tries at once, then backs off */
}

/* One event's XADD into the connection's output buffer.  bufs holds the
 * numbers and the hashed key (the caller's, per event). */
static int append(sender *s, const event *ev, char bufs[4][32])
{
    events *e = s->e;
    const char *argv[EV_ARGS];
    size_t lens[EV_ARGS];
    int argc = 0;

#define ARG(p, n) (argv[argc] = (p), lens[argc++] = (n))
#define STR(p) ARG(p, strlen(p))
    snprintf(bufs[0], 32, "%" PRId64, e->maxlen);
    snprintf(bufs[1], 32, "%" PRId64, ev->ts_ms);
    snprintf(bufs[2], 32, "%" PRId64, ev->cost);
    STR("XADD"), STR(e->stream), STR("MAXLEN"), STR("~"), STR(bufs[0]);
    STR("*"), STR("rule"), STR(ev->rule_id);
    if (e->key_mode == EV_KEY_PLAIN) {
        STR("key"), ARG(ev->key, ev->key_len);
    } else if (e->key_mode == EV_KEY_HASHED) {
        snprintf(bufs[3], 32, "%016" PRIx64,
                 siphash13(ev->key, ev->key_len, e->hash_key));
        STR("key"), STR(bufs[3]);
    }
    STR("ts"), STR(bufs[1]), STR("cost"), STR(bufs[2]);
    STR("decided"), STR(how_names[ev->how]);
    STR("mode"), STR(ev->would ? "log" : "enforce");
    STR("limiter"), STR(e->limiter_id);
#undef STR
#undef ARG
    return redisAppendCommandArgv(s->link.ctx, argc, argv, lens);
}

static void drop(events *e, int why, size_t n)
{
    atomic_fetch_add(&e->dropped[why], n);
}

/* Send batch[0..n): pipelined, then each reply read. */
static void deliver(sender *s, size_t n)
{
    char bufs[4][32];
    size_t i;

    if (!ensure_up(s))
        return drop(s->e, EV_DROP_REDIS_AWAY, n);
    for (i = 0; i < n; i++)
        if (append(s, &s->batch[i], bufs) != REDIS_OK)
            break;
    if (i < n) {
        down(s);
        return drop(s->e, EV_DROP_REDIS_AWAY, n);
    }
    for (i = 0; i < n; i++) {
        redisReply *r = NULL;
        if (redisGetReply(s->link.ctx, (void **)&r) != REDIS_OK || !r) {
            down(s);
            return drop(s->e, EV_DROP_REDIS_AWAY, n - i);
        }
        if (r->type == REDIS_REPLY_ERROR)
            drop(s->e, EV_DROP_REJECTED, 1);
        else
            atomic_fetch_add(&s->e->sent, 1);
        freeReplyObject(r);
    }
}

/* Wait up to EV_IDLE_MS for a stop; 1 if asked to stop. */
static int idle(events *e)
{
    struct timespec until;
    int stop;

    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += EV_IDLE_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&e->mu);
    if (!e->stop)
        pthread_cond_timedwait(&e->cv, &e->mu, &until);
    stop = e->stop;
    pthread_mutex_unlock(&e->mu);
    return stop;
}

void *events_sender_main(void *arg)
{
    sender *s = calloc(1, sizeof *s);
    events *e = arg;
    int stop = 0;

    if (!s)
        return NULL;
    s->e = e;
    for (;;) {
        size_t n = 0;
        while (n < EV_BATCH && events_pop(e, &s->batch[n]))
            n++;
        if (n)
            deliver(s, n);
        else if (stop) /* asked to stop, and the ring is drained */
            break;
        else
            stop = idle(e);
    }
    if (s->up)
        rlink_close(&s->link);
    free(s);
    return NULL;
}
