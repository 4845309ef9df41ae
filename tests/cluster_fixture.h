/*
 * cluster_fixture.h -- what the suites of the Redis Cluster store share
 * (check_cluster.c: routing, resharding, restarts and starts;
 * check_cluster_failover.c: failovers timed against the cluster's own
 * timeouts): the rule set, the suite's cluster `cl` and its URI, a
 * limiter on it, the users whose keys live on a given slot or master,
 * and the counts of admissions.
 */
#ifndef RL_TESTS_CLUSTER_FIXTURE_H
#define RL_TESTS_CLUSTER_FIXTURE_H

#include <check.h>
#include <stdio.h>
#include <string.h>

#include "ratelimit.h"
#include "redis_harness.h"


#define RULES                                                                  \
    "[{\"rule_id\":\"r\",\"dimension\":\"user\",\"limit\":5,"                 \
    "\"window_seconds\":60,\"match\":{\"endpoint\":\"/one\"}},"                \
    " {\"rule_id\":\"big\",\"dimension\":\"user\",\"limit\":1000000000,"      \
    "\"window_seconds\":60,\"match\":{\"endpoint\":\"/big\"}},"                \
    " {\"rule_id\":\"pu\",\"dimension\":\"user\",\"limit\":10,"               \
    "\"window_seconds\":60,\"match\":{\"endpoint\":\"/both\"}},"               \
    " {\"rule_id\":\"pi\",\"dimension\":\"ip\",\"limit\":2,"                  \
    "\"window_seconds\":60,\"match\":{\"endpoint\":\"/both\"}},"               \
    " {\"rule_id\":\"t1\",\"dimension\":\"user\",\"limit\":100,"             \
    "\"window_seconds\":60,\"match\":{\"endpoint\":\"/two\"}},"                \
    " {\"rule_id\":\"t2\",\"dimension\":\"user\",\"limit\":100,"             \
    "\"window_seconds\":60,\"match\":{\"endpoint\":\"/two\"}}]"

static rh_cluster cl;
static char uri[1024];

static inline void up(int node_timeout_ms)
{
    ck_assert_msg(rh_cluster_start(&cl, 3, 1, node_timeout_ms) == 0,
                  "rh_cluster_start: see stderr");
    ck_assert_ptr_nonnull(rh_cluster_uri(&cl, 0, uri, sizeof uri));
}

static inline rl_limiter *open_with(const char *store, const char *n1,
                                    const char *v1, const char *n2,
                                    const char *v2)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    int rc;

    ck_assert_int_eq(rl_config_set(cfg, "store", store), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules", RULES), RL_OK);
    /* a loaded CI machine can stall a loopback reply past 5 ms */
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "500"), RL_OK);
    /* Redis's own answers (its calls and refunds, a restarted node's
     * empty state): no local deny cache (tests/check_denycache.c). */
    ck_assert_int_eq(rl_config_set(cfg, "deny_cache", "0"), RL_OK);
    if (n1)
        ck_assert_int_eq(rl_config_set(cfg, n1, v1), RL_OK);
    if (n2)
        ck_assert_int_eq(rl_config_set(cfg, n2, v2), RL_OK);
    rc = rl_limiter_new(&lim, cfg);
    rl_config_free(cfg);
    ck_assert_msg(rc == RL_OK, "rl_limiter_new: %s", rl_errmsg(NULL));
    return lim;
}

/* The slot of a client key's state (its hash tag is the client key). */
static inline unsigned slot_of(const char *client)
{
    return rh_key_slot(client, strlen(client));
}

/* "user:<n>" for the first n >= *from whose slot is `slot` (or, with slot
 * < 0, whose slot's master is node `node`). */
static inline void user_where(char *buf, size_t len, int *from, int slot,
                              int node)
{
    for (;; ++*from) {
        snprintf(buf, len, "user:%d", *from);
        unsigned s = slot_of(buf);
        if (slot >= 0 ? (int)s == slot
                      : rh_cluster_master_of(&cl, (int)s) == node) {
            ++*from;
            return;
        }
    }
}

static inline int first_master(int not)
{
    for (int i = 0; i < cl.n; i++)
        if (i != not && rh_cluster_is_master(&cl, i) == 1)
            return i;
    return -1;
}

static inline int check_one(rl_limiter *lim, const char *endpoint,
                            const char *user, rl_result *res)
{
    rl_request req = {.size = sizeof(rl_request), .endpoint = endpoint, .user = user + 5, .cost = 1};

    return rl_check(lim, &req, res);
}

/* Admissions of n checks of `user` on /one; degraded ones counted apart. */
static inline int admitted(rl_limiter *lim, const char *user, int n,
                           int *degraded)
{
    rl_result res = RL_RESULT_INIT;
    int ok = 0;

    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(check_one(lim, "/one", user, &res), RL_OK);
        if (res.flags & (RL_FLAG_FALLBACK | RL_FLAG_FAIL_OPEN |
                         RL_FLAG_FAIL_CLOSED))
            ++*degraded;
        else
            ok += res.allowed;
    }
    return ok;
}


#endif
