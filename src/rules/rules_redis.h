/*
 * rules_redis.h -- the rules source's conversations with Redis: connect,
 * AUTH, SELECT, read the snapshot key, SUBSCRIBE to its channel and read
 * what arrives there.  Only the rules source's thread calls these.
 *
 * A connection (rr_conn) is a hiredis 0.14 context, which formats the
 * commands and parses the replies, plus, for rediss://, an OpenSSL
 * connection that carries the bytes (hiredis 0.14 has no TLS): the
 * handshake (redis_tls.c, the tls_* options' client context) and every
 * SSL_read / SSL_write wait here, OpenSSL's WANT_READ / WANT_WRITE mapped
 * to the same poll() waits, and what OpenSSL already holds decrypted is
 * read before any wait.  A plain context's socket is blocking with a
 * send/receive timeout, so code that is handed one may use redisCommand()
 * on it; a TLS one's socket is non-blocking.  These functions never block
 * in hiredis or OpenSSL, though: they wait in poll() on the socket AND on
 * a stop descriptor (the limiter's eventfd), with a deadline, so that
 * rl_limiter_free() is never held up by a slow, hung or unreachable
 * server (a connect and a TLS handshake included).  A host name is
 * resolved by getaddrinfo(), which can block on a sick resolver; an
 * address cannot.
 */
#ifndef RL_RULES_REDIS_H
#define RL_RULES_REDIS_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "redis_tls.h"
#include "redis_uri.h"

/* Outcomes besides a reply. */
#define RR_OK 0
#define RR_ERROR (-1)   /* connect, I/O, timeout or an error reply (err) */
#define RR_STOPPED (-2) /* the stop descriptor fired: give up at once     */
#define RR_MISSING 1    /* rr_read(): the key holds nothing               */
#define RR_TOO_BIG 2    /* rr_read(): more than RL_RULES_TEXT_MAX bytes   */

typedef struct rr_conn {
    redisContext *c;   /* formats into c->obuf, parses with c->reader   */
    SSL *ssl;          /* rediss://: carries the bytes; NULL: plain      */
    char host[256];    /* TLS: the server in messages                   */
    int port;
} rr_conn;

/* Connect to u, over TLS with client context tls when u says rediss://,
 * AUTH and SELECT as it says, all before deadline_ms (CLOCK_MONOTONIC);
 * io_timeout_ms becomes a plain socket's timeout.  The connection, or
 * NULL with RR_ERROR / RR_STOPPED in *rc and the reason in err (it names
 * the server by address, never by its URI). */
rr_conn *rr_connect(const redis_uri *u, SSL_CTX *tls, int stop_fd,
                    int64_t deadline_ms, int64_t io_timeout_ms, int *rc,
                    char *err, size_t errlen);

/* The socket, to poll for a push. */
int rr_fd(const rr_conn *c);

/* Close c (NULL: nothing). */
void rr_close(rr_conn *c);

/* Send what is queued on c->c (redisAppendCommand) and read `n` replies,
 * every one even after an error reply: RR_OK, RR_ERROR (the first error
 * reply's text, or why the connection failed, in err) or RR_STOPPED. */
int rr_replies(rr_conn *c, int n, int stop_fd, int64_t deadline_ms, char *err,
               size_t errlen);

/* The snapshot in `key`: RR_OK with a new NUL-terminated *buf (*len
 * bytes; free() it), RR_MISSING, RR_TOO_BIG (its size in *len, nothing
 * read), RR_ERROR or RR_STOPPED.  STRLEN first, then at most
 * RL_RULES_TEXT_MAX + 1 bytes of GETRANGE: a huge value costs nothing. */
int rr_read(rr_conn *c, const char *key, int stop_fd, int64_t deadline_ms,
            char **buf, size_t *len, char *err, size_t errlen);

/* SUBSCRIBE to `channel` and wait for the confirmation. */
int rr_subscribe(rr_conn *c, const char *channel, int stop_fd,
                 int64_t deadline_ms, char *err, size_t errlen);

/* Send a PING on a subscribed context (its answer arrives as a "pong"
 * through rr_drain()). */
int rr_ping(rr_conn *c, int stop_fd, int64_t deadline_ms, char *err,
            size_t errlen);

/* The subscribed socket is readable: read what is there and count the
 * messages (pushes) and pongs in it.  RR_OK, or RR_ERROR (the connection
 * is lost: EOF, I/O error, a protocol error). */
int rr_drain(rr_conn *c, int *messages, int *pongs, char *err,
             size_t errlen);

/* "127.0.0.1:6379/0" or "unix:/run/redis.sock?db=0": a server's name in
 * messages, without user or password. */
void rr_name(const redis_uri *u, char *out, size_t len);

#endif
