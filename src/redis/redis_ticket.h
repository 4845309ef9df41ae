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
 *   TK_WAITER  the caller sleeps until DONE or its limit, on its
 *            cohort's bell (below), not on the word: the loop rings the
 *            bell after DONE, not when a claim ends (a wake-up per
 *            encoded job would cost a context switch).
 *   TK_WAITBUSY  the caller, past its limit, found the job claimed and
 *            sleeps on the word until the claim ends: the loop wakes it
 *            then.
 * Transitions: issue (submitter, under the server's lock) -> HELD;
 * HELD -> BUSY (loop: tk_claim) -> HELD (tk_release) or DONE (tk_finish);
 * HELD -> DONE (loop: tk_settle, a failure or timeout, no window);
 * HELD -> GONE (caller: in tk_wait, at its limit).  Only the loop recycles
 * a ticket (after DONE, or on meeting GONE).
 *
 * Bells: the jobs queued between two of the loop's takes of the queue are
 * one cohort (they usually travel as one batch and are answered
 * together), and a cohort's blocking callers sleep on ONE word, its bell
 * (a ring of TK_BELLS per pool, a cohort's index kept in its tickets and
 * its jobs).  The loop notes the bells of the tickets it ends whose
 * callers sleep (TK_WAITER) and rings each once (tk_ring: the bell's
 * count bumped, one FUTEX_WAKE for all its sleepers) when its turn's
 * work is done: one system call wakes a batch's callers where one per
 * caller did (issue 24 section 5: 64 threads of rl_check).  A caller
 * woken by its cohort's bell whose own job is not done (its cohort was
 * split across batches, or a cohort TK_BELLS takes earlier shares the
 * bell) sleeps again: a spurious wake, never a lost one (the caller reads
 * the bell before its word; the loop changes the word before the bell).
 */
#ifndef RL_REDIS_TICKET_H
#define RL_REDIS_TICKET_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "redis_io.h"

enum { TK_HELD = 1, TK_BUSY = 2, TK_DONE = 3, TK_GONE = 4 };

#define TK_BELLS 64           /* cohorts' bells per pool (a bit each in a
                                 uint64_t mask of bells to ring)        */

struct rio_ticket {
    _Atomic uint32_t word;
    rio_job *job;                /* followed only while claimed         */
    rio_ticket *next;            /* the loop's lists; the pool's free list */
    int64_t deadline_ns, not_before_ns;
    size_t n;
    int kind, flags, nreplies;
    int callback;                /* the job has a `done` (never abandoned) */
    int bell;                    /* its cohort's bell, 0..TK_BELLS       */
};

typedef struct tk_bell {
    _Atomic uint32_t rung;       /* bumped by each ring                 */
    char pad[60];                /* a cache line each                    */
} tk_bell;

typedef struct tk_chunk tk_chunk;
typedef struct tk_pool {
    rio_ticket *free;
    tk_chunk *chunks;
    unsigned cohort;             /* the bell of the tickets issued now  */
    tk_bell bell[TK_BELLS];
} tk_pool;

/* Under the owner's lock: a ticket for job (HELD, its copies filled, the
 * job's tk, gen and bell set); NULL when out of memory. */
rio_ticket *tk_issue(tk_pool *p, rio_job *job);

/* Under the owner's lock, as the loop takes the queue: the tickets issued
 * from now on are the next cohort (the next bell). */
void tk_pool_cohort(tk_pool *p);

/* The loop: ring the bells in mask (bit i: bell i), each once. */
void tk_ring(tk_pool *p, uint64_t mask);

/* Under the owner's lock: tickets head..tail (linked by next) come back. */
void tk_pool_put(tk_pool *p, rio_ticket *head, rio_ticket *tail);

/* Free every ticket (no thread uses the pool any more). */
void tk_pool_free(tk_pool *p);

/* The loop: HELD -> BUSY, 1; 0 when the caller left (GONE). */
int tk_claim(rio_ticket *t);

/* The loop: BUSY -> HELD (the job is not touched again until the next
 * claim; a caller sleeping past its limit is woken) or BUSY -> DONE (the
 * answer is in the job): 1 when the caller sleeps on its bell, which the
 * loop must then ring (tk_ring). */
void tk_release(rio_ticket *t);
int tk_finish(rio_ticket *t);

/* The loop: HELD -> DONE without touching the job (a failure or a
 * timeout: the job holds its failure from its submission), 1, or 2 when
 * the caller sleeps on its bell (to ring); 0 when the caller left (GONE). */
int tk_settle(rio_ticket *t);

/* The caller: wait for the answer until limit_ns (CLOCK_MONOTONIC),
 * longer only while the loop is inside a claim; bell: the job's (set by
 * tk_issue).  1: answered (DONE); 0: abandoned at the limit (GONE; the
 * job is the caller's again). */
int tk_wait(rio_ticket *t, uint32_t gen, _Atomic uint32_t *bell,
            int64_t limit_ns);

#endif
