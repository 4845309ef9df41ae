/*
 * redis_expire.c -- how the I/O loop (redis_io.c) ends jobs that will get
 * no answer, and the deadlines it keeps: a job failed as it is (a broken
 * connection, no connection up, the loop stopping), or, queued or in
 * flight, at its deadline, as a timeout; whether a connection's oldest
 * call may still be answered in time (the stuck-connection judgment,
 * redis_io.c's unstick, asks it); and the earliest deadline the loop must
 * wake for.  Apart from the loop's turn because this is the one place
 * that decides when a job has waited long enough; loop thread only (the
 * types are redis_io_loop.h's).  It calls nothing of redis_io.c's: jobs
 * end through redis_io_loop.h's inline completion, so the loop stands a
 * floor above it, not in a circle with it.
 */
#include "redis_expire.h"
#include "redis_io_loop.h"
#include "redis_ticket.h"

#include <stdint.h>

/* t fails as it is (rc RL_ESTORE from its submission); stat: or -1.  A
 * blocking caller's job is not touched (no claim for its caller to wait
 * out); a callback is called. */
void rio_loop_fail(rio *r, rio_ticket *t, int stat)
{
    if (!t->callback) {
        int settled = tk_settle(t);
        if (!settled)
            stat_add(r, S_TIMEOUTS, 1); /* its caller left at its deadline */
        else if (stat >= 0)
            stat_add(r, stat, 1);
        if (settled == 2)
            rio_loop_bell(r, t);
        recycle(r, t);
        return;
    }
    if (!rio_loop_take(r, t))
        return;
    if (stat >= 0)
        stat_add(r, stat, 1);
    rio_loop_finish(r, t);
}

void rio_loop_fail_list(rio *r, rio_ticket **head, rio_ticket **tail,
                        int stat)
{
    while (*head) {
        rio_ticket *t = *head;
        *head = t->next;
        rio_loop_fail(r, t, stat);
    }
    *tail = NULL;
}

/* Jobs whose deadline passed, queued or in flight, complete as timeouts. */
static void expire_list(rio *r, rio_ticket **head, rio_ticket **tail,
                        int64_t now)
{
    rio_ticket **pp = head, *prev = NULL;

    while (*pp) {
        rio_ticket *t = *pp;
        if (t->deadline_ns > now) {
            prev = t;
            pp = &t->next;
            continue;
        }
        *pp = t->next;
        rio_loop_fail(r, t, S_TIMEOUTS);
    }
    *tail = prev;
}

void rio_loop_expire(rio *r, int64_t now)
{
    expire_list(r, &r->phead, &r->ptail, now);
    expire_list(r, &r->rhead, &r->rtail, now);
    for (int i = 0; i < r->nconns; i++) {
        conn *c = &r->c[i];
        for (int j = 0; c->b.active && j < c->b.nb; j++)
            if (c->b.tk[j] && c->b.tk[j]->deadline_ns <= now) {
                rio_loop_fail(r, c->b.tk[j], S_TIMEOUTS);
                c->b.tk[j] = NULL;
            }
        for (unsigned k = 0; k < c->count; k++) {
            entry *e = &c->ring[(c->head + k) % RING];
            if (e->kind == E_RAW && e->tk && e->tk->deadline_ns <= now) {
                rio_loop_fail(r, e->tk, S_TIMEOUTS);
                e->tk = NULL;
            }
        }
    }
}

/* 1 if a call of connection c's oldest entry may still be answered in
 * time: one not gone (a timeout NULLs its slot) whose deadline is to
 * come.  An entry of the loop's own (no ticket) has none. */
int rio_loop_still_due(const conn *c, int64_t now)
{
    const entry *e = &c->ring[c->head];

    if (e->kind == E_RAW)
        return e->tk && e->tk->deadline_ns > now;
    for (int j = 0; c->b.active && j < c->b.nb; j++)
        if (c->b.tk[j] && c->b.tk[j]->deadline_ns > now)
            return 1;
    return 0;
}

/* The earliest deadline the loop must wake for; *idle: a connection could
 * take a batch now. */
int64_t rio_loop_next_wake(rio *r, int64_t now, int *idle)
{
    int64_t t = now + (int64_t)IDLE_TICK_MS * 1000000;

    *idle = 0;
    for (rio_ticket *j = r->phead; j; j = j->next) {
        t = j->deadline_ns < t ? j->deadline_ns : t;
        if (j->not_before_ns > now && j->not_before_ns < t)
            t = j->not_before_ns;
    }
    for (rio_ticket *j = r->rhead; j; j = j->next) /* no room to send yet */
        t = j->deadline_ns < t ? j->deadline_ns : t;
    for (int i = 0; i < r->nconns; i++) {
        conn *c = &r->c[i];
        if (c->fd >= 0 && !c->b.active)
            *idle = 1;
        if (c->count && now + (int64_t)BUSY_TICK_MS * 1000000 < t)
            t = now + (int64_t)BUSY_TICK_MS * 1000000;
        for (int j = 0; c->b.active && j < c->b.nb; j++)
            if (c->b.tk[j] && c->b.tk[j]->deadline_ns < t)
                t = c->b.tk[j]->deadline_ns;
        for (unsigned k = 0; k < c->count; k++) {
            entry *e = &c->ring[(c->head + k) % RING];
            if (e->kind == E_RAW && e->tk && e->tk->deadline_ns < t)
                t = e->tk->deadline_ns;
        }
    }
    return t;
}
