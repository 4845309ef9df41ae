/*
 * redis_batch.h -- the I/O loop's batch half (redis_batch.c), as the loop
 * (redis_io.c) calls it: the next batch onto an idle connection, and a
 * batch's answer once its replies are in.  Loop thread only; the types are
 * the loop's own (redis_io_loop.h).  The batch half calls nothing of
 * redis_io.c's: it ends a job's turn with redis_io_loop.h's inline
 * completion, so the two files are layers, not a circle.
 */
#ifndef RL_REDIS_BATCH_H
#define RL_REDIS_BATCH_H

#include <stdint.h>

#include "redis_io_loop.h"

/* The next batch from the queue of checks onto idle connection i, sent. */
void rbatch_next(rio *r, int i, int64_t now);

/* The answer of connection i's batch, whose replies are all in e. */
void rbatch_answer(rio *r, int i, entry *e);

#endif
