/*
 * rules_redis.c -- see rules_redis.h.  Every wait is a poll() on the
 * socket and the stop descriptor with a deadline; hiredis only formats
 * commands, writes small ones and parses replies.  The thread that calls
 * these blocks every signal (rules_source.c), so a write to a server that
 * closed the connection fails with EPIPE instead of raising SIGPIPE in
 * the program.
 */
#include "rules_redis.h"
#include "clock.h"
#include "ratelimit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#define FAIL(...) fail(err, errlen, __VA_ARGS__)

__attribute__((format(printf, 3, 4)))
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return RR_ERROR;
}

void rr_name(const redis_uri *u, char *out, size_t len)
{
    if (u->is_unix)
        snprintf(out, len, "unix:%s?db=%d", u->path, u->db);
    else
        snprintf(out, len, "%s%s%s:%d/%d", strchr(u->host, ':') ? "[" : "",
                 u->host, strchr(u->host, ':') ? "]" : "", u->port, u->db);
}

/* 1: fd is ready for `events`; 0: the deadline passed; RR_STOPPED. */
static int wait_ready(int fd, short events, int stop_fd, int64_t deadline_ms)
{
    for (;;) {
        struct pollfd p[2] = {{.fd = fd, .events = events},
                              {.fd = stop_fd, .events = POLLIN}};
        int64_t left = deadline_ms - clock_mono_ms();
        int n;

        if (left <= 0)
            return 0;
        n = poll(p, 2, left > INT_MAX ? INT_MAX : (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || p[1].revents)
            return RR_STOPPED;
        if (p[0].revents)
            return 1;
    }
}

/* Send what the context has queued, then wait for one reply. */
static redisReply *finish(redisContext *c, int stop_fd, int64_t deadline_ms,
                          int *rc, const char *what, char *err,
                          size_t errlen)
{
    void *reply = NULL;
    int done = 0, w;

    *rc = RR_ERROR;
    while (!done) {
        if (redisBufferWrite(c, &done) != REDIS_OK) {
            FAIL("%s: %s", what, c->errstr);
            return NULL;
        }
    }
    for (;;) {
        if (redisGetReplyFromReader(c, &reply) != REDIS_OK) {
            FAIL("%s: %s", what, c->errstr);
            return NULL;
        }
        if (reply) {
            *rc = RR_OK;
            return reply;
        }
        if ((w = wait_ready(c->fd, POLLIN, stop_fd, deadline_ms)) != 1) {
            *rc = w == 0 ? FAIL("%s: no answer in time", what) : RR_STOPPED;
            return NULL;
        }
        if (redisBufferRead(c) != REDIS_OK) {
            FAIL("%s: %s", what, c->errstr);
            return NULL;
        }
    }
}

/* One command, its reply (an error reply is RR_ERROR, reply freed). */
static redisReply *call(redisContext *c, int stop_fd, int64_t deadline_ms,
                        int *rc, char *err, size_t errlen, const char *what,
                        const char *fmt, ...)
{
    redisReply *r;
    va_list ap;

    va_start(ap, fmt);
    if (redisvAppendCommand(c, fmt, ap) != REDIS_OK) {
        va_end(ap);
        *rc = FAIL("%s: %s", what, c->errstr);
        return NULL;
    }
    va_end(ap);
    r = finish(c, stop_fd, deadline_ms, rc, what, err, errlen);
    if (r && r->type == REDIS_REPLY_ERROR) {
        *rc = FAIL("%s: %.200s", what, r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

/* Wait for a non-blocking connect, then make the socket blocking with a
 * timeout: from here on the context is a sync one. */
static int settle(redisContext *c, int stop_fd, int64_t deadline_ms,
                  int64_t io_timeout_ms, char *err, size_t errlen)
{
    struct timeval tv = {.tv_sec = io_timeout_ms / 1000,
                         .tv_usec = (io_timeout_ms % 1000) * 1000};
    socklen_t sl = sizeof(int);
    int w = wait_ready(c->fd, POLLOUT, stop_fd, deadline_ms), e = 0;

    if (w != 1)
        return w == 0 ? FAIL("connect: no answer in time") : RR_STOPPED;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &sl) != 0 || e != 0)
        return FAIL("connect: %s", strerror(e ? e : errno));
    if (fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) & ~O_NONBLOCK) != 0)
        return FAIL("connect: fcntl: %s", strerror(errno));
    c->flags |= REDIS_BLOCK;
    if (redisSetTimeout(c, tv) != REDIS_OK)
        return FAIL("connect: %s", c->errstr);
    return RR_OK;
}

redisContext *rr_connect(const redis_uri *u, int stop_fd, int64_t deadline_ms,
                         int64_t io_timeout_ms, int *rc, char *err,
                         size_t errlen)
{
    redisContext *c = u->is_unix ? redisConnectUnixNonBlock(u->path)
                                 : redisConnectNonBlock(u->host, u->port);
    redisReply *r = NULL;

    if (!c || c->err) {
        *rc = FAIL("connect: %s", c ? c->errstr : "out of memory");
        redisFree(c);
        return NULL;
    }
    if ((*rc = settle(c, stop_fd, deadline_ms, io_timeout_ms, err,
                      errlen)) != RR_OK)
        goto fail;
    if (u->password[0] && u->user[0])
        r = call(c, stop_fd, deadline_ms, rc, err, errlen, "AUTH",
                 "AUTH %s %s", u->user, u->password);
    else if (u->password[0])
        r = call(c, stop_fd, deadline_ms, rc, err, errlen, "AUTH",
                 "AUTH %s", u->password);
    if (u->password[0] && !r)
        goto fail;
    freeReplyObject(r);
    r = NULL;
    if (u->db && !(r = call(c, stop_fd, deadline_ms, rc, err, errlen,
                            "SELECT", "SELECT %d", u->db)))
        goto fail;
    freeReplyObject(r);
    return c;
fail:
    redisFree(c);
    return NULL;
}

int rr_read(redisContext *c, const char *key, int stop_fd, int64_t deadline_ms,
            char **buf, size_t *len, char *err, size_t errlen)
{
    redisReply *r;
    long long n;
    int rc;

    if (!(r = call(c, stop_fd, deadline_ms, &rc, err, errlen, "STRLEN",
                   "STRLEN %s", key)))
        return rc;
    n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    if (n < 0)
        return FAIL("STRLEN: not an integer");
    *len = (size_t)n;
    if (n == 0)
        return RR_MISSING;
    if (n > RL_RULES_TEXT_MAX)
        return RR_TOO_BIG;
    /* the value may have been replaced since: read at most one byte more
     * than the cap, and look again */
    if (!(r = call(c, stop_fd, deadline_ms, &rc, err, errlen, "GETRANGE",
                   "GETRANGE %s 0 %d", key, RL_RULES_TEXT_MAX)))
        return rc;
    if (r->type != REDIS_REPLY_STRING || r->len == 0) {
        freeReplyObject(r);
        return RR_MISSING;
    }
    *len = (size_t)r->len;
    if (r->len > RL_RULES_TEXT_MAX) {
        freeReplyObject(r);
        return RR_TOO_BIG;
    }
    if (!(*buf = malloc(*len + 1))) {
        freeReplyObject(r);
        return FAIL("GETRANGE: out of memory");
    }
    memcpy(*buf, r->str, *len);
    (*buf)[*len] = '\0';
    freeReplyObject(r);
    return RR_OK;
}

int rr_subscribe(redisContext *c, const char *channel, int stop_fd,
                 int64_t deadline_ms, char *err, size_t errlen)
{
    redisReply *r;
    int rc, ok;

    if (!(r = call(c, stop_fd, deadline_ms, &rc, err, errlen, "SUBSCRIBE",
                   "SUBSCRIBE %s", channel)))
        return rc;
    ok = r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
         r->element[0]->type == REDIS_REPLY_STRING &&
         strcmp(r->element[0]->str, "subscribe") == 0;
    freeReplyObject(r);
    return ok ? RR_OK : FAIL("SUBSCRIBE: unexpected reply");
}

int rr_ping(redisContext *c, char *err, size_t errlen)
{
    int done = 0;

    if (redisAppendCommand(c, "PING") != REDIS_OK)
        return FAIL("PING: %s", c->errstr);
    while (!done)
        if (redisBufferWrite(c, &done) != REDIS_OK)
            return FAIL("PING: %s", c->errstr);
    return RR_OK;
}

/* The kind of a push: "message", "pong", ...; "" if not one. */
static const char *push_kind(const redisReply *r)
{
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
        r->element[0]->type == REDIS_REPLY_STRING)
        return r->element[0]->str;
    if (r->type == REDIS_REPLY_STATUS) /* PONG outside subscribed mode */
        return strcasecmp(r->str, "PONG") == 0 ? "pong" : "";
    return "";
}

int rr_drain(redisContext *c, int *messages, int *pongs, char *err,
             size_t errlen)
{
    void *reply;

    *messages = *pongs = 0;
    if (redisBufferRead(c) != REDIS_OK)
        return FAIL("subscription: %s", c->errstr);
    for (;;) {
        if (redisGetReplyFromReader(c, &reply) != REDIS_OK)
            return FAIL("subscription: %s", c->errstr);
        if (!reply)
            return RR_OK;
        if (strcmp(push_kind(reply), "message") == 0)
            ++*messages;
        else if (strcmp(push_kind(reply), "pong") == 0)
            ++*pongs;
        freeReplyObject(reply);
    }
}
