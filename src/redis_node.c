/*
 * redis_node.c -- one Redis server: lanes, batches, the script's encoding.
 *
 * Requests are batched: per lane (connection) one batch is out at a time,
 * and every request that queues up meanwhile goes into the next batch.  The
 * first caller to find the lane idle becomes the leader: it takes the
 * queue, sends it, hands each request its decisions, wakes its caller and
 * passes the lead to the next queued request.  A batch waits no longer than
 * the earliest deadline in it, so no check waits longer than its timeout; a
 * request still queued at its deadline leaves the queue by itself.
 *
 * A batch is ONE script call deciding every request in it (each
 * all-or-nothing): Redis runs one script, and reads its clock once, for
 * many checks.  The call carries each rule its keys use once, in a table
 * (the rule's numbers, and the shapes it replaced while they may still
 * hold state), and per key only its rule's place in that table, cost,
 * soft and field.  On a single server the call declares its keys.  A cluster
 * master gets them as arguments instead ("C" mode: Redis would route by
 * declared keys and refuse keys of several slots; the script is flagged
 * allow-cross-slot-keys), and answers RN_ELSEWHERE for a request whose
 * keys it does not serve now; the store sends that one again with
 * RN_DECLARED, a call of its own with its keys declared (behind ASKING
 * after an ASK), in the same write as the next batch.  A server that
 * lost the script (restart, failover, SCRIPT FLUSH) answers NOSCRIPT: those
 * calls are sent again as EVAL, which also caches the script, within the
 * same deadline.
 */
#include "redis_node.h"
#include "cluster_reply.h"
#include "ratelimit.h"
#include "redis_key.h"

#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 16
#define CMD_STACK 32768
#define BATCH_MAX 64          /* requests per script call               */
#define OWN_MAX 15            /* per-call mode: requests with a call of
                                 their own per batch; each may need 2
                                 replies (ASKING), +1 for the batch call,
                                 within RCONN_MAX_REPLIES              */

enum { QUEUED, SENT, DONE, LEAD };

/* One request, on its caller's stack while it waits. */
typedef struct job {
    const store_op *ops;
    size_t n;
    algo_decision *out;
    int64_t now;               /* the script's time                    */
    int rc;
    int flags;                 /* RN_ASKING, RN_DECLARED               */
    rnode_reply *why;
    int64_t deadline_ns;
    _Atomic uint32_t state;
    struct job *next;
    struct job *last;          /* one of a group (rnode_check_many): its
                                  last job, the one its caller waits on */
} job;

/* A connection and the requests queued for its next batch. */
typedef struct lane {
    pthread_mutex_t mu;
    rconn *conn;
    job *head, *tail;
    int busy;                  /* a leader is sending or waiting       */
} lane;

struct rnode {
    lane lanes[MAX_CONNS];
    int nlanes;
    _Atomic unsigned next;
    int per_call;
    int compact;
    const char *script;
    size_t script_len;
    const rl_clock *clock;
    breaker brk;
    _Atomic int64_t noscript, batches, batched, moved, asks, elsewhere;
};

static int64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- RESP encoding into a caller's buffer -------------------------------- */

typedef struct cmdbuf {
    char *p;
    size_t len, cap;
    int heap;                 /* p was malloc'ed (it outgrew the stack)  */
    int oom;
} cmdbuf;

static void put(cmdbuf *b, const char *s, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = (b->len + n) * 2;
        char *np = b->heap ? realloc(b->p, cap) : malloc(cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        if (!b->heap)
            memcpy(np, b->p, b->len);
        b->p = np;
        b->cap = cap;
        b->heap = 1;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

/* Decimal digits of v into the bytes before `end`; returns where they
 * start.  No snprintf on this path. */
static char *digits(int64_t v, char *end)
{
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;

    do {
        *--end = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--end = '-';
    return end;
}

static void put_head(cmdbuf *b, char lead, int64_t v)
{
    char tmp[24], *end = tmp + sizeof tmp, *p;

    end -= 2;
    end[0] = '\r';
    end[1] = '\n';
    p = digits(v, end);
    *--p = lead;
    put(b, p, (size_t)(tmp + sizeof tmp - p));
}

static void put_arg(cmdbuf *b, const char *s, size_t n)
{
    put_head(b, '$', (int64_t)n);
    put(b, s, n);
    put(b, "\r\n", 2);
}

static void put_num(cmdbuf *b, int64_t v)
{
    char tmp[24], *end = tmp + sizeof tmp, *p = digits(v, end);

    put_arg(b, p, (size_t)(end - p));
}

/* ---- the rule table ---------------------------------------------------- */

/* A script call sends each rule its keys use once, in a table at the head
 * of its arguments; a key sends the index in ARGV of its rule's first
 * value, which the script reads the numbers from (lua/check.lua).  A
 * small direct-mapped cache maps a rule to that index: a rule missing
 * from it (first seen, or pushed out by another rule of the same slot)
 * enters the table again, which is harmless.  The same walk over the same
 * ops makes the same choices, so the table and the keys' indices come
 * from walks over the ops, with no list of rules kept (a call may carry
 * up to BATCH_MAX x RL_OPS_MAX keys). */
#define RULE_CACHE 64
#define RULES_AT 4                /* ARGV index of the table's first value */

typedef struct rule_table {
    const rl_rule *rule[RULE_CACHE];
    int64_t at[RULE_CACHE];       /* its ARGV index                         */
    int64_t next;                 /* the next rule's                        */
} rule_table;

/* The ARGV index of op's rule; *is_new when it enters the table here,
 * taking `len` values. */
static int64_t rule_at(rule_table *t, const rl_rule *r, int64_t len,
                       int *is_new)
{
    unsigned h = (unsigned)(((uint64_t)(uintptr_t)r *
                             0x9e3779b97f4a7c15ULL) >> 58);

    *is_new = t->rule[h] != r;
    if (*is_new) {
        t->rule[h] = r;
        t->at[h] = t->next;
        t->next += len;
    }
    return t->at[h];
}

static void table_init(rule_table *t)
{
    memset(t->rule, 0, sizeof t->rule);
    t->next = RULES_AT;
}

/* Is r's replaced shape s sent with it, at `now`?  While its states may
 * still be alive, and (compact layout) when it is kept in the same layout
 * as the current shape: a bucket too big for the compact layout keeps
 * the plain one, whose names differ in more than the shape. */
static int old_shape_sent(const rnode *n, const rl_rule *r,
                          const rule_shape *s, int64_t now)
{
    return s->until_ms > now &&
           (!n->compact ||
            redis_key_compact_ok(&s->ap) == redis_key_compact_ok(&r->ap));
}

static int64_t old_shapes(const rnode *n, const rl_rule *r, int64_t now)
{
    int64_t k = 0;

    for (int i = 0; i < r->nprev; i++)
        k += old_shape_sent(n, r, &r->prev[i], now);
    return k;
}

/* How many values rule r takes in the table. */
static int64_t rule_len(int64_t nold)
{
    return 7 + (nold ? 1 + 8 * nold : 0);
}

static void put_numbers(cmdbuf *b, const algo_params *ap)
{
    put_num(b, ap->algo);
    put_num(b, ap->limit);
    put_num(b, ap->burst);
    put_num(b, ap->window_ms);
    put_num(b, ap->p);
    put_num(b, ap->q);
}

/* One rule of the table: its numbers, and the shapes it replaced that may
 * still hold state (nold of them; none for a refund), each with its
 * numbers, its name and the time it was replaced. */
static void put_rule(const rnode *n, cmdbuf *b, const rl_rule *r,
                     int64_t nold, int64_t now)
{
    put_numbers(b, &r->ap);
    put_num(b, nold);
    if (!nold)
        return;
    put_arg(b, r->shape.name, r->shape.len);
    for (int i = 0; i < r->nprev; i++) {
        const rule_shape *s = &r->prev[i];
        if (!old_shape_sent(n, r, s, now))
            continue;
        put_numbers(b, &s->ap);
        put_arg(b, s->name, s->len);
        put_num(b, s->since_ms);
    }
}

static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the script call --------------------------------------------------- */

/* One script call over jobs[0..nb), each a request of the batch protocol
 * (lua/check.lua): the table of the rules their ops use, then per op its
 * rule's index, cost, soft (or the charge's time), field.  Mode 'c'
 * decides and charges; 'C' too, with the keys undeclared (a cluster batch
 * over many slots: each key's name follows its values); mode 'r' gives
 * back what each job's ops charged (out[i].allowed && out[i].changed). */
static void put_script(const rnode *r, cmdbuf *b, job **jobs, int nb,
                       char mode, int eval)
{
    int64_t nkeys = 0, test_now = 0, now, nold, moves = 0;
    int cross = mode == 'C', old = mode != 'r', is_new, j;
    rule_table t;
    size_t i;

    if (r->clock && r->clock->fn)
        test_now = r->clock->fn(r->clock->arg);
    now = test_now ? test_now : wall_ms();
    table_init(&t);
    for (j = 0; j < nb; j++) {
        nkeys += (int64_t)jobs[j]->n;
        for (i = 0; i < jobs[j]->n; i++) {
            const rl_rule *rule = jobs[j]->ops[i].rule;
            nold = old ? old_shapes(r, rule, now) : 0;
            moves |= nold;
            rule_at(&t, rule, rule_len(nold), &is_new);
        }
    }
    put_head(b, '*', 3 + (cross ? 0 : nkeys) + t.next + nb +
                         (cross ? 5 : 4) * nkeys);
    if (eval) {
        put_arg(b, "EVAL", 4);
        put_arg(b, r->script, r->script_len);
    } else {
        put_arg(b, "EVALSHA", 7);
        put_arg(b, rconn_sha(r->lanes[0].conn), 40);
    }
    put_num(b, cross ? 0 : nkeys);
    for (j = 0; !cross && j < nb; j++)
        for (i = 0; i < jobs[j]->n; i++) {
            char key[REDIS_KEY_MAX], field[REDIS_FIELD_MAX];
            size_t flen;
            put_arg(b, key, redis_key(&jobs[j]->ops[i], r->compact, key,
                                      field, &flen));
        }
    put_num(b, test_now);
    put_arg(b, &mode, 1);
    put_num(b, moves ? -t.next : t.next); /* the requests' part */
    table_init(&t);
    for (j = 0; j < nb; j++)
        for (i = 0; i < jobs[j]->n; i++) {
            const rl_rule *rule = jobs[j]->ops[i].rule;
            nold = old ? old_shapes(r, rule, now) : 0;
            rule_at(&t, rule, rule_len(nold), &is_new);
            if (is_new)
                put_rule(r, b, rule, nold, now);
        }
    put_num(b, nb);
    table_init(&t);
    for (j = 0; j < nb; j++) {
        put_num(b, (int64_t)jobs[j]->n);
        for (i = 0; i < jobs[j]->n; i++) {
            const store_op *op = &jobs[j]->ops[i];
            const algo_decision *d = &jobs[j]->out[i];
            char key[REDIS_KEY_MAX], field[REDIS_FIELD_MAX];
            size_t flen = 0, klen = 0;
            nold = old ? old_shapes(r, op->rule, now) : 0;
            put_num(b, rule_at(&t, op->rule, rule_len(nold), &is_new));
            put_num(b, mode == 'r' && !(d->allowed && d->changed)
                           ? 0 : op->cost);
            put_num(b, mode != 'r' ? op->soft : jobs[j]->now);
            if (r->compact || cross)
                klen = redis_key(op, r->compact, key, field, &flen);
            put_arg(b, field, flen);
            if (cross)
                put_arg(b, key, klen);
        }
    }
}

static void put_asking(cmdbuf *b)
{
    put(b, "*1\r\n$6\r\nASKING\r\n", 16);
}

/* An error reply's meaning; the address of a redirect into why->addr. */
static int classify(const redisReply *rep, rnode_reply *why)
{
    const char *s = rep->str;
    int slot;

    if (strncmp(s, "NOSCRIPT", 8) == 0)
        return -1;
    why->addr[0] = 0;
    switch (cluster_redirect_parse(s, rep->len, &slot, why->addr,
                                   sizeof why->addr)) {
    case 'M':
        return RN_MOVED;
    case 'A':
        return RN_ASK;
    }
    if (strncmp(s, "TRYAGAIN", 8) == 0)
        return RN_TRYAGAIN;
    if (strncmp(s, "CLUSTERDOWN", 11) == 0)
        return RN_DOWN;
    return RN_ERROR;
}

/* Read a script's answer for jobs[0..nb): per op {allowed, remaining,
 * reset, retry}, then the time.  1 NOSCRIPT, 0 ok, -1 anything else (the
 * reason in every job's why). */
static int parse_reply(const redisReply *rep, job **jobs, int nb)
{
    size_t e = 0, want = 1;

    if (rep->type == REDIS_REPLY_ERROR) {
        rnode_reply why;
        int st = classify(rep, &why);
        if (st < 0)
            return 1;
        for (int j = 0; j < nb; j++)
            *jobs[j]->why = why, jobs[j]->why->status = st;
        return -1;
    }
    for (int j = 0; j < nb; j++)
        want += 4 * jobs[j]->n;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != want)
        return -1;
    for (size_t k = 0; k < rep->elements; k++)
        if (rep->element[k]->type != REDIS_REPLY_INTEGER)
            return -1;
    for (int j = 0; j < nb; j++) {
        if (jobs[j]->n && rep->element[e]->integer < 0) { /* not here */
            e += 4 * jobs[j]->n;
            jobs[j]->why->status = RN_ELSEWHERE;
            continue;
        }
        for (size_t i = 0; i < jobs[j]->n; i++, e += 4) {
            algo_decision *d = &jobs[j]->out[i];
            redisReply **el = &rep->element[e];
            d->allowed = el[0]->integer == 1;
            d->changed = d->allowed && jobs[j]->ops[i].cost > 0;
            d->remaining = el[1]->integer;
            d->reset_ms = el[2]->integer;
            d->retry_ms = el[3]->integer;
            d->expires_ms = d->reset_ms;
        }
        jobs[j]->now = rep->element[rep->elements - 1]->integer;
        jobs[j]->rc = RL_OK;
        jobs[j]->why->status = RN_OK;
    }
    return 0;
}

/* A batch as one script call; EVALSHA, then EVAL on NOSCRIPT. */
static void run_joined(rnode *r, rconn *c, job **jobs, int nb,
                       int64_t deadline_ns)
{
    char stack[CMD_STACK], err[200];

    for (int eval = 0; eval < 2; eval++) {
        cmdbuf b = {stack, 0, sizeof stack, 0, 0};
        redisReply *rep = NULL;
        int rc = -1;

        if (mono_ns() >= deadline_ns)
            break;
        put_script(r, &b, jobs, nb, 'c', eval);
        if (!b.oom && rconn_call_until(c, b.p, b.len, 1, &rep, deadline_ns,
                                       err, sizeof err) == RL_OK) {
            rc = parse_reply(rep, jobs, nb);
            freeReplyObject(rep);
        }
        if (b.heap)
            free(b.p);
        if (rc != 1)
            break;
        atomic_fetch_add(&r->noscript, 1); /* the server lost the script */
    }
}

/* A cluster batch: one "C" call for the requests that may share one (any
 * slots of this node), and a call of its own, keys declared, for each
 * request flagged RN_ASKING or RN_DECLARED; all in one write.  The calls
 * that met NOSCRIPT go again as EVAL. */
static void run_calls(rnode *r, rconn *c, job **jobs, int nb,
                      int64_t deadline_ns)
{
    char stack[CMD_STACK], err[200];
    job *round[BATCH_MAX], *shared[BATCH_MAX], *next[BATCH_MAX];
    int nt = nb;

    memcpy(round, jobs, (size_t)nb * sizeof *jobs);
    for (int eval = 0; eval < 2 && nt; eval++) {
        cmdbuf b = {stack, 0, sizeof stack, 0, 0};
        redisReply *rep[RCONN_MAX_REPLIES];
        int nrep = 0, ns = 0, again = 0, sent, k = 0;

        if (mono_ns() >= deadline_ns)
            break;
        for (int j = 0; j < nt; j++)
            if (!round[j]->flags)
                shared[ns++] = round[j];
        if (ns) {
            put_script(r, &b, shared, ns, 'C', eval);
            nrep++;
        }
        for (int j = 0; j < nt; j++) {
            if (!round[j]->flags)
                continue;
            if (round[j]->flags & RN_ASKING) {
                put_asking(&b);
                nrep++;
            }
            put_script(r, &b, &round[j], 1, 'c', eval);
            nrep++;
        }
        sent = !b.oom && rconn_call_until(c, b.p, b.len, nrep, rep,
                                          deadline_ns, err,
                                          sizeof err) == RL_OK;
        if (b.heap)
            free(b.p);
        if (!sent)
            break;
        if (ns && parse_reply(rep[k++], shared, ns) == 1)
            for (int j = 0; j < ns; j++)
                next[again++] = shared[j];
        for (int j = 0; j < ns; j++)
            if (shared[j]->why->status == RN_ELSEWHERE)
                atomic_fetch_add(&r->elsewhere, 1);
        for (int j = 0; j < nt; j++) {
            if (!round[j]->flags)
                continue;
            if (round[j]->flags & RN_ASKING)
                k++; /* +OK */
            if (parse_reply(rep[k++], &round[j], 1) == 1)
                next[again++] = round[j];
            else if (round[j]->why->status == RN_MOVED)
                atomic_fetch_add(&r->moved, 1);
            else if (round[j]->why->status == RN_ASK)
                atomic_fetch_add(&r->asks, 1);
        }
        for (int i = 0; i < nrep; i++)
            freeReplyObject(rep[i]);
        if (again)
            atomic_fetch_add(&r->noscript, 1);
        memcpy(round, next, (size_t)again * sizeof *next);
        nt = again;
    }
}

/* ---- the queue --------------------------------------------------------------- */

static void wake(job *j)
{
    syscall(SYS_futex, &j->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void wait_state(job *j, uint32_t seen)
{
    int64_t left = j->deadline_ns - mono_ns();
    struct timespec rel;

    if (left <= 0) /* sent: the leader is a moment from waking us */
        left = 1000000;
    rel.tv_sec = left / 1000000000;
    rel.tv_nsec = left % 1000000000;
    syscall(SYS_futex, &j->state, FUTEX_WAIT_PRIVATE, seen, &rel, NULL, 0);
}

static void unlink_job(lane *l, job *me)
{
    job **pp = &l->head, *prev = NULL;

    for (; *pp && *pp != me; prev = *pp, pp = &(*pp)->next)
        ;
    if (!*pp)
        return;
    *pp = me->next;
    if (l->tail == me)
        l->tail = prev;
}

/* Under l->mu: take the queued jobs of the next batch into batch[] and the
 * ones whose time ran out into late[]; *deadline gets the batch's. */
static void take(lane *l, job **batch, int *nb, job **late,
                 int *nl, int64_t *deadline)
{
    int64_t now = mono_ns();
    int own = 0;

    *nb = *nl = 0;
    *deadline = INT64_MAX;
    while (l->head && *nb < BATCH_MAX && *nl < BATCH_MAX) {
        job *j = l->head;
        if (j->flags && own == OWN_MAX)
            break; /* the next batch takes it */
        own += j->flags != 0;
        l->head = j->next;
        if (!l->head)
            l->tail = NULL;
        if (j->deadline_ns <= now) { /* its time ran out in the queue */
            j->rc = RL_ESTORE;
            /* DONE under the lock: once we drop it, its caller may see
             * DONE and return, so its frame is touched no more. */
            atomic_store(&j->state, DONE);
            late[(*nl)++] = j;
            continue;
        }
        atomic_store(&j->state, SENT);
        batch[(*nb)++] = j;
        if (j->deadline_ns < *deadline)
            *deadline = j->deadline_ns;
    }
}

/* Under l->mu with l->busy held: send batches until `me` is decided, then
 * pass the lead on.  Returns with l->mu released. */
static void lead(rnode *r, lane *l, job *me)
{
    job *batch[BATCH_MAX], *late[BATCH_MAX];

    while (atomic_load(&me->state) != DONE) {
        int64_t deadline;
        int nb, nl;

        take(l, batch, &nb, late, &nl, &deadline);
        pthread_mutex_unlock(&l->mu);
        for (int i = 0; i < nl; i++)
            wake(late[i]); /* at worst a spurious wake: see below */
        if (nb) {
            if (r->per_call)
                run_calls(r, l->conn, batch, nb, deadline);
            else
                run_joined(r, l->conn, batch, nb, deadline);
            atomic_fetch_add(&r->batches, 1);
            atomic_fetch_add(&r->batched, nb);
        }
        /* DONE publishes the answers (a seq_cst store): a woken caller
         * reads them without the lock.  Wake after dropping the lock; a
         * caller that saw DONE first and returned gets at worst a
         * spurious wake of a futex word it no longer uses. */
        for (int i = 0; i < nb; i++)
            atomic_store(&batch[i]->state, DONE);
        for (int i = 0; i < nb; i++)
            if (batch[i] != me)
                wake(batch[i]);
        pthread_mutex_lock(&l->mu);
    }
    if (l->head) {
        job *next = l->head;
        if (next->last) /* a group's caller waits on its last job */
            next = next->last;
        atomic_store(&next->state, LEAD);
        pthread_mutex_unlock(&l->mu);
        wake(next);
        return;
    }
    l->busy = 0;
    pthread_mutex_unlock(&l->mu);
}

/* The next lane in turn whose connection is up (or the next one, if none
 * is: the call then fails at once). */
static lane *pick(rnode *r)
{
    unsigned start = atomic_fetch_add(&r->next, 1);

    for (int i = 0; i < r->nlanes; i++) {
        lane *l = &r->lanes[(start + (unsigned)i) % (unsigned)r->nlanes];
        if (rconn_is_up(l->conn))
            return l;
    }
    return &r->lanes[start % (unsigned)r->nlanes];
}

/* Queue jobs[0..n) in order on lane l (one request, or the group of an
 * rnode_check_many) and wait until every one is decided.  The queue keeps
 * its order and a batch is taken from its head, so the last job is decided
 * last: the caller waits on that one alone, and a lead passed to any job
 * of a group is passed to it (job.last).  A caller still queued at its
 * deadline takes its jobs off the queue and leaves. */
static void submit(rnode *r, lane *l, job *jobs, size_t n)
{
    job *last = &jobs[n - 1];

    pthread_mutex_lock(&l->mu);
    for (size_t i = 0; i < n; i++) {
        if (l->tail)
            l->tail->next = &jobs[i];
        else
            l->head = &jobs[i];
        l->tail = &jobs[i];
    }
    if (!l->busy) {
        l->busy = 1;
        lead(r, l, last);
        return;
    }
    for (;;) {
        uint32_t st = atomic_load(&last->state);
        if (st == DONE)
            break;
        if (st == LEAD) {
            atomic_store(&last->state, QUEUED);
            lead(r, l, last);
            return;
        }
        if (st == QUEUED && mono_ns() >= last->deadline_ns) {
            /* never sent: leave quietly; the ones out are decided by
             * their batch's deadline, no later than ours */
            for (size_t i = 0; i < n; i++)
                if (atomic_load(&jobs[i].state) == QUEUED) {
                    unlink_job(l, &jobs[i]);
                    jobs[i].rc = RL_ESTORE;
                    atomic_store(&jobs[i].state, DONE);
                }
            pthread_mutex_unlock(&l->mu);
            for (size_t i = 0; i < n; i++)
                while (atomic_load(&jobs[i].state) == SENT)
                    wait_state(&jobs[i], SENT);
            return;
        }
        pthread_mutex_unlock(&l->mu);
        wait_state(last, st);
        while (atomic_load(&last->state) == SENT)
            wait_state(last, SENT);
        if (atomic_load(&last->state) == DONE)
            return;
        pthread_mutex_lock(&l->mu);
    }
    pthread_mutex_unlock(&l->mu);
}

int rnode_check_many(rnode *r, store_req *reqs, size_t n, int64_t deadline_ns,
                     rnode_reply *why)
{
    int64_t start = mono_ns();
    job jobs[STORE_MANY_MAX];
    rnode_reply dummy[STORE_MANY_MAX];
    lane *l;
    int allowed, ok = 0;

    if (n == 0 || n > STORE_MANY_MAX)
        return RL_EINVAL;
    if (!why)
        why = dummy;
    for (size_t i = 0; i < n; i++) {
        reqs[i].rc = RL_ESTORE;
        reqs[i].now_ms = 0;
        why[i].status = RN_ERROR;
    }
    if (!(allowed = breaker_allow(&r->brk, start / 1000000))) {
        for (size_t i = 0; i < n; i++)
            why[i].status = RN_BREAKER;
        return RL_OK; /* open: no network call; each request failed */
    }
    l = pick(r);
    if (!rconn_is_up(l->conn)) {
        if (allowed == 2)
            breaker_unprobe(&r->brk);
        else
            breaker_done(&r->brk, 0, start / 1000000);
        return RL_OK;
    }
    for (size_t i = 0; i < n; i++)
        jobs[i] = (job){reqs[i].ops, reqs[i].n, reqs[i].out, 0, RL_ESTORE,
                        0, &why[i], deadline_ns, QUEUED, NULL,
                        &jobs[n - 1]};
    submit(r, l, jobs, n);
    for (size_t i = 0; i < n; i++) {
        reqs[i].rc = jobs[i].rc;
        reqs[i].now_ms = jobs[i].now;
        /* an answer, even "not here", says the server is alive */
        ok |= jobs[i].rc == RL_OK || why[i].status >= RN_MOVED;
    }
    breaker_done(&r->brk, ok, mono_ns() / 1000000);
    return RL_OK;
}

int rnode_check(rnode *r, const store_op *ops, size_t n, algo_decision *out,
                int64_t *now_ms, int64_t deadline_ns, int flags,
                rnode_reply *why)
{
    int64_t start = mono_ns();
    rnode_reply dummy;
    job me = {ops, n, out, 0, RL_ESTORE, r->per_call ? flags : 0,
              why ? why : &dummy, deadline_ns, QUEUED, NULL, NULL};
    lane *l;
    int allowed;

    me.why->status = RN_ERROR;
    /* An open breaker: no network call at all, failure modes decide. */
    if (!(allowed = breaker_allow(&r->brk, start / 1000000))) {
        me.why->status = RN_BREAKER;
        return RL_ESTORE;
    }
    l = pick(r);
    if (!rconn_is_up(l->conn)) {
        if (allowed == 2)
            breaker_unprobe(&r->brk); /* nothing was tried */
        else
            breaker_done(&r->brk, 0, start / 1000000);
        return RL_ESTORE;
    }
    submit(r, l, &me, 1);
    /* The server answered (a redirect is an answer): it is alive. */
    breaker_done(&r->brk, me.rc == RL_OK || me.why->status >= RN_MOVED,
                 mono_ns() / 1000000);
    *now_ms = me.now;
    return me.rc;
}

int rnode_refund(rnode *r, const store_op *ops, size_t n,
                 const algo_decision *out, int64_t now_ms)
{
    char stack[CMD_STACK];
    cmdbuf b = {stack, 0, sizeof stack, 0, 0};
    job j = {ops, n, (algo_decision *)out, now_ms, 0, 0, NULL, 0, DONE,
             NULL, NULL};
    job *jp = &j;
    lane *l = pick(r);
    int sent;

    put_script(r, &b, &jp, 1, 'r', 0);
    sent = !b.oom && rconn_send(l->conn, b.p, b.len, 1) == RL_OK;
    if (b.heap)
        free(b.p);
    return sent;
}

/* ---- lifecycle ------------------------------------------------------------ */

void rnode_close(rnode *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->nlanes; i++) {
        rconn_close(r->lanes[i].conn);
        pthread_mutex_destroy(&r->lanes[i].mu);
    }
    free(r);
}

int rnode_open(rnode **out, const rnode_opts *o, char *err, size_t errlen)
{
    rnode *r = calloc(1, sizeof *r);

    *out = NULL;
    if (!r)
        return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
    r->per_call = o->per_call;
    r->compact = o->compact;
    r->clock = o->clock;
    r->script = o->conn.script;
    r->script_len = o->conn.script_len;
    breaker_init(&r->brk, o->breaker_failures, o->breaker_cooldown_ms);
    for (int i = 0; i < o->connections && i < MAX_CONNS; i++) {
        lane *l = &r->lanes[i];
        int rc = rconn_open(&l->conn, &o->conn, o->degraded, err, errlen);
        if (rc != RL_OK) {
            rnode_close(r);
            return rc;
        }
        pthread_mutex_init(&l->mu, NULL);
        r->nlanes++;
    }
    if (!r->nlanes) {
        free(r);
        return snprintf(err, errlen, "no connections"), RL_EINVAL;
    }
    *out = r;
    return RL_OK;
}

int rnode_is_up(rnode *r)
{
    for (int i = 0; i < r->nlanes; i++)
        if (rconn_is_up(r->lanes[i].conn))
            return 1;
    return 0;
}

rconn *rnode_conn(rnode *r)
{
    return pick(r)->conn;
}

breaker *rnode_breaker(rnode *r)
{
    return &r->brk;
}

void rnode_stats_add(rnode *r, rnode_stats *st)
{
    rconn_stats cs;

    for (int i = 0; i < r->nlanes; i++) {
        rconn_stats_get(r->lanes[i].conn, &cs);
        st->calls += cs.calls;
        st->writes += cs.writes;
        st->timeouts += cs.timeouts;
        st->reconnects += cs.reconnects;
        st->down_fails += cs.down_fails;
        st->stuck += cs.stuck;
    }
    st->noscript += atomic_load(&r->noscript);
    st->batches += atomic_load(&r->batches);
    st->checks += atomic_load(&r->batched);
    st->moved += atomic_load(&r->moved);
    st->elsewhere += atomic_load(&r->elsewhere);
    st->asks += atomic_load(&r->asks);
}
