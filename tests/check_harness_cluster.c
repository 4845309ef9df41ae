/*
 * check_harness_cluster.c -- proof that the harness's Redis Cluster
 * (rh_cluster_*) does what the cluster store's tests lean on: a 3 + 3
 * cluster that starts settled, routes keys, hashes them as the server
 * does, and slots moved in steps (ASK, then MOVED), a failover onto a
 * replica, a node restarted empty with its identity.  Apart from
 * check_harness.c (a lone redis-server) because a cluster is its own
 * concern and takes seconds to start; harness_fixture.h is what both
 * share.  Exits 77 (skip) where redis-server or redis-cli cannot run.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness_fixture.h"
#include "redis_harness.h"
#include "timeutil.h"
#include "testutil.h"


#define NODE_TIMEOUT_MS 1000

static rh_cluster cluster;

static void cluster_up(void)
{
    ck_assert_msg(rh_cluster_start(&cluster, 3, 1, NODE_TIMEOUT_MS) == 0,
                  "rh_cluster_start: see stderr");
}

static void cluster_down(void)
{
    rh_cluster_stop(&cluster);
}

static redisContext *node_connect(const rh_cluster *c, int i)
{
    ck_assert_int_ge(i, 0);
    ck_assert_int_lt(i, c->n);
    return must_connect(&c->node[i]);
}

/* The reply r must be an error reading exactly `want`; frees it. */
static void expect_error(redisContext *c, redisReply *r, const char *want)
{
    ck_assert_msg(r != NULL, "no reply: %s", c->errstr);
    ck_assert_msg(r->type == REDIS_REPLY_ERROR, "type %d, not an error",
                  r->type);
    ck_assert_str_eq(r->str, want);
    freeReplyObject(r);
}

/* "MOVED slot 127.0.0.1:port" / "ASK ...", the redirections a node of c
 * answers with, pointing at node i. */
static const char *redirect(char *buf, size_t len, const char *kind,
                            unsigned slot, const rh_cluster *c, int i)
{
    snprintf(buf, len, "%s %u 127.0.0.1:%d", kind, slot, c->node[i].port);
    return buf;
}

/* A field of CLUSTER INFO on node i, as text, e.g. "cluster_state". */
static void expect_cluster_info(const rh_cluster *c, int i, const char *field,
                                const char *want)
{
    redisContext *ctx = node_connect(c, i);
    redisReply *r = redisCommand(ctx, "CLUSTER INFO");
    char line[128];

    ck_assert_msg(r != NULL && r->type == REDIS_REPLY_STRING,
                  "CLUSTER INFO on node %d", i);
    snprintf(line, sizeof line, "\n%s:%s\r\n", field, want);
    ck_assert_msg(strstr(r->str, line) != NULL ||
                      (strncmp(r->str, line + 1, strlen(line + 1)) == 0),
                  "node %d: want %s:%s in\n%s", i, field, want, r->str);
    freeReplyObject(r);
    redisFree(ctx);
}

static long long expect_integer(redisContext *c, redisReply *r)
{
    long long v;

    ck_assert_msg(r != NULL, "no reply: %s", c->errstr);
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "type %d %s", r->type,
                  r->type == REDIS_REPLY_ERROR ? r->str : "");
    v = r->integer;
    freeReplyObject(r);
    return v;
}

/* The index of a replica of master m (by ROLE), or -1. */
static int replica_of(const rh_cluster *c, int m)
{
    for (int i = 0; i < c->n; i++) {
        redisContext *ctx;
        redisReply *r;
        int mine;

        if (i == m || rh_cluster_is_master(c, i) != 0)
            continue;
        ctx = node_connect(c, i);
        r = redisCommand(ctx, "ROLE");
        ck_assert(r != NULL && r->type == REDIS_REPLY_ARRAY &&
                  r->elements >= 3);
        ck_assert_str_eq(r->element[0]->str, "slave");
        mine = r->element[2]->integer == c->node[m].port;
        freeReplyObject(r);
        redisFree(ctx);
        if (mine)
            return i;
    }
    return -1;
}

/* A master of c other than m. */
static int other_master(const rh_cluster *c, int m)
{
    for (int i = 0; i < c->n; i++)
        if (i != m && rh_cluster_is_master(c, i) == 1)
            return i;
    ck_abort_msg("no master but node %d", m);
    return -1;
}

START_TEST(cluster_starts_settled)
{
    int masters = 0, replicas = 0, served[RH_CLUSTER_MAX] = {0};

    ck_assert_int_eq(cluster.n, 6);
    for (int i = 0; i < cluster.n; i++) {
        redisContext *c = node_connect(&cluster, i);
        redisReply *r = redisCommand(c, "CLUSTER MYID");
        long long covered = 0;
        int role = rh_cluster_is_master(&cluster, i);

        ck_assert_int_ge(role, 0);
        masters += role == 1;
        replicas += role == 0;
        ck_assert_int_eq(strlen(cluster.id[i]), 40);
        ck_assert_int_eq(strspn(cluster.id[i], "0123456789abcdef"), 40);
        for (int j = 0; j < i; j++)
            ck_assert_str_ne(cluster.id[i], cluster.id[j]);
        ck_assert(r != NULL && r->type == REDIS_REPLY_STRING);
        ck_assert_str_eq(r->str, cluster.id[i]);
        freeReplyObject(r);

        /* Every node's CLUSTER SLOTS: all slots, 3 ranges or more, each
         * served by a master of ours with one replica of ours. */
        r = redisCommand(c, "CLUSTER SLOTS");
        ck_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
        ck_assert_int_ge(r->elements, 3);
        for (size_t k = 0; k < r->elements; k++) {
            redisReply *e = r->element[k];
            int m = -1;

            ck_assert_int_eq(e->elements, 4); /* from, to, master, replica */
            covered += e->element[1]->integer - e->element[0]->integer + 1;
            for (int j = 0; j < cluster.n; j++)
                if (cluster.node[j].port == e->element[2]->element[1]->integer)
                    m = j;
            ck_assert_int_ge(m, 0);
            ck_assert_int_eq(rh_cluster_is_master(&cluster, m), 1);
            ck_assert_int_eq(rh_cluster_master_of(&cluster,
                                                  (int)e->element[0]->integer),
                             m);
            ck_assert_int_eq(rh_cluster_master_of(&cluster,
                                                  (int)e->element[1]->integer),
                             m);
            served[m] = 1;
        }
        freeReplyObject(r);
        ck_assert_int_eq(covered, 16384);
        redisFree(c);

        expect_cluster_info(&cluster, i, "cluster_state", "ok");
        expect_cluster_info(&cluster, i, "cluster_slots_ok", "16384");
        expect_cluster_info(&cluster, i, "cluster_known_nodes", "6");
        expect_cluster_info(&cluster, i, "cluster_size", "3");
    }
    ck_assert_int_eq(masters, 3);
    ck_assert_int_eq(replicas, 3);
    for (int i = 0; i < cluster.n; i++) {
        ck_assert_int_eq(served[i], rh_cluster_is_master(&cluster, i));
        if (served[i])
            ck_assert_int_ge(replica_of(&cluster, i), 0);
    }
    ck_assert_int_eq(rh_cluster_master_of(&cluster, -1), -1);
    ck_assert_int_eq(rh_cluster_master_of(&cluster, 16384), -1);
    ck_assert_int_eq(rh_cluster_is_master(&cluster, cluster.n), -1);
    ck_assert_int_eq(rh_cluster_wait_ok(&cluster, 1000), 0);
}
END_TEST

START_TEST(cluster_routes_keys)
{
    const char *key = "harness:cluster:k";
    unsigned slot = rh_key_slot(key, strlen(key));
    int m = rh_cluster_master_of(&cluster, slot), o, rep;
    redisContext *c;
    char want[64];

    ck_assert_int_ge(m, 0);
    ck_assert_int_eq(rh_cluster_is_master(&cluster, m), 1);
    c = node_connect(&cluster, m);
    expect_status(c, redisCommand(c, "SET %s v1", key), "OK");
    expect_get(c, key, "v1");
    redisFree(c);

    /* Another master, and m's own replica, send the client to m. */
    o = other_master(&cluster, m);
    c = node_connect(&cluster, o);
    expect_error(c, redisCommand(c, "GET %s", key),
                 redirect(want, sizeof want, "MOVED", slot, &cluster, m));
    redisFree(c);
    ck_assert_int_ge(rep = replica_of(&cluster, m), 0);
    c = node_connect(&cluster, rep);
    expect_error(c, redisCommand(c, "GET %s", key),
                 redirect(want, sizeof want, "MOVED", slot, &cluster, m));
    /* ... unless it is asked to serve reads. */
    expect_status(c, redisCommand(c, "READONLY"), "OK");
    {
        long long t0 = now_ms();
        redisReply *r;

        do { /* replication is asynchronous */
            r = redisCommand(c, "GET %s", key);
            ck_assert(r != NULL);
            if (r->type == REDIS_REPLY_STRING)
                break;
            freeReplyObject(r);
            r = NULL;
            usleep(10000);
        } while (now_ms() - t0 < 2000);
        ck_assert_msg(r != NULL, "the replica never got the key");
        ck_assert_str_eq(r->str, "v1");
        freeReplyObject(r);
    }
    redisFree(c);
}
END_TEST

START_TEST(key_slot_matches_server)
{
#define KEY(s) {s, sizeof s - 1}
    static const struct {
        const char *k;
        size_t len;
    } keys[] = {
        KEY(""), KEY("a"), KEY("foo"), KEY("123456789"),
        KEY("harness:cluster:k"), KEY("{user:1}:a"), KEY("{user:1}:b"),
        KEY("user:1"), KEY("{}user:1"), KEY("{user:1"), KEY("x{}{user:1}"),
        KEY("a{b}c{d}"), KEY("{{a}}"), KEY("}{a}"), KEY("\xfe\xff{tag}"),
        KEY("a\0b"), KEY("{a\0b}c"),
    };
#undef KEY
    redisContext *c = node_connect(&cluster, 0);

    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        long long want = expect_integer(
            c, redisCommand(c, "CLUSTER KEYSLOT %b", keys[i].k, keys[i].len));

        ck_assert_msg(rh_key_slot(keys[i].k, keys[i].len) == want,
                      "key %zu \"%s\": slot %u, server says %lld", i,
                      keys[i].k, rh_key_slot(keys[i].k, keys[i].len), want);
    }
    redisFree(c);
    /* The CRC16 check value, and hash tags. */
    ck_assert_uint_eq(rh_key_slot("123456789", 9), 0x31C3 % 16384);
    ck_assert_uint_eq(rh_key_slot("{user:1}:a", 10), rh_key_slot("user:1", 6));
    ck_assert_uint_eq(rh_key_slot("{user:1}:a", 10),
                      rh_key_slot("{user:1}:b", 10));
    ck_assert_uint_ne(rh_key_slot("{}user:1", 8), rh_key_slot("user:1", 6));
    /* Binary keys: the length counts, not a NUL. */
    ck_assert_uint_ne(rh_key_slot("a\0b", 3), rh_key_slot("a", 1));
}
END_TEST

START_TEST(cluster_uri_lists_nodes)
{
    char want[256], buf[256];
    int n;

    n = snprintf(want, sizeof want, "redis-cluster://");
    for (int i = 0; i < cluster.n; i++)
        n += snprintf(want + n, sizeof want - (size_t)n, "%s127.0.0.1:%d",
                      i ? "," : "", cluster.node[i].port);
    ck_assert_str_eq(rh_cluster_uri(&cluster, 0, buf, sizeof buf), want);
    ck_assert_ptr_null(rh_cluster_uri(&cluster, 0, buf, strlen(want)));
    ck_assert_ptr_nonnull(rh_cluster_uri(&cluster, 0, buf, strlen(want) + 1));

    /* From node 2 on, wrapping: 2, 3, 4, 5, 0, 1. */
    n = snprintf(want, sizeof want, "redis-cluster://");
    for (int k = 0; k < cluster.n; k++)
        n += snprintf(want + n, sizeof want - (size_t)n, "%s127.0.0.1:%d",
                      k ? "," : "", cluster.node[(2 + k) % cluster.n].port);
    ck_assert_str_eq(rh_cluster_uri(&cluster, 2, buf, sizeof buf), want);
    ck_assert_ptr_null(rh_cluster_uri(&cluster, cluster.n, buf, sizeof buf));
    ck_assert_ptr_null(rh_cluster_uri(&cluster, -1, buf, sizeof buf));
    for (int i = 0; i < cluster.n; i++) {
        ck_assert_int_gt(cluster.node[i].port, 0);
        ck_assert_int_lt(cluster.node[i].port, 55535);
    }
}
END_TEST

/* ---- clusters of their own ---------------------------------------------- */

START_TEST(slot_migrates_ask_then_moved)
{
    const char *key = "{mig}:a", *key2 = "{mig}:b", *missing = "{mig}:none";
    unsigned slot = rh_key_slot(key, strlen(key));
    rh_cluster cl;
    redisContext *src, *dst;
    char want[64];
    int from, to;

    ck_assert_int_eq(rh_cluster_start(&cl, 3, 1, NODE_TIMEOUT_MS), 0);
    ck_assert_int_ge(from = rh_cluster_master_of(&cl, slot), 0);
    to = other_master(&cl, from);
    src = node_connect(&cl, from);
    dst = node_connect(&cl, to);
    expect_status(src, redisCommand(src, "SET %s va", key), "OK");
    expect_status(src, redisCommand(src, "SET %s vb", key2), "OK");
    ck_assert_int_eq(rh_cluster_migrate_keys(&cl, slot, 10), -1); /* not yet */

    /* Half-migrated: the source still serves the keys it has and sends
     * the client to the target, with ASK, for one it has not. */
    ck_assert_int_eq(rh_cluster_migrate_begin(&cl, slot, to), 0);
    ck_assert_int_eq(rh_cluster_master_of(&cl, slot), from);
    expect_error(src, redisCommand(src, "GET %s", missing),
                 redirect(want, sizeof want, "ASK", slot, &cl, to));
    expect_get(src, key, "va");
    /* The target redirects plain commands back to the source... */
    expect_error(dst, redisCommand(dst, "GET %s", key),
                 redirect(want, sizeof want, "MOVED", slot, &cl, from));
    /* ... and serves ASKING ones. */
    expect_status(dst, redisCommand(dst, "ASKING"), "OK");
    expect_get(dst, key, "(nil)");

    ck_assert_int_eq(rh_cluster_migrate_keys(&cl, slot, 1), 1);
    ck_assert_int_eq(rh_cluster_migrate_keys(&cl, slot, 10), 1);
    ck_assert_int_eq(rh_cluster_migrate_keys(&cl, slot, 10), 0);
    ck_assert_int_eq(expect_integer(src, redisCommand(src,
                         "CLUSTER COUNTKEYSINSLOT %u", slot)), 0);
    expect_error(src, redisCommand(src, "GET %s", key),
                 redirect(want, sizeof want, "ASK", slot, &cl, to));
    expect_status(dst, redisCommand(dst, "ASKING"), "OK");
    expect_get(dst, key, "va");

    /* Done: the source answers MOVED, the target serves the slot. */
    ck_assert_int_eq(rh_cluster_migrate_end(&cl, slot, to), 0);
    expect_error(src, redisCommand(src, "GET %s", key),
                 redirect(want, sizeof want, "MOVED", slot, &cl, to));
    expect_get(dst, key, "va");
    expect_get(dst, key2, "vb");
    ck_assert_int_eq(rh_cluster_master_of(&cl, slot), to);
    ck_assert_int_eq(rh_cluster_wait_ok(&cl, 5000), 0);
    for (int i = 0; i < cl.n; i++) { /* every node has heard, replicas too */
        redisContext *c = node_connect(&cl, i);

        if (i != to)
            expect_error(c, redisCommand(c, "GET %s", key),
                         redirect(want, sizeof want, "MOVED", slot, &cl, to));
        redisFree(c);
    }
    redisFree(src);
    redisFree(dst);
    ck_assert_int_eq(rh_cluster_stop(&cl), 0);
}
END_TEST

START_TEST(failover_promotes_replica)
{
    const char *key = "harness:failover";
    unsigned slot = rh_key_slot(key, strlen(key));
    rh_cluster cl;
    redisContext *c;
    long long t0, took;
    int m, rep, heir;

    ck_assert_int_eq(rh_cluster_start(&cl, 3, 1, NODE_TIMEOUT_MS), 0);
    ck_assert_int_ge(m = rh_cluster_master_of(&cl, slot), 0);
    ck_assert_int_ge(rep = replica_of(&cl, m), 0);
    c = node_connect(&cl, m);
    expect_status(c, redisCommand(c, "SET %s v", key), "OK");
    /* On the replica before the crash. */
    ck_assert_int_eq(expect_integer(c, redisCommand(c, "WAIT 1 1000")), 1);
    redisFree(c);
    ck_assert_int_eq(rh_cluster_failover_wait(&cl, rep, 1000), -1);

    t0 = now_ms();
    heir = rh_cluster_failover_wait(&cl, m, 10000);
    took = now_ms() - t0;
    ck_assert_int_eq(heir, rep);
    ck_assert_int_lt(took, 10000);
    ck_assert_int_eq(cl.node[m].pid, 0);
    ck_assert_int_eq(rh_cluster_is_master(&cl, m), -1);
    ck_assert_int_eq(rh_cluster_is_master(&cl, heir), 1);
    ck_assert_int_eq(rh_cluster_master_of(&cl, slot), heir);
    c = node_connect(&cl, heir);
    expect_get(c, key, "v");
    redisFree(c);
    for (int i = 0; i < cl.n; i++)
        if (i != m)
            expect_cluster_info(&cl, i, "cluster_state", "ok");

    /* Back after the failover, the old master is its heir's replica. */
    ck_assert_int_eq(rh_restart(&cl.node[m]), 0);
    ck_assert_int_eq(rh_cluster_wait_ok(&cl, 10000), 0);
    ck_assert_int_eq(rh_cluster_is_master(&cl, m), 0);
    ck_assert_int_eq(replica_of(&cl, heir), m);
    ck_assert_int_eq(rh_cluster_master_of(&cl, slot), heir);
    ck_assert_int_eq(rh_cluster_stop(&cl), 0);
}
END_TEST

START_TEST(restart_keeps_identity_empty)
{
    const char *key = "harness:restart";
    unsigned slot = rh_key_slot(key, strlen(key));
    rh_cluster cl;
    redisContext *c;
    redisReply *r;
    char sha[41];
    int m, rep, port;
    pid_t old;

    ck_assert_int_eq(rh_cluster_start(&cl, 3, 1, NODE_TIMEOUT_MS), 0);
    ck_assert_int_ge(m = rh_cluster_master_of(&cl, slot), 0);
    ck_assert_int_ge(rep = replica_of(&cl, m), 0);
    c = node_connect(&cl, m);
    expect_status(c, redisCommand(c, "SET %s v", key), "OK");
    r = redisCommand(c, "SCRIPT LOAD %s", "return 1");
    ck_assert(r != NULL && r->type == REDIS_REPLY_STRING && r->len == 40);
    memcpy(sha, r->str, 41);
    freeReplyObject(r);
    ck_assert_int_eq(expect_integer(c, redisCommand(c, "DBSIZE")), 1);
    redisFree(c);
    old = cl.node[m].pid;
    port = cl.node[m].port;

    ck_assert_int_eq(rh_restart(&cl.node[m]), 0);
    ck_assert_int_ne(cl.node[m].pid, old);
    ck_assert_int_eq(cl.node[m].port, port);
    c = node_connect(&cl, m);
    r = redisCommand(c, "CLUSTER MYID");
    ck_assert(r != NULL && r->type == REDIS_REPLY_STRING);
    ck_assert_str_eq(r->str, cl.id[m]);
    freeReplyObject(r);
    ck_assert_int_eq(expect_integer(c, redisCommand(c, "DBSIZE")), 0);
    r = redisCommand(c, "SCRIPT EXISTS %s", sha);
    ck_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    ck_assert_int_eq(r->element[0]->integer, 0);
    freeReplyObject(r);
    redisFree(c);

    /* Still the master of its slots, empty, its replica emptied too. */
    ck_assert_int_eq(rh_cluster_wait_ok(&cl, 10000), 0);
    ck_assert_int_eq(rh_cluster_is_master(&cl, m), 1);
    ck_assert_int_eq(rh_cluster_master_of(&cl, slot), m);
    ck_assert_int_eq(replica_of(&cl, m), rep);
    c = node_connect(&cl, m);
    expect_get(c, key, "(nil)");
    redisFree(c);
    c = node_connect(&cl, rep);
    ck_assert_int_eq(expect_integer(c, redisCommand(c, "DBSIZE")), 0);
    redisFree(c);

    /* A replica restarted keeps its identity and its master. */
    ck_assert_int_eq(rh_restart(&cl.node[rep]), 0);
    c = node_connect(&cl, rep);
    r = redisCommand(c, "CLUSTER MYID");
    ck_assert(r != NULL && r->type == REDIS_REPLY_STRING);
    ck_assert_str_eq(r->str, cl.id[rep]);
    freeReplyObject(r);
    redisFree(c);
    ck_assert_int_eq(rh_cluster_wait_ok(&cl, 10000), 0);
    ck_assert_int_eq(replica_of(&cl, m), rep);
    ck_assert_int_eq(rh_cluster_stop(&cl), 0);
    ck_assert(port_refuses(port));
}
END_TEST

int main(void)
{
    Suite *su = suite_create("harness_cluster");
    TCase *cl = tcase_create("cluster");
    TCase *clown = tcase_create("cluster_own");

    if (!rh_available() || !rh_cluster_available()) {
        fprintf(stderr, "check_harness_cluster: SKIP: redis-server or "
                        "redis-cli cannot be run here (see above)\n");
        return 77;
    }
    /* A cluster starts in ~3 s; a failover takes ~2 s more. */
    tcase_add_unchecked_fixture(cl, cluster_up, cluster_down);
    tcase_add_test(cl, cluster_starts_settled);
    tcase_add_test(cl, cluster_routes_keys);
    tcase_add_test(cl, key_slot_matches_server);
    tcase_add_test(cl, cluster_uri_lists_nodes);
    tcase_add_test(clown, slot_migrates_ask_then_moved);
    tcase_add_test(clown, failover_promotes_replica);
    tcase_add_test(clown, restart_keeps_identity_empty);
    tcase_set_timeout(cl, 30);
    tcase_set_timeout(clown, 30);
    suite_add_tcase(su, cl);
    suite_add_tcase(su, clown);
    return run_suite(su);
}
