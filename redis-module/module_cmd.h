/*
 * module_cmd.h -- what ratelimit.so's commands share: RL.CHECK
 * (ratelimit_module.c) and RL.SETTLE (module_settle.c) check a rule's
 * numbers, read the test clock and write a plain state the same way.
 */
#ifndef RL_MODULE_CMD_H
#define RL_MODULE_CMD_H

#include <stdint.h>

#include "algo.h"
#include "module_api.h"

/* The error of an argument that is no number. */
extern const char mod_enum[];

/* A rule's numbers as algo_params_init() checks them (window in ms; burst
 * 0: the limit) into *ap; NULL, or the error to answer. */
const char *mod_rule_params(algo_params *ap, long long algo, long long limit,
                            long long burst, long long w);

/* The time: the server's, or with "testclock" a trailing NOW ms at
 * argv[at] (0: the server's).  -1 on bad arguments.  Every command calls
 * it before it writes: the server's time it reads (one clock read a
 * command) is what mod_put_plain() compares expiries with. */
int64_t mod_time(RedisModuleString **argv, int argc, int at);

/* A plain state's value p[0..n) and expiry written into key k (open for
 * writing; `was` its expiry as read), replicated as SET key value PXAT
 * exp, or PEXPIREAT key exp when the key held that very value already;
 * an expiry already past (at mod_time()'s reading) deletes (replicated
 * as DEL), as SET does. */
void mod_put_plain(RedisModuleCtx *ctx, RedisModuleKey *k,
                   RedisModuleString *key, const char *p, size_t n,
                   int64_t exp, int64_t was);

/* RL.SETTLE (module_settle.c). */
int mod_settle_command(RedisModuleCtx *ctx, RedisModuleString **argv,
                       int argc);

#endif
