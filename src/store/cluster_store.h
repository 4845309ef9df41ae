/*
 * cluster_store.h -- the Redis Cluster store's state, shared by its two
 * files: store_cluster.c (the request path, started requests, lifecycle)
 * and cluster_map.c (the node table, the slot map and the thread that
 * keeps it).  Internal to the library; see store_cluster.c for the design.
 */
#ifndef RL_CLUSTER_STORE_H
#define RL_CLUSTER_STORE_H

#include "clock.h"
#include "cluster_reply.h"
#include "fleet.h"
#include "redis_node.h"
#include "store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define NSLOTS CLUSTER_NSLOTS
#define MAX_NODES 128
#define MAX_SEEDS 16
#define NO_NODE 0xffff
#define REFRESH_MS 1000       /* the map's age at most, all being well */
#define TICK_MS 50            /* how soon an asked-for refresh starts  */
#define TRIES 5               /* redirects followed per check          */
#define REFRESH_ASK_MS 100    /* a refresh's first wait on each node   */

typedef struct cnode {
    char addr[64];            /* "host:port", as the cluster names it  */
    _Atomic(rnode *) node;    /* masters: opened when first a master   */
    _Atomic int wanted;       /* a redirect named it: open it now      */
} cnode;

typedef struct cluster_store {
    rl_store base;
    int64_t timeout_ms;
    rnode_opts nopts;         /* every node's, but the address         */
    redis_uri seeds[MAX_SEEDS];
    int nseeds;
    rl_clock clock;
    cnode nodes[MAX_NODES];
    _Atomic int nnodes;
    _Atomic uint16_t owner[NSLOTS];
    /* the refresh thread */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, started;
    _Atomic int want;         /* the request path asks for a refresh   */
    int last_good;            /* the node that answered last, or -1    */
    unsigned char strikes[MAX_NODES]; /* refreshes it failed, in a row */
    _Atomic int64_t refreshes, refunds, tryagain, clusterdown;
    fleet fl;
} cluster_store;

static inline int64_t mono_ns(void)
{
    return clock_mono_ns();
}

/* The index of node addr ("host:port") in the table, or -1. */
int cmap_find_node(cluster_store *c, const char *addr);

/* Read the map from the first node that answers: with `quick`, fast ones
 * first (a round with REFRESH_ASK_MS per node), then, if none did, a round
 * with connect_timeout_ms; the first read, at start, is that second round
 * alone.  0; -1 no node answered; -2 a node is not a cluster node (err
 * says so).  *down: the cluster says it is not ok.  Refresh thread, or
 * before it starts. */
int cmap_refresh(cluster_store *c, int quick, int *down, char *err,
                 size_t errlen);

/* The refresh thread (pthread_create's start routine; arg: the store). */
void *cmap_refresher(void *arg);

#endif
