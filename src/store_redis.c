/*
 * store_redis.c -- the store in one Redis server.
 *
 * Each request (one rl_check or rl_allow) is decided all-or-nothing by the
 * script.  Requests are batched: per connection one script call is out at a
 * time, and every request that queues up meanwhile goes into the next call,
 * which decides each of them independently.  Redis then runs one script,
 * and reads its clock once, for many checks; that is what lets one server
 * keep up with many limiters.  The first caller to find the connection idle
 * becomes the leader: it takes the queue, sends it, hands each request its
 * decisions, wakes its caller and passes the lead to the next queued
 * request.  A batch waits no longer than the earliest deadline in it, so no
 * check waits longer than its timeout; a request still queued at its
 * deadline leaves the queue by itself.
 *
 * Keys: rl:{<client key>}:<rule id>:<shape>, one per (client, rule), each
 * holding one integer and expiring by itself (see lua/).  The hash tag puts
 * a client's rules in one Redis Cluster slot.  A single server runs a
 * request's rules in one script whatever their slots; where slots must be
 * kept apart (Redis Cluster, and the tests of that path, see
 * store_redis_split_slots) a request is split per slot, and if one part
 * denies, the parts that charged get a refund.
 *
 * A server that lost the script (restart, failover, SCRIPT FLUSH) answers
 * NOSCRIPT; the batch is sent again as EVAL, which also caches the script,
 * within the same deadline.
 */
#include "store_redis.h"
#include "breaker.h"
#include "crc16.h"
#include "fleet.h"
#include "ratelimit.h"
#include "redis_conn.h"

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
#define BATCH_MAX 64          /* requests per script call              */

const char *store_redis_test_script;
size_t store_redis_test_script_len;
int store_redis_split_slots;

enum { QUEUED, SENT, DONE, LEAD };

/* One request, on its caller's stack while it waits. */
typedef struct job {
    const store_op *ops;
    size_t n;
    algo_decision *out;
    int64_t now;               /* the script's time                    */
    int rc;
    int64_t deadline_ns;
    _Atomic uint32_t state;
    struct job *next;
} job;

/* A connection and the requests queued for its next script call. */
typedef struct lane {
    pthread_mutex_t mu;
    rconn *conn;
    job *head, *tail;
    int busy;                  /* a leader is sending or waiting       */
} lane;

typedef struct redis_store {
    rl_store base;
    lane lanes[MAX_CONNS];
    int nlanes;
    _Atomic unsigned next;
    int64_t timeout_ms;
    int split;                 /* one script per slot (cluster rules)  */
    const char *script;
    size_t script_len;
    rl_clock clock;            /* tests: the time passed to the script */
    breaker brk;               /* one per shard: one server, one shard */
    fleet fl;                  /* heartbeats, with fleet_size "auto"   */
    _Atomic int64_t noscript, refunds, batches, batched;
} redis_store;

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

/* Decimal digits of v (>= 0 here; the sign is kept for safety) into tmp,
 * right-aligned; returns where they start.  No snprintf on this path. */
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

static size_t key_name(const store_op *op, char *key)
{
    static const char letter[] = "stfg"; /* enum rl_algo order */
    size_t idlen = strlen(op->rule->id), n = 4;

    memcpy(key, "rl:{", 4);
    memcpy(key + n, op->key, op->key_len);
    n += op->key_len;
    memcpy(key + n, "}:", 2);
    n += 2;
    memcpy(key + n, op->rule->id, idlen);
    n += idlen;
    n += (size_t)sprintf(key + n, ":%c%lld", letter[op->rule->ap.algo & 3],
                         (long long)op->rule->window_s);
    return n;
}

#define KEY_NAME_MAX (RL_KEY_MAX + RL_RULE_ID_MAX + 32)

static unsigned op_slot(const store_op *op)
{
    char key[KEY_NAME_MAX];

    return key_slot(key, key_name(op, key));
}

/* ---- requests as parts ---------------------------------------------------- */

/* The parts of one request the script decides all-or-nothing: the whole
 * request, or one part per slot when slots must be kept apart. */
typedef struct parts {
    int n;
    int size[RL_OPS_MAX];
    int idx[RL_OPS_MAX][RL_OPS_MAX];
} parts;

static void split(const redis_store *r, const store_op *ops, size_t n,
                  parts *g)
{
    unsigned slot[RL_OPS_MAX];

    g->n = 0;
    for (size_t i = 0; i < n; i++) {
        int j = 0;
        if (r->split) {
            slot[g->n] = op_slot(&ops[i]);
            for (j = 0; j < g->n && slot[j] != slot[g->n]; j++)
                ;
        }
        if (j == g->n)
            g->size[g->n++] = 0;
        g->idx[j][g->size[j]++] = (int)i;
    }
}

/* One script call over jobs[0..nb): mode 'c' decides every part of every
 * job; mode 'r' refunds the parts `refund` marks (charged ops only). */
static void put_script(const redis_store *r, cmdbuf *b, job **jobs, int nb,
                       const parts *pg, char mode, int eval,
                       const unsigned char (*refund)[RL_OPS_MAX])
{
    int nkeys = 0, nparts = 0, j, g, i;

    for (j = 0; j < nb; j++)
        for (g = 0; g < pg[j].n; g++)
            if (mode == 'c' || refund[j][g]) {
                nkeys += pg[j].size[g];
                nparts++;
            }
    put_head(b, '*', 3 + nkeys + 3 + nparts + 9LL * nkeys);
    if (eval) {
        put_arg(b, "EVAL", 4);
        put_arg(b, r->script, r->script_len);
    } else {
        put_arg(b, "EVALSHA", 7);
        put_arg(b, rconn_sha(r->lanes[0].conn), 40);
    }
    put_num(b, nkeys);
    for (j = 0; j < nb; j++)
        for (g = 0; g < pg[j].n; g++)
            for (i = 0; mode == 'c' || refund[j][g] ? i < pg[j].size[g] : 0;
                 i++) {
                char key[KEY_NAME_MAX];
                const store_op *op = &jobs[j]->ops[pg[j].idx[g][i]];
                put_arg(b, key, key_name(op, key));
            }
    put_num(b, r->clock.fn ? r->clock.fn(r->clock.arg) : 0);
    put_arg(b, mode == 'c' ? "c" : "r", 1);
    put_num(b, nparts);
    for (j = 0; j < nb; j++) {
        for (g = 0; g < pg[j].n; g++) {
            if (mode == 'r' && !refund[j][g])
                continue;
            put_num(b, pg[j].size[g]);
            for (i = 0; i < pg[j].size[g]; i++) {
                int k = pg[j].idx[g][i];
                const store_op *op = &jobs[j]->ops[k];
                const algo_params *ap = &op->rule->ap;
                const algo_decision *d = &jobs[j]->out[k];
                put_num(b, ap->algo);
                put_num(b, ap->limit);
                put_num(b, ap->burst);
                put_num(b, ap->window_ms);
                put_num(b, ap->p);
                put_num(b, ap->q);
                put_num(b, mode == 'r' && !(d->allowed && d->changed)
                               ? 0 : op->cost);
                put_num(b, mode == 'c' ? op->soft : jobs[j]->now);
                put_arg(b, "", 0); /* field: "" = the plain layout */
            }
        }
    }
}

/* Read the script's answer into every job; 1 NOSCRIPT, 0 ok, -1 error. */
static int parse_reply(const redisReply *rep, job **jobs, int nb,
                       const parts *pg)
{
    size_t e = 0, want = 1;

    if (rep->type == REDIS_REPLY_ERROR)
        return strncmp(rep->str, "NOSCRIPT", 8) == 0 ? 1 : -1;
    for (int j = 0; j < nb; j++)
        want += 4 * jobs[j]->n;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != want)
        return -1;
    for (size_t k = 0; k < rep->elements; k++)
        if (rep->element[k]->type != REDIS_REPLY_INTEGER)
            return -1;
    for (int j = 0; j < nb; j++) {
        for (int g = 0; g < pg[j].n; g++) {
            for (int i = 0; i < pg[j].size[g]; i++) {
                int k = pg[j].idx[g][i];
                algo_decision *d = &jobs[j]->out[k];
                redisReply **el = &rep->element[e];
                d->allowed = el[0]->integer == 1;
                d->changed = d->allowed && jobs[j]->ops[k].cost > 0;
                d->remaining = el[1]->integer;
                d->reset_ms = el[2]->integer;
                d->retry_ms = el[3]->integer;
                d->expires_ms = d->reset_ms;
                e += 4;
            }
        }
        jobs[j]->now = rep->element[rep->elements - 1]->integer;
        jobs[j]->rc = RL_OK;
    }
    return 0;
}

/* Jobs split in parts whose request was denied: refund the parts that
 * charged, without waiting for the answer. */
static void refund_denied(redis_store *r, rconn *c, job **jobs, int nb,
                          const parts *pg)
{
    static _Thread_local unsigned char mark[BATCH_MAX][RL_OPS_MAX];
    char stack[CMD_STACK];
    cmdbuf b = {stack, 0, sizeof stack, 0, 0};
    int any = 0;

    for (int j = 0; j < nb; j++) {
        int denied = 0;
        memset(mark[j], 0, sizeof mark[j]);
        for (size_t k = 0; k < jobs[j]->n; k++)
            denied |= !jobs[j]->out[k].allowed && !jobs[j]->ops[k].soft;
        for (int g = 0; denied && pg[j].n > 1 && g < pg[j].n; g++)
            for (int i = 0; i < pg[j].size[g]; i++) {
                const algo_decision *d = &jobs[j]->out[pg[j].idx[g][i]];
                mark[j][g] |= d->allowed && d->changed;
            }
        for (int g = 0; g < pg[j].n; g++)
            any += mark[j][g];
    }
    if (any) {
        put_script(r, &b, jobs, nb, pg, 'r', 0,
                   (const unsigned char (*)[RL_OPS_MAX])mark);
        if (!b.oom && rconn_send(c, b.p, b.len, 1) == RL_OK)
            atomic_fetch_add(&r->refunds, any);
        if (b.heap)
            free(b.p);
    }
    for (int j = 0; j < nb; j++) { /* a denied request keeps no charge */
        int denied = 0;
        for (size_t k = 0; k < jobs[j]->n; k++)
            denied |= !jobs[j]->out[k].allowed && !jobs[j]->ops[k].soft;
        for (size_t k = 0; denied && k < jobs[j]->n; k++)
            jobs[j]->out[k].changed = 0;
    }
}

/* Send one batch and fill in every job; EVALSHA, then EVAL on NOSCRIPT. */
static void run_batch(redis_store *r, rconn *c, job **jobs, int nb,
                      int64_t deadline_ns)
{
    static _Thread_local parts pg[BATCH_MAX];
    char stack[CMD_STACK], err[200];
    int rc = 0;

    for (int j = 0; j < nb; j++) {
        split(r, jobs[j]->ops, jobs[j]->n, &pg[j]);
        jobs[j]->rc = RL_ESTORE;
    }
    for (int eval = 0; eval < 2; eval++) {
        cmdbuf b = {stack, 0, sizeof stack, 0, 0};
        redisReply *rep = NULL;

        if (mono_ns() >= deadline_ns)
            break;
        put_script(r, &b, jobs, nb, pg, 'c', eval, NULL);
        if (!b.oom && rconn_call_until(c, b.p, b.len, 1, &rep, deadline_ns,
                                       err, sizeof err) == RL_OK) {
            rc = parse_reply(rep, jobs, nb, pg);
            freeReplyObject(rep);
        } else {
            rc = -1;
        }
        if (b.heap)
            free(b.p);
        if (rc != 1)
            break;
        atomic_fetch_add(&r->noscript, 1); /* the server lost the script */
    }
    if (rc == 0 && r->split)
        refund_denied(r, c, jobs, nb, pg);
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

/* Under l->mu with l->busy held: send batches until `me` is decided, then
 * pass the lead on.  Returns with l->mu released. */
static void lead(redis_store *r, lane *l, job *me)
{
    job *batch[BATCH_MAX], *late[BATCH_MAX];

    while (atomic_load(&me->state) != DONE) {
        int64_t now = mono_ns(), deadline = INT64_MAX;
        int nb = 0, nl = 0;

        while (l->head && nb < BATCH_MAX && nl < BATCH_MAX) {
            job *j = l->head;
            l->head = j->next;
            if (!l->head)
                l->tail = NULL;
            if (j->deadline_ns <= now) { /* its time ran out in the queue */
                j->rc = RL_ESTORE;
                /* DONE under the lock: once we drop it, its caller may see
                 * DONE and return, so its frame is touched no more. */
                atomic_store(&j->state, DONE);
                late[nl++] = j;
                continue;
            }
            atomic_store(&j->state, SENT);
            batch[nb++] = j;
            if (j->deadline_ns < deadline)
                deadline = j->deadline_ns;
        }
        pthread_mutex_unlock(&l->mu);
        for (int i = 0; i < nl; i++)
            wake(late[i]); /* at worst a spurious wake: see below */
        if (nb) {
            run_batch(r, l->conn, batch, nb, deadline);
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
static lane *pick(redis_store *r)
{
    unsigned start = atomic_fetch_add(&r->next, 1);

    for (int i = 0; i < r->nlanes; i++) {
        lane *l = &r->lanes[(start + (unsigned)i) % (unsigned)r->nlanes];
        if (rconn_is_up(l->conn))
            return l;
    }
    return &r->lanes[start % (unsigned)r->nlanes];
}

static int redis_check(rl_store *s, const store_op *ops, size_t n,
                       algo_decision *out, int64_t *now_ms)
{
    redis_store *r = (redis_store *)s;
    int64_t start = mono_ns();
    lane *l;
    job me = {ops, n, out, 0, RL_ESTORE, start + r->timeout_ms * 1000000,
              QUEUED, NULL};

    /* An open breaker: no network call at all, failure modes decide. */
    int allowed = breaker_allow(&r->brk, start / 1000000);
    if (!allowed)
        return RL_ESTORE;
    l = pick(r);
    if (!rconn_is_up(l->conn)) {
        if (allowed == 2)
            breaker_unprobe(&r->brk); /* nothing was tried */
        else
            breaker_done(&r->brk, 0, start / 1000000);
        return RL_ESTORE;
    }
    pthread_mutex_lock(&l->mu);
    if (l->tail)
        l->tail->next = &me;
    else
        l->head = &me;
    l->tail = &me;
    if (!l->busy) {
        l->busy = 1;
        lead(r, l, &me);
    } else {
        for (;;) {
            uint32_t st = atomic_load(&me.state);
            if (st == DONE)
                break;
            if (st == LEAD) {
                atomic_store(&me.state, QUEUED);
                lead(r, l, &me);
                goto done;
            }
            if (st == QUEUED && mono_ns() >= me.deadline_ns) {
                unlink_job(l, &me); /* never sent: leave quietly */
                me.rc = RL_ESTORE;
                break;
            }
            pthread_mutex_unlock(&l->mu);
            wait_state(&me, st);
            while (atomic_load(&me.state) == SENT)
                wait_state(&me, SENT); /* the leader's deadline <= ours */
            if (atomic_load(&me.state) == DONE)
                goto done; /* answers published by the store of DONE */
            pthread_mutex_lock(&l->mu);
        }
        pthread_mutex_unlock(&l->mu);
    }
done:
    breaker_done(&r->brk, me.rc == RL_OK, mono_ns() / 1000000);
    *now_ms = me.now;
    return me.rc;
}

/* ---- lifecycle ------------------------------------------------------------ */

static void redis_free(rl_store *s)
{
    redis_store *r = (redis_store *)s;

    fleet_stop(&r->fl);
    for (int i = 0; i < r->nlanes; i++) {
        rconn_close(r->lanes[i].conn);
        pthread_mutex_destroy(&r->lanes[i].mu);
    }
    free(r);
}

static int redis_breaker(rl_store *s, int64_t *opens, int64_t *closes)
{
    redis_store *r = (redis_store *)s;

    *opens = atomic_load(&r->brk.opens);
    *closes = atomic_load(&r->brk.closes);
    return atomic_load(&r->brk.state);
}

static const store_vtable redis_vtable = {"redis", redis_check, redis_free,
                                          redis_breaker};

static void redact(const char *uri, char *out, size_t len)
{
    const char *scheme = strstr(uri, "://"), *at = strchr(uri, '@');

    if (!scheme || !at || at < scheme) {
        snprintf(out, len, "%.100s", uri);
        return;
    }
    const char *colon = memchr(scheme + 3, ':', (size_t)(at - scheme - 3));
    if (!colon)
        colon = at;
    snprintf(out, len, "%.*s:***%.80s", (int)(colon - uri), uri, at);
}

int store_redis_new(const char *uri, const store_options *opt,
                    rl_store **out, char *err, size_t errlen)
{
    redis_store *r = calloc(1, sizeof *r);
    rconn_opts co;
    char why[200], shown[128];
    int rc;

    *out = NULL;
    if (!r)
        return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
    r->base.vt = &redis_vtable;
    r->timeout_ms = opt->timeout_ms;
    r->split = store_redis_split_slots;
    breaker_init(&r->brk, opt->breaker_failures, opt->breaker_cooldown_ms);
    r->script = store_redis_test_script ? store_redis_test_script : rl_lua_check;
    r->script_len = store_redis_test_script ? store_redis_test_script_len
                                            : rl_lua_check_len;
    memset(&co, 0, sizeof co);
    redact(uri, shown, sizeof shown);
    if (redis_uri_parse(uri, &co.uri, why, sizeof why)) {
        free(r);
        return snprintf(err, errlen, "store \"%s\": %s", shown, why),
               RL_ESTORE;
    }
    co.connect_timeout_ms = opt->connect_timeout_ms;
    /* Reconnect tries at most half a breaker cooldown apart (and at most a
     * second): once Redis is back, a connection is up before the breaker's
     * next probe is due, so it closes within one cooldown. */
    co.max_backoff_ms = opt->breaker_cooldown_ms / 2;
    if (co.max_backoff_ms > 1000)
        co.max_backoff_ms = 1000;
    if (co.max_backoff_ms < 10)
        co.max_backoff_ms = 10;
    co.script = r->script;
    co.script_len = r->script_len;
    for (int i = 0; i < opt->redis_connections && i < MAX_CONNS; i++) {
        lane *l = &r->lanes[i];
        rc = rconn_open(&l->conn, &co, opt->degraded_start, why, sizeof why);
        if (rc != RL_OK) {
            redis_free(&r->base);
            return snprintf(err, errlen, "store \"%s\": %s", shown, why), rc;
        }
        pthread_mutex_init(&l->mu, NULL);
        r->nlanes++;
    }
    if (opt->fleet_name &&
        fleet_start(&r->fl, r->lanes[0].conn, opt->fleet_name,
                    opt->fleet_size, 1000) != 0) {
        redis_free(&r->base);
        return snprintf(err, errlen, "cannot start the fleet heartbeat"),
               RL_ESTORE;
    }
    *out = &r->base;
    return RL_OK;
}

void store_redis_set_clock(rl_store *s, rl_clock_fn fn, void *arg)
{
    redis_store *r = (redis_store *)s;

    r->clock.fn = fn;
    r->clock.arg = arg;
}

void store_redis_stats_get(rl_store *s, store_redis_stats *st)
{
    redis_store *r = (redis_store *)s;
    rconn_stats cs;

    memset(st, 0, sizeof *st);
    for (int i = 0; i < r->nlanes; i++) {
        rconn_stats_get(r->lanes[i].conn, &cs);
        st->calls += cs.calls;
        st->writes += cs.writes;
        st->timeouts += cs.timeouts;
        st->reconnects += cs.reconnects;
        st->down_fails += cs.down_fails;
    }
    st->noscript = atomic_load(&r->noscript);
    st->refunds = atomic_load(&r->refunds);
    st->batches = atomic_load(&r->batches);
    st->checks = atomic_load(&r->batched);
}
