/*
 * rldchange.h -- changes made the operator's way, for bench/swapbench: a
 * real ratelimitd (tests/rld_harness.c) on the bench's redis-server, the
 * rule set PUT rule by rule, then each change one PUT of rule r0 with a
 * new limit.  The time of the PUT's 200 is what the control path's figure
 * counts from.
 */
#ifndef RL_BENCH_RLDCHANGE_H
#define RL_BENCH_RLDCHANGE_H

#include <stdint.h>

#include "rld_harness.h"

/* Start ratelimitd publishing to redis_uri and PUT rules r0..r{n-1} (per
 * user, r0's limit `limit0`, the others 10^9 per 60 s).  0, or -1 with the
 * reason in err (ERRLEN bytes). */
int rldchange_start(rld *d, const char *redis_uri, unsigned long long n,
                    long long limit0, char *err);

/* PUT r0 with `limit`; *sent_ns and *acked_ns (now_ns()) when the request
 * left and when its 200 came back.  0, or -1 with the reason in err. */
int rldchange_put(rld *d, long long limit, uint64_t *sent_ns,
                  uint64_t *acked_ns, char *err);

void rldchange_stop(rld *d);

#endif
