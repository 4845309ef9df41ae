/*
 * decide.h -- the decision policy: how the store's answers to one
 * request's charges become the one rl_result the caller sees.
 */
#ifndef RL_DECIDE_H
#define RL_DECIDE_H

#include "limiter.h"

/*
 * The store's answer for one request (ops[0..n), its decisions d, the
 * store's clock now_ms, the store's return code rc) into *res, a full
 * rl_result of this library's size: the decisions folded (the tightest
 * enforced rule decides), or, when the store failed (rc != RL_OK), each
 * rule's failure mode (open, closed, the local fallback).  Counts the
 * check in the limiter's statistics.  Returns RL_OK, or an RL_E* code
 * with rl_fail() done (no fallback store, or the fallback failed).
 */
int decide_settle(rl_limiter *lim, const store_op *ops, size_t n,
                  const algo_decision *d, int64_t now_ms, int rc,
                  rl_result *res);

/*
 * The deny cache (deny_cache.h): when one of the request's enforced
 * charges ops[0..n) has a live cached denial, *res (full size) is that
 * denial as Redis would give it (the longest-lived one if several; allowed
 * 0, remaining 0, retry counted down to its end, RL_FLAG_CACHED), the
 * check is counted, and 1 is returned: the request needs no store.  A
 * request denied by one rule is denied whatever the others say (the store
 * charges all or none), so one live denial is enough.  0: ask the store.
 */
int decide_cached(rl_limiter *lim, const store_op *ops, size_t n,
                  rl_result *res);

/* Every charge of the request ops[0..n) was admitted from a lease
 * (lease.h), d[i] each one's: *res (full size) is the tightest of them,
 * flagged RL_FLAG_LEASED, and the check is counted (each charge as
 * leased in its rule's metrics). */
void decide_leased(rl_limiter *lim, const store_op *ops, size_t n,
                   const algo_decision *d, rl_result *res);

/* A request no rule matches passes: *res (full size) says so
 * (RL_FLAG_NO_RULE), and the statistics count it. */
void decide_no_rule(rl_limiter *lim, rl_result *res);

#endif
