/*
 * redis_link.c -- see redis_link.h.  The TLS side does by hand what
 * hiredis' blocking context does for plain TCP: resolve, connect each
 * address in turn without blocking past the timeout, then commands
 * written whole and replies read until hiredis' reader has one, every
 * wait a poll() with a deadline (rtls_wait).  SIGPIPE is held blocked
 * while it writes (rtls_sigpipe_*): the thread may be a caller's.
 */
#include "redis_link.h"
#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>

/* A connected non-blocking TCP socket to one of host's addresses by
 * deadline_ms, or -1 with the reason in err. */
static int tcp_connect(const char *host, int port, int64_t deadline_ms,
                       char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM}, *res, *a;
    char service[8];
    int fd = -1, rc, one = 1;

    snprintf(service, sizeof service, "%d", port);
    if ((rc = getaddrinfo(host, service, &hints, &res)) != 0) {
        snprintf(err, errlen, "connect to %s:%d: %s", host, port,
                 gai_strerror(rc));
        return -1;
    }
    snprintf(err, errlen, "connect to %s:%d: no address", host, port);
    for (a = res; a; a = a->ai_next) {
        struct pollfd p = {.events = POLLOUT};
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        int64_t left;
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    a->ai_protocol);
        if (fd < 0)
            continue;
        p.fd = fd;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        while (errno == EINPROGRESS || errno == EINTR) {
            left = deadline_ms - clock_mono_ms();
            errno = ETIMEDOUT;
            if (left <= 0)
                break;
            if ((rc = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left)) > 0) {
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
                errno = soerr;
                break;
            }
            errno = rc == 0 ? ETIMEDOUT : errno;
        }
        if (errno == 0)
            break;
        snprintf(err, errlen, "connect to %s:%d: %s", host, port,
                 strerror(errno));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd >= 0)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static int plain_open(rlink *l, const redis_uri *u, char *err, size_t errlen)
{
    struct timeval tv = {l->timeout_ms / 1000, (l->timeout_ms % 1000) * 1000};

    l->ctx = u->is_unix ? redisConnectUnixWithTimeout(u->path, tv)
                        : redisConnectWithTimeout(u->host, u->port, tv);
    if (!l->ctx || l->ctx->err) {
        snprintf(err, errlen, "connect to %s%s:%d: %s",
                 u->is_unix ? "unix:" : "", u->is_unix ? u->path : u->host,
                 u->is_unix ? 0 : u->port,
                 l->ctx ? l->ctx->errstr : "out of memory");
        return -1;
    }
    redisSetTimeout(l->ctx, tv);
    return 0;
}

int rlink_open(rlink *l, const redis_uri *u, SSL_CTX *tls, SSL_SESSION *sess,
               int64_t timeout_ms, char *err, size_t errlen)
{
    int64_t deadline = clock_mono_ms() + timeout_ms;
    rtls_sigpipe sp;

    *l = (rlink){.fd = -1, .timeout_ms = timeout_ms, .port = u->port};
    snprintf(l->host, sizeof l->host, "%s", u->host);
    if (!tls || u->is_unix) {
        if (plain_open(l, u, err, errlen) == 0)
            return 0;
        rlink_close(l);
        return -1;
    }
    if ((l->fd = tcp_connect(u->host, u->port, deadline, err, errlen)) < 0)
        return -1;
    rtls_sigpipe_block(&sp);
    l->ssl = rtls_handshake(tls, l->fd, u->host, u->port, sess, deadline, err,
                            errlen);
    rtls_sigpipe_restore(&sp);
    if (!l->ssl || !(l->reader = redisReaderCreate())) {
        if (l->ssl)
            snprintf(err, errlen, "out of memory");
        rlink_close(l);
        return -1;
    }
    return 0;
}

/* Write cmd[0..len) whole, then read until one reply is parsed. */
static redisReply *tls_roundtrip(rlink *l, const char *cmd, size_t len)
{
    int64_t deadline = clock_mono_ms() + l->timeout_ms;
    char buf[16384];
    void *rep = NULL;
    size_t off = 0;
    int ret;

    while (off < len) {
        errno = 0; /* a close is then told from an error */
        if ((ret = SSL_write(l->ssl, cmd + off, (int)(len - off))) > 0)
            off += (size_t)ret;
        else if (rtls_wait(l->ssl, l->fd, ret, deadline, l->host, l->port,
                           l->errstr, sizeof l->errstr))
            return NULL;
    }
    for (;;) {
        if (redisReaderGetReply(l->reader, &rep) != REDIS_OK) {
            l->not_resp = 1;
            snprintf(l->errstr, sizeof l->errstr, "protocol error");
            return NULL;
        }
        if (rep)
            return rep;
        errno = 0;
        if ((ret = SSL_read(l->ssl, buf, sizeof buf)) > 0)
            redisReaderFeed(l->reader, buf, (size_t)ret);
        else if (rtls_wait(l->ssl, l->fd, ret, deadline, l->host, l->port,
                           l->errstr, sizeof l->errstr))
            return NULL;
    }
}

redisReply *rlink_command(rlink *l, const char *fmt, ...)
{
    va_list ap;
    char *cmd = NULL;
    int len;
    redisReply *rep;
    rtls_sigpipe sp;

    va_start(ap, fmt);
    if (l->ctx) {
        rep = redisvCommand(l->ctx, fmt, ap);
        va_end(ap);
        if (!rep) {
            l->not_resp = l->ctx->err == REDIS_ERR_PROTOCOL;
            snprintf(l->errstr, sizeof l->errstr, "%s", l->ctx->errstr);
        }
        return rep;
    }
    len = redisvFormatCommand(&cmd, fmt, ap);
    va_end(ap);
    if (len < 0) {
        snprintf(l->errstr, sizeof l->errstr, "out of memory");
        return NULL;
    }
    ERR_clear_error();
    rtls_sigpipe_block(&sp);
    rep = tls_roundtrip(l, cmd, (size_t)len);
    rtls_sigpipe_restore(&sp);
    free(cmd);
    return rep;
}

void rlink_keep_session(rlink *l, SSL_SESSION **sess)
{
    SSL_SESSION *s = l->ssl ? SSL_get1_session(l->ssl) : NULL;

    if (!s)
        return;
    SSL_SESSION_free(*sess);
    *sess = s;
}

int rlink_release(rlink *l, SSL **ssl)
{
    int fd;

    *ssl = l->ssl;
    if (l->ctx) {
        fd = redisFreeKeepFd(l->ctx);
        l->ctx = NULL;
    } else {
        fd = l->fd;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    l->ssl = NULL;
    l->fd = -1;
    rlink_close(l);
    return fd;
}

void rlink_close(rlink *l)
{
    if (l->ctx)
        redisFree(l->ctx);
    rtls_free(l->ssl);
    if (l->fd >= 0)
        close(l->fd);
    if (l->reader)
        redisReaderFree(l->reader);
    *l = (rlink){.fd = -1};
}
