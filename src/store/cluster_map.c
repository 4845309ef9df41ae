/*
 * cluster_map.c -- the Redis Cluster store's node table and slot map, and
 * the thread that keeps them (store_cluster.c has the design).  Only the
 * refresh thread (and the store's start, before it runs) writes them;
 * the request path reads them without a lock: a node entry is published
 * by the atomic count nnodes, a node handle by an atomic pointer, a slot's
 * owner by an atomic store.  A refresh asks the node that answered last
 * first, then the others by refreshes failed in a row, then the seeds,
 * each with a short deadline first (REFRESH_ASK_MS), so a hung node costs
 * one refresh one short wait.
 */
#include "cluster_store.h"
#include "cluster_control.h"
#include "redis_link.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the node table -------------------------------------------------- */

int cmap_find_node(cluster_store *c, const char *addr)
{
    int n = atomic_load(&c->nnodes);

    for (int i = 0; i < n; i++)
        if (strcmp(c->nodes[i].addr, addr) == 0)
            return i;
    return -1;
}

/* Refresh thread only: the index of addr, added if new; with master set,
 * its node is opened (connecting here, never on the request path). */
static int ensure_node(cluster_store *c, const char *host, int port,
                       int master)
{
    char addr[64], why[200];
    int i;

    snprintf(addr, sizeof addr, "%s:%d", host, port);
    if ((i = cmap_find_node(c, addr)) < 0) {
        i = atomic_load(&c->nnodes);
        if (i == MAX_NODES)
            return -1;
        snprintf(c->nodes[i].addr, sizeof c->nodes[i].addr, "%s", addr);
        atomic_store(&c->nodes[i].node, NULL);
        atomic_store(&c->nodes[i].wanted, 0);
        atomic_store(&c->nnodes, i + 1); /* publishes the entry */
    }
    if (master && !atomic_load(&c->nodes[i].node)) {
        rnode_opts o = c->nopts;
        rnode *n;
        snprintf(o.io.uri.host, sizeof o.io.uri.host, "%s", host);
        o.io.uri.port = port;
        o.io.uri.is_unix = 0;
        o.io.uri.db = 0;
        /* Connect now, so checks find the lanes up; a master that does
         * not answer gets lanes that keep trying in the background. */
        o.io.degraded = 0;
        if (rnode_open(&n, &o, why, sizeof why) != RL_OK) {
            o.io.degraded = 1;
            if (rnode_open(&n, &o, why, sizeof why) != RL_OK)
                return -1;
        }
        atomic_store(&c->nodes[i].node, n);
    }
    return i;
}

/* ---- the slot map ---------------------------------------------------- */

/* One range of the map: its master (opened if new), its replicas (known),
 * its slots.  Refresh thread only. */
static int apply_range(const cluster_range *rg, void *arg)
{
    cluster_store *c = arg;
    int m = ensure_node(c, rg->master.host, rg->master.port, 1);

    if (m < 0)
        return -1;
    for (int k = 0; k < rg->nreplicas; k++)
        ensure_node(c, rg->replica[k].host, rg->replica[k].port, 0);
    for (int s = rg->lo; s <= rg->hi; s++)
        atomic_store_explicit(&c->owner[s], (uint16_t)m,
                              memory_order_relaxed);
    return 0;
}

/* Ask one node for the map.  0 applied (*down: the cluster says it is not
 * ok), -1 no answer, -2 not a cluster node (err says so). */
static int refresh_from(cluster_store *c, const char *host, int port,
                        int64_t ms, int *down, char *err, size_t errlen)
{
    rlink l;
    redisReply *r;
    int rc = -1, covered;

    if (cluster_control(&l, &c->seeds[0], c->nopts.io.tls, host, port, ms,
                        NULL, err, errlen) != 0)
        return -1;
    r = rlink_command(&l, "CLUSTER SLOTS");
    if (!r) {
        snprintf(err, errlen, "%s:%d: CLUSTER SLOTS: %s", host, port,
                 l.errstr);
    } else if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "%s:%d is not a Redis Cluster node (%s); "
                 "use redis:// for a single server", host, port, r->str);
        rc = strstr(r->str, "cluster support disabled") ? -2 : -1;
    } else if ((covered = cluster_slots_parse(r, host, apply_range, c)) < 0) {
        snprintf(err, errlen, "%s:%d: CLUSTER SLOTS: unexpected reply",
                 host, port);
    } else {
        *down = covered < NSLOTS || cluster_state_ok(&l) == 0;
        if (*down)
            snprintf(err, errlen, "%s:%d: the cluster is down (%d of "
                     "16384 slots served%s)", host, port, covered,
                     covered == NSLOTS ? ", cluster_state:fail" : "");
        rc = 0;
    }
    if (r)
        freeReplyObject(r);
    rlink_close(&l);
    return rc;
}

/* Known nodes in the order a refresh asks them: the one that answered
 * last, then by refreshes failed in a row, masters before replicas. */
static int ask_order(const cluster_store *c, int *order)
{
    int n = atomic_load(&c->nnodes);

    for (int i = 0; i < n; i++) {
        int key = (i != c->last_good) * 1024 + c->strikes[i] * 2 +
                  (atomic_load(&c->nodes[i].node) == NULL), j = i;
        for (; j > 0; j--) { /* insertion sort, stable */
            int p = order[j - 1];
            int pk = (p != c->last_good) * 1024 + c->strikes[p] * 2 +
                     (atomic_load(&c->nodes[p].node) == NULL);
            if (pk <= key)
                break;
            order[j] = p;
        }
        order[j] = i;
    }
    return n;
}

/* Ask the known nodes (ask_order), then the seeds, each for at most ms.
 * 0, or -1 / -2 as refresh_from. */
static int refresh_round(cluster_store *c, int64_t ms, int *down, char *err,
                         size_t errlen)
{
    int order[MAX_NODES], n = ask_order(c, order), rc = -1;

    for (int k = 0; k < n; k++) {
        int i = order[k];
        char host[64], *colon;
        snprintf(host, sizeof host, "%s", c->nodes[i].addr);
        if (!(colon = strrchr(host, ':')))
            continue;
        *colon = 0;
        if ((rc = refresh_from(c, host, atoi(colon + 1), ms, down, err,
                               errlen)) == 0) {
            c->strikes[i] = 0;
            c->last_good = i;
            return 0;
        }
        if (c->strikes[i] < 255)
            c->strikes[i]++;
        if (c->last_good == i)
            c->last_good = -1;
    }
    for (int i = 0; i < c->nseeds; i++)
        if ((rc = refresh_from(c, c->seeds[i].host, c->seeds[i].port, ms,
                               down, err, errlen)) == 0 || rc == -2)
            return rc;
    return rc;
}

int cmap_refresh(cluster_store *c, int quick, int *down, char *err,
                 size_t errlen)
{
    int64_t slow = c->nopts.io.connect_timeout_ms;
    int64_t fast = slow < REFRESH_ASK_MS ? slow : REFRESH_ASK_MS;
    int rc = -1;

    *down = 0;
    if (quick)
        rc = refresh_round(c, fast, down, err, errlen);
    if (rc == -1)
        rc = refresh_round(c, slow, down, err, errlen);
    atomic_fetch_add(&c->refreshes, 1);
    return rc;
}

/* Open the nodes a redirect named that are not open yet (a replica just
 * promoted), before the map says so.  Refresh thread only. */
static void open_wanted(cluster_store *c)
{
    for (int i = 0; i < atomic_load(&c->nnodes); i++) {
        char host[64], *colon;
        if (!atomic_exchange(&c->nodes[i].wanted, 0))
            continue;
        snprintf(host, sizeof host, "%s", c->nodes[i].addr);
        if ((colon = strrchr(host, ':'))) {
            *colon = 0;
            ensure_node(c, host, atoi(colon + 1), 1);
        }
    }
}

void *cmap_refresher(void *arg)
{
    cluster_store *c = arg;
    int64_t last = mono_ns();
    char err[256];

    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        struct timespec until;
        int64_t now = mono_ns();
        int down;
        if (atomic_exchange(&c->want, 0) ||
            now - last >= (int64_t)REFRESH_MS * 1000000) {
            pthread_mutex_unlock(&c->mu);
            open_wanted(c);
            cmap_refresh(c, 1, &down, err, sizeof err);
            pthread_mutex_lock(&c->mu);
            last = mono_ns();
        }
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += TICK_MS * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        if (!c->stop)
            pthread_cond_timedwait(&c->cv, &c->mu, &until);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}
