/*
 * decide.h -- the decision policy: a store's answer for one request
 * folded into its result, or the failure modes when the store failed
 * (contract C of issue 12; today in limiter.c, to move to decide.c with
 * the limiter.c split).  Thread-safe: the asynchronous path settles in
 * the store's I/O thread.
 */
#ifndef RL_DECIDE_H
#define RL_DECIDE_H

#include <stdint.h>

#include "ratelimit.h"
#include "store.h"

/* The store's answer (rc, d[0..n), now_ms) for ops[0..n) into res (a full
 * rl_result), counted in the limiter's statistics.  RL_OK, or rc when the
 * store failed and no failure mode could decide. */
int decide_settle(rl_limiter *lim, const store_op *ops, size_t n,
                  const algo_decision *d, int64_t now_ms, int rc,
                  rl_result *res);

/* A request no rule matches passes (counted). */
void decide_no_rule(rl_limiter *lim, rl_result *res);

#endif
