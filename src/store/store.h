/*
 * store.h -- the one interface every state store implements.
 *
 * The request path hands a store all the charges of one request at once
 * (one per matching rule) and gets one decision per charge back.  The store
 * owns the clock (the memory store's monotonic clock, Redis TIME in a
 * script) and must apply the charges all-or-nothing: if any is denied,
 * none is kept.  That is the whole contract, so a Redis node or a Redis
 * Cluster plugs in behind it without the request path changing.
 */
#ifndef RL_STORE_H
#define RL_STORE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "algo.h"
#include "clock.h"
#include "ratelimit.h"
#include "rule.h"
#include "settle.h"

#define RL_OPS_MAX 32 /* charges in one request: rules one request matches */

typedef struct store_op {
    const rl_rule *rule;  /* algorithm, limits, state seed */
    const char *key;      /* client key, e.g. "user:123"   */
    size_t key_len;
    int64_t cost;
    int soft;             /* mode "log": a denial vetoes nothing */
    int lease_min;        /* > 0: a lease (lease.h): charge cost units, or
                             if fewer are left as many as are, at least
                             lease_min (the request's own cost, <=
                             RL_COST_MAX); the decision's granted says
                             how many.  Stores with give_back only.
                             (Here, in soft's padding: a store_op stays
                             48 bytes.) */
    const uint64_t *layout_key; /* option hash_key (the compact layout's
                                   SipHash key); NULL: not set */
} store_op;

typedef struct rl_store rl_store;

#define STORE_MANY_MAX 64 /* requests in one check_many call */

/* One request of a check_many call: its ops in, its answers out. */
typedef struct store_req {
    const store_op *ops;
    size_t n;                 /* 1..RL_OPS_MAX                      */
    algo_decision *out;       /* n decisions                        */
    int64_t now_ms;           /* the store's clock                  */
    int rc;                   /* RL_OK or RL_ESTORE, as check()     */
} store_req;

/* A request started without waiting (store_vtable.start): q's ops, n and
 * out are the caller's; done(a) is called exactly once with q.rc and
 * q.now_ms set, from the store's I/O thread (or before start returns
 * when the store decides at once or nothing could be sent).  `space` is
 * the store's while the request is in flight. */
#define STORE_ASYNC_SPACE 4096
typedef struct store_async store_async;
struct store_async {
    store_req q;
    void (*done)(store_async *a);
    void *arg;                /* the caller's                        */
    _Alignas(16) unsigned char space[STORE_ASYNC_SPACE];
};

struct rnode_stats;

/* One shard of a remote store (a Redis server; a master of a cluster), as
 * the metrics show it (rl_metrics_write). */
#define STORE_ADDR_MAX 264     /* "host:port" (host up to 255) or a path */
#define STORE_SHARDS_MAX 128   /* shards a store reports, at most        */
typedef struct store_shard {
    char addr[STORE_ADDR_MAX];
    int breaker_state;         /* RL_BREAKER_*                          */
    int64_t opens, closes;     /* the breaker's                         */
    int up;                    /* a connection is up                    */
    int failing;               /* closed, but a run of failures counts  */
    int64_t errors;            /* calls failed with no connection up, or
                                  on a connection found stuck            */
    int64_t timeouts;          /* calls given up at their deadline       */
    int64_t redirects;         /* MOVED and ASK answers followed         */
    int64_t reconnects;        /* connections replaced                   */
} store_shard;

typedef struct store_vtable {
    const char *name;
    /* 1: decides on this host, at memory speed, and cannot fail over
     * (memory://, shm://): no fallback store and no deny cache beside it,
     * latency sampled as the memory store's. */
    int local;
    /* Decide ops[0..n), n <= RL_OPS_MAX, all-or-nothing: unless every
     * non-soft op passes, nothing is charged; when they all pass, every op
     * that passed is charged (soft ones included).  Fill out[0..n) and
     * *now_ms (the store's clock).  Returns RL_OK or RL_ESTORE. */
    int (*check)(rl_store *s, const store_op *ops, size_t n,
                 algo_decision *out, int64_t *now_ms);
    void (*free)(rl_store *s);
    /* The breaker's state (RL_BREAKER_*) and counts; NULL: no breaker. */
    int (*breaker)(rl_store *s, int64_t *opens, int64_t *closes);
    /* Decide reqs[0..n), n <= STORE_MANY_MAX, each as check() would (each
     * request all-or-nothing, independent of the others), filling every
     * reqs[i].rc; for a store that gains from deciding many at once (one
     * Redis script call for all).  Returns RL_OK once every rc is set.
     * NULL: the request path calls check() for each. */
    int (*check_many)(rl_store *s, store_req *reqs, size_t n);
    /* Start deciding a->q as check() would, without waiting (see
     * store_async).  NULL: the store decides at once (check() does not
     * block: the memory store). */
    void (*start)(rl_store *s, store_async *a);
    /* Tests: the clock whose time the store's script is given. */
    void (*set_clock)(rl_store *s, rl_clock_fn fn, void *arg);
    /* Tests and benchmarks: a Redis store's I/O counters (summed over its
     * nodes).  NULL: not a Redis store. */
    void (*io_stats)(rl_store *s, struct rnode_stats *st);
    /* Metrics: the store's shards into out[0..max), each read lock-free;
     * returns how many there are (more than max: only max filled).
     * NULL: no shards (the memory store). */
    size_t (*shards)(rl_store *s, store_shard *out, size_t max);
    /* Leases (lease.h): give back `units` of what op's charge made at
     * charged_ms (the store's clock) took, as Lua's refund op does (a
     * fixed window only while that window lasts).  wait 0: sent without
     * waiting for the answer; 1: waited for, at most timeout_ms.
     * Returns RL_OK or RL_ESTORE.  NULL: no leases on this store. */
    int (*give_back)(rl_store *s, const store_op *op, int64_t units,
                     int64_t charged_ms, int wait);
    /* rl_settle(): settle ss->ops[0..n) (settle.h), each op at most once
     * per reservation (a marker kept beside its state until the charge's
     * time plus its rule's state life, made in the same atomic step as
     * the state's change), each op's marker and state together; an op
     * whose marker exists or whose charge has expired is skipped.  Sets
     * *settled to the ops settled by this call.  Returns RL_OK or
     * RL_ESTORE (an op may then be settled or not: a call again settles
     * what is left).  NULL: the store cannot settle. */
    int (*settle)(rl_store *s, const store_settle *ss, size_t *settled);
} store_vtable;

struct rl_store {
    const store_vtable *vt;
};

/* Options a store may read, taken from the limiter's configuration. */
typedef struct store_options {
    int64_t memory_max_bytes;
    int64_t timeout_ms;          /* one check's wait for Redis          */
    int64_t connect_timeout_ms;  /* a (re)connect, off the request path */
    int redis_connections;       /* pipelined connections per server    */
    int degraded_start;          /* start even if Redis is unreachable  */
    int breaker_failures;        /* failures in a row that open it      */
    int64_t breaker_cooldown_ms; /* open this long before one probe     */
    const char *fleet_name;      /* non-NULL: count the fleet by        */
    _Atomic int64_t *fleet_size; /*   heartbeats, into *fleet_size      */
    int compact;                 /* Redis: the compact layout           */
    /* rediss://, rediss-cluster:// (redis_tls.h); NULL strings: unset. */
    const char *tls_ca_file, *tls_ca_dir, *tls_cert_file, *tls_key_file;
    int tls_verify;              /* 0: the server is not verified       */
    rl_log_fn *log_fn;           /* the limiter's log hook (NULL: none) */
    void *log_arg;
    const char *sentinel_password; /* redis-sentinel://: AUTH to the
                                      sentinels (NULL: none)           */
    int64_t shm_size;            /* shm://: the region's bytes (0: default) */
    const uint64_t *hash_key;    /* option hash_key (NULL: not set)     */
    int functions;               /* Redis: FCALL the function library   */
    int command;                 /* Redis: RCMD_* (redis_module_cmd.h)  */
    int oldest;                  /* Redis: option redis_oldest_limiter  */
} store_options;

/* Open the store a URI names ("memory://", "shm://NAME", "redis://...",
 * "unix://...", "redis-cluster://...", "redis-sentinel://...").  Returns RL_OK, or
 * RL_ESTORE with the reason in err. */
int store_open(const char *uri, const store_options *opt, rl_store **out,
               char *err, size_t errlen);

/* A keyed hash of what names op's state in a local table (the deny
 * cache, the lease table): its rule's id and numbers, `extra` (a table's
 * own number of the rule, e.g. its lease; 0 if none) and its client key,
 * with the table's SipHash key.  Never 0 (0 marks a free slot). */
uint64_t store_op_fingerprint(const store_op *op, int64_t extra,
                              const uint64_t key[2]);

static inline void store_free(rl_store *s)
{
    if (s)
        s->vt->free(s);
}

#endif
