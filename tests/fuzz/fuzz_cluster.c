/*
 * fuzz_cluster.c -- what a Redis Cluster node answers (src/redis/cluster_reply.c):
 * arbitrary bytes go through hiredis's RESP reader, and every reply is read
 * as a CLUSTER SLOTS answer and, if it is an error, as a redirect.  A
 * range that comes out must be usable as is: slots in range, a host, a
 * port; a redirect a slot and a host:port.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_reply.h"
#include "fuzz.h"
#include "fuzz_resp.h"

static int check_range(const cluster_range *rg, void *arg)
{
    int *slots = arg;

    FUZZ_CHECK(rg->lo >= 0 && rg->lo <= rg->hi && rg->hi < CLUSTER_NSLOTS);
    FUZZ_CHECK(rg->master.host[0] && rg->master.port >= 1 &&
               rg->master.port <= 65535);
    FUZZ_CHECK(rg->nreplicas >= 0 && rg->nreplicas <= CLUSTER_REPLICAS_MAX);
    for (int k = 0; k < rg->nreplicas; k++)
        FUZZ_CHECK(rg->replica[k].host[0] && rg->replica[k].port >= 1);
    *slots += rg->hi - rg->lo + 1;
    return 0;
}

static void parse_one(const redisReply *r, void *arg)
{
    int slots = 0, covered = cluster_slots_parse(r, "127.0.0.1", check_range,
                                                 &slots);

    (void)arg;
    FUZZ_CHECK(covered >= -1 && covered <= CLUSTER_NSLOTS);
    FUZZ_CHECK(covered < 0 ? slots == 0 : slots >= covered);
    if (r->type == REDIS_REPLY_ERROR) {
        char addr[64];
        int slot = -1, kind = cluster_redirect_parse(r->str, r->len, &slot,
                                                     addr, sizeof addr);
        FUZZ_CHECK(kind == 0 || kind == 'M' || kind == 'A');
        if (kind)
            FUZZ_CHECK(slot >= 0 && slot < CLUSTER_NSLOTS &&
                       strchr(addr, ':') && !strchr(addr, ' '));
    }
}

int fuzz_cluster(const uint8_t *data, size_t size)
{
    fuzz_resp_each(data, size, parse_one, NULL);
    return 0;
}

#ifdef FUZZ_TARGET_cluster
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_cluster(data, size);
}
#endif
