/*
 * redis_conn.c -- see redis_conn.h.
 *
 * No thread sits between a caller and the socket.  A caller appends its
 * command bytes to the connection's write buffer and, if nobody is writing,
 * writes everything queued so far itself (so concurrent callers' commands go
 * out together in one send).  Then it waits for its replies: if nobody owns
 * the read side it takes it, reads, and hands every reply that arrives to
 * its waiter (Redis answers in order, so replies match the FIFO of slots);
 * otherwise it sleeps on its slot (futex) until the reader wakes it with its
 * replies, or promotes it to reader, or its own deadline passes.  A lone
 * caller thus writes and reads the socket itself, like a blocking client;
 * 64 callers share one write and one reader.
 *
 * The background thread only (re)connects, drains replies nobody waits for
 * any more (timed-out and fire-and-forget calls), and notices a server that
 * closed an idle connection.  A broken socket is closed only once no caller
 * holds a role on it, so its descriptor is never reused under a writer.
 *
 * Shared state is under `mu`, one mutex per connection: never global, and
 * never held across a system call that can block.
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
#define IDLE_MS 10 /* the background thread's tick */

enum { FREE, PENDING, DONE, ABANDONED, LEAD };

typedef struct rslot {
    _Atomic uint32_t state;
    int64_t queued_ns;          /* when its request was queued         */
    int nreplies, got;
    int failed;                 /* the connection broke before the end */
    redisReply *replies[RCONN_MAX_REPLIES];
} rslot;

struct rconn {
    rconn_opts opt;
    pthread_mutex_t mu;
    pthread_t io;
    int started;                /* the background thread runs           */
    int efd;                    /* wakes the background thread          */
    _Atomic int up, stop;
    char sha[41];               /* of the script, fixed at open         */
    /* under mu */
    int fd;                     /* -1: not connected                    */
    int dead;                   /* broken: close once no role is held   */
    int writing, reading;       /* a caller holds the write / read side */
    char *wbuf, *obuf;          /* queued bytes; bytes being written    */
    size_t wlen, wcap, olen, ooff, ocap;
    uint32_t queued;            /* requests whose bytes are in wbuf     */
    uint32_t fifo[NSLOTS], head, count;
    uint32_t freelist[NSLOTS], nfree;
    rslot slots[NSLOTS];
    rconn_stats stats;
    int64_t last_reply_ns;      /* when a reply last arrived            */
    redisReader *reader;        /* used by the read side's holder only  */
};

static int64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void futex_wake(_Atomic uint32_t *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Sleep while *w == val, at most until the deadline (monotonic ns). */
static void futex_wait(_Atomic uint32_t *w, uint32_t val, int64_t deadline_ns)
{
    int64_t left = deadline_ns - mono_ns();
    struct timespec rel;

    if (left <= 0)
        return;
    rel.tv_sec = left / 1000000000;
    rel.tv_nsec = left % 1000000000;
    syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, &rel, NULL, 0);
}

static void wake_background(rconn *c)
{
    uint64_t one = 1;

    if (write(c->efd, &one, sizeof one) < 0) { /* counter full: awake */ }
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

/* ---- slots and failure (all under mu) ------------------------------------ */

static void slot_release(rconn *c, rslot *s)
{
    for (int i = 0; i < s->got; i++)
        freeReplyObject(s->replies[i]);
    s->got = 0;
    atomic_store(&s->state, FREE);
    c->freelist[c->nfree++] = (uint32_t)(s - c->slots);
}

/* Wakes to make once the lock is dropped (a woken caller's first act is
 * to take the lock: waking it while holding the lock only makes it wait). */
typedef struct wakes {
    int n;
    _Atomic uint32_t *w[128];
} wakes;

static void wake_all(wakes *wl)
{
    for (int i = 0; i < wl->n; i++)
        futex_wake(wl->w[i]); /* a slot reused since: a spurious wake */
    wl->n = 0;
}

/* A slot got all its replies, or failed: hand it over. */
static void finish(rconn *c, rslot *s, int failed, wakes *wl)
{
    if (atomic_load(&s->state) == ABANDONED) {
        slot_release(c, s);
        return;
    }
    s->failed = failed;
    atomic_store(&s->state, DONE);
    if (wl && wl->n < (int)(sizeof wl->w / sizeof wl->w[0]))
        wl->w[wl->n++] = &s->state;
    else
        futex_wake(&s->state);
}

/* The socket broke: every waiting slot fails, queued bytes go.  The
 * descriptor is closed here only if no caller holds a role on it. */
static void fail_all(rconn *c)
{
    atomic_store(&c->up, 0);
    c->dead = 1;
    while (c->count) {
        rslot *s = &c->slots[c->fifo[c->head]];
        c->head = (c->head + 1) % NSLOTS;
        c->count--;
        finish(c, s, 1, NULL);
    }
    c->wlen = c->olen = c->ooff = 0;
    c->queued = 0;
    if (!c->reading && !c->writing && c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    wake_background(c);
}

/* Give the read side to the oldest caller still waiting, if any. */
static void promote(rconn *c)
{
    for (uint32_t k = 0; k < c->count; k++) {
        rslot *s = &c->slots[c->fifo[(c->head + k) % NSLOTS]];
        if (atomic_load(&s->state) == PENDING) {
            atomic_store(&s->state, LEAD);
            futex_wake(&s->state);
            return;
        }
    }
    if (c->count)
        wake_background(c); /* only abandoned slots: it drains them */
}

/* ---- the write side --------------------------------------------------------- */

/* Send obuf[ooff..olen) then whatever queued meanwhile, unless someone else
 * is writing.  Called and returns under mu; sends without it.  Gives up
 * (keeping the rest for the next writer) at the deadline. */
static void write_out(rconn *c, int64_t deadline_ns)
{
    if (c->writing || c->dead || c->fd < 0)
        return;
    c->writing = 1;
    while (!c->dead && (c->ooff < c->olen || c->wlen)) {
        if (c->ooff == c->olen) { /* take the queued bytes */
            char *tmp = c->obuf;
            size_t cap = c->ocap;
            c->obuf = c->wbuf;
            c->ocap = c->wcap;
            c->olen = c->wlen;
            c->ooff = 0;
            c->wbuf = tmp;
            c->wcap = cap;
            c->wlen = 0;
            c->queued = 0;
            c->stats.writes++;
        }
        int fd = c->fd;
        const char *p = c->obuf + c->ooff;
        size_t n = c->olen - c->ooff;
        pthread_mutex_unlock(&c->mu);
        /* send(): a server that went away must not raise SIGPIPE. */
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        int err = w < 0 ? errno : 0;
        if (w < 0 && err == EAGAIN) {
            struct pollfd pfd = {fd, POLLOUT, 0};
            int64_t left = (deadline_ns - mono_ns()) / 1000000;
            if (left > 0)
                poll(&pfd, 1, (int)left);
        }
        pthread_mutex_lock(&c->mu);
        if (w > 0)
            c->ooff += (size_t)w;
        else if (err != EAGAIN && err != EINTR)
            fail_all(c);
        else if (mono_ns() >= deadline_ns)
            break;
    }
    c->writing = 0;
    if (c->dead && !c->reading && c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
}

/* ---- the read side ---------------------------------------------------------- */

/* Hand one reply to the oldest slot waiting for one. */
static void deliver(rconn *c, redisReply *r, wakes *wl)
{
    rslot *s;

    c->stats.replies++;
    c->last_reply_ns = mono_ns();
    if (c->count == 0) { /* nobody asked: cannot happen, drop it */
        freeReplyObject(r);
        return;
    }
    s = &c->slots[c->fifo[c->head]];
    s->replies[s->got++] = r;
    if (s->got == s->nreplies) {
        c->head = (c->head + 1) % NSLOTS;
        c->count--;
        finish(c, s, 0, wl);
    }
}

/* One read from the socket, waiting at most until the deadline, and the
 * replies it completes delivered (`self`, the reader's own slot or NULL,
 * needs no wake).  Called and returns under mu with c->reading held;
 * reads without the lock. */
static void read_once(rconn *c, int64_t deadline_ns, const rslot *self)
{
    static _Thread_local char buf[RBUF];
    struct pollfd pfd = {c->fd, POLLIN, 0};
    int64_t left = (deadline_ns - mono_ns() + 999999) / 1000000;
    ssize_t n = 0;
    int ready;
    void *reply;

    pthread_mutex_unlock(&c->mu);
    ready = poll(&pfd, 1, left > 0 ? (int)left : 0);
    if (ready > 0)
        n = read(pfd.fd, buf, sizeof buf);
    pthread_mutex_lock(&c->mu);
    if (c->dead || ready == 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
        return;
    if (ready < 0 || n <= 0 ||
        redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK) {
        fail_all(c);
        return;
    }
    wakes wl = {0, {0}};
    for (;;) {
        if (redisReaderGetReply(c->reader, &reply) != REDIS_OK) {
            fail_all(c);
            break;
        }
        if (!reply)
            break;
        deliver(c, reply, &wl);
    }
    for (int i = 0; i < wl.n; i++) /* the reader is awake already */
        if (self && wl.w[i] == &self->state)
            wl.w[i] = wl.w[--wl.n];
    if (wl.n) {
        pthread_mutex_unlock(&c->mu);
        wake_all(&wl);
        pthread_mutex_lock(&c->mu);
    }
    /* What queued while that batch was out goes now, as one batch. */
    write_out(c, deadline_ns);
}

static void release_read_side(rconn *c)
{
    c->reading = 0;
    if (c->dead) {
        if (!c->writing && c->fd >= 0) {
            close(c->fd);
            c->fd = -1;
        }
        return;
    }
    promote(c);
}

/* ---- calls ------------------------------------------------------------------- */

/* Queue a request; returns the slot or NULL (down, or no free slot). */
static rslot *enqueue(rconn *c, const char *cmd, size_t len, int nreplies,
                      char *err, size_t errlen)
{
    rslot *s;

    if (!atomic_load(&c->up) || c->dead || c->fd < 0) {
        c->stats.down_fails++;
        snprintf(err, errlen, "not connected");
        return NULL;
    }
    if (c->nfree == 0) {
        snprintf(err, errlen, "more than %d requests in flight", NSLOTS);
        return NULL;
    }
    if (c->wlen + len > c->wcap) {
        size_t cap = c->wcap * 2 > c->wlen + len ? c->wcap * 2 : c->wlen + len;
        char *nb = realloc(c->wbuf, cap);
        if (!nb) {
            snprintf(err, errlen, "out of memory");
            return NULL;
        }
        c->wbuf = nb;
        c->wcap = cap;
    }
    memcpy(c->wbuf + c->wlen, cmd, len);
    c->wlen += len;
    c->queued++;
    s = &c->slots[c->freelist[--c->nfree]];
    s->queued_ns = mono_ns();
    s->nreplies = nreplies;
    s->got = 0;
    s->failed = 0;
    atomic_store(&s->state, PENDING);
    c->fifo[(c->head + c->count++) % NSLOTS] = (uint32_t)(s - c->slots);
    c->stats.calls++;
    return s;
}

/* Wait for s: read the socket ourselves when nobody else does.  Under mu.
 * Returns 1 when s is DONE, 0 at the deadline (s still pending). */
static int wait_for(rconn *c, rslot *s, int64_t deadline_ns)
{
    for (;;) {
        uint32_t st = atomic_load(&s->state);
        if (st == DONE)
            return 1;
        if (st == LEAD)
            atomic_store(&s->state, PENDING);
        if (mono_ns() >= deadline_ns)
            return 0;
        if (!c->reading && !c->dead) {
            c->reading = 1;
            write_out(c, deadline_ns); /* bytes left for a reader */
            while (atomic_load(&s->state) != DONE && !c->dead &&
                   mono_ns() < deadline_ns)
                read_once(c, deadline_ns, s);
            release_read_side(c);
            continue;
        }
        pthread_mutex_unlock(&c->mu);
        futex_wait(&s->state, PENDING, deadline_ns);
        pthread_mutex_lock(&c->mu);
    }
}

int rconn_call(rconn *c, const char *cmd, size_t len, int nreplies,
               redisReply **replies, int64_t timeout_ms, char *err,
               size_t errlen)
{
    return rconn_call_until(c, cmd, len, nreplies, replies,
                            mono_ns() + timeout_ms * 1000000, err, errlen);
}

int rconn_call_until(rconn *c, const char *cmd, size_t len, int nreplies,
                     redisReply **replies, int64_t deadline, char *err,
                     size_t errlen)
{
    rslot *s;
    int rc = RL_OK;

    if (nreplies < 1 || nreplies > RCONN_MAX_REPLIES)
        return snprintf(err, errlen, "bad reply count"), RL_ESTORE;
    pthread_mutex_lock(&c->mu);
    if (!(s = enqueue(c, cmd, len, nreplies, err, errlen))) {
        pthread_mutex_unlock(&c->mu);
        return RL_ESTORE;
    }
    /* Batching: while earlier requests are out and someone reads their
     * replies, leave ours queued; the reader sends everything that queued
     * as one batch when replies come back.  Otherwise send now. */
    if (c->count == c->queued || !c->reading)
        write_out(c, deadline);
    if (!wait_for(c, s, deadline)) { /* the reader frees it when it lands */
        atomic_store(&s->state, ABANDONED);
        if (!c->reading)
            promote(c); /* we may have been promoted as we gave up */
        c->stats.timeouts++;
        snprintf(err, errlen, "no reply in time");
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
    rslot *s;

    pthread_mutex_lock(&c->mu);
    if ((s = enqueue(c, cmd, len, nreplies, err, sizeof err)) != NULL) {
        atomic_store(&s->state, ABANDONED);
        write_out(c, mono_ns() + 5 * 1000000LL);
        if (!c->reading)
            wake_background(c); /* someone must read the reply */
    }
    pthread_mutex_unlock(&c->mu);
    return s ? RL_OK : RL_ESTORE;
}

/* ---- the background thread ----------------------------------------------- */

static void reconnect(rconn *c, int64_t *backoff_ms)
{
    char err[256];
    int fd = handshake(c, err, sizeof err);

    pthread_mutex_lock(&c->mu);
    if (fd >= 0) {
        redisReaderFree(c->reader);
        c->reader = redisReaderCreate();
        c->fd = fd;
        c->dead = 0;
        c->stats.reconnects++;
        atomic_store(&c->up, 1);
        *backoff_ms = 10;
    } else if (*backoff_ms < c->opt.max_backoff_ms) {
        *backoff_ms *= 2;
        if (*backoff_ms > c->opt.max_backoff_ms)
            *backoff_ms = c->opt.max_backoff_ms;
    }
    pthread_mutex_unlock(&c->mu);
}

/* A connection is stuck when its oldest request has waited longer than a
 * whole connect may take and no reply came meanwhile: the server hangs, or
 * the network swallows what it sends.  Replace it: the requests on it
 * have long been given up by their callers, and a fresh connection lets
 * checks reach Redis again as soon as it answers. */
static int stuck(rconn *c)
{
    int64_t now = mono_ns(), limit = c->opt.connect_timeout_ms * 1000000;
    const rslot *oldest;

    if (c->count == 0)
        return 0;
    if (limit < 1000000000)
        limit = 1000000000; /* never under a second */
    oldest = &c->slots[c->fifo[c->head]];
    return now - oldest->queued_ns > limit && now - c->last_reply_ns > limit;
}

/* Under mu: read what nobody waits for, push stuck bytes, notice a server
 * that closed an idle connection, and replace a stuck one. */
static void tend(rconn *c)
{
    if (c->fd < 0 || c->dead)
        return;
    if (stuck(c)) {
        c->stats.stuck++;
        fail_all(c);
        return;
    }
    if (!c->writing && (c->wlen || c->ooff < c->olen))
        write_out(c, mono_ns() + IDLE_MS * 1000000LL);
    if (c->reading)
        return;
    if (c->count == 0) { /* idle: is the socket readable (EOF)? */
        struct pollfd pfd = {c->fd, POLLIN, 0};
        if (poll(&pfd, 1, 0) > 0) {
            c->reading = 1;
            read_once(c, mono_ns(), NULL);
            release_read_side(c);
        }
        return;
    }
    for (uint32_t k = 0; k < c->count; k++) /* anyone still waiting? */
        if (atomic_load(&c->slots[c->fifo[(c->head + k) % NSLOTS]].state) !=
            ABANDONED) {
            promote(c); /* a safety net: a waiter should be reading */
            return;
        }
    c->reading = 1;
    read_once(c, mono_ns() + 1000000, NULL); /* at most 1 ms */
    release_read_side(c);
}

static void *io_main(void *arg)
{
    rconn *c = arg;
    int64_t backoff = 10;
    uint64_t drain;

    while (!atomic_load(&c->stop)) {
        struct pollfd p = {c->efd, POLLIN, 0};
        int need_connect;

        pthread_mutex_lock(&c->mu);
        if (c->dead && !c->reading && !c->writing && c->fd >= 0) {
            close(c->fd);
            c->fd = -1;
        }
        need_connect = c->fd < 0;
        if (!need_connect)
            tend(c);
        pthread_mutex_unlock(&c->mu);
        if (need_connect) {
            reconnect(c, &backoff);
            if (atomic_load(&c->up))
                continue;
        }
        if (poll(&p, 1, need_connect ? (int)backoff : IDLE_MS) > 0 &&
            read(c->efd, &drain, sizeof drain) < 0) { /* spurious */ }
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
    if (c->opt.max_backoff_ms < 10)
        c->opt.max_backoff_ms = 1000;
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
    /* Degraded: never wait here; the background thread connects. */
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
    if (!c)
        return;
    if (c->started) {
        atomic_store(&c->stop, 1);
        wake_background(c);
        pthread_join(c->io, NULL);
    }
    /* No caller may be here: they all returned before the limiter is freed. */
    pthread_mutex_lock(&c->mu);
    fail_all(c);
    pthread_mutex_unlock(&c->mu);
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
