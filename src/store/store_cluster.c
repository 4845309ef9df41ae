/*
 * store_cluster.c -- the store in a Redis Cluster.
 *
 * hiredis has no cluster client, so this is one: a slot map (16384 entries,
 * each the index of a master in a table of nodes), one node per master
 * (redis_node.c: pipelined lanes, batches, its own circuit breaker, so one
 * sick master degrades only the keys it owns), and redirects followed on
 * the request path within the check's deadline:
 *   MOVED slot addr  the slot lives elsewhere now: the map entry changes,
 *                    the call goes there, and a full refresh is asked for;
 *   ASK slot addr    the slot is migrating and this key is already there:
 *                    ASKING + the call, at addr, this once;
 *   TRYAGAIN         the slot's keys are split by a migration: again, a
 *                    moment later, if the deadline allows;
 *   CLUSTERDOWN      the check fails (the failure modes decide) and the
 *                    map is refreshed; but from a node that has just
 *                    said it is a replica (READONLY), it is no master's
 *                    verdict: a master demoted by a planned failover
 *                    answers it for ~150 ms as it turns replica ("Cluster
 *                    state changed: fail" then "ok" in its log, nothing
 *                    else down), while the new master serves the slot.
 *                    The check waits, within its deadline, for the map
 *                    to name the slot's master, and goes there.  A
 *                    master with ratelimit.so gets an RL.CHECK of its
 *                    own per check, its keys declared, so a master
 *                    turning replica answers CLUSTERDOWN at once: that
 *                    is asked about once through the script's shared
 *                    call (RN_PROBE), which meets the READONLY.
 * A background thread owns the table (cluster_map.c; the state both
 * files share is cluster_store.h's): it reads CLUSTER SLOTS from a live
 * node every second, and within ~50 ms when the request path asks (a
 * redirect, a failed call), opening nodes for new masters (a replica
 * promoted by a failover) off the request path.  It never waits on a sick
 * node: it asks the node that answered last first, then the others, those
 * that failed to answer last (each failure demotes a node, an answer
 * restores it), then the seeds, each with a short deadline
 * (REFRESH_ASK_MS); only when none answers that fast does it ask them all
 * again with connect_timeout_ms.  So a hung master costs one refresh one
 * short wait, once, and a failover is followed as soon as a live node
 * knows it.  Replicas are known but never written.  Nodes are never removed
 * while the store lives, so the request path reads the table without a
 * lock: entries are published by an atomic count, and node handles by an
 * atomic pointer.
 *
 * A request's ops are grouped by slot (the hash tag makes all of one
 * client's rules one group); each group is decided all-or-nothing on its
 * master, in that master's batch call (redis_node.c: one call for many
 * slots; a group the master no longer serves comes back RN_ELSEWHERE and
 * goes again alone, keys declared, to meet its redirect).  If any group denies, the groups that charged are refunded,
 * so no rule is charged for a request it did not pass; if any group fails,
 * the groups that charged are refunded and the whole request is left to
 * the failure modes.
 */
#include "store_cluster.h"
#include "cluster_store.h"
#include "fleet.h"
#include "ratelimit.h"
#include "redis_key.h"
#include "store_redis.h"
#include "cluster_control.h"
#include "cluster_reply.h"
#include "crc16.h"
#include "redis_link.h"

#include <pthread.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the request path ------------------------------------------------ */

static rnode *node_at(cluster_store *c, unsigned idx)
{
    return idx < (unsigned)atomic_load(&c->nnodes)
               ? atomic_load(&c->nodes[idx].node) : NULL;
}

/* A redirect named node `to`, known but not open (a replica promoted a
 * moment ago): the refresh thread opens it now.  The signal, sent without
 * the mutex (no lock on the request path), may miss a refresh thread about
 * to sleep; its 50 ms tick is the backstop. */
static void want_open(cluster_store *c, int to)
{
    atomic_store(&c->nodes[to].wanted, 1);
    atomic_store(&c->want, 1);
    pthread_cond_signal(&c->cv);
}

static void pause_until(int64_t deadline_ns)
{
    int64_t left = deadline_ns - mono_ns();
    struct timespec ts = {0, left > 1000000 ? 1000000 : left};

    if (left > 0)
        nanosleep(&ts, NULL);
}

/* Where a group's next attempt goes: the node, the call's flags,
 * whether that node said it is a replica (READONLY), and whether an
 * RL.CHECK's CLUSTERDOWN was asked about (RN_PROBE). */
typedef struct hop {
    unsigned idx;
    int flags;                /* RN_ASKING, RN_DECLARED, RN_PROBE      */
    int replica, probed;
} hop;

/* What a failed attempt's answer means for the next (blocking route() and
 * settle_op(), through follow(), and started attempt_done() follow the
 * same rules):
 *   HOP_GO     h says where, now;
 *   HOP_AGAIN  the same call a moment later, a try spent (TRYAGAIN);
 *   HOP_WAIT   the same call a moment later, no try spent: the node a
 *              redirect named is being opened, or the map does not yet
 *              name the slot's master (a wait, not a hop);
 *   HOP_FAIL   the check fails (the failure modes decide). */
enum { HOP_GO, HOP_AGAIN, HOP_WAIT, HOP_FAIL };

static int next_hop(cluster_store *c, unsigned slot, hop *h,
                    const rnode_reply *why)
{
    int to;

    atomic_store(&c->want, 1); /* any of these: the map may be stale */
    switch (why->status) {
    case RN_MOVED:
    case RN_ASK:
        if ((to = cmap_find_node(c, why->addr)) < 0)
            return HOP_FAIL; /* a new node: the refresh learns it */
        if (!node_at(c, (unsigned)to)) { /* known, not open yet */
            want_open(c, to);
            return HOP_WAIT;
        }
        h->flags = why->status == RN_ASK ? RN_ASKING | RN_DECLARED : 0;
        if (!h->flags) /* the full map is asked for too: move on now */
            atomic_store_explicit(&c->owner[slot], (uint16_t)to,
                                  memory_order_relaxed);
        h->idx = (unsigned)to;
        h->replica = 0;
        return HOP_GO;
    case RN_REPLICA:
    case RN_ELSEWHERE: /* a batch call: ask again, keys declared */
        h->flags = (h->flags & ~RN_PROBE) | RN_DECLARED;
        h->replica = why->status == RN_REPLICA;
        return HOP_GO;
    case RN_TRYAGAIN:
        atomic_fetch_add(&c->tryagain, 1);
        return HOP_AGAIN;
    case RN_DOWN:
        if (!h->replica && why->module && !h->probed) {
            /* RL.CHECK declares its keys, so a master turning replica
             * (a planned failover) answers CLUSTERDOWN at once where the
             * script's shared call meets READONLY: ask through that */
            h->probed = 1;
            h->flags = RN_PROBE;
            return HOP_GO;
        }
        if (!h->replica) { /* a master's verdict */
            atomic_fetch_add(&c->clusterdown, 1);
            return HOP_FAIL;
        }
        /* a replica's: to the slot's master once the map names it */
        to = atomic_load_explicit(&c->owner[slot], memory_order_relaxed);
        if (to == (int)h->idx || to >= atomic_load(&c->nnodes))
            return HOP_WAIT;
        if (!node_at(c, (unsigned)to)) {
            want_open(c, to);
            return HOP_WAIT;
        }
        h->idx = (unsigned)to;
        h->flags = h->replica = 0;
        return HOP_GO;
    default: /* timeout, error, breaker open: maybe a failover */
        return HOP_FAIL;
    }
}

/* A blocking caller's next_hop(): 1 to try again (h says where; a
 * redirect or a TRYAGAIN spends one of *tries, a wait none, and both
 * waits and TRYAGAIN pause a moment first), 0 when the call fails. */
static int follow(cluster_store *c, unsigned slot, hop *h,
                  const rnode_reply *why, int *tries, int64_t deadline_ns)
{
    switch (next_hop(c, slot, h, why)) {
    case HOP_GO:
        ++*tries;
        return 1;
    case HOP_AGAIN:
        ++*tries;
        /* fall through */
    case HOP_WAIT:
        pause_until(deadline_ns);
        return 1;
    default:
        return 0;
    }
}

/* Decide one slot's ops, following redirects.  RL_OK with *where the node
 * that charged them, or RL_ESTORE. */
static int route(cluster_store *c, unsigned slot, const store_op *ops,
                 size_t n, algo_decision *out, int64_t *now_ms,
                 int64_t deadline_ns, rnode **where)
{
    hop h = {.idx = atomic_load_explicit(&c->owner[slot],
                                         memory_order_relaxed)};

    for (int t = 0; t < TRIES && mono_ns() < deadline_ns;) {
        rnode *nd = node_at(c, h.idx);
        rnode_reply why = {0};
        if (!nd)
            break;
        if (rnode_check(nd, ops, n, out, now_ms, deadline_ns, h.flags,
                        &why) == RL_OK) {
            *where = nd;
            return RL_OK;
        }
        if (!follow(c, slot, &h, &why, &t, deadline_ns))
            return RL_ESTORE;
    }
    atomic_store(&c->want, 1);
    return RL_ESTORE;
}

/* ops grouped by slot: group g is ops idx[g][0..size[g]). */
typedef struct groups {
    int n;
    unsigned slot[RL_OPS_MAX];
    int size[RL_OPS_MAX];
    int idx[RL_OPS_MAX][RL_OPS_MAX];
} groups;

static void group(const cluster_store *c, const store_op *ops, size_t n,
                  groups *g)
{
    g->n = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned s = redis_key_slot(&ops[i], c->nopts.io.compact);
        int j;
        for (j = 0; j < g->n && g->slot[j] != s; j++)
            ;
        if (j == g->n) {
            g->slot[j] = s;
            g->size[g->n++] = 0;
        }
        g->idx[j][g->size[j]++] = (int)i;
    }
}

/* One request: its ops by slot, each slot's group routed; refunds when a
 * group denies or fails. */
static int check_until(cluster_store *c, const store_op *ops, size_t n,
                       algo_decision *out, int64_t *now_ms, int64_t deadline)
{
    int64_t now[RL_OPS_MAX];
    store_op sub[RL_OPS_MAX];
    algo_decision d[RL_OPS_MAX][RL_OPS_MAX];
    rnode *where[RL_OPS_MAX];
    int done = 0, failed = 0, denied = 0;
    groups g;

    group(c, ops, n, &g);
    if (g.n == 1) /* one slot: nothing to copy, nothing to refund */
        return route(c, g.slot[0], ops, n, out, now_ms, deadline, &where[0]);
    for (; done < g.n && !failed; done++) {
        for (int i = 0; i < g.size[done]; i++)
            sub[i] = ops[g.idx[done][i]];
        failed = route(c, g.slot[done], sub, (size_t)g.size[done], d[done],
                       &now[done], deadline, &where[done]) != RL_OK;
        for (int i = 0; !failed && i < g.size[done]; i++) {
            out[g.idx[done][i]] = d[done][i];
            denied |= !d[done][i].allowed && !sub[i].soft;
        }
    }
    if (failed)
        done--;
    if (failed || denied) { /* give back what the passing groups took */
        for (int k = 0; k < done; k++) {
            int any = 0;
            for (int i = 0; i < g.size[k]; i++) {
                sub[i] = ops[g.idx[k][i]];
                any |= d[k][i].allowed && d[k][i].changed;
            }
            if (any && rnode_refund(where[k], sub, (size_t)g.size[k], d[k],
                                    now[k]))
                atomic_fetch_add(&c->refunds, 1);
        }
        for (size_t i = 0; i < n; i++)
            out[i].changed = 0;
    }
    *now_ms = now[0];
    return failed ? RL_ESTORE : RL_OK;
}

static int cluster_check(rl_store *s, const store_op *ops, size_t n,
                         algo_decision *out, int64_t *now_ms)
{
    cluster_store *c = (cluster_store *)s;

    return check_until(c, ops, n, out, now_ms,
                       mono_ns() + c->timeout_ms * 1000000);
}

/* The slot of a request whose ops all share one, or -1. */
static int one_slot(const cluster_store *c, const store_req *q)
{
    unsigned s = redis_key_slot(&q->ops[0], c->nopts.io.compact);

    for (size_t i = 1; i < q->n; i++)
        if (redis_key_slot(&q->ops[i], c->nopts.io.compact) != s)
            return -1;
    return (int)s;
}

/* Many requests: those of one slot are queued on the master the slot map
 * names, all of one master together (one batch call each, masters one
 * after another); what comes back not served there (a stale map), and the
 * requests over several slots, are routed one by one as check() would,
 * within the same deadline.  A request that failed (timeout, down, breaker
 * open) is not tried again. */
static int cluster_check_many(rl_store *s, store_req *reqs, size_t n)
{
    cluster_store *c = (cluster_store *)s;
    int64_t deadline = mono_ns() + c->timeout_ms * 1000000;
    int slot[STORE_MANY_MAX], retry[STORE_MANY_MAX];
    unsigned owner[STORE_MANY_MAX];

    for (size_t i = 0; i < n; i++) {
        slot[i] = one_slot(c, &reqs[i]);
        owner[i] = slot[i] < 0 ? UINT_MAX
                   : atomic_load_explicit(&c->owner[slot[i]],
                                          memory_order_relaxed);
        retry[i] = slot[i] < 0 || !node_at(c, owner[i]);
    }
    for (size_t i = 0; i < n; i++) {
        store_req sub[STORE_MANY_MAX];
        rnode_reply why[STORE_MANY_MAX];
        size_t at[STORE_MANY_MAX], m = 0;

        if (retry[i] || owner[i] == UINT_MAX - 1)
            continue;
        for (size_t j = i; j < n; j++) /* every request of this master */
            if (!retry[j] && owner[j] == owner[i]) {
                sub[m] = reqs[j];
                at[m++] = j;
            }
        rnode_check_many(node_at(c, owner[i]), sub, m, deadline, why);
        for (size_t k = 0; k < m; k++) {
            reqs[at[k]].rc = sub[k].rc;
            reqs[at[k]].now_ms = sub[k].now_ms;
            owner[at[k]] = UINT_MAX - 1; /* decided here, or below */
            if (sub[k].rc == RL_OK)
                continue;
            atomic_store(&c->want, 1);
            /* an RL.CHECK's CLUSTERDOWN: check_until() asks (RN_PROBE) */
            retry[at[k]] = why[k].status >= RN_MOVED &&
                           (why[k].status != RN_DOWN || why[k].module);
            if (why[k].status == RN_DOWN && !retry[at[k]])
                atomic_fetch_add(&c->clusterdown, 1);
        }
    }
    for (size_t i = 0; i < n; i++)
        if (retry[i])
            reqs[i].rc = check_until(c, reqs[i].ops, reqs[i].n, reqs[i].out,
                                     &reqs[i].now_ms, deadline);
    return RL_OK;
}

/* ---- started requests ------------------------------------------------ */

/* A request started without waiting: check_until() as a chain of
 * completions, each in the I/O thread of the node that answered.  Its
 * groups go one after another (each routed, redirects followed within
 * the deadline; TRYAGAIN goes again a moment later, held by the node's
 * loop, not slept on); then, if one denied or failed, the groups that
 * charged are refunded, as check_until() does. */
typedef struct cl_async {
    rnode_async na;           /* the attempt in flight                 */
    cluster_store *c;
    store_async *a;
    int64_t deadline;
    int tries, g, ngroups, denied;
    hop h;                    /* where the current group goes next    */
    unsigned slot[RL_OPS_MAX];
    unsigned char grp[RL_OPS_MAX];
    store_op sub[RL_OPS_MAX];
    algo_decision d[RL_OPS_MAX];
    size_t nsub;
    rnode *where[RL_OPS_MAX];
    int64_t now[RL_OPS_MAX];
} cl_async;

_Static_assert(sizeof(cl_async) <= STORE_ASYNC_SPACE,
               "a started cluster request fits its store_async");

static void attempt(cl_async *x, int64_t not_before);

/* Give back what groups [0, upto) charged; nothing stays changed. */
static void refund_groups(cl_async *x, int upto)
{
    const store_req *q = &x->a->q;

    for (int k = 0; k < upto; k++) {
        size_t m = 0;
        int any = 0;
        for (size_t i = 0; i < q->n; i++)
            if (x->grp[i] == k) {
                x->sub[m] = q->ops[i];
                x->d[m] = q->out[i];
                any |= x->d[m].allowed && x->d[m].changed;
                m++;
            }
        if (any && rnode_refund(x->where[k], x->sub, m, x->d, x->now[k]))
            atomic_fetch_add(&x->c->refunds, 1);
    }
    for (size_t i = 0; i < q->n; i++)
        q->out[i].changed = 0;
}

static void finish(cl_async *x, int rc)
{
    store_async *a = x->a;

    if (rc != RL_OK)
        refund_groups(x, x->g);
    else if (x->denied && x->ngroups > 1)
        refund_groups(x, x->ngroups);
    a->q.rc = rc;
    a->q.now_ms = x->now[0];
    a->done(a);
}

static void start_group(cl_async *x)
{
    const store_req *q = &x->a->q;

    x->nsub = 0;
    for (size_t i = 0; i < q->n; i++)
        if (x->grp[i] == x->g)
            x->sub[x->nsub++] = q->ops[i];
    x->tries = 0;
    x->h = (hop){.idx = atomic_load_explicit(&x->c->owner[x->slot[x->g]],
                                             memory_order_relaxed)};
    attempt(x, 0);
}

/* The group was decided (on node nd at now_ms). */
static void group_done(cl_async *x, rnode *nd, int64_t now_ms)
{
    store_req *q = &x->a->q;
    size_t m = 0;

    x->where[x->g] = nd;
    x->now[x->g] = now_ms;
    for (size_t i = 0; i < q->n; i++)
        if (x->grp[i] == x->g) {
            q->out[i] = x->d[m];
            x->denied |= !x->d[m].allowed && !q->ops[i].soft;
            m++;
        }
    if (++x->g < x->ngroups)
        start_group(x);
    else
        finish(x, RL_OK);
}

/* An attempt's answer, in the answering node's I/O thread (or at once
 * when nothing could be sent): route() as a completion; a wait is the
 * same call again a moment later, held by the node's loop. */
static void attempt_done(rnode_async *na)
{
    cl_async *x = na->arg;

    if (na->job.rc == RL_OK) {
        group_done(x, na->node, na->job.now_ms);
        return;
    }
    switch (next_hop(x->c, x->slot[x->g], &x->h, &na->job.why)) {
    case HOP_GO: /* x->h says where */
        attempt(x, 0);
        return;
    case HOP_WAIT:
        x->tries--;
        /* fall through */
    case HOP_AGAIN:
        attempt(x, clock_mono_ns() + 1000000);
        return;
    default:
        finish(x, RL_ESTORE);
    }
}

static void attempt(cl_async *x, int64_t not_before)
{
    rnode *nd = node_at(x->c, x->h.idx);

    if (!nd || x->tries++ == TRIES || clock_mono_ns() >= x->deadline) {
        atomic_store(&x->c->want, 1);
        finish(x, RL_ESTORE);
        return;
    }
    x->na = (rnode_async){.job = {.kind = RIO_CHECK, .ops = x->sub,
                                  .n = x->nsub, .out = x->d,
                                  .flags = x->h.flags,
                                  .deadline_ns = x->deadline,
                                  .not_before_ns = not_before},
                          .done = attempt_done, .arg = x};
    rnode_start(nd, &x->na);
}

static void cluster_start(rl_store *s, store_async *a)
{
    cluster_store *c = (cluster_store *)s;
    cl_async *x = (cl_async *)(void *)a->space;
    groups g;

    group(c, a->q.ops, a->q.n, &g);
    *x = (cl_async){.c = c, .a = a, .ngroups = g.n,
                    .deadline = clock_mono_ns() + c->timeout_ms * 1000000};
    for (int k = 0; k < g.n; k++) {
        x->slot[k] = g.slot[k];
        for (int i = 0; i < g.size[k]; i++)
            x->grp[g.idx[k][i]] = (unsigned char)k;
    }
    start_group(x);
}

/* ---- lifecycle -------------------------------------------------------- */

static void cluster_free(rl_store *s)
{
    cluster_store *c = (cluster_store *)s;

    fleet_stop(&c->fl);
    if (c->started) {
        pthread_mutex_lock(&c->mu);
        c->stop = 1;
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->th, NULL);
    }
    for (int i = 0; i < atomic_load(&c->nnodes); i++)
        rnode_close(atomic_load(&c->nodes[i].node));
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    SSL_CTX_free(c->nopts.io.tls); /* each node's I/O held its own */
    free(c);
}

/* The worst state among the breakers of the masters that own slots now (a
 * dead master's stays open, but once its slots moved it decides nothing);
 * opens and closes summed over every node. */
static int cluster_breaker(rl_store *s, int64_t *opens, int64_t *closes)
{
    cluster_store *c = (cluster_store *)s;
    static const int rank[] = {0, 2, 1}; /* closed, open, half-open */
    unsigned char owns[MAX_NODES] = {0};
    int worst = BREAKER_CLOSED;

    for (int k = 0; k < NSLOTS; k++) {
        unsigned i = atomic_load_explicit(&c->owner[k], memory_order_relaxed);
        if (i < MAX_NODES)
            owns[i] = 1;
    }
    *opens = *closes = 0;
    for (int i = 0; i < atomic_load(&c->nnodes); i++) {
        rnode *nd = atomic_load(&c->nodes[i].node);
        if (!nd)
            continue;
        breaker *b = rnode_breaker(nd);
        int st = atomic_load(&b->state);
        *opens += atomic_load(&b->opens);
        *closes += atomic_load(&b->closes);
        if (owns[i] && rank[st] > rank[worst])
            worst = st;
    }
    return worst;
}

static void cluster_set_clock(rl_store *s, rl_clock_fn fn, void *arg)
{
    cluster_store *c = (cluster_store *)s;

    c->clock.fn = fn;
    c->clock.arg = arg;
}

static void cluster_io_stats(rl_store *s, rnode_stats *st)
{
    cluster_store *c = (cluster_store *)s;

    for (int i = 0; i < atomic_load(&c->nnodes); i++) {
        rnode *nd = atomic_load(&c->nodes[i].node);
        if (nd)
            rnode_stats_add(nd, st);
    }
    st->refunds = atomic_load(&c->refunds);
    st->refreshes = atomic_load(&c->refreshes);
    st->tryagain = atomic_load(&c->tryagain);
    st->clusterdown = atomic_load(&c->clusterdown);
}

/* Metrics: the masters that own slots now, each a shard. */
static size_t cluster_shards(rl_store *s, store_shard *out, size_t max)
{
    cluster_store *c = (cluster_store *)s;
    unsigned char owns[MAX_NODES] = {0};
    size_t n = 0;

    for (int k = 0; k < NSLOTS; k++) {
        unsigned i = atomic_load_explicit(&c->owner[k], memory_order_relaxed);
        if (i < MAX_NODES)
            owns[i] = 1;
    }
    for (int i = 0; i < atomic_load(&c->nnodes); i++) {
        rnode *nd = atomic_load(&c->nodes[i].node);
        if (nd && owns[i] && n++ < max)
            store_redis_shard(nd, c->nodes[i].addr, &out[n - 1]);
    }
    return n;
}

/* ---- settling a reservation ------------------------------------------- */

/* Settle op i of ss on the master of its slot (its state and its marker
 * share the slot), following redirects by route()'s rules (next_hop()),
 * within the store's timeout; *settled grows by what it settled.  The
 * settle call always declares its keys, so a replica redirects it (MOVED)
 * rather than refusing it. */
static int settle_op(cluster_store *c, const store_settle *ss, size_t i,
                     int64_t deadline_ns, size_t *settled)
{
    unsigned slot = redis_key_slot(&ss->ops[i], c->nopts.io.compact);
    hop h = {.idx = atomic_load_explicit(&c->owner[slot],
                                         memory_order_relaxed)};

    for (int t = 0; t < TRIES && mono_ns() < deadline_ns;) {
        rnode *nd = node_at(c, h.idx);
        int64_t left = (deadline_ns - mono_ns()) / 1000000;
        rnode_reply why = {0};
        size_t k = 0;
        if (!nd)
            break;
        if (rnode_settle(nd, ss, i, 1, (h.flags & RN_ASKING) != 0,
                         left > 0 ? left : 1, &k, &why) == RL_OK) {
            *settled += k;
            return RL_OK;
        }
        if (!follow(c, slot, &h, &why, &t, deadline_ns))
            return RL_ESTORE;
    }
    atomic_store(&c->want, 1);
    return RL_ESTORE;
}

/* Each op in its own slot's call: a reservation's rules may lie in many
 * slots, and each is settled at most once on its own. */
static int cluster_settle(rl_store *s, const store_settle *ss,
                          size_t *settled)
{
    cluster_store *c = (cluster_store *)s;
    int64_t deadline_ns = mono_ns() + c->timeout_ms * 1000000;
    int rc = RL_OK;

    *settled = 0;
    for (size_t i = 0; i < ss->n; i++)
        if (settle_op(c, ss, i, deadline_ns, settled) != RL_OK)
            rc = RL_ESTORE;
    return rc;
}

static const store_vtable cluster_vtable = {
    .name = "redis-cluster",
    .check = cluster_check,
    .free = cluster_free,
    .breaker = cluster_breaker,
    .check_many = cluster_check_many,
    .start = cluster_start,
    .set_clock = cluster_set_clock,
    .io_stats = cluster_io_stats,
    .shards = cluster_shards,
    .settle = cluster_settle,
};

/* The fleet's key lives where its slot does. */
static rio *fleet_io(void *arg)
{
    cluster_store *c = arg;
    rnode *nd = node_at(c, atomic_load(&c->owner[key_slot(
                                c->fl.key, strlen(c->fl.key))]));

    return nd ? rnode_io(nd) : NULL;
}

int store_cluster_new(const char *uri, const store_options *opt,
                      rl_store **out, char *err, size_t errlen)
{
    cluster_store *c = calloc(1, sizeof *c);
    char why[300], shown[128];
    int rc, down = 0;

    *out = NULL;
    if (!c)
        return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
    c->base.vt = &cluster_vtable;
    c->timeout_ms = opt->timeout_ms;
    store_redis_node_opts(&c->nopts, opt, &c->clock);
    c->nopts.io.per_call = 1;
    c->last_good = -1;
    for (int i = 0; i < NSLOTS; i++)
        atomic_init(&c->owner[i], NO_NODE);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    redis_uri_redact(uri, shown, sizeof shown);
    if (redis_uri_parse_cluster(uri, c->seeds, MAX_SEEDS, &c->nseeds, why,
                                sizeof why) != 0) {
        cluster_free(&c->base);
        return snprintf(err, errlen, "store \"%s\": %s", shown, why),
               RL_ESTORE;
    }
    c->nopts.io.uri = c->seeds[0]; /* credentials; host set per node */
    if (store_redis_tls(&c->seeds[0], opt, &c->nopts.io.tls, why,
                        sizeof why) != 0) {
        cluster_free(&c->base);
        return snprintf(err, errlen, "store \"%s\": %s", shown, why),
               RL_ESTORE;
    }
    /* every seed that answers is a cluster node, wherever it stands */
    rc = cluster_check_seeds(c->seeds, c->nseeds, c->nopts.io.tls,
                             c->nopts.io.connect_timeout_ms, why, sizeof why);
    if (rc == 0)
        rc = cmap_refresh(c, 0, &down, why, sizeof why);
    if (rc == -2 || ((rc != 0 || down) && !opt->degraded_start)) {
        cluster_free(&c->base);
        return snprintf(err, errlen, "store \"%s\": %s%s", shown,
                        rc == -1 ? "no seed answered; last: " : "", why),
               RL_ESTORE;
    }
    if (pthread_create(&c->th, NULL, cmap_refresher, c) != 0) {
        cluster_free(&c->base);
        return snprintf(err, errlen, "cannot start the slot map thread"),
               RL_ESTORE;
    }
    c->started = 1;
    if (opt->fleet_name && fleet_start(&c->fl, fleet_io, c, opt->fleet_name,
                                       opt->fleet_size, 1000) != 0) {
        cluster_free(&c->base);
        return snprintf(err, errlen, "cannot start the fleet heartbeat"),
               RL_ESTORE;
    }
    *out = &c->base;
    return RL_OK;
}

int store_cluster_masters(rl_store *s, char *buf, size_t len)
{
    cluster_store *c = (cluster_store *)s;
    size_t off = 0;
    int n = 0;

    if (len)
        buf[0] = 0;
    for (int i = 0; i < atomic_load(&c->nnodes); i++) {
        int owns = 0;
        for (int k = 0; k < NSLOTS && !owns; k++)
            owns = atomic_load(&c->owner[k]) == i;
        if (owns && off < len) {
            off += (size_t)snprintf(buf + off, len - off, "%s\n",
                                    c->nodes[i].addr);
            n++;
        }
    }
    return n;
}
