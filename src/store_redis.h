/*
 * store_redis.h -- state in one Redis server: every check is one EVALSHA of
 * the embedded script (lua/), pipelined over a few shared connections.
 */
#ifndef RL_STORE_REDIS_H
#define RL_STORE_REDIS_H

#include "clock.h"
#include "store.h"

int store_redis_new(const char *uri, const store_options *opt,
                    rl_store **out, char *err, size_t errlen);

/* The script the library carries (generated from lua/ at build time). */
extern const char rl_lua_check[];
extern const size_t rl_lua_check_len;

/* Tests only: a script to use instead (the test build of lua/, which reads
 * a time from ARGV[1]) and the clock whose time is passed there.  Set the
 * script before the store is created. */
extern const char *store_redis_test_script;
extern size_t store_redis_test_script_len;
void store_redis_set_clock(rl_store *s, rl_clock_fn fn, void *arg);

/* Tests only: decide a request's rules per cluster slot, as Redis Cluster
 * must, with refunds when one part denies.  Set before the store is
 * created. */
extern int store_redis_split_slots;

typedef struct store_redis_stats {
    int64_t calls, writes, timeouts, reconnects, down_fails; /* sockets */
    int64_t batches, checks;  /* script calls, and the requests in them */
    int64_t noscript, refunds;
} store_redis_stats;
void store_redis_stats_get(rl_store *s, store_redis_stats *st);

#endif
