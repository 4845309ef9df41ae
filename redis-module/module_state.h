/*
 * module_state.h -- a client's state in Redis as ratelimit.so reads and
 * writes it: exactly the formats the Lua library (lua/) keeps, so a fleet
 * may mix limiters that call the module with ones that run the script on
 * the same keys.  The plain layout is one string key per client and rule
 * whose value and expiry together hold the algo_state (lua/token_bucket.lua
 * and its siblings: *_load, *_save); the compact layout is a field of the
 * per-epoch hashes <base>:<epoch> (lua/compact.lua).  The sliding log is a
 * plain key of 6-byte big-endian times (lua/sliding_log.lua).
 */
#ifndef RL_MODULE_STATE_H
#define RL_MODULE_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "algo.h"
#include "decimal.h"
#include "module_api.h"

/* What a read or write may fail with. */
enum {
    MS_OK = 0,
    MS_WRONGTYPE = -1, /* the key holds another type */
    MS_CORRUPT = -2    /* a value no limiter writes */
};

/* A plain value with room for any state (a sliding window's two counts
 * are the longest: two decimal_put() numbers; a log is not kept here). */
#define MS_VALUE_MAX (2 * DECIMAL_MAX)

/* The plain layout's value of st (not a log) and its expiry (ms). */
size_t ms_plain_value(const algo_params *ap, const algo_state *st,
                      char *buf, int64_t *exp);

/* The plain state in key k (open for reading): *st and *found (0: all
 * zero, none), and the key's expiry in *exp (REDISMODULE_NO_EXPIRE: none).
 * A log's bytes are left in *log, *loglen (the key's own memory: valid
 * while k is open and unchanged). */
int ms_plain_read(RedisModuleKey *k, const algo_params *ap, algo_state *st,
                  const char **log, size_t *loglen, int *found, int64_t *exp);

/* The compact layout: the state of `field` of rule base `base` at now, as
 * lua/compact.lua's *_cread (not for the log); *found 0 when none. */
int ms_compact_read(RedisModuleCtx *ctx, const char *base, size_t blen,
                    RedisModuleString *field, const algo_params *ap,
                    int64_t now, algo_state *st, int *found);

/* Write st as lua/compact.lua's *_cwrite, replicating the HSET (and the
 * PEXPIREAT that the hash's first field sets); converted: a state
 * converted from a replaced shape (compact_move: a sliding window's
 * previous count is written too). */
int ms_compact_write(RedisModuleCtx *ctx, const char *base, size_t blen,
                     RedisModuleString *field, const algo_params *ap,
                     int64_t now, const algo_state *st, int converted);

/* The hash of epoch e, base ':' e, into buf (its length; 0: too long),
 * and the length of a rule's epoch: its window, or a bucket's life. */
size_t ms_hash_name(char *buf, size_t size, const char *base, size_t blen,
                    int64_t e);
int64_t ms_epoch_ms(const algo_params *ap);

/* Give back `cost` of a charge made at `at` to `field`, as
 * lua/compact.lua's *_crefund (nothing when the field has no state). */
int ms_compact_refund(RedisModuleCtx *ctx, const char *base, size_t blen,
                      RedisModuleString *field, const algo_params *ap,
                      int64_t cost, int64_t at, int64_t now);

/* The 6-byte big-endian time of a log entry, and its inverse. */
int64_t ms_log_time(const char *p);
void ms_log_put(char *p, int64_t t);
#define MS_LOG_B 6

#endif
