/*
 * cluster_reply.h -- what a Redis Cluster node answers that the store must
 * read: the slot map (CLUSTER SLOTS) and redirects (-MOVED, -ASK).  Both
 * are outside input, so every field is checked, and a malformed answer
 * changes nothing (tests/fuzz/fuzz_cluster.c feeds them garbage).
 */
#ifndef RL_CLUSTER_REPLY_H
#define RL_CLUSTER_REPLY_H

#include <hiredis/hiredis.h>
#include <stddef.h>

#define CLUSTER_NSLOTS 16384
#define CLUSTER_REPLICAS_MAX 8

typedef struct cluster_endpoint {
    char host[256];
    int port;                    /* 1..65535                          */
} cluster_endpoint;

typedef struct cluster_range {
    int lo, hi;                  /* 0 <= lo <= hi < CLUSTER_NSLOTS    */
    cluster_endpoint master;
    cluster_endpoint replica[CLUSTER_REPLICAS_MAX];
    int nreplicas;               /* those listed beyond 8 are skipped */
} cluster_range;

/*
 * Read a CLUSTER SLOTS reply; `asked` stands for an endpoint that does not
 * know its own address ("" or "?").  The whole reply is checked first; only
 * then is fn called once per range (stopping at its first nonzero return,
 * which is returned).  Returns the number of distinct slots covered (a
 * sane cluster's ranges never overlap), or -1 if the
 * reply is malformed (then fn was never called).
 */
int cluster_slots_parse(const redisReply *r, const char *asked,
                        int (*fn)(const cluster_range *rg, void *arg),
                        void *arg);

/* A redirect error, "MOVED <slot> <host:port>" or "ASK <slot> <host:port>":
 * 'M' or 'A' with the slot and address filled; 0 if it is neither or is
 * malformed. */
int cluster_redirect_parse(const char *err, size_t len, int *slot,
                           char *addr, size_t addrlen);

#endif
