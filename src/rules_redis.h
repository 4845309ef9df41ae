/*
 * rules_redis.h -- the rules source's conversations with Redis: connect,
 * AUTH, SELECT, read the snapshot key, SUBSCRIBE to its channel and read
 * what arrives there.  Only the rules source's thread calls these.
 *
 * The contexts are ordinary blocking ("sync") hiredis contexts whose
 * sockets carry a send/receive timeout, so code that is handed one may
 * use redisCommand() on it.  These functions never block in hiredis
 * itself, though: they wait in poll() on the socket AND on a stop
 * descriptor (the limiter's eventfd), with a deadline, so that
 * rl_limiter_free() is never held up by a slow, hung or unreachable
 * server (a connect included: it is made non-blocking, then the socket
 * is switched to blocking).  A host name is resolved by getaddrinfo(),
 * which can block on a sick resolver; an address cannot.
 */
#ifndef RL_RULES_REDIS_H
#define RL_RULES_REDIS_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "redis_uri.h"

/* Outcomes besides a reply. */
#define RR_OK 0
#define RR_ERROR (-1)   /* connect, I/O, timeout or an error reply (err) */
#define RR_STOPPED (-2) /* the stop descriptor fired: give up at once     */
#define RR_MISSING 1    /* rr_read(): the key holds nothing               */
#define RR_TOO_BIG 2    /* rr_read(): more than RL_RULES_TEXT_MAX bytes   */

/* Connect to u, AUTH and SELECT as it says, all before deadline_ms
 * (CLOCK_MONOTONIC); io_timeout_ms becomes the socket's timeout.  The
 * context, or NULL with RR_ERROR / RR_STOPPED in *rc and the reason in
 * err (it names the server by address, never by its URI). */
redisContext *rr_connect(const redis_uri *u, int stop_fd, int64_t deadline_ms,
                         int64_t io_timeout_ms, int *rc, char *err,
                         size_t errlen);

/* The snapshot in `key`: RR_OK with a new NUL-terminated *buf (*len
 * bytes; free() it), RR_MISSING, RR_TOO_BIG (its size in *len, nothing
 * read), RR_ERROR or RR_STOPPED.  STRLEN first, then at most
 * RL_RULES_TEXT_MAX + 1 bytes of GETRANGE: a huge value costs nothing. */
int rr_read(redisContext *c, const char *key, int stop_fd, int64_t deadline_ms,
            char **buf, size_t *len, char *err, size_t errlen);

/* SUBSCRIBE to `channel` and wait for the confirmation. */
int rr_subscribe(redisContext *c, const char *channel, int stop_fd,
                 int64_t deadline_ms, char *err, size_t errlen);

/* Send a PING on a subscribed context (its answer arrives as a "pong"
 * through rr_drain()). */
int rr_ping(redisContext *c, char *err, size_t errlen);

/* The subscribed socket is readable: read what is there and count the
 * messages (pushes) and pongs in it.  RR_OK, or RR_ERROR (the connection
 * is lost: EOF, I/O error, a protocol error). */
int rr_drain(redisContext *c, int *messages, int *pongs, char *err,
             size_t errlen);

/* "127.0.0.1:6379/0" or "unix:/run/redis.sock?db=0": a server's name in
 * messages, without user or password. */
void rr_name(const redis_uri *u, char *out, size_t len);

#endif
