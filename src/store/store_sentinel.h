/*
 * store_sentinel.h -- state in the primary of a Redis Sentinel
 * deployment: redis-sentinel://[[user]:password@]host[:port][,...]/name.
 * The sentinels name the primary; the store is then the single-server
 * one (store_redis.c) on that address, refusing any server that is not a
 * master, and a watcher thread moves it to the new primary after a
 * failover.
 */
#ifndef RL_STORE_SENTINEL_H
#define RL_STORE_SENTINEL_H

#include "store.h"

#define SENTINEL_MAX 16           /* sentinels in one URI                */

int store_sentinel_new(const char *uri, const store_options *opt,
                       rl_store **out, char *err, size_t errlen);

/* Tests: the primary's address the store uses now ("host:port") and how
 * many times it moved to another one; 0, or -1 if s is not a Sentinel
 * store. */
int store_sentinel_primary(rl_store *s, char *addr, size_t len,
                           long *switches);

#endif
