/*
 * fleet.c -- see fleet.h.  One beat is one small script: add or refresh
 * our member with an expiry three beats ahead (Redis TIME), drop expired
 * members, keep the set itself from outliving the fleet, and return the
 * count.  A beat that fails (Redis away) keeps the last count: the
 * fallback needs it most exactly then.
 */
#include "fleet.h"
#include "resp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static const char beat_script[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local ttl = tonumber(ARGV[2])\n"
    "redis.call('ZADD', KEYS[1], string.format('%d', now + ttl), ARGV[1])\n"
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))\n"
    "redis.call('PEXPIRE', KEYS[1], ttl)\n"
    "return redis.call('ZCARD', KEYS[1])\n";

static void beat(fleet *f)
{
    char ttl[24], buf[1024];
    const char *argv[] = {"EVAL", beat_script, "1", f->key, f->id, ttl};
    resp_buf b = RESP_BUF(buf, sizeof buf);
    redisReply *r = NULL;
    rio *c = f->conn(f->arg);

    snprintf(ttl, sizeof ttl, "%lld", (long long)(3 * f->interval_ms));
    resp_cmd(&b, 6, argv);
    if (!c || b.oom || rio_call(c, b.p, b.len, 1, &r, 500) != 0) {
        resp_release(&b);
        return;
    }
    resp_release(&b);
    if (r->type == REDIS_REPLY_INTEGER && r->integer > 0)
        atomic_store(f->size, r->integer);
    freeReplyObject(r);
}

static void *fleet_main(void *arg)
{
    fleet *f = arg;
    struct timespec until;

    pthread_mutex_lock(&f->mu);
    while (!f->stop) {
        pthread_mutex_unlock(&f->mu);
        beat(f);
        pthread_mutex_lock(&f->mu);
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += f->interval_ms / 1000;
        until.tv_nsec += (f->interval_ms % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        if (!f->stop)
            pthread_cond_timedwait(&f->cv, &f->mu, &until);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

int fleet_start(fleet *f, rio *(*conn)(void *arg), void *arg,
                const char *name, _Atomic int64_t *size,
                int64_t interval_ms)
{
    unsigned char rnd[8] = {0};

    memset(f, 0, sizeof *f);
    f->conn = conn;
    f->arg = arg;
    f->size = size;
    f->interval_ms = interval_ms;
    snprintf(f->key, sizeof f->key, "rl:fleet:{%s}", name);
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        memcpy(rnd, &f, sizeof rnd < sizeof f ? sizeof rnd : sizeof f);
    snprintf(f->id, sizeof f->id, "%d-%02x%02x%02x%02x%02x%02x%02x%02x",
             (int)getpid(), rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5],
             rnd[6], rnd[7]);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    if (pthread_create(&f->th, NULL, fleet_main, f) != 0)
        return -1;
    f->started = 1;
    return 0;
}

void fleet_stop(fleet *f)
{
    char buf[256];
    const char *argv[] = {"ZREM", f->key, f->id};
    resp_buf b = RESP_BUF(buf, sizeof buf);
    redisReply *r = NULL;
    rio *c;

    if (!f->started)
        return;
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->th, NULL);
    c = f->conn(f->arg);
    resp_cmd(&b, 3, argv);
    /* Waited for (briefly): the store closes its connections next. */
    if (c && !b.oom && rio_call(c, b.p, b.len, 1, &r, 250) == 0)
        freeReplyObject(r);
    resp_release(&b);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    f->started = 0;
}
