/*
 * store_redis.h -- state in one Redis server: every check is one EVALSHA of
 * the embedded script (lua/), batched by the server's I/O thread over a
 * few connections (redis_io.h).
 */
#ifndef RL_STORE_REDIS_H
#define RL_STORE_REDIS_H

#include "clock.h"
#include "redis_node.h"
#include "store.h"

int store_redis_new(const char *uri, const store_options *opt,
                    rl_store **out, char *err, size_t errlen);

/* The store on the server u names (parsed already; shown: the URI
 * for messages, redacted); need_master: a server that is not a master is
 * refused at every connect (Sentinel). */
int store_redis_open(const redis_uri *u, const store_options *opt,
                     int need_master, const char *shown, rl_store **out,
                     char *err, size_t errlen);

/* The node of a store made by store_redis_new/open (NULL for any
 * other store). */
rnode *store_redis_node(rl_store *s);

/* The script the library carries (generated from lua/ at build time). */
extern const char rl_lua_check[];
extern const size_t rl_lua_check_len;
/* The same files as a Redis function library's body (lua/library.lua). */
extern const char rl_lua_library[];
extern const size_t rl_lua_library_len;

/* Tests only: a script to use instead (the test build of lua/, which reads
 * a time from ARGV[1]) and the clock whose time is passed there.  Set the
 * script before the store is created.  Either Redis store (single server
 * or cluster; through the store's vtable). */
extern const char *store_redis_test_script;
extern size_t store_redis_test_script_len;
void store_redis_set_clock(rl_store *s, rl_clock_fn fn, void *arg);

/* Counters of a Redis store, single server or cluster (every node's
 * summed): sockets (calls, writes, timeouts, reconnects, down_fails),
 * batches and the requests in them (checks), NOSCRIPT answers; the
 * cluster also counts redirects met (moved, asks, tryagain), checks
 * failed on a master's CLUSTERDOWN (clusterdown: Redis's own verdict; a
 * replica's is followed to the slot's master), refunds sent and slot
 * map refreshes.  Tests and benchmarks read them. */
typedef rnode_stats store_redis_stats;
void store_redis_stats_get(rl_store *s, store_redis_stats *st);

/* One node as a shard of the metrics (store_vtable.shards): its address,
 * breaker and I/O counters.  Either Redis store. */
void store_redis_shard(rnode *nd, const char *addr, store_shard *out);

/* The TLS client context for u (NULL in *ctx when u is not rediss://)
 * from opt's tls_* options; the caller frees it (SSL_CTX_free).  0, or -1
 * with the reason in err. */
struct ssl_ctx_st;
int store_redis_tls(const redis_uri *u, const store_options *opt,
                    struct ssl_ctx_st **ctx, char *err, size_t errlen);

/* The options of one node, from the store's (shared with the cluster):
 * the script (the test one if set), connections, breaker, layout. */
void store_redis_node_opts(rnode_opts *o, const store_options *opt,
                           const rl_clock *clock);

#endif
