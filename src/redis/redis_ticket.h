/*
 * redis_ticket.h -- a job's handle between its submitter and a server's
 * I/O loop (redis_io.c): what the loop keeps of a job in memory of its
 * own, and the one word through which the two sides agree on who may
 * touch the job itself.
 *
 * A blocking caller's job lives on its stack, and the caller must be able
 * to leave at its deadline whatever the loop is doing (a loop thread the
 * scheduler does not run for a second must not hold a caller for a
 * second).  So the loop never holds a pointer into caller memory that it
 * may follow after the caller left: its queues, batches and reply ring
 * hold tickets, which live in a pool per server freed only when the
 * server is closed, and a ticket carries the copies the loop needs while
 * it only holds the job (deadline, not-before, kind, flags, op count).
 * The loop reads the job (its ops, and through them the rule set the
 * caller keeps read-locked) and writes its answer only inside a claim.
 *
 * The word: generation << TK_GEN_SHIFT | TK_WAITBUSY | TK_WAITER | phase.
 *   TK_HELD  the loop holds the ticket and does not touch the job (queued,
 *            sent and waiting for the reply).  The caller may abandon it.
 *   TK_BUSY  claimed: the loop reads the job's ops (encoding a call) or
 *            writes its answer.  The caller may not leave; it waits (a
 *            few microseconds of the loop's work) for HELD or DONE.
 *   TK_DONE  the job's answer (or failure) is in the job; the ticket is
 *            back with the loop, which may issue it again at once (the
 *            generation changes, which also says DONE to a caller that
 *            reads the word late).
 *   TK_GONE  the caller left at its deadline (HELD -> GONE, its CAS);
 *            the loop drops the ticket the next time it meets it (a
 *            claim fails), never touching the job again.
 *   TK_WAITER  the caller sleeps on the word (futex) until DONE or its
 *            limit: the loop wakes it at DONE, not when a claim ends (a
 *            wake-up per encoded job would cost a context switch).
 *   TK_WAITBUSY  the caller, past its limit, found the job claimed and
 *            sleeps until the claim ends: the loop wakes it then.
 * Transitions: issue (submitter, under the server's lock) -> HELD;
 * HELD -> BUSY (loop: tk_claim) -> HELD (tk_release) or DONE (tk_finish);
 * HELD -> DONE (loop: tk_settle, a failure or timeout, no window);
 * HELD -> GONE (caller: in tk_wait, at its limit).  Only the loop recycles
 * a ticket (after DONE, or on meeting GONE).
 */
#ifndef RL_REDIS_TICKET_H
#define RL_REDIS_TICKET_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "redis_io.h"

enum { TK_HELD = 1, TK_BUSY = 2, TK_DONE = 3, TK_GONE = 4 };

struct rio_ticket {
    _Atomic uint32_t word;
    rio_job *job;                /* followed only while claimed         */
    rio_ticket *next;            /* the loop's lists; the pool's free list */
    int64_t deadline_ns, not_before_ns;
    size_t n;
    int kind, flags, nreplies;
    int callback;                /* the job has a `done` (never abandoned) */
};

typedef struct tk_chunk tk_chunk;
typedef struct tk_pool {
    rio_ticket *free;
    tk_chunk *chunks;
} tk_pool;

/* Under the owner's lock: a ticket for job (HELD, its copies filled, the
 * job's tk and gen set); NULL when out of memory. */
rio_ticket *tk_issue(tk_pool *p, rio_job *job);

/* Under the owner's lock: tickets head..tail (linked by next) come back. */
void tk_pool_put(tk_pool *p, rio_ticket *head, rio_ticket *tail);

/* Free every ticket (no thread uses the pool any more). */
void tk_pool_free(tk_pool *p);

/* The loop: HELD -> BUSY, 1; 0 when the caller left (GONE). */
int tk_claim(rio_ticket *t);

/* The loop: BUSY -> HELD (the job is not touched again until the next
 * claim) or BUSY -> DONE (the answer is in the job); a sleeping caller is
 * woken. */
void tk_release(rio_ticket *t);
void tk_finish(rio_ticket *t);

/* The loop: HELD -> DONE without touching the job (a failure or a
 * timeout: the job holds its failure from its submission), 1; 0 when the
 * caller left (GONE). */
int tk_settle(rio_ticket *t);

/* The caller: wait for the answer until limit_ns (CLOCK_MONOTONIC),
 * longer only while the loop is inside a claim.  1: answered (DONE);
 * 0: abandoned at the limit (GONE; the job is the caller's again). */
int tk_wait(rio_ticket *t, uint32_t gen, int64_t limit_ns);

#endif
