/*
 * harness_fixture.h -- what the two suites of the Redis test harness share
 * (check_harness.c: a lone redis-server; check_harness_cluster.c: a Redis
 * Cluster): a connection that must succeed, the checks of a status reply
 * and of a GET, and whether a port refuses connections (what a stopped or
 * crashed server looks like to a client).
 */
#ifndef RL_TESTS_HARNESS_FIXTURE_H
#define RL_TESTS_HARNESS_FIXTURE_H

#include <check.h>
#include <sys/time.h>

#include "redis_harness.h"

static inline redisContext *must_connect(const rh_server *s)
{
    redisContext *c = rh_connect(s);

    ck_assert_msg(c != NULL, "rh_connect to port %d failed", s->port);
    return c;
}

/* The reply r to a command on c must be the status `want`; frees it.
 * (The command is written at the call, where its format is checked.) */
static inline void expect_status(redisContext *c, redisReply *r,
                                 const char *want)
{
    ck_assert_msg(r != NULL, "no reply: %s", c->errstr);
    ck_assert_msg(r->type == REDIS_REPLY_STATUS, "type %d %s", r->type,
                  r->type == REDIS_REPLY_ERROR ? r->str : "");
    ck_assert_str_eq(r->str, want);
    freeReplyObject(r);
}

/* GET key: its value, "(nil)" when unset. */
static inline void expect_get(redisContext *c, const char *key,
                              const char *want)
{
    redisReply *r = redisCommand(c, "GET %s", key);

    ck_assert_msg(r != NULL, "GET: %s", c->errstr);
    if (r->type == REDIS_REPLY_NIL)
        ck_assert_str_eq("(nil)", want);
    else
        ck_assert_str_eq(r->str, want);
    freeReplyObject(r);
}

/* Is anything listening on the port?  A refusal is what a stopped or
 * crashed server looks like to a client. */
static inline int port_refuses(int port)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    int refused = c == NULL || c->err != 0;

    redisFree(c);
    return refused;
}


#endif
