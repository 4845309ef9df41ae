/*
 * redis_io.h -- the one way a request travels to a Redis server and back.
 *
 * One `rio` per server: a few connections, all owned by ONE I/O thread
 * that runs an epoll loop over them.  A caller fills a rio_job (its ops,
 * a deadline, how it wants to learn the answer) and queues it with
 * rio_submit(); the loop takes everything queued, sends it as one batch
 * per idle connection (one script call deciding many requests, each
 * all-or-nothing, redis_script.c), reads the replies and completes each
 * job exactly once: a blocking caller sleeping in rio_wait() is woken
 * (futex), an asynchronous one has its `done` called, in the I/O thread.
 * A job still queued or in flight at its deadline completes then as a
 * timeout; its late reply is read and dropped.  A second thread per
 * server, the connector, (re)connects and hands ready sockets to the loop,
 * so no request ever waits for a connect: while no connection is up,
 * submissions fail at once.
 */
#ifndef RL_REDIS_IO_H
#define RL_REDIS_IO_H

#include <hiredis/hiredis.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "ratelimit.h"
#include "redis_uri.h"
#include "store.h"

#define RIO_THREAD_NAME "rl-io"  /* the I/O thread's name (comm)     */
#define RIO_MAX_REPLIES 33  /* replies one raw call may wait for        */
#define RIO_MAX_CONNS 16

/* What became of a request, beyond RL_OK / RL_ESTORE. */
enum {
    RN_OK = 0,
    RN_ERROR,      /* timeout, I/O error, an unexpected reply           */
    RN_BREAKER,    /* the breaker is open: nothing was sent             */
    RN_MOVED,      /* the slot lives elsewhere now (addr)               */
    RN_ASK,        /* the slot is migrating: ask addr, this once        */
    RN_TRYAGAIN,   /* the slot's keys are split by a migration          */
    RN_DOWN,       /* CLUSTERDOWN                                       */
    RN_ELSEWHERE,  /* a cluster batch found the keys not served here:
                      send again with RN_DECLARED to learn where       */
    RN_REPLICA     /* as RN_ELSEWHERE, and the node said why: it is a
                      replica (READONLY), so no master's verdict       */
};

/* Check job flags (cluster nodes only). */
#define RN_ASKING 1    /* precede the call with ASKING (an ASK redirect) */
#define RN_DECLARED 2  /* a call of its own with its keys declared, for
                          the server to route                           */
#define RN_PROBE 4     /* in the script's shared call (keys undeclared),
                          even where RL.CHECK is: after an RL.CHECK's
                          CLUSTERDOWN, a node turning replica answers it
                          READONLY, a master of a cluster down not      */
#define RN_OWN_CALL (RN_ASKING | RN_DECLARED)

typedef struct rnode_reply {
    int status;                  /* RN_*                                 */
    char addr[64];               /* MOVED / ASK: "host:port"             */
    int module;                  /* the answer was an RL.CHECK's         */
} rnode_reply;

typedef struct rio rio;
typedef struct rio_job rio_job;
typedef struct rio_ticket rio_ticket; /* redis_ticket.h */
typedef void (*rio_done_fn)(rio_job *j);

enum { RIO_CHECK, RIO_RAW };

struct rio_job {
    /* in */
    int kind;                    /* RIO_CHECK: a script call's request;
                                    RIO_RAW: ready-made command bytes   */
    const store_op *ops;         /* RIO_CHECK                            */
    size_t n;
    algo_decision *out;
    int flags;                   /* RN_ASKING, RN_DECLARED               */
    const char *raw;             /* RIO_RAW: bytes of nreplies commands  */
    size_t raw_len;
    const char *raw_mod;         /* RIO_RAW: NULL, or the same as
                                    ratelimit.so's commands, sent instead
                                    on a connection that has them        */
    size_t raw_mod_len;
    int nreplies;
    redisReply **replies;        /* RIO_RAW, on RL_OK: the caller's      */
    int64_t deadline_ns;         /* CLOCK_MONOTONIC                      */
    int64_t not_before_ns;       /* 0, or not sent before (TRYAGAIN)     */
    rio_done_fn done;            /* NULL: a caller waits in rio_wait()   */
    void *arg;                   /* the submitter's                       */
    /* out, read once complete */
    int rc;                      /* RL_OK or RL_ESTORE                   */
    int64_t now_ms;              /* the script's time                    */
    rnode_reply why;
    int as_module;               /* RIO_RAW: raw_mod went                */
    /* the I/O layer's */
    rio_ticket *tk;              /* NULL: failed at submission           */
    uint32_t gen;                /* tk's generation for this job         */
    _Atomic uint32_t *bell;      /* tk's cohort's bell (redis_ticket.h)  */
};

typedef struct rio_opts {
    redis_uri uri;
    int connections;             /* sockets, 1..RIO_MAX_CONNS            */
    int64_t connect_timeout_ms;  /* connect + handshake, off the path    */
    int64_t max_backoff_ms;      /* longest wait between reconnect tries */
    const char *script;          /* SCRIPT LOADed on every connect       */
    size_t script_len;
    const char *library;         /* the function library's body (store_
                                    redis.h), FUNCTION LOADed on every
                                    connect and FCALLed where that
                                    worked; NULL: EVALSHA only          */
    size_t library_len;
    int degraded;                /* a failed first connect is no error   */
    /* Redis Cluster: a batch is one call in "C" mode (keys undeclared),
     * plus a call of its own for each job flagged RN_ASKING or
     * RN_DECLARED, in one write; else one call with every key declared. */
    int per_call;
    int compact;                 /* the compact layout (redis_key.h)     */
    int need_master;             /* a server whose ROLE is not master is
                                    refused at connect (Sentinel)        */
    const rl_clock *clock;       /* tests: the time passed to the script */
    rl_log_fn *log_fn;           /* the connector's news (degraded_start) */
    void *log_arg;
    struct ssl_ctx_st *tls;      /* rediss://: the client context (an
                                    SSL_CTX, redis_tls.h; rio_open takes
                                    a reference of its own); NULL plain  */
    int command;                 /* RCMD_* (redis_module_cmd.h)          */
    int oldest;                  /* option redis_oldest_limiter: 1, no
                                    limiter before 1.1.0 shares the keys
                                    (script_ctx's lean_tail)            */
} rio_opts;

/* Connect now (so a bad address or password is reported at start; with
 * o->degraded a failed connect is not an error) and start the threads.
 * Returns RL_OK, or RL_ESTORE / RL_ENOMEM with the reason in err. */
int rio_open(rio **out, const rio_opts *o, char *err, size_t errlen);

/* Stop the threads and close.  No job may be outstanding. */
void rio_close(rio *r);

/* Queue jobs[0..n) (their `in` fields set) in order.  A job fails at once
 * (completed before this returns, rc RL_ESTORE) when no connection is up.
 * Each job completes exactly once. */
void rio_submit(rio *r, rio_job *jobs, size_t n);

/* Wait for a job submitted with done == NULL to complete, at most until
 * its deadline + RIO_GRACE_MS (longer only while the I/O thread is
 * inside the few microseconds in which it reads the job's ops or writes
 * its answer): a caller leaves at its deadline even when the I/O thread
 * is late (a busy machine may not run it for a second).  A job given up
 * is a timeout (rc RL_ESTORE, why RN_ERROR) and is never touched again by
 * the I/O thread.  The grace lets the I/O thread's own completion at the
 * deadline, within its 1 ms sleep granularity, come first. */
#define RIO_GRACE_MS 5
void rio_wait(rio_job *j);

/* A raw call, blocking: send `len` bytes holding nreplies commands and
 * wait up to timeout_ms; on RL_OK the caller frees replies[] with
 * freeReplyObject().  Fire and forget: rio_send (the bytes are copied). */
int rio_call_mod(rio *r, const char *cmd, size_t len, const char *mod,
                 size_t mod_len, int nreplies, redisReply **replies,
                 int64_t timeout_ms, int *as_mod);
int rio_send_mod(rio *r, const char *cmd, size_t len, const char *mod,
                 size_t mod_len, int nreplies);
/* The _mod forms take `mod` (the same replies through ratelimit.so's
 * commands; NULL: none), sent instead of cmd on a connection that has the
 * module (redis_module_cmd.h); *as_mod (may be NULL): which went. */
static inline int rio_call(rio *r, const char *cmd, size_t len,
                           int nreplies, redisReply **replies,
                           int64_t timeout_ms)
{
    return rio_call_mod(r, cmd, len, NULL, 0, nreplies, replies, timeout_ms,
                        NULL);
}
static inline int rio_send(rio *r, const char *cmd, size_t len, int nreplies)
{
    return rio_send_mod(r, cmd, len, NULL, 0, nreplies);
}

/* Talk to host:port from now on (Sentinel: the new primary): the
 * connections up are closed (what they wait for fails) and the connector
 * connects to the new address.  Any thread but the I/O ones. */
void rio_retarget(rio *r, const char *host, int port);

/* 1 while a connection is up (a job would be sent). */
int rio_is_up(rio *r);

/* 1 once a connection has found ratelimit.so's commands
 * (redis_module_cmd.h; never with redis_command=lua): only then is a
 * _mod form worth encoding.  Any thread. */
int rio_module_seen(rio *r);

typedef struct rio_stats {
    int64_t calls, writes, timeouts, reconnects, down_fails, stuck;
    int64_t batches, checks, noscript, moved, asks, elsewhere;
    int64_t tls_handshakes, tls_resumed; /* connections up over TLS, and
                                            those that resumed a session */
} rio_stats;
void rio_stats_add(rio *r, rio_stats *st);

#endif
