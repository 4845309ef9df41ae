/*
 * rules_redis.c -- see rules_redis.h.  Every wait is a poll() on the
 * socket and the stop descriptor with a deadline; hiredis only formats
 * commands, writes small ones (plain) and parses replies.  Over TLS the
 * bytes of hiredis' output buffer go out through SSL_write and what
 * SSL_read returns is fed to its reader; a read takes everything OpenSSL
 * can decrypt, until it wants more from the socket, so nothing waits in
 * OpenSSL's buffers while the thread polls the socket.  The thread that
 * calls these blocks every signal (rules_source.c), so a write to a
 * server that closed the connection fails with EPIPE instead of raising
 * SIGPIPE in the program.
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

#include <hiredis/sds.h>
#include <openssl/err.h>

#define FAIL(...) fail(err, errlen, __VA_ARGS__)
#define TLS_CHUNK 16384 /* one TLS record's worth read at a time */

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

/* ---- the bytes: hiredis' own socket I/O, or OpenSSL ------------------ */

/* After an OpenSSL call on c returned ret <= 0: wait for what it wants
 * (RR_OK: call again), or why not. */
static int tls_wait(rr_conn *c, int ret, int stop_fd, int64_t deadline_ms,
                    const char *what, char *err, size_t errlen)
{
    int e = SSL_get_error(c->ssl, ret), w;
    char why[256];

    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
        rtls_error(c->ssl, ret, c->host, c->port, why, sizeof why);
        return FAIL("%s: %s", what, why);
    }
    w = wait_ready(c->c->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
                   stop_fd, deadline_ms);
    if (w == 1)
        return RR_OK;
    return w == 0 ? FAIL("%s: no answer in time", what) : RR_STOPPED;
}

/* Send everything queued in the context's output buffer. */
static int send_queued(rr_conn *c, int stop_fd, int64_t deadline_ms,
                       const char *what, char *err, size_t errlen)
{
    int done = 0, ret, rc;

    if (!c->ssl) { /* blocking, under the socket's send timeout */
        while (!done)
            if (redisBufferWrite(c->c, &done) != REDIS_OK)
                return FAIL("%s: %s", what, c->c->errstr);
        return RR_OK;
    }
    while (sdslen(c->c->obuf) > 0) {
        size_t len = sdslen(c->c->obuf);
        ERR_clear_error();
        errno = 0;
        ret = SSL_write(c->ssl, c->c->obuf, len > INT_MAX ? INT_MAX : (int)len);
        if (ret > 0)
            sdsrange(c->c->obuf, ret, -1);
        else if ((rc = tls_wait(c, ret, stop_fd, deadline_ms, what, err,
                                errlen)) != RR_OK)
            return rc;
    }
    return RR_OK;
}

/* TLS: feed the reader all OpenSSL can decrypt now.  1: something read;
 * 0: nothing (wait for the socket); RR_ERROR (the server closed, or the
 * connection failed). */
static int tls_fill(rr_conn *c, const char *what, char *err, size_t errlen)
{
    char buf[TLS_CHUNK], why[256];
    int ret, e, got = 0;

    for (;;) {
        ERR_clear_error();
        errno = 0;
        if ((ret = SSL_read(c->ssl, buf, sizeof buf)) > 0) {
            if (redisReaderFeed(c->c->reader, buf, (size_t)ret) != REDIS_OK)
                return FAIL("%s: out of memory", what);
            got = 1;
            continue;
        }
        e = SSL_get_error(c->ssl, ret);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
            return got;
        rtls_error(c->ssl, ret, c->host, c->port, why, sizeof why);
        return FAIL("%s: %s", what, why);
    }
}

/* One reply parsed from what arrives, by deadline_ms. */
static redisReply *read_one(rr_conn *c, int stop_fd, int64_t deadline_ms,
                            int *rc, const char *what, char *err,
                            size_t errlen)
{
    void *reply = NULL;
    int w, got;

    *rc = RR_ERROR;
    for (;;) {
        if (redisGetReplyFromReader(c->c, &reply) != REDIS_OK) {
            FAIL("%s: %s", what, c->c->errstr);
            return NULL;
        }
        if (reply) {
            *rc = RR_OK;
            return reply;
        }
        if (c->ssl && (got = tls_fill(c, what, err, errlen)) != 0) {
            if (got < 0)
                return NULL;
            continue;
        }
        if ((w = wait_ready(c->c->fd, POLLIN, stop_fd, deadline_ms)) != 1) {
            *rc = w == 0 ? FAIL("%s: no answer in time", what) : RR_STOPPED;
            return NULL;
        }
        if (!c->ssl && redisBufferRead(c->c) != REDIS_OK) {
            FAIL("%s: %s", what, c->c->errstr);
            return NULL;
        }
    }
}

/* Send what the context has queued, then wait for one reply. */
static redisReply *finish(rr_conn *c, int stop_fd, int64_t deadline_ms,
                          int *rc, const char *what, char *err,
                          size_t errlen)
{
    if ((*rc = send_queued(c, stop_fd, deadline_ms, what, err, errlen)) !=
        RR_OK)
        return NULL;
    return read_one(c, stop_fd, deadline_ms, rc, what, err, errlen);
}

int rr_replies(rr_conn *c, int n, int stop_fd, int64_t deadline_ms, char *err,
               size_t errlen)
{
    int rc = send_queued(c, stop_fd, deadline_ms, "pipeline", err, errlen),
        first = RR_OK;
    redisReply *r;

    for (int i = 0; i < n && rc == RR_OK; i++) {
        if (!(r = read_one(c, stop_fd, deadline_ms, &rc, "pipeline", err,
                           errlen)))
            break;
        if (r->type == REDIS_REPLY_ERROR && first == RR_OK)
            first = FAIL("%.200s", r->str);
        freeReplyObject(r);
    }
    return rc != RR_OK ? rc : first;
}

/* One command, its reply (an error reply is RR_ERROR, reply freed). */
static redisReply *call(rr_conn *c, int stop_fd, int64_t deadline_ms,
                        int *rc, char *err, size_t errlen, const char *what,
                        const char *fmt, ...)
{
    redisReply *r;
    va_list ap;

    va_start(ap, fmt);
    if (redisvAppendCommand(c->c, fmt, ap) != REDIS_OK) {
        va_end(ap);
        *rc = FAIL("%s: %s", what, c->c->errstr);
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

/* Wait for a non-blocking connect; plain, make the socket blocking with
 * a timeout (from here on the context is a sync one); TLS, keep it
 * non-blocking and handshake. */
static int settle(rr_conn *k, SSL_CTX *tls, int stop_fd, int64_t deadline_ms,
                  int64_t io_timeout_ms, char *err, size_t errlen)
{
    struct timeval tv = {.tv_sec = io_timeout_ms / 1000,
                         .tv_usec = (io_timeout_ms % 1000) * 1000};
    socklen_t sl = sizeof(int);
    redisContext *c = k->c;
    int w = wait_ready(c->fd, POLLOUT, stop_fd, deadline_ms), e = 0, ret;
    char why[256];

    if (w != 1)
        return w == 0 ? FAIL("connect: no answer in time") : RR_STOPPED;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &sl) != 0 || e != 0)
        return FAIL("connect: %s", strerror(e ? e : errno));
    if (tls) {
        if (!(k->ssl = rtls_new(tls, c->fd, k->host, k->port, NULL, why,
                                sizeof why)))
            return FAIL("connect: %s", why);
        while ((ERR_clear_error(), errno = 0, ret = SSL_connect(k->ssl)) != 1)
            if ((w = tls_wait(k, ret, stop_fd, deadline_ms, "connect", err,
                              errlen)) != RR_OK)
                return w;
        return RR_OK;
    }
    if (fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) & ~O_NONBLOCK) != 0)
        return FAIL("connect: fcntl: %s", strerror(errno));
    c->flags |= REDIS_BLOCK;
    if (redisSetTimeout(c, tv) != REDIS_OK)
        return FAIL("connect: %s", c->errstr);
    return RR_OK;
}

/* AUTH and SELECT as u says. */
static int hello(rr_conn *c, const redis_uri *u, int stop_fd,
                 int64_t deadline_ms, char *err, size_t errlen)
{
    redisReply *r = NULL;
    int rc = RR_OK;

    if (u->password[0] && u->user[0])
        r = call(c, stop_fd, deadline_ms, &rc, err, errlen, "AUTH",
                 "AUTH %s %s", u->user, u->password);
    else if (u->password[0])
        r = call(c, stop_fd, deadline_ms, &rc, err, errlen, "AUTH",
                 "AUTH %s", u->password);
    if (u->password[0] && !r)
        return rc;
    freeReplyObject(r);
    r = NULL;
    if (u->db && !(r = call(c, stop_fd, deadline_ms, &rc, err, errlen,
                            "SELECT", "SELECT %d", u->db)))
        return rc;
    freeReplyObject(r);
    return RR_OK;
}

rr_conn *rr_connect(const redis_uri *u, SSL_CTX *tls, int stop_fd,
                    int64_t deadline_ms, int64_t io_timeout_ms, int *rc,
                    char *err, size_t errlen)
{
    rr_conn *k = calloc(1, sizeof *k);

    if (!k) {
        *rc = FAIL("connect: out of memory");
        return NULL;
    }
    snprintf(k->host, sizeof k->host, "%s", u->host);
    k->port = u->port;
    k->c = u->is_unix ? redisConnectUnixNonBlock(u->path)
                      : redisConnectNonBlock(u->host, u->port);
    if (!k->c || k->c->err) {
        *rc = FAIL("connect: %s", k->c ? k->c->errstr : "out of memory");
        goto fail;
    }
    if (u->tls && (u->is_unix || !tls)) {
        *rc = FAIL("connect: TLS needs a host and a TLS context");
        goto fail;
    }
    if ((*rc = settle(k, u->tls ? tls : NULL, stop_fd, deadline_ms,
                      io_timeout_ms, err, errlen)) != RR_OK ||
        (*rc = hello(k, u, stop_fd, deadline_ms, err, errlen)) != RR_OK)
        goto fail;
    return k;
fail:
    rr_close(k);
    return NULL;
}

int rr_fd(const rr_conn *c)
{
    return c->c->fd;
}

void rr_close(rr_conn *c)
{
    if (!c)
        return;
    rtls_free(c->ssl); /* before the socket closes */
    redisFree(c->c);
    free(c);
}

int rr_read(rr_conn *c, const char *key, int stop_fd, int64_t deadline_ms,
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

int rr_subscribe(rr_conn *c, const char *channel, int stop_fd,
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

int rr_ping(rr_conn *c, int stop_fd, int64_t deadline_ms, char *err,
            size_t errlen)
{
    if (redisAppendCommand(c->c, "PING") != REDIS_OK)
        return FAIL("PING: %s", c->c->errstr);
    return send_queued(c, stop_fd, deadline_ms, "PING", err, errlen);
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

int rr_drain(rr_conn *c, int *messages, int *pongs, char *err,
             size_t errlen)
{
    void *reply;

    *messages = *pongs = 0;
    if (c->ssl ? tls_fill(c, "subscription", err, errlen) < 0
               : redisBufferRead(c->c) != REDIS_OK)
        return c->ssl ? RR_ERROR : FAIL("subscription: %s", c->c->errstr);
    for (;;) {
        if (redisGetReplyFromReader(c->c, &reply) != REDIS_OK)
            return FAIL("subscription: %s", c->c->errstr);
        if (!reply)
            return RR_OK;
        if (strcmp(push_kind(reply), "message") == 0)
            ++*messages;
        else if (strcmp(push_kind(reply), "pong") == 0)
            ++*pongs;
        freeReplyObject(reply);
    }
}
