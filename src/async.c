/*
 * async.c -- checks started without blocking (ratelimit.h, "asynchronous
 * checks"): a loop context, its slots and its completion queue.
 *
 * rl_check_start() takes a free slot (a recycled array allocated once by
 * rl_async_new), takes the rule set (rcu read lock), collects the
 * request's charges into the slot (request_collect), and starts them on
 * the store (store_vtable.start: the Redis stores' I/O threads, the same
 * path as a blocking rl_check).  When the store answers, in its I/O
 * thread, the answer is settled there (decide_settle: failure modes,
 * fallback, statistics), the rule set released, and the slot pushed on
 * the context's completion stack.  rl_async_process(), in the owner's
 * thread, takes the stack and runs the callbacks in completion order.  A
 * store that decides at once (the memory and shm stores: no `start`), a
 * request no rule matches and one the deny cache answers (decide_cached)
 * are settled inside rl_check_start() and pushed the same way, so a
 * callback never runs inside rl_check_start() -- unless the caller asked
 * for such answers at once (RL_ASYNC_NOW in chk->flags): then the answer
 * is built in the caller's result (as rl_check builds it; copied there
 * when the caller's struct is of another size) and rl_check_start()
 * returns RL_ASYNC_DONE, the slot it collected into left free, the
 * descriptor untouched (no eventfd write here, no read in
 * rl_async_process: an in-process store's check costs no system call).
 * A check is timed (metrics.h) from its start to its settling, as a
 * blocking one is.  A store that decides inside rl_check_start takes the
 * rule set under the thread's own reader slot (rcu.h), as rl_check does;
 * one that answers in its I/O thread under the shared one.
 *
 * Locks and wake-ups: none taken here.  The completion stack is a
 * lock-free (Treiber) stack: any thread pushes, the owner takes it whole
 * with one exchange.  The descriptor is an eventfd: a pusher writes it
 * only if `signaled` was 0 (exchange to 1); the owner drains it, clears
 * `signaled`, then takes the stack, so a push after the take writes again
 * and none is missed.  `pushers` counts threads between a push and its
 * signal: rl_async_free() waits for it to be 0 and for every slot to be
 * back, so no I/O thread touches a freed context.  The free list and
 * in_flight are the owner's alone.
 */
#include "decide.h"
#include "error.h"
#include "limiter.h"
#include "request.h"
#include "sized.h"

#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define MAX_IN_FLIGHT 65536
#define FREE_POLL_MS 100     /* rl_async_free's look at the descriptor */

typedef struct aslot aslot;
struct aslot {
    store_async sa;              /* sa.q: ops, n, out; sa.arg: this slot */
    store_op ops[RL_OPS_MAX];
    algo_decision d[RL_OPS_MAX];
    char keys[RL_OPS_MAX * (RL_KEY_MAX + 1)];
    rl_result res;               /* the full result, copied out by span */
    size_t span;                 /* bytes of the caller's result to fill */
    int64_t t0;                  /* request_timer_start(), 0: not timed  */
    int rc;
    rcu_token tok;
    rl_async *owner;
    rl_async_check *chk;
    aslot *next;                 /* free list, or completion stack       */
};

struct rl_async {
    rl_limiter *lim;
    int efd;
    size_t max, in_flight;
    aslot *slots, *free;
    _Atomic(aslot *) done;
    _Atomic int signaled, pushers;
};

/* ---- completion (any thread) --------------------------------------------- */

static void push_done(aslot *s)
{
    rl_async *a = s->owner;
    aslot *head;

    atomic_fetch_add(&a->pushers, 1);
    head = atomic_load(&a->done);
    do
        s->next = head;
    while (!atomic_compare_exchange_weak(&a->done, &head, s));
    if (!atomic_exchange(&a->signaled, 1)) {
        uint64_t one = 1;
        if (write(a->efd, &one, sizeof one) < 0) { /* counter full */ }
    }
    atomic_fetch_sub(&a->pushers, 1);
}

/* The store answered: settle into res (the slot's, or the caller's for
 * an answer given at once) now that the rule set is still held, release
 * the rule set. */
static inline void settle(aslot *s, rl_result *res)
{
    rl_limiter *lim = s->owner->lim;

    s->rc = decide_settle(lim, s->ops, s->sa.q.n, s->d, s->sa.q.now_ms,
                          s->sa.q.rc, res);
    request_timer_stop(lim, s->t0, 1);
    rcu_read_unlock(&lim->rules, s->tok);
}

/* The store answered in its I/O thread: settle, queue the callback. */
static void store_done(store_async *sa)
{
    aslot *s = sa->arg;

    settle(s, &s->res);
    push_done(s);
}

/* ---- the owner's side ------------------------------------------------------ */

RL_EXPORT int rl_async_new(rl_limiter *lim, size_t max_in_flight,
                           rl_async **out)
{
    rl_async *a;

    if (!out || !lim)
        return rl_fail(lim, RL_EINVAL, "rl_async_new: NULL argument");
    *out = NULL;
    if (max_in_flight < 1 || max_in_flight > MAX_IN_FLIGHT)
        return rl_fail(lim, RL_EINVAL, "max_in_flight: must be 1..%d, got "
                       "%zu", MAX_IN_FLIGHT, max_in_flight);
    if (!(a = calloc(1, sizeof *a)) ||
        !(a->slots = calloc(max_in_flight, sizeof *a->slots)) ||
        (a->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        if (a)
            free(a->slots);
        free(a);
        return rl_fail(lim, RL_ENOMEM, "rl_async_new: %zu slots",
                       max_in_flight);
    }
    a->lim = lim;
    a->max = max_in_flight;
    for (size_t i = max_in_flight; i-- > 0;) {
        a->slots[i].owner = a;
        a->slots[i].next = a->free;
        a->free = &a->slots[i];
    }
    *out = a;
    return RL_OK;
}

RL_EXPORT int rl_async_fd(const rl_async *a)
{
    return a ? a->efd : -1;
}

RL_EXPORT size_t rl_async_in_flight(const rl_async *a)
{
    return a ? a->in_flight : 0;
}

/* The completed slots, oldest first; the descriptor drained. */
static aslot *take_done(rl_async *a)
{
    uint64_t drain;
    aslot *s, *fifo = NULL;

    if (read(a->efd, &drain, sizeof drain) < 0) { /* nothing to drain */ }
    atomic_store(&a->signaled, 0);
    s = atomic_exchange(&a->done, NULL);
    while (s) { /* the stack is newest first */
        aslot *next = s->next;
        s->next = fifo;
        fifo = s;
        s = next;
    }
    return fifo;
}

static void release(rl_async *a, aslot *s)
{
    s->chk->internal = NULL;
    s->next = a->free;
    a->free = s;
    a->in_flight--;
}

RL_EXPORT int rl_async_process(rl_async *a)
{
    aslot *s, *next;
    int ran = 0;

    if (!a)
        return rl_fail(NULL, RL_EINVAL, "rl_async_process: NULL argument");
    for (s = take_done(a); s; s = next) {
        rl_async_check *chk = s->chk;
        int rc = s->rc;
        next = s->next;
        if (rc == RL_OK)
            sized_fill(chk->result, &s->res, s->span);
        else
            sized_zero(chk->result, s->span);
        release(a, s); /* before cb: it may start another check */
        chk->cb(chk, rc);
        ran++;
    }
    return ran;
}

RL_EXPORT void rl_async_free(rl_async *a)
{
    if (!a)
        return;
    while (a->in_flight || atomic_load(&a->pushers)) {
        struct pollfd p = {.fd = a->efd, .events = POLLIN};
        aslot *s, *next;
        if (poll(&p, 1, FREE_POLL_MS) < 0)
            continue;
        for (s = take_done(a); s; s = next) {
            next = s->next;
            release(a, s); /* no callback: the caller is going away */
        }
    }
    close(a->efd);
    free(a->slots);
    free(a);
}

/* ---- starting a check ------------------------------------------------------- */

static int check_args(rl_async *a, const rl_request *req,
                      const rl_async_check *chk)
{
    if (!a || !req || !chk || !chk->cb || !chk->result)
        return rl_fail(a ? a->lim : NULL, RL_EINVAL,
                       "rl_check_start: NULL argument");
    if (!sized_span(a->lim, "rl_check_start: chk->size", &sized_async_check,
                    chk->size) ||
        !sized_span(a->lim, "rl_check_start: req->size", &sized_request,
                    req->size))
        return RL_EINVAL;
    if (a->in_flight == a->max)
        return rl_fail(a->lim, RL_EBUSY, "rl_check_start: %zu checks in "
                       "flight, the context's maximum", a->max);
    return RL_OK;
}

/* Does the caller take answers at once?  Its flags are read only when
 * its struct has them (a 1.0 caller's has not: answers queued). */
static int wants_now(const rl_async_check *chk)
{
    return chk->size >= offsetof(rl_async_check, flags) + sizeof chk->flags
           && (chk->flags & RL_ASYNC_NOW);
}

/* Slot s, collected for chk, is in flight from now on. */
static void take_slot(rl_async *a, aslot *s, rl_async_check *chk)
{
    a->free = s->next;
    a->in_flight++;
    s->chk = chk;
    chk->internal = s;
}

/* Where a check decided at once is built: with RL_ASYNC_NOW, in the
 * caller's own result when that has this library's size (zeroed by
 * rl_check_start: nothing to copy after, as rl_check builds its answer),
 * else in the slot's, zeroed. */
static inline rl_result *answer_at(aslot *s, rl_async_check *chk,
                                    int now)
{
    if (now && s->span == sizeof *chk->result)
        return chk->result;
    memset(&s->res, 0, sizeof s->res);
    return &s->res;
}

/* A check decided inside rl_check_start (s->rc settled into res, the
 * rule set released): queued as any completion, or (now) answered here
 * with s left on the free list and the descriptor untouched. */
static inline __attribute__((always_inline)) int
decided_at_once(rl_async *a, aslot *s, rl_async_check *chk, int now,
                const rl_result *res)
{
    if (!now) {
        take_slot(a, s, chk);
        push_done(s);
        return RL_OK;
    }
    if (s->rc != RL_OK) {
        sized_zero(chk->result, s->span);
        return s->rc;
    }
    if (res != chk->result)
        sized_fill(chk->result, res, s->span);
    return RL_ASYNC_DONE;
}

RL_EXPORT int rl_check_start(rl_async *a, const rl_request *req,
                             rl_async_check *chk)
{
    rl_limiter *lim;
    const rl_ruleset *rs;
    rl_result *res;
    rl_store *st;
    aslot *s;
    size_t n = 0, used = 0;
    int rc, now;

    if (chk && chk->size >= sized_async_check.min) /* zero, whatever fails */
        sized_clear(chk->result, &sized_result);
    if ((rc = check_args(a, req, chk)) != RL_OK)
        return rc;
    lim = a->lim;
    st = lim->store;
    s = a->free;
    if (!(s->span = sized_span(lim, "rl_check_start: chk->result->size",
                               &sized_result, chk->result->size)))
        return RL_EINVAL;
    /* A store that decides here ends the read section in this thread:
     * the thread's own reader slot (no locked instruction). */
    rs = st->vt->start ? rcu_read_lock_any(&lim->rules, &s->tok)
                       : rcu_read_lock(&lim->rules, &s->tok);
    rc = request_collect(lim, rs, req, s->ops, RL_OPS_MAX, s->keys,
                         sizeof s->keys, &used, &n);
    if (rc != RL_OK) {
        rcu_read_unlock(&lim->rules, s->tok);
        return rc == REQUEST_NEED_ROOM
                   ? rl_fail(lim, RL_EINVAL, "rl_check_start: the keys do "
                             "not fit") : rc;
    }
    now = wants_now(chk);
    res = answer_at(s, chk, now);
    s->t0 = n ? request_timer_start(lim) : 0; /* as rl_check times it */
    if (n == 0 || (lim->deny && decide_cached(lim, s->ops, n, res))) {
        request_timer_stop(lim, s->t0, 1);
        if (n == 0)
            decide_no_rule(lim, res);
        s->rc = RL_OK;
        rcu_read_unlock(&lim->rules, s->tok);
        return decided_at_once(a, s, chk, now, res);
    }
    s->sa.q = (store_req){.ops = s->ops, .n = n, .out = s->d,
                          .rc = RL_ESTORE};
    if (!st->vt->start) { /* decided at once (the memory and shm stores) */
        s->sa.q.rc = st->vt->check(st, s->ops, n, s->d, &s->sa.q.now_ms);
        settle(s, res);
        return decided_at_once(a, s, chk, now, res);
    }
    if (res != &s->res) /* waits for the store: built in the slot */
        memset(&s->res, 0, sizeof s->res);
    s->sa.done = store_done;
    s->sa.arg = s;
    take_slot(a, s, chk);
    st->vt->start(st, &s->sa);
    return RL_OK;
}
