/*
 * request.h -- turning a request into the store's charges: one per rule
 * that matches it, each with its client key.
 */
#ifndef RL_REQUEST_H
#define RL_REQUEST_H

#include "clock.h"
#include "limiter.h"
#include "metrics.h"

/* request_collect(): the ops or the keys do not fit; nothing was kept. */
#define REQUEST_NEED_ROOM 2

/*
 * The charges of request req under the rule set rs, one per matching rule
 * whose dimension the request carries, into ops[0..*n) (room for max_ops),
 * their keys ("<dimension>:<value>", NUL-terminated) packed into
 * keys[*used..keys_len).  Checks the cost.  Returns RL_OK (*n and *used
 * advanced; *n may be 0: no rule applies), REQUEST_NEED_ROOM (ops or keys
 * do not fit: *n and *used unchanged), or an RL_E* code with rl_fail()
 * done.  Reads req during the call only; allocates nothing.
 */
int request_collect(const rl_limiter *lim, const rl_ruleset *rs,
                    const rl_request *req, store_op *ops, size_t max_ops,
                    char *keys, size_t keys_len, size_t *used, size_t *n);

/* The start of a check, when it is one the calling thread times
 * (metrics.h: sampled on the memory store); else 0.  Inline: an untimed
 * check pays the sample's test, not a call. */
static inline int64_t request_timer_start(const rl_limiter *lim)
{
    return metrics_sampled(&lim->mconf) ? clock_mono_ns() : 0;
}

/* request_timer_stop() of a timed check. */
void request_timer_record(rl_limiter *lim, int64_t t0, size_t count);

/* `count` checks started at t0 (0: not timed) are decided: their time
 * into the latency histogram, in the calling thread's slot (an async
 * check's I/O thread may stop what its owner started). */
static inline void request_timer_stop(rl_limiter *lim, int64_t t0,
                                      size_t count)
{
    if (t0 && count)
        request_timer_record(lim, t0, count);
}

#endif
