/*
 * redis_conn.c -- see redis_conn.h.
 *
 * Shared state, all under `mu` (one mutex per connection, never global):
 *   wbuf   bytes callers queued that the I/O thread has not taken yet
 *   fifo   the slots waiting for replies, in the order their commands were
 *          queued, which is the order Redis answers them
 *   slots  a fixed pool; a caller owns one from queueing until it has read
 *          its replies, or hands it to the I/O thread by abandoning it
 *          (timeout, fire-and-forget), which then frees it on completion.
 * A caller sleeps on its slot's state word (futex) with its own deadline,
 * so a slow server costs each caller its timeout and nothing more.
 */
#include "redis_conn.h"
#include "ratelimit.h"
#include "sha1.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NSLOTS 4096
#define RBUF 65536

enum { FREE, PENDING, DONE, ABANDONED };

typedef struct rslot {
    _Atomic uint32_t state;
    int nreplies, got;
    int failed;                 /* the connection broke before the end */
    redisReply *replies[RCONN_MAX_REPLIES];
} rslot;

struct rconn {
    rconn_opts opt;
    pthread_mutex_t mu;
    pthread_t io;
    int efd;                    /* wakes the I/O thread                 */
    int started;                /* the I/O thread runs                  */
    _Atomic int up, stop;
    int fd;                     /* owned by the I/O thread once started */
    char sha[41];               /* of the script, fixed at open         */
    /* under mu */
    char *wbuf;
    size_t wlen, wcap;
    uint32_t fifo[NSLOTS], head, count;
    uint32_t freelist[NSLOTS], nfree;
    rslot slots[NSLOTS];
    rconn_stats stats;
    /* I/O thread only */
    char *obuf;
    size_t olen, ooff, ocap;
    redisReader *reader;
};

static void futex_wake(_Atomic uint32_t *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Sleep while *w == val, at most until the deadline (monotonic ns). */
static void futex_wait(_Atomic uint32_t *w, uint32_t val, int64_t deadline_ns)
{
    struct timespec now, rel;
    int64_t left;

    clock_gettime(CLOCK_MONOTONIC, &now);
    left = deadline_ns - ((int64_t)now.tv_sec * 1000000000 + now.tv_nsec);
    if (left <= 0)
        return;
    rel.tv_sec = left / 1000000000;
    rel.tv_nsec = left % 1000000000;
    syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, &rel, NULL, 0);
}

/* ---- the handshake ---------------------------------------------------- */

static int expect_ok(redisContext *ctx, redisReply *r, const char *what,
                     char *err, size_t errlen)
{
    int rc = 0;

    if (!r) {
        snprintf(err, errlen, "%s: %s", what,
                 ctx->errstr[0] ? ctx->errstr : "no reply");
        return -1;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "%s: %s", what, r->str);
        rc = -1;
    }
    freeReplyObject(r);
    return rc;
}

/* The scripts need Redis 7.0 (PEXPIRETIME, SET ... PXAT): say so plainly
 * instead of failing later inside a script. */
static int check_version(redisContext *ctx, char *err, size_t errlen)
{
    redisReply *r = redisCommand(ctx, "INFO server");
    const char *v;
    int major = 0, rc = 0;

    if (!r || r->type != REDIS_REPLY_STRING) {
        snprintf(err, errlen, "INFO server: %s",
                 r && r->type == REDIS_REPLY_ERROR ? r->str : "no answer");
        rc = -1;
    } else if ((v = strstr(r->str, "redis_version:")) != NULL &&
               (major = atoi(v + 14)) < 7) {
        snprintf(err, errlen, "Redis %.12s is too old: 7.0 or later is needed",
                 v + 14);
        rc = -1;
    }
    if (r)
        freeReplyObject(r);
    return rc;
}

/* Connect, AUTH, SELECT, check the version, SCRIPT LOAD; returns a
 * non-blocking fd, or -1 with the reason in err. */
static int handshake(rconn *c, char *err, size_t errlen)
{
    const redis_uri *u = &c->opt.uri;
    struct timeval tv = {c->opt.connect_timeout_ms / 1000,
                         (c->opt.connect_timeout_ms % 1000) * 1000};
    redisContext *ctx = u->is_unix ? redisConnectUnixWithTimeout(u->path, tv)
                                   : redisConnectWithTimeout(u->host, u->port,
                                                             tv);
    redisReply *r;
    int fd;

    if (!ctx || ctx->err) {
        snprintf(err, errlen, "connect to %s%s:%d: %s",
                 u->is_unix ? "unix:" : "", u->is_unix ? u->path : u->host,
                 u->is_unix ? 0 : u->port, ctx ? ctx->errstr : "out of memory");
        redisFree(ctx);
        return -1;
    }
    redisSetTimeout(ctx, tv);
    if (u->password[0]) {
        r = u->user[0] ? redisCommand(ctx, "AUTH %s %s", u->user, u->password)
                       : redisCommand(ctx, "AUTH %s", u->password);
        if (expect_ok(ctx, r, "AUTH", err, errlen))
            goto fail;
    }
    if (u->db && expect_ok(ctx, redisCommand(ctx, "SELECT %d", u->db),
                           "SELECT", err, errlen))
        goto fail;
    if (check_version(ctx, err, errlen))
        goto fail;
    r = redisCommand(ctx, "SCRIPT LOAD %b", c->opt.script, c->opt.script_len);
    if (r && r->type == REDIS_REPLY_ERROR) {
        expect_ok(ctx, r, "SCRIPT LOAD", err, errlen); /* frees r */
        goto fail;
    }
    if (!r || r->type != REDIS_REPLY_STRING || r->len != 40) {
        snprintf(err, errlen, "SCRIPT LOAD: %s",
                 r ? "unexpected reply" : ctx->errstr);
        if (r)
            freeReplyObject(r);
        goto fail;
    }
    if (memcmp(c->sha, r->str, 40) != 0) { /* cannot happen: same text */
        snprintf(err, errlen, "SCRIPT LOAD: server names the script %.40s, "
                 "not %s", r->str, c->sha);
        freeReplyObject(r);
        goto fail;
    }
    freeReplyObject(r);
    fd = redisFreeKeepFd(ctx);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
fail:
    redisFree(ctx);
    return -1;
}

/* ---- slots -------------------------------------------------------------- */

static void slot_release(rconn *c, rslot *s) /* under mu */
{
    for (int i = 0; i < s->got; i++)
        freeReplyObject(s->replies[i]);
    s->got = 0;
    atomic_store(&s->state, FREE);
    c->freelist[c->nfree++] = (uint32_t)(s - c->slots);
}

/* Queue a request; returns the slot or NULL (down, or no free slot). */
static rslot *enqueue(rconn *c, const char *cmd, size_t len, int nreplies,
                      char *err, size_t errlen)
{
    rslot *s = NULL;
    int wake;

    pthread_mutex_lock(&c->mu);
    if (!atomic_load(&c->up)) {
        c->stats.down_fails++;
        snprintf(err, errlen, "not connected");
        goto out;
    }
    if (c->nfree == 0) {
        snprintf(err, errlen, "more than %d requests in flight", NSLOTS);
        goto out;
    }
    if (c->wlen + len > c->wcap) {
        size_t cap = c->wcap * 2 > c->wlen + len ? c->wcap * 2 : c->wlen + len;
        char *nb = realloc(c->wbuf, cap);
        if (!nb) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
        c->wbuf = nb;
        c->wcap = cap;
    }
    wake = c->wlen == 0;
    memcpy(c->wbuf + c->wlen, cmd, len);
    c->wlen += len;
    s = &c->slots[c->freelist[--c->nfree]];
    s->nreplies = nreplies;
    s->got = 0;
    s->failed = 0;
    atomic_store(&s->state, PENDING);
    c->fifo[(c->head + c->count++) % NSLOTS] = (uint32_t)(s - c->slots);
    c->stats.calls++;
    if (wake) {
        uint64_t one = 1;
        if (write(c->efd, &one, sizeof one) < 0) { /* counter full: awake */ }
    }
out:
    pthread_mutex_unlock(&c->mu);
    return s;
}

int rconn_call(rconn *c, const char *cmd, size_t len, int nreplies,
               redisReply **replies, int64_t timeout_ms, char *err,
               size_t errlen)
{
    struct timespec now;
    int64_t deadline;
    rslot *s;
    int rc = RL_OK;

    if (nreplies < 1 || nreplies > RCONN_MAX_REPLIES)
        return snprintf(err, errlen, "bad reply count"), RL_ESTORE;
    clock_gettime(CLOCK_MONOTONIC, &now);
    deadline = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec +
               timeout_ms * 1000000;
    if (!(s = enqueue(c, cmd, len, nreplies, err, errlen)))
        return RL_ESTORE;
    while (atomic_load(&s->state) == PENDING) {
        futex_wait(&s->state, PENDING, deadline);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((int64_t)now.tv_sec * 1000000000 + now.tv_nsec >= deadline)
            break;
    }
    pthread_mutex_lock(&c->mu);
    if (atomic_load(&s->state) == PENDING) { /* give it to the I/O thread */
        atomic_store(&s->state, ABANDONED);
        c->stats.timeouts++;
        snprintf(err, errlen, "no reply within %lld ms",
                 (long long)timeout_ms);
        rc = RL_ESTORE;
    } else if (s->failed) {
        snprintf(err, errlen, "connection lost");
        slot_release(c, s);
        rc = RL_ESTORE;
    } else {
        memcpy(replies, s->replies, (size_t)nreplies * sizeof *replies);
        s->got = 0; /* the caller owns them now */
        slot_release(c, s);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int rconn_send(rconn *c, const char *cmd, size_t len, int nreplies)
{
    char err[64];
    rslot *s = enqueue(c, cmd, len, nreplies, err, sizeof err);

    if (!s)
        return RL_ESTORE;
    pthread_mutex_lock(&c->mu);
    if (atomic_load(&s->state) == PENDING)
        atomic_store(&s->state, ABANDONED);
    else
        slot_release(c, s);
    pthread_mutex_unlock(&c->mu);
    return RL_OK;
}

/* ---- the I/O thread ------------------------------------------------------- */

/* Hand one reply to the oldest waiting slot. */
static void deliver(rconn *c, redisReply *r)
{
    rslot *s;

    pthread_mutex_lock(&c->mu);
    c->stats.replies++;
    if (c->count == 0) { /* nobody asked: cannot happen, drop it */
        pthread_mutex_unlock(&c->mu);
        freeReplyObject(r);
        return;
    }
    s = &c->slots[c->fifo[c->head]];
    s->replies[s->got++] = r;
    if (s->got == s->nreplies) {
        c->head = (c->head + 1) % NSLOTS;
        c->count--;
        if (atomic_load(&s->state) == ABANDONED) {
            slot_release(c, s);
        } else {
            atomic_store(&s->state, DONE);
            futex_wake(&s->state);
        }
    }
    pthread_mutex_unlock(&c->mu);
}

/* The connection broke: every waiting slot fails, queued bytes go. */
static void fail_all(rconn *c)
{
    pthread_mutex_lock(&c->mu);
    atomic_store(&c->up, 0);
    while (c->count) {
        rslot *s = &c->slots[c->fifo[c->head]];
        c->head = (c->head + 1) % NSLOTS;
        c->count--;
        if (atomic_load(&s->state) == ABANDONED) {
            slot_release(c, s);
        } else {
            s->failed = 1;
            atomic_store(&s->state, DONE);
            futex_wake(&s->state);
        }
    }
    c->wlen = 0;
    pthread_mutex_unlock(&c->mu);
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->olen = c->ooff = 0;
    redisReaderFree(c->reader);
    c->reader = redisReaderCreate();
}

/* Take what callers queued, if the last batch is out. */
static void take_batch(rconn *c)
{
    char *tmp;
    size_t cap;

    if (c->ooff < c->olen)
        return;
    pthread_mutex_lock(&c->mu);
    tmp = c->obuf;
    cap = c->ocap;
    c->obuf = c->wbuf;
    c->ocap = c->wcap;
    c->olen = c->wlen;
    c->ooff = 0;
    c->wbuf = tmp;
    c->wcap = cap;
    c->wlen = 0;
    if (c->olen)
        c->stats.writes++;
    pthread_mutex_unlock(&c->mu);
}

static int flush_out(rconn *c)
{
    while (c->ooff < c->olen) {
        /* send(): a server that went away must not raise SIGPIPE in the
         * host process. */
        ssize_t n = send(c->fd, c->obuf + c->ooff, c->olen - c->ooff,
                         MSG_NOSIGNAL);
        if (n < 0)
            return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
        c->ooff += (size_t)n;
    }
    c->olen = c->ooff = 0;
    return 0;
}

static int read_in(rconn *c)
{
    char buf[RBUF];
    void *reply;
    ssize_t n = read(c->fd, buf, sizeof buf);

    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        return -1;
    if (n < 0)
        return 0;
    if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK)
        return -1;
    for (;;) {
        if (redisReaderGetReply(c->reader, &reply) != REDIS_OK)
            return -1;
        if (!reply)
            return 0;
        deliver(c, reply);
    }
}

static void reconnect(rconn *c, int64_t *backoff_ms)
{
    char err[256];
    struct pollfd p = {c->efd, POLLIN, 0};
    uint64_t drain;

    if ((c->fd = handshake(c, err, sizeof err)) >= 0) {
        *backoff_ms = 10;
        pthread_mutex_lock(&c->mu);
        c->stats.reconnects++;
        pthread_mutex_unlock(&c->mu);
        atomic_store(&c->up, 1);
        return;
    }
    /* Wait before the next try, but wake at once to stop. */
    if (poll(&p, 1, (int)*backoff_ms) > 0 &&
        read(c->efd, &drain, sizeof drain) < 0) { /* nothing to do */ }
    if (*backoff_ms < 1000)
        *backoff_ms *= 2;
}

static void *io_main(void *arg)
{
    rconn *c = arg;
    int64_t backoff = 10;
    uint64_t drain;

    while (!atomic_load(&c->stop)) {
        if (c->fd < 0) {
            reconnect(c, &backoff);
            continue;
        }
        take_batch(c);
        if (flush_out(c) < 0) {
            fail_all(c);
            continue;
        }
        struct pollfd p[2] = {
            {c->fd, (short)(POLLIN | (c->ooff < c->olen ? POLLOUT : 0)), 0},
            {c->efd, POLLIN, 0}};
        if (poll(p, 2, 1000) < 0 && errno != EINTR) {
            fail_all(c);
            continue;
        }
        if ((p[1].revents & POLLIN) &&
            read(c->efd, &drain, sizeof drain) < 0) { /* spurious */ }
        if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && read_in(c) < 0)
            fail_all(c);
    }
    return NULL;
}

/* ---- lifecycle -------------------------------------------------------------- */

int rconn_open(rconn **out, const rconn_opts *o, int degraded, char *err,
               size_t errlen)
{
    rconn *c = calloc(1, sizeof *c);

    *out = NULL;
    if (!c)
        return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
    c->opt = *o;
    c->fd = -1;
    sha1_hex(o->script, o->script_len, c->sha);
    c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    c->reader = redisReaderCreate();
    c->wcap = c->ocap = 16384;
    c->wbuf = malloc(c->wcap);
    c->obuf = malloc(c->ocap);
    pthread_mutex_init(&c->mu, NULL);
    for (uint32_t i = 0; i < NSLOTS; i++)
        c->freelist[i] = NSLOTS - 1 - i;
    c->nfree = NSLOTS;
    if (c->efd < 0 || !c->reader || !c->wbuf || !c->obuf) {
        snprintf(err, errlen, "out of memory");
        rconn_close(c);
        return RL_ENOMEM;
    }
    /* Degraded: never wait here; the I/O thread connects when it can. */
    c->fd = degraded ? -1 : handshake(c, err, errlen);
    if (c->fd < 0 && !degraded) {
        rconn_close(c);
        return RL_ESTORE;
    }
    atomic_store(&c->up, c->fd >= 0);
    if ((c->started = pthread_create(&c->io, NULL, io_main, c) == 0) == 0) {
        snprintf(err, errlen, "cannot start the I/O thread");
        rconn_close(c);
        return RL_ESTORE;
    }
    *out = c;
    return RL_OK;
}

void rconn_close(rconn *c)
{
    uint64_t one = 1;

    if (!c)
        return;
    if (c->started) {
        atomic_store(&c->stop, 1);
        if (write(c->efd, &one, sizeof one) < 0) { /* it will time out */ }
        pthread_join(c->io, NULL);
    }
    fail_all(c); /* no caller may be waiting: they all returned */
    if (c->fd >= 0)
        close(c->fd);
    if (c->efd >= 0)
        close(c->efd);
    redisReaderFree(c->reader);
    pthread_mutex_destroy(&c->mu);
    free(c->wbuf);
    free(c->obuf);
    free(c);
}

int rconn_is_up(rconn *c)
{
    return atomic_load(&c->up);
}

const char *rconn_sha(const rconn *c)
{
    return c->sha;
}

void rconn_stats_get(rconn *c, rconn_stats *st)
{
    pthread_mutex_lock(&c->mu);
    *st = c->stats;
    pthread_mutex_unlock(&c->mu);
}
