/*
 * store_cluster.h -- state in a Redis Cluster: the slot map, one node
 * (redis_node.h: its I/O thread, batches, a breaker) per master, redirects
 * followed.  The tests' clock and the counters are reached through the
 * store's vtable (store_redis.h).
 */
#ifndef RL_STORE_CLUSTER_H
#define RL_STORE_CLUSTER_H

#include "clock.h"
#include "redis_node.h"
#include "store.h"

/* uri: redis-cluster://[[user]:password@]host:port[,host:port...] */
int store_cluster_new(const char *uri, const store_options *opt,
                      rl_store **out, char *err, size_t errlen);

/* Tests: the masters the store writes to now, as "host:port" lines into
 * buf; returns how many. */
int store_cluster_masters(rl_store *s, char *buf, size_t len);

#endif
