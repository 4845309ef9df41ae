/*
 * redis_node.h -- one Redis server as the Redis stores use it: a few shared,
 * pipelined connections ("lanes"), the requests of many threads batched on
 * each, the script encoded and its answers read back, and the server's
 * circuit breaker.  The single-server store is one node; the cluster store
 * is one node per master, chosen by the slot map.
 */
#ifndef RL_REDIS_NODE_H
#define RL_REDIS_NODE_H

#include "breaker.h"
#include "clock.h"
#include "redis_conn.h"
#include "store.h"

typedef struct rnode rnode;

typedef struct rnode_opts {
    rconn_opts conn;             /* address, credentials, script         */
    int connections;             /* lanes (pipelined sockets)            */
    int breaker_failures;
    int64_t breaker_cooldown_ms;
    int degraded;                /* a failed first connect is no error   */
    /* Redis Cluster: a batch is one call in "C" mode (keys undeclared,
     * any slots of this node; lua/check.lua), plus a call of its own for
     * each request flagged RN_ASKING or RN_DECLARED, in one write.
     * Otherwise a batch is one call with every key declared. */
    int per_call;
    int compact;                 /* the compact layout (redis_key.h)     */
    const rl_clock *clock;       /* tests: the time passed to the script */
} rnode_opts;

/* What became of a request, beyond RL_OK / RL_ESTORE. */
enum {
    RN_OK = 0,
    RN_ERROR,      /* timeout, I/O error, an unexpected reply           */
    RN_BREAKER,    /* the breaker is open: nothing was sent             */
    RN_MOVED,      /* the slot lives elsewhere now (addr)               */
    RN_ASK,        /* the slot is migrating: ask addr, this once        */
    RN_TRYAGAIN,   /* the slot's keys are split by a migration          */
    RN_DOWN,       /* CLUSTERDOWN                                       */
    RN_ELSEWHERE   /* a cluster batch found the keys not served here:
                      send again with RN_DECLARED to learn where       */
};

/* rnode_check() flags. */
#define RN_ASKING 1    /* precede the call with ASKING (an ASK redirect) */
#define RN_DECLARED 2  /* a call of its own with its keys declared, for
                          the server to route (per-call nodes only)     */

typedef struct rnode_reply {
    int status;                  /* RN_*                                 */
    char addr[64];               /* MOVED / ASK: "host:port"             */
} rnode_reply;

int rnode_open(rnode **out, const rnode_opts *o, char *err, size_t errlen);
void rnode_close(rnode *n);

/*
 * Decide ops[0..nops) all-or-nothing in one script call, waiting no later
 * than deadline_ns (CLOCK_MONOTONIC); flags RN_ASKING, RN_DECLARED.
 * Returns RL_OK with out[] and *now_ms filled, or RL_ESTORE with the
 * reason in why->status.
 */
int rnode_check(rnode *n, const store_op *ops, size_t nops,
                algo_decision *out, int64_t *now_ms, int64_t deadline_ns,
                int flags, rnode_reply *why);

/* Give back what ops[i] charged (out[i].allowed && out[i].changed) at
 * now_ms, without waiting for the answer.  1 if sent, 0 if not. */
/* Decide reqs[0..n) (n <= STORE_MANY_MAX), all queued at once on one
 * lane so they go out in as few script calls as their number allows (on
 * a cluster node, as unflagged requests: one "C" call per batch).  Every
 * reqs[i].rc is set (RL_ESTORE: breaker open, down, timeout, error, or
 * RN_ELSEWHERE), and why[i] when why is not NULL; returns RL_OK, or
 * RL_EINVAL for a bad n. */
int rnode_check_many(rnode *n, store_req *reqs, size_t nreqs,
                     int64_t deadline_ns, rnode_reply *why);

int rnode_refund(rnode *n, const store_op *ops, size_t nops,
                 const algo_decision *out, int64_t now_ms);

/* 1 if a lane is connected. */
int rnode_is_up(rnode *n);

/* A connection for control commands (heartbeats, the slot map). */
rconn *rnode_conn(rnode *n);

breaker *rnode_breaker(rnode *n);

typedef struct rnode_stats {
    int64_t calls, writes, timeouts, reconnects, down_fails, stuck;
    int64_t batches, checks, noscript, moved, asks, elsewhere;
    int64_t refunds, refreshes, tryagain; /* cluster store only */
} rnode_stats;
void rnode_stats_add(rnode *n, rnode_stats *st);

#endif
