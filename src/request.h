/*
 * request.h -- a request's charges: which rules it matches and the client
 * key each counts it by (contract C of issue 12; today in limiter.c, to
 * move to request.c with the limiter.c split).
 */
#ifndef RL_REQUEST_H
#define RL_REQUEST_H

#include <stddef.h>

#include "ratelimit.h"
#include "ruleset.h"
#include "store.h"

#define REQUEST_NEED_ROOM 2 /* ops or keys do not fit: nothing was kept */

/* req's charges, one per matching rule, into ops[0..*n) (room for
 * max_ops), their keys packed into keys[*used..keys_len).  The cost is
 * checked first.  Returns RL_OK, REQUEST_NEED_ROOM (*n and *used
 * unchanged) or an RL_E* code with rl_fail() done. */
int request_collect(const rl_limiter *lim, const rl_ruleset *rs,
                    const rl_request *req, store_op *ops, size_t max_ops,
                    char *keys, size_t keys_len, size_t *used, size_t *n);

#endif
