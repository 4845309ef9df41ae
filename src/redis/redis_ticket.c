/*
 * redis_ticket.c -- see redis_ticket.h: the tickets' pool and the word's
 * transitions, the only code that changes a ticket's word.
 *
 * The pool grows by chunks (allocated under the server's lock by a
 * submitter that found it empty, which happens while the number of jobs
 * out grows, not per call) and shrinks only when the server closes, so a
 * ticket's memory outlives every thread that may still read its word.
 */
#include "redis_ticket.h"
#include "clock.h"
#include "futex.h"

#include <stdlib.h>

#define TK_PHASE 7u
#define TK_WAITER 8u          /* the caller sleeps until DONE or its limit */
#define TK_WAITBUSY 16u       /* past its limit, until the claim ends    */
#define TK_SLEEPERS (TK_WAITER | TK_WAITBUSY)
#define TK_GEN_SHIFT 5
#define TK_CHUNK 256
#define TK_SPINS 200          /* looks before the futex (a longer spin
                                 takes the CPU the loop and Redis need on
                                 a busy machine)                       */

struct tk_chunk {
    tk_chunk *next;
    rio_ticket t[TK_CHUNK];
};

rio_ticket *tk_issue(tk_pool *p, rio_job *job)
{
    rio_ticket *t = p->free;
    uint32_t gen;

    if (!t) {
        tk_chunk *c = calloc(1, sizeof *c);
        if (!c)
            return NULL;
        c->next = p->chunks;
        p->chunks = c;
        for (int k = 0; k < TK_CHUNK - 1; k++)
            c->t[k].next = &c->t[k + 1];
        t = &c->t[0];
    }
    p->free = t->next;
    /* A stale caller may still read the word (and see its generation
     * gone): the word changes only atomically. */
    gen = (atomic_load(&t->word) >> TK_GEN_SHIFT) + 1;
    t->job = job;
    t->next = NULL;
    t->deadline_ns = job->deadline_ns;
    t->not_before_ns = job->not_before_ns;
    t->n = job->n;
    t->kind = job->kind;
    t->flags = job->flags;
    t->nreplies = job->nreplies;
    t->callback = job->done != NULL;
    t->bell = (int)p->cohort;
    atomic_store(&t->word, gen << TK_GEN_SHIFT | TK_HELD);
    job->tk = t;
    job->gen = gen & (UINT32_MAX >> TK_GEN_SHIFT);
    job->bell = &p->bell[p->cohort].rung;
    return t;
}

void tk_pool_cohort(tk_pool *p)
{
    p->cohort = (p->cohort + 1) % TK_BELLS;
}

void tk_ring(tk_pool *p, uint64_t mask)
{
    for (int i = 0; mask; i++, mask >>= 1)
        if (mask & 1) {
            atomic_fetch_add(&p->bell[i].rung, 1);
            futex_wake_all(&p->bell[i].rung);
        }
}

void tk_pool_put(tk_pool *p, rio_ticket *head, rio_ticket *tail)
{
    if (!head)
        return;
    tail->next = p->free;
    p->free = head;
}

void tk_pool_free(tk_pool *p)
{
    while (p->chunks) {
        tk_chunk *c = p->chunks;
        p->chunks = c->next;
        free(c);
    }
    p->free = NULL;
}

/* ---- the loop's side -------------------------------------------------- */

int tk_claim(rio_ticket *t)
{
    uint32_t w = atomic_load(&t->word);

    /* HELD, with or without a sleeper: only the caller's GONE and WAITER
     * race with this. */
    while ((w & TK_PHASE) != TK_GONE)
        if (atomic_compare_exchange_weak(&t->word, &w,
                                         (w & ~TK_PHASE) | TK_BUSY))
            return 1;
    return 0;
}

/* BUSY -> phase, the sleeper bits in `keep` kept; wakes a caller past its
 * limit (it sleeps on the word) if `wake` names it.  1 when the caller
 * sleeps on its bell (TK_WAITER) and `wake` names it: the bell is to be
 * rung.  Only the caller's sleeper bits race with this: the CAS loop keeps
 * one set meanwhile. */
static int leave(rio_ticket *t, uint32_t phase, uint32_t keep, uint32_t wake)
{
    uint32_t w = atomic_load(&t->word);

    while (!atomic_compare_exchange_weak(
        &t->word, &w, (w & ~(TK_PHASE | TK_SLEEPERS)) | (w & keep) | phase))
        ;
    if (w & wake & TK_WAITBUSY)
        futex_wake_one(&t->word);
    return (w & wake & TK_WAITER) != 0;
}

int tk_settle(rio_ticket *t)
{
    uint32_t w = atomic_load(&t->word);

    while ((w & TK_PHASE) != TK_GONE)
        if (atomic_compare_exchange_weak(
                &t->word, &w, (w & ~(TK_PHASE | TK_SLEEPERS)) | TK_DONE)) {
            if (w & TK_WAITBUSY)
                futex_wake_one(&t->word);
            return w & TK_WAITER ? 2 : 1;
        }
    return 0;
}

/* A caller sleeping until its limit need not hear of this (a wake-up per
 * encoded job would cost a context switch); one past its limit waits for
 * exactly this. */
void tk_release(rio_ticket *t)
{
    leave(t, TK_HELD, TK_WAITER, TK_WAITBUSY);
}

int tk_finish(rio_ticket *t)
{
    return leave(t, TK_DONE, 0, TK_SLEEPERS);
}

/* ---- the caller's side ------------------------------------------------ */

static int answered(uint32_t w, uint32_t gen)
{
    return w >> TK_GEN_SHIFT != gen || (w & TK_PHASE) == TK_DONE;
}

/* Before its limit the caller sleeps on its bell: it reads the bell's
 * count BEFORE its word, and the loop changes the word (DONE, seeing
 * TK_WAITER) BEFORE it bumps the bell (seq_cst both sides), so a count
 * read before DONE makes the sleep return at the ring. */
int tk_wait(rio_ticket *t, uint32_t gen, _Atomic uint32_t *bell,
            int64_t limit_ns)
{
    for (int i = 0; i < TK_SPINS; i++)
        if (answered(atomic_load_explicit(&t->word, memory_order_acquire),
                     gen))
            return 1;
    for (;;) {
        uint32_t rung = atomic_load(bell);
        uint32_t w = atomic_load(&t->word), want;
        int late;
        if (answered(w, gen))
            return 1;
        late = clock_mono_ns() >= limit_ns;
        if (late && (w & TK_PHASE) == TK_HELD) {
            if (atomic_compare_exchange_strong(
                    &t->word, &w, (w & ~(TK_PHASE | TK_SLEEPERS)) | TK_GONE))
                return 0;
            continue; /* claimed or answered meanwhile */
        }
        /* Before the limit: until DONE or the limit.  After it, the loop
         * is inside a claim: until the claim ends. */
        want = late ? TK_WAITBUSY : TK_WAITER;
        if (!(w & want)) {
            if (!atomic_compare_exchange_strong(&t->word, &w, w | want))
                continue;
            w |= want;
        }
        if (late)
            futex_wait_until(&t->word, w, INT64_MAX);
        else
            futex_wait_until(bell, rung, limit_ns);
    }
}
