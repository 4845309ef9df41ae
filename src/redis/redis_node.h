/*
 * redis_node.h -- one Redis server as the Redis stores use it: its I/O
 * (redis_io.h: connections owned by one I/O thread, requests batched into
 * script calls) and its circuit breaker.  The single-server store is one
 * node; the cluster store is one node per master, chosen by the slot map.
 * A request is decided blocking (rnode_check, rnode_check_many: the
 * caller sleeps until the I/O thread completes it) or started
 * (rnode_start: a callback in the I/O thread): the same path either way.
 */
#ifndef RL_REDIS_NODE_H
#define RL_REDIS_NODE_H

#include "breaker.h"
#include "clock.h"
#include "redis_io.h"
#include "store.h"

typedef struct rnode rnode;

typedef struct rnode_opts {
    rio_opts io;                 /* address, credentials, script, lanes  */
    int breaker_failures;
    int64_t breaker_cooldown_ms;
    int64_t timeout_ms;          /* a call's: the breaker's time slice   */
} rnode_opts;

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

/* Decide reqs[0..n) (n <= STORE_MANY_MAX), queued at once so they go out
 * in as few script calls as their number allows (on a cluster node, as
 * unflagged requests).  Every reqs[i].rc is set (RL_ESTORE: breaker open,
 * down, timeout, error, or RN_ELSEWHERE), and why[i] when why is not
 * NULL; returns RL_OK, or RL_EINVAL for a bad n. */
int rnode_check_many(rnode *n, store_req *reqs, size_t nreqs,
                     int64_t deadline_ns, rnode_reply *why);

/* A started request: job.ops / n / out / flags / deadline_ns set by the
 * caller, with done and arg; done(a) is called exactly once, from the I/O
 * thread, or before rnode_start returns when nothing could be sent
 * (breaker open: why RN_BREAKER; no connection up).  The breaker hears of
 * the outcome before done runs. */
typedef struct rnode_async rnode_async;
struct rnode_async {
    rio_job job;                 /* first: its done is the node's        */
    rnode *node;
    int probe;                   /* the breaker's probe                  */
    void (*done)(rnode_async *a);
    void *arg;
};
void rnode_start(rnode *n, rnode_async *a);

/* Give back what ops[i] charged (out[i].allowed && out[i].changed) at
 * now_ms, without waiting for the answer.  1 if sent, 0 if not. */
int rnode_refund(rnode *n, const store_op *ops, size_t nops,
                 const algo_decision *out, int64_t now_ms);

/* A lease's unspent units (lease.h): give back `units` of op's charge
 * made at charged_ms.  timeout_ms 0: sent without waiting; else the
 * answer is waited for that long.  RL_OK or RL_ESTORE. */
int rnode_give_back(rnode *n, const store_op *op, int64_t units,
                    int64_t charged_ms, int64_t timeout_ms);

/* Settle ss->ops[from..from+n) in one script call (redis_settle.h),
 * preceded by ASKING when `asking`, waiting at most timeout_ms.  RL_OK
 * with *settled the ops settled now, or RL_ESTORE with why->status
 * (RN_MOVED, RN_ASK with why->addr; RN_ERROR). */
int rnode_settle(rnode *n, const store_settle *ss, size_t from, size_t nops,
                 int asking, int64_t timeout_ms, size_t *settled,
                 rnode_reply *why);

/* 1 if a connection is up. */
int rnode_is_up(rnode *n);

/* The node's I/O, for control commands (heartbeats). */
rio *rnode_io(rnode *n);

breaker *rnode_breaker(rnode *n);

typedef struct rnode_stats {
    int64_t calls, writes, timeouts, reconnects, down_fails, stuck;
    int64_t batches, checks, noscript, moved, asks, elsewhere;
    int64_t tls_handshakes, tls_resumed;
    int64_t refunds, refreshes, tryagain; /* cluster store only */
    int64_t clusterdown; /* cluster: checks failed on a master's CLUSTERDOWN */
} rnode_stats;
void rnode_stats_add(rnode *n, rnode_stats *st);

#endif
