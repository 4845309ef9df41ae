/*
 * fleet.c -- see fleet.h.  One beat is one small script: add or refresh
 * our member with an expiry three beats ahead (Redis TIME), drop expired
 * members, keep the set itself from outliving the fleet, and return the
 * count.  A beat that fails (Redis away) keeps the last count: the
 * fallback needs it most exactly then.
 */
#include "fleet.h"

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

/* *N\r\n then each argument as $len\r\nbytes\r\n */
static size_t resp(char *buf, size_t cap, int argc, const char **argv)
{
    size_t n = (size_t)snprintf(buf, cap, "*%d\r\n", argc);

    for (int i = 0; i < argc && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "$%zu\r\n%s\r\n",
                              strlen(argv[i]), argv[i]);
    return n < cap ? n : 0;
}

static void beat(fleet *f)
{
    char ttl[24], buf[1024], err[128];
    const char *argv[] = {"EVAL", beat_script, "1", f->key, f->id, ttl};
    redisReply *r = NULL;
    rconn *c = f->conn(f->arg);
    size_t len;

    snprintf(ttl, sizeof ttl, "%lld", (long long)(3 * f->interval_ms));
    if (!(len = resp(buf, sizeof buf, 6, argv)))
        return;
    if (!c || rconn_call(c, buf, len, 1, &r, 500, err, sizeof err) != 0)
        return;
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

int fleet_start(fleet *f, rconn *(*conn)(void *arg), void *arg,
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
    size_t len;

    if (!f->started)
        return;
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->th, NULL);
    rconn *c = f->conn(f->arg);

    if (c && (len = resp(buf, sizeof buf, 3, argv)) != 0)
        rconn_send(c, buf, len, 1);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    f->started = 0;
}
