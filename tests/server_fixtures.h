/*
 * server_fixtures.h -- Check fixtures of the suites that run the same
 * tests against a fresh redis-server (and some against a Redis Cluster):
 * srv_up/srv_down start and stop `srv`, its URI in `uri`;
 * cluster_up/cluster_down a cluster of 3 masters, `cl`, its URI in
 * `curi`.  A suite uses the pair it needs (inline: the other costs
 * nothing).
 */
#ifndef RL_SERVER_FIXTURES_H
#define RL_SERVER_FIXTURES_H

#include <check.h>

#include "redis_harness.h"

static rh_server srv;
static char uri[256];
static rh_cluster cl;
static char curi[1024];

static inline void srv_up(void)
{
    ck_assert_int_eq(rh_start(&srv, NULL), 0);
    rh_uri(&srv, uri, sizeof uri);
}

static inline void srv_down(void)
{
    rh_stop(&srv);
}

static inline void cluster_up(void)
{
    ck_assert_msg(rh_cluster_start(&cl, 3, 0, 2000) == 0,
                  "rh_cluster_start: see stderr");
    ck_assert_ptr_nonnull(rh_cluster_uri(&cl, 0, curi, sizeof curi));
}

static inline void cluster_down(void)
{
    rh_cluster_stop(&cl);
}

#endif
