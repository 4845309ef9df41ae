/*
 * redis_expire.h -- the I/O loop's endings and deadlines (redis_expire.c),
 * as the loop (redis_io.c) calls them: a job failed as it is, a list of
 * them, every job whose deadline passed, the stuck-connection judgment's
 * question, and the next deadline to wake for.  Loop thread only; the
 * types are the loop's own (redis_io_loop.h).
 */
#ifndef RL_REDIS_EXPIRE_H
#define RL_REDIS_EXPIRE_H

#include <stdint.h>

#include "redis_io_loop.h"

/* t fails as it is; stat: the counter it adds to, or -1. */
void rio_loop_fail(rio *r, rio_ticket *t, int stat);

/* Every ticket of the list head..tail fails as it is; the list empties. */
void rio_loop_fail_list(rio *r, rio_ticket **head, rio_ticket **tail,
                        int stat);

/* Jobs whose deadline passed, queued or in flight, complete as timeouts. */
void rio_loop_expire(rio *r, int64_t now);

/* 1 if a call of connection c's oldest entry may still be answered. */
int rio_loop_still_due(const conn *c, int64_t now);

/* The earliest deadline the loop must wake for; *idle: a connection could
 * take a batch now. */
int64_t rio_loop_next_wake(rio *r, int64_t now, int *idle);

#endif
