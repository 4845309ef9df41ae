/*
 * lease_check.h -- the request path's side of leases (lease.h).
 */
#ifndef RL_LEASE_CHECK_H
#define RL_LEASE_CHECK_H

#include "limiter.h"

/*
 * Decide the request ops[0..n) when one of its charges leases (a rule
 * with "lease", enforced, a cost above 0 and below the lease) and the
 * limiter keeps leases: 1 with *res (full size) and *rc (as
 * decide_settle()'s) set; from grants alone when they cover every
 * charge, else with one store call.  0: nothing leases here, decide the
 * usual way.
 */
int lease_check(rl_limiter *lim, const store_op *ops, size_t n,
                rl_result *res, int *rc);

#endif
