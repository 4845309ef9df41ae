/*
 * redis_settle.h -- rl_settle() on a Redis server: one call of the
 * library's script in mode "s" (refund) or "d" (debt) over some of a
 * settle's ops (lua/settle.lua), and its answer read back.  Pure
 * functions of their arguments; redis_node.c sends the call.
 */
#ifndef RL_REDIS_SETTLE_H
#define RL_REDIS_SETTLE_H

#include <hiredis/hiredis.h>

#include "redis_script.h"
#include "settle.h"

/* The call settling ss->ops[from..from+n), appended to b: each op's state
 * key and its marker's (same hash tag), then check.lua's "r" layout with
 * each op's cost and the reservation's time.  eval: EVAL with the text. */
void settle_put(const script_ctx *x, resp_buf *b, const store_settle *ss,
                size_t from, size_t n, int eval);

/* The same settle as ratelimit.so's RL.SETTLE s|d (the same keys; each
 * op's rule numbers, cost, the reservation's time and field). */
void settle_put_module(const script_ctx *x, resp_buf *b,
                       const store_settle *ss, size_t from, size_t n);

/* Its answer (either's): RL_OK with *settled the ops settled now; 1 for NOSCRIPT;
 * RL_ESTORE otherwise (an error, a redirect: *why says which when not
 * NULL). */
int settle_parse(const redisReply *rep, size_t *settled, rnode_reply *why);

#endif
