/*
 * redis_conn.h -- one pipelined connection to one Redis server, shared by
 * every thread of the process.
 *
 * Callers hand over ready-made RESP bytes and wait, with a timeout, for
 * their replies.  An I/O thread owns the socket: it writes everything that
 * queued up while it was busy in one write (so 64 concurrent checks become
 * a few batched writes, not 64 sockets), reads replies in order and wakes
 * each caller.  It also (re)connects, authenticates, selects the database
 * and loads the script, so no request ever waits for a connect: while the
 * connection is down, calls fail at once.
 */
#ifndef RL_REDIS_CONN_H
#define RL_REDIS_CONN_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "redis_uri.h"

#define RCONN_MAX_REPLIES 33 /* replies one call may wait for */

typedef struct rconn rconn;

typedef struct rconn_opts {
    redis_uri uri;
    int64_t connect_timeout_ms; /* connect + handshake, in the I/O thread */
    int64_t max_backoff_ms;     /* longest wait between reconnect tries  */
    const char *script;         /* SCRIPT LOADed on every connect          */
    size_t script_len;
} rconn_opts;

/* Connect now (so a bad address or password is reported at start); with
 * `degraded` set, a failed first connect is not an error: the I/O thread
 * keeps trying.  Returns RL_OK or RL_ESTORE with the reason in err. */
int rconn_open(rconn **out, const rconn_opts *o, int degraded, char *err,
               size_t errlen);
void rconn_close(rconn *c);

/* Send `len` bytes holding `nreplies` commands and wait up to timeout_ms
 * for all the replies.  On RL_OK the caller owns replies[0..nreplies) and
 * frees them with freeReplyObject().  RL_ESTORE: down, I/O error or timeout
 * (the message says which, in err). */
int rconn_call(rconn *c, const char *cmd, size_t len, int nreplies,
               redisReply **replies, int64_t timeout_ms, char *err,
               size_t errlen);

/* The same, waiting until an absolute CLOCK_MONOTONIC time in ns. */
int rconn_call_until(rconn *c, const char *cmd, size_t len, int nreplies,
                     redisReply **replies, int64_t deadline_ns, char *err,
                     size_t errlen);

/* Send and do not wait (the replies are dropped). */
int rconn_send(rconn *c, const char *cmd, size_t len, int nreplies);

/* 1 while connected (a call would be sent), else 0. */
int rconn_is_up(rconn *c);

/* The SHA-1 of the script: the name EVALSHA calls it by. */
const char *rconn_sha(const rconn *c);

typedef struct rconn_stats {
    int64_t calls, writes, replies, timeouts, reconnects, down_fails, stuck;
} rconn_stats;
void rconn_stats_get(rconn *c, rconn_stats *st);

#endif
